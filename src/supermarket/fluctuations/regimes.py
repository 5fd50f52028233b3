"""Fluctuations near equilibrium with growing choices: the three regimes of paper 002.

docs/model.md §8.  Continuous time, arrival rate ``nλ_n``, ``d_n <= n`` choices, sampled
*without* replacement by default (as in paper 002; ``replace=True`` on request).  The
occupancy ``G_i`` (fraction of queues with at least ``i`` customers) fluctuates by order
``n^{-1/2}`` around the near-equilibrium centre ``x^n``; the scaled process has one of three
limits as ``d_n/√n → 0, c, ∞``.  **The limits and their parametrisations are derived** for
this project (docs/model.md marks them [derived]); nothing here is a theorem of the paper.

What is here:

- parametrisation: :func:`regime_a` (from ``κ``), :func:`regime_b` (from ``c, ζ``),
  :func:`regime_c` (from ``ζ`` and ``d_n``; ``d_n = n`` is JSQ), all returning
  :class:`RegimeParams` with the conditions of the regime checked (a failing one is warned
  about with :class:`RegimeWarning`, naming the condition);
- :func:`centre` (``x^n``) and :func:`scaled` (the coordinates ``Z_1, Z_2`` or ``Q, Y``);
- :func:`simulate_fluctuations`: the exact continuous-time profile chain (engine
  ``engines.fluct``), stationary moments with batch-means standard errors, a time grid of
  the scaled process, autocorrelations;
- :func:`limit_sde`: Euler–Maruyama for the limit diffusions (engine ``engines.sde``),
  :func:`limit_closed_form` for regime (a), :func:`limit_acf_a` its autocorrelation;
- :func:`lna_moments`: the finite-n linear noise approximation at ``x^n``
  (``meanfield.lna(at="centre")``);
- :func:`compare`: all three side by side; :func:`scaling`: the ``n^{-1/2}`` order.

Coordinates.  Regime (a): ``Z_1 = √n(G_1 − x^n_1)``, ``Z_2 = √n(G_2 − x^n_2)``.  Regimes
(b), (c): ``Q = √n(G_1 − c_n)``, ``Y = √n G_2`` with ``c_n = n^{−1/(2d_n)}`` (so
``√n c_n^{d_n} = 1``), reported under the keys ``z1`` (= Q) and ``z2`` (= Y).  For the JSQ
reading of (c) (``centring="one"``): ``Q = √n(G_1 − 1)`` and ``ζ = √n(1 − λ_n)``.
"""

from __future__ import annotations

import math
import time as _time
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.special import gammaln

from ..model import (
    check_real,
    check_fraction,
    check_int,
    check_positive_float,
    check_positive_int,
    spawn_seeds,
)
from .. import parallel
from .._results import human_seconds, mean_stderr, pyplot, save_figure, text_table
from ..engines.rng import state_from_seed_sequence
from ..theory import REGIME_A_BELOW, REGIME_C_ABOVE, Condition

__all__ = [
    "RegimeWarning",
    "RegimeCondition",
    "Condition",
    "REGIMES",
    "RegimeParams",
    "regime_a",
    "regime_b",
    "regime_c",
    "regime_params",
    "centre",
    "scaled",
    "Moments",
    "FluctuationSim",
    "simulate_fluctuations",
    "LimitSDE",
    "limit_sde",
    "prelimit_sde",
    "integrated_autocorrelation_time",
    "WorkWarning",
    "limit_for",
    "limit_closed_form",
    "limit_acf_a",
    "lna_moments",
    "lna_acf",
    "Comparison",
    "compare",
    "ScalingRow",
    "ScalingResult",
    "scaling",
    "autocorrelation",
    "LARGE_D_ONE_MINUS_LAMBDA",
]

#: The three regimes of paper 002 (docs/model.md §8): d_n/√n → 0, c, ∞.
REGIMES = ("a", "b", "c")
KEYS = ("mean_z1", "mean_z2", "var_z1", "var_z2", "cov_z1z2")
DERIVED_NOTE = ("The limit diffusions of paper 002 and their parametrisation are derived for this "
                "project (docs/model.md §8 marks them derived), not quoted theorems.")

# d_n(1−λ_n) must be large for a single Brownian motion (docs/model.md §8): below this we warn.
LARGE_D_ONE_MINUS_LAMBDA = 10.0
# "√n(1−c_n) small" for reading ζ as √n(1−λ_n) (JSQ, d_n/(√n log n) → ∞).
SMALL_SQRT_N_GAP = 0.1
LEVEL_CAPACITY = 128  # levels of the simulated profile (queues longer raise an error)
TABLE_MAX_N = 1 << 23  # up to this n, log P is tabulated (8 MiB per 10^6 servers); above, computed


class RegimeWarning(UserWarning):
    """A condition of a paper-002 regime (docs/model.md §8) does not hold at these parameters.

    Issued (not raised) by :func:`regime_a`, :func:`regime_b`, :func:`regime_c` and
    :func:`regime_params` once per failing condition, unless ``warn=False``.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     p = regime_a(16, d=3)        # d_n/√n = 0.75 is not small
    >>> any(w.category is RegimeWarning for w in caught)
    True
    """


# =========================================================================== parameters
#: The condition type is the one of :mod:`supermarket.theory` (kept under this name too).
RegimeCondition = Condition


@dataclass(frozen=True)
class RegimeParams:
    """``(n, d_n, λ_n)`` of one paper-002 regime, with its coordinates and conditions (docs/model.md §8).

    ``m = (m_1, m_2)``: the scaled coordinates are ``z_j = √n(G_j − m_j)``.  ``limit``: the
    parameters of the limit diffusion matched at this ``n`` (``kappa`` for (a); ``c`` (the
    actual ``d_n/√n``) and ``zeta`` for (b); ``zeta`` for (c)).  Result protocol:
    :meth:`to_dict`, :meth:`to_frame` (the conditions), :meth:`summary`.

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

    def to_dict(self) -> dict:
        out = asdict(self)
        out["lambda_n"] = self.lam
        out["d_n"] = self.d
        out["warnings"] = list(self.warnings)
        out["derived"] = DERIVED_NOTE
        return out

    def to_frame(self):
        """Tidy table of the regime's conditions: one row per condition (``condition``,
        ``value``, ``holds``) beside the scalar parameters (``regime``, ``n``, ``d_n``,
        ``lambda_n``, ``b_n``, ``c_n``, ``kappa_n``, ``zeta_n``).

        Returns
        -------
        pandas.DataFrame

        Examples
        --------
        >>> regime_c(100, 1.0, warn=False).to_frame()[["condition", "holds"]].shape
        (2, 2)
        """
        import pandas as pd

        base = {"regime": self.regime, "n": self.n, "d_n": self.d, "lambda_n": self.lam,
                "replace": self.replace, "b_n": self.b_n, "c_n": self.c_n, "kappa_n": self.kappa_n,
                "zeta_n": self.zeta_n}
        return pd.DataFrame([{**base, "condition": c.name, "value": float(c.value), "holds": bool(c.holds)}
                             for c in self.conditions])

    def summary(self) -> str:
        """Plain text: the regime's numbers, its coordinates and each condition (holds / fails).

        Examples
        --------
        >>> print(regime_a(10**4, 1.0, warn=False).summary().splitlines()[0])
        regime (a)  n=10000  d_n=10  λ_n=0.7943282347  without replacement
        """
        lines = [f"regime ({self.regime})  n={self.n}  d_n={self.d}  λ_n={self.lam:.10g}  "
                 f"{'with' if self.replace else 'without'} replacement",
                 f"d_n/√n = {self.b_n:.4g}, d_n(1−λ_n) = {self.d_one_minus_lambda:.4g}, κ_n = d_nλ_n^d_n = "
                 f"{self.kappa_n:.4g}, c_n = {self.c_n:.8g}, ζ_n = √n(c_n − λ_n) = {self.zeta_n:.4g}",
                 f"coordinates: {self.coordinates}"]
        lines += [f"  {'holds' if c.holds else 'FAILS'}: {c.name} (value {c.value:.4g})" for c in self.conditions]
        return "\n".join(lines)


def _condition_message(p: RegimeParams, c: Condition) -> str:
    return (f"regime ({p.regime}) condition fails: {c.name} (value {c.value:.4g}); {c.detail}")


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


def _check_replace(replace) -> bool:
    if not isinstance(replace, (bool, np.bool_)):
        raise TypeError(f"replace must be True or False; got {replace!r}")
    return bool(replace)


def _sample_prob(x: float, n: int, d: int, replace: bool) -> float:
    """``P_n(x)`` (docs/model.md §2): ``x^d`` with replacement, ``C(nx,d)/C(n,d)`` without."""
    if x <= 0.0:
        return 0.0
    if replace:
        return math.exp(d * math.log(x))
    m = n * x
    if m <= d - 1:
        return 0.0
    return math.exp(gammaln(m + 1) - gammaln(m - d + 1) - gammaln(n + 1) + gammaln(n - d + 1))


def centre(n, d, lam, *, replace=False, levels=None, tol=1e-15) -> np.ndarray:
    """The near-equilibrium centre ``x^n`` (docs/model.md §8): ``x^n_1 = λ``,
    ``x^n_i = λ P_n(x^n_{i−1})``.  By default levels run until the first value below ``tol``
    (at least 2 levels).  Index 0 is level 1.

    Parameters
    ----------
    n, d : int
        Servers and choices (``d <= n`` without replacement).
    lam : float
        Load in ``[0, 1)``.
    replace : bool, default False
        Sample with replacement (``P_n(x) = x^d``).
    levels : int, optional
        Exactly this many levels (at most ``LEVEL_CAPACITY``).
    tol : float, default 1e-15
        Without ``levels``: stop after the first value below it.

    Returns
    -------
    numpy.ndarray

    Raises
    ------
    ValueError, TypeError
        Bad parameters (named).

    Examples
    --------
    >>> centre(100, 2, 0.5).round(4)[:3]
    array([0.5   , 0.1237, 0.0071])
    """
    n = check_positive_int("n", n)
    d = check_positive_int("d", d)
    lam = check_fraction("lam", lam, low=0.0, high=1.0, high_open=True)
    replace = _check_replace(replace)
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
"""Largest n of a regime's parameters (the scaled coefficients and the linear noise are closed
forms; the chain's engines stop at 2^53 anyway): beyond it the sampling probabilities overflow."""

