"""The count engines of laws and classes (phase, classes, classes-phase) at load >= 1 and from the
mean field's fixed point (issue #28, item 5), each checked against an independent fact: the
growth of an overloaded system at the rate of its excess, the rounded fixed point of the mean field
(:mod:`supermarket.meanfield.classes`, :mod:`supermarket.meanfield.classes_phase`)."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from supermarket import simulate
from supermarket.cli import main
from supermarket.meanfield.classes import classes_fixed_point
from supermarket.meanfield.classes_phase import classes_phase_fixed_point
from supermarket.system import methods
from supermarket.system.service import parse_server_classes, parse_service
from supermarket.system.spec import System

SC = "0.5:2,0.5:1"  # s̄ = 1.5
ENGINES = {  # engine asked for -> (keywords, mean speed s̄, the engine that runs)
    "phase": ({"service": "erlang:2"}, 1.0, "phase"),
    "classes": ({"server_classes": SC}, 1.5, "classes"),
    "classes-phase": ({"server_classes": SC, "service": "hyperexp:4", "engine": "phase"}, 1.5, "classes"),
}


def _quiet(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return simulate(*args, **kw)


@pytest.mark.parametrize("name", list(ENGINES))
def test_load_above_one_grows_at_the_rate_of_the_excess(name):
    """At λ = 1.2 every server is soon busy (u_1 near 1): arrivals at rate nλs̄, departures at
    n s̄, so the customers per server grow at s̄(λ − 1).  From one seed, the run over [B, B + T1]
    and the one over [B, B + T2] share their path; the average over [B + T1, B + T2] less the one
    over [B, B + T1] is then s̄(λ − 1) T2/2 in expectation (the start's level cancels), checked
    within 4 s.e. of its mean over independent seeds."""
    kw, sbar, _ = ENGINES[name]
    lam, n, burn = 1.2, 100, 30.0
    diffs, expect = [], []
    for seed in range(12):
        a = _quiet(n, 2, "1.2", time=40.0, burn_in=burn, seed=seed, **kw)
        b = _quiet(n, 2, "1.2", time=80.0, burn_in=burn, seed=seed, **kw)
        assert a.burn_in == b.burn_in
        qa, qb = a.mean_queue_length.mean, b.mean_queue_length.mean
        later = (b.time * qb - a.time * qa) / (b.time - a.time)
        diffs.append(later - qa)
        expect.append(sbar * (lam - 1.0) * b.time / 2.0)
        assert 0.99 < b.u_mean[0] <= 1.0 + 1e-12  # (a sum of batch means: a few ulps)
    d, e = np.array(diffs), float(np.mean(expect))
    se = d.std(ddof=1) / math.sqrt(d.size)
    assert se > 0 and abs(d.mean() - e) <= 4 * se, (d.mean(), e, se)
    assert abs(d.mean() - e) < 0.1 * e  # and far from a stable run's 0 or a wrong speed's


@pytest.mark.parametrize("name", list(ENGINES))
def test_load_above_one_has_no_control_variate_or_self_check_and_says_so(name):
    kw, _, kind = ENGINES[name]
    with pytest.warns(RuntimeWarning, match="load λ = 1.2 >= 1: the chain has no equilibrium"):
        r = simulate(50, 2, "1.2", time=20.0, seed=1, **kw)
    assert r.notes[0] == methods.no_equilibrium("1.2")
    assert not r.control_variates and any("at load λ >= 1 there is none" in x for x in r.notes)
    if kind == "phase":
        assert np.all(np.isnan(r.busy_z)) and np.all(np.isnan(r.flow_z)) and math.isnan(r.busy_fraction_z)
        assert np.allclose(r.busy_exact.sum(), 1.0)  # all busy: α(−T)^{-1}, not λ α(−T)^{-1}
    else:
        assert not r.balance.reliable and "no check" in r.balance.note
    assert "load" in methods.ENGINES[methods.simulation_engine(System(50, 2, 1.2, **_system_kw(kw)), _eng(kw))].takes


def _system_kw(kw):
    return {k: v for k, v in kw.items() if k != "engine"}


def _eng(kw):
    return kw.get("engine", "profile")


def test_load_below_one_keeps_the_control_variates_and_self_checks():
    r = simulate(50, 2, 0.8, service="erlang:2", time=200.0, seed=1)
    assert r.control_variates and np.isfinite(r.busy_fraction_z) and abs(r.busy_exact.sum() - 0.8) < 1e-12
    c = simulate(50, 2, 0.8, server_classes=SC, time=200.0, seed=1)
    assert c.control_variates and c.balance.reliable and not any("λ >= 1" in x for x in c.notes)


@pytest.mark.parametrize(
    "extra",
    [
        ["--service", "erlang:2"],
        ["--server-classes", SC],
        ["--server-classes", SC, "--service", "erlang:2", "--engine", "phase"],
    ],
)
def test_the_cli_runs_load_above_one_on_the_count_engines_with_one_warning(extra):
    args = ["simulate", "--n", "20", "--d", "2", "--time", "10", "--load", "1.2", "--json", *extra]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert r.stderr.count("supermarket: warning: load λ = 1.2 >= 1: the chain has no equilibrium") == 1
    assert json.loads(r.stdout)["notes"][0] == methods.no_equilibrium("1.2")
    r = CliRunner().invoke(main, [*args, "--start", "fixed-point"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "--start: 'fixed-point' needs load λ < 1" in r.output


def _first_events(n, start, **kw):
    """A run of 64 events from ``start`` with no burn-in: its time averages are the start's counts
    to within 64/n_k (each event moves one count by one); plain averages (a control variate of
    equilibrium would move them)."""
    return simulate(n, 2, 0.9, time=1e-6, burn_in=0.0, batches=64, seed=3, start=start, control_variates=False, **kw)


def test_the_classes_start_is_the_rounded_fixed_point():
    n = 100_000
    sc = parse_server_classes(SC)
    counts = sc.counts(n)
    u = classes_fixed_point(2, 0.9, sc).u
    r = _first_events(n, "fixed-point", server_classes=SC)
    e = _first_events(n, "empty", server_classes=SC)
    assert r.events == 64
    for k, cls in enumerate(r.classes):
        m = min(cls.u_mean.size, u.shape[1])
        start = np.rint(u[k, :m] * counts[k]) / counts[k]
        assert np.all(np.abs(cls.u_mean[:m] - start) <= r.events / counts[k]), k
        assert cls.u_mean[0] > 0.5 and e.classes[k].u_mean[0] <= e.events / counts[k]


def test_the_classes_phase_start_is_the_rounded_fixed_point():
    n = 100_000
    sc, law = parse_server_classes(SC), parse_service("erlang:2")
    counts = sc.counts(n)
    x = classes_phase_fixed_point(2, 0.9, sc, law).x  # x[k, ℓ-1, φ]
    N = np.rint(x * counts[:, None, None])
    assert np.all(N.sum(axis=(1, 2)) <= counts)  # no class overfilled: the start is this rounding exactly
    at_least = np.cumsum(N.sum(axis=2)[:, ::-1], axis=1)[:, ::-1] / counts[:, None]
    r = _first_events(n, "fixed-point", server_classes=SC, service="erlang:2", engine="phase")
    for k, cls in enumerate(r.classes):
        m = min(cls.u_mean.size, at_least.shape[1])
        assert np.all(np.abs(cls.u_mean[:m] - at_least[k, :m]) <= r.events / counts[k]), k


@pytest.mark.parametrize(
    "kw", [{"server_classes": SC}, {"server_classes": SC, "service": "erlang:2", "engine": "phase"}]
)
def test_the_fixed_point_start_is_nearer_the_long_run_than_empty(kw):
    """Over a short first stretch with no burn-in, the mean queue length from the fixed point is
    near the long run's and the one from empty far below it (the transient the start skips)."""
    long = simulate(1000, 2, 0.9, time=400.0, seed=1, **kw).mean_queue_length.mean
    short = {s: simulate(1000, 2, 0.9, time=3.0, burn_in=0.0, seed=2, start=s, **kw) for s in ("empty", "fixed-point")}
    gap = {s: abs(r.mean_queue_length.mean - long) for s, r in short.items()}
    assert gap["fixed-point"] < 0.25 * gap["empty"], gap


@pytest.mark.parametrize("engine, kw", [("classes", {}), ("classes-phase", {"service": "erlang:2"})])
def test_the_fixed_point_start_of_a_rough_rule_is_its_fluid_point(engine, kw):
    """JIQ with classes starts at its fluid fixed point (docs/model.md §2.1): no queue above 1, the
    class-k busy share b_k = λ s̄/(λ s̄ + s_k I) with I the idle share (closed form, in the test)."""
    methods.check_options(System(10, 2, 0.5, rule="jiq", server_classes=SC, **kw), engine, {"start": "fixed-point"})
    n, lam, f, s = 100_000, 0.9, np.array([0.5, 0.5]), np.array([2.0, 1.0])  # _first_events runs λ = 0.9
    lam1 = lam * float(f @ s)
    lo, hi = 1e-12, 1.0  # 1 = Σ f s/(λ' + s I), decreasing in I: bisection
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if float(np.sum(f * s / (lam1 + s * mid))) > 1.0 else (lo, mid)
    b = lam1 / (lam1 + s * lo)
    r = _first_events(n, "fixed-point", policy="jiq", server_classes=SC, **kw, **({"engine": "phase"} if kw else {}))
    for k, cls in enumerate(r.classes):
        assert abs(cls.u_mean[0] - round(b[k] * f[k] * n) / (f[k] * n)) <= r.events / (f[k] * n), k
        assert np.all(cls.u_mean[1:] <= r.events / (f[k] * n)), k  # nobody waits at the start


@pytest.mark.parametrize(
    "kw", [{"server_classes": SC}, {"server_classes": SC, "service": "erlang:2", "engine": "phase"}]
)
def test_the_run_from_the_fixed_point_is_the_chain(kw):
    """From the fixed point with no burn-in, the long run's E[U_ℓ] and mean queue length agree
    with the run from empty (another seed, its burn-in) within 4 s.e.: the start is a state of the
    chain (its counts, totals and top level consistent), not only the first averages."""
    a = simulate(1000, 2, 0.9, time=2000.0, burn_in=0.0, seed=4, start="fixed-point", **kw)
    b = simulate(1000, 2, 0.9, time=2000.0, seed=5, **kw)
    m = 4
    se = np.hypot(a.u_stderr[:m], b.u_stderr[:m])
    assert np.all(np.isfinite(se)) and np.all(np.abs(a.u_mean[:m] - b.u_mean[:m]) <= 4 * se), (a.u_mean, b.u_mean)
    qa, qb = a.mean_queue_length, b.mean_queue_length
    assert abs(qa.mean - qb.mean) <= 4 * math.hypot(qa.stderr, qb.stderr), (qa, qb)


def test_the_start_states_are_consistent_chain_states():
    """The arrays the kernels start from (inspected): per-class counts at least ℓ from the rounded
    fixed point, the totals C, P_i of jsq-d as a function of C, and the top occupied level (a top
    set too low is healed by the chain within a few events, so no average would show it)."""
    from supermarket.engines import classes as eng
    from supermarket.engines.tables import p_all_at_least
    from supermarket.simulation import class_starts
    from supermarket.simulation.classes_phase import _start
    from supermarket.system.policies import policy_code

    n, sc = 10_000, parse_server_classes(SC)
    counts = sc.counts(n)
    c0 = class_starts.classes_start(counts, 2, 0.9, sc, "jsq-d")
    u = classes_fixed_point(2, 0.9, sc).u
    assert np.array_equal(c0[:, 1:], np.rint(u[:, : c0.shape[1] - 1] * counts[:, None]))
    assert np.all(np.rint(u[:, c0.shape[1] - 1 :] * counts[:, None]) == 0)
    a, top = eng.start_state(c0, np.array([n, 2, 1, policy_code("jsq-d", "classes")], np.int64))
    assert top == c0.shape[1] - 1 and c0[:, top].sum() > 0
    assert np.array_equal(a["C"], a["c"].sum(axis=0)) and np.array_equal(a["c"][:, : c0.shape[1]], c0)
    assert np.allclose(a["pc"][1 : top + 1], [p_all_at_least(int(x), n, 2, True) for x in a["C"][1 : top + 1]])
    N0 = class_starts.classes_phase_start(counts, 2, 0.9, sc, parse_service("erlang:2"), "jsq-d")
    N, c, C, top = _start(counts, 2, N0)
    assert np.array_equal(N[:, : N0.shape[1]], N0) and not N[:, N0.shape[1] :].any()
    assert top == N0.shape[1] - 1 and N0[:, top].sum() > 0 and np.array_equal(C, c.sum(axis=0))
    by_level = N0.sum(axis=2)
    for i in range(1, top + 1):
        assert np.array_equal(c[:, i], by_level[:, i:].sum(axis=1))
    assert np.array_equal(c[:, 0], counts) and np.all(c[:, top + 1 :] == 0)


def test_no_plus_minus_zero_where_every_batch_agrees():
    """A batch series with no spread (E[u_1] = 1 when every server stays busy at load 1.2; a
    level no queue reached) has no error bar: NaN, not ``± 0``."""
    import math

    import supermarket as sm

    r = sm.simulate(50, 2, "1.2", server_classes="0.5:2,0.5:1", time=50.0, seed=1)
    flat = [c for c in r.classes if c.u_mean[0] == 1.0]  # the slow class: busy throughout
    assert flat and all(math.isnan(c.u_stderr[0]) for c in flat)
    assert all(c.u_stderr[0] != 0.0 for c in r.classes)
    assert " 1 ± 0" not in r.summary()
    q = sm.simulate(100, 2, 0.8, server_classes="0.5:2,0.5:1", time=200.0, seed=1)
    top = q.classes[0]
    assert top.u_mean[-1] == 0.0 and math.isnan(top.u_stderr[-1])
