"""Measurements a sweep can run: one :class:`Measurement` of :data:`REGISTRY` each (docs/sweep.md,
"Python"); an adapter returns the library result's ``to_dict()``, :func:`flatten` makes it a row."""

from __future__ import annotations

import importlib
import math
import numbers
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..fluctuations import REGIMES
from ..model import Params, spawn_seeds
from ..simulation import ENGINES, TIME_MODES
from ..system import policies as _pol
from . import values as v

_EPS = v.bounded(minimum=1e-12, maximum=0.1)
_GRID_NDL = {"n": v.count, "d": v.count, "load": v.load, "alpha": v.positive, "beta": v.positive}


# dispatch rules, service laws, server classes: checked by the library's own parsers (same messages)
def _policy(key: str, value: object) -> str:
    from ..system.policies import check_policy

    return check_policy(value)


def _service(key: str, value: object) -> str:
    from ..system.service import parse_service

    if not isinstance(value, str):  # parse_service also takes a ServiceLaw; a sweep file holds text
        raise TypeError(
            f"service must be a string (exp, erlang:K, hyperexp:SCV, ph:FILE.json, lognormal:SCV, "
            f"pareto:ALPHA, deterministic); got {value!r} ({type(value).__name__})"
        )
    return parse_service(value).spec


def _server_classes(key: str, value: object) -> str:
    from ..system.service import parse_server_classes

    if not isinstance(value, str):
        raise TypeError(
            f"server_classes must be a string FRACTION:SPEED,… (for example 0.5:2,0.5:1); "
            f"got {value!r} ({type(value).__name__})"
        )
    c = parse_server_classes(value)
    return ",".join(f"{_short_float(f)}:{_short_float(x)}" for f, x in zip(c.fractions, c.speeds))


def _short_float(x: float) -> str:
    """The shortest text of ``x`` that reads back as ``x`` (``0.5``, ``2``)."""
    g = f"{x:g}"
    return g if float(g) == x else repr(float(x))


@dataclass(frozen=True)
class Measurement:
    """One measurement: its keys (``key -> checker``), ``adapter(params, seed) -> dict``, ``rules(axes,
    err)`` between the keys of a block, ``derive(params) -> canonical params``, and its defaults.

    Examples
    --------
    >>> REGISTRY["theory"].deterministic
    True
    """

    name: str
    keys: dict
    adapter: Callable
    rules: Callable
    derive: Callable
    deterministic: bool = False  # no randomness: one replication
    defaults: dict = field(default_factory=dict)


# =========================================================================== results -> columns
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


# =========================================================================== adapters
def _import(measurement: str, module: str, name: str):
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise RuntimeError(
            f"measurement {measurement!r} is not available: {module}.{name} could not be "
            f"loaded ({type(exc).__name__}: {exc})"
        ) from None


def measure_theory(params: dict, seed: np.random.SeedSequence) -> dict:
    """Closed forms of docs/model.md §3–6, §8 (:func:`supermarket.theory.summary`)."""
    from .. import theory as th

    rep = th.summary(params["n"], params["d"], params["load"], params.get("eps", 0.1))
    rep.pop("params", None)
    if rep.get("theorem_1_2"):
        rep["theorem_1_2_applies"] = rep["theorem_1_2"]["applies"]
        rep["theorem_1_2"] = rep["theorem_1_2"]["conditions"]
    return rep


def _mean_field_system(params: dict) -> Any:
    """The :class:`~supermarket.system.spec.System` of a ``meanfield`` point (``n`` plays no part in a fixed point)."""
    from ..system.spec import System

    return System(
        None, params["d"], params["load"], rule=params.get("policy", "jsq-d"),
        service=params.get("service", "exp"), server_classes=params.get("server_classes"),
    )  # fmt: skip


def _law_or_classes(params: dict) -> bool:
    """Whether a ``meanfield`` point has a service law other than exp or server classes."""
    return params.get("service", "exp") != "exp" or params.get("server_classes") is not None


def mean_field_of(params: dict) -> str:
    """The mean field of a ``meanfield`` point, as :func:`supermarket.system.methods.mean_field` names it."""
    from ..system.methods import mean_field

    return mean_field(_mean_field_system(params))


