"""The event engine for every system (issue #28, item 5): exponential service with one class on
request, the default of a rule no count engine runs (jbt), a finite horizon at load >= 1, each
checked against an independent fact (the exact law of a tiny system, M/M/1, the growth of an
overloaded system)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from supermarket import simulate
from supermarket.cli import main
from supermarket.simulation.general import GeneralResult
from supermarket.stationary import solve
from supermarket.system import methods
from supermarket.system.spec import System


def _within(sim, exact, se, dof, alpha=1e-3):
    """Within the two-sided Student-t band of the error bars' own ``dof`` (the event engine's error
    is the spread of its replications: ``R − 1`` degrees of freedom), family-wise level ``alpha``
    over the quantities checked (Bonferroni), plus rounding (the capacity control pins
    E[u_1] = λ to a few ulps).  A fixed 4 s.e. band was a 1 % false alarm per quantity at 5 dof."""
    sim, exact, se = (np.asarray(x, float) for x in (sim, exact, se))
    assert np.all(np.isfinite(se)) and np.all(se > 0), se
    k = stats.t.ppf(1.0 - alpha / (2.0 * sim.size), dof)
    assert np.all(np.abs(sim - exact) <= k * se + 1e-12), (sim, exact, se, k)


def test_jbt_exp_runs_on_the_event_engine_by_default_and_matches_the_exact_law():
    """n = 3, d = 2: E[u_i] and the mean queue length within 4 s.e. of the exact stationary law;
    the same run is far from JIQ's law (T = 1), so a rule read with the wrong threshold fails."""
    lam = 0.7
    res = simulate(3, 2, lam, policy="jbt", time=20000.0, seed=11, replications=8)
    assert isinstance(res, GeneralResult) and res.engine == "events"
    assert any(note.startswith("engine events: policy jbt runs on the event engine") for note in res.notes)
    exact = solve(3, 2, lam, policy="jbt", tol=1e-10)
    m = 5
    _within(res.u_mean[:m], exact.u_mean[:m], res.u_stderr[:m], res.replications - 1)
    _within(res.mean_queue_length.mean, exact.mean_queue_length, res.mean_queue_length.stderr, res.replications - 1)
    jiq = solve(3, 2, lam, policy="jiq", tol=1e-10)
    assert np.max(np.abs(res.u_mean[1:m] - jiq.u_mean[1:m]) / res.u_stderr[1:m]) > 8


def test_random_routing_on_the_event_engine_with_exp_is_mm1():
    """Random routing splits Poisson arrivals: each server is an M/M/1 queue, E[u_i] = λ^i."""
    lam = 0.6
    res = simulate(4, 2, lam, policy="random", engine="events", time=20000.0, seed=5, replications=6)
    assert isinstance(res, GeneralResult)
    assert not any(note.startswith("engine events") for note in res.notes)  # asked for, not a rule's default
    m = 5
    _within(res.u_mean[:m], lam ** np.arange(1, m + 1), res.u_stderr[:m], res.replications - 1)
    _within(res.mean_queue_length.mean, lam / (1 - lam), res.mean_queue_length.stderr, res.replications - 1)


def test_default_engines_of_the_other_rules_are_unchanged():
    for rule in ("jsq-d", "random", "jsq", "jiq"):
        assert methods.simulation_engine(System(10, 2, 0.5, rule=rule)) == "profile"
        assert methods.simulation_engine(System(10, 2, 0.5, rule=rule, service="erlang:2")) == "phase"
        assert methods.simulation_engine(System(10, 2, 0.5, rule=rule, server_classes="0.5:2,0.5:1")) == "classes"
    for kw in ({}, {"service": "erlang:2"}, {"server_classes": "0.5:2,0.5:1"}, {"service": "lognormal:2"}):
        assert methods.simulation_engine(System(10, 2, 0.5, rule="jbt", **kw)) == "events"
        assert methods.simulation_engine(System(10, 2, 0.5, **kw), "events") == "events"


