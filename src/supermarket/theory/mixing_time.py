"""Mixing-time orders of paper 000 and the slow mode of the linearised profile (docs/model.md §6)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import MAX_THEORY_N, check_int, check_load, check_positive_float, check_positive_int, check_real
from ..result import Result, frame
from .equilibrium import MAX_K, k_lambda_d


@dataclass(frozen=True)
class MixingBounds(Result):
    """Orders of the mixing time (docs/model.md §6, constants taken as 1).

    Examples
    --------
    >>> mixing_bounds(10_000, 20, 0.99).to_frame()["bound"].tolist()
    ['upper', 'lower']
    """

    _plain = True  # to_dict() is the fields as they are: Cls(**r.to_dict()) rebuilds it

    k: int
    upper_steps: float  # k d^{k-1} n log n, from a good state
    lower_steps: float  # d^{k-1} n
    upper_time: float  # steps / (n(1+λ))
    lower_time: float

    def to_frame(self) -> Any:
        """Two rows (``bound`` = upper, lower) with ``steps`` and ``time``."""
        rows = [("upper", self.upper_steps, self.upper_time), ("lower", self.lower_steps, self.lower_time)]
        return frame([{"bound": b, "k": self.k, "steps": s, "time": t} for b, s, t in rows])

    def summary(self) -> str:
        caveat = (
            "; the upper order is below the lower one here (their ratio k log n is below 1): "
            "orders for large n, not bounds at this n"
        )
        return (
            f"mixing from a good state (paper 000, docs/model.md §6, constants 1): "
            f"upper k d^(k−1) n log n = {self.upper_steps:.4g} steps ({self.upper_time:.4g} time units), "
            f"lower d^(k−1) n = {self.lower_steps:.4g} steps ({self.lower_time:.4g} time units)"
            f"{caveat if self.upper_steps < self.lower_steps else ''}"
        )


def steps_to_time(steps: float, n: int, lam: float | str) -> float:
    """Steps of the chain uniformized at rate ``n(1+λ)`` as time (docs/model.md §1).

    Parameters
    ----------
    steps : float
    n : int
    lam : float

    Returns
    -------
    float
        ``steps / (n(1+λ))``.

    Examples
    --------
    >>> steps_to_time(1900, 100, 0.9)
    10.0
    """
    steps = check_real("steps", steps)
    if not 0 <= steps < math.inf:
        raise ValueError(f"steps must be a finite number >= 0; got {steps!r}")
    n = check_positive_int("n", n, maximum=MAX_THEORY_N)
    lam = check_load(lam, require_stable=False)
    return steps / (n * (1.0 + lam))


def mixing_bounds(n: int, d: int, lam: float | str) -> MixingBounds:
    """Mixing from a good state: ``O(k d^{k−1} n log n)`` and ``Ω(d^{k−1} n)`` steps, constants 1 (docs/model.md §6).

    Parameters
    ----------
    n, d, lam
        Servers, choices ``d >= 2`` and load λ in (0, 1).

    Returns
    -------
    MixingBounds
        Both orders in steps and in time (:func:`steps_to_time`).

    Examples
    --------
    >>> b = mixing_bounds(1000, 10, 0.99)
    >>> b.k, b.lower_steps, round(b.upper_steps)  # 2·10·1000·log(1000)
    (2, 10000.0, 138155)
    """
    n = check_positive_int("n", n, maximum=MAX_THEORY_N)
    d = check_int("d", d, minimum=2)
    lam = check_load(lam)
    k = k_lambda_d(d, lam)
    dk1 = float(d) ** (k - 1)
    up = k * dk1 * n * math.log(max(n, 2))
    lo = dk1 * n
    return MixingBounds(
        k=k, upper_steps=up, lower_steps=lo, upper_time=steps_to_time(up, n, lam), lower_time=steps_to_time(lo, n, lam)
    )


def mixing_lower_customers(n: int, lam: float | str, g: float) -> float:
    """From ``‖x‖₁ = g n``, ``g ≫ k``: ``Ω(g n/(1−λ))`` steps, constant 1 (docs/model.md §6).

    Parameters
    ----------
    n : int
    lam : float or str
    g : float
        Customers per server at the start.

    Returns
    -------
    float

    Examples
    --------
    >>> round(mixing_lower_customers(100, 0.9, 3))
    3000
    """
    n = check_positive_int("n", n, maximum=MAX_THEORY_N)
    lam = check_load(lam)
    g = check_positive_float("g", g)
    return g * n / (1.0 - lam)


def mixing_lower_long(n: int, ell: int) -> float:
    """From one queue of length ``ℓ ≫ k``: ``Ω(ℓ n)`` steps, constant 1 (docs/model.md §6).

    Parameters
    ----------
    n, ell : int

    Returns
    -------
    float

    Examples
    --------
    >>> mixing_lower_long(100, 50)
    5000.0
    """
    return float(check_positive_int("n", n, maximum=MAX_THEORY_N)) * check_positive_int("ell", ell)


def slow_mode_matrix(d: int, lam: float | str, k: int | None = None) -> np.ndarray:
    """``A_k`` of ``dq/dt = A_k q + (1−λ)e_k`` [derived] (docs/model.md §6): tridiagonal ``k×k``.

    Parameters
    ----------
    d, lam
        Choices ``d >= 1`` and load λ in (0, 1).
    k : int, optional
        Defaults to ``k_{λ,d}``.

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> slow_mode_matrix(10, 0.9, k=3).tolist()
    [[-10.0, 1.0, 0.0], [9.0, -10.0, 1.0], [0.0, 9.0, -1.0]]
    """
    d = check_positive_int("d", d)
    lam = check_load(lam)
    k = k_lambda_d(d, lam) if k is None else check_positive_int("k", k, maximum=MAX_K)
    a = lam * d
    A = np.diag(np.full(k, -(1.0 + a)))
    A[-1, -1] = -1.0
    idx = np.arange(k - 1)
    A[idx + 1, idx] = a
    A[idx, idx + 1] = 1.0
    return A


@dataclass(frozen=True)
class SlowMode(Result):
    """The slow mode of the linearised profile [derived] (docs/model.md §6).

    Examples
    --------
    >>> s = slow_mode(20, 0.99)
    >>> bool(abs(s.relaxation_time * s.mu - 1) < 1e-12)
    True
    """

    _plain = True  # to_dict() is the fields as they are: Cls(**r.to_dict()) rebuilds it

    k: int
    mu: float  # −(eigenvalue of A_k with largest real part), per unit time
    mu_approx: float  # (λd−1)/((λd)^k − 1)
    relaxation_time: float  # 1/μ
    relaxation_steps_per_server: float  # (1+λ)/μ: steps are n(1+λ) per unit time

    def summary(self) -> str:
        return (
            f"slow mode (derived): μ_k = {self.mu:.6g} per unit time (approx. {self.mu_approx:.6g}), "
            f"relaxation time {self.relaxation_time:.6g}"
        )


def _slow_mu(a: float, k: int) -> float:
    """Smallest ``μ > 0`` with ``A_k q = −μ q``, by bisection on ``μ Σ_i q_i(μ) = 1`` (docs/model.md §6)."""

    def g(mu):
        q, D, s = 1.0, 1.0, 0.0
        for _i in range(k):
            s += q
            if q <= 0:
                return math.inf  # passed an eigenvalue: treat as beyond the root
            D = a * D - mu * q
            q = q + D
        return mu * s - 1.0

    if k == 1:
        return 1.0
    if a == 1:
        hi = 1.0 / k
    else:
        # 1/Σ_{j<k} a^j, in logs: a^j overflows a double for large k or a
        log_sum = (
            (k * math.log(a) + math.log1p(-(a**-k)) - math.log(a - 1.0))
            if a > 1
            else (math.log1p(-(a**k)) - math.log1p(-a))
        )
        hi = math.exp(-log_sum) if -log_sum > -745 else 5e-324
    while g(hi) < 0:
        hi *= 2.0
    lo = 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if g(mid) < 0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return 0.5 * (lo + hi)


def slow_mode(d: int, lam: float | str, k: int | None = None) -> SlowMode:
    """Slowest relaxation rate ``μ_k ≈ (λd−1)/((λd)^k − 1)`` of the linearised profile [derived] (docs/model.md §6).

    Parameters
    ----------
    d, lam, k
        As in :func:`slow_mode_matrix`.

    Returns
    -------
    SlowMode

    Examples
    --------
    >>> sm = slow_mode(20, 0.99)
    >>> round(sm.mu, 6), round(sm.mu_approx, 6)
    (0.045968, 0.048077)
    >>> bool(np.isclose(-sm.mu, np.linalg.eigvals(slow_mode_matrix(20, 0.99)).real.max()))
    True
    """
    d = check_positive_int("d", d)
    lam = check_load(lam)
    k = k_lambda_d(d, lam) if k is None else check_positive_int("k", k, maximum=MAX_K)
    a = lam * d
    mu = _slow_mu(a, k)
    if a == 1.0:
        approx = 1.0 / k
    elif a > 1.0 and k * math.log(a) > 700:  # a^k overflows: (a−1)/(a^k−1) ≈ (a−1) a^{−k}
        approx = math.exp(math.log(a - 1.0) - k * math.log(a))
    else:
        approx = (a - 1.0) / (a**k - 1.0)
    # μ below the smallest double (an explicit large k) is 0: the relaxation time is infinite
    tau, steps = (1.0 / mu, (1.0 + lam) / mu) if mu > 0 else (math.inf, math.inf)
    return SlowMode(k=k, mu=mu, mu_approx=approx, relaxation_time=tau, relaxation_steps_per_server=steps)
