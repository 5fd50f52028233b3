"""Standard errors of averages of correlated series (docs/model.md §9).

The one place in ``supermarket`` that turns a series of measurements into a mean with an
honest standard error: :func:`blocking` (Flyvbjerg–Petersen blocking with Jonsson's
automatic plateau; ``reliable=False`` when the series is too short to know its own error),
:func:`blocking_table`, :func:`mser` (start-up truncation, White 1997),
:func:`replication_error` (independent replications, Student t on ``R − 1`` degrees of
freedom) and :func:`mean_stderr`.  Every estimate is an :class:`ErrorEstimate`; the rules,
conventions (``tau_int = 1/2 + Σ_{k≥1} ρ_k``, ``n_eff = N/(2 tau_int)``) and references
are in docs/model.md §9.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._results import Result

__all__ = [
    "ErrorEstimate",
    "MSERResult",
    "BlockingLevel",
    "blocking",
    "blocking_table",
    "mser",
    "replication_error",
    "mean_stderr",
    "skew_quantile",
    "t_quantile",
    "MIN_BLOCKS",
    "PLATEAU_ALPHA",
    "PLATEAU_RHO_MAX",
]

MIN_BLOCKS = 32
"""Fewest blocks the plateau level may leave for the estimate to be called reliable."""

PLATEAU_ALPHA = 0.01
"""Level of the χ² test that the remaining lag-1 autocorrelations are zero (Jonsson 2018)."""

PLATEAU_RHO_MAX = 0.6
"""A plateau level's lag-1 autocorrelation, bias-corrected, must stay below this.  Jonsson's
χ² pools the deeper levels, whose few blocks only add noise, and so misses the correlation
of a series barely longer than its correlation time (measured: benchmarks/README.md)."""


def _block_rho(x: float) -> float:
    """Lag-1 autocorrelation of neighbouring block means of a process with autocorrelation
    ``e^{−t/τ}``, blocks of length ``b = xτ``: ``(1 − e^{−x})² / (2(x − 1 + e^{−x}))``."""
    if x < 1e-6:
        return 1.0 - x / 3.0
    return math.expm1(-x) ** 2 / (2.0 * (x - 1.0 + math.exp(-x)))


def _block_factor(r: float) -> float:
    """``Var(mean of many blocks) / (σ_block²/blocks)`` for block means with lag-1
    autocorrelation ``r`` under the exponential-correlation model: lag ``k`` is
    ``r e^{−(k−1)x}`` with ``x`` solved from :func:`_block_rho`, so the factor is
    ``1 + 2r/(1 − e^{−x})`` (``1 + 2r`` for long blocks, ``(1 + r)/(1 − r)`` for short).

    For ``r <= 0`` it is the first-order ``1 + 2r``, the same line the model approaches as
    ``r → 0``: an estimated ``r`` scatters by about ``1/√blocks`` around a true value near 0,
    and a factor cut off at 1 below 0 would be biased high by that scatter."""
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


@functools.lru_cache(maxsize=256)
def _chi2_quantiles(L: int, alpha: float) -> np.ndarray:
    """``χ²_{1−alpha}`` quantiles on ``L, L − 1, …, 1`` degrees of freedom (cached: scipy's
    ``ppf`` cost more than the rest of a short blocking analysis)."""
    from scipy.stats import chi2

    q = chi2.ppf(1.0 - alpha, np.arange(L, 0, -1))
    q.setflags(write=False)
    return q


def _blocking_dof(m: int) -> float:
    """Degrees of freedom of the blocking variance ``σ̂²/m · g(ρ̃)``, ``g = f (m − 1)/(m − f)``,
    for ``m`` blocks (Satterthwaite, ``2/relative variance``): ``σ̂²`` has relative variance
    ``2/(m − 1)``; ``ρ̃ = ρ̂(1 + 4/m) + 1/m`` has variance ``(1 + 4/m)²/m`` (that of ``ρ̂`` of
    independent values), carried through ``g'/g = f' m/(f (m − f)) = 2m/(m − 1)`` at ``ρ̃ = 0``
    (``f = 1``, ``f' = 2``; blocks at a plateau are nearly uncorrelated).  A fixed function of
    ``m``: taken at each run's own ``ρ̃`` it would give the runs whose ``f`` happens to be
    small the fewest degrees of freedom, and the widest intervals.  About ``m/3.9`` at 32
    blocks, ``m/3.4`` at 64, ``m/3`` for many (measurements: benchmarks/README.md).

    Examples
    --------
    >>> round(_blocking_dof(32), 2), round(_blocking_dof(64), 1)
    (8.2, 18.7)
    """
    a = 2.0 / (m - 1.0)
    b = (2.0 * m / (m - 1.0)) ** 2 * (1.0 + 4.0 / m) ** 2 / m
    return max(2.0 / (a + b + a * b), 1.0)  # relative variance of a product of independent factors


def t_quantile(dof: float, confidence: float = 0.95) -> float:
    """Two-sided Student-t quantile ``t_{dof, (1+confidence)/2}`` (normal for ``dof = inf``).

    Parameters
    ----------
    dof : float
        Degrees of freedom (``math.inf`` for the normal quantile).
    confidence : float, default 0.95
        Two-sided confidence level in (0, 1).

    Returns
    -------
    float
        The quantile; NaN when ``dof`` is not positive or is NaN.

    Raises
    ------
    ValueError
        ``confidence`` outside (0, 1).

    Examples
    --------
    >>> round(t_quantile(math.inf), 3), round(t_quantile(9), 3)
    (1.96, 2.262)
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1); got {confidence!r}")
    from scipy import stats as _st  # imported here: scipy.stats costs a second at start-up

    q = 0.5 * (1.0 + confidence)
    if not dof > 0 or math.isnan(dof):
        return math.nan
    if math.isinf(dof):
        return float(_st.norm.ppf(q))
    return float(_st.t.ppf(q, dof))