def _c_n(n: int, d: int) -> float:
    return math.exp(-math.log(n) / (2.0 * d))


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
    conds = [Condition(
        f"d_n(1−λ_n) large (>= {LARGE_D_ONE_MINUS_LAMBDA:g})", d1, d1 >= LARGE_D_ONE_MINUS_LAMBDA,
        "one Brownian motion needs d_n(1−λ_n) → ∞ (docs/model.md §8); here level 2 carries noise of "
        f"variance rate {noise2:.3g} beside {noise1:.3g} at level 1, which the limit "
        "diffusion (derived) ignores and the finite-n LNA keeps")]
    conds += extra_conditions
    if centring == "centre":
        m = (float(x[0]), float(x[1]))
        coords = "Z1 = √n(G1 − x^n_1), Z2 = √n(G2 − x^n_2): z1 = Z1, z2 = Z2"
    elif centring == "c_n":
        m = (c_n, 0.0)
        coords = "Q = √n(G1 − c_n), Y = √n G2, c_n = n^(−1/(2 d_n)): z1 = Q, z2 = Y"
    else:
        m = (1.0, 0.0)
        coords = "Q = √n(G1 − 1), Y = √n G2 (JSQ centring): z1 = Q, z2 = Y"
    return RegimeParams(regime=regime, n=n, d=d, lam=lam, replace=replace, centring=centring, m=m,
                        x=tuple(float(v) for v in x), limit=limit, b_n=d / sq, c_n=c_n,
                        kappa_n=d * math.exp(d * math.log(lam)), zeta_n=sq * (c_n - lam),
                        d_one_minus_lambda=d1, coordinates=coords, conditions=tuple(conds))


def regime_a(n, kappa=1.0, *, d=None, theta=0.25, replace=False, warn=True) -> RegimeParams:
    """Regime (a), ``d_n/√n → 0`` (docs/model.md §8, derived): ``λ_n = (κ/d_n)^{1/d_n}`` so that
    ``d_n λ_n^{d_n} = κ`` exactly; ``d_n = ⌊n^θ⌋`` (``0 < θ < 1/2``) unless ``d`` is given.

    Parameters
    ----------
    n : int
        Servers, at least 4.
    kappa : float, default 1.0
        ``κ`` in ``(0, d_n)``.
    d : int, optional
        ``d_n`` (at least 2); by default ``⌊n^θ⌋``.
    theta : float, default 0.25
    replace : bool, default False
    warn : bool, default True
        Issue a :class:`RegimeWarning` for each condition of the regime that fails.

    Returns
    -------
    RegimeParams

    Raises
    ------
    ValueError, TypeError
        Bad parameters (named), ``d_n < 2`` or ``κ >= d_n``.

    Examples
    --------
    >>> p = regime_a(10**4, 1.0, warn=False)
    >>> p.d, round(p.kappa_n, 12)
    (10, 1.0)
    """
    n = check_int("n", n, minimum=4, maximum=MAX_REGIME_N)
    kappa = check_positive_float("kappa", kappa)
    replace = _check_replace(replace)
    if d is None:
        theta = check_fraction("theta", theta, low=0.0, high=0.5, high_open=True)
        d = int(math.floor(n ** theta + 1e-9))
        if d < 2:
            raise ValueError(f"theta: d_n = ⌊n^θ⌋ = {d} must be >= 2; raise theta (< 1/2) or n")
    else:
        d = check_int("d", d, minimum=2, maximum=None if replace else n)
    if kappa >= d:
        raise ValueError(f"kappa must lie in (0, d_n) = (0, {d}) so that λ_n = (κ/d_n)^(1/d_n) < 1; got {kappa!r}")
    lam = math.exp(math.log(kappa / d) / d)
    b = d / math.sqrt(n)
    extra = [Condition(f"d_n/√n small (< {REGIME_A_BELOW:g})", b, b < REGIME_A_BELOW,
                             "regime (a) is the limit d_n/√n → 0")]
    return _emit(_build("a", n, d, lam, replace, "centre", {"kappa": kappa}, extra), warn)


def regime_b(n, c=1.0, zeta=0.0, *, replace=False, warn=True) -> RegimeParams:
    """Regime (b), ``d_n/√n → c`` (docs/model.md §8, derived): ``d_n = ⌊c√n⌋``,
    ``λ_n = c_n − ζ/√n``.  The limit is matched at the actual ``d_n/√n`` and ``ζ``.

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

    Raises
    ------
    ValueError, TypeError
        Bad parameters (named), ``d_n`` out of ``[1, n]`` or ``λ_n`` out of ``(0, 1)``.

    Examples
    --------
    >>> p = regime_b(10**4, 1.0, 0.5, warn=False)
    >>> p.d, round(p.zeta_n, 12)
    (100, 0.5)
    """
    n = check_int("n", n, minimum=4, maximum=MAX_REGIME_N)
    c = check_positive_float("c", c)
    zeta = _real("zeta", zeta)
    replace = _check_replace(replace)
    sq = math.sqrt(n)
    d = int(math.floor(c * sq + 1e-9))
    if d < 1:
        raise ValueError(f"c must be >= 1/√n = {1 / sq:.4g} so that d_n = ⌊c√n⌋ >= 1; got {c!r}")
    if not replace and d > n:
        raise ValueError(f"c must be <= √n = {sq:.4g} so that d_n <= n without replacement; got {c!r}")
    c_n = _c_n(n, d)
    lam = c_n - zeta / sq
    if not 0.0 < lam < 1.0:
        raise ValueError(f"zeta must lie in ({-sq * (1 - c_n):.6g}, {sq * c_n:.6g}) so that "
                         f"λ_n = c_n − ζ/√n is in (0, 1); got {zeta!r}")
    b = d / sq
    extra = [Condition(f"d_n/√n of order 1 (in [{REGIME_A_BELOW:g}, {REGIME_C_ABOVE:g}])", b,
                             REGIME_A_BELOW <= b <= REGIME_C_ABOVE,
                             "regime (b) is the limit d_n/√n → c in (0, ∞)")]
    return _emit(_build("b", n, d, lam, replace, "c_n", {"c": b, "zeta": zeta}, extra), warn)


def regime_c(n, zeta=1.0, *, d=None, replace=False, centring="c_n", warn=True) -> RegimeParams:
    """Regime (c), ``d_n/√n → ∞`` (docs/model.md §8, derived), reflected limit; ``ζ > 0``.

    ``d`` defaults to ``n`` (JSQ when sampling without replacement).  ``centring="c_n"``:
    ``λ_n = c_n − ζ/√n``, ``Q = √n(G_1 − c_n)`` (docs/model.md's coordinates; ``E Q = −ζ``
    exactly).  ``centring="one"``: ``λ_n = 1 − ζ/√n``, ``Q = √n(G_1 − 1)`` — the JSQ reading,
    which equals the former in the limit when ``d_n/(√n log n) → ∞``.

    Parameters
    ----------
    n : int
        Servers, at least 4.
    zeta : float, default 1.0
        ``ζ > 0``.
    d : int, optional
        ``d_n`` (default ``n``).
    replace : bool, default False
    centring : {"c_n", "one"}, default "c_n"
    warn
        As :func:`regime_a`.

    Returns
    -------
    RegimeParams

    Raises
    ------
    ValueError, TypeError
        Bad parameters (named), ``ζ <= 0`` or ``λ_n`` out of ``(0, 1)``.

    Examples
    --------
    >>> p = regime_c(100, 1.0, warn=False)
    >>> p.d, p.m
    (100, (0.9772372209558107, 0.0))
    """
    n = check_int("n", n, minimum=4, maximum=MAX_REGIME_N)
    zeta = _positive_zeta(zeta)
    replace = _check_replace(replace)
    if centring not in ("c_n", "one"):
        raise ValueError(f"centring must be 'c_n' or 'one'; got {centring!r}")
    d = n if d is None else check_int("d", d, minimum=1, maximum=None if replace else n)
    sq = math.sqrt(n)
    c_n = _c_n(n, d)
    top = c_n if centring == "c_n" else 1.0
    lam = top - zeta / sq
    if not 0.0 < lam < 1.0:
        raise ValueError(f"zeta must lie in ({-sq * (1 - top):.6g}, {sq * top:.6g}) so that "
                         f"λ_n = {'c_n' if centring == 'c_n' else '1'} − ζ/√n is in (0, 1); got {zeta!r}")
    b = d / sq
    extra = [Condition(f"d_n/√n large (> {REGIME_C_ABOVE:g})", b, b > REGIME_C_ABOVE,
                             "regime (c) is the limit d_n/√n → ∞")]
    if centring == "one":
        gap = sq * (1.0 - c_n)
        extra.append(Condition(
            f"√n(1 − c_n) small (<= {SMALL_SQRT_N_GAP:g})", gap, gap <= SMALL_SQRT_N_GAP,
            "reading ζ as √n(1−λ_n) and centring at 1 needs d_n/(√n log n) → ∞"))
    return _emit(_build("c", n, d, lam, replace, centring, {"zeta": zeta}, extra), warn)


def _positive_zeta(zeta) -> float:
    z = _real("zeta", zeta)
    if z <= 0:
        raise ValueError(f"zeta must be > 0 in regime (c): the reflected limit (Q <= 0, Q + Y with drift "
                         f"−ζ − Q) has no stationary law for ζ <= 0; got {zeta!r}")
    return z


def regime_params(regime, n, *, kappa=None, c=None, zeta=None, d=None, theta=0.25,
                  replace=False, centring="c_n", warn=True) -> RegimeParams:
    """Dispatch on ``regime`` in ``{"a", "b", "c"}`` (the CLI's entry point).

    Parameters
    ----------
    regime : {"a", "b", "c"}
    n : int
    kappa, c, zeta, d, theta, replace, centring, warn
        Passed to :func:`regime_a` (``kappa``, ``d``, ``theta``), :func:`regime_b` (``c``,
        ``zeta``) or :func:`regime_c` (``zeta``, ``d``, ``centring``); ``None`` takes that
        function's default.

    Returns
    -------
    RegimeParams

    Raises
    ------
    ValueError
        An unknown regime, or a parameter that the regime does not take.

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


def scaled(p: RegimeParams, G1, G2):
    """The scaled coordinates ``(z1, z2) = √n(G_1 − m_1, G_2 − m_2)`` (docs/model.md §8).

    Parameters
    ----------
    p : RegimeParams
    G1, G2 : float or array_like
        Fractions of queues with at least 1 and at least 2 customers.

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


