"""The figures of ``reproduce paper002``: sample paths, histograms, the comparison and the study plot."""

from __future__ import annotations

import contextlib
import math

import numpy as np

from ... import fluctuations as fl
from ...files import save_figure_atomic
from ...result import pyplot as _agg

NAMES = {"a": ("Z1", "Z2"), "b": ("Q", "Y"), "c": ("Q", "Y")}


def _fmt(d: dict) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in d.items())


def _save_figure(fig, path, dpi: int) -> None:
    """Write ``fig`` whole or not at all and close it."""
    try:
        save_figure_atomic(fig, path, dpi=dpi)
    finally:
        _agg().close(fig)


def plot_paths(cmp: fl.Comparison, path: str, span: float = 30.0) -> None:
    """Sample paths of the scaled process (left) beside paths of its limit (right)."""
    p = cmp.params
    names = NAMES[p.regime]
    fig, axes = _agg().subplots(2, 2, figsize=(11, 6), sharex=True, sharey="row")
    sim, lim = cmp.sim, cmp.limit
    ks = max(2, min(int(span / (sim.t[1] - sim.t[0])), sim.t.size))
    kl = max(2, min(int(span / (lim.t[1] - lim.t[0])), lim.t.size)) if lim.t.size > 1 else 0
    for j in range(2):
        ax = axes[j, 0]
        for r in range(min(3, sim.grid.shape[0])):
            ax.plot(sim.t[:ks], sim.grid[r, :ks, j], lw=0.7)
        ax.set_ylabel(names[j])
        ax = axes[j, 1]
        for r in range(min(3, lim.grid.shape[0])):
            ax.plot(lim.t[:kl], lim.grid[r, :kl, j], lw=0.7)
    axes[0, 0].set_title(f"chain: n={p.n}, d_n={p.d}, λ_n={p.lam:.5g}")
    axes[0, 1].set_title(f"limit diffusion ({p.regime}), derived: {_fmt(lim.params)}")
    axes[1, 0].set_xlabel("time")
    axes[1, 1].set_xlabel("time")
    fig.suptitle(f"Regime ({p.regime}): {p.coordinates}", fontsize=9)
    fig.tight_layout()
    _save_figure(fig, path, 110)


def plot_hist(cmp: fl.Comparison, path: str) -> None:
    """Stationary histograms of both coordinates against the limit, and autocorrelations."""
    p = cmp.params
    names = NAMES[p.regime]
    fig, axes = _agg().subplots(1, 3, figsize=(14, 4))
    for j in range(2):
        ax = axes[j]
        s = cmp.sim.grid[:, :, j].ravel()
        l = cmp.limit.grid[:, :, j].ravel()
        lo, hi = np.percentile(np.concatenate([s, l]), [0.1, 99.9])
        if hi <= lo:
            hi = lo + 1.0
        bins = np.linspace(lo, hi, 60)
        ax.hist(s, bins=bins, density=True, alpha=0.5, label="chain")
        ax.hist(l, bins=bins, density=True, histtype="step", lw=1.5, label="limit diffusion (EM)")
        if cmp.limit_exact is not None:
            var = cmp.limit_exact.var_z1 if j == 0 else cmp.limit_exact.var_z2
            xs = np.linspace(lo, hi, 300)
            gauss = np.exp(-(xs**2) / (2 * var)) / math.sqrt(2 * math.pi * var)
            ax.plot(xs, gauss, "k--", lw=1, label="limit density (closed form)")
        ax.set_xlabel(names[j])
        ax.legend(fontsize=7)
    ax = axes[2]
    ax.errorbar(cmp.sim.lags, cmp.sim.acf_z1, yerr=cmp.sim.acf_z1_stderr, lw=1, label=f"chain, {names[0]}")
    if cmp.limit.lags.size > 1:
        ax.plot(cmp.limit.lags, cmp.limit.acf_z1, lw=1, label=f"limit (EM), {names[0]}")
    if p.regime == "a":
        ax.plot(
            cmp.sim.lags, fl.limit_acf_a(p.limit["kappa"], cmp.sim.lags)[0], "k--", lw=1, label="limit, closed form"
        )
    if cmp.lna is not None and p.regime == "a":
        # the LNA refuses sizes beyond its dense Lyapunov solve: no curve then
        with contextlib.suppress(ValueError):
            ax.plot(cmp.sim.lags, fl.lna_acf(p, cmp.sim.lags)[0], ":", lw=1.5, label="finite-n LNA")
    ax.set(xlabel="lag (time)", ylabel="autocorrelation")
    ax.legend(fontsize=7)
    fig.suptitle(f"Regime ({p.regime}), n={p.n}, d_n={p.d}: stationary law (limits derived)", fontsize=9)
    fig.tight_layout()
    _save_figure(fig, path, 110)


def plot_comparison(cmp: fl.Comparison, path: str) -> None:
    """One figure for ``supermarket fluctuations --plot`` (:meth:`Comparison.plot`)."""
    cmp.plot(path)


def plot_study(pre_rows: list[dict], refl_rows: list[dict], path: str) -> None:
    """E Y and Var Y against n (chain, pre-limit, limit) per regime, and E Y against √dt."""
    labels = sorted({r["regime"] for r in pre_rows})
    fig, axes = _agg().subplots(1, 2 * len(labels) + 1, figsize=(5 * (2 * len(labels) + 1), 4))
    i = 0
    for label in labels:
        rows = [r for r in pre_rows if r["regime"] == label]
        ns = np.array([r["n"] for r in rows], dtype=float)
        for k, name in (("mean_z2", "E Y"), ("var_z2", "Var Y")):
            ax = axes[i]
            i += 1
            for src, fmt, off in (("chain", "o-", 0.97), ("prelimit", "s--", 1.03)):
                y, err = [r[f"{src}_{k}"] for r in rows], [r[f"{src}_{k}_se"] for r in rows]
                lab = {"chain": "chain", "prelimit": "pre-limit diffusion"}[src]
                ax.errorbar(ns * off, y, yerr=err, fmt=fmt, capsize=3, label=lab)
            lv = np.array([r[f"limit_{k}"] for r in rows])
            ls = np.array([r[f"limit_{k}_se"] for r in rows])
            ax.fill_between(ns, lv - ls, lv + ls, alpha=0.3, color="gray", label="limit (derived)")
            ax.set(xscale="log", xlabel="n", title=f"regime ({label}): {name}")
            ax.legend(fontsize=7)
    ax = axes[i]
    for scheme, fmt in (("bridge", "o-"), ("projection", "s--")):
        rr = sorted([r for r in refl_rows if r["reflection"] == scheme], key=lambda r: r["dt"])
        y, err = [r["mean_y"] for r in rr], [r["mean_y_se"] for r in rr]
        ax.errorbar([r["sqrt_dt"] for r in rr], y, yerr=err, fmt=fmt, capsize=3, label=scheme)
    ax.set(xlabel="√dt", ylabel="E Y", title="regime (c) limit: reflection schemes")
    ax.legend(fontsize=7)
    fig.tight_layout()
    _save_figure(fig, path, 100)