def skew_quantile(q: float, skewness: float) -> float:
    """Half-width, in standard errors, of the symmetric interval that encloses the
    skewness-corrected two-sided interval with Student/normal quantile ``q``
    (docs/model.md §9.1, "Skewed remainders").

    The studentized mean ``e = (x̄ − μ)/s.e.`` of a skewed series is itself skewed (its
    estimated mean and error are correlated): by the first Edgeworth term, with ``g`` the
    skewness of the sampling distribution of ``x̄``, ``e + g/6 + g e²/3`` (Johnson 1978) is
    nearly symmetric; Hall's monotone version ``h(e) = e + g/6 + g e²/3 + g² e³/27`` (P. Hall,
    J. R. Statist. Soc. B 54, 221 (1992)) is invertible, ``h⁻¹(x) = (3/g)((1 + g(x −
    g/6))^{1/3} − 1)``.  The interval ``x̄ − h⁻¹(±q)·s.e.`` reaches further on the side of the
    skew; this returns ``max |h⁻¹(±q)|`` (a symmetric interval that contains it), and ``q``
    when ``skewness`` is 0 or not finite.

    Parameters
    ----------
    q : float
        The symmetric quantile (``1.96``, or Student's ``t_ν``).
    skewness : float
        ``g``, the skewness of the sampling distribution of the mean.

    Returns
    -------
    float
        The half-width in standard errors, at least ``q``.

    Examples
    --------
    >>> skew_quantile(1.96, 0.0)
    1.96
    >>> round(skew_quantile(1.96, 0.05), 3), round(skew_quantile(1.96, -0.05), 3)   # either sign
    (2.037, 2.037)
    >>> 1.96 < skew_quantile(1.96, 0.3) < skew_quantile(1.96, 1.0)
    True
    """
    g = float(skewness)
    if g == 0.0 or not math.isfinite(g) or not math.isfinite(q):
        return q

    def hinv(x):
        return 3.0 / g * (float(np.cbrt(1.0 + g * (x - g / 6.0))) - 1.0)

    return max(abs(hinv(q)), abs(hinv(-q)))


