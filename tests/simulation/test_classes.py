"""Server classes on the count engine, the exact solver and the mean field (docs/model.md §15).

Every number is checked against an independent fact: per-class M/M/1 under random routing
(closed form), today's one-class solver and engines, the exact law of tiny systems, the
per-queue event engine, and the mean field at large n.  Statistical checks use fixed seeds
and tolerances of Z standard errors of the check itself.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from supermarket import simulate
from supermarket.cli import main
from supermarket.meanfield.classes import classes_drift, classes_fixed_point
from supermarket.simulation.classes import ClassesResult, simulate_classes
from supermarket.simulation.general import simulate_general
from supermarket.stationary.classes import solve_classes
from supermarket.stationary.profile import solve

Z = 4.0  # standard errors allowed in a statistical comparison (fixed seeds: a failure is a bug)

TWO = "0.5:2,0.5:1"  # s̄ = 1.5


def _close(est, exact, z=Z, extra=0.0):
    assert est.reliable, est.note
    assert abs(est.mean - exact) <= z * est.stderr + extra, (est.mean, est.stderr, exact)


# ------------------------------------------------------------------ random routing: M/M/1
def test_random_routing_is_per_class_mm1():
    """Each class-k server receives rate λ s̄ and serves at s_k: ρ_k = λ s̄/s_k, u_{k,i} = ρ_k^i,
    Q_k = ρ_k/(1 − ρ_k), sojourn 1/(s_k − λ s̄)."""
    lam = 0.5
    r = simulate_classes(100, 1, lam, server_classes=TWO, policy="random", events=6 * 10**6, seed=11)
    for c in r.classes:
        rho = lam * 1.5 / c.speed
        for i in range(3):
            assert abs(c.u_mean[i] - rho ** (i + 1)) <= Z * c.u_stderr[i]
        _close(c.mean_queue_length, rho / (1 - rho))
        _close(c.sojourn, 1.0 / (c.speed - lam * 1.5))
        _close(c.waiting, 1.0 / (c.speed - lam * 1.5) - 1.0 / c.speed)
    q = sum(0.5 * (lam * 1.5 / s) / (1 - lam * 1.5 / s) for s in (2.0, 1.0))
    _close(r.mean_queue_length, q)
    _close(r.sojourn, q / (lam * 1.5))


def test_exact_random_routing_is_per_class_mm1():
    r = solve_classes(2, 1, 0.5, TWO, policy="random", cap=60)
    for k, s in enumerate((2.0, 1.0)):
        rho = 0.75 / s
        np.testing.assert_allclose(r.u_mean[k, :5], rho ** np.arange(1, 6), rtol=0, atol=1e-6)
        assert abs(r.sojourn[k] - 1.0 / (s - 0.75)) < 1e-5


def test_meanfield_random_is_per_class_mm1_and_one_class_is_pi():
    r = classes_fixed_point(1, 0.5, TWO, policy="random")
    for k, s in enumerate((2.0, 1.0)):
        rho = 0.75 / s
        np.testing.assert_allclose(r.u[k, :6], rho ** np.arange(1, 7), rtol=1e-10, atol=1e-13)
        assert abs(r.sojourn[k] - 1.0 / (s - 0.75)) < 1e-9
    for d, lam in ((2, 0.9), (3, 0.7)):
        one = classes_fixed_point(d, lam, "1:1")
        i = np.arange(1, 6)
        np.testing.assert_allclose(one.U[:5], lam ** ((d**i - 1) / (d - 1)), rtol=1e-9, atol=1e-14)


def test_meanfield_drift_balances_capacity():
    """Σ_k f_k Σ_i du_{k,i}/dt = λ s̄ (1 − P(U_L)) − Σ_k f_k s_k u_{k,1} for any profile: customers
    in (less those the top level L turns away) minus customers out."""
    rng = np.random.default_rng(2)
    f, s = np.array([0.3, 0.7]), np.array([3.0, 0.5])
    u = np.sort(rng.random((2, 12)), axis=1)[:, ::-1]
    UL = f @ u[:, -1]
    for pol, lost in (("jsq-d", UL**3), ("random", UL)):
        du = classes_drift(u, 0.8, f, s, 3, pol)
        assert abs(f @ du.sum(axis=1) - (0.8 * (f @ s) * (1 - lost) - f @ (s * u[:, 0]))) < 1e-12


# ------------------------------------------------------------------ one class of speed 1
@pytest.mark.parametrize("policy", ["jsq-d", "random", "jsq", "jiq"])
@pytest.mark.parametrize("replace", [True, False])
def test_exact_one_class_is_todays_solver(policy, replace):
    a = solve_classes(3, 2, 0.7, "1:1", policy=policy, replace=replace, cap=10)
    b = solve(3, 2, 0.7, policy=policy, replace=replace, cap=10)
    np.testing.assert_allclose(a.total_u_mean, b.u_mean, rtol=0, atol=1e-13)
    assert abs(a.total_mean_queue_length - b.mean_queue_length) < 1e-13
    assert abs(a.total_sojourn - b.mean_sojourn_time) < 1e-12


def test_exact_classes_are_symmetric_under_relabelling():
    """Listing the classes in the other order swaps the per-class results (class indices)."""
    a = solve_classes(2, 2, 0.8, "0.5:2,0.5:1", cap=16)
    b = solve_classes(2, 2, 0.8, "0.5:1,0.5:2", cap=16)
    np.testing.assert_allclose(a.u_mean, b.u_mean[::-1], rtol=0, atol=1e-13)
    # capacity balance, up to the arrivals the cap drops
    assert abs(0.5 * (2 * a.u_mean[0, 0] + a.u_mean[1, 0]) - 0.8 * 1.5) < 10 * a.mass_at_cap + 1e-12


def test_count_engine_one_class_against_exact():
    """One class of speed 1 on the count engine: today's model (the exact law at n = 3)."""
    ex = solve(3, 2, 0.8, cap=30)
    r = simulate_classes(3, 2, 0.8, server_classes="1:1", events=3 * 10**6, seed=5)
    for i in range(3):
        # E[u_1] = λ exactly (the control variate makes it exact here; the cap drops a few arrivals)
        assert abs(r.u_mean[i] - ex.u_mean[i]) <= Z * r.u_stderr[i] + 10 * ex.truncation["dropped_fraction"] + 1e-12
    _close(r.mean_queue_length, ex.mean_queue_length)
    _close(r.sojourn, ex.mean_sojourn_time)


