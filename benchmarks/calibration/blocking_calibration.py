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

    PYTHONPATH=src python benchmarks/calibration/blocking_calibration.py            # M = 1000, N = 1024
    PYTHONPATH=src python benchmarks/calibration/blocking_calibration.py --runs 200

Takes about 10 s for M = 1000.  ``--few-blocks`` checks instead the fewest blocks a reliable
estimate stands on (32, pinned by ``min_block_size = N/32``), where every correction of
:func:`~supermarket.stats.blocking` matters most: the mean of ``s.e.²`` over the exact
variance of the mean (with its standard error), the degrees of freedom measured as
``2 E[s.e.²]²/Var(s.e.²)`` against the stated ones, and the miss rates of the 95 % and 99 %
intervals (20,000 series of independent values, 4,000 of each AR(1); about 10 s)::

    PYTHONPATH=src python benchmarks/calibration/blocking_calibration.py --few-blocks
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy.signal import lfilter

from supermarket.stats import blocking, t_quantile

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
    return {
        "phi": phi,
        "n_eff": N * (1 - phi) / (1 + phi),
        "reliable": rel / M,
        "cover_given_reliable": cov / rel if rel else math.nan,
        "wrong": (rel - cov) / M,
        "se_over_true": math.sqrt(np.mean(np.square(ses))) / true if ses else math.nan,
    }


FEW_BLOCKS = (
    (0.0, 32, 1, 20_000),
    (0.0, 64, 1, 10_000),
    (0.5, 256, 8, 4000),
    (0.9, 512, 16, 4000),
    (0.9, 2048, 64, 4000),
)  # (φ, N, min_block_size, series)


def few_blocks_row(phi: float, N: int, mbs: int, R: int, rng) -> dict:
    """The estimates of ``R`` AR(1) series of length ``N`` (drawn at once) with the plateau
    held at blocks of at least ``mbs``, against the exact variance of the mean."""
    if phi == 0:
        X = rng.standard_normal((R, N))
    else:
        x0 = rng.standard_normal(R) / math.sqrt(1.0 - phi**2)
        X = lfilter([1.0], [1.0, -phi], rng.standard_normal((R, N)), axis=1, zi=(phi * x0)[:, None])[0]
    ests = [blocking(x, min_block_size=mbs) for x in X]
    rel = np.array([e.reliable for e in ests])
    r = np.array([e.stderr**2 for e in ests])[rel] / var_of_mean(phi, N)
    absz = np.abs(X.mean(axis=1)[rel]) / np.array([e.stderr for e in ests])[rel]
    dof = np.array([e.dof for e in ests])[rel]
    miss = {c: float(np.mean(absz > np.array([t_quantile(v, c) for v in dof]))) for c in (0.95, 0.99)}
    return {
        "phi": phi,
        "N": N,
        "reliable": float(rel.mean()),
        "blocks": sorted({e.blocks for e in ests if e.reliable}),
        "ratio": float(r.mean()),
        "ratio_se": float(r.std() / math.sqrt(r.size)),
        "dof_measured": float(2 * r.mean() ** 2 / r.var()),
        "dof_stated": float(np.median(dof)),
        "miss95": miss[0.95],
        "miss99": miss[0.99],
        "count": int(rel.sum()),
    }


def few_blocks(seed: int) -> None:
    rng = np.random.default_rng(seed)
    print(
        f"{'phi':>5} {'N':>5} {'reliable':>8} {'blocks':>12} {'se2/exact':>15} {'dof meas':>8} {'stated':>6} "
        f"{'miss95':>7} {'miss99':>7}"
    )
    for phi, N, mbs, R in FEW_BLOCKS:
        r = few_blocks_row(phi, N, mbs, R, rng)
        print(
            f"{phi:5.2f} {N:5d} {r['reliable']:8.3f} {r['blocks']!s:>12} {r['ratio']:7.3f} ± {r['ratio_se']:.3f} "
            f"{r['dof_measured']:8.1f} {r['dof_stated']:6.1f} {r['miss95']:7.4f} {r['miss99']:7.4f}",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--length", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--few-blocks", action="store_true", help="the 32-block checks instead of the table")
    a = ap.parse_args()
    if a.few_blocks:
        few_blocks(a.seed)
        return
    rng = np.random.default_rng(a.seed)
    print(f"{'phi':>5} {'N/(2tau)':>9} {'reliable':>9} {'cover|rel':>10} {'wrong':>6} {'se/true':>8}")
    for phi in PHIS:
        r = row(phi, a.length, a.runs, rng)
        print(
            f"{phi:5.2f} {r['n_eff']:9.1f} {r['reliable']:9.3f} {r['cover_given_reliable']:10.3f} "
            f"{r['wrong']:6.3f} {r['se_over_true']:8.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
