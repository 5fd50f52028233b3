"""Per-queue state with O(1) work per event (MODEL.md §2, "buckets").

Queues are kept in an array ``perm`` sorted by length, longest first: position ``p``
(0-based) holds a queue of length ``#{i : c_i > p}``, so the queues of length exactly ``ℓ``
occupy the block of positions ``[c_{ℓ+1}, c_ℓ)`` (with ``c_0 = n``).  One step:

- arrival: the joined length ``ℓ`` is drawn from the profile as in :mod:`.profile`
  (``P(ℓ ≥ i) = P_i``); by exchangeability the joined queue is uniform among the queues of
  length ``ℓ`` (MODEL.md §2): a uniform position of the block, swapped to the block's first
  position, which then joins the block of length ``ℓ + 1`` (``c_{ℓ+1} += 1``);
- potential departure: a uniform position ``K``; its queue has length ``ℓ = #{i : c_i > K}``;
  if ``ℓ ≥ 1`` it is swapped to the last position of its block and ``c_ℓ −= 1``.

Memory: one int32 queue identity per server (4 bytes per server).  ``perm`` says which
queue has which length at every moment, so per-queue questions (a tagged queue, final
lengths per server) are answered at the speed of the profile chain.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .profile import (
    F_PARR, F_RATE, F_REC, I_CONT, I_FULL, I_K, I_N, LW, S_TOP, S_TOTAL, S_VIOL, STATUS_DONE, STATUS_EVENTS,
    STATUS_GROW, STATUS_RECFULL, T_GOODSINCE, T_GOODTIME, T_NEXT, T_NEXTREC, T_NOW, T_TOPSINCE, WIN,
    _ST_GENERAL, _ST_RECORD, _ST_WINDOW, _getp, _record_until, _refresh_windows, _set_level, _set_top,
)
from .rng import next_below, next_double

__all__ = ["buckets_kernel", "lengths_by_queue", "MAX_N"]

MAX_N = 2**31 - 1


@njit(cache=True, nogil=True)
def _buckets_general(perm, c, stamp, area_c, area_P, maxtime, tab, win, winbase, lo, hi, gbad,
                     rec_t, rec_c, rec_max, rec_tot, s, pi, pf, si, sf, t_stop, max_events):
    """The bucket chain for any state (used by :func:`buckets_kernel` off the fast path)."""
    n = pi[I_N]
    cont = pi[I_CONT] != 0
    p_arr = pf[F_PARR]
    rate = pf[F_RATE]
    L = c.shape[0]
    recording = pf[F_REC] > 0.0
    events = 0
    status = STATUS_DONE
    while True:
        if events >= max_events:
            status = STATUS_EVENTS
            break
        top = si[S_TOP]
        if top + 2 > L:
            status = STATUS_GROW
            break
        t_next = sf[T_NEXT]
        if t_next > t_stop:
            if recording and not _record_until(t_stop, c, rec_t, rec_c, rec_max, rec_tot, pf, pi, si, sf):
                status = STATUS_RECFULL
                break
            sf[T_NOW] = t_stop
            break
        if recording and not _record_until(t_next, c, rec_t, rec_c, rec_max, rec_tot, pf, pi, si, sf):
            status = STATUS_RECFULL
            break
        now = t_next
        sf[T_NOW] = now
        u = next_double(s)
        if u < p_arr:
            U = u / p_arr
            j = 0
            pj = 0.0
            while j < top:
                pj = _getp(j, c[j], pi, tab, win, winbase)
                if pj <= U:
                    break
                j += 1
            # block of length-j queues: positions [c[j], c[j-1]) with c[-1] := n
            first = c[j]
            end = n if j == 0 else c[j - 1]
            p = first + next_below(s, end - first)
            q = perm[p]
            perm[p] = perm[first]
            perm[first] = q
            if j == top:
                pj = 0.0
                _set_top(top + 1, now, maxtime, si, sf)
            _set_level(j, first + 1, pj, now, c, stamp, area_c, area_P, pi, lo, hi, gbad, si, sf)
            si[S_TOTAL] += 1
        else:
            K = next_below(s, n)
            j = 0
            while j < top and c[j] > K:
                j += 1
            if j > 0:
                lv = j - 1
                old = c[lv]
                last = old - 1
                q = perm[K]
                perm[K] = perm[last]
                perm[last] = q
                pold = _getp(lv, old, pi, tab, win, winbase)
                _set_level(lv, old - 1, pold, now, c, stamp, area_c, area_P, pi, lo, hi, gbad, si, sf)
                if old == 1:
                    _set_top(lv, now, maxtime, si, sf)
                si[S_TOTAL] -= 1
        if cont:
            v = 1.0 - next_double(s)
            sf[T_NEXT] = now - math.log(v) / rate
        else:
            sf[T_NEXT] = now + 1.0
        events += 1
    return events, status


@njit(cache=True, nogil=True)
def _buckets_fast(perm, c, stamp, area_c, area_P, maxtime, tabf, tbase, tstride, windowed, loi, hii, gbad, s,
                  pi, pf, si, sf, t_stop, max_events):
    """Hot loop of the bucket chain (same structure as ``profile._profile_fast``)."""
    n = pi[I_N]
    k = pi[I_K] if pi[I_K] > 0 else -1
    cont = pi[I_CONT] != 0
    p_arr = pf[F_PARR]
    inv_p = 1.0 / p_arr
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
    events = 0
    status = STATUS_DONE
    while True:
        if events >= max_events:
            status = STATUS_EVENTS
            break
        if top + 2 > L:
            status = STATUS_GROW
            break
        if windowed and top >= lw_top:
            status = _ST_GENERAL
            break
        if recording and next_rec < (t_next if t_next <= t_stop else t_stop):
            status = _ST_RECORD
            break
        if t_next > t_stop:
            now = t_stop
            status = STATUS_DONE
            break
        now = t_next
        u = next_double(s)
        if u < p_arr:
            U = u * inv_p
            j = 0
            for i in range(top):
                j += np.int64(tabf[i * tstride + c[i] - tbase[i]] > U)
            old = c[j]
            end = n if j == 0 else c[j - 1]
            p = old + next_below(s, end - old)
            q = perm[p]
            perm[p] = perm[old]
            perm[old] = q
            if j < top:
                pold = tabf[j * tstride + old - tbase[j]]
            else:
                pold = 0.0
                maxtime[top] += now - top_since
                top_since = now
                top += 1
                if windowed:
                    status = _ST_WINDOW
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
            q = perm[K]
            perm[K] = perm[last]
            perm[last] = q
            pold = tabf[j * tstride + old - tbase[j]]
            new = old - 1
            total -= 1
            if new == 0:
                maxtime[top] += now - top_since
                top_since = now
                top = j
        dt = now - stamp[j]
        area_c[j] += old * dt
        area_P[j] += pold * dt
        stamp[j] = now
        c[j] = new
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
        t_next = now + (1.0 if not cont else -math.log(1.0 - next_double(s)) * inv_rate)
        events += 1
        if status == _ST_WINDOW:
            break
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
def buckets_kernel(perm, c, stamp, area_c, area_P, maxtime, tab, win, winbase, lo, hi, gbad,
                   rec_t, rec_c, rec_max, rec_tot, s, pi, pf, si, sf, t_stop, max_events):
    """Run the bucket chain until ``t_stop`` or ``max_events`` events (arguments and return
    value as :func:`.profile.profile_kernel`; ``perm`` = queue identities by position)."""
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
                ev, st = _buckets_general(perm, c, stamp, area_c, area_P, maxtime, tab, win, winbase, lo, hi,
                                          gbad, rec_t, rec_c, rec_max, rec_tot, s, pi, pf, si, sf, t_stop,
                                          min(left, 4096))
                events += ev
                if st == STATUS_GROW or st == STATUS_RECFULL or st == STATUS_DONE:
                    return events, st
                continue
            _refresh_windows(c, top, pi, win, winbase)
        ev, st = _buckets_fast(perm, c, stamp, area_c, area_P, maxtime, tabf, tbase, tstride, windowed, loi, hii,
                               gbad, s, pi, pf, si, sf, t_stop, left)
        events += ev
        if st == STATUS_DONE or st == STATUS_GROW:
            return events, st


def lengths_by_queue(perm: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Queue-lengths vector indexed by queue identity from the sorted arrangement."""
    n = perm.shape[0]
    by_pos = np.zeros(n, dtype=np.int64)
    for ci in counts:
        by_pos[:ci] += 1
    out = np.empty(n, dtype=np.int64)
    out[perm] = by_pos
    return out
