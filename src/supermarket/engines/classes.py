"""The count (profile) chain with server classes, exponential service (docs/model.md §15).

State: per class ``k`` and level ``i``, ``c[k, i]`` = the number of class-``k`` servers with at
least ``i`` customers (``c[k, 0] = n_k``), and the totals ``C[i] = Σ_k c[k, i]``; ``top`` = the
highest occupied level.  The model is the event engine's (:mod:`.events`, docs/model.md §14):
arrivals at rate ``nλ s̄`` (``s̄ = Σ_k f_k s_k``), the dispatch rule looks at queue lengths only
and picks a uniform server among the tied candidates, and a class-``k`` server serves at rate
``s_k``.  Because every rule is symmetric in the servers, the joined length ``ℓ`` has the law
of the one-class chain (``P(ℓ >= i) = P_i`` of :func:`.tables.p_rule`, a function of ``C``) and,
given ``ℓ``, the joined server is uniform among the servers of length exactly ``ℓ``: its class
is ``k`` with probability ``(c[k, ℓ] − c[k, ℓ+1])/(C[ℓ] − C[ℓ+1])``.

One step of the chain uniformized at rate ``n s̄ (1 + λ)`` (exact, docs/model.md §1): one
53-bit uniform decides the kind of event and its level:

- arrival, probability ``λ/(1+λ)``: ``ℓ = #{i >= 1 : U < P_i}`` (``jsq-d``, ``P_i`` kept per
  level and recomputed when ``C[i]`` changes; ``jbt``, ``P_i`` of :func:`.tables.jbt_p` kept per
  level, recomputed when ``C[i]`` changes and at every level when ``C_T`` does, ``T = d``),
  ``#{i >= 1 : C[i] > nU}`` (``random``; ``jiq`` when no server is idle, else ``ℓ = 0``) or
  ``#{i >= 1 : C[i] = n}`` (``jsq``); a second uniform picks the class (none with one class);
- potential departure: a uniform unit of capacity ``y ∈ [0, n s̄)``; class ``k`` where
  ``y`` falls among the cumulative capacities ``Σ_{k' <= k} n_k' s_k'``, then a uniform
  class-``k`` server, ``ℓ = #{i >= 1 : c[k, i] > z}``; if ``ℓ >= 1`` it loses a customer.

Time is the event count (the uniformized chain's jump chain; one event is ``1/(n s̄ (1+λ))``
units of time on average): time averages of the jump chain are those of the continuous-time
chain.  Measurements: ``area[k, i] = Σ over events of c[k, i]`` (int64, exact), brought up to
date lazily when the count changes (``stamp``) and by :func:`close_areas`; ``joined[k, ℓ]``,
the arrivals that joined a class-``k`` server of length ``ℓ`` (by PASTA, the law a customer
joins; docs/model.md §15.9), counted without a draw.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .layout import I64
from .rng import step_double
from .tables import BAD_RULE, JBT, JIQ, JSQ, JSQ_D, RANDOM, jbt_p, p_rule

__all__ = ["classes_kernel", "close_areas", "new_state", "start_state", "grow", "DONE", "GROW", "BAD_RULE"]

DONE, GROW = 0, 1


@njit(cache=True, inline="always")
def _p(pol: int, C: int, n: int, d: int, rep: bool) -> float:
    if pol == JSQ_D and rep and d <= 8:  # (C/n)^d by multiplication: exact to a few ulps, cheaper than exp/log
        x = float(C) / float(n)
        p = x
        for _ in range(d - 1):
            p *= x
        return p
    if pol == JSQ_D and d <= 8:  # C(C, d)/C(n, d) as a product of d ratios (exact to a few ulps)
        if C < d:
            return 0.0
        p = 1.0
        for r in range(d):
            p *= float(C - r) / float(n - r)
        return p
    return p_rule(pol, C, n, d, rep)


@njit(cache=True, inline="always")
def _jbt_refresh(C: np.ndarray, pc: np.ndarray, j: I64, top: I64, n: int, d: int) -> None:
    """JBT(T = d): ``P_i`` after ``C[j]`` changed, ``top`` the highest level that may be occupied.
    ``P_i`` reads ``C_T`` too (:func:`.tables.jbt_p`): a change at ``j = T`` renews every level
    up to ``top`` (those above hold no server: ``P = 0``), any other change level ``j`` only."""
    if j == d:
        for i in range(1, top + 1):
            pc[i] = jbt_p(C[1:], i - 1, n, d)
    else:
        pc[j] = jbt_p(C[1:], int(j) - 1, n, d)


@njit(cache=True, nogil=True)
def classes_kernel(
    c: np.ndarray,
    C: np.ndarray,
    pc: np.ndarray,
    area: np.ndarray,
    stamp: np.ndarray,
    joined: np.ndarray,
    s: np.ndarray,
    cfg: np.ndarray,
    caps: np.ndarray,
    inv_s: np.ndarray,
    p_arr: float,
    state: np.ndarray,
    max_events: int,
) -> int:
    """Run ``max_events`` events (:data:`DONE`) or stop early when a queue reaches the last
    level kept (:data:`GROW`: grow the arrays with :func:`grow`, nothing drawn).
    ``cfg = [n, d, replace, policy]``; ``caps[k] = Σ_{k' <= k} n_k' s_k'``; ``inv_s = 1/s``;
    ``p_arr = λ/(1+λ)``; ``state = [top, events]`` (the clock); ``joined[k, ℓ]`` (int64, the shape
    of ``c``) counts the arrivals that join a class-``k`` server of length ``ℓ`` (no draw)."""
    n = cfg[0]
    d = cfg[1]
    rep = cfg[2] != 0
    pol = cfg[3]
    K = c.shape[0]
    L = c.shape[1]
    inv_p = 1.0 / p_arr
    dscale = caps[K - 1] / (1.0 - p_arr)
    fn = float(n)
    top = state[0]
    ev = state[1]
    end = ev + max_events
    r0, r1, r2, r3 = s[0], s[1], s[2], s[3]
    status = DONE
    while ev < end:
        if top + 2 > L:
            status = GROW
            break
        unif, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
        if unif < p_arr:
            U = unif * inv_p
            ell = np.int64(0)
            if pol == JSQ_D or pol == JBT:  # noqa: SIM109 (numba: plain comparisons); P_i kept per level (JBT: also when C_T changes)
                for i in range(1, top + 1):
                    ell += np.int64(pc[i] > U)
            elif pol == JSQ:
                for i in range(1, top + 1):
                    ell += np.int64(C[i] >= n)
            elif pol == RANDOM or (pol == JIQ and C[1] >= n):  # random, or JIQ with no idle server: a uniform server
                yi = np.int64(U * fn)
                for i in range(1, top + 1):
                    ell += np.int64(C[i] > yi)
            elif pol != JIQ:  # (JIQ with an idle server joins length 0); an unknown code: refused
                status = BAD_RULE
                break
            k = 0
            if K > 1:
                v, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
                vi = np.int64(v * float(C[ell] - C[ell + 1]))
                acc = c[0, ell] - c[0, ell + 1]
                while vi >= acc and k < K - 1:
                    k += 1
                    acc += c[k, ell] - c[k, ell + 1]
            joined[k, ell] += 1  # what this arrival joins: its sojourn is Erlang(ℓ + 1) at rate s_k (§15.9)
            j = ell + 1
            area[k, j] += c[k, j] * (ev - stamp[k, j])
            stamp[k, j] = ev
            c[k, j] += 1
            C[j] += 1
            if pol == JSQ_D:
                pc[j] = _p(pol, C[j], n, d, rep)
            if j > top:
                top = j
            if pol == JBT:
                _jbt_refresh(C, pc, j, top, n, d)
        else:
            y = (unif - p_arr) * dscale
            k = 0
            while k < K - 1 and y >= caps[k]:
                k += 1
            z = (y - caps[k - 1]) * inv_s[k] if k > 0 else y * inv_s[k]
            zi = np.int64(z)
            if zi >= c[k, 0]:  # rounding at the top of the class's range
                zi = c[k, 0] - 1
            ell = np.int64(0)
            for i in range(1, top + 1):
                ell += np.int64(c[k, i] > zi)
            if ell > 0:
                area[k, ell] += c[k, ell] * (ev - stamp[k, ell])
                stamp[k, ell] = ev
                c[k, ell] -= 1
                C[ell] -= 1
                if pol == JSQ_D:
                    pc[ell] = _p(pol, C[ell], n, d, rep)
                elif pol == JBT:
                    _jbt_refresh(C, pc, ell, top, n, d)
                while top > 0 and C[top] == 0:
                    top -= 1
        ev += 1
    s[0], s[1], s[2], s[3] = r0, r1, r2, r3
    state[0] = top
    state[1] = ev
    return status


@njit(cache=True)
def close_areas(c: np.ndarray, area: np.ndarray, stamp: np.ndarray, ev: int) -> None:
    """Bring every level's sum up to event ``ev``."""
    K, L = c.shape
    for k in range(K):
        for i in range(L):
            area[k, i] += c[k, i] * (ev - stamp[k, i])
            stamp[k, i] = ev


def new_state(class_counts: np.ndarray, levels: int = 32) -> dict[str, np.ndarray]:
    """Arrays of an empty system (``levels`` levels above 0; grown on demand)."""
    counts = np.asarray(class_counts, dtype=np.int64)
    K = counts.size
    L = int(levels) + 1
    c = np.zeros((K, L), np.int64)
    c[:, 0] = counts
    C = np.zeros(L, np.int64)
    C[0] = counts.sum()
    pc = np.zeros(L)
    pc[0] = 1.0
    return {
        "c": c,
        "C": C,
        "pc": pc,
        "area": np.zeros((K, L), np.int64),
        "stamp": np.zeros((K, L), np.int64),
        "joined": np.zeros((K, L), np.int64),
    }


def start_state(c0: np.ndarray, cfg: np.ndarray) -> tuple[dict[str, np.ndarray], int]:
    """The arrays of a system that starts from the counts ``c0[k, i]`` (``c0[k, 0] = n_k``,
    non-increasing along each row) for the rule and sizes of ``cfg = [n, d, replace, policy]``,
    with the top occupied level: ``(arrays, top)``; ``P_i`` of ``jsq-d`` as the kernel computes it."""
    c0 = np.asarray(c0, dtype=np.int64)
    L0 = c0.shape[1]
    a = new_state(c0[:, 0], levels=max(32, L0 + 1))
    a["c"][:, :L0] = c0
    a["C"][:] = a["c"].sum(axis=0)
    n, d, rep, pol = int(cfg[0]), int(cfg[1]), bool(cfg[2]), int(cfg[3])
    if pol == JSQ_D:
        for i in range(1, L0):
            a["pc"][i] = _p(pol, int(a["C"][i]), n, d, rep)
    elif pol == JBT:
        for i in range(1, L0):
            a["pc"][i] = jbt_p(a["C"][1:], i - 1, n, d)
    top = int(np.max(np.nonzero(a["C"][1:])[0], initial=-1)) + 1
    return a, top


def grow(a: dict[str, np.ndarray], ev: int) -> None:
    """Double the levels kept, in place; the new levels empty with their stamps at ``ev``."""
    K, L = a["c"].shape
    a["c"] = np.hstack([a["c"], np.zeros((K, L), np.int64)])
    a["C"] = np.concatenate([a["C"], np.zeros(L, np.int64)])
    a["pc"] = np.concatenate([a["pc"], np.zeros(L)])
    a["area"] = np.hstack([a["area"], np.zeros((K, L), np.int64)])
    a["stamp"] = np.hstack([a["stamp"], np.full((K, L), ev, np.int64)])
    a["joined"] = np.hstack([a["joined"], np.zeros((K, L), np.int64)])
