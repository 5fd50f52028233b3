"""The "Claims" table of the paper-002 summary (docs/model.md §7, §8): :func:`regime_facts`
reduces a regime's comparison to plain numbers, :func:`claims_rows` turns them and the scaling
rows into verdicts as in paper 000's table (so a test can change the facts and see the verdicts change).
"""

from __future__ import annotations

import math
from typing import Any

from .paper000.claims import _row, claims_table, count_verdict

__all__ = ["regime_facts", "scaling_facts", "claims_rows", "claims_markdown", "PER_DECADE_TOL"]

PER_DECADE_TOL = 0.25  # sd(G_1) falls by √10 per decade of n "within" this relative tolerance (as the summary)
_REF_NAMES = {"limit": "limit diffusion", "prelimit": "pre-limit diffusion", "lna": "finite-n LNA"}


def regime_facts(label: str, cmp: Any, sigma: float) -> dict:
    """The numbers of one regime's comparison that the claims use (plain, JSON-safe)."""
    p = cmp.params
    m = cmp.sim.moments
    # z_1 = √n(G_1 − m_1) and E G_1 = λ_n exactly (docs/model.md §7): E z_1 = √n(λ_n − m_1), which is 0 in (a)
    # (m_1 = x^n_1 = λ_n), −ζ_n in (b) (m_1 = c_n) and −√n(1 − λ_n) in (c) centred at 1
    exact = math.sqrt(p.n) * (p.lam - p.m[0])
    return {
        "regime": label,
        "n": p.n,
        "d": p.d,
        "lam": p.lam,
        "sigma": sigma,
        "adequate": m.adequate,
        "z": {ref: dict(row) for ref, row in cmp.z_scores().items()},
        "mean_z1": m.mean_z1,
        "mean_z1_se": m.stderr["mean_z1"],
        "flow_exact": exact,
        "max_q": cmp.limit.max_q if label == "c" else None,
        "failed_conditions": [(c.name, float(c.value)) for c in p.conditions if not c.holds],
    }


def scaling_facts(scale: Any) -> list[dict]:
    """The rows of the ``n^{-1/2}`` run as plain dicts."""
    return [r.to_dict() for r in scale]


def _agree(z: dict, sigma: float) -> tuple[int, int]:
    vals = [v for v in z.values() if v == v]
    return sum(abs(v) <= sigma for v in vals), len(vals)


def _regime_claim(f: dict) -> dict:
    label, sigma = f["regime"], f["sigma"]
    ok, total = _agree(f["z"].get("limit", {}), sigma)
    verdict = "too short to know" if f["adequate"] is False else count_verdict(ok, total, unit="moments")
    ev = f"chain against the limit diffusion: {ok} of {total} moments within {sigma:g} standard errors"
    bad = sorted(
        ((k, v) for k, v in f["z"].get("limit", {}).items() if v == v and abs(v) > sigma), key=lambda kv: -abs(kv[1])
    )
    if bad:
        ev += " (" + ", ".join(f"{k}: z = {v:+.1f}" for k, v in bad) + ")"
    if f["adequate"] is False:  # z-scores from error bars the chain cannot trust are not scores (NaN)
        ev = (
            "chain: too short to know its own error bars, so no moment is scored against the limit "
            "diffusion, the pre-limit diffusion or the finite-n LNA"
        )
    for ref in ("prelimit", "lna") if f["adequate"] is not False else ():
        if ref in f["z"]:
            a, t = _agree(f["z"][ref], sigma)
            ev += f"; against the {_REF_NAMES[ref]} at this n: {a} of {t}"
            if bad and a == t > 0:
                ev += " (it accounts for the gap to the limit)"
    if f["failed_conditions"]:
        ev += "; conditions failing at this n: " + ", ".join(
            f"{name} (value {v:.4g})" for name, v in f["failed_conditions"]
        )
    if f["max_q"] is not None:
        ev += f"; largest Q of the reflected limit {f['max_q']:.3g} ({'≤ 0' if f['max_q'] <= 0 else 'ABOVE 0'})"
    what = {
        "a": "d_n/√n → 0: linear diffusion with a Gaussian stationary law",
        "b": "d_n/√n → c: diffusion with the exponential term e^{cQ}",
        "c": "d_n/√n → ∞: reflected diffusion (JSQ at d_n = n)",
    }[label]
    where = f"regime ({label}): n = {f['n']}, d_n = {f['d']}, λ_n = {f['lam']:.6g}"
    return _row(f"regime ({label}), {what} (docs/model.md §8 [derived])", where, verdict, ev)


