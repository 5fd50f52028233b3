"""Sizing by a latency target under every dispatch rule, with or without server classes
(docs/model.md §10, §15): :func:`design_rule_latency` gives the least ``d`` (a rule that reads
``d``: ``jsq-d``, ``jbt``) or, for a rule that reads none (``random``, ``jsq``, ``jiq``), whether
the target holds at the load and the largest load that meets it; the sojourn laws are those of
:mod:`.rule_sojourn`.  :func:`latency_method` says what serves a system, or refuses it with the
method table's reason (:func:`supermarket.system.methods.mean_field`), before any work;
:func:`verify_rule_latency` checks an answer with the event engine at finite ``n``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import check_positive_float, check_positive_int
from ..response import check_quantile
from ..result import Result
from ..system import methods
from ..system import policies as _pol
from ..system.spec import System
from .latency import DESIGN_KEYS, LOAD_MAX, LatencyDesign, _verdict, least_d_search
from .rule_sojourn import quantile_function
from .sojourn import _service_quantile, phase_form

__all__ = ["RuleLatencyDesign", "latency_method", "design_rule_latency", "verify_rule_latency", "MEAN_FIELD_NOTE"]

MEAN_FIELD_NOTE = "in the mean-field limit (n → ∞); at finite n use --verify"
"""What every answer here is, said with it."""

#: Largest ``d`` the least-d search tries (the mean field with classes takes ``d`` up to 10^6).
D_MAX = 10**6


@dataclass(frozen=True)
class RuleLatencyDesign(Result):
    """Answer of a latency-sizing question under one rule (docs/model.md §10, §15).

    ``question``: ``"least d"`` (a rule that reads ``d``, given the load) or ``"largest load"``;
    ``answer``: that ``d`` or load; ``achieved``: the sojourn quantile there; ``neighbour``: the
    quantile at ``d − 1`` or just above the load; ``holds`` and ``at_load``: for a rule that reads
    no ``d`` asked at a load, whether the target holds there and the quantile there; ``method``:
    what gave the sojourn law; ``note``: a fit, if any; ``verify``: the event-engine check.

    Examples
    --------
    >>> r = design_rule_latency("random", 0.99, 2 * math.log(100), load=0.3)   # M/M/1: λ = 1 − log(100)/T
    >>> r.question, r.holds, round(r.answer, 6)
    ('largest load', True, 0.5)
    """

    policy: str
    question: str
    quantile: float
    latency: float
    answer: float
    achieved: float
    neighbour: dict
    load: float | None
    d: int | None
    holds: bool | None
    at_load: float | None
    service: str
    server_classes: str | None
    method: str
    note: str
    floor: float
    checked: tuple
    monotone: bool
    capped: bool = False
    verify: dict | None = None

    _order = DESIGN_KEYS

    to_frame = LatencyDesign.to_frame  # the values checked, one row each (the same table)

    def summary(self) -> str:
        qn = f"p{100 * self.quantile:g}"
        where = f"policy {self.policy}, {self.service} service" + (
            f", server classes {self.server_classes}" if self.server_classes else ""
        )
        lines = []
        if self.question == "least d":
            nb = self.neighbour
            lines.append(
                f"At load λ = {self.load:g} ({where}), d = {int(self.answer)} gives sojourn {qn} = "
                f"{self.achieved:.6g} ≤ {self.latency:g}"
                + (f"; d = {nb['d']} would give {_value(nb['value'])}." if nb else " (d = 1 already meets it).")
            )
        else:
            if self.holds is not None:
                lines.append(
                    f"Policy {self.policy} reads no d, so the least d has no meaning; at load λ = {self.load:g} "
                    f"({where}) sojourn {qn} = {self.at_load:.6g}: the target {self.latency:g} "
                    + ("holds." if self.holds else "does not hold.")
                )
            head = f"With d = {self.d}, the" if self.d is not None else "The"
            if self.capped:
                lines.append(
                    f"{head} target holds at every load searched, up to λ = {self.answer:.10g} ({qn} = "
                    f"{self.achieved:.8g} there); higher loads are not evaluated."
                )
            else:
                nb = self.neighbour
                lines.append(
                    f"{head} largest load with sojourn {qn} ≤ {self.latency:g} is λ = {self.answer:.8g} ({qn} = "
                    f"{self.achieved:.8g} there; {_value(nb['value'], '.10g')} at λ = {nb['load']:.10g})."
                )
        lines.append(f"  {self.method}; {MEAN_FIELD_NOTE}")
        if self.note:
            lines.append(f"  {self.note}")
        if not self.monotone:
            lines.append("  warning: the quantile was not monotone on the points checked; the answer may not be unique")
        if self.verify is not None:
            lines.append(f"  verify (event engine, n = {self.verify['n']}): " + self.verify["note"])
        return "\n".join(lines)


def _value(v: float, fmt: str = ".6g") -> str:
    """A quantile as text; ``inf`` where the mean field has no fixed point (a class overloaded)."""
    return format(v, fmt) if math.isfinite(v) else "no equilibrium (no mean-field fixed point)"


def latency_method(system: System) -> str:
    """What gives the mean-field sojourn law of ``system`` for a latency design, or a ValueError
    with the method table's reason (:func:`supermarket.system.methods.mean_field`) where there is
    none.  A law without a phase form is replaced by its two-moment fit (:func:`.sojourn.phase_form`),
    as everywhere in the design.

    Examples
    --------
    >>> latency_method(System(None, 2, 0.5, rule="jbt"))
    'the fluid fixed point of jbt (u_ℓ = λ(u_(ℓ−1) − u_T)/(1 − u_T) for ℓ <= T, 0 above)'
    >>> latency_method(System(None, 2, 0.5, server_classes="0.5:2,0.5:1"))
    'the mean field with server classes (supermarket.meanfield.classes)'
    >>> latency_method(System(None, 2, 0.5, rule="jiq", server_classes="0.5:2,0.5:1"))[:40]
    'the fluid fixed point of jiq with servic'
    >>> latency_method(System(None, 2, 0.5, service="lognormal:2"))[-40:]
    ", of the law's two-moment phase-type fit"
    """
    rule = _pol.RULES[system.rule]
    if not system.has_classes and system.law_family == "exponential":
        if rule.smooth:
            return "the mean field (supermarket.meanfield)"
        return f"the fluid fixed point of {rule.name} ({rule.fluid_text})"
    law = system.service if system.law_family != "general" else phase_form(system.service)[0]
    fitted = System(None, system.d, system.load, rule=system.rule, service=law, server_classes=system.server_classes)
    field = methods.mean_field(fitted)  # the one table: refused with its reason
    if field == "fluid":
        return f"the fluid fixed point of {rule.name} with {fitted.describe()} (supermarket.meanfield.fluid)" + (
            ", of the law's two-moment phase-type fit" if system.law_family == "general" else ""
        )
    what = {
        "phase": "the M/PH/1 queue of random routing (the phase-type mean field with d = 1)"
        if system.rule == "random"
        else "the phase-type mean field (supermarket.meanfield.phase)",
        "classes": "the mean field with server classes (supermarket.meanfield.classes)",
        "classes_phase": "the mean field with server classes and a phase-type law "
        "(supermarket.meanfield.classes_phase)",
    }
    if field not in what:  # pragma: no cover - the exponential one-class systems are answered above
        raise ValueError(f"policy: no latency design for {system.describe()}")
    return what[field] + (", of the law's two-moment phase-type fit" if system.law_family == "general" else "")


def _floor(system: System, q: float) -> float:
    """The least quantile any load or ``d`` can give: every job's own service, at the fastest speed."""
    base = -math.log1p(-q) if system.law_family == "exponential" else _service_quantile(system.service, q)
    sc = system.server_classes
    return base / (max(sc.speeds) if sc is not None else 1.0)


