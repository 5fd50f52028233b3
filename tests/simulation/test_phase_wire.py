"""simulate / meanfield / exact with phase-type service (docs/model.md §13) against independent facts.

- random routing with Erlang or H2 service is ``n`` independent M/PH/1 queues:
  Pollaczek–Khinchine's mean queue length ``ρ + ρ²(1+SCV)/(2(1−ρ))`` [classical], through
  ``simulate`` (the count engine) and through ``meanfield`` (the phase fixed point with d = 1);
- tiny ``n``: ``simulate`` against the exact law of ``exact --service`` (solve_phase, built
  from the rules' definitions), for jsq-d, jsq and jiq;
- the count engine against the per-queue event engine on the same law (n = 100): means of
  the queue length agree, and Little's sojourn ``L/λ`` against the event engine's measured one;
- the phase mean field against simulate at large ``n``.

Tolerances: ``Z`` standard errors of the check (the run's blocking error, joint with the
other engine's where there is one); seeds fixed.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

import supermarket as sm
from supermarket.cli import main
from supermarket.meanfield.phase import phase_fixed_point
from supermarket.simulation.general import GeneralResult
from supermarket.simulation.phase_run import PhaseSimulationResult, simulate_phase_service
from supermarket.stationary.phase import solve_phase
from supermarket.system.service import parse_service

Z = 4.0


def pk_mean_queue(rho: float, scv: float) -> float:
    """Pollaczek–Khinchine [classical]: the mean number in an M/G/1 queue."""
    return rho + rho**2 * (1 + scv) / (2 * (1 - rho))


def close(est, value, z=Z, extra_se=0.0):
    assert est.reliable, est.note
    se = math.hypot(est.stderr, extra_se)
    assert abs(est.mean - value) <= z * se, (est.mean, value, se, (est.mean - value) / se)


def cli(*args):
    r = CliRunner().invoke(main, list(args))
    return r


# ------------------------------------------------------------------ dispatch
def test_simulate_dispatch_and_result():
    r = sm.simulate(20, 2, 0.8, service="erlang:2", steps=200_000, seed=1)
    assert isinstance(r, PhaseSimulationResult) and r.engine == "phase" and r.policy == "jsq-d"
    # steps -> time by the exact mean event rate n(λ + Σ_φ μ_φ λ(α(−T)^{-1})_φ): 20·(0.8 + 2·0.8) for Erlang-2
    assert r.time == pytest.approx(200_000 / (20 * (0.8 + 2 * 0.8)))
    assert abs(r.events / 200_000 - 1) < 0.01
    d = json.loads(r.to_json())
    assert list(d)[:3] == ["engine", "time_mode", "system"] and d["system"]["service"]["spec"] == "erlang:2"
    assert d["sojourn"]["source"] == "little" and d["sojourn"]["quantile_source"] == "joined"
    assert d["sojourn"]["mean"]["mean"] == pytest.approx(d["mean_queue_length"]["mean"] / 0.8)
    assert d["waiting"]["mean"]["mean"] == pytest.approx(d["mean_queue_length"]["mean"] / 0.8 - 1)
    assert "Little's law" in r.summary() and "engine=phase" in r.summary()
    # jiq starts at its fluid fixed point (docs/model.md §2.1): u_1 = λ, no queue above 1
    fp = sm.simulate(2000, 2, 0.8, service="erlang:2", policy="jiq", start="fixed-point", time=1e-4, burn_in=0.0,
                     batches=32, seed=1, control_variates=False)  # fmt: skip
    tol = (fp.events + 1) / 2000  # each event moves one count by one; one more for the rounding
    assert abs(fp.u_mean[0] - 0.8) <= tol and float(np.sum(fp.u_mean[1:])) <= tol
    ev = sm.simulate(20, 2, 0.8, service="erlang:2", engine="events", time=50.0, seed=1, batches=64)
    assert isinstance(ev, GeneralResult)
    assert isinstance(sm.simulate(20, 2, 0.8, service="lognormal:2", time=50.0, seed=1, batches=64), GeneralResult)
    for kw, words in (
        ({"engine": "queues"}, "engine: service erlang:2 runs on"),
        ({"precision": 0.01, "target": "p99"}, "not the response times"),
        ({"time": 10.0, "steps": 1000}, "not both"),
    ):
        with pytest.raises(ValueError, match=words):
            sm.simulate(20, 2, 0.8, service="erlang:2", **kw)
    with pytest.raises(ValueError, match="no phase-type form"):
        simulate_phase_service(20, 2, 0.8, "pareto:3")


def test_same_seed_same_numbers_and_workers_do_not_matter():
    a = sm.simulate(30, 2, 0.7, service="hyperexp:3", steps=100_000, seed=4, replications=2, workers=1)
    b = sm.simulate(30, 2, 0.7, service="hyperexp:3", steps=100_000, seed=4, replications=2, workers=2)
    assert np.array_equal(a.u_mean, b.u_mean) and a.events == b.events


# ------------------------------------------------------------------ M/PH/1: Pollaczek–Khinchine
@pytest.mark.parametrize("service", ["erlang:4", "hyperexp:4"])
def test_random_routing_is_m_ph_1_through_simulate(service):
    law = parse_service(service)
    rho = 0.7
    r = sm.simulate(100, 2, rho, service=service, policy="random", time=4000.0, seed=7)
    close(r.mean_queue_length, pk_mean_queue(rho, law.scv))
    close(r.mean_queue_length_plain, pk_mean_queue(rho, law.scv))
    # E[u_1] = ρ (I2); the plain estimate (the control variate could absorb an error of u_1)
    assert abs(r.u_plain[0] - rho) <= Z * r.u_plain_stderr[0]
    assert np.all(np.abs(r.busy_mean - r.busy_exact) <= 0.02)


@pytest.mark.parametrize("service", ["erlang:4", "hyperexp:4"])
def test_random_routing_is_m_ph_1_through_meanfield(service):
    law = parse_service(service)
    r = cli("meanfield", "--d", "2", "--load", "0.6", "--policy", "random", "--service", service, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["mean_queue_length"] == pytest.approx(pk_mean_queue(0.6, law.scv), rel=1e-9)
    assert d["busy_fraction"] == pytest.approx(0.6, abs=1e-12) and d["policy"] == "random"
    assert sum(d["busy_by_phase"]) == pytest.approx(0.6, abs=1e-12)


def test_exact_random_is_m_ph_1_and_n1_every_rule():
    law = parse_service("erlang:2")
    # random routing at n = 2: each queue an M/PH/1 at ρ (the exact solver's own join law)
    r = solve_phase(2, 2, 0.6, law.alpha, law.T, cap=40, policy="random")
    assert r.truncation < 1e-9 and r.mean_queue_length == pytest.approx(pk_mean_queue(0.6, 0.5), abs=1e-7)
    h2 = parse_service("hyperexp:3")
    for policy in ("jsq", "jiq", "jsq-d"):  # n = 1: every rule is the M/PH/1 queue
        r = solve_phase(1, 1, 0.6, h2.alpha, h2.T, cap=120, policy=policy)
        assert r.mean_queue_length == pytest.approx(pk_mean_queue(0.6, 3.0), abs=1e-9)


# ------------------------------------------------------------------ tiny n against the exact law
@pytest.mark.parametrize(
    "policy,service,d", [("jsq-d", "hyperexp:3", 2), ("jsq", "erlang:2", 1), ("jiq", "hyperexp:3", 1)]
)
def test_tiny_n_against_exact(policy, service, d):
    law = parse_service(service)
    lam = 0.6
    ex = cli("exact", "--n", "2", "--d", str(d), "--load", str(lam), "--policy", policy, "--service", service,
             "--cap", "64", "--json")  # fmt: skip
    assert ex.exit_code == 0, ex.output
    exact = json.loads(ex.stdout)
    assert exact["truncation"] < 1e-8
    r = sm.simulate(2, d, lam, service=law, policy=policy, time=100_000.0, seed=3)
    close(r.mean_queue_length, exact["mean_queue_length"])
    for i in range(3):
        if r.u_reliable[i]:
            assert abs(r.u_mean[i] - exact["u"][i]) <= Z * r.u_stderr[i], (i, r.u_mean[i], exact["u"][i])
    assert sum(r.u_reliable[:2]) == 2


def test_jiq_and_jsq_differ_from_random_where_they_should():
    """At n = 2 the exact laws of the three rules differ (so the tiny-n checks above can tell a
    rule from another); jsq keeps the fewest customers."""
    law = parse_service("erlang:2")
    L = {
        p: solve_phase(2, 1, 0.7, law.alpha, law.T, cap=48, policy=p).mean_queue_length
        for p in ("random", "jiq", "jsq")
    }
    assert L["jsq"] < L["jiq"] - 0.01 and L["jiq"] < L["random"] - 0.01
    assert L["random"] == pytest.approx(pk_mean_queue(0.7, 0.5), abs=1e-7)


# ------------------------------------------------------------------ the two engines
@pytest.mark.parametrize("service", ["hyperexp:4", "erlang:3"])
def test_count_engine_against_event_engine(service):
    lam = 0.85
    ph = sm.simulate(100, 2, lam, service=service, time=3000.0, seed=11)
    ev = sm.simulate(100, 2, lam, service=service, engine="events", time=1500.0, seed=12, replications=4, workers=1)
    assert ev.mean_queue_length.reliable
    close(ph.mean_queue_length, ev.mean_queue_length.mean, extra_se=ev.mean_queue_length.stderr)
    # Little's law on the count engine against the sojourn the event engine measures per customer
    close(ph.sojourn_little, ev.sojourn.mean, extra_se=ev.sojourn.stderr)


# ------------------------------------------------------------------ mean field at large n
@pytest.mark.parametrize("service", ["hyperexp:4", "erlang:4"])
def test_meanfield_against_simulate_large_n(service):
    law = parse_service(service)
    lam = 0.8
    fp = phase_fixed_point(2, lam, law.alpha, law.T)
    r = sm.simulate(4000, 2, lam, service=service, time=1500.0, burn_in=50.0, start="fixed-point", seed=5)
    # the finite-n bias is O(1/n) (about 1e-4 here), well below the error of the check
    close(r.mean_queue_length, fp.mean_queue_length)
    for i in range(4):
        assert abs(r.u_mean[i] - fp.u[i]) <= Z * r.u_stderr[i], (i, r.u_mean[i], fp.u[i], r.u_stderr[i])


# ------------------------------------------------------------------ CLI
def test_cli_simulate_meanfield_exact_json_and_refusals():
    args = ["simulate", "--n", "20", "--d", "2", "--load", "0.8", "--steps", "1e5", "--batches", "64"]
    r = cli(*args, "--service", "hyperexp:4", "--policy", "jiq", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert (d["system"]["service"]["spec"], d["engine"], d["system"]["policy"]) == ("hyperexp:4", "phase", "jiq")
    r = cli(*args, "--service", "erlang:2")
    assert r.exit_code == 0 and "engine=phase" in r.stdout and "Little's law" in r.stdout
    r = cli("simulate", "--n", "20", "--d", "2", "--load", "0.8", "--time", "50", "--batches", "64",
            "--service", "erlang:2", "--engine", "events", "--json")  # fmt: skip
    assert (
        r.exit_code == 0 and json.loads(r.stdout)["system"]["service"]["spec"] == "erlang:2" and "classes" in r.stdout
    )
    r = cli("exact", "--n", "2", "--load", "0.5", "--service", "erlang:2", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["engine"] == "exact-phase"
    for bad, words in (
        ([*args, "--service", "erlang:2", "--engine", "queues"], "not 'queues'"),
        ([*args, "--service", "erlang:2", "--cdf", "1"], "--cdf"),
        (["meanfield", "--service", "erlang:2", "--policy", "jsq", "--n", "100"], "discontinuous"),
        (["meanfield", "--service", "lognormal:2"], "no phase-type form"),
        (["meanfield", "--service", "erlang:2", "--n", "100", "--no-replace"], "with replacement only"),
        (["exact", "--service", "pareto:3"], "no phase-type form"),
        (["exact", "--service", "erlang:2", "--plot", "x.png"], "--plot"),
        (["exact", "--service", "gamma:2"], "service must be one of"),
    ):
        r = cli(*bad)
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("supermarket: error:"), (bad, r.stderr)
        assert words in lines[0], (bad, lines)
