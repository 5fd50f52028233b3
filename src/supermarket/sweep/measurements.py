"""Measurements a sweep can run: one :class:`Measurement` of :data:`REGISTRY` each (docs/sweep.md,
"Python"); an adapter returns the library result's ``to_dict()``, :func:`supermarket.sweep.rows.flatten`
makes it a row.  The rules between a block's keys and each point's checks are in
:mod:`supermarket.sweep.points`; the rows of the law engines in :mod:`supermarket.sweep.rows`."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..fluctuations import REGIMES
from ..model import spawn_seeds
from ..simulation import ENGINES, TIME_MODES
from . import values as v
from .points import (
    _REGIME_FIELDS,
    _SIM_DEFAULTS,
    _SIMULATE_KWARGS,
    LAW_ENGINES,
    _derive_fluct,
    _derive_ndl,
    _law_or_classes,
    _mean_field_system,
    _regime,
    _rules_fluct,
    _rules_ndl,
    _rules_simulate,
    _sde,
)
from .rows import VR_COLUMNS, _short_float, classes_row, event_row, phase_row, profile_row

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


def mean_field_of(params: dict) -> str:
    """The mean field of a ``meanfield`` point, as :func:`supermarket.system.methods.mean_field` names it."""
    from ..system.methods import mean_field

    return mean_field(_mean_field_system(params))


def measure_meanfield(params: dict, seed: np.random.SeedSequence) -> dict:
    """Fixed point, refined mean field and linear noise at π (docs/model.md §3;
    :func:`supermarket.meanfield.refined_mean_field` and :func:`supermarket.meanfield.lna`); with a
    phase-type law or server classes, the fixed point of :func:`supermarket.meanfield.fixed_points.fixed_point_report`
    (what ``supermarket meanfield --service/--server-classes --json`` prints); with a phase-type law
    and ``n``, also the refined mean field and the linear noise at π of
    :func:`supermarket.meanfield.refined_phase.phase_refined_mean_field` (docs/model.md §13), in
    the exponential point's keys; with server classes and ``n``, those of the pooled profile of
    :func:`supermarket.meanfield.refined_classes.classes_refined_mean_field` (§15.8), and per class
    ``refined_class_V`` and ``refined_class_u``."""
    if _law_or_classes(params):
        fixed_point_report = _import("meanfield", "supermarket.meanfield.fixed_points", "fixed_point_report")
        system = _mean_field_system(params)
        if "n" not in params:
            return fixed_point_report(system)
        # the point's check let n through: with replacement, a phase-type law or classes (the table's module)
        from ..system.methods import refined_mean_field as refined_module

        if refined_module(system, "n") == "refined_classes":
            prc = _import("meanfield", "supermarket.meanfield.refined_classes", "classes_refined_mean_field")
            r = prc(system.d, system.lam, system.server_classes, system.service, policy=system.rule)
            extra = {"refined_class_V": r.V_u, "refined_class_u": r.class_mean(params["n"])}
        else:
            prm = _import("meanfield", "supermarket.meanfield.refined_phase", "phase_refined_mean_field")
            r, extra = prm(system.d, system.lam, system.service, policy=system.rule), {}
        rep = fixed_point_report(system)
        rep |= {"refined_V": r.V, "refined_sum_V": float(r.V.sum())}
        rep |= {"refined_u": r.mean(params["n"]), "refined_mean_queue_length": r.mean_queue_length(params["n"])}
        return rep | extra | {"lna_variance": np.diag(r.W), "lna_covariance": r.W}
    refined_mean_field = _import("meanfield", "supermarket.meanfield", "refined_mean_field")
    lna = _import("meanfield", "supermarket.meanfield", "lna")
    d, lam = params["d"], params["load"]
    kw = {"policy": params["policy"]} if "policy" in params else {}  # only when given: old rows stay as they were
    if kw and mean_field_of(params) == "fluid":  # a discontinuous drift: the fluid fixed point (docs/model.md §2.1)
        from ..system.methods import fluid_note
        from ..system.policies import RULES

        rule = RULES[_mean_field_system(params).rule]
        if rule.uses_d:  # jbt(T = d): its levels 1..T
            u = rule.fixed_point(lam, int(d), int(d))
            return {
                "levels": int(d),
                "fixed_point": u,
                "mean_queue_length": float(u.sum()),
                "note": fluid_note(rule.name),
            }
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
    out = profile_row(res.to_dict(per_replication=False, cdf_points=params.get("cdf")))
    from ..system.methods import exact_load, no_equilibrium

    if exact_load(params["load"]) >= 1:  # the warning simulate gives, in the row as the law engines' rows have it
        said, notes = no_equilibrium(params["load"]), list(out.get("notes") or [])
        out["notes"] = notes if said in notes else [said, *notes]
    vr = out.get("variance_reduction") or {}
    out["variance_reduction"] = {k: vr.get(k) for k in VR_COLUMNS} | {
        k: x for k, x in vr.items() if k not in VR_COLUMNS
    }
    return out


def _measure_law(simulate: Callable, params: dict, seed: np.random.SeedSequence) -> dict:
    """One replication on the engine the grid point names (:data:`LAW_ENGINES`), called exactly as
    ``simulate(n, d, load, seed=seed, **the point's keys)`` would be, and its row."""
    engine = params["engine"]
    keys: tuple[str, ...] = ("steps", "time", "burn_in", "replace", "policy", "service", "server_classes", "start")
    keys += ("batches", "precision", "target", "max_steps", "record_every", "record_levels")
    kw = {k: params[k] for k in keys + (("control_variates",) if engine != "events" else ()) if k in params}
    if engine in ("events", "classes-phase"):
        kw["engine"] = "events" if engine == "events" else "phase"
    if "time_mode" in params:  # the engine's own or, on the phase-type count engine, exponential holding times
        kw["time_mode"] = params["time_mode"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = simulate(
            params["n"], params["d"], params["load"], seed=seed, replications=1, workers=1, progress=False, **kw
        )
    if getattr(res, "interrupted", False) or getattr(res, "partial", False):
        raise KeyboardInterrupt("the simulation was interrupted: its partial result is not stored")
    d = res.to_dict(cdf_points=params.get("cdf"))
    if engine in ("classes", "classes-phase"):
        return classes_row(d, engine)
    return {"phase": phase_row, "events": event_row}[engine](d)


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


# =========================================================================== the registry
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
_SIM_CHECKERS = dict(steps=v.count, time=v.positive, burn_in=v.burn_in, engine=v.choice((*ENGINES, "phase", "events")))
_SIM_CHECKERS |= dict(time_mode=v.choice(TIME_MODES), replace=v.boolean, start=v.start, eps=_EPS)
_SIM_CHECKERS["control_variates"] = v.boolean
_SIM_CHECKERS |= dict(precision=v.precision, target=v.target, max_steps=v.count, batches=v.count)
_SIM_CHECKERS |= dict(record_every=v.positive, record_levels=v.count, cdf=v.cdf_points, load=v.load_any)
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
