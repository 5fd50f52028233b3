"""The profile (counts) chain of docs/model.md §2 as a numba kernel.

State: ``c[j] = c_{j+1}`` = number of queues with at least ``j+1`` customers (0-based array
index ``j`` stands for level ``j+1``), non-increasing, ``top`` = number of occupied levels
(the maximum queue length).  One step of the uniformized chain (docs/model.md §1–2):

- arrival, probability ``λ/(1+λ)``: the joined length is ``ℓ = #{i ≥ 1 : U < P_i}`` with ``U``
  uniform, ``P_i = u_i^d`` (with replacement) or ``C(c_i, d)/C(n, d)`` (without), so that
  ``P(ℓ ≥ i) = P_i``; then ``c_{ℓ+1} += 1``;
- potential departure, probability ``1/(1+λ)``: ``ℓ = #{i ≥ 1 : c_i > nU}`` (the length of a
  uniformly chosen queue, ``P(ℓ ≥ i) = u_i``); if ``ℓ ≥ 1``, ``c_ℓ −= 1``.

One 53-bit uniform decides both the kind of event and ``U`` (split at ``λ/(1+λ)``), so a
step costs one random number, a few comparisons and table look-ups: nothing depends on
``n`` or ``d``.  Probabilities are exact up to double rounding (``~2^-52``).

``P(c)`` is looked up, never recomputed per event: a full table ``P(0..n)`` when ``n`` is
small, otherwise for each of the first ``LW`` levels a window of ``WIN`` consecutive values
of ``c`` around the current count, rebuilt (``WIN`` evaluations) when ``c`` leaves it.
Levels above ``LW`` evaluate ``P`` directly.

Time: the discrete chain (one step per unit of "time") or continuous time (the chain
uniformized at rate ``n(1+λ)``: holding times exponential; exact, docs/model.md §1).  The next
event time is part of the state, so a run cut into chunks gives exactly the same numbers.

Measurements (time averages, O(1) work per event, lazily updated per level):
``area_c[j] = ∫ c_{j+1} dt``, ``area_P[j] = ∫ P_{j+1} dt`` (the time average of ``u_i^d``),
``maxtime[m] = time with maximum queue length m``, the time spent in the good set ``N^ε``
(clauses (a) and (b) of docs/model.md §5, with a running count of violated clauses), and an
optional trajectory recorded on a regular grid.

Dispatch rules (``setup.policy``, docs/model.md §2 "Other dispatch rules"): the arrival
draw above with the rule's ``P`` (:func:`.tables.p_rule`).  JSQ(d) and JSQ run as described;
random routing computes ``P = c/n`` in the hot loop instead of looking it up (no windows, so
any number of levels stays on the fast path); JIQ, whose ``P_i = 1{c_1 = n}·c_i/n`` depends
on ``c_1`` too, runs a loop of its own while two queues or more are idle (every ``P_i`` is
0 there, :func:`_profile_jiq_idle`), and otherwise the general loop, which joins an idle
queue while there is one, finds a uniform queue's length by bisection, and closes every
level's ``∫ P_i`` when ``1{c_1 = n}`` changes (:func:`jiq_close_levels`).  JBT(T = d), whose
``P_i = (c_i − c_T)/(n − c_T)`` (``i <= T``, 0 above) while ``c_T < n`` and ``c_i/n`` after
(:func:`.tables.jbt_p`) depends on ``c_T``, runs the general loop: an arrival's length is
``#{i : U < P_i}`` with ``P_i`` evaluated from the profile (no table), and a change of ``c_T``
first closes the ``∫ P_i`` of the levels that read it (:func:`jbt_close_levels`).

The state is laid out in named structures shared by every engine (:mod:`.layout`):
``c`` (the counts), ``s`` (the generator), ``tables`` (:class:`.layout.Tables`, see
:mod:`.tables`), ``meas`` (:class:`.layout.Measures`), ``recs`` (:class:`.layout.Records`),
``setup`` (:class:`.layout.Setup`) and ``clock`` (a record of :data:`.layout.CLOCK`).
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
    STATUS_RECFULL,
    Measures,
    Records,
    Setup,
    Tables,
)
from .measure import (
    change_level,
    chunk_gate,
    close_level,
    close_top,
    good_ints,
    good_step,
    is_final,
    load_clock,
    next_event_time,
    record_until,
    store_clock,
)
from .rng import next_double, step_double
from .tables import (
    BAD_RULE,
    JBT,
    JIQ,
    LW,
    RANDOM,
    WIN,
    counts_rule,
    flat_tables,
    get_p,
    jbt_p,
    p_rule,
    rebuild_window,
    refresh_windows,
    window_edge,
)

__all__ = ["profile_kernel", "jiq_close_levels", "jbt_close_levels"]


@njit(cache=True)
def jiq_close_levels(
    tables: Tables, setup: Setup, meas: Measures, c: np.ndarray, top: int, busy: bool, now: float
) -> None:
    """JIQ: ``1{c_1 = n}`` is about to change at time ``now``: close the lazy integrals of
    levels ``2..top`` with the ``P_i = 1{c_1 = n}·c_i/n`` they had (``busy`` = whether
    ``c_1 = n`` until now), so that each level's ``∫ P_i`` stays exact (docs/model.md §2)."""
    for i in range(1, top):
        p = get_p(tables, setup, i, c[i]) if busy else 0.0
        close_level(i, c[i], p, c[i], now, c, meas.stamp, meas.area_c, meas.area_P)


