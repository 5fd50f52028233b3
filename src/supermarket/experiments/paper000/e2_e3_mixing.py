"""E2 (mixing from a good state) and E3 (bad starts, and the TV curve) of paper 000 (docs/model.md
§6): coalescence times against the orders with constant 1, tables, figures and Markdown."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ... import mixing as mx
from ... import theory as th
from ...files import atomic_write
from ...model import SeedLike, spawn_seeds
from .output import _fit_slope, _fmt, _plt, _progress, _save_figure, _write_table

__all__ = ["e2_mixing_scaling", "e3_bad_starts"]


def _tau_cells(n, d, lam, dd: dict, R: int) -> dict:
    """The columns E2 and E3 share: the configuration and the coalescence time's mean and median."""
    s = dd["coalescence_steps"]
    return dict(
        n=n, d=d, load=lam, k=dd["k"], replications=R, mean_steps=s["mean"], mean_ci=s["ci"], median_steps=s["median"]
    )


# =========================================================================== E2
def _e2_configs(quick):
    """(sweep, n, d, λ) rows and the replications per row (the sweeps of docs/mixing.md)."""
    ns = [250, 500, 1000, 2000] if quick else [500, 1000, 2000, 4000, 8000, 16000]
    cfg = [("n", n, d, 0.95) for d in (3, 5, 25) for n in ns]
    return cfg + [("d", 1000 if quick else 4000, d, 0.99) for d in (12, 20, 40, 80)], (12 if quick else 50)


def e2_mixing_scaling(out: Path, *, quick: bool, seed: SeedLike, workers: int | None, client: Any = None) -> dict:
    cfg, R = _e2_configs(quick)
    seeds = spawn_seeds(seed, len(cfg))
    rows = []
    for i, ((sweep, n, d, lam), ss) in enumerate(zip(cfg, seeds)):
        _progress(f"E2 mixing scaling {i + 1}/{len(cfg)}: n={n}, d={d}, λ={lam}")
        dd = mx.coalescence(
            n, d, lam, start="fixed-point", replications=R, seed=ss, workers=workers, client=client
        ).to_dict()
        s = dd["coalescence_steps"]
        rows.append(
            {
                "sweep": sweep,
                **_tau_cells(n, d, lam, dd, R),
                "median_ci": s["median_ci"],
                "q90_steps": s["q90"],
                "tmix_bound_steps": dd["tmix_steps"],
                "censored": dd["censored"],
                "upper_order": dd["bound_upper_steps"],
                "lower_order": dd["bound_lower_good_steps"],
                "mean_over_upper": s["mean"] / dd["bound_upper_steps"],
                "mean_over_lower": s["mean"] / dd["bound_lower_good_steps"],
                "slow_mode_steps": n * (1 + lam) * th.slow_mode(d, lam).relaxation_time,
                "mean_time": dd["coalescence_time"]["mean"],
                "burn_in": dd["burn_in_steps"],
                "coupling_increases": dd["coupling_increases"],
            }
        )
    ok = [r for r in rows if r["censored"] == 0]
    nsw, dsw = [r for r in ok if r["sweep"] == "n"], [r for r in ok if r["sweep"] == "d"]

    def fit(sel, x):  # log τ against log x(row)
        return _fit_slope([x(r) for r in sel], [r["mean_steps"] for r in sel])

    fits: dict[str, Any] = {}
    fits["slope_vs_upper"], fits["intercept_vs_upper"] = fit(ok, lambda r: r["upper_order"])
    fits["slope_vs_lower"], fits["intercept_vs_lower"] = fit(ok, lambda r: r["lower_order"])
    ds = sorted({r["d"] for r in nsw})
    per_d = fits["slope_vs_n_by_d"] = {d: fit([r for r in nsw if r["d"] == d], lambda r: r["n"])[0] for d in ds}
    fits["slope_vs_d_at_fixed_n_k"] = fit(dsw, lambda r: r["d"])[0]
    fits["slope_vs_slow_mode_log_n"] = fit(ok, lambda r: r["slow_mode_steps"] * math.log(r["n"]))[0]
    up = {d: [r["mean_over_upper"] for r in nsw if r["d"] == d] for d in per_d}
    fits["mean_over_upper_range_by_d"] = {d: [min(x), max(x)] for d, x in up.items()}
    meta = {
        "experiment": "E2 mixing scaling",
        "quick": quick,
        "spec": "docs/model.md §2, §6",
        "start": "rounded fixed point (good state) vs stationary copy",
        "fits": fits,
    }
    _write_table(out, "E2_mixing_scaling", rows, meta)
    _e2_figure(out, rows, fits)
    md = _e2_markdown(rows, fits, R)
    atomic_write(out / "E2_mixing_scaling.md", md)
    return {"rows": rows, "fits": fits, "markdown": md}