# =========================================================================== moments
@dataclass(frozen=True)
class Moments:
    """Stationary mean, variance and covariance of ``(z1, z2)``, with standard errors
    (``stderr``; ``None`` for exact values).

    ``tau_int``: the integrated autocorrelation time (time units) of the slowest of the five
    functionals, estimated from the recorded grid (chain only); ``adequate``: whether each
    batch is at least :data:`BATCH_TAU_FACTOR` of them long, the condition for the batch
    means to be nearly independent — ``False`` means the run is too short to know its own
    error bars (``note`` says so); ``None`` where it does not apply (independent paths,
    exact values).

    Examples
    --------
    >>> m = limit_closed_form(1.0)
    >>> round(m.var_z1, 4), m.stderr is None
    (0.6667, True)
    """

    mean_z1: float
    mean_z2: float
    var_z1: float
    var_z2: float
    cov_z1z2: float
    stderr: dict | None = None
    tau_int: float | None = None
    adequate: bool | None = None
    note: str = ""

    def to_dict(self) -> dict:
        out = {k: float(getattr(self, k)) for k in KEYS}
        out["stderr"] = None if self.stderr is None else {k: float(self.stderr[k]) for k in KEYS}
        if self.tau_int is not None:
            out["tau_int"] = float(self.tau_int) if math.isfinite(self.tau_int) else None
        if self.adequate is not None:
            out["error_bars_adequate"] = bool(self.adequate)
        if self.note:
            out["error_bars_note"] = self.note
        return out

    def to_frame(self):
        """Tidy table: one row per moment (``moment``, ``value``, ``stderr``; NaN for exact values).

        Examples
        --------
        >>> limit_closed_form(1.0).to_frame()["value"].round(4).tolist()
        [0.0, 0.0, 0.6667, 0.3333, 0.3333]
        """
        import pandas as pd

        return pd.DataFrame([{"moment": k, "value": float(getattr(self, k)),
                              "stderr": float(self.stderr[k]) if self.stderr else np.nan} for k in KEYS])

    def summary(self) -> str:
        """The five moments as a plain-text table (± standard error where there is one).

        Examples
        --------
        >>> print(limit_closed_form(2.0).summary())
        moment    value
        --------  -----
        mean_z1       0
        mean_z2       0
        var_z1      0.5
        var_z2        1
        cov_z1z2    0.5
        """
        rows = [[k, f"{getattr(self, k):.6g}" + (f" ± {self.stderr[k]:.2g}" if self.stderr else "")]
                for k in KEYS]
        out = text_table(["moment", "value"], rows)
        if self.note:
            out += f"\nerror bars: {self.note}"
        return out


def _moments_from_blocks(avg: np.ndarray) -> Moments:
    """Moments from equal-weight block time-averages ``avg[b] = (Z1, Z2, Z1², Z2², Z1Z2)``.

    Standard errors by batch means with the variance and covariance linearised around the
    overall means (pseudo-values), so that each block contributes an unbiased term; the
    spread of the ``B`` pseudo-values is :func:`supermarket.stats.replication_error` (``s/√B``,
    ``B − 1`` degrees of freedom; through :func:`supermarket._results.mean_stderr`).

    Why batch means here and not :func:`supermarket.stats.blocking`: the kernel accumulates
    holding-time-weighted integrals per batch (exact time averages, not grid samples), and a
    run has ``batches`` (default 10) of them per replication, far fewer than the
    :data:`supermarket.stats.MIN_BLOCKS` a blocking plateau needs.  Whether the batches are
    long enough to be independent is checked separately (:func:`_with_adequacy`) with Sokal's
    windowed integrated autocorrelation time on the recorded grid, which needs no plateau
    and works on short runs; a failed check is reported (``Moments.adequate``), not hidden.
    """
    avg = np.asarray(avg, dtype=float)
    B = avg.shape[0]
    mu = avg.mean(axis=0)
    m1, m2 = mu[0], mu[1]
    vals = {"mean_z1": m1, "mean_z2": m2, "var_z1": mu[2] - m1 * m1, "var_z2": mu[3] - m2 * m2,
            "cov_z1z2": mu[4] - m1 * m2}
    pseudo = {
        "mean_z1": avg[:, 0],
        "mean_z2": avg[:, 1],
        "var_z1": avg[:, 2] - 2 * m1 * avg[:, 0],
        "var_z2": avg[:, 3] - 2 * m2 * avg[:, 1],
        "cov_z1z2": avg[:, 4] - m2 * avg[:, 0] - m1 * avg[:, 1],
    }
    se = {k: (mean_stderr(v)[1] if B > 1 else float("nan")) for k, v in pseudo.items()}
    return Moments(**{k: float(v) for k, v in vals.items()}, stderr=se)


#: A batch must last this many integrated autocorrelation times for batch means to be
#: trusted (the lag-one correlation of consecutive batch means is then below ~1/(2·this)).
BATCH_TAU_FACTOR = 10.0


def integrated_autocorrelation_time(series, dt: float, c: float = 5.0) -> float:
    """Integrated autocorrelation time ``τ = dt·(1 + 2 Σ_k ρ_k)`` (time units) of a series
    sampled every ``dt``, with Sokal's automatic window (the least ``W >= c·τ(W)``).

    ``series``: array ``(R, G)`` of ``R`` independent runs (the autocovariance is pooled over
    runs, about the overall mean).  Returns ``inf`` when no window fits in a quarter of a
    run — the run is too short to estimate its own correlation time.

    Parameters
    ----------
    series : array_like
        ``(R, G)`` or ``(G,)``.
    dt : float
        Grid spacing (time units).
    c : float, default 5.0
        Sokal's window constant.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> integrated_autocorrelation_time(np.random.default_rng(0).normal(size=(4, 1000)), 0.1)
    0.1

    This is not :func:`supermarket.stats.blocking`: it serves only the adequacy check of the
    batch means (:func:`_with_adequacy`), on a grid of a few hundred points per run pooled
    over runs, where a blocking plateau (at least 32 blocks left) is usually out of reach;
    Sokal's window gives a usable ``τ`` there and says ``inf`` when it cannot.  Its ``τ`` is
    ``1 + 2Σρ_k`` in time units (twice :mod:`supermarket.stats`' ``tau_int``, which is
    ``1/2 + Σρ_k`` in steps).
    """
    s = np.atleast_2d(np.asarray(series, dtype=float))
    R, G = s.shape
    x = s - s.mean()
    var = float((x * x).mean())
    if var <= 0 or G < 8:
        return 0.0 if var <= 0 else math.inf
    f = np.fft.rfft(x, 2 * G, axis=1)
    ac = np.fft.irfft(f * np.conj(f), axis=1)[:, :G].sum(axis=0) / (R * (G - np.arange(G)))
    rho = ac / ac[0]
    tau = 1.0 + 2.0 * np.cumsum(rho[1:])  # tau(W) in steps, W = 1..G-1
    W = np.arange(1, G)
    ok = np.nonzero(W >= c * tau)[0]
    if ok.size == 0 or W[ok[0]] > G // 4:
        return math.inf
    return float(max(tau[ok[0]], 1.0) * dt)


def _with_adequacy(m: Moments, grid: np.ndarray, grid_dt: float, batch_time: float) -> Moments:
    """``m`` with ``tau_int`` (slowest of the five functionals on the grid) and whether
    the batches are long enough for their means to be independent (docs/model.md §9)."""
    z1, z2 = grid[:, :, 0], grid[:, :, 1]
    series = (z1, z2, (z1 - z1.mean()) ** 2, (z2 - z2.mean()) ** 2,
              (z1 - z1.mean()) * (z2 - z2.mean()))
    taus = [integrated_autocorrelation_time(s, grid_dt) for s in series]
    tau = max(taus) if taus else math.inf
    ok = math.isfinite(tau) and batch_time >= BATCH_TAU_FACTOR * tau
    if ok:
        note = ""
    elif not math.isfinite(tau):
        note = ("too short to know: the run is too short to estimate its autocorrelation time, "
                "so the batch-means error bars cannot be trusted; run longer (time=)")
    else:
        note = (f"too short to know: batches of {batch_time:.3g} time units are under "
                f"{BATCH_TAU_FACTOR:g} autocorrelation times ({tau:.3g} each), so the error bars "
                f"may be too small; run longer (time >= {BATCH_TAU_FACTOR * tau * 1.0:.3g} × batches) "
                "or use fewer batches")
    return Moments(m.mean_z1, m.mean_z2, m.var_z1, m.var_z2, m.cov_z1z2, stderr=m.stderr,
                   tau_int=tau, adequate=ok, note=note)


