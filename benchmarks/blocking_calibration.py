"""Calibration of :func:`supermarket.stats.blocking` on AR(1) series of known variance.

For each autocorrelation ``φ`` it draws ``M`` stationary AR(1) series of length ``N``, runs
the blocking analysis on each, and compares with the exact variance of the mean,
``Var x̄ = σ²/N · (1 + 2 Σ_{k<N} (1 − k/N) φ^k)``, ``σ² = 1/(1 − φ²)``:

- ``reliable``: the fraction of runs the analysis calls reliable;
- ``cover|rel``: among those, how often the 95 % interval covers the true mean 0;
- ``wrong``: the fraction of all runs that are called reliable *and* miss (the rate at
  which a user is told something confident and false; 5 % is the design);
- ``se/true``: the root-mean-square stated standard error of the reliable runs over the
  true one.

    PYTHONPATH=src python benchmarks/blocking_calibration.py            # M = 1000, N = 1024
    PYTHONPATH=src python benchmarks/blocking_calibration.py --runs 200

Takes about 10 s for M = 1000.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy.signal import lfilter

from supermarket.stats import blocking

PHIS = (0.0, 0.5, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99)


def ar1(rng, phi: float, N: int) -> np.ndarray:
    """A stationary AR(1) series ``x_t = φ x_{t−1} + e_t`` with standard normal ``e_t``."""
    x0 = rng.standard_normal() / math.sqrt(1.0 - phi**2)
    return lfilter([1.0], [1.0, -phi], rng.standard_normal(N), zi=[phi * x0])[0]


def var_of_mean(phi: float, N: int) -> float:
    k = np.arange(1, N)
    return 1.0 / (1.0 - phi**2) / N * (1.0 + 2.0 * float(np.sum((1.0 - k / N) * phi**k)))


def row(phi: float, N: int, M: int, rng) -> dict:
    true = math.sqrt(var_of_mean(phi, N))
    rel = cov = 0
    ses = []
    for _ in range(M):
        e = blocking(ar1(rng, phi, N))
        if e.reliable:
            rel += 1
            ses.append(e.stderr)
            cov += e.covers(0.0)
    return {"phi": phi, "n_eff": N * (1 - phi) / (1 + phi), "reliable": rel / M,
            "cover_given_reliable": cov / rel if rel else math.nan, "wrong": (rel - cov) / M,
            "se_over_true": math.sqrt(np.mean(np.square(ses))) / true if ses else math.nan}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--length", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    print(f"{'phi':>5} {'N/(2tau)':>9} {'reliable':>9} {'cover|rel':>10} {'wrong':>6} {'se/true':>8}")
    for phi in PHIS:
        r = row(phi, a.length, a.runs, rng)
        print(f"{phi:5.2f} {r['n_eff']:9.1f} {r['reliable']:9.3f} {r['cover_given_reliable']:10.3f} "
              f"{r['wrong']:6.3f} {r['se_over_true']:8.3f}", flush=True)


if __name__ == "__main__":
    main()
