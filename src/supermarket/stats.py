"""Standard errors of averages of correlated series (docs/model.md §9).

:func:`blocking` (Flyvbjerg–Petersen with Jonsson's automatic plateau), :func:`blocking_table`,
:func:`mser` (start-up truncation), :func:`replication_error` and :func:`mean_stderr`; every
estimate is an :class:`ErrorEstimate`.  Rules, conventions and references: docs/model.md §9.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .batch_means import blocked_levels, blocking_dof, variance_factor
from .result import Result

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
    "blocking_dof",
    "blocked_levels",
    "variance_factor",
    "MIN_BLOCKS",
    "PLATEAU_ALPHA",
    "PLATEAU_RHO_MAX",
]

MIN_BLOCKS = 32
"""Fewest blocks the plateau level may leave for the estimate to be called reliable."""

PLATEAU_ALPHA = 0.01
"""Level of the χ² test that the remaining lag-1 autocorrelations are zero (Jonsson 2018)."""

PLATEAU_RHO_MAX = 0.6
"""Bound on a plateau level's bias-corrected lag-1 autocorrelation, which Jonsson's pooled χ² misses in a
series barely longer than its correlation time (docs/model.md §9; measured: benchmarks/README.md)."""


@functools.lru_cache(maxsize=256)
def _chi2_quantiles(L: int, alpha: float) -> np.ndarray:
    """``χ²_{1−alpha}`` quantiles on ``L, …, 1`` degrees of freedom (cached: scipy's ``ppf`` is slow)."""
    from scipy.stats import chi2

    q = chi2.ppf(1.0 - alpha, np.arange(L, 0, -1))
    q.setflags(write=False)
    return q


def t_quantile(dof: float, confidence: float = 0.95) -> float:
    """Two-sided Student-t quantile ``t_{dof, (1+confidence)/2}`` (normal for ``dof = inf``).

    Parameters
    ----------
    dof : float
        Degrees of freedom (``math.inf``: normal).
    confidence : float
        Two-sided level in (0, 1).

    Returns
    -------
    float
        The quantile; NaN when ``dof`` is not positive.

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
    """Half-width, in standard errors, of the symmetric interval enclosing Hall's
    skewness-corrected one at quantile ``q`` (docs/model.md §9.1, "Skewed remainders").

    Parameters
    ----------
    q : float
        The symmetric quantile (``1.96``, or Student's ``t_ν``).
    skewness : float
        Skewness ``g`` of the sampling distribution of the mean.

    Returns
    -------
    float
        ``max |h⁻¹(±q)|``, at least ``q``; ``q`` when ``g`` is 0 or not finite.

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
    """A mean with its standard error and how far to trust it (docs/model.md §9).

    Attributes
    ----------
    mean, stderr : float
        The average and its standard error (NaN when it cannot be estimated).
    dof : float
        Degrees of freedom of ``stderr``.
    n_eff, tau_int : float
        Effective sample size ``σ²/stderr²`` and ``N/(2 n_eff)`` (NaN if unknown).
    reliable : bool
        Whether ``stderr`` can be trusted.
    method : str
        ``"blocking"``, ``"replications"``, ``"pooled"`` or ``"none"``.
    blocks, block_size : int
        Blocks (or replications) behind ``stderr``, and input elements per block.
    note : str
        Why the estimate is not reliable ("" when it is).
    skewness : float
        Skewness of the sampling distribution of ``mean``; nonzero widens :meth:`half_width`.

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
        """``t_{dof} · stderr``, widened by ``skew_quantile(z, g)/z`` for a skewness ``g`` (docs/model.md §9.1).

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

    def brief(self) -> dict[str, Any]:
        """The fields a result's JSON shows for one estimate: mean, stderr, dof, reliable,
        method, blocks, note."""
        keys = ("mean", "stderr", "dof", "reliable", "method", "blocks", "note")
        return {k: getattr(self, k) for k in keys}

    _plain = True  # NaN stays NaN in to_dict (supermarket.jsonable maps it)


@dataclass(frozen=True)
class BlockingLevel(Result):
    """A row of a blocking table: the naive ``stderr`` at ``blocks`` blocks of ``block_size``, its own
    error ``stderr_err = stderr/√(2(blocks−1))`` and the lag-1 autocorrelation ``rho1``.

    Examples
    --------
    >>> rows = blocking_table(np.arange(8.0))
    >>> [(r.block_size, r.blocks) for r in rows]
    [(1, 8), (2, 4), (4, 2)]
    """

    block_size: int
    blocks: int
    stderr: float
    stderr_err: float
    rho1: float


def _unknown(mean: float, method: str, blocks: int, note: str, stderr=math.nan, dof=math.nan) -> ErrorEstimate:
    """An estimate whose error is not known."""
    return ErrorEstimate(mean, stderr, dof, math.nan, math.nan, False, method, blocks, 1, note)


def _as_series(x, name="x") -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-d series; got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite")
    return a


def blocking_table(x: ArrayLike) -> list[BlockingLevel]:
    """The blocking table of Flyvbjerg & Petersen (1989) for the series ``x``.

    Parameters
    ----------
    x : array_like
        A 1-d series of equally weighted measurements, at least 2 long.

    Returns
    -------
    list of BlockingLevel
        Block size 1, 2, 4, … while at least 2 blocks remain.

    Examples
    --------
    >>> t = blocking_table(np.arange(8.0))
    >>> [(r.block_size, r.blocks) for r in t]
    [(1, 8), (2, 4), (4, 2)]
    """
    a = _as_series(x)
    out = []
    for size, y in blocked_levels(a):
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
    """Mean and standard error of a correlated series by blocking with an automatic plateau.

    The rule (Jonsson's χ² test and :data:`PLATEAU_RHO_MAX`), the correction for correlation left
    between blocks and the Student-t degrees of freedom are in docs/model.md §9.

    Parameters
    ----------
    x : array_like
        1-d series of equally weighted measurements (batch means of equal length).
    min_blocks : int
        Fewest blocks a plateau may leave; otherwise ``reliable=False``.
    alpha : float
        Level of the test that the remaining autocorrelations are zero.
    min_block_size : int
        Shortest block the plateau may use: a correlation time known from outside, so that a
        slow component with a small share of the variance is not missed.

    Returns
    -------
    ErrorEstimate
        ``method="blocking"``; without a plateau, the last level with ``min_blocks`` blocks
        (a lower bound, flagged unreliable).

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
        return _unknown(mean, "blocking", N, "too short to estimate: fewer than 2 measurements")
    v_all = float(np.var(a, ddof=1))
    sizes, ns, var1, stat, rho1 = [], [], [], [], []
    for size, y in blocked_levels(a):
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
        return _unknown(mean, "blocking", N, "constant series: no variation seen, error unknown", 0.0, N - 1.0)
    if plateau is not None and ns[plateau] >= min_blocks:
        j, ok, note = plateau, True, ""
    else:
        # the deepest level that still has min_blocks blocks (a lower bound on the error)
        j = max((i for i in range(L) if ns[i] >= min_blocks), default=0)
        ok, note = False, f"too short to estimate: no plateau with at least {min_blocks} blocks"
        if min_block_size > 1:
            note += f" of at least {int(min_block_size)} measurements (the known correlation time)"
    # correlation left between the blocks (docs/model.md §9); ρ̃ kept above −0.45 so that f stays positive
    m = ns[j]
    r = min(max(rho_tilde(j), -0.45), 0.95)
    g = variance_factor(r, m)
    se = math.sqrt(var1[j] / m * g)
    if se == 0.0:  # variation only below the plateau (rounding noise that pairs cancel): no error seen
        return _unknown(mean, "blocking", m, "no variation between blocks: error unknown", 0.0, N - 1.0)
    dof = blocking_dof(m)
    n_eff = v_all / se**2 if se > 0 else math.nan
    tau = N / (2.0 * n_eff) if n_eff and n_eff > 0 else math.nan
    return ErrorEstimate(mean, se, dof, n_eff, tau, ok, "blocking", m, sizes[j], note)


@dataclass(frozen=True)
class MSERResult(Result):
    """MSER truncation: drop the first ``truncate`` elements; ``forgotten`` is False when the rule
    wanted more than half the series; ``statistic``: MSER at each candidate (in groups).

    Examples
    --------
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
    """MSER truncation point of a series (White 1997; docs/model.md §9), by default MSER-5.

    The series is averaged in groups of ``group``; the truncation ``d`` minimises
    ``Σ_{i>d} (y_i − ȳ_d)² / (m − d)²`` over ``d ≤ m − 2``.

    Parameters
    ----------
    x : array_like
        1-d series in time order.
    group : int
        Group size.

    Returns
    -------
    MSERResult
        ``truncate`` in elements of ``x`` (a multiple of ``group``).

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
        One estimate per replication.
    weights : array_like, optional
        Positive weights: a weighted mean with the delta-method error
        ``R/(R−1)·Σ w_r²(m_r − m̄)² / (Σ w_r)²``; without them ``s/√R``.

    Returns
    -------
    ErrorEstimate
        ``method="replications"``, ``dof = R − 1``, reliable when ``R >= 2``.

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
        return _unknown(mean, "replications", R, "one replication: no spread to estimate the error from")
    var = R / (R - 1.0) * float(np.dot(w * w, (m - mean) ** 2)) / float(w.sum()) ** 2
    se = math.sqrt(var)
    v_all = float(np.var(m, ddof=1))
    n_eff = v_all / var if var > 0 else math.nan
    return ErrorEstimate(
        mean, se, R - 1.0, n_eff, R / (2.0 * n_eff) if n_eff and n_eff > 0 else math.nan, True, "replications", R, 1, ""
    )


def mean_stderr(values: Any, axis: int = 0) -> tuple[Any, Any]:
    """Mean over replications and its standard error ``s/√R`` (as :func:`replication_error`, column-wise).

    Parameters
    ----------
    values : array_like
        Replications along ``axis`` (``None`` entries of a 1-d list are dropped).
    axis : int

    Returns
    -------
    (mean, stderr)
        Floats for 1-d input, arrays otherwise; ``stderr`` is ``None`` below two replications.

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
