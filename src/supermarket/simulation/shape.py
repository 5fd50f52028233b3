"""The one JSON shape of what every result of :func:`supermarket.simulate` shares, whichever
engine ran it (issue #28, item 4): :func:`shared_block` writes those keys, with the same names
and the same shapes, for :class:`~supermarket.simulation.results.SimulationResult`,
:class:`~supermarket.simulation.phase_run.PhaseSimulationResult`,
:class:`~supermarket.simulation.classes.ClassesResult` and
:class:`~supermarket.simulation.general.GeneralResult`; each result's ``to_dict()`` is that block
followed by its engine's own keys, and ``result.shared()`` is the block alone.

The block (docs/simulate.md, "JSON"):

``engine``
    The engine that ran.
``time_mode``
    ``"discrete"`` (its jump chain, each step held for its mean holding time) or ``"continuous"``
    (exponential holding times, exact event times): docs/model.md §1.1.
``system``
    ``{n, d, load, load_text, policy, replace, service, server_classes}``: ``service`` is the
    law's ``ServiceLaw.to_dict()``, ``server_classes`` the classes' ``ServerClasses.to_dict()``
    (None without classes), ``load_text`` the load as typed on the command line (None from the
    library).
``events``, ``time``, ``burn_in``, ``burn_in_unit``, ``wall_s``, ``events_per_second``, ``replications``, ``batches``
    The horizon and the cost, each engine's own count (:data:`HORIZON`).
``u_mean``, ``u_stderr``
    ``E[u_ℓ]`` per level and its standard errors.
``mean_queue_length``
    An estimate dict (:func:`estimate_dict`): the error travels with the value.
``sojourn``, ``waiting``
    ``{mean: <estimate dict>, quantiles: {q: <estimate dict>}, source, ...}`` (None when λ >= 1
    on the profile engines): ``source`` ``"customers"`` where the engine follows customers or
    computes their law, ``"little"`` where the mean comes from Little's law (the count engines
    of another law or of classes: their quantiles are those of the law of what each arrival
    joins, ``quantile_source`` ``"joined"``, with ``law_mean``; docs/model.md §13.2).
``variance_reduction``, ``variance_reduction_note``
    ``(plain s.e./s.e.)²`` per quantity (``{}`` where no control variate is measured), and why
    there is none (``""`` where there is).
``classes``
    Per-class blocks (:func:`class_block`), ``[]`` on the engines without classes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "ESTIMATE_KEYS",
    "HORIZON",
    "SHARED_KEYS",
    "SYSTEM_KEYS",
    "class_block",
    "estimate_dict",
    "law_block",
    "response_block",
    "shared_block",
    "system_block",
]

#: The keys of every estimate dict, in order (an engine may add its own after them).
ESTIMATE_KEYS = ("mean", "stderr", "half_width", "dof", "n_eff", "reliable", "method", "note")
#: The keys of the ``system`` block, in order.
SYSTEM_KEYS = ("n", "d", "load", "load_text", "policy", "replace", "service", "server_classes")
#: The keys of the horizon and the cost (:func:`shared_block`'s ``horizon``), in order.
HORIZON_KEYS = ("events", "time", "burn_in", "wall_s", "events_per_second", "replications", "batches")
#: The keys every simulate result's ``to_dict()`` starts with, in order.
SHARED_KEYS = (
    "engine",
    "time_mode",
    "system",
    "events",
    "time",
    "burn_in",
    "burn_in_unit",
    "wall_s",
    "events_per_second",
    "replications",
    "batches",
    "u_mean",
    "u_stderr",
    "mean_queue_length",
    "sojourn",
    "waiting",
    "variance_reduction",
    "variance_reduction_note",
    "classes",
)
#: What ``events``, ``time`` and ``burn_in`` count on each engine (the numbers are the engines' own).
HORIZON = {
    "profile": "events and time measured after burn-in, all replications together; burn_in in events",
    "phase": "events measured after burn-in, all replications; time and burn_in per replication, in time units",
    "classes": "events simulated, burn-in included, all replications; time and burn_in per replication",
    "events": "events simulated, burn-in included, all replications; time and burn_in per replication",
}


def estimate_dict(e: Any, *, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """One estimate as the dict of :data:`ESTIMATE_KEYS` (then the attributes in ``extra``).

    Parameters
    ----------
    e : supermarket.stats.ErrorEstimate or supermarket.simulation.Estimate
        An :class:`~supermarket.stats.ErrorEstimate` gives its 95 % ``half_width`` (NaN where
        not reliable, as on the profile engines) and its ``blocks``; an
        :class:`~supermarket.simulation.Estimate` (profile engines) its fields, ``value`` as ``mean``.
    extra : tuple of str
        Further attributes of ``e`` to keep, after the shared keys.

    Returns
    -------
    dict
        ``mean``, ``stderr``, ``half_width``, ``dof``, ``n_eff``, ``reliable``, ``method``,
        ``note``, then ``blocks`` (an ErrorEstimate's) and ``extra``.

    Examples
    --------
    >>> from supermarket.stats import replication_error
    >>> d = estimate_dict(replication_error([1.0, 2.0, 3.0]))
    >>> list(d)[:8] == list(ESTIMATE_KEYS), d["mean"], d["dof"], round(d["half_width"], 4)
    (True, 2.0, 2.0, 2.4841)
    """
    if hasattr(e, "value"):  # the profile engines' Estimate
        out = {
            "mean": e.value,
            "stderr": e.stderr,
            "half_width": e.half_width,
            "dof": e.dof,
            "n_eff": e.n_eff,
            "reliable": bool(e.reliable),
            "method": e.method,
            "note": e.note,
        }
    else:
        ok = bool(e.reliable) and math.isfinite(e.stderr)
        out = {
            "mean": e.mean,
            "stderr": e.stderr,
            "half_width": e.half_width() if ok else math.nan,
            "dof": e.dof,
            "n_eff": e.n_eff,
            "reliable": bool(e.reliable),
            "method": e.method,
            "note": e.note,
            "blocks": e.blocks,
        }
    out.update((key, getattr(e, key)) for key in extra)
    return out


def response_block(mean: dict[str, Any], quantiles: dict[str, Any], source: str, **extra: Any) -> dict[str, Any]:
    """``sojourn`` or ``waiting``: ``{mean, quantiles, source, **extra}``.

    Parameters
    ----------
    mean : dict
        The estimate dict of the mean (:func:`estimate_dict`).
    quantiles : dict
        ``{q: estimate dict}`` (``{}`` where the engine gives none).
    source : str
        ``"customers"`` (the engine follows customers or computes their law) or ``"little"``
        (the mean by Little's law; quantiles, if any, from another source the ``**extra`` name).
    **extra
        The engine's own keys (``atom_at_zero``, ``stderr_kind`` on the profile engines).

    Returns
    -------
    dict
    """
    return {"mean": mean, "quantiles": {_qkey(q): v for q, v in quantiles.items()}, "source": source, **extra}


def _qkey(q: Any) -> str:
    """A quantile's key: ``"0.99"`` (as the response laws write it)."""
    q = float(q)
    return str(q) if q.is_integer() else repr(q)


def _point(mean: float, stderr: Any, method: str) -> dict[str, Any]:
    """The estimate dict of a value with only a standard error (a response-time law's mean or
    quantile on the profile engines): no ``half_width``, ``dof`` nor ``n_eff`` (NaN)."""
    se = math.nan if stderr is None else float(stderr)
    ok = math.isfinite(se)
    return {
        "mean": mean,
        "stderr": se,
        "half_width": math.nan,
        "dof": math.nan,
        "n_eff": math.nan,
        "reliable": ok,
        "method": method or "",
        "note": "" if ok else "error unknown",
    }


def law_block(law: Any) -> dict[str, Any]:
    """``sojourn`` or ``waiting`` of a response-time law (``supermarket.response.TimeLaw``, the
    profile engines'): the mean and each quantile as an estimate dict, ``atom_at_zero`` and
    ``stderr_kind`` after them.

    Returns
    -------
    dict
    """
    se = law.stderr or {"mean": None, "quantiles": {}}
    kind = law.stderr_kind or ""
    return response_block(
        _point(law.mean, se["mean"], kind),
        {q: _point(v, se["quantiles"].get(q), kind) for q, v in law.quantiles.items()},
        "customers",
        atom_at_zero=law.atom_at_zero,
        stderr_kind=law.stderr_kind,
    )


def system_block(
    n: int, d: int, load: float, policy: str, replace: bool, service: Any, server_classes: Any
) -> dict[str, Any]:
    """The ``system`` block (:data:`SYSTEM_KEYS`): ``service`` a ``ServiceLaw`` (or None:
    exponential), ``server_classes`` a ``ServerClasses`` or None; ``load_text`` None (the CLI
    writes the load as typed).

    Returns
    -------
    dict
    """
    from ..system.service import parse_service

    law = parse_service("exp") if service is None else service
    return {
        "n": n,
        "d": d,
        "load": load,
        "load_text": None,
        "policy": policy,
        "replace": bool(replace),
        "service": law.to_dict(),
        "server_classes": None if server_classes is None else server_classes.to_dict(),
    }


def class_block(c: Any) -> dict[str, Any]:
    """One class of servers: ``fraction``, ``speed``, ``servers``, ``u_mean``, ``u_stderr``, and
    the estimate dicts of ``mean_queue_length``, ``sojourn`` and ``waiting`` (None where the
    engine does not give the class's waiting time).

    Returns
    -------
    dict
    """
    w = getattr(c, "waiting", None)
    return {
        "fraction": c.fraction,
        "speed": c.speed,
        "servers": c.servers,
        "u_mean": c.u_mean,
        "u_stderr": c.u_stderr,
        "mean_queue_length": estimate_dict(c.mean_queue_length),
        "sojourn": estimate_dict(c.sojourn),
        "waiting": None if w is None else estimate_dict(w),
    }


def shared_block(
    *,
    engine: str,
    time_mode: str,
    system: dict[str, Any],
    horizon: Mapping[str, Any],
    u_mean: Any,
    u_stderr: Any,
    mean_queue_length: dict[str, Any],
    sojourn: dict[str, Any] | None,
    waiting: dict[str, Any] | None,
    variance_reduction: dict[str, Any] | None,
    variance_reduction_note: str = "",
    classes: Any = (),
) -> dict[str, Any]:
    """The keys of :data:`SHARED_KEYS`, in order: the one writer of the shape every simulate result
    shares (see the module's text).  Arrays become lists; NaN stays NaN (``to_jsonable`` writes it
    ``null`` in the JSON).

    Returns
    -------
    dict
    """
    if list(system) != list(SYSTEM_KEYS):
        raise ValueError(f"system must have the keys {SYSTEM_KEYS}; got {tuple(system)}")
    for name, e in (
        ("mean_queue_length", mean_queue_length),
        *((f"{k}.mean", None if r is None else r["mean"]) for k, r in (("sojourn", sojourn), ("waiting", waiting))),
    ):
        if e is not None and tuple(e)[: len(ESTIMATE_KEYS)] != ESTIMATE_KEYS:
            raise ValueError(f"{name} must be an estimate dict with the keys {ESTIMATE_KEYS}; got {tuple(e)}")
    if tuple(horizon) != HORIZON_KEYS:
        raise ValueError(f"horizon must have the keys {HORIZON_KEYS}; got {tuple(horizon)}")
    events, time, burn_in = horizon["events"], horizon["time"], horizon["burn_in"]
    if time_mode not in ("discrete", "continuous"):
        raise ValueError(f"time_mode must be 'discrete' or 'continuous'; got {time_mode!r}")
    block = {
        "engine": engine,
        "time_mode": time_mode,
        "system": system,
        "events": int(events),
        "time": float(time),
        "burn_in": burn_in,
        "burn_in_unit": "events" if engine == "profile" else "time",
        "wall_s": float(horizon["wall_s"]),
        "events_per_second": float(horizon["events_per_second"]),
        "replications": int(horizon["replications"]),
        "batches": int(horizon["batches"]),
        "u_mean": u_mean,
        "u_stderr": u_stderr,
        "mean_queue_length": mean_queue_length,
        "sojourn": sojourn,
        "waiting": waiting,
        "variance_reduction": {} if variance_reduction is None else variance_reduction,
        "variance_reduction_note": variance_reduction_note,
        "classes": [class_block(c) for c in classes],
    }
    return _lists(block)


def law_engine_fields(res: Any, *, server_classes: Any = None) -> dict[str, Any]:
    """The arguments of :func:`shared_block` that the law engines' results (phase, classes,
    classes-phase, events) hold under the same attribute names: ``system`` (from ``n, d, lam,
    policy, replace, service`` and ``server_classes``, or ``res.server_classes`` when not given),
    the horizon and cost, ``u_mean``, ``u_stderr``.

    Returns
    -------
    dict
    """
    sc = getattr(res, "server_classes", None) if server_classes is None else server_classes
    return dict(
        time_mode=res.time_mode,
        system=system_block(res.n, res.d, res.lam, res.policy, res.replace, res.service, sc),
        horizon={key: getattr(res, key) for key in HORIZON_KEYS},
        u_mean=res.u_mean,
        u_stderr=res.u_stderr,
    )


def _lists(x: Any) -> Any:
    """Arrays and tuples as lists, dict keys as strings; numbers as they are (NaN stays NaN, as in
    the profile engines' ``to_dict``: :func:`supermarket.jsonable.to_jsonable` makes it ``null``
    where the results' JSON is written)."""
    if isinstance(x, dict):
        return {str(k): _lists(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_lists(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    return x