def measure_meanfield(params: dict, seed: np.random.SeedSequence) -> dict:
    """Fixed point, refined mean field and linear noise at π (docs/model.md §3;
    :func:`supermarket.meanfield.refined_mean_field` and :func:`supermarket.meanfield.lna`); with a
    phase-type law or server classes, the fixed point of :func:`supermarket.meanfield.fixed_points.fixed_point_report`
    (what ``supermarket meanfield --service/--server-classes --json`` prints)."""
    if _law_or_classes(params):
        fixed_point_report = _import("meanfield", "supermarket.meanfield.fixed_points", "fixed_point_report")
        return fixed_point_report(_mean_field_system(params))
    refined_mean_field = _import("meanfield", "supermarket.meanfield", "refined_mean_field")
    lna = _import("meanfield", "supermarket.meanfield", "lna")
    d, lam = params["d"], params["load"]
    kw = {"policy": params["policy"]} if "policy" in params else {}  # only when given: old rows stay as they were
    if kw and mean_field_of(params) == "fluid":  # a discontinuous drift: the fluid fixed point (λ, 0, 0, …)
        from ..system.methods import fluid_note

        u1 = float(lam)
        return {"levels": 1, "fixed_point": np.array([u1]), "mean_queue_length": u1, "note": fluid_note(kw["policy"])}
    rmf = refined_mean_field(d, lam, **kw)
    out = {
        "levels": rmf.levels,
        "fixed_point": rmf.pi,
        "mean_queue_length": float(rmf.pi.sum()),
        "refined_V": rmf.V,
        "refined_sum_V": float(rmf.V.sum()),
    }
    if "n" in params:
        out["refined_u"] = rmf.mean(params["n"])
        out["refined_mean_queue_length"] = rmf.mean_queue_length(params["n"])
    cov = lna(d, lam, **kw).covariance
    out["lna_variance"] = np.diag(cov)
    out["lna_covariance"] = cov
    return out


def measure_simulate(params: dict, seed: np.random.SeedSequence) -> dict:
    """One replication of :func:`supermarket.simulation.simulate`; a partial (interrupted) run raises
    :class:`KeyboardInterrupt`.  The ``variance_reduction_*`` columns: docs/sweep.md, "Measurements"."""
    simulate = _import("simulate", "supermarket.simulation", "simulate")
    if params.get("engine") in LAW_ENGINES:
        return _measure_law(simulate, params, seed)
    kw = {k: params[k] for k in _SIMULATE_KWARGS if k in params}
    with warnings.catch_warnings():
        # the run's warnings are stored with the row (``notes``, ``reliable``, ``self_checks``):
        # printing them from a worker as raw Python warnings would only add noise to stderr
        warnings.simplefilter("ignore", RuntimeWarning)
        from ..simulation.run import CostWarning

        warnings.simplefilter("ignore", CostWarning)  # the sweep's own progress says how far it is
        res = simulate(
            params["n"], params["d"], params["load"], seed=seed, replications=1, workers=1, progress=False, **kw
        )
    if getattr(res, "partial", False):
        raise KeyboardInterrupt("the simulation was interrupted: its partial result is not stored")
    out = res.to_dict(per_replication=False)
    vr = out.get("variance_reduction") or {}
    out["variance_reduction"] = {k: vr.get(k) for k in VR_COLUMNS} | {
        k: x for k, x in vr.items() if k not in VR_COLUMNS
    }
    return out


# the quantities whose variance reduction a simulate row always has (null without control variates)
VR_COLUMNS = ("u_mean", "ud_mean", "mean_queue_length", "mean_sojourn_time", "good_set_fraction")

#: The engines of a grid point with a service law other than exp or server classes, as the row's
#: ``engine`` says (docs/sweep.md, "Dispatch rules, service laws and server classes"): the phase-type
#: count engine (docs/model.md §13), the count engine with classes (§15) and with a phase-type law too
#: (§15.7, on request: ``engine = "phase"``), the per-queue event engine (§14).
LAW_ENGINES = ("phase", "classes", "classes-phase", "event")


#: The row's name of each engine of :data:`supermarket.system.methods.ENGINES` beyond the profile engines.
_ROW_ENGINE = {"phase": "phase", "classes": "classes", "classes-phase": "classes-phase", "events": "event"}


def _system(params: dict) -> Any:
    """The :class:`~supermarket.system.spec.System` of a simulate grid point."""
    from ..system.spec import System

    return System(
        params["n"], params["d"], params["load"], rule=params.get("policy", "jsq-d"),
        replace=params.get("replace", True), service=params.get("service", "exp"),
        server_classes=params.get("server_classes"),
    )  # fmt: skip


def _requested(params: dict) -> str:
    engine = params.get("engine", "profile")
    return {"event": "events", "classes-phase": "phase", "classes": "profile"}.get(engine, engine)


