"""Engines against independent facts (docs/model.md §3, §7): closed forms, exact identities,
agreement between engines, exact binomial ratios.  Tolerances: 4.5 standard errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from supermarket.engines.tables import log_p_all_at_least
from supermarket.model import Params
from supermarket.simulation import Chain, simulate

ENGINES = ["profile", "queues", "buckets"]


def _pad(a, L):
    """``a`` (levels 1, 2, ...) as length ``L``, zero beyond its end: a level one run never
    reached is compared as 0 ± 0, so a missing level cannot drop out of the check."""
    out = np.zeros(L)
    out[: min(len(a), L)] = np.asarray(a, dtype=float)[:L]
    return out


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", ["discrete", "continuous"])
def test_d1_is_independent_mm1(engine, mode):
    # d = 1: independent M/M/1 queues, E[u_i] = λ^i (docs/model.md §7)
    lam = 0.7
    res = simulate(40, 1, lam, steps=2_000_000, engine=engine, time_mode=mode, seed=2)
    L = max(len(res.u_mean), 20)  # λ^i > 1e-3 up to i = 19
    exact = lam ** np.arange(1, L + 1)
    seen = exact > 1e-3
    u, u_se = _pad(res.u_mean, L), _pad(res.u_stderr, L)
    assert np.all((np.abs(u - exact) <= 4.5 * u_se) | ~seen)


@pytest.mark.parametrize("engine", ENGINES)
def test_u1_equals_load(engine):
    # E[u_1] = λ for every n and d (docs/model.md §3)
    res = simulate(500, 4, 0.9, steps=3_000_000, engine=engine, start="fixed-point", seed=4)
    assert abs(res.u_mean[0] - 0.9) <= 4.5 * res.u_stderr[0]


@pytest.mark.parametrize("rep", [True, False])
def test_identity_u_i_equals_lambda_times_P_prev(rep):
    # E[u_i] = λ E[P_{i-1}] (docs/model.md §3, derived; flow balance across level i)
    lam = 0.95
    res = simulate(300, 3, lam, steps=4_000_000, start="fixed-point", replace=rep, seed=9)
    prev = np.concatenate([[1.0], res.ud_mean[:-1]])
    prev_se = np.concatenate([[0.0], res.ud_stderr[:-1]])
    diff = np.abs(res.u_mean - lam * prev)
    tol = 4.5 * (res.u_stderr + lam * prev_se)
    seen = res.u_mean > 1e-3
    assert np.all((diff <= tol) | ~seen)
    assert seen.sum() >= 4


@pytest.mark.parametrize("engine", ["queues", "buckets"])
@pytest.mark.parametrize("rep", [True, False])
def test_engines_agree(engine, rep):
    a = simulate(200, 5, 0.95, steps=3_000_000, engine="profile", replace=rep, start="fixed-point", seed=1)
    b = simulate(200, 5, 0.95, steps=3_000_000, engine=engine, replace=rep, start="fixed-point", seed=2)
    L = max(len(a.u_mean), len(b.u_mean))
    ua, ub = _pad(a.u_mean, L), _pad(b.u_mean, L)
    se = np.hypot(_pad(a.u_stderr, L), _pad(b.u_stderr, L))
    seen = (ua > 1e-3) | (ub > 1e-3)
    assert np.all((np.abs(ua - ub) <= 4.5 * se) | ~seen)


def test_refined_mean_field_value():
    # Gast–Van Houdt (docs/model.md §3): λ = 0.9, d = 2: Σπ(i) = 2.35265, ΣV_i ≈ 3.986,
    # E[mean queue length] = Σπ + ΣV/n + O(1/n²)
    n = 100
    res = simulate(n, 2, 0.9, steps=20_000_000, start="fixed-point", seed=8)
    target = 2.35265 + 3.986 / n
    assert abs(res.mean_queue_length - target) <= 4.5 * res.mean_queue_length_stderr + 2.0 / n**2


def test_mean_event_time_in_continuous_mode():
    # uniformized at rate n(1+λ): S events take S/(n(1+λ)) time on average, s.d. √S/(n(1+λ))
    n, lam, S = 1000, 0.9, 1_000_000
    res = simulate(n, 2, lam, steps=S, burn_in=0, time_mode="continuous", seed=3)
    rate = n * (1 + lam)
    assert abs(res.sim_time - S / rate) <= 4.5 * math.sqrt(S) / rate


@pytest.mark.parametrize(
    "n,d,c",
    [
        (10**4, 300, 9_000),
        (10**6, 1000, 999_000),
        (10**6, 50, 10**6 - 3),
        (500, 500, 500),
        (500, 499, 499),
        (10**5, 7, 12),
        (10**4, 5000, 9999),
    ],
)
def test_without_replacement_probability_is_exact(n, d, c):
    # P_i = C(c,d)/C(n,d) (docs/model.md §2) against exact integer binomials
    exact = (math.log(math.comb(c, d)) - math.log(math.comb(n, d))) if c >= d else -math.inf
    got = log_p_all_at_least(c, n, d, False)
    if exact == -math.inf:
        assert got == -math.inf
    else:
        assert abs(got - exact) <= 1e-9 * max(1.0, abs(exact))


def test_with_replacement_probability():
    # P_i = (c/n)^d (docs/model.md §2), its logarithm to 40 digits in decimal arithmetic from
    # the integers themselves (the code's own log1p expression would only repeat the code)
    from decimal import Decimal, localcontext

    for n, d, c in [(10**12, 10**9, 10**12 - 10**6), (1000, 2, 900), (7, 3, 5), (10**6, 3, 1), (50, 10**6, 49)]:
        with localcontext() as ctx:
            ctx.prec = 40
            exact = float(d * (Decimal(c) / Decimal(n)).ln())
        # double rounding of (n − c)/n, amplified by log1p's 1/(1 − x) = n/c near c ≪ n
        tol = 1e-14 * abs(exact) + 4 * d * 2.0**-52 * (n - c) / c
        assert abs(log_p_all_at_least(c, n, d, True) - exact) <= tol, (n, d, c)


def test_huge_n_and_d_run():
    # n = 10^12, d = 10^9, λ = 1 − 10^-6 (docs/model.md §4: k = 1): runs, stays sane
    lam = 1 - 1e-6
    res = simulate(10**12, 10**9, lam, steps=2_000_000, start="fixed-point", seed=1)
    assert res.k == 1
    assert np.all(np.isfinite(res.u_mean)) and np.all(np.diff(res.u_mean) <= 0)
    assert abs(res.u_mean[0] - lam) < 1e-5  # 2e6 events move c_1 by at most 2e6 of 1e12


def test_chunking_does_not_change_numbers():
    # the next event time and the RNG are part of the state: cutting a run is invisible
    p = Params(50, 3, 0.9)
    c0 = np.array([45, 30, 10])
    for cont in (False, True):
        a = Chain(p, "profile", c0, 77, continuous=cont)
        b = Chain(p, "profile", c0, 77, continuous=cont)
        a.advance(t_stop=math.inf, max_events=100_000)
        for _ in range(100):
            b.advance(t_stop=math.inf, max_events=1000)
        assert np.array_equal(a.counts(), b.counts()) and a.now == b.now
        ma, mb = a.measures(), b.measures()
        np.testing.assert_allclose(ma["area_c"], mb["area_c"], rtol=1e-12)


def test_queues_memory_is_four_bytes_per_server():
    p = Params(1000, 2, 0.9)
    ch = Chain(p, "queues", np.array([10]), 1)
    assert ch.x.dtype == np.int32 and ch.x.nbytes == 4 * 1000
    ch = Chain(p, "buckets", np.array([10]), 1)
    assert ch.perm.dtype == np.int32 and ch.perm.nbytes == 4 * 1000


def test_per_queue_lengths_are_consistent_with_counts():
    for engine in ("queues", "buckets"):
        res = simulate(300, 3, 0.9, steps=200_000, engine=engine, seed=6)
        x = res.final_lengths
        assert x is not None and len(x) == 300
        c = np.array([(x >= i).sum() for i in range(1, x.max() + 1)])
        assert np.array_equal(c, res.final_counts)


@pytest.mark.parametrize("engine", ENGINES)
def test_time_in_good_set_with_fractional_bounds_equals_a_naive_count(engine):
    # The fast loops test clause (b) of N^ε (docs/model.md §5) on integer bounds
    # (ceil(lo) <= shorter <= floor(hi)); the naive count below uses the float bounds as
    # written.  Discrete time, a record after every event: the time in N^ε is exactly the
    # number of unit intervals whose state is in it.  n = 20, d = 2, λ = 0.5, k = 2, bounds
    # [9.5, 12.5] and [16.5, 18.5] (shorter than 1 and than 2): the chain sits at 9 and at 16
    # queues shorter, just outside, in about an eighth of all steps, so floor(lo) in place of
    # ceil(lo) (or ceil(hi) for floor(hi)) adds thousands of steps.
    n, k = 20, 2
    lo, hi = np.array([9.5, 16.5]), np.array([12.5, 18.5])
    ch = Chain(Params(n, 2, 0.5), engine, np.array([10, 3]), 5, k=k, lo=lo, hi=hi, record_levels=k + 1)
    ch.start_recording(1.0)
    ch.start_measuring()
    ch.advance(max_events=100_000)
    t, c, _, _ = ch.records()
    assert ch.now == 100_000 and len(t) == 100_000 and np.array_equal(t, np.arange(100_000.0))
    shorter = n - c[:, :k]
    member = np.all((shorter >= lo) & (shorter <= hi), axis=1) & (c[:, k] == 0)
    assert np.sum(shorter == [9, 16], axis=0).min() > 5000  # the edges are visited
    assert ch.measures()["good_time"] == member.sum()


@pytest.mark.parametrize("engine", ENGINES)
def test_long_queue_drains_at_rate_one(engine):
    # One queue of length 40 among n = 40000 (windowed tables, more levels than the fast
    # path keeps: the general path runs).  It loses a customer at rate 1 and (d = 2) almost
    # never gains one, so its length is 40 − N(t), N Poisson(1): the time average of the
    # maximum over [0, 30] has mean 40 − 15 = 25 and s.d. √(30³/3)/30.
    res = simulate(
        40_000,
        2,
        0.5,
        time=30.0,
        burn_in=0,
        time_mode="continuous",
        start="long:40",
        engine=engine,
        replications=6,
        seed=21,
    )
    means = np.array([sum(m * p for m, p in r.max_queue_dist.items()) for r in res.per_replication])
    sd = math.sqrt(30.0**3 / 3) / 30.0
    assert abs(means.mean() - 25.0) <= 4.5 * sd / math.sqrt(len(means))


@pytest.mark.slow
@pytest.mark.parametrize("rep", [True, False])
def test_engines_agree_in_heavy_traffic(rep):
    # n = 2000, d = 20, λ = 0.99 (k = 2): the regime of paper 000, all three engines
    runs = {
        e: simulate(2000, 20, 0.99, steps=30_000_000, engine=e, replace=rep, start="fixed-point", seed=s)
        for s, e in enumerate(ENGINES)
    }
    a = runs["queues"]
    for e in ("profile", "buckets"):
        b = runs[e]
        L = max(len(a.u_mean), len(b.u_mean))
        ua, ub = _pad(a.u_mean, L), _pad(b.u_mean, L)
        se = np.hypot(_pad(a.u_stderr, L), _pad(b.u_stderr, L))
        seen = (ua > 1e-3) | (ub > 1e-3)
        assert np.all((np.abs(ua - ub) <= 4.5 * se) | ~seen)
        assert abs(a.good_set_fraction - b.good_set_fraction) <= 4.5 * math.hypot(
            a.good_set_fraction_stderr, b.good_set_fraction_stderr
        )


@pytest.mark.parametrize("engine,limit", [("queues", 4.3), ("buckets", 8.3)])
def test_per_queue_engines_measured_peak_bytes_per_server(engine, limit):
    # the memory claim is a measured peak (tracemalloc sees NumPy's buffers) of a whole run
    # with the final lengths in the result, per server: the slope between two sizes, so the
    # fixed part (batch means, tables) drops out; an int64 temporary would add 8
    import tracemalloc
    import warnings

    simulate(1000, 2, 0.9, steps=1000, engine=engine, start="fixed-point")  # compile first
    peaks = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in (500_000, 2_500_000):
            tracemalloc.start()
            try:
                res = simulate(n, 2, 0.9, steps=50_000, engine=engine, start="fixed-point")
                _, peaks[n] = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            assert res.final_lengths.dtype == np.int32 and len(res.final_lengths) == n
    slope = (peaks[2_500_000] - peaks[500_000]) / 2_000_000
    assert slope <= limit, slope
