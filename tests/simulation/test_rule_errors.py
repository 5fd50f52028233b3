"""Error bars of the dispatch rules jsq and jiq (docs/model.md §9, "The slowest time scale"), and
waiting-time quantiles on the atom ``W = 0`` (docs/model.md §10).

Independent facts: the exact relaxation time and the exact stationary law of the tiny chains
(the generator and solver of ``supermarket.stationary``, not the simulation), the exact
variance ``2λ(1 + λ)/S`` of ``ū_1`` over ``S`` steps (docs/model.md §9), and ``E[u_1] = λ``.
The long coverage study is ``benchmarks/calibration/rules_calibration.py``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse.linalg as sla

from supermarket.response import from_tails
from supermarket.simulation import simulate
from supermarket.simulation.control import rule_relaxation_time
from supermarket.simulation.estimate import ATOM_Z, _on_atom
from supermarket.stationary import profile as stationary

LAM = 0.9


def _exact_relaxation(policy, n, lam, cap):
    """1/(spectral gap) of the truncated generator: the slowest relaxation time of the chain."""
    Q = stationary._build(n, 2, lam, True, cap, policy)[0]
    ev = sla.eigs(Q.T.tocsc(), k=3, sigma=1e-3, which="LM", return_eigenvectors=False)
    return 1.0 / min(-z.real for z in ev if abs(z) > 1e-9)


@pytest.mark.parametrize(
    "policy, n, lam, cap",
    [("jsq", 2, 0.9, 80), ("jiq", 2, 0.9, 80), ("jsq", 3, 0.5, 18), ("jiq", 3, 0.5, 18), ("jiq", 4, 0.5, 12)],
)
def test_rule_relaxation_time_covers_the_exact_one(policy, n, lam, cap):
    exact = _exact_relaxation(policy, n, lam, cap)
    t = rule_relaxation_time(policy, lam, n)
    assert exact <= t <= 3.0 * exact, (exact, t)


def test_rule_relaxation_time_refuses_other_rules():
    with pytest.raises(ValueError, match="policy"):
        rule_relaxation_time("jsq-d", 0.9, 10)


@pytest.fixture(scope="module")
def large():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return {p: simulate(1000, 2, LAM, policy=p, steps=10**7, seed=3) for p in ("jsq", "jiq")}


@pytest.mark.parametrize("policy", ["jsq", "jiq"])
def test_large_n_mean_queue_length_has_a_right_sized_error_bar(large, policy):
    """n = 1000, λ = 0.9, 10^7 events: every queue has length <= 1 nearly always (E[u_2] ~ 1e-4),
    and the mean queue length fluctuates as u_1 does.  Before, 'too short to estimate'."""
    r = large[policy]
    exact_se = math.sqrt(2 * LAM * (1 + LAM) / r.steps)
    u1, q = r.levels[0], r.queue_length
    assert u1.reliable and q.reliable
    assert abs(u1.stderr / exact_se - 1.0) < 0.25  # s.e. estimated on ~100 degrees of freedom: ±7 %
    assert abs(u1.value - LAM) <= 4 * exact_se
    # Q̄ = ū_1 + Σ_{i>=2} ū_i, the rest with a s.e. under 5 % of u_1's at this load
    assert 0.75 < q.stderr / exact_se < 1.35
    assert math.isfinite(r.levels[1].stderr) and r.levels[1].stderr < 0.1 * exact_se


@pytest.fixture(scope="module")
def tiny():
    out = {}
    for p, n, lam in (("jsq", 3, 0.9), ("jiq", 3, 0.7)):
        ex = stationary.solve(n, 2, lam, policy=p, tol=1e-8).mean_queue_length  # truncation ~1e-6
        out[p] = (lam, ex, simulate(n, 2, lam, policy=p, steps=10**6, seed=5))
    return out


@pytest.mark.parametrize("policy", ["jsq", "jiq"])
def test_tiny_n_against_the_exact_law(tiny, policy):
    lam, exact, r = tiny[policy]
    q, u1 = r.queue_length, r.levels[0]
    assert q.reliable and u1.reliable
    assert abs(q.value - exact) <= 4 * q.stderr, (q.value, exact, q.stderr)
    assert abs(u1.value - lam) <= 4 * u1.stderr


def test_atom_quantiles_exact_only_with_a_margin():
    res = from_tails(np.array([0.3, 0.1]), stderr_of=lambda g: 0.01)  # P(W = 0) = 0.7
    assert res.waiting.quantiles[0.5] == 0.0 and res.waiting.quantiles[0.9] > 0
    sure = _on_atom(res, 0.01)  # 0.7 − 0.5 = 20 s.e.
    assert sure.waiting.stderr["quantiles"][0.5] == 0.0
    assert sure.waiting.stderr["quantiles"][0.9] == res.waiting.stderr["quantiles"][0.9]
    assert sure.notes == res.notes
    assert "p50 0 (on the atom)" in sure.summary() and "± 0," not in sure.summary()
    unsure = _on_atom(res, 0.2 / (ATOM_Z - 0.5))  # the margin is under ATOM_Z standard errors
    assert math.isnan(unsure.waiting.stderr["quantiles"][0.5])
    assert any("cannot place" in note for note in unsure.notes)
    assert math.isnan(_on_atom(res, math.nan).waiting.stderr["quantiles"][0.5])


def test_atom_quantiles_of_a_long_run_are_exact(large):
    w = large["jsq"].response.waiting
    assert w.atom_at_zero > 0.999
    assert all(w.stderr["quantiles"][q] == 0.0 for q in w.quantiles if w.quantiles[q] == 0.0)
    assert "± 0," not in large["jsq"].response.summary()


def test_atom_quantiles_of_a_short_run_have_no_error_bar():
    """A run too short to know its errors said 'p50 0 ± 0' beside means without error bars."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        r = simulate(1000, 2, LAM, policy="jsq", steps=10**5, seed=3)
    assert not r.queue_length.reliable
    w = r.response.waiting
    assert w.quantiles[0.5] == 0.0
    assert all(math.isnan(w.stderr["quantiles"][q]) for q in w.quantiles)
    assert "± 0" not in r.response.summary()