def law_engine(params: dict) -> str:
    """The engine of :data:`LAW_ENGINES` that runs a grid point with a service law or server classes,
    as :func:`supermarket.system.methods.simulation_engine` chooses it for the point's ``engine``
    (the default, ``"events"``, or ``"phase"``), by its row's name.

    Examples
    --------
    >>> p = {"n": 10, "d": 2, "load": 0.5}
    >>> law_engine(p | {"service": "erlang:2"}), law_engine(p | {"service": "erlang:2", "engine": "events"})
    ('phase', 'event')
    >>> c = "0.5:2,0.5:1"
    >>> law_engine(p | {"server_classes": c}), law_engine(p | {"service": "hyperexp:4", "server_classes": c})
    ('classes', 'event')
    >>> law_engine(p | {"service": "hyperexp:4", "server_classes": c, "engine": "phase"})
    'classes-phase'
    >>> law_engine(p | {"service": "lognormal:4"})
    'event'
    """
    from ..system.methods import simulation_engine

    return _ROW_ENGINE[simulation_engine(_system(params), _requested(params))]


def _measure_law(simulate: Callable, params: dict, seed: np.random.SeedSequence) -> dict:
    """One replication on the engine the grid point names (:data:`LAW_ENGINES`), called exactly as
    ``simulate(n, d, load, seed=seed, **the point's keys)`` would be, and its row."""
    engine = params["engine"]
    keys = ("steps", "time", "burn_in", "replace", "policy", "service", "server_classes", "start")
    kw = {k: params[k] for k in keys + (("control_variates",) if engine != "event" else ()) if k in params}
    if engine in ("event", "classes-phase"):
        kw["engine"] = "events" if engine == "event" else "phase"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = simulate(
            params["n"], params["d"], params["load"], seed=seed, replications=1, workers=1, progress=False, **kw
        )
    if getattr(res, "interrupted", False) or getattr(res, "partial", False):
        raise KeyboardInterrupt("the simulation was interrupted: its partial result is not stored")
    d = res.to_dict()
    if engine in ("classes", "classes-phase"):
        return classes_row(d, engine)
    return {"phase": phase_row, "event": event_row}[engine](d)


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
    out: dict = {"engine": engine, "policy": d.get("policy"), "service": (d.get("service") or {}).get("spec", "exp")}
    classes = d.get("server_classes") or {}
    fr, sp = classes.get("fractions") or [1.0], classes.get("speeds") or [1.0]
    if len(fr) > 1 or any(x != 1.0 for x in sp):
        out["server_classes"] = ",".join(f"{_short_float(f)}:{_short_float(x)}" for f, x in zip(fr, sp))
    out.update(time_mode="continuous", sim_time=d.get("time"), burn_in_time=d.get("burn_in"))
    return out


