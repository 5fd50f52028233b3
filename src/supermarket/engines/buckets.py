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

Memory: one int32 queue identity per server (4 bytes per server).  ``perm`` says which
queue has which length at every moment, so per-queue questions (a tagged queue, final
lengths per server) are answered at the speed of the profile chain.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .measure import (
    F_PARR, F_RATE, F_REC, I_CONT, I_K, I_N, LW, S_TOP, S_TOTAL, STATUS_DONE, STATUS_EVENTS, STATUS_GROW,
    STATUS_RECFULL, T_NEXT, T_NEXTREC, T_NOW, _GO_ON, _ST_WINDOW, chunk_gate, clause_ints, close_level, close_top,
    fast_gate, fast_tables, good_step, is_final, record_until, set_level, set_top, state_load, state_store,
    window_edge,
)
from .profile import _getp, _refresh_windows
from .rng import next_below, next_double

__all__ = ["buckets_kernel", "lengths_by_queue", "MAX_N"]

MAX_N = 2**31 - 1


@njit(cache=True, inline="always")
def _swap(perm, a, b):
    """Exchange the queues at positions ``a`` and ``b``."""
    q = perm[a]
    perm[a] = perm[b]
    perm[b] = q


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
            _swap(perm, p, first)
            if j == top:
                pj = 0.0
                set_top(top + 1, now, maxtime, si, sf)
            set_level(j, first + 1, pj, now, c, stamp, area_c, area_P, pi, lo, hi, gbad, si, sf)
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
                _swap(perm, K, last)
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
            U = u * inv_p
            j = 0
            for i in range(top):
                j += np.int64(tabf[i * tstride + c[i] - tbase[i]] > U)
            old = c[j]
            end = n if j == 0 else c[j - 1]
            p = old + next_below(s, end - old)
            _swap(perm, p, old)
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
def buckets_kernel(perm, c, stamp, area_c, area_P, maxtime, tab, win, winbase, lo, hi, gbad,
                   rec_t, rec_c, rec_max, rec_tot, s, pi, pf, si, sf, t_stop, max_events):
    """Run the bucket chain until ``t_stop`` or ``max_events`` events (arguments and return
    value as :func:`.profile.profile_kernel`; ``perm`` = queue identities by position)."""
    tabf, tbase, tstride, windowed = fast_tables(c, tab, win, winbase, pi)
    loi, hii = clause_ints(lo, hi, pi[I_K])
    events = 0
    while True:
        st = chunk_gate(max_events - events, c, rec_t, rec_c, rec_max, rec_tot, pf, pi, si, sf, t_stop)
        if st != _GO_ON:
            return events, st
        if windowed and si[S_TOP] >= LW - 1:
            ev, st = _buckets_general(perm, c, stamp, area_c, area_P, maxtime, tab, win, winbase, lo, hi, gbad,
                                      rec_t, rec_c, rec_max, rec_tot, s, pi, pf, si, sf, t_stop,
                                      min(max_events - events, 4096))
        else:
            if windowed:
                _refresh_windows(c, si[S_TOP], pi, win, winbase)
            ev, st = _buckets_fast(perm, c, stamp, area_c, area_P, maxtime, tabf, tbase, tstride, windowed, loi,
                                   hii, gbad, s, pi, pf, si, sf, t_stop, max_events - events)
        events += ev
        if is_final(st):
            return events, st


def lengths_by_queue(perm: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Queue-lengths vector indexed by queue identity from the sorted arrangement."""
    n = perm.shape[0]
    out = np.zeros(n, dtype=np.int32)  # 4 bytes per server, like the engine's own arrays
    for i, ci in enumerate(counts, start=1):
        out[perm[:ci]] = i  # the ci longest positions have length >= i
    return out