@njit(cache=True)
def jbt_close_levels(setup: Setup, meas: Measures, c: np.ndarray, top: int, old: int, new: int, now: float) -> None:
    """JBT(T = d): ``c_T`` (level index ``T − 1``) is about to change from ``old`` to ``new`` at
    time ``now``: close the lazy integrals of the other levels whose ``P_i`` reads it, with the
    ``P_i`` they had (:func:`.tables.jbt_p` of the profile before the change): the levels below
    ``T`` always, those above ``T`` when ``c_T`` reaches or leaves ``n`` (their ``P_i`` is 0
    while ``c_T < n``), so that each level's ``∫ P_i`` stays exact (docs/model.md §2)."""
    t = setup.d - 1
    hi = top if (old == setup.n or new == setup.n) else min(t, top)
    for i in range(hi):
        if i != t:
            p = jbt_p(c, i, setup.n, setup.d)
            close_level(i, c[i], p, c[i], now, c, meas.stamp, meas.area_c, meas.area_P)


# ----------------------------------------------------------------- the profile kernel
@njit(cache=True, nogil=True)
def _profile_general(c, s, tables, meas, recs, setup, clock, t_stop, max_events):
    """The profile chain for any state (levels beyond the windowed ones evaluate ``P``
    directly); used by :func:`profile_kernel` when the fast path does not apply.  Its stop
    checks repeat those of :func:`_profile_fast` (DELIBERATE: in the hot loop they are
    specialised to discrete time, where they are decided once per chunk)."""
    n, d, rep, full = setup.n, setup.d, setup.replace, setup.full_table
    pol = setup.policy
    jiq = pol == JIQ
    jbt = pol == JBT
    tab, win, winbase = tables
    p_arr = setup.p_arrival
    inv_p = 1.0 / p_arr
    q_scale = float(n) / (1.0 - p_arr)
    L = c.shape[0]
    st = clock[0]
    recording = st.rec_every > 0.0
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
        if recording and st.next_rec < (t_next if t_next <= t_stop else t_stop):
            st.top = top
            st.total = total
            if not record_until(recs, setup, clock, c, t_next if t_next <= t_stop else t_stop):
                status = STATUS_RECFULL
                break
        if t_next > t_stop:
            now = t_stop
            status = STATUS_DONE
            break
        now = t_next
        unif = next_double(s)
        if unif < p_arr:
            # arrival: joined length ℓ = #{i : U < P_i}
            U = unif * inv_p
            ell = 0
            if jiq and c[0] < n:
                # JIQ with an idle queue: join one (P_1 = 0)
                j = 0
                pold = 0.0
            elif jbt:
                # JBT: P_i from the profile (it reads c_T), non-increasing in i: ℓ = #{i : U < P_i}
                while ell < top and jbt_p(c, ell, n, d) > U:
                    ell += 1
                j = ell
                pold = jbt_p(c, j, n, d) if j < top else 0.0
            elif pol == RANDOM or jiq:
                # a uniform queue (random; JIQ with every queue busy): its length
                # ℓ = #{i : c_i > nU}, by bisection (c is non-increasing): O(log top)
                y = U * n
                lo = 0
                hi = top
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if c[mid] > y:
                        lo = mid + 1
                    else:
                        hi = mid
                j = lo
                pold = get_p(tables, setup, j, c[j]) if j < top else 0.0
            elif full:
                for j in range(top):
                    ell += np.int64(tab[c[j]] > U)
                j = ell
                pold = tab[c[j]] if j < top else 0.0
            else:
                m = top if top < LW else LW
                for j in range(m):
                    off = c[j] - winbase[j]
                    if off < 0 or off >= WIN:
                        off = rebuild_window(tables, setup, j, c[j])
                    ell += np.int64(win[j, off] > U)
                if ell == LW:
                    while ell < top and p_rule(pol, c[ell], n, d, rep) > U:
                        ell += 1
                j = ell
                if j >= top:
                    pold = 0.0
                elif j < LW:
                    pold = win[j, c[j] - winbase[j]]
                else:
                    pold = p_rule(pol, c[j], n, d, rep)
            if jiq and j == 0 and c[0] + 1 == n:
                jiq_close_levels(tables, setup, meas, c, top, False, now)
            if jbt and j == d - 1:
                jbt_close_levels(setup, meas, c, top, c[j], c[j] + 1, now)
            if j == top:
                top_since = close_top(meas.maxtime, top, top_since, now)
                top += 1
            viol, good_since, good_time = change_level(
                meas, setup, c, j, c[j] + 1, pold, now, viol, good_since, good_time
            )
            total += 1
        else:
            # potential departure from a uniformly chosen queue: ℓ = #{i : c_i > nU}
            y = (unif - p_arr) * q_scale
            # by bisection (c is non-increasing: the same count as the scan, O(log top))
            ell = 0
            hi = top
            while ell < hi:
                mid = (ell + hi) >> 1
                if c[mid] > y:
                    ell = mid + 1
                else:
                    hi = mid
            if ell > 0:
                lv = ell - 1
                old = c[lv]
                if jbt:
                    pold = jbt_p(c, lv, n, d)
                    if lv == d - 1:
                        jbt_close_levels(setup, meas, c, top, old, old - 1, now)
                elif full:
                    pold = tab[old]
                elif lv < LW:
                    off = old - winbase[lv]
                    if off < 0 or off >= WIN:
                        off = rebuild_window(tables, setup, lv, old)
                    pold = win[lv, off]
                else:
                    pold = p_rule(pol, old, n, d, rep)
                if jiq and c[0] < n:
                    pold = 0.0
                if jiq and lv == 0 and old == n:
                    jiq_close_levels(tables, setup, meas, c, top, True, now)
                viol, good_since, good_time = change_level(
                    meas, setup, c, lv, old - 1, pold, now, viol, good_since, good_time
                )
                if old == 1:
                    top_since = close_top(meas.maxtime, top, top_since, now)
                    top = lv
                total -= 1
        t_next = next_event_time(s, setup, now)
        events += 1
    store_clock(clock, top, total, viol, now, t_next, top_since, good_since, good_time)
    return events, status


