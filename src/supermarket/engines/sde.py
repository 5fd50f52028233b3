"""Euler–Maruyama for the limit and pre-limit diffusions of paper 002 (docs/model.md §8, derived).

One kernel, :func:`em_paths`, advances many independent paths of one diffusion with step
``h``.  ``par`` holds the coefficients:

- ``KIND_A`` (regime (a), ``par = [κ]``):
  ``dZ1 = (−(1+κ)Z1 + Z2)dt + √2 dW``, ``dZ2 = (κ Z1 − Z2)dt``;
- ``KIND_B`` (regime (b), ``par = [c, ζ]``):
  ``dQ = (−ζ − Q + Y − e^{cQ})dt + √2 dW``, ``dY = (e^{cQ} − Y)dt``;
- ``KIND_C`` (regime (c), ``par = [0, ζ, bridge]``): reflected at ``Q <= 0``:
  ``dQ = (−ζ − Q + Y)dt + √2 dW − dU``, ``dY = dU − Y dt``.  The free step
  ``Q* = Q + (−ζ − Q + Y)h + √(2h)ξ`` is followed by the push ``ΔU``, added to ``Y``:
  with ``bridge = 1`` (the default of the library) ``ΔU = max(M, 0)`` where ``M`` is the
  maximum of the free path over the step given its end points, sampled exactly from its
  Brownian bridge (``M = (a + b + √((a−b)² − 4h log V))/2``; Lépingle 1995), and
  ``Q ← Q* − ΔU``; with ``bridge = 0``, projection: ``ΔU = max(Q*, 0)``, which misses the
  excursions above 0 inside a step (a bias of order ``√h`` in ``U``);
- ``KIND_PRE`` (the pre-limit diffusion at finite ``n``, any regime in the ``(Q, Y)``
  coordinates; ``par = [√n, λ_n, c_n, ζ_n, d_n, n, replace, log(n!/(n−d_n)!), q_max]``):
  with ``G_1 = c_n + Q/√n``, ``A(Q) = λ_n √n P_n(G_1)`` (the scaled rate of arrivals that
  find every sampled queue busy),
  ``dQ = (−ζ_n − Q + Y − A(Q))dt + σ_1 dW_1``, ``σ_1² = λ_n(1 − P_n(G_1)) + G_1 − Y/√n``,
  ``dY = (A(Q) − Y)dt + σ_2 dW_2``, ``σ_2² = (A(Q) + Y)/√n``, and ``Q <= q_max = √n(1 − c_n)``
  (``G_1 <= 1``).  The term ``A`` is stiff when ``d_n/√n`` is large, so it is taken
  implicitly: ``Q_new + h A(Q_new) = Q*`` (safeguarded Newton; ``A`` increases with ``Q``),
  and the amount ``h A(Q_new)`` moves to ``Y``; a step beyond ``q_max`` is projected back
  and the excess also moves to ``Y``; ``Y`` is kept ``>= 0`` by reflection.

Each path integrates after ``n_burn`` steps (left-point rule) ``Z1, Z2, Z1², Z2², Z1·Z2``
(columns 3–7 of ``ps``, multiplied by ``h`` by the caller), and the pushes: ``Σ ΔU``
(column 8) and ``Σ Y ΔU`` (column 9, ``Y`` before the step) — in (c) ``U``, in the pre-limit
everything moved to ``Y`` by ``A`` and the wall.  The first ``R`` paths are written every
``rec_every`` steps.

Randomness: one xoshiro256** state per call (``engines/rng.py``), advanced in place;
paths are run in order and each keeps its progress in ``ps`` (column 10: steps done,
11: grid points written), so a call may stop after ``max_work`` steps and the next call
goes on with the very same numbers.

Note the scheme keeps the flow balance of the limits exactly: ``Q + Y`` (resp. ``Z1 + Z2``)
has drift ``−ζ − Q`` (resp. ``−Z1``), so the stationary ``E Q = −ζ`` holds for the discrete
scheme too, whatever ``h``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .rng import next_double, next_normal

__all__ = ["em_paths", "KIND_A", "KIND_B", "KIND_C", "KIND_PRE", "NS", "log_p_pre", "digamma"]

KIND_A = 0
KIND_B = 1
KIND_C = 2
KIND_PRE = 3
NS = 12  # columns of the per-path state array


@njit(cache=True, nogil=True)
def digamma(x: float) -> float:
    """ψ(x) for x > 0: recurrence up to 6, then the asymptotic series (error < 1e-13)."""
    r = 0.0
    while x < 6.0:
        r -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    return r + math.log(x) - 0.5 / x - f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f / 132))))


@njit(cache=True, nogil=True)
def log_p_pre(q: float, par: np.ndarray) -> tuple[float, float]:
    """``(log P_n(G_1), d log P_n/dQ)`` at ``G_1 = c_n + Q/√n`` (``-inf, 0`` where 0).

    With replacement ``P_n(x) = x^d``; without, ``C(nx, d)/C(n, d)`` continued in ``x`` by
    the Gamma function (docs/model.md §2, §8)."""
    sq = par[0]
    x = par[2] + q / sq
    if x > 1.0:
        x = 1.0
    d = par[4]
    n = par[5]
    if par[6] > 0.5:
        if x <= 0.0:
            return -np.inf, 0.0
        return d * math.log(x), d / (x * sq)
    m = n * x
    if m - d + 1.0 <= 0.0:
        return -np.inf, 0.0
    lp = math.lgamma(m + 1.0) - math.lgamma(m - d + 1.0) - par[7]
    return lp, (n / sq) * (digamma(m + 1.0) - digamma(m - d + 1.0))


@njit(cache=True, nogil=True)
def _implicit(q_pred, h, par):
    """Solve ``q + h A(q) = q_pred`` (``A = λ√n P_n``, increasing): safeguarded Newton."""
    a_sc = par[1] * par[0]
    lp, dl0 = log_p_pre(q_pred, par)
    if lp == -np.inf:
        return q_pred
    top = h * a_sc * math.exp(lp)
    if top * (1.0 + dl0) < 1e-3:
        # one Newton step from q_pred: F convex, so the error is below top³(dl² + dl')/2
        # (< 1e-9·top here): as good as the full solve, at the cost of one evaluation
        return q_pred - top / (1.0 + top * dl0)
    hi = q_pred  # F(hi) = h A(q_pred) >= 0
    lo = q_pred - top  # F(lo) = h (A(lo) − A(q_pred)) <= 0
    q = hi  # F is convex (A is log-convex): Newton from the right stays right of the root
    for _ in range(100):
        lp, dl = log_p_pre(q, par)
        a = h * a_sc * math.exp(lp) if lp != -np.inf else 0.0
        F = q + a - q_pred
        if F > 0.0:
            hi = q
        else:
            lo = q
        if abs(F) <= 1e-13 * (1.0 + abs(q_pred)) or hi - lo <= 1e-15 * (1.0 + abs(q)):
            return q
        dF = 1.0 + a * dl
        qn = q - F / dF
        if not (lo < qn < hi):
            qn = 0.5 * (lo + hi)
        q = qn
    return q


@njit(cache=True, nogil=True)
def em_paths(
    kind: int,
    par: np.ndarray,
    h: float,
    n_burn: int,
    n_steps: int,
    rec_every: int,
    rng: np.ndarray,
    ps: np.ndarray,
    rec: np.ndarray,
    max_work: int,
) -> int:
    """Advance the paths of ``ps`` (float64[P, NS]; columns 0, 1, 2: ``z1, z2``, max of
    ``z1`` — set by the caller — then the sums described in the module docstring) in order;
    stop after ``max_work`` steps.  Returns 1 when every path is done, else 0.

    ``rec``: float64[R, G, 2] (``R <= P``, ``G <= n_steps // rec_every``).
    """
    P = ps.shape[0]
    R = rec.shape[0]
    G = rec.shape[1]
    sh = math.sqrt(2.0 * h)
    total = n_burn + n_steps
    work = 0
    for p in range(P):
        step = int(ps[p, 10])
        if step >= total:
            continue
        z1 = ps[p, 0]
        z2 = ps[p, 1]
        mq = ps[p, 2]
        s0 = ps[p, 3]
        s1 = ps[p, 4]
        s2 = ps[p, 5]
        s3 = ps[p, 6]
        s4 = ps[p, 7]
        su = ps[p, 8]
        syu = ps[p, 9]
        g = int(ps[p, 11])
        while step < total and work < max_work:
            if step >= n_burn:
                j = step - n_burn
                s0 += z1
                s1 += z2
                s2 += z1 * z1
                s3 += z2 * z2
                s4 += z1 * z2
                if p < R and g < G and j % rec_every == 0:
                    rec[p, g, 0] = z1
                    rec[p, g, 1] = z2
                    g += 1
            du = 0.0
            if kind == KIND_A:
                xi = next_normal(rng)
                n1 = z1 + (-(1.0 + par[0]) * z1 + z2) * h + sh * xi
                n2 = z2 + (par[0] * z1 - z2) * h
            elif kind == KIND_B:
                xi = next_normal(rng)
                ex = math.exp(par[0] * z1)
                n1 = z1 + (-par[1] - z1 + z2 - ex) * h + sh * xi
                n2 = z2 + (ex - z2) * h
            elif kind == KIND_C:
                xi = next_normal(rng)
                q = z1 + (-par[1] - z1 + z2) * h + sh * xi
                if par[2] > 0.5:
                    # maximum of the free path over the step, given its end points
                    # (Brownian bridge with variance 2h): P(M > m) = exp(−(m−a)(m−b)/h)
                    v = 1.0 - next_double(rng)
                    mx = 0.5 * (z1 + q + math.sqrt((z1 - q) ** 2 - 4.0 * h * math.log(v)))
                    du = mx if mx > 0.0 else 0.0
                else:
                    du = q if q > 0.0 else 0.0
                n1 = q - du
                n2 = z2 + du - z2 * h
            else:
                sq = par[0]
                lam = par[1]
                xi = next_normal(rng)
                xi2 = next_normal(rng)
                lp, _ = log_p_pre(z1, par)
                P1 = math.exp(lp) if lp != -np.inf else 0.0
                x = par[2] + z1 / sq
                v1 = lam * (1.0 - P1) + x - z2 / sq
                v1 = v1 if v1 > 0.0 else 0.0
                v2 = (lam * sq * P1 + z2) / sq
                v2 = v2 if v2 > 0.0 else 0.0
                q_pred = z1 + (-par[3] - z1 + z2) * h + math.sqrt(v1 * h) * xi
                q = _implicit(q_pred, h, par)
                du = q_pred - q
                if q > par[8]:
                    du += q - par[8]
                    q = par[8]
                n1 = q
                n2 = z2 + du - z2 * h + math.sqrt(v2 * h) * xi2
                if n2 < 0.0:
                    n2 = -n2
            if step >= n_burn:
                su += du
                syu += z2 * du
            z1 = n1
            z2 = n2
            if z1 > mq:
                mq = z1
            step += 1
            work += 1
        state = (z1, z2, mq, s0, s1, s2, s3, s4, su, syu, float(step), float(g))  # the NS columns, as loaded
        for col in range(NS):
            ps[p, col] = state[col]
        if step < total:
            return 0
    return 1
