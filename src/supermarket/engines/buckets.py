"""Per-queue state with O(1) work per event (docs/model.md §2, "buckets").

Queues are kept in an array ``perm`` sorted by length, longest first: position ``p``
(0-based) holds a queue of length ``#{i : c_i > p}``, so the queues of length exactly ``ℓ``
occupy the block of positions ``[c_{ℓ+1}, c_ℓ)`` (with ``c_0 = n``).  One step:

- arrival: the joined length ``ℓ`` is drawn from the profile as in :mod:`.profile`
  (``P(ℓ ≥ i) = P_i``); by exchangeability the joined queue is uniform among the queues of
  length ``ℓ`` (docs/model.md §2): a uniform position of the block, swapped to the block's first
  position, which then joins the block of length ``ℓ + 1`` (``c_{ℓ+1} += 1``);
- potential departure: a uniform position ``K``; its queue has length ``ℓ = #{i : c_i > K}``;
  if ``ℓ ≥ 1`` it is swapped to the last position of its block and ``c_ℓ −= 1``.

Dispatch rules (``setup.policy``; docs/model.md §2, "Other dispatch rules"): the joined
length is drawn from the rule's ``P`` as above (random routing computes ``P = c/n`` in the
hot loop; JIQ joins a uniform idle queue while there is one, in a loop of its own while two
or more are idle, and closes every level's ``∫ P_i`` when ``1{c_1 = n}`` changes; JBT(T = d)
runs the general loop, its ``P_i`` evaluated from the profile (:func:`.tables.jbt_p`), and
closes the ``∫ P_i`` that read ``c_T`` when ``c_T`` changes, as :mod:`.profile` does).

Memory: one int32 queue identity per server (4 bytes per server).  ``perm`` says which
queue has which length at every moment, so per-queue questions (a tagged queue, final
lengths per server) are answered at the speed of the profile chain.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .layout import (
    GO_ON,
    ST_GENERAL,
    ST_RECORD,
    ST_WINDOW,
    STATUS_DONE,
    STATUS_EVENTS,
    STATUS_GROW,
    Measures,
    Records,
    Setup,
    Tables,
)
from .measure import (
    chunk_gate,
    close_level,
    close_top,
    fast_gate,
    general_gate,
    good_ints,
    good_step,
    is_final,
    load_clock,
    next_event_time,
    set_level,
    set_top,
    store_clock,
)
from .profile import jbt_close_levels, jiq_close_levels
from .rng import next_below, next_double
from .tables import (
    BAD_RULE,
    JBT,
    JIQ,
    LW,
    RANDOM,
    counts_rule,
    flat_tables,
    get_p,
    jbt_p,
    refresh_windows,
    window_edge,
)

__all__ = ["buckets_kernel", "lengths_by_queue", "MAX_N"]

MAX_N = 2**31 - 1


@njit(cache=True, inline="always")
def _swap(perm, a, b):
    """Exchange the queues at positions ``a`` and ``b``."""
    q = perm[a]
    perm[a] = perm[b]
    perm[b] = q


@njit(cache=True, nogil=True)
def _buckets_general(perm, c, s, tables, meas, recs, setup, clock, t_stop, max_events):
    """The bucket chain for any state (used by :func:`buckets_kernel` off the fast path)."""
    n = setup.n
    p_arr = setup.p_arrival
    jiq = setup.policy == JIQ
    jbt = setup.policy == JBT
    d = setup.d
    st = clock[0]
    events = 0
    while True:
        status = general_gate(recs, setup, clock, c, events, max_events, t_stop)
        if status != GO_ON:
            break
        top = st.top
        now = st.now
        unif = next_double(s)
        if unif < p_arr:
            U = unif / p_arr
            j = 0
            pj = 0.0
            if jiq and c[0] < n:
                # JIQ with an idle queue: join a uniform idle queue (P_1 = 0)
                if c[0] + 1 == n:
                    jiq_close_levels(tables, setup, meas, c, top, False, now)
            elif jbt:
                # JBT: P_i from the profile (it reads c_T); the joined queue is uniform in its block
                while j < top:
                    pj = jbt_p(c, j, n, d)
                    if pj <= U:
                        break
                    j += 1
                if j == d - 1:
                    jbt_close_levels(setup, meas, c, top, c[j], c[j] + 1, now)
            else:
                while j < top:
                    pj = get_p(tables, setup, j, c[j])
                    if pj <= U:
                        break
                    j += 1
            # block of length-j queues: positions [c[j], c[j-1]) with c[-1] := n
            first = c[j]
            end = n if j == 0 else c[j - 1]
            p = first + next_below(s, end - first)
            _swap(perm, p, first)
            if j == top:
                pj = 0.0
                set_top(clock, meas.maxtime, top + 1, now)
            set_level(meas, setup, clock, c, j, first + 1, pj, now)
            st.total += 1
        else:
            K = next_below(s, n)
            j = 0
            while j < top and c[j] > K:
                j += 1
            if j > 0:
                lv = j - 1
                old = c[lv]
                last = old - 1
                _swap(perm, K, last)
                if jbt:
                    pold = jbt_p(c, lv, n, d)
                    if lv == d - 1:
                        jbt_close_levels(setup, meas, c, top, old, old - 1, now)
                else:
                    pold = get_p(tables, setup, lv, old)
                if jiq and c[0] < n:
                    pold = 0.0
                if jiq and lv == 0 and old == n:
                    jiq_close_levels(tables, setup, meas, c, top, True, now)
                set_level(meas, setup, clock, c, lv, old - 1, pold, now)
                if old == 1:
                    set_top(clock, meas.maxtime, lv, now)
                st.total -= 1
        st.t_next = next_event_time(s, setup, now)
        events += 1
    return events, status


@njit(cache=True, nogil=True)
def _buckets_fast(perm, c, s, flat, bounds, meas, setup, clock, t_stop, max_events):
    """Hot loop of the bucket chain (same structure as ``profile._profile_fast``).

    DELIBERATE COPY, for speed, of the prologue and per-event bookkeeping that
    ``queues._queues_fast`` repeats too (local copies of the state, lazy integrals, good
    set, window edge, next time); a shared helper halves the speed (measured: see there)."""
    tabf, tbase, tstride, windowed = flat
    lo_int, hi_int = bounds
    stamp, area_c, area_P, maxtime, gbad = meas.stamp, meas.area_c, meas.area_P, meas.maxtime, meas.good_bad
    n = setup.n
    fn = float(n)
    ratio = setup.policy == RANDOM  # P = c/n computed (tables.p_rule), no table: any number of levels
    k = setup.k if setup.k > 0 else -1
    cont = setup.continuous
    p_arr = setup.p_arrival
    inv_p = 1.0 / p_arr
    inv_rate = 1.0 / setup.rate
    L = c.shape[0]
    recording = clock[0].rec_every > 0.0
    next_rec = clock[0].next_rec
    top, total, viol, now, t_next, top_since, good_since, good_time = load_clock(clock)
    events = 0
    while True:
        status = fast_gate(events, max_events, top, L, windowed, recording, next_rec, t_next, t_stop)
        if status != GO_ON:
            if status == STATUS_DONE:
                now = t_stop
            break
        now = t_next
        unif = next_double(s)
        if unif < p_arr:
            U = unif * inv_p
            j = 0
            if ratio:
                for i in range(top):
                    j += np.int64(float(c[i]) / fn > U)
            else:
                for i in range(top):
                    j += np.int64(tabf[i * tstride + c[i] - tbase[i]] > U)
            old = c[j]
            end = n if j == 0 else c[j - 1]
            p = old + next_below(s, end - old)
            _swap(perm, p, old)
            if j < top:
                pold = float(old) / fn if ratio else tabf[j * tstride + old - tbase[j]]
            else:
                pold = 0.0
                top_since = close_top(maxtime, top, top_since, now)
                top += 1
                if windowed:
                    status = ST_WINDOW
            new = old + 1
            total += 1
        else:
            K = next_below(s, n)
            ell = 0
            for i in range(top):
                ell += np.int64(c[i] > K)
            if ell == 0:
                t_next = now + (1.0 if not cont else -math.log(1.0 - next_double(s)) * inv_rate)
                events += 1
                continue
            j = ell - 1
            old = c[j]
            last = old - 1
            _swap(perm, K, last)
            pold = float(old) / fn if ratio else tabf[j * tstride + old - tbase[j]]
            new = old - 1
            total -= 1
            if new == 0:
                top_since = close_top(maxtime, top, top_since, now)
                top = j
        close_level(j, old, pold, new, now, c, stamp, area_c, area_P)
        if j <= k:
            gbad[j], viol, good_since, good_time = good_step(
                j, k, new, n, lo_int[j], hi_int[j], gbad[j], now, viol, good_since, good_time
            )
        if windowed and window_edge(new, tbase[j], n):
            status = ST_WINDOW
        t_next = now + (1.0 if not cont else -math.log(1.0 - next_double(s)) * inv_rate)
        events += 1
        if status == ST_WINDOW:
            break
    store_clock(clock, top, total, viol, now, t_next, top_since, good_since, good_time)
    return events, status


@njit(cache=True, nogil=True)
def _buckets_jiq_idle(perm, c, s, meas, setup, clock, t_stop, max_events):
    """JIQ while at least two queues are idle (``c_1 <= n − 2``), as ``profile._profile_jiq_idle``:
    every ``P_i`` is 0, an arrival joins a uniform idle queue.  The same random numbers as
    :func:`_buckets_general`; returns (status ``ST_GENERAL``) when ``c_1`` reaches ``n − 1``,
    for a record, level capacity or the horizon; needs ``setup.k == 0`` (no good set)."""
    stamp, area_c, area_P, maxtime = meas.stamp, meas.area_c, meas.area_P, meas.maxtime
    n = setup.n
    p_arr = setup.p_arrival
    L = c.shape[0]
    recording = clock[0].rec_every > 0.0
    next_rec = clock[0].next_rec
    top, total, viol, now, t_next, top_since, good_since, good_time = load_clock(clock)
    events = 0
    status = STATUS_DONE
    while True:
        if events >= max_events:
            status = STATUS_EVENTS
            break
        if top + 2 > L:
            status = STATUS_GROW
            break
        if c[0] >= n - 1:
            status = ST_GENERAL
            break
        if recording and next_rec < (t_next if t_next <= t_stop else t_stop):
            status = ST_RECORD
            break
        if t_next > t_stop:
            now = t_stop
            status = STATUS_DONE
            break
        now = t_next
        unif = next_double(s)
        if unif < p_arr:
            # a uniform idle queue (positions [c_1, n)) joins level 1
            first = c[0]
            p = first + next_below(s, n - first)
            _swap(perm, p, first)
            if top == 0:
                top_since = close_top(maxtime, top, top_since, now)
                top = 1
            close_level(0, first, 0.0, first + 1, now, c, stamp, area_c, area_P)
            total += 1
        else:
            K = next_below(s, n)
            j = 0
            while j < top and c[j] > K:
                j += 1
            if j > 0:
                lv = j - 1
                old = c[lv]
                _swap(perm, K, old - 1)
                close_level(lv, old, 0.0, old - 1, now, c, stamp, area_c, area_P)
                if old == 1:
                    top_since = close_top(maxtime, top, top_since, now)
                    top = lv
                total -= 1
        t_next = next_event_time(s, setup, now)
        events += 1
    store_clock(clock, top, total, viol, now, t_next, top_since, good_since, good_time)
    return events, status


@njit(cache=True, nogil=True)
def buckets_kernel(
    perm: np.ndarray,
    c: np.ndarray,
    s: np.ndarray,
    tables: Tables,
    meas: Measures,
    recs: Records,
    setup: Setup,
    clock: np.ndarray,
    t_stop: float,
    max_events: int,
) -> tuple[int, int]:
    """Run the bucket chain until ``t_stop`` or ``max_events`` events (arguments and return
    value as :func:`.profile.profile_kernel`; ``perm`` = queue identities by position).
    DELIBERATE COPY of :func:`.profile.profile_kernel`'s driver loop, like
    :func:`.queues.queues_kernel` (why: see there)."""
    if not counts_rule(setup.policy):  # an unknown code: refused before any event, never run as another rule
        return 0, BAD_RULE
    flat = flat_tables(tables, setup, c.shape[0])
    if setup.policy == RANDOM:  # P = c/n computed in the hot loop: no windows, any number of levels
        flat = (flat[0], np.zeros(c.shape[0], np.int64), 0, False)
    bounds = good_ints(meas, setup.k)
    events = 0
    while True:
        status = chunk_gate(recs, setup, clock, c, max_events - events, t_stop)
        if status != GO_ON:
            return events, status
        if setup.policy == JIQ and setup.k == 0 and c[0] < setup.n - 1:
            ev, status = _buckets_jiq_idle(perm, c, s, meas, setup, clock, t_stop, max_events - events)
        elif (flat[3] and clock[0].top >= LW - 1) or setup.policy == JIQ or setup.policy == JBT:
            ev, status = _buckets_general(
                perm, c, s, tables, meas, recs, setup, clock, t_stop, min(max_events - events, 4096)
            )
        else:
            if flat[3]:
                refresh_windows(tables, setup, c, clock[0].top)
            ev, status = _buckets_fast(perm, c, s, flat, bounds, meas, setup, clock, t_stop, max_events - events)
        events += ev
        if is_final(status):
            return events, status


def lengths_by_queue(perm: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Queue-lengths vector indexed by queue identity from the sorted arrangement."""
    n = perm.shape[0]
    out = np.zeros(n, dtype=np.int32)  # 4 bytes per server, like the engine's own arrays
    for i, ci in enumerate(counts, start=1):
        out[perm[:ci]] = i  # the ci longest positions have length >= i
    return out
