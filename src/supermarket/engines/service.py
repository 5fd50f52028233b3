"""The compiled samplers of the service laws (docs/model.md §14): one work requirement of mean 1
(:func:`sample_service`) for each law family of :data:`supermarket.system.service.FAMILIES`, by
its code, from the xoshiro256** state ``s`` (:mod:`.rng`); the event kernel (:mod:`.events`)
draws every customer's work here.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .rng import next_double, next_normal

__all__ = ["sample_service", "residual_work"]

# service-law codes: the same as supermarket.system.service (engines import nothing above them)
_EXP, _ERLANG, _HYPEREXP, _PH, _LOGNORMAL, _PARETO, _DETERMINISTIC = range(7)


@njit(cache=True, inline="always")
def _exp1(s):
    return -math.log(1.0 - next_double(s))


@njit(cache=True, inline="always")
def residual_work(s: np.ndarray, tab: np.ndarray, phase: int) -> float:
    """The time to absorption of the phase-type chain of ``tab``
    (:meth:`supermarket.system.service.ServiceLaw.ph_table`) from ``phase``: ``PH(e_phase, T)``
    (a full work when ``phase`` is drawn from ``α``, :func:`sample_service`; the remaining work
    of a customer in service in that phase, :mod:`.event_start`)."""
    m = tab.shape[0] - 1
    ph = phase
    t = 0.0
    while True:
        t += _exp1(s) / tab[ph + 1, 0]
        u = next_double(s)
        nxt = -1
        for j in range(m):
            if u < tab[ph + 1, 1 + j]:
                nxt = j
                break
        if nxt < 0:
            return t
        ph = nxt


@njit(cache=True)
def sample_service(s: np.ndarray, code: int, par: np.ndarray, tab: np.ndarray) -> float:
    """One work requirement of mean 1.  ``par``: exp —; erlang ``[K]``; hyperexp ``[p, r1,
    r2]``; ph — (``tab`` from :meth:`supermarket.system.service.ServiceLaw.ph_table`); lognormal
    ``[μ, σ]``; pareto ``[α, scale]``; deterministic —."""
    if code == _EXP:
        return _exp1(s)
    if code == _LOGNORMAL:
        return math.exp(par[0] + par[1] * next_normal(s))
    if code == _HYPEREXP:
        if next_double(s) < par[0]:
            return _exp1(s) / par[1]
        return _exp1(s) / par[2]
    if code == _ERLANG:
        k = int(par[0])
        acc = 1.0
        tot = 0.0
        for _ in range(k):
            acc *= 1.0 - next_double(s)
            if acc < 1e-280:
                tot += math.log(acc)
                acc = 1.0
        return -(tot + math.log(acc)) / par[0]
    if code == _PARETO:
        return par[1] * (1.0 - next_double(s)) ** (-1.0 / par[0])
    if code == _DETERMINISTIC:
        return 1.0
    # phase type: walk the phases until absorption
    m = tab.shape[0] - 1
    u = next_double(s)
    ph = 0
    while ph < m - 1 and u >= tab[0, ph]:
        ph += 1
    return residual_work(s, tab, ph)