def _means(out: dict, d: dict, kinds: dict) -> bool:
    """The mean queue length and the mean response times (``kinds``: column -> the result's key) with
    their errors, NaN unless trusted; whether every one is trusted."""
    mql, mql_se, ok_all = _estimate(d.get("mean_queue_length"))
    out.update(mean_queue_length=mql, mean_queue_length_stderr=mql_se, mean_queue_length_reliable=ok_all)
    for kind, key in kinds.items():
        m, se, ok = _estimate(d.get(key))
        ok_all &= ok
        out[f"{kind}_mean"], out[f"{kind}_stderr_mean"], out[f"{kind}_reliable_mean"] = m, se, ok
        if kind == "sojourn":
            out["mean_sojourn_time"], out["mean_sojourn_time_stderr"] = m, se
    return ok_all


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

    for key in ("mean_queue_length", "sojourn", "waiting"):
        note = (d.get(key) or {}).get("note")
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
    by Little's law (``sojourn_method = "little"``; no quantiles: the count engine follows no customer),
    the variance reductions, the self-checks; untrusted errors NaN.

    Examples
    --------
    >>> e = {"mean": 1.0, "stderr": 0.1, "reliable": True}
    >>> r = phase_row({"policy": "random", "service": {"spec": "erlang:2"}, "u_mean": [0.5], "u_stderr": [0.01],
    ...                "u_reliable": [True], "u_method": ["cv"], "u_plain_stderr": [0.02], "mean_queue_length": e,
    ...                "mean_queue_length_plain": e | {"stderr": 0.4}, "sojourn_little": e, "waiting_little": e,
    ...                "control_variates": True})
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
    out["reliable"] = _means(out, d, {"sojourn": "sojourn_little", "waiting": "waiting_little"})
    out["sojourn_method"] = SOJOURN_LITTLE
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
    "little"``) with the capacity-balance control variate and its variance reduction, per-class
    columns (``class1_…``); untrusted errors NaN.

    Examples
    --------
    >>> e = {"mean": 1.0, "stderr": 0.1, "reliable": True}
    >>> c = {"fraction": 0.5, "speed": 2.0, "u_mean": [0.4], "mean_queue_length": e, "sojourn": e}
    >>> r = classes_row({"policy": "jsq-d", "service": {"spec": "exp"}, "server_classes": {"fractions": [0.5, 0.5],
    ...     "speeds": [2.0, 1.0]}, "u_mean": [0.5], "u_stderr": [float("nan")], "mean_queue_length": e, "sojourn": e,
    ...     "waiting": e, "classes": [c, c | {"speed": 1.0}], "control_variates": True,
    ...     "variance_reduction": {"mean_queue_length": 4.0, "sojourn": 4.0}})
    >>> vr = r["variance_reduction"]
    >>> r["engine"], r["server_classes"], r["u_reliable"], r["class2_speed"], vr["mean_sojourn_time"]
    ('classes', '0.5:2,0.5:1', [False], 1.0, 4.0)
    """
    out = _head(d, engine)
    u_se = [_f(x) for x in d.get("u_stderr", [])]
    out.update(
        u_mean=[float(x) for x in d.get("u_mean", [])], u_stderr=u_se, u_reliable=[math.isfinite(x) for x in u_se]
    )
    out["reliable"] = _means(out, d, {"sojourn": "sojourn", "waiting": "waiting"})
    out["sojourn_method"] = SOJOURN_LITTLE
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
    >>> r = event_row({"policy": "jsq-d", "service": {"spec": "erlang:2"}, "u_mean": [0.5], "u_stderr": [0.1],
    ...                "mean_queue_length": e, "sojourn": e, "waiting": e, "time": 10.0, "burn_in": 1.0})
    >>> r["engine"], r["service"], r["mean_queue_length"], r["mean_queue_length_stderr"], r["u_stderr"]
    ('event', 'erlang:2', 2.0, nan, [nan])
    """
    out = _head(d, "event")
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
        m, se, ok = _estimate(d.get(kind))
        ok_all &= ok
        qs = {str(q): _estimate(e) for q, e in (d.get(f"{kind}_quantiles") or {}).items()}
        for j, what in enumerate(("", "_stderr", "_reliable")):  # value, error, reliable: of the mean, the quantiles
            out[f"{kind}{what}_mean"] = (m, se, ok)[j]
            out[f"{kind}{what}_quantiles"] = {q: x[j] for q, x in qs.items()}
        out[f"{kind}_long_enough_mean"] = _long_enough(d.get(kind))
        if kind == "sojourn":
            out["mean_sojourn_time"], out["mean_sojourn_time_stderr"] = m, se
    out["reliable"] = ok_all
    out["sojourn_method"] = SOJOURN_CUSTOMERS
    _class_columns(out, d.get("classes") or [] if "server_classes" in out else [])
    return _tail(out, d, False, {})


def measure_mixing(params: dict, seed: np.random.SeedSequence) -> dict:
    """One replication of :func:`supermarket.mixing.coalescence` (docs/model.md §2, §6)."""
    coalescence = _import("mixing", "supermarket.mixing", "coalescence")
    kw = {k: params[k] for k in ("start", "max_steps", "burn_in", "replace") if k in params}
    res = coalescence(params["n"], params["d"], params["load"], seed=seed, replications=1, workers=1, **kw)
    return res.to_dict()


def measure_fluctuations(params: dict, seed: np.random.SeedSequence) -> dict:
    """One replication of the paper-002 measurement (docs/model.md §8): the chain's scaled moments
    (``sim_*``), the limit diffusion's (``limit_*``) and the finite-n linear noise (``lna_*``)."""
    fl = importlib.import_module("supermarket.fluctuations")
    p = _regime(params)
    ss_sim, ss_lim = spawn_seeds(seed, 2)
    sim = fl.simulate_fluctuations(
        p, time=params.get("time", 200.0), burn_in=params.get("burn_in"), replications=1, seed=ss_sim, workers=1
    )
    if p.regime == "a":
        lim = fl.limit_closed_form(p.limit["kappa"]).to_dict()
        lim["method"] = "closed form (derived)"
    else:
        paths, sde_time, dt = _sde(params)
        lim = fl.limit_for(p, paths=paths, time=sde_time, dt=dt, seed=ss_lim, workers=1).to_dict()
        lim.pop("params", None)
    out = {"d_n": p.d, "lambda_n": p.lam} | {k: getattr(p, k) for k in _REGIME_FIELDS}
    out.update(warnings=list(p.warnings), sim=sim.to_dict(), limit=lim)
    try:
        out["lna"] = fl.lna_moments(p).to_dict()
    except (ValueError, np.linalg.LinAlgError) as exc:
        out["lna_note"] = f"not available: {exc}"
    return out


