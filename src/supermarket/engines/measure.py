"""Per-event measurement steps shared by the engines' kernels (docs/model.md §2
measurements, §5 good set), over the structures of :mod:`.layout`.

Fast loops keep ``top, total, viol, now, t_next, top_since, good_since, good_time`` in
local variables (:func:`load_clock` / :func:`store_clock`); general loops read and write
the clock record directly (:func:`set_level`, :func:`set_top`, :func:`record_until`).

Speed (measured): the helpers used inside the per-event loops are ``inline="always"`` and
either take only scalars or, if they take arrays, have no branches (:func:`close_level`,
:func:`close_top`).  An inlined helper that takes arrays and branches leaves reference
counting in the loop (the hot loops ran at half speed), and a plain call with array
arguments costs about as much again; so branches over arrays stay in the loops
themselves, and per-event work in the general loops is not moved behind extra calls.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .layout import (
    GO_ON,
    I64,
    ST_GENERAL,
    ST_RECORD,
    STATUS_DONE,
    STATUS_EVENTS,
    STATUS_GROW,
    STATUS_RECFULL,
    Measures,
    Records,
    Setup,
    Tables,
)
from .rng import next_double
from .tables import JBT, JIQ, LW, get_p, jbt_p

__all__ = [
    "close_level",
    "clause_bad",
    "good_flip",
    "good_step",
    "change_level",
    "close_top",
    "load_clock",
    "store_clock",
    "fast_gate",
    "good_ints",
    "set_level",
    "set_top",
    "record_until",
    "chunk_gate",
    "is_final",
    "flush",
    "reset_measures",
    "general_gate",
    "next_event_time",
]


# ----------------------------------------------------------------- one level changes
@njit(cache=True, inline="always")
def close_level(
    j: int,
    old: int,
    pold: float,
    new: int,
    now: float,
    c: np.ndarray,
    stamp: np.ndarray,
    area_c: np.ndarray,
    area_P: np.ndarray,
) -> None:
    """Set ``c[j] = new`` at time ``now``, first closing the lazy time integrals of level
    index ``j`` (``area_c[j] = ∫ c_{j+1} dt``, ``area_P[j] = ∫ P_{j+1} dt``; ``old`` and
    ``pold`` are the count and ``P`` before the change)."""
    dt = now - stamp[j]
    area_c[j] += old * dt
    area_P[j] += pold * dt
    stamp[j] = now
    c[j] = new


@njit(cache=True, inline="always")
def clause_bad(j: int, k: int, cj: int, n: int, lo_j: float, hi_j: float) -> I64:
    """1 if clause ``j <= k`` of the good set ``N^ε`` (docs/model.md §5) fails with ``c[j] = cj``:
    (b) ``lo_j <= n − c_{j+1} <= hi_j`` for ``j < k`` (float bounds, or their integer
    ceiling/floor), (a) ``c_{k+1} = 0`` for ``j = k`` (the bounds are then ignored)."""
    if j < k:
        sh = n - cj
        return np.int64(sh < lo_j) | np.int64(sh > hi_j)
    return np.int64(cj > 0)


@njit(cache=True, inline="always")
def good_flip(bad: I64, now: float, viol: I64, good_since: float, good_time: float) -> tuple[I64, float, float]:
    """A good-set clause has just started to fail (``bad = 1``) or to hold (``0``): update
    the count ``viol`` of failed clauses and the time spent in the good set (all clauses
    hold).  Returns the updated ``(viol, good_since, good_time)``."""
    if viol == 0:
        good_time += now - good_since
    viol += 2 * bad - 1
    if viol == 0:
        good_since = now
    return viol, good_since, good_time


@njit(cache=True, inline="always")
def good_step(
    j: int,
    k: int,
    new: int,
    n: int,
    lo_j: float,
    hi_j: float,
    was_bad: I64,
    now: float,
    viol: I64,
    good_since: float,
    good_time: float,
) -> tuple[I64, I64, float, float]:
    """Clause ``j <= k`` after ``c[j]`` became ``new`` (:func:`clause_bad`; ``was_bad``:
    whether it failed before).  Returns ``(bad, viol, good_since, good_time)``.  Scalars
    only: helpers that take arrays and branch cost reference counting in a hot loop."""
    bad = clause_bad(j, k, new, n, lo_j, hi_j)
    if bad != was_bad:
        viol, good_since, good_time = good_flip(bad, now, viol, good_since, good_time)
    return bad, viol, good_since, good_time


@njit(cache=True)
def change_level(
    meas: Measures,
    setup: Setup,
    c: np.ndarray,
    j: int,
    new: int,
    pold: float,
    now: float,
    viol: I64,
    good_since: float,
    good_time: float,
) -> tuple[I64, float, float]:
    """Set ``c[j] = new`` at time ``now``: close the lazy integrals of level index ``j``
    (``pold`` = P at the old count) and update good-set membership (docs/model.md §5).
    Returns the updated ``(viol, good_since, good_time)``."""
    close_level(j, c[j], pold, new, now, c, meas.stamp, meas.area_c, meas.area_P)
    k = setup.k
    if k > 0 and j <= k:
        b = min(j, k - 1)
        bad, viol, good_since, good_time = good_step(
            j, k, new, setup.n, meas.good_lo[b], meas.good_hi[b], meas.good_bad[j], now, viol, good_since, good_time
        )
        meas.good_bad[j] = bad
    return viol, good_since, good_time


@njit(cache=True, inline="always")
def close_top(maxtime: np.ndarray, top: int, top_since: float, now: float) -> float:
    """The maximum queue length leaves ``top`` at time ``now``: add the time since
    ``top_since`` to ``maxtime[top]``.  Returns ``now`` (the new ``top_since``)."""
    maxtime[top] += now - top_since
    return now


# ----------------------------------------------------------------- fast-loop state
@njit(cache=True, inline="always")
def load_clock(clock: np.ndarray) -> tuple[int, int, int, float, float, float, float, float]:
    """``(top, total, viol, now, t_next, top_since, good_since, good_time)`` from the clock."""
    st = clock[0]
    return st.top, st.total, st.viol, st.now, st.t_next, st.top_since, st.good_since, st.good_time


@njit(cache=True, inline="always")
def store_clock(
    clock: np.ndarray,
    top: int,
    total: int,
    viol: int,
    now: float,
    t_next: float,
    top_since: float,
    good_since: float,
    good_time: float,
) -> None:
    """Write the local copies of :func:`load_clock` back."""
    st = clock[0]
    st.top = top
    st.total = total
    st.viol = viol
    st.now = now
    st.t_next = t_next
    st.top_since = top_since
    st.good_since = good_since
    st.good_time = good_time


@njit(cache=True, inline="always")
def fast_gate(
    events: int,
    max_events: int,
    top: int,
    L: int,
    windowed: bool,
    recording: bool,
    next_rec: float,
    t_next: float,
    t_stop: float,
) -> int:
    """Why a fast loop must stop before its next event (a status), or ``GO_ON``."""
    if events >= max_events:
        return STATUS_EVENTS
    if top + 2 > L:
        return STATUS_GROW
    if windowed and top >= LW - 1:
        return ST_GENERAL
    if recording and next_rec < (t_next if t_next <= t_stop else t_stop):
        return ST_RECORD
    if t_next > t_stop:
        return STATUS_DONE
    return GO_ON


@njit(cache=True)
def good_ints(meas: Measures, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer bounds of clause (b): ``lo <= shorter <= hi  <=>  ceil(lo) <= shorter <= floor(hi)``
    (``k + 1`` entries, so that index ``k`` (clause (a), no bounds) can be read: it holds 0)."""
    lo_int = np.zeros(k + 1, np.int64)
    hi_int = np.zeros(k + 1, np.int64)
    for j in range(k):
        lo_int[j] = np.int64(math.ceil(meas.good_lo[j]))
        hi_int[j] = np.int64(math.floor(meas.good_hi[j]))
    return lo_int, hi_int