def _coverage(runs, truth, se_truth=0.0):
    """(share of the reliable runs whose 95 % interval holds ``truth``, number reliable)."""
    rel = [e for e in runs if e.reliable]
    hit = [abs(e.value - truth) <= math.hypot(e.half_width, 1.96 * se_truth) for e in rel]
    return (sum(hit) / len(rel) if rel else math.nan), len(rel)


@pytest.mark.slow
@pytest.mark.parametrize("policy, n, lam, truth", [("jsq", 3, 0.9, "exact"), ("jsq", 1000, 0.9, "long run")])
def test_coverage_of_the_mean_queue_length(policy, n, lam, truth):
    """95 % intervals of the mean queue length over 100 seeds (benchmarks/calibration/rules_calibration.py has
    the full study): within 3 binomial standard errors of 0.95, nearly every run reliable."""
    seeds = 100
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if truth == "exact":
            x, sx, steps = stationary.solve(n, 2, lam, policy=policy, tol=1e-10).mean_queue_length, 0.0, 10**6
        else:
            ref = simulate(n, 2, lam, policy=policy, steps=10**9, seed=999_999).queue_length
            x, sx, steps = ref.value, ref.stderr, 10**7
        runs = [simulate(n, 2, lam, policy=policy, steps=steps, seed=1000 + s).queue_length for s in range(seeds)]
    cov, rel = _coverage(runs, x, sx)
    assert rel >= 0.95 * seeds
    assert abs(cov - 0.95) <= 3 * math.sqrt(0.95 * 0.05 / rel), cov
