"""Sizing by a latency target under a service law (docs/model.md §13.1), one module per concept:

- :mod:`.sojourn`: the mean-field sojourn law of a FIFO customer with phase-type service
  (:func:`sojourn_law`, [derived]), the classical M/PH/1 sojourn, the law's own tail and the
  two-moment phase-type fit of laws without a phase form (:func:`phase_form`);
- :mod:`.service_search`: the least ``d`` whose sojourn ``q``-quantile meets a target
  (:func:`least_d_for_service_latency`) and the largest load that meets it
  (:func:`max_load_for_service_latency`);
- :mod:`.rules`: the dispatch rules compared against one target (:func:`compare_rules`);
- here: the check of an answer with the per-queue event engine (:func:`verify_service_design`).

Every public name of those modules is importable from here too.
"""

from __future__ import annotations

import math
from typing import Any

from ..model import check_positive_int
from .rules import RuleComparison, compare_rules
from .service_search import (
    LOAD_MAX,
    ServiceDesign,
    ServiceLoadDesign,
    least_d_for_service_latency,
    max_load_for_service_latency,
)
from .sojourn import (
    MAX_FIT_PHASES,
    PhaseSojourn,
    mph1_sojourn_quantile,
    mph1_sojourn_tail,
    phase_form,
    service_tail,
    sojourn_law,
)

__all__ = [
    "MAX_FIT_PHASES",
    "LOAD_MAX",
    "PhaseSojourn",
    "ServiceDesign",
    "ServiceLoadDesign",
    "RuleComparison",
    "phase_form",
    "sojourn_law",
    "mph1_sojourn_tail",
    "mph1_sojourn_quantile",
    "service_tail",
    "least_d_for_service_latency",
    "max_load_for_service_latency",
    "compare_rules",
    "verify_service_design",
]


def verify_service_design(
    design: ServiceDesign,
    n: int,
    *,
    time: float | None = None,
    replications: int = 4,
    seed: Any = 0,
    z: float = 2.0,
    workers: int | None = None,
) -> dict:
    """Check a :class:`ServiceDesign` with the per-queue event engine at ``n`` servers, under
    the law itself (not its fit): ``d`` and ``d − 1`` are simulated, and a quantile counts as
    meeting the target when it is below it by more than ``z`` standard errors (the spread of
    ``replications`` independent runs), failing when above by more, undecided otherwise.

    Returns
    -------
    dict
        ``n``, ``points`` (``d``, ``value``, ``stderr``, ``verdict``), ``changes_answer``
        (True / False / None) and a one-line ``note``.

    Examples
    --------
    >>> r = least_d_for_service_latency(0.7, 0.9, 4.0, "lognormal:2")
    >>> v = verify_service_design(r, 20, time=200.0, replications=2, seed=1, workers=1)
    >>> v["n"], [p["d"] for p in v["points"]], v["points"][0]["verdict"] in ("meets", "fails", "undecided", "unknown")
    (20, [3, 2], True)
    """
    from ..simulation.general import simulate_general  # here: it loads numba, which sizing alone does not need

    n = check_positive_int("n", n)
    replications = check_positive_int("replications", replications)
    q, T = design.quantile, design.latency
    cand = [int(design.answer)] + ([int(design.answer) - 1] if design.answer > 1 else [])
    pts = []
    for d in cand:
        if d > n:
            pts.append({"d": d, "value": None, "stderr": None, "verdict": "unknown", "why": f"d = {d} > n = {n}"})
            continue
        res = simulate_general(
            n,
            d,
            design.load,
            service=design.service,
            time=time,
            replications=replications,
            seed=seed,
            quantiles=(q,),
            workers=workers,
        )
        e = res.sojourn_quantiles[q]
        se = e.stderr if e.reliable else None
        if se is None or not math.isfinite(se):
            pts.append({"d": d, "value": e.mean, "stderr": None, "verdict": "unknown", "why": "no reliable error bar"})
            continue
        verdict = "meets" if e.mean + z * se < T else ("fails" if e.mean - z * se > T else "undecided")
        pts.append({"d": d, "value": e.mean, "stderr": se, "verdict": verdict})
    qn = f"p{100 * q:g}"

    def show(p):
        if p["value"] is None:
            return f"d = {p['d']}: {p['why']}"
        err = f" ± {p['stderr']:.2g}" if p["stderr"] is not None else " (no error bar: " + p["why"] + ")"
        return f"d = {p['d']} gives {qn} = {p['value']:.4g}{err}"

    a = pts[0]
    b = pts[1] if len(pts) > 1 else None
    shown = ", ".join(show(p) for p in pts)
    if a["verdict"] == "fails":
        change, note = True, f"{shown}: finite n needs more choices than the mean field says"
    elif b is not None and b["verdict"] == "meets":
        change, note = True, f"{shown}: finite n needs fewer choices than the mean field says"
    elif a["verdict"] == "meets" and (b is None or b["verdict"] == "fails"):
        change, note = False, f"confirmed: {shown}"
    else:
        change, note = None, f"undecided within {z:g} standard errors: {shown}; simulate longer"
    return {"n": n, "replications": replications, "points": pts, "changes_answer": change, "note": note}
