"""Spot check of the control-variate error bars (docs/model.md §9.1): M independent runs of
one configuration, each run's stated standard error against the spread of the M estimates,
for the control-variate estimates and the plain ones side by side, and the coverage of the
95 % intervals against the exact ``E[u_1] = λ`` and, with ``--exact`` (n small), the exact
stationary law (tests/exact_small.py) or, with ``--ref u1,u2,u3,mean`` (four values), a
long reference run.

A spot check, not the calibration (M is small: the spread's own relative error is about
1/√(2(M − 1)), a coverage's binomial s.d. about 0.022 at M = 100).  The spread mixes the
runs that use the control variates with those that fall back to the plain estimate (a
fallback run's error can be ten times larger), so the columns are for the runs that use the
controls: "mean s.e./spread" (below 1 by the factor E[s]/σ of an error estimated on few
degrees of freedom: 0.92 at 3), "rms s.e./rms error" (against the reference when there is
one, else the spread: 1 for an unbiased variance), the measured gain (spread of the plain
over spread of the adjusted estimates, same runs) and the median of the stated ones, and
the coverage of the stated 95 % intervals (all runs with an error bar).  Usage::

    PYTHONPATH=src:tests python benchmarks/calibration/cv_spot_check.py 100 2 0.9 2e5 100 \\
        --ref 0.9,0.7303022,0.4848014,2.393307
    PYTHONPATH=src:tests python benchmarks/calibration/cv_spot_check.py 1000 50 0.99 8e6 100
    PYTHONPATH=src:tests python benchmarks/calibration/cv_spot_check.py 3 2 0.9 1e6 80 --exact
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np

from supermarket.simulation import simulate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int)
    ap.add_argument("d", type=int)
    ap.add_argument("load", type=float)
    ap.add_argument("steps", type=float)
    ap.add_argument("M", type=int)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--exact", action="store_true", help="compare with the exact law (small n only)")
    ap.add_argument("--ref", default=None, help="reference values of E[u_1..3] and the mean queue length")
    a = ap.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    names = ["E[u_1]", "E[u_2]", "E[u_3]", "mean queue length"]
    cv, se, hw, pl, sep, vr = [], [], [], [], [], []
    for s in np.random.SeedSequence(a.seed).spawn(a.M):
        r = simulate(a.n, a.d, a.load, steps=int(a.steps), seed=s, start="fixed-point")
        cv.append(np.r_[r.u_mean[:3], r.mean_queue_length])
        se.append(np.r_[r.u_stderr[:3], r.mean_queue_length_stderr])
        hw.append(np.r_[r.u_half_width[:3], r.mean_queue_length_half_width])
        pl.append(np.r_[r.u_mean_plain[:3], r.mean_queue_length_plain])
        sep.append(np.r_[r.u_stderr_plain[:3], r.mean_queue_length_stderr_plain])
        vr.append(np.r_[r.variance_reduction["u_mean"][:3], r.variance_reduction["mean_queue_length"]])
    cv, se, hw, pl, sep, vr = map(np.array, (cv, se, hw, pl, sep, vr))
    ref = np.full(4, np.nan)
    ref[0] = a.load
    if a.exact:
        from exact_small import profile_law

        law = profile_law(a.n, a.d, a.load, M=40)
        ref = np.r_[law.u[:3], law.mean_queue_length]
    elif a.ref:
        ref = np.array([float(x) for x in a.ref.split(",")])
    print(
        f"n={a.n} d={a.d} λ={a.load} steps={a.steps:g} M={a.M} (spread's relative error "
        f"{1 / math.sqrt(2 * (a.M - 1)):.2f})"
    )
    print(
        "quantity            used  mean s.e./spread  rms s.e./rms err  plain s.e./spread  measured gain"
        "  median stated gain  covered (95 %)"
    )
    for j, nm in enumerate(names):
        ok = np.isfinite(se[:, j])
        used = ok & np.isfinite(vr[:, j])
        cov = ""
        if np.isfinite(ref[j]):
            cov = f"{int(np.sum(np.abs(cv[ok, j] - ref[j]) <= hw[ok, j]))}/{int(ok.sum())}"
        if used.sum() > 1:
            spread = cv[used, j].std(ddof=1)
            err = math.sqrt(np.mean((cv[used, j] - ref[j]) ** 2)) if np.isfinite(ref[j]) else spread
            cols = (
                f"{np.mean(se[used, j]) / spread:16.3f}  {math.sqrt(np.mean(se[used, j] ** 2)) / err:16.3f}  "
                f"{np.nanmean(sep[:, j]) / pl[:, j].std(ddof=1):17.3f}  "
                f"{(pl[used, j].std(ddof=1) / spread) ** 2:13.3g}  {np.median(vr[used, j]):18.3g}"
            )
        else:
            plain = np.nanmean(sep[:, j]) / pl[:, j].std(ddof=1)
            cols = f"{'-':>16s}  {'-':>16s}  {plain:17.3f}  {'-':>13s}  {'-':>18s}"
        print(f"{nm:18s}  {int(used.sum()):4d}  {cols}  {cov:>14s}")


if __name__ == "__main__":
    main()
