"""The Markdown summary of ``reproduce paper002``: each sentence computed from the data it states."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from ... import fluctuations as fl
from ...files import atomic_write
from .. import paper002_claims as claims
from .figures import _fmt

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