def _e2_figure(out, rows, fits):
    fig, axes = _plt().subplots(1, 3, figsize=(17, 4.6))

    def group(r):  # one curve per (sweep, d of an n sweep, λ)
        return r["sweep"], r["d"] if r["sweep"] == "n" else None, r["load"]

    groups = sorted({group(r) for r in rows}, key=lambda g: (g[0], g[1] or 0))

    def errs(sel):
        return np.array([[r["mean_steps"] - r["mean_ci"][0], r["mean_ci"][1] - r["mean_steps"]] for r in sel]).T

    for ax, key, label, slope in (
        (axes[0], "upper_order", "k d^(k−1) n log n", fits["slope_vs_upper"]),
        (axes[1], "lower_order", "d^(k−1) n", fits["slope_vs_lower"]),
    ):
        for g in groups:
            sel = [r for r in rows if group(r) == g and r["censored"] == 0]
            if not sel:
                continue
            lab = (
                f"n sweep, d={g[1]}, k={sel[0]['k']}, λ={g[2]}"
                if g[0] == "n"
                else f"d sweep, n={sel[0]['n']}, k=2, λ={g[2]}"
            )
            ax.errorbar([r[key] for r in sel], [r["mean_steps"] for r in sel], yerr=errs(sel), fmt="o", label=lab)
        xs = np.array([r[key] for r in rows])
        grid = np.geomspace(xs.min(), xs.max(), 20)
        icpt = fits["intercept_vs_upper"] if key == "upper_order" else fits["intercept_vs_lower"]
        ax.plot(grid, np.exp(icpt) * grid**slope, "k-", lw=1, label=f"pooled fit: slope {slope:.2f}")
        ax.plot(grid, grid, "k--", lw=1, label="τ = order")
        ax.set(xscale="log", yscale="log", xlabel=f"{label} (steps)", ylabel="mean coalescence time τ (steps, 95% CI)")
        ax.legend(fontsize=7)
    axes[0].set_title("E2: τ from a good state vs the upper order")
    axes[1].set_title("E2: τ vs the lower order")
    ax = axes[2]
    sel = [r for r in rows if r["sweep"] == "d" and r["censored"] == 0]
    if sel:
        ax.errorbar(
            [r["d"] for r in sel],
            [r["mean_steps"] for r in sel],
            yerr=errs(sel),
            fmt="o",
            label=f"slope {fits['slope_vs_d_at_fixed_n_k']:.2f} (d^(k−1) = d: 1)",
        )
        dg = np.array([r["d"] for r in sel], float)
        ax.plot(dg, sel[0]["mean_steps"] * dg / dg[0], "k--", lw=1, label="∝ d")
        ax.set(xscale="log", yscale="log")
        ax.legend(fontsize=8)
    ax.set(xlabel="d (k = 2 fixed)", ylabel="mean coalescence time τ (steps)", title="E2: τ against d at fixed n and k")
    _save_figure(fig, out, "E2_mixing_scaling")


