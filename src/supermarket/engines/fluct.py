"""Continuous-time profile chain recording the scaled, centred coordinates of paper 002.

One numba kernel, :func:`fluct_ctmc`, runs the counts chain ``c_i = #{queues >= i}`` of
docs/model.md §2 in continuous time (docs/model.md §1: arrivals at rate ``nλ``, each busy server
completes at rate 1), exact in law: from state ``c`` the next event comes after an
``Exp(nλ + c_1)`` holding time and is an arrival with probability ``nλ/(nλ + c_1)``.

- An arrival joins a queue of length exactly ``ℓ`` with probability ``P_ℓ − P_{ℓ+1}``
  (``P_0 = 1``, ``P_i`` = probability that all ``d`` sampled queues have length ``>= i``):
  with ``V`` uniform, ``ℓ = max{i : P_i > V}``.  ``P_i`` is read from a table ``logp[c_i]``
  built by the caller: ``d·log(c/n)`` with replacement, ``log C(c,d) − log C(n,d)``
  without (docs/model.md §2).
- A departure picks a busy server uniformly, i.e. position ``K`` uniform in ``1..c_1`` of
  the queues sorted longest first; its length is ``#{i : c_i >= K}``; ``c_ℓ −= 1``.

Instead of storing the trajectory, the kernel integrates over time (weights = holding
times) the five functionals ``Z1, Z2, Z1², Z2², Z1·Z2`` of
``Z_j = (c_j − n m_j)/√n = √n(G_j − m_j)`` in each of ``n_batches`` equal time batches after
the burn-in (batch means give the standard errors), and writes ``(Z1, Z2)`` at the points of
a time grid (for autocorrelations, histograms and sample paths).  Memory does not grow with
the number of events.

Randomness: a xoshiro256** state (``engines/rng.py``, 4 uint64 words) owned by the caller
and advanced in place; the kernel stops after ``max_events`` events and resumes from
``clock`` (time, next grid index) without changing a single number, so a run can be cut
into bounded chunks (Ctrl-C, progress) and run on any thread: the stream depends only on
the state, never on a global generator.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .rng import next_double

__all__ = ["fluct_ctmc", "OVERFLOW", "DONE", "MORE"]

OVERFLOW = -1  # return code: a queue grew past the level capacity of ``counts``
DONE = 0  # the run reached burn_in + horizon
MORE = 1  # max_events events done: call again with the same arrays to go on


@njit(cache=True, nogil=True)
def _log_p(c, n, d, replace, logp, lgn):
    """``log P`` for a level holding ``c`` queues: from the table when it has ``n + 1``
    entries, else computed (``lgn = log C(n, d)`` without replacement)."""
    if logp.shape[0] > 0:
        return logp[c]
    if c <= 0 or (not replace and c < d):
        return -np.inf
    if replace:
        return d * math.log(c / n)
    return math.lgamma(c + 1.0) - math.lgamma(c - d + 1.0) - math.lgamma(d + 1.0) - lgn


@njit(cache=True, nogil=True)
def fluct_ctmc(
    n: int,
    lam: float,
    logp: np.ndarray,
    counts: np.ndarray,
    m1: float,
    m2: float,
    burn_in: float,
    horizon: float,
    n_batches: int,
    grid_dt: float,
    rng: np.ndarray,
    batch_sums: np.ndarray,
    grid: np.ndarray,
    d: int,
    replace: bool,
    lgn: float,
    clock: np.ndarray,
    max_events: int,
) -> int:
    """Run the chain from time ``clock[0]`` towards ``burn_in + horizon``; return
    ``DONE``, ``MORE`` (``max_events`` events done; call again) or ``OVERFLOW``.

    ``counts``: int64 array, ``counts[0] = n``, ``counts[i] = c_i``; updated in place.  Its
    length is the level capacity.  ``logp``: float64[n+1], ``log P`` for a level holding
    ``c`` queues (``-inf`` for 0); or empty, and then ``log P`` is computed from ``d``,
    ``replace`` and ``lgn = log C(n, d)``.  ``rng``: xoshiro256** state (advanced).
    ``batch_sums``: float64[n_batches, 5], *added to*: the time integrals over each batch
    of ``Z1, Z2, Z1², Z2², Z1·Z2`` (zero it before the first call).  ``grid``:
    float64[G, 2], ``(Z1, Z2)`` at times ``burn_in + k·grid_dt``.  ``clock``: float64[3],
    ``(t, next grid index, events so far)``, zero before the first call.
    """
    L = counts.shape[0]
    sq = math.sqrt(n)
    nm1 = n * m1
    nm2 = n * m2
    arr_rate = n * lam
    t = clock[0]
    k = int(clock[1])
    t_end = burn_in + horizon
    tb = horizon / n_batches
    G = grid.shape[0]
    next_grid = burn_in + k * grid_dt
    done = 0
    status = MORE
    while done < max_events:
        c1 = counts[1]
        rate = arr_rate + c1
        tau = -math.log(1.0 - next_double(rng)) / rate
        t_next = t + tau
        if t_next > burn_in:
            z1 = (c1 - nm1) / sq
            z2 = (counts[2] - nm2) / sq
            s = t if t > burn_in else burn_in
            e = t_next if t_next < t_end else t_end
            while s < e:
                b = int((s - burn_in) / tb)
                if b > n_batches - 1:
                    b = n_batches - 1
                while b < n_batches - 1 and burn_in + (b + 1) * tb <= s:
                    b += 1  # floating-point rounding at a batch boundary
                if b == n_batches - 1:
                    pe = e
                else:
                    be = burn_in + (b + 1) * tb
                    pe = e if e < be else be
                w = pe - s
                batch_sums[b, 0] += w * z1
                batch_sums[b, 1] += w * z2
                batch_sums[b, 2] += w * z1 * z1
                batch_sums[b, 3] += w * z2 * z2
                batch_sums[b, 4] += w * z1 * z2
                s = pe
            while k < G and next_grid < t_next:
                grid[k, 0] = z1
                grid[k, 1] = z2
                k += 1
                next_grid = burn_in + k * grid_dt
        if t_next >= t_end:
            t = t_end
            status = DONE
            break
        t = t_next
        done += 1
        if next_double(rng) * rate < arr_rate:
            logv = math.log(1.0 - next_double(rng))
            ell = 0
            while ell + 1 < L and counts[ell + 1] > 0 and _log_p(counts[ell + 1], n, d, replace, logp, lgn) > logv:
                ell += 1
            if ell + 1 >= L:
                status = OVERFLOW
                break
            counts[ell + 1] += 1
        else:
            kq = 1 + int(next_double(rng) * c1)
            if kq > c1:
                kq = c1
            ell = 1
            while ell + 1 < L and counts[ell + 1] >= kq:
                ell += 1
            counts[ell] -= 1
    clock[0] = t
    clock[1] = k
    clock[2] += done
    return status
