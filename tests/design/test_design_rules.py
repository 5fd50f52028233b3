"""Sizing by a latency target under every rule and with server classes (docs/model.md §10, §15):
the answers against closed forms (M/M/1 per queue under random routing, with and without
classes; JBT(2)'s fluid fixed point; one service under JSQ and JIQ), one class of speed 1 against
the classless design, the M/PH/1 queues of random routing with classes, a second engine
(--verify), and the refusals of the command line."""

from __future__ import annotations

import math

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.optimize import brentq

from supermarket.cli import main
from supermarket.design import latency as lt
from supermarket.design import rule_latency as rl
from supermarket.design import service_search
from supermarket.design.rule_sojourn import classes_phase_quantile, classes_quantile, fluid_quantile
from supermarket.design.sojourn import mph1_sojourn_tail
from supermarket.system.classes import parse_server_classes
from supermarket.system.policies import POLICIES, RULES
from supermarket.system.service import parse_service

LN100 = math.log(100.0)


# ---------------------------------------------------------------- random routing: M/M/1 per queue
@pytest.mark.parametrize("T", [8.0, 20.0, 100.0])
def test_random_largest_load_is_mm1_closed_form(T):
    r = rl.design_rule_latency("random", 0.99, T, load=0.3)
    assert r.question == "largest load" and r.d is None
    assert r.answer == pytest.approx(1.0 - LN100 / T, rel=1e-8)
    assert r.at_load == pytest.approx(LN100 / 0.7, rel=1e-9)  # Exp(1 − λ) at λ = 0.3
    assert r.holds == (LN100 / 0.7 <= T)
    assert not r.capped and r.monotone


@pytest.mark.parametrize("lam,q", [(0.5, 0.9), (0.8, 0.99), (0.95, 0.999)])
def test_random_fluid_quantile_is_exp_one_minus_lambda(lam, q):
    assert fluid_quantile("random", 1, lam, q) == pytest.approx(-math.log1p(-q) / (1 - lam), rel=1e-9)


def test_random_holds_false_above_the_closed_form_load():
    T = 10.0
    lam = 1.0 - LN100 / T  # 0.5395...
    above = rl.design_rule_latency("random", 0.99, T, load=round(lam + 0.01, 6))
    below = rl.design_rule_latency("random", 0.99, T, load=round(lam - 0.01, 6))
    assert above.holds is False and below.holds is True
    assert above.answer == pytest.approx(below.answer, rel=1e-12)


# ---------------------------------------------------------------- JSQ and JIQ: one service
@pytest.mark.parametrize("policy", ["jsq", "jiq"])
@pytest.mark.parametrize("q", [0.9, 0.99])
def test_jsq_jiq_sojourn_is_one_service(policy, q):
    for lam in (0.3, 0.9, 0.999):
        assert fluid_quantile(policy, 1, lam, q) == pytest.approx(-math.log1p(-q), rel=1e-10)
    r = rl.design_rule_latency(policy, q, 1.5 * -math.log1p(-q), load=0.9)
    assert r.holds is True and r.capped and r.answer == lt.LOAD_MAX
    assert "mean-field limit" in r.summary() and "--verify" in r.summary()


# ---------------------------------------------------------------- JBT(2): its fluid fixed point
def _jbt2_quantile(lam, q):
    """JBT(T = 2) in closed form: u_1 = λ, u_2 = x = ((1+λ) − √((1+λ)² − 4λ²))/2; an arrival waits
    behind one job with probability P_1 = (λ − x)/(1 − x), else none: P(S > t) = e^{−t}(1 + P_1 t)."""
    x = ((1 + lam) - math.sqrt((1 + lam) ** 2 - 4 * lam**2)) / 2
    p1 = (lam - x) / (1 - x)
    return brentq(lambda t: math.exp(-t) * (1 + p1 * t) - (1 - q), 0.0, 100.0, xtol=1e-14, rtol=1e-14)


@pytest.mark.parametrize("lam", [0.3, 0.7, 0.95])
def test_jbt2_quantile_closed_form(lam):
    assert fluid_quantile("jbt", 2, lam, 0.99) == pytest.approx(_jbt2_quantile(lam, 0.99), rel=1e-9)


