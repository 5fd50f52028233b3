"""The error bar of ``E[u_1]`` against its exact variance (docs/model.md §9, "An exact error
bar to check against").

In the uniformized chain (both time modes of ``simulate``), the time average of ``u_1`` over
``S`` measured steps satisfies ``ū_1 − λ = (1 + λ)/S · (Q_0 − Q_S − M_S)`` with ``M`` a
martingale whose increments have conditional variance ``(u_1 + λ)/(1 + λ) − ((u_1 −
λ)/(1 + λ))²``, so ``Var ū_1 = 2λ(1 + λ)/S`` up to relative terms of order ``1/n`` and
(relaxation time)/(measured time), whatever ``d``, the dispatch rule or the sampling. This
is a fact about the model, not about the estimator, so it checks the whole chain from the
batch integrals to the reported standard error: a wrong weight, a wrong pooling or a
delta-method slip moves the stated error away from it.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from supermarket.simulation import simulate


def _u1_errors(n, d, lam, steps, reps, time_mode, seed, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = simulate(
            n,
            d,
            lam,
            steps=steps,
            start="fixed-point",
            replications=reps,
            seed=seed,
            progress=False,
            control_variates=False,
            batches=128,
            time_mode=time_mode,
            **kw,
        )
    per = res.per_replication
    means = np.array([r.u_mean[0] for r in per])
    se = np.array([r.u_stderr[0] for r in per])
    rel = np.array([bool(r.u_reliable[0]) for r in per])
    return means, se, rel


def _check(n, d, lam, steps, reps, time_mode, seed, **kw):
    exact = math.sqrt(2.0 * lam * (1.0 + lam) / steps)
    means, se, rel = _u1_errors(n, d, lam, steps, reps, time_mode, seed, **kw)
    # nearly every run knows its error here (the runs span 60 or more relaxation times)
    assert rel.sum() >= 0.9 * reps, rel.sum()
    v = se[rel] ** 2
    # the mean of the stated variances against the exact one, within 4 of its own standard
    # errors (the stated variances scatter on about 8-19 degrees of freedom)
    ratio = float(v.mean()) / exact**2
    sd = float(v.std(ddof=1)) / math.sqrt(v.size) / float(v.mean())
    assert abs(ratio - 1.0) <= 4.0 * sd, (ratio, sd)
    # and the spread of the replication means (known mean λ) against the same exact value:
    # a check of the formula itself, Σ(m − λ)²/exact² ~ χ²_reps
    s2 = float(np.mean((means - lam) ** 2)) / exact**2
    assert abs(s2 - 1.0) <= 4.0 * math.sqrt(2.0 / reps), s2
    return ratio, sd, s2


def test_stated_error_of_u1_matches_its_exact_variance():
    # n = 20, d = 2, λ = 0.7, 5·10^4 steps, 64 replications: measured ratio of mean stated
    # variance to the exact one 0.99 ± 0.02 (seed 11, 256 replications: 0.99 ± 0.016)
    _check(20, 2, 0.7, 50_000, 64, "discrete", seed=11)


@pytest.mark.slow
@pytest.mark.parametrize(
    "n,d,lam,steps,time_mode,kw",
    [
        (20, 2, 0.7, 50_000, "continuous", {}),
        (100, 3, 0.9, 400_000, "discrete", {"replace": False}),
        (50, 2, 0.8, 600_000, "discrete", {"policy": "random"}),  # M/M/1 relaxation 90
        (1000, 2, 0.9, 4_000_000, "discrete", {}),
    ],
)
def test_stated_error_of_u1_matches_its_exact_variance_slow(n, d, lam, steps, time_mode, kw):
    _check(n, d, lam, steps, 128, time_mode, seed=2024, **kw)