@dataclass(frozen=True)
class ErrorEstimate(Result):
    """A mean with its standard error and how far to trust it.

    Attributes
    ----------
    mean : float
        The average.
    stderr : float
        Its standard error (NaN when it cannot be estimated at all).
    dof : float
        Degrees of freedom of ``stderr`` (for the Student-t quantile of an interval).
    n_eff : float
        Effective number of independent samples, ``σ²/stderr²`` (NaN if unknown).
    tau_int : float
        Integrated autocorrelation time in units of the series' spacing, ``N/(2 n_eff)``.
    reliable : bool
        Whether ``stderr`` can be trusted (a plateau was reached with enough blocks, or
        enough independent replications).
    method : str
        ``"blocking"``, ``"replications"``, ``"pooled"`` or ``"none"``.
    blocks : int
        Blocks (or replications) behind ``stderr``.
    block_size : int
        Elements of the input series per block at the chosen level (1 for replications).
    note : str
        Why the estimate is not reliable ("" when it is).
    skewness : float
        Estimated skewness of the sampling distribution of ``mean`` (0: taken as symmetric,
        the default); a nonzero value widens :meth:`half_width` (:func:`skew_quantile`).

    Examples
    --------
    >>> e = replication_error([1.0, 2.0, 3.0, 4.0])      # stderr = sample sd / √4
    >>> e.method, e.mean, round(e.stderr, 6), e.dof
    ('replications', 2.5, 0.645497, 3.0)
    >>> lo, hi = e.interval()
    >>> bool(lo < 2.5 < hi)
    True
    """

    mean: float
    stderr: float
    dof: float
    n_eff: float
    tau_int: float
    reliable: bool
    method: str
    blocks: int
    block_size: int
    note: str = ""
    skewness: float = 0.0

    def half_width(self, confidence: float = 0.95) -> float:
        """Half-width of the two-sided ``confidence`` interval, ``t_{dof} · stderr``; with a
        nonzero ``skewness`` ``g``, times ``skew_quantile(z, g)/z`` (``z`` the normal quantile,
        1.96 at 95 %): the widening that makes a symmetric interval enclose the
        skewness-corrected one (:func:`skew_quantile`).

        Examples
        --------
        >>> e = replication_error([1.0, 2.0, 3.0])
        >>> round(e.half_width(), 4)  # t_2 = 4.303, s.e. = 1/√3
        2.4841
        """
        q = t_quantile(self.dof, confidence)
        if self.skewness == 0.0 or not math.isfinite(self.skewness):
            return q * self.stderr
        # the skewness factor at the normal quantile (where the Edgeworth expansion is taken);
        # the Student quantile carries the noise of the estimated error, a separate effect
        z = t_quantile(math.inf, confidence)
        return q * skew_quantile(z, self.skewness) / z * self.stderr

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """The two-sided ``confidence`` interval ``mean ± half_width``."""
        h = self.half_width(confidence)
        return (self.mean - h, self.mean + h)

    def covers(self, value: float, confidence: float = 0.95) -> bool:
        """Whether the ``confidence`` interval contains ``value``."""
        lo, hi = self.interval(confidence)
        return bool(lo <= value <= hi)

    _plain = True  # NaN stays NaN in to_dict (supermarket.jsonable maps it)


@dataclass(frozen=True)
class BlockingLevel(Result):
    """One row of a blocking table: ``blocks`` blocks of ``block_size`` input elements, the
    naive standard error ``stderr`` of the mean at this level, its own standard error
    ``stderr_err = stderr/√(2(blocks−1))``, and the lag-1 autocorrelation ``rho1`` of the
    blocked series.

    Examples
    --------
    >>> import numpy as np
    >>> rows = blocking_table(np.arange(8.0))
    >>> [(r.block_size, r.blocks) for r in rows]
    [(1, 8), (2, 4), (4, 2)]
    """

    block_size: int
    blocks: int
    stderr: float
    stderr_err: float
    rho1: float


def _as_series(x, name="x") -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-d series; got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite")
    return a


def _levels(x: np.ndarray):
    """Yield the blocked series: level 0 is ``x``; each next level averages neighbouring
    pairs (an odd element is dropped from the front, where start-up bias lives)."""
    y = x
    size = 1
    while y.size >= 2:
        yield size, y
        if y.size % 2:
            y = y[1:]
        y = 0.5 * (y[0::2] + y[1::2])
        size *= 2


def blocking_table(x: ArrayLike) -> list[BlockingLevel]:
    """The blocking table of Flyvbjerg & Petersen (1989) for the series ``x``.

    Parameters
    ----------
    x : array_like
        A 1-d series of equally weighted measurements (for example batch means of equal
        length), at least 2 long.

    Returns
    -------
    list of BlockingLevel
        One row per level, block size 1, 2, 4, … while at least 2 blocks remain.

    Examples
    --------
    >>> t = blocking_table(np.arange(8.0))
    >>> [(r.block_size, r.blocks) for r in t]
    [(1, 8), (2, 4), (4, 2)]
    """
    a = _as_series(x)
    out = []
    for size, y in _levels(a):
        m = y.size
        v = float(np.var(y, ddof=1))
        se = math.sqrt(v / m)
        yc = y - y.mean()
        v0 = float(np.dot(yc, yc)) / m
        rho = float(np.dot(yc[:-1], yc[1:]) / m / v0) if v0 > 0 else 0.0
        out.append(BlockingLevel(size, m, se, se / math.sqrt(2.0 * (m - 1)) if m > 1 else math.nan, rho))
    return out


