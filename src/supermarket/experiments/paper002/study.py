"""The pre-limit and reflection studies of paper 002 (``python -m supermarket.experiments.paper002 study``)."""

from __future__ import annotations

import itertools
import math
import os
import time as _time
import warnings
from collections.abc import Sequence
from typing import Any

from ... import fluctuations as fl
from ...files import atomic_write
from ...model import SeedLike, spawn_seeds
from ..paper000.output import _write_csv
from .figures import plot_study

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
