"""The figures of a sweep report (:func:`collect_figures`), one maker per measurement, as PNG
bytes (:class:`Figure`), and the helpers that read a results table's cells."""

from __future__ import annotations

import io
import json
import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .. import theory as th
from ..result import pyplot as _plt
from ..stats import mean_stderr

__all__ = ["Figure", "collect_figures"]

MAX_PROFILE_PANELS = 9


@dataclass
class Figure:
    """A rendered figure: ``name`` (file stem), ``title``, ``caption`` and PNG bytes.

    Examples
    --------
    >>> Figure("mixing", "Mixing", "Coalescence times.", b"").name
    'mixing'
    """

    name: str
    title: str
    caption: str
    png: bytes


# =========================================================================== data helpers
def _json(v):
    if v is None:
        return None
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def _num(v):
    """A finite float from a cell (numbers, numeric strings); None for censored/missing."""
    if v is None or isinstance(v, bool):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _points(rows: list[dict]) -> OrderedDict[int, list[dict]]:
    """Rows grouped by grid point (successful rows only), in grid order."""
    out: OrderedDict = OrderedDict()
    for r in sorted(rows, key=lambda r: r["task_index"]):
        if r.get("status") == "ok":
            out.setdefault(r["point"], []).append(r)
    return out


def _param_label(r: dict, keys=("n", "d", "load")) -> str:
    return ", ".join(
        f"{'λ' if k == 'load' else k}={v:.6g}" if isinstance(v, float) else f"{k}={v}"
        for k in keys
        if (v := r.get(k)) is not None
    )


# the axes of issue 21: a dispatch rule, a service law, server classes (absent: today's model)
LAW_KEYS = ("policy", "service", "server_classes")


def _law(r: dict) -> tuple[str, str, str | None]:
    """(policy, service, server classes) of a row, today's model where a key is absent."""
    return (r.get("policy") or "jsq-d", r.get("service") or "exp", r.get("server_classes") or None)


def law_label(r: dict, keys: tuple[str, ...] = LAW_KEYS) -> str:
    """The row's rule, service law and classes for a legend or a title (only ``keys``).

    >>> law_label({"policy": "jiq", "service": "erlang:2"}), law_label({}, ("policy",))
    ('jiq, erlang:2', 'jsq-d')
    """
    parts = dict(zip(LAW_KEYS, _law(r)))
    return ", ".join(
        f"classes {parts[k]}" if k == "server_classes" else str(parts[k]) for k in keys if parts[k] is not None
    )


def _mean_field_profile(r: dict, levels: int) -> tuple[np.ndarray, str] | None:
    """The row's mean-field fixed point where known in closed form (JSQ(d), random, jsq/jiq with
    exponential service: docs/model.md §3, :func:`supermarket.system.policies.fluid_fixed_point`), else None."""
    policy, service, classes = _law(r)
    if service != "exp" or classes is not None:
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


def _padded(lists) -> np.ndarray:
    """Rows of unequal length as one matrix, padded with zeros on the right."""
    mat = np.zeros((len(lists), max(len(x) for x in lists)))
    for j, x in enumerate(lists):
        mat[j, : len(x)] = x
    return mat


# =========================================================================== figures
def _fig_to_png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _plt().close(fig)
    return buf.getvalue()


def _finish(fig, ax, *, xlabel, ylabel, title, name, heading, caption, which="major", legend_size=8) -> Figure:
    """Label, grid, legend and title one-axis figures the same way; render to a :class:`Figure`."""
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3, which=which)
    ax.legend(fontsize=legend_size)
    ax.set_title(title, fontsize=10)
    return Figure(name, heading, caption, _fig_to_png(fig))


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
    flag = "sojourn_long_enough_mean" if r.get("engine") == "event" else "mean_queue_length_reliable"
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


