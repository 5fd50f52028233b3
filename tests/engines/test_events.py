"""The per-queue event engine (engines/events.py, supermarket.simulation.general) against independent facts.

- random routing is n independent M/G/1 queues: the Pollaczek–Khinchine mean queue length
  ``ρ + ρ²(1+SCV)/(2(1−ρ))`` and mean sojourn (Little) for deterministic, Erlang, H2 and
  lognormal service; ``u_1 = ρ`` (flow balance);
- the M/D/1 queue-length law ``P(L=0) = 1−ρ``, ``P(L=1) = (1−ρ)(e^ρ − 1)`` and the M/M/1
  law ``P(L >= ℓ) = ρ^ℓ`` with its FIFO sojourn law ``exp(1−ρ)`` (quantiles: catches a
  non-FIFO order, which keeps every mean);
- ``n = 1`` is M/G/1 for every rule;
- random routing with classes is one M/M/1 per class at utilisation ``λ s̄/s_k``;
- exponential service with jsq-d against the profile engine (supermarket.simulate);
- sampling without replacement at ``n = d = 2`` is ``jsq``.

Every tolerance is ``Z`` standard errors of the check itself (the run's blocking error,
joint with the other engine's where there is one), with fixed seeds.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from supermarket.simulation.general import simulate_general
from supermarket.simulation.general.run import ONE_REPLICATION_NOTE

Z = 4.0  # |z| allowed: ~6e-5 two-sided per check under normality; the checks of a file are ~40


def pk_mean_queue(rho, scv):
    """Pollaczek–Khinchine [classical]: the mean number in an M/G/1 queue."""
    return rho + rho**2 * (1 + scv) / (2 * (1 - rho))


def close(est, value, z=Z):
    # one replication: the blocking error is kept but not trusted (it runs 20-35 % small,
    # benchmarks/calibration/events_calibration.py), so 4 of its standard errors are about 3 true ones
    assert est.reliable or est.note == ONE_REPLICATION_NOTE, est.note
    assert abs(est.mean - value) <= z * est.stderr, (est.mean, value, est.stderr, (est.mean - value) / est.stderr)


@pytest.mark.parametrize(
    "service,scv", [("deterministic", 0.0), ("erlang:4", 0.25), ("hyperexp:4", 4.0), ("lognormal:2", 2.0)]
)
def test_random_routing_is_independent_mg1(service, scv):
    lam = 0.7
    r = simulate_general(50, 1, lam, policy="random", service=service, time=20_000.0, seed=11)
    L = pk_mean_queue(lam, scv)
    close(r.mean_queue_length, L)
    close(r.sojourn, L / lam)  # Little
    close(r.waiting, L / lam - 1.0)
    close(type(r.mean_queue_length)(r.u_mean[0], r.u_stderr[0], 1e9, 0, 0, True, "", 0, 0), lam)  # u_1 = ρ


def test_md1_queue_length_law():
    rho = 0.8
    r = simulate_general(50, 1, rho, policy="random", service="deterministic", time=10_000.0, seed=3)
    p0, p1 = 1 - rho, (1 - rho) * (math.exp(rho) - 1)  # M/D/1 [classical]
    for ell, exact in ((1, rho), (2, 1 - p0 - p1)):
        assert abs(r.u_mean[ell - 1] - exact) <= Z * r.u_stderr[ell - 1], (ell, r.u_mean[ell - 1], exact)


def test_mm1_queue_length_and_fifo_sojourn_law():
    rho = 0.7
    r = simulate_general(
        50, 1, rho, policy="random", service="exp", time=10_000.0, seed=5, quantiles=(0.5, 0.9), control_variates=False
    )
    for ell in range(1, 6):
        assert abs(r.u_mean[ell - 1] - rho**ell) <= Z * r.u_stderr[ell - 1], (ell, r.u_mean[ell - 1], rho**ell)
    # FIFO M/M/1: the sojourn is exponential(1 − ρ) [classical]; LIFO or random order would
    # keep the mean but not this law
    for q, e in r.sojourn_quantiles.items():
        close(e, -math.log(1 - q) / (1 - rho))
    # the wait has an atom 1 − ρ at 0 and P(W > t) = ρ e^{−(1−ρ)t}: the 0.9-quantile is log(10ρ)/(1−ρ)
    close(r.waiting_quantiles[0.9], math.log(10 * rho) / (1 - rho))
    assert r.waiting_quantiles[0.5].mean == pytest.approx(math.log(2 * rho) / (1 - rho), rel=0.05)


@pytest.mark.parametrize(
    "policy,d,replace",
    [("jsq-d", 2, True), ("jsq", 1, True), ("jiq", 1, True), ("random", 1, True), ("jsq-d", 1, False)],
)
def test_one_server_is_mg1_for_every_rule(policy, d, replace):
    lam, scv = 0.6, 2.0
    r = simulate_general(1, d, lam, policy=policy, replace=replace, service="lognormal:2", time=100_000.0, seed=2)
    close(r.mean_queue_length, pk_mean_queue(lam, scv))
    close(r.sojourn, pk_mean_queue(lam, scv) / lam)


def test_random_routing_with_classes_is_mm1_per_class():
    lam = 0.5
    r = simulate_general(
        40, 1, lam, policy="random", service="exp", server_classes="0.5:2,0.5:1", time=10_000.0, seed=9
    )
    sbar = 1.5
    assert r.arrival_rate == pytest.approx(40 * lam * sbar)
    for c in r.classes:
        rho = lam * sbar / c.speed  # each server sees rate λ s̄ and serves at rate s_k
        assert abs(c.u_mean[0] - rho) <= Z * c.u_stderr[0], (c.speed, c.u_mean[0], rho)
        close(c.mean_queue_length, rho / (1 - rho))
        close(c.sojourn, 1 / (c.speed - lam * sbar))
    assert [c.servers for c in r.classes] == [20, 20]


def test_exp_jsq_d_against_the_profile_engine():
    from supermarket import simulate

    n, d, lam = 100, 2, 0.9
    ev = simulate_general(n, d, lam, service="exp", time=4_000.0, seed=21)
    pr = simulate(n, d, lam, time=4_000.0, time_mode="continuous", seed=22, control_variates=False)
    for ell in range(1, 5):
        se = math.hypot(ev.u_stderr[ell - 1], pr.u_stderr[ell - 1])
        assert abs(ev.u_mean[ell - 1] - pr.u_mean[ell - 1]) <= Z * se, (ell, ev.u_mean[ell - 1], pr.u_mean[ell - 1])
    se = math.hypot(ev.mean_queue_length.stderr, pr.mean_queue_length_stderr)
    assert abs(ev.mean_queue_length.mean - pr.mean_queue_length) <= Z * se


def test_without_replacement_at_n_equal_d_is_jsq():
    a = simulate_general(2, 2, 0.8, replace=False, service="erlang:2", time=200_000.0, seed=4)
    b = simulate_general(2, 1, 0.8, policy="jsq", service="erlang:2", time=200_000.0, seed=5)
    se = math.hypot(a.mean_queue_length.stderr, b.mean_queue_length.stderr)
    assert abs(a.mean_queue_length.mean - b.mean_queue_length.mean) <= Z * se
    # and with replacement it is not: at d = 2 a tie of samples leaves one queue unseen
    c = simulate_general(2, 2, 0.8, replace=True, service="erlang:2", time=200_000.0, seed=6)
    se = math.hypot(a.mean_queue_length.stderr, c.mean_queue_length.stderr)
    assert c.mean_queue_length.mean - a.mean_queue_length.mean > Z * se


def test_same_seed_same_numbers_and_chunking_does_not_matter():
    a = simulate_general(30, 2, 0.9, service="pareto:2.5", time=300.0, seed=8, batches=64)
    b = simulate_general(30, 2, 0.9, service="pareto:2.5", time=300.0, seed=8, batches=64)
    assert np.array_equal(a.u_mean, b.u_mean) and a.events == b.events
    # the plain time averages do not depend on the batches (the control's β is fitted on them)
    kw = dict(service="pareto:2.5", time=300.0, seed=8, control_variates=False)
    a = simulate_general(30, 2, 0.9, batches=64, **kw)
    c = simulate_general(30, 2, 0.9, batches=100, **kw)
    assert c.events == a.events  # the same path, cut into other batches
    assert c.mean_queue_length.mean == pytest.approx(a.mean_queue_length.mean, rel=1e-9)


def test_result_to_dict_is_json():
    import json

    r = simulate_general(6, 2, 0.5, service="hyperexp:3", server_classes="0.5:2,0.5:1", time=200.0, seed=1, batches=64)
    d = json.loads(json.dumps(r.to_dict(), allow_nan=False))
    assert d["system"]["service"]["spec"] == "hyperexp:3" and len(d["classes"]) == 2
    assert set(d["classes"][0]) >= {"fraction", "speed", "u_mean", "mean_queue_length", "sojourn", "waiting"}
    assert "capacity-balance control variate" in d["error_bars"] and d["control_variates"]
    assert set(d["variance_reduction"]) == {"u_mean", "mean_queue_length"}
    p = simulate_general(6, 2, 0.5, service="exp", time=100.0, seed=1, batches=64, control_variates=False)
    assert "no control variates" in p.to_dict()["error_bars"] and p.to_dict()["variance_reduction"] == {}


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(policy="jsq-2"), "policy must be one of"),
        (dict(service="gamma:2"), "service must be one of"),
        (dict(server_classes="0.5:1,0.5:2", n=3), "whole number"),
        (dict(lam=0.0), "lam"),  # λ >= 1 runs a finite horizon (tests/simulation/test_events_every_system.py)
        (dict(lam=1e9), "lam"),
        (dict(d=5, replace=False), "d"),
        (dict(time=-1.0), "time"),
        (dict(batches=1), "batches"),
    ],
)
def test_bad_input(kw, match):
    args = dict(n=4, d=2, lam=0.5, time=10.0)
    args.update(kw)
    n, d, lam = args.pop("n"), args.pop("d"), args.pop("lam")
    with pytest.raises(ValueError, match=match):
        simulate_general(n, d, lam, **args)


def brute_force_mean_queue(n, lam, policy, M=40):
    """E[queue length per server] of the CTMC of n exponential(1) FIFO servers under a rule,
    by brute force over the per-queue states {0..M}^n (written here from the rule's definition,
    independently of the engines); M large enough that the truncated mass is negligible."""
    import itertools

    from scipy.sparse import coo_matrix
    from scipy.sparse.linalg import spsolve

    states = list(itertools.product(range(M + 1), repeat=n))
    index = {s: i for i, s in enumerate(states)}
    N = len(states)
    rows, cols, vals = [], [], []
    for s, i in index.items():
        m = min(s)
        idle = [j for j in range(n) if s[j] == 0]
        for j in range(n):
            if policy == "jsq":
                p = (s[j] == m) / sum(x == m for x in s)
            elif policy == "jiq":
                p = (s[j] == 0) / len(idle) if idle else 1 / n
            else:  # random
                p = 1 / n
            for step, rate in ((1, n * lam * p), (-1, 1.0 if s[j] > 0 else 0.0)):
                t = list(s)
                t[j] += step
                if rate > 0 and 0 <= t[j] <= M:
                    rows += [i, i]
                    cols += [index[tuple(t)], i]
                    vals += [rate, -rate]
    Q = coo_matrix((vals, (rows, cols)), shape=(N, N)).tocsr()
    A = Q.T.tolil()
    A[0, :] = 1.0  # replace one balance equation by the normalisation
    b = np.zeros(N)
    b[0] = 1.0
    pi = spsolve(A.tocsc(), b)
    return float(sum(p * sum(s) for p, s in zip(pi, states)) / n)


@pytest.mark.parametrize("policy", ["jsq", "jiq"])
def test_jsq_and_jiq_at_two_servers_against_the_brute_force_chain(policy):
    lam = 0.7
    exact = brute_force_mean_queue(2, lam, policy)
    r = simulate_general(2, 1, lam, policy=policy, service="exp", time=100_000.0, seed=31)
    close(r.mean_queue_length, exact)
    # the two rules differ by more than the error bars here (JIQ ignores lengths once all are busy)
    other = brute_force_mean_queue(2, lam, "jiq" if policy == "jsq" else "jsq")
    assert abs(r.mean_queue_length.mean - other) > Z * r.mean_queue_length.stderr


@pytest.mark.parametrize("replace", [False, True])
def test_ties_are_broken_uniformly_between_classes(replace):
    # two classes of equal speed are one class: by symmetry they carry the same load.  Server
    # indices run class by class, and Floyd's sampling without replacement does not order its
    # sample uniformly, so "the first shortest" instead of a uniform tie-break would load class 0 more
    r = simulate_general(
        2,
        2,
        0.7,
        replace=replace,
        service="erlang:2",
        server_classes="0.5:1,0.5:1",
        time=50_000.0,
        seed=41,
        control_variates=False,  # adjusted, the two classes' u_1 are anti-correlated: hypot would not hold
    )
    a, b = r.classes
    assert abs(a.u_mean[0] - b.u_mean[0]) <= Z * math.hypot(a.u_stderr[0], b.u_stderr[0]), (a.u_mean[0], b.u_mean[0])
    close(a.sojourn, b.sojourn.mean, z=Z * math.sqrt(2))


def test_threads_give_the_same_numbers():
    kw = dict(service="lognormal:3", time=200.0, seed=12, replications=3, batches=64)
    a = simulate_general(20, 2, 0.8, workers=1, **kw)
    b = simulate_general(20, 2, 0.8, workers=3, **kw)
    assert a.events == b.events and np.array_equal(a.u_mean, b.u_mean)
    assert (a.sojourn.mean, a.mean_queue_length.mean) == (b.sojourn.mean, b.mean_queue_length.mean)


def test_ctrl_c_keeps_the_batches_done():
    calls = []

    def progress(frac):
        calls.append(frac)
        if len(calls) == 40:  # as if Ctrl-C came during the 40th report
            raise KeyboardInterrupt

    r = simulate_general(10, 2, 0.8, service="hyperexp:2", time=1000.0, seed=3, batches=64, progress=progress)
    assert r.interrupted and "interrupted" in " ".join(r.notes)
    assert r.customers > 0 and np.isfinite(r.mean_queue_length.mean)
    assert all(0 <= f <= 1 for f in calls) and calls == sorted(calls)


def test_random_routing_says_when_a_slow_class_is_overloaded():
    r = simulate_general(10, 1, 0.8, policy="random", server_classes="0.5:2,0.5:1", time=20.0, seed=2, batches=8)
    assert any("class 0.5:1 get more work than they can serve" in m for m in r.notes)
    r = simulate_general(10, 2, 0.8, server_classes="0.5:2,0.5:1", time=20.0, seed=2, batches=8)
    assert not any("more work" in m for m in r.notes)  # JSQ(2) balances them


# ------------------------------------------------------------------ simulate and the CLI
def test_simulate_dispatches_to_the_event_engine():
    import supermarket as sm
    from supermarket.simulation.general import GeneralResult

    r = sm.simulate(20, 2, 0.8, service="lognormal:4", time=100.0, seed=1, batches=64)
    assert isinstance(r, GeneralResult) and r.service.spec == "lognormal:4"
    direct = simulate_general(20, 2, 0.8, service="lognormal:4", time=100.0, seed=1, batches=64)
    assert np.array_equal(r.u_mean, direct.u_mean)
    kw = dict(server_classes="0.5:2,0.5:1", policy="jiq", time=100.0, seed=1, batches=64)
    r = sm.simulate(20, 2, 0.8, engine="events", **kw)  # exponential classes: the event engine by choice
    assert isinstance(r, GeneralResult) and r.policy == "jiq" and len(r.classes) == 2
    assert not isinstance(sm.simulate(20, 2, 0.8, **kw), GeneralResult)  # by default the count engine (§15)
    assert not isinstance(sm.simulate(20, 2, 0.8, service="exp", steps=20_000, seed=1), GeneralResult)
    with pytest.raises(ValueError, match="start"):
        sm.simulate(20, 2, 0.8, service="lognormal:2", start="fixed-point")


def test_steps_on_the_event_engine_are_events():
    """``steps=N`` runs the event engine for the mean time of N events, ``N / (2nλs̄)`` (arrivals
    and as many departures in equilibrium), with a burn-in in events too: the events counted
    come within a few standard deviations of the steps asked (a Poisson-like count: s.d. about
    √N, here under 0.3 %)."""
    import supermarket as sm

    n, lam, steps, burn = 50, 0.8, 200_000, 20_000
    for kw, sbar in ((dict(service="lognormal:2"), 1.0), (dict(service="erlang:2", server_classes="0.5:2,0.5:1"), 1.5)):
        r = sm.simulate(n, 2, lam, steps=steps, burn_in=burn, seed=3, replications=2, **kw)
        assert r.time == pytest.approx(steps / (2 * n * lam * sbar)) and r.burn_in == pytest.approx(
            burn / (2 * n * lam * sbar)
        )
        assert abs(r.events - 2 * (steps + burn)) < 0.01 * 2 * (steps + burn), r.events
        assert r.notes[0].startswith(f"steps={steps:g}: the event engine ran for time")
    # the same run as time= with that time
    a = sm.simulate(n, 2, lam, service="lognormal:2", steps=steps, seed=3, replications=2)
    b = sm.simulate(n, 2, lam, service="lognormal:2", time=steps / (2 * n * lam), seed=3, replications=2)
    assert np.array_equal(a.u_mean, b.u_mean)


def test_cli_service_and_server_classes():
    import json

    from click.testing import CliRunner

    from supermarket.cli import main

    args = ["simulate", "--n", "20", "--d", "2", "--load", "0.8", "--time", "100", "--batches", "64"]
    r = CliRunner().invoke(main, [*args, "--service", "hyperexp:4", "--server-classes", "0.5:2,0.5:1", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["system"]["service"]["spec"] == "hyperexp:4" and [c["speed"] for c in data["classes"]] == [2.0, 1.0]
    r = CliRunner().invoke(main, [*args, "--service", "deterministic"])
    assert r.exit_code == 0 and "service=deterministic" in r.stdout and "capacity balance" in r.stdout
    r = CliRunner().invoke(main, [*args, "--service", "deterministic", "--no-control-variates"])
    assert r.exit_code == 0 and "no control variates" in r.stdout
    for bad, words in (
        (["--service", "gamma:2"], "service must be one of"),
        (["--server-classes", "0.5:2,0.4:1"], "sum to"),
        (["--service", "lognormal:2", "--steps", "1000", "--time", "5"], "give time or steps, not both"),
        (["--service", "erlang:2", "--cdf", "1"], "--cdf"),  # the count engine draws a CDF of 2 or more points
    ):
        r = CliRunner().invoke(main, [*args, *bad])
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("supermarket: error:"), (bad, r.stderr)
        assert words in lines[0], (bad, lines)


def test_error_bars_come_from_independent_replications():
    """One replication shows no ± (its batch-means error is distrusted); with R >= 2 the error
    is the replications' spread on R − 1 degrees of freedom, and covers the P-K mean."""
    one = simulate_general(50, 1, 0.7, policy="random", service="hyperexp:4", time=5_000.0, seed=5, replications=1)
    line = next(x for x in one.summary().splitlines() if x.startswith("mean queue length"))
    assert not one.mean_queue_length.reliable and "±" not in line
    r = simulate_general(
        50, 1, 0.7, policy="random", service="hyperexp:4", time=5_000.0, seed=5, replications=4, workers=1
    )
    e = r.mean_queue_length
    assert e.reliable and e.method.startswith("replications") and e.dof == pytest.approx(3.0)
    assert abs(e.mean - pk_mean_queue(0.7, 4.0)) <= 4.0 * e.stderr