def blocking(
    x: ArrayLike, *, min_blocks: int = MIN_BLOCKS, alpha: float = PLATEAU_ALPHA, min_block_size: int = 1
) -> ErrorEstimate:
    """Mean and standard error of a correlated series by blocking, with an automatic plateau.

    The series is blocked repeatedly (neighbouring pairs averaged); the plateau is the first
    level that passes Jonsson's χ² test at level ``alpha`` and whose bias-corrected lag-1
    autocorrelation is below :data:`PLATEAU_RHO_MAX`.  The standard error there is corrected
    for the correlation left between blocks (an exponential-correlation model), with Student t
    on the degrees of freedom of :func:`_blocking_dof`.  The rule, its derivation and its
    calibration are in docs/model.md §9; a slow component hidden under a fast one can still
    fool any single-run estimate, which independent replications (:func:`replication_error`)
    remedy.

    Parameters
    ----------
    x : array_like
        1-d series of equally weighted measurements (batch means of equal length).
    min_blocks : int, default 32
        The plateau must leave at least this many blocks, otherwise the estimate is
        returned with ``reliable=False`` ("too short to know its own error").
    alpha : float, default 0.01
        Level of the test that the remaining autocorrelations are zero.
    min_block_size : int, default 1
        Shortest block (in elements of ``x``) the plateau may use: a correlation time known
        from outside (a model's slowest relaxation time, in units of the series' spacing).
        A slow component with a small share of the variance can pass every test on short
        blocks and still dominate the error of the mean; this makes the plateau look only
        at blocks long enough to see it.

    Returns
    -------
    ErrorEstimate
        ``method="blocking"``; when no plateau is reached with ``min_blocks`` blocks, the
        standard error of the last level that still has ``min_blocks`` blocks (a lower
        bound, flagged unreliable).

    Raises
    ------
    ValueError
        If ``x`` is not a finite 1-d series, or ``min_blocks < 2``.

    Examples
    --------
    An uncorrelated series is on its plateau at once (exact s.e. 1/√4096 = 0.0156):

    >>> rng = np.random.default_rng(1)
    >>> e = blocking(rng.normal(size=4096))
    >>> e.reliable, e.block_size, round(e.stderr, 4)
    (True, 1, 0.0156)

    A strongly correlated short one is too short to estimate:

    >>> z = np.cumsum(rng.normal(size=256))
    >>> e = blocking(z)
    >>> e.reliable, e.note
    (False, 'too short to estimate: no plateau with at least 32 blocks')
    """
    a = _as_series(x)
    if not isinstance(min_blocks, (int, np.integer)) or min_blocks < 2:
        raise ValueError(f"min_blocks must be an integer >= 2; got {min_blocks!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1); got {alpha!r}")
    if not isinstance(min_block_size, (int, np.integer)) or min_block_size < 1:
        raise ValueError(f"min_block_size must be an integer >= 1; got {min_block_size!r}")
    N = a.size
    mean = float(a.mean()) if N else math.nan
    if N < 2:
        return ErrorEstimate(
            mean,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            False,
            "blocking",
            N,
            1,
            "too short to estimate: fewer than 2 measurements",
        )
    v_all = float(np.var(a, ddof=1))
    sizes, ns, var1, stat, rho1 = [], [], [], [], []
    for size, y in _levels(a):
        m = y.size
        yc = y - y.mean()
        v0 = float(np.dot(yc, yc)) / m
        g = float(np.dot(yc[:-1], yc[1:])) / m
        sizes.append(size)
        ns.append(m)
        var1.append(v0 * m / (m - 1.0))
        stat.append(m * (g / v0) ** 2 if v0 > 0 else 0.0)
        rho1.append(g / v0 if v0 > 0 else 0.0)
    L = len(sizes)
    M = np.cumsum(np.asarray(stat)[::-1])[::-1]  # M_j = sum over levels i >= j
    q = _chi2_quantiles(L, float(alpha))  # L − j degrees of freedom at level j

    def rho_tilde(i):  # lag-1 autocorrelation of level i, less the bias of an estimated mean
        return rho1[i] + (1.0 + 4.0 * rho1[i]) / ns[i]

    plateau = next(
        (j for j in range(L) if sizes[j] >= min_block_size and M[j] < q[j] and rho_tilde(j) < PLATEAU_RHO_MAX), None
    )
    if v_all == 0.0:  # a constant series: no variation seen at all
        return ErrorEstimate(
            mean,
            0.0,
            N - 1.0,
            math.nan,
            math.nan,
            False,
            "blocking",
            N,
            1,
            "constant series: no variation seen, error unknown",
        )
    if plateau is not None and ns[plateau] >= min_blocks:
        j, ok, note = plateau, True, ""
    else:
        # the deepest level that still has min_blocks blocks (a lower bound on the error)
        j = max((i for i in range(L) if ns[i] >= min_blocks), default=0)
        ok, note = False, f"too short to estimate: no plateau with at least {min_blocks} blocks"
        if min_block_size > 1:
            note += f" of at least {int(min_block_size)} measurements (the known correlation time)"
    # Correlation left between the blocks at the plateau (the tests cannot see a lag-1
    # autocorrelation much below 1/√n_j, which still biases σ_j²/n_j low): the factor f of the
    # exponential-correlation model (see _block_factor; ρ̃ kept above −0.45 so that f stays
    # positive when a handful of blocks give a wild ρ̂).  σ_j² (ddof = 1) is itself low: for
    # m blocks with Var(mean) = f σ²/m exactly E[σ̂²] = σ² (m − f)/(m − 1), hence the factor
    # (m − 1)/(m − f).  ρ̂_1 of m blocks is low by about (1 + 4ρ)/m, hence ρ̃.  The factor is
    # estimated, so its noise (Var ρ̂_1 ≈ 1/m, twice σ_j²'s relative variance 2/m) cuts the
    # degrees of freedom to about m/3 (tests/test_stats.py checks all three on series whose
    # variance of the mean is exact).
    m = ns[j]
    r = min(max(rho_tilde(j), -0.45), 0.95)
    f = _block_factor(r)
    g = f * (m - 1.0) / max(m - f, 1.0)
    se = math.sqrt(var1[j] / m * g)
    dof = _blocking_dof(m)
    n_eff = v_all / se**2 if se > 0 else math.nan
    tau = N / (2.0 * n_eff) if n_eff and n_eff > 0 else math.nan
    return ErrorEstimate(mean, se, dof, n_eff, tau, ok, "blocking", m, sizes[j], note)


