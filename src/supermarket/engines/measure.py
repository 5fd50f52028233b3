"""State layout and per-event measurement steps shared by the engines' kernels.

The profile, queues and buckets kernels keep the same small state arrays and measure the
same time averages (docs/model.md §2 measurements, §5 good set); the steps they have in common
are written once here as small numba functions.  See :mod:`.profile` for what the arrays
hold:

``pi`` (int64): ``[n, d, replace, k, continuous, full_table, rec_levels]`` (``k = 0``: no
good set);  ``pf`` (float64): ``[p_arrival, rate, rec_every]``;  ``si`` (int64):
``[top, total customers, violated clauses, records written]``;  ``sf`` (float64):
``[now, t_next, top_since, good_since, good_time, next_record]``.

Fast loops keep ``top, total, viol, now, t_next, top_since, good_since, good_time`` in
local variables (:func:`state_load` / :func:`state_store`); general loops read and write
``si``/``sf`` directly (:func:`set_level`, :func:`set_top`, :func:`record_until`).

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

HALF_WIN = 1024
WIN = 2 * HALF_WIN
LW = 32  # levels with a window table

# indices into the small state arrays
I_N, I_D, I_REP, I_K, I_CONT, I_FULL, I_RL = 0, 1, 2, 3, 4, 5, 6
F_PARR, F_RATE, F_REC = 0, 1, 2
S_TOP, S_TOTAL, S_VIOL, S_NREC = 0, 1, 2, 3
T_NOW, T_NEXT, T_TOPSINCE, T_GOODSINCE, T_GOODTIME, T_NEXTREC = 0, 1, 2, 3, 4, 5

STATUS_DONE, STATUS_EVENTS, STATUS_GROW, STATUS_RECFULL = 0, 1, 2, 3
_ST_RECORD, _ST_WINDOW, _ST_GENERAL = 4, 5, 6  # internal: why the fast path returned
_GO_ON = -1  # internal: no reason to stop


# ----------------------------------------------------------------- one level changes
@njit(cache=True, inline="always")
def close_level(j, old, pold, new, now, c, stamp, area_c, area_P):
    """Set ``c[j] = new`` at time ``now``, first closing the lazy time integrals of level
    index ``j`` (``area_c[j] = ∫ c_{j+1} dt``, ``area_P[j] = ∫ P_{j+1} dt``; ``old`` and
    ``pold`` are the count and ``P`` before the change)."""
    dt = now - stamp[j]
    area_c[j] += old * dt
    area_P[j] += pold * dt
    stamp[j] = now
    c[j] = new


@njit(cache=True, inline="always")
def clause_bad(j, k, cj, n, lo_j, hi_j):
    """1 if clause ``j <= k`` of the good set ``N^ε`` (docs/model.md §5) fails with ``c[j] = cj``:
    (b) ``lo_j <= n − c_{j+1} <= hi_j`` for ``j < k`` (float bounds, or their integer
    ceiling/floor), (a) ``c_{k+1} = 0`` for ``j = k`` (the bounds are then ignored)."""
    if j < k:
        sh = n - cj
        return np.int64(sh < lo_j) | np.int64(sh > hi_j)
    return np.int64(cj > 0)


@njit(cache=True, inline="always")
def good_flip(bad, now, viol, good_since, good_time):
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
def good_step(j, k, new, n, lo_j, hi_j, was_bad, now, viol, good_since, good_time):
    """Clause ``j <= k`` after ``c[j]`` became ``new`` (:func:`clause_bad`; ``was_bad``:
    whether it failed before).  Returns ``(bad, viol, good_since, good_time)``.  Scalars
    only: helpers that take arrays and branch cost reference counting in a hot loop."""
    bad = clause_bad(j, k, new, n, lo_j, hi_j)
    if bad != was_bad:
        viol, good_since, good_time = good_flip(bad, now, viol, good_since, good_time)
    return bad, viol, good_since, good_time


@njit(cache=True)
def change_level(j, new, pold, now, c, stamp, area_c, area_P, k, n, lo, hi, gbad, viol, good_since, good_time):
    """Set ``c[j] = new`` at time ``now``: close the lazy integrals of level index ``j``
    (``pold`` = P at the old count) and update good-set membership (docs/model.md §5; ``k = 0``:
    no good set; ``lo``/``hi``: the ``k`` float bounds of clause (b)).  Returns the updated
    ``(viol, good_since, good_time)``."""
    close_level(j, c[j], pold, new, now, c, stamp, area_c, area_P)
    if k > 0 and j <= k:
        b = min(j, k - 1)
        bad, viol, good_since, good_time = good_step(j, k, new, n, lo[b], hi[b], gbad[j], now, viol, good_since,
                                                     good_time)
        gbad[j] = bad
    return viol, good_since, good_time


@njit(cache=True, inline="always")
def window_edge(x, base, n):
    """Whether count ``x`` sits on the edge of a window of ``WIN`` values starting at
    ``base`` (a step of one could leave it) where the window could still move."""
    off = x - base
    return (off < 1 and base > 0) or (off > WIN - 2 and base + WIN - 1 < n)


@njit(cache=True, inline="always")
def close_top(maxtime, top, top_since, now):
    """The maximum queue length leaves ``top`` at time ``now``: add the time since
    ``top_since`` to ``maxtime[top]``.  Returns ``now`` (the new ``top_since``)."""
    maxtime[top] += now - top_since
    return now


# ----------------------------------------------------------------- fast-loop state
@njit(cache=True, inline="always")
def state_load(si, sf):
    """``(top, total, viol, now, t_next, top_since, good_since, good_time)`` from ``si``/``sf``."""
    return (si[S_TOP], si[S_TOTAL], si[S_VIOL], sf[T_NOW], sf[T_NEXT], sf[T_TOPSINCE], sf[T_GOODSINCE],
            sf[T_GOODTIME])


@njit(cache=True, inline="always")
def state_store(si, sf, top, total, viol, now, t_next, top_since, good_since, good_time):
    """Write the local copies of :func:`state_load` back."""
    si[S_TOP] = top
    si[S_TOTAL] = total
    si[S_VIOL] = viol
    sf[T_NOW] = now
    sf[T_NEXT] = t_next
    sf[T_TOPSINCE] = top_since
    sf[T_GOODSINCE] = good_since
    sf[T_GOODTIME] = good_time


@njit(cache=True, inline="always")
def fast_gate(events, max_events, top, L, windowed, recording, next_rec, t_next, t_stop):
    """Why a fast loop must stop before its next event (a status), or ``_GO_ON``."""
    if events >= max_events:
        return STATUS_EVENTS
    if top + 2 > L:
        return STATUS_GROW
    if windowed and top >= LW - 1:
        return _ST_GENERAL
    if recording and next_rec < (t_next if t_next <= t_stop else t_stop):
        return _ST_RECORD
    if t_next > t_stop:
        return STATUS_DONE
    return _GO_ON


@njit(cache=True)
def fast_tables(c, tab, win, winbase, pi):
    """``(tabf, tbase, tstride, windowed)``: P at level index ``j`` and count ``x`` is
    ``tabf[j*tstride + x − tbase[j]]`` (the full table with ``tstride = 0``, or the windows)."""
    full = pi[I_FULL] != 0
    if full:
        return tab, np.zeros(c.shape[0], np.int64), 0, False
    return win.reshape(-1), winbase, WIN, True


@njit(cache=True)
def clause_ints(lo, hi, k):
    """Integer bounds of clause (b): ``lo <= shorter <= hi  <=>  ceil(lo) <= shorter <= floor(hi)``
    (``k + 1`` entries, so that index ``k`` (clause (a), no bounds) can be read: it holds 0)."""
    loi = np.zeros(k + 1, np.int64)
    hii = np.zeros(k + 1, np.int64)
    for j in range(k):
        loi[j] = np.int64(math.ceil(lo[j]))
        hii[j] = np.int64(math.floor(hi[j]))
    return loi, hii


# ----------------------------------------------------------------- general loops (si/sf in place)
@njit(cache=True)
def set_level(j, new, pold, now, c, stamp, area_c, area_P, pi, lo, hi, gbad, si, sf):
    """:func:`change_level` on the state arrays (its body again: a call costs here)."""
    close_level(j, c[j], pold, new, now, c, stamp, area_c, area_P)
    k = pi[I_K]
    if k > 0 and j <= k:
        b = min(j, k - 1)
        bad, si[S_VIOL], sf[T_GOODSINCE], sf[T_GOODTIME] = good_step(j, k, new, pi[I_N], lo[b], hi[b], gbad[j], now,
                                                                      si[S_VIOL], sf[T_GOODSINCE], sf[T_GOODTIME])
        gbad[j] = bad


@njit(cache=True)
def set_top(newtop, now, maxtime, si, sf):
    """The maximum queue length becomes ``newtop`` at time ``now``."""
    sf[T_TOPSINCE] = close_top(maxtime, si[S_TOP], sf[T_TOPSINCE], now)
    si[S_TOP] = newtop


@njit(cache=True)
def record_until(t_until, c, rec_t, rec_c, rec_max, rec_tot, pf, pi, si, sf):
    """Write the current state at every grid point ``< t_until``; False if the buffer is full."""
    every = pf[F_REC]
    if every <= 0.0:
        return True
    nxt = sf[T_NEXTREC]
    if nxt >= t_until:
        return True
    nrec = si[S_NREC]
    # count exactly (floating point): the grid points in [nxt, t_until)
    cnt = 0
    t = nxt
    while t < t_until:
        cnt += 1
        t = nxt + cnt * every
    if nrec + cnt > rec_t.shape[0]:
        return False
    rl = pi[I_RL]
    top = si[S_TOP]
    tot = si[S_TOTAL]
    for r in range(cnt):
        rec_t[nrec] = nxt + r * every
        for j in range(rl):
            rec_c[nrec, j] = c[j]
        rec_max[nrec] = top
        rec_tot[nrec] = tot
        nrec += 1
    si[S_NREC] = nrec
    sf[T_NEXTREC] = nxt + cnt * every
    return True


@njit(cache=True)
def chunk_gate(left, c, rec_t, rec_c, rec_max, rec_tot, pf, pi, si, sf, t_stop):
    """Before a chunk of events in a kernel's driver loop: write the records due before the
    next event; return the status to stop with, or ``_GO_ON``."""
    if left <= 0:
        return STATUS_EVENTS
    if si[S_TOP] + 2 > c.shape[0]:
        return STATUS_GROW
    t_next = sf[T_NEXT]
    t_until = t_next if t_next <= t_stop else t_stop
    if pf[F_REC] > 0.0 and sf[T_NEXTREC] < t_until:
        if not record_until(t_until, c, rec_t, rec_c, rec_max, rec_tot, pf, pi, si, sf):
            return STATUS_RECFULL
    if t_next > t_stop:
        sf[T_NOW] = t_stop
        return STATUS_DONE
    return _GO_ON


@njit(cache=True, inline="always")
def is_final(st):
    """Whether a chunk's status ends the kernel call (the horizon, level capacity, a full
    record buffer); otherwise the driver loop goes on."""
    return st == STATUS_DONE or st == STATUS_GROW or st == STATUS_RECFULL
