"""``supermarket reproduce paper002``: the three diffusion regimes of paper 002 (docs/model.md §8,
limits derived), the chain beside its limit diffusion and the finite-n LNA; the files it writes
and its sizes are listed in docs/fluctuations.md ("supermarket reproduce paper002").
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import math
import os
import time as _time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import fluctuations as fl
from ..files import atomic_write, save_figure_atomic
from ..jsonable import to_jsonable
from ..model import SeedLike, spawn_seeds
from ..result import pyplot as _agg
from . import paper002_claims as claims
from .paper000.output import _progress as _progress000
from .paper000.output import _write_csv

__all__ = ["run", "plot_comparison", "CASES"]

# (label, regime, keyword arguments of fluctuations.regime_params)
CASES: dict[str, dict[str, Any]] = {
    "a": dict(regime="a", kappa=1.0, d=None),
    "b": dict(regime="b", c=1.0, zeta=0.5),
    "c": dict(regime="c", zeta=1.0, centring="one"),  # d_n = n: JSQ
}

NAMES = {"a": ("Z1", "Z2"), "b": ("Q", "Y"), "c": ("Q", "Y")}


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


def _fmt(d: dict) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in d.items())


def _config(quick: bool):
    """Sizes of the experiment: ``(n per regime, simulation kwargs, SDE kwargs, n of the
    n^{-1/2} scaling run, its time)``."""
    if quick:
        return (
            {"a": 10**4, "b": 10**4, "c": 10**4},
            dict(time=2500.0, replications=2),
            dict(sde_paths=256, sde_time=100.0, dt=1e-3),
            (10**3, 10**4, 10**5),
            500.0,
        )
    # the scaling runs: 10 batches of 60 time units, over 10 autocorrelation times (about 4.4)
    # each, so that their error bars can be trusted (at 300 none could)
    return (
        {"a": 10**5, "b": 10**5, "c": 10**5},
        dict(time=2000.0, replications=4),
        dict(sde_paths=512, sde_time=200.0, dt=5e-4),
        (10**3, 10**4, 10**5, 10**6),
        600.0,
    )


_progress = functools.partial(_progress000, tag="paper002")


def run(
    out_dir: str | os.PathLike[str],
    quick: bool = False,
    seed: SeedLike = 0,
    workers: int | None = None,
    client: Any = None,
) -> dict:
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
        _progress(
            f"regime ({label}), n = {p.n}, d_n = {p.d}: the chain ({sim_kw['replications']} × "
            f"{sim_kw['time']:g} time units) and the diffusions ({sde_kw['sde_paths']} paths) "
            f"[{i + 1} of {len(CASES) + 1}, {_time.perf_counter() - t0:.0f} s so far]"
        )
        par = dict(seed=seeds[i], workers=workers, client=client)
        cmp = comparisons[label] = fl.compare(p, **par, **sim_kw, **sde_kw)
        if label == "c":  # the biased projection scheme beside the default bridge reflection
            sde = dict(paths=sde_kw["sde_paths"], time=sde_kw["sde_time"], dt=sde_kw["dt"])
            bridges[label] = fl.limit_for(p, **sde, **par, record_paths=0, reflection="projection").moments
        plot_paths(cmp, os.path.join(out_dir, f"regime_{label}_paths.png"))
        plot_hist(cmp, os.path.join(out_dir, f"regime_{label}_hist.png"))
        for source, _, m in _sources(cmp, bridges, label):
            if m is not None:
                row = dict(regime=label, n=p.n, d_n=p.d, lambda_n=p.lam, source=source, coordinates=p.coordinates)
                for k in fl.KEYS:
                    row[k], row[k + "_se"] = getattr(m, k), (m.stderr or {}).get(k, 0.0)
                rows.append(row)
    _progress(
        f"the n^(-1/2) order: n = {', '.join(str(n) for n in scale_ns)} (2 × {scale_time:g} time units each) "
        f"[{len(CASES) + 1} of {len(CASES) + 1}, {_time.perf_counter() - t0:.0f} s so far]"
    )
    scale = fl.scaling(scale_ns, time=scale_time, replications=2, seed=seeds[-1], workers=workers, client=client)
    _write_csv(os.path.join(out_dir, "moments.csv"), rows)
    _write_csv(os.path.join(out_dir, "scaling.csv"), [r.to_dict() for r in scale])
    doc = {
        "derived": fl.DERIVED_NOTE,
        "quick": quick,
        "seed": seed,
        "comparisons": {k: c.to_dict() for k, c in comparisons.items()},
        "scaling": [r.to_dict() for r in scale],
    }
    atomic_write(os.path.join(out_dir, "moments.json"), json.dumps(to_jsonable(doc), indent=2))
    secs = _time.perf_counter() - t0
    facts = {
        "regimes": [claims.regime_facts(k, c, AGREE_SIGMA) for k, c in comparisons.items()],
        "scaling": claims.scaling_facts(scale),
    }  # what the Claims table is computed from
    _summary(out_dir, comparisons, scale, warn_lines, quick, seed, secs, bridges, facts)
    return {
        "rows": rows,
        "scaling": [r.to_dict() for r in scale],
        "seconds": secs,
        "claims_facts": facts,
        "claims": claims.claims_rows(facts["regimes"], facts["scaling"]),
    }


AGREE_SIGMA = 3.0  # "agree" in the summary: within this many standard errors


def _sources(cmp: fl.Comparison, bridges: dict, label: str) -> tuple:
    """``(CSV source, table name, moments or None)`` of the chain and each reference, in table order."""
    lim = f"limit (EM, {cmp.limit.params['reflection']} reflection)" if label == "c" else "limit (EM)"
    return (
        ("sim", "chain", cmp.sim.moments),
        ("limit_sde", lim, cmp.limit.moments),
        ("prelimit_sde", "pre-limit diffusion (EM)", cmp.prelimit.moments if cmp.prelimit else None),
        ("limit_sde_projection", "limit (EM, projection reflection)", bridges.get(label)),
        ("limit_closed_form", "limit (closed form)", cmp.limit_exact),
        ("lna", "finite-n LNA", cmp.lna),
    )


def agreement_sentence(reference: str, z: dict, sigma: float = AGREE_SIGMA, adequate: bool | None = True) -> str:
    """One sentence from the z-scores ``(chain − reference)/se`` of the five moments ("too short
    to know" when ``adequate`` is False)."""
    if adequate is False:
        return (
            f"Against the {reference}: too short to know (the chain's error bars are not reliable, "
            "so no difference is called agreement or disagreement)."
        )
    vals = {k: v for k, v in z.items() if v == v}  # drop NaN
    if not vals:
        return f"Against the {reference}: no standard errors, no comparison."
    ok = [k for k, v in vals.items() if abs(v) <= sigma]
    bad = sorted((k for k in vals if k not in ok), key=lambda k: -abs(vals[k]))
    worst = max(vals, key=lambda k: abs(vals[k]))
    if not bad:
        return (
            f"Against the {reference}: all {len(vals)} moments agree within {sigma:g} standard errors "
            f"(largest |z| = {abs(vals[worst]):.1f}, {worst})."
        )
    return (
        f"Against the {reference}: {len(ok)} of {len(vals)} moments agree within {sigma:g} standard "
        f"errors; " + ", ".join(f"{k} differs (z = {vals[k]:+.1f})" for k in bad) + "."
    )


def flow_sentence(
    mean_q: float, se: float, exact: float, sigma: float = AGREE_SIGMA, adequate: bool | None = True
) -> str:
    """The flow balance E Q = −ζ_n (exact for the chain: E G_1 = λ_n), docs/model.md §7."""
    z = (mean_q - exact) / se if se > 0 else float("nan")
    if adequate is False:
        return (
            f"Flow balance (exact: E G_1 = λ_n, so E Q = {exact:.4g}): the chain's {mean_q:.4f} "
            f"(error bar too short to know, z = {z:+.1f} is not reliable)."
        )
    verdict = "agrees" if abs(z) <= sigma else "does not agree"
    return (
        f"Flow balance (exact: E G_1 = λ_n, so E Q = {exact:.4g}): the chain's {mean_q:.4f} ± {se:.4f} "
        f"{verdict} (z = {z:+.1f})."
    )


def adequacy_sentence(m: fl.Moments) -> str:
    if m.adequate:
        return (
            f"Chain error bars: batches last at least {fl.BATCH_TAU_FACTOR:g} integrated autocorrelation "
            f"times ({m.tau_int:.3g} time units each)."
        )
    return f"Chain error bars: {m.note}."


def _summary(out_dir, comparisons, scale, warn_lines, quick, seed, secs, bridges, facts) -> None:
    L = [
        "# Paper 002: fluctuations near equilibrium with growing choices",
        "",
        f"Mode: {'quick' if quick else 'full'}, seed {seed}, {secs:.0f} s.  " + fl.DERIVED_NOTE,
        "",
        claims.claims_markdown(facts["regimes"], facts["scaling"]),
        "Chain: exact continuous-time profile chain (docs/model.md §1–2), sampling **without** "
        "replacement (paper 002), started at the rounded centre n·x^n, moments as time averages "
        "after burn-in with batch-means standard errors.  Limit: Euler–Maruyama with many paths "
        "(docs/model.md §8), matched at this n.  Pre-limit: the same equations with this n's "
        "coefficients (derived, docs/model.md §8).  LNA: finite-n linear noise approximation at x^n.",
        "",
    ]
    for label, cmp in comparisons.items():
        p = cmp.params
        L += [
            f"## Regime ({label})",
            "",
            f"n = {p.n}, d_n = {p.d}, λ_n = {p.lam:.8g}, d_n/√n = {p.b_n:.4g}, "
            f"d_n(1−λ_n) = {p.d_one_minus_lambda:.4g}; limit parameters: {_fmt(cmp.limit.params)}.  "
            f"Coordinates: {p.coordinates}.",
            "",
            "| source | mean z1 | mean z2 | var z1 | var z2 | cov |",
            "|---|---|---|---|---|---|",
        ]
        br, sm = bridges.get(label), cmp.sim.moments
        for _, name, m in _sources(cmp, bridges, label):
            if m is None:
                continue
            if m is cmp.lna and cmp.lna_not_applicable:
                L.append(f"| {name} | " + " | ".join(["does not apply"] * len(fl.KEYS)) + " |")
                continue
            short = m.adequate is False  # a chain run too short to know its error: no ±
            cells = [
                f"{getattr(m, k):.4f}"
                + (" (too short to know)" if short else f" ± {m.stderr[k]:.4f}" if m.stderr else "")
                for k in fl.KEYS
            ]
            L.append(f"| {name} | " + " | ".join(cells) + " |")
        L.append("")
        if cmp.lna_not_applicable:
            L.append(f"- Against the finite-n LNA: {cmp.lna_not_applicable}.")
        for ref, row in cmp.z_scores().items():
            L.append("- " + agreement_sentence(claims._REF_NAMES.get(ref, ref), row, adequate=sm.adequate))
        L.append("- " + adequacy_sentence(sm))
        if label in ("b", "c"):
            exact = -p.zeta_n if p.centring != "one" else -cmp.limit.params["zeta"]
            L.append("- " + flow_sentence(sm.mean_z1, sm.stderr["mean_z1"], exact, adequate=sm.adequate))
        if label == "c":
            mq = cmp.limit.max_q
            held = "at or below 0 as the reflection requires." if mq <= 0 else "ABOVE 0: the reflection failed."
            L.append(f"- Reflected limit: the largest Q on any path is {mq:.3g}, {held}")
            if br is not None:
                lm = cmp.limit.moments
                z = (lm.mean_z2 - br.mean_z2) / math.hypot(lm.stderr["mean_z2"], br.stderr["mean_z2"])
                same = "indistinguishable" if abs(z) <= AGREE_SIGMA else "the schemes differ"
                L.append(
                    f"- E Y with bridge reflection {lm.mean_z2:.4f}, with projection {br.mean_z2:.4f} "
                    f"at dt = {cmp.limit.dt:g} (z = {z:+.1f}: {same})."
                )
        L += ["", f"Figures: `regime_{label}_paths.png`, `regime_{label}_hist.png`.", ""]
    L += [
        "## The n^{-1/2} order (regime (a), κ = 1, d_n = ⌊n^{1/4}⌋)",
        "",
        "| n | d_n | sd(G_1) | √n·sd(G_1) | LNA √n·sd |",
        "|---|---|---|---|---|",
    ]
    for r in scale:
        lna = r.lna_sqrt_n_sd_g1 if r.lna_sqrt_n_sd_g1 is None else round(r.lna_sqrt_n_sd_g1, 4)
        short = r.error_bars_adequate is False  # no ± a reader could mistake for a trusted error bar
        sd, sq = (
            (f"{r.sd_g1:.3e} (too short to know)", f"{r.sqrt_n_sd_g1:.4f} (too short to know)")
            if short
            else (f"{r.sd_g1:.3e} ± {r.sd_g1_stderr:.1e}", f"{r.sqrt_n_sd_g1:.4f} ± {r.sqrt_n_sd_g1_stderr:.4f}")
        )
        L.append(f"| {r.n} | {r.d} | {sd} | {sq} | {lna} |")
    if len(scale) >= 2:
        L += ["", "- " + scaling_sentence(scale)]
    if warn_lines:
        L += ["", "## Conditions that fail at these finite n (warned)", ""] + [f"- {w}" for w in warn_lines]
    atomic_write(os.path.join(out_dir, "summary.md"), "\n".join(L) + "\n")


def scaling_sentence(scale: Sequence[Any]) -> str:
    """The fall of sd(G_1) per decade of n against √10, from the sizes whose error bars are trusted."""
    good = [r for r in scale if getattr(r, "error_bars_adequate", None) is not False]
    short = [r.n for r in scale if getattr(r, "error_bars_adequate", None) is False]
    left = f" (n = {', '.join(str(n) for n in short)} left out: too short to know)" if short else ""
    if len(good) < 2:
        return (
            f"too short to know: the error bars of {len(short)} of {len(scale)} sizes cannot be trusted "
            "(batches under 10 autocorrelation times), so no per-decade factor is given."
        )
    first, last = good[0], good[-1]
    decades = math.log10(last.n / first.n)
    per_decade = (first.sd_g1 / last.sd_g1) ** (1 / decades) if decades > 0 and last.sd_g1 > 0 else float("nan")
    lo, hi = min(r.sqrt_n_sd_g1 for r in good), max(r.sqrt_n_sd_g1 for r in good)
    verdict = "close to" if abs(per_decade - math.sqrt(10)) <= 0.25 * math.sqrt(10) else "far from"
    return (
        f"sd(G_1) falls by a factor {per_decade:.2f} per decade of n ({verdict} √10 = 3.16, the n^(−1/2) "
        f"order), while √n·sd(G_1) stays between {lo:.3f} and {hi:.3f}{left}."
    )


# =========================================================================== studies
#: The pre-limit study's cases (docs/fluctuations.md): regime (b) with c = 1, ζ = 0.5 and
#: regime (c) with ζ = 1, d_n = ⌊n^{3/4}⌋ (so d_n/√n = n^{1/4} → ∞; d = 1000 at n = 10^4).
STUDY_CASES: dict[str, dict[str, Any]] = {
    "b": dict(regime="b", c=1.0, zeta=0.5),
    "c": dict(regime="c", zeta=1.0, d_exponent=0.75),
}


def _study_params(label: str, n: int) -> fl.RegimeParams:
    kw = dict(STUDY_CASES[label])
    regime = kw.pop("regime")
    if "d_exponent" in kw:
        kw["d"] = int(math.floor(n ** kw.pop("d_exponent") + 1e-9))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fl.RegimeWarning)
        return fl.regime_params(regime, n, **kw)


