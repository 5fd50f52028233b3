"""The three regimes of paper 002 and their parameters (docs/model.md §8, derived), with the
argument checks the other submodules share."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import gammaln

from ..checks import check_bool
from ..model import check_fraction, check_int, check_positive_float, check_positive_int, check_real
from ..result import Result, frame
from ..theory import REGIME_A_BELOW, REGIME_C_ABOVE, Condition

__all__ = [
    "REGIMES",
    "DERIVED_NOTE",
    "LARGE_D_ONE_MINUS_LAMBDA",
    "SMALL_SQRT_N_GAP",
    "LEVEL_CAPACITY",
    "MAX_REGIME_N",
    "RegimeWarning",
    "RegimeCondition",
    "Condition",
    "RegimeParams",
    "centre",
    "regime_a",
    "regime_b",
    "regime_c",
    "regime_params",
    "scaled",
]

#: The three regimes of paper 002 (docs/model.md §8): d_n/√n → 0, c, ∞.
REGIMES = ("a", "b", "c")
DERIVED_NOTE = (
    "The limit diffusions of paper 002 and their parametrisation are derived for this "
    "project (docs/model.md §8 marks them derived), not quoted theorems."
)

# d_n(1−λ_n) must be large for a single Brownian motion (docs/model.md §8): below this we warn.
LARGE_D_ONE_MINUS_LAMBDA = 10.0
# "√n(1−c_n) small" for reading ζ as √n(1−λ_n) (JSQ, d_n/(√n log n) → ∞).
SMALL_SQRT_N_GAP = 0.1
LEVEL_CAPACITY = 128  # levels of the simulated profile (queues longer raise an error)


class RegimeWarning(UserWarning):
    """A condition of a paper-002 regime (docs/model.md §8) fails; issued once per condition unless ``warn=False``.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     p = regime_a(16, d=3)        # d_n/√n = 0.75 is not small
    >>> any(w.category is RegimeWarning for w in caught)
    True
    """


#: The condition type is the one of :mod:`supermarket.theory` (kept under this name too).
RegimeCondition = Condition


@dataclass(frozen=True)
class RegimeParams(Result):
    """``(n, d_n, λ_n)`` of one paper-002 regime, with its coordinates and conditions (docs/model.md §8).

    ``z_j = √n(G_j − m_j)``; ``limit``: the limit diffusion's parameters matched at this ``n``.

    Examples
    --------
    >>> p = regime_b(10**4, 1.0, 0.5, warn=False)
    >>> p.limit, [c.holds for c in p.conditions]
    ({'c': 1.0, 'zeta': 0.5}, [False, True])
    """

    regime: str
    n: int
    d: int
    lam: float
    replace: bool
    centring: str  # "centre" (a), "c_n" (b, c) or "one" (c, JSQ)
    m: tuple[float, float]
    x: tuple[float, ...]  # the centre x^n, levels 1..
    limit: dict
    b_n: float  # d_n/√n
    c_n: float  # n^{−1/(2 d_n)}
    kappa_n: float  # d_n λ_n^{d_n}
    zeta_n: float  # √n (c_n − λ_n)
    d_one_minus_lambda: float
    coordinates: str
    conditions: tuple[Condition, ...]

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(_condition_message(self, c) for c in self.conditions if not c.holds)

    derived: ClassVar[str] = DERIVED_NOTE
    _plain = True
    _extra: ClassVar[dict[str, str]] = {"lambda_n": "lam", "d_n": "d", "warnings": "warnings", "derived": "derived"}

    def to_frame(self) -> Any:
        """One row per condition (``condition``, ``value``, ``holds``) beside the scalar parameters.

        Examples
        --------
        >>> regime_c(100, 1.0, warn=False).to_frame()[["condition", "holds"]].shape
        (2, 2)
        """
        d = self.to_dict()
        base = {k: d[k] for k in ("regime", "n", "d_n", "lambda_n", "replace", "b_n", "c_n", "kappa_n", "zeta_n")}
        return frame(
            [{**base, "condition": c.name, "value": float(c.value), "holds": bool(c.holds)} for c in self.conditions]
        )

    def summary(self) -> str:
        """The regime's numbers, its coordinates and each condition (holds / fails).

        Examples
        --------
        >>> print(regime_a(10**4, 1.0, warn=False).summary().splitlines()[0])
        regime (a)  n=10000  d_n=10  λ_n=0.7943282347  without replacement
        """
        lines = [
            f"regime ({self.regime})  n={self.n}  d_n={self.d}  λ_n={self.lam:.10g}  "
            f"{'with' if self.replace else 'without'} replacement",
            f"d_n/√n = {self.b_n:.4g}, d_n(1−λ_n) = {self.d_one_minus_lambda:.4g}, κ_n = d_nλ_n^d_n = "
            f"{self.kappa_n:.4g}, c_n = {self.c_n:.8g}, ζ_n = √n(c_n − λ_n) = {self.zeta_n:.4g}",
            f"coordinates: {self.coordinates}",
        ]
        lines += [f"  {'holds' if c.holds else 'FAILS'}: {c.name} (value {c.value:.4g})" for c in self.conditions]
        return "\n".join(lines)


def _condition_message(p: RegimeParams, c: Condition) -> str:
    return f"regime ({p.regime}) condition fails: {c.name} (value {c.value:.4g}); {c.detail}"


def _emit(p: RegimeParams, warn: bool) -> RegimeParams:
    if warn:
        for msg in p.warnings:
            warnings.warn(msg, RegimeWarning, stacklevel=3)
    return p


def _real(name, value) -> float:
    x = check_real(name, value)
    if not math.isfinite(x):
        raise ValueError(f"{name} must be a finite real number; got {value!r}")
    return x


def _sample_prob(x: float, n: int, d: int, replace: bool) -> float:
    """``P_n(x)`` (docs/model.md §2)."""
    if x <= 0.0:
        return 0.0
    if replace:
        return math.exp(d * math.log(x))
    m = n * x
    if m <= d - 1:
        return 0.0
    return math.exp(gammaln(m + 1) - gammaln(m - d + 1) - gammaln(n + 1) + gammaln(n - d + 1))


def centre(
    n: int, d: int, lam: float, *, replace: bool = False, levels: int | None = None, tol: float = 1e-15
) -> np.ndarray:
    """The near-equilibrium centre ``x^n`` (docs/model.md §8); index 0 is level 1.

    Parameters
    ----------
    n, d : int
        Servers and choices (``d <= n`` without replacement).
    lam : float
        Load in ``[0, 1)``.
    replace : bool, default False
    levels : int, optional
        Exactly this many levels (at most ``LEVEL_CAPACITY``); by default up to the first
        value below ``tol`` (at least 2).
    tol : float, default 1e-15

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> centre(100, 2, 0.5).round(4)[:3]
    array([0.5   , 0.1237, 0.0071])
    """
    n = check_positive_int("n", n)
    d = check_positive_int("d", d)
    lam = check_fraction("lam", lam, low=0.0, high=1.0, high_open=True)
    replace = check_bool("replace", replace)
    if not replace and d > n:
        raise ValueError(f"d must be <= n when sampling without replacement; got d={d}, n={n}")
    L = None if levels is None else check_int("levels", levels, minimum=1, maximum=LEVEL_CAPACITY)
    out = [lam]
    while (L is not None and len(out) < L) or (L is None and (len(out) < 2 or out[-1] >= tol)):
        if len(out) >= LEVEL_CAPACITY:
            break
        out.append(lam * _sample_prob(out[-1], n, d, replace))
    return np.array(out)


MAX_REGIME_N = 10**17
"""Largest n of a regime's parameters: beyond it the sampling probabilities overflow."""