def test_count_engine_one_class_against_profile_engine():
    a = simulate_classes(100, 2, 0.9, server_classes="1:1", events=4 * 10**6, seed=7)
    b = simulate(100, 2, 0.9, steps=4 * 10**6, seed=7, time_mode="continuous")
    assert a.mean_queue_length.reliable and b.mean_queue_length_reliable
    se = math.hypot(a.mean_queue_length.stderr, b.mean_queue_length_stderr)
    assert abs(a.mean_queue_length.mean - b.mean_queue_length) <= Z * se


# ------------------------------------------------------------------ tiny n: simulate vs exact
@pytest.mark.parametrize(
    ("n", "d", "policy", "replace", "lam", "cap"),
    [
        (2, 2, "jsq-d", True, 0.8, 24),
        (2, 1, "jsq", True, 0.8, 24),
        (2, 1, "jiq", True, 0.6, 40),
        (4, 2, "jsq-d", False, 0.6, 10),
    ],
)
def test_count_engine_against_exact(n, d, policy, replace, lam, cap):
    ex = solve_classes(n, d, lam, TWO, policy=policy, replace=replace, cap=cap)
    assert ex.mass_at_cap < 1e-4
    r = simulate_classes(n, d, lam, server_classes=TWO, policy=policy, replace=replace, events=2 * 10**6, seed=3)
    for k, c in enumerate(r.classes):
        for i in range(2):
            assert abs(c.u_mean[i] - ex.u_mean[k, i]) <= Z * c.u_stderr[i] + 2 * ex.mass_at_cap
        _close(c.mean_queue_length, ex.mean_queue_length[k], extra=cap * ex.mass_at_cap)
        _close(c.sojourn, ex.sojourn[k], extra=cap * ex.mass_at_cap)
    _close(r.mean_queue_length, ex.total_mean_queue_length, extra=cap * ex.mass_at_cap)


def test_simulate_cli_route_matches_exact_json():
    """``supermarket simulate --server-classes`` (the count engine) and ``exact --server-classes``."""
    run = CliRunner().invoke(
        main,
        ["simulate", "--n", "2", "--d", "2", "--load", "0.7", "--server-classes", TWO, "--steps", "1e6", "--json"],
    )
    assert run.exit_code == 0, run.output
    sim = json.loads(run.stdout)
    assert sim["engine"] == "classes"
    assert [set(c) >= {"fraction", "speed", "u_mean", "mean_queue_length", "sojourn"} for c in sim["classes"]] == [
        True,
        True,
    ]
    run = CliRunner().invoke(
        main, ["exact", "--n", "2", "--d", "2", "--load", "0.7", "--server-classes", TWO, "--cap", "24", "--json"]
    )
    assert run.exit_code == 0, run.output
    ex = json.loads(run.stdout)
    for cs, ce in zip(sim["classes"], ex["classes"]):
        e = cs["sojourn"]
        assert abs(e["mean"] - ce["sojourn"]) <= Z * e["stderr"] + 1e-4


