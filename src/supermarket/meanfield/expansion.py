"""The refined mean field of a density-dependent population process given by its drift and its
jumps (Gast and Van Houdt 2017/2018, "A refined mean field approximation"; docs/model.md §3,
§13): at a fixed point ``π`` of the drift ``f``, with ``A = Df(π)`` and the jump covariance
``Q = Σ_jumps rate·ℓℓᵀ`` [paper]:

    A W + W Aᵀ + Q = 0                                  (the linear-noise covariance W),
    V = −A⁻¹ (½ Σ_jk ∂²f/∂x_j∂x_k (π) W_jk)             (the 1/n term),

so that ``E[x] = π + V/n + O(1/n²)`` and ``Cov(x) = W/n + O(1/n²)`` for the density ``x``
of ``n`` objects.  The drift's own ``1/n`` term (sampling without replacement) is not part of
this routine: the drift must not depend on ``n``.

Derivatives [derived, numerical]: ``A`` by the complex step ``Im f(π + i h e_j)/h`` (exact to
rounding: the drift must accept complex input and be analytic, as a polynomial is); the
second-derivative term by the eigen-decomposition ``W = Σ_k σ_k v_k v_kᵀ``, ``Σ_jk f''_jk W_jk
= Σ_k σ_k D²f(π)[v_k, v_k]``, each directional second derivative a central difference with
step ``t`` of the complex-step derivative, Richardson-extrapolated from ``t`` and ``2t``
(error ``O(t⁴)``; zero up to rounding for a drift of degree <= 3, such as JSQ(2) and JSQ(3)).
The relative difference of the extrapolated ``V`` and the single step's is reported as
``derivative_error``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from .lyapunov import MAX_LYAPUNOV_LEVELS, _accuracy

__all__ = ["Expansion", "refined_expansion", "COMPLEX_STEP", "SECOND_STEP"]

COMPLEX_STEP = 1e-30  # imaginary step of the complex-step derivative (no cancellation: any tiny step)
SECOND_STEP = 1e-4  # real step of the central difference of the derivative (Richardson with 2×)


@dataclass(frozen=True)
class Expansion:
    """The ``1/n`` expansion at a fixed point (see the module docstring).

    Attributes
    ----------
    x : numpy.ndarray (N,)
        The fixed point ``π``.
    A, Q, W : numpy.ndarray (N, N)
        The Jacobian, the jump covariance and the linear-noise covariance.
    V : numpy.ndarray (N,)
        The ``1/n`` term of ``E[x]``.
    accurate : bool
        False when the linear solves lost their accuracy (``issues`` says why).
    error_estimate : float
        Estimated relative error of ``W`` and ``V`` from the linear solves.
    derivative_error : float
        ``max |V − V(t)| / max |V|`` (``0`` when ``V = 0``): the extrapolated ``V`` against
        the one of the single step ``t``, a bound on the error of the extrapolated one.
    issues : tuple of str

    Examples
    --------
    One M/M/1-like linear population (arrivals ``λ(1 − x)``, departures ``x``): no ``1/n``
    term, ``W = π(1 − π)``.

    >>> import numpy as np
    >>> e = refined_expansion(lambda x: 0.5 * (1 - x) - x,
    ...                       lambda x: (np.array([0.5 * (1 - x[0]), x[0]]), np.array([[1.0], [-1.0]])),
    ...                       np.array([1 / 3]))
    >>> abs(float(e.V[0])), round(float(e.W[0, 0]), 12)
    (0.0, 0.222222222222)
    """

    x: np.ndarray
    A: np.ndarray = field(repr=False)
    Q: np.ndarray = field(repr=False)
    W: np.ndarray = field(repr=False)
    V: np.ndarray
    accurate: bool
    error_estimate: float
    derivative_error: float
    issues: tuple = ()


def _jacobian(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """``Df(x)`` by the complex step, column by column."""
    N = x.size
    A = np.empty((N, N))
    xc = x.astype(complex)
    for j in range(N):
        xc[j] += 1j * COMPLEX_STEP
        A[:, j] = np.imag(f(xc)) / COMPLEX_STEP
        xc[j] = x[j]
    return A


def _second(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray, v: np.ndarray, t: float) -> np.ndarray:
    """``D²f(x)[v, v]`` by the central difference (step ``t``) of the complex-step ``Df(·)v``."""

    def dfv(y):
        return np.imag(f(y + 1j * COMPLEX_STEP * v)) / COMPLEX_STEP

    return (dfv(x + t * v) - dfv(x - t * v)) / (2.0 * t)


def _half_hessian(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray, w: np.ndarray, t: float) -> np.ndarray:
    """``½ Σ_jk ∂²f/∂x_j∂x_k w_jk`` (``w`` symmetric) with the step ``t``."""
    sig, U = np.linalg.eigh(0.5 * (w + w.T))
    out = np.zeros(x.size)
    scale = float(np.max(np.abs(sig))) if sig.size else 0.0
    for k in range(sig.size):
        if abs(sig[k]) > 1e-300 and abs(sig[k]) > 1e-17 * scale:
            out += sig[k] * _second(f, x, U[:, k], t)
    return 0.5 * out


def _noise(jumps: Callable[[np.ndarray], tuple[np.ndarray, Any]], x: np.ndarray) -> np.ndarray:
    """``Q = Σ rate·ℓℓᵀ`` from the jumps' rates (m,) and vectors (m, N), dense or sparse."""
    rates, vecs = jumps(x)
    rates = np.asarray(rates, dtype=float)
    if sp.issparse(vecs):
        M = sp.csr_matrix(vecs)
        return np.asarray((M.T @ M.multiply(rates[:, None])).todense())
    vecs = np.asarray(vecs, dtype=float)
    return (vecs * rates[:, None]).T @ vecs