def _least_d(f, lam, q, T):
    checked = []

    def ev(d):
        v = f(d, lam)
        checked.append((d, v))
        return v

    too_many = f"sojourn p{100 * q:g} ≤ {T:g} needs more than d = {D_MAX} choices at load {lam:g}"
    hi = least_d_search(ev, T, D_MAX, too_many)
    vals = dict(checked)
    pts = tuple(sorted(vals.items()))
    monotone = all(b[1] <= a[1] + 1e-9 * max(1.0, a[1]) for a, b in itertools.pairwise(pts))
    nb = {} if hi == 1 else {"d": hi - 1, "value": vals[hi - 1] if hi - 1 in vals else ev(hi - 1)}
    return int(hi), vals[hi], nb, tuple(sorted(dict(checked).items())), monotone


def _largest_load(f, d, q, T, limit, rtol=1e-9):
    """Bisection on λ in (0, ``limit``) (1, or the stability limit of random routing with classes); the
    cap ``limit·(1 − 1e-9)`` is evaluated only when every load so far met the target."""
    cap = min(LOAD_MAX, limit * (1.0 - 1e-9))
    lo, hi, checked, capped = 0.0, limit, [], False
    for _ in range(80):
        if not (hi - lo > rtol * max(hi, 1e-3) and hi - lo > 1e-15):
            break
        mid = 0.5 * (lo + hi)
        if mid > cap:  # only when every load so far met the target
            v = f(d, cap)
            checked.append((cap, v))
            if v <= T:
                lo, capped = cap, True
                break
            hi = cap
            continue
        v = f(d, mid)
        checked.append((mid, v))
        if v <= T:
            lo = mid
        else:
            hi = mid
    if lo == 0.0:  # pragma: no cover - T above the floor makes small loads feasible
        raise ValueError(f"no load found with sojourn p{100 * q:g} ≤ {T:g}")
    grid = [(x, f(d, x)) for x in np.linspace(lo / 16, lo, 16)]
    pts = sorted(set(checked + grid))
    monotone = all(b[1] >= a[1] - 1e-9 * max(1.0, a[1]) for a, b in itertools.pairwise(pts))
    nb = {} if capped or hi >= limit else {"load": hi, "value": dict(pts).get(hi, f(d, hi))}
    return lo, dict(pts)[lo], nb, tuple(pts), monotone, capped


