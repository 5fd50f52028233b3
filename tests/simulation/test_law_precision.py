"""``precision=`` on the law engines (phase, classes, classes-phase, events):
supermarket.simulation.law_precision, against independent facts.

- the loop itself on a result whose error is known (``σ/√h``): it stops at the first horizon
  that meets the target, grows the horizon at least twofold each round (so the earlier rounds
  cost at most the last), and stops at the cap with ``cap_hit``;
- on the engines: a met target states a half-width at most the precision, and the estimate
  covers the Pollaczek–Khinchine mean of M/E2/1 (random routing) within 4 of its standard
  errors; a first round that meets the target is the plain run of the same seed, bit for bit;
- refusals: a response-time target, a precision outside (0, 1), a target without precision
  (library and command line, one line, exit 2).
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass

import numpy as np
import pytest
from click.testing import CliRunner

import supermarket as sm
from supermarket.cli import main
from supermarket.simulation.law_precision import run_law_precision
from supermarket.stats import ErrorEstimate


@dataclass
class _Fake:
    time: float
    events: float
    replications: int
    mean_queue_length: ErrorEstimate
    u_mean: np.ndarray
    u_stderr: np.ndarray


def _fake_run(horizons: list, sigma: float = 1.0, value: float = 2.0):
    """A run of horizon ``h`` (in time): 10 events per unit, an error ``σ/√h`` on 30 dof."""

    def run(steps, time):
        h = 7.0 if time is None and steps is None else (steps if steps is not None else time)
        horizons.append(h)
        e = ErrorEstimate(value, sigma / math.sqrt(h), 30.0, 1.0, 1.0, True, "blocking", 30, 1)
        return _Fake(h, 10.0 * h, 1, e, np.array([0.5]), np.array([0.01]))

    return run


def test_the_loop_meets_the_target_at_the_first_horizon_that_does_and_grows_at_least_twofold():
    hs: list = []
    res, block = run_law_precision(
        _fake_run(hs), steps=None, time=10.0, precision=0.01, max_steps=None, targets=["mean-queue-length"]
    )
    t30 = 2.0422724563012373  # Student t, 30 dof, 97.5 %
    need = (t30 / (0.01 * 2.0)) ** 2  # the horizon where t σ/√h / value = 0.01
    assert block["met"] and not block["cap_hit"] and block["rounds"] == len(hs) >= 2
    assert hs[-1] >= need and all(h < need for h in hs[:-1])
    assert all(b >= 2.0 * a for a, b in itertools.pairwise(hs))  # the earlier rounds cost at most the last
    assert sum(hs[:-1]) <= hs[-1]
    row = block["quantities"][0]
    assert row["relative"] == pytest.approx(t30 / math.sqrt(hs[-1]) / 2.0) and row["relative"] <= 0.01
    assert block["achieved"] == row["relative"] and block["events"] == 10.0 * hs[-1] and res.time == hs[-1]


def test_the_loop_grows_at_least_twofold_when_the_errors_ask_for_less():
    t30 = 2.0422724563012373
    need = (t30 / (0.01 * 2.0)) ** 2
    hs: list = []
    _, block = run_law_precision(
        _fake_run(hs), steps=None, time=need / 1.3, precision=0.01, max_steps=None, targets=["mean-queue-length"]
    )
    assert hs == [need / 1.3, 2 * need / 1.3] and block["met"]  # 1.2 x 1.3 < 2: doubled


def test_a_rerun_is_the_plain_run_of_its_horizon_from_the_same_seed():
    kw = dict(service="lognormal:2", replications=2)
    prec = sm.simulate(20, 2, 0.6, time=20.0, seed=np.random.SeedSequence(9), precision=0.02, **kw)
    assert prec.precision["rounds"] >= 2
    plain = sm.simulate(20, 2, 0.6, time=prec.time, seed=np.random.SeedSequence(9), **kw)
    a, b = prec.to_dict(), plain.to_dict()
    a.pop("precision")
    for key in ("wall_s", "events_per_second"):
        a.pop(key), b.pop(key)
    assert a == b


def test_the_loop_stops_at_the_cap():
    hs: list = []
    _, block = run_law_precision(
        _fake_run(hs), steps=None, time=10.0, precision=1e-4, max_steps=5000, targets=["mean-queue-length"]
    )
    assert block["cap_hit"] and not block["met"] and block["max_events"] == 5000
    assert 10.0 * hs[-1] == pytest.approx(5000) and all(10.0 * h <= 5000 * (1 + 1e-9) for h in hs)
    assert block["achieved"] > 1e-4


def test_the_loop_counts_steps_in_steps_and_starts_from_the_engines_default():
    hs: list = []
    _, block = run_law_precision(
        _fake_run(hs), steps=100, time=None, precision=0.05, max_steps=None, targets=["mean-queue-length"]
    )
    assert all(float(h).is_integer() for h in hs) and block["met"]
    hs2: list = []
    run_law_precision(_fake_run(hs2), steps=None, time=None, precision=0.05, max_steps=None, targets=["u2"])
    assert hs2[0] == 7.0 and len(hs2) >= 1  # the engine's own default horizon, then its time


def test_phase_engine_meets_the_target_and_covers_the_pk_mean():
    lam = 0.7
    r = sm.simulate(
        40, 1, lam, policy="random", service="erlang:2", steps=20_000, seed=3, precision=0.01, replications=2
    )
    pr = r.precision
    assert pr["met"] and pr["rounds"] >= 2 and pr["quantities"][0]["relative"] <= 0.01
    pk = lam + lam**2 * 1.5 / (2 * (1 - lam))  # Pollaczek–Khinchine, SCV 1/2
    e = r.mean_queue_length
    assert e.reliable and abs(e.mean - pk) <= 4 * e.stderr, (e.mean, pk, e.stderr)
    assert "precision" in r.to_dict() and "precision target 0.01" in r.summary()


def test_a_first_round_that_meets_the_target_is_the_plain_run():
    kw = dict(service="lognormal:2", time=200.0, seed=5)
    plain = sm.simulate(30, 2, 0.6, **kw).to_dict()
    prec = sm.simulate(30, 2, 0.6, precision=0.5, **kw).to_dict()
    block = prec.pop("precision")
    assert block["rounds"] == 1 and block["met"]
    for key in ("wall_s", "events_per_second"):
        plain.pop(key), prec.pop(key)
    assert prec == plain
    assert "precision" not in plain


@pytest.mark.parametrize(
    "kw",
    [dict(server_classes="0.5:2,0.5:1"), dict(server_classes="0.5:2,0.5:1", service="erlang:2", engine="phase")],
)
def test_count_engines_with_classes_take_precision(kw):
    r = sm.simulate(30, 2, 0.7, time=20.0, seed=1, precision=0.02, **kw)
    assert r.precision["met"] and r.precision["quantities"][0]["relative"] <= 0.02


def test_refusals_before_any_work():
    s = dict(service="erlang:2", time=10.0)
    with pytest.raises(ValueError, match=r"target 'sojourn-p99'.*not the response times"):
        sm.simulate(20, 2, 0.5, precision=0.01, target="p99", **s)
    with pytest.raises(ValueError, match="precision"):
        sm.simulate(20, 2, 0.5, precision=1.5, **s)
    with pytest.raises(ValueError, match="target names the quantities"):
        sm.simulate(20, 2, 0.5, target="u2", **s)


def test_cli_precision_on_a_law_engine():
    args = ["simulate", "--n", "20", "--d", "2", "--load", "0.6", "--service", "lognormal:2", "--time", "50"]
    res = CliRunner().invoke(main, [*args, "--precision", "0.05", "--json"])
    assert res.exit_code == 0, res.output
    pr = json.loads(res.stdout)["precision"]
    assert pr["met"] and {"target", "targets", "met", "cap_hit", "rounds", "quantities", "events"} <= set(pr)
    bad = CliRunner().invoke(main, [*args, "--precision", "0.05", "--target", "p99"])
    lines = [x for x in bad.stderr.splitlines() if x.strip()]
    assert bad.exit_code == 2 and len(lines) == 1 and "p99" in lines[0], bad.stderr


def test_the_cap_is_kept_from_the_first_round(monkeypatch):
    """Budgets kept: without a horizon the first round is the profile engines' first stretch
    (10^7 steps), and a ``max_steps`` below the first round is refused before any event."""
    from supermarket.simulation import dispatch

    calls: list = []
    real = dispatch.simulate_phase_service
    monkeypatch.setattr(dispatch, "simulate_phase_service", lambda *a, **k: calls.append(k) or real(*a, **k))
    for kw in (dict(), dict(steps=2e6), dict(time=1e5)):  # time 1e5 at n = 30: about 4e6 events
        with pytest.raises(ValueError, match=r"max_steps must be >= the first round"):
            sm.simulate(30, 2, 0.7, service="erlang:2", precision=0.01, max_steps=10**6, **kw)
    assert calls == []
    r = sm.simulate(30, 2, 0.7, service="erlang:2", precision=0.5, seed=2)
    assert calls[0]["steps"] == 10**7 and r.precision["rounds"] == 1
    res = CliRunner().invoke(main, ["simulate", "--n", "30", "--d", "2", "--load", "0.7", "--service", "lognormal:2",
                                    "--precision", "0.01", "--max-steps", "1e6"])  # fmt: skip
    assert res.exit_code == 2 and "max_steps must be >= the first round" in res.stderr


@pytest.mark.parametrize("kw", [dict(), dict(service="erlang:2"), dict(service="lognormal:2"),
                                dict(server_classes="0.5:2,0.5:1")])  # fmt: skip
def test_no_precision_target_without_an_equilibrium(kw, monkeypatch):
    """At load >= 1 the time averages grow with the horizon: a precision target is refused before
    any event on every engine (it would chase a moving value up to the cap), with one message."""
    from supermarket.simulation import dispatch, run

    monkeypatch.setattr(dispatch, "simulate_general", None)  # any engine call would fail loudly
    monkeypatch.setattr(dispatch, "simulate_phase_service", None)
    monkeypatch.setattr(dispatch, "simulate_classes", None)
    monkeypatch.setattr(run, "execute", None, raising=False)
    for load, shown in (("1.2", r"1\.2"), ("1", "1")):  # load 1 exactly: no equilibrium either
        with pytest.raises(ValueError, match=rf"^precision: at load λ = {shown} >= 1 the chain has no equilibrium"):
            sm.simulate(30, 2, load, precision=0.01, time=10.0, **kw)
    sm.simulate(30, 2, "1.2", time=5.0, replications=2, seed=1, **kw) if not kw else None  # a finite horizon runs
