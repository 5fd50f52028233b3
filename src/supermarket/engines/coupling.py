"""Numba kernels for copies of the profile chain driven by the sorted coupling (docs/model.md §2).

Every copy is a counts vector ``c_i = #{queues with length >= i}`` stored from level 1
(``c[m, 0] = c_1`` of copy ``m``), with ``top[m]`` the highest occupied level.  Queues are
named by their position ``1..n`` in the sorted order, longest first; the queue at position
``p`` has length ``#{i >= 1 : c_i >= p}`` (a binary search over the occupied levels, so an
event costs ``O(M log top)`` for ``M`` copies, independent of ``n`` and ``d``).

One step of the uniformized chain (docs/model.md §1), the same random numbers for every copy:

- with probability ``λ/(1+λ)`` an arrival: one position ``p`` with the law of the largest
  of ``d`` uniform positions (``p = ⌈n U^{1/d}⌉`` with replacement; without replacement the
  least ``m`` with ``C(m,d)/C(n,d) >= U``); every copy joins its queue at position ``p``
  (length ``ℓ``), i.e. ``c_{ℓ+1} += 1``;
- otherwise a potential departure at a uniform position ``K``: every copy whose queue at
  position ``K`` has length ``ℓ >= 1`` does ``c_ℓ -= 1``.

The L1 distance ``Σ_i |c_i − c'_i|`` of every copy to copy 0 (equal to the L1 distance of
the sorted queue-lengths vectors) is maintained incrementally; under this coupling it never
increases (Luczak–McDiarmid), and every increase is counted so that tests can check it.

Kernels take and return plain arrays; the friendly layer is :mod:`supermarket.mixing`.
Randomness: ``rng`` is a xoshiro256** state (``engines/rng.py``, 4 uint64 words) advanced in
place, so a run cut into chunks draws exactly the numbers of an uncut run; the kernels
release the GIL, so copies may run on threads.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .rng import next_double

__all__ = ["run_coupled", "flush_area", "STATUS_DONE", "STATUS_GROW", "STATUS_COALESCED"]

STATUS_DONE = 0  # the step budget of this call was used up
STATUS_GROW = 1  # a queue reached the last level of the arrays: grow them and call again
STATUS_COALESCED = 2  # every copy equals copy 0 (only with stop_when_coalesced)


@njit(cache=True, nogil=True)
def _length_at(c, m, top, p):
    """Length of the queue at sorted position ``p`` (1-based): ``#{i >= 1 : c_i >= p}``."""
    lo = 0  # c_lo >= p holds for lo (level 0 is "all queues")
    hi = top  # answer in [0, top]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if c[m, mid - 1] >= p:
            lo = mid
        else:
            hi = mid - 1
    return lo


@njit(cache=True, nogil=True)
def _log_choose(a, b):
    return math.lgamma(a + 1.0) - math.lgamma(b + 1.0) - math.lgamma(a - b + 1.0)


@njit(cache=True, nogil=True)
def _arrival_position(u, n, d, replace, log_cnd):
    """Largest of ``d`` uniform positions in ``1..n`` from one uniform ``u`` in (0, 1]."""
    if replace:
        # P(max <= m) = (m/n)^d  =>  max = ceil(n u^{1/d})
        p = int(math.ceil(n * math.exp(math.log(u) / d)))
    else:
        # P(max <= m) = C(m,d)/C(n,d): least m >= d with log C(m,d) - log C(n,d) >= log u.
        target = math.log(u) + log_cnd
        guess = int(math.ceil(n * math.exp(math.log(u) / d)))
        if guess < d:
            guess = d
        if guess > n:
            guess = n
        # exponential search around the guess, then bisection: O(log |error of guess|)
        if _log_choose(guess, d) >= target:
            hi = guess
            step = 1
            lo = guess - step
            while lo >= d and _log_choose(lo, d) >= target:
                hi = lo
                step *= 2
                lo = guess - step
            if lo < d - 1:
                lo = d - 1
        else:
            lo = guess
            step = 1
            hi = guess + step
            while hi < n and _log_choose(hi, d) < target:
                lo = hi
                step *= 2
                hi = guess + step
            if hi > n:
                hi = n
        # invariant: f(lo) < target (or lo = d-1), f(hi) >= target
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if _log_choose(mid, d) >= target:
                hi = mid
            else:
                lo = mid
        p = hi
    if p < 1:
        p = 1
    if p > n:
        p = n
    return p