STUDY_KEYS = ("mean_z2", "var_z1", "var_z2", "cov_z1z2")


def prelimit_study(
    ns: Sequence[int] = (10**3, 10**4, 10**5),
    *,
    labels: Sequence[str] = ("b", "c"),
    chain_time: float | None = None,
    replications: int = 2,
    sde_paths: int = 128,
    sde_time: float = 100.0,
    dt: float = 1e-3,
    seed: SeedLike = 0,
    workers: int | None = None,
    client: Any = None,
) -> list[dict]:
    """One dict per regime and ``n``: the moments of the chain, the pre-limit diffusion and the
    limit with standard errors, their differences, and the scale at which the pre-limit is
    expected to approach the limit (docs/model.md §8, derived).  ``chain_time``: per replication
    (default 4000 up to ``n = 10^4``, then 1500)."""
    rows = []
    roots = spawn_seeds(seed, len(labels))
    par = dict(workers=workers, client=client)
    sde: dict[str, Any] = dict(paths=sde_paths, time=sde_time, dt=dt, record_paths=0)
    for li, label in enumerate(labels):
        for n, ss in zip(ns, spawn_seeds(roots[li], len(ns))):
            p = _study_params(label, n)
            T = chain_time if chain_time is not None else (4000.0 if n <= 10**4 else 1500.0)
            s1, s2, s3 = spawn_seeds(ss, 3)
            t0 = _time.perf_counter()
            sim = fl.simulate_fluctuations(p, time=T, replications=replications, seed=s1, batches=10, **par)
            t_sim = _time.perf_counter() - t0
            t0 = _time.perf_counter()
            pre = fl.prelimit_sde(p, seed=s2, **sde, **par)
            t_pre = _time.perf_counter() - t0
            lim = fl.limit_for(p, seed=s3, **sde, **par)
            # expected order of the pre-limit − limit gap (derived, docs/model.md §8): in (b) the
            # coefficients c_n − 1, d_n/√n − c are O(log n/√n); in (c) the exponential wall
            # A(Q) ≈ e^{b_n Q} sits at ≈ (log b_n − γ)/b_n above 0, b_n = d_n/√n
            scale = math.log(n) / math.sqrt(n) if label == "b" else math.log(p.b_n) / p.b_n
            row: dict[str, Any] = {
                "regime": label,
                "n": n,
                "d_n": p.d,
                "lambda_n": p.lam,
                "c_n": p.c_n,
                "b_n": p.b_n,
                "scale": scale,
                "chain_time": T,
                "replications": replications,
                "chain_seconds": t_sim,
                "prelimit_seconds": t_pre,
                "chain_adequate": bool(sim.moments.adequate),
                "chain_tau_int": sim.moments.tau_int,
            }
            for src, m in (("chain", sim.moments), ("prelimit", pre.moments), ("limit", lim.moments)):
                assert m.stderr is not None  # simulated moments carry standard errors
                for k in STUDY_KEYS:
                    row[f"{src}_{k}"], row[f"{src}_{k}_se"] = getattr(m, k), m.stderr[k]
            for k in STUDY_KEYS:
                for a, b in (("chain", "prelimit"), ("prelimit", "limit"), ("chain", "limit")):
                    diff = row[f"{a}_{k}"] - row[f"{b}_{k}"]
                    se = math.hypot(row[f"{a}_{k}_se"], row[f"{b}_{k}_se"])
                    row[f"{a}_minus_{b}_{k}"] = diff
                    row[f"{a}_minus_{b}_{k}_z"] = diff / se if se > 0 else float("nan")
            rows.append(row)
    return rows


