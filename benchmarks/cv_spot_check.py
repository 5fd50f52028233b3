"""Spot check of the control-variate error bars (docs/model.md §9.1): M independent runs of
one configuration, each run's stated standard error against the spread of the M estimates,
for the control-variate estimates and the plain ones side by side, and with ``--exact`` (n
small) the z-scores against the exact stationary law (tests/exact_small.py).

A spot check, not the calibration (M is small: the spread's own relative error is about
1/√(2(M − 1))).  Usage::

    PYTHONPATH=src:tests python benchmarks/cv_spot_check.py 100 2 0.9 2e5 60
    PYTHONPATH=src:tests python benchmarks/cv_spot_check.py 1000 50 0.99 8e6 40
    PYTHONPATH=src:tests python benchmarks/cv_spot_check.py 3 2 0.9 1e6 80 --exact
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
    a = ap.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    names = ["E[u_1]", "E[u_2]", "E[u_3]", "mean queue length"]
    cv, se, pl, sep, vr = [], [], [], [], []
    for s in np.random.SeedSequence(a.seed).spawn(a.M):
        r = simulate(a.n, a.d, a.load, steps=int(a.steps), seed=s, start="fixed-point")
        cv.append(np.r_[r.u_mean[:3], r.mean_queue_length])
        se.append(np.r_[r.u_stderr[:3], r.mean_queue_length_stderr])
        pl.append(np.r_[r.u_mean_plain[:3], r.mean_queue_length_plain])
        sep.append(np.r_[r.u_stderr_plain[:3], r.mean_queue_length_stderr_plain])
        vr.append(np.r_[r.variance_reduction["u_mean"][:3], r.variance_reduction["mean_queue_length"]])
    cv, se, pl, sep, vr = map(np.array, (cv, se, pl, sep, vr))
    exact = None
    if a.exact:
        from exact_small import profile_law

        law = profile_law(a.n, a.d, a.load, M=40)
        exact = np.r_[law.u[:3], law.mean_queue_length]
    print(
        f"n={a.n} d={a.d} λ={a.load} steps={a.steps:g} M={a.M} (spread's relative error "
        f"{1 / math.sqrt(2 * (a.M - 1)):.2f})"
    )
    print("quantity            CV s.e./spread  plain s.e./spread  measured gain  median stated gain  CV mean z")
    for j, nm in enumerate(names):
        ok = np.isfinite(se[:, j])
        gain = (pl[:, j].std(ddof=1) / cv[:, j].std(ddof=1)) ** 2
        z = ""
        if exact is not None:
            zz = (cv[ok, j] - exact[j]) / se[ok, j]
            z = f"{zz.mean():+.2f} (sd {zz.std(ddof=1):.2f})"
        print(
            f"{nm:18s}  {np.mean(se[ok, j]) / cv[ok, j].std(ddof=1):14.3f}  "
            f"{np.nanmean(sep[:, j]) / pl[:, j].std(ddof=1):17.3f}  {gain:13.3g}  "
            f"{np.nanmedian(vr[:, j]):18.3g}  {z}"
        )


if __name__ == "__main__":
    main()
