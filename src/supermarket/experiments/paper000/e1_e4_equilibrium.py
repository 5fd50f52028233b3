"""E1 (equilibrium at length ``k``, docs/model.md §4, §5) and E4 (the power of two choices, §3):
grids, tables, figures and Markdown, every sentence computed from the runs of
:func:`.equilibrium_run.equilibrium`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ... import theory as th
from ...files import atomic_write
from ...model import SeedLike, spawn_seeds
from .equilibrium_run import SNAPSHOTS, _equilibrium_results, _task_seconds, equilibrium
from .output import Z_FINDING, _bound_verdict, _mean_max_cell, _plt, _pm_of, _save_figure, _write_table

__all__ = ["e1_equilibrium", "e4_power_of_choices"]


def _e1_configs(quick: bool):
    # k = 2, 2, 1 with (1−λ)d^k = n^{kβ−α} well above log n (the maximum is k at laptop n), and
    # k = 2, 3 with n^{kβ−α} below log n (the maximum is still k+1 at laptop n)
    non_integer = [(0.6, 0.5), (0.5, 0.4), (0.2, 0.5), (0.5, 0.3), (0.6, 0.25)]
    ns = [1000, 10_000] if quick else [1000, 10_000, 100_000, 1_000_000]
    cfg = [(n, a, b) for a, b in non_integer for n in ns]
    # α/β an integer: n with n^β an integer, so that 1/(1−λ) = d^k exactly
    integer = [
        (0.5, 0.25, [6, 10] if quick else [6, 10, 18, 32], 4),
        (0.5, 0.5, [32, 100] if quick else [32, 100, 316, 1000], 2),
    ]
    return cfg + [(m**power, a, b) for a, b, ms, power in integer for m in ms]


def _e1_plan(quick: bool):
    plan = []
    for n, a, b in _e1_configs(quick):
        d = int(round(n**b)) if abs(n**b - round(n**b)) < 1e-9 else int(math.floor(n**b))  # n^β exactly when whole
        lam = 1.0 - n ** (-a)
        up = th.mixing_bounds(n, d, lam).upper_steps
        factor, cap = (5, 1.5e8) if quick else (20, 2e9)
        steps = int(min(max(factor * up, 2e6), cap))
        burn = int(min(max(up, 2e5), cap / 4))
        plan.append((n, a, b, d, lam, steps, burn, steps >= int(5 * up)))
    return plan


def _equilibrium_task(args):
    """``("E1" | "E4", task)``: one equilibrium run of either experiment."""
    which, task = args
    return _e1_task(task) if which == "E1" else _e4_task(task)


def _e1_task(args):
    n, _a, _b, d, lam, steps, burn, ss = args
    k = th.k_lambda_d(d, lam)
    return equilibrium(n, d, lam, steps=steps, burn_in=burn, levels=k + 3, seed=ss, k=k)


def _e1_tasks(quick: bool, seed):
    """The E1 equilibrium runs (tasks for :func:`_e1_task`) and their expected seconds."""
    plan = _e1_plan(quick)
    tasks = [p[:7] + (s,) for p, s in zip(plan, spawn_seeds(seed, len(plan)))]
    return tasks, [_task_seconds(p[3], p[5] + p[6]) for p in plan]


def e1_equilibrium(
    out: Path, *, quick: bool, seed: SeedLike, workers: int | None, client: Any = None, results: list | None = None
) -> dict:
    """E1 (see the module docstring); ``results``: the runs of :func:`_e1_tasks`, if already run."""
    plan = _e1_plan(quick)
    res = _equilibrium_results(
        results, "E1 equilibrium", _e1_tasks, _e1_task, lambda t: t[5] + t[6], quick, seed, workers, client
    )
    rows = []
    for (n, a, b, d, lam, steps, burn, long_enough), eq in zip(plan, res):
        ratio, k = a / b, th.k_lambda_d(d, lam)
        share, sse, srel = eq["max_share"], eq["max_share_stderr"], eq["max_share_reliable"]
        modal, u = int(np.argmax(share)), eq["u_mean"]
        frac_k, frac_k_se = float(eq["frac_mean"][k - 1]), float(eq["frac_stderr"][k - 1])
        frac_k_rel = bool(eq["frac_reliable"][k - 1])
        bound = 1 - 2 * n ** (-a + (k - 1) * b)
        at = lambda arr, i, default: arr[i].item() if i < arr.size else default  # noqa: E731
        row = {
            "n": n,
            "alpha": a,
            "beta": b,
            "alpha_over_beta": round(ratio, 6),
            "integer_ratio": abs(ratio - round(ratio)) < 1e-9,
            "d": d,
            "load": lam,
            "k_grid": math.ceil(ratio - 1e-12),
            "k": k,
            "k_hypothesis": th.k_hypothesis(n, d, lam),
            "possible_max": list(th.k_report(d, lam).possible_max),
            "steps": steps,
            "burn_in": burn,
            "steps_at_least_5_upper": long_enough,
            "reliable": eq["reliable"],
            "notes": "; ".join(eq["notes"]),
            "modal_max": modal,
            "max_always": bool(share[modal] == 1.0),
            **_estimate(eq, "mean_max"),
            "share_max_eq_k": at(share, k, 0.0),
            "share_max_eq_k_stderr": at(sse, k, math.nan),
            "share_max_eq_k_reliable": at(srel, k, False),
            "share_max_eq_k1": at(share, k + 1, 0.0),
            "share_max_eq_k1_stderr": at(sse, k + 1, math.nan),
            "share_max_eq_k1_reliable": at(srel, k + 1, False),
            "share_max_gt_k1": float(share[k + 2 :].sum()),
            "frac_at_k": frac_k,
            "frac_at_k_stderr": frac_k_se,
            "frac_at_k_reliable": frac_k_rel,
            "frac_at_k_bound": bound,
            "frac_at_k_meets_bound": frac_k >= bound,
            "frac_at_k_verdict": _bound_verdict(frac_k, frac_k_se, frac_k_rel, bound),
            **_estimate(eq, "good_set_fraction"),
        }
        for j in range(1, k + 1):
            row[f"shorter_than_{j}"] = float(n * (1 - u[j - 1]))
            row[f"shorter_than_{j}_stderr"] = float(n * eq["u_stderr"][j - 1])
            row[f"shorter_than_{j}_reliable"] = bool(eq["u_reliable"][j - 1])
            row[f"shorter_than_{j}_pred"] = float(n * (1 - lam) * (lam * d) ** (j - 1))
        rows.append(row)
    meta = {
        "experiment": "E1 equilibrium",
        "quick": quick,
        "spec": "docs/model.md §4, §5",
        "lambda": "1 - n^-alpha",
        "d": "floor(n^beta) (exact n^beta when integer)",
        "eps": 0.1,
        "engine": "supermarket.simulate (profile engine, discrete time, start at the rounded fixed point)",
        "errors": "u, shorter_than_j, good_set_fraction: simulate's blocking analysis of 1024 batch means; "
        "frac_at_k, mean_max, share_max_*: blocking analysis of about "
        f"{SNAPSHOTS} equally spaced snapshots; *_reliable: the blocking reached a plateau "
        "with at least 32 blocks, the start was forgotten and the self-checks passed",
        "frac_at_k": "E[u_k - u_(k+1)]",
        "frac_at_k_verdict": f"meets: frac >= bound; within error: below by at most {Z_FINDING} stderr; "
        f"below: by more; too short to know: error bar not reliable",
    }
    _write_table(out, "E1_equilibrium", rows, meta)
    _e1_figure(out, rows)
    md = _e1_markdown(rows)
    atomic_write(out / "E1_equilibrium.md", md)
    return {"rows": rows, "markdown": md}


def _estimate(eq: dict, key: str) -> dict:
    """``key``, ``key_stderr`` and ``key_reliable`` of an equilibrium run."""
    return {key + s: eq[key + s] for s in ("", "_stderr", "_reliable")}


def _e1_figure(out, rows):
    fig, axes = _plt().subplots(1, 3, figsize=(15, 4.4))
    ax = axes[0]
    for integer, mk in ((False, "o"), (True, "s")):
        sel = [r for r in rows if r["integer_ratio"] == integer]
        lab = "α/β integer" if integer else "α/β not integer"
        ax.scatter([r["k"] for r in sel], [r["mean_max"] for r in sel], marker=mk, label=lab)
    ks = sorted({r["k"] for r in rows})
    ax.plot(ks, ks, "k--", lw=1, label="max = k")
    ax.plot(ks, [k + 1 for k in ks], "k:", lw=1, label="max = k+1")
    ax.set(xlabel="k = k_(λ,d)", ylabel="time-averaged maximum queue length")
    ax.legend(fontsize=8)
    ax.set_title("E1: maximum against k")
    ax = axes[1]
    sel = [r for r in rows if not r["integer_ratio"]]
    err = [Z_FINDING * r["frac_at_k_stderr"] if r["frac_at_k_reliable"] else 0.0 for r in sel]
    ax.errorbar([r["frac_at_k_bound"] for r in sel], [r["frac_at_k"] for r in sel], yerr=err, fmt="o")
    lo = min(min(r["frac_at_k_bound"] for r in sel), 0)
    ax.plot([lo, 1], [lo, 1], "k--", lw=1, label="fraction = bound")
    ax.set(xlabel="1 − 2 n^(−α+(k−1)β)", ylabel="fraction of queues of length k")
    ax.set_title("E1: fraction at length k (α/β not integer)")
    ax.legend(fontsize=8)
    ax = axes[2]
    pts = [(r[f"shorter_than_{j}_pred"], r[f"shorter_than_{j}"], j) for r in rows for j in range(1, r["k"] + 1)]
    xs, ys, cs = (list(c) for c in zip(*pts))
    sc = ax.scatter(xs, ys, c=cs, cmap="viridis")
    m = [min(xs + ys) * 0.8, max(xs + ys) * 1.2]
    ax.plot(m, m, "k--", lw=1)
    ax.set(xscale="log", yscale="log", xlabel="n(1−λ)(λd)^(j−1)", ylabel="queues shorter than j (simulated)")
    ax.set_title("E1: shorter queues (linearised, derived)")
    fig.colorbar(sc, ax=ax, label="j")
    _save_figure(fig, out, "E1_equilibrium")


def _modal_call(r) -> str | None:
    """Whether "which of k and k+1 is modal" can be called (``None``), or is ``"too close"`` (within
    ``Z_FINDING`` standard errors) or ``"too short"`` (an error bar not reliable); shares of 0 or 1
    need none.  The one rule of the E1 section and the Claims table."""
    a, b = r["share_max_eq_k"], r["share_max_eq_k1"]
    if a in (0.0, 1.0) or b in (0.0, 1.0):
        return None
    if not (r["share_max_eq_k_reliable"] and r["share_max_eq_k1_reliable"]):
        return "too short"
    if abs(a - b) <= Z_FINDING * math.hypot(r["share_max_eq_k_stderr"], r["share_max_eq_k1_stderr"]):
        return "too close"
    return None


def _modal_calls(rows):
    """``(close, unknown)``: how many rows :func:`_modal_call` finds too close or too short."""
    calls = [_modal_call(r) for r in rows]
    return calls.count("too close"), calls.count("too short")


def modal_sentence(close: int, unknown: int, total: int) -> str:
    """ "too close to call in 1 and too short to know in 2 of the 10" (empty when both are 0):
    the words the E1 section and the Claims table share."""
    parts = ([f"within {Z_FINDING:g} standard errors (too close to call) in {close}"] if close else []) + (
        [f"too short to know in {unknown}"] if unknown else []
    )
    return " and ".join(parts) + f" of the {total}" if parts else ""


def _verdict_counts(rows) -> dict[str, int]:
    """How many rows' fraction at k meets its bound, is within error, below, too short to know."""
    return {
        v: sum(r["frac_at_k_verdict"] == v for r in rows)
        for v in ("meets", "within error", "below", "too short to know")
    }


