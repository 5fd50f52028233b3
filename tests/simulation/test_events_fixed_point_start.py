"""The event engine's ``start="fixed-point"`` (issue #28): each piece against an independent fact.

- the start's counts are the count engine's own start of the same system, exactly (the profile
  engine's plan, the phase engine's ``set_counts``, the classes engines' starts), and the
  kernel's arrays hold it consistently (lengths, counts per level, the sorted order, one waiting
  departure per customer);
- the customer in service in phase ``j`` leaves after a remaining work of law ``PH(e_j, T)`` over
  its server's speed, and the customers behind it after full works (Kolmogorov–Smirnov against
  the closed-form laws, many servers, a fixed seed);
- from the fixed point a short run shows no start transient: ``E[u_1] = λ`` (one class) and the
  capacity balance ``Σ f_k s_k E[u_{k,1}] = λ s̄`` (classes) hold from time 0, within the
  spread of independent replications (and the empty start, checked the same way, fails);
- a run from the fixed point reaches the count engine's means from its fixed point;
- where there is no fixed point the refusal is the one text of the method table, from the
  library, the command line and the sweep.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from supermarket import simulate
from supermarket import sweep as sw
from supermarket.cli import main
from supermarket.engines import events as ev
from supermarket.engines.rng import state_from_seed_sequence
from supermarket.simulation import phase as phase_mod
from supermarket.simulation.class_starts import classes_phase_start, classes_start
from supermarket.simulation.general import run as grun
from supermarket.simulation.general import simulate_general, starts
from supermarket.simulation.phase_run import simulate_phase_service
from supermarket.simulation.plan import _start_state
from supermarket.system.event_starts import fixed_point_refusal
from supermarket.system.service import parse_server_classes, parse_service
from supermarket.system.spec import System
from supermarket.system.states import start_counts

SC = "0.5:2,0.5:1"


def _initial(n, d, lam, policy="jsq-d", service="exp", classes=None, seed=0):
    """The start as simulate_general builds it: ``(x0, ph0)``, the kernel's arrays and counters."""
    law, sc = parse_service(service), parse_server_classes(classes)
    counts = sc.counts(n)
    init = grun._start("fixed-point", n, d, lam, policy, True, law, sc if classes else None, counts)
    rate = n * lam * sc.mean_speed
    s = state_from_seed_sequence(np.random.SeedSequence(seed))
    first = grun._first_arrival(s, rate)
    sorted_mode = policy in ("jsq", "jiq", "jbt")
    spd = np.asarray(sc.speeds, float)
    fl, it, a = starts.kernel_state(init, counts, spd, law, rate, 0.0, first, s, sorted_mode, 4096)
    return init, a, fl, it, counts, spd


def _by_length_phase(x, ph, m):
    """``N[ℓ, φ]`` (ℓ >= 1 rows; row 0 zero) of lengths ``x`` and in-service phases ``ph``."""
    N = np.zeros((int(x.max()) + 1, m), np.int64)
    busy = x > 0
    np.add.at(N, (x[busy], ph[busy]), 1)
    return N


def _trim(N):
    rows = np.nonzero(N.reshape(N.shape[0], -1).any(axis=1))[0]
    return N[: rows.max() + 1] if rows.size else N[:1]


def _kernel_consistent(init, a, it, sorted_mode):
    x0, _ = init
    assert np.array_equal(a["x"], x0)
    pend = ev.pending_departures(a, it)
    per = np.bincount(pend[:, 1].astype(np.int64), minlength=x0.size)
    assert np.array_equal(per, x0)  # one waiting departure per customer: none lost, none extra
    last = np.zeros(x0.size)
    np.maximum.at(last, pend[:, 1].astype(np.int64), pend[:, 0])
    assert np.array_equal(last, np.where(x0 > 0, a["lastdep"], 0.0))
    assert (pend[:, 0] > 0).all()
    assert np.array_equal(a["ctot"], a["c"].sum(axis=0))
    assert int(it[ev.I_TOP]) == int(x0.max())
    if sorted_mode:
        xs = x0[a["order"]]
        assert (np.diff(xs) >= 0).all() and np.array_equal(a["pos"][a["order"]], np.arange(x0.size))
        for ell in range(int(x0.max()) + 2):
            assert a["bstart"][ell] == np.count_nonzero(x0 < ell)