def reflection_study(
    dts: Sequence[float] = (0.04, 0.02, 0.01, 0.005, 0.0025, 0.001, 0.0005),
    *,
    zeta: float = 1.0,
    paths: int = 256,
    time: float = 100.0,
    seed: SeedLike = 0,
    workers: int | None = None,
    client: Any = None,
) -> list[dict]:
    """``E Y`` and the pushing rate of the regime-(c) limit against ``dt``, both reflection schemes,
    one seed (docs/model.md §8)."""
    rows = []
    for scheme in fl.REFLECTIONS:
        for dt in dts:
            kw = dict(paths=paths, time=time, dt=dt, seed=seed, workers=workers, client=client, record_paths=0)
            r = fl.limit_sde("c", zeta=zeta, **kw, reflection=scheme)
            m = r.moments
            assert m.stderr is not None  # simulated moments carry standard errors
            rows.append(
                {
                    "reflection": scheme,
                    "dt": dt,
                    "sqrt_dt": math.sqrt(dt),
                    "mean_y": m.mean_z2,
                    "mean_y_se": m.stderr["mean_z2"],
                    "var_q": m.var_z1,
                    "var_q_se": m.stderr["var_z1"],
                    "push_rate": r.push_rate,
                    "push_rate_se": r.push_rate_stderr,
                    "seconds": r.seconds,
                }
            )
    return rows