_REGIME_FIELDS = ("b_n", "kappa_n", "zeta_n", "d_one_minus_lambda", "coordinates")


def _regime(p: dict) -> Any:
    """The :func:`supermarket.fluctuations.regime_params` of a grid point."""
    fl = importlib.import_module("supermarket.fluctuations")
    kw = {k: p[k] for k in ("kappa", "c", "zeta", "d", "theta", "replace") if k in p}
    return fl.regime_params(p["regime"], p["n"], warn=False, **kw)


def _sde(p: dict) -> tuple[int, float, float]:
    """``(paths, time, dt)`` of the limit SDE of a grid point."""
    return p.get("sde_paths", 256), p.get("sde_time", 100.0), p.get("dt", 1e-3)


# =========================================================================== rules and derivations
def _rules_ndl(name: str, needs_n: bool, extra=None):
    def rules(axes, err):
        if ("load" in axes) == ("alpha" in axes):
            err("alpha" if "alpha" in axes else None, "give exactly one of 'load' and 'alpha' (λ = 1 − n^(−α))")
        if ("d" in axes) == ("beta" in axes):
            err("beta" if "beta" in axes else None, "give exactly one of 'd' and 'beta' (d = ⌊n^β⌋)")
        if ("alpha" in axes or "beta" in axes) and "n" not in axes:
            err("alpha" if "alpha" in axes else "beta", "alpha and beta need 'n'")
        if needs_n and "n" not in axes:
            err(None, "missing key 'n'")
        if extra is not None:
            extra(axes, err)

    return rules


def _rules_simulate(axes, err):
    if ("steps" in axes) == ("time" in axes):
        err("time" if "time" in axes else None, "give exactly one of 'steps' and 'time'")
    for key in ("target", "max_steps"):  # as simulate() refuses them without precision
        if key in axes and "precision" not in axes:
            err(key, f"'{key}' goes with 'precision' (a run to a target relative half-width); give precision too")


def _rules_fluct(axes, err):
    if "n" not in axes:
        err(None, "missing key 'n'")
    if "regime" not in axes:
        err(None, f"missing key 'regime' ({', '.join(REGIMES)})")


def _derive_ndl(name: str, needs_d2: bool, defaults: dict):
    def derive(params: dict) -> dict:
        p = dict(params)
        n: Any = p.get("n")  # present whenever alpha, beta or a simulate horizon needs it (the file's rules)
        if "alpha" in p:
            lam = 1.0 - float(n) ** (-p["alpha"])
            if not 0.0 < lam < 1.0:
                raise ValueError(f"λ = 1 − n^(−α) = {lam!r} is not in (0, 1)")
            p["load"] = lam
        if "beta" in p:
            if p["beta"] * math.log(float(n)) > math.log(2.0**62):
                raise ValueError(f"d = ⌊n^β⌋ = {n}^{p['beta']:g} is more than 2^62; lower beta")
            p["d"] = max(1, int(math.floor(float(n) ** p["beta"] * (1 + 1e-12))))
        if needs_d2 and p["d"] < 2:
            raise ValueError(f"measurement {name!r} needs d >= 2 (k_(λ,d) is defined for d >= 2); got d={p['d']}")
        Params(n if n is not None else max(p["d"], 1), p["d"], p["load"], replace=p.get("replace", True))
        engine = _check_simulate_axes(p) if name == "simulate" else None
        if name == "meanfield":
            _check_meanfield_point(p)
        if name == "mixing":  # the run's own checks: the rule, the start's memory, the burn-in's work
            _check_paper_point(p, "mixing")
            _check_mixing_plan(p)
        if name == "simulate" and engine is None:  # the run's own plan: what simulate() refuses, refused here
            _check_simulate_plan(p)
        elif name == "simulate":  # the horizon simulate() itself would refuse, refused with the file
            from ..simulation.run import _cost_of

            lam = float(p["load"])
            rate = n * (1.0 + lam) if engine is None else _event_rate(p, engine)
            events = p["steps"] if "steps" in p else p["time"] * rate
            burn = p.get("burn_in", events / 10.0) * (rate if "time" in p and "burn_in" in p else 1)
            try:
                _cost_of(events + burn, 1, 1)
            except ValueError as exc:
                raise PointError("steps" if "steps" in p else "time", str(exc)) from None
        for k, x in (_LAW_DEFAULTS[engine] if engine else defaults).items():
            p.setdefault(k, x)
        order = ["n", "d", "load", "alpha", "beta"]
        return {k: p[k] for k in order if k in p} | {k: x for k, x in sorted(p.items()) if k not in order}

    return derive


