"""``supermarket reproduce paper002``: the three diffusion regimes of paper 002.

For each regime (docs/model.md §8; the limits are **derived** for this project) the exact
continuous-time chain (without replacement, as in paper 002) is simulated and its scaled,
centred process set beside the limit diffusion (Euler–Maruyama) and the finite-n linear
noise approximation at ``x^n``:

- ``regime_{a,b,c}_paths.png``: sample paths of the scaled process beside paths of the limit;
- ``regime_{a,b,c}_hist.png``: stationary histograms against the limit density (the
  Gaussian closed form in (a), the diffusion's histogram in (b), (c)) and autocorrelations;
- ``moments.csv`` / ``moments.json``: the table of stationary moments with standard errors;
- ``scaling.csv``: the ``n^{-1/2}`` order, ``√n·sd(G_1)`` flat while ``sd(G_1)`` falls;
- ``summary.md``: what was run and what it shows.

Quick mode keeps the whole run under 3 minutes on 2 cores.
"""

from __future__ import annotations

import csv
import json
import math
import os
import time as _time
import warnings

import numpy as np

from .. import fluctuations as fl
from ..model import spawn_seeds

__all__ = ["run", "plot_comparison", "CASES"]

# (label, regime, keyword arguments of fluctuations.regime_params)
CASES = {
    "a": dict(regime="a", kappa=1.0, d=None),
    "b": dict(regime="b", c=1.0, zeta=0.5),
    "c": dict(regime="c", zeta=1.0, centring="one"),  # d_n = n: JSQ
}

NAMES = {"a": ("Z1", "Z2"), "b": ("Q", "Y"), "c": ("Q", "Y")}


