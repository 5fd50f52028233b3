"""A sweep's grid points: the rules between the keys of a block, and each point's derivation and
checks (docs/sweep.md, "Validation"): a point is refused when the file is read exactly as the
command or the library would refuse it, on the key the message names (:class:`PointError`)."""

from __future__ import annotations

import importlib
import math
import re
import warnings
from typing import Any

import numpy as np

from ..fluctuations import REGIMES
from ..model import Params
from ..system import policies as _pol
from ..system.methods import ENGINES as _ENGINES

_SIM_DEFAULTS = {"engine": "profile", "time_mode": "discrete", "replace": True, "start": "empty"}
_SIMULATE_KWARGS = ("steps", "time", "burn_in", *_SIM_DEFAULTS, "eps", "control_variates", "policy")  # passed on
_SIMULATE_KWARGS += ("precision", "target", "max_steps", "batches", "record_every", "record_levels")


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


#: The engines of a grid point with a service law other than exp or server classes, as the row's
#: ``engine`` says (docs/sweep.md, "Dispatch rules, service laws and server classes"): the phase-type
#: count engine (docs/model.md §13), the count engine with classes (§15) and with a phase-type law too
#: (§15.7, on request: ``engine = "phase"``), the per-queue event engine (§14).
LAW_ENGINES = ("phase", "classes", "classes-phase", "events")

#: Names of engines that earlier versions stored in rows and grid points: a stored row or a sweep file
#: that says ``engine = "event"`` means the event engine, ``"events"`` (read so; resumed stores match).
ENGINE_ALIASES = {"event": "events"}

#: The row's name of each engine of :data:`supermarket.system.methods.ENGINES` beyond the profile engines.
_ROW_ENGINE = {"phase": "phase", "classes": "classes", "classes-phase": "classes-phase", "events": "events"}


def stored_identity(params: dict) -> dict:
    """The parameters a grid point's ``point_hash`` is taken of: its canonical parameters with the
    engine spelled as the stores first hashed it (``"events"`` as ``"event"``) and a law point's time
    mode, when it is its engine's own (the first of :attr:`~supermarket.system.methods.Engine.time_modes`),
    as ``"continuous"``, the one spelling earlier versions stored for every law point, so that its
    seeds, its numbers and the parts already on disk stay those of earlier versions (the phase-type
    count engine's other mode, exponential holding times, is ``"continuous-exponential"``).

    >>> stored_identity({"n": 10, "engine": "events"}), stored_identity({"n": 10, "engine": "phase"})
    ({'n': 10, 'engine': 'event'}, {'n': 10, 'engine': 'phase'})
    >>> stored_identity({"n": 10, "engine": "classes", "time_mode": "discrete"})
    {'n': 10, 'engine': 'classes', 'time_mode': 'continuous'}
    >>> stored_identity({"n": 10, "engine": "phase", "time_mode": "continuous"})
    {'n': 10, 'engine': 'phase', 'time_mode': 'continuous-exponential'}
    """
    engine = params.get("engine")
    if engine not in LAW_ENGINES:
        return params
    out = {k: ("event" if k == "engine" and x == "events" else x) for k, x in params.items()}
    if "time_mode" in out:
        own = out["time_mode"] == _ENGINES[engine].time_modes[0]
        out["time_mode"] = "continuous" if own else f"{out['time_mode']}-exponential"
    return out


def current_names(row: dict) -> dict:
    """A stored row with the engine named as today (:data:`ENGINE_ALIASES`).

    >>> current_names({"engine": "event", "d": 2})
    {'engine': 'events', 'd': 2}
    """
    engine = row.get("engine")
    if not isinstance(engine, str) or engine not in ENGINE_ALIASES:
        return row
    return row | {"engine": ENGINE_ALIASES[engine]}


def _system(params: dict) -> Any:
    """The :class:`~supermarket.system.spec.System` of a simulate grid point."""
    from ..system.spec import System

    return System(
        params["n"], params["d"], params["load"], rule=params.get("policy", "jsq-d"),
        replace=params.get("replace", True), service=params.get("service", "exp"),
        server_classes=params.get("server_classes"),
    )  # fmt: skip


def _requested(params: dict) -> str | None:
    engine = params.get("engine")
    if engine is None:  # the default (jbt's is the event engine: system.methods.EVENTS_BY_DEFAULT)
        return None
    engine = ENGINE_ALIASES.get(engine, engine)
    return {"classes-phase": "phase", "classes": "profile"}.get(engine, engine)