def design_rule_latency(
    policy: str,
    quantile: float,
    latency: float,
    *,
    load: float | str | None = None,
    d: int | None = None,
    service: Any = "exp",
    server_classes: Any = None,
) -> RuleLatencyDesign:
    """The least ``d`` (rule reading ``d``, given ``load``), or the largest load (given ``d``;
    or, for a rule reading no ``d``, given ``load``: with whether the target holds there), whose
    mean-field sojourn ``quantile`` under ``policy`` is at most ``latency``.

    Parameters
    ----------
    policy : str
        A rule of :data:`supermarket.system.policies.POLICIES`.
    quantile : float
        Level in (0, 1).
    latency : float
        Target time (> 0), in mean service times of a speed-1 server.
    load : float or str, optional
        λ in (0, 1) (per unit of capacity with classes).
    d : int, optional
        Choices (a rule that reads ``d``): the question is then the largest load.
    service : str or ServiceLaw, default "exp"
        Service law of mean 1 (laws without a phase form by their two-moment fit).
    server_classes : str, optional
        ``FRACTION:SPEED,…``.

    Returns
    -------
    RuleLatencyDesign

    Raises
    ------
    TypeError, ValueError
        A parameter out of range; not exactly one of ``load`` and ``d`` for a rule that reads
        ``d``, ``d`` for one that does not; a system without a mean field
        (:func:`latency_method`); a target at or below every job's own service quantile.

    Examples
    --------
    >>> r = design_rule_latency("jbt", 0.99, 8.0, load=0.9)
    >>> r.question, int(r.answer)
    ('least d', 1)
    """
    name = _pol.check_policy(policy)
    rule = _pol.RULES[name]
    q = check_quantile(quantile)
    T = check_positive_float("latency", latency)
    if rule.uses_d and (load is None) == (d is None):
        raise ValueError(
            f"policy {name} reads d: give exactly one of load (answer: least d) or d (answer: largest load)"
        )
    if not rule.uses_d and (d is not None or load is None):
        raise ValueError(
            f"policy {name} reads no d: give load (answer: whether the target holds there and the largest load)"
        )
    dd = check_positive_int("d", d) if d is not None else (1 if not rule.uses_d else 2)
    system = System(None, dd, load if load is not None else "0.01", rule=name, service=service,
                    server_classes=server_classes)  # fmt: skip
    method = latency_method(system)  # refused before any work
    sc = system.server_classes
    floor = _floor(system, q)
    if T <= floor:
        raise ValueError(
            f"latency: no {'d' if load is not None and rule.uses_d else 'load'} meets sojourn p{100 * q:g} ≤ {T:g}: "
            f"even without waiting every job needs its own service, whose p{100 * q:g} is {floor:.6g}"
            + (" at the fastest class's speed" if system.has_classes else "")
        )
    f, note = quantile_function(name, system.service, sc, q)
    common: dict[str, Any] = dict(
        policy=name, quantile=q, latency=T, service=system.service.spec,
        server_classes=sc.spec if sc is not None else None, method=method, note=note,
        floor=floor,
    )  # fmt: skip
    if rule.uses_d and load is not None:
        lam = system.lam
        ans, val, nb, pts, mono = _least_d(f, lam, q, T)
        return RuleLatencyDesign(
            question="least d", answer=ans, achieved=val, neighbour=nb, load=lam, d=None, holds=None, at_load=None,
            checked=pts, monotone=mono, **common,
        )  # fmt: skip
    limit = 1.0
    if sc is not None and (name == "random" or (rule.smooth and dd == 1)):  # the slowest class stays below load 1
        limit = min(1.0, min(sc.speeds) / sc.mean_speed)
    at = holds = None
    if load is not None:
        at = f(dd, system.lam)
        holds = bool(at <= T)
    ans, val, nb, pts, mono, capped = _largest_load(f, dd, q, T, limit)
    return RuleLatencyDesign(
        question="largest load", answer=ans, achieved=val, neighbour=nb, load=system.lam if load is not None else None,
        d=dd if rule.uses_d else None, holds=holds, at_load=at, checked=pts, monotone=mono, capped=capped, **common,
    )  # fmt: skip


