"""The columns of a sweep's row: a library result's ``to_dict()`` made flat (:func:`flatten`), and
the rows of the engines of a service law or server classes (:func:`phase_row`, :func:`classes_row`,
:func:`event_row`: the same columns whichever engine ran, docs/sweep.md, "Dispatch rules, service
laws and server classes")."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

# the quantities whose variance reduction a simulate row always has (null without control variates)
VR_COLUMNS = ("u_mean", "ud_mean", "mean_queue_length", "mean_sojourn_time", "good_set_fraction")


def _short_float(x: float) -> str:
    """The shortest text of ``x`` that reads back as ``x`` (``0.5``, ``2``)."""
    g = f"{x:g}"
    return g if float(g) == x else repr(float(x))


_SCALARS: tuple[tuple[Any, Callable], ...] = (((bool, np.bool_), bool), (numbers.Integral, int), (numbers.Real, float))


def scalar(x: object) -> bool | int | float | str | None:
    """A plain Python scalar (bool, int, float, str or None) from a NumPy or Python value."""
    if x is None or isinstance(x, str):
        return x
    return next((to(x) for kind, to in _SCALARS if isinstance(x, kind)), str(x))


def _plain(x):
    if isinstance(x, dict):
        return {str(k): _plain(y) for k, y in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(y) for y in x]
    if isinstance(x, np.ndarray):
        return _plain(x.tolist())
    return scalar(x)


def flatten(d: dict, prefix: str = "") -> dict:
    """Columns of a result's ``to_dict()``: nested mappings with identifier keys become ``outer_inner``.

    >>> flatten({"a": {"b": 1, "c": [1, 2]}, "m": {"3": 0.5}})
    {'a_b': 1, 'a_c': [1, 2], 'm': {'3': 0.5}}
    """
    out = {}
    for k, x in d.items():
        name = f"{prefix}{k}"
        if isinstance(x, dict) and x and all(isinstance(y, str) and y.isidentifier() for y in x):
            out.update(flatten(x, name + "_"))
        else:
            out[name] = _plain(x)
    return out


def _long_enough(e: dict | None) -> bool:
    """Whether an event-engine estimate found its blocking plateau (reliable, or one replication only)."""
    from ..simulation.general.run import ONE_REPLICATION_NOTE

    if not e:
        return False
    return bool(e.get("reliable")) or e.get("note") == ONE_REPLICATION_NOTE


def _estimate(e: dict | None) -> tuple[float, float, bool]:
    """(value, error, reliable) of an ``ErrorEstimate.to_dict()``; the error is NaN unless trusted."""
    if not e:
        return math.nan, math.nan, False
    mean = float(e.get("mean", math.nan))
    se = e.get("stderr")
    if se is None or not bool(e.get("reliable", False)) or not math.isfinite(float(se)):
        return mean, math.nan, False
    return mean, float(se), True


def _head(d: dict, engine: str) -> dict:
    """The columns every row of :data:`LAW_ENGINES` starts with: what ran, on which law, for how long."""
    system = d.get("system") or {}
    out: dict = {"engine": engine, "policy": system.get("policy")}
    out["service"] = (system.get("service") or {}).get("spec", "exp")
    classes = system.get("server_classes") or {}
    fr, sp = classes.get("fractions") or [1.0], classes.get("speeds") or [1.0]
    if len(fr) > 1 or any(x != 1.0 for x in sp):
        out["server_classes"] = ",".join(f"{_short_float(f)}:{_short_float(x)}" for f, x in zip(fr, sp))
    out.update(time_mode=d.get("time_mode"), sim_time=d.get("time"), burn_in_time=d.get("burn_in"))
    return out


def _mean_of(d: dict, kind: str) -> dict | None:
    """The estimate dict of the mean of ``d[kind]`` (``sojourn`` or ``waiting``: ``{mean, quantiles, …}``)."""
    return (d.get(kind) or {}).get("mean")


def _means(out: dict, d: dict) -> bool:
    """The mean queue length and the mean response times with their errors, NaN unless trusted;
    whether every one is trusted."""
    mql, mql_se, ok_all = _estimate(d.get("mean_queue_length"))
    out.update(mean_queue_length=mql, mean_queue_length_stderr=mql_se, mean_queue_length_reliable=ok_all)
    for kind in ("sojourn", "waiting"):
        m, se, ok = _estimate(_mean_of(d, kind))
        ok_all &= ok
        out[f"{kind}_mean"], out[f"{kind}_stderr_mean"], out[f"{kind}_reliable_mean"] = m, se, ok
        if kind == "sojourn":
            out["mean_sojourn_time"], out["mean_sojourn_time_stderr"] = m, se
    return ok_all


def _quantile_columns(out: dict, d: dict) -> None:
    """``sojourn_quantiles``, ``waiting_quantiles`` (level -> value) and their ``_stderr_`` (NaN
    unless trusted) and ``_reliable_`` twins: the event engine's, measured on the customers, and
    the count engines', from the law of what each arrival joins (``quantile_source: "joined"``)."""
    for kind in ("sojourn", "waiting"):
        qs = {str(q): _estimate(e) for q, e in ((d.get(kind) or {}).get("quantiles") or {}).items()}
        for j, what in enumerate(("", "_stderr", "_reliable")):  # value, error, reliable of each quantile
            out[f"{kind}{what}_quantiles"] = {q: x[j] for q, x in qs.items()}