def _e2_markdown(rows, fits, R):
    lines = [
        "# E2: mixing time from a good state (paper 000, docs/model.md §6)",
        "",
        "Coalescence time τ of a copy started at the rounded fixed point with a stationary copy "
        f"(sorted coupling, docs/model.md §2), {R} pairs per row; t_mix(1/4) ≤ q75(τ).",
        "",
        "| sweep | n | d | λ | k | mean τ (95% CI) | median | q75 (t_mix bound) | k d^(k−1) n log n | d^(k−1) n | "
        "τ/upper | τ/lower | censored |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['sweep']} | {r['n']} | {r['d']} | {r['load']} | {r['k']} | {_fmt(r['mean_steps'])} "
            f"({_fmt(r['mean_ci'][0])}–{_fmt(r['mean_ci'][1])}) | {_fmt(r['median_steps'])} | "
            f"{_fmt(r['tmix_bound_steps'])} | {_fmt(r['upper_order'])} | {_fmt(r['lower_order'])} | "
            f"{_fmt(r['mean_over_upper'])} | {_fmt(r['mean_over_lower'])} | {r['censored']} |"
        )
    lo, hi = min(r["mean_over_lower"] for r in rows), max(r["mean_over_lower"] for r in rows)
    up = [r["mean_over_upper"] for r in rows]
    n_sweep = sorted({r["n"] for r in rows if r["sweep"] == "n"})
    nlogn = _fit_slope(n_sweep, [m * math.log(m) for m in n_sweep])[0] if len(n_sweep) > 1 else float("nan")
    dsw = [r for r in rows if r["sweep"] == "d"]
    cond = [th.theorem_1_2(r["n"], r["d"], r["load"]).applies for r in dsw]
    spread = {d: (b / a if a > 0 else float("inf")) for d, (a, b) in fits["mean_over_upper_range_by_d"].items()}
    increases = sum(r["coupling_increases"] for r in rows)
    l1 = f"increased {increases} times (the sorted coupling should never let it grow)"
    below = f"below 1 in {sum(r['mean_over_lower'] < 1 for r in rows)} rows; the order has no constant"
    lines += [
        "",
        "**What the runs show.**",
        "",
        "- slope of log τ against log n at fixed d: "
        + ", ".join(f"d={d}: {s:.3f}" for d, s in fits["slope_vs_n_by_d"].items())
        + f" (n log n over n = {n_sweep[0] if n_sweep else '—'}…{n_sweep[-1] if n_sweep else '—'} "
        f"has slope {nlogn:.3f}).",
        f"- slope of log τ against log d at fixed n and k = 2: {_fmt(fits['slope_vs_d_at_fixed_n_k'])} "
        f"(d^(k−1) = d predicts 1); the conditions of Theorem 1.2 hold in {sum(cond)} of the {len(dsw)} "
        "rows of this sweep.",
        "- at fixed d, τ / (k d^(k−1) n log n) across n: "
        + ", ".join(
            f"d={d}: {a:.3g}–{b:.3g} (max/min {spread[d]:.2g})"
            for d, (a, b) in fits["mean_over_upper_range_by_d"].items()
        )
        + f"; overall {min(up):.3g}–{max(up):.3g}. The papers give orders without constants, so the pooled "
        f"log-log slope against k d^(k−1) n log n, {fits['slope_vs_upper']:.3f}, mixes configurations with "
        f"different constants (against d^(k−1) n: {fits['slope_vs_lower']:.3f}).",
        f"- τ / (d^(k−1) n) ranges from {lo:.3g} to {hi:.3g} "
        f"({'at least 1 everywhere, as the Ω(d^(k−1) n) lower order allows' if lo >= 1 else below}).",
        f"- against the slow mode (derived): log-log slope of τ against n(1+λ)/μ_k · log n is "
        f"{fits['slope_vs_slow_mode_log_n']:.3f} (μ_k from theory.slow_mode; column slow_mode_steps).",
        f"- the L1 distance {l1 if increases else 'never increased in any pair'}.",
    ]
    return "\n".join(lines) + "\n"


# =========================================================================== E3
def _e3_configs(quick):
    n = 500 if quick else 2000
    d, lam = 3, 0.9
    gs = [5, 10, 20, 40] if quick else [5, 10, 20, 40, 80]
    ls = [50, 100, 200, 400] if quick else [50, 100, 200, 400, 800]
    return n, d, lam, gs, ls, (10 if quick else 40)