def _flow_claim(facts: list[dict]) -> dict:
    ok = unknown = 0
    parts = []
    for f in facts:
        se = f["mean_z1_se"]
        z = (f["mean_z1"] - f["flow_exact"]) / se if se > 0 else float("nan")
        known = f["adequate"] is not False and z == z
        ok, unknown = ok + (known and abs(z) <= f["sigma"]), unknown + (not known)
        tag = f"z = {z:+.1f}" if known else "too short to know"
        parts.append(f"({f['regime']}) {f['mean_z1']:.4f} ± {se:.4f} against {f['flow_exact']:.4g}, {tag}")
    sigma = facts[0]["sigma"] if facts else float("nan")
    claim = "flow balance: E G_1 = λ_n, so E Z_1 = 0 in (a) and E Q = −ζ_n in (b), (c) "
    claim += "(docs/model.md §7 [classical], §8 [derived])"
    where = "the chain in regimes " + ", ".join(f"({f['regime']}) n = {f['n']}" for f in facts)
    ev = f"agreement within {sigma:g} standard errors: " + "; ".join(parts)
    return _row(claim, where, count_verdict(ok, len(facts), unknown, unit="regimes"), ev)


def _order_claim(rows: list[dict]) -> dict:
    """The fall of sd(G_1) per decade between the extreme adequate sizes against √10 (:data:`PER_DECADE_TOL`)."""
    claim = "the occupancies fluctuate at order n^(−1/2) around the centre x^n (docs/model.md §8 [paper])"
    where = "regime (a), κ = 1, d_n = ⌊n^(1/4)⌋: n = " + ", ".join(str(r["n"]) for r in rows)
    good = [r for r in rows if r.get("error_bars_adequate") is not False and r["sd_g1"] > 0]
    unknown = [r["n"] for r in rows if r not in good]
    tail = ("; error bars too short to know at n = " + ", ".join(map(str, unknown)) + " (left out)") if unknown else ""
    if len(good) < 2 or good[-1]["n"] <= good[0]["n"]:
        return _row(
            claim,
            where,
            "too short to know" if rows else "not tested",
            f"fewer than two sizes with adequate error bars{tail}",
        )
    first, last = good[0], good[-1]
    decades = math.log10(last["n"] / first["n"])
    per = (first["sd_g1"] / last["sd_g1"]) ** (1 / decades)
    rel = math.hypot(first["sd_g1_stderr"] / first["sd_g1"], last["sd_g1_stderr"] / last["sd_g1"]) / decades
    ok = abs(per - math.sqrt(10)) <= PER_DECADE_TOL * math.sqrt(10)
    s = [r["sqrt_n_sd_g1"] for r in good]
    ev = (
        f"sd(G_1) falls by a factor {per:.3g} ± {per * rel:.2g} per decade from n = {first['n']} to {last['n']} "
        f"(n^(−1/2): √10 = 3.16, agreement within {PER_DECADE_TOL:.0%}); √n·sd(G_1) stays between "
        f"{min(s):.3g} and {max(s):.3g}"
    )
    lna = [r["lna_sqrt_n_sd_g1"] for r in good if r.get("lna_sqrt_n_sd_g1") is not None]
    if len(lna) == len(good):
        ev += f" (the finite-n LNA: {min(lna):.3g}–{max(lna):.3g})"
    return _row(claim, where, "reproduced" if ok else "not reproduced at these sizes", ev + tail)


def claims_rows(facts: list[dict], scale_rows: list[dict]) -> list[dict]:
    """One dict per claim (``claim``, ``where``, ``verdict``, ``evidence``)."""
    return [_order_claim(scale_rows)] + [_regime_claim(f) for f in facts] + ([_flow_claim(facts)] if facts else [])


def claims_markdown(facts: list[dict], scale_rows: list[dict]) -> str:
    """The "## Claims" section of the paper-002 summary."""
    intro = (
        "One row per claim (docs/model.md §7–§8; the limits are derived for this project, not quoted theorems); "
        "verdict and evidence are computed from the tables below."
    )
    return claims_table(intro, claims_rows(facts, scale_rows))