def _check_meanfield_point(p: dict) -> None:
    """Refuse, when the file is read, what ``supermarket meanfield`` refuses for the point (the one
    table, :mod:`supermarket.system.methods`): a law with no phase-type form, a rule whose drift is
    discontinuous with a law or classes, and ``n`` (the refined mean field) where it does not exist."""
    from ..system.methods import mean_field, refined_mean_field, smooth_mean_field

    if _law_or_classes(p):
        system = _mean_field_system(p)
        try:
            mean_field(system)
        except ValueError as exc:  # the table's reason names its key first ("service: …", "policy: …")
            key = {"lam": "load"}.get(str(exc).split(":", 1)[0], str(exc).split(":", 1)[0])
            raise PointError(key if key in p else "service", str(exc)) from None
        if "n" in p:
            try:
                refined_mean_field(system, "n")
            except ValueError as exc:
                raise PointError("n", str(exc)) from None
    elif "policy" in p and "n" in p:
        try:  # jsq and jiq: the fluid fixed point only, refused as the command refuses --n
            smooth_mean_field(p["policy"], "n")
        except ValueError as exc:
            raise PointError("n", str(exc)) from None


def _check_simulate_plan(p: dict) -> None:
    """Refuse a count-engine grid point exactly as :func:`measure_simulate`'s run would: the run's
    own plan (``simulation.run._plan``: horizon, cost, start and its per-level memory) is built with
    the arguments the run gets, and its error is raised as a :class:`PointError` on the key it names
    (the horizon's key when it names none of the point's keys)."""
    from ..simulation.run import _plan

    kw = {k: p[k] for k in _SIMULATE_KWARGS if k in p and k != "target"}  # the targets are simulate()'s
    try:
        _plan(p["n"], p["d"], p["load"], replications=1, workers=1, **kw)
    except (TypeError, ValueError) as exc:
        msg = str(exc)
        head = re.match(r"[a-z_]+", msg)
        key = head.group(0) if head and head.group(0) in p else ("steps" if "steps" in p else "time")
        raise PointError(key, msg) from None


def _check_paper_point(p: dict, method: str) -> None:
    """Refuse a ``mixing`` or ``fluctuations`` point whose rule, law or classes the method does
    not measure, as the command refuses them (:func:`supermarket.system.methods.paper_method`)."""
    from ..system.methods import paper_method
    from ..system.spec import System

    if not {"policy", "service", "server_classes"} & set(p):
        return
    system = System(
        None, 2, 0.5, rule=p.get("policy", "jsq-d"), service=p.get("service", "exp"),
        server_classes=p.get("server_classes"),
    )  # fmt: skip
    try:
        paper_method(system, method)
    except ValueError as exc:
        raise PointError(str(exc).split(":", 1)[0], str(exc)) from None


def _check_mixing_plan(p: dict) -> None:
    """Refuse a mixing grid point as :func:`measure_mixing`'s run would (its plan,
    ``mixing.coalescence_time.coalescence_plan``, for one replication on one worker), on the key the
    message names."""
    from ..mixing.coalescence_time import coalescence_plan

    kw = {k: p.get(k) for k in ("max_steps", "burn_in")}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a long run's warning is the run's to give, not the file check's
            coalescence_plan(p["n"], p["d"], p["load"], p.get("start", "good"), 1, kw["max_steps"], kw["burn_in"],
                  p.get("replace", True), 1)  # fmt: skip
    except (TypeError, ValueError) as exc:
        msg = str(exc)
        head = re.match(r"[a-z_]+", msg)
        if head and head.group(0) in p:
            raise PointError(head.group(0), msg) from None
        raise


