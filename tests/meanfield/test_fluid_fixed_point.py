"""The fluid fixed points of jsq, jiq and jbt with server classes and phase-type laws
(supermarket.meanfield.fluid, docs/model.md §2.1), against facts the code did not produce:
the closed forms written here from the definitions, jbt's one-class point of the registry,
the flow balance per class, the event engine at n = 2000 and the design's closed-form quantiles."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from supermarket.cli import main
from supermarket.design.rule_latency import design_rule_latency
from supermarket.meanfield.fluid import fluid_fixed_point
from supermarket.system import methods
from supermarket.system.policies import RULES
from supermarket.system.service import parse_service
from supermarket.system.spec import System

CLASSES = [((0.5, 0.5), (2.0, 1.0)), ((0.2, 0.3, 0.5), (3.0, 1.5, 0.5)), ((1.0,), (1.0,))]


def _spec(f, s):
    return ",".join(f"{a:g}:{b:g}" for a, b in zip(f, s))


def _idle_share(lam1: float, f: np.ndarray, s: np.ndarray) -> float:
    """The root I of 1 = Σ f_k s_k/(λ' + s_k I) (from b_k s_k = λ'(1 − b_k)/I and I = Σ f_k(1 − b_k)),
    by bisection: the left side decreases in I."""
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if float(np.sum(f * s / (lam1 + s * mid))) > 1.0 else (lo, mid)
    return 0.5 * (lo + hi)


@pytest.mark.parametrize("T", [1, 2, 3, 5, 12])
@pytest.mark.parametrize("lam", [0.1, 0.5, 0.9, 0.99])
def test_one_class_is_the_registry_jbt_point_to_1e_12(T, lam):
    """One class of speed 1, exp: the M/M/1/T queue fed at λ/F is jbt's fixed point of the
    registry (its own recursion u_ℓ = λ(u_(ℓ−1) − u_T)/(1 − u_T), solved by another root)."""
    r = fluid_fixed_point("jbt", T, lam)
    assert np.abs(r.u[0] - RULES["jbt"].fixed_point(lam, T, T)).max() <= 1e-12
    assert abs(r.below - (1.0 - r.u[0, T - 1])) <= 1e-12


@pytest.mark.parametrize("policy", ["jsq", "jiq"])
@pytest.mark.parametrize("f, s", CLASSES)
@pytest.mark.parametrize("service", ["exp", "erlang:3", "hyperexp:4"])
@pytest.mark.parametrize("lam", [0.3, 0.8, 0.97])
def test_jsq_jiq_closed_form_with_classes_and_phases(policy, f, s, service, lam):
    """b_k = λ'/(λ' + s_k I) with I the root above; busy phases b_k α(−T)^{-1}; the arrivals join
    class k in proportion to f_k(1 − b_k); no queue above 1."""
    f, s = np.array(f), np.array(s)
    lam1 = lam * float(f @ s)
    I = _idle_share(lam1, f, s)
    b = lam1 / (lam1 + s * I)
    r = fluid_fixed_point(policy, 7, lam, _spec(f, s), service)
    assert r.u.shape == (f.size, 1)
    assert np.abs(r.u[:, 0] - b).max() <= 1e-12 and abs(r.below - I) <= 1e-12
    law = parse_service(service)
    alpha, M = np.asarray(law.alpha, float), np.asarray(law.T, float)
    phases = np.linalg.solve(-M.T, alpha)  # α(−T)^{-1}, summing to the mean 1
    assert np.abs(r.busy_by_phase - b[:, None] * phases[None, :]).max() <= 1e-12
    w = f * (1 - b) / np.sum(f * (1 - b))
    assert np.abs(r.arrival_share - w).max() <= 1e-12
    # the sojourn of a class is one service at its speed: Little's law per class
    assert np.abs(r.sojourn - 1.0 / s).max() <= 1e-9


def test_a_mutated_formula_is_told_apart():
    """The closed-form checks above tell a wrong formula from the right one by far more than
    their tolerance: the idle share I → 1 − I, and class weights f_k instead of f_k(1 − b_k)."""
    f, s, lam = np.array([0.5, 0.5]), np.array([2.0, 1.0]), 0.8
    lam1 = lam * 1.5
    r = fluid_fixed_point("jsq", 1, lam, "0.5:2,0.5:1")
    I = r.below
    assert np.abs(r.u[:, 0] - lam1 / (lam1 + s * (1 - I))).max() > 1e-2
    assert np.abs(r.arrival_share - f).max() > 1e-2


@pytest.mark.parametrize("policy, d", [("jsq", 1), ("jiq", 1), ("jbt", 2), ("jbt", 4)])
@pytest.mark.parametrize("f, s", CLASSES[:2])
@pytest.mark.parametrize("service", ["exp", "erlang:2", "hyperexp:3"])
def test_flow_balance_per_class(policy, d, f, s, service):
    """Arrivals into class k (λ' × its share of the queues below T / F) equal its departures
    (f_k s_k Σ_{ℓ,φ} x[k, ℓ, φ] t0_φ) to 1e-12, computed here from x alone; and F is the share below T."""
    f, s = np.array(f), np.array(s)
    lam = 0.85
    r = fluid_fixed_point(policy, d, lam, _spec(f, s), service)
    law = parse_service(service)
    t0 = -np.asarray(law.T, float).sum(axis=1)
    T = r.threshold
    below_k = 1.0 - r.x[:, T - 1, :].sum(axis=1)  # the class-k queues shorter than T
    F = float(f @ below_k)
    assert abs(F - r.below) <= 1e-12
    arrivals = lam * float(f @ s) * f * below_k / F
    departures = f * s * (r.x.sum(axis=1) @ t0)
    assert np.abs(arrivals - departures).max() <= 1e-12
    # every arrival is served: the capacity used is the load, Σ_k f_k s_k (busy, weighted by t0) = λ s̄
    assert abs(float(departures.sum()) - lam * float(f @ s)) <= 1e-12


@pytest.mark.parametrize("f, s", CLASSES[:2])
def test_jbt_classes_exp_is_mm1t_per_class(f, s):
    """With exp service a class-k queue is M/M/1/T at ρ_k = λ'/(F s_k): π_k(j) ∝ ρ_k^j."""
    f, s = np.array(f), np.array(s)
    lam, T = 0.9, 3
    r = fluid_fixed_point("jbt", T, lam, _spec(f, s))
    rho = lam * float(f @ s) / (r.below * s)
    for k in range(f.size):
        p = rho[k] ** np.arange(T + 1)
        p /= p.sum()
        u = p[::-1].cumsum()[::-1][1:]
        assert np.abs(r.u[k] - u).max() <= 1e-12


@pytest.mark.parametrize(
    "policy, d, classes, service",
    [
        ("jbt", 2, "0.5:2,0.5:1", "exp"),
        ("jbt", 3, None, "erlang:2"),
        ("jiq", 1, "0.5:2,0.5:1", "hyperexp:3"),
        ("jsq", 1, "0.5:2,0.5:1", "erlang:2"),
    ],
)
def test_large_n_event_engine_agrees(policy, d, classes, service):
    """The event engine at n = 2000 (4 replications, fixed seed): the share of busy servers and
    of queues of length >= 2 per class within 4 standard errors plus 1/√n (the finite-n allowance)."""
    from supermarket.simulation.general import simulate_general

    n, lam = 2000, 0.8
    r = fluid_fixed_point(policy, d, lam, classes, service)
    sim = simulate_general(n, d, lam, policy=policy, service=service, server_classes=classes, time=60.0,
                           replications=4, seed=11, workers=1)  # fmt: skip
    allowance = 1.0 / math.sqrt(n)
    rows = sim.classes if classes is not None else [sim]
    for k, c in enumerate(rows):
        m = min(2, c.u_mean.size)
        fluid = np.zeros(2)
        fluid[: min(2, r.u.shape[1])] = r.u[k, :2]
        for ell in range(m):
            assert abs(c.u_mean[ell] - fluid[ell]) <= 4 * c.u_stderr[ell] + allowance, (k, ell, c.u_mean, fluid)


def test_design_quantile_of_jsq_with_a_phase_type_law_is_the_service_quantile():
    """JSQ with erlang:2: nobody waits, the sojourn is one Erlang(2, rate 2) service, whose tail is
    e^{−2t}(1 + 2t); with classes a mixture of the services at the class speeds with the weights
    f_k(1 − b_k) of the closed form."""
    r = design_rule_latency("jsq", 0.99, 4.0, load=0.8, service="erlang:2")
    t = r.at_load
    assert abs(math.exp(-2 * t) * (1 + 2 * t) - 0.01) <= 1e-9
    f, s = np.array([0.5, 0.5]), np.array([2.0, 1.0])
    lam1 = 0.8 * 1.5
    b = lam1 / (lam1 + s * _idle_share(lam1, f, s))
    w = f * (1 - b) / np.sum(f * (1 - b))
    r = design_rule_latency("jsq", 0.99, 4.0, load=0.8, service="erlang:2", server_classes="0.5:2,0.5:1")
    t = r.at_load
    tail = sum(wk * math.exp(-2 * sk * t) * (1 + 2 * sk * t) for wk, sk in zip(w, s))
    assert abs(tail - 0.01) <= 1e-9


def test_method_table_says_fluid_and_refuses_the_refined_mean_field():
    for kw in ({}, {"service": "erlang:2"}, {"server_classes": "0.5:2,0.5:1"},
               {"service": "hyperexp:2", "server_classes": "0.5:2,0.5:1"}):  # fmt: skip
        for rule in ("jsq", "jiq", "jbt"):
            system = System(None, 2, 0.7, rule=rule, **kw)
            assert methods.mean_field(system) == "fluid"
            with pytest.raises(ValueError, match=f"do not exist for {rule}: its mean-field drift is discontinuous"):
                methods.refined_mean_field(system, "--n")
    with pytest.raises(ValueError, match="where u_T reaches 1"):
        methods.smooth_mean_field("jbt", "n")


def test_cli_jbt_one_class_is_the_closed_form_at_T_2():
    """T = 2: u_2 = x = ((1+λ) − √((1+λ)² − 4λ²))/2, u_1 = λ; the mean sojourn is Little's Σu/λ."""
    lam = 0.8
    out = CliRunner().invoke(main, ["meanfield", "--policy", "jbt", "--d", "2", "--load", "0.8", "--json"])
    assert out.exit_code == 0, out.output
    rep = json.loads(out.output)
    x = ((1 + lam) - math.sqrt((1 + lam) ** 2 - 4 * lam**2)) / 2
    assert abs(rep["fixed_point"][0] - lam) <= 1e-15 and abs(rep["fixed_point"][1] - x) <= 1e-12
    assert abs(rep["sojourn"]["mean"] - (lam + x) / lam) <= 1e-12
    assert rep["params"]["d"] == 2 and rep["levels"] == 2
    out = CliRunner().invoke(main, ["meanfield", "--policy", "jbt", "--d", "2", "--load", "0.8", "--time", "3"])
    assert out.exit_code == 2 and "Traceback" not in out.output and "mean-field ODE" in out.output


def test_cli_and_sweep_give_the_same_fluid_point_with_classes():
    from supermarket.sweep.measurements import measure_meanfield

    args = ["meanfield", "--policy", "jbt", "--d", "3", "--load", "0.7", "--server-classes", "0.5:2,0.5:1",
            "--service", "erlang:2", "--json"]  # fmt: skip
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    cli = json.loads(out.output)
    row = measure_meanfield(
        {"d": 3, "load": 0.7, "policy": "jbt", "server_classes": "0.5:2,0.5:1", "service": "erlang:2"}, None
    )
    assert cli["u_mean"] == list(row["u_mean"]) and cli["refined"] is None
    assert cli["flow_error"] <= 1e-12
    r = measure_meanfield({"d": 4, "load": 0.7, "policy": "jbt"}, None)
    assert np.abs(np.asarray(r["fixed_point"]) - RULES["jbt"].fixed_point(0.7, 4, 4)).max() == 0.0


def test_design_jbt_with_classes_says_when_no_solved_d_meets_the_target():
    """jbt(1) is jiq: p99 ≈ 3.9 here (one service, mostly at speed 1), and a larger T only adds
    waiting; the least-d search stops where the fluid point is solved (T <= 2000), saying so."""
    with pytest.raises(ValueError, match="no d <= 2000 meets the target under jbt"):
        design_rule_latency("jbt", 0.99, 3.0, load=0.95, server_classes="0.5:2,0.5:1")