def _class_columns(out: dict, classes: list) -> None:
    """``class1_fraction``, ``class1_speed``, ``class1_u_mean``, ``class1_mean_queue_length``,
    ``class1_sojourn_mean`` (each estimate with ``_stderr``, NaN unless trusted, and ``_reliable``), …"""
    for i, c in enumerate(classes, start=1):
        out[f"class{i}_fraction"], out[f"class{i}_speed"] = c.get("fraction"), c.get("speed")
        out[f"class{i}_u_mean"] = [float(x) for x in c.get("u_mean", [])]
        for name in ("mean_queue_length", "sojourn"):
            m, se, ok = _estimate(c.get(name))
            col = f"class{i}_{name}" + ("_mean" if name == "sojourn" else "")
            out[col], out[f"{col}_stderr"], out[f"{col}_reliable"] = m, se, ok


def _tail(out: dict, d: dict, control_variates: bool, vr: dict) -> dict:
    for k in ("events", "events_per_second", "customers", "batches"):
        if k in d:
            out[k] = d[k]
    out.update(wall_time=d.get("wall_s"), control_variates=control_variates)
    out["variance_reduction"] = {k: vr.get(k) for k in VR_COLUMNS}
    out["notes"] = list(d.get("notes") or [])
    out["no_stationary_value"] = _no_stationary_value(d)
    if d.get("precision") is not None:  # a precision point: how the target went, as the profile's row
        out["precision"] = d["precision"]
    for key in ("cdf", "trajectory"):  # with cdf, record_every: as the profile's row (trajectory_t, cdf_t, …)
        if d.get(key) is not None:
            out[key] = d[key]
    return out


def _no_stationary_value(d: dict) -> str | None:
    """Why the row's means have no error bar at all, or None: ``"infinite in equilibrium"`` (a
    service law of infinite variance, pareto α ≤ 2) or ``"grows without bound (no stationary
    value)"`` (random routing with an overloaded class).  Such a row is ``reliable: false`` as
    one too short to trust; this column tells the two apart (docs/sweep.md, "Measurements").

    >>> _no_stationary_value({"mean_queue_length": {"note": "grows without bound (no stationary value)"}})
    'grows without bound (no stationary value)'
    >>> _no_stationary_value({"mean_queue_length": {"note": "too short"}}) is None
    True
    """
    from ..simulation.general.result import GROWING, INFINITE

    for e in (d.get("mean_queue_length"), _mean_of(d, "sojourn"), _mean_of(d, "waiting")):
        note = (e or {}).get("note")
        if note in (INFINITE, GROWING):
            return str(note)
    return None