def refined_expansion(
    drift: Callable[[np.ndarray], np.ndarray],
    jumps: Callable[[np.ndarray], tuple[np.ndarray, Any]],
    x: np.ndarray,
    *,
    step: float = SECOND_STEP,
) -> Expansion:
    """The refined mean field ``V`` and the linear-noise covariance ``W`` at the fixed point ``x``
    of ``drift`` (Gast and Van Houdt 2018; the module docstring has the formulas).

    Parameters
    ----------
    drift : callable
        ``f(x) -> (N,)``, the ``n``-free drift; it must accept complex ``x`` (complex step).
    jumps : callable
        ``x -> (rates (m,), vectors (m, N))``: every jump of the density ``n x`` (in counts:
        ``+1``, ``−1``) with its rate per object; ``Σ rate·vector = drift(x)``. ``vectors``
        may be a SciPy sparse matrix.
    x : numpy.ndarray (N,)
        A fixed point of ``drift`` (``drift(x) ≈ 0``), flattened.
    step : float
        The real step ``t`` of the second derivatives (the second step is ``2t``).

    Returns
    -------
    Expansion

    Raises
    ------
    ValueError
        If ``x`` has more than :data:`~supermarket.meanfield.lyapunov.MAX_LYAPUNOV_LEVELS`
        entries (the dense Lyapunov solve costs ``O(N³)``), or ``step`` is not positive.
    """
    x = np.asarray(x, dtype=float).ravel()
    if not (isinstance(step, float) and 0.0 < step < 1.0):
        raise ValueError(f"step: must be a float in (0, 1), got {step!r}")
    if x.size > MAX_LYAPUNOV_LEVELS:
        raise ValueError(
            f"levels: the Lyapunov equation would have {x.size} unknowns per row (levels × phases, more than "
            f"{MAX_LYAPUNOV_LEVELS}; its dense solve costs O(N^3)); keep fewer levels or phases"
        )
    A = _jacobian(drift, x)
    Q = _noise(jumps, x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sla.LinAlgWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        W = sla.solve_continuous_lyapunov(A, -Q)
        W = 0.5 * (W + W.T)

        def rhs_of(w, t=step):  # V solves A V = rhs_of(W)
            return -_half_hessian(drift, x, w, t)

        b1, b2 = rhs_of(W), rhs_of(W, 2.0 * step)
        b = (4.0 * b1 - b2) / 3.0  # Richardson: the t² terms cancel

        def rhs_rich(w):
            return (4.0 * rhs_of(w) - rhs_of(w, 2.0 * step)) / 3.0

        V = np.linalg.solve(A, b)
        V1 = np.linalg.solve(A, b1)
    vmax = float(np.max(np.abs(V))) if V.size else 0.0
    derr = float(np.max(np.abs(V - V1))) / vmax if vmax > 0 else 0.0
    est, issues = _accuracy(A, W, Q, V, rhs_rich)
    return Expansion(
        x=x,
        A=A,
        Q=Q,
        W=W,
        V=V,
        accurate=not issues,
        error_estimate=float(est),
        derivative_error=derr,
        issues=issues,
    )
