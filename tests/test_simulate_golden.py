"""Golden hashes of ``simulate``'s JSON and text for a fixed seed: a refactor of
:mod:`supermarket.simulation` must leave both bit-identical.

Each case is a small run (well under a second) covering an engine, a time mode, sampling
with or without replacement, replications, ``precision``, ``start="perfect"``, control
variates on and off, a load ``λ >= 1`` and trajectory records.  The wall time and speed
(the only fields that vary from run to run) are masked before hashing.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings

import pytest

from supermarket.simulation import simulate

CASES = {
    "profile-discrete-cv": dict(n=100, d=2, lam=0.9, steps=50_000, seed=1, start="fixed-point"),
    "queues-continuous-noreplace-plain": dict(
        n=50, d=3, lam=0.7, time=400.0, seed=2, replace=False, time_mode="continuous", control_variates=False
    ),
    "buckets-replications": dict(
        n=40, d=2, lam=0.8, steps=30_000, seed=3, engine="buckets", replications=3, workers=1, start="fixed-point"
    ),
    "profile-precision": dict(n=30, d=2, lam=0.6, steps=8_192, seed=4, precision=0.05, start="fixed-point"),
    "profile-perfect-continuous": dict(
        n=30, d=2, lam=0.8, steps=20_000, seed=5, start="perfect", time_mode="continuous"
    ),
    "profile-overload": dict(n=50, d=2, lam=1.1, steps=20_000, seed=6),
    "queues-records-noreplace": dict(
        n=60,
        d=2,
        lam=0.85,
        steps=30_000,
        seed=7,
        engine="queues",
        replace=False,
        record_every=1000,
        record_levels=4,
        start="fixed-point",
        burn_in=5000,
        batches=256,
    ),
    "buckets-d1-continuous-time": dict(
        n=20,
        d=1,
        lam=0.5,
        time=300.0,
        burn_in=30.0,
        seed=8,
        engine="buckets",
        time_mode="continuous",
        replications=2,
        workers=2,
    ),
}

GOLDEN = {  # JSON: the new key "policy", then the skew-aware half-widths (stderr values unchanged)
    "buckets-d1-continuous-time": (
        "cdfcfeb26b29a411e8525df98ec3cfcdbce0d98dea640729698bfc336469e18a",
        "322c96ee8778c0613b51c0df2792601b211353bdcbefe9c994cd97c0d0d3ae9e",
    ),
    "buckets-replications": (
        "c53825f954bd95c37be5ae0c15416e3fb55bbe962978286db7ef7b716e05c322",
        "17784650bede81191736e15b5edde7cc401880023ad7fc8d5e379d9e19c1be29",
    ),
    "profile-discrete-cv": (
        "29326a6f787ef061e8e1db83d68fcd81b28016b5245af259d198f1e73008370f",
        "72dbaf205b913abec8d6c92abe193ad94d184d5fbf338b1dcdc721305584c677",
    ),
    "profile-overload": (
        "ffb6e5f924b538d28572576d9493d463879ccde7a811b9c40c73da976c2ab964",
        "e0ed3a94e31d6c09902a3e643f34bca11b0e7fa4e7d573a27fb9df6ba178e254",
    ),
    "profile-perfect-continuous": (
        "8d90320bd11064495fac27d4ff5f893d55617f9f826de9f1d02afafefcf381fa",
        "a080a10888f876529171652accf47371b79dc7c7aa1a88ea17574ca3c5a02ee1",
    ),
    "profile-precision": (
        "274c8a0f818a2675c2ae686b786b7f18fb2da0c12c95f751f2199294e5aab0c9",
        "bc4108f42ccfca3624c6e28b0f0d2e171905d618590f75ab3089a5c0d7971051",
    ),
    "queues-continuous-noreplace-plain": (
        "893c34ea084bd0a8b4ad5bc1e1658a1fa2cb3245ca3be271837b81aa1623760c",
        "d6c450e12b48ac8557a824043c49573c4354e21ada9599f4aa3c66b6352ae157",
    ),
    "queues-records-noreplace": (
        "3a227326b818bbfb1221b070d4a8dcfd5873e0aa1c1893f7b4fad3bdac6d641b",
        "c2951f02d1550de788381a3a0f2cb24a5332f320a660b328c43d1737a796dfd3",
    ),
}

_TIMING = ("wall_time", "events_per_second")


def _mask(d):
    if isinstance(d, dict):
        return {k: (None if k in _TIMING else _mask(v)) for k, v in d.items()}
    if isinstance(d, list):
        return [_mask(v) for v in d]
    return d


def _hashes(kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = simulate(progress=False, **kw)
    js = json.dumps(_mask(r.to_dict(cdf_points=5 if r.response is not None else None)), sort_keys=True)
    text = re.sub(r"\n[^\n]*million events per second[^\n]*$", "", r.summary())
    return hashlib.sha256(js.encode()).hexdigest(), hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("name", sorted(CASES))
def test_simulate_output_is_unchanged(name):
    assert _hashes(CASES[name]) == GOLDEN[name]


if __name__ == "__main__":  # print the table for GOLDEN (after a change meant to alter the output)
    for name in sorted(CASES):
        print(f"    {name!r}: {_hashes(CASES[name])!r},")


def test_windowed_tables_give_the_same_run_through_the_plan():
    """The private ``force_window`` field of the run plan (no longer a keyword of
    ``simulate``) runs the windowed P tables of large n at small n: bit for bit the run of
    the full table (both are exact tables of the same probabilities)."""
    import dataclasses
    import inspect

    from supermarket.simulation import run

    assert "_force_window" not in inspect.signature(simulate).parameters
    kw = dict(CASES["queues-records-noreplace"])
    n, d, lam = kw.pop("n"), kw.pop("d"), kw.pop("lam")
    plan = run._plan(n, d, lam, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = run._execute(plan, progress=False)
        windowed = run._execute(dataclasses.replace(plan, force_window=True), progress=False)
    assert json.dumps(_mask(full.to_dict())) == json.dumps(_mask(windowed.to_dict()))  # NaN != NaN in a dict


@pytest.mark.parametrize(
    "bad, name",
    [
        (dict(steps=0), "steps"),
        (dict(batches=0), "batches"),
        (dict(record_every=-1), "record_every"),
        (dict(precision=2.0), "precision"),
        (dict(control_variates="yes"), "control_variates"),
        (dict(precision=0.1, max_steps=2.5), "^max_steps must"),
        (dict(burn_in=1.5), "^burn_in must"),
    ],
)
def test_the_plan_names_the_bad_parameter(bad, name):
    from supermarket.simulation import run

    with pytest.raises((ValueError, TypeError), match=name):
        run._plan(100, 2, 0.9, **bad)
