"""supermarket.stats against series whose variance of the mean is known exactly (AR(1)),
independent replications, MSER on a planted transient, and its doctests."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
from scipy.signal import lfilter

from supermarket import stats
from supermarket.stats import blocking, blocking_table, mser, replication_error, t_quantile


def ar1(rng, N, phi):
    """A stationary AR(1) series x_t = φ x_{t−1} + e_t, e_t standard normal."""
    e = rng.normal(size=N)
    x0 = rng.normal() / math.sqrt(1 - phi**2)
    y, _ = lfilter([1.0], [1.0, -phi], e, zi=[phi * x0])
    return y


def ar1_var_of_mean(N, phi):
    """Exact Var(x̄) of N consecutive values: σ²/N · (1 + 2 Σ_k (1 − k/N) φ^k), σ² = 1/(1−φ²)."""
    k = np.arange(1, N)
    return (1 / (1 - phi**2)) / N * (1 + 2 * np.sum((1 - k / N) * phi**k))


def test_doctests():
    res = doctest.testmod(stats, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 8 and res.failed == 0


@pytest.mark.parametrize("N,phi,min_reliable", [(4096, 0.0, 0.95), (4096, 0.9, 0.95), (4096, 0.95, 0.95),
                                                 (4096, 0.976, 0.95), (16384, 0.995, 0.9)])
def test_blocking_coverage_and_variance_on_ar1(N, phi, min_reliable):
    # N/(2τ_int) from 4096 down to 41; 300 series each; exact variance of the mean known.
    # From N/(2τ_int) ≈ 100 on nearly every run knows its error; at 41-50 most do.
    rng = np.random.default_rng(2024)
    M = 300
    exact = ar1_var_of_mean(N, phi)
    cover = reliable = 0
    ratios = []
    for _ in range(M):
        e = blocking(ar1(rng, N, phi))
        if not e.reliable:
            continue
        reliable += 1
        cover += e.covers(0.0)
        ratios.append(e.stderr**2 / exact)
    assert reliable >= min_reliable * M
    # Binomial(reliable, 0.95): 4.5 s.d. below the mean is a failure
    p = 0.95
    assert cover >= reliable * p - 4.5 * math.sqrt(reliable * p * (1 - p)), (cover, reliable)
    # the mean of s.e.² / exact is 1 within its noise (relative s.d. of one s.e.² about √(6/blocks))
    r = np.asarray(ratios)
    assert abs(r.mean() - 1) < max(4.5 * r.std() / math.sqrt(r.size), 0.0) + 0.1, r.mean()


def test_blocking_is_rarely_confident_and_wrong_near_the_threshold():
    # N/(2τ_int) = 10 and 16: too short for most runs to know their error.  With Jonsson's χ²
    # alone 57 % and 83 % of runs were called reliable and 10 % and 8 % of all runs were
    # confidently wrong (interval missing the mean); the level's own lag-1 bound and the
    # factor of the exponential-correlation model bring both down (benchmarks/
    # blocking_calibration.py: 29 % and 60 % reliable, 4.2 % and 4.1 % wrong).
    # Binomial noise on 400 runs: s.d. ≤ 0.025.
    N, M = 1024, 400
    for phi, max_reliable in ((0.98, 0.40), (0.97, 0.72)):
        rng = np.random.default_rng(7)
        ests = [blocking(ar1(rng, N, phi)) for _ in range(M)]
        rel = [e for e in ests if e.reliable]
        wrong = sum(not e.covers(0.0) for e in rel)
        assert len(rel) <= max_reliable * M, (phi, len(rel))
        assert wrong <= 0.05 * M + 3 * math.sqrt(M * 0.05 * 0.95), (phi, wrong)


@pytest.mark.parametrize("phi,b", [(0.999, 1000), (0.99, 50), (0.9, 100), (0.5, 64)])
def test_block_factor_matches_ar1_block_means(phi, b):
    # Block means of b steps of an AR(1): their exact lag-k covariances from the AR(1)
    # autocovariance φ^|t|/(1 − φ²), summed directly (no model), against the factor the
    # exponential-correlation model derives from the lag-1 correlation alone.
    t = np.arange(-(b - 1), b)
    w = (b - np.abs(t)) / b**2  # weights of lag t between two blocks' points
    def cov(k):  # covariance of block means k blocks apart
        return float(np.sum(w * phi ** np.abs(t + k * b))) / (1 - phi**2)
    c0, c1 = cov(0), cov(1)
    exact = 1 + 2 * sum(cov(k) for k in range(1, 400)) / c0  # Var(mean)·n / Var(block mean), n → ∞
    assert abs(stats._block_factor(c1 / c0) / exact - 1) < 0.02, (stats._block_factor(c1 / c0), exact)


def test_min_block_size_catches_a_slow_component_the_tests_cannot_see():
    # x = AR(0.5) + 0.05·AR(0.99): the slow part (τ ≈ 100 steps) has 9 % of the variance
    # and ~85 % of the variance of the mean.  In 1024 steps the plateau tests pass on short
    # blocks, and (measured) a quarter of all runs are confidently wrong; told the slow
    # time (min_block_size = 100, as simulate does with the slow mode's 1/μ), blocking says
    # "too short".  At 8192 steps the same rule gives honest intervals.
    def runs(N, mbs, M=200, seed=11):
        rng = np.random.default_rng(seed)
        exact = ar1_var_of_mean(N, 0.5) + 0.05**2 * ar1_var_of_mean(N, 0.99)
        out = [blocking(ar1(rng, N, 0.5) + 0.05 * ar1(rng, N, 0.99), min_block_size=mbs) for _ in range(M)]
        rel = [e for e in out if e.reliable]
        return len(rel), sum(not e.covers(0.0) for e in rel), [e.stderr**2 / exact for e in rel]

    rel, wrong, _ = runs(1024, 1)
    assert wrong >= 0.15 * 200, (rel, wrong)  # the failure the rule exists for
    rel, wrong, _ = runs(1024, 100)
    assert rel == 0 and wrong == 0
    rel, wrong, ratios = runs(8192, 128)
    assert rel >= 0.95 * 200
    assert wrong <= 0.05 * rel + 3 * math.sqrt(rel * 0.05 * 0.95), (rel, wrong)
    assert abs(np.mean(ratios) - 1) < 0.2, np.mean(ratios)
    e = blocking(np.random.default_rng(1).normal(size=1024), min_block_size=100)
    assert not e.reliable and "of at least 100 measurements" in e.note
    with pytest.raises(ValueError, match="min_block_size"):
        blocking(np.zeros(8) + np.arange(8), min_block_size=0)


def test_blocking_says_too_short_when_correlation_spans_the_series():
    rng = np.random.default_rng(3)
    # τ_int ≈ 1000 for a series of 2048: nothing to average over
    flags = [blocking(ar1(rng, 2048, 0.999)).reliable for _ in range(50)]
    assert sum(flags) <= 5
    e = blocking(np.cumsum(rng.normal(size=1024)))
    assert not e.reliable and "too short" in e.note
    # reliability needs min_blocks at the plateau: 20 uncorrelated values can never give 32
    e = blocking(rng.normal(size=20))
    assert not e.reliable
    assert blocking(rng.normal(size=20), min_blocks=8).reliable


def test_blocking_iid_matches_naive_and_tau():
    rng = np.random.default_rng(5)
    x = rng.normal(size=8192)
    e = blocking(x)
    assert e.reliable and e.block_size == 1
    naive = x.std(ddof=1) / math.sqrt(x.size)
    assert abs(e.stderr / naive - 1) < 0.1
    assert abs(e.tau_int - 0.5) < 0.1 and abs(e.n_eff / x.size - 1) < 0.2


def test_blocking_tau_int_of_ar1():
    # τ_int = (1 + φ)/(2(1 − φ)) = 9.5 for φ = 0.9 (Sokal's convention, 1/2 when uncorrelated)
    rng = np.random.default_rng(6)
    taus = [blocking(ar1(rng, 65536, 0.9)).tau_int for _ in range(20)]
    assert abs(np.mean(taus) / 9.5 - 1) < 0.1


def test_blocking_table_rows():
    t = blocking_table(np.arange(10.0))
    assert [(r.block_size, r.blocks) for r in t] == [(1, 10), (2, 5), (4, 2)]
    # odd counts drop the first element: level 2 averages (2,3,4,5),(6,7,8,9) -> 3.5, 7.5
    assert math.isclose(t[2].stderr, np.std([3.5, 7.5], ddof=1) / math.sqrt(2))


def test_blocking_constant_and_bad_input():
    e = blocking(np.ones(100))
    assert e.stderr == 0 and not e.reliable and "constant" in e.note
    assert not blocking([1.0]).reliable
    with pytest.raises(ValueError, match="1-d"):
        blocking(np.ones((3, 3)))
    with pytest.raises(ValueError, match="finite"):
        blocking([1.0, math.nan])
    with pytest.raises(ValueError, match="min_blocks"):
        blocking(np.ones(10), min_blocks=1)


def test_replication_error_is_student_t():
    e = replication_error([1.0, 2.0, 3.0, 6.0])
    assert e.mean == 3.0 and e.dof == 3
    assert math.isclose(e.stderr, np.std([1, 2, 3, 6], ddof=1) / 2)
    assert math.isclose(e.half_width(), 3.182446305284263 * e.stderr, rel_tol=1e-9)
    assert not replication_error([1.0]).reliable
    # weighted: equal weights give the unweighted answer
    w = replication_error([1.0, 2.0, 3.0, 6.0], weights=[2, 2, 2, 2])
    assert math.isclose(w.stderr, e.stderr) and w.mean == 3.0
    # coverage of the t interval with R = 3 normal replications
    rng = np.random.default_rng(8)
    cover = sum(replication_error(rng.normal(size=3)).covers(0.0) for _ in range(2000))
    assert abs(cover / 2000 - 0.95) < 4.5 * math.sqrt(0.95 * 0.05 / 2000)
    with pytest.raises(ValueError):
        replication_error([])


def test_mser_finds_a_planted_transient_and_flags_a_trend():
    rng = np.random.default_rng(9)
    x = np.r_[np.linspace(20, 0, 200), rng.normal(size=1800)]
    r = mser(x)
    assert r.forgotten and 150 <= r.truncate <= 300
    assert mser(rng.normal(size=1000)).truncate <= 500
    assert not mser(np.linspace(5, 0, 1000) + 0.01 * rng.normal(size=1000)).forgotten
    assert mser(x, group=1).truncate >= 150


def test_t_quantile():
    assert math.isclose(t_quantile(math.inf), 1.959963984540054)
    assert math.isclose(t_quantile(1), 12.706204736174698)
    with pytest.raises(ValueError):
        t_quantile(3, confidence=1.5)
