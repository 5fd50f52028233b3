"""The profile (counts) chain of docs/model.md §2 as a numba kernel, and the measurement
machinery shared by every engine.

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

Array layout shared by the kernels of this package (all owned by the caller):

``pi`` (int64): ``[n, d, replace, k, continuous, full_table, rec_levels]`` (``k = 0``: no
good set);  ``pf`` (float64): ``[p_arrival, rate, rec_every]``;  ``si`` (int64):
``[top, total customers, violated clauses, records written]``;  ``sf`` (float64):
``[now, t_next, top_since, good_since, good_time, next_record]``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .measure import (  # the state layout is re-exported: callers read it from here
    F_PARR, F_RATE, F_REC, HALF_WIN, I_CONT, I_D, I_FULL, I_K, I_N, I_REP, I_RL, LW, S_NREC, S_TOP, S_TOTAL,
    S_VIOL, STATUS_DONE, STATUS_EVENTS, STATUS_GROW, STATUS_RECFULL, T_GOODSINCE, T_GOODTIME, T_NEXT,
    T_NEXTREC, T_NOW, T_TOPSINCE, WIN, _GO_ON, _ST_GENERAL, _ST_RECORD, _ST_WINDOW, change_level, chunk_gate,
    clause_bad, clause_ints, close_level, close_top, fast_tables, good_step, is_final, record_until, state_load,
    state_store, window_edge,
)
from .rng import next_double, step_double

__all__ = [
    "HALF_WIN", "WIN", "LW", "FULL_TABLE_MAX_N",
    "log_p_all_at_least", "p_all_at_least", "p_table",
    "profile_kernel", "flush", "reset_measures",
]

FULL_TABLE_MAX_N = 1 << 15


# ----------------------------------------------------------------- P_i (docs/model.md §2)
@njit(cache=True)
def _lgamma_ratio(x, a):
    """``lgamma(x + a) − lgamma(x)`` for ``x > 0, a >= 0`` without cancellation.

    For ``x >= 30`` by Stirling's series written as ``(x−½)·log1p(a/x) + a·log(x+a) − a +
    s(x+a) − s(x)``: relative accuracy ~1e-16 even when ``x`` is 10^12.
    """
    if a == 0.0:
        return 0.0
    if x < 30.0:
        return math.lgamma(x + a) - math.lgamma(x)
    y = x + a

    def s(z):
        z2 = 1.0 / (z * z)
        return (1.0 / z) * (1.0 / 12.0 - z2 * (1.0 / 360.0 - z2 * (1.0 / 1260.0 - z2 / 1680.0)))

    return (x - 0.5) * math.log1p(a / x) + a * math.log(y) - a + (s(y) - s(x))


@njit(cache=True)
def log_p_all_at_least(c, n, d, replace):
    """``log P_i`` for a level with ``c`` queues of length ``>= i`` (docs/model.md §2).

    With replacement ``d·log(c/n)``; without, ``log C(c,d) − log C(n,d)`` written through
    whichever of ``d`` and ``m = n − c`` is smaller (absolute error ~1e-16·min(d,m)·log n).
    """
    if c >= n:
        return 0.0
    if c <= 0:
        return -np.inf
    fn = float(n)
    fc = float(c)
    fd = float(d)
    if replace:
        return fd * math.log1p(-(fn - fc) / fn)
    if c < d:
        return -np.inf
    m = fn - fc
    if fd <= m:
        # log C(c,d) − log C(n,d) = [lgamma(c+1) − lgamma(c+1−d)] − [lgamma(n+1) − lgamma(n+1−d)]
        return _lgamma_ratio(fc + 1.0 - fd, fd) - _lgamma_ratio(fn + 1.0 - fd, fd)
    # = [lgamma(n−d+1) − lgamma(c−d+1)] − [lgamma(n+1) − lgamma(c+1)]
    return _lgamma_ratio(fc - fd + 1.0, m) - _lgamma_ratio(fc + 1.0, m)


@njit(cache=True)
def p_all_at_least(c, n, d, replace):
    """``P_i``: probability that all d sampled queues have length >= i (docs/model.md §2)."""
    if c >= n:
        return 1.0
    return math.exp(log_p_all_at_least(c, n, d, replace))


@njit(cache=True)
def p_table(n, d, replace):
    """``P(c)`` for ``c = 0..n`` (only for small ``n``)."""
    out = np.empty(n + 1)
    for c in range(n + 1):
        out[c] = p_all_at_least(c, n, d, replace)
    return out


@njit(cache=True)
def _getp(j, cj, pi, tab, win, winbase):
    """``P`` at level index ``j`` holding count ``cj`` (table look-up, window rebuilt if needed)."""
    if pi[I_FULL]:
        return tab[cj]
    if j < LW:
        off = cj - winbase[j]
        if off < 0 or off >= WIN:
            off = _rebuild_window(j, cj, pi, win, winbase)
        return win[j, off]
    return p_all_at_least(cj, pi[I_N], pi[I_D], pi[I_REP] != 0)


@njit(cache=True)
def _rebuild_window(j, cj, pi, win, winbase):
    """Refill the window of level index ``j`` around count ``cj``; returns ``cj``'s offset."""
    base = cj - HALF_WIN
    if base < 0:
        base = 0
    winbase[j] = base
    n = pi[I_N]
    d = pi[I_D]
    rep = pi[I_REP] != 0
    for t in range(WIN):
        win[j, t] = p_all_at_least(base + t, n, d, rep)
    return cj - base