def test_default_run_makes_the_replications_its_error_bars_need(monkeypatch):
    """Without ``replications`` the engine runs DEFAULT_REPLICATIONS of them, sharing the default
    budget of events (so the default costs what one run did), and shows a ±; given
    ``replications`` without ``time``, each run keeps the whole budget (as before)."""
    from supermarket.simulation.general import run as general_run

    monkeypatch.setattr(general_run, "DEFAULT_EVENTS", 200_000)
    rate = 50 * 0.7
    r = simulate_general(50, 2, 0.7, service="hyperexp:4", seed=5, workers=1)
    assert r.replications == general_run.DEFAULT_REPLICATIONS == 4
    assert r.time == pytest.approx(200_000 / (2.2 * rate) / 4)
    assert r.mean_queue_length.reliable and r.mean_queue_length.method.startswith("replications")
    two = simulate_general(50, 2, 0.7, service="hyperexp:4", seed=5, workers=1, replications=2)
    assert two.replications == 2 and two.time == pytest.approx(200_000 / (2.2 * rate))
    # simulate() routes here with the same default; the count engines keep one replication
    from supermarket import simulate

    s = simulate(50, 2, 0.7, service="lognormal:1", seed=5, workers=1)
    assert s.replications == 4
    assert simulate(50, 2, 0.7, service="erlang:2", steps=20_000, seed=5).replications == 1


