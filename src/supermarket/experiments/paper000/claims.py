"""The "Claims" table of the paper-000 summary: one row per claim of paper 000 (docs/model.md
§3–§6), where the runs test it, a verdict (:func:`count_verdict`) and the evidence, every cell
computed from the experiments' rows and fits (the rule behind each count stated in its evidence).
"""

from __future__ import annotations

import math

from ... import theory as th
from .e1_e4_equilibrium import _modal_call, _modal_calls, _verdict_counts, modal_sentence
from .output import Z_FINDING, _bound_verdict, _fit_slope

__all__ = ["claims_rows", "claims_markdown", "claims_table", "count_verdict", "SLOPE_TOL", "GOOD_SHARE"]

SLOPE_TOL = 0.25  # a fitted log-log (or linear) slope "matches" an order's when within this of it
GOOD_SHARE = 0.9  # "stays in N^ε": at least this share of the time (a convention of this table)

# the claims of paper 000 as docs/model.md states them, in the order of the table
CLAIMS = (
    "maximum queue length in equilibrium is k = ⌈log(1/(1−λ))/log d⌉ (α/β not an integer; docs/model.md §4 [paper])",
    "α/β an integer (1/(1−λ) = d^k): the maximum is k or k+1 (docs/model.md §4 [paper])",
    "almost all queues have length k: fraction ≥ 1 − 2n^(−α+(k−1)β) (docs/model.md §4 [paper])",
    f"the equilibrium chain stays in the good set N^ε, ε = 0.1 (share ≥ {GOOD_SHARE:g} here; "
    "docs/model.md §5 [paper], membership by clauses (a), (b))",
    "the equilibrium maximum is within 1 of the largest k with nπ(k) ≥ 1 (docs/model.md §4 "
    "[paper; the inequality reconstructed])",
    "mixing from a good state takes O(k d^(k−1) n log n) steps: growth in n (docs/model.md §6 [paper])",
    "mixing from a good state needs Ω(d^(k−1) n) steps (docs/model.md §6 [paper])",
    "the two orders together: at fixed n and k the mixing time grows like d^(k−1) (docs/model.md §6 [paper])",
    "from bad starts mixing is slower: Ω((1−λ)^(−1) g n) steps from ‖x‖₁ = g n, Ω(ℓ n) from one "
    "queue of length ℓ (docs/model.md §6 [paper])",
    "power of d choices: the maximum grows like log n/log(1/λ) for d = 1 and like log log n/log d "
    "for d ≥ 2 (docs/model.md §3 [classical], restated by paper 000)",
)


def count_verdict(
    ok: int, total: int, unknown: int = 0, unit: str = "configurations", unknown_label: str = "too short to know"
) -> str:
    """The verdict of a claim tested in ``total`` units: ``ok`` agree, ``unknown`` cannot tell."""
    if total == 0:
        return "not tested"
    if unknown >= total:
        return "too short to know"
    if ok == total:
        return "reproduced"
    if ok == 0 and unknown == 0:
        return "not reproduced at these sizes"
    return f"partly: {ok} of {total} {unit}" + (f" ({unknown} {unknown_label})" if unknown else "")


def _ns(rows) -> str:
    ns = sorted({r["n"] for r in rows})
    return f"n = {ns[0]}…{ns[-1]}" if len(ns) > 1 else (f"n = {ns[0]}" if ns else "no runs")


def _theorem(rows) -> str:
    """How many rows meet Theorem 1.2's conditions, as a reason to append."""
    applies = sum(th.theorem_1_2(r["n"], r["d"], r["load"]).applies for r in rows)
    text = f"Theorem 1.2's conditions hold in {applies} of {len(rows)} configurations"
    return text + (" (they need n ≳ 10^15)" if applies == 0 and rows else "")


def _row(claim: str, where: str, verdict: str, evidence: str) -> dict:
    return {"claim": claim, "where": where, "verdict": verdict, "evidence": evidence + "."}


