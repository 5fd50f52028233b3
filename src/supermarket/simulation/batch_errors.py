"""The error of a time average from its batch integrals (docs/model.md §9): the batch values
of a ratio ``Σa/ΣT`` (delta method), blocking with blocks of at least the slowest relaxation
time, the blocking errors pooled over replications or, when one is not reliable, the spread
between them, and the skewness of the mean that each error carries (§9.1, "Skewed
remainders").  :mod:`.estimate` and :mod:`.controlled` build every error bar of a run from
:func:`_estimate`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .. import stats as _st
from ..stats import MIN_BLOCKS, ErrorEstimate


def _ratio_series(a, T):
    """Batch values of a time average ``Σa/ΣT`` as equally weighted terms (delta method):
    ``ā + (a_b − ā T_b)/T̄``; their mean is ``ā``, and for equal ``T_b`` they are ``a_b/T_b``."""
    abar = a.sum() / T.sum()
    return abar + (a - abar * T) / T.mean()


def relaxation_time(d: int, lam: float, n: int | None = None) -> float:
    """The slowest relaxation time of the equilibrium in time units, the shortest block of the
    batch means (docs/model.md §6 and §9, derived): ``1/μ_k`` of the slow mode for d >= 2, the
    M/M/1 value ``1/(1−√λ)²`` for d = 1; with ``n`` (d >= 2), at least the M/M/n floor ``1/(n(1−√λ)²)``.

    Examples
    --------
    >>> round(relaxation_time(1, 0.25), 6)          # M/M/1: 1/(1 − 1/2)²
    4.0
    >>> relaxation_time(2, 0.9, n=3) > 6 * relaxation_time(2, 0.9)
    True
    >>> relaxation_time(2, 0.9, n=10**4) == relaxation_time(2, 0.9)
    True
    """
    from .. import theory as _th

    t = _th.slow_mode(d, lam).relaxation_time if d >= 2 else 1.0 / (1.0 - math.sqrt(lam)) ** 2
    if n is not None and d >= 2:
        t = max(t, 1.0 / (n * (1.0 - math.sqrt(lam)) ** 2))
    return t


def _min_block(T, relax) -> int:
    """Batches per block needed to span ``relax`` (in the units of the batch lengths ``T``)."""
    if not relax or not relax > 0 or T.size == 0 or not T.mean() > 0:
        return 1
    return max(1, min(int(math.ceil(relax / float(T.mean()))), T.size))


def _skewed(e: ErrorEstimate, parts, relax) -> ErrorEstimate:
    """``e`` with the estimated skewness of its mean (the interval then reaches further on the
    side of the skew: docs/model.md §9.1, "Skewed remainders"), when its error is known."""
    if not e.reliable:
        return e
    from .control import mean_skewness

    g = mean_skewness(parts, e.stderr, [_min_block(T, relax) for _, T in parts])
    return dataclasses.replace(e, skewness=g) if math.isfinite(g) else e


def _estimate(parts, min_blocks=MIN_BLOCKS, relax=None) -> ErrorEstimate:
    """The error of ``Σa/ΣT`` from ``parts``, a list of ``(a, T)`` (batch integrals and lengths)
    per replication: blocking; the blocking errors pooled; or, when one is not reliable, the
    spread between replications (docs/model.md §9)."""
    parts = [(a, T) for a, T in parts if T.size > 0 and T.sum() > 0]
    if not parts:
        return ErrorEstimate(math.nan, math.nan, math.nan, math.nan, math.nan, False, "none", 0, 1, "nothing measured")
    ests = [
        _st.blocking(_ratio_series(a, T), min_blocks=min_blocks, min_block_size=_min_block(T, relax))
        if T.size >= 2
        else ErrorEstimate(
            float(a.sum() / T.sum()),
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            False,
            "blocking",
            1,
            1,
            "too short to estimate: one batch",
        )
        for a, T in parts
    ]
    if len(parts) == 1:
        return _skewed(ests[0], parts, relax)
    w = np.array([T.sum() for _, T in parts])
    means = np.array([a.sum() / T.sum() for a, T in parts])
    mean = float(np.dot(w, means) / w.sum())
    if all(e.reliable for e in ests):
        ww = w / w.sum()
        terms = np.array([(wi * e.stderr) ** 2 for wi, e in zip(ww, ests)])
        var = float(terms.sum())
        se = math.sqrt(var)
        dof = var**2 / float(np.sum(terms**2 / np.array([e.dof for e in ests]))) if var > 0 else math.inf
        n_eff = float(sum(e.n_eff for e in ests))
        blocks = int(sum(e.blocks for e in ests))
        return _skewed(
            ErrorEstimate(mean, se, dof, n_eff, math.nan, True, "pooled", blocks, ests[0].block_size, ""), parts, relax
        )
    e = _st.replication_error(means, weights=w)
    est = ErrorEstimate(mean, e.stderr, e.dof, e.n_eff, e.tau_int, e.reliable, e.method, e.blocks, 1, e.note)
    return _spread_skewed(est, means, w)


def _spread_skewed(e: ErrorEstimate, means, w) -> ErrorEstimate:
    """``e`` (the spread of the replication means ``means``, weights ``w``) with the estimated
    skewness of the weighted mean, ``Σ w_r³ k_3/s.e.³`` (``k_3``, the unbiased third cumulant of
    the means), as the blocking estimates carry theirs (docs/model.md §9.1, "Skewed remainders";
    §9, "Heavy traffic at large n"); unchanged with fewer than 3 replications.

    Examples
    --------
    >>> e = _estimate([(np.array([x]), np.ones(1)) for x in (1.0, 1.0, 1.0, 4.0)])
    >>> e.method, round(e.skewness, 3)     # k_3 = 6.75, s.e. = 0.75: 6.75/(16·0.75³)
    ('replications', 1.0)
    """
    R = means.size
    if R < 3 or not e.reliable or not e.stderr > 0:
        return e
    ww = w / w.sum()
    c = means - means.mean()  # the unbiased k_3 of the means, as if identically distributed
    k3 = R / ((R - 1.0) * (R - 2.0)) * float(np.sum(c**3))
    g = float(np.sum(ww**3)) * k3 / e.stderr**3
    return dataclasses.replace(e, skewness=g) if math.isfinite(g) else e


def _at_block(x, size: int) -> ErrorEstimate:
    """Blocking's error of the mean of ``x`` at blocks of ``size`` measurements, with its correction
    for the correlation left between blocks (docs/model.md §9) but without the plateau tests:
    for a block length another series of the same chain has shown long enough (§9.1, "Short runs").
    Not reliable when that level holds fewer than ``MIN_BLOCKS`` blocks.

    Examples
    --------
    Independent values (exact s.e. 1/64; the estimate from 64 blocks is within about 9 % of it):

    >>> e = _at_block(np.random.default_rng(1).normal(size=4096), 64)
    >>> e.reliable, e.blocks, round(e.stderr * 64, 2)
    (True, 64, 1.17)
    """
    from ..batch_means import blocked_levels, blocking_dof, variance_factor

    x = np.asarray(x, dtype=float)
    mean = float(x.mean()) if x.size else math.nan
    y = next((y for s, y in blocked_levels(x) if s == size), None)
    if y is None or y.size < MIN_BLOCKS:
        return ErrorEstimate(mean, math.nan, math.nan, math.nan, math.nan, False, "blocking", 0, size, "too few blocks")
    m = y.size
    yc = y - y.mean()
    v0 = float(np.dot(yc, yc)) / m
    if not v0 > 0:
        return ErrorEstimate(mean, math.nan, math.nan, math.nan, math.nan, False, "blocking", m, size, "no variation")
    rho = float(np.dot(yc[:-1], yc[1:])) / m / v0
    r = min(max(rho + (1.0 + 4.0 * rho) / m, -0.45), 0.95)
    se = math.sqrt(v0 / (m - 1.0) * variance_factor(r, m))
    n_eff = float(np.var(x, ddof=1)) / se**2
    return ErrorEstimate(mean, se, blocking_dof(m), n_eff, x.size / (2.0 * n_eff), True, "blocking", m, size, "")
