"""The count chain with server classes and phase-type service (docs/model.md §15.7).

State: ``N[k, ℓ, φ]`` = the number of class-``k`` servers of length ``ℓ >= 1`` whose customer
in service is in phase ``φ`` (row ``ℓ = 0`` unused), ``c[k, i]`` = the number of class-``k``
servers with at least ``i`` customers (``c[k, 0] = n_k``), the totals ``C[i] = Σ_k c[k, i]``
and ``top``.  The model is the event engine's (docs/model.md §14): arrivals at rate ``nλ s̄``;
the joined length has the law of the one-class chain, ``P(ℓ >= i) = P_i(C)``
(:func:`.tables.p_rule`; ``jiq``: ``1{C_1 = n}·P_i``; ``jbt``: :func:`.tables.jbt_p`, which reads
``C_T`` too, evaluated from the totals at each arrival), the joined server is uniform among the
servers of length ``ℓ`` (its class ``k`` with probability ``(c[k, ℓ] − c[k, ℓ+1])/(C[ℓ] −
C[ℓ+1])``, its phase ``φ`` with probability ``N[k, ℓ, φ]/(c[k, ℓ] − c[k, ℓ+1])``; at an idle
server the customer starts in phase ``φ ~ α``); a class-``k`` server in phase ``φ`` moves to
``ψ`` at rate ``s_k T[φ, ψ]`` and completes at rate ``s_k t0_φ``, after which the next customer,
if any, starts in phase ``~ α``.

Uniformization [classical] at rate ``Λ = nλ s̄ + μ̂ Σ_k n_k s_k`` (``μ̂ = max_φ −T[φ, φ]``): an
arrival with probability ``nλ s̄/Λ``; otherwise a uniform unit of capacity picks the class
``k`` (in proportion to ``n_k s_k``) and a uniform class-``k`` server; if it is busy in phase
``φ``, with probability ``−T[φ, φ]/μ̂`` it has a phase event (a move to ``ψ`` with probability
``T[φ, ψ]/(−T[φ, φ])``, a completion with ``t0_φ/(−T[φ, φ])``).  Time is the event count over
``Λ``.  Measurements: ``area[k, i] = Σ over events of c[k, i]`` (lazy, ``stamp``), as in
:mod:`.classes`; ``joined[k, ℓ, φ]``, the arrivals by the class, length and phase they join
(docs/model.md §15.9), counted without a draw.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .classes import _p, close_areas  # close_areas: the same per-class level sums
from .rng import step_double
from .tables import BAD_RULE, JBT, JIQ, JSQ, JSQ_D, RANDOM, jbt_p

__all__ = ["classes_phase_kernel", "close_areas", "DONE", "GROW", "BAD_RULE"]

DONE, GROW = 0, 1


@njit(cache=True, inline="always")
def _bump_c(c, area, stamp, k, i, delta, ev):
    area[k, i] += c[k, i] * (ev - stamp[k, i])
    stamp[k, i] = ev
    c[k, i] += delta


@njit(cache=True, nogil=True)
def classes_phase_kernel(
    N: np.ndarray,
    c: np.ndarray,
    C: np.ndarray,
    area: np.ndarray,
    stamp: np.ndarray,
    joined: np.ndarray,
    s: np.ndarray,
    cfg: np.ndarray,
    caps: np.ndarray,
    speeds: np.ndarray,
    alpha_cum: np.ndarray,
    move_cum: np.ndarray,
    p_arr: float,
    mu_hat: float,
    state: np.ndarray,
    max_events: int,
) -> int:
    """Run ``max_events`` events (:data:`DONE`) or stop before one when a queue is at the last
    level kept (:data:`GROW`; nothing drawn).  ``cfg = [n, d, replace, policy]``; ``caps[k] =
    Σ_{k' <= k} n_k' s_k'``, ``speeds[k] = s_k``; ``alpha_cum`` the cumulative ``α``; ``move_cum[k, φ, :]`` the
    cumulative rates of class ``k`` in phase ``φ`` (moves to phases ``0..K−1``, 0 for itself,
    then completion; the last column ``s_k·(−T[φ, φ])``); ``p_arr = nλ s̄/Λ``; ``mu_hat``;
    ``state = [top, events]``; ``joined[k, ℓ, φ]`` (int64, the shape of ``N``) counts the arrivals
    that join a class-``k`` server of length ``ℓ`` in phase ``φ`` (``ℓ = 0``: the phase its own
    service starts in), with no draw."""
    Kc, L, K = N.shape
    n = cfg[0]
    d = cfg[1]
    rep = cfg[2] != 0
    pol = cfg[3]
    top = state[0]
    ev = state[1]
    total_cap = caps[Kc - 1]
    r0, r1, r2, r3 = s[0], s[1], s[2], s[3]
    done = 0
    while done < max_events:
        if top + 2 > L:
            s[0], s[1], s[2], s[3] = r0, r1, r2, r3
            state[0] = top
            state[1] = ev
            return GROW
        x, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
        if x < p_arr:
            # arrival: the joined length from the pooled counts
            U = x / p_arr
            ell = 0
            if pol == JSQ:
                while ell < top and C[ell + 1] == n:
                    ell += 1
            elif pol == JIQ and C[1] < n:
                ell = 0
            elif pol == JSQ_D or pol == RANDOM or pol == JIQ:  # noqa: SIM109 (numba: plain comparisons)
                while ell < top and _p(pol, C[ell + 1], n, d, rep) > U:
                    ell += 1
            elif pol == JBT:  # P_i reads C_T too (T = d): evaluated from the totals, non-increasing in i
                while ell < top and jbt_p(C[1:], ell, n, d) > U:
                    ell += 1
            else:  # an unknown code: refused, never run as another rule
                s[0], s[1], s[2], s[3] = r0, r1, r2, r3
                state[0] = top
                state[1] = ev
                return BAD_RULE
            # the joined server: uniform among those of length ℓ (class, then phase)
            v, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
            y = v * (C[ell] - C[ell + 1])
            k = 0
            acc = c[0, ell] - c[0, ell + 1]
            while k < Kc - 1 and acc <= y:
                k += 1
                acc += c[k, ell] - c[k, ell + 1]
            w, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
            if ell == 0:
                ph = 0
                while ph < K - 1 and alpha_cum[ph] <= w:
                    ph += 1
            else:
                z = w * (c[k, ell] - c[k, ell + 1])
                ph = 0
                acc = N[k, ell, 0]
                while ph < K - 1 and acc <= z:
                    ph += 1
                    acc += N[k, ell, ph]
                N[k, ell, ph] -= 1
            joined[k, ell, ph] += 1  # what this arrival joins (its sojourn's law, §15.9)
            N[k, ell + 1, ph] += 1
            j = ell + 1
            _bump_c(c, area, stamp, k, j, 1, ev)
            C[j] += 1
            if j > top:
                top = j
        else:
            # a uniform unit of capacity: its class, then a uniform server of the class
            y = (x - p_arr) / (1.0 - p_arr) * total_cap
            k = 0
            while k < Kc - 1 and caps[k] <= y:
                k += 1
            lo = caps[k - 1] if k > 0 else 0.0
            z = (y - lo) / (caps[k] - lo) * c[k, 0]  # uniform in [0, n_k)
            if z < c[k, 1]:
                # a busy server: its length ℓ (c[k, ℓ+1] <= z < c[k, ℓ]), then its phase
                ell = 1
                while ell < top and c[k, ell + 1] > z:
                    ell += 1
                zz = z - c[k, ell + 1]
                ph = 0
                acc = N[k, ell, 0]
                while ph < K - 1 and acc <= zz:
                    ph += 1
                    acc += N[k, ell, ph]
                v, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
                q = v * speeds[k] * mu_hat  # uniform on [0, s_k μ̂): a phase event below s_k μ_φ
                if q < move_cum[k, ph, K]:
                    to = 0
                    while to < K and move_cum[k, ph, to] <= q:
                        to += 1
                    N[k, ell, ph] -= 1
                    if to < K:
                        N[k, ell, to] += 1  # phase move
                    else:
                        if ell >= 2:  # the next customer starts in a phase ~ α
                            w, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
                            nph = 0
                            while nph < K - 1 and alpha_cum[nph] <= w:
                                nph += 1
                            N[k, ell - 1, nph] += 1
                        _bump_c(c, area, stamp, k, ell, -1, ev)
                        C[ell] -= 1
                        if C[ell] == 0 and ell == top:
                            top = ell - 1
        ev += 1
        done += 1
    s[0], s[1], s[2], s[3] = r0, r1, r2, r3
    state[0] = top
    state[1] = ev
    return DONE
