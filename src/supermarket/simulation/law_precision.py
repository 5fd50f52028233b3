"""``precision=`` on the law engines (phase, classes, classes-phase, events; docs/model.md
§13–§15): run, and while a target's 95 % relative half-width exceeds the precision, run again
from the same seed with the horizon grown by a factor, up to ``max_steps`` events per
replication.

These engines cannot continue a run from its state (their batches are planned over the whole
horizon), so each round is a new run from the same seed, as long as the one before times the
growth the errors ask for (at least 2): the rounds before the last cost at most the last one
(a geometric sum), so the whole costs at most twice the final run (when the cap cuts the last
growth below 2, up to three times).  The result is the last run, with the profile engine's
``precision`` block (:func:`supermarket.simulation.precision.summary_lines`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..checks import check_positive_float, check_positive_int
from . import precision as _prec
from .plan import DEFAULT_MAX_STEPS

__all__ = ["LAW_TARGETS", "law_targets", "law_rows", "run_law_precision", "summary_lines", "RERUN_NOTE"]

#: The targets a law engine takes: the time averages every one of them estimates.
LAW_TARGETS = "mean-queue-length, levels, u2, u3, … (E[u_i], i >= 2)"
#: Growth of the horizon between rounds, at least: the earlier rounds then cost at most the last.
MIN_GROWTH = 2.0
#: What the result says about how the rounds were run.
RERUN_NOTE = (
    "precision: the law engines cannot continue a run from its state, so each round reran from the same seed "
    "with the horizon grown (at least doubled); the rounds before the last cost at most as much as the last"
)


def law_targets(target: str | Sequence[str] | None, engine_text: str) -> tuple[str, ...]:
    """The canonical targets of ``target`` (:func:`supermarket.simulation.precision.parse_target`),
    refusing (ValueError naming ``target``) a response-time target, which these engines do not
    estimate with an error of the same kind (``engine_text``: the engine, in words)."""
    targets = _prec.parse_target(target)
    for t in targets:
        if t.startswith(("sojourn", "waiting")):
            raise ValueError(
                f"target {t!r}: {engine_text} takes the time averages as precision targets ({LAW_TARGETS}), "
                "not the response times"
            )
    return targets


def _estimate_row(target: str, quantity: str, e: Any) -> dict:
    hw = e.half_width() if e.reliable and math.isfinite(e.stderr) else math.nan
    return _prec._row(target, quantity, float(e.mean), float(hw), "" if e.reliable else "no error bar")


def law_rows(res: Any, targets: Sequence[str]) -> list[dict]:
    """One row per quantity the targets cover in ``res`` (a law engine's result): the mean queue
    length with its own error (Student t on its degrees of freedom), ``E[u_i]`` with the normal
    95 % quantile (``levels``: every ``i >= 2`` with ``E[u_i] >= 0.1``); the rows of
    :func:`supermarket.simulation.precision.target_rows`."""
    u = np.asarray(res.u_mean, float)
    se = np.asarray(res.u_stderr, float)

    def level(i: int, t: str) -> dict:
        if i > u.size:
            return _prec._row(t, f"E[u_{i}]", 0.0, math.nan, f"level {i} was never occupied in the run")
        s = float(se[i - 1])
        hw = _prec.Z95_NORMAL * s if math.isfinite(s) and s > 0 else math.nan
        return _prec._row(t, f"E[u_{i}]", float(u[i - 1]), hw, "" if math.isfinite(hw) else "no error bar")

    rows: list[dict] = []
    for t in targets:
        if t == "mean-queue-length":
            rows.append(_estimate_row(t, "mean queue length", res.mean_queue_length))
        elif t == "levels":
            rows += [level(i + 1, t) for i in range(1, u.size) if u[i] >= _prec.PRECISION_LEVEL_MIN]
        else:
            rows.append(level(int(t[1:]), t))
    return rows


def run_law_precision(
    run: Callable[[int | float | None, float | None], Any],
    *,
    steps: int | float | None,
    time: float | None,
    precision: Any,
    max_steps: Any,
    targets: Sequence[str],
    first_events: float | None = None,
) -> tuple[Any, dict]:
    """Run ``run(steps, time)`` (one of them given, or neither for the engine's default), and
    again with a longer horizon in the same unit until every target's relative 95 % half-width
    is at most ``precision`` or the horizon reaches ``max_steps`` events per replication.
    ``first_events``: the first round's events per replication where known before it runs
    (``steps``, or ``time`` at the engine's event rate); a first round above ``max_steps`` is
    refused before any work, as the profile engine refuses a cap below its first stretch.

    Raises
    ------
    ValueError
        Naming ``max_steps`` when the first round alone would pass it.

    Returns
    -------
    result, dict
        The last run and its ``precision`` block: ``target``, ``targets``, ``met``,
        ``cap_hit``, ``rounds``, ``expected_events``, ``expected_after_events``,
        ``max_events``, ``achieved``, ``quantities``, ``events``, ``exact``, ``prior_events``,
        ``prior_source`` (the profile engine's keys) and ``note`` (how the rounds were run).
    """
    precision = check_positive_float("precision", precision)
    if not precision < 1:
        raise ValueError(f"precision must be a relative half-width in (0, 1); got {precision!r}")
    cap = DEFAULT_MAX_STEPS if max_steps is None else check_positive_int("max_steps", max_steps)
    if first_events is not None and first_events > cap:
        what = f"{float(steps):.6g} steps" if steps is not None else f"about {first_events:.3g} events (time={time:g})"
        raise ValueError(f"max_steps must be >= the first round of the run ({what} per replication); got {cap}")
    res = run(steps, time)
    rounds, expected, after = 1, None, None
    in_steps = steps is not None
    h = float(steps) if steps is not None else float(time if time is not None else res.time)
    while True:
        rows = law_rows(res, targets)
        worst, factor = _prec.need(rows, precision)
        per_rep = res.events / max(res.replications, 1)  # events per replication of this round
        rate = per_rep / h  # ... per unit of the horizon
        if math.isfinite(worst):
            expected = _prec.expected_events(per_rep, [r["relative"] for r in rows], precision)
            after = per_rep
        met = worst <= precision
        cap_hit = not met and h * rate >= cap
        if met or cap_hit:
            break
        nxt = h * max(MIN_GROWTH, factor)
        if nxt * rate > cap:
            nxt = cap / rate
            if nxt <= 1.05 * h:  # at the cap already, up to the rate's estimate
                cap_hit = True
                break
        h = float(math.ceil(nxt)) if in_steps else nxt
        res = run(int(h) if in_steps else None, None if in_steps else h)
        rounds += 1
    block = {
        "target": precision,
        "targets": list(targets),
        "met": bool(met),
        "cap_hit": bool(cap_hit),
        "rounds": rounds,
        "expected_events": expected,
        "expected_after_events": after,
        "max_events": cap,
        "achieved": worst,
        "quantities": rows,
        "events": res.events / max(res.replications, 1),
        "exact": [],
        "prior_events": None,
        "prior_source": "no linear-noise prior on this engine",
        "note": RERUN_NOTE,
    }
    return res, block


def summary_lines(block: dict) -> list[str]:
    """The text of a law engine's ``precision`` block: the profile engine's lines
    (:func:`supermarket.simulation.precision.summary_lines`) and how the rounds were run."""
    out = _prec.summary_lines(block)
    out = [
        x.replace("(doubling stretches)", f"(the last of {block['rounds']} round(s))").replace(
            "stretch(es)", "round(s)"
        )
        for x in out
    ]
    return [*out, f"  {block['note']}"]