def _f(x: object) -> float:
    """A finite float, or NaN (for None, NaN, ±inf: a JSON null is an unknown error)."""
    y = math.nan if x is None else float(x)  # type: ignore[arg-type]
    return y if math.isfinite(y) else math.nan


def _gain(plain: float | None, se: float | None) -> float | None:
    """``(plain s.e./control-variate s.e.)²``, or None where either is missing or the control did
    not reduce the error (the plain estimate was kept)."""
    if plain is None or se is None or not (math.isfinite(plain) and math.isfinite(se)) or not 0 < se < plain:
        return None
    return (plain / se) ** 2


#: ``sojourn_method``: how a row's mean response times were measured
SOJOURN_LITTLE = "little"  # Little's law from the mean queue length (derived: the count engines follow no customer)


SOJOURN_CUSTOMERS = "customers"  # averaged over the customers who left (the event engine)


def phase_row(d: dict) -> dict:
    """The sweep row of a :class:`supermarket.simulation.phase_run.PhaseSimulationResult`'s ``to_dict()``: the
    profile with the (I1) control variates, the mean queue length, the mean sojourn and waiting times
    by Little's law (``sojourn_method = "little"``), the sojourn and waiting quantiles from the law of
    what each arrival joins (:func:`_quantile_columns`),
    the variance reductions, the self-checks; untrusted errors NaN.

    Examples
    --------
    >>> e = {"mean": 1.0, "stderr": 0.1, "reliable": True}
    >>> r = phase_row({"system": {"policy": "random", "service": {"spec": "erlang:2"}}, "u_mean": [0.5],
    ...                "u_stderr": [0.01], "u_reliable": [True], "u_method": ["cv"], "u_plain_stderr": [0.02],
    ...                "mean_queue_length": e, "mean_queue_length_plain": e | {"stderr": 0.4},
    ...                "sojourn": {"mean": e}, "waiting": {"mean": e}, "control_variates": True})
    >>> vr = r["variance_reduction"]
    >>> r["engine"], r["sojourn_method"], vr["u_mean"], vr["mean_queue_length"]
    ('phase', 'little', [4.0], 16.0)
    """
    out = _head(d, "phase")
    ok = [bool(x) for x in d.get("u_reliable", [])]
    u_se = [_f(x) if r else math.nan for x, r in zip(d.get("u_stderr", []), ok)]
    out.update(
        u_mean=[float(x) for x in d.get("u_mean", [])], u_stderr=u_se, u_reliable=[math.isfinite(x) for x in u_se]
    )
    out["u_method"] = list(d.get("u_method") or [])
    out["reliable"] = _means(out, d)
    out["sojourn_method"] = SOJOURN_LITTLE
    _quantile_columns(out, d)
    plain = d.get("mean_queue_length_plain") or {}
    out.update(
        plain_u_mean=[float(x) for x in d.get("u_plain", [])],
        plain_mean_queue_length=plain.get("mean"),
        busy_fraction_z=d.get("busy_fraction_z"),
        flow_z=[_f(x) for x in d.get("flow_z", [])],
    )
    cv = bool(d.get("control_variates"))
    vr: dict = {}
    if cv:
        vr["u_mean"] = [
            _gain(p, s) if m == "cv" else None for p, s, m in zip(d.get("u_plain_stderr", []), u_se, out["u_method"])
        ]
        g = _gain(plain.get("stderr") if plain.get("reliable") else None, out["mean_queue_length_stderr"])
        vr["mean_queue_length"] = vr["mean_sojourn_time"] = g  # Little's law: the same ratio
    return _tail(out, d, cv, vr)