def _mixing_figure(points) -> Figure | None:
    xs, ys, yerr, ups, los, cens = [], [], [], [], [], []
    for rs in points.values():
        r = rs[0]
        lower = _num(r.get("bound_lower_good_steps")) or _num(r.get("bound_lower_steps"))
        upper = _num(r.get("bound_upper_steps"))
        vals = [
            _num(t[0] if isinstance(t := _json(x.get("taus")), list) and t else x.get("coalescence_steps_mean"))
            for x in rs
        ]
        taus = [v for v in vals if v is not None]
        censored = len(vals) - len(taus)
        if lower is None or not taus:
            continue
        m, se = mean_stderr(taus)
        xs.append(lower)
        ys.append(m)
        yerr.append(0.0 if se is None else 2 * se)
        ups.append(upper)
        los.append(_num(r.get("bound_lower_steps")) or lower)
        cens.append(censored)
    if not xs:
        return None
    fig, ax = _plt().subplots(figsize=(5.8, 4.4))
    ys_a, err_a = np.asarray(ys), np.asarray(yerr)
    low = np.minimum(err_a, ys_a * 0.999)  # log axis: bars stop above 0
    ax.errorbar(xs, ys, yerr=[low, err_a], fmt="o", capsize=3, label="mean coalescence time (±2 se)")
    order = np.argsort(xs)
    xa = np.asarray(xs)[order]
    ax.plot(xa, np.asarray(los, dtype=float)[order], "k--", lw=1, label="lower order (start's own, constant 1)")
    if all(u is not None for u in ups):
        ax.plot(xa, np.asarray(ups, dtype=float)[order], "r:", lw=1.2, label="upper order k d^(k−1) n log n")
    for x, y, c in zip(xs, ys, cens):
        if c:
            ax.annotate(f"{c} censored", (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set(xscale="log", yscale="log")
    return _finish(
        fig,
        ax,
        xlabel="d^(k−1) n  (steps)",
        ylabel="coalescence time (steps)",
        which="both",
        title="Mixing: coalescence time against the paper-000 orders",
        name="mixing",
        heading="Mixing times against the bounds",
        caption="Coalescence time of the sorted coupling with a stationary copy (docs/model.md §2), mean over "
        "replications, against the orders of paper 000 (docs/model.md §6, constants taken as 1): "
        "Ω(d^(k−1) n) and O(k d^(k−1) n log n) steps from a good state. Censored replications "
        "(no coalescence within the budget) are left out of the mean and counted.",
    )


FLUCT_MOMENTS = ("mean_z1", "mean_z2", "var_z1", "var_z2", "cov_z1z2")


def _fluct_value(r: dict, group: str, m: str):
    for key in (f"{group}_{m}", f"{group}_{m}_value", f"{group}.{m}"):
        if key in r:
            return _num(r[key])
    return None


def _fluct_figure(points) -> Figure | None:
    sims, lims, errs, names, lna_x, lna_y, lna_e = [], [], [], [], [], [], []
    short = 0
    for rs in points.values():
        r = rs[0]
        for m in FLUCT_MOMENTS:
            lna = _fluct_value(r, "lna", m)
            lim = _fluct_value(r, "limit", m)
            vals = [_fluct_value(x, "sim", m) for x in rs]
            mean, se = mean_stderr(vals)
            if se is None and len(rs) == 1:
                se = _num(r.get(f"sim_stderr_{m}")) or _num(r.get(f"sim_{m}_stderr"))
            if any(x.get("sim_error_bars_adequate") is False for x in rs):
                se = None  # the run is too short to know its error: no error bar (drawn as ×)
                short += 1
            if lna is not None and mean is not None:
                lna_x.append(lna)
                lna_y.append(mean)
                lna_e.append(0.0 if se is None else 2 * se)
            if lim is None or mean is None:
                continue
            sims.append(mean)
            lims.append(lim)
            errs.append(0.0 if se is None else 2 * se)
            names.append(f"({r.get('regime')}) {m}" + (" (too short to know)" if se is None else ""))
    if not sims:
        return None
    # the points are numbered on the plot and named in a key beside it: names written at the
    # points overlapped wherever two moments had nearly the same values
    fig, (ax, key) = _plt().subplots(
        1, 2, figsize=(8.3, max(4.4, 0.6 + 0.14 * len(names))), gridspec_kw={"width_ratios": [5.5, 2.8]}
    )
    ax.errorbar(lims, sims, yerr=errs, fmt="o", capsize=3, label="simulated (±2 se) against limit (derived)")
    if lna_x:
        lab = "simulated against finite-n LNA at x^n"
        ax.errorbar(lna_x, lna_y, yerr=lna_e, fmt="s", mfc="none", capsize=2, alpha=0.7, label=lab)
    lo = min(min(lims + lna_x), min(s - e for s, e in zip(sims, errs)))
    hi = max(max(lims + lna_x), max(s + e for s, e in zip(sims, errs)))
    pad = 0.1 * (hi - lo or 1.0)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], "k--", lw=1, label="simulated = limit")
    ax.set(xlim=(lo - 2 * pad, hi + 2 * pad), ylim=(lo - 2 * pad, hi + 2 * pad))
    _place_numbers(fig, ax, lims, sims)
    key.axis("off")
    lines = [
        f"{j + 1}  {nm}" + (" †" if err == 0.0 and "too short" in nm else "")
        for j, (nm, err) in enumerate(zip(names, errs))
    ]
    lines = [ln.replace(" (too short to know)", "") for ln in lines]
    if short:
        lines += ["", "† too short to know:", "   no error bar"]
    key.text(0.0, 1.0, "\n".join(lines), va="top", ha="left", fontsize=7, family="monospace", transform=key.transAxes)
    fig.tight_layout()
    return _finish(
        fig,
        ax,
        xlabel="limit diffusion (derived) / linear noise approximation",
        ylabel="simulated, scaled √n (G − x^n)",
        title="Fluctuation moments against the limits",
        name="fluctuations",
        heading="Fluctuation moments against the limits",
        caption="Stationary means, variances and covariance of the scaled centred process (paper 002, "
        "docs/model.md §8) against those of the limit diffusion of its regime (limits derived; closed "
        "forms in regime (a), simulated SDE in (b), (c)), and against the finite-n linear noise "
        "approximation at the centre x^n (open squares)."
        + " The points are numbered; the key beside the plot names each one's regime and moment."
        + (
            ' Points marked † in the key ("too short to know") come from runs too short to estimate '
            "their own error: they have no error bar."
            if short
            else ""
        ),
    )


