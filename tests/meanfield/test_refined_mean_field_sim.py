"""The refined mean field tested by the simulation (issue 18, docs/control-variates.md).

``E[u_i] = π(i) + V_i/n + O(1/n²)`` (docs/model.md §3, Gast and Van Houdt 2018): with the
control-variate estimators the simulation measures ``E[u_i]`` precisely enough that the
residual ``sim − π − V/n``, scaled by ``n²``, shows the next order of the expansion.  The
slow test fits ``a/n² + b/n³`` to the residuals (weighted by their standard errors) and asks
the fit to be consistent (χ²); dropping ``V/n`` (a residual ``V/n``, growing like ``n`` once
scaled) or getting its sign wrong fails it.

Print the table (about 1e8 steps per n, a few minutes on 2 shared cores)::

    PYTHONPATH=src python tests/meanfield/test_refined_mean_field_sim.py
"""

from __future__ import annotations

import math
import sys
import warnings

import numpy as np
import pytest

from supermarket.meanfield import refined_mean_field
from supermarket.simulation import simulate

CONFIGS = ((2, 0.9), (3, 0.8))
NS = (10, 20, 50, 100, 200, 1000, 10_000)
REPLICATIONS = 4
SEED = 18


def steps_for(n: int) -> int:
    """Steps per replication: at least 2.5e7, and at least about 130 slow-mode relaxation
    times (1/μ = 20 time units at d = 2, λ = 0.9) at large n."""
    return max(25_000_000, 5_000 * n)


def measure(d: int, lam: float, n: int, seed: int = SEED) -> dict:
    """Control-variate estimates (with their own standard errors) of E[u_2], E[u_3] and the mean
    queue length, next to π and π + V/n."""
    rmf = refined_mean_field(d, lam)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = simulate(
            n, d, lam, steps=steps_for(n), start="fixed-point", replications=REPLICATIONS, seed=seed, progress=False
        )
    out = {"n": n, "d": d, "lam": lam, "steps": r.steps, "error_method": r.error_method}
    for name, i in (("u2", 1), ("u3", 2)):
        ok = len(r.u_mean) > i and bool(r.u_reliable[i])
        out[name] = {
            "sim": float(r.u_mean[i]),
            "se": float(r.u_stderr[i]) if ok else math.nan,
            "pi": float(rmf.pi[i]),
            "refined": float(rmf.pi[i] + rmf.V[i] / n),
            "vr": float(r.variance_reduction["u_mean"][i]),
        }
    ok = bool(r.mean_queue_length_reliable)
    out["mql"] = {
        "sim": r.mean_queue_length,
        "se": r.mean_queue_length_stderr if ok else math.nan,
        "pi": rmf.mean_queue_length(),
        "refined": rmf.mean_queue_length(n),
        "vr": float(r.variance_reduction["mean_queue_length"]),
    }
    return out


def residual_fit(rows: list, q: str, n_min: int = 20, against: str = "refined") -> dict:
    """Weighted least squares of ``sim − π − V/n`` (``against="pi"``: ``sim − π``) on
    ``(1/n², 1/n³)`` over ``n >= n_min`` (points with a reliable error only): coefficients,
    their errors, χ² and its p-value."""
    from scipy import stats as ss

    pts = [
        (r["n"], r[q]["sim"] - r[q][against], r[q]["se"])
        for r in rows
        if r["n"] >= n_min and r[q]["se"] > 0 and math.isfinite(r[q]["se"])
    ]
    n = np.array([p[0] for p in pts], float)
    y = np.array([p[1] for p in pts])
    s = np.array([p[2] for p in pts])
    X = np.column_stack([n**-2.0, n**-3.0])
    Xw, yw = X / s[:, None], y / s
    coef, *_ = np.linalg.lstsq(Xw, yw, rcond=None)
    cov = np.linalg.inv(Xw.T @ Xw)
    chi2 = float(np.sum((yw - Xw @ coef) ** 2))
    dof = len(pts) - 2
    return {
        "points": len(pts),
        "a": float(coef[0]),
        "a_se": float(math.sqrt(cov[0, 0])),
        "b": float(coef[1]),
        "b_se": float(math.sqrt(cov[1, 1])),
        "chi2": chi2,
        "dof": dof,
        "p": float(ss.chi2.sf(chi2, dof)) if dof > 0 else math.nan,
    }


def _fmt(x, se=None, scale=1.0):
    if se is None:
        return f"{x * scale:.7f}"
    if not math.isfinite(se):
        return f"{x * scale:.7f} (no error bar)"
    return f"{x * scale:.7f} ± {se * scale:.7f}" if scale == 1.0 else f"{x * scale:.3g} ± {se * scale:.2g}"


def table(rows: list) -> str:
    lines = []
    for q, label in (("u2", "E[u_2]"), ("u3", "E[u_3]"), ("mql", "mean queue length")):
        lines += [
            f"\n{label}, d = {rows[0]['d']}, λ = {rows[0]['lam']}:\n",
            "| n | simulated (CV) | π | π + V/n | n²·(sim − π − V/n) | variance reduction |",
            "|---|---|---|---|---|---|",
        ]
        for r in rows:
            x = r[q]
            res = x["sim"] - x["refined"]
            lines.append(
                f"| {r['n']:,} | {_fmt(x['sim'], x['se'])} | {x['pi']:.7f} | {x['refined']:.7f} | "
                f"{_fmt(res, x['se'], r['n'] ** 2)} | {x['vr']:.3g} |"
            )
        f = residual_fit(rows, q)
        lines.append(
            f"\nfit over n ≥ 20: residual = a/n² + b/n³, a = {f['a']:.3g} ± {f['a_se']:.2g}, "
            f"b = {f['b']:.3g} ± {f['b_se']:.2g}, χ² = {f['chi2']:.2f} on {f['dof']} dof (p = {f['p']:.2f})"
        )
    return "\n".join(lines)


@pytest.mark.slow
@pytest.mark.parametrize("d,lam", CONFIGS)
def test_refined_mean_field_residual_is_second_order(d, lam):
    rows = [measure(d, lam, n) for n in NS]
    for q in ("u2", "u3", "mql"):
        f = residual_fit(rows, q)
        assert f["points"] >= 4, (q, f)
        # the residual after π + V/n is consistent with a/n² + b/n³ (p > 0.001)
        assert f["p"] > 1e-3, (q, f, table(rows))
        # and the V/n term is needed: π alone leaves a residual V/n that the same fit rejects
        assert residual_fit(rows, q, against="pi")["p"] < 1e-6, (q, table(rows))


if __name__ == "__main__":
    for d, lam in CONFIGS:
        rows = []
        for n in NS:
            rows.append(measure(d, lam, n))
            print(f"# d={d} λ={lam} n={n} done", file=sys.stderr, flush=True)
        print(table(rows), flush=True)