# ----------------------------------------------------------------- measurements
@njit(cache=True)
def flush(c, stamp, area_c, area_P, maxtime, tab, win, winbase, pi, si, sf):
    """Close every lazy time integral at the current time (call before reading them)."""
    now = sf[T_NOW]
    for j in range(c.shape[0]):
        cj = c[j]
        if cj > 0:
            close_level(j, cj, _getp(j, cj, pi, tab, win, winbase), cj, now, c, stamp, area_c, area_P)
        stamp[j] = now
    sf[T_TOPSINCE] = close_top(maxtime, si[S_TOP], sf[T_TOPSINCE], now)
    if pi[I_K] > 0 and si[S_VIOL] == 0:
        sf[T_GOODTIME] += now - sf[T_GOODSINCE]
        sf[T_GOODSINCE] = now


@njit(cache=True)
def reset_measures(c, stamp, area_c, area_P, maxtime, pi, lo, hi, gbad, si, sf):
    """Start measuring now: zero the integrals, recompute good-set membership."""
    now = sf[T_NOW]
    for j in range(c.shape[0]):
        stamp[j] = now
        area_c[j] = 0.0
        area_P[j] = 0.0
    for j in range(maxtime.shape[0]):
        maxtime[j] = 0.0
    top = 0
    tot = 0
    for j in range(c.shape[0]):
        if c[j] > 0:
            top = j + 1
            tot += c[j]
    si[S_TOP] = top
    si[S_TOTAL] = tot
    sf[T_TOPSINCE] = now
    sf[T_GOODTIME] = 0.0
    sf[T_GOODSINCE] = now
    k = pi[I_K]
    v = 0
    if k > 0:
        n = pi[I_N]
        for j in range(k + 1):
            b = min(j, k - 1)
            bad = clause_bad(j, k, c[j] if j < c.shape[0] else 0, n, lo[b], hi[b])
            gbad[j] = bad
            v += bad
    si[S_VIOL] = v


