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
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .measure import (
    F_PARR, F_RATE, F_REC, I_CONT, I_D, I_K, I_N, I_REP, LW, S_TOP, S_TOTAL, STATUS_DONE, STATUS_EVENTS,
    STATUS_GROW, STATUS_RECFULL, T_NEXT, T_NEXTREC, T_NOW, _GO_ON, _ST_WINDOW, chunk_gate, clause_ints, close_level,
    close_top, fast_gate, fast_tables, good_step, is_final, record_until, set_level, set_top, state_load,
    state_store, window_edge,
)
from .profile import _getp, _refresh_windows
from .rng import next_below, next_double

__all__ = ["queues_kernel", "bitset_words", "MAX_N"]

MAX_N = 2**31 - 1


def bitset_words(n: int, replace: bool) -> int:
    """Words of the scratch bit set (only sampling without replacement needs one)."""
    return 1 if replace else (n + 63) // 64


@njit(cache=True, nogil=True)
def _queues_general(x, bits, scratch, c, stamp, area_c, area_P, maxtime, tab, win, winbase, lo, hi, gbad,
                    rec_t, rec_c, rec_max, rec_tot, s, pi, pf, si, sf, t_stop, max_events):
    """The per-queue chain for any state (used by :func:`queues_kernel` off the fast path)."""
    n = pi[I_N]
    d = pi[I_D]
    rep = pi[I_REP] != 0
    cont = pi[I_CONT] != 0
    p_arr = pf[F_PARR]
    rate = pf[F_RATE]
    L = c.shape[0]
    recording = pf[F_REC] > 0.0
    small = scratch.shape[0] >= d
    one = np.uint64(1)
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
            if recording and not record_until(t_stop, c, rec_t, rec_c, rec_max, rec_tot, pf, pi, si, sf):
                status = STATUS_RECFULL
                break
            sf[T_NOW] = t_stop
            break
        if recording and not record_until(t_next, c, rec_t, rec_c, rec_max, rec_tot, pf, pi, si, sf):
            status = STATUS_RECFULL
            break
        now = t_next
        sf[T_NOW] = now
        u = next_double(s)
        if u < p_arr:
            # the code of _join, kept inline: a call with four array arguments per arrival
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
                set_top(top + 1, now, maxtime, si, sf)
            else:
                pold = _getp(ell, c[ell], pi, tab, win, winbase)
            set_level(ell, c[ell] + 1, pold, now, c, stamp, area_c, area_P, pi, lo, hi, gbad, si, sf)
            si[S_TOTAL] += 1
        else:
            K = next_below(s, n)
            ell = np.int64(x[K])
            if ell > 0:
                x[K] = np.int32(ell - 1)
                lv = ell - 1
                old = c[lv]
                pold = _getp(lv, old, pi, tab, win, winbase)
                set_level(lv, old - 1, pold, now, c, stamp, area_c, area_P, pi, lo, hi, gbad, si, sf)
                if old == 1:
                    set_top(lv, now, maxtime, si, sf)
                si[S_TOTAL] -= 1
        if cont:
            v = 1.0 - next_double(s)
            sf[T_NEXT] = now - math.log(v) / rate
        else:
            sf[T_NEXT] = now + 1.0
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
def _queues_fast(x, bits, scratch, c, stamp, area_c, area_P, maxtime, tabf, tbase, tstride, windowed, loi, hii,
                 gbad, s, pi, pf, si, sf, t_stop, max_events):
    """Hot loop of the per-queue chain (same structure as ``profile._profile_fast``)."""
    n = pi[I_N]
    d = pi[I_D]
    rep = pi[I_REP] != 0
    k = pi[I_K] if pi[I_K] > 0 else -1
    cont = pi[I_CONT] != 0
    p_arr = pf[F_PARR]
    inv_rate = 1.0 / pf[F_RATE]
    L = c.shape[0]
    recording = pf[F_REC] > 0.0
    next_rec = sf[T_NEXTREC]
    top, total, viol, now, t_next, top_since, good_since, good_time = state_load(si, sf)
    events = 0
    while True:
        status = fast_gate(events, max_events, top, L, windowed, recording, next_rec, t_next, t_stop)
        if status != _GO_ON:
            if status == STATUS_DONE:
                now = t_stop
            break
        now = t_next
        u = next_double(s)
        if u < p_arr:
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
                    status = _ST_WINDOW
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
            gbad[j], viol, good_since, good_time = good_step(j, k, new, n, loi[j], hii[j], gbad[j], now, viol,
                                                             good_since, good_time)
        if windowed and window_edge(new, tbase[j], n):
            status = _ST_WINDOW
        t_next = now + (1.0 if not cont else -math.log(1.0 - next_double(s)) * inv_rate)
        events += 1
        if status == _ST_WINDOW:
            break
    state_store(si, sf, top, total, viol, now, t_next, top_since, good_since, good_time)
    return events, status


@njit(cache=True, nogil=True)
def queues_kernel(x, bits, scratch, c, stamp, area_c, area_P, maxtime, tab, win, winbase, lo, hi, gbad,
                  rec_t, rec_c, rec_max, rec_tot, s, pi, pf, si, sf, t_stop, max_events):
    """Run the per-queue chain until time ``t_stop`` or ``max_events`` events (see
    :func:`.profile.profile_kernel` for the arguments and the return value); ``x`` holds
    the queue lengths, ``bits`` a zeroed bit set of ``n`` bits (``replace=False``) and
    ``scratch`` room for ``d`` indices when ``d < n/64``."""
    tabf, tbase, tstride, windowed = fast_tables(c, tab, win, winbase, pi)
    loi, hii = clause_ints(lo, hi, pi[I_K])
    events = 0
    while True:
        st = chunk_gate(max_events - events, c, rec_t, rec_c, rec_max, rec_tot, pf, pi, si, sf, t_stop)
        if st != _GO_ON:
            return events, st
        if windowed and si[S_TOP] >= LW - 1:
            ev, st = _queues_general(x, bits, scratch, c, stamp, area_c, area_P, maxtime, tab, win, winbase, lo, hi,
                                     gbad, rec_t, rec_c, rec_max, rec_tot, s, pi, pf, si, sf, t_stop,
                                     min(max_events - events, 4096))
        else:
            if windowed:
                _refresh_windows(c, si[S_TOP], pi, win, winbase)
            ev, st = _queues_fast(x, bits, scratch, c, stamp, area_c, area_P, maxtime, tabf, tbase, tstride,
                                  windowed, loi, hii, gbad, s, pi, pf, si, sf, t_stop, max_events - events)
        events += ev
        if is_final(st):
            return events, st
