"""The figures of a sweep's ``simulate`` rows (docs/model.md §3, §4): the time-averaged profile
against π(i) and the linearised profile (:func:`_profile_figure`), the response time of the rules,
service laws and server classes compared (:func:`_compare_figure`), and the maximum queue length
against ``k_{λ,d}`` (:func:`_max_queue_figure`)."""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from .. import theory as th
from ..result import pyplot as _plt
from ..stats import mean_stderr
from .cells import LAW_KEYS, _json, _law, _num, _padded, _param_label, law_label
from .render import Figure, _fig_to_png, _finish

__all__ = ["MAX_PROFILE_PANELS"]

MAX_PROFILE_PANELS = 9


def _mean_field_profile(r: dict, levels: int) -> tuple[np.ndarray, str] | None:
    """The row's mean-field fixed point where known in closed form (JSQ(d), random, jsq/jiq with
    exponential service: docs/model.md §3, :func:`supermarket.system.policies.fluid_fixed_point`), else None."""
    policy, service, classes = _law(r)
    if service != "exp" or classes is not None or float(r["load"]) >= 1:  # λ >= 1: no fixed point
        return None
    lam, d = float(r["load"]), int(r["d"])
    i = np.arange(1, levels + 1)
    if policy == "random" or (policy == "jsq-d" and d == 1):
        return lam**i, "λ^i (M/M/1 queues)"
    if policy in ("jsq", "jiq"):
        return np.where(i == 1, lam, 0.0), "fluid fixed point (u_1 = λ)"
    if policy == "jsq-d":
        return th.fixed_point(d, lam, levels), "π(i) mean field"
    return None


def _k(d, lam):
    try:
        return th.k_lambda_d(int(d), float(lam)) if d and int(d) >= 2 else None
    except (TypeError, ValueError):
        return None


def _profile_figure(points) -> Figure | None:
    items = []
    for rs in points.values():
        profiles = [_json(r.get("u_mean")) for r in rs]
        profiles = [np.asarray(p, dtype=float) for p in profiles if isinstance(p, list) and p]
        if not profiles:
            continue
        mat = _padded(profiles)
        mean, se = mean_stderr(mat)
        own = _json(rs[0].get("u_stderr"))  # one replication: the run's own error
        if se is None and isinstance(own, list):
            se = np.zeros(mat.shape[1])
            se[: len(own)] = np.asarray([x if x is not None else 0.0 for x in own], dtype=float)
        items.append((rs[0], mean, se))
    drawn: set[str] = set()  # the references drawn, for the caption
    if not items:
        return None
    items = items[:MAX_PROFILE_PANELS]
    cols = min(3, len(items))
    rows_ = math.ceil(len(items) / cols)
    fig, axes = _plt().subplots(rows_, cols, figsize=(4.2 * cols, 3.3 * rows_), squeeze=False)
    for ax in axes.flat[len(items) :]:
        ax.set_visible(False)
    for ax, (r, mean, se) in zip(axes.flat, items):
        i = np.arange(1, len(mean) + 1)
        ax.errorbar(
            i, mean, yerr=None if se is None else 2 * se, fmt="o", ms=4, capsize=2, label="simulated E[u_i] (±2 se)"
        )
        lam = float(r["load"])
        mf = _mean_field_profile(r, len(mean))
        if mf is not None:
            ax.plot(i, mf[0], "s--", ms=3, mfc="none", label=mf[1])
            drawn.add(mf[1])
        k = _k(r["d"], lam) if _law(r) == ("jsq-d", "exp", None) else None
        if k is not None:
            q = th.linearised_q(int(r["d"]), lam, k)
            ax.plot(np.arange(1, k + 1), 1.0 - q, "x:", label="1 − q̃_i linearised (derived)")
            drawn.add("linearised")
        title = _param_label(r, ("n", "d", "load", "time_mode"))
        varying = [k for k in LAW_KEYS if len({_law(x)[LAW_KEYS.index(k)] for p in points.values() for x in p}) > 1]
        if varying:
            title += "\n" + law_label(r, tuple(varying))
        ax.set_title(title, fontsize=9)
        ax.set(xlabel="level i", ylabel="u_i", ylim=(-0.05, 1.05))
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=7)
    fig.suptitle("Time-averaged profile against π and the linearised profile", fontsize=11)
    fig.tight_layout()
    return Figure(
        "profiles",
        "Profiles against π and the linearised prediction",
        "Simulated time-averaged profile E[u_i] (mean over replications, error bars 2 standard errors)"
        + _profile_refs(drawn),
        _fig_to_png(fig),
    )


