"""The per-queue chain exactly as paper 000 defines it (docs/model.md §1): the reference engine.

State: ``x`` (int32, one entry per server, <= 4 bytes per server) plus the counts
``c_i = #{j : x(j) >= i}`` kept alongside for the measurements (shared with
:mod:`.profile`).  One step:

- arrival (probability ``λ/(1+λ)``): a d-tuple ``(K_1, …, K_d)`` of servers, drawn with
  replacement (i.i.d. uniform) or without (a uniformly random ordered sample of ``d``
  distinct servers); the customer joins ``K_j`` for the least ``j`` with ``x(K_j)``
  minimal.  Without replacement the set is drawn by Floyd's algorithm (a bit set of ``n``
  bits marks chosen servers) and the first minimal entry of a uniformly ordered tuple is
  taken as a uniform choice among the tied minimal entries (reservoir sampling): the same
  law, in ``O(d)`` work;
- potential departure: ``K`` uniform; if ``x(K) > 0`` it decreases by 1.

Work per arrival is ``O(d)``.  Indices are exactly uniform (Lemire's method), so this
engine is exact for ``n < 2^31``.

The other dispatch rules (``setup.policy``, docs/model.md §2 "Other dispatch rules") run in a
loop of their own, :func:`_queues_rules` (the JSQ(d) loops above are left as they are, so its
random stream is unchanged).  Each is the rule's definition on the queue lengths:

- random: the queue ``below(n)`` (one uniform server, JSQ(1));
- JSQ: a uniform queue among the shortest of all ``n``; JIQ: a uniform idle queue while one is
  idle (``c_1 < n``), else ``below(n)``; JBT (``T = d``): a uniform queue among those shorter
  than ``T`` while one is (``c_T < n``), else ``below(n)``.  Each is "the ``r``-th queue (in index
  order) shorter than ``m``", ``r = below(n − c_m)``, with ``m`` the shortest length plus one
  (JSQ, read off the counts: the levels with ``c_i = n``), 1 (JIQ) or ``T`` (JBT): one random
  number and an ``O(n)`` scan per arrival when fewer than :data:`REJECT_MIN` queues qualify,
  otherwise uniform queues ``below(n)`` until one qualifies (rejection, the same law, ``n/(n − c_m)``
  draws expected): a reference, not a fast engine.

A departure is as above (``below(n)``).  The time integrals ``∫ P_i`` are the rule's ``P_i``
(JIQ's and JBT's levels closed whenever ``1{c_1 = n}`` or ``c_T`` changes, as
:mod:`.profile` does: :func:`.profile.jiq_close_levels`, :func:`.profile.jbt_close_levels`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .layout import GO_ON, ST_WINDOW, STATUS_DONE, Measures, Records, Setup, Tables
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
    JSQ,
    JSQ_D,
    LW,
    RANDOM,
    counts_rule,
    flat_tables,
    get_p,
    jbt_p,
    refresh_windows,
    window_edge,
)

__all__ = ["queues_kernel", "bitset_words", "MAX_N"]

MAX_N = 2**31 - 1
REJECT_MIN = 16
"""The rules other than JSQ(d) pick among ``m >= REJECT_MIN`` allowed queues by rejection (uniform
queues until one is allowed: ``n/m`` draws expected), among fewer by a scan for the ``r``-th."""


def bitset_words(n: int, replace: bool) -> int:
    """Words of the scratch bit set (only sampling without replacement needs one)."""
    return 1 if replace else (n + 63) // 64


@njit(cache=True, nogil=True)
def _queues_general(queues, c, s, tables, meas, recs, setup, clock, t_stop, max_events):
    """The per-queue chain for any state (used by :func:`queues_kernel` off the fast path)."""
    x, bits, scratch = queues
    n, d, rep = setup.n, setup.d, setup.replace
    p_arr = setup.p_arrival
    st = clock[0]
    small = scratch.shape[0] >= d
    one = np.uint64(1)
    events = 0
    while True:
        status = general_gate(recs, setup, clock, c, events, max_events, t_stop)
        if status != GO_ON:
            break
        top = st.top
        now = st.now
        if next_double(s) < p_arr:
            # DELIBERATE COPY of _join's body: a call with four array arguments per arrival
            # costs ~18% of this loop's speed (measured, n = 10^5, d = 1)
            best = np.int64(2**62)
            arg = -1
            if rep:
                for _ in range(d):
                    K = next_below(s, n)
                    xl = np.int64(x[K])
                    if xl < best:  # strict: ties go to the first minimal entry
                        best = xl
                        arg = K
            else:
                ties = 0
                cnt = 0
                for jj in range(n - d, n):  # Floyd's algorithm
                    t = next_below(s, jj + 1)
                    w = t >> 6
                    b = one << np.uint64(t & 63)
                    if bits[w] & b:
                        t = jj
                        w = t >> 6
                        b = one << np.uint64(t & 63)
                    bits[w] |= b
                    if small:
                        scratch[cnt] = t
                        cnt += 1
                    xl = np.int64(x[t])
                    if xl < best:
                        best = xl
                        arg = t
                        ties = 1
                    elif xl == best:
                        ties += 1
                        if next_below(s, ties) == 0:
                            arg = t
                if small:
                    for r in range(cnt):
                        t = scratch[r]
                        bits[t >> 6] = np.uint64(0)
                else:
                    bits[:] = np.uint64(0)
            ell = best
            x[arg] = np.int32(ell + 1)
            if ell == top:
                pold = 0.0
                set_top(clock, meas.maxtime, top + 1, now)
            else:
                pold = get_p(tables, setup, ell, c[ell])
            set_level(meas, setup, clock, c, ell, c[ell] + 1, pold, now)
            st.total += 1
        else:
            K = next_below(s, n)
            ell = np.int64(x[K])
            if ell > 0:
                x[K] = np.int32(ell - 1)
                lv = ell - 1
                old = c[lv]
                pold = get_p(tables, setup, lv, old)
                set_level(meas, setup, clock, c, lv, old - 1, pold, now)
                if old == 1:
                    set_top(clock, meas.maxtime, lv, now)
                st.total -= 1
        st.t_next = next_event_time(s, setup, now)
        events += 1
    return events, status


@njit(cache=True)
def _rule_queue(x, c, s, n, d, policy):
    """The queue an arrival joins under rule ``policy`` other than JSQ(d) (docs/model.md §2,
    "Other dispatch rules"), or -1 for a code no branch knows: the ``r``-th queue (index order)
    shorter than ``m``, ``r = below(n − c_m)`` uniform, where ``m`` is the shortest length plus
    one (JSQ), 1 (JIQ with an idle queue) or ``T = d`` (JBT with a queue below ``T``); otherwise
    (random, and JIQ or JBT with none) the uniform queue ``below(n)``.  With ``n − c_m >=
    REJECT_MIN`` by rejection instead (``below(n)`` until one is shorter than ``m``)."""
    L = c.shape[0]
    if policy == RANDOM:
        return next_below(s, n)
    if policy == JSQ:
        m = 0
        while c[m] == n:  # the shortest length: the levels every queue reaches (c[top] = 0 < n)
            m += 1
        m += 1
    elif policy == JIQ:
        m = 1
    elif policy == JBT:
        m = d
    else:
        return -1
    below = n - (c[m - 1] if m - 1 < L else 0)  # queues shorter than m
    if below == 0:  # JIQ, JBT: no queue below the threshold (JSQ always has one)
        return next_below(s, n)
    if below >= REJECT_MIN:  # rejection: uniform queues until one is shorter than m (n/below draws expected)
        while True:
            q = next_below(s, n)
            if x[q] < m:
                return q
    r = next_below(s, below)
    for q in range(n):
        if x[q] < m:
            if r == 0:
                return q
            r -= 1
    return -1  # unreachable: the counts say `below` queues are shorter than m


@njit(cache=True, nogil=True)
def _queues_rules(x, c, s, tables, meas, recs, setup, clock, t_stop, max_events):
    """The per-queue chain of the rules other than JSQ(d) (:func:`_rule_queue`), any state.

    ``∫ P_i`` is the rule's ``P_i`` as :func:`.profile._profile_general` keeps it: the table for
    random and JSQ; JIQ's ``1{c_1 = n}·c_i/n`` (every level closed when ``1{c_1 = n}`` changes);
    JBT's :func:`.tables.jbt_p` from the profile (the levels that read ``c_T`` closed when it
    changes).  Returns ``BAD_RULE`` for a code no branch knows."""
    n, d, pol = setup.n, setup.d, setup.policy
    jiq = pol == JIQ
    jbt = pol == JBT
    p_arr = setup.p_arrival
    st = clock[0]
    events = 0
    while True:
        status = general_gate(recs, setup, clock, c, events, max_events, t_stop)
        if status != GO_ON:
            break
        top = st.top
        now = st.now
        if next_double(s) < p_arr:
            q = _rule_queue(x, c, s, n, d, pol)
            if q < 0:
                status = BAD_RULE
                break
            ell = np.int64(x[q])
            x[q] = np.int32(ell + 1)
            old = c[ell]
            if ell >= top:
                pold = 0.0
            elif jbt:
                pold = jbt_p(c, ell, n, d)
            elif jiq and c[0] < n:
                pold = 0.0
            else:
                pold = get_p(tables, setup, ell, old)
            if jiq and ell == 0 and old + 1 == n:
                jiq_close_levels(tables, setup, meas, c, top, False, now)
            if jbt and ell == d - 1:
                jbt_close_levels(setup, meas, c, top, old, old + 1, now)
            if ell == top:
                set_top(clock, meas.maxtime, top + 1, now)
            set_level(meas, setup, clock, c, ell, old + 1, pold, now)
            st.total += 1
        else:
            K = next_below(s, n)
            ell = np.int64(x[K])
            if ell > 0:
                x[K] = np.int32(ell - 1)
                lv = ell - 1
                old = c[lv]
                if jbt:
                    pold = jbt_p(c, lv, n, d)
                    if lv == d - 1:
                        jbt_close_levels(setup, meas, c, top, old, old - 1, now)
                else:
                    pold = 0.0 if (jiq and c[0] < n) else get_p(tables, setup, lv, old)
                    if jiq and lv == 0 and old == n:
                        jiq_close_levels(tables, setup, meas, c, top, True, now)
                set_level(meas, setup, clock, c, lv, old - 1, pold, now)
                if old == 1:
                    set_top(clock, meas.maxtime, lv, now)
                st.total -= 1
        st.t_next = next_event_time(s, setup, now)
        events += 1
    return events, status


@njit(cache=True)
def _join(x, bits, scratch, s, n, d, rep):
    """The queue an arrival joins: the first minimal entry of a uniform d-tuple (docs/model.md §1)."""
    best = np.int64(2**62)
    arg = -1
    if rep:
        for _ in range(d):
            K = next_below(s, n)
            xl = np.int64(x[K])
            if xl < best:  # strict: ties go to the first minimal entry
                best = xl
                arg = K
        return arg
    one = np.uint64(1)
    small = scratch.shape[0] >= d
    ties = 0
    cnt = 0
    for jj in range(n - d, n):  # Floyd's algorithm
        t = next_below(s, jj + 1)
        w = t >> 6
        b = one << np.uint64(t & 63)
        if bits[w] & b:
            t = jj
            w = t >> 6
            b = one << np.uint64(t & 63)
        bits[w] |= b
        if small:
            scratch[cnt] = t
            cnt += 1
        xl = np.int64(x[t])
        if xl < best:
            best = xl
            arg = t
            ties = 1
        elif xl == best:
            ties += 1
            if next_below(s, ties) == 0:
                arg = t
    if small:
        for r in range(cnt):
            bits[scratch[r] >> 6] = np.uint64(0)
    else:
        bits[:] = np.uint64(0)
    return arg


@njit(cache=True, nogil=True)
def _queues_fast(queues, c, s, flat, bounds, meas, setup, clock, t_stop, max_events):
    """Hot loop of the per-queue chain (same structure as ``profile._profile_fast``).

    DELIBERATE COPY of the fast loops' prologue and per-event bookkeeping (local copies of
    the state, lazy integrals, good set, window edge, next time): an inlined helper over
    arrays that branches leaves reference counting in the loop (see :mod:`.measure`).
    Measured again: the bookkeeping as one ``inline="always"`` helper ran the
    queues loop at 10.1 against 22.3 million events/s (n = 10^5, d = 2, λ = 0.9)."""
    x, bits, scratch = queues
    tabf, tbase, tstride, windowed = flat
    lo_int, hi_int = bounds
    stamp, area_c, area_P, maxtime, gbad = meas.stamp, meas.area_c, meas.area_P, meas.maxtime, meas.good_bad
    n, d, rep = setup.n, setup.d, setup.replace
    k = setup.k if setup.k > 0 else -1
    cont = setup.continuous
    p_arr = setup.p_arrival
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
        if next_double(s) < p_arr:
            q = _join(x, bits, scratch, s, n, d, rep)
            j = np.int64(x[q])
            x[q] = np.int32(j + 1)
            old = c[j]
            if j < top:
                pold = tabf[j * tstride + old - tbase[j]]
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
            ell = np.int64(x[K])
            if ell == 0:
                t_next = now + (1.0 if not cont else -math.log(1.0 - next_double(s)) * inv_rate)
                events += 1
                continue
            x[K] = np.int32(ell - 1)
            j = ell - 1
            old = c[j]
            pold = tabf[j * tstride + old - tbase[j]]
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
def queues_kernel(
    queues: tuple[np.ndarray, np.ndarray, np.ndarray],
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
    """Run the per-queue chain until time ``t_stop`` or ``max_events`` events (see
    :func:`.profile.profile_kernel` for the other arguments and the return value);
    ``queues = (x, bits, scratch)``: ``x`` the queue lengths (int32), ``bits`` a zeroed bit
    set of ``n`` bits (``replace=False``), ``scratch`` room for ``d`` indices when
    ``d < n/64``.  Rules other than JSQ(d) (``setup.policy``) run :func:`_queues_rules`; an
    unknown code returns ``(0, BAD_RULE)`` before any event.
    DELIBERATE COPY of :func:`.profile.profile_kernel`'s driver loop around this engine's
    own fast and general loops (numba cannot cache one driver that takes the loops as
    arguments: checked with numba 0.68, such a driver is a cache miss in every process)."""
    if setup.policy != JSQ_D:  # the other rules: a loop of their own (JSQ(d)'s loops and stream untouched)
        if not counts_rule(setup.policy):  # an unknown code: refused before any event, never run as another rule
            return 0, BAD_RULE
        return _queues_rules(queues[0], c, s, tables, meas, recs, setup, clock, t_stop, max_events)
    flat = flat_tables(tables, setup, c.shape[0])
    bounds = good_ints(meas, setup.k)
    events = 0
    while True:
        status = chunk_gate(recs, setup, clock, c, max_events - events, t_stop)
        if status != GO_ON:
            return events, status
        if flat[3] and clock[0].top >= LW - 1:
            ev, status = _queues_general(
                queues, c, s, tables, meas, recs, setup, clock, t_stop, min(max_events - events, 4096)
            )
        else:
            if flat[3]:
                refresh_windows(tables, setup, c, clock[0].top)
            ev, status = _queues_fast(queues, c, s, flat, bounds, meas, setup, clock, t_stop, max_events - events)
        events += ev
        if is_final(status):
            return events, status