@njit(cache=True, nogil=True)
def _profile_fast(c, s, flat, bounds, meas, setup, clock, t_stop, max_events):
    """The hot loop of the profile chain: no calls but the random numbers.

    ``flat = (tabf, tbase, tstride, windowed)`` (:func:`.tables.flat_tables`): ``P`` at level
    index ``j`` and count ``x`` is ``tabf[j*tstride + x − tbase[j]]``; ``bounds`` = the
    integer good-set bounds (:func:`.measure.good_ints`).  Returns to
    :func:`profile_kernel` for anything unusual: a record due, a window edge reached or a
    new level opened (windowed mode), too many levels for the windows, level capacity, the
    horizon.

    Speed (measured, CPU time against the positional-array kernels of before :mod:`.layout`):
    the loop is register-bound, and one live value more costs a few per cent.  It counts the
    events left down (one counter, not ``events`` and ``budget``) and folds ``L >= 8`` into
    the bound ``top8`` of the fixed-count scan (not ``L`` and a flag): with these two the
    named-structure version runs 0-3 % faster than the old kernel, without them 2-5 % slower.
    The queues and buckets fast loops repeat its prologue and per-event bookkeeping
    (deliberate, for speed: see there); change them together.
    """
    tabf, tbase, tstride, windowed = flat
    lo_int, hi_int = bounds
    stamp, area_c, area_P, maxtime, gbad = meas.stamp, meas.area_c, meas.area_P, meas.maxtime, meas.good_bad
    n = setup.n
    fn = float(n)
    ratio = setup.policy == RANDOM  # P = c/n computed (tables.p_rule), no table: any n, any number of levels
    k = setup.k if setup.k > 0 else -1
    cont = setup.continuous
    p_arr = setup.p_arrival
    inv_p = 1.0 / p_arr
    q_scale = float(n) / (1.0 - p_arr)
    inv_rate = 1.0 / setup.rate
    L = c.shape[0]
    recording = clock[0].rec_every > 0.0
    next_rec = clock[0].next_rec
    top, total, viol, now, t_next, top_since, good_since, good_time = load_clock(clock)
    r0, r1, r2, r3 = s[0], s[1], s[2], s[3]
    status = STATUS_DONE
    if top + 2 > L:
        return 0, STATUS_GROW
    if windowed and top >= LW - 1:
        return 0, ST_GENERAL
    # pc[i] = P at level index i for its current count (one look-up per change)
    pc = np.zeros(L)
    top8 = 8 if L >= 8 else 4  # the fixed-count scan (4 < top <= top8) reads c[0..7] and pc[0..7]
    for i in range(top):
        pc[i] = float(c[i]) / fn if ratio else tabf[i * tstride + c[i] - tbase[i]]
    # discrete time: the events before the horizon or the next record are known in advance.
    # They happen at t_next, t_next + 1, ...: floor(t − t_next) + 1 of them up to time t
    # (counted from t_next, not from now: after a stop at a fractional time, now is not
    # t_next − 1, and counting from now gave a budget of 0 and an endless loop).
    budget = max_events
    if not cont:
        if t_stop - t_next + 1.0 < budget:
            budget = max(np.int64(math.floor(t_stop - t_next)) + 1, np.int64(0))
        if recording and next_rec - t_next + 1.0 < budget:
            budget = max(np.int64(math.floor(next_rec - t_next)) + 1, np.int64(0))
    left = budget  # events still allowed (a count down: one register fewer in the loop)
    while True:
        if left <= 0:
            status = STATUS_EVENTS
            break
        if cont:
            if recording and next_rec < (t_next if t_next <= t_stop else t_stop):
                status = ST_RECORD
                break
            if t_next > t_stop:
                now = t_stop
                status = STATUS_DONE
                break
        now = t_next
        unif, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
        # One uniform decides the event and its level.  Arrival (unif < p_arr): the joined
        # length is ℓ = #{i : U < P_i} with U = unif/p_arr.  Potential departure: a uniform
        # queue, ℓ = #{i : c_i > y} with y = n(unif − p_arr)/(1 − p_arr).  Both counts are
        # taken without branches and the common case is chosen by selects, so the 50/50
        # arrival/departure outcome costs no branch misprediction.
        arr = unif < p_arr
        U = unif * inv_p
        y = (unif - p_arr) * q_scale
        ja = 0
        jd = 0
        yi = np.int64(y)  # c_i > y  <=>  c_i > floor(y) for y >= 0 (departures); integer compares
        if 4 < top <= top8:
            # 5 to 8 occupied levels (small d): a fixed trip count the compiler unrolls and
            # vectorises; entries past `top` are 0 in both arrays and count for neither
            # (U >= 0; yi >= 0 on a departure, and jd is unused on an arrival)
            for i in range(8):
                ja += np.int64(pc[i] > U)
                jd += np.int64(c[i] > yi)
        else:
            for i in range(top):
                ja += np.int64(pc[i] > U)
                jd += np.int64(c[i] > yi)
        j = ja if arr else jd - 1
        delta = 1 if arr else -1
        if (j < 0) | (j >= top - 1):
            # rare: an idle server (no departure), a new top level, or the top level
            if arr:
                if j == top:
                    top_since = close_top(maxtime, top, top_since, now)
                    top += 1
                    if windowed or top + 2 > L:
                        status = ST_WINDOW  # stop after this event: new window or more levels needed
            elif j < 0:
                if cont:
                    v, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
                    t_next = now - math.log(1.0 - v) * inv_rate
                else:
                    t_next = now + 1.0
                left -= 1
                continue
            elif c[j] == 1:
                top_since = close_top(maxtime, top, top_since, now)
                top = j
        old = c[j]
        pold = pc[j]
        new = old + delta
        total += delta
        # lazy time integrals of level j (docs/model.md §2 measurements)
        close_level(j, old, pold, new, now, c, stamp, area_c, area_P)
        if new > 0:
            pc[j] = float(new) / fn if ratio else tabf[j * tstride + new - tbase[j]]
        else:
            pc[j] = 0.0
        # good set N^ε, clauses (a) and (b) (docs/model.md §5)
        if j <= k:
            gbad[j], viol, good_since, good_time = good_step(
                j, k, new, n, lo_int[j], hi_int[j], gbad[j], now, viol, good_since, good_time
            )
        if windowed and window_edge(new, tbase[j], n):
            status = ST_WINDOW
        if cont:
            v, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
            t_next = now - math.log(1.0 - v) * inv_rate
        else:
            t_next = now + 1.0
        left -= 1
        if status == ST_WINDOW:
            break
    s[0], s[1], s[2], s[3] = r0, r1, r2, r3
    store_clock(clock, top, total, viol, now, t_next, top_since, good_since, good_time)
    return budget - left, status