def _max_is_k(ni) -> tuple:
    # one rule with the E1 section (_modal_call): a configuration whose modal call is too close
    # or too short counts as undecided whatever its point estimate of the modal maximum
    ok = [r for r in ni if r["modal_max"] == r["k"] and _modal_call(r) is None]
    close, short = _modal_calls(ni)
    unknown = close + short
    hyp_k = [r for r in ni if r["k_hypothesis"] == r["k"]]
    others = [r for r in ni if r["modal_max"] != r["k"]]
    at_k1 = [r for r in others if r["modal_max"] == r["k"] + 1]
    n_eq_k = sum(r["modal_max"] == r["k"] for r in ni)
    called = f" ({len(ok)} of them called with confidence: the verdict counts those)" if len(ok) != n_eq_k else ""
    ev = (
        f"modal maximum = k in {n_eq_k} of {len(ni)}{called}; "
        f"in {sum(r['modal_max'] == r['k'] for r in hyp_k)} "
        f"of the {len(hyp_k)} where the hypothesis (largest k with nπ(k) ≥ 1) is k"
    )
    if others:
        ev += (
            f"; k+1 in {len(at_k1)} of the other {len(others)}, where nπ(k+1) ≥ 1 in "
            f"{sum(r['k_hypothesis'] >= r['k'] + 1 for r in at_k1)}"
        )
    if unknown:
        ev += f"; which of k and k+1 is modal is {modal_sentence(close, short, len(ni))}"
    if others or unknown:
        ev += "; " + _theorem(ni)
    where = f"E1, λ = 1 − n^−α, d = ⌊n^β⌋, α/β ∉ ℤ: {_ns(ni)}, {len(ni)} configurations"
    return where, count_verdict(len(ok), len(ni), unknown, unknown_label="too close or too short to call"), ev


def _max_is_k_or_k1(it) -> tuple:
    bad = [r for r in it if r["modal_max"] not in (r["k"], r["k"] + 1)]
    ev = f"modal maximum k or k+1 in {len(it) - len(bad)} of {len(it)}"
    if bad:
        ev += " (others: " + ", ".join(f"n = {r['n']}: {r['modal_max']} with k = {r['k']}" for r in bad) + ")"
    return f"E1, α/β ∈ ℤ: {_ns(it)}, {len(it)} configurations", count_verdict(len(it) - len(bad), len(it)), ev


def _fraction_at_k(ni) -> tuple:
    v = _verdict_counts(ni)
    positive = sum(r["frac_at_k_bound"] > 0 for r in ni)
    ev = (
        f"fraction ≥ bound in {v['meets']} of {len(ni)}, below by at most {Z_FINDING:g} standard errors in "
        f"{v['within error']}, below by more in {v['below']}, too short to know in {v['too short to know']}; "
        f"the bound is above 0 (not vacuous) in {positive} of {len(ni)}"
    )
    fr = [r["frac_at_k"] for r in ni]
    if fr:
        ev += f"; fractions {min(fr):.3g}–{max(fr):.3g}"
    if v["below"]:
        ev += "; " + _theorem(ni)
    where = f"E1, α/β ∉ ℤ: {_ns(ni)}, {len(ni)} configurations"
    return where, count_verdict(v["meets"] + v["within error"], len(ni), v["too short to know"]), ev


def _good_set(ni) -> tuple:
    ok = unknown = 0
    never = []
    for r in ni:
        g = r["good_set_fraction"]
        if g is None:
            continue
        if g in (0.0, 1.0):  # a fact of the whole run, no error bar needed
            ok += g >= GOOD_SHARE
            never += [r] if g == 0.0 else []
            continue
        se = r["good_set_fraction_stderr"]
        call = _bound_verdict(g, math.nan if se is None else se, r["good_set_fraction_reliable"], GOOD_SHARE)
        ok += call in ("meets", "within error")
        unknown += call == "too short to know"
    tested = [r for r in ni if r["good_set_fraction"] is not None]
    g = [r["good_set_fraction"] for r in tested]
    ev = (
        f"share of time in N^0.1 at least {GOOD_SHARE:g} (or within {Z_FINDING:g} standard errors of it) in "
        f"{ok} of {len(tested)}" + (f"; shares {min(g):.3g}–{max(g):.3g}" if g else "")
    )
    above = [r for r in never if r["share_max_eq_k"] == 0.0 and r["modal_max"] > r["k"]]
    if above:
        ev += (
            f"; never in N^0.1 in {len(never)}, {len(above)} of them with a maximum above k all the time "
            "(clause (a) allows no queue longer than k)"
        )
    if ok < len(tested):
        ev += "; " + _theorem(tested)
    where = f"E1, α/β ∉ ℤ: {_ns(tested)}, {len(tested)} configurations"
    return where, count_verdict(ok, len(tested), unknown), ev


