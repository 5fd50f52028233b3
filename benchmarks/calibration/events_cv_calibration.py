"""Calibration of the event engine's capacity-balance control variate (docs/model.md §14).

Random routing with exponential service is ``n`` independent M/M/1 queues: ``E[u_ℓ] = ρ^ℓ``
exactly.  Each seed runs ``simulate_general`` twice on the same chains (4 replications, errors
from their spread, Student t on 3 degrees of freedom): with the control (the default) and
without.  Printed per level: the mean and standard deviation of the z-scores against
``ρ^ℓ`` (t on 3 degrees of freedom has standard deviation 1.73), the fraction of 95 %
intervals that cover, and the median measured variance reduction.

    PYTHONPATH=src python benchmarks/calibration/events_cv_calibration.py            # 200 seeds, a few minutes
    PYTHONPATH=src python benchmarks/calibration/events_cv_calibration.py --seeds 40
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from scipy import stats

from supermarket.simulation.general import simulate_general


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--rho", type=float, default=0.7)
    ap.add_argument("--time", type=float, default=2000.0)
    a = ap.parse_args()
    levels = 5
    exact = a.rho ** np.arange(1, levels + 1)
    q = stats.t.ppf(0.975, 3)
    z = {True: [], False: []}
    gains = []
    for s in range(a.seeds):
        for cv in (True, False):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = simulate_general(
                    a.n, 1, a.rho, policy="random", service="exp", time=a.time, seed=100 + s, workers=1,
                    replications=4, control_variates=cv,
                )  # fmt: skip
            z[cv].append((r.u_mean[:levels] - exact) / r.u_stderr[:levels])
            if cv:
                gains.append(r.variance_reduction["u_mean"][:levels])
    print(f"M/M/1 by random routing, n = {a.n}, ρ = {a.rho}, time {a.time:g} x 4 replications, {a.seeds} seeds")
    print("level  estimator  mean z  sd z  covered  median variance reduction")
    for ell in range(levels):
        for cv in (True, False):
            zz = np.array(z[cv])[:, ell]
            g = np.nanmedian(np.array(gains)[:, ell]) if cv and np.isfinite(np.array(gains)[:, ell]).any() else np.nan
            print(
                f"{ell + 1:5d}  {'cv' if cv else 'plain':9s}  {zz.mean():+.2f}  {zz.std():.2f}  "
                f"{np.mean(np.abs(zz) <= q):.3f}    {'—' if not cv or not np.isfinite(g) else f'{g:.2f}'}"
            )


if __name__ == "__main__":
    main()