def verify_rule_latency(
    design: RuleLatencyDesign,
    n: int,
    *,
    time: float | None = None,
    replications: int = 4,
    seed: Any = 0,
    z: float = 2.0,
    workers: int | None = None,
) -> dict:
    """Check a :class:`RuleLatencyDesign` with the per-queue event engine at ``n`` servers
    (:func:`supermarket.simulation.general.simulate_general`, the rule, law and classes of the
    design; its sojourn quantile measured directly): for "least d" the answer and ``d − 1``;
    for a rule reading no ``d`` the given load; else the answer's load.  A quantile meets the
    target when below it by more than ``z`` standard errors (spread of ``replications`` runs),
    fails when above by more, and is undecided otherwise.

    Returns
    -------
    dict
        ``n``, ``points`` (``d``, ``load``, ``value``, ``stderr``, ``verdict``), ``changes_answer``
        (True / False / None) and a one-line ``note``.

    Examples
    --------
    >>> r = design_rule_latency("jiq", 0.9, 4.0, load=0.7)
    >>> v = verify_rule_latency(r, 20, time=200.0, replications=2, seed=1, workers=1)
    >>> v["n"], v["points"][0]["verdict"] in ("meets", "fails", "undecided", "unknown")
    (20, True)
    """
    from ..simulation.general import simulate_general  # here: it loads numba, which sizing alone does not need

    n = check_positive_int("n", n)
    replications = check_positive_int("replications", replications)
    q, T = design.quantile, design.latency
    if design.question == "least d":
        assert design.load is not None
        runs = [(int(design.answer), design.load)] + (
            [(int(design.answer) - 1, design.load)] if design.answer > 1 else []
        )
    elif design.holds is not None:
        assert design.load is not None
        runs = [(1, design.load)]
    else:
        if design.capped:
            raise ValueError("verify: the target holds up to λ = 1 − 1e-9; no load short of 1 to simulate")
        assert design.d is not None
        runs = [(design.d, design.answer)]
    pts = []
    for d, lam in runs:
        res = simulate_general(
            n, d, lam, policy=design.policy, service=design.service, server_classes=design.server_classes,
            time=time, replications=replications, seed=seed, quantiles=(q,), workers=workers,
        )  # fmt: skip
        e = res.sojourn_quantiles[q]
        se = e.stderr if e.reliable else None
        if se is None or not math.isfinite(se):
            pts.append({"d": d, "load": lam, "value": e.mean, "stderr": None, "verdict": "unknown"})
            continue
        pts.append({"d": d, "load": lam, "value": e.mean, "stderr": se, "verdict": _verdict(e.mean, se, T, z)})
    qn = f"p{100 * q:g}"

    def show(p):
        err = f" ± {p['stderr']:.2g}" if p["stderr"] is not None else " (no reliable error bar; simulate longer)"
        at = f"d = {p['d']}, λ = {p['load']:.6g}" if _pol.RULES[design.policy].uses_d else f"λ = {p['load']:.6g}"
        return f"{at}: {qn} = {p['value']:.4g}{err}"

    shown = ", ".join(show(p) for p in pts)
    a, b = pts[0], (pts[1] if len(pts) > 1 else None)
    if a["verdict"] == "unknown" or (b is not None and b["verdict"] == "unknown"):
        change, note = None, f"not verified: {shown}"
    elif design.question == "least d":
        if a["verdict"] == "fails":
            change, note = True, f"{shown}: finite n needs more choices than the mean field says"
        elif b is not None and b["verdict"] == "meets":
            change, note = True, f"{shown}: finite n needs fewer choices than the mean field says"
        elif a["verdict"] == "meets" and (b is None or b["verdict"] == "fails"):
            change, note = False, f"confirmed: {shown}"
        else:
            change, note = None, f"undecided within {z:g} standard errors: {shown}; simulate longer"
    elif design.holds is not None:
        agree = {"meets": design.holds, "fails": not design.holds}.get(a["verdict"])
        if agree is None:
            change, note = None, f"undecided within {z:g} standard errors: {shown}; simulate longer"
        else:
            word = "holds" if a["verdict"] == "meets" else "does not hold"
            change = not agree
            note = f"{'confirmed' if agree else 'finite n differs'}: the target {word} at n = {n}: {shown}"
    else:
        if a["verdict"] == "fails":
            change, note = True, f"{shown} > {T:g}: finite n supports a smaller load than the mean field says"
        elif a["verdict"] == "meets":
            change, note = None, f"{shown} < {T:g}: the load is met (finite n may allow somewhat more)"
        else:
            change, note = False, f"{shown}: consistent with the target {T:g} within {z:g} standard errors"
    return {"n": n, "replications": replications, "points": pts, "changes_answer": change, "note": note}
