"""Sizing by a latency target (docs/model.md §10): the least ``d`` (given the load) or the
largest load (given ``d``) whose mean-field sojourn-time quantile meets the target, and the
check of such an answer by simulating ``n`` servers (locally or on a Dask cluster).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..meanfield import response_times
from ..model import check_load, check_positive_float, check_positive_int
from ..response import check_quantile, from_simulation
from ..result import Result, frame

__all__ = [
    "DESIGN_KEYS",
    "LOAD_MAX",
    "LatencyDesign",
    "least_d_for_latency",
    "least_d_search",
    "max_load_for_latency",
    "verify_latency",
]

LOAD_MAX = 1.0 - 1e-9
"""Highest load :func:`max_load_for_latency` evaluates (λ = 1 is out of range): a target still
met there is reported as met "up to" it (``capped``)."""


#: The keys every ``design --latency`` answer writes first, in order (:class:`LatencyDesign`, the
#: service laws' :class:`~supermarket.design.service_search.ServiceDesign` and
#: :class:`~supermarket.design.service_search.ServiceLoadDesign`, the other rules'
#: :class:`~supermarket.design.rule_latency.RuleLatencyDesign`); ``checked`` and ``verify`` follow.
DESIGN_KEYS = (
    "policy",
    "question",
    "quantile",
    "latency",
    "answer",
    "achieved",
    "neighbour",
    "load",
    "d",
    "holds",
    "at_load",
    "service",
    "server_classes",
    "method",
    "note",
    "floor",
    "monotone",
    "capped",
)


@dataclass(frozen=True)
class LatencyDesign(Result):
    """Answer of a latency-sizing question (docs/model.md §10), from the mean field.

    ``question``: ``"least d"`` (given the load) or ``"largest load"`` (given ``d``);
    ``answer``: that ``d`` or load; ``achieved``: the sojourn quantile there; ``neighbour``:
    the quantile at ``d − 1`` (least d) or just above the load (largest load), showing the
    answer is tight; ``checked``: the values used to check monotonicity; ``verify``: the
    simulation check at finite ``n`` (or None).

    Examples
    --------
    >>> r = max_load_for_latency(1, 0.99, 2 * 4.605170185988091)   # M/M/1: λ = 1 − (−log 0.01)/T
    >>> r.question, r.d, round(r.answer, 6), r.monotone
    ('largest load', 1, 0.5, True)
    """

    question: str
    quantile: float
    latency: float
    answer: float
    achieved: float
    neighbour: dict
    load: float | None
    d: int | None
    floor: float
    checked: tuple
    monotone: bool
    verify: dict | None = None
    capped: bool = False
    # the keys of every design --latency answer (:class:`supermarket.design.rule_latency.RuleLatencyDesign`
    # is that of the other rules, laws and classes): here JSQ(d), exp service, one class, the mean field
    policy: str = "jsq-d"
    holds: bool | None = None  # for a rule that reads no d asked at a load; JSQ(d) reads d
    at_load: float | None = None
    service: str = "exp"
    server_classes: str | None = None
    method: str = "the mean field (supermarket.meanfield)"
    note: str = ""

    _order = DESIGN_KEYS

    def to_frame(self) -> Any:
        col = "d" if self.question == "least d" else "load"
        return frame([{col: a, "sojourn_quantile": v} for a, v in self.checked])

    def summary(self) -> str:
        qn = f"p{100 * self.quantile:g}"
        if self.question == "least d":
            nb = self.neighbour
            one = int(self.answer) == 1
            line = (
                f"At load λ = {self.load:g}, d = {int(self.answer)} choice{'' if one else 's'} "
                f"give{'s' if one else ''} "
                f"sojourn {qn} = {self.achieved:.6g} ≤ {self.latency:g} (mean field)"
                + (
                    f"; d = {nb['d']} would give {nb['value']:.6g}."
                    if nb
                    else " (random routing: independent M/M/1 queues, no choice needed)."
                )
            )
        elif self.capped:
            line = (
                f"With d = {self.d}, sojourn {qn} ≤ {self.latency:g} holds at every load searched, up to "
                f"λ = {self.answer:.10g} (mean field, {qn} = {self.achieved:.8g} there); higher loads are not "
                "evaluated."
            )
        else:
            nb = self.neighbour
            line = (
                f"With d = {self.d}, the largest load with sojourn {qn} ≤ {self.latency:g} is λ = "
                f"{self.answer:.8g} (mean field, {qn} = {self.achieved:.8g} there; "
                f"{nb['value']:.10g} at λ = {nb['load']:.10g})."
            )
        lines = [line]
        if not self.monotone:
            lines.append("  warning: the quantile was not monotone on the points checked; the answer may not be unique")
        v = self.verify
        if v is not None:
            lines.append(f"  verify (simulation, n = {v['n']}): " + v["note"])
        return "\n".join(lines)


def least_d_search(f: Any, T: float, d_max: int, too_many: str) -> int:
    """The least ``d`` with ``f(d) <= T`` for a quantile ``f`` non-increasing in ``d``: doubling
    from 1 to a ``d`` that meets it, then bisection between its half and it (``f(lo) > T >=
    f(hi)``); ValueError ``too_many`` when ``d_max`` does not meet it.  The one search of every
    least-d design (the calls of ``f`` are its callers' record of the values checked).

    >>> least_d_search(lambda d: 10.0 / d, 3.0, 100, "no d")
    4
    """
    d = 1
    while f(d) > T:
        if d >= d_max:
            raise ValueError(too_many)
        d = min(2 * d, d_max)
    lo, hi = d // 2, d  # f(lo) > T >= f(hi) (lo = 0 when d = 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if f(mid) <= T:
            hi = mid
        else:
            lo = mid
    return hi


def _check_latency(quantile, latency):
    q = check_quantile(quantile)
    T = check_positive_float("latency", latency)
    floor = -math.log1p(-q)
    return q, T, floor


def _mf_quantile(d, lam, q) -> float:
    if d == 1:
        return -math.log1p(-q) / (1.0 - lam)
    return response_times(d, lam, quantiles=(q,)).sojourn.quantiles[q]


def least_d_for_latency(load: float | str, quantile: float, latency: float, *, d_max: int = 2**40) -> LatencyDesign:
    """The least ``d`` whose mean-field sojourn-time ``quantile`` is at most ``latency``.

    Parameters
    ----------
    load : float
        λ in (0, 1).
    quantile : float
        Level in (0, 1), e.g. 0.99.
    latency : float
        Target time, in mean service times (> 0).
    d_max : int
        Largest ``d`` searched.

    Returns
    -------
    LatencyDesign

    Raises
    ------
    ValueError
        The target cannot be met by any ``d``: with ``d = ∞`` every customer still needs its
        own service, so the quantile is at least ``−log(1 − q)``; or ``d_max`` is not enough.

    Examples
    --------
    >>> r = least_d_for_latency(0.9, 0.99, 8.0)
    >>> int(r.answer), r.achieved <= 8.0 < r.neighbour["value"]
    (3, True)
    """
    lam = check_load(load)
    q, T, floor = _check_latency(quantile, latency)
    d_max = check_positive_int("d_max", d_max)
    if T <= floor:
        raise ValueError(
            f"no d meets sojourn p{100 * q:g} ≤ {T:g}: even with d = ∞ every customer still needs its own "
            f"exponential(1) service, whose p{100 * q:g} is −log(1−q) = {floor:.6g}"
        )
    checked = []

    def f(d):
        v = _mf_quantile(d, lam, q)
        checked.append((d, v))
        return v

    too_many = f"sojourn p{100 * q:g} ≤ {T:g} needs more than d_max = {d_max} choices at load {lam:g}"
    hi = least_d_search(f, T, d_max, too_many)
    vals = sorted(set(checked))
    monotone = all(b[1] <= a[1] + 1e-9 * max(1.0, a[1]) for a, b in itertools.pairwise(vals))
    nb = {} if hi == 1 else {"d": hi - 1, "value": dict(vals)[hi - 1] if (hi - 1) in dict(vals) else f(hi - 1)}
    return LatencyDesign(
        question="least d",
        quantile=q,
        latency=T,
        answer=int(hi),
        achieved=dict(checked)[hi],
        neighbour=nb,
        load=lam,
        d=None,
        floor=floor,
        checked=tuple(sorted(set(checked))),
        monotone=monotone,
    )


def max_load_for_latency(d: int, quantile: float, latency: float, *, rtol: float = 1e-9) -> LatencyDesign:
    """The largest load λ whose mean-field sojourn-time ``quantile`` is at most ``latency``
    with ``d`` choices (bisection; the quantile grows with λ, checked on a grid).

    Parameters
    ----------
    d : int
        Choices per arrival (at least 1).
    quantile : float
        Level ``q`` in (0, 1) of the sojourn-time quantile.
    latency : float
        Target ``T > 0`` for that quantile.
    rtol : float, default 1e-9
        Relative width at which the bisection on λ stops.

    Returns
    -------
    LatencyDesign
        ``answer`` is the largest load; ``neighbour`` the quantile just above it; ``monotone``
        whether the quantile was found non-decreasing in λ on the points checked.

    Raises
    ------
    TypeError, ValueError
        A parameter out of range, or ``latency`` at or below ``−log(1−q)`` (the quantile of
        the service time alone, which no load can beat).

    Examples
    --------
    >>> r = max_load_for_latency(1, 0.99, 2 * 4.605170185988091)     # M/M/1: λ = 1 − (−log 0.01)/T
    >>> round(r.answer, 6)
    0.5
    """
    d = check_positive_int("d", d)
    q, T, floor = _check_latency(quantile, latency)
    if T <= floor:
        raise ValueError(
            f"no load meets sojourn p{100 * q:g} ≤ {T:g}: even at vanishing load every customer needs its own "
            f"exponential(1) service, whose p{100 * q:g} is −log(1−q) = {floor:.6g}"
        )
    if d == 1:
        lam = 1.0 - floor / T
        return LatencyDesign(
            question="largest load",
            quantile=q,
            latency=T,
            answer=lam,
            achieved=T,
            neighbour={"load": lam + (1 - lam) * 1e-3, "value": floor / ((1 - lam) * (1 - 1e-3))},
            load=None,
            d=1,
            floor=floor,
            checked=((lam, T),),
            monotone=True,
        )
    lo, hi = 0.0, 1.0
    checked = []
    capped = False
    # every evaluated load lies in (0, LOAD_MAX]: the bracket halves each step (LOAD_MAX
    # replaces a midpoint above it once), and stops at width 1e-15 at the latest
    for _ in range(60):
        if not (hi - lo > rtol * max(hi, 1e-3) and hi - lo > 1e-15):
            break
        mid = 0.5 * (lo + hi)
        if mid > LOAD_MAX:  # only when every load so far met the target
            v = _mf_quantile(d, LOAD_MAX, q)
            checked.append((LOAD_MAX, v))
            if v <= T:
                lo, capped = LOAD_MAX, True
                break
            hi = LOAD_MAX
            continue
        v = _mf_quantile(d, mid, q)
        checked.append((mid, v))
        if v <= T:
            lo = mid
        else:
            hi = mid
    if lo == 0.0:  # pragma: no cover - T > floor makes small loads feasible
        raise ValueError(f"no load found with sojourn p{100 * q:g} ≤ {T:g} at d = {d}")
    grid = [(x, _mf_quantile(d, x, q)) for x in np.linspace(lo / 16, lo, 16)]
    pts = sorted(set(checked + grid))
    monotone = all(b[1] >= a[1] - 1e-9 * max(1.0, a[1]) for a, b in itertools.pairwise(pts))
    return LatencyDesign(
        question="largest load",
        quantile=q,
        latency=T,
        answer=lo,
        achieved=_mf_quantile(d, lo, q),
        neighbour={} if capped else {"load": hi, "value": _mf_quantile(d, hi, q)},
        load=None,
        d=d,
        floor=floor,
        checked=tuple(pts),
        monotone=monotone,
        capped=capped,
    )


def _verdict(v: float, se: float, T: float, z: float) -> str:
    """``meets`` when ``v`` is below ``T`` by more than ``z`` standard errors, ``fails`` when
    above by more, ``undecided`` otherwise."""
    return "meets" if v + z * se < T else ("fails" if v - z * se > T else "undecided")


def verify_latency(
    design: LatencyDesign,
    n: int,
    *,
    steps: int = 2_000_000,
    replications: int = 8,
    seed: Any = 0,
    z: float = 2.0,
    workers: int | None = None,
    client: Any = None,
) -> dict:
    """Check a mean-field latency answer by simulating ``n`` servers (docs/model.md §10).

    The quantile at finite ``n`` comes from the simulated time averages of ``P_i``
    (:func:`supermarket.response.from_simulation`, standard errors across replications).  For "least d" the
    answer ``d`` and ``d − 1`` are simulated; for "largest load" the answer itself.  A
    quantile counts as meeting the target when it is below it by more than ``z`` standard
    errors, as failing when above by more than ``z``, and as undecided otherwise.

    Parameters
    ----------
    design : LatencyDesign
        The mean-field answer (:func:`least_d_for_latency` or :func:`max_load_for_latency`).
    n : int
        Servers to simulate (at least 1).
    steps : int, default 2_000_000
        Steps per replication (see :func:`supermarket.simulation.simulate`).
    replications : int, default 8
        Independent replications (their spread gives the standard errors).
    seed : int or SeedSequence, default 0
        Root seed.
    z : float, default 2.0
        Standard errors a quantile must clear to count as meeting or failing the target.
    workers : int, optional
        Local processes running the replications (default: all cores); the numbers do not
        depend on it.
    client : dask.distributed.Client, optional
        Run each replication as one task on this Dask cluster instead (replication ``r``
        keeps child ``r`` of ``seed``: the same numbers as locally); excludes ``workers``.

    Returns
    -------
    dict
        ``n``, ``points`` (each: ``d``, ``load``, ``value``, ``stderr``, ``verdict``),
        ``changes_answer`` (True / False / None when undecided) and a one-line ``note``.

    Raises
    ------
    TypeError, ValueError
        ``n`` or a simulation parameter out of range; ``workers`` with ``client``.

    Examples
    --------
    A deliberately tiny run (4 servers, short replications): the verdicts of such a run
    carry wide error bars; use the defaults for a real check.

    >>> design = max_load_for_latency(2, 0.9, 5.0)
    >>> v = verify_latency(design, 4, steps=20_000, replications=2, seed=1)
    >>> v["n"], len(v["points"]), v["points"][0]["verdict"] in ("meets", "fails", "undecided")
    (4, 1, True)

    The verdict rule itself (``v ± z·se`` against ``T``): :func:`_verdict` on known cases.

    >>> [_verdict(v, 0.1, 8.0, 2.0) for v in (7.0, 7.9, 8.1, 9.0)]
    ['meets', 'undecided', 'undecided', 'fails']
    """
    from ..simulation import simulate  # here, not at the top: it loads numba, which sizing alone does not need

    n = check_positive_int("n", n)
    q, T = design.quantile, design.latency
    pts = []
    if design.question == "least d":
        cand = [int(design.answer)] + ([int(design.answer) - 1] if design.answer > 1 else [])
        assert design.load is not None  # a "least d" design is made at a given load
        runs = [(d, design.load) for d in cand]
    else:
        assert design.d is not None  # a "largest load" design is made at a given d
        runs = [(design.d, design.answer)]
    import warnings

    distrusted = []
    for d, lam in runs:
        with warnings.catch_warnings(record=True) as caught:
            # the run's own warnings (too short, a failed self-check) decide the verdict
            # below and are kept in the result's notes, not printed as raw Python warnings
            warnings.simplefilter("always")
            res = simulate(
                n,
                d,
                lam,
                steps=steps,
                replications=replications,
                seed=seed,
                start="fixed-point",
                progress=False,
                workers=workers,
                client=client,
            )
        point = _point(res, caught, (d, lam), q, T, z)
        if point["verdict"] == "unknown":
            distrusted.append(f"d = {d}, λ = {lam:.6g}: {point['why']}")
        pts.append(point)
    qn = f"p{100 * q:g}"
    if distrusted:
        # no confirmation and no ± from a run that distrusts itself
        return {
            "n": n,
            "steps": steps,
            "replications": replications,
            "points": pts,
            "changes_answer": None,
            "note": (
                f"not verified: {'; '.join(distrusted)}; the simulated {qn} "
                + ", ".join(f"{p['value']:.4g} (d = {p['d']})" for p in pts)
                + " is shown without an error bar; simulate longer (--steps)"
            ),
        }
    change, note = _conclusion(design.question, pts, qn, T, z)
    return {"n": n, "steps": steps, "replications": replications, "points": pts, "changes_answer": change, "note": note}


def _point(res: Any, caught: list, system: tuple, q: float, T: float, z: float) -> dict:
    """One simulated point of :func:`verify_latency`: the ``q``-quantile of the sojourn time of
    ``res`` at ``system`` ``(d, λ)`` against the target ``T`` (:func:`_verdict`, ``z`` standard
    errors), or the verdict "unknown" with why (a failed self-check, no error for the
    quantile) and the run's warnings ``caught``."""
    d, lam = system
    r = from_simulation(res, quantiles=(q,))
    assert r.sojourn.stderr is not None  # a simulated law carries batch-means errors
    v, se = r.sojourn.quantiles[q], r.sojourn.stderr["quantiles"][q]
    failed = [c for c in getattr(res, "self_checks", ()) if c.get("result") == "fail"]
    why = None
    if failed:
        c = failed[0]
        zc = c.get("z")
        why = f"the simulation's own self-check {c.get('identity', '')!s} failed" + (
            f" by {abs(zc):.3g} standard errors" if isinstance(zc, (int, float)) and math.isfinite(zc) else ""
        )
    elif se is None or not math.isfinite(se):
        why = "the run is too short to know the error of the quantile"
    if why is not None:
        return {
            "d": d,
            "load": lam,
            "value": v,
            "stderr": None,
            "verdict": "unknown",
            "why": why,
            "warnings": [str(w.message) for w in caught],
        }
    return {"d": d, "load": lam, "value": v, "stderr": se, "verdict": _verdict(v, se, T, z)}


def _conclusion(question: str, pts: list[dict], qn: str, T: float, z: float) -> tuple[bool | None, str]:
    """Whether the simulated points change the mean-field answer (True, False, or None for
    undecided or met with room), and the sentence that says so, from their verdicts."""
    if question == "least d":
        a = pts[0]
        b = pts[1] if len(pts) > 1 else None
        if a["verdict"] == "fails":
            change, note = (
                True,
                (
                    f"d = {a['d']} gives {qn} = {a['value']:.4g} ± {a['stderr']:.2g} > {T:g}: "
                    f"finite n needs more choices than the mean field says"
                ),
            )
        elif b is not None and b["verdict"] == "meets":
            change, note = (
                True,
                (
                    f"d = {b['d']} already gives {qn} = {b['value']:.4g} ± {b['stderr']:.2g} < {T:g}: "
                    f"finite n needs fewer choices than the mean field says"
                ),
            )
        elif a["verdict"] == "meets" and (b is None or b["verdict"] == "fails"):
            change, note = (
                False,
                (
                    f"confirmed: d = {a['d']} gives {qn} = {a['value']:.4g} ± {a['stderr']:.2g}"
                    + (f", d = {b['d']} gives {b['value']:.4g} ± {b['stderr']:.2g}" if b else "")
                ),
            )
        else:
            change, note = (
                None,
                (
                    f"undecided within {z:g} standard errors: d = {a['d']} gives {a['value']:.4g} ± "
                    f"{a['stderr']:.2g}"
                    + (f", d = {b['d']} gives {b['value']:.4g} ± {b['stderr']:.2g}" if b else "")
                    + "; simulate longer (--steps)"
                ),
            )
    else:
        a = pts[0]
        if a["verdict"] == "fails":
            change, note = (
                True,
                (
                    f"at λ = {a['load']:.6g}, {qn} = {a['value']:.4g} ± {a['stderr']:.2g} > {T:g}: "
                    "finite n supports a smaller load than the mean field says"
                ),
            )
        elif a["verdict"] == "meets":
            change, note = (
                None,
                (
                    f"at λ = {a['load']:.6g}, {qn} = {a['value']:.4g} ± {a['stderr']:.2g} < {T:g}: "
                    "the load is met (finite n may allow somewhat more)"
                ),
            )
        else:
            change, note = (
                False,
                (
                    f"at λ = {a['load']:.6g}, {qn} = {a['value']:.4g} ± {a['stderr']:.2g}: "
                    f"consistent with the target {T:g} within {z:g} standard errors"
                ),
            )
    return change, note