def _join(xs, spec: str) -> str:
    return ", ".join(format(x, spec) for x in xs)


def study_markdown(pre_rows: list[dict], refl_rows: list[dict]) -> str:
    """Tables and sentences of the studies, every sentence computed from the rows."""
    L = [
        "### Reflection schemes against the step (regime (c) limit, ζ = 1)",
        "",
        "| dt | E Y, bridge | E Y, projection | E[dU]/dt, bridge | E[dU]/dt, projection |",
        "|---|---|---|---|---|",
    ]
    by = {(r["reflection"], r["dt"]): r for r in refl_rows}
    dts = sorted({r["dt"] for r in refl_rows}, reverse=True)
    for dt in dts:
        b, p = by.get(("bridge", dt)), by.get(("projection", dt))
        cell = lambda r, k: "—" if r is None else f"{r[k]:.4f} ± {r[k + '_se']:.4f}"  # noqa: E731
        L.append(
            f"| {dt:g} | {cell(b, 'mean_y')} | {cell(p, 'mean_y')} | {cell(b, 'push_rate')} | {cell(p, 'push_rate')} |"
        )
    if dts:
        fine, coarse = dts[-1], dts[0]
        for scheme in fl.REFLECTIONS:
            a, c = by.get((scheme, fine)), by.get((scheme, coarse))
            if a is None or c is None:
                continue
            z = (a["mean_y"] - c["mean_y"]) / math.hypot(a["mean_y_se"], c["mean_y_se"])
            L += [
                "",
                f"- {scheme}: E Y moves from {c['mean_y']:.4f} at dt = {coarse:g} to {a['mean_y']:.4f} "
                f"at dt = {fine:g} ({z:+.1f} standard errors: the coarse step is "
                f"{'not ' if abs(z) <= 3 else ''}distinguishable from the fine one).",
            ]
        a, b = by.get(("bridge", fine)), by.get(("projection", fine))
        if a and b:
            z = (a["mean_y"] - b["mean_y"]) / math.hypot(a["mean_y_se"], b["mean_y_se"])
            L.append(
                f"- At dt = {fine:g} the two schemes give {a['mean_y']:.4f} and {b['mean_y']:.4f} "
                f"({z:+.1f} standard errors apart: they {'agree' if abs(z) <= 3 else 'differ'} at 3 standard errors)."
            )
    L += ["", "### Chain, pre-limit diffusion and limit against n", ""]
    for label in sorted({r["regime"] for r in pre_rows}):
        rows = [r for r in pre_rows if r["regime"] == label]
        case = STUDY_CASES[label]
        desc = (
            f"regime (b), c = {case['c']:g}, ζ = {case['zeta']:g}, d_n = ⌊c√n⌋"
            if label == "b"
            else f"regime (c), ζ = {case['zeta']:g}, d_n = ⌊n^{case['d_exponent']:g}⌋"
        )
        L += [
            f"#### {desc}",
            "",
            "| n | d_n | c_n | source | E Y | Var Q | Var Y | Cov(Q,Y) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            for src in ("chain", "prelimit", "limit"):
                cells = " | ".join(f"{r[f'{src}_{k}']:.4f} ± {r[f'{src}_{k}_se']:.4f}" for k in STUDY_KEYS)
                name = {"chain": "chain", "prelimit": "pre-limit diffusion", "limit": "limit"}[src]
                L.append(f"| {r['n']:.0e} | {r['d_n']} | {r['c_n']:.4f} | {name} | {cells} |")
        L.append("")
        scale_name = "log n/√n" if label == "b" else "log b_n/b_n"
        L += [
            f"| n | chain − pre-limit, E Y (z) | chain − pre-limit, Var Y (z) | pre-limit − limit, E Y | "
            f"pre-limit − limit, Var Y | {scale_name} | (pre − limit, E Y)/scale |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            L.append(
                f"| {r['n']:.0e} | {r['chain_minus_prelimit_mean_z2']:+.4f} "
                f"({r['chain_minus_prelimit_mean_z2_z']:+.1f}) "
                f"| {r['chain_minus_prelimit_var_z2']:+.4f} ({r['chain_minus_prelimit_var_z2_z']:+.1f}) "
                f"| {r['prelimit_minus_limit_mean_z2']:+.4f} ± "
                f"{math.hypot(r['prelimit_mean_z2_se'], r['limit_mean_z2_se']):.4f} "
                f"| {r['prelimit_minus_limit_var_z2']:+.4f} ± "
                f"{math.hypot(r['prelimit_var_z2_se'], r['limit_var_z2_se']):.4f} "
                f"| {r['scale']:.4f} | {r['prelimit_minus_limit_mean_z2'] / r['scale']:+.2f} |"
            )
        L.append("")
        zs = [abs(r[f"chain_minus_prelimit_{k}_z"]) for r in rows for k in STUDY_KEYS]
        L.append(
            f"- Chain against pre-limit diffusion: {sum(1 for z in zs if z <= 3.0)} of {len(zs)} moment comparisons "
            f"agree within 3 standard errors (largest |z| = {max(zs) if zs else float('nan'):.1f})."
        )
        gaps = [abs(r["prelimit_minus_limit_mean_z2"]) for r in rows]
        if len(gaps) >= 2:
            shrinks = "shrinks" if all(a > b for a, b in itertools.pairwise(gaps)) else "does not shrink"
            ns = ", ".join(f"{r['n']:.0e}" for r in rows)
            L.append(
                f"- Pre-limit against limit, |E Y gap|: {_join(gaps, '.4f')} for n = {ns}; it {shrinks} at every step."
            )
            ratios = [r["prelimit_minus_limit_mean_z2"] / r["scale"] for r in rows]
            spread = (max(ratios) - min(ratios)) / max(abs(sum(ratios) / len(ratios)), 1e-12)
            L.append(
                f"- Gap divided by {scale_name}: {_join(ratios, '+.2f')} (relative spread {spread:.2f}: "
                f"{'consistent with' if spread < 0.5 else 'not clearly'} a gap of order {scale_name})."
            )
        inad = [r["n"] for r in rows if not r["chain_adequate"]]
        ok = f"batches long enough at every n (≥ {fl.BATCH_TAU_FACTOR:g} integrated autocorrelation times)."
        L.append("- Chain error bars: " + (f"too short to know at n = {_join(inad, '.0e')}." if inad else ok))
        L.append("")
    return "\n".join(L)


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


def run_study(
    out_dir: str | os.PathLike[str],
    *,
    quick: bool = False,
    seed: SeedLike = 0,
    workers: int | None = None,
    client: Any = None,
    ns: Sequence[int] | None = None,
    chain_time: float | None = None,
    paths: int | None = None,
    sde_time: float | None = None,
) -> dict:
    """Run both studies into ``out_dir`` (``prelimit.csv``, ``reflection.csv``, ``study.md``,
    ``study.png``); ``ns``, ``chain_time``, ``paths``, ``sde_time`` override the full run's sizes."""
    os.makedirs(out_dir, exist_ok=True)
    t0 = _time.perf_counter()
    custom = ns is not None or chain_time is not None or paths is not None or sde_time is not None
    par = dict(seed=seed, workers=workers, client=client)
    if custom:
        T = sde_time or 100.0
        pre = prelimit_study(
            tuple(ns or (10**3, 10**4, 10**5)), chain_time=chain_time, sde_paths=paths or 128, sde_time=T, **par
        )
        refl = reflection_study(paths=paths or 256, time=T, **par)
    elif quick:
        pre = prelimit_study((10**3, 10**4), chain_time=800.0, sde_paths=64, sde_time=50.0, **par)
        refl = reflection_study((0.04, 0.01, 0.0025), paths=64, time=50.0, **par)
    else:
        pre, refl = prelimit_study(**par), reflection_study(**par)
    for name, rows in (("prelimit.csv", pre), ("reflection.csv", refl)):
        _write_csv(os.path.join(out_dir, name), rows)
    md = study_markdown(pre, refl)
    secs = _time.perf_counter() - t0
    mode = "custom-size" if custom else ("quick" if quick else "full")
    atomic_write(os.path.join(out_dir, "study.md"), md + f"\n\n({mode} run, seed {seed}, {secs:.0f} s)\n")
    plot_study(pre, refl, os.path.join(out_dir, "study.png"))
    return {"prelimit": pre, "reflection": refl, "markdown": md, "seconds": secs}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m supermarket.experiments.paper002 study --out DIR [--quick] [--seed S]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m supermarket.experiments.paper002")
    ap.add_argument("what", choices=["study"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--ns", type=float, nargs="+", default=None, help="values of n (e.g. 1e3 1e4 4e4)")
    ap.add_argument("--chain-time", type=float, default=None)
    ap.add_argument("--paths", type=int, default=None)
    ap.add_argument("--sde-time", type=float, default=None)
    a = ap.parse_args(argv)
    kw = {k: getattr(a, k) for k in ("quick", "seed", "workers", "chain_time", "paths", "sde_time")}
    res = run_study(a.out, ns=None if a.ns is None else [int(x) for x in a.ns], **kw)
    print(res["markdown"])
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