# ----------------------------------------------------------------- general loops (clock in place)
@njit(cache=True)
def set_level(
    meas: Measures, setup: Setup, clock: np.ndarray, c: np.ndarray, j: int, new: int, pold: float, now: float
) -> None:
    """:func:`change_level` on the clock record."""
    st = clock[0]
    st.viol, st.good_since, st.good_time = change_level(
        meas, setup, c, j, new, pold, now, st.viol, st.good_since, st.good_time
    )


@njit(cache=True)
def set_top(clock: np.ndarray, maxtime: np.ndarray, newtop: int, now: float) -> None:
    """The maximum queue length becomes ``newtop`` at time ``now``."""
    st = clock[0]
    st.top_since = close_top(maxtime, st.top, st.top_since, now)
    st.top = newtop


@njit(cache=True)
def record_until(recs: Records, setup: Setup, clock: np.ndarray, c: np.ndarray, t_until: float) -> bool:
    """Write the current state at every grid point ``< t_until``; False if the buffer is full."""
    st = clock[0]
    every = st.rec_every
    if every <= 0.0:
        return True
    nxt = st.next_rec
    if nxt >= t_until:
        return True
    nrec = st.nrec
    # count exactly (floating point): the grid points in [nxt, t_until)
    cnt = 0
    t = nxt
    while t < t_until:
        cnt += 1
        t = nxt + cnt * every
    if nrec + cnt > recs.t.shape[0]:
        return False
    for r in range(cnt):
        recs.t[nrec] = nxt + r * every
        for j in range(setup.rec_levels):
            recs.c[nrec, j] = c[j]
        recs.max[nrec] = st.top
        recs.total[nrec] = st.total
        nrec += 1
    st.nrec = nrec
    st.next_rec = nxt + cnt * every
    return True