def _profile_refs(drawn: set[str]) -> str:
    """The caption's account of the references drawn (only those a panel shows).

    >>> _profile_refs(set())
    '; no mean-field reference is known in closed form for these points.'
    """
    refs = []
    if "π(i) mean field" in drawn:
        refs.append("the mean-field fixed point π(i) = λ^((d^i−1)/(d−1)) (docs/model.md §3)")
    if "λ^i (M/M/1 queues)" in drawn:
        refs.append("λ^i where queues are independent M/M/1 (random dispatch, d = 1)")
    if "fluid fixed point (u_1 = λ)" in drawn:
        refs.append("the fluid fixed point u_1 = λ (jsq, jiq)")
    if "linearised" in drawn:
        refs.append("the linearised profile 1 − q̃_i, q̃_i = (1−λ)((λd)^i−1)/(λd−1), derived (docs/model.md §4)")
    if not refs:
        return "; no mean-field reference is known in closed form for these points."
    return " against " + ", ".join(refs[:-1]) + (" and " if len(refs) > 1 else "") + refs[-1] + "."


def _point_value(rs: list[dict], column: str, quantile: str | None = None) -> tuple[float, float | None] | None:
    """(mean, standard error) of a column over a grid point's replications: their spread, or with
    one the row's own error; no error where a run does not trust it."""

    def cell(r: dict) -> float | None:
        v = _json(r.get(column))
        return _num(v.get(quantile) if isinstance(v, dict) else None) if quantile else _num(v)

    vals = [x for x in (cell(r) for r in rs) if x is not None]
    if not vals:
        return None
    if not all(_long_enough(r) for r in rs):  # a run too short to know its error: no error bar
        return float(np.mean(vals)), None
    if len(vals) > 1:
        m, se = mean_stderr(vals)
        return float(m), (None if se is None else float(se))
    key = "sojourn_stderr_mean" if column == "sojourn_mean" else f"{column}_stderr"
    own = _json(rs[0].get(column.replace("_quantiles", "_stderr_quantiles") if quantile else key))
    se = _num(own.get(quantile) if isinstance(own, dict) else None) if quantile else _num(own)
    return vals[0], se


def _long_enough(r: dict) -> bool:
    """Whether a simulate row's run knows its response-time error (event or count engine's flag)."""
    flag = "sojourn_long_enough_mean" if r.get("engine") in ("events", "event") else "mean_queue_length_reliable"
    return r.get(flag) is not False


def _compare_figure(points: OrderedDict[int, list[dict]]) -> Figure | None:
    """Response time against load, one curve per rule / service law / classes (and n, d) a sweep varies."""
    rows = [r for rs in points.values() for r in rs]
    laws = {_law(r) for r in rows}
    if len(laws) < 2:
        return None
    varying = tuple(k for j, k in enumerate(LAW_KEYS) if len({x[j] for x in laws}) > 1)
    nd = len({(r.get("n"), r.get("d")) for r in rows}) > 1
    curves: dict = {}
    for rs in points.values():
        r = rs[0]
        key = (law_label(r, varying), _param_label(r, ("n", "d")) if nd else "")
        curves.setdefault(key, []).append(rs)
    fig, axes = _plt().subplots(1, 2, figsize=(10.5, 4.2))
    drawn = False
    for (label, ndl), pts in curves.items():
        for ax, (col, q) in zip(axes, (("sojourn_mean", None), ("sojourn_quantiles", "0.99"))):
            xs, ys, es = [], [], []
            for rs in sorted(pts, key=lambda rs: float(rs[0]["load"])):
                v = _point_value(rs, col, q)
                if v is None:
                    continue
                xs.append(float(rs[0]["load"]))
                ys.append(v[0])
                es.append(np.nan if v[1] is None else 2 * v[1])
            if xs:
                ax.errorbar(xs, ys, yerr=es, fmt="o-", ms=4, capsize=2, label=label + (f" ({ndl})" if ndl else ""))
                drawn = True
    if not drawn:
        _plt().close(fig)
        return None
    for ax, what in zip(axes, ("mean response time", "99th percentile of the response time")):
        ax.set(xlabel="load λ (per unit of capacity)", ylabel=what, yscale="log")
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=7)
    fig.suptitle("Response time by " + " / ".join(k.replace("_", " ") for k in varying), fontsize=11)
    fig.tight_layout()
    return Figure(
        "compare",
        "Dispatch rules and service laws compared",
        "Mean and 99th percentile of the response time (sojourn, FIFO) against the load, one curve per "
        + " / ".join(k.replace("_", " ") for k in varying)
        + ". Error bars: 2 standard errors over the grid point's independent replications, or the run's own "
        "error with one replication; none where the run does not trust its own error (too short to know). "
        "Points on a count engine (a phase-type law, exponential classes) have their mean by Little's law "
        "and no quantile: those engines follow no customer.",
        _fig_to_png(fig),
    )


