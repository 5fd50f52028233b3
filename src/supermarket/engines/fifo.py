"""A per-queue FIFO simulator that follows every customer (docs/model.md §10): a check of the
response-time laws that shares nothing with the profile engines.

Continuous time.  Arrivals are Poisson at rate ``nλ``; each samples ``d`` queues (with
replacement: i.i.d. uniform; without: a uniformly random ordered sample of distinct queues,
by a partial Fisher–Yates shuffle) and joins the first one of least length.  Each customer
brings its own exponential(1) service requirement, drawn on arrival; service is FIFO, so the
customer leaves at ``max(arrival, departure of the customer ahead) + service`` (Lindley).
Each queue keeps the departure times of the customers it holds in a ring buffer; the next
event is the earlier of the next arrival and the earliest head-of-line departure (a scan over
the ``n`` queues: this engine is for small ``n``).

Recorded for each customer who arrives after ``t_meas``: its sojourn time, its waiting time
and the length of the queue it joined; and, over the same time window, the integrals of
``P_i`` (the probability that all ``d`` samples hold at least ``i`` customers, a function of
the count ``c_i`` through ``tab``) and of the counts ``c_i``.

Layout: ``ring`` (n x cap departure times), ``head``/``qlen`` (per queue), ``c`` and the two
areas (levels 0..cap+1), ``s`` (xoshiro state), ``perm`` (scratch for sampling without
replacement), ``pi = [n, d, replace]``, ``sf = [now, next arrival, t_meas, arrival rate,
measured time]``, ``si = [customers recorded]``.  Returns a status: :data:`DONE` (the output
arrays are full), :data:`GROW` (a queue would exceed ``cap``: grow the arrays and call again;
nothing of the pending arrival has been consumed) or :data:`EVENTS` (``max_events`` reached).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .layout import I64
from .rng import next_below, next_double

__all__ = ["fifo_kernel", "DONE", "GROW", "EVENTS", "S_NOW", "S_NEXT", "S_TMEAS", "S_RATE", "S_MEASURED"]

DONE = 0
GROW = 1
EVENTS = 2

S_NOW, S_NEXT, S_TMEAS, S_RATE, S_MEASURED = 0, 1, 2, 3, 4


@njit(cache=True)
def _exp1(s):
    return -math.log(1.0 - next_double(s))


@njit(cache=True)
def fifo_kernel(
    ring: np.ndarray,
    head: np.ndarray,
    qlen: np.ndarray,
    c: np.ndarray,
    area_P: np.ndarray,
    area_c: np.ndarray,
    tab: np.ndarray,
    s: np.ndarray,
    perm: np.ndarray,
    pi: np.ndarray,
    sf: np.ndarray,
    si: np.ndarray,
    soj: np.ndarray,
    wai: np.ndarray,
    jl: np.ndarray,
    max_events: int,
) -> int:
    n = pi[0]
    d = pi[1]
    rep = pi[2] != 0
    cap = ring.shape[1]
    out_cap = soj.shape[0]
    rate = sf[S_RATE]
    t_meas = sf[S_TMEAS]
    events = 0
    while True:
        if si[0] >= out_cap:
            return DONE
        if events >= max_events:
            return EVENTS
        now = sf[S_NOW]
        ta = sf[S_NEXT]
        # earliest head-of-line departure
        qd = -1
        td = math.inf
        q: I64  # a queue index (range() or next_below())
        for q in range(n):
            if qlen[q] > 0:
                t = ring[q, head[q]]
                if t < td:
                    td = t
                    qd = q
        t_ev = ta if ta <= td else td
        # time integrals over [max(now, t_meas), t_ev]
        if t_ev > t_meas:
            lo = now if now > t_meas else t_meas
            dt = t_ev - lo
            if dt > 0.0:
                i = 1
                while i < c.shape[0] and c[i] > 0:
                    area_P[i] += tab[c[i]] * dt
                    area_c[i] += c[i] * dt
                    i += 1
                sf[S_MEASURED] += dt
        if ta <= td:
            # arrival: choose the queue first (the draws are consumed only if it fits)
            best: I64 = -1
            if rep:
                for _ in range(d):
                    q = next_below(s, n)
                    if best < 0 or qlen[q] < qlen[best]:
                        best = q
            else:
                for j in range(d):
                    k = j + next_below(s, n - j)
                    tmp = perm[j]
                    perm[j] = perm[k]
                    perm[k] = tmp
                    q = perm[j]
                    if best < 0 or qlen[q] < qlen[best]:
                        best = q
            ell = qlen[best]
            if ell >= cap:
                # undo nothing: the sampled tuple is redrawn after growing, which changes the
                # stream but not the law; the time integrals are already up to t_ev, so
                # move the clock there to avoid counting them twice
                sf[S_NOW] = t_ev
                return GROW
            start = ta
            if ell > 0:
                last = ring[best, (head[best] + ell - 1) % cap]
                if last > start:
                    start = last
            dep = start + _exp1(s)
            ring[best, (head[best] + ell) % cap] = dep
            qlen[best] = ell + 1
            c[ell + 1] += 1
            if ta >= t_meas:
                m = si[0]
                soj[m] = dep - ta
                wai[m] = start - ta
                jl[m] = ell
                si[0] = m + 1
            sf[S_NOW] = ta
            sf[S_NEXT] = ta + _exp1(s) / rate
        else:
            ell = qlen[qd]
            c[ell] -= 1
            head[qd] = (head[qd] + 1) % cap
            qlen[qd] = ell - 1
            sf[S_NOW] = td
        events += 1
