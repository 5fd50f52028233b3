"""A start of the event kernel (:mod:`.events`) with customers in the queues (docs/model.md §14).

Given each server's length ``x[j]`` and the phase ``phase[j]`` of the customer in service,
:func:`start_works` draws, server by server (``j = 0, 1, …``), the in-service customer's
remaining work, then the full works of the ``x[j] - 1`` customers waiting behind it, and writes
their departures as the kernel would have on their arrivals (Lindley at time 0: the first leaves
at its remaining work over the speed, each next one a work over the speed after the one ahead).
The remaining work of a customer in phase ``j`` of a phase-type law ``PH(α, T)`` is ``PH(e_j,
T)`` (the phases ahead of it are a Markov chain); with ``code`` exponential it is a fresh
exponential (memoryless), drawn as :func:`.service.sample_service` draws one.

:func:`place_departures` then puts the departures where the kernel keeps them: a node at the
head of its bucket's list when it lies in the window, else the far-future heap (the kernel's own
test, with the front at bucket ``it[I_CUR]``).  The caller sizes the node pool and the heap first.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .departures import _push
from .events import F_INVW, I_CUR, I_FREE, I_HSIZE
from .service import _EXP, _exp1, residual_work, sample_service

__all__ = ["start_works", "place_departures", "residual_work"]


@njit(cache=True)
def start_works(
    x: np.ndarray,
    phase: np.ndarray,
    bound: np.ndarray,
    speed: np.ndarray,
    s: np.ndarray,
    code: int,
    svc_par: np.ndarray,
    svc_tab: np.ndarray,
    res_tab: np.ndarray,
    lastdep: np.ndarray,
    dep_t: np.ndarray,
    dep_j: np.ndarray,
) -> int:
    """Draw the works of the customers of ``x`` (module docstring) and write their departures
    into ``dep_t`` (time) and ``dep_j`` (server, as a float) and each server's last departure into
    ``lastdep``; returns the number of departures (``x.sum()``)."""
    n = x.shape[0]
    K = bound.shape[0]
    k = 0
    m = 0
    for j in range(n):
        while k < K - 1 and j >= bound[k]:
            k += 1
        if x[j] == 0:
            continue
        if code == _EXP:
            work = _exp1(s)
        else:
            work = residual_work(s, res_tab, phase[j])
        dep = work / speed[k]
        dep_t[m] = dep
        dep_j[m] = j
        m += 1
        for _ in range(x[j] - 1):
            dep = dep + sample_service(s, code, svc_par, svc_tab) / speed[k]
            dep_t[m] = dep
            dep_j[m] = j
            m += 1
        lastdep[j] = dep
    return m


@njit(cache=True)
def place_departures(
    dep_t: np.ndarray,
    dep_j: np.ndarray,
    count: int,
    ht: np.ndarray,
    cal: np.ndarray,
    qt: np.ndarray,
    qn: np.ndarray,
    fl: np.ndarray,
    it: np.ndarray,
) -> None:
    """Put the first ``count`` departures into the window or the far heap as the kernel does on
    an arrival (module docstring); the pool and the heap must have room for them."""
    nb = cal.shape[0]
    mask = nb - 1
    invw = fl[F_INVW]
    cur = it[I_CUR]
    hsize = it[I_HSIZE]
    free = it[I_FREE]
    for i in range(count):
        dep = dep_t[i]
        qd = dep * invw
        if qd < cur + nb:
            b = int(qd)
            node = free
            free = qn[node]
            qt[node, 0] = dep
            qt[node, 1] = dep_j[i]
            qn[node] = cal[b & mask]
            cal[b & mask] = node
        else:
            _push(ht, hsize, dep, dep_j[i])
            hsize += 1
    it[I_HSIZE] = hsize
    it[I_FREE] = free