@njit(cache=True, nogil=True)
def _profile_jiq_idle(c, s, meas, setup, clock, t_stop, max_events):
    """JIQ while at least two queues are idle (``c_1 <= n − 2``): every ``P_i`` is 0, an
    arrival joins an idle queue (``c_1 += 1``) and cannot make every queue busy, so no
    table is read and no ``∫ P_i`` grows.  The same random numbers as the general loop
    (one uniform per event, then the holding time in continuous time).  Returns to
    :func:`profile_kernel` (status ``ST_GENERAL``) when ``c_1`` reaches ``n − 1``, for a
    record, level capacity or the horizon; needs ``setup.k == 0`` (no good set)."""
    stamp, area_c, area_P, maxtime = meas.stamp, meas.area_c, meas.area_P, meas.maxtime
    n = setup.n
    cont = setup.continuous
    p_arr = setup.p_arrival
    q_scale = float(n) / (1.0 - p_arr)
    inv_rate = 1.0 / setup.rate
    L = c.shape[0]
    recording = clock[0].rec_every > 0.0
    next_rec = clock[0].next_rec
    top, total, viol, now, t_next, top_since, good_since, good_time = load_clock(clock)
    r0, r1, r2, r3 = s[0], s[1], s[2], s[3]
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
        unif, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
        if unif < p_arr:
            if top == 0:  # an idle queue joins level 1
                top_since = close_top(maxtime, top, top_since, now)
                top = 1
            old = c[0]
            close_level(0, old, 0.0, old + 1, now, c, stamp, area_c, area_P)
            total += 1
        else:
            # a uniformly chosen queue, its length ℓ = #{i : c_i > y} by bisection
            y = (unif - p_arr) * q_scale
            ell = 0
            hi = top
            while ell < hi:
                mid = (ell + hi) >> 1
                if c[mid] > y:
                    ell = mid + 1
                else:
                    hi = mid
            if ell > 0:
                lv = ell - 1
                old = c[lv]
                close_level(lv, old, 0.0, old - 1, now, c, stamp, area_c, area_P)
                if old == 1:
                    top_since = close_top(maxtime, top, top_since, now)
                    top = lv
                total -= 1
        if cont:
            v, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
            t_next = now - math.log(1.0 - v) * inv_rate
        else:
            t_next = now + 1.0
        events += 1
    s[0], s[1], s[2], s[3] = r0, r1, r2, r3
    store_clock(clock, top, total, viol, now, t_next, top_since, good_since, good_time)
    return events, status