def _hypothesis(e1, e4) -> tuple:
    rows = list(e1) + list(e4)

    def near(rr):
        return sum(abs(r["modal_max"] - r["k_hypothesis"]) <= 1 for r in rr)

    ok = near(rows)
    ev = (
        f"modal maximum within 1 of the largest k with nπ(k) ≥ 1 in {near(e1)} of {len(e1)} E1 and {near(e4)} of "
        f"{len(e4)} E4 configurations; equal to it in {sum(r['modal_max'] == r['k_hypothesis'] for r in rows)} "
        f"of {len(rows)}"
    )
    miss = [r for r in rows if abs(r["modal_max"] - r["k_hypothesis"]) > 1]
    if miss:
        ev += "; further in " + ", ".join(
            f"n = {r['n']}, d = {r['d']} ({r['modal_max']} against {r['k_hypothesis']})" for r in miss
        )
    where = (
        f"E1 (all {len(e1)}) and E4 (d = {', '.join(str(d) for d in sorted({r['d'] for r in e4}))}, "
        f"λ = {e4[0]['load'] if e4 else '—'}, {len(e4)}): {len(rows)} configurations"
    )
    return where, count_verdict(ok, len(rows)), ev


def _mixing_upper(e2) -> tuple:
    rows, fits = e2["rows"], e2["fits"]
    nsw = [r for r in rows if r["sweep"] == "n" and r["censored"] == 0]
    ns = sorted({r["n"] for r in nsw})
    nlogn = _fit_slope(ns, [m * math.log(m) for m in ns])[0] if len(ns) > 1 else float("nan")
    per_d = fits["slope_vs_n_by_d"]
    ok = sum(1 for s in per_d.values() if s == s and s <= nlogn + SLOPE_TOL)
    within = sum(r["mean_over_upper"] <= 1 for r in rows)
    up = [r["mean_over_upper"] for r in rows]
    ranges = ", ".join(f"d = {d}: {a:.3g}–{b:.3g}" for d, (a, b) in fits["mean_over_upper_range_by_d"].items())
    ev = (
        f"slope of log τ against log n at fixed d: {', '.join(f'd = {d}: {s:.3g}' for d, s in per_d.items())} "
        f"(n log n: {nlogn:.3g}; a sweep agrees when at most {SLOPE_TOL:g} above it); "
        f"τ / (k d^(k−1) n log n) across n at fixed d: {ranges}"
    )
    if rows:
        ev += f"; with constant 1, τ ≤ the order in {within} of {len(rows)} rows (ratios {min(up):.3g}–{max(up):.3g})"
    cens = sum(r["censored"] > 0 for r in rows)
    if cens:
        ev += f"; {cens} rows have censored pairs (left out of the fits)"
    where = f"E2 n sweep: d = {', '.join(str(d) for d in per_d)}, {_ns(nsw)}"
    return where, count_verdict(ok, len(per_d), unit="sweeps"), ev


def _mixing_lower(e2) -> tuple:
    rows = e2["rows"]
    ok = sum(1 for r in rows if max(r["mean_steps"], _hi(r)) >= r["lower_order"])
    clear = sum(1 for r in rows if r["mean_ci"][0] is not None and r["mean_ci"][0] >= r["lower_order"])
    lo = [r["mean_over_lower"] for r in rows]
    ev = (
        f"τ ≥ d^(k−1) n (constant 1; the 95% interval reaches it) in {ok} of {len(rows)} rows, the whole interval "
        f"above it in {clear}" + (f"; τ / (d^(k−1) n) from {min(lo):.3g} to {max(lo):.3g}" if lo else "")
    )
    where = f"E2, both sweeps: {_ns(rows)}, {len(rows)} rows"
    return where, count_verdict(ok, len(rows), unit="rows"), ev


def _mixing_in_d(e2) -> tuple:
    dsw = [r for r in e2["rows"] if r["sweep"] == "d" and r["censored"] == 0]
    s = e2["fits"]["slope_vs_d_at_fixed_n_k"]
    ds = sorted(r["d"] for r in dsw)
    tested = len(dsw) >= 2 and s == s
    ok = tested and abs(s - 1) <= SLOPE_TOL
    ev = (
        f"slope of log τ against log d at fixed n and k = 2: {s:.3g} (d^(k−1) = d: 1; agreement within {SLOPE_TOL:g})"
        if tested
        else "fewer than 2 uncensored rows"
    )
    if dsw:
        r0, r1 = min(dsw, key=lambda r: r["d"]), max(dsw, key=lambda r: r["d"])
        ev += (
            f"; τ / (d n) goes from {r0['mean_over_lower']:.3g} at d = {r0['d']} to {r1['mean_over_lower']:.3g} "
            f"at d = {r1['d']}"
        )
    if tested and not ok:
        ev += "; " + _theorem(dsw)
    where = (
        f"E2 d sweep: n = {dsw[0]['n']}, d = {ds[0]}…{ds[-1]}, λ = {dsw[0]['load']}"
        if dsw
        else "E2 d sweep: no uncensored rows"
    )
    return where, ("reproduced" if ok else "not reproduced at these sizes") if tested else "too short to know", ev