def test_a_count_engine_named_for_jbt_says_which_rules_it_dispatches_by():
    assert methods.simulation_engine(System(10, 2, 0.5, rule="jbt"), "buckets") == "buckets"  # on request
    assert methods.simulation_engine(System(10, 2, 0.5, rule="jbt", service="erlang:2"), "phase") == "phase"
    assert methods.simulation_engine(System(10, 2, 0.5, rule="jbt"), "phase") == "phase"  # exp as one phase
    # "profile" with a phase-type law stands for the default, which for jbt is the event engine
    assert methods.simulation_engine(System(10, 2, 0.5, rule="jbt", service="erlang:2"), "profile") == "events"
    sc = "0.5:2,0.5:1"
    assert methods.simulation_engine(
        System(10, 2, 0.5, rule="jbt", service="erlang:2", server_classes=sc), "phase"
    ) == ("classes-phase")
    assert methods.simulation_engine(System(10, 2, 0.5, rule="jbt"), "queues") == "queues"  # the reference engine
    assert methods.simulation_engine(System(10, 2, 0.5), "phase") == "phase"  # exp: the one-phase law


def test_start_perfect_on_the_law_engines_gives_the_samplers_reason():
    for kw, engine, why in (
        ({"service": "erlang:2"}, "phase", "needs exponential service, not erlang:2"),
        ({"server_classes": "0.5:2,0.5:1"}, "classes", "with server classes a queue's speed matters too"),
        ({"rule": "jbt"}, "events", "jbt is no JSQ\\(d\\)"),
        ({}, "events", "the perfect sampler's exact stationary start runs on the profile engines"),
    ):
        with pytest.raises(ValueError, match=why):
            methods.check_options(System(10, 2, 0.5, **kw), engine, {"start": "perfect"})


def test_load_at_least_one_runs_on_every_engine():
    """Every engine takes load >= 1 (the count engines of laws and classes too, a finite horizon:
    tests/simulation/test_count_engines_overload_and_start.py)."""
    for engine, kw in (
        ("phase", {"service": "erlang:2"}),
        ("events", {"service": "erlang:2"}),
        ("classes", {"server_classes": "0.5:2,0.5:1"}),
        ("classes-phase", {"server_classes": "0.5:2,0.5:1", "service": "erlang:2"}),
    ):
        methods.check_options(System(10, 2, 1.2, **kw), engine, {"load": "1.2"})
    assert all("load" in e.takes for e in methods.ENGINES.values())


def test_load_above_one_on_the_event_engine_grows_at_the_rate_of_the_excess():
    """At λ = 1.2 every server is soon busy (u_1 near 1) and the customers grow at rate n(λ − s̄):
    the time average of the queue length per server over [B, B + T] grows by (λ − 1)ΔT/2 when the
    horizon T grows by ΔT (the start's transient, the same in both, cancels)."""
    lam, n, burn = 1.2, 100, 20.0
    runs = {}
    for T in (100.0, 300.0):
        with pytest.warns(RuntimeWarning, match="load λ = 1.2 >= 1: the chain has no equilibrium"):
            runs[T] = simulate(n, 2, "1.2", policy="jbt", time=T, burn_in=burn, seed=7, replications=4)
    for r in runs.values():
        assert 0.99 < r.u_mean[0] <= 1.0
        assert not r.control_variates and any("at load λ >= 1 there is none" in x for x in r.notes)
    a, b = runs[100.0].mean_queue_length, runs[300.0].mean_queue_length
    growth = (lam - 1.0) * (300.0 - 100.0) / 2.0
    _within(b.mean - a.mean, growth, np.hypot(a.stderr, b.stderr), min(a.dof, b.dof))
    assert b.mean - a.mean > 10  # a stable run would not grow at all


def test_the_cli_runs_exp_on_the_event_engine_and_load_above_one_with_the_warning():
    run = CliRunner().invoke
    args = ["simulate", "--n", "20", "--d", "2", "--time", "50", "--json"]
    r = run(main, args + ["--load", "0.5", "--engine", "events"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["engine"] == "events" and data["sojourn"]["quantiles"]
    r = run(main, args + ["--load", "1.2", "--policy", "jbt"])
    assert r.exit_code == 0, r.output
    assert "supermarket: warning: load λ = 1.2 >= 1: the chain has no equilibrium" in r.stderr
    assert any(note.startswith("engine events:") for note in json.loads(r.stdout)["notes"])
    r = run(main, ["simulate", "--n", "20", "--d", "2", "--load", "1.2", "--service", "erlang:2", "--time", "5"])
    assert r.exit_code == 0 and "supermarket: warning: load λ = 1.2 >= 1" in r.stderr  # the phase engine's horizon
