"""The Erlang mixture behind every response-time law (docs/model.md §10): input checks, survival functions,
quantiles and densities.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import brentq
from scipy.special import gammaln

__all__ = ["DEFAULT_QUANTILES", "check_quantile", "sojourn_survival", "waiting_survival"]

#: Quantile levels reported when none are asked for.
DEFAULT_QUANTILES = (0.5, 0.9, 0.99, 0.999)
_ATOL = 1e-9  # tolerance on probabilities given as input (sums, ranges)


# =========================================================================== validation
def check_quantile(q: object, name: str = "quantile") -> float:
    """A quantile level in (0, 1) as a float.

    Parameters
    ----------
    q : float
    name : str
        The parameter's name, for the message.

    Returns
    -------
    float

    Examples
    --------
    >>> check_quantile(0.99)
    0.99
    >>> check_quantile(1.0, "q")
    Traceback (most recent call last):
    ValueError: q must lie in (0, 1); got 1.0
    """
    if isinstance(q, (bool, np.bool_)) or not isinstance(q, numbers.Real):
        raise TypeError(f"{name} must be a real number in (0, 1); got {q!r} ({type(q).__name__})")
    x = float(q)
    if not (0.0 < x < 1.0):
        raise ValueError(f"{name} must lie in (0, 1); got {q!r}")
    return x


def check_quantiles(qs: Any) -> tuple:
    if isinstance(qs, numbers.Real):
        qs = (qs,)
    out = tuple(check_quantile(q, "quantiles") for q in qs)
    if not out:
        raise ValueError("quantiles must hold at least one level in (0, 1)")
    return out


def _check_tails(T, name="tails") -> np.ndarray:
    try:
        arr = np.asarray(T, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a 1-d array of probabilities; got {type(T).__name__}") from None
    if arr.ndim != 1:
        raise TypeError(f"{name} must be a 1-d array; got shape {arr.shape}")
    bad = ~np.isfinite(arr) | (arr < -_ATOL) | (arr > 1 + _ATOL)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{name} must hold probabilities in [0, 1]; entry {i} is {arr[i]!r}")
    arr = np.clip(arr, 0.0, 1.0)
    up = np.diff(arr) > 1e-7
    if up.any():
        i = int(np.argmax(up)) + 1
        raise ValueError(
            f"{name} must be non-increasing (P(J >= i) falls with i); entry {i} ({arr[i]!r}) "
            f"exceeds entry {i - 1} ({arr[i - 1]!r})"
        )
    return np.minimum.accumulate(arr)


# =========================================================================== the mixture
def _poisson_pmf(t: float, m: int) -> np.ndarray:
    """``e^{−t} t^i / i!`` for ``i = 0..m−1`` (log space; exact 0 and 1 at ``t = 0``)."""
    i = np.arange(m, dtype=float)
    if t <= 0.0:
        out = np.zeros(m)
        if m:
            out[0] = 1.0
        return out
    return np.exp(i * math.log(t) - t - gammaln(i + 1.0))


def sojourn_survival(tails: ArrayLike, t: ArrayLike) -> np.ndarray:
    """``P(S > t) = Σ_{i>=0} T_i e^{−t} t^i/i!`` (``T_0 = 1``) for the tails ``T_i = P(J >= i)`` (docs/model.md §10).

    Parameters
    ----------
    tails : array_like
        ``T_1, T_2, …``: non-increasing probabilities.
    t : float or array_like
        Times ``>= 0``.

    Returns
    -------
    numpy.ndarray
        One value per time.

    Examples
    --------
    >>> lam = 0.5; tails = lam ** np.arange(1, 80)       # d = 1: M/M/1
    >>> float(sojourn_survival(tails, 2.0)[0])           # exp(−(1−λ)t)
    0.36787944117144233
    """
    T = np.concatenate(([1.0], _check_tails(tails)))
    ts = np.atleast_1d(np.asarray(t, dtype=float))
    return np.array([float(_poisson_pmf(x, T.size) @ T) for x in ts])


def waiting_survival(tails: ArrayLike, t: ArrayLike) -> np.ndarray:
    """``P(W > t)`` for the tails ``T_i = P(J >= i)`` (docs/model.md §10); ``P(W > 0) = T_1``.

    Parameters
    ----------
    tails, t
        As in :func:`sojourn_survival`.

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> tails = 0.5 ** np.arange(1, 80)
    >>> round(float(waiting_survival(tails, 0.0)[0]), 12)   # P(wait) = λ for M/M/1
    0.5
    """
    T = _check_tails(tails)
    ts = np.atleast_1d(np.asarray(t, dtype=float))
    return np.array([float(_poisson_pmf(x, T.size) @ T) for x in ts])


def _quantile(T_shift: np.ndarray, q: float, mean: float) -> tuple[float, float]:
    """Least ``t`` with ``Σ_i T_shift[i] pmf_i(t) <= 1 − q``, and the density there (0 at an atom)."""
    target = 1.0 - q
    m = T_shift.size

    def surv(x):
        return float(_poisson_pmf(x, m) @ T_shift)

    if surv(0.0) <= target:
        return 0.0, 0.0
    hi = max(1.0, mean)
    while surv(hi) > target:
        hi *= 2.0
        if hi > 1e12:  # pragma: no cover - a proper law has a finite quantile
            raise RuntimeError("quantile search did not end")
    lo = 0.0
    t = brentq(lambda x: surv(x) - target, lo, hi, xtol=1e-14 * max(1.0, hi), rtol=1e-15, maxiter=500)
    dens_coef = T_shift - np.concatenate((T_shift[1:], [0.0]))
    f = float(_poisson_pmf(t, m) @ dens_coef)
    return float(t), f