def _event_rate(p: dict, engine: str) -> float:
    """Mean events per unit of time of a service-law or classes point on its engine (the cost
    check's count): the phase engine's exact rate ``n(λ + Σ_φ μ_φ λ(α(−T)^{-1})_φ)``, the classes
    engine's uniformized ``n s̄(1 + λ)``, the event engine's arrivals and departures ``2nλ s̄``.

    >>> _event_rate({"n": 10, "load": 0.5, "service": "erlang:2"}, "phase")  # 10(0.5 + 2·0.25 + 2·0.25)
    15.0
    >>> _event_rate({"n": 10, "load": 0.5, "server_classes": "0.5:2,0.5:1"}, "classes")
    22.5
    """
    from ..system.service import parse_server_classes, parse_service

    n, lam = float(p["n"]), float(p["load"])
    sbar = parse_server_classes(p["server_classes"]).mean_speed if p.get("server_classes") else 1.0
    if engine == "phase":
        law = parse_service(p.get("service", "exp"))
        busy = lam * np.linalg.solve(-np.asarray(law.T, float).T, np.asarray(law.alpha, float))
        return n * (lam + float(np.sum(-np.diag(np.asarray(law.T, float)) * busy)))
    if engine == "classes":
        return n * sbar * (1.0 + lam)
    if engine == "classes-phase":  # uniformized at the fastest phase: n s̄ (max_φ μ_φ + λ)
        law = parse_service(p.get("service", "exp"))
        return n * sbar * (float(np.max(-np.diag(np.asarray(law.T, float)))) + lam)
    return 2.0 * n * lam * sbar


class PointError(ValueError):
    """A grid point refused because of one key's value (``key``: the file line the error names)."""

    def __init__(self, key: str, msg: str):
        super().__init__(msg)
        self.key = key


def _policy_on(policy: str, engine: str) -> None:
    """Refuse a rule that the kernel ``engine`` (:data:`supermarket.system.policies.ENGINES`) does not run."""
    try:
        _pol.rule(policy, engine)
    except ValueError as e:
        raise PointError("policy", str(e)) from None


def _check_simulate_axes(p: dict) -> str | None:
    """Refuse, when the file is read, what :func:`supermarket.simulate` refuses for these axes (the
    engine and the options by the one table, :mod:`supermarket.system.methods`); for a point with a
    service law or server classes, drop the keys its engine ignores and return the engine
    (:data:`LAW_ENGINES`), else None (today's engines)."""
    from ..system.methods import Refusal, check_options, simulation_engine

    policy = p.get("policy", "jsq-d")
    system = _system(p)
    try:
        chosen = simulation_engine(system, _requested(p))
    except Refusal as exc:
        raise PointError("engine", str(exc)) from None
    _policy_on(policy, {"buckets": "profile"}.get(chosen, chosen))  # a rule its kernel runs (the registry)
    if chosen not in _ROW_ENGINE:
        if policy != "jsq-d" and p.get("start") == "perfect":
            raise PointError(
                "start",
                f"start 'perfect' samples the stationary law of JSQ(d) (policy 'jsq-d'); got "
                f"policy={policy!r}: use another start (and a burn-in)",
            )
        return None
    row = law_engine(p)  # the row's name (looked up here, so that a test may route as an earlier version)
    chosen = {name: key for key, name in _ROW_ENGINE.items()}[row]
    if "start" in p:  # as simulate reads it: "good" is "fixed-point"
        from ..system.states import parse_start

        start, value = parse_start(p["start"])
        p["start"] = start if value is None else p["start"]
    try:
        given = {key: p.get(key) for key in ("steps", "start", "time_mode", "eps", "precision")}
        check_options(system, chosen, given, time="time")
    except Refusal as exc:
        raise PointError(exc.key, str(exc)) from None
    # what simulate() accepts there and runs anyway (continuous time; the event engine has no control
    # variates): dropped, the row says what ran
    for key in ("engine", "time_mode") + (("control_variates",) if chosen == "events" else ()):
        p.pop(key, None)
    return row


_FLUCT_KEYS = {"a": {"kappa", "d", "theta"}, "b": {"c", "zeta"}, "c": {"zeta", "d"}}


def _derive_fluct(params: dict) -> dict:
    p = dict(params)
    reg = p["regime"]
    allowed = _FLUCT_KEYS[reg]
    used = sorted(k for k in set().union(*_FLUCT_KEYS.values()) - allowed if k in p)
    if used:
        raise ValueError(f"regime {reg!r} does not use {', '.join(used)} (it takes {', '.join(sorted(allowed))})")
    if reg == "a" and "kappa" not in p:
        raise ValueError("regime 'a' needs kappa")
    if reg == "a" and "d" in p and "theta" in p:
        raise ValueError("regime 'a' takes d or theta, not both")
    if reg == "b" and ("c" not in p or "zeta" not in p):
        raise ValueError("regime 'b' needs c and zeta")
    if reg == "c" and "zeta" not in p:
        raise ValueError("regime 'c' needs zeta")
    p.setdefault("replace", False)
    _check_paper_point(p, "fluctuations")
    _validate_fluct(p)
    order = ["n", "regime"]
    return {k: p[k] for k in order} | {k: x for k, x in sorted(p.items()) if k not in order}


