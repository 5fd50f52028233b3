"""Golden hashes of ``simulate``'s JSON and text for a fixed seed: a refactor of
:mod:`supermarket.simulation` must leave both bit-identical.

Each case is a small run (well under a second) covering an engine, a time mode, sampling
with or without replacement, replications, ``precision``, ``start="perfect"``, control
variates on and off, a load ``λ >= 1`` and trajectory records.  The wall time and speed
(the only fields that vary from run to run) are masked before hashing, and every float of
the JSON is rounded to 9 significant digits (below 1e-12 in magnitude to 0): the means come
from the kernels bit for bit, but the error bars go through NumPy reductions and LAPACK,
whose last bits differ between CPUs.  Bit-identity of the means is pinned in
tests/test_control.py and tests/test_kernel_golden.py.
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

GOLDEN = {
    "buckets-d1-continuous-time": (
        "8ce27ae1b743d4cc184279385f3063bf36baeb202a0f4b5c1e9fc892fde26491",
        "322c96ee8778c0613b51c0df2792601b211353bdcbefe9c994cd97c0d0d3ae9e",
    ),
    "buckets-replications": (
        "8f8a128a7433aa2f838238a76809213e6c84d13b9b00eb31e8f7d764e8c7241b",
        "09fede9613b2373c7c3729891228dca0edb1e09cb53d290162c069d1b59095f9",
    ),
    "profile-discrete-cv": (
        "e3b5efae3d3a3cb739ca7740406ac97f7187f5a8135136e48453f1b08c8bda56",
        "72dbaf205b913abec8d6c92abe193ad94d184d5fbf338b1dcdc721305584c677",
    ),
    "profile-overload": (
        "9dff2761072a5dcff4228894a833d75df998ba56159cca197afea79f6756a2e6",
        "b00c036f9b1fdd7bff465122080120aa1f11c47639b6fa459d12283fc67335df",
    ),
    "profile-perfect-continuous": (
        "006a211d18d03e7ea8e2902aaf9e51cbc90f4a955649114da19cf81e947ebf1f",
        "29732149aa47b7d9b1407f57c1652b4abc87d544a855d57be48ad6c66fe865ec",
    ),
    "profile-precision": (
        "88ed7dc0d1ebe3c1adef19458ab19a3c06ede614f2f640719b5a491211029910",
        "20be26fff12e4908a8cfb13a1865262b14fd7a0f0725b914b653db02dd3635d8",
    ),
    "queues-continuous-noreplace-plain": (
        "58f7cd0d10b1acdb62d0cd236e95802c9b514953e4c092180253110840d041b4",
        "dee3ccd37a0205c37507da45754e3e94d8a1c2f83700622af2995d75edbb29f3",
    ),
    "queues-records-noreplace": (
        "1ca6bdc30986c438f3a2d02283b4bd68739ae598bdad0c03b0efcaf20dc72d6f",
        "c2951f02d1550de788381a3a0f2cb24a5332f320a660b328c43d1737a796dfd3",
    ),
}

_TIMING = ("wall_time", "events_per_second")


def _mask(d):
    if isinstance(d, dict):
        return {k: (None if k in _TIMING else _mask(v)) for k, v in d.items()}
    if isinstance(d, list):
        return [_mask(v) for v in d]
    if isinstance(d, float) and d == d and abs(d) != float("inf"):
        return 0.0 if abs(d) < 1e-12 else float(f"{d:.9g}")
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