def classes_row(d: dict, engine: str = "classes") -> dict:
    """The sweep row of a :class:`supermarket.simulation.classes.ClassesResult`'s ``to_dict()``: the profile
    over all servers, the mean queue length and response times (Little's law, ``sojourn_method =
    "little"``; the quantiles from the law of what each arrival joins) with the capacity-balance
    control variate and its variance reduction, per-class
    columns (``class1_…``); untrusted errors NaN.

    Examples
    --------
    >>> e = {"mean": 1.0, "stderr": 0.1, "reliable": True}
    >>> c = {"fraction": 0.5, "speed": 2.0, "u_mean": [0.4], "mean_queue_length": e, "sojourn": e}
    >>> r = classes_row({"system": {"policy": "jsq-d", "service": {"spec": "exp"}, "server_classes": {
    ...     "fractions": [0.5, 0.5], "speeds": [2.0, 1.0]}}, "u_mean": [0.5], "u_stderr": [float("nan")],
    ...     "mean_queue_length": e, "sojourn": {"mean": e}, "waiting": {"mean": e}, "classes": [c, c | {"speed": 1.0}],
    ...     "control_variates": True, "variance_reduction": {"mean_queue_length": 4.0, "sojourn": 4.0}})
    >>> vr = r["variance_reduction"]
    >>> r["engine"], r["server_classes"], r["u_reliable"], r["class2_speed"], vr["mean_sojourn_time"]
    ('classes', '0.5:2,0.5:1', [False], 1.0, 4.0)
    """
    out = _head(d, engine)
    u_se = [_f(x) for x in d.get("u_stderr", [])]
    out.update(
        u_mean=[float(x) for x in d.get("u_mean", [])], u_stderr=u_se, u_reliable=[math.isfinite(x) for x in u_se]
    )
    out["reliable"] = _means(out, d)
    out["sojourn_method"] = SOJOURN_LITTLE
    _quantile_columns(out, d)
    _class_columns(out, d.get("classes") or [])
    bal = d.get("balance") or {}
    out["balance"] = bal.get("mean")
    cv = bool(d.get("control_variates"))
    got = d.get("variance_reduction") or {}
    vr: dict[str, float | None] = {}
    if cv and out["mean_queue_length_reliable"]:  # a ratio of errors the run trusts, else none
        for k, x in (("mean_queue_length", got.get("mean_queue_length")), ("mean_sojourn_time", got.get("sojourn"))):
            vr[k] = _f(x) if math.isfinite(_f(x)) else None
    return _tail(out, d, cv, vr)


def event_row(d: dict) -> dict:
    """The sweep row of a :class:`supermarket.simulation.general.GeneralResult`'s ``to_dict()``: the columns of a
    count-engine row where they mean the same, untrusted errors NaN (docs/sweep.md, "Dispatch rules…").

    Examples
    --------
    >>> e = {"mean": 2.0, "stderr": 0.1, "reliable": False}
    >>> r = event_row({"system": {"policy": "jsq-d", "service": {"spec": "erlang:2"}}, "u_mean": [0.5],
    ...                "u_stderr": [0.1], "mean_queue_length": e, "sojourn": {"mean": e}, "waiting": {"mean": e},
    ...                "time": 10.0, "burn_in": 1.0})
    >>> r["engine"], r["service"], r["mean_queue_length"], r["mean_queue_length_stderr"], r["u_stderr"]
    ('events', 'erlang:2', 2.0, nan, [nan])
    """
    out = _head(d, "events")
    mql, mql_se, mql_ok = _estimate(d.get("mean_queue_length"))
    u = [float(x) for x in d.get("u_mean", [])]
    # the u_i errors come from the same batches as the mean queue length: trusted together or not at all
    u_se = [float(x) if mql_ok and math.isfinite(float(x)) else math.nan for x in d.get("u_stderr", [])]
    out.update(u_mean=u, u_stderr=u_se, u_reliable=[math.isfinite(x) for x in u_se])
    out.update(
        mean_queue_length=mql,
        mean_queue_length_stderr=mql_se,
        mean_queue_length_reliable=mql_ok,
        mean_queue_length_long_enough=_long_enough(d.get("mean_queue_length")),
    )
    ok_all = mql_ok
    for kind in ("sojourn", "waiting"):
        m, se, ok = _estimate(_mean_of(d, kind))
        ok_all &= ok
        for j, what in enumerate(("", "_stderr", "_reliable")):  # value, error, reliable of the mean
            out[f"{kind}{what}_mean"] = (m, se, ok)[j]
        out[f"{kind}_long_enough_mean"] = _long_enough(_mean_of(d, kind))
        if kind == "sojourn":
            out["mean_sojourn_time"], out["mean_sojourn_time_stderr"] = m, se
    _quantile_columns(out, d)
    out["reliable"] = ok_all
    out["sojourn_method"] = SOJOURN_CUSTOMERS
    _class_columns(out, d.get("classes") or [] if "server_classes" in out else [])
    return _tail(out, d, False, {})