# ----------------------------------------------------------------- the profile kernel
@njit(cache=True, nogil=True)
def _profile_general(c, stamp, area_c, area_P, maxtime, tab, win, winbase, lo, hi, gbad,
                     rec_t, rec_c, rec_max, rec_tot, s, pi, pf, si, sf, t_stop, max_events):
    """The profile chain for any state (levels beyond the windowed ones evaluate ``P``
    directly); used by :func:`profile_kernel` when the fast path does not apply."""
    n = pi[I_N]
    d = pi[I_D]
    rep = pi[I_REP] != 0
    k = pi[I_K]
    fn = float(n)
    cont = pi[I_CONT] != 0
    full = pi[I_FULL] != 0
    p_arr = pf[F_PARR]
    inv_p = 1.0 / p_arr
    q_scale = fn / (1.0 - p_arr)
    rate = pf[F_RATE]
    L = c.shape[0]
    recording = pf[F_REC] > 0.0
    top, total, viol, now, t_next, top_since, good_since, good_time = state_load(si, sf)
    events = 0
    status = STATUS_DONE
    while True:
        if events >= max_events:
            status = STATUS_EVENTS
            break
        if top + 2 > L:
            status = STATUS_GROW
            break
        if recording and sf[T_NEXTREC] < (t_next if t_next <= t_stop else t_stop):
            si[S_TOP] = top
            si[S_TOTAL] = total
            if not record_until(t_next if t_next <= t_stop else t_stop, c, rec_t, rec_c, rec_max, rec_tot,
                                pf, pi, si, sf):
                status = STATUS_RECFULL
                break
        if t_next > t_stop:
            now = t_stop
            status = STATUS_DONE
            break
        now = t_next
        u = next_double(s)
        if u < p_arr:
            # arrival: joined length ℓ = #{i : U < P_i}
            U = u * inv_p
            ell = 0
            if full:
                for j in range(top):
                    ell += np.int64(tab[c[j]] > U)
                j = ell
                pold = tab[c[j]] if j < top else 0.0
            else:
                m = top if top < LW else LW
                for j in range(m):
                    off = c[j] - winbase[j]
                    if off < 0 or off >= WIN:
                        off = _rebuild_window(j, c[j], pi, win, winbase)
                    ell += np.int64(win[j, off] > U)
                if ell == LW:
                    while ell < top and p_all_at_least(c[ell], n, d, rep) > U:
                        ell += 1
                j = ell
                if j >= top:
                    pold = 0.0
                elif j < LW:
                    pold = win[j, c[j] - winbase[j]]
                else:
                    pold = p_all_at_least(c[j], n, d, rep)
            if j == top:
                top_since = close_top(maxtime, top, top_since, now)
                top += 1
            viol, good_since, good_time = change_level(j, c[j] + 1, pold, now, c, stamp, area_c, area_P, k, n,
                                                       lo, hi, gbad, viol, good_since, good_time)
            total += 1
        else:
            # potential departure from a uniformly chosen queue: ℓ = #{i : c_i > nU}
            y = (u - p_arr) * q_scale
            ell = 0
            for j in range(top):
                ell += np.int64(c[j] > y)
            if ell > 0:
                lv = ell - 1
                old = c[lv]
                if full:
                    pold = tab[old]
                elif lv < LW:
                    off = old - winbase[lv]
                    if off < 0 or off >= WIN:
                        off = _rebuild_window(lv, old, pi, win, winbase)
                    pold = win[lv, off]
                else:
                    pold = p_all_at_least(old, n, d, rep)
                viol, good_since, good_time = change_level(lv, old - 1, pold, now, c, stamp, area_c, area_P, k,
                                                           n, lo, hi, gbad, viol, good_since, good_time)
                if old == 1:
                    top_since = close_top(maxtime, top, top_since, now)
                    top = lv
                total -= 1
        if cont:
            t_next = now - math.log(1.0 - next_double(s)) / rate
        else:
            t_next = now + 1.0
        events += 1
    state_store(si, sf, top, total, viol, now, t_next, top_since, good_since, good_time)
    return events, status


