"""Where ``(n, d, λ)`` sits among the three heavy-traffic limits of paper 002 (docs/model.md §8, derived)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..model import MAX_THEORY_N, check_load, check_positive_int
from ..result import Result
from .equilibrium import _log_lambda


@dataclass(frozen=True)
class Regime002(Result):
    """Where ``(n, d, λ)`` sits among the three limits of paper 002 (docs/model.md §8, derived).

    Examples
    --------
    >>> regime_002(10_000, 20, 0.99).regime
    'b'
    """

    _plain = True  # to_dict() is the fields as they are: Cls(**r.to_dict()) rebuilds it

    d_over_sqrt_n: float
    kappa: float  # κ_n = d λ^d
    c_n: float  # n^{−1/(2d)}
    zeta: float  # √n (c_n − λ)
    d_one_minus_lambda: float  # d(1−λ): must be large for a single Brownian motion
    regime: str  # "a", "b" or "c"
    note: str

    def summary(self) -> str:
        return (
            f"paper 002 (derived limits): d/√n = {self.d_over_sqrt_n:.4g}, κ = dλ^d = {self.kappa:.4g}, "
            f"c_n = {self.c_n:.6g}, ζ_n = {self.zeta:.4g}, d(1−λ) = {self.d_one_minus_lambda:.4g} "
            f"→ resembles regime ({self.regime}): {self.note}"
        )


REGIME_A_BELOW = 0.2  # d/√n below this resembles (a)
REGIME_C_ABOVE = 5.0  # d/√n above this resembles (c)


def regime_002(n: int, d: int, lam: float | str) -> Regime002:
    """The paper-002 quantities of ``(n, d, λ)`` and the regime it resembles (docs/model.md §8).

    (a) when ``d/√n < 0.2``, (c) when ``> 5``, (b) between (a convention for finite ``n``).

    Parameters
    ----------
    n, d, lam
        Servers, choices ``d >= 1`` and load λ in (0, 1); the note warns when ``d(1−λ) < 10``.

    Returns
    -------
    Regime002

    Examples
    --------
    >>> regime_002(10_000, 10, 0.99).regime
    'a'
    """
    n = check_positive_int("n", n, maximum=MAX_THEORY_N)
    d = check_positive_int("d", d)
    lam = check_load(lam)
    b = d / math.sqrt(n)
    kappa = d * math.exp(d * _log_lambda(lam))
    c_n = math.exp(-math.log(n) / (2.0 * d))
    zeta = math.sqrt(n) * (c_n - lam)
    d1 = d * (1.0 - lam)
    regime = "a" if b < REGIME_A_BELOW else ("c" if b > REGIME_C_ABOVE else "b")
    notes = {
        "a": "d/√n → 0: linear two-dimensional diffusion (derived)",
        "b": "d/√n → c: diffusion with exponential drift e^{cQ} (derived)",
        "c": "d/√n → ∞: reflected diffusion, Q <= 0 (derived)",
    }
    note = notes[regime]
    if d1 < 10:
        note += f"; warning: d(1−λ) = {d1:.3g} is not large, paper 002 needs d_n(1−λ_n) → ∞"
    return Regime002(d_over_sqrt_n=b, kappa=kappa, c_n=c_n, zeta=zeta, d_one_minus_lambda=d1, regime=regime, note=note)