def test_jbt2_largest_load_closed_form():
    T = 6.0
    want = brentq(lambda lam: _jbt2_quantile(lam, 0.99) - T, 0.01, 0.999999, xtol=1e-14)
    r = rl.design_rule_latency("jbt", 0.99, T, d=2)
    assert r.question == "largest load" and r.d == 2
    assert r.answer == pytest.approx(want, rel=1e-7)
    assert r.neighbour["value"] > T >= r.achieved


def test_jbt_least_d_is_one():
    # JBT(1) joins an idle queue whenever one exists: in the fluid limit no job waits
    r = rl.design_rule_latency("jbt", 0.99, 5.0, load=0.9)
    assert r.question == "least d" and r.answer == 1
    assert r.achieved == pytest.approx(LN100, rel=1e-10)


# ---------------------------------------------------------------- one class of speed 1 is no class
@pytest.mark.parametrize("lam,T", [(0.9, 8.0), (0.99, 10.0), (0.7, 5.0)])
def test_one_class_least_d_equals_classless(lam, T):
    a = lt.least_d_for_latency(lam, 0.99, T)
    b = rl.design_rule_latency("jsq-d", 0.99, T, load=lam, server_classes="1:1")
    assert b.answer == a.answer
    assert b.achieved == pytest.approx(a.achieved, rel=1e-8)
    if a.neighbour:
        assert b.neighbour["value"] == pytest.approx(a.neighbour["value"], rel=1e-8)


def test_one_class_largest_load_equals_classless():
    a = lt.max_load_for_latency(2, 0.99, 8.0)
    b = rl.design_rule_latency("jsq-d", 0.99, 8.0, d=2, server_classes="1:1")
    assert b.answer == pytest.approx(a.answer, rel=1e-7)


def test_one_class_phase_type_equals_classless():
    a = service_search.least_d_for_service_latency(0.9, 0.99, 9.0, "erlang:2")
    b = rl.design_rule_latency("jsq-d", 0.99, 9.0, load=0.9, server_classes="1:1", service="erlang:2")
    assert b.answer == a.answer
    assert b.achieved == pytest.approx(a.achieved, rel=1e-6)


# ---------------------------------------------------------------- random routing with classes
def _mm1_mixture_quantile(lam, fr, sp, q):
    """Class c: M/M/1 with arrivals λ s̄ (uniform over the servers) and service s_c: sojourn Exp(s_c − λ s̄),
    reached by a share f_c of the arrivals."""
    sbar = sum(f * s for f, s in zip(fr, sp))
    rates = [s - lam * sbar for s in sp]
    return brentq(lambda t: sum(f * math.exp(-r * t) for f, r in zip(fr, rates)) - (1 - q), 0.0, 1e4, xtol=1e-13)


@pytest.mark.parametrize(
    "spec,fr,sp", [("0.5:2,0.5:1", (0.5, 0.5), (2.0, 1.0)), ("0.25:3,0.75:1", (0.25, 0.75), (3.0, 1.0))]
)
@pytest.mark.parametrize("lam", [0.2, 0.5])
def test_random_classes_mixture_closed_form(spec, fr, sp, lam):
    got = classes_quantile("random", 1, lam, parse_server_classes(spec), 0.99)
    assert got == pytest.approx(_mm1_mixture_quantile(lam, fr, sp, 0.99), rel=1e-9)


def test_random_classes_largest_load_closed_form():
    fr, sp, T = (0.5, 0.5), (2.0, 1.0), 12.0
    want = brentq(lambda lam: _mm1_mixture_quantile(lam, fr, sp, 0.99) - T, 0.01, 0.66, xtol=1e-14)
    r = rl.design_rule_latency("random", 0.99, T, load=0.3, server_classes="0.5:2,0.5:1")
    assert r.answer == pytest.approx(want, rel=1e-7)
    assert r.at_load == pytest.approx(_mm1_mixture_quantile(0.3, fr, sp, 0.99), rel=1e-9)
    assert r.answer < 1 / 1.5  # the slow class's load λ s̄/1 stays below 1