def _c_n(n: int, d: int) -> float:
    return math.exp(-math.log(n) / (2.0 * d))


def _lambda_below(top: float, top_name: str, zeta: float, sq: float) -> float:
    """``λ_n = top − ζ/√n`` (regimes (b), (c)), refused unless in ``(0, 1)``."""
    lam = top - zeta / sq
    if not 0.0 < lam < 1.0:
        raise ValueError(
            f"zeta must lie in ({-sq * (1 - top):.6g}, {sq * top:.6g}) so that "
            f"λ_n = {top_name} − ζ/√n is in (0, 1); got {zeta!r}"
        )
    return lam


_COORDINATES = {
    "centre": "Z1 = √n(G1 − x^n_1), Z2 = √n(G2 − x^n_2): z1 = Z1, z2 = Z2",
    "c_n": "Q = √n(G1 − c_n), Y = √n G2, c_n = n^(−1/(2 d_n)): z1 = Q, z2 = Y",
    "one": "Q = √n(G1 − 1), Y = √n G2 (JSQ centring): z1 = Q, z2 = Y",
}


def _build(regime, n, d, lam, replace, centring, limit, extra_conditions) -> RegimeParams:
    x = centre(n, d, lam, replace=replace)
    sq = math.sqrt(n)
    c_n = _c_n(n, d)
    d1 = d * (1.0 - lam)
    p1 = _sample_prob(lam, n, d, replace)
    p2 = _sample_prob(float(x[1]), n, d, replace)
    # variance rates of the jumps at levels 1 and 2 (arrival + departure rates; → 2 and 0)
    noise1 = lam * (1.0 - p1) + (x[0] - x[1])
    noise2 = lam * (p1 - p2) + (x[1] - (x[2] if x.size > 2 else 0.0))
    conds = [
        Condition(
            f"d_n(1−λ_n) large (>= {LARGE_D_ONE_MINUS_LAMBDA:g})",
            d1,
            d1 >= LARGE_D_ONE_MINUS_LAMBDA,
            "one Brownian motion needs d_n(1−λ_n) → ∞ (docs/model.md §8); here level 2 carries noise of "
            f"variance rate {noise2:.3g} beside {noise1:.3g} at level 1, which the limit "
            "diffusion (derived) ignores and the finite-n LNA keeps",
        )
    ]
    conds += extra_conditions
    m = {"centre": (float(x[0]), float(x[1])), "c_n": (c_n, 0.0), "one": (1.0, 0.0)}[centring]
    return RegimeParams(
        regime=regime,
        n=n,
        d=d,
        lam=lam,
        replace=replace,
        centring=centring,
        m=m,
        x=tuple(float(v) for v in x),
        limit=limit,
        b_n=d / sq,
        c_n=c_n,
        kappa_n=d * math.exp(d * math.log(lam)),
        zeta_n=sq * (c_n - lam),
        d_one_minus_lambda=d1,
        coordinates=_COORDINATES[centring],
        conditions=tuple(conds),
    )


