"""The profile (counts) chain of MODEL.md §2 as a numba kernel, and the measurement
machinery shared by every engine.

State: ``c[j] = c_{j+1}`` = number of queues with at least ``j+1`` customers (0-based array
index ``j`` stands for level ``j+1``), non-increasing, ``top`` = number of occupied levels
(the maximum queue length).  One step of the uniformized chain (MODEL.md §1–2):

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
uniformized at rate ``n(1+λ)``: holding times exponential; exact, MODEL.md §1).  The next
event time is part of the state, so a run cut into chunks gives exactly the same numbers.

Measurements (time averages, O(1) work per event, lazily updated per level):
``area_c[j] = ∫ c_{j+1} dt``, ``area_P[j] = ∫ P_{j+1} dt`` (the time average of ``u_i^d``),
``maxtime[m] = time with maximum queue length m``, the time spent in the good set ``N^ε``
(clauses (a) and (b) of MODEL.md §5, with a running count of violated clauses), and an
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

from .rng import next_double, step_double

__all__ = [
    "HALF_WIN", "WIN", "LW", "FULL_TABLE_MAX_N",
    "log_p_all_at_least", "p_all_at_least", "p_table",
    "profile_kernel", "flush", "reset_measures",
]

HALF_WIN = 1024
WIN = 2 * HALF_WIN
LW = 32  # levels with a window table
FULL_TABLE_MAX_N = 1 << 15

# indices into the small state arrays
I_N, I_D, I_REP, I_K, I_CONT, I_FULL, I_RL = 0, 1, 2, 3, 4, 5, 6
F_PARR, F_RATE, F_REC = 0, 1, 2
S_TOP, S_TOTAL, S_VIOL, S_NREC = 0, 1, 2, 3
T_NOW, T_NEXT, T_TOPSINCE, T_GOODSINCE, T_GOODTIME, T_NEXTREC = 0, 1, 2, 3, 4, 5

STATUS_DONE, STATUS_EVENTS, STATUS_GROW, STATUS_RECFULL = 0, 1, 2, 3
_ST_RECORD, _ST_WINDOW, _ST_GENERAL = 4, 5, 6  # internal: why the fast path returned


# ----------------------------------------------------------------- P_i (MODEL.md §2)
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
    """``log P_i`` for a level with ``c`` queues of length ``>= i`` (MODEL.md §2).

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
    """``P_i``: probability that all d sampled queues have length >= i (MODEL.md §2)."""
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
def _set_level(j, new, pold, now, c, stamp, area_c, area_P, pi, lo, hi, gbad, si, sf):
    """Set ``c[j] = new`` at time ``now``, closing the lazy time integrals of level ``j``
    (``pold`` = P at the old count) and updating good-set membership (MODEL.md §5)."""
    dt = now - stamp[j]
    area_c[j] += c[j] * dt
    area_P[j] += pold * dt
    stamp[j] = now
    c[j] = new
    k = pi[I_K]
    if k > 0 and j <= k:
        if j < k:
            shorter = float(pi[I_N] - new)
            bad = 1 if (shorter < lo[j] or shorter > hi[j]) else 0
        else:
            bad = 1 if new > 0 else 0
        if bad != gbad[j]:
            gbad[j] = bad
            v = si[S_VIOL]
            if v == 0:
                sf[T_GOODTIME] += now - sf[T_GOODSINCE]
            v += 1 if bad else -1
            si[S_VIOL] = v
            if v == 0:
                sf[T_GOODSINCE] = now


@njit(cache=True)
def _set_top(newtop, now, maxtime, si, sf):
    maxtime[si[S_TOP]] += now - sf[T_TOPSINCE]
    sf[T_TOPSINCE] = now
    si[S_TOP] = newtop


@njit(cache=True)
def _record_until(t_until, c, rec_t, rec_c, rec_max, rec_tot, pf, pi, si, sf):
    """Write the current state at every grid point ``< t_until``; False if the buffer is full."""
    every = pf[F_REC]
    if every <= 0.0:
        return True
    nxt = sf[T_NEXTREC]
    if nxt >= t_until:
        return True
    need = int(math.ceil((t_until - nxt) / every))
    if need < 1:
        need = 1
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
def flush(c, stamp, area_c, area_P, maxtime, tab, win, winbase, pi, si, sf):
    """Close every lazy time integral at the current time (call before reading them)."""
    now = sf[T_NOW]
    for j in range(c.shape[0]):
        cj = c[j]
        if cj > 0:
            dt = now - stamp[j]
            area_c[j] += cj * dt
            area_P[j] += _getp(j, cj, pi, tab, win, winbase) * dt
        stamp[j] = now
    maxtime[si[S_TOP]] += now - sf[T_TOPSINCE]
    sf[T_TOPSINCE] = now
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
            cj = c[j] if j < c.shape[0] else 0
            if j < k:
                shorter = float(n - cj)
                bad = 1 if (shorter < lo[j] or shorter > hi[j]) else 0
            else:
                bad = 1 if cj > 0 else 0
            gbad[j] = bad
            v += bad
    si[S_VIOL] = v