def law_engine(params: dict) -> str:
    """The engine of :data:`LAW_ENGINES` that runs a grid point with a service law or server classes,
    as :func:`supermarket.system.methods.simulation_engine` chooses it for the point's ``engine``
    (the default, ``"events"``, or ``"phase"``), by its row's name.

    Examples
    --------
    >>> p = {"n": 10, "d": 2, "load": 0.5}
    >>> law_engine(p | {"service": "erlang:2"}), law_engine(p | {"service": "erlang:2", "engine": "events"})
    ('phase', 'events')
    >>> c = "0.5:2,0.5:1"
    >>> law_engine(p | {"server_classes": c}), law_engine(p | {"service": "hyperexp:4", "server_classes": c})
    ('classes', 'events')
    >>> law_engine(p | {"service": "hyperexp:4", "server_classes": c, "engine": "phase"})
    'classes-phase'
    >>> law_engine(p | {"service": "lognormal:4"})
    'events'
    """
    from ..system.methods import simulation_engine

    return _ROW_ENGINE[simulation_engine(_system(params), _requested(params), params.get("time_mode"))]


_REGIME_FIELDS = ("b_n", "kappa_n", "zeta_n", "d_one_minus_lambda", "coordinates")


def _regime(p: dict) -> Any:
    """The :func:`supermarket.fluctuations.regime_params` of a grid point."""
    fl = importlib.import_module("supermarket.fluctuations")
    kw = {k: p[k] for k in ("kappa", "c", "zeta", "d", "theta", "replace") if k in p}
    return fl.regime_params(p["regime"], p["n"], warn=False, **kw)


def _sde(p: dict) -> tuple[int, float, float]:
    """``(paths, time, dt)`` of the limit SDE of a grid point."""
    return p.get("sde_paths", 256), p.get("sde_time", 100.0), p.get("dt", 1e-3)


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
    if "steps" in axes and any(isinstance(x, float) for x in axes.get("burn_in", ())):
        x = next(x for x in axes["burn_in"] if isinstance(x, float))
        err("burn_in", f"burn_in must be a positive integer such as 1000 or 1e5 with steps (a burn-in in events; "
            f"a burn-in time goes with time, as simulate --burn-in-time); got {x!r}")  # fmt: skip
    for key in ("target", "max_steps"):  # as simulate() refuses them without precision
        if key in axes and "precision" not in axes:
            err(key, f"'{key}' goes with 'precision' (a run to a target relative half-width); give precision too")
    if "record_levels" in axes and "record_every" not in axes:  # as the law engines' check_record refuses it
        err("record_levels", "record_levels: goes with record_every (the grid of the records); give record_every too")


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
        stable = name != "simulate"  # simulate runs a finite horizon at load >= 1, as simulate --load 1
        Params(n if n is not None else max(p["d"], 1), p["d"], p["load"], replace=p.get("replace", True), stable=stable)
        engine = _check_simulate_axes(p) if name == "simulate" else None
        if name == "meanfield":
            _check_meanfield_point(p)
        if name == "mixing":  # the run's own checks: the rule, the start's memory, the burn-in's work
            _check_paper_point(p, "mixing")
            _check_mixing_plan(p)
        if name == "simulate" and engine is None:  # the run's own plan: what simulate() refuses, refused here
            _check_simulate_plan(p)
        elif name == "simulate":  # the horizon simulate() itself would refuse, refused with the file
            from ..simulation.plan import cost_of

            lam = float(p["load"])
            rate = n * (1.0 + lam) if engine is None else _event_rate(p, engine)
            events = p["steps"] if "steps" in p else p["time"] * rate
            burn = p.get("burn_in", events / 10.0) * (rate if "time" in p and "burn_in" in p else 1)
            try:
                cost_of(events + burn, 1, 1)
            except ValueError as exc:
                raise PointError("steps" if "steps" in p else "time", str(exc)) from None
        for k, x in (_LAW_DEFAULTS[engine] if engine else defaults).items():
            p.setdefault(k, x)
        order = ["n", "d", "load", "alpha", "beta"]
        return {k: p[k] for k in order if k in p} | {k: x for k, x in sorted(p.items()) if k not in order}

    return derive