def _hi(r) -> float:
    hi = r["mean_ci"][1]
    return float(hi) if hi is not None else math.inf


def _bad_starts(e3) -> tuple:
    rows, lin = e3["rows"], e3["linear"]
    ok = sum(1 for r in rows if max(r["mean_steps"], _hi(r)) >= r["lower_order"] or r["censored"] > 0)
    clear = sum(1 for r in rows if r["mean_ci"][0] is not None and r["mean_ci"][0] >= r["lower_order"])
    ratios = [r["mean_over_lower"] for r in rows]
    lam = rows[0]["load"] if rows else float("nan")
    ev = (
        f"τ ≥ the order (constant 1; the 95% interval reaches it) in {ok} of {len(rows)} starts, the whole interval "
        f"above it in {clear}"
        + (f"; τ / order {min(ratios):.3g}–{max(ratios):.3g}" if ratios else "")
        + f"; linear fits τ = a + b × order: b = {lin['customers']['slope']:.3g} (‖x‖₁ = g n) and "
        f"{lin['long']['slope']:.3g} (one long queue) against 1+λ = {1 + lam:g} for draining at (1−λ)/(1+λ) per step"
    )
    where = f"E3: n = {rows[0]['n']}, d = {rows[0]['d']}, λ = {lam}, {len(rows)} starts" if rows else "E3"
    return where, count_verdict(ok, len(rows), unit="starts"), ev


def _power_of_choices(e4) -> tuple:
    rows, fits = e4["rows"], e4["fits"]
    ds = sorted(fits)
    ok = sum(1 for d in ds if abs(fits[d]["slope"] - 1) <= SLOPE_TOL)
    big = max(r["n"] for r in rows)
    means = {r["d"]: r["mean_max"] for r in rows if r["n"] == big}
    better = [d for d in ds if d >= 2 and 1 in means and d in means]
    drop = sum(1 for d in better if means[d] <= means[1] / 2)
    ev = (
        "slope of the mean maximum against log n/log(1/λ) (d = 1) or log log n/log d: "
        + ", ".join(f"d = {d}: {fits[d]['slope']:.3g}" for d in ds)
        + f" (agreement: within {SLOPE_TOL:g} of 1); "
        + f"at n = {big} the mean maximum is {', '.join(f'{means[d]:.3g} with d = {d}' for d in ds if d in means)}"
    )
    if better:
        ev += f", at most half the d = 1 value in {drop} of {len(better)} choices d ≥ 2"
    where = f"E4: λ = {rows[0]['load']}, d = {', '.join(map(str, ds))}, {_ns(rows)}"
    return where, count_verdict(ok + drop, len(ds) + len(better), unit="checks"), ev


def claims_rows(results: dict) -> list[dict]:
    """One dict per claim (``claim``, ``where``, ``verdict``, ``evidence``) from the results of E1–E4."""
    e1 = results["E1"]["rows"]
    ni = [r for r in e1 if not r["integer_ratio"]]
    it = [r for r in e1 if r["integer_ratio"]]
    found = [
        _max_is_k(ni),
        _max_is_k_or_k1(it),
        _fraction_at_k(ni),
        _good_set(ni),
        _hypothesis(e1, results["E4"]["rows"]),
        _mixing_upper(results["E2"]),
        _mixing_lower(results["E2"]),
        _mixing_in_d(results["E2"]),
        _bad_starts(results["E3"]),
        _power_of_choices(results["E4"]),
    ]
    return [_row(c, *f) for c, f in zip(CLAIMS, found)]


def claims_table(intro: str, rows: list[dict]) -> str:
    """A "## Claims" section: ``intro``, then one table row per claim (``|`` in a cell becomes ``/``)."""
    keys = ("claim", "where", "verdict", "evidence")
    lines = ["## Claims", "", intro, "", "| claim | where tested | verdict | evidence |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(c[k].replace("|", "/") for k in keys) + " |" for c in rows]
    return "\n".join(lines) + "\n"


def claims_markdown(results: dict) -> str:
    """The "## Claims" section of summary.md: the table of :func:`claims_rows`."""
    intro = (
        "One row per claim of paper 000 (as docs/model.md states it); verdict and evidence are computed from "
        'the experiments\' tables below (orders with constant 1; "too short to know": the error bars needed '
        "are not reliable)."
    )
    return claims_table(intro, claims_rows(results))