def test_random_classes_phase_type_is_mph1_per_class():
    # class c: an M/E2/1 queue at utilisation ρ_c = λ s̄/s_c run at speed s_c (time scaled by 1/s_c)
    law = parse_service("erlang:2")
    lam, fr, sp, q = 0.5, (0.5, 0.5), (2.0, 1.0), 0.99
    sbar = 1.5
    a, M = np.asarray(law.alpha), np.asarray(law.T)

    def tail(t):
        return sum(f * mph1_sojourn_tail(lam * sbar / s, a, M, s * t) for f, s in zip(fr, sp))

    want = brentq(lambda t: tail(t) - (1 - q), 0.0, 200.0, xtol=1e-12)
    got = classes_phase_quantile("random", 1, lam, parse_server_classes("0.5:2,0.5:1"), law, q)
    assert got == pytest.approx(want, rel=1e-7)


# ---------------------------------------------------------------- a second engine: --verify
def test_verify_random_matches_the_event_engine():
    # random routing is exact at every n (independent M/M/1 queues): the event engine's p90 must
    # agree with ln(10)/(1 − λ) within its own standard error
    r = rl.design_rule_latency("random", 0.9, 6.0, load=0.5)
    v = rl.verify_rule_latency(r, 20, time=3000.0, replications=4, seed=3, workers=1)
    p = v["points"][0]
    exact = math.log(10) / 0.5
    assert p["stderr"] is not None and abs(p["value"] - exact) < 4 * p["stderr"]
    assert p["verdict"] == "meets" and v["changes_answer"] is False


def test_cli_verify_non_default_rule():
    res = CliRunner().invoke(
        main,
        ["design", "--latency", "4", "--quantile", "0.9", "--load", "0.5", "--policy", "jiq", "--n", "20", "--verify",
         "--steps", "40000", "--json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    import json

    out = json.loads(res.output)
    assert out["policy"] == "jiq" and out["holds"] is True
    assert out["verify"]["n"] == 20 and out["verify"]["points"][0]["verdict"] in ("meets", "undecided")


# ---------------------------------------------------------------- the command line
def test_policy_choices_from_the_registry():
    res = CliRunner().invoke(main, ["design", "--help"])
    assert res.exit_code == 0
    text = " ".join(res.output.split())
    for name in POLICIES:
        assert name in text
    assert "--server-classes" in text


@pytest.mark.parametrize("policy", [p for p in POLICIES if p != "jsq-d"])
def test_cli_every_rule_answers(policy):
    args = ["design", "--latency", "8", "--load", "0.9", "--policy", policy]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    word = "gives sojourn" if RULES[policy].uses_d else "reads no d"
    assert word in res.output and "mean-field limit" in res.output


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--server-classes", "0.5:2,0.5"], "FRACTION:SPEED"),
        (["--server-classes", "0.5:2,0.5:0"], "speed <= 0"),
        (["--server-classes", "0.5:2,0.4:1"], "sum to"),
        (["--server-classes", "0.5:2,0.5:1", "--policy", "jiq", "--d", "2"], "reads no d"),
        (["--service", "lognormal:2", "--server-classes", "0.5:2,0.4:1", "--policy", "jbt"], "sum to"),
        (["--policy", "random", "--d", "2"], "reads no d"),
        (["--server-classes", "0.5:2,0.5:1", "--policy", "best"], "drop --server-classes"),
        (["--server-classes", "0.5:2,0.5:1", "--n", "3", "--verify"], "whole number"),
    ],
)
def test_cli_refusals_one_line_before_any_work(monkeypatch, extra, needle):
    def boom(*a, **k):  # pragma: no cover - reached only if a refusal came too late
        raise AssertionError("the search ran")

    monkeypatch.setattr(rl, "design_rule_latency", boom)
    args = ["design", "--latency", "8"] + ([] if "--d" in extra else ["--load", "0.9"]) + extra
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, res.output
    lines = [x for x in res.output.strip().splitlines() if x]
    assert len(lines) == 1 and "Traceback" not in res.output
    assert needle in lines[0]


def test_library_refusal_is_the_method_table_text():
    from supermarket.system.methods import mean_field
    from supermarket.system.spec import System

    with pytest.raises(ValueError) as lib:
        rl.design_rule_latency("random", 0.99, 8.0, load=0.9, server_classes="0.5:2,0.5:1")
    with pytest.raises(ValueError) as table:  # the slow class overloaded under random routing
        mean_field(System(None, 1, 0.9, rule="random", server_classes="0.5:2,0.5:1"))
    assert str(lib.value) == str(table.value)


