"""``engine="phase"`` with exponential service: the phase-type count engines run exp as the law
of one phase (issue #28, item 5), a second engine of the chain the profile engine runs, checked
against the exact stationary law of a tiny system (one class; server classes)."""

from __future__ import annotations

import numpy as np
from click.testing import CliRunner

from supermarket import simulate
from supermarket.cli import main
from supermarket.stationary import solve
from supermarket.stationary.classes import solve_classes
from supermarket.system import methods
from supermarket.system.spec import System


def _within(sim, exact, se, k=4.0):
    sim, exact, se = (np.asarray(x, float) for x in (sim, exact, se))
    assert np.all(np.isfinite(se)) and np.all(se > 0), se
    assert np.all(np.abs(sim - exact) <= k * se + 1e-12), (sim, exact, se)


def test_the_table_sends_phase_requests_of_exp_to_the_phase_engines():
    assert methods.simulation_engine(System(10, 2, 0.5), "phase") == "phase"
    assert methods.simulation_engine(System(10, 2, 0.5, server_classes="0.5:2,0.5:1"), "phase") == "classes-phase"
    assert methods.simulation_engine(System(10, 2, 0.5)) == "profile"  # the default is unchanged
    assert methods.simulation_engine(System(10, 2, 0.5, server_classes="0.5:2,0.5:1")) == "classes"


def test_phase_engine_with_exp_matches_the_exact_law():
    """n = 3, d = 2, λ = 0.7: E[u_1..4], the mean queue length and the sojourn quantiles of the
    joined law within 4 s.e. of the exact law; JSQ(1)'s law (a wrong d) is far."""
    lam = 0.7
    res = simulate(3, 2, lam, engine="phase", steps=4_000_000, seed=3)
    assert res.engine == "phase"
    exact = solve(3, 2, lam, tol=1e-12)
    m = 4
    _within(res.u_mean[:m], exact.u_mean[:m], res.u_stderr[:m])
    _within(res.mean_queue_length.mean, exact.mean_queue_length, res.mean_queue_length.stderr)
    d = res.to_dict()
    for q in ("0.5", "0.9", "0.99"):
        got = d["sojourn"]["quantiles"][q]
        _within(got["mean"], exact.response.sojourn.quantiles[float(q)], got["stderr"])
    d1 = solve(3, 1, lam, tol=1e-12)
    assert np.max(np.abs(res.u_mean[1:m] - d1.u_mean[1:m]) / res.u_stderr[1:m]) > 8


def test_classes_phase_engine_with_exp_matches_the_exact_law():
    """Server classes 0.5:2,0.5:1 at n = 2 (one server of each class), λ = 0.6 of capacity: the
    pooled E[u_1..3] and the mean queue length within 4 s.e. of the exact law."""
    lam = 0.6
    res = simulate(2, 2, lam, engine="phase", server_classes="0.5:2,0.5:1", steps=4_000_000, seed=5)
    assert res.engine == "classes-phase"
    exact = solve_classes(2, 2, lam, "0.5:2,0.5:1", tol=1e-12)
    m = 3
    _within(res.u_mean[:m], exact.total_u_mean[:m], res.u_stderr[:m])
    _within(res.mean_queue_length.mean, exact.total_mean_queue_length, res.mean_queue_length.stderr)


def test_cli_engine_phase_with_exp_runs():
    r = CliRunner().invoke(main, ["simulate", "--n", "20", "--d", "2", "--load", "0.5", "--engine", "phase",
                                  "--steps", "20000", "--seed", "1"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "engine=phase" in r.output and "service=exp" in r.output
