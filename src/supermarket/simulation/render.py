"""The text and the figure of a :class:`~supermarket.simulation.SimulationResult`: what
``supermarket simulate`` prints (:func:`summary_text`, behind ``SimulationResult.summary``)
and the three-panel figure (:func:`plot`, behind ``SimulationResult.plot``).
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import theory as _th
from . import precision as _precision

if TYPE_CHECKING:
    from .results import SimulationResult


def summary_text(res: SimulationResult, cdf_points: int | None = None) -> str:
    """The text of ``res.summary(cdf_points=...)`` (see :meth:`SimulationResult.summary`)."""
    cdf = res._cdf(cdf_points) if cdf_points is not None else None
    p = res.params
    lam_txt = f"{p.lam:.10g}"
    rule = (
        f"d={p.d}  λ={lam_txt}  {'with' if p.replace else 'without'} replacement"
        if res.policy == "jsq-d"
        else f"policy={res.policy}  λ={lam_txt}"
    )
    out = [
        f"supermarket simulate  n={p.n}  {rule}  engine={res.engine}  time={res.time_mode}",
        f"{res.steps:,} events measured after {res.burn_in:,} of burn-in ({res.sim_time:.6g} time units), "
        f"{res.replications} replication(s), {res.batches} batches"
        + ("  PARTIAL (interrupted)" if res.partial else ""),
    ]
    if res.start_note:
        out.append(f"start: {res.start_note}")
    k = res.k
    vr = res.variance_reduction
    out.append("")
    out.append("Time-averaged profile (docs/model.md §1–3)")
    out.extend(_profile_table(res))
    kr = _th.k_report(p.d, p.lam_exact) if k else None
    mrows = []
    for m, e in sorted(res.max_queue.items()):
        mark = "= k_(λ,d)" if k is not None and m == k else ""
        if not mark and kr is not None and m in kr.possible_max:
            mark = "allowed near the boundary"
        ok = math.isfinite(e.stderr)
        row = [str(m), "1 (all the time)" if e.value == 1.0 else _pm(e.value, e.stderr, ok)]
        if vr is not None:
            row.append(_factor(e.variance_reduction) if ok else "")
        mrows.append(row + [mark])
    out.append("")
    out.append("Maximum queue length: fraction of time")
    mhead = ["max length", "fraction ± s.e."] + (["var. reduction"] if vr is not None else []) + [""]
    out.append(_table(mhead, mrows, left=(len(mhead) - 1,)))
    out.append("")
    if k is not None:
        kh = _th.k_hypothesis(p.n, p.d, p.lam)
        note = f" ({kr.note})" if kr is not None and kr.note else ""
        out.append(f"k_(λ,d) = {k}: paper 000's n → ∞ statement{note}; its theorem needs n ≥ 1e15")
        out.append(
            f"at n = {p.n} the finite-n hypothesis applies (docs/model.md §4, reconstructed): the "
            f"equilibrium maximum is within 1 of {kh}, the largest k with n·π(k) ≥ 1"
            + ("" if kh == k else f" (not k_(λ,d) = {k})")
        )
        out.append(
            f"time in the good set N^ε (ε = {res.eps:g}, clauses (a),(b) of docs/model.md §5): "
            + _pm(res.good_set_fraction, res.good_set_fraction_stderr, bool(res.good_set_fraction_reliable))
        )
        above = sum(f for m, f in res.max_queue_dist.items() if m > k)
        if above > 0:
            share = "all" if above >= 1.0 else f"{above:.3g}"
            out.append(f"  a queue longer than k = {k} existed {share} of the time, and clause (a) fails then")
    out.extend(_mean_queue_lines(res))
    if res.response is not None:
        out.append(res.response.summary())
    else:
        out.append("response times: none (load >= 1: no equilibrium)")
    if cdf is not None:
        out.append("")
        out.append(f"Response-time CDF on {len(cdf['t'])} points (docs/model.md §10)")
        out.append(
            _table(
                ["t", "P(S ≤ t)", "P(W ≤ t)"],
                [[f"{t:.6g}", f"{a:.6g}", f"{b:.6g}"] for t, a, b in zip(cdf["t"], cdf["sojourn"], cdf["waiting"])],
            )
        )
    out.extend(error_lines(res))
    out.append(f"{res.events_per_second / 1e6:.1f} million events per second per core; wall time {res.wall_time:.2f} s")
    return "\n".join(out)


def _profile_table(res: SimulationResult) -> list[str]:
    """The profile table: each estimate with its own error beside the mean field, the refined mean
    field ``π + V/n`` and the linearised profile (theory, no error of their own) and the identity
    ``λ·E[P_(i−1)]`` measured on the run, with its own error (docs/model.md §3)."""
    p, k = res.params, res.k
    fp = res.fixed_point()
    L = len(res.u_mean)
    lin = res._linearised(L)
    rp = res.refined_mean_field()
    ide = res.identity()
    side = "u_(i−1)^d" if p.replace and res.policy == "jsq-d" else "P_(i−1)"
    vr = res.variance_reduction
    rows = []
    for i, e in enumerate(res.levels, start=1):
        rel = bool(e.reliable)
        row = [str(i), _pm(e.value, e.stderr, rel, e.note)]
        if vr is not None:
            row.append(_factor(e.variance_reduction) if rel else "")
        row += [_fmt(e.n_eff, 3) if rel else "", _fmt(fp[i - 1]) if fp is not None else "—"]
        if rp.u is not None:
            row.append(_fmt(rp.u[i - 1]))
        row.append(("—" if k and i <= k else "") if math.isnan(lin[i - 1]) else _fmt(lin[i - 1]))
        v, se = ide["value"][i - 1], ide["stderr"][i - 1]
        if i == 1:  # λ·P_0 = λ: no error of its own
            row.append(f"{_fmt(v)} (exact)" if p.lam < 1 else _fmt(v))
        else:
            row.append(_pm(v, se, bool(ide["reliable"][i - 1]), e.note))
        rows.append(row)
    head = ["i", "simulated E[u_i] ± s.e."] + (["var. reduction"] if vr is not None else []) + ["n_eff"]
    head.append("mean field π(i)")
    if rp.u is not None:
        head.append("refined π(i) + V_i/n" + (" (derived)" if rp.source == "derived" else ""))
    head += ["linearised 1 − q̃_i (derived)", f"identity λ·E[{side}] ± s.e. (plain)"]
    out = [_table(head, rows)]
    if k and np.all(np.isnan(lin)):
        out.append(
            f"linearised profile not shown: q̃_k > 1 for k = {k}, outside the regime where it holds (docs/model.md §4)"
        )
    out.append(
        f"identity: E[u_i] = λ·E[{side}] in equilibrium at every n (derived), shown as its plain time average with "
        + (
            "its own s.e.: a check apart from the control variates, which are built from it"
            if p.lam < 1
            else "its own s.e.; without an equilibrium (λ >= 1) it need not hold"
        )
    )
    if p.lam < 1:
        out.append("refined: " + _refined_words(rp, p.n))
    return out


def _refined_words(rp, n: int) -> str:
    """What the refined column is (or why it is absent), in words."""
    if rp.u is None:
        return f"π(i) + V_i/n {rp.note}"
    if rp.source == "exact":
        return "V = 0 (independent M/M/1 queues): E[u_i] = λ^i at every n, exactly"
    src = (
        "Gast and Van Houdt 2018"
        if rp.source == "classical"
        else "derived: V includes the drift's 1/n term without replacement"
    )
    return (
        f"π(i) + V_i/n at n = {n}, the mean field with its 1/n term ({src}; docs/model.md §3); "
        "its own error, O(1/n²), is not estimated"
    )


def _mean_queue_lines(res: SimulationResult) -> list[str]:
    """The mean queue length with its error, then the mean field and the refined mean field beside
    it, with the distance of the estimate from each in its own standard errors."""
    p = res.params
    vr = res.variance_reduction
    vq = ""
    if vr is not None and res.mean_queue_length_reliable and _factor(vr["mean_queue_length"]):
        vq = f" (variance reduction {_factor(vr['mean_queue_length'])})"
    out = [
        "mean queue length "
        + _pm(res.mean_queue_length, res.mean_queue_length_stderr, res.mean_queue_length_reliable)
        + vq
        + f";  mean sojourn time (Little) {res.mean_sojourn_time:.6g}"
    ]
    if p.lam >= 1:
        return out
    # Σπ(i) of the rule's fluid fixed point (supermarket.system.policies)
    if res.policy == "jsq-d":
        mf = _th.mean_queue_length(p.d, p.lam)
    else:
        mf = p.lam / (1.0 - p.lam) if res.policy == "random" else p.lam
    x, se, ok = res.mean_queue_length, res.mean_queue_length_stderr, bool(res.mean_queue_length_reliable)

    def gap(ref):
        z = f" ({(x - ref) / se:+.1f} s.e.)" if ok and se > 0 else ""
        return f"{x - ref:+.3g}{z}"

    line = f"  estimate − theory: mean field Σπ(i) = {mf:.6g} (n → ∞): {gap(mf)}"
    rp = res.refined_mean_field()
    if rp.u is not None and rp.source != "exact":
        rm = rp.mean_queue_length
        line += f";  refined Σπ + ΣV/n = {rm:.6g} (1/n term ΣV/n = {rp.sum_V / p.n:+.3g}): {gap(rm)}"
    return [*out, line]


def error_lines(res: SimulationResult) -> list[str]:
    """How the error bars were made, the self-checks and the start-up diagnosis."""
    how = {
        "blocking": "blocking analysis of batch means (automatic plateau)",
        "pooled": f"blocking analysis of batch means, pooled over {res.replications} replications",
        "replications": f"spread of {res.replications} replications (Student t)",
    }.get(res.error_method, res.error_method)
    out = [f"error bars: 1 s.e., {how}; 95% intervals use Student t (docs/model.md §9)"]
    if res.control_variates:
        cn = list(res.control_notes)
        if cn and res.controls:
            out.append(
                f"control variates: {cn[0]}; 'var. reduction' = (plain s.e. / this s.e.)², "
                "--no-control-variates for the plain estimates"
            )
            out.extend(f"  {x}" for x in cn[1:])
        else:
            out.extend(cn)
    else:
        out.append("control variates: off (plain time averages)")
    if res.self_checks:
        done = [c for c in res.self_checks if c["result"] != "inconclusive"]
        fails = [c for c in done if c["result"] == "fail"]
        inc = len(res.self_checks) - len(done)
        text = "self-checks (exact identities E[u_1] = λ, E[u_i] = λ·E[P_(i−1)]): "
        if done:
            w = max(done, key=lambda c: abs(c["z"]))
            text += (
                f"{len(done) - len(fails)} pass, {len(fails)} FAIL; largest |z| = {abs(w['z']):.1f} s.e. "
                f"(i = {w['level']}; fails beyond {w.get('threshold', 4.0):.1f})"
            )
        else:
            text += "none conclusive"
        if inc:
            text += f"; {inc} inconclusive (rare levels or unknown error)"
        out.append(text)
    trunc = [s for s in res.start_up if s["truncated_batches"] > 0 and s["forgotten"]]
    if trunc:
        tt = sum(s["truncated_time"] for s in trunc)
        out.append(
            f"start-up transient detected: burn-in extended by {tt:.4g} time units in all "
            f"(MSER-5, {len(trunc)} replication(s))"
        )
    if res.precision is not None:
        out += _precision.summary_lines(res.precision)
    return out


def plot(res: SimulationResult, path: str | os.PathLike | None = None) -> Any:
    """The figure of ``res.plot(path)`` (see :meth:`SimulationResult.plot`)."""
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    p = res.params
    panels = 3 if res.response is not None else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.2))
    ax1, ax2 = axes[0], axes[1]
    lv = np.arange(1, len(res.u_mean) + 1)
    ax1.errorbar(lv, 1 - res.u_mean, yerr=4.5 * res.u_stderr, fmt="o", label="simulated 1 − E[u_i] (±4.5 s.e.)")
    fp = res.fixed_point()
    if fp is not None:
        ax1.plot(lv, 1 - fp, "s--", mfc="none", label="mean field 1 − π(i)")
    if res.k is not None and _th.linearisation_valid(p.d, p.lam_exact, res.k):
        q = _th.linearised_q(p.d, p.lam_exact, res.k)
        ax1.plot(np.arange(1, res.k + 1), q, "x:", label="linearised q̃_i (derived)")
    ax1.set_yscale("log")
    ax1.set_xlabel("level i")
    ax1.set_ylabel("fraction of queues shorter than i")
    ax1.set_title(f"n={p.n}, {f'd={p.d}' if res.policy == 'jsq-d' else res.policy}, λ={p.lam:g} ({res.engine})")
    ax1.legend(fontsize=8)
    ks = sorted(res.max_queue_dist)
    ax2.bar(ks, [res.max_queue_dist[k] for k in ks], color="tab:blue")
    if res.k is not None:
        ax2.axvline(res.k, color="tab:red", ls="--", label=f"k_(λ,d) = {res.k} (paper 000)")
    jsqd = res.policy == "jsq-d"
    if p.lam < 1 and jsqd:
        kh = _th.k_hypothesis(p.n, p.d, p.lam)
        ax2.axvline(kh, color="tab:green", ls=":", label=f"largest k with nπ(k) ≥ 1: {kh}")
    if res.k is not None or (p.lam < 1 and jsqd):
        ax2.legend(fontsize=8)
    ax2.xaxis.get_major_locator().set_params(integer=True)
    ax2.set_xlabel("maximum queue length")
    ax2.set_ylabel("fraction of time")
    if res.response is not None:
        ax3 = axes[2]
        rt = res.response
        grid = res.cdf_grid(300)
        ax3.semilogy(grid, np.maximum(1.0 - rt.sojourn_cdf(grid), 1e-300), label="sojourn P(S > t)")
        ax3.semilogy(grid, np.maximum(1.0 - rt.waiting_cdf(grid), 1e-300), label="waiting P(W > t)")
        se = rt.sojourn.stderr
        for q, v in rt.sojourn.quantiles.items():
            xe = None if se is None or not math.isfinite(se["quantiles"][q]) else 2 * se["quantiles"][q]
            ax3.errorbar([v], [1.0 - q], xerr=xe, fmt="k|", ms=8, capsize=3)
            ax3.text(v, 1.0 - q, f" p{100 * q:g}", fontsize=7, va="bottom")
        ax3.set_ylim(max(1e-6, 0.1 * (1 - max(rt.sojourn.quantiles))), 1.05)
        ax3.set_xlabel("time (mean service times)")
        ax3.set_ylabel("survival")
        ax3.set_title("response times (quantiles ± 2 s.e.)", fontsize=9)
        ax3.legend(fontsize=8)
    fig.tight_layout()
    if path is not None:
        from ..files import save_figure_atomic

        save_figure_atomic(fig, path, dpi=120)  # whole or not at all
    return fig


def _fmt(x, digits=6):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}g}"


def _factor(x):
    """A variance-reduction factor for the table: ``×1234``, "" when not measured."""
    if x is None or not isinstance(x, (int, float)) or not math.isfinite(x):
        return ""
    return f"×{x:.3g}" if x < 1e4 else f"×{x:.2e}"


def _pm(mean, se, reliable, note=""):
    """``mean ± s.e.`` when the error bar is reliable; otherwise say why there is none."""
    if mean is None:
        return "—"
    if reliable:
        return f"{mean:.6g} ± {_fmt(se, 2)}"
    return f"{mean:.6g} ({no_error_bar_reason(mean, note)})"


RARE = "rare: no error bar"


def no_error_bar_reason(mean: float, note: str = "") -> str:
    """Why an estimate has no error bar, in the words of ``simulate``'s table (the sweep report
    uses the same): a rare level or a quantity never seen, a start not forgotten, a failed
    self-check, else a run too short to estimate its error.

    >>> no_error_bar_reason(0.0), no_error_bar_reason(0.3, "start not forgotten")
    ('rare: no error bar', 'start not forgotten')
    """
    if note.startswith("rare level") or mean == 0:
        return RARE
    if "start not forgotten" in note:
        return "start not forgotten"
    if "self-check" in note:
        return "error bars failed a self-check"
    return "too short to estimate"


def _table(header, rows, left=()) -> str:
    """A plain-text table: columns right-aligned (those in ``left`` left-aligned)."""
    cols = len(header)
    w = [max([len(header[j])] + [len(r[j]) for r in rows]) for j in range(cols)]

    def line(cells):
        return "  ".join(c.ljust(w[j]) if j in left else c.rjust(w[j]) for j, c in enumerate(cells)).rstrip()

    return "\n".join([line(header), line(["-" * x for x in w])] + [line(r) for r in rows])
