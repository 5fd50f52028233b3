"""Error bars in heavy traffic from independent replications, and the controls kept in short
runs (docs/model.md §9, "Heavy traffic at large n"; §9.1, "Short runs").

Checked against independent facts: the exact identity ``E[u_1] = λ``, the closed-form variance
of the mean of an AR(1) series, and one long reference run (2·10^9 steps, a seed no test uses,
``benchmarks/calibration/heavy_calibration.py``) with its own error.  The coverage over many runs is in
``benchmarks/calibration/heavy_calibration.py`` and the slow test at the end.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from supermarket.cli import main
from supermarket.simulation import batch_errors as be
from supermarket.simulation import plan as pl
from supermarket.simulation import simulate
from supermarket.simulation.estimate import relaxation_time

Z = 4.5


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


# ----------------------------------------------------------------- the plan
def test_plan_chooses_replications_in_heavy_traffic():
    """(10^6, 100, 0.999) with precision: one replication would need 64 relaxation times."""
    p = pl.build_plan(10**6, 100, 0.999, precision=1e-3, start="fixed-point", replications=None)
    tau = relaxation_time(100, 0.999, 10**6)
    assert p.replications == pl.HEAVY_REPLICATIONS == 16
    assert p.workers == min(16, __import__("os").cpu_count() or 1)
    assert p.burn == math.floor(pl.HEAVY_BURN_RELAXATION_TIMES * tau * 10**6 * 1.999)
    assert "16 independent replications" in p.plan_note and "1/μ = 101.9" in p.plan_note
    # a burn-in given by the user is kept
    q = pl.build_plan(10**6, 100, 0.999, precision=1e-3, start="fixed-point", replications=None, burn_in=10**6)
    assert q.replications == 16 and q.burn == 10**6 and "each after the burn-in given" in q.plan_note
    e = pl.build_plan(
        1000, 10, 0.99, precision=0.01, start="perfect", steps=10**5, max_steps=4 * 10**6, replications=None
    )
    assert e.replications == 16 and e.burn == 0 and "each from an exact stationary sample" in e.plan_note


@pytest.mark.parametrize(
    "args, kw",
    [
        ((1000, 2, 0.9), dict(precision=1e-3)),  # blocking needs 2.5e6 events: one replication
        ((10**4, 20, 0.99), dict(precision=1e-3)),
        ((10**6, 100, 0.999), dict(precision=1e-3, replications=1)),  # the user's choice
        ((10**6, 100, 0.999), dict()),  # no precision target: nothing chosen
    ],
)
def test_plan_keeps_one_replication_otherwise(args, kw):
    p = pl.build_plan(*args, **{"replications": None, **kw})
    assert p.replications == 1 and p.plan_note == ""
    assert p.burn == math.floor(p.horizon / 10)


HEAVY = ["--n", "1000", "--d", "10", "--load", "0.99", "--start", "fixed-point", "--seed", "3"]


def test_cli_heavy_precision_run_uses_the_spread_of_replications(tmp_path):
    """64 relaxation times at (1000, 10, 0.99) are 5.1·10^6 events, beyond --max-steps 4e6:
    16 replications, error bars from their spread; E[u_1] = λ exactly."""
    save = tmp_path / "r.json"
    args = ["--steps", "1e5", "--precision", "0.05", "--max-steps", "4e6", "--batches", "64", "--save", str(save)]
    r = CliRunner().invoke(main, ["simulate", *HEAVY, *args])
    assert r.exit_code == 0, r.output
    assert "spread of 16 replications (Student t)" in r.stdout
    assert "start: 16 independent replications" in r.stdout
    out = json.loads(save.read_text())
    assert out["replications"] == 16 and out["error_method"] == "replications"
    assert "16 independent replications" in out["start_note"]
    assert out["burn_in"] == 16 * math.floor(3 * relaxation_time(10, 0.99, 1000) * 1000 * 1.99)
    assert out["u_reliable"][0] and abs(out["u_mean"][0] - 0.99) <= Z * out["u_stderr"][0]
    assert out["precision"]["met"] and out["mean_queue_length"]["reliable"]


def test_spread_of_replications_carries_the_skewness_of_its_mean():
    """Means 1, 1, 1, 4 of equal weight: k_3 = 4/(3·2)·Σc³ = 6.75 (c = −0.75, −0.75, −0.75, 2.25),
    s.e. = 0.75, skewness of the mean 6.75/(4²·0.75³) = 1 (by hand); the half-width widens by
    the enclosing factor of the Edgeworth interval, as a blocking estimate's does."""
    from supermarket import stats

    e = be._estimate([(np.array([x]), np.ones(1)) for x in (1.0, 1.0, 1.0, 4.0)])
    assert e.method == "replications" and e.stderr == pytest.approx(0.75)
    assert e.skewness == pytest.approx(1.0, rel=1e-12)
    z = stats.t_quantile(math.inf)
    assert e.half_width() == pytest.approx(stats.t_quantile(3) * 0.75 * stats.skew_quantile(z, 1.0) / z)
    two = be._estimate([(np.array([x]), np.ones(1)) for x in (1.0, 4.0)])
    assert two.skewness == 0.0  # fewer than 3 replications: no third cumulant


