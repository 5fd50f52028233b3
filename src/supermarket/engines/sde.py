"""Euler–Maruyama for the three limit diffusions of paper 002 (docs/model.md §8, derived).

One kernel, :func:`em_paths`, advances many independent paths of one of the limits with
step ``h`` (one Brownian motion, entering the first coordinate only):

- ``KIND_A`` (regime (a), ``p1 = κ``):
  ``dZ1 = (−(1+κ)Z1 + Z2)dt + √2 dW``, ``dZ2 = (κ Z1 − Z2)dt``;
- ``KIND_B`` (regime (b), ``p1 = c``, ``p2 = ζ``):
  ``dQ = (−ζ − Q + Y − e^{cQ})dt + √2 dW``, ``dY = (e^{cQ} − Y)dt``;
- ``KIND_C`` (regime (c), ``p2 = ζ``): reflected at ``Q <= 0`` by projection: the
  unconstrained step ``Q* = Q + (−ζ − Q + Y)h + √(2h)ξ`` is projected to ``min(Q*, 0)`` and
  the projected amount ``ΔU = max(Q*, 0)`` is added to ``Y``:
  ``Y ← Y + ΔU − Y h`` (``dY = dU − Y dt``).  Projection misses the excursions above 0
  inside a step, a bias of order ``√h`` in the pushing ``U``.  With ``bridge=True`` the
  amount pushed is instead the maximum of the free path over the step given its end points
  (a Brownian bridge, sampled exactly: ``M = (a + b + √((a−b)² − 4h log V))/2``), Lépingle's
  (1995) scheme, exact for reflected Brownian motion with drift frozen over the step.

After ``n_burn`` steps each path integrates (left-point rule, weight ``h``) the five
functionals ``Z1, Z2, Z1², Z2², Z1·Z2`` over ``n_steps`` steps; the per-path time averages
are independent across paths, which gives honest standard errors.  The first ``R`` paths
are also written every ``rec_every`` steps (autocorrelations, sample paths, histograms).

Note the scheme keeps the flow balance of the limits exactly: in all three, ``Q + Y``
(resp. ``Z1 + Z2``) has drift ``−ζ − Q`` (resp. ``−Z1``), so the stationary ``E Q = −ζ``
holds for the discrete scheme too, whatever ``h``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["em_paths", "KIND_A", "KIND_B", "KIND_C"]

KIND_A = 0
KIND_B = 1
KIND_C = 2


@njit(cache=True, nogil=True)
def em_paths(kind, p1, p2, z1_0, z2_0, h, n_burn, n_steps, rec_every, seed,
             path_sums, rec, max_q, bridge=False):
    """Advance ``path_sums.shape[0]`` paths from ``(z1_0, z2_0)``; fill the outputs.

    ``path_sums``: float64[P, 5] time integrals after burn-in; ``rec``: float64[R, G, 2]
    (``R <= P``, ``G <= n_steps // rec_every``); ``max_q``: float64[P], the largest first
    coordinate seen on each path (burn-in included).
    """
    np.random.seed(seed)
    P = path_sums.shape[0]
    R = rec.shape[0]
    G = rec.shape[1]
    sh = math.sqrt(2.0 * h)
    for p in range(P):
        z1 = z1_0
        z2 = z2_0
        mq = z1
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        s4 = 0.0
        g = 0
        for step in range(n_burn + n_steps):
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
            xi = np.random.standard_normal()
            if kind == KIND_A:
                n1 = z1 + (-(1.0 + p1) * z1 + z2) * h + sh * xi
                n2 = z2 + (p1 * z1 - z2) * h
            elif kind == KIND_B:
                ex = math.exp(p1 * z1)
                n1 = z1 + (-p2 - z1 + z2 - ex) * h + sh * xi
                n2 = z2 + (ex - z2) * h
            else:
                q = z1 + (-p2 - z1 + z2) * h + sh * xi
                if bridge:
                    # maximum of the free path over the step, given its end points
                    # (Brownian bridge with variance 2h): P(M > m) = exp(−(m−a)(m−b)/h)
                    v = 1.0 - np.random.random()
                    mx = 0.5 * (z1 + q + math.sqrt((z1 - q) ** 2 - 4.0 * h * math.log(v)))
                    du = mx if mx > 0.0 else 0.0
                else:
                    du = q if q > 0.0 else 0.0
                n1 = q - du
                n2 = z2 + du - z2 * h
            z1 = n1
            z2 = n2
            if z1 > mq:
                mq = z1
        path_sums[p, 0] = s0 * h
        path_sums[p, 1] = s1 * h
        path_sums[p, 2] = s2 * h
        path_sums[p, 3] = s3 * h
        path_sums[p, 4] = s4 * h
        max_q[p] = mq