@njit(cache=True, nogil=True)
def profile_kernel(
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
    """Run the profile chain (docs/model.md §2) until time ``t_stop`` or ``max_events`` events.

    Arguments: the structures of :mod:`.layout`, all updated in place.  Returns ``(events,
    status)``: status 0 reached ``t_stop``, 1 did ``max_events``, 2 needs more level
    capacity (grow the level arrays and call again), 3 the record buffer is full.
    The hot loop (:func:`_profile_fast`) counts the joined and departing lengths without
    branches over the occupied levels (``c`` is non-increasing, so a count equals the scan
    of docs/model.md §2); unusual states go through :func:`_profile_general`.
    :func:`.queues.queues_kernel` and :func:`.buckets.buckets_kernel` repeat this driver
    around their own loops (deliberate: see there); change the three together.
    """
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
            ev, status = _profile_jiq_idle(c, s, meas, setup, clock, t_stop, max_events - events)
        elif (flat[3] and clock[0].top >= LW - 1) or setup.policy == JIQ or setup.policy == JBT:
            ev, status = _profile_general(
                c, s, tables, meas, recs, setup, clock, t_stop, min(max_events - events, 4096)
            )
        else:
            if flat[3]:
                refresh_windows(tables, setup, c, clock[0].top)
            ev, status = _profile_fast(c, s, flat, bounds, meas, setup, clock, t_stop, max_events - events)
        events += ev
        if is_final(status):
            return events, status