def regime_a(
    n: int, kappa: float = 1.0, *, d: int | None = None, theta: float = 0.25, replace: bool = False, warn: bool = True
) -> RegimeParams:
    """Regime (a), ``d_n/√n → 0`` (docs/model.md §8, derived): ``d_n λ_n^{d_n} = κ`` exactly.

    Parameters
    ----------
    n : int
        Servers, at least 4.
    kappa : float, default 1.0
        ``κ`` in ``(0, d_n)``.
    d : int, optional
        ``d_n`` (at least 2); by default ``⌊n^θ⌋``, ``0 < θ < 1/2``.
    theta : float, default 0.25
    replace : bool, default False
    warn : bool, default True
        Issue a :class:`RegimeWarning` for each failing condition.

    Returns
    -------
    RegimeParams
        Centred at ``x^n``; ``limit = {"kappa": κ}``.

    Examples
    --------
    >>> p = regime_a(10**4, 1.0, warn=False)
    >>> p.d, round(p.kappa_n, 12)
    (10, 1.0)
    """
    n = check_int("n", n, minimum=4, maximum=MAX_REGIME_N)
    kappa = check_positive_float("kappa", kappa)
    replace = check_bool("replace", replace)
    if d is None:
        theta = check_fraction("theta", theta, low=0.0, high=0.5, high_open=True)
        d = int(math.floor(n**theta + 1e-9))
        if d < 2:
            raise ValueError(f"theta: d_n = ⌊n^θ⌋ = {d} must be >= 2; raise theta (< 1/2) or n")
    else:
        d = check_int("d", d, minimum=2, maximum=None if replace else n)
    if kappa >= d:
        raise ValueError(f"kappa must lie in (0, d_n) = (0, {d}) so that λ_n = (κ/d_n)^(1/d_n) < 1; got {kappa!r}")
    lam = math.exp(math.log(kappa / d) / d)
    b = d / math.sqrt(n)
    extra = [
        Condition(f"d_n/√n small (< {REGIME_A_BELOW:g})", b, b < REGIME_A_BELOW, "regime (a) is the limit d_n/√n → 0")
    ]
    return _emit(_build("a", n, d, lam, replace, "centre", {"kappa": kappa}, extra), warn)


