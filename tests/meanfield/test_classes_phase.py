"""Server classes with a phase-type service law: the mean field (docs/model.md §15.5) and
the exact law of tiny systems (§15.6).

Every number is checked against an independent fact: the one-class phase-type mean field and
exact solver (§13), the exponential per-class ones (§15), the M/PH/1 queue of each class
under random routing (Pollaczek–Khinchine and Neuts' matrix-geometric law), and the per-queue
event engine (§14), which defines the model.  Statistical checks use fixed seeds and
tolerances from the check's own standard error.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.stats as st
from click.testing import CliRunner

from supermarket.cli import main
from supermarket.meanfield.classes import classes_drift, classes_fixed_point
from supermarket.meanfield.classes_phase import classes_phase_drift, classes_phase_fixed_point
from supermarket.meanfield.phase import phase_drift, phase_fixed_point
from supermarket.simulation.classes_phase import simulate_classes_phase
from supermarket.simulation.general import simulate_general
from supermarket.stationary.classes import solve_classes
from supermarket.stationary.classes_phase import solve_classes_phase
from supermarket.stationary.phase import solve_phase
from supermarket.system.service import parse_service

TWO = "0.5:2,0.5:1"  # s̄ = 1.5
LAWS = ("erlang:4", "hyperexp:4")


def _law(spec):
    law = parse_service(spec)
    a, T = np.asarray(law.alpha), np.asarray(law.T)
    return a, T, -T.sum(axis=1)


def _mph1(rate, speed, spec, levels):
    """Neuts (1981, §3.2) [classical]: the M/PH/1 queue with arrival rate ``rate`` and service
    ``PH(α, speed·T)`` has ``P(L = ℓ, phase φ) = (1 − ρ) (α R^ℓ)_φ``, ``R = rate (rate I − rate 1α − speed T)^{-1}``."""
    a, T, _ = _law(spec)
    K = a.size
    R = rate * np.linalg.inv(rate * np.eye(K) - rate * np.outer(np.ones(K), a) - speed * T)
    rho = rate / speed
    out, v = [], a.copy()
    for _ in range(levels):
        v = v @ R
        out.append((1 - rho) * v)
    return np.array(out)


def _pk(rho, scv):
    return rho + rho**2 * (1 + scv) / (2 * (1 - rho))


# ------------------------------------------------------------------ the drift against §13 and §15.2
@pytest.mark.parametrize("spec", LAWS)
@pytest.mark.parametrize(("policy", "d"), [("jsq-d", 2), ("jsq-d", 3), ("random", 1)])
def test_drift_one_class_is_the_phase_drift(spec, policy, d):
    """One class of speed 1: the drift of §13, at random states (not only at a fixed point)."""
    a, T, t0 = _law(spec)
    rng = np.random.default_rng(1)
    for _ in range(5):
        x = rng.random((12, a.size))
        x *= rng.random() / x.sum()  # total share below 1
        mine = classes_phase_drift(x[None], 0.7, np.ones(1), np.ones(1), a, T, t0, d, policy)[0]
        np.testing.assert_allclose(mine, phase_drift(x, 0.7, d, a, T, t0), rtol=0, atol=1e-14)


@pytest.mark.parametrize(("policy", "d"), [("jsq-d", 2), ("jsq-d", 5), ("random", 1)])
def test_drift_one_phase_is_the_classes_drift(policy, d):
    """Exponential law: summed over the levels at or above i, the drift of §15.2, at random states."""
    f, s = np.array([0.3, 0.7]), np.array([2.5, 0.5])
    rng = np.random.default_rng(2)
    one = np.ones(1)
    for _ in range(5):
        u = np.sort(rng.random((2, 10)), axis=1)[:, ::-1]  # non-increasing profiles
        x = (u - np.hstack([u[:, 1:], np.zeros((2, 1))]))[:, :, None]
        dx = classes_phase_drift(x, 0.8, f, s, one, -np.ones((1, 1)), one, d, policy)[:, :, 0]
        du = np.cumsum(dx[:, ::-1], axis=1)[:, ::-1]
        ref = classes_drift(u, 0.8, f, s, d, policy)
        np.testing.assert_allclose(du, ref, rtol=0, atol=1e-13)  # (both drop arrivals at the top level)


# ------------------------------------------------------------------ fixed points against §13, §15.2
@pytest.mark.parametrize("spec", LAWS)
@pytest.mark.parametrize(("d", "lam"), [(2, 0.6), (3, 0.9)])
def test_fixed_point_one_class_is_the_phase_fixed_point(spec, d, lam):
    a, T, _ = _law(spec)
    mine = classes_phase_fixed_point(d, lam, "1:1", spec)
    ref = phase_fixed_point(d, lam, a, T)
    L = min(mine.levels, ref.u.size)
    np.testing.assert_allclose(mine.u[0, :L], ref.u[:L], rtol=0, atol=1e-10)
    assert abs(mine.total_mean_queue_length - ref.mean_queue_length) < 1e-10
    assert mine.flow_error < 1e-12 and mine.residual < 1e-12


@pytest.mark.parametrize(
    ("policy", "d", "lam"), [("jsq-d", 2, 0.5), ("jsq-d", 2, 0.9), ("jsq-d", 4, 0.8), ("random", 1, 0.6)]
)
def test_fixed_point_exponential_is_the_classes_fixed_point(policy, d, lam):
    mine = classes_phase_fixed_point(d, lam, TWO, "exp", policy=policy)
    ref = classes_fixed_point(d, lam, TWO, policy=policy)
    L = min(mine.levels, ref.levels)
    np.testing.assert_allclose(mine.u[:, :L], ref.u[:, :L], rtol=0, atol=1e-10)
    np.testing.assert_allclose(mine.sojourn, ref.sojourn, rtol=1e-10)


# ------------------------------------------------------------------ random routing: per-class M/PH/1
@pytest.mark.parametrize("spec", (*LAWS, "erlang:2"))
def test_random_routing_is_per_class_mph1(spec):
    """Each class-k server is an M/PH/1 queue fed at rate λ s̄ and serving PH(α, s_k T):
    ρ_k = λ s̄/s_k, Neuts' law by length and phase, Pollaczek–Khinchine mean, Little's sojourn."""
    lam, sbar = 0.6, 1.5
    r = classes_phase_fixed_point(1, lam, TWO, spec, policy="random")
    scv = parse_service(spec).scv
    for k, s in enumerate((2.0, 1.0)):
        law = _mph1(lam * sbar, s, spec, r.levels)
        np.testing.assert_allclose(r.x[k], law, rtol=0, atol=1e-12)
        rho = lam * sbar / s
        assert abs(r.mean_queue_length[k] - _pk(rho, scv)) < 1e-10
        assert abs(r.sojourn[k] - _pk(rho, scv) / (lam * sbar)) < 1e-10
        assert abs(r.u[k, 0] - rho) < 1e-12


def test_speeds_scale_time():
    """All speeds times c at the same load: the same profile, sojourn times divided by c."""
    a = classes_phase_fixed_point(2, 0.8, TWO, "hyperexp:4")
    b = classes_phase_fixed_point(2, 0.8, "0.5:6,0.5:3", "hyperexp:4")
    np.testing.assert_allclose(a.u, b.u, rtol=0, atol=1e-11)
    np.testing.assert_allclose(a.sojourn / 3, b.sojourn, rtol=1e-10)
    c = classes_phase_fixed_point(2, 0.8, "0.5:1,0.5:1", "hyperexp:4")  # equal speeds: one class
    ref = classes_phase_fixed_point(2, 0.8, "1:1", "hyperexp:4")
    np.testing.assert_allclose(c.u, np.vstack([ref.u, ref.u]), rtol=0, atol=1e-11)


# ------------------------------------------------------------------ against the event engine, large n
@pytest.mark.parametrize(("spec", "lam", "burn"), [("erlang:4", 0.7, 30.0), ("hyperexp:2", 0.6, 60.0)])
def test_meanfield_against_event_engine_large_n(spec, lam, burn):
    """n = 2·10^4, 6 replications: |simulated − mean field| within the t quantile (5 degrees of
    freedom, two-sided 0.999) of the replications' standard error plus 2/n for the O(1/n) bias
    of the mean field.  Burn-in: the ODE from empty is within 1e-5 of the fixed point by then."""
    mf = classes_phase_fixed_point(2, lam, TWO, spec)
    n, R = 2 * 10**4, 6
    r = simulate_general(
        n, 2, lam, server_classes=TWO, service=spec, time=25.0, burn_in=burn, seed=5, replications=R, workers=1
    )
    z = st.t.ppf(0.9995, R - 1)
    for k, c in enumerate(r.classes):
        for i in range(3):
            assert abs(c.u_mean[i] - mf.u[k, i]) <= z * c.u_stderr[i] + 2.0 / n, (k, i, c.u_mean[i], mf.u[k, i])
        for est, exact in ((c.mean_queue_length, mf.mean_queue_length[k]), (c.sojourn, mf.sojourn[k])):
            assert abs(est.mean - exact) <= z * est.stderr + 2.0 / n, (k, est, exact)


# ------------------------------------------------------------------ CLI
def test_meanfield_cli_runs_the_combination():
    run = CliRunner().invoke(
        main, ["meanfield", "--server-classes", TWO, "--service", "erlang:4", "--load", "0.7", "--json"]
    )
    assert run.exit_code == 0, run.output
    data = json.loads(run.output)
    ref = classes_phase_fixed_point(2, 0.7, TWO, "erlang:4")
    assert data["mean_queue_length"] == pytest.approx(ref.total_mean_queue_length, abs=1e-12)
    assert [c["speed"] for c in data["classes"]] == [2.0, 1.0]
    assert "§15.5" in data["source"]
    text = CliRunner().invoke(main, ["meanfield", "--server-classes", TWO, "--service", "hyperexp:2"])
    assert text.exit_code == 0 and "phase-type" in text.output


@pytest.mark.parametrize(
    "argv",
    [
        ["meanfield", "--server-classes", TWO, "--service", "erlang:2", "--policy", "jsq", "--n", "10"],
        ["meanfield", "--server-classes", TWO, "--service", "lognormal:2"],
        ["meanfield", "--server-classes", TWO, "--service", "erlang:2", "--policy", "random", "--load", "0.8"],
        ["meanfield", "--server-classes", TWO, "--service", "erlang:2", "--n", "10", "--no-replace"],
    ],
)
def test_cli_errors_are_one_line(argv):
    run = CliRunner().invoke(main, argv)
    assert run.exit_code == 2, (argv, run.output)
    assert "Traceback" not in run.output and run.output.count("error:") == 1


def test_api_refusals_name_the_parameter():
    with pytest.raises(ValueError, match="policy"):
        classes_phase_fixed_point(2, 0.5, TWO, "erlang:2", policy="jiq")
    with pytest.raises(ValueError, match="service"):
        classes_phase_fixed_point(2, 0.5, TWO, "deterministic")
    with pytest.raises(ValueError, match="server_classes"):
        classes_phase_fixed_point(2, 0.5, "0.5:2,0.4:1", "erlang:2")
    with pytest.raises(ValueError, match="lam"):
        classes_phase_fixed_point(2, 1.2, TWO, "erlang:2")


# ================================================================== exact law of tiny systems (§15.6)


@pytest.mark.parametrize(
    ("policy", "replace"), [("jsq-d", True), ("jsq-d", False), ("random", True), ("jsq", True), ("jiq", True)]
)
def test_exact_one_class_is_solve_phase(policy, replace):
    a, T, _ = _law("hyperexp:2")
    mine = solve_classes_phase(3, 2, 0.7, "1:1", "hyperexp:2", policy=policy, replace=replace, cap=8)
    ref = solve_phase(3, 2, 0.7, a, T, policy=policy, replace=replace, cap=8)
    np.testing.assert_allclose(mine.u_mean[0], ref.u, rtol=0, atol=1e-10)
    np.testing.assert_allclose(mine.phase_mean[0], ref.phase_mean, rtol=0, atol=1e-10)
    assert abs(mine.mass_at_cap - ref.truncation) < 1e-10


@pytest.mark.parametrize(
    ("policy", "replace"), [("jsq-d", True), ("jsq-d", False), ("random", True), ("jsq", True), ("jiq", True)]
)
def test_exact_exponential_is_solve_classes(policy, replace):
    lam = 0.6 if policy == "random" else 0.8  # random at 0.8 overloads the speed-1 class (1.2): no law
    mine = solve_classes_phase(2, 2, lam, TWO, "exp", policy=policy, replace=replace, cap=24)
    ref = solve_classes(2, 2, lam, TWO, policy=policy, replace=replace, cap=24)
    np.testing.assert_allclose(mine.u_mean, ref.u_mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(mine.sojourn, ref.sojourn, rtol=1e-10)
    assert abs(mine.mass_at_cap - ref.mass_at_cap) < 1e-10


@pytest.mark.parametrize(("spec", "cap"), [("erlang:2", 40), ("hyperexp:2", 80)])
def test_exact_random_routing_is_per_class_mph1(spec, cap):
    """Random routing makes the servers independent M/PH/1 queues (Neuts' law per class).  The
    cap only drops arrivals at a full queue: it moves the law by the order of the untruncated
    tail mass P(L >= cap) of the slowest class; we allow 100 times that."""
    lam, sbar = 0.4, 1.5
    r = solve_classes_phase(2, 1, lam, TWO, spec, policy="random", cap=cap)
    scv = parse_service(spec).scv
    for k, s in enumerate((2.0, 1.0)):
        law = _mph1(lam * sbar, s, spec, 400)
        tail = law[cap - 1 :].sum()  # P(L >= cap), untruncated
        allow = 100 * tail + 1e-12
        assert tail < 1e-7
        np.testing.assert_allclose(r.phase_mean[k], law[:cap], rtol=0, atol=allow)
        rho = lam * sbar / s
        assert abs(r.u_mean[k, 0] - rho) < allow
        assert abs(r.mean_queue_length[k] - _pk(rho, scv)) < cap * allow


@pytest.mark.parametrize(("policy", "spec"), [("jsq-d", "hyperexp:2"), ("jiq", "erlang:2")])
def test_exact_against_event_engine(policy, spec):
    """n = 2 (one server of each class), 6 replications of 10^5 time units on the event engine
    (§14, which defines the model): within the t quantile (5 dof, two-sided 0.999) of the
    replications' standard error plus the exact law's mass at the cap."""
    ex = solve_classes_phase(2, 2, 0.7, TWO, spec, policy=policy, cap=32)  # mass at the cap below 1e-5
    R = 6
    r = simulate_general(
        2, 2, 0.7, server_classes=TWO, service=spec, policy=policy, time=1e5, burn_in=100.0, seed=7,
        replications=R, workers=1,
    )  # fmt: skip
    z = st.t.ppf(0.9995, R - 1)
    slack = 10 * ex.mass_at_cap
    for k, c in enumerate(r.classes):
        for i in range(3):
            assert abs(c.u_mean[i] - ex.u_mean[k, i]) <= z * c.u_stderr[i] + slack
        for est, exact in ((c.mean_queue_length, ex.mean_queue_length[k]), (c.sojourn, ex.sojourn[k])):
            assert abs(est.mean - exact) <= z * est.stderr + slack, (k, est, exact)


def test_exact_cli_runs_the_combination():
    argv = ["exact", "--n", "2", "--server-classes", TWO, "--service", "erlang:2", "--load", "0.7", "--json"]
    run = CliRunner().invoke(main, argv)
    assert run.exit_code == 0, run.output
    data = json.loads(run.output)
    ref = solve_classes_phase(2, 2, 0.7, TWO, "erlang:2")
    assert data["mean_queue_length"] == pytest.approx(ref.total_mean_queue_length, abs=1e-12)
    assert data["truncation"]["mass_at_cap"] < 1e-8 and "§15.6" in data["source"]
    for argv in (
        ["exact", "--n", "2", "--server-classes", TWO, "--service", "pareto:3"],
        ["exact", "--n", "2", "--server-classes", TWO, "--service", "erlang:2", "--quantile", "0.5"],
        ["exact", "--n", "2", "--server-classes", TWO, "--service", "erlang:2", "--d", "3", "--no-replace"],
    ):
        run = CliRunner().invoke(main, argv)
        assert run.exit_code == 2 and "Traceback" not in run.output, (argv, run.output)


def test_exact_refusals_name_the_parameter():
    for kw, word in (
        (dict(service="lognormal:1"), "service"),
        (dict(n=3), "server_classes"),
        (dict(policy="fifo"), "policy"),
        (dict(cap=200), "cap"),
        (dict(lam=1.0), "lam"),
    ):
        args = dict(n=2, d=2, lam=0.5, server_classes=TWO, service="erlang:2")
        args.update(kw)
        with pytest.raises(ValueError, match=word):
            solve_classes_phase(**args)
    with pytest.raises(TypeError, match="replace"):
        solve_classes_phase(2, 2, 0.5, TWO, "erlang:2", replace="no")


# ================================================================== the count engine (§15.7)
Z = 4.0  # standard errors allowed (blocking errors, calibrated for this engine's sibling in §15.3)


@pytest.mark.parametrize(
    ("policy", "replace", "spec"),
    [("jsq-d", True, "hyperexp:2"), ("jsq-d", False, "erlang:2"), ("jiq", True, "erlang:2"), ("jsq", True, "erlang:4")],
)
def test_count_engine_against_exact(policy, replace, spec):
    """n = 2, one server per class, 4·10^6 events: per-class E[u_1..3], mean queue lengths and
    sojourn times within Z standard errors of the exact law (§15.6) plus 10 times its mass at
    the cap (random routing, whose slow class is at ρ = 0.9 here, is the next test's)."""
    ex = solve_classes_phase(2, 2, 0.6, TWO, spec, policy=policy, replace=replace, cap=32)
    assert ex.mass_at_cap < 1e-4
    r = simulate_classes_phase(
        2, 2, 0.6, server_classes=TWO, service=spec, policy=policy, replace=replace, events=4 * 10**6, seed=3
    )
    slack = 10 * ex.mass_at_cap
    for k, c in enumerate(r.classes):
        for i in range(3):
            assert abs(c.u_mean[i] - ex.u_mean[k, i]) <= Z * c.u_stderr[i] + slack, (k, i)
        for est, exact in ((c.mean_queue_length, ex.mean_queue_length[k]), (c.sojourn, ex.sojourn[k])):
            assert est.reliable and abs(est.mean - exact) <= Z * est.stderr + slack, (k, est, exact)
    assert abs(r.mean_queue_length.mean - ex.total_mean_queue_length) <= Z * r.mean_queue_length.stderr + slack


def test_count_engine_random_routing_is_per_class_mph1():
    """n = 20, random routing: per class Pollaczek–Khinchine at ρ_k = λ s̄/s_k and P(busy) = ρ_k."""
    lam, spec = 0.5, "erlang:4"
    r = simulate_classes_phase(20, 1, lam, server_classes=TWO, service=spec, policy="random", events=4 * 10**6, seed=4)
    for c in r.classes:
        rho = lam * 1.5 / c.speed
        assert abs(c.u_mean[0] - rho) <= Z * c.u_stderr[0]
        assert abs(c.mean_queue_length.mean - _pk(rho, 0.25)) <= Z * c.mean_queue_length.stderr
        assert abs(c.sojourn.mean - _pk(rho, 0.25) / (lam * 1.5)) <= Z * c.sojourn.stderr


def test_count_engine_against_meanfield_large_n():
    """n = 2·10^4, 2·10^7 events: within Z standard errors plus 2/n of the mean field (§15.5)."""
    mf = classes_phase_fixed_point(2, 0.7, TWO, "hyperexp:2")
    n = 2 * 10**4
    r = simulate_classes_phase(n, 2, 0.7, server_classes=TWO, service="hyperexp:2", events=2 * 10**7, seed=8)
    for k, c in enumerate(r.classes):
        for i in range(3):
            assert abs(c.u_mean[i] - mf.u[k, i]) <= Z * c.u_stderr[i] + 2.0 / n
        assert abs(c.sojourn.mean - mf.sojourn[k]) <= Z * c.sojourn.stderr + 2.0 / n


def test_count_engine_same_seed_any_workers_and_refusals():
    kw = dict(server_classes=TWO, service="erlang:2", events=10**5, replications=2, seed=9)
    a = simulate_classes_phase(20, 2, 0.7, workers=1, **kw)
    b = simulate_classes_phase(20, 2, 0.7, workers=2, **kw)
    assert np.array_equal(a.u_mean, b.u_mean) and a.sojourn.mean == b.sojourn.mean
    d = a.to_dict()
    assert d["system"]["service"]["spec"] == "erlang:2" and d["engine"] == "classes-phase"
    json.dumps(d, allow_nan=False)
    with pytest.raises(ValueError, match="service"):
        simulate_classes_phase(20, 2, 0.7, server_classes=TWO, service="pareto:3", events=1000)
    with pytest.raises(ValueError, match="policy"):
        simulate_classes_phase(20, 2, 0.7, server_classes=TWO, service="erlang:2", policy="x", events=1000)


def test_simulate_cli_engine_phase():
    """``simulate --server-classes … --service erlang:2 --engine phase``: the count engine, the same
    numbers as the API for the same seed; the default stays the event engine."""
    args = ["simulate", "--n", "20", "--d", "2", "--load", "0.7", "--server-classes", TWO, "--service", "erlang:2"]
    run = CliRunner().invoke(main, [*args, "--engine", "phase", "--steps", "200000", "--seed", "3", "--json"])
    assert run.exit_code == 0, run.output
    data = json.loads(run.output)
    api = simulate_classes_phase(20, 2, 0.7, server_classes=TWO, service="erlang:2", events=200000, seed=3)
    assert data["engine"] == "classes-phase" and data["system"]["service"]["spec"] == "erlang:2"
    assert data["mean_queue_length"]["mean"] == pytest.approx(api.mean_queue_length.mean, rel=1e-12)
    ev = CliRunner().invoke(main, [*args, "--time", "20", "--json"])
    assert ev.exit_code == 0 and json.loads(ev.output).get("engine") != "classes"  # the event engine's JSON
    cdf = CliRunner().invoke(main, [*args, "--engine", "phase", "--steps", "20000", "--cdf", "5"])
    assert cdf.exit_code == 0 and "Response-time CDF on 5 points" in cdf.output  # the joined law's (§15.9)


def test_simulate_api_runs_the_count_engine_on_request():
    """``simulate(server_classes=, service=erlang, engine="phase")`` is the count engine of §15.7,
    the same numbers as :func:`simulate_classes_phase` for the same seed; without
    ``engine="phase"`` the combination stays on the event engine."""
    from supermarket import simulate
    from supermarket.simulation.classes_phase import simulate_classes_phase
    from supermarket.simulation.general import GeneralResult

    kw = dict(server_classes="0.5:2,0.5:1", service="hyperexp:2", seed=3)
    a = simulate(12, 2, 0.7, engine="phase", steps=100_000, **kw)
    b = simulate_classes_phase(12, 2, 0.7, events=100_000, **kw)
    assert a.to_dict()["system"]["service"]["spec"] == "hyperexp:2" and a.replications == 1
    assert a.mean_queue_length.mean == b.mean_queue_length.mean
    assert [c.mean_queue_length.mean for c in a.classes] == [c.mean_queue_length.mean for c in b.classes]
    assert isinstance(simulate(12, 2, 0.7, time=20.0, replications=2, **kw), GeneralResult)
    with pytest.raises(ValueError, match="start"):  # a start the engine has no state for
        simulate(12, 2, 0.7, engine="phase", steps=1000, start="perfect", **kw)