# ----------------------------------------------------------------- the profile kernel
@njit(cache=True)
def _change(j, new, pold, now, c, stamp, area_c, area_P, k, n, lo, hi, gbad, viol, good_since, good_time):
    """Set ``c[j] = new`` at time ``now``: close the lazy integrals of level index ``j``
    (``pold`` = P at the old count) and update good-set membership (MODEL.md §5).
    Returns the updated ``(viol, good_since, good_time)``."""
    dt = now - stamp[j]
    area_c[j] += c[j] * dt
    area_P[j] += pold * dt
    stamp[j] = now
    c[j] = new
    if k > 0 and j <= k:
        if j < k:
            shorter = float(n - new)
            bad = 1 if (shorter < lo[j] or shorter > hi[j]) else 0
        else:
            bad = 1 if new > 0 else 0
        if bad != gbad[j]:
            gbad[j] = bad
            if viol == 0:
                good_time += now - good_since
            viol += 1 if bad else -1
            if viol == 0:
                good_since = now
    return viol, good_since, good_time


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
    top = si[S_TOP]
    total = si[S_TOTAL]
    viol = si[S_VIOL]
    now = sf[T_NOW]
    t_next = sf[T_NEXT]
    top_since = sf[T_TOPSINCE]
    good_since = sf[T_GOODSINCE]
    good_time = sf[T_GOODTIME]
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
            if not _record_until(t_next if t_next <= t_stop else t_stop, c, rec_t, rec_c, rec_max, rec_tot,
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
                maxtime[top] += now - top_since
                top_since = now
                top += 1
            viol, good_since, good_time = _change(j, c[j] + 1, pold, now, c, stamp, area_c, area_P, k, n,
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
                viol, good_since, good_time = _change(lv, old - 1, pold, now, c, stamp, area_c, area_P, k, n,
                                                      lo, hi, gbad, viol, good_since, good_time)
                if old == 1:
                    maxtime[top] += now - top_since
                    top_since = now
                    top = lv
                total -= 1
        if cont:
            t_next = now - math.log(1.0 - next_double(s)) / rate
        else:
            t_next = now + 1.0
        events += 1
    si[S_TOP] = top
    si[S_TOTAL] = total
    si[S_VIOL] = viol
    sf[T_NOW] = now
    sf[T_NEXT] = t_next
    sf[T_TOPSINCE] = top_since
    sf[T_GOODSINCE] = good_since
    sf[T_GOODTIME] = good_time
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
    top = si[S_TOP]
    total = si[S_TOTAL]
    viol = si[S_VIOL]
    now = sf[T_NOW]
    t_next = sf[T_NEXT]
    top_since = sf[T_TOPSINCE]
    good_since = sf[T_GOODSINCE]
    good_time = sf[T_GOODTIME]
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
    for i in range(top):
        pc[i] = tabf[i * tstride + c[i] - tbase[i]]
    # discrete time: the events before the horizon or the next record are known in advance
    budget = max_events
    if not cont:
        if t_stop - now < budget:
            budget = np.int64(math.floor(t_stop - now))
        if recording and next_rec - now < budget:
            budget = np.int64(math.floor(next_rec - now))
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
        for i in range(top):
            ja += np.int64(pc[i] > U)
            jd += np.int64(c[i] > y)
        j = ja if arr else jd - 1
        delta = 1 if arr else -1
        if (j < 0) | (j >= top - 1):
            # rare: an idle server (no departure), a new top level, or the top level
            if arr:
                if j == top:
                    maxtime[top] += now - top_since
                    top_since = now
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
                maxtime[top] += now - top_since
                top_since = now
                top = j
        old = c[j]
        pold = pc[j]
        new = old + delta
        total += delta
        # lazy time integrals of level j (MODEL.md §2 measurements)
        dt = now - stamp[j]
        area_c[j] += old * dt
        area_P[j] += pold * dt
        stamp[j] = now
        c[j] = new
        if new > 0:
            pc[j] = tabf[j * tstride + new - tbase[j]]
        else:
            pc[j] = 0.0
        # good set N^ε, clauses (a) and (b) (MODEL.md §5)
        if j <= k:
            if j < k:
                sh = n - new
                bad = np.int64(sh < loi[j]) | np.int64(sh > hii[j])
            else:
                bad = np.int64(new > 0)
            if bad != gbad[j]:
                gbad[j] = bad
                if viol == 0:
                    good_time += now - good_since
                viol += 2 * bad - 1
                if viol == 0:
                    good_since = now
        if windowed:
            off = new - tbase[j]
            if (off < 1 and tbase[j] > 0) or (off > WIN - 2 and tbase[j] + WIN - 1 < n):
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
    si[S_TOP] = top
    si[S_TOTAL] = total
    si[S_VIOL] = viol
    sf[T_NOW] = now
    sf[T_NEXT] = t_next
    sf[T_TOPSINCE] = top_since
    sf[T_GOODSINCE] = good_since
    sf[T_GOODTIME] = good_time
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
        if off < 0 or off >= WIN or (off < 1 and base > 0) or (off > WIN - 2 and base + WIN - 1 < n):
            _rebuild_window(j, x, pi, win, winbase)


@njit(cache=True, nogil=True)
def profile_kernel(c, stamp, area_c, area_P, maxtime, tab, win, winbase, lo, hi, gbad,
                   rec_t, rec_c, rec_max, rec_tot, s, pi, pf, si, sf, t_stop, max_events):
    """Run the profile chain (MODEL.md §2) until time ``t_stop`` or ``max_events`` events.

    Returns ``(events, status)``: status 0 reached ``t_stop``, 1 did ``max_events``, 2 needs
    more level capacity (grow the level arrays and call again), 3 the record buffer is full.
    The hot loop (:func:`_profile_fast`) counts the joined and departing lengths without
    branches over the occupied levels (``c`` is non-increasing, so a count equals the scan
    of MODEL.md §2); unusual states go through :func:`_profile_general`.
    """
    full = pi[I_FULL] != 0
    windowed = not full
    if full:
        tabf = tab
        tbase = np.zeros(c.shape[0], np.int64)
        tstride = 0
    else:
        tabf = win.reshape(-1)
        tbase = winbase
        tstride = WIN
    # integer bounds of clause (b): lo <= shorter <= hi  <=>  ceil(lo) <= shorter <= floor(hi)
    kk = pi[I_K]
    loi = np.empty(max(kk, 1), np.int64)
    hii = np.empty(max(kk, 1), np.int64)
    for j in range(kk):
        loi[j] = np.int64(math.ceil(lo[j]))
        hii[j] = np.int64(math.floor(hi[j]))
    recording = pf[F_REC] > 0.0
    events = 0
    while True:
        left = max_events - events
        if left <= 0:
            return events, STATUS_EVENTS
        top = si[S_TOP]
        if top + 2 > c.shape[0]:
            return events, STATUS_GROW
        t_next = sf[T_NEXT]
        t_until = t_next if t_next <= t_stop else t_stop
        if recording and sf[T_NEXTREC] < t_until:
            if not _record_until(t_until, c, rec_t, rec_c, rec_max, rec_tot, pf, pi, si, sf):
                return events, STATUS_RECFULL
        if t_next > t_stop:
            sf[T_NOW] = t_stop
            return events, STATUS_DONE
        if windowed:
            if top >= LW - 1:
                ev, st = _profile_general(c, stamp, area_c, area_P, maxtime, tab, win, winbase, lo, hi, gbad,
                                          rec_t, rec_c, rec_max, rec_tot, s, pi, pf, si, sf, t_stop,
                                          min(left, 4096))
                events += ev
                if st == STATUS_GROW or st == STATUS_RECFULL or st == STATUS_DONE:
                    return events, st
                continue
            _refresh_windows(c, top, pi, win, winbase)
        ev, st = _profile_fast(c, stamp, area_c, area_P, maxtime, tabf, tbase, tstride, windowed, loi, hii,
                               gbad, s, pi, pf, si, sf, t_stop, left)
        events += ev
        if st == STATUS_DONE or st == STATUS_GROW:
            return events, st