#: The keys the one shape of the simulate results added (:mod:`supermarket.simulation.shape`), not
#: columns of a profile-engine row: the sweep's columns keep their names (docs/sweep.md).
_SHAPE_ONLY = ("system", "events", "time", "wall_s", "burn_in_unit", "variance_reduction_note", "classes")


def _old_law(law: dict | None) -> dict | None:
    """A sojourn or waiting block in the columns of a profile row: ``mean``, ``quantiles`` (values),
    ``stderr`` (``{mean, quantiles, kind}``, None for an exact law), ``atom_at_zero``."""
    if law is None:
        return None
    qs = law.get("quantiles") or {}
    kind = law.get("stderr_kind")
    se = (
        None
        if kind is None
        else {
            "mean": law["mean"]["stderr"],
            "quantiles": {q: _f(e["stderr"]) for q, e in qs.items()},  # unknown: NaN, as the law holds it
            "kind": kind,
        }
    )
    return {
        "mean": law["mean"]["mean"],
        "quantiles": {q: e["mean"] for q, e in qs.items()},
        "stderr": se,
        "atom_at_zero": law.get("atom_at_zero"),
    }


def profile_row(d: dict) -> dict:
    """The sweep row of a :class:`supermarket.simulation.SimulationResult`'s ``to_dict()`` (before
    :func:`flatten`): its keys, with the shared block (:mod:`supermarket.simulation.shape`) written in
    the row's columns as they were named before it (``policy``, ``steps``, ``sim_time``,
    ``wall_time``, ``mean_queue_length`` and ``mean_queue_length_stderr``, …), so that a sweep's
    columns and its parts written earlier keep their names.

    Examples
    --------
    >>> e = {"mean": 1.5, "stderr": 0.1, "half_width": 0.2, "dof": 30.0, "n_eff": 31.0, "reliable": True,
    ...      "method": "blocking", "note": ""}
    >>> r = profile_row({"engine": "profile", "system": {"policy": "jsq-d"}, "events": 10, "time": 2.0,
    ...                  "wall_s": 0.1, "burn_in": 1, "mean_queue_length": e, "sojourn": None, "waiting": None})
    >>> r["policy"], r["steps"], r["sim_time"], r["mean_queue_length"], r["mean_queue_length_half_width"]
    ('jsq-d', 10, 2.0, 1.5, 0.2)
    """
    out = {k: v for k, v in d.items() if k not in _SHAPE_ONLY}
    mql = d["mean_queue_length"]
    out["policy"] = (d.get("system") or {}).get("policy")
    out.update(steps=d.get("events"), sim_time=d.get("time"), wall_time=d.get("wall_s"))
    out["mean_queue_length"] = mql["mean"]
    for k in ("stderr", "reliable", "half_width", "n_eff"):
        out[f"mean_queue_length_{k}"] = mql[k]
    out["sojourn"], out["waiting"] = _old_law(d.get("sojourn")), _old_law(d.get("waiting"))
    return out