def _check_meanfield_point(p: dict) -> None:
    """Refuse, when the file is read, what ``supermarket meanfield`` refuses for the point (the one
    table, :mod:`supermarket.system.methods`): a law with no phase-type form, ``n`` (the refined mean
    field) where it does not exist, and a ``jbt`` threshold ``d`` above the largest its fluid point
    is solved for (:data:`supermarket.meanfield.fluid.MAX_THRESHOLD`, as the command refuses ``--d``)."""
    from ..system.methods import mean_field, refined_mean_field, smooth_mean_field
    from ..system.policies import RULES

    rule = RULES.get(p.get("policy", "jsq-d"))
    if rule is not None and rule.uses_d and not rule.smooth:  # jbt(T = d): its fluid point holds T levels
        from ..meanfield.fluid import threshold

        try:  # the threshold the command takes, for every law and classes
            threshold(rule.name, p["d"])
        except (TypeError, ValueError) as exc:
            raise PointError("d", str(exc)) from None
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
    own plan (``simulation.plan.build_plan``: horizon, cost, start and its per-level memory) is built with
    the arguments the run gets, and its error is raised as a :class:`PointError` on the key it names
    (the horizon's key when it names none of the point's keys)."""
    from ..simulation.plan import build_plan

    kw = {k: p[k] for k in _SIMULATE_KWARGS if k in p and k != "target"}  # the targets are simulate()'s
    try:
        build_plan(p["n"], p["d"], p["load"], replications=1, workers=1, **kw)
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
    from ..system.methods import Refusal, check_options, exact_load, simulation_engine

    if p.get("cdf") is not None and exact_load(p["load"]) >= 1:  # as simulate --cdf refuses it
        raise PointError("cdf", "cdf: needs load < 1: with load >= 1 there is no equilibrium and no response-time law")
    policy = p.get("policy", "jsq-d")
    system = _system(p)
    try:
        chosen = simulation_engine(system, _requested(p), p.get("time_mode"))
    except Refusal as exc:
        raise PointError("engine", str(exc)) from None
    _policy_on(policy, {"buckets": "profile"}.get(chosen, chosen))  # a rule its kernel runs (the registry)
    if chosen not in _ROW_ENGINE:
        try:  # honoured or refused, never ignored: a good set the system has (docs/model.md §5)
            given = {k: p.get(k) for k in ("eps", "record_every", "cdf", "load")}  # the table's options of the point
            check_options(system, chosen, given, time="time")
        except Refusal as exc:
            raise PointError(exc.key, str(exc)) from None
        if p.get("start") == "perfect":  # the rules that are JSQ(d) chains; the sampler's refusal for the others
            from ..system.methods import perfect_sampler

            try:
                perfect_sampler(system)
            except ValueError as exc:
                raise PointError("start", f"start 'perfect': {exc}") from None
        return None
    row = law_engine(p)  # the row's name (looked up here, so that a test may route as an earlier version)
    chosen = {name: key for key, name in _ROW_ENGINE.items()}[row]
    if "start" in p:  # as simulate reads it: "good" is "fixed-point"
        from ..system.states import parse_start

        start, value = parse_start(p["start"])
        p["start"] = start if value is None else p["start"]
    try:
        given = {
            k: p.get(k) for k in ("steps", "start", "time_mode", "eps", "precision", "record_every", "cdf", "load")
        }
        check_options(system, chosen, given, time="time")
    except Refusal as exc:
        raise PointError(exc.key, str(exc)) from None
    _check_record(p, chosen, system)
    if p.get("precision") is not None and chosen == "events":  # the count engines run the loop per replication
        from ..system.methods import ENGINES

        raise PointError(
            "precision",
            f"precision: in a sweep {ENGINES[chosen].text} ({system.describe()}) has no precision target: its "
            "error bars come from the spread of independent replications, and a sweep point is one replication "
            "(supermarket simulate --precision runs the loop with its replications)",
        )
    if p.get("precision") is not None:  # the targets the law engines take, refused as simulate() refuses them
        from ..simulation.law_precision import law_targets
        from ..system.methods import ENGINES

        try:
            law_targets(p.get("target"), ENGINES[chosen].text)
        except ValueError as exc:
            raise PointError("target", str(exc)) from None
    # what simulate() accepts there and runs anyway (continuous time; the event engine has no control
    # variates): dropped, the row says what ran
    for key in ("engine",) + (("control_variates",) if chosen == "events" else ()):
        p.pop(key, None)
    return row


def _check_record(p: dict, engine: str, system: Any) -> None:
    """Refuse ``record_every``, ``record_levels`` of a law or classes point as its run would
    (:func:`supermarket.simulation.records.check_record`): a grid in events on the count engines,
    in time on the event engine, at most ``MAX_RECORDS`` records over the horizon in that unit."""
    if "record_every" not in p:
        return
    from ..simulation.records import check_record

    rate = _event_rate(p, _ROW_ENGINE[engine])
    unit = "time" if engine == "events" else "events"
    span = p["steps"] if "steps" in p else p["time"] * rate
    span = span / rate if unit == "time" else span
    try:
        check_record(p["record_every"], p.get("record_levels"), unit=unit, span=span, d=p["d"], lam=float(p["load"]))
    except (TypeError, ValueError) as exc:
        key = "record_levels" if str(exc).startswith("record_levels") else "record_every"
        raise PointError(key, str(exc)) from None


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


# a grid point on the per-queue event engine (a service law other than exp, or server classes)
_LAW_DEFAULTS = {
    e: {"engine": e, "time_mode": _ENGINES[e].time_modes[0], "replace": True, "start": "empty"} for e in LAW_ENGINES
}
