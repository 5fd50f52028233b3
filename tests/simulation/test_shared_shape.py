"""The one JSON shape of the simulate results (issue #28, item 4; supermarket.simulation.shape):
the four engines give the same shared keys with the same shapes, and the new entries of an
estimate dict (``half_width``, ``dof``) are the Student t facts they claim to be."""

from __future__ import annotations

import json
import warnings

import pytest
from scipy import stats

import supermarket as sm
from supermarket.jsonable import to_jsonable
from supermarket.simulation.shape import ESTIMATE_KEYS, SHARED_KEYS, SYSTEM_KEYS

LAM = 0.6
KW = {
    "profile": dict(start="fixed-point", replications=2),
    "events": dict(service="lognormal:2", replications=4),
    "phase": dict(service="erlang:2"),
    "classes": dict(server_classes="0.5:2,0.5:1"),
}


@pytest.fixture(scope="module")
def results():
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for engine, kw in KW.items():
            out[engine] = sm.simulate(30, 2, LAM, time=300.0, seed=2, progress=False, **kw)
    return out


def _types(x):
    """The shape of a JSON value: dict keys with their shapes, a list's element shape, a type name
    (None and numbers are one kind: an unknown number is null)."""
    if isinstance(x, dict):
        return {k: _types(v) for k, v in x.items()}
    if isinstance(x, list):
        return ["list"]
    if x is None or (isinstance(x, (int, float)) and not isinstance(x, bool)):
        return "number"
    return type(x).__name__


def _json(r) -> dict:
    return json.loads(json.dumps(to_jsonable(r.to_dict()), allow_nan=False))


def test_every_engine_starts_with_the_same_keys(results):
    for engine, r in results.items():
        d = _json(r)
        assert r.engine == d["engine"] == engine
        assert list(d)[: len(SHARED_KEYS)] == list(SHARED_KEYS), engine
        assert {k: d[k] for k in SHARED_KEYS} == json.loads(json.dumps(to_jsonable(r.shared()))), engine
        assert list(d["system"]) == list(SYSTEM_KEYS)
        assert d["system"]["load"] == LAM and d["system"]["n"] == 30 and d["system"]["load_text"] is None


def test_the_shared_values_have_the_same_shapes(results):
    shapes = {}
    for engine, r in results.items():
        d = _json(r)
        s = {k: _types(d[k]) for k in SHARED_KEYS if k not in ("classes", "variance_reduction")}
        est = {k: v for k, v in s["mean_queue_length"].items() if k in ESTIMATE_KEYS}
        for law in ("sojourn", "waiting"):
            assert list(s[law])[:3] == ["mean", "quantiles", "source"], engine
            for q in s[law]["quantiles"].values():  # each quantile an estimate dict ({} on the count engines)
                assert {k: v for k, v in q.items() if k in ESTIMATE_KEYS} == est, engine
            s[law] = {"mean": s[law]["mean"]}
        s["system"]["service"] = sorted(s["system"]["service"])  # the law's own keys (phases, ...)
        s["system"]["server_classes"] = "classes"  # None, or the classes' dict
        s["mean_queue_length"] = {k: v for k, v in s["mean_queue_length"].items() if k in ESTIMATE_KEYS}
        for law in ("sojourn", "waiting"):
            s[law]["mean"] = {k: v for k, v in s[law]["mean"].items() if k in ESTIMATE_KEYS}
        shapes[engine] = s
        assert isinstance(d["variance_reduction"], dict) and isinstance(d["variance_reduction_note"], str)
        assert bool(d["variance_reduction"]) != bool(d["variance_reduction_note"]), engine  # one or the other
    first = shapes["profile"]
    for engine, s in shapes.items():
        assert s == first, engine
    est = {k: ("str" if k in ("method", "note") else "bool" if k == "reliable" else "number") for k in ESTIMATE_KEYS}
    assert first["mean_queue_length"] == est


