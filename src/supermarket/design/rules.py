"""The dispatch rules against one latency target under a service law, in the mean-field limit
(docs/model.md §13.1): :func:`compare_rules` sets ``random`` (the M/PH/1 queue), ``jsq-d`` at its
least ``d`` (:func:`supermarket.design.service_search.least_d_for_service_latency`), ``jiq`` and
``jsq`` side by side, with what each costs per arrival.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..result import Result, frame
from ..system.service import ServiceLaw
from .service_search import ServiceDesign, _check_target, least_d_for_service_latency
from .sojourn import _service_quantile, mph1_sojourn_quantile, phase_form

__all__ = ["RuleComparison", "compare_rules"]


@dataclass(frozen=True)
class RuleComparison(Result):
    """The dispatch rules of :mod:`supermarket.system.policies` against one latency target in the
    mean-field limit, with what each costs per arrival (docs/model.md §13.1).

    ``rows``: one dict per rule: ``policy``, ``d`` (jsq-d only), ``value`` (the sojourn
    quantile), ``meets``, ``samples`` (queue lengths read per arrival, as text: ``d``, ``1``,
    ``n``, ``0``), ``bookkeeping`` and ``law`` (how the quantile was computed).

    Examples
    --------
    >>> c = compare_rules(0.9, 0.99, 8.0, "exp")
    >>> [(r["policy"], r["meets"]) for r in c.rows]
    [('random', False), ('jsq-d', True), ('jiq', True), ('jsq', True)]
    """

    service: str
    load: float
    quantile: float
    latency: float
    rows: tuple
    fit: str
    design: ServiceDesign | None

    _order = ("service", "load", "quantile", "latency", "rows", "fit")
    _omit = ("design",)

    def to_frame(self) -> Any:
        return frame(list(self.rows))

    def summary(self) -> str:
        qn = f"p{100 * self.quantile:g}"
        head = (
            f"Sojourn {qn} ≤ {self.latency:g} at load λ = {self.load:g} with {self.service} service "
            "(mean field, n → ∞), by rule:"
        )
        lines = [head, f"  {'rule':<12} {qn:>10}  meets  samples/arrival  bookkeeping"]
        for r in self.rows:
            name = r["policy"] + (f" (d={r['d']})" if r.get("d") else "")
            meets = "yes" if r["meets"] else "no"
            # no number where none exists (jsq-d without a d): the law column says why
            val = f"{r['value']:>10.5g}" if math.isfinite(r["value"]) else f"{'none':>10}"
            lines.append(f"  {name:<12} {val}  {meets:<5}  {r['samples']:<15}  {r['bookkeeping']}")
        lines.append("  " + "; ".join(f"{r['policy']}: {r['law']}" for r in self.rows))
        if self.fit:
            lines.append(f"  {self.fit}")
        lines.append(
            "  jsq and jiq reach the service's own quantile only as n → ∞; at finite n they queue "
            "sometimes (check with simulate --service ... --policy)."
        )
        return "\n".join(lines)


def compare_rules(
    load: float | str, quantile: float, latency: float, service: str | ServiceLaw, *, d_max: int = 2**20
) -> RuleComparison:
    """The rules ``random``, ``jsq-d`` (at its least ``d``), ``jiq`` and ``jsq`` against a
    sojourn target in the mean-field limit, with their costs per arrival.

    random: the M/PH/1 FIFO sojourn (:func:`mph1_sojourn_tail`; of the fit for laws without a
    phase form); jsq-d: :func:`least_d_for_service_latency`; jsq and jiq: in the limit every
    arrival finds an idle server, so the sojourn is one service (the law's own quantile, exact
    for every law).

    Examples
    --------
    >>> c = compare_rules(0.9, 0.99, 14.0, "hyperexp:4")
    >>> [(r["policy"], round(r["value"], 2)) for r in c.rows]
    [('random', 118.93), ('jsq-d', 13.91), ('jiq', 10.75), ('jsq', 10.75)]
    """
    lam, q, T, law = _check_target(load, quantile, latency, service)
    fit_law, note = phase_form(law)
    assert fit_law.alpha is not None and fit_law.T is not None
    v_random = mph1_sojourn_quantile(lam, fit_law, q)
    v_one = _service_quantile(law, q)
    lawtxt = "fit" if note else "exact"
    rows = [
        {
            "policy": "random",
            "d": None,
            "value": v_random,
            "meets": v_random <= T,
            "samples": "1 (none read)",
            "bookkeeping": "none",
            "law": f"M/PH/1 FIFO ({lawtxt})",
        }
    ]
    design = None
    try:
        design = least_d_for_service_latency(lam, q, T, law, d_max=d_max)
        rows.append(
            {
                "policy": "jsq-d",
                "d": int(design.answer),
                "value": design.achieved,
                "meets": True,
                "samples": f"d = {int(design.answer)}",
                "bookkeeping": "none",
                "law": "mean-field sojourn law, docs/model.md §13.1",
            }
        )
    except ValueError as exc:
        rows.append(
            {
                "policy": "jsq-d",
                "d": None,
                "value": math.nan,
                "meets": False,
                "samples": "—",
                "bookkeeping": "none",
                "law": f"no d: {exc}",
            }
        )
    one = "one service (the law's own quantile" + (", exact, not the fit)" if note else ")")
    rows.append(
        {
            "policy": "jiq",
            "d": None,
            "value": v_one,
            "meets": v_one <= T,
            "samples": "0",
            "bookkeeping": "idle list; ~1 idle report per arrival",
            "law": one,
        }
    )
    rows.append(
        {
            "policy": "jsq",
            "d": None,
            "value": v_one,
            "meets": v_one <= T,
            "samples": "n",
            "bookkeeping": "or all n lengths kept",
            "law": one,
        }
    )
    return RuleComparison(law.spec, lam, q, T, tuple(rows), note, design)