@njit(cache=True, nogil=True)
def run_coupled(
    c: np.ndarray,
    top: np.ndarray,
    dist: np.ndarray,
    tau: np.ndarray,
    n: int,
    d: int,
    p_arrival: float,
    replace: bool,
    step0: int,
    max_steps: int,
    rng: np.ndarray,
    stop_when_coalesced: bool,
    area: np.ndarray,
    last: np.ndarray,
    top_time: np.ndarray,
    record_every: int,
    rec_total: np.ndarray,
    rec_dist: np.ndarray,
    rec_c: np.ndarray,
    rec_count: np.ndarray,
    check: bool,
) -> tuple[int, int, int, int]:
    """Advance ``M`` coupled copies by at most ``max_steps - step0`` steps.

    Arrays (modified in place):

    - ``c`` (M, L) int64 counts, ``top`` (M,) highest occupied level of each copy;
    - ``dist`` (M,) L1 distance of each copy to copy 0 (``dist[0] = 0``);
    - ``tau`` (M,) first step at which the copy equalled copy 0 (``-1``: not yet);
    - ``area`` (M, L) float64 running integral over steps of ``c_i`` and ``last`` (M, L)
      int64 the step of its last update (time averages; pass (M, 0) arrays to skip);
    - ``top_time`` (M, L+1) float64 steps spent with maximum queue length ``j`` (or (M, 0));
    - ``rec_total`` (M, T) int64 total customers and ``rec_dist`` (M, T) L1 distances at
      steps ``record_every, 2·record_every, …`` (``record_every = 0``: no records),
      ``rec_c`` (M, T, K) int64 the counts ``c_1..c_K`` at the same steps (K may be 0),
      ``rec_count`` (1,) the number of records written so far.

    ``rng``: xoshiro256** state, uint64[4] (advanced in place).
    ``check`` (debug mode): recompute every distance from scratch after each step.

    Returns ``(status, step, increases, mismatches)``: the STATUS_* code, the step reached,
    how often a distance to copy 0 increased (0 under a correct coupling) and, with
    ``check``, how often the incremental distance differed from the recomputed one.
    """
    M = c.shape[0]
    L = c.shape[1]
    track_area = area.shape[1] > 0
    track_top = top_time.shape[1] > 0
    T = rec_total.shape[1]
    if replace:
        log_cnd = 0.0
    else:
        log_cnd = _log_choose(n, d)
    lev = np.empty(M, dtype=np.int64)  # level changed in each copy this step (-1: none)
    increases = 0
    mismatches = 0
    step = step0
    while step < max_steps:
        if stop_when_coalesced:
            alive = False
            for m in range(1, M):
                if tau[m] < 0:
                    alive = True
                    break
            if not alive:
                return STATUS_COALESCED, step, increases, mismatches
        # an arrival may create level top+1 (index top): grow the arrays before drawing,
        # so that no random number is ever drawn and thrown away
        for m in range(M):
            if top[m] >= L:
                return STATUS_GROW, step, increases, mismatches
        arrival = next_double(rng) < p_arrival
        u = 1.0 - next_double(rng)  # in (0, 1]
        if arrival:
            p = _arrival_position(u, n, d, replace, log_cnd)
            delta = 1
            for m in range(M):
                lev[m] = _length_at(c, m, top[m], p)  # index of c_{ell+1}, < L (checked above)
        else:
            p = int(math.ceil(n * u))
            if p < 1:
                p = 1
            if p > n:
                p = n
            delta = -1
            for m in range(M):
                ell = _length_at(c, m, top[m], p)
                lev[m] = ell - 1  # index of c_ell, -1 when the queue is empty
        step += 1
        # distances to copy 0, from the values before this step's updates
        j0 = lev[0]
        for m in range(1, M):
            jm = lev[m]
            if jm == j0:
                continue
            change = 0
            if j0 >= 0:
                before = abs(c[m, j0] - c[0, j0])
                after = abs(c[m, j0] - (c[0, j0] + delta))
                change += after - before
            if jm >= 0:
                before = abs(c[m, jm] - c[0, jm])
                after = abs(c[m, jm] + delta - c[0, jm])
                change += after - before
            if change > 0:
                increases += 1
            dist[m] += change
        if track_top:
            # steps spent with each maximum queue length (state before this step)
            for m in range(M):
                top_time[m, top[m]] += 1.0
        # apply the updates
        for m in range(M):
            j = lev[m]
            if j < 0:
                continue
            if track_area:
                # c_j held its value in the states last[m, j] .. step-1
                area[m, j] += c[m, j] * float(step - last[m, j])
                last[m, j] = step
            c[m, j] += delta
            if delta > 0:
                if j + 1 > top[m]:
                    top[m] = j + 1
            elif c[m, j] == 0 and j + 1 == top[m]:
                top[m] = j
        for m in range(1, M):
            if tau[m] < 0 and dist[m] == 0:
                tau[m] = step
        if check:
            for m in range(1, M):
                s = 0
                for i in range(L):
                    s += abs(c[m, i] - c[0, i])
                if s != dist[m]:
                    mismatches += 1
        if record_every > 0 and step % record_every == 0:
            r = rec_count[0]
            if r < T:
                for m in range(M):
                    tot = 0
                    for i in range(top[m]):
                        tot += c[m, i]
                    rec_total[m, r] = tot
                    rec_dist[m, r] = dist[m]
                    for i in range(rec_c.shape[2]):
                        rec_c[m, r, i] = c[m, i] if i < L else 0
                rec_count[0] = r + 1
    return STATUS_DONE, step, increases, mismatches


@njit(cache=True, nogil=True)
def flush_area(c: np.ndarray, area: np.ndarray, last: np.ndarray, step: int) -> None:
    """Close the running integrals at ``step``: afterwards ``area[m, i]`` is the sum of
    ``c_{i+1}`` over the states ``step0 .. step-1`` of copy ``m``."""
    for m in range(c.shape[0]):
        for i in range(c.shape[1]):
            area[m, i] += c[m, i] * float(step - last[m, i])
            last[m, i] = step