def autocorrelation(series, max_lag: int, segments: int = 10):
    """Autocorrelation of a stationary series sampled on a grid, with standard errors.

    ``series``: array ``(R, G)`` (R independent runs).  Each run is cut into ``segments``
    pieces; the autocovariance of each piece (about the overall mean, divided by the overall
    variance) is averaged; the standard error is the spread over pieces.  Returns
    ``(acf, stderr)`` for lags ``0..max_lag``.

    Parameters
    ----------
    series : array_like
    max_lag : int
        In grid steps.
    segments : int, default 10

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)

    Examples
    --------
    >>> import numpy as np
    >>> acf, se = autocorrelation(np.random.default_rng(0).normal(size=(2, 1000)), 3)
    >>> float(acf[0]), bool(abs(acf[1]) < 5 * se[1])
    (1.0, True)
    """
    s = np.atleast_2d(np.asarray(series, dtype=float))
    mean = s.mean()
    var = s.var()
    if var <= 0:
        return np.ones(max_lag + 1), np.zeros(max_lag + 1)
    R, G = s.shape
    seg = max(G // segments, max_lag + 2)
    pieces = []
    for r in range(R):
        for k in range(G // seg):
            x = s[r, k * seg:(k + 1) * seg] - mean
            m = x.size
            f = np.fft.rfft(x, 2 * m)
            ac = np.fft.irfft(f * np.conj(f))[: max_lag + 1]
            pieces.append(ac / (m - np.arange(max_lag + 1)) / var)
    if not pieces:
        return np.full(max_lag + 1, np.nan), np.full(max_lag + 1, np.nan)
    mean_acf, se = mean_stderr(np.array(pieces), axis=0)
    return mean_acf, (np.full(max_lag + 1, np.nan) if se is None else se)


def _workers(workers, jobs: int) -> int:
    if workers is None:
        workers = parallel.default_workers()
    workers = check_positive_int("workers", workers)
    return max(1, min(workers, jobs))


# =========================================================================== work limits
#: Kernel calls are cut into chunks of about this many events / steps (a few hundredths
#: of a second), so Ctrl-C is honoured promptly; the numbers do not depend on the cut.
CHUNK_EVENTS = 1 << 21
CHUNK_STEPS = 1 << 21
#: Rough speeds for the up-front estimates (one core).
EVENTS_PER_SECOND = 5.0e6
SDE_STEPS_PER_SECOND = 8.0e6
#: Refuse work above this many events (about a day at the speed above; SDE steps are
#: scaled by the speed ratio); warn above WARN_EVENTS (about two minutes).
REFUSE_EVENTS = 5 * 10**11
WARN_EVENTS = 6 * 10**8
#: Refuse recorded grids (``(replications or paths, points, 2)`` float64) above this size.
MAX_GRID_BYTES = 2 << 30


class WorkWarning(UserWarning):
    """A fluctuation run that will take long (the estimate is in the message).

    Issued (not raised) before the run starts when the estimated work exceeds the warning
    threshold; above the refusal threshold a ``ValueError`` is raised instead.

    Examples
    --------
    >>> import warnings
    >>> issubclass(WorkWarning, UserWarning)
    True
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", WorkWarning)     # accept long runs silently
    ...     warnings.warn("about 1e11 events", WorkWarning)
    """


def _human_bytes(b: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if b < 1024 or unit == "EiB":
            return f"{b:.3g} {unit}"
        b /= 1024.0
    return f"{b:.3g} EiB"  # pragma: no cover


_human_seconds = human_seconds


def _check_grid(rows: int, points: float, what: str, option: str) -> None:
    need = float(rows) * float(points) * 2 * 8
    if need > MAX_GRID_BYTES:
        raise ValueError(f"{what} would record {float(rows) * float(points):.3g} grid points "
                         f"({_human_bytes(need)}, more than {_human_bytes(MAX_GRID_BYTES)}); {option}")


def _check_work(units: float, speed: float, what: str, option: str, cores: int) -> None:
    secs = units / (speed * max(cores, 1))
    msg = f"{what}: about {units:.3g} in all, {_human_seconds(secs)} at {speed:.2g}/s per core on {cores} core(s)"
    if units > REFUSE_EVENTS * (speed / EVENTS_PER_SECOND):
        raise ValueError(f"{msg}; refused: {option}")
    if units > WARN_EVENTS * (speed / EVENTS_PER_SECOND):
        warnings.warn(f"{msg}; {option} to shorten it", WorkWarning, stacklevel=3)


def _run_jobs(fn, tasks, workers, client=None, progress=None) -> list:
    """``fn`` over ``tasks`` in task order through :func:`supermarket.parallel.map_tasks`:
    on ``client`` (Dask) when given, else on ``workers`` threads (the kernels release the
    GIL).  Each task carries its own seed, so the results do not depend on the backend."""
    return parallel.map_tasks(fn, tasks, workers=_workers(workers, len(tasks)), client=client,
                              backend="threads", progress=progress)


# =========================================================================== simulation
@dataclass(frozen=True, kw_only=True)
class _ScaledRun:
    """Fields and result protocol shared by :class:`FluctuationSim` and :class:`LimitSDE`:
    stationary moments of ``(z1, z2)``, a recorded grid ``(rows, G, 2)`` at times ``t`` and
    autocorrelations at lags ``lags`` (time units) with standard errors."""

    time: float
    burn_in: float
    seconds: float
    moments: Moments
    t: np.ndarray = field(repr=False)
    grid: np.ndarray = field(repr=False)
    lags: np.ndarray = field(repr=False)
    acf_z1: np.ndarray = field(repr=False)
    acf_z2: np.ndarray = field(repr=False)
    acf_z1_stderr: np.ndarray = field(repr=False)
    acf_z2_stderr: np.ndarray = field(repr=False)

    def _label(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def _names(self) -> tuple[str, str]:  # pragma: no cover - overridden
        raise NotImplementedError

    def to_frame(self):
        """Tidy stationary moments: one row per moment (``moment``, ``value``, ``stderr``)
        with a ``source`` column naming the run.

        Returns
        -------
        pandas.DataFrame
        """
        df = self.moments.to_frame()
        df.insert(0, "source", self._label())
        return df

    def acf_frame(self):
        """Tidy autocorrelations: one row per (coordinate, lag) with ``acf`` and ``stderr``.

        Returns
        -------
        pandas.DataFrame
        """
        import pandas as pd

        recs = []
        for name, a, se in (("z1", self.acf_z1, self.acf_z1_stderr), ("z2", self.acf_z2, self.acf_z2_stderr)):
            for lag, v, e in zip(self.lags, a, se):
                recs.append({"coordinate": name, "lag": float(lag), "acf": float(v), "stderr": float(e)})
        return pd.DataFrame(recs)

    def summary(self) -> str:
        """Plain text: what was run, then the moments table (± standard error)."""
        return f"{self._label()}: {self._header()}\n{self.moments.summary()}"

    def plot(self, path=None):
        """A recorded path, the histograms of both coordinates and the autocorrelations;
        saved at ``path`` when given.

        Parameters
        ----------
        path : str or path-like, optional
            Where to save the figure (PNG by the suffix).

        Returns
        -------
        matplotlib.figure.Figure
        """
        plt = pyplot()

        names = self._names()
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
        if self.grid.size and self.t.size > 1:
            k = min(self.t.size, max(2, int(30 / (self.t[1] - self.t[0]))))
            axes[0].plot(self.t[:k], self.grid[0, :k, 0], lw=0.7, label=names[0])
            axes[0].plot(self.t[:k], self.grid[0, :k, 1], lw=0.7, label=names[1])
            for j in (0, 1):
                axes[1].hist(self.grid[:, :, j].ravel(), bins=50, density=True, alpha=0.5, label=names[j])
        axes[0].set_xlabel("time")
        axes[0].legend(fontsize=7)
        axes[1].set_xlabel("value")
        axes[1].legend(fontsize=7)
        for a, se, nm in ((self.acf_z1, self.acf_z1_stderr, names[0]), (self.acf_z2, self.acf_z2_stderr, names[1])):
            if self.lags.size > 1:
                axes[2].errorbar(self.lags, a, yerr=se, lw=1, label=nm)
        axes[2].set_xlabel("lag")
        axes[2].set_ylabel("autocorrelation")
        axes[2].legend(fontsize=7)
        fig.suptitle(self._label(), fontsize=9)
        fig.tight_layout()
        plt.close(fig)
        return save_figure(fig, path)


@dataclass(frozen=True, kw_only=True)
class FluctuationSim(_ScaledRun):
    """The exact chain's scaled process after burn-in (docs/model.md §1–2, §8).

    ``grid``: array ``(replications, G, 2)`` of ``(z1, z2)`` at times ``t`` (after burn-in);
    ``acf_*``: autocorrelation at lags ``lags`` (time units) with standard errors.
    Result protocol: :meth:`to_dict`, :meth:`to_frame` (moments), :meth:`acf_frame`,
    :meth:`summary`, :meth:`plot`.

    Examples
    --------
    >>> p = regime_a(400, 1.0, d=2, warn=False)
    >>> s = simulate_fluctuations(p, time=20.0, burn_in=2.0, grid_dt=0.5, max_lag=2.0, workers=1)
    >>> list(s.to_frame()["moment"])
    ['mean_z1', 'mean_z2', 'var_z1', 'var_z2', 'cov_z1z2']
    """

    params: RegimeParams
    replications: int
    batches: int
    events: int

    def _label(self) -> str:
        return f"chain, regime ({self.params.regime}) n={self.params.n}"

    def _names(self) -> tuple[str, str]:
        return ("Z1", "Z2") if self.params.regime == "a" else ("Q", "Y")

    def _header(self) -> str:
        return (f"{self.replications} × {self.time:g} time units after burn-in {self.burn_in:g}, "
                f"{self.events:.3g} events in {self.seconds:.2f} s")

    def to_dict(self) -> dict:
        return {"time": self.time, "burn_in": self.burn_in, "replications": self.replications,
                "batches_per_replication": self.batches, "events": self.events,
                "seconds": self.seconds, "events_per_second": self.events / max(self.seconds, 1e-12),
                **self.moments.to_dict()}


def _logp_table(n: int, d: int, replace: bool) -> np.ndarray:
    """``log P`` for a level holding ``c = 0..n`` queues (docs/model.md §2)."""
    c = np.arange(n + 1, dtype=float)
    with np.errstate(divide="ignore"):
        if replace:
            out = d * np.log(c / n)
        else:
            out = np.full(n + 1, -np.inf)
            ok = c >= d
            out[ok] = gammaln(c[ok] + 1) - gammaln(c[ok] - d + 1) - gammaln(n + 1) + gammaln(n - d + 1)
    out[0] = -np.inf
    return out


def _chain_task(args):
    """One replication of the chain (module level: it runs on threads, processes or Dask)."""
    from ..engines.fluct import DONE, OVERFLOW, fluct_ctmc

    (n, lam, logp, start, m0, m1, burn_in, time, batches, grid_dt, ss, G, d, replace, lgn) = args
    counts = start.copy()
    clock = np.zeros(3)
    sums = np.zeros((batches, 5))
    grid = np.zeros((G, 2))
    state = state_from_seed_sequence(ss)
    overflow = False
    while True:
        parallel.check_stop()
        st = fluct_ctmc(n, lam, logp, counts, m0, m1, burn_in, time, batches, grid_dt, state, sums,
                        grid, d, replace, lgn, clock, CHUNK_EVENTS)
        if st == OVERFLOW:
            overflow = True
            break
        if st == DONE:
            break
    return sums, grid, int(clock[2]), overflow


def simulate_fluctuations(p: RegimeParams, *, time=200.0, burn_in=None, replications=1, seed=0,
                          workers=None, grid_dt=0.05, batches=10, max_lag=10.0, client=None,
                          progress=None) -> FluctuationSim:
    """Simulate the continuous-time profile chain at ``p`` and measure ``(z1, z2)``.

    Exact in law (docs/model.md §1–2): holding times ``Exp(nλ + c_1)``, arrivals join the
    shortest of ``d_n`` sampled queues (without replacement unless ``p.replace``).  Each
    replication starts at the rounded centre ``n x^n``, runs ``burn_in`` (default
    ``max(20, time/10)``, and at least ``5/ζ²`` in (c)) then ``time`` time units; moments
    are time averages (weighted by holding times) with batch-means standard errors over
    ``batches`` batches per replication, checked against the integrated autocorrelation
    time measured on the grid (``moments.adequate``; ``moments.note`` says "too short to
    know" when the batches are too short).  Replication ``r`` uses a xoshiro256** state from
    child ``r`` of ``seed``: identical results for any ``workers`` (threads) and any
    process.  The kernel runs in chunks of :data:`CHUNK_EVENTS` events, so Ctrl-C
    (KeyboardInterrupt) stops the run within a fraction of a second.

    Parameters
    ----------
    p : RegimeParams
    time : float, default 200.0
        Measured time units per replication, after ``burn_in``.
    burn_in : float, optional
    replications : int, default 1
    seed : int or numpy.random.SeedSequence, default 0
    workers : int, optional
        Threads (default: all cores).
    grid_dt : float, default 0.05
        Spacing of the recorded grid.
    batches : int, default 10
        Batches per replication for the batch means (at least 2).
    max_lag : float, default 10.0
        Largest autocorrelation lag (time units).
    client : dask.distributed.Client, optional
    progress : callable, optional

    Returns
    -------
    FluctuationSim

    Raises
    ------
    ValueError
        Bad parameters; a recorded grid larger than :data:`MAX_GRID_BYTES` (raise
        ``grid_dt`` or lower ``time``); more than :data:`REFUSE_EVENTS` events in all (the
        message gives the estimate).  A :class:`WorkWarning` is issued above
        :data:`WARN_EVENTS`.
    TypeError
        ``p`` is not a :class:`RegimeParams`.

    Examples
    --------
    >>> p = regime_c(100, 1.0, warn=False)
    >>> s = simulate_fluctuations(p, time=20.0, burn_in=5.0, grid_dt=0.5, max_lag=2.0, workers=1)
    >>> s.grid.shape, bool(s.grid[:, :, 0].max() <= math.sqrt(100) * (1 - p.c_n))
    ((1, 40, 2), True)
    """
    if not isinstance(p, RegimeParams):
        raise TypeError("p must be a RegimeParams (from regime_a, regime_b or regime_c)")
    time = check_positive_float("time", time)
    burn_in = (_default_burn_in(p.regime, p.limit.get("zeta"), max(20.0, time / 10)) if burn_in is None
               else _nonneg("burn_in", burn_in))
    R = check_positive_int("replications", replications)
    batches = check_int("batches", batches, minimum=2)
    grid_dt = check_positive_float("grid_dt", grid_dt)
    max_lag = check_positive_float("max_lag", max_lag)
    Gf = time / grid_dt
    _check_grid(R, Gf, f"time = {time:g} with grid_dt = {grid_dt:g} and {R} replication(s)",
                "lower time (--time) or raise grid_dt (--grid-dt)")
    G = int(Gf)
    if G < 2:
        raise ValueError(f"time must be at least 2·grid_dt = {2 * grid_dt:g}; got {time!r}")
    n, d = p.n, p.d
    # E c_1 = nλ exactly (docs/model.md §7): events per time unit ≈ nλ + nλ
    events_est = float(R) * (burn_in + time) * 2.0 * n * p.lam
    _check_work(events_est, EVENTS_PER_SECOND,
                f"the chain at n = {n:.6g} for {R} × (burn-in {burn_in:g} + time {time:g}) time units "
                f"needs events (≈ 2nλ per time unit)",
                "lower n, time (--time) or burn_in (--burn-in)", _workers(workers, R))
    if n <= TABLE_MAX_N:
        logp, lgn = _logp_table(n, d, p.replace), 0.0
    else:
        logp = np.empty(0)
        lgn = float(gammaln(n + 1) - gammaln(d + 1) - gammaln(n - d + 1)) if not p.replace else 0.0
    start = np.zeros(LEVEL_CAPACITY, dtype=np.int64)
    start[0] = n
    x = np.asarray(p.x)
    start[1:1 + x.size] = np.minimum(np.round(n * x), n).astype(np.int64)
    tasks = [(n, p.lam, logp, start, p.m[0], p.m[1], burn_in, time, batches, grid_dt, ss, G, d,
              p.replace, lgn) for ss in spawn_seeds(seed, R)]
    t0 = _time.perf_counter()
    out = _run_jobs(_chain_task, tasks, workers, client, progress)
    secs = _time.perf_counter() - t0
    sums = np.stack([o[0] for o in out])
    grid = np.stack([o[1] for o in out])
    events = np.array([o[2] for o in out], dtype=np.int64)
    overflow = np.array([o[3] for o in out], dtype=bool)
    if overflow.any():
        raise RuntimeError(f"a queue grew past {LEVEL_CAPACITY - 1} customers; the parameters are far "
                           "from the near-equilibrium regime")
    avg = sums.reshape(R * batches, 5) / (time / batches)
    mom = _with_adequacy(_moments_from_blocks(avg), grid, grid_dt, time / batches)
    L = max(1, min(int(max_lag / grid_dt), G // 4))
    a1, s1 = autocorrelation(grid[:, :, 0], L)
    a2, s2 = autocorrelation(grid[:, :, 1], L)
    return FluctuationSim(params=p, time=time, burn_in=burn_in, replications=R, batches=batches,
                          events=int(events.sum()), seconds=secs, moments=mom,
                          t=np.arange(G) * grid_dt, grid=grid, lags=np.arange(L + 1) * grid_dt,
                          acf_z1=a1, acf_z2=a2, acf_z1_stderr=s1, acf_z2_stderr=s2)


def _default_burn_in(regime, zeta, base: float) -> float:
    """Burn-in: ``base``, and in (c) at least ``5/ζ²`` (relaxation grows like ``ζ^{-2}``)."""
    if regime == "c" and zeta:
        return max(base, 5.0 / zeta ** 2)
    return base


def _nonneg(name, value) -> float:
    x = _real(name, value)
    if x < 0:
        raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
    return x


# =========================================================================== limits
@dataclass(frozen=True, kw_only=True)
class LimitSDE(_ScaledRun):
    """Stationary statistics of a limit (or pre-limit) diffusion by Euler–Maruyama
    (docs/model.md §8, derived).

    ``regime``: ``"a"``, ``"b"``, ``"c"`` (the limits) or ``"pre-a"``, ``"pre-b"``, ``"pre-c"``
    (the pre-limit diffusion at finite ``n``, :func:`prelimit_sde`).  ``max_q``: the largest
    first coordinate on any path (regime (c): never above 0).  ``push_rate``,
    ``y_push_rate``: the stationary rates ``E[dU]/dt`` and ``E[Y dU]/dt`` of the pushing
    (regime (c); in the pre-limit, everything moved from level 1 to ``Y``), with standard
    errors over paths (``None`` where there is no pushing).  ``grid``: ``(recorded paths,
    G, 2)`` after burn-in at times ``t``.  Result protocol as :class:`FluctuationSim`.

    Examples
    --------
    >>> r = limit_sde("a", kappa=1.0, paths=4, time=2.0, burn_in=0.5, dt=0.01, record_paths=0)
    >>> r.to_frame()[["source", "moment"]].iloc[0].tolist()
    ['limit diffusion (a), 4 paths', 'mean_z1']
    """

    regime: str
    params: dict
    paths: int
    dt: float
    max_q: float
    push_rate: float | None = None
    push_rate_stderr: float | None = None
    y_push_rate: float | None = None
    y_push_rate_stderr: float | None = None

    def _label(self) -> str:
        kind = "pre-limit diffusion" if self.regime.startswith("pre") else "limit diffusion"
        return f"{kind} ({self.regime.removeprefix('pre-')}), {self.paths} paths"

    def _names(self) -> tuple[str, str]:
        return ("Z1", "Z2") if self.regime.endswith("a") else ("Q", "Y")

    def _header(self) -> str:
        out = f"{self.time:g} time units after burn-in {self.burn_in:g}, dt {self.dt:g}, {self.seconds:.2f} s"
        if self.push_rate is not None:
            out += f"; pushing rate {self.push_rate:.4g} ± {self.push_rate_stderr:.2g}"
        return out

    def to_dict(self) -> dict:
        if self.regime.startswith("pre"):
            method = "Euler–Maruyama, pre-limit diffusion (finite-n coefficients; stiff term implicit)"
        else:
            method = "Euler–Maruyama" + (f", reflection by {self.params.get('reflection')}"
                                         if self.regime == "c" else "")
        out = {"regime": self.regime, "params": self.params, "paths": self.paths, "time": self.time,
               "burn_in": self.burn_in, "dt": self.dt, "seconds": self.seconds, "max_q": self.max_q,
               "method": method, **self.moments.to_dict()}
        if self.push_rate is not None:
            out.update(push_rate=self.push_rate, push_rate_stderr=self.push_rate_stderr,
                       y_push_rate=self.y_push_rate, y_push_rate_stderr=self.y_push_rate_stderr)
        return out


SDE_CHUNK = 32  # paths per kernel call (chunk j gets child j of the seed)
REFLECTIONS = ("bridge", "projection")


def _sde_task(args):
    """One chunk of paths of a diffusion (module level: threads, processes or Dask)."""
    from ..engines.sde import em_paths

    kind, par, dt, n_burn, n_steps, rec_every, ss, mine, nrec, G = args
    state = state_from_seed_sequence(ss)
    buf = np.zeros((nrec, G, 2))
    while True:
        parallel.check_stop()
        if em_paths(kind, par, dt, n_burn, n_steps, rec_every, state, mine, buf, CHUNK_STEPS):
            break
    return mine, buf


def _run_sde(kind, par, z0, *, paths, time, burn_in, dt, grid_dt, record_paths, seed, workers,
             max_lag, what, client=None, progress=None):
    """Shared driver of :func:`limit_sde` and :func:`prelimit_sde`: chunks of 32 paths
    (chunk ``j``: xoshiro state from child ``j`` of ``seed``), each advanced in calls of
    :data:`CHUNK_STEPS` steps.  Returns the pieces of a :class:`LimitSDE`."""
    from ..engines.sde import NS

    P = check_int("paths", paths, minimum=2)
    time = check_positive_float("time", time)
    dt = check_positive_float("dt", dt)
    grid_dt = check_positive_float("grid_dt", grid_dt)
    Rp = check_int("record_paths", record_paths, minimum=0, maximum=P)
    rec_every = max(1, int(round(grid_dt / dt)))
    grid_dt = rec_every * dt
    steps_f = time / dt
    _check_grid(Rp, steps_f / rec_every, f"{what}: time = {time:g} with grid_dt = {grid_dt:g} and "
                f"{Rp} recorded path(s)", "lower the time or record fewer paths")
    _check_work(P * (steps_f + burn_in / dt), SDE_STEPS_PER_SECOND,
                f"{what}: {P} paths × (burn-in {burn_in:g} + time {time:g}) / dt {dt:g} needs steps",
                "lower paths, time, burn_in or raise dt", _workers(workers, (P + SDE_CHUNK - 1) // SDE_CHUNK))
    n_steps = int(round(steps_f))
    n_burn = int(round(burn_in / dt))
    if n_steps < 1:
        raise ValueError(f"dt must be below time = {time:g}; got {dt!r}")
    G = n_steps // rec_every
    chunks = [(j * SDE_CHUNK, min(SDE_CHUNK, P - j * SDE_CHUNK)) for j in range((P + SDE_CHUNK - 1) // SDE_CHUNK)]
    ps = np.zeros((P, NS))
    ps[:, 0], ps[:, 1], ps[:, 2] = z0[0], z0[1], z0[0]
    par = np.asarray(par, dtype=float)
    tasks = [(kind, par, dt, n_burn, n_steps, rec_every, ss, ps[lo:lo + size].copy(),
              max(0, min(lo + size, Rp) - min(lo, Rp)), G)
             for (lo, size), ss in zip(chunks, spawn_seeds(seed, len(chunks)))]
    t0 = _time.perf_counter()
    out = _run_jobs(_sde_task, tasks, workers, client, progress)
    secs = _time.perf_counter() - t0
    ps = np.concatenate([o[0] for o in out])
    rec = np.concatenate([o[1] for o in out]) if out else np.zeros((0, G, 2))
    T = n_steps * dt
    mom = _moments_from_blocks(ps[:, 3:8] * dt / T)
    push = ps[:, 8] / T
    ypush = ps[:, 9] / T
    if Rp > 0 and G >= 8:
        L = max(1, min(int(max_lag / grid_dt), G // 4))
        a1, s1 = autocorrelation(rec[:, :, 0], L)
        a2, s2 = autocorrelation(rec[:, :, 1], L)
    else:
        L = 0
        a1 = a2 = s1 = s2 = np.ones(1)
    return dict(paths=P, time=time, burn_in=burn_in, dt=dt, seconds=secs, moments=mom,
                max_q=float(ps[:, 2].max()), t=np.arange(G) * grid_dt, grid=rec,
                lags=np.arange(L + 1) * grid_dt, acf_z1=a1, acf_z2=a2, acf_z1_stderr=s1, acf_z2_stderr=s2,
                push=(*_mean_and_stderr(push), *_mean_and_stderr(ypush)))


def _mean_and_stderr(per_path: np.ndarray) -> tuple[float, float]:
    """Mean over independent paths and its standard error (:func:`supermarket.stats.replication_error`,
    through :func:`supermarket._results.mean_stderr`)."""
    m, se = mean_stderr(per_path)
    return m, se


def limit_sde(regime, *, kappa=None, c=None, zeta=None, paths=256, time=100.0, burn_in=None,
              dt=1e-3, record_paths=8, grid_dt=0.05, max_lag=10.0, seed=0, workers=None,
              reflection="bridge", client=None) -> LimitSDE:
    """Simulate the limit diffusion of ``regime`` (docs/model.md §8, derived) with many paths.

    Parameters
    ----------
    regime : {"a", "b", "c"}
        (a): ``kappa``; (b): ``c``, ``zeta``; (c): ``zeta`` (reflected at ``Q <= 0``).
    reflection : {"bridge", "projection"}
        Regime (c) only.  ``"bridge"`` (default) pushes by the maximum of the free path over
        each step, sampled from its Brownian bridge: no ``O(√dt)`` bias from excursions
        inside a step.  ``"projection"`` projects the end point onto ``Q <= 0`` and adds the
        projected amount to ``Y``; it misses those excursions (a bias of order ``√dt``).
    paths, time, burn_in, dt
        Each path runs ``burn_in`` (default 20, and at least ``5/ζ²`` in (c), whose
        relaxation slows down as ``ζ → 0``) then ``time`` with step ``dt``.
    seed, workers
        Chunk ``j`` of 32 paths uses a xoshiro256** state from child ``j`` of ``seed``:
        identical results for any ``workers`` (threads), any process, any machine.

    Returns
    -------
    LimitSDE
        Moments = averages of the per-path time averages, with standard errors from their
        spread over the independent paths; in (c) also the pushing rates ``E[dU]/dt`` and
        ``E[Y dU]/dt``.  The Euler–Maruyama bias is ``O(dt)``.

    Raises
    ------
    ValueError
        Bad parameters, or work / memory beyond the limits of :func:`simulate_fluctuations`.

    Examples
    --------
    >>> r = limit_sde("c", zeta=1.0, paths=32, time=5.0, burn_in=1.0, dt=1e-2)
    >>> r.max_q <= 0.0
    True
    """
    from ..engines.sde import KIND_A, KIND_B, KIND_C

    if regime == "a":
        kappa = check_positive_float("kappa", kappa)
        kind, par, z0 = KIND_A, [kappa], (0.0, 0.0)
        params = {"kappa": kappa}
    elif regime == "b":
        c = check_positive_float("c", c)
        zeta = _real("zeta", zeta)
        kind, par = KIND_B, [c, zeta]
        z0 = (-zeta, math.exp(-c * zeta) if -c * zeta < 50 else 1.0)
        params = {"c": c, "zeta": zeta}
    elif regime == "c":
        zeta = _positive_zeta(zeta)
        kind, par, z0 = KIND_C, [0.0, zeta, 0.0], (-zeta, 1.0 / zeta)
        params = {"zeta": zeta}
    else:
        raise ValueError(f"regime must be 'a', 'b' or 'c'; got {regime!r}")
    if reflection not in REFLECTIONS:
        raise ValueError(f"reflection must be 'bridge' or 'projection'; got {reflection!r}")
    if regime == "c":
        params["reflection"] = reflection
        par[2] = 1.0 if reflection == "bridge" else 0.0
    burn_in = _default_burn_in(regime, zeta, 20.0) if burn_in is None else _nonneg("burn_in", burn_in)
    out = _run_sde(kind, par, z0, paths=paths, time=time, burn_in=burn_in, dt=dt, grid_dt=grid_dt,
                   record_paths=record_paths, seed=seed, workers=workers, max_lag=max_lag, client=client,
                   what=f"the regime-({regime}) limit diffusion")
    push = out.pop("push")
    extra = dict(zip(("push_rate", "push_rate_stderr", "y_push_rate", "y_push_rate_stderr"), push)) if regime == "c" else {}
    return LimitSDE(regime=regime, params=params, **out, **extra)


def prelimit_sde(p: RegimeParams, *, paths=256, time=100.0, burn_in=None, dt=1e-3, record_paths=8,
                 grid_dt=0.05, max_lag=10.0, seed=0, workers=None, client=None) -> LimitSDE:
    """The pre-limit diffusion at ``p`` (docs/model.md §8, derived): the diffusion
    approximation of the chain's levels 1 and 2 with the finite-``n`` coefficients.

    In the coordinates ``Q = √n(G_1 − c_n)``, ``Y = √n G_2`` (any regime; in (a) the
    reported coordinates are shifted to ``p``'s centring), with ``A(Q) = λ_n √n P_n(c_n + Q/√n)``
    (``P_n`` the exact sampling probability, without replacement unless ``p.replace``):

    ``dQ = (−ζ_n − Q + Y − A(Q))dt + σ_1 dW_1``, ``σ_1² = λ_n(1 − P_n) + G_1 − G_2``;
    ``dY = (A(Q) − Y)dt + σ_2 dW_2``, ``σ_2² = (A(Q) + Y)/√n``;  ``Q <= √n(1 − c_n)``.

    It drops only level 3 and above (``G_3``, ``P_n(G_2)``: of order ``P_n(Y/√n)``) and the
    jump structure.  As ``n → ∞`` with ``d_n/√n → c``: ``A(Q) → e^{cQ}``, ``σ_1² → 2``,
    ``σ_2² → 0``, ``ζ_n → ζ``: the regime-(b) limit; with ``d_n/√n → ∞`` the wall ``A`` steepens
    into the reflection of (c).  The stiff term ``A`` is taken implicitly (stable for any
    ``dt``); the remaining bias is ``O(dt)`` away from the wall.

    Parameters and results as :func:`limit_sde`; ``burn_in`` defaults as there, with
    ``ζ = ζ_n``.

    Parameters
    ----------
    p : RegimeParams
        The finite-``n`` point (:func:`regime_a`, :func:`regime_b`, :func:`regime_c`).
    paths, time, burn_in, dt
        Each path runs ``burn_in`` then ``time`` with step ``dt`` (as in :func:`limit_sde`).
    record_paths : int, default 8
        Paths whose trajectories are kept.
    grid_dt : float, default 0.05
        Spacing of the recorded grid.
    max_lag : float, default 10.0
        Largest autocorrelation lag (time units).
    seed, workers
        As in :func:`limit_sde`: identical results for any ``workers``.
    client : dask.distributed.Client, optional
        Run the chunks of paths on this Dask client instead of threads.

    Returns
    -------
    LimitSDE
        ``regime = "pre-" + p.regime``; moments in ``p``'s coordinates; ``params`` holds
        ``n, d_n, lambda_n, c_n, zeta_n, replace, q_max, effective_c``.

    Raises
    ------
    TypeError
        ``p`` is not a :class:`RegimeParams`.
    ValueError
        Bad parameters or work beyond the limits.

    Examples
    --------
    >>> p = regime_b(10**4, 1.0, 0.5, warn=False)
    >>> r = prelimit_sde(p, paths=32, time=5.0, burn_in=1.0, dt=1e-2)
    >>> round(r.params["c_n"], 4)
    0.955
    """
    from ..engines.sde import KIND_PRE

    if not isinstance(p, RegimeParams):
        raise TypeError("p must be a RegimeParams (from regime_a, regime_b or regime_c)")
    n, d, lam, sq = p.n, p.d, p.lam, math.sqrt(p.n)
    c_n = p.c_n
    zeta_n = sq * (c_n - lam)
    lfall = 0.0 if p.replace else float(gammaln(n + 1) - gammaln(n - d + 1))
    qmax = sq * (1.0 - c_n)
    par = [sq, lam, c_n, zeta_n, float(d), float(n), 1.0 if p.replace else 0.0, lfall, qmax]
    # start at the centre x^n in these coordinates
    z0 = (sq * (p.x[0] - c_n), sq * (p.x[1] if len(p.x) > 1 else 0.0))
    zeta_eff = zeta_n if zeta_n > 0 else None
    burn_in = (_default_burn_in("c" if p.regime == "c" else p.regime, zeta_eff, 20.0) if burn_in is None
               else _nonneg("burn_in", burn_in))
    out = _run_sde(KIND_PRE, par, z0, paths=paths, time=time, burn_in=burn_in, dt=dt, grid_dt=grid_dt,
                   record_paths=record_paths, seed=seed, workers=workers, max_lag=max_lag, client=client,
                   what=f"the pre-limit diffusion at n = {n}")
    push = out.pop("push")
    # report in p's coordinates: z = √n(G − m) = (Q + √n(c_n − m_1), Y − √n m_2)
    s1, s2 = sq * (c_n - p.m[0]), -sq * p.m[1]
    m = out["moments"]
    out["moments"] = Moments(m.mean_z1 + s1, m.mean_z2 + s2, m.var_z1, m.var_z2, m.cov_z1z2, stderr=m.stderr)
    out["grid"] = out["grid"] + np.array([s1, s2])
    out["max_q"] = out["max_q"] + s1
    params = {"n": n, "d_n": d, "lambda_n": lam, "c_n": c_n, "zeta_n": zeta_n, "replace": p.replace,
              "q_max": qmax, "effective_c": d / (sq * c_n)}
    return LimitSDE(regime=f"pre-{p.regime}", params=params, push_rate=push[0], push_rate_stderr=push[1],
                    y_push_rate=push[2], y_push_rate_stderr=push[3], **out)


def limit_for(p: RegimeParams, **kw) -> LimitSDE:
    """:func:`limit_sde` with the limit parameters matched at ``p`` (``p.limit``).

    Parameters
    ----------
    p : RegimeParams
    **kw
        Further arguments of :func:`limit_sde`.

    Returns
    -------
    LimitSDE

    Examples
    --------
    >>> r = limit_for(regime_c(100, 1.0, warn=False), paths=4, time=1.0, burn_in=0.2, dt=0.01, record_paths=0)
    >>> r.regime, r.max_q <= 0
    ('c', True)
    """
    return limit_sde(p.regime, **p.limit, **kw)


def limit_closed_form(kappa) -> Moments:
    """Stationary moments of the regime-(a) limit (docs/model.md §8, derived):
    ``E Z = 0``, ``Var Z_1 = 2/(2+κ)``, ``Cov = κ/(2+κ)``, ``Var Z_2 = κ²/(2+κ)``.

    Parameters
    ----------
    kappa : float
        ``κ > 0``.

    Returns
    -------
    Moments
        Exact (``stderr=None``).

    Raises
    ------
    ValueError
        ``kappa`` not a positive number.

    Examples
    --------
    >>> limit_closed_form(2.0).var_z2
    1.0
    """
    k = check_positive_float("kappa", kappa)
    return Moments(mean_z1=0.0, mean_z2=0.0, var_z1=2 / (2 + k), var_z2=k * k / (2 + k),
                   cov_z1z2=k / (2 + k), stderr=None)


def limit_acf_a(kappa, lags) -> tuple[np.ndarray, np.ndarray]:
    """Autocorrelations of ``Z_1`` and ``Z_2`` in the stationary regime-(a) limit:
    ``Cov(Z(t+τ), Z(t)) = e^{Aτ} Σ`` with ``A = [[−(1+κ), 1], [κ, −1]]`` (derived).

    Parameters
    ----------
    kappa : float
    lags : array_like
        Time lags.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)

    Examples
    --------
    >>> a1, a2 = limit_acf_a(1.0, [0.0, 1.0])
    >>> a1.round(4).tolist(), a2.round(4).tolist()
    ([1.0, 0.3777], [1.0, 0.7866])
    """
    from scipy.linalg import expm

    k = check_positive_float("kappa", kappa)
    A = np.array([[-(1 + k), 1.0], [k, -1.0]])
    m = limit_closed_form(k)
    S = np.array([[m.var_z1, m.cov_z1z2], [m.cov_z1z2, m.var_z2]])
    lags = np.asarray(lags, dtype=float)
    c = np.array([expm(A * t) @ S for t in lags])
    return c[:, 0, 0] / S[0, 0], c[:, 1, 1] / S[1, 1]


# =========================================================================== LNA
def lna_moments(p: RegimeParams) -> Moments:
    """The finite-n linear noise approximation at the centre ``x^n``
    (``meanfield.lna(at="centre")``, docs/model.md §3, §8) in the coordinates of ``p``: mean
    ``√n(x^n_j − m_j)``, covariance of ``√n(G − x^n)`` (levels 1, 2).

    Parameters
    ----------
    p : RegimeParams

    Returns
    -------
    Moments
        Exact for the approximation (``stderr=None``).

    Raises
    ------
    ValueError
        Sizes beyond the LNA's dense Lyapunov solve.

    Examples
    --------
    >>> round(lna_moments(regime_a(10**4, 1.0, warn=False)).var_z1, 3)
    0.503
    """
    from .. import meanfield

    res = meanfield.lna(p.d, p.lam, n=p.n, at="centre", replace=p.replace)
    W = np.asarray(res.covariance)
    x = np.asarray(res.centre)
    sq = math.sqrt(p.n)
    x2 = x[1] if x.size > 1 else 0.0
    w22 = W[1, 1] if W.shape[0] > 1 else 0.0
    w12 = W[0, 1] if W.shape[0] > 1 else 0.0
    return Moments(mean_z1=sq * (x[0] - p.m[0]), mean_z2=sq * (x2 - p.m[1]), var_z1=float(W[0, 0]),
                   var_z2=float(w22), cov_z1z2=float(w12), stderr=None)


def lna_acf(p: RegimeParams, lags) -> tuple[np.ndarray, np.ndarray]:
    """Autocorrelations of ``z1`` and ``z2`` in the finite-n LNA at ``x^n``:
    ``Cov(ξ(t+τ), ξ(t)) = e^{Jτ} W`` with ``J`` the drift's Jacobian (docs/model.md §3, §8).

    Parameters
    ----------
    p : RegimeParams
    lags : array_like

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)

    Examples
    --------
    >>> a1, a2 = lna_acf(regime_a(10**4, 1.0, warn=False), [0.0, 1.0])
    >>> a1.round(4).tolist()
    [1.0, 0.3992]
    """
    from scipy.linalg import expm

    from .. import meanfield

    res = meanfield.lna(p.d, p.lam, n=p.n, at="centre", replace=p.replace)
    J = np.asarray(res.jacobian)
    W = np.asarray(res.covariance)
    c = np.array([expm(J * t) @ W for t in np.asarray(lags, dtype=float)])
    a2 = c[:, 1, 1] / W[1, 1] if W.shape[0] > 1 and W[1, 1] > 0 else np.full(len(c), np.nan)
    return c[:, 0, 0] / W[0, 0], a2


# =========================================================================== comparison
@dataclass(frozen=True)
class Comparison:
    """The chain beside its references at one ``n`` (docs/model.md §8, derived): the limit
    diffusion, the pre-limit diffusion at this ``n`` (``prelimit``; ``None`` when not
    asked for), the finite-n LNA and, in (a), the limit's closed form.  Result protocol:
    :meth:`to_dict`, :meth:`to_frame`, :meth:`summary`, :meth:`plot`.

    Examples
    --------
    >>> cmp = compare(regime_a(400, 1.0, d=2, warn=False), time=10.0, burn_in=1.0, grid_dt=0.5,
    ...               sde_paths=4, sde_time=1.0, sde_burn_in=0.2, dt=0.01, workers=1, prelimit=False)
    >>> sorted(set(cmp.to_frame()["source"]))[:2]
    ['chain (simulated)', 'finite-n LNA at x^n']
    """

    params: RegimeParams
    sim: FluctuationSim
    limit: LimitSDE
    lna: Moments | None
    lna_note: str
    limit_exact: Moments | None  # regime (a): closed form
    prelimit: LimitSDE | None = None

    def to_dict(self) -> dict:
        p = self.params
        out = {"regime": p.regime, "n": p.n, "d_n": p.d, "lambda_n": p.lam, "replace": p.replace,
               "coordinates": p.coordinates, "params": p.to_dict(), "derived": DERIVED_NOTE,
               "sim": self.sim.to_dict(), "limit": self.limit.to_dict(),
               "prelimit": None if self.prelimit is None else self.prelimit.to_dict(),
               "lna": None if self.lna is None else self.lna.to_dict(), "lna_note": self.lna_note,
               "warnings": list(p.warnings)}
        if self.limit_exact is not None:
            out["limit_exact"] = self.limit_exact.to_dict()
        out["z_scores"] = self.z_scores()
        return out

    def _rows(self):
        rows = [("chain (simulated)", self.sim.moments),
                (f"limit diffusion (EM, {self.limit.paths} paths)", self.limit.moments)]
        if self.prelimit is not None:
            rows.append((f"pre-limit diffusion at n (EM, {self.prelimit.paths} paths)", self.prelimit.moments))
        if self.limit_exact is not None:
            rows.append(("limit, closed form (derived)", self.limit_exact))
        rows.append(("finite-n LNA at x^n", self.lna))
        return rows

    def to_frame(self):
        """Tidy moments: one row per (source, moment) with ``value`` and ``stderr`` (NaN for
        exact values)."""
        import pandas as pd

        recs = []
        for name, m in self._rows():
            for k in KEYS:
                recs.append({"source": name, "moment": k,
                             "value": np.nan if m is None else float(getattr(m, k)),
                             "stderr": np.nan if m is None or not m.stderr else float(m.stderr[k])})
        return pd.DataFrame(recs)

    def summary(self) -> str:
        """The text ``supermarket fluctuations`` prints: the regime's numbers, the moments
        table (± standard error), z-scores, the error-bar check and the chain's speed."""
        p = self.params
        lines = ["supermarket fluctuations  " + "\n".join(p.summary().splitlines()[:3]), DERIVED_NOTE, ""]
        rows = []
        for name, m in self._rows():
            if m is None:
                rows.append([name, *(["—"] * len(KEYS))])
            else:
                rows.append([name, *[f"{getattr(m, k):.4f}" + (f" ± {m.stderr[k]:.4f}" if m.stderr else "")
                                     for k in KEYS]])
        lines.append(text_table(["source", *KEYS], rows, title="Stationary moments (± standard error)"))
        for ref, row in self.z_scores().items():
            lines.append(f"z-scores vs {ref}: " + ", ".join(f"{k} {v:+.2f}" for k, v in row.items()))
        s = self.sim
        if s.moments.note:
            lines.append(f"chain error bars: {s.moments.note}")
        else:
            lines.append(f"chain error bars: batches of {s.time / s.batches:g} time units, ≥ {BATCH_TAU_FACTOR:g} × "
                         f"the integrated autocorrelation time {s.moments.tau_int:.3g}")
        lines.append(f"chain: {s.events:.3g} events in {s.seconds:.2f} s ({s.events / max(s.seconds, 1e-9):.3g}/s), "
                     f"{s.replications} × {s.time:g} time units after burn-in {s.burn_in:g}")
        if p.regime == "c":
            lines.append(f"reflected limit ({self.limit.params.get('reflection')} reflection): largest Q on any "
                         f"path = {self.limit.max_q:.3g}; pushing rate E[dU]/dt = {self.limit.push_rate:.4f} ± "
                         f"{self.limit.push_rate_stderr:.4f} (equals E Y in the limit)")
        if p.warnings:
            lines.append(f"{len(p.warnings)} condition(s) of the regime fail at this n: " + "; ".join(p.warnings))
        return "\n".join(lines)

    def plot(self, path=None):
        """One figure: a path of the chain and of the limit, histograms of both coordinates,
        the autocorrelation of the first; saved at ``path`` when given.

        Returns
        -------
        matplotlib.figure.Figure
        """
        plt = pyplot()

        cmp = self
        p = cmp.params
        names = ("Z1", "Z2") if p.regime == "a" else ("Q", "Y")
        fig, axes = plt.subplots(2, 2, figsize=(11, 7))
        sim, lim = cmp.sim, cmp.limit
        k = min(sim.t.size, max(2, int(30 / (sim.t[1] - sim.t[0]))))
        axes[0, 0].plot(sim.t[:k], sim.grid[0, :k, 0], lw=0.7, label="chain")
        if lim.t.size > 1:
            kl = min(lim.t.size, max(2, int(30 / (lim.t[1] - lim.t[0]))))
            axes[0, 0].plot(lim.t[:kl], lim.grid[0, :kl, 0], lw=0.7, label="limit (derived)")
        axes[0, 0].set_xlabel("time")
        axes[0, 0].set_ylabel(names[0])
        axes[0, 0].legend(fontsize=7)
        for j, ax in ((0, axes[0, 1]), (1, axes[1, 0])):
            s = sim.grid[:, :, j].ravel()
            l = lim.grid[:, :, j].ravel() if lim.grid.size else s  # noqa: E741
            lo, hi = np.percentile(np.concatenate([s, l]), [0.1, 99.9])
            bins = np.linspace(lo, hi if hi > lo else lo + 1, 50)
            ax.hist(s, bins=bins, density=True, alpha=0.5, label="chain")
            if lim.grid.size:
                ax.hist(l, bins=bins, density=True, histtype="step", lw=1.5, label="limit (EM)")
            ax.set_xlabel(names[j])
            ax.legend(fontsize=7)
        ax = axes[1, 1]
        ax.errorbar(sim.lags, sim.acf_z1, yerr=sim.acf_z1_stderr, lw=1, label=f"chain {names[0]}")
        if lim.lags.size > 1:
            ax.plot(lim.lags, lim.acf_z1, lw=1, label=f"limit {names[0]}")
        ax.set_xlabel("lag")
        ax.set_ylabel("autocorrelation")
        ax.legend(fontsize=7)
        fig.suptitle(f"Regime ({p.regime}) n={p.n} d_n={p.d} λ_n={p.lam:.5g}: {p.coordinates}", fontsize=9)
        fig.tight_layout()
        plt.close(fig)
        return save_figure(fig, path)

    def references(self) -> list[tuple[str, Moments]]:
        """``(name, moments)`` of every reference present."""
        out = [("limit", self.limit.moments)]
        if self.prelimit is not None:
            out.append(("prelimit", self.prelimit.moments))
        if self.lna is not None:
            out.append(("lna", self.lna))
        return out

    def z_scores(self) -> dict:
        """``(sim − other)/stderr`` for each key, against the limit, the pre-limit and the LNA."""
        out = {}
        s = self.sim.moments
        for name, other in self.references():
            row = {}
            for k in KEYS:
                se2 = s.stderr[k] ** 2 + (other.stderr[k] ** 2 if other.stderr else 0.0)
                row[k] = (getattr(s, k) - getattr(other, k)) / math.sqrt(se2) if se2 > 0 else float("nan")
            out[name] = row
        return out


def compare(p: RegimeParams, *, time=200.0, burn_in=None, replications=1, seed=0, workers=None,
            sde_paths=256, sde_time=100.0, sde_burn_in=None, dt=1e-3, grid_dt=0.05,
            reflection="bridge", prelimit=True, client=None) -> Comparison:
    """The simulated stationary moments at ``p`` beside (i) the limit diffusion matched at
    ``p`` (Euler–Maruyama; for (a) also the closed form), (ii) the pre-limit diffusion at
    this ``n`` (:func:`prelimit_sde`; ``prelimit=False`` skips it) and (iii) the finite-n
    LNA at ``x^n`` (docs/model.md §8; the limits are derived).  Seeds: children 0 (chain),
    1 (limit), 2 (pre-limit) of ``seed``.

    Parameters
    ----------
    p : RegimeParams
    time, burn_in, replications, seed, workers, grid_dt, client
        The chain's, as :func:`simulate_fluctuations`.
    sde_paths, sde_time, sde_burn_in, dt
        The diffusions', as ``paths``, ``time``, ``burn_in``, ``dt`` of :func:`limit_sde`.
    reflection : {"bridge", "projection"}
        Regime (c)'s reflection scheme.
    prelimit : bool, default True

    Returns
    -------
    Comparison

    Raises
    ------
    ValueError, TypeError
        Bad parameters (named).

    Examples
    --------
    >>> cmp = compare(regime_a(400, 1.0, d=2, warn=False), time=10.0, burn_in=1.0, grid_dt=0.5,
    ...               sde_paths=4, sde_time=1.0, sde_burn_in=0.2, dt=0.01, workers=1)
    >>> sorted(cmp.z_scores())
    ['limit', 'lna', 'prelimit']
    """
    if reflection not in REFLECTIONS:
        raise ValueError(f"reflection must be 'bridge' or 'projection'; got {reflection!r}")
    if not isinstance(prelimit, (bool, np.bool_)):
        raise TypeError(f"prelimit must be True or False; got {prelimit!r}")
    ss = spawn_seeds(seed, 3)
    sim = simulate_fluctuations(p, time=time, burn_in=burn_in, replications=replications, seed=ss[0],
                                workers=workers, grid_dt=grid_dt, client=client)
    extra = {"reflection": reflection} if p.regime == "c" else {}
    rp = min(32, sde_paths)
    lim = limit_for(p, paths=sde_paths, time=sde_time, burn_in=sde_burn_in, dt=dt, seed=ss[1],
                    record_paths=rp, workers=workers, grid_dt=grid_dt, client=client, **extra)
    pre = (prelimit_sde(p, paths=sde_paths, time=sde_time, burn_in=sde_burn_in, dt=dt, seed=ss[2],
                        record_paths=rp, workers=workers, grid_dt=grid_dt, client=client) if prelimit else None)
    try:
        lna = lna_moments(p)
        note = "meanfield.lna(at='centre'): covariance of √n(G − x^n), mean √n(x^n − m)"
    except (ImportError, AttributeError, ValueError, np.linalg.LinAlgError) as exc:
        lna, note = None, f"not available: {exc}"
    exact = limit_closed_form(p.limit["kappa"]) if p.regime == "a" else None
    return Comparison(params=p, sim=sim, limit=lim, lna=lna, lna_note=note, limit_exact=exact, prelimit=pre)


# =========================================================================== n^{-1/2}
@dataclass(frozen=True)
class ScalingRow:
    """One ``n`` of :func:`scaling`: ``sd(G_1)`` and ``√n·sd(G_1)`` with standard errors
    (delta method from the variance's), and the finite-n LNA's ``√n·sd(G_1)`` (``None``
    where the LNA refuses the size).

    Examples
    --------
    >>> ScalingRow(100, 3, 0.9, 0.06, 0.01, 0.6, 0.1, None).summary()
    'n=100 d_n=3: sd(G1) = 0.06 ± 0.01, √n sd(G1) = 0.6 ± 0.1 (LNA —)'
    """

    n: int
    d: int
    lam: float
    sd_g1: float
    sd_g1_stderr: float
    sqrt_n_sd_g1: float
    sqrt_n_sd_g1_stderr: float
    lna_sqrt_n_sd_g1: float | None
    error_bars_adequate: bool | None = None  # the chain's batches long against its autocorrelation
    note: str = ""  # why the error bars are not adequate ("too short to know …")

    def to_dict(self) -> dict:
        return asdict(self)

    def to_frame(self):
        """This row as a one-row :class:`pandas.DataFrame`."""
        import pandas as pd

        return pd.DataFrame([self.to_dict()])

    def summary(self) -> str:
        """One line: ``n``, ``d_n``, ``sd(G_1)`` and ``√n·sd(G_1)`` with standard errors."""
        lna = "—" if self.lna_sqrt_n_sd_g1 is None else f"{self.lna_sqrt_n_sd_g1:.4g}"
        if self.error_bars_adequate is False:  # no confident ± on a run too short to know its error
            return (f"n={self.n} d_n={self.d}: sd(G1) = {self.sd_g1:.4g}, √n sd(G1) = {self.sqrt_n_sd_g1:.4g} "
                    f"(too short to know its error) (LNA {lna})")
        return (f"n={self.n} d_n={self.d}: sd(G1) = {self.sd_g1:.4g} ± {self.sd_g1_stderr:.2g}, "
                f"√n sd(G1) = {self.sqrt_n_sd_g1:.4g} ± {self.sqrt_n_sd_g1_stderr:.2g} (LNA {lna})")


@dataclass(frozen=True)
class ScalingResult:
    """The rows of :func:`scaling`, one per ``n`` (a read-only sequence of :class:`ScalingRow`).

    Examples
    --------
    >>> r = ScalingResult((ScalingRow(100, 3, 0.9, 0.06, 0.01, 0.6, 0.1, 0.62),))
    >>> len(r), r[0].n, r.to_frame()["sqrt_n_sd_g1"].tolist()
    (1, 100, [0.6])
    """

    rows: tuple[ScalingRow, ...]

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]

    def to_dict(self) -> dict:
        return {"rows": [r.to_dict() for r in self.rows], "derived": DERIVED_NOTE}

    def to_frame(self):
        """One row per ``n`` (the fields of :class:`ScalingRow`)."""
        import pandas as pd

        return pd.DataFrame([r.to_dict() for r in self.rows])

    def summary(self) -> str:
        """A table of ``sd(G_1)`` and ``√n·sd(G_1)`` (± standard error) against ``n``."""
        rows = [[str(r.n), str(r.d), f"{r.sd_g1:.4g} ± {r.sd_g1_stderr:.2g}",
                 f"{r.sqrt_n_sd_g1:.4g} ± {r.sqrt_n_sd_g1_stderr:.2g}",
                 "—" if r.lna_sqrt_n_sd_g1 is None else f"{r.lna_sqrt_n_sd_g1:.4g}"] for r in self.rows]
        return text_table(["n", "d_n", "sd(G1)", "√n sd(G1)", "LNA √n sd(G1)"], rows,
                          title="The n^(-1/2) order in regime (a)")

    def plot(self, path=None):
        """``sd(G_1)`` against ``n`` on log axes (±2 standard errors) with an ``n^{-1/2}``
        guide through the first point.

        Parameters
        ----------
        path : str or path-like, optional
            Save the figure there (PNG by the suffix).

        Returns
        -------
        matplotlib.figure.Figure
        """
        plt = pyplot()

        ns = np.array([r.n for r in self.rows], dtype=float)
        sd = np.array([r.sd_g1 for r in self.rows])
        se = np.array([r.sd_g1_stderr for r in self.rows])
        fig, ax = plt.subplots(figsize=(5, 4))
        ax.errorbar(ns, sd, yerr=2 * se, fmt="o", capsize=3, label="simulated sd(G1) (±2 se)")
        if ns.size:
            ax.plot(ns, sd[0] * np.sqrt(ns[0] / ns), "k--", lw=1, label="n^(-1/2)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("n")
        ax.set_ylabel("sd(G1)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        plt.close(fig)
        return save_figure(fig, path)


def scaling(ns=(10**3, 10**4, 10**5, 10**6), *, kappa=1.0, theta=0.25, time=100.0, replications=1,
            seed=0, workers=None, client=None) -> ScalingResult:
    """The ``n^{-1/2}`` order in regime (a): ``sd(G_1)`` falls like ``n^{-1/2}`` while
    ``√n·sd(G_1) = sd(Z_1)`` stays of order one (docs/model.md §8).

    Parameters
    ----------
    ns : sequence of int
    kappa, theta
        As :func:`regime_a`.
    time, replications, seed, workers, client
        As :func:`simulate_fluctuations` (entry ``i`` of ``ns``: child ``i`` of ``seed``).

    Returns
    -------
    ScalingResult

    Examples
    --------
    >>> r = scaling((100, 400), time=5.0, workers=1)
    >>> r.to_frame()["n"].tolist()
    [100, 400]
    """
    rows = []
    for i, (n, ss) in enumerate(zip(ns, spawn_seeds(seed, len(ns)))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RegimeWarning)
            p = regime_a(n, kappa, theta=theta)
        sim = simulate_fluctuations(p, time=time, replications=replications, seed=ss, workers=workers,
                                    client=client)
        m = sim.moments
        sd = math.sqrt(max(m.var_z1, 0.0))
        sd_se = m.stderr["var_z1"] / (2 * sd) if sd > 0 else float("nan")
        try:
            lna_sd = math.sqrt(lna_moments(p).var_z1)
        except ValueError:  # the LNA refuses sizes beyond its dense Lyapunov solve
            lna_sd = None
        sq = math.sqrt(p.n)
        rows.append(ScalingRow(n=p.n, d=p.d, lam=p.lam, sd_g1=sd / sq, sd_g1_stderr=sd_se / sq,
                               sqrt_n_sd_g1=sd, sqrt_n_sd_g1_stderr=sd_se, lna_sqrt_n_sd_g1=lna_sd,
                               error_bars_adequate=m.adequate, note=m.note or ""))
    return ScalingResult(tuple(rows))