def regime_b(n: int, c: float = 1.0, zeta: float = 0.0, *, replace: bool = False, warn: bool = True) -> RegimeParams:
    """Regime (b), ``d_n/√n → c`` (docs/model.md §8, derived): ``λ_n = c_n − ζ/√n``.

    Parameters
    ----------
    n : int
        Servers, at least 4.
    c : float, default 1.0
        ``d_n = ⌊c√n⌋`` (at least 1).
    zeta : float, default 0.0
        Any real with ``λ_n`` in ``(0, 1)``.
    replace, warn
        As :func:`regime_a`.

    Returns
    -------
    RegimeParams
        Centred at ``(c_n, 0)``; ``limit = {"c": d_n/√n, "zeta": ζ}``.

    Examples
    --------
    >>> p = regime_b(10**4, 1.0, 0.5, warn=False)
    >>> p.d, round(p.zeta_n, 12)
    (100, 0.5)
    """
    n = check_int("n", n, minimum=4, maximum=MAX_REGIME_N)
    c = check_positive_float("c", c)
    zeta = _real("zeta", zeta)
    replace = check_bool("replace", replace)
    sq = math.sqrt(n)
    d = int(math.floor(c * sq + 1e-9))
    if d < 1:
        raise ValueError(f"c must be >= 1/√n = {1 / sq:.4g} so that d_n = ⌊c√n⌋ >= 1; got {c!r}")
    if not replace and d > n:
        raise ValueError(f"c must be <= √n = {sq:.4g} so that d_n <= n without replacement; got {c!r}")
    lam = _lambda_below(_c_n(n, d), "c_n", zeta, sq)
    b = d / sq
    extra = [
        Condition(
            f"d_n/√n of order 1 (in [{REGIME_A_BELOW:g}, {REGIME_C_ABOVE:g}])",
            b,
            REGIME_A_BELOW <= b <= REGIME_C_ABOVE,
            "regime (b) is the limit d_n/√n → c in (0, ∞)",
        )
    ]
    return _emit(_build("b", n, d, lam, replace, "c_n", {"c": b, "zeta": zeta}, extra), warn)


def regime_c(
    n: int, zeta: float = 1.0, *, d: int | None = None, replace: bool = False, centring: str = "c_n", warn: bool = True
) -> RegimeParams:
    """Regime (c), ``d_n/√n → ∞`` (docs/model.md §8, derived), reflected limit.

    Parameters
    ----------
    n : int
        Servers, at least 4.
    zeta : float, default 1.0
        ``ζ > 0``.
    d : int, optional
        ``d_n`` (default ``n``: JSQ without replacement).
    replace : bool, default False
    centring : {"c_n", "one"}, default "c_n"
        ``λ_n = c_n − ζ/√n`` or the JSQ reading ``λ_n = 1 − ζ/√n`` (docs/fluctuations.md).
    warn
        As :func:`regime_a`.

    Returns
    -------
    RegimeParams
        Centred at ``(c_n, 0)`` or ``(1, 0)``; ``limit = {"zeta": ζ}``.

    Examples
    --------
    >>> p = regime_c(100, 1.0, warn=False)
    >>> p.d, p.m
    (100, (0.9772372209558107, 0.0))
    """
    n = check_int("n", n, minimum=4, maximum=MAX_REGIME_N)
    zeta = _positive_zeta(zeta)
    replace = check_bool("replace", replace)
    if centring not in ("c_n", "one"):
        raise ValueError(f"centring must be 'c_n' or 'one'; got {centring!r}")
    d = n if d is None else check_int("d", d, minimum=1, maximum=None if replace else n)
    sq = math.sqrt(n)
    c_n = _c_n(n, d)
    top, top_name = (c_n, "c_n") if centring == "c_n" else (1.0, "1")
    lam = _lambda_below(top, top_name, zeta, sq)
    b = d / sq
    extra = [
        Condition(f"d_n/√n large (> {REGIME_C_ABOVE:g})", b, b > REGIME_C_ABOVE, "regime (c) is the limit d_n/√n → ∞")
    ]
    if centring == "one":
        gap = sq * (1.0 - c_n)
        extra.append(
            Condition(
                f"√n(1 − c_n) small (<= {SMALL_SQRT_N_GAP:g})",
                gap,
                gap <= SMALL_SQRT_N_GAP,
                "reading ζ as √n(1−λ_n) and centring at 1 needs d_n/(√n log n) → ∞",
            )
        )
    return _emit(_build("c", n, d, lam, replace, centring, {"zeta": zeta}, extra), warn)


