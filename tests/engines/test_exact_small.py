"""Every engine, in both time modes, with and without replacement, against the exact
stationary law of tiny systems (docs/model.md §7), solved inside the test (tests/exact_small.py).

Tolerance: 4.5 standard errors (batch means) plus the truncation mass of the exact law."""

from __future__ import annotations

import numpy as np
import pytest

from exact_small import jsq_law, profile_law, queue_law
from supermarket import theory as th
from supermarket.simulation import simulate

N, D, LAM = 3, 2, 0.6
M = 16
STEPS = 1_500_000


@pytest.fixture(scope="module")
def laws():
    return {rep: profile_law(N, D, LAM, replace=rep, M=M) for rep in (True, False)}


@pytest.mark.parametrize("n,d,lam,rep", [(3, 2, 0.6, True), (3, 2, 0.6, False), (2, 3, 0.5, True), (3, 3, 0.5, False)])
def test_profile_chain_is_exact_for_the_per_queue_chain(n, d, lam, rep):
    # docs/model.md §2: the counts are a Markov chain with the law of the per-queue chain's
    # profile.  Same truncation on both sides, so the laws agree to solver precision.
    a = profile_law(n, d, lam, replace=rep, M=8)
    b = queue_law(n, d, lam, replace=rep, M=8)
    np.testing.assert_allclose(a.u, b.u, rtol=0, atol=1e-10)
    np.testing.assert_allclose(a.P, b.P, rtol=0, atol=1e-10)


def test_exact_law_closed_forms():
    # d = 1: independent M/M/1 queues, E[u_i] = λ^i; and E[u_1] = λ for any d.
    a = profile_law(3, 1, 0.5, M=30)
    np.testing.assert_allclose(a.u[:8], 0.5 ** np.arange(1, 9), atol=1e-7)
    b = profile_law(3, 2, 0.6, M=M)
    assert abs(b.u[0] - 0.6) < 1e-5
    c = jsq_law(3, 0.6, M=M)
    assert abs(c.u[0] - 0.6) < 1e-5


RARE = 1e-4  # levels rarer than this are visited too seldom for batch-means standard errors


def _pad(a, L):
    """``a`` (levels 1, 2, ...) as length ``L``, zero beyond its end: a level the run never
    reached is compared as 0 ± 0, so a missing level cannot drop out of the check."""
    out = np.zeros(L)
    out[: min(len(a), L)] = np.asarray(a, dtype=float)[:L]
    return out


def _check(res, law, what):
    L = max(len(res.u_mean), M)
    exact = _pad(law.u, L)
    u, u_se = _pad(res.u_mean, L), _pad(res.u_stderr, L)
    seen = exact >= RARE
    assert seen.sum() >= 5
    tol = 4.5 * u_se + law.tail + 1e-12
    bad = (np.abs(u - exact) > tol) & seen
    assert not bad.any(), f"{what}: u {u} vs exact {exact}, tol {tol}"
    exact_p = _pad(law.P, L)
    ud, ud_se = _pad(res.ud_mean, L), _pad(res.ud_stderr, L)
    tolp = 4.5 * ud_se + law.tail + 1e-12
    bad = (np.abs(ud - exact_p) > tolp) & (exact_p >= RARE)
    assert not bad.any(), f"{what}: P {ud} vs {exact_p}"
    assert abs(res.mean_queue_length - law.mean_queue_length) <= 4.5 * res.mean_queue_length_stderr + M * law.tail


@pytest.mark.parametrize("engine", ["profile", "queues", "buckets"])
@pytest.mark.parametrize("mode", ["discrete", "continuous"])
@pytest.mark.parametrize("rep", [True, False])
def test_engine_matches_exact_law(laws, engine, mode, rep):
    res = simulate(N, D, LAM, steps=STEPS, burn_in=10_000, engine=engine, time_mode=mode, replace=rep, seed=11)
    law = laws[rep]
    _check(res, law, f"{engine}/{mode}/replace={rep}")
    # time in the good set N^ε (docs/model.md §5) against its exact probability
    k = th.k_lambda_d(D, LAM)
    lo, hi = th.good_set_bounds(N, D, LAM, 0.1, k)
    g = law.good(lo, hi, k)
    assert 0.05 < g < 0.95  # the check is not vacuous
    assert abs(res.good_set_fraction - g) <= 4.5 * res.good_set_fraction_stderr


@pytest.mark.parametrize("engine", ["profile", "queues", "buckets"])
def test_without_replacement_d_equal_n_is_jsq(engine):
    law = jsq_law(3, 0.6, M=24)
    res = simulate(3, 3, 0.6, steps=STEPS, burn_in=10_000, engine=engine, replace=False, seed=5)
    L = max(len(res.u_mean), 24)
    exact = _pad(law.u, L)
    seen = exact >= RARE
    assert seen.sum() >= 4
    u, u_se = _pad(res.u_mean, L), _pad(res.u_stderr, L)
    assert np.all((np.abs(u - exact) <= 4.5 * u_se + law.tail + 1e-12) | ~seen)


def test_max_queue_distribution_matches_exact_law(laws):
    # standard error across 8 independent replications (spawned seeds)
    res = simulate(N, D, LAM, steps=400_000, burn_in=10_000, replications=8, seed=3)
    law = laws[True]
    per = res.per_replication
    for m in range(6):
        vals = np.array([r.max_queue_dist.get(m, 0.0) for r in per])
        se = vals.std(ddof=1) / np.sqrt(len(vals))
        assert abs(res.max_queue_dist.get(m, 0.0) - law.max_dist.get(m, 0.0)) <= 4.5 * se + law.tail