@njit(cache=True)
def chunk_gate(recs: Records, setup: Setup, clock: np.ndarray, c: np.ndarray, left: int, t_stop: float) -> int:
    """Before a chunk of events in a kernel's driver loop: write the records due before the
    next event; return the status to stop with, or ``GO_ON``."""
    st = clock[0]
    if left <= 0:
        return STATUS_EVENTS
    if st.top + 2 > c.shape[0]:
        return STATUS_GROW
    t_next = st.t_next
    t_until = t_next if t_next <= t_stop else t_stop
    if st.rec_every > 0.0 and st.next_rec < t_until and not record_until(recs, setup, clock, c, t_until):
        return STATUS_RECFULL
    if t_next > t_stop:
        st.now = t_stop
        return STATUS_DONE
    return GO_ON


@njit(cache=True)
def general_gate(
    recs: Records, setup: Setup, clock: np.ndarray, c: np.ndarray, events: int, max_events: int, t_stop: float
) -> int:
    """Before each event of a general loop that keeps its state in the clock (queues,
    buckets): write the records due, set ``now`` to the next event time and return
    ``GO_ON``, or return the status to stop with (``now = t_stop`` at the horizon)."""
    st = clock[0]
    if events >= max_events:
        return STATUS_EVENTS
    if st.top + 2 > c.shape[0]:
        return STATUS_GROW
    t_next = st.t_next
    recording = st.rec_every > 0.0
    if t_next > t_stop:
        if recording and not record_until(recs, setup, clock, c, t_stop):
            return STATUS_RECFULL
        st.now = t_stop
        return STATUS_DONE
    if recording and not record_until(recs, setup, clock, c, t_next):
        return STATUS_RECFULL
    st.now = t_next
    return GO_ON


@njit(cache=True)
def next_event_time(s: np.ndarray, setup: Setup, now: float) -> float:
    """The time of the event after ``now``: ``now + 1`` (discrete time) or ``now`` plus an
    exponential holding time of rate ``n(1+λ)`` (docs/model.md §1)."""
    if setup.continuous:
        v = 1.0 - next_double(s)
        return now - math.log(v) / setup.rate
    return now + 1.0


@njit(cache=True, inline="always")
def is_final(status: int) -> bool:
    """Whether a chunk's status ends the kernel call (the horizon, level capacity, a full
    record buffer); otherwise the driver loop goes on."""
    return status in (STATUS_DONE, STATUS_GROW, STATUS_RECFULL)


# ----------------------------------------------------------------- start and read the measurements
@njit(cache=True)
def flush(c: np.ndarray, tables: Tables, meas: Measures, setup: Setup, clock: np.ndarray) -> None:
    """Close every lazy time integral at the current time (call before reading them)."""
    st = clock[0]
    now = st.now
    stamp = meas.stamp
    idle = setup.policy == JIQ and c[0] < setup.n  # JIQ: P_i = 1{c_1 = n}·c_i/n (tables.p_rule)
    jbt = setup.policy == JBT  # JBT: P_i reads c_T too, no table (tables.jbt_p)
    for j in range(c.shape[0]):
        cj = c[j]
        if cj > 0:
            if jbt:
                p = jbt_p(c, j, setup.n, setup.d)
            else:
                p = 0.0 if idle else get_p(tables, setup, j, cj)
            close_level(j, cj, p, cj, now, c, stamp, meas.area_c, meas.area_P)
        stamp[j] = now
    st.top_since = close_top(meas.maxtime, st.top, st.top_since, now)
    if setup.k > 0 and st.viol == 0:
        st.good_time += now - st.good_since
        st.good_since = now


@njit(cache=True)
def reset_measures(c: np.ndarray, meas: Measures, setup: Setup, clock: np.ndarray) -> None:
    """Start measuring now: zero the integrals, recompute ``top``, the total and good-set
    membership."""
    st = clock[0]
    now = st.now
    for j in range(c.shape[0]):
        meas.stamp[j] = now
        meas.area_c[j] = 0.0
        meas.area_P[j] = 0.0
    meas.maxtime[:] = 0.0
    top = 0
    tot = 0
    for j in range(c.shape[0]):
        if c[j] > 0:
            top = j + 1
            tot += c[j]
    st.top = top
    st.total = tot
    st.top_since = now
    st.good_time = 0.0
    st.good_since = now
    k = setup.k
    v: I64 = 0
    if k > 0:
        for j in range(k + 1):
            b = min(j, k - 1)
            bad = clause_bad(j, k, c[j] if j < c.shape[0] else 0, setup.n, meas.good_lo[b], meas.good_hi[b])
            meas.good_bad[j] = bad
            v += bad
    st.viol = v
