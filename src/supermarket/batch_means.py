"""The algebra of batch means (docs/model.md §9): the blocked series of a time series
(:func:`blocked_levels`), the factor by which the lag-1 autocorrelation of block means inflates
the variance of their mean (:func:`variance_factor`, with its second-order bias removed), and
the Satterthwaite degrees of freedom of the blocking variance (:func:`blocking_dof`).

:mod:`supermarket.stats` builds its error estimates from these; the simulation's fixed-block
estimator (``simulation.batch_errors``) reads them here.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

__all__ = ["blocked_levels", "blocking_dof", "variance_factor"]


def _block_rho(x: float) -> float:
    """Lag-1 correlation of block means of length ``xτ`` under ``e^{−t/τ}`` (docs/model.md §9)."""
    if x < 1e-6:
        return 1.0 - x / 3.0
    return math.expm1(-x) ** 2 / (2.0 * (x - 1.0 + math.exp(-x)))


def _block_factor(r: float) -> float:
    """``Var(mean)/(σ_block²/blocks)`` at lag-1 correlation ``r``: ``f`` of docs/model.md §9."""
    if r <= 0.0:
        return 1.0 + 2.0 * r
    lo, hi = 1e-6, 1e6  # _block_rho decreases from 1 to 0; bisect in log x
    for _ in range(80):
        mid = math.sqrt(lo * hi)
        if _block_rho(mid) > r:
            lo = mid
        else:
            hi = mid
    return 1.0 + 2.0 * r / -math.expm1(-math.sqrt(lo * hi))


def variance_factor(r: float, m: int) -> float:
    """``g = f·(m − 1)/(m − f)`` at ``ρ̃ = r`` on ``m`` blocks, less its second-order bias
    ``½ g''(r) Var(ρ̃)`` with ``Var(ρ̃) ≈ (1 + 4/m)²(1 − r²)/m``: ``g`` is convex in ``ρ̃``,
    so ``g`` of a noisy ``ρ̃`` overstates the variance on average (docs/model.md §9).

    Parameters
    ----------
    r : float
        The lag-1 autocorrelation of the block means, as estimated.
    m : int
        The number of blocks.

    Returns
    -------
    float
        The factor by which the naive variance of the mean is multiplied.

    Examples
    --------
    >>> variance_factor(0.0, 64)
    1.0
    """

    def g(x: float) -> float:
        f = _block_factor(x)
        return f * (m - 1.0) / max(m - f, 1.0)

    g0 = g(r)
    if r <= 0.0:  # f is linear there
        return g0
    h = min(0.01, r)
    curvature = (g(r + h) - 2.0 * g0 + g(r - h)) / (h * h)
    var = (1.0 + 4.0 / m) ** 2 * (1.0 - r * r) / m
    f1 = 1.0 + 2.0 * r  # lag-1 correlation alone: a floor
    return max(g0 - 0.5 * curvature * var, f1 * (m - 1.0) / max(m - f1, 1.0))


def blocking_dof(m: int) -> float:
    """Satterthwaite degrees of freedom of the blocking variance at ``m`` blocks (docs/model.md §9).

    Parameters
    ----------
    m : int
        The number of blocks.

    Returns
    -------
    float
        The degrees of freedom, at least 1.

    Examples
    --------
    >>> round(blocking_dof(32), 2), round(blocking_dof(64), 1)
    (8.2, 18.7)
    """
    a = 2.0 / (m - 1.0)
    b = (2.0 * m / (m - 1.0)) ** 2 * (1.0 + 4.0 / m) ** 2 / m
    return max(2.0 / (a + b + a * b), 1.0)  # relative variance of a product of independent factors


def blocked_levels(x: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """The blocked series, level 0 first (pairs averaged; an odd element dropped from the front).

    Parameters
    ----------
    x : numpy.ndarray
        The series (batch means).

    Returns
    -------
    iterator of (int, numpy.ndarray)
        ``(block size, the series of block means)`` for block sizes 1, 2, 4, … while two blocks remain.

    Examples
    --------
    >>> [(k, y.tolist()) for k, y in blocked_levels(np.array([1.0, 3.0, 5.0, 7.0]))]
    [(1, [1.0, 3.0, 5.0, 7.0]), (2, [2.0, 6.0])]
    """
    y = x
    size = 1
    while y.size >= 2:
        yield size, y
        if y.size % 2:
            y = y[1:]
        y = 0.5 * (y[0::2] + y[1::2])
        size *= 2
