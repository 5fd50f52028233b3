"""Tests of the sorted coupling (docs/model.md §2) and the mixing estimates (§6).

The oracle is a brute-force chain on the *unsorted* queue-lengths vector of a tiny system,
built from the definition in docs/model.md §1 (enumerate every d-tuple of queues, join the first
shortest one; a departure picks a uniform queue), independent of the profile formulas and of
the sorted positions used by the kernel.  Statistical checks use fixed seeds and a tolerance
of 4.5 standard errors.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from supermarket import mixing as mx
from supermarket import theory
from supermarket.engines import coupling as kern
from supermarket.mixing import coupling as mx_coupling
from supermarket.simulation import simulate

Z = 4.5


# --------------------------------------------------------------------------- brute-force oracle
def _step_distribution(x, n, d, lam, replace, cap):
    """Law of the next unsorted state from x (tuple), straight from docs/model.md §1."""
    out = {}
    pa = lam / (1 + lam)
    tuples = list(itertools.product(range(n), repeat=d)) if replace else list(itertools.permutations(range(n), d))
    w = pa / len(tuples)
    for tup in tuples:
        best = tup[0]
        for j in tup:
            if x[j] < x[best]:
                best = j
        y = list(x)
        if y[best] < cap:  # truncation (never reached in the transient tests)
            y[best] += 1
        y = tuple(y)
        out[y] = out.get(y, 0.0) + w
    for j in range(n):
        y = list(x)
        if y[j] > 0:
            y[j] -= 1
        y = tuple(y)
        out[y] = out.get(y, 0.0) + (1 - pa) / n
    return out


def _sorted_key(x):
    return tuple(sorted(x, reverse=True))


def exact_transient(x0, n, d, lam, replace, times):
    """Law of the sorted state after each of ``times`` steps, from the unsorted chain."""
    cap = max(x0) + max(times) + 1
    dist = {tuple(x0): 1.0}
    res = {}
    for t in range(1, max(times) + 1):
        new = {}
        for x, px in dist.items():
            for y, pxy in _step_distribution(x, n, d, lam, replace, cap).items():
                new[y] = new.get(y, 0.0) + px * pxy
        dist = new
        if t in times:
            lumped = {}
            for x, px in dist.items():
                k = _sorted_key(x)
                lumped[k] = lumped.get(k, 0.0) + px
            res[t] = lumped
    return res


def exact_stationary_profile(n, d, lam, replace, cap):
    """E_Π[u_i], i = 1..cap, of the chain truncated at queue length ``cap``."""
    states = list(itertools.product(range(cap + 1), repeat=n))
    index = {s: i for i, s in enumerate(states)}
    P = np.zeros((len(states), len(states)))
    for s in states:
        for y, p in _step_distribution(s, n, d, lam, replace, cap).items():
            P[index[s], index[y]] += p
    A = P.T - np.eye(len(states))
    A[-1, :] = 1.0
    b = np.zeros(len(states))
    b[-1] = 1.0
    pi = np.linalg.solve(A, b)
    X = np.array(states)
    return np.array([(pi[:, None] * (X >= i)).sum() / n for i in range(1, cap + 1)])


def _key_from_counts(c, n):
    """Sorted lengths (longest first) from counts c_1..c_K."""
    return tuple(int((c >= p).sum()) for p in range(1, n + 1))


# --------------------------------------------------------------------------- the coupling is a coupling
@pytest.mark.parametrize("replace", [True, False])
def test_each_copy_has_the_transient_law_of_the_chain(replace):
    """Every coupled copy, on its own, has the t-step law of the chain (exact, n = 3)."""
    n, d, lam = 3, 2, 0.8
    starts = [np.array([2, 2, 2]), np.array([0, 0, 0]), np.array([4, 0, 1])]
    times = (3, 6)
    R = 2500
    K = 12
    seen = {m: {t: {} for t in times} for m in range(len(starts))}
    for r in range(R):
        run = mx.coupled_run(n, d, lam, starts, steps=6, seed=r, replace=replace, record_every=3, record_levels=K)
        for m in range(len(starts)):
            for j, t in enumerate(times):
                key = _key_from_counts(run.records_counts[m, j], n)
                seen[m][t][key] = seen[m][t].get(key, 0) + 1
    for m, x0 in enumerate(starts):
        exact = exact_transient(x0, n, d, lam, replace, times)
        for t in times:
            assert set(seen[m][t]) <= set(exact[t]), "a copy reached a state the chain cannot reach"
            for key, p in exact[t].items():
                if p * R < 5:
                    continue
                phat = seen[m][t].get(key, 0) / R
                se = math.sqrt(p * (1 - p) / R)
                assert abs(phat - p) <= Z * se, (m, t, key, phat, p)


def test_coupled_copy_time_average_matches_exact_stationary_law():
    """A copy coupled with another from a different start has the stationary mean profile
    of the chain (exact solution of the truncated n = 3 chain), and E[u_1] = λ (§7)."""
    n, d, lam, cap = 3, 2, 0.6, 12
    exact = exact_stationary_profile(n, d, lam, True, cap)
    assert abs(exact[0] - lam) < 1e-6  # truncation is negligible: the identity E[u_1] = λ
    R, steps = 12, 150_000
    means = np.array(
        [
            mx.coupled_run(
                n, d, lam, ["customers:4", "empty"], steps=steps, seed=100 + r, time_average=True
            ).mean_profile[1, :4]
            for r in range(R)
        ]
    )
    est = means.mean(axis=0)
    se = means.std(axis=0, ddof=1) / math.sqrt(R)
    assert np.all(np.abs(est - exact[:4]) <= Z * se), (est, exact[:4], se)


@pytest.mark.parametrize("replace", [True, False])
def test_l1_distance_never_increases_and_is_maintained_exactly(replace):
    starts = ["empty", "customers:6", "long:40", np.array([5, 0, 3, 9, 1, 0, 0, 2, 2, 7, 1, 0])]
    run = mx.coupled_run(12, 3, 0.9, starts, steps=40_000, seed=3, replace=replace, check=True, record_every=50)
    assert run.mismatches == 0
    assert run.increases == 0
    dist = run.records_distance
    assert np.all(np.diff(dist, axis=1) <= 0)
    # the distance of the sorted vectors equals the recorded one at the end
    for m in range(1, 4):
        a = np.zeros(60, dtype=int)
        b = np.zeros(60, dtype=int)
        a[: len(run.final_counts[m])] = run.final_counts[m]
        b[: len(run.final_counts[0])] = run.final_counts[0]
        assert np.abs(a - b).sum() == run.distance[m]


def test_identical_starts_stay_identical_and_coalesce_at_zero():
    run = mx.coupled_run(30, 4, 0.95, ["long:25", "long:25", "long:25"], steps=20_000, seed=1, record_every=100)
    assert run.tau == (0, 0, 0)
    assert np.all(run.records_distance == 0)
    assert all(np.array_equal(run.final_counts[0], c) for c in run.final_counts)


def test_coalescence_from_x_to_x_is_zero():
    res = mx.coalescence(50, 3, 0.9, start="fixed-point", replications=5, burn_in=0, workers=1)
    assert res.taus == (0,) * 5
    assert res.steps["median"] == 0 and res.censored == 0


def test_different_starts_coalesce_and_tau_is_first_zero_distance():
    run = mx.coupled_run(
        20, 2, 0.8, ["fixed-point", "customers:3"], steps=10**6, seed=5, stop_when_coalesced=True, record_every=1
    )
    tau = run.tau[1]
    assert tau is not None and tau > 0
    assert run.steps == tau
    assert run.records_distance[1, tau - 1] == 0 and run.records_distance[1, tau - 2] > 0


# --------------------------------------------------------------------------- arrival positions
@pytest.mark.parametrize("replace", [True, False])
def test_arrival_position_law(replace):
    """The sorted position has the law of the largest of d uniform positions (brute force)."""
    n, d = 7, 3
    tuples = (
        list(itertools.product(range(1, n + 1), repeat=d))
        if replace
        else list(itertools.permutations(range(1, n + 1), d))
    )
    pmf = np.bincount([max(t) for t in tuples], minlength=n + 1)[1:] / len(tuples)
    log_cnd = 0.0 if replace else math.lgamma(n + 1) - math.lgamma(d + 1) - math.lgamma(n - d + 1)
    rng = np.random.default_rng(7)
    N = 40_000
    draws = np.array([kern._arrival_position(1.0 - rng.random(), n, d, replace, log_cnd) for _ in range(N)])
    freq = np.bincount(draws, minlength=n + 1)[1:] / N
    se = np.sqrt(pmf * (1 - pmf) / N)
    assert np.all(np.abs(freq - pmf) <= Z * se + 1e-12), (freq, pmf)


def test_arrival_position_without_replacement_boundaries():
    n, d = 1000, 1000  # d = n: every queue is sampled, the shortest (position n) is joined
    log_cnd = 0.0
    for u in (1e-300, 0.3, 1.0):
        assert kern._arrival_position(u, n, d, False, log_cnd) == n


# --------------------------------------------------------------------------- statistics
def test_order_statistic_ci_matches_the_binomial_table():
    # n = 100, median: the 95% distribution-free interval is (x_(40), x_(61)) (classical table)
    est, lo, hi = mx.order_statistic_ci(np.arange(1, 101), 0.5)
    assert (est, lo, hi) == (50.0, 40.0, 61.0)


def test_censoring_is_reported_never_as_a_number():
    res = mx.coalescence(100, 2, 0.9, start="long:300", replications=4, max_steps=1000, workers=1)
    assert res.censored == 4
    d = res.to_dict()
    assert d["coalescence_steps"]["median"] == "censored"
    assert d["coalescence_steps"]["q90"] == "censored"
    assert d["tmix_steps"] == "censored"
    assert d["coalescence_steps"]["mean_is_lower_bound"] is True
    assert d["coalescence_steps"]["ci"][1] == "censored"
    assert d["taus"] == ["censored"] * 4
    assert res.tmix_steps is None


def test_summary_gives_the_ratio_of_the_measured_time_to_each_bound():
    """Issue 19: the bounds were printed without the ratio of the measured time to them.  The
    ratio is q75 of τ (the measured bound on t_mix(1/4)) over each order, from the taus."""
    res = mx.coalescence(40, 3, 0.9, start="empty", replications=40, seed=3, workers=1)
    d = res.to_dict()
    taus = sorted(res.taus)
    assert d["tmix_steps"] in taus  # an order statistic of the measured times
    for key, bound in (
        ("upper", d["bound_upper_steps"]),
        ("lower", d["bound_lower_steps"]),
        ("lower_good", d["bound_lower_good_steps"]),
    ):
        assert d[f"tmix_over_bound_{key}"] == pytest.approx(d["tmix_steps"] / bound, rel=1e-12)
    text = res.summary()
    assert "q75 / bound [95% CI]" in text
    lo, hi = d["tmix_ci_steps"]
    up = d["bound_upper_steps"]
    assert f"{d['tmix_steps'] / up:.3g} [{lo / up:.3g}, {hi / up:.3g}]" in text
    cens = mx.coalescence(100, 2, 0.9, start="long:300", replications=2, max_steps=1000, workers=1)
    assert cens.to_dict()["tmix_over_bound_upper"] is None and "— (censored)" in cens.summary()


def test_results_do_not_depend_on_workers():
    a = mx.coalescence(40, 2, 0.8, start="empty", replications=6, seed=11, workers=1)
    b = mx.coalescence(40, 2, 0.8, start="empty", replications=6, seed=11, workers=2)
    assert a.taus == b.taus
    assert a.increases == 0


def test_bounds_follow_theory():
    res = mx.coalescence(200, 4, 0.95, start="customers:5", replications=3, workers=1)
    b = theory.mixing_bounds(200, 4, 0.95)
    d = res.to_dict()
    assert d["bound_upper_steps"] == pytest.approx(b.upper_steps)
    assert d["bound_lower_good_steps"] == pytest.approx(b.lower_steps)
    assert d["bound_lower_steps"] == pytest.approx(5 * 200 / 0.05)
    assert d["bound_upper_time"] == pytest.approx(b.upper_steps / (200 * 1.95))
    assert mx.start_bounds(200, 4, 0.95, "long:70")["lower_start"] == 70 * 200


def test_tv_curve_decays_to_its_noise_floor():
    # 240 customers instead of about 50; they drain at (1-λ)/(1+λ) per step: ~2200 steps
    tv = mx.tv_curve(30, 2, 0.8, start="customers:8", replications=200, steps=6000, points=30, seed=2, workers=1)
    top_bin = 1.0 / tv.bins  # every start copy sits above the stationary law's top bin
    assert tv.tv[0] > 1 - 2 * top_bin
    # TV of an observable <= d_TV of the chain <= P(τ > t), up to the estimate's noise
    assert np.all(tv.tv <= tv.coupling_bound + 3 * tv.noise_floor)
    assert tv.coupling_bound[0] == 1.0
    assert tv.tv[-1] <= 3 * tv.noise_floor
    assert 0 < tv.noise_floor < 0.3
    assert np.all(np.diff(tv.coupling_bound) <= 0)  # coalesced pairs stay coalesced
    json.dumps(tv.to_dict())


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "start, exc",
    [
        ("bogus", ValueError),
        ("long:-2", ValueError),
        ("long:0", ValueError),
        ("customers:-1", ValueError),
        ("customers:x", ValueError),
        ("long:50000000", ValueError),  # absurd for memory
        (np.array([1, 2]), ValueError),  # wrong length for n
    ],
)
def test_bad_starts(start, exc):
    with pytest.raises(exc):
        mx.coalescence(10, 2, 0.9, start=start, replications=2, workers=1)


def test_bad_parameters():
    with pytest.raises(ValueError):
        mx.coalescence(10, 2, 1.2, replications=2)
    with pytest.raises(TypeError):
        mx.coalescence(10.0, 2, 0.9, replications=2)
    with pytest.raises(ValueError):
        mx.coalescence(10, 2, 0.9, replications=0)
    with pytest.raises(ValueError):
        mx.coalescence(10, 2, 0.9, replications=2, max_steps=0)
    with pytest.raises(ValueError):
        mx.coupled_run(10, 2, 0.9, ["empty"], steps=-1)
    with pytest.raises(TypeError):
        mx.coupled_run(10, 2, 0.9, "empty", steps=10)
    with pytest.raises(ValueError):
        mx.coupled_run(4, 6, 0.9, ["empty"], steps=10, replace=False)  # d > n without replacement


# --------------------------------------------------------------------------- CLI
def _cli(args):
    from supermarket.cli import main

    return CliRunner().invoke(main, args)


def test_cli_json_has_the_documented_fields():
    r = _cli(
        [
            "mixing",
            "--n",
            "60",
            "--d",
            "3",
            "--load",
            "0.9",
            "--start",
            "empty",
            "--replications",
            "8",
            "--workers",
            "1",
            "--json",
        ]
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    for key in ("mean", "median", "q90", "ci"):
        assert key in out["coalescence_steps"]
    for key in (
        "tmix_steps",
        "bound_upper_steps",
        "bound_lower_steps",
        "tmix_time",
        "bound_upper_time",
        "bound_lower_time",
        "censored",
    ):
        assert key in out
    assert out["censored"] == 0 and out["coupling_increases"] == 0


def test_cli_human_output_and_errors():
    r = _cli(["mixing", "--n", "60", "--d", "3", "--load", "0.9", "--replications", "5", "--workers", "1"])
    assert r.exit_code == 0 and "Coalescence" in r.output
    for bad in (
        ["--start", "long:-1"],
        ["--start", "customers:900000000"],
        ["--load", "1.5"],
        ["--start", "nowhere"],
        ["--n", "0"],
    ):
        r = _cli(["mixing", "--replications", "2", *bad])
        assert r.exit_code == 2, (bad, r.output)


def test_coupled_copy_agrees_with_the_uncoupled_engine():
    """The time-averaged profile of a coupled copy agrees with simulate() (another engine)."""
    n, d, lam, steps = 100, 3, 0.9, 1_500_000
    ref = simulate(n, d, lam, steps=steps, burn_in=100_000, start="fixed-point", seed=9, replications=4, workers=1)
    R = 6
    prof = np.array(
        [
            mx.coupled_run(
                n, d, lam, ["fixed-point", "customers:3"], steps=steps, seed=50 + r, burn_in=100_000, time_average=True
            ).mean_profile[1, :4]
            for r in range(R)
        ]
    )
    est = prof.mean(axis=0)
    se = np.hypot(prof.std(axis=0, ddof=1) / math.sqrt(R), ref.u_stderr[:4])
    assert np.all(np.abs(est - ref.u_mean[:4]) <= Z * se), (est, ref.u_mean[:4], se)


def test_growing_the_level_arrays_does_not_change_the_trajectory(monkeypatch):
    """Arrays grow when a queue reaches their last level; no random number is wasted, so the
    run is the same whatever the initial width."""
    runs = []
    for slack in (1, 200):
        monkeypatch.setattr(mx_coupling, "LEVEL_SLACK", slack)  # where _Chains looks it up
        runs.append(
            mx.coupled_run(
                20,
                2,
                0.97,
                ["empty", "customers:2"],
                steps=30_000,
                seed=8,
                time_average=True,
                track_max=True,
                record_every=1000,
            )
        )
    a, b = runs
    assert a.tau == b.tau and a.distance == b.distance
    assert all(np.array_equal(x, y) for x, y in zip(a.final_counts, b.final_counts))
    assert np.array_equal(a.records_total, b.records_total)
    L = min(a.mean_profile.shape[1], b.mean_profile.shape[1])
    np.testing.assert_allclose(a.mean_profile[:, :L], b.mean_profile[:, :L], rtol=1e-12, atol=0)
    # levels only the wider arrays hold were never reached
    assert not a.mean_profile[:, L:].any() and not b.mean_profile[:, L:].any()
    assert a.final_counts[0].size > 3  # queues did outgrow the narrow arrays


def test_coupled_run_plot_needs_records_and_draws_them(tmp_path):
    r = mx.coupled_run(20, 2, 0.5, ["fixed-point", "empty"], steps=200, seed=1, record_every=10)
    fig = r.plot(tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 0
    lines = fig.axes[0].get_lines()
    assert len(lines) == 2 and list(lines[1].get_ydata()) == list(r.records_total[1])
    with pytest.raises(ValueError, match="record_every"):
        mx.coupled_run(20, 2, 0.5, ["empty"], steps=10, seed=1).plot()


def test_summary_head_says_no_k_for_d_1():
    # issue 19 item 7: the header printed Python's "k=None" for d = 1
    r = mx.coalescence(20, 1, 0.5, replications=2, seed=1, workers=1)
    head = r.summary().splitlines()[0]
    assert "None" not in head and "k: none (d = 1" in head