# ----------------------------------------------------------------- short runs keep their controls
# (1000, 2, 0.9): one run of 2·10^9 steps from the fixed point, seed 777000
# (benchmarks/calibration/heavy_calibration.py)
REF = {1: (0.7291300, 3.4e-07), 2: (0.4789515, 2.4e-06)}


def test_short_run_keeps_the_controls_with_the_plain_plateau_blocks():
    """Seed 11 at 2·10^6 steps: the adjusted series of E[u_2], E[u_3] has no plateau of its own
    (the plain one has, at 32 blocks); their error now comes from those blocks, not the plain
    estimate's 300-fold larger one, and the estimates agree with the long reference run."""
    r = simulate(1000, 2, 0.9, steps=2_000_000, seed=11)
    assert any("plain estimate's plateau (32 blocks)" in x and "E[u_2], E[u_3]" in x for x in r.control_notes)
    assert not any("cannot be estimated" in x for x in r.control_notes)
    vr = r.variance_reduction["u_mean"]
    for i in (1, 2):
        assert vr[i] > 100 and r.u_reliable[i]
        ref, ref_se = REF[i]
        assert abs(r.u_mean[i] - ref) <= Z * math.hypot(r.u_stderr[i], ref_se)
    j = r.to_dict()
    assert any("plain estimate's plateau" in x for x in j["control_notes"])


def test_at_block_matches_the_exact_variance_of_an_ar1_mean():
    """AR(1) with φ = 0.5, 4096 values, blocks of 64: E[s.e.²] against the exact variance of the
    mean, Σ_k (1 − |k|/N) φ^|k| σ²/N (σ² = 1/(1 − φ²)), over 400 series."""
    phi, N, M = 0.5, 4096, 400
    rng = np.random.default_rng(29)
    eps = rng.normal(size=(M, N + 200))
    x = np.zeros_like(eps)
    for t in range(1, eps.shape[1]):
        x[:, t] = phi * x[:, t - 1] + eps[:, t]
    x = x[:, 200:]
    k = np.arange(1, N)
    exact = (1.0 + 2.0 * np.sum((1.0 - k / N) * phi**k)) / (1.0 - phi**2) / N
    se2 = np.array([be._at_block(row, 64).stderr ** 2 for row in x])
    assert all(be._at_block(row, 64).reliable for row in x[:3])
    # the s.e.² of 64 blocks has relative s.d. about √(2/63) each
    assert abs(se2.mean() / exact - 1.0) <= Z * se2.std(ddof=1) / exact / math.sqrt(M)
    assert not be._at_block(x[0], 256).reliable  # 16 blocks: fewer than MIN_BLOCKS


# ----------------------------------------------------------------- coverage (slow)
@pytest.mark.slow
def test_heavy_replications_cover_lambda():
    """100 runs of 16 replications at (1000, 10, 0.99), each 10 relaxation times after 3 from the
    fixed point: the 95 % intervals of E[u_1] (exact λ) cover within 3 binomial s.d. of 0.95."""
    tau = relaxation_time(10, 0.99, 1000)
    rate = 1000 * 1.99
    kw = dict(steps=int(10 * tau * rate), burn_in=int(3 * tau * rate), replications=16, workers=1)
    cov = 0
    M = 100
    for k in range(M):
        r = simulate(1000, 10, 0.99, start="fixed-point", seed=5000 + k, **kw)
        assert r.error_method == "replications" and r.u_reliable[0]
        cov += abs(r.u_mean[0] - 0.99) <= r.u_half_width[0]
    assert abs(cov / M - 0.95) <= 3 * math.sqrt(0.95 * 0.05 / M)