def test_estimate_dicts_carry_the_results_own_numbers(results):
    r = results["profile"]
    d = _json(r)
    m = d["mean_queue_length"]
    assert (m["mean"], m["stderr"], m["half_width"], m["n_eff"]) == (
        r.mean_queue_length,
        r.mean_queue_length_stderr,
        r.mean_queue_length_half_width,
        r.mean_queue_length_n_eff,
    )
    assert m["method"] == r.error_method == "pooled" and m["dof"] > 0
    for q, e in d["sojourn"]["quantiles"].items():
        assert e["mean"] == r.sojourn.quantiles[float(q)] and e["stderr"] == r.sojourn.stderr["quantiles"][float(q)]
    assert d["waiting"]["mean"]["mean"] == r.waiting.mean and d["sojourn"]["atom_at_zero"] == 0.0
    g = results["events"]
    ge = _json(g)
    assert ge["sojourn"]["mean"]["mean"] == g.sojourn.mean and ge["waiting"]["mean"]["stderr"] == g.waiting.stderr
    assert {float(q): e["mean"] for q, e in ge["sojourn"]["quantiles"].items()} == {
        q: e.mean for q, e in g.sojourn_quantiles.items()
    }
    assert [c["servers"] for c in _json(results["classes"])["classes"]] == [15, 15]


def test_half_width_is_student_t_on_the_degrees_of_freedom(results):
    # four replications: the spread of four means, t on 3 degrees of freedom (scipy, not the package)
    m = _json(results["events"])["mean_queue_length"]
    assert m["method"].startswith("replications") and m["dof"] == 3 and m["n_eff"] == 4
    assert m["half_width"] == pytest.approx(stats.t.ppf(0.975, 3) * m["stderr"], rel=1e-12)
    for engine in ("phase", "classes"):
        m = _json(results[engine])["mean_queue_length"]
        assert m["reliable"] and m["method"] == "blocking"
        assert m["half_width"] == pytest.approx(stats.t.ppf(0.975, m["dof"]) * m["stderr"], rel=1e-12)


def test_little_law_on_the_count_engines(results):
    # W = L/λ per unit of capacity (phase: service mean 1; classes: capacity s̄ = 1.5 per server)
    d = _json(results["phase"])
    assert d["sojourn"]["source"] == "little" and d["sojourn"]["quantile_source"] == "joined"
    assert set(d["sojourn"]["quantiles"]) == {"0.5", "0.9", "0.99", "0.999"}  # of the joined law (§13.2)
    assert d["sojourn"]["mean"]["mean"] == pytest.approx(d["mean_queue_length"]["mean"] / LAM, rel=1e-12)
    assert d["waiting"]["mean"]["mean"] == pytest.approx(d["sojourn"]["mean"]["mean"] - 1, rel=1e-12)
    c = _json(results["classes"])
    assert c["sojourn"]["mean"]["mean"] == pytest.approx(c["mean_queue_length"]["mean"] / (LAM * 1.5), rel=1e-12)
    assert _json(results["events"])["sojourn"]["source"] == "customers"


def test_no_error_bar_half_width_is_null():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = sm.simulate(50, 2, 0.9, seed=1, service="pareto:1.5", time=50.0, replications=2, progress=False)
    m = _json(r)["mean_queue_length"]
    assert m["reliable"] is False and m["half_width"] is None and m["note"] == "infinite in equilibrium"


def test_the_law_engines_horizon_keys_are_their_own_fields(results):
    """``events``, ``time``, ``burn_in``, ``replications``, ``batches`` of the shared block are the
    result's own fields, each under its name (time 300 and the default burn-in, a tenth of it,
    tell ``time`` and ``burn_in`` apart), and ``system.n``/``load`` the run's."""
    for engine in ("events", "phase", "classes"):
        r, d = results[engine], _json(results[engine])
        assert d["time"] == r.time and d["burn_in"] == r.burn_in and d["time"] != d["burn_in"], engine
        assert (d["events"], d["replications"], d["batches"]) == (r.events, r.replications, r.batches), engine
        assert d["system"]["n"] == 30 and d["system"]["load"] == LAM, engine
        assert d["u_mean"] == list(r.u_mean) and d["wall_s"] == r.wall_s, engine
