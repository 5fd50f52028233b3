"""Both time modes of the phase-type count engine through ``simulate`` (docs/model.md §1.1): the
jump chain held for its mean holding times (``"discrete"``, the default) and exponential holding
times (``"continuous"``) estimate the same stationary law, checked against the exact solver of a
tiny system (an independent computation: the linear solve of the generator, docs/model.md §11);
the JSON says which mode ran, on every engine."""

from __future__ import annotations

import warnings

import pytest

import supermarket as sm
from supermarket.stationary.phase import solve_phase
from supermarket.system.service import parse_service


@pytest.fixture(scope="module")
def exact():
    law = parse_service("erlang:2")
    return solve_phase(2, 2, 0.7, law.alpha, law.T).mean_queue_length


@pytest.mark.parametrize("mode", ["discrete", "continuous"])
def test_both_time_modes_of_the_phase_engine_agree_with_the_exact_law(exact, mode):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = sm.simulate(2, 2, 0.7, service="erlang:2", steps=200_000, seed=5, replications=4, time_mode=mode)
    assert r.engine == "phase" and r.time_mode == mode and r.to_dict()["time_mode"] == mode
    e = r.mean_queue_length
    assert abs(e.mean - exact) < 4.0 * e.stderr, (e.mean, e.stderr, exact)


def test_the_two_modes_are_two_streams_of_one_chain():
    """Exponential holding times draw one more number per event: the same seed gives another path
    (so a mode that was silently ignored would be seen here), and the discrete default is the
    mode the engine ran before ``time_mode`` was honoured on it."""
    kw = dict(service="erlang:2", steps=20_000, seed=3)
    a = sm.simulate(10, 2, 0.5, **kw)
    b = sm.simulate(10, 2, 0.5, time_mode="discrete", **kw)
    c = sm.simulate(10, 2, 0.5, time_mode="continuous", **kw)
    assert a.mean_queue_length.mean == b.mean_queue_length.mean != c.mean_queue_length.mean


@pytest.mark.parametrize(
    "kw, mode",
    [
        ({}, "discrete"),
        ({"time_mode": "continuous"}, "continuous"),
        ({"server_classes": "0.5:2,0.5:1"}, "discrete"),
        ({"service": "lognormal:2"}, "continuous"),
        ({"server_classes": "0.5:2,0.5:1", "time_mode": "continuous"}, "continuous"),
    ],
)
def test_every_result_says_its_time_mode(kw, mode):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = sm.simulate(6, 2, 0.5, time=20.0, seed=1, **kw)
    assert r.to_dict()["time_mode"] == r.time_mode == mode


@pytest.mark.parametrize("kw", [{"policy": "jsq"}, {"policy": "jbt"}, {"d": 1}, {"lam": 1.2}])
def test_eps_is_refused_where_there_is_no_good_set(kw):
    """``eps`` was accepted and ignored (no good set reported) for the rules other than JSQ(d),
    for d = 1 and at λ >= 1; it is refused with the reason, on every engine."""
    from supermarket.system.methods import Refusal

    args = {"n": 10, "d": 2, "lam": 0.5} | kw
    policy = args.pop("policy", "jsq-d")
    with pytest.raises(Refusal, match=r"eps: the good set N\^ε \(paper 000"):
        sm.simulate(args["n"], args["d"], args["lam"], policy=policy, steps=1000, eps=0.05, seed=1)


def test_discrete_holds_each_step_for_its_mean_and_continuous_draws_it(monkeypatch):
    """docs/model.md §1.1 on the phase-type count engine: ``discrete`` holds each step for its mean
    ``1/R`` (the kernel's ``holding_exp=False``), ``continuous`` draws it (``True``); the two
    streams differ, so which is which is pinned here (a swap passes the stream test above)."""
    from supermarket.simulation import phase_run

    seen: list[bool] = []
    real = phase_run.PhaseChain

    def spy(*args, **kwargs):
        seen.append(kwargs["holding_exp"])
        return real(*args, **kwargs)

    monkeypatch.setattr(phase_run, "PhaseChain", spy)
    for mode, want in (("discrete", {False}), ("continuous", {True}), (None, {False})):
        seen.clear()
        sm.simulate(10, 2, 0.5, service="erlang:2", steps=2_000, seed=1, time_mode=mode)
        assert set(seen) == want, (mode, seen)
