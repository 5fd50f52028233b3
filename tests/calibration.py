"""Calibration of simulate()'s 95 % intervals against exact values (docs/model.md §9).

Each case runs ``M`` independent replications (child seeds of one root) and counts, among
those whose interval is flagged reliable, how many cover the exact value: ``λ`` for
``E[u_1]`` (an exact identity, any n), or the exact stationary law of a tiny system
(:mod:`exact_small`, built from the definition).  It also compares one run's standard
error with the spread of the replication means.

Run the full table (a few minutes on 2 cores)::

    PYTHONPATH=src python tests/calibration.py          # M = 200 per case
"""

from __future__ import annotations

import math
import sys
import warnings
from dataclasses import dataclass

import numpy as np

from supermarket.simulation import simulate


@dataclass
class Case:
    name: str
    n: int
    d: int
    lam: float
    steps: int
    start: str = "fixed-point"
    burn_in: int | None = None
    level: int = 1  # which E[u_i] is checked
    exact: float | None = None  # None: λ (i = 1)
    replace: bool = True
    # True: most runs must know their error and cover; False: the run is known to be too short
    # or biased, (almost) all must be flagged; None: near the threshold, either (only the rate
    # of confident misses is checked)
    expect_reliable: bool | None = True


def run_case(case: Case, M: int, seed: int = 2024) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = simulate(case.n, case.d, case.lam, steps=case.steps, burn_in=case.burn_in, start=case.start,
                       replications=M, seed=seed, replace=case.replace, progress=False)
    exact = case.lam if case.exact is None else case.exact
    i = case.level - 1
    per = res.per_replication
    means = np.array([r.u_mean[i] if len(r.u_mean) > i else 0.0 for r in per])
    rel = np.array([bool(r.u_reliable[i]) if len(r.u_mean) > i else False for r in per])
    hw = np.array([r.u_half_width[i] if len(r.u_mean) > i else math.nan for r in per])
    se = np.array([r.u_stderr[i] if len(r.u_mean) > i else math.nan for r in per])
    cover = int(np.sum(rel & (np.abs(means - exact) <= hw)))
    return {"case": case.name, "M": M, "reliable": int(rel.sum()), "covered": cover,
            "coverage": cover / max(int(rel.sum()), 1),
            # one run's s.e. against the spread across replications (reliable runs)
            "se_rms": float(np.sqrt(np.mean(se[rel] ** 2))) if rel.any() else math.nan,
            "spread": float(means.std(ddof=1)),
            "bias_z": float((means.mean() - exact) / (means.std(ddof=1) / math.sqrt(M)))}


def binomial_floor(m: int, p: float = 0.95, z: float = 3.0) -> float:
    """Fewest covered out of m consistent with Binomial(m, p) (z standard deviations below)."""
    return m * p - z * math.sqrt(m * p * (1 - p))


def cases() -> list[Case]:
    from exact_small import profile_law
    law = profile_law(3, 2, 0.9, replace=True, M=30)
    return [
        Case("n=100 d=2 λ=0.9, 2e5 steps", 100, 2, 0.9, 200_000),
        # 4e6 steps span about 100 slow-mode relaxation times (1/μ = 20 time units); at 1e6
        # (26 of them) every run now declines: blocks must be at least 1/μ long
        Case("n=1000 d=2 λ=0.9 from empty, burn-in 2e5", 1000, 2, 0.9, 4_000_000, start="empty", burn_in=200_000),
        Case("n=1000 d=50 λ=0.99 heavy traffic, 8e6 steps", 1000, 50, 0.99, 8_000_000),
        # 2e6 steps is about 20 slow-mode relaxation times (1/μ = 51 time units): short
        Case("n=1000 d=50 λ=0.99 heavy traffic, 2e6 steps (short)", 1000, 50, 0.99, 2_000_000,
             expect_reliable=None),
        Case("n=33000 d=3300 λ=1−1/1650, 1.5e6 steps (the old 11σ case)", 33_000, 3300, 1 - 1 / 1650, 1_500_000,
             expect_reliable=False),
        Case("n=33000 d=3300 λ=1−1/1650, 3e5 steps (near 'too short')", 33_000, 3300, 1 - 1 / 1650, 300_000,
             expect_reliable=False),
        Case("n=10000 d=20 λ=0.99, 2e5 steps (near 'too short')", 10_000, 20, 0.99, 200_000,
             expect_reliable=None),
        Case("n=3 d=2 λ=0.9 exact law, E[u_2]", 3, 2, 0.9, 100_000, level=2, exact=float(law.u[1])),
        Case("n=3 d=2 λ=0.9 exact law, E[u_3]", 3, 2, 0.9, 100_000, level=3, exact=float(law.u[2])),
    ]


if __name__ == "__main__":
    M = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(f"M = {M}; failure below {binomial_floor(M):.0f} covered per {M} reliable (Binomial, 3 s.d.)")
    for c in cases():
        r = run_case(c, M)
        print(f"{r['case']:62s} reliable {r['reliable']:4d}/{M}  covered {r['covered']:4d}  "
              f"({r['coverage']:.3f})  confident misses {r['reliable'] - r['covered']:3d}  "
              f"rms s.e. {r['se_rms']:.3g} vs spread {r['spread']:.3g}  "
              f"bias {r['bias_z']:+.1f} s.e.", flush=True)