@pytest.mark.parametrize("policy", ["jsq-d", "random", "jsq", "jiq", "jbt"])
def test_one_class_exp_counts_are_the_profile_engines_start(policy):
    n, d, lam = 1000, 2, 0.9
    init, a, _, it, _, _ = _initial(n, d, lam, policy)
    c = a["c"][0, 1:]
    own = _start_state("fixed-point", n, d, lam, lam, True, policy)[2]  # the profile engine's plan
    assert np.array_equal(c[: own.size], own) and not c[own.size :].any()
    if policy == "jsq-d":
        assert np.array_equal(own, start_counts(n, d, lam, "fixed-point"))
    _kernel_consistent(init, a, it, policy in ("jsq", "jiq", "jbt"))


@pytest.mark.parametrize("service, policy", [("erlang:2", "jsq-d"), ("hyperexp:4", "random"), ("erlang:3", "jsq-d")])
def test_one_class_phase_counts_are_the_phase_engines_start(monkeypatch, service, policy):
    n, d, lam = 500, 2, 0.85
    seen = []
    real = phase_mod.PhaseChain.set_counts
    monkeypatch.setattr(phase_mod.PhaseChain, "set_counts", lambda self, N: (seen.append(np.array(N)), real(self, N)))
    simulate_phase_service(n, d, lam, service, policy=policy, time=1e-3, burn_in=0.0, batches=32, start="fixed-point")
    assert len(seen) == 1
    init, a, _, it, _, _ = _initial(n, d, lam, policy, service)
    mine = _by_length_phase(*init, seen[0].shape[1])
    assert np.array_equal(_trim(mine), _trim(seen[0]))
    _kernel_consistent(init, a, it, False)


@pytest.mark.parametrize("policy", ["jsq", "jiq"])
def test_jsq_jiq_phase_start_is_their_fluid_point(policy):
    """One customer per busy server, ``λ n (α(−T)^{-1})_φ`` of them in phase φ, rounded."""
    n, lam = 4000, 0.8
    law = parse_service("hyperexp:4")
    init, a, _, it, _, _ = _initial(n, 2, lam, policy, "hyperexp:4")
    want = np.rint(n * lam * np.linalg.solve(-law.T.T, law.alpha)).astype(np.int64)
    assert init[0].max() == 1 and np.array_equal(_by_length_phase(*init, 2)[1], want)
    _kernel_consistent(init, a, it, True)


def test_jbt_phase_start_is_its_fluid_point():
    """JBT(T = 2) with a phase-type law: the queues of length 1 and 2 by phase are ``n`` times the
    fluid point's shares (supermarket.meanfield.fluid), rounded as the phase engine rounds; none longer."""
    from supermarket.meanfield.fluid import fluid_shares

    n, lam = 4000, 0.8
    law = parse_service("hyperexp:4")
    init, a, _, it, _, _ = _initial(n, 2, lam, "jbt", "hyperexp:4")
    want = np.rint(n * fluid_shares("jbt", 2, lam, law.alpha, law.T)).astype(np.int64)
    while want.sum() > n:
        ti, tj = np.unravel_index(np.argmax(want), want.shape)
        want[ti, tj] -= 1
    got = _by_length_phase(*init, 2)
    assert init[0].max() == 2 and np.array_equal(got[1:3], want) and want[1].sum() > 0.1 * n
    _kernel_consistent(init, a, it, True)


@pytest.mark.parametrize("service", ["exp", "erlang:2"])
def test_classes_counts_are_the_classes_engines_start(service):
    n, d, lam = 600, 2, 0.8
    sc = parse_server_classes(SC)
    counts = sc.counts(n)
    init, a, _, it, _, _ = _initial(n, d, lam, "jsq-d", service, SC)
    x0, ph0 = init
    if service == "exp":
        own = classes_start(counts, d, lam, sc, "jsq-d")
        assert np.array_equal(a["c"][:, : own.shape[1]], own) and not a["c"][:, own.shape[1] :].any()
    else:
        own = classes_phase_start(counts, d, lam, sc, parse_service(service), "jsq-d")
        bounds = np.concatenate([[0], np.cumsum(counts)])
        for k in range(counts.size):
            part = slice(bounds[k], bounds[k + 1])
            assert np.array_equal(_trim(_by_length_phase(x0[part], ph0[part], 2)), _trim(own[k]))
    _kernel_consistent(init, a, it, False)