def _place_numbers(fig, ax, xs, ys) -> None:
    """Number the points 1, 2, … beside them, each label where it overlaps no label placed before
    (tried at growing distances around its point)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    taken: list = []
    offsets = [
        (dx * r, dy * r)
        for r in (4, 9, 14, 20)
        for dx, dy in ((1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (0, 1), (-1, 0), (0, -1))
    ]
    for j, (x, y) in enumerate(zip(xs, ys)):
        label = None
        for dx, dy in offsets:
            if label is not None:
                label.remove()
            ha = "left" if dx >= 0 else "right"
            va = "bottom" if dy >= 0 else "top"
            label = ax.annotate(
                str(j + 1), (x, y), fontsize=7, xytext=(dx, dy), textcoords="offset points", ha=ha, va=va
            )
            box = label.get_window_extent(renderer)
            if not any(box.overlaps(b) for b in taken):
                break
        if label is not None:
            taken.append(label.get_window_extent(renderer))


def _meanfield_figure(points) -> Figure | None:
    fig, ax = _plt().subplots(figsize=(5.8, 4.2))
    any_ = False
    for rs in list(points.values())[:8]:
        r = rs[0]
        pi = _json(r.get("fixed_point"))
        if not isinstance(pi, list) or not pi:
            continue
        pi = np.asarray(pi, dtype=float)
        i = np.arange(1, len(pi) + 1)
        (line,) = ax.semilogy(i, np.where(pi > 0, pi, np.nan), "o-", ms=3, label=f"π: {_param_label(r)}")
        ref = _json(r.get("refined_u"))
        if isinstance(ref, list) and ref:
            ref = np.asarray(ref, dtype=float)
            ax.semilogy(
                np.arange(1, len(ref) + 1),
                np.where(ref > 0, ref, np.nan),
                "x--",
                color=line.get_color(),
                ms=4,
                label="π + V/n (refined)",
            )
        any_ = True
    if not any_:
        _plt().close(fig)
        return None
    ax.set_ylim(1e-12, 2)
    return _finish(
        fig,
        ax,
        xlabel="level i",
        ylabel="u_i",
        which="both",
        legend_size=7,
        title="Mean-field fixed point and refined mean field",
        name="meanfield",
        heading="Mean field and refined mean field",
        caption="Fixed point π(i) (docs/model.md §3) and, where n is given, the refined mean field π(i) + V_i/n "
        "(Gast–Van Houdt 2018, docs/model.md §3).",
    )


def collect_figures(rows: list[dict]) -> list[Figure]:
    """The figures for the measurements present in ``rows`` (none for absent ones).

    Parameters
    ----------
    rows : list of dict
        Rows of a results table (:func:`supermarket.sweep.table_rows`).

    Returns
    -------
    list of Figure
        Each with a ``measurement`` attribute; ``theory`` rows give none.

    Examples
    --------
    >>> import tempfile, pathlib; from supermarket.sweep import parse_sweep, run_sweep
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "out"
    >>> toml = '[[run]]\\nmeasurement = "meanfield"\\nn = 50\\nd = 2\\nload = 0.9\\n'
    >>> _ = run_sweep(parse_sweep(toml), out, workers=1)
    >>> from supermarket.sweep import read_results, table_rows
    >>> [f.name for f in collect_figures(table_rows(read_results(out)))]
    ['meanfield']
    >>> import shutil; shutil.rmtree(out.parent)
    """
    figs: list[Figure] = []
    by_meas: dict[str, list[dict]] = {}
    for r in rows:
        by_meas.setdefault(r["measurement"], []).append(r)
    makers = {
        "simulate": (_compare_figure, _profile_figure, _max_queue_figure),
        "mixing": (_mixing_figure,),
        "fluctuations": (_fluct_figure,),
        "meanfield": (_meanfield_figure,),
    }
    for meas, fns in makers.items():
        if meas not in by_meas:
            continue
        pts = _points(by_meas[meas])
        for fn in fns:
            fig = fn(pts)
            if fig is not None:
                fig.measurement = meas  # type: ignore[attr-defined]
                figs.append(fig)
    return figs
