"""Error bars that hold, checked at scale (slow): many independent replications of one
configuration, each with its own blocking error bar, against an exact value or the pooled
mean of all of them (docs/model.md §9).  Run with ``python -m pytest -m slow
tests/simulation/test_error_bars_slow.py``; the fast checks of the same estimator against exact facts
are in tests/core/test_stats.py."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from supermarket.simulation import simulate


@pytest.mark.slow
def test_n500_d3_heavy_load_intervals_cover_at_95_percent():
    # Issue 18 reported that at n = 500, d = 3, λ = 0.95, 10^6 steps from the fixed point,
    # 109 of 120 runs were reliable and their intervals for E[u_1] covered λ in 90 % (s.d. of
    # z 1.27).  Measured on this code: 2,000 replications (seed 2024) 1,813 reliable, 95.5 %
    # covered; seeds 0..599 of the issue's own call, 505 of 533 (94.7 %).  Here 400
    # replications (about 40 s of CPU): E[u_1] against λ exactly, E[u_2] and E[u_3] against
    # the pooled mean of all 400 runs (its own error is 1/20 of one run's, which widens the
    # spread seen by a factor √(1 + 1/400), negligible).  Each coverage is Binomial(reliable,
    # 0.95) within 4 of its s.d. either way (at ~360 reliable: 95 ± 4.6 %), and one run's
    # stated s.e. matches the spread of the replication means: their ratio is 1 within 4 of
    # its own standard errors (the spread of M means is off by about 1/√(2M) relative, the
    # rms of m stated errors with ~8 degrees of freedom by about 1/√(16m): ±0.15 here).
    M, lam = 400, 0.95
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = simulate(500, 3, lam, steps=10**6, start="fixed-point", replications=M, seed=2024, workers=1)
    per = res.per_replication
    for i in range(3):
        means = np.array([r.u_mean[i] for r in per])
        truth = lam if i == 0 else float(means.mean())
        rel = np.array([bool(r.u_reliable[i]) for r in per])
        hw = np.array([r.u_half_width[i] for r in per])
        se = np.array([r.u_stderr[i] for r in per])
        m = int(rel.sum())
        covered = int(np.sum(rel & (np.abs(means - truth) <= hw)))
        assert m >= 0.85 * M, (i, m)
        assert abs(covered - 0.95 * m) <= 4 * math.sqrt(m * 0.95 * 0.05), (i + 1, covered, m)
        ratio = float(np.sqrt(np.mean(se[rel] ** 2)) / means.std(ddof=1))
        assert abs(ratio - 1) <= 4 * math.sqrt(1 / (2 * M) + 1 / (16 * m)), (i + 1, ratio)