def e3_bad_starts(out: Path, *, quick: bool, seed: SeedLike, workers: int | None, client: Any = None) -> dict:
    n, d, lam, gs, ls, R = _e3_configs(quick)
    starts = [f"customers:{g}" for g in gs] + [f"long:{l}" for l in ls]
    seeds = spawn_seeds(seed, len(starts))
    rows = []
    for i, (st, ss) in enumerate(zip(starts, seeds)):
        _progress(f"E3 bad starts {i + 1}/{len(starts)}: n={n}, d={d}, λ={lam}, from {st}")
        dd = mx.coalescence(n, d, lam, start=st, replications=R, seed=ss, workers=workers, client=client).to_dict()
        s = dd["coalescence_steps"]
        kind, val = st.split(":")
        rows.append(
            {
                "start": st,
                "kind": kind,
                "value": int(val),
                **_tau_cells(n, d, lam, dd, R),
                "tmix_bound_steps": dd["tmix_steps"],
                "censored": dd["censored"],
                "lower_order": dd["bound_lower_steps"],
                "mean_over_lower": s["mean"] / dd["bound_lower_steps"],
                "good_state_upper": dd["bound_upper_steps"],
            }
        )
    fits, lin = {}, {}
    for kind in ("customers", "long"):
        sel = [r for r in rows if r["kind"] == kind and r["censored"] == 0]
        fits[kind] = _fit_slope([r["lower_order"] for r in sel], [r["mean_steps"] for r in sel])[0]
        if len(sel) >= 2:
            b, a = np.polyfit([r["lower_order"] for r in sel], [r["mean_steps"] for r in sel], 1)
            lin[kind] = {"slope": float(b), "intercept": float(a)}
        else:
            lin[kind] = {"slope": float("nan"), "intercept": float("nan")}
    meta = {
        "experiment": "E3 bad starts",
        "quick": quick,
        "spec": "docs/model.md §6",
        "n": n,
        "d": d,
        "load": lam,
        "fits_slope_vs_lower": fits,
        "linear_fit_vs_lower": lin,
    }
    _write_table(out, "E3_bad_starts", rows, meta)
    fig, ax = _plt().subplots(figsize=(6.5, 4.6))
    for kind, label in (("customers", "‖x‖₁ = g n: (1−λ)^(−1) g n"), ("long", "one queue ℓ: ℓ n")):
        sel = [r for r in rows if r["kind"] == kind]
        x = np.array([r["lower_order"] for r in sel])
        y = np.array([r["mean_steps"] for r in sel])
        hi = [(r["mean_ci"][1] - r["mean_steps"]) if isinstance(r["mean_ci"][1], float) else 0 for r in sel]
        err = np.array([[r["mean_steps"] - r["mean_ci"][0] for r in sel], hi])
        ax.errorbar(x, y, yerr=err, fmt="o-", label=f"{label} (slope {fits[kind]:.2f})")
    xs = np.array([r["lower_order"] for r in rows])
    grid = np.geomspace(xs.min(), xs.max(), 10)
    ax.plot(grid, grid, "k--", lw=1, label="τ = lower order")
    ax.plot(grid, (1 + lam) * grid, "k:", lw=1, label="τ = (1+λ) × lower order")
    ax.set(xscale="log", yscale="log", xlabel="lower order (steps)", ylabel="mean coalescence time (steps)")
    ax.set_title(f"E3: bad starts, n={n}, d={d}, λ={lam}")
    ax.legend(fontsize=8)
    _save_figure(fig, out, "E3_bad_starts")
    lines = _e3_markdown(rows, fits, lin, n=n, d=d, lam=lam, R=R)
    tv_seed = spawn_seeds(seed, len(starts) + 1)[-1]
    tv_lines, tv_dict = _e3_tv(out, quick=quick, seed=tv_seed, workers=workers, client=client)
    md = "\n".join(lines + tv_lines) + "\n"
    atomic_write(out / "E3_bad_starts.md", md)
    return {"rows": rows, "fits": fits, "linear": lin, "tv": tv_dict, "markdown": md}


