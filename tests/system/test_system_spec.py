"""The ``System`` value (supermarket.system.spec): one validation with the messages of the checks it
gathers, one ``to_dict``/``from_dict``, and ``simulate(system)`` the same run as the keyword form."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import supermarket as sm
from supermarket.model import Params
from supermarket.system.policies import check_policy
from supermarket.system.service import parse_server_classes, parse_service, phase_type
from supermarket.system.spec import System


def _message(call) -> tuple[type, str]:
    try:
        call()
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)
    raise AssertionError("no error")


@pytest.mark.parametrize(
    "kw, direct",
    [
        (dict(n=0, d=2, load=0.5), lambda: Params(0, 2, 0.5, stable=False)),
        (dict(n=10, d=0, load=0.5), lambda: Params(10, 0, 0.5, stable=False)),
        (dict(n=10, d=2, load=-1), lambda: Params(10, 2, -1, stable=False)),
        (dict(n=3, d=5, load=0.5, replace=False), lambda: Params(3, 5, 0.5, replace=False, stable=False)),
        (dict(n=10, d=2, load=0.5, replace="yes"), lambda: Params(10, 2, 0.5, replace="yes", stable=False)),
        (dict(n=10, d=2, load=0.5, rule="jsqq"), lambda: check_policy("jsqq")),
        (dict(n=10, d=2, load=0.5, rule=3), lambda: check_policy(3)),
        (dict(n=10, d=2, load=0.5, service="pareto:1"), lambda: parse_service("pareto:1")),
        (dict(n=10, d=2, load=0.5, server_classes="0.5:2,0.4:1"), lambda: parse_server_classes("0.5:2,0.4:1")),
        (dict(n=3, d=2, load=0.5, server_classes="0.5:2,0.5:1"), lambda: parse_server_classes("0.5:2,0.5:1").counts(3)),
    ],
)
def test_one_validation_with_the_messages_of_each_check(kw, direct):
    assert _message(lambda: System(**kw)) == _message(direct)


def test_fields_are_canonical_and_frozen():
    s = System(1000, np.int64(2), "0.9", rule="JSQ_D", service="erlang:2", server_classes="0.5:2,0.5:1")
    assert (s.n, s.d, type(s.d), s.rule, s.load, s.lam) == (1000, 2, int, "jsq-d", "0.9", 0.9)
    assert s.service.spec == "erlang:2" and s.server_classes.mean_speed == 1.5
    assert (s.law_family, s.has_classes, s.mean_field) == ("phase-type", True, False)
    with pytest.raises(AttributeError):
        s.d = 3  # type: ignore[misc]
    assert System(None, 2, 0.9).mean_field and System(None, 2, 0.9, service="deterministic").law_family == "general"


@pytest.mark.parametrize(
    "system",
    [
        System(1000, 2, "0.9"),
        System(12, 3, Fraction(7, 10), rule="jiq", replace=False, service="hyperexp:4", server_classes="0.25:4,0.75:1"),
        System(None, 2, 0.95, rule="random", service="lognormal:2"),
        System(10, 2, 0.5, service=phase_type([0.5, 0.5], [[-2.0, 0.0], [0.0, -2.0 / 3.0]])),
    ],
)
def test_to_dict_reads_back(system):
    import json

    data = json.loads(json.dumps(system.to_dict()))  # JSON-safe
    back = System.from_dict(data)
    assert back == system and hash(back) == hash(system) and back.to_dict() == data
    assert back.lam == system.lam and back.service.scv == pytest.approx(system.service.scv, rel=1e-12)
    if system.service.alpha is not None:
        assert np.array_equal(back.service.T, system.service.T)


def test_from_dict_refuses_unknown_and_missing_fields():
    with pytest.raises(ValueError, match="unknown field"):
        System.from_dict({"n": 1, "d": 1, "load": 0.5, "lam": 0.5})
    with pytest.raises(ValueError, match="missing field"):
        System.from_dict({"n": 1, "load": 0.5})


def test_exact_load_kept():
    """The load as written: 0.9, "0.9" and 9/10 are one system, and k_(λ,d) sees the exact value."""
    assert System(10, 2, "0.9") == System(10, 2, 0.9) == System(10, 2, Fraction(9, 10))
    assert System(10, 2, 0.9) != System(10, 2, 0.9000000001)


@pytest.mark.parametrize(
    "keywords, horizon",
    [
        (dict(), dict(steps=20_000)),
        (dict(policy="jiq"), dict(steps=20_000)),
        (dict(service="erlang:2"), dict(steps=20_000)),
        (dict(server_classes="0.5:2,0.5:1"), dict(steps=20_000)),
        (dict(service="lognormal:2", policy="random"), dict(time=10.0)),
    ],
)
def test_simulate_takes_a_system(keywords, horizon):
    """``simulate(System(...))`` is the keyword form's run, number for number."""
    a = sm.simulate(20, 2, 0.7, seed=4, **keywords, **horizon)
    rule = keywords.pop("policy", "jsq-d")
    b = sm.simulate(System(20, 2, 0.7, rule=rule, **keywords), seed=4, **horizon)
    assert type(a) is type(b)
    assert np.array_equal(a.u_mean, b.u_mean) and np.array_equal(a.u_stderr, b.u_stderr, equal_nan=True)


def test_simulate_system_excludes_its_fields_as_keywords():
    s = System(20, 2, 0.7)
    with pytest.raises(TypeError, match="policy"):
        sm.simulate(s, policy="jiq", steps=1000)
    with pytest.raises(TypeError, match="d, lam"):
        sm.simulate(s, 2, 0.7, steps=1000)
    with pytest.raises(ValueError, match="finite n"):
        sm.simulate(System(None, 2, 0.7), steps=1000)
    with pytest.raises(TypeError, match="n, d and lam"):
        sm.simulate(20, steps=1000)
    assert math.isfinite(System(20, 2, 0.7).lam)


@pytest.mark.parametrize(
    "keywords, engine",
    [
        (dict(steps=20_000), "profile"),
        (dict(steps=20_000, service="erlang:2"), "phase"),
        (dict(steps=20_000, server_classes="0.5:2,0.5:1"), "classes"),
        (dict(steps=20_000, server_classes="0.5:2,0.5:1", service="erlang:2", engine="phase"), "classes-phase"),
        (dict(time=30.0, service="lognormal:2"), "events"),
    ],
)
def test_every_result_has_the_shared_fields(keywords, engine):
    """The four result types of ``simulate`` are ``SimulateResult``s: the shared fields, with the
    values the run was asked for (the count engine of §15.7 reports itself as ``classes-phase``, the
    name the method table and the sweep give it)."""
    from supermarket.simulation import SimulateResult

    # λ = 0.6: under random routing the slow class's load λ s̄/s = 0.9 < 1 (at 0.7 it is overloaded, and
    # the classes engine rightly drops its capacity-balance control)
    r = sm.simulate(20, 2, 0.6, seed=4, batches=64, policy="random", **keywords)
    assert isinstance(r, SimulateResult)
    assert (r.engine, r.policy, r.batches, r.control_variates) == (engine, "random", 64, True)
    assert r.replications == (4 if engine == "events" else 1) and r.burn_in >= 0
    assert r.u_mean.shape == r.u_stderr.shape and r.u_mean.size >= 1 and isinstance(r.notes, tuple)
    assert r.events_per_second > 0 and isinstance(r.summary(), str) and isinstance(r.to_dict(), dict)