def test_cli_default_shows_error_bars_from_four_replications(monkeypatch):
    from click.testing import CliRunner

    from supermarket.cli import main
    from supermarket.simulation.general import run as general_run

    monkeypatch.setattr(general_run, "DEFAULT_EVENTS", 200_000)
    r = CliRunner().invoke(main, ["simulate", "--n", "50", "--d", "2", "--load", "0.7", "--service", "lognormal:1"])
    assert r.exit_code == 0, r.output
    assert "4 replication(s)" in r.output
    assert next(x for x in r.output.splitlines() if x.startswith("mean queue length")).count("±") == 3


def test_capacity_control_variate_is_unbiased_and_pays():
    """The capacity balance Σ f_k s_k E[u_{k,1}] = λ s̄ (work conservation, every law) as a control
    variate (docs/model.md §14).  Random routing with two classes is per-class M/G/1 at
    utilisation λ s̄/s_k (Pollaczek–Khinchine): the adjusted means of the whole system and of
    each class agree with it within 4 of their standard errors (Student t on 3 degrees of
    freedom: 4 s.e. is its 97.2 % point), and the adjustment has a measured gain above 1 (its
    spread-based error, on 3 degrees of freedom, need not be smaller in one run).  A wrong known
    mean of the control (λ s̄ for λ) or a class weighting without s̄ biases the adjusted means by
    many standard errors (both fail here)."""
    kw = dict(policy="random", service="hyperexp:2", server_classes="0.5:2,0.5:1", time=3000.0, seed=21)
    r = simulate_general(40, 1, 0.6, replications=4, workers=1, **kw)
    p = simulate_general(40, 1, 0.6, replications=4, workers=1, control_variates=False, **kw)
    sbar = 1.5
    rho = [0.6 * sbar / 2.0, 0.6 * sbar / 1.0]
    for c, rk in zip(r.classes, rho):
        e = c.mean_queue_length
        assert e.reliable and e.method.endswith("+cv"), e
        assert abs(e.mean - pk_mean_queue(rk, 2.0)) <= 4.0 * e.stderr, (e, pk_mean_queue(rk, 2.0))
    whole = sum(pk_mean_queue(rk, 2.0) for rk in rho) / 2.0
    e = r.mean_queue_length
    assert abs(e.mean - whole) <= 4.0 * e.stderr, (e, whole)
    assert r.variance_reduction["mean_queue_length"] > 1.0 and r.control_variates
    assert p.variance_reduction is None and not p.control_variates
    assert abs(r.u_mean[0] - 0.6 * sbar * (0.5 / 2 + 0.5 / 1)) <= 4.0 * r.u_stderr[0]  # busy fraction Σ f_k ρ_k


@pytest.mark.slow
def test_capacity_control_variate_intervals_cover_mm1_levels():
    """60 seeds of n = 50 M/M/1 queues (random routing, exp), E[u_ℓ] = ρ^ℓ exactly: the adjusted
    intervals of levels 2-5 (240 of them, 95 %, Student t on 3 degrees of freedom) cover at a
    rate consistent with 95 % (Binomial, 3 standard deviations: 218 to 240; measured over 200
    seeds by benchmarks/calibration/events_cv_calibration.py: 0.94, 0.915, 0.95, 0.96)."""
    from scipy import stats

    rho, q = 0.7, stats.t.ppf(0.975, 3)
    covered = 0
    for s in range(60):
        r = simulate_general(50, 1, rho, policy="random", service="exp", time=2000.0, seed=100 + s, workers=1)
        z = (r.u_mean[1:5] - rho ** np.arange(2, 6)) / r.u_stderr[1:5]
        covered += int(np.sum(np.abs(z) <= q))
    m = 240
    assert covered >= 0.95 * m - 3 * math.sqrt(m * 0.95 * 0.05), covered
