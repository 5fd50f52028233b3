"""Screens: no error bar on a quantity with no stationary value, and the checks that catch
mutations of the estimators' rules."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

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
    for e in (d["mean_queue_length"], d["sojourn"]["mean"], d["waiting"]["mean"]):
        _assert_screened(e, "infinite in equilibrium")
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


# ------------------------------------------------------------------ mutations the suite missed
def _shifted(target_z: float) -> np.ndarray:
    """An iid series whose first tenth is shifted so that first tenth against last half differ by
    exactly ``target_z`` of the start-up rule's standard error (σ·√(1/n_a + 1/n_b), σ from the
    blocking estimate of the series itself, as :func:`_start_up` computes it)."""
    from supermarket import stats as _st

    rng = np.random.default_rng(12345)
    base = rng.standard_normal(4000)
    na, nb = base.size // 10, base.size // 2
    mask = np.zeros(base.size, bool)
    mask[:na] = True
    s = 0.0
    for _ in range(50):  # fixed point: the shift changes the blocking estimate a little
        q = base + s * mask
        est = _st.blocking(q)
        sigma = est.stderr * math.sqrt(q.size)
        se = sigma * math.sqrt(1.0 / na + 1.0 / nb)
        gap = base[:na].mean() - base[nb:].mean()
        s = target_z * se - gap
    q = base + s * mask
    est = _st.blocking(q)
    assert est.reliable
    se = est.stderr * math.sqrt(q.size) * math.sqrt(1.0 / na + 1.0 / nb)
    assert abs((q[:na].mean() - q[nb:].mean()) / se - target_z) < 1e-6
    return q


def test_start_up_rule_acts_at_four_standard_errors_of_the_difference():
    """The 4σ rule counts the variance of both the first tenth and the last half: at 3.8σ of the
    difference nothing is dropped (without the last half's term the rule would act at 3.65σ)."""
    from supermarket.simulation.estimate import START_UP_Z, _start_up

    assert START_UP_Z == 4.0
    assert _start_up(_shifted(3.8)) == (0, True)
    assert _start_up(_shifted(4.5)) != (0, True)  # acted: something dropped, or not forgotten


@pytest.mark.parametrize("d,lam", [(2, 0.9), (3, 0.7)])
def test_refined_mean_field_drift_term_identity(d, lam):
    """Without replacement V = V(with replacement) + V_drift, V_drift = −A^{−1} g(π): the two solves
    share A and W (docs/model.md §3), so V − V_drift = V(replace=True) to rounding."""
    from supermarket.meanfield.corrections import refined_mean_field

    a = refined_mean_field(d, lam, replace=False)
    b = refined_mean_field(d, lam, replace=True, levels=a.levels)
    assert a.V_drift is not None and np.abs(a.V_drift).max() > 1e-3
    np.testing.assert_allclose(a.V - a.V_drift, b.V, rtol=1e-9, atol=1e-12)


def test_sweep_row_of_an_overloaded_class_has_no_error_bars():
    from supermarket.sweep.measurements import measure_simulate

    params = {"n": 50, "d": 1, "load": 0.9, "policy": "random", "server_classes": "0.5:2,0.5:0.5"}
    o = measure_simulate({**params, "engine": "classes", "time": 200.0}, np.random.SeedSequence(1))
    assert o["reliable"] is False
    for col in ("mean_queue_length", "class2_mean_queue_length", "class2_sojourn_mean"):
        assert math.isnan(o[f"{col}_stderr"]) and o[f"{col}_reliable"] is False
    assert o["class1_mean_queue_length_reliable"] is True
    assert any("grow without bound" in x for x in o["notes"])