def _e3_markdown(rows, fits, lin, *, n, d, lam, R) -> list[str]:
    """The E3 summary, every sentence computed from ``rows`` and the fits."""
    lines = [
        "# E3: mixing from bad starts (paper 000, docs/model.md §6)",
        "",
        f"n = {n}, d = {d}, λ = {lam}, {R} coupled pairs per start (copy from the start vs a stationary copy).",
        "",
        "| start | mean τ (95% CI) | median | q75 (t_mix bound) | lower order | τ / lower order | censored |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['start']} | {_fmt(r['mean_steps'])} ({_fmt(r['mean_ci'][0])}–{_fmt(r['mean_ci'][1])}) | "
            f"{_fmt(r['median_steps'])} | {_fmt(r['tmix_bound_steps'])} | {_fmt(r['lower_order'])} | "
            f"{_fmt(r['mean_over_lower'])} | {r['censored']} |"
        )
    ratios = [r["mean_over_lower"] for r in rows]
    below = sum(x < 1 for x in ratios)
    lines += [
        "",
        "**What the runs show.**",
        "",
        (
            "- every mean coalescence time is at least its lower order"
            if below == 0
            else f"- {below} of {len(rows)} mean coalescence times are below their lower order"
        )
        + f" (ratios {min(ratios):.3g}–{max(ratios):.3g}).",
        f"- linear fit τ = a + b × order: b = {lin['customers']['slope']:.3f} for ‖x‖₁ = g n and "
        f"b = {lin['long']['slope']:.3f} for one long queue, against 1+λ = {1 + lam:g} if the excess drains at "
        "(1−λ)/(1+λ) customers per step (a step is a departure with probability 1/(1+λ)); "
        f"the intercepts ({_fmt(lin['customers']['intercept'])}, {_fmt(lin['long']['intercept'])} steps) "
        f"compare with the good-state order k d^(k−1) n log n = {_fmt(rows[0]['good_state_upper'])}.",
    ]
    local = []
    for kind, name in (("customers", "‖x‖₁ = g n"), ("long", "one long queue")):
        sel = [r for r in rows if r["kind"] == kind and r["censored"] == 0]
        if len(sel) >= 3:
            first = _fit_slope([r["lower_order"] for r in sel[:2]], [r["mean_steps"] for r in sel[:2]])[0]
            last = _fit_slope([r["lower_order"] for r in sel[-2:]], [r["mean_steps"] for r in sel[-2:]])[0]
            local.append(
                f"{name}: {fits[kind]:.3f} overall, {first:.3f} between the two smallest starts and "
                f"{last:.3f} between the two largest"
            )
        else:
            local.append(f"{name}: {fits[kind]:.3f}")
    lines.append("- log-log slopes of τ against the lower order (1 when draining dominates): " + "; ".join(local) + ".")
    return lines


def _e3_tv_config(quick):
    return (100, 3, 0.9, "customers:10", 100) if quick else (500, 3, 0.9, "customers:10", 400)


def _e3_tv(out: Path, *, quick, seed, workers, client=None):
    """TV distance to equilibrium of the total number of customers over time, from a bad start."""
    n, d, lam, start, R = _e3_tv_config(quick)
    _progress(f"E3 TV curve: n={n}, d={d}, λ={lam}, from {start}, {R} replicas")
    tv = mx.tv_curve(n, d, lam, start=start, replications=R, points=30, seed=seed, workers=workers, client=client)
    rows = [
        {"step": int(s), "time": float(t), "tv": float(v), "coupling_bound": float(c), "mean_total": float(m)}
        for s, t, v, c, m in zip(tv.steps, tv.time, tv.tv, tv.coupling_bound, tv.mean_total)
    ]
    meta = {
        "experiment": "E3 TV curve",
        "n": n,
        "d": d,
        "load": lam,
        "start": start,
        "replications": R,
        "bins": tv.bins,
        "noise_floor": tv.noise_floor,
        "stationary_mean_total": tv.stationary_mean_total,
        "first_below_2x_floor_steps": tv.first_below_floor(),
        "lower_order_steps": mx.start_bounds(n, d, lam, start)["lower_start"],
    }
    _write_table(out, "E3_tv_curve", rows, meta)
    fig, ax = _plt().subplots(figsize=(6.5, 4.4))
    ax.plot(tv.steps, tv.tv, "o-", ms=3, label="TV of ‖X_t‖₁ (binned, lower estimate)")
    ax.plot(tv.steps, tv.coupling_bound, "s-", ms=3, label="P(τ > t) (coupling, upper bound)")
    ax.axhline(tv.noise_floor, color="gray", ls=":", label=f"noise floor {tv.noise_floor:.3f} ({R} replicas)")
    ax.axvline(meta["lower_order_steps"], color="k", ls="--", lw=1, label="(1−λ)^(−1) g n")
    ax.set(xlabel="steps", ylabel="distance to equilibrium", title=f"E3: from {start}, n={n}, d={d}, λ={lam}")
    ax.legend(fontsize=8)
    _save_figure(fig, out, "E3_tv_curve")
    first = tv.first_below_floor()
    lines = [
        "",
        f"TV distance to equilibrium of the total number of customers, n = {n}, from {start}, {R} replicas "
        f"(E3_tv_curve.*): {tv.tv[0]:.2f} at step {int(tv.steps[0])}, at most twice the noise floor "
        f"({tv.noise_floor:.3f}) from step {first if first is not None else 'never'} on; the coupling bound "
        f"P(τ > t) reaches {tv.coupling_bound[-1]:.2f} at step {int(tv.steps[-1])}. "
        f"The lower order (1−λ)^(−1) g n is {meta['lower_order_steps']:.3g} steps.",
    ]
    return lines, {"meta": meta, "rows": rows}