def _max_summary(rs):
    """Most frequent and largest observed maximum queue length over a point's replications."""
    agg: dict[int, float] = {}
    for r in rs:
        dist = _json(r.get("max_queue_dist"))
        if isinstance(dist, dict):
            for length, frac in dist.items():
                try:
                    agg[int(length)] = agg.get(int(length), 0.0) + float(frac) / len(rs)
                except (TypeError, ValueError):
                    continue
    if not agg:
        return None
    lengths = sorted(agg)
    mode = max(lengths, key=lambda x: agg[x])
    seen = [x for x in lengths if agg[x] > 0]
    return mode, (min(seen) if seen else mode), (max(seen) if seen else mode), agg


def _max_queue_figure(points) -> Figure | None:
    xs, modes, lo, hi = [], [], [], []
    for rs in points.values():
        r = rs[0]
        k = _k(r["d"], r["load"]) if _law(r) == ("jsq-d", "exp", None) else None  # paper 000's k: JSQ(d) only
        ms = _max_summary(rs)
        if k is None or ms is None:
            continue
        mode, mn, mx, _ = ms
        xs.append(k)
        modes.append(mode)
        lo.append(mode - mn)
        hi.append(mx - mode)
    if not xs:
        return None
    fig, ax = _plt().subplots(figsize=(5.5, 4.2))
    jitter = (np.arange(len(xs)) % 5 - 2) * 0.04
    lab = "most frequent maximum (bars: range observed)"
    ax.errorbar(np.asarray(xs) + jitter, modes, yerr=[lo, hi], fmt="o", capsize=3, label=lab)
    top = max(max(xs), max(m + h for m, h in zip(modes, hi))) + 1
    ax.plot([0, top], [0, top], "k--", lw=1, label="maximum = k")
    ax.plot([0, top], [1, top + 1], ":", color="grey", lw=1, label="maximum = k + 1")
    ax.set(xlim=(0, top), ylim=(0, top + 1))
    return _finish(
        fig,
        ax,
        xlabel="k_(λ,d) = ⌈log(1/(1−λ))/log d⌉",
        ylabel="maximum queue length",
        title="Equilibrium maximum queue length against k_(λ,d)",
        name="max_queue",
        heading="Maximum queue length against k_(λ,d)",
        caption="For each grid point, the most frequent time-averaged maximum queue length (bars: the "
        "smallest and largest maxima seen) against k_(λ,d) (paper 000, docs/model.md §4; its n → ∞ "
        "statement: k, or k or k+1 when 1/(1−λ) is a power of d). " + _max_tally(xs, modes),
    )


def _max_tally(ks, modes) -> str:
    """What the points show, counted from them (no sentence the data can contradict).

    >>> _max_tally([2, 2, 3], [2, 4, 4])
    'Here the most frequent maximum is k at 1 of 3 grid points, k + 1 at 1, k + 2 at 1.'
    """
    by: dict[int, int] = {}
    for k, m in zip(ks, modes):
        by[m - k] = by.get(m - k, 0) + 1
    parts = [f"k {'+' if o > 0 else '−'} {abs(o)}" if o else "k" for o in sorted(by)]
    counts = [f"{p} at {by[o]}" for p, o in zip(parts, sorted(by))]
    counts[0] = counts[0] + f" of {len(ks)} grid points"
    return "Here the most frequent maximum is " + ", ".join(counts) + "."
