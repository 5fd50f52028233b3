"""Screens: no error bar on a quantity with no stationary value, and the checks that catch
mutations of the estimators' rules."""

from __future__ import annotations

import json
import math

from supermarket.simulation import simulate


def _assert_screened(e: dict, why: str) -> None:
    assert e["stderr"] is None or not math.isfinite(e["stderr"])
    assert e["reliable"] is False
    assert e["note"] == why


def test_pareto_infinite_variance_has_no_error_bar():
    r = simulate(50, 2, 0.9, seed=1, service="pareto:1.5", time=200.0, replications=2, progress=False)
    for e in (r.mean_queue_length, r.sojourn, r.waiting):
        assert math.isnan(e.stderr) and not e.reliable and e.note == "infinite in equilibrium"
    d = json.loads(json.dumps(r.to_dict()))
    for k in ("mean_queue_length", "sojourn", "waiting"):
        _assert_screened(d[k], "infinite in equilibrium")
    # quantiles exist in equilibrium: they keep their error bars
    assert all(e.reliable for e in r.sojourn_quantiles.values())
    line = r.summary().splitlines()[2]
    assert line.startswith("mean queue length") and "±" not in line and "infinite in equilibrium" in line


def test_pareto_finite_variance_keeps_error_bars():
    r = simulate(50, 2, 0.9, seed=1, service="pareto:3", time=200.0, replications=2, progress=False)
    assert r.mean_queue_length.reliable and math.isfinite(r.mean_queue_length.stderr)


def test_random_routing_overloaded_class_count_engine():
    r = simulate(50, 1, 0.9, seed=1, policy="random", server_classes="0.5:2,0.5:0.5", time=200.0, progress=False)
    why = "grows without bound (no stationary value)"
    for e in (r.mean_queue_length, r.sojourn, r.waiting):
        assert math.isnan(e.stderr) and not e.reliable and e.note == why
    fast, slow = r.classes
    assert fast.mean_queue_length.reliable  # the fast class (load 0.5625) is stable
    assert not slow.mean_queue_length.reliable and slow.mean_queue_length.note == why
    text = r.summary()
    assert "grow without bound" in text  # the warning is on screen
    for line in text.splitlines():
        if line.startswith(("mean queue length", "class 0.5:0.5")):
            assert "±" not in line
    d = json.loads(json.dumps(r.to_dict()))
    _assert_screened(d["mean_queue_length"], why)


def test_random_routing_overloaded_class_event_engine():
    r = simulate(
        50,
        1,
        0.9,
        seed=1,
        policy="random",
        server_classes="0.5:2,0.5:0.5",
        service="erlang:2",
        time=200.0,
        replications=2,
        progress=False,
    )
    why = "grows without bound (no stationary value)"
    assert type(r).__name__ == "GeneralResult"
    for e in (r.mean_queue_length, r.sojourn, r.waiting, *r.sojourn_quantiles.values()):
        assert not e.reliable and e.note == why
    assert r.classes[0].mean_queue_length.reliable and not r.classes[1].mean_queue_length.reliable
    assert "±" not in r.summary().splitlines()[2]


def test_random_routing_stable_classes_keep_error_bars():
    r = simulate(50, 1, 0.5, seed=1, policy="random", server_classes="0.5:2,0.5:1", time=200.0, progress=False)
    assert r.mean_queue_length.note != "grows without bound (no stationary value)"