def _positive_zeta(zeta) -> float:
    z = _real("zeta", zeta)
    if z <= 0:
        raise ValueError(
            f"zeta must be > 0 in regime (c): the reflected limit (Q <= 0, Q + Y with drift "
            f"−ζ − Q) has no stationary law for ζ <= 0; got {zeta!r}"
        )
    return z


def regime_params(
    regime: str,
    n: int,
    *,
    kappa: float | None = None,
    c: float | None = None,
    zeta: float | None = None,
    d: int | None = None,
    theta: float = 0.25,
    replace: bool = False,
    centring: str = "c_n",
    warn: bool = True,
) -> RegimeParams:
    """:func:`regime_a`, :func:`regime_b` or :func:`regime_c` by ``regime`` (the CLI's entry point).

    Parameters
    ----------
    regime : {"a", "b", "c"}
    n : int
    kappa, c, zeta, d, theta, replace, centring, warn
        Passed to the regime's function (``None``: its default); a parameter it does not
        take is a ``ValueError``.

    Returns
    -------
    RegimeParams

    Examples
    --------
    >>> round(regime_params("c", 100, zeta=2.0, warn=False).zeta_n, 12)
    2.0
    """
    if regime == "a":
        if c is not None or zeta is not None:
            raise ValueError("regime (a) takes kappa (and optionally d or theta), not c or zeta")
        return regime_a(n, 1.0 if kappa is None else kappa, d=d, theta=theta, replace=replace, warn=warn)
    if regime == "b":
        if kappa is not None or d is not None:
            raise ValueError("regime (b) takes c and zeta (d_n = ⌊c√n⌋), not kappa or d")
        return regime_b(n, 1.0 if c is None else c, 0.0 if zeta is None else zeta, replace=replace, warn=warn)
    if regime == "c":
        if kappa is not None or c is not None:
            raise ValueError("regime (c) takes zeta and d, not kappa or c")
        return regime_c(n, 1.0 if zeta is None else zeta, d=d, replace=replace, centring=centring, warn=warn)
    raise ValueError(f"regime must be 'a', 'b' or 'c'; got {regime!r}")


def scaled(p: RegimeParams, G1: ArrayLike, G2: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The scaled coordinates ``(z1, z2) = √n(G_1 − m_1, G_2 − m_2)`` (docs/model.md §8).

    Parameters
    ----------
    p : RegimeParams
    G1, G2 : float or array_like

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)

    Examples
    --------
    >>> p = regime_c(100, 1.0, warn=False)
    >>> [round(float(z), 4) for z in scaled(p, p.lam, 0.05)]  # E Q = −ζ at G_1 = λ_n
    [-1.0, 0.5]
    """
    sq = math.sqrt(p.n)
    return sq * (np.asarray(G1, float) - p.m[0]), sq * (np.asarray(G2, float) - p.m[1])


def _nonneg(name, value) -> float:
    x = _real(name, value)
    if x < 0:
        raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
    return x