# ------------------------------------------------------------------ count engine vs event engine
def test_count_engine_against_event_engine():
    kw = dict(server_classes=TWO, policy="jsq-d")
    a = simulate_classes(10, 2, 0.8, events=4 * 10**6, seed=1, **kw)
    b = simulate_general(10, 2, 0.8, time=1500.0, burn_in=100.0, seed=2, replications=4, workers=1, **kw)
    for ca, cb in zip(a.classes, b.classes):
        for ea, eb in ((ca.mean_queue_length, cb.mean_queue_length), (ca.sojourn, cb.sojourn)):
            assert ea.reliable and eb.reliable
            assert abs(ea.mean - eb.mean) <= Z * math.hypot(ea.stderr, eb.stderr)


# ------------------------------------------------------------------ mean field vs simulate, large n
def test_meanfield_against_simulation_large_n():
    mf = classes_fixed_point(2, 0.8, TWO)
    n = 2 * 10**4
    r = simulate_classes(n, 2, 0.8, server_classes=TWO, events=2 * 10**7, seed=4)
    for k, c in enumerate(r.classes):
        for i in range(3):
            assert abs(c.u_mean[i] - mf.u[k, i]) <= Z * c.u_stderr[i] + 1.0 / n  # + an O(1/n) bias
        _close(c.sojourn, mf.sojourn[k], extra=1.0 / n)


# ------------------------------------------------------------------ the API, JSON and refusals
def test_simulate_dispatch_and_engine_choice():
    r = simulate(10, 2, 0.5, server_classes=TWO, steps=10**5, seed=1)
    assert isinstance(r, ClassesResult)
    assert r.to_dict()["classes"][0]["fraction"] == 0.5
    assert "count engine" in r.summary()
    g = simulate(10, 2, 0.5, server_classes=TWO, engine="events", time=50.0, seed=1)
    assert type(g).__name__ == "GeneralResult"
    g = simulate(10, 2, 0.5, server_classes=TWO, service="erlang:2", time=50.0, seed=1)
    assert type(g).__name__ == "GeneralResult"
    json.dumps(r.to_dict(), allow_nan=False)


def test_same_seed_same_numbers_any_workers():
    a = simulate_classes(20, 2, 0.7, server_classes=TWO, events=10**5, replications=2, workers=1, seed=9)
    b = simulate_classes(20, 2, 0.7, server_classes=TWO, events=10**5, replications=2, workers=2, seed=9)
    assert np.array_equal(a.u_mean, b.u_mean) and a.sojourn.mean == b.sojourn.mean


def test_control_variate_is_consistent_and_reduces_variance():
    kw = dict(server_classes=TWO, events=2 * 10**6, seed=6)
    a = simulate_classes(50, 2, 0.9, **kw)
    b = simulate_classes(50, 2, 0.9, control_variates=False, **kw)
    assert a.mean_queue_length.stderr < b.mean_queue_length.stderr
    assert a.mean_queue_length.reliable and b.mean_queue_length.reliable
    se = math.hypot(a.mean_queue_length.stderr, b.mean_queue_length.stderr)
    assert abs(a.mean_queue_length.mean - b.mean_queue_length.mean) <= Z * se
    _close(a.balance, 1.0)


@pytest.mark.parametrize(
    ("kw", "exc", "word"),
    [
        (dict(policy="fifo"), ValueError, "policy"),
        (dict(lam=0.0), ValueError, "lam"),  # (λ >= 1 runs: a finite horizon)
        (dict(lam=float("inf")), ValueError, "lam"),
        (dict(start="good"), ValueError, "start"),
        (dict(batches=8), ValueError, "batches"),
        (dict(server_classes="0.5:2,0.4:1"), ValueError, "server_classes"),
        (dict(replace="no"), TypeError, "replace"),
        (dict(time=10.0, events=10), ValueError, "time or events"),
    ],
)
def test_refusals(kw, exc, word):
    args = dict(n=10, d=2, lam=0.5, server_classes=TWO, events=1000)
    args.update(kw)
    if "time" in kw:
        args.pop("events")
        args["events"] = kw["events"]
    with pytest.raises(exc, match=word):
        simulate_classes(**args)


def test_cli_errors_are_one_line():
    for argv in (
        ["simulate", "--n", "3", "--server-classes", TWO],
        ["meanfield", "--server-classes", TWO, "--policy", "jsq", "--time", "5"],  # a fluid point: no ODE
        ["exact", "--n", "2", "--server-classes", "0.5:2,0.5:x"],
        ["simulate", "--n", "10", "--server-classes", TWO, "--cdf", "1"],
        # classes with a law that has no phase-type form: neither solver has them (the event engine does)
        ["meanfield", "--server-classes", TWO, "--service", "lognormal:2"],
        ["exact", "--n", "2", "--server-classes", TWO, "--service", "deterministic"],
    ):
        run = CliRunner().invoke(main, argv)
        assert run.exit_code == 2, (argv, run.output)
        assert "Traceback" not in run.output