@njit(cache=True, nogil=True)
def _profile_fast(c, stamp, area_c, area_P, maxtime, tabf, tbase, tstride, windowed, loi, hii, gbad, s,
                  pi, pf, si, sf, t_stop, max_events):
    """The hot loop of the profile chain: no calls but the random numbers.

    ``P`` at level index ``j`` and count ``x`` is ``tabf[j*tstride + x − tbase[j]]`` (the full
    table with ``tstride = 0``, or the per-level windows).  Returns to :func:`profile_kernel`
    for anything unusual: a record due, a window edge reached or a new level opened
    (windowed mode), too many levels for the windows, level capacity, the horizon.
    """
    n = pi[I_N]
    k = pi[I_K] if pi[I_K] > 0 else -1
    fn = float(n)
    cont = pi[I_CONT] != 0
    p_arr = pf[F_PARR]
    inv_p = 1.0 / p_arr
    q_scale = fn / (1.0 - p_arr)
    inv_rate = 1.0 / pf[F_RATE]
    L = c.shape[0]
    recording = pf[F_REC] > 0.0
    next_rec = sf[T_NEXTREC]
    top, total, viol, now, t_next, top_since, good_since, good_time = state_load(si, sf)
    lw_top = LW - 1
    r0 = s[0]
    r1 = s[1]
    r2 = s[2]
    r3 = s[3]
    events = 0
    status = STATUS_DONE
    if top + 2 > L:
        return 0, STATUS_GROW
    if windowed and top >= lw_top:
        return 0, _ST_GENERAL
    # pc[i] = P at level index i for its current count (one look-up per change)
    pc = np.zeros(L)
    scan8 = L >= 8  # the fixed-count scan reads c[0..7] and pc[0..7]
    for i in range(top):
        pc[i] = tabf[i * tstride + c[i] - tbase[i]]
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
    while True:
        if events >= budget:
            status = STATUS_EVENTS
            break
        if cont:
            if recording and next_rec < (t_next if t_next <= t_stop else t_stop):
                status = _ST_RECORD
                break
            if t_next > t_stop:
                now = t_stop
                status = STATUS_DONE
                break
        now = t_next
        u, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
        # One uniform decides the event and its level.  Arrival (u < p_arr): the joined
        # length is ℓ = #{i : U < P_i} with U = u/p_arr.  Potential departure: a uniform
        # queue, ℓ = #{i : c_i > y} with y = n(u − p_arr)/(1 − p_arr).  Both counts are
        # taken without branches and the common case is chosen by selects, so the 50/50
        # arrival/departure outcome costs no branch misprediction.
        arr = u < p_arr
        U = u * inv_p
        y = (u - p_arr) * q_scale
        ja = 0
        jd = 0
        yi = np.int64(y)  # c_i > y  <=>  c_i > floor(y) for y >= 0 (departures); integer compares
        if 4 < top <= 8 and scan8:
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
                        status = _ST_WINDOW  # stop after this event: new window or more levels needed
            elif j < 0:
                if cont:
                    v, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
                    t_next = now - math.log(1.0 - v) * inv_rate
                else:
                    t_next = now + 1.0
                events += 1
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
            pc[j] = tabf[j * tstride + new - tbase[j]]
        else:
            pc[j] = 0.0
        # good set N^ε, clauses (a) and (b) (docs/model.md §5)
        if j <= k:
            gbad[j], viol, good_since, good_time = good_step(j, k, new, n, loi[j], hii[j], gbad[j], now, viol,
                                                             good_since, good_time)
        if windowed and window_edge(new, tbase[j], n):
            status = _ST_WINDOW
        if cont:
            v, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
            t_next = now - math.log(1.0 - v) * inv_rate
        else:
            t_next = now + 1.0
        events += 1
        if status == _ST_WINDOW:
            break
    s[0] = r0
    s[1] = r1
    s[2] = r2
    s[3] = r3
    state_store(si, sf, top, total, viol, now, t_next, top_since, good_since, good_time)
    return events, status


@njit(cache=True)
def _refresh_windows(c, top, pi, win, winbase):
    """Make the window of every level index ``<= top`` (below ``LW``) hold its count with
    room to move by one."""
    n = pi[I_N]
    m = top + 1 if top + 1 < LW else LW
    for j in range(m):
        x = c[j]
        base = winbase[j]
        off = x - base
        if off < 0 or off >= WIN or window_edge(x, base, n):
            _rebuild_window(j, x, pi, win, winbase)


@njit(cache=True, nogil=True)
def profile_kernel(c, stamp, area_c, area_P, maxtime, tab, win, winbase, lo, hi, gbad,
                   rec_t, rec_c, rec_max, rec_tot, s, pi, pf, si, sf, t_stop, max_events):
    """Run the profile chain (docs/model.md §2) until time ``t_stop`` or ``max_events`` events.

    Returns ``(events, status)``: status 0 reached ``t_stop``, 1 did ``max_events``, 2 needs
    more level capacity (grow the level arrays and call again), 3 the record buffer is full.
    The hot loop (:func:`_profile_fast`) counts the joined and departing lengths without
    branches over the occupied levels (``c`` is non-increasing, so a count equals the scan
    of docs/model.md §2); unusual states go through :func:`_profile_general`.
    """
    tabf, tbase, tstride, windowed = fast_tables(c, tab, win, winbase, pi)
    loi, hii = clause_ints(lo, hi, pi[I_K])
    events = 0
    while True:
        st = chunk_gate(max_events - events, c, rec_t, rec_c, rec_max, rec_tot, pf, pi, si, sf, t_stop)
        if st != _GO_ON:
            return events, st
        if windowed and si[S_TOP] >= LW - 1:
            ev, st = _profile_general(c, stamp, area_c, area_P, maxtime, tab, win, winbase, lo, hi, gbad,
                                      rec_t, rec_c, rec_max, rec_tot, s, pi, pf, si, sf, t_stop,
                                      min(max_events - events, 4096))
        else:
            if windowed:
                _refresh_windows(c, si[S_TOP], pi, win, winbase)
            ev, st = _profile_fast(c, stamp, area_c, area_P, maxtime, tabf, tbase, tstride, windowed, loi, hii,
                                   gbad, s, pi, pf, si, sf, t_stop, max_events - events)
        events += ev
        if is_final(st):
            return events, st