def _e1_markdown(rows):
    lines = [
        "# E1: equilibrium at length k (paper 000, docs/model.md §4–5)",
        "",
        "λ = 1 − n^−α, d = ⌊n^β⌋, chain started at the rounded fixed point (supermarket.simulate, "
        'profile engine); time averages ± standard error from a blocking analysis ("too short to know": '
        "the run is shorter than needed to estimate its own error).",
        "",
        "| n | α | β | α/β | d | λ | k | hyp. | modal max | mean max | P(max=k) | P(max=k+1) | "
        "frac at k | bound 1−2n^(−α+(k−1)β) | time in N^0.1 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = f"{r['alpha_over_beta']:.3g}" + (" (int)" if r["integer_ratio"] else "")
        lines.append(
            f"| {r['n']} | {r['alpha']} | {r['beta']} | {ratio} "
            f"| {r['d']} | {r['load']:.6g} | {r['k']} | {r['k_hypothesis']} | {r['modal_max']} | {_mean_max_cell(r)} | "
            f"{_pm_of(r, 'share_max_eq_k', share=True)} | {_pm_of(r, 'share_max_eq_k1', share=True)} | "
            f"{_pm_of(r, 'frac_at_k', 4)} | {r['frac_at_k_bound']:.3f} | {_pm_of(r, 'good_set_fraction', share=True)} |"
        )
    ni = [r for r in rows if not r["integer_ratio"]]
    it = [r for r in rows if r["integer_ratio"]]
    lines += ["", "**What the runs show.**", ""]
    n_eq_k = sum(r["modal_max"] == r["k"] for r in ni)
    n_eq_hyp = sum(abs(r["modal_max"] - r["k_hypothesis"]) <= 1 for r in rows)
    hyp_k = [r for r in ni if r["k_hypothesis"] == r["k"]]
    others = [r for r in ni if r["modal_max"] != r["k"]]
    at_k1 = sum(r["modal_max"] == r["k"] + 1 for r in others)
    applies = [th.theorem_1_2(r["n"], r["d"], r["load"]).applies for r in rows]
    sentence = (
        f"- α/β not an integer: the modal maximum equals k in {n_eq_k} of {len(ni)} configurations; "
        f"in {sum(r['modal_max'] == r['k'] for r in hyp_k)} of the {len(hyp_k)} where the hypothesis "
        "(largest k with nπ(k) ≥ 1, reconstructed) is k itself."
    )
    if others:
        further = f" and further from k in {len(others) - at_k1}" if at_k1 < len(others) else ""
        sentence += f" In the other {len(others)} it is k+1 in {at_k1}{further}."
    close, unknown = _modal_calls(ni)
    if close or unknown:
        sentence += f" Which of k and k+1 is modal is {modal_sentence(close, unknown, len(ni))}."
    sentence += (
        f" The conditions of Theorem 1.2 hold in {sum(applies)} of {len(rows)} configurations"
        f"{'.' if any(applies) else ' (they need n of order 10^15 or more).'}"
        f" The modal maximum is within 1 of the hypothesis in {n_eq_hyp} of {len(rows)} configurations."
    )
    lines.append(sentence)
    verdicts = _verdict_counts(ni)
    line = (
        f"- The fraction of queues of length k is at least 1 − 2n^(−α+(k−1)β) in {verdicts['meets']} of {len(ni)} "
        "configurations with α/β not an integer"
    )
    words = {
        "within error": f"below it by at most {Z_FINDING:g} standard errors in",
        "below": "below it by more in",
        "too short to know": "below it with an error bar too short to know in",
    }
    rest = [f"{w} {verdicts[v]}" for v, w in words.items() if verdicts[v]]
    lines.append(line + ("; " + "; ".join(rest) if rest else "") + ".")
    ratios = [r[f"shorter_than_{j}"] / r[f"shorter_than_{j}_pred"] for r in rows for j in range(1, r["k"] + 1)]
    lines.append(
        f"- Queues shorter than j against n(1−λ)(λd)^(j−1) (linearised profile, derived): ratio "
        f"from {min(ratios):.3g} to {max(ratios):.3g} (1 would be exact agreement)."
    )
    in_km = sum(r["modal_max"] in (r["k"], r["k"] + 1) for r in it)
    lines.append(
        f"- α/β an integer (1/(1−λ) = d^k exactly): the modal maximum is k or k+1 in {in_km} of {len(it)} "
        "configurations."
    )
    g = [r["good_set_fraction"] for r in rows]
    above = [r for r in rows if r["share_max_eq_k"] == 0.0 and r["modal_max"] > r["k"]]
    line = f"- Share of time in N^0.1 (clauses (a), (b)): from {min(g):.3g} to {max(g):.3g}."
    if above:
        line += (
            f" In the {len(above)} configuration(s) whose maximum never was k or less, it is at most "
            f"{max(r['good_set_fraction'] for r in above):.3g} (membership needs no queue longer than k)."
        )
    lines.append(line)
    unrel = [str(r["n"]) for r in rows if not r["reliable"]]
    tail = f"; in the others (n = {', '.join(unrel)}) the comparisons that need an error bar are too short to know."
    lines.append(
        f"- Error bars: {len(rows) - len(unrel)} of {len(rows)} runs were long enough for simulate to trust "
        f"every error bar that matters{tail if unrel else '.'}"
    )
    short = [r for r in rows if not r["steps_at_least_5_upper"]]
    if short:
        lines.append(f"- {len(short)} configuration(s) ran fewer than 5 × k d^(k−1) n log n steps (capped).")
    return "\n".join(lines) + "\n"


# =========================================================================== E4
def _e4_configs(quick):
    lam = 0.8
    ns = [100, 1000, 10_000, 100_000] if quick else [100, 1000, 10_000, 100_000, 1_000_000]
    T, burn = (200.0, 50.0) if quick else (2000.0, 200.0)
    return lam, ns, [1, 2, 3], T, burn


def _e4_task(args):
    n, d, lam, steps, burn, ss = args
    return equilibrium(n, d, lam, steps=steps, burn_in=burn, levels=2, seed=ss)


def _e4_tasks(quick: bool, seed):
    """The E4 equilibrium runs: tasks for :func:`_e4_task` and their expected seconds."""
    lam, ns, ds, T, burn_t = _e4_configs(quick)
    cfg = [(n, d) for d in ds for n in ns]
    rate = lambda n: n * (1 + lam)  # noqa: E731 - steps per time unit
    tasks = [
        (n, d, lam, int(T * rate(n)), int(burn_t * rate(n)), ss) for (n, d), ss in zip(cfg, spawn_seeds(seed, len(cfg)))
    ]
    return tasks, [_task_seconds(t[1], t[3] + t[4]) for t in tasks]


def e4_power_of_choices(
    out: Path, *, quick: bool, seed: SeedLike, workers: int | None, client: Any = None, results: list | None = None
) -> dict:
    """E4 (see the module docstring); ``results`` as for :func:`e1_equilibrium`."""
    lam, ns, ds, T, burn_t = _e4_configs(quick)
    cfg = [(n, d) for d in ds for n in ns]
    res = _equilibrium_results(
        results, "E4 power of choices", _e4_tasks, _e4_task, lambda t: t[3] + t[4], quick, seed, workers, client
    )
    rows = []
    for (n, d), eq in zip(cfg, res):
        pred = math.log(n) / math.log(1 / lam) if d == 1 else math.log(math.log(n)) / math.log(d)
        rows.append(
            {
                "n": n,
                "d": d,
                "load": lam,
                "time_units": T,
                **_estimate(eq, "mean_max"),
                "reliable": eq["reliable"],
                "notes": "; ".join(eq["notes"]),
                "modal_max": int(np.argmax(eq["max_share"])),
                "max_always": bool(np.max(eq["max_share"]) == 1.0),
                "predictor": pred,
                "predictor_name": "log n / log(1/λ)" if d == 1 else "log log n / log d",
                "k_hypothesis": th.k_hypothesis(n, d, lam),
            }
        )
    fits = {}
    for d in ds:
        sel = [r for r in rows if r["d"] == d]
        b, a = np.polyfit(np.array([r["predictor"] for r in sel]), np.array([r["mean_max"] for r in sel]), 1)
        fits[d] = {"slope": float(b), "intercept": float(a)}
    meta = {
        "experiment": "E4 power of two choices",
        "quick": quick,
        "spec": "docs/model.md §3",
        "load": lam,
        "fits_mean_max_vs_predictor": fits,
    }
    _write_table(out, "E4_power_of_choices", rows, meta)
    fig, axes = _plt().subplots(1, 2, figsize=(12, 4.6))
    for d in ds:
        sel = [r for r in rows if r["d"] == d]
        err = [Z_FINDING * r["mean_max_stderr"] if r["mean_max_reliable"] else 0.0 for r in sel]
        axes[0].errorbar([r["n"] for r in sel], [r["mean_max"] for r in sel], yerr=err, fmt="o-", label=f"d = {d}")
        ax = axes[1]
        lab = f"d={d} vs {sel[0]['predictor_name']}: slope {fits[d]['slope']:.2f}"
        ax.plot([r["predictor"] for r in sel], [r["mean_max"] for r in sel], "o", label=lab)
        xs = np.array([r["predictor"] for r in sel])
        ax.plot(xs, fits[d]["intercept"] + fits[d]["slope"] * xs, "-", lw=1)
    axes[0].set(
        xscale="log", xlabel="n", ylabel="time-averaged maximum queue length", title=f"E4: maximum queue, λ = {lam}"
    )
    axes[0].legend()
    axes[1].set_xlabel("predictor (log n/log(1/λ) for d = 1, log log n/log d for d ≥ 2)")
    axes[1].set(ylabel="time-averaged maximum", title="E4: against the classical orders")
    axes[1].legend(fontsize=8)
    _save_figure(fig, out, "E4_power_of_choices")
    lines = [
        "# E4: the power of two choices (docs/model.md §3, classical)",
        "",
        f"λ = {lam}, start at the rounded fixed point, {T:g} time units after {burn_t:g} of burn-in; "
        "time-averaged maximum queue length (supermarket.simulate, profile engine; ± standard error from a "
        'blocking analysis of equally spaced snapshots, "too short to know" where it reached no plateau).',
        "",
        "| n | d | mean max | modal max | predictor | hypothesis (largest k with nπ(k) ≥ 1) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['n']} | {r['d']} | {_mean_max_cell(r)} | {r['modal_max']} | "
            f"{r['predictor_name']} = {r['predictor']:.3g} | {r['k_hypothesis']} |"
        )
    lines += _e4_findings(rows, fits, ds)
    md = "\n".join(lines) + "\n"
    atomic_write(out / "E4_power_of_choices.md", md)
    return {"rows": rows, "fits": fits, "markdown": md}


def _e4_findings(rows, fits, ds) -> list[str]:
    """The E4 findings, every sentence computed from ``rows`` and the fits."""
    big = max(r["n"] for r in rows)
    means = {r["d"]: r["mean_max"] for r in rows if r["n"] == big}
    out = ["", "**What the runs show.**", ""]
    for d in ds:
        sel = [r for r in rows if r["d"] == d]
        modes = sorted({r["modal_max"] for r in sel})
        out.append(
            f"- d = {d}: fitted slope of the mean maximum against {sel[0]['predictor_name']} is "
            f"{fits[d]['slope']:.3f} (the classical order predicts 1); over n = {sel[0]['n']}…{sel[-1]['n']} "
            f"the modal maximum takes the values {', '.join(map(str, modes))}."
        )
    out.append(
        f"- at n = {big}: mean maximum " + ", ".join(f"{means[d]:.2f} with d = {d}" for d in ds if d in means) + "."
    )
    unrel = [f"n = {r['n']} with d = {r['d']}" for r in rows if not r["mean_max_reliable"] and not r.get("max_always")]
    tail = f"; too short to know in {', '.join(unrel)} (the slopes above are fits of the means, with no error bar)."
    out.append(
        f"- error bars of the mean maximum: reliable in {len(rows) - len(unrel)} of {len(rows)} runs"
        + (tail if unrel else ".")
    )
    return out