def _cdf(law, phase=None):
    """The closed-form CDF of the law's work (``phase`` None) or of the remaining work from
    ``phase``: Erlang-K from phase j is Erlang(K − j) of rate K; a hyperexponential's phases are
    exponentials of their rates (T diagonal), mixed by α for a full work; exp is Exp(1)."""
    T = np.asarray(law.T, float)
    if law.name == "erlang":
        K = T.shape[0]
        return stats.gamma(K - (phase or 0), scale=1.0 / K).cdf
    rates = -np.diag(T)
    assert np.allclose(T, np.diag(np.diag(T)))
    w = np.eye(rates.size)[phase] if phase is not None else np.asarray(law.alpha, float)
    return lambda t: 1.0 - np.exp(-np.multiply.outer(np.asarray(t), rates)) @ w


@pytest.mark.parametrize("service, classes", [("erlang:2", None), ("hyperexp:4", None), ("erlang:3", SC), ("exp", SC)])
def test_remaining_and_waiting_works_have_their_laws(service, classes):
    """Per server (class speed s): the first departure is ``PH(e_j, T)/s`` for its phase ``j``,
    each next one a full work ``PH(α, T)/s`` later (KS, every sample of thousands of servers)."""
    n = 20000
    law = parse_service(service)
    init, a, _, it, counts, spd = _initial(n, 2, 0.9, "jsq-d", service, classes, seed=3)
    x0, ph0 = init
    speed = np.repeat(spd, counts)
    pend = ev.pending_departures(a, it)
    j = pend[:, 1].astype(np.int64)
    order = np.lexsort((pend[:, 0], j))
    t, j = pend[order, 0] * speed[j[order]], j[order]  # in units of work
    first = np.r_[True, j[1:] != j[:-1]]
    gaps = np.diff(t)[~first[1:]]
    m = law.T.shape[0]
    busy = np.nonzero(x0 > 0)[0]
    assert np.array_equal(j[first], busy)
    tested = 0
    for phase in range(m):
        res = t[first][ph0[busy] == phase]
        if res.size < 200:
            continue
        p = stats.kstest(res, _cdf(law, phase)).pvalue
        assert p > 1e-3, (phase, res.size, res.mean(), p)
        tested += 1
    assert tested >= min(m, 2)
    assert gaps.size > 1000 and stats.kstest(gaps, _cdf(law)).pvalue > 1e-3


def _u1_runs(start, service="exp", classes=None, policy="jsq-d", seeds=range(10)):
    """Per replication over [0, 3], no burn-in: ``u_1`` (one class) or ``Σ f_k s_k u_{k,1} / s̄``."""
    sc = parse_server_classes(classes)
    out = []
    for seed in seeds:
        r = simulate_general(
            2000, 2, 0.9, policy=policy, service=service, server_classes=classes, time=3.0, burn_in=0.0, seed=seed,
            replications=1, batches=8, control_variates=False, start=start, workers=1,
        )  # fmt: skip
        if classes is None:
            out.append(r.u_mean[0])
        else:
            out.append(sum(c.fraction * c.speed * c.u_mean[0] for c in r.classes) / sc.mean_speed)
    return np.array(out)


@pytest.mark.parametrize(
    "service, classes, policy",
    [("exp", None, "jsq-d"), ("hyperexp:4", None, "jsq-d"), ("erlang:2", SC, "jsq-d"), ("exp", None, "jsq"),
     ("exp", None, "jbt"), ("exp", SC, "jsq"), ("erlang:2", SC, "jbt")],
)  # fmt: skip
def test_no_start_transient_in_u1(service, classes, policy):
    u = _u1_runs("fixed-point", service, classes, policy)
    se = u.std(ddof=1) / math.sqrt(u.size)
    assert abs(u.mean() - 0.9) <= 4 * se + 1.0 / 2000, (u.mean(), se)  # + the rounding of n·π
    empty = _u1_runs("empty", service, classes, policy, seeds=range(3))
    assert abs(empty.mean() - 0.9) > 20 * se  # the same check sees the transient of an empty start