@dataclass(frozen=True)
class MSERResult(Result):
    """MSER truncation of a series: drop the first ``truncate`` elements.  ``forgotten`` is
    False when the rule wanted to drop more than half of the series (the start has not been
    forgotten: the run is too short for its start-up transient); ``statistic`` holds the
    MSER values at each candidate truncation (in groups).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.r_[np.full(50, 10.0), np.random.default_rng(0).standard_normal(200)]
    >>> r = mser(x)                  # the constant start-up transient is dropped
    >>> r.truncate, r.forgotten, r.group
    (50, True, 5)
    """

    truncate: int
    forgotten: bool
    group: int
    statistic: np.ndarray

    _plain = True
    _omit = ("statistic",)


def mser(x: ArrayLike, group: int = 5) -> MSERResult:
    """MSER truncation point of a series (White 1997), by default MSER-5.

    The series is first averaged in consecutive groups of ``group`` (a leftover at the end
    is dropped); for each candidate ``d`` the statistic ``Σ_{i>d} (y_i − ȳ_d)² / (m − d)²``
    (``ȳ_d`` the mean of the groups after ``d``) estimates the squared standard error of the
    truncated mean; the truncation is its minimiser over ``d ≤ m − 2``.  A minimiser in the
    second half of the series means the start-up transient has not died out.

    Parameters
    ----------
    x : array_like
        1-d series in time order (for example batch means).
    group : int, default 5
        Group size (MSER-5: 5).

    Returns
    -------
    MSERResult
        ``truncate`` in elements of ``x`` (a multiple of ``group``).

    Raises
    ------
    ValueError
        If ``x`` is not a finite 1-d series or ``group < 1``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = np.r_[np.linspace(10, 0, 100), rng.normal(size=900)]   # a start-up transient
    >>> r = mser(x)
    >>> 60 <= r.truncate <= 150, r.forgotten
    (True, True)
    >>> mser(np.linspace(10, 0, 1000)).forgotten                   # never settles
    False
    """
    a = _as_series(x)
    if not isinstance(group, (int, np.integer)) or group < 1:
        raise ValueError(f"group must be an integer >= 1; got {group!r}")
    m = a.size // group
    if m < 3:
        return MSERResult(0, True, int(group), np.zeros(0))
    y = a[: m * group].reshape(m, group).mean(axis=1)
    # suffix sums give every truncated mean and sum of squares in O(m)
    s1 = np.cumsum(y[::-1])[::-1]
    s2 = np.cumsum((y * y)[::-1])[::-1]
    cnt = np.arange(m, 0, -1, dtype=float)
    ss = np.maximum(s2 - s1 * s1 / cnt, 0.0)
    stat = (ss / cnt**2)[: m - 1]  # keep at least 2 groups
    d = int(np.argmin(stat))
    return MSERResult(d * int(group), bool(d <= m // 2), int(group), stat)


def replication_error(means: ArrayLike, *, weights: ArrayLike | None = None) -> ErrorEstimate:
    """Mean and standard error from ``R`` independent replications (Student t, ``R − 1`` dof).

    Parameters
    ----------
    means : array_like
        One estimate per replication (each an unbiased estimate of the same quantity).
    weights : array_like, optional
        Positive weights (for example measured times); the mean is then the weighted mean
        and the standard error the delta-method one of a ratio, ``R/(R−1)·Σ w_r²(m_r − m̄)²
        / (Σ w_r)²``; without weights the usual ``s/√R``.

    Returns
    -------
    ErrorEstimate
        ``method="replications"``, ``dof = R − 1``, reliable when ``R >= 2``.

    Raises
    ------
    ValueError
        If ``means`` is empty, not finite, or ``weights`` do not match.

    Examples
    --------
    >>> e = replication_error([1.0, 2.0, 3.0])
    >>> e.mean, round(e.stderr, 6), e.dof
    (2.0, 0.57735, 2.0)
    """
    m = _as_series(means, "means")
    R = m.size
    if R == 0:
        raise ValueError("means must hold at least one replication")
    if weights is None:
        w = np.ones(R)
    else:
        w = _as_series(weights, "weights")
        if w.size != R or np.any(w <= 0):
            raise ValueError("weights must be positive, one per replication")
    mean = float(np.dot(w, m) / w.sum())
    if R < 2:
        return ErrorEstimate(
            mean,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            False,
            "replications",
            R,
            1,
            "one replication: no spread to estimate the error from",
        )
    var = R / (R - 1.0) * float(np.dot(w * w, (m - mean) ** 2)) / float(w.sum()) ** 2
    se = math.sqrt(var)
    v_all = float(np.var(m, ddof=1))
    n_eff = v_all / var if var > 0 else math.nan
    return ErrorEstimate(
        mean, se, R - 1.0, n_eff, R / (2.0 * n_eff) if n_eff and n_eff > 0 else math.nan, True, "replications", R, 1, ""
    )


def mean_stderr(values: Any, axis: int = 0) -> tuple[Any, Any]:
    """Mean over independent replications and its standard error ``s/√R`` (``ddof=1``): a thin
    adapter over :func:`replication_error` (its column-wise form for 2-d input is computed
    here, with the same formula).

    Parameters
    ----------
    values : array_like
        Replications along ``axis`` (``None`` entries of a 1-d list are dropped).
    axis : int, default 0

    Returns
    -------
    (mean, stderr)
        Floats for 1-d input, arrays otherwise; ``stderr`` is ``None`` with fewer than two
        replications; ``(None, None)`` for no replication.

    Examples
    --------
    >>> m, se = mean_stderr([1.0, 2.0, 3.0])
    >>> m, round(se, 12)
    (2.0, 0.57735026919)
    >>> mean_stderr([4.0])
    (4.0, None)
    """
    if isinstance(values, (list, tuple)) and all(np.ndim(v) == 0 for v in values):
        values = [v for v in values if v is not None]
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return None, None
    if x.ndim == 1 and np.all(np.isfinite(x)):
        e = replication_error(x)
        return e.mean, (e.stderr if x.size > 1 else None)
    # column by column (or with non-finite entries, which replication_error refuses and
    # which must propagate as NaN/inf here): the same estimator, s/√R with ddof=1
    R = x.shape[axis]
    mean = x.mean(axis=axis)
    se = x.std(axis=axis, ddof=1) / math.sqrt(R) if R > 1 else None
    if x.ndim == 1:
        return float(mean), (None if se is None else float(se))
    return mean, se