def _validate_fluct(p: dict) -> None:
    """Refuse what the ``fluctuations`` command refuses (the regime's parameters, the SDE's cost)."""
    fp = _regime(p)
    if fp.regime != "a":  # regime (a) uses the closed form: no SDE
        from ..fluctuations import runs as _runs

        paths, sde_time, dt = _sde(p)
        if dt >= sde_time:
            raise ValueError(f"dt must be below sde_time = {sde_time:g}; got {dt!r}")
        # burn-in not counted: this is a lower bound of the work the task would refuse
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", _runs.WorkWarning)  # a long task is allowed; only refusals count
            _runs.check_work(
                paths * sde_time / dt,
                _runs.SDE_STEPS_PER_SECOND,
                f"the regime-({fp.regime}) limit diffusion: {paths} paths × time {sde_time:g} / dt {dt:g} needs steps",
                "lower sde_paths, sde_time or raise dt",
                1,
            )


# =========================================================================== the registry
_SIM_DEFAULTS = {"engine": "profile", "time_mode": "discrete", "replace": True, "start": "empty"}
_SIMULATE_KWARGS = ("steps", "time", "burn_in", *_SIM_DEFAULTS, "eps", "control_variates", "policy")  # passed on
_SIMULATE_KWARGS += ("precision", "target", "max_steps")
# a grid point on the per-queue event engine (a service law other than exp, or server classes)
_LAW_DEFAULTS = {e: {"engine": e, "time_mode": "continuous", "replace": True, "start": "empty"} for e in LAW_ENGINES}
_AXES_21 = {"policy": _policy, "service": _service, "server_classes": _server_classes}


def _ndl(name: str, keys: dict, adapter: Callable, needs_n=True, needs_d2=True, defaults=None, **kw) -> Measurement:
    """A measurement on the grid of ``n``, ``d`` or ``beta``, ``load`` or ``alpha``, plus ``keys``."""
    rules, derive = _rules_ndl(name, needs_n, kw.pop("extra", None)), _derive_ndl(name, needs_d2, defaults or {})
    return Measurement(name, _GRID_NDL | keys, adapter, rules, derive, defaults=defaults or {}, **kw)


_FLUCT_CHECKERS = dict(
    n=v.count, regime=v.choice(REGIMES), d=v.count, kappa=v.positive, theta=v.bounded(positive=True, maximum=0.5)
)
_FLUCT_CHECKERS |= dict(c=v.positive, zeta=v.real, time=v.positive, burn_in=v.nonneg, replace=v.boolean)
_FLUCT_CHECKERS |= dict(sde_paths=v.count, sde_time=v.positive, dt=v.positive)
_SIM_CHECKERS = dict(steps=v.count, time=v.positive, burn_in=v.count0, engine=v.choice((*ENGINES, "phase", "events")))
_SIM_CHECKERS |= dict(time_mode=v.choice(TIME_MODES), replace=v.boolean, start=v.start, eps=_EPS)
_SIM_CHECKERS["control_variates"] = v.boolean
_SIM_CHECKERS |= dict(precision=v.precision, target=v.target, max_steps=v.count)
_MIXING_CHECKERS = dict(start=v.start, max_steps=v.count, burn_in=v.count0, replace=v.boolean)

REGISTRY: dict[str, Measurement] = {
    m.name: m
    for m in (
        _ndl("theory", {"eps": _EPS}, measure_theory, deterministic=True),
        _ndl("meanfield", _AXES_21, measure_meanfield, needs_n=False, needs_d2=False, deterministic=True),
        _ndl("simulate", _SIM_CHECKERS | _AXES_21, measure_simulate, True, False, _SIM_DEFAULTS, extra=_rules_simulate),
        _ndl("mixing", _MIXING_CHECKERS | _AXES_21, measure_mixing, defaults={"start": "good"}),
        Measurement("fluctuations", _FLUCT_CHECKERS | _AXES_21, measure_fluctuations, _rules_fluct, _derive_fluct),
    )
}

# views of the registry
MEASUREMENTS: dict[str, Callable] = {name: m.adapter for name, m in REGISTRY.items()}
MEASUREMENT_KEYS: dict[str, dict] = {name: m.keys for name, m in REGISTRY.items()}
DETERMINISTIC = frozenset(name for name, m in REGISTRY.items() if m.deterministic)