@pytest.mark.parametrize("service, classes", [("erlang:2", None), ("exp", SC)])
def test_reaches_the_count_engines_means(service, classes):
    """From the fixed point, the event engine's E[u_ℓ] and the count engine's (from its fixed
    point, its own stream) agree within their standard errors."""
    n, lam = 100, 0.8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        e = simulate(n, 2, lam, engine="events", service=service, server_classes=classes, time=2500.0,
                     burn_in=0.0, seed=7, replications=4, start="fixed-point", control_variates=False)  # fmt: skip
        c = simulate(n, 2, lam, service=service, server_classes=classes, time=10000.0, burn_in=0.0, seed=8,
                     start="fixed-point", control_variates=False)  # fmt: skip
    cu = getattr(c, "u_plain", c.u_mean)
    cse = getattr(c, "u_plain_stderr", c.u_stderr)
    for ell in range(3):
        tol = 4 * math.hypot(e.u_stderr[ell], cse[ell])
        assert abs(e.u_mean[ell] - cu[ell]) <= tol, (ell, e.u_mean[ell], cu[ell], tol)


def test_replications_and_workers_share_the_stream():
    kw = dict(service="erlang:2", time=20.0, burn_in=1.0, seed=5, start="fixed-point", replications=3)
    one = simulate_general(300, 2, 0.9, workers=1, **kw)
    two = simulate_general(300, 2, 0.9, workers=3, **kw)
    assert np.array_equal(one.u_mean, two.u_mean) and one.sojourn.mean == two.sojourn.mean
    empty = simulate_general(300, 2, 0.9, **{**kw, "start": "empty"})
    assert not np.array_equal(one.u_mean, empty.u_mean)


NO_PH = (
    "service lognormal:2 has no phase-type form, so no mean-field fixed point to start from; start 'empty' with a "
    "burn-in"
)


def test_a_law_without_phase_type_form_is_refused_with_one_text():
    with pytest.raises(ValueError) as lib:
        simulate(100, 2, 0.5, service="lognormal:2", time=5.0, start="fixed-point")
    assert str(lib.value) == f"start: {NO_PH}"
    with pytest.raises(ValueError) as direct:
        simulate_general(100, 2, 0.5, service="lognormal:2", time=5.0, start="fixed-point")
    assert str(direct.value) == f"start: {NO_PH}"
    r = CliRunner().invoke(main, ["simulate", "--n", "10", "--service", "lognormal:2", "--start", "fixed-point"])
    assert r.exit_code == 2 and f"--start: {NO_PH}" in r.output and "Traceback" not in r.output
    with pytest.raises(sw.SweepFileError) as info:
        sw.parse_sweep(
            '[[run]]\nmeasurement = "simulate"\nn = 10\nd = 2\nload = 0.5\ntime = 9.0\nservice = "lognormal:2"\n'
            'start = "fixed-point"\n'
        )
    assert len(info.value.errors) == 1 and f"start: {NO_PH}" in info.value.errors[0]


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"load": 1.2}, "needs load λ < 1"),
        ({"load": 1.0, "rule": "jbt"}, "needs load λ < 1"),
    ],
)
def test_no_fixed_point_is_refused(kw, words):
    load = kw.pop("load", 0.5)
    why = fixed_point_refusal(System(20, 2, load, **kw))
    assert why is not None and words in why
    rule = kw.pop("rule", "jsq-d")
    with pytest.raises(ValueError, match="start: ") as info:
        simulate_general(20, 2, load, policy=rule, time=5.0, start="fixed-point", **kw)
    assert str(info.value) == f"start: {why}"
    with pytest.raises(ValueError) as via, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        simulate(20, 2, load, policy=rule, engine="events", time=5.0, start="fixed-point", **kw)
    assert str(via.value) == f"start: {why}"


@pytest.mark.parametrize(
    "kw",
    [{}, {"rule": "jsq"}, {"service": "hyperexp:4", "server_classes": SC}, {"rule": "jbt"},
     {"rule": "jsq", "server_classes": SC}, {"rule": "jiq", "service": "erlang:2", "server_classes": SC}],
)  # fmt: skip
def test_systems_with_a_fixed_point_are_taken(kw):
    assert fixed_point_refusal(System(20, 2, 0.5, **kw)) is None


def test_start_value_refused_naming_it():
    with pytest.raises(ValueError, match="start: the event engine starts 'empty' or at the 'fixed-point'"):
        simulate_general(20, 2, 0.5, service="lognormal:2", time=5.0, start="customers:2")