def _agg():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_paths(cmp: fl.Comparison, path: str, span: float = 30.0) -> None:
    """Sample paths of the scaled process (left) beside paths of its limit (right)."""
    plt = _agg()
    p = cmp.params
    names = NAMES[p.regime]
    fig, axes = plt.subplots(2, 2, figsize=(11, 6), sharex=True, sharey="row")
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
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_hist(cmp: fl.Comparison, path: str) -> None:
    """Stationary histograms of both coordinates against the limit, and autocorrelations."""
    plt = _agg()
    p = cmp.params
    names = NAMES[p.regime]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
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
            ax.plot(xs, np.exp(-xs ** 2 / (2 * var)) / math.sqrt(2 * math.pi * var), "k--",
                    lw=1, label="limit density (closed form)")
        ax.set_xlabel(names[j])
        ax.legend(fontsize=7)
    ax = axes[2]
    ax.errorbar(cmp.sim.lags, cmp.sim.acf_z1, yerr=cmp.sim.acf_z1_se, lw=1, label=f"chain, {names[0]}")
    if cmp.limit.lags.size > 1:
        ax.plot(cmp.limit.lags, cmp.limit.acf_z1, lw=1, label=f"limit (EM), {names[0]}")
    if p.regime == "a":
        ax.plot(cmp.sim.lags, fl.limit_acf_a(p.limit["kappa"], cmp.sim.lags)[0], "k--", lw=1,
                label="limit, closed form")
    if cmp.lna is not None and p.regime == "a":
        try:
            ax.plot(cmp.sim.lags, fl.lna_acf(p, cmp.sim.lags)[0], ":", lw=1.5, label="finite-n LNA")
        except ValueError:  # the LNA refuses sizes beyond its dense Lyapunov solve: no curve then
            pass
    ax.set_xlabel("lag (time)")
    ax.set_ylabel("autocorrelation")
    ax.legend(fontsize=7)
    fig.suptitle(f"Regime ({p.regime}), n={p.n}, d_n={p.d}: stationary law (limits derived)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_comparison(cmp: fl.Comparison, path: str) -> None:
    """One figure for ``supermarket fluctuations --plot``: paths, histograms, autocorrelation."""
    plt = _agg()
    p = cmp.params
    names = NAMES[p.regime]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    sim, lim = cmp.sim, cmp.limit
    k = min(sim.t.size, max(2, int(30 / (sim.t[1] - sim.t[0]))))
    axes[0, 0].plot(sim.t[:k], sim.grid[0, :k, 0], lw=0.7, label="chain")
    if lim.t.size > 1:
        kl = min(lim.t.size, max(2, int(30 / (lim.t[1] - lim.t[0]))))
        axes[0, 0].plot(lim.t[:kl], lim.grid[0, :kl, 0], lw=0.7, label="limit (derived)")
    axes[0, 0].set_xlabel("time")
    axes[0, 0].set_ylabel(names[0])
    axes[0, 0].legend(fontsize=7)
    for j, ax in ((0, axes[0, 1]), (1, axes[1, 0])):
        s = sim.grid[:, :, j].ravel()
        l = lim.grid[:, :, j].ravel() if lim.grid.size else s
        lo, hi = np.percentile(np.concatenate([s, l]), [0.1, 99.9])
        bins = np.linspace(lo, hi if hi > lo else lo + 1, 50)
        ax.hist(s, bins=bins, density=True, alpha=0.5, label="chain")
        if lim.grid.size:
            ax.hist(l, bins=bins, density=True, histtype="step", lw=1.5, label="limit (EM)")
        ax.set_xlabel(names[j])
        ax.legend(fontsize=7)
    ax = axes[1, 1]
    ax.errorbar(sim.lags, sim.acf_z1, yerr=sim.acf_z1_se, lw=1, label=f"chain {names[0]}")
    if lim.lags.size > 1:
        ax.plot(lim.lags, lim.acf_z1, lw=1, label=f"limit {names[0]}")
    ax.set_xlabel("lag")
    ax.set_ylabel("autocorrelation")
    ax.legend(fontsize=7)
    fig.suptitle(f"Regime ({p.regime}) n={p.n} d_n={p.d} λ_n={p.lam:.5g}: {p.coordinates}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _fmt(d: dict) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in d.items())


def _config(quick: bool):
    """Sizes of the experiment: ``(n per regime, simulation kwargs, SDE kwargs, n of the
    n^{-1/2} scaling run, its time)``."""
    if quick:
        return ({"a": 10**4, "b": 10**4, "c": 10**4}, dict(time=2500.0, replications=2),
                dict(sde_paths=256, sde_time=100.0, dt=1e-3), (10**3, 10**4, 10**5), 500.0)
    return ({"a": 10**5, "b": 10**5, "c": 10**5}, dict(time=2000.0, replications=4),
            dict(sde_paths=512, sde_time=200.0, dt=5e-4), (10**3, 10**4, 10**5, 10**6), 300.0)


def run(out_dir, quick=False, seed=0, workers=None) -> dict:
    """Run the paper-002 experiment into ``out_dir`` (created); return the moments table."""
    os.makedirs(out_dir, exist_ok=True)
    t0 = _time.perf_counter()
    seeds = spawn_seeds(seed, len(CASES) + 1)
    n_of, sim_kw, sde_kw, scale_ns, scale_time = _config(quick)
    rows, comparisons, warn_lines, bridges = [], {}, [], {}
    for i, (label, case) in enumerate(CASES.items()):
        kw = dict(case)
        regime = kw.pop("regime")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", fl.RegimeWarning)
            p = fl.regime_params(regime, n_of[label], **kw)
        warn_lines += [str(w.message) for w in caught]
        cmp = fl.compare(p, seed=seeds[i], workers=workers, **sim_kw, **sde_kw)
        comparisons[label] = cmp
        if label == "c":  # projection (docs/model.md §8) beside the Brownian-bridge reflection
            bridges[label] = fl.limit_for(p, paths=sde_kw["sde_paths"], time=sde_kw["sde_time"],
                                          dt=sde_kw["dt"], seed=seeds[i], workers=workers,
                                          record_paths=0, reflection="bridge")
        plot_paths(cmp, os.path.join(out_dir, f"regime_{label}_paths.png"))
        plot_hist(cmp, os.path.join(out_dir, f"regime_{label}_hist.png"))
        br = bridges[label].moments if label in bridges else None
        for source, m in (("sim", cmp.sim.moments), ("limit_sde", cmp.limit.moments),
                          ("limit_sde_bridge", br),
                          ("limit_closed_form", cmp.limit_exact), ("lna", cmp.lna)):
            if m is None:
                continue
            row = {"regime": label, "n": p.n, "d_n": p.d, "lambda_n": p.lam, "source": source,
                   "coordinates": p.coordinates}
            for k in fl.KEYS:
                row[k] = getattr(m, k)
                row[k + "_se"] = (m.stderr or {}).get(k, 0.0)
            rows.append(row)
    scale = fl.scaling(scale_ns, time=scale_time, replications=2, seed=seeds[-1], workers=workers)
    with open(os.path.join(out_dir, "moments.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(out_dir, "scaling.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(scale[0].to_dict()))
        w.writeheader()
        w.writerows([r.to_dict() for r in scale])
    from ..jsonable import to_jsonable

    with open(os.path.join(out_dir, "moments.json"), "w") as f:
        json.dump(to_jsonable({"derived": fl.DERIVED_NOTE, "quick": quick, "seed": seed,
                               "comparisons": {k: c.to_dict() for k, c in comparisons.items()},
                               "scaling": [r.to_dict() for r in scale]}), f, indent=2)
    secs = _time.perf_counter() - t0
    _summary(out_dir, comparisons, scale, warn_lines, quick, seed, secs, bridges)
    return {"rows": rows, "scaling": [r.to_dict() for r in scale], "seconds": secs}


def _summary(out_dir, comparisons, scale, warn_lines, quick, seed, secs, bridges) -> None:
    L = ["# Paper 002: fluctuations near equilibrium with growing choices", "",
         f"Mode: {'quick' if quick else 'full'}, seed {seed}, {secs:.0f} s.  " + fl.DERIVED_NOTE, "",
         "Chain: exact continuous-time profile chain (docs/model.md §1–2), sampling **without** "
         "replacement (paper 002), started at the rounded centre n·x^n, moments as time averages "
         "after burn-in with batch-means standard errors.  Limit: Euler–Maruyama with many paths "
         "(docs/model.md §8), matched at this n.  LNA: finite-n linear noise approximation at x^n; in (b) "
         "and (c) it linearises an exponential or reflecting drift and is not expected to hold "
         "(shown for contrast), in (a) it is the finite-n reference.", ""]
    for label, cmp in comparisons.items():
        p = cmp.params
        L += [f"## Regime ({label})", "",
              f"n = {p.n}, d_n = {p.d}, λ_n = {p.lam:.8g}, d_n/√n = {p.b_n:.4g}, "
              f"d_n(1−λ_n) = {p.d_one_minus_lambda:.4g}; limit parameters: {_fmt(cmp.limit.params)}.  "
              f"Coordinates: {p.coordinates}.", "",
              "| source | mean z1 | mean z2 | var z1 | var z2 | cov |", "|---|---|---|---|---|---|"]
        lim_name = "limit (EM, projection)" if label == "c" else "limit (EM)"
        br = bridges[label].moments if label in bridges else None
        for name, m in (("chain", cmp.sim.moments), (lim_name, cmp.limit.moments),
                        ("limit (EM, Brownian-bridge reflection)", br),
                        ("limit (closed form)", cmp.limit_exact), ("finite-n LNA", cmp.lna)):
            if m is None:
                continue
            cells = [f"{getattr(m, k):.4f}" + (f" ± {m.stderr[k]:.4f}" if m.stderr else "") for k in fl.KEYS]
            L.append(f"| {name} | " + " | ".join(cells) + " |")
        z = cmp.z_scores()
        L += ["", "z-scores (chain − reference)/se: " + "; ".join(
            f"{ref}: " + ", ".join(f"{k} {v:+.1f}" for k, v in row.items()) for ref, row in z.items()), ""]
        if label in ("b", "c"):
            L.append(f"Flow balance (exact, E G_1 = λ_n): E Q = {-cmp.limit.params['zeta']:.4g}; chain "
                     f"{cmp.sim.moments.mean_z1:.4f} ± {cmp.sim.moments.stderr['mean_z1']:.4f}.")
        if label == "c":
            L.append(f"Reflected limit: largest Q on any path = {cmp.limit.max_q:.3g} (never above 0).  "
                     f"Projection (docs/model.md §8) misses excursions inside a step (bias of order √dt, "
                     f"dt = {cmp.limit.dt:g}); the Brownian-bridge row pushes by the sampled maximum "
                     "of the free path over each step instead.")
        L += ["", f"Figures: `regime_{label}_paths.png`, `regime_{label}_hist.png`.", ""]
    L += ["## The n^{-1/2} order (regime (a), κ = 1, d_n = ⌊n^{1/4}⌋)", "",
          "| n | d_n | sd(G_1) | √n·sd(G_1) | LNA √n·sd |", "|---|---|---|---|---|"]
    for r in scale:
        L.append(f"| {r.n} | {r.d} | {r.sd_g1:.3e} ± {r.sd_g1_se:.1e} | {r.sqrt_n_sd_g1:.4f} ± "
                 f"{r.sqrt_n_sd_g1_se:.4f} | {r.lna_sqrt_n_sd_g1 if r.lna_sqrt_n_sd_g1 is None else round(r.lna_sqrt_n_sd_g1, 4)} |")
    if warn_lines:
        L += ["", "## Conditions that fail at these finite n (warned)", ""] + [f"- {w}" for w in warn_lines]
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write("\n".join(L) + "\n")
