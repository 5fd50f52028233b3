"""Second-order control variates: a measurement prototype (issue 18, docs/control-variates.md).

The generator ``A`` of the profile chain applied to ``h(u) = u_i u_j`` gives quantities with
mean exactly zero in equilibrium ([derived], docs/control-variates.md):

    A(u_i u_j) = u_j b_i + u_i b_j + δ_ij (λ(P_{i−1} − P_i) + u_i − u_{i+1}) / n,
    b_i = λ(P_{i−1} − P_i) − (u_i − u_{i+1}),   P_0 = 1,

(per unit time, divided by n as the drift ``b``), with ``P_i = u_i^d`` with replacement and
``C(c_i, d)/C(n, d)`` without.  This script samples the state every ``K``-th event of the
discrete chain (``simulate(..., record_every=K)``: a sampled stationary chain still has
``E[A h] = 0`` at every sample) and compares, over ``R`` independent replications, the
spread of three estimators computed from the *same samples*:

- ``plain``: the sample mean;
- ``linear``: regression (on 1024 batch means, split-sample) on the first-order controls
  ``Z_i = u_i − λ P_{i−1}``, ``i = 1..m``;
- ``linear+quadratic``: the same with the ``q(q+1)/2`` second-order controls
  ``A(u_i u_j)``, ``1 <= i <= j <= q``, added.

Targets: ``E[u_3]`` at large ``d`` (where the linear controls gain little) and the stationary
variances ``Var(u_1)``, ``Var(u_2)`` (the fluctuation variances of paper 002: a sample
variance, ``mean of (u_i − ū_i)²``) in the regimes (a), (b), (c) of paper 002 (without
replacement) and at d = 2.  The variance ratio is ``(spread of plain)² / (spread of CV)²``
over the R replications; its own uncertainty is an F-ratio on R − 1 and R − 1 degrees of
freedom (a 90 % interval is printed).

    PYTHONPATH=src python benchmarks/calibration/second_order_controls.py          # a few minutes
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np
from scipy import stats as ss

from supermarket.engines.tables import JSQ_D, p_rule_counts
from supermarket.simulation import simulate
from supermarket.simulation.control import crossfit, second_order_pairs, second_order_terms

BATCHES = 1024  # each half must hold 16 rows per control (m + q(q+1)/2 = 10 controls)


def controls(u: np.ndarray, n: int, d: int, lam: float, replace: bool, m: int, q: int):
    """Per sample (rows of ``u``: u_1..u_L): the first-order controls ``Z_1..Z_m`` and the
    second-order ones ``A(u_i u_j)``, ``1 <= i <= j <= q`` (needs ``L >= max(m, q + 1)``), the
    latter from the library (:func:`supermarket.simulation.control.second_order_terms`)."""
    N = u.shape[0]
    P = p_rule_counts(JSQ_D, np.ascontiguousarray(np.rint(u * n), dtype=np.int64), n, d, replace)
    P0 = np.column_stack([np.ones(N), P])  # P_0 .. P_L
    Z = u[:, :m] - lam * P0[:, :m]
    pairs = second_order_pairs(q)
    Y = second_order_terms(u, P, lam, n, pairs) if pairs else np.zeros((N, 0))
    return Z, Y


def _batch(x: np.ndarray, B: int = BATCHES) -> np.ndarray:
    N = (x.shape[0] // B) * B
    return x[:N].reshape(B, N // B, *x.shape[1:]).mean(axis=1)


def cv_mean(f: np.ndarray, C: np.ndarray) -> float:
    """Split-sample control-variate estimate of E[f] from the batch means of f and of the
    controls C (the production regression of supermarket.simulation.control)."""
    fb, Cb = _batch(f), _batch(C)
    if not fb.std() > 0:  # f does not vary (a level never reached): nothing to regress
        return float(fb.mean())
    fit = crossfit([(fb, np.ones(fb.size))], [Cb])
    if fit is None:
        raise ValueError("too few batches for this many controls")
    return float(fit.adjusted[0].mean())


MIN_SEEN = 64  # batches in which a level must be occupied for its controls to be used


def levels_seen(u: np.ndarray) -> int:
    """Levels 1..L occupied in at least MIN_SEEN of the batches.  A level the run (almost)
    never reaches must not enter a control: ``Z_i = u_i − λP_{i−1}`` then averages to
    ``−λ·mean P_{i−1} ≠ 0`` (the rare visits that balance it are missing) with a tiny
    variance, and the regression trusts it completely (measured: 13 standard errors off in
    regime (a), and the variance estimates 10 to 28 standard errors off)."""
    occ = (_batch(u) > 0).sum(axis=0)
    return int(np.sum(occ >= MIN_SEEN))


def estimates(u, n, d, lam, replace, m, q, level):
    """Plain / linear / linear+quadratic estimates of E[u_level], Var(u_1) and Var(u_2)."""
    seen = levels_seen(u)
    m, q = min(m, seen), min(q, seen - 1)  # Z_i needs u_i; A(u_i u_j), j <= q, needs u_{j+1}
    Z, Y = controls(u, n, d, lam, replace, m, q)
    lin = Z
    both = np.column_stack([Z, Y])
    out = {}
    f = u[:, level - 1]
    out[f"E[u_{level}]"] = (float(f.mean()), cv_mean(f, lin), cv_mean(f, both))
    for i in (1, 2):
        x = u[:, i - 1]
        # E[(u_i − a)²] for a fixed centre a (the sample mean of this run, a constant for the
        # regression); Var = E[(u_i − a)²] − (E u_i − a)², the second term from the mean's estimate
        a = float(x.mean())
        g = (x - a) ** 2
        mp, ml, mq_ = x.mean(), cv_mean(x, lin), cv_mean(x, both)
        out[f"Var(u_{i})"] = (
            float(g.mean() - (mp - a) ** 2),
            cv_mean(g, lin) - (ml - a) ** 2,
            cv_mean(g, both) - (mq_ - a) ** 2,
        )
    return out


def run_config(name, n, d, lam, replace, steps, K, R, m=4, q=3, level=3, seed=0):
    rows = []
    t = time.process_time()
    for r in range(R):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = simulate(
                n,
                d,
                lam,
                steps=steps,
                start="fixed-point",
                seed=seed * 1000 + r,
                replace=replace,
                record_every=K,
                record_levels=max(m, q + 1, level) + 1,
                progress=False,
                workers=1,
                control_variates=False,
            )
        rows.append(estimates(res.trajectory.u, n, d, lam, replace, m, q, level))
    cpu = time.process_time() - t
    out = {
        "name": name,
        "n": n,
        "d": d,
        "lam": lam,
        "replace": replace,
        "steps": steps,
        "K": K,
        "R": R,
        "samples": int(res.trajectory.u.shape[0]),
        "cpu_s": cpu,
        "quantities": {},
    }
    lo, hi = ss.f.ppf([0.05, 0.95], R - 1, R - 1)
    for key in rows[0]:
        a = np.array([rw[key] for rw in rows])  # R x 3
        sd = a.std(axis=0, ddof=1)
        diff = a[:, 2] - a[:, 0]  # linear+quadratic − plain, per replication (same samples)
        out["quantities"][key] = {
            "mean": a.mean(axis=0).tolist(),
            "sd": sd.tolist(),
            # do the estimators agree? the mean difference in its own s.e.
            "agree_z": float(diff.mean() / (diff.std(ddof=1) / np.sqrt(R))),
            "ratio_linear": float((sd[0] / sd[1]) ** 2),
            "ratio_quadratic": float((sd[0] / sd[2]) ** 2),
            "gain_of_quadratic": float((sd[1] / sd[2]) ** 2),
            # a ratio of two sample variances (independent replications):
            # divided/multiplied by the F quantiles gives a 90 % interval
            "gain_interval": [float((sd[1] / sd[2]) ** 2 / hi), float((sd[1] / sd[2]) ** 2 / lo)],
        }
    return out


def report(o) -> str:
    head = (
        f"{o['name']}: n = {o['n']}, d = {o['d']}, λ = {o['lam']:.6g}, "
        f"{'with' if o['replace'] else 'without'} replacement, {o['R']} × {o['steps']:.2g} steps, every "
        f"K = {o['K']} events ({o['samples']} samples each), {o['cpu_s']:.0f} CPU s"
    )
    cols = (
        "| quantity | mean (plain) | sd plain | sd linear | sd linear+quadratic | plain/linear | "
        "plain/(lin+quad) | quadratic's own gain (90 % interval) | lin+quad − plain (z) |"
    )
    lines = [head, "", cols, "|---|---|---|---|---|---|---|---|---|"]
    for k, v in o["quantities"].items():
        sd = v["sd"]
        lines.append(
            f"| {k} | {v['mean'][0]:.6g} | {sd[0]:.3g} | {sd[1]:.3g} | {sd[2]:.3g} | "
            f"{v['ratio_linear']:.3g} | "
            f"{v['ratio_quadratic']:.3g} | {v['gain_of_quadratic']:.3g} "
            f"({v['gain_interval'][0]:.2g}–{v['gain_interval'][1]:.2g}) | {v['agree_z']:+.1f} |"
        )
    return "\n".join(lines)


def configs():
    from supermarket.fluctuations import regimes as rg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pa = rg.regime_a(1000, 1.0, d=10)
        pb = rg.regime_b(1000, c=1.0, zeta=0.5)
        pc = rg.regime_c(1000, zeta=1.0)
    R = 32
    return [
        # E[u_3] at large d (with replacement)
        ("large d", 10_000, 20, 0.99, True, 40_000_000, 2_000, R),
        ("large d", 1000, 50, 0.99, True, 20_000_000, 500, R),
        # paper 002's regimes (without replacement), n = 1000; E[u_2] (u_3 is almost never
        # above 0 there)
        ("regime (a)", pa.n, pa.d, pa.lam, False, 10_000_000, 200, R, 4, 3, 2),
        ("regime (b)", pb.n, pb.d, pb.lam, False, 10_000_000, 200, R, 4, 3, 2),
        ("regime (c)", pc.n, pc.d, pc.lam, False, 10_000_000, 200, R, 4, 3, 2),
        ("d = 2", 1000, 2, 0.9, True, 10_000_000, 200, R),
    ]


if __name__ == "__main__":
    words = sys.argv[1:]
    for c in configs():
        if words and not any(w in c[0] for w in words):
            continue
        print(report(run_config(*c)), "\n", flush=True)