def test_target_below_the_fastest_service_is_refused():
    # with a class of speed 2 the floor is ln(100)/2, not ln(100)
    with pytest.raises(ValueError, match="fastest class"):
        rl.design_rule_latency("jsq-d", 0.99, 0.99 * LN100 / 2, load=0.5, server_classes="0.5:2,0.5:1")
    r = rl.design_rule_latency("jsq-d", 0.99, 0.9 * LN100, load=0.2, server_classes="0.5:2,0.5:1")
    assert r.achieved <= 0.9 * LN100


# ---------------------------------------------------------------- the capability matrix's design rows
def _generator():
    import importlib.util

    from _paths import TOOLS

    spec = importlib.util.spec_from_file_location("capability_matrix_design", TOOLS / "capability_matrix.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _Ran(Exception):
    pass


@pytest.mark.parametrize("classes", [False, True])
@pytest.mark.parametrize("family", ["exponential", "phase-type", "general"])
def test_matrix_design_row_is_what_the_command_does(monkeypatch, classes, family):
    gen = _generator()

    def stub(*a, **k):
        raise _Ran

    monkeypatch.setattr(rl, "design_rule_latency", stub)
    for policy in POLICIES:
        cell = gen.cells(policy, classes, family)[f"design --latency 8 --load {gen.LOAD}"]
        if policy == "jsq-d" and not classes:
            assert cell.startswith("yes")  # the classless jsq-d design (tests/design/test_design_latency.py)
            continue
        args = ["design", "--latency", "8", "--load", gen.LOAD, "--policy", policy, "--service", gen.LAWS[family]]
        args += ["--server-classes", gen.CLASSES] if classes else []
        res = CliRunner().invoke(main, args)
        if cell.startswith("no: "):
            assert res.exit_code == 2 and res.output.strip() == "supermarket: error: " + cell[4:], (policy, res.output)
        else:
            assert isinstance(res.exception, _Ran), (policy, res.output)


# ---------------------------------------------------------------- the verdicts of --verify
class _Quantile:
    def __init__(self, mean, stderr):
        self.mean, self.stderr, self.reliable = mean, stderr, True


def _fake_engine(monkeypatch, values):
    """The event engine replaced by one giving ``values[(d, load)]`` ± 0.01 (the verdict rule alone)."""
    import types

    import supermarket.simulation.general as general

    def fake(n, d, lam, *, quantiles, **kw):
        return types.SimpleNamespace(sojourn_quantiles={quantiles[0]: _Quantile(values[(d, lam)], 0.01)})

    monkeypatch.setattr(general, "simulate_general", fake)


@pytest.mark.parametrize(
    "value,change,word",
    [(4.0, False, "confirmed: the target holds"), (9.0, True, "finite n differs: the target does not hold"),
     (8.0, None, "undecided")],
)  # fmt: skip
def test_verify_holds_verdicts(monkeypatch, value, change, word):
    r = rl.design_rule_latency("jiq", 0.99, 8.0, load=0.5)  # holds in the mean field
    _fake_engine(monkeypatch, {(1, 0.5): value})
    v = rl.verify_rule_latency(r, 10)
    assert v["changes_answer"] is change and word in v["note"]


@pytest.mark.parametrize(
    "at_d,at_d_minus_1,change,word",
    [(7.0, 9.0, False, "confirmed"), (9.0, 9.5, True, "more choices"), (7.0, 7.5, True, "fewer choices"),
     (8.0, 9.0, None, "undecided")],
)  # fmt: skip
def test_verify_least_d_verdicts(monkeypatch, at_d, at_d_minus_1, change, word):
    r = rl.design_rule_latency("jsq-d", 0.99, 8.0, load=0.9, server_classes="0.5:2,0.5:1")
    d = int(r.answer)
    _fake_engine(monkeypatch, {(d, 0.9): at_d, (d - 1, 0.9): at_d_minus_1})
    v = rl.verify_rule_latency(r, 10)
    assert v["changes_answer"] is change and word in v["note"]
    assert [p["d"] for p in v["points"]] == [d, d - 1]
