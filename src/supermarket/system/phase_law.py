"""Phase-type service laws ``PH(α, T)`` as the phase engine, mean field and exact solver take
them (docs/model.md §13): the checks of a representation and its first two moments.

A representation is a probability vector ``α`` (length ``K``) and a sub-generator ``T``
(``K × K``: off-diagonal entries ``>= 0``, row sums ``<= 0``, invertible), with exit rates
``t0 = −T·1``.  The service time has mean ``α(−T)^{-1}1`` and second moment
``2α(−T)^{-2}1`` [classical]; the toolkit's service laws have mean 1 (the load ``λ`` is then
the utilisation).  Parsing of named laws (``erlang:K``, ``hyperexp:SCV``, ``ph:FILE.json``)
belongs to :mod:`supermarket.system.service`; this module only checks arrays.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["check_ph", "ph_moments", "MEAN_TOL"]

MEAN_TOL = 1e-9
"""Largest accepted ``|mean − 1|`` of a representation."""


def check_ph(alpha: ArrayLike, T: ArrayLike, *, name: str = "service") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate a phase-type representation with mean 1; returns ``(alpha, T, t0)`` as float arrays.

    Parameters
    ----------
    alpha : array_like, shape (K,)
        Initial phase law: entries ``>= 0`` summing to 1 (within 1e-12).
    T : array_like, shape (K, K)
        Sub-generator: finite, off-diagonal ``>= 0``, diagonal ``< 0``, row sums ``<= 0``, at
        least one row sum ``< 0`` reachable (``T`` invertible), mean ``α(−T)^{-1}1 = 1`` within
        :data:`MEAN_TOL`.
    name : str
        The parameter's name in error messages.

    Raises
    ------
    TypeError
        When ``alpha`` or ``T`` is not numeric.
    ValueError
        Naming the violated condition.

    Examples
    --------
    >>> a, T, t0 = check_ph([1.0, 0.0], [[-2.0, 2.0], [0.0, -2.0]])   # Erlang-2, mean 1
    >>> t0.tolist()
    [0.0, 2.0]
    >>> check_ph([1.0], [[-2.0]])
    Traceback (most recent call last):
    ...
    ValueError: service: the mean α(-T)^{-1}1 must be 1 (within 1e-09), got 0.5
    """
    try:
        a = np.array(alpha, dtype=float)
        M = np.array(T, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name}: alpha and T must be numeric arrays ({exc})") from None
    if a.ndim != 1 or a.size < 1:
        raise ValueError(f"{name}: alpha must be a 1-d array of K >= 1 probabilities, got shape {a.shape}")
    K = a.size
    if M.shape != (K, K):
        raise ValueError(f"{name}: T must have shape ({K}, {K}) to match alpha, got {M.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(M))):
        raise ValueError(f"{name}: alpha and T must be finite")
    if np.any(a < 0) or abs(a.sum() - 1.0) > 1e-12:
        raise ValueError(f"{name}: alpha must be >= 0 and sum to 1, got sum {a.sum()!r}")
    off = M - np.diag(np.diag(M))
    if np.any(off < 0):
        raise ValueError(f"{name}: the off-diagonal entries of T must be >= 0")
    if np.any(np.diag(M) >= 0):
        raise ValueError(f"{name}: the diagonal entries of T must be < 0")
    t0 = -M.sum(axis=1)
    if np.any(t0 < -1e-12 * np.abs(np.diag(M))):
        raise ValueError(f"{name}: the row sums of T must be <= 0 (exit rates t0 = -T·1 >= 0)")
    t0 = np.maximum(t0, 0.0)
    try:
        m1 = float(a @ np.linalg.solve(-M, np.ones(K)))
    except np.linalg.LinAlgError:
        raise ValueError(f"{name}: T must be invertible (every phase must lead to completion)") from None
    if not np.isfinite(m1) or abs(m1 - 1.0) > MEAN_TOL:
        raise ValueError(f"{name}: the mean α(-T)^{{-1}}1 must be 1 (within {MEAN_TOL:g}), got {m1!r}")
    return a, M, t0


def ph_moments(alpha: ArrayLike, T: ArrayLike) -> tuple[float, float]:
    """``(mean, scv)`` of ``PH(α, T)``: ``m1 = α(−T)^{-1}1``, ``m2 = 2α(−T)^{-2}1``,
    ``scv = m2/m1² − 1`` [classical].

    Examples
    --------
    >>> m, scv = ph_moments([1.0, 0.0], [[-2.0, 2.0], [0.0, -2.0]])   # Erlang-2: SCV 1/2
    >>> round(m, 12), round(scv, 12)
    (1.0, 0.5)
    """
    a = np.asarray(alpha, dtype=float)
    M = np.asarray(T, dtype=float)
    v = np.linalg.solve(-M, np.ones(a.size))
    m1 = float(a @ v)
    m2 = 2.0 * float(a @ np.linalg.solve(-M, v))
    return m1, m2 / m1**2 - 1.0
