"""Closed forms of docs/model.md §3–6 and §8, checked against independent facts."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supermarket import theory as th


# --------------------------------------------------------------------------- §3 fixed point
@pytest.mark.parametrize("lam", [0.1, 0.5, 0.9, 0.999])
def test_d1_fixed_point_is_geometric(lam):
    pi = th.fixed_point(1, lam, 30)
    np.testing.assert_allclose(pi, lam ** np.arange(1, 31), rtol=1e-12)
    assert th.mean_queue_length(1, lam) == pytest.approx(lam / (1 - lam), rel=1e-12)


def test_known_sum_lambda_09_d2():
    # docs/model.md §3: Σ π(i) = 2.35265 for λ = 0.9, d = 2
    assert round(th.mean_queue_length(2, 0.9), 5) == 2.35265
    assert th.mean_sojourn_time(2, 0.9) == pytest.approx(2.35265 / 0.9, abs=1e-5)


def test_fixed_point_recursion_pi_i_equals_lambda_pi_prev_to_the_d():
    # π(i) = λ π(i-1)^d with π(0) = 1: an identity independent of the closed form
    for d, lam in [(2, 0.9), (3, 0.99), (10, 0.999)]:
        pi = th.fixed_point(d, lam, 6)
        prev = np.concatenate([[1.0], pi[:-1]])
        np.testing.assert_allclose(pi, lam * prev**d, rtol=1e-9)


@pytest.mark.parametrize(
    "d,lam", [(10**12, 1 - 1e-15), (2, 1 - 1e-15), (10**6, 1e-300), (10**12, 0.5), (1, 1 - 1e-15), (7, 1e-12)]
)
def test_fixed_point_extremes_finite(d, lam):
    pi = th.fixed_point(d, lam)
    assert np.all(np.isfinite(pi)) and np.all(pi >= 0) and np.all(pi <= 1)
    assert len(pi) <= th.MAX_FIXED_POINT_LEVELS
    assert np.all(np.diff(pi) <= 0)
    assert math.isfinite(th.mean_queue_length(d, lam))


def test_fixed_point_underflow_is_exact_zero_and_list_stops():
    pi = th.fixed_point(100, 0.999)
    assert pi[-1] < 1e-300 and np.all(pi[:-1] >= 1e-300)
    assert th.fixed_point(10**12, 1 - 1e-15, 5)[2:].tolist() == [0.0, 0.0, 0.0]


lams = st.floats(min_value=1e-6, max_value=1 - 1e-9)
ds = st.integers(min_value=1, max_value=10**6)


@settings(max_examples=150, deadline=None)
@given(d=ds, lam=lams)
def test_pi_non_increasing_in_i(d, lam):
    assert np.all(np.diff(th.fixed_point(d, lam, 20)) <= 0)


@settings(max_examples=150, deadline=None)
@given(d=ds, lam=lams, extra=st.integers(1, 1000))
def test_pi_non_increasing_in_d(d, lam, extra):
    a = th.fixed_point(d, lam, 12)
    b = th.fixed_point(d + extra, lam, 12)
    assert np.all(b <= a * (1 + 1e-12))


@settings(max_examples=150, deadline=None)
@given(d=ds, lam=lams, lam2=lams)
def test_pi_non_decreasing_in_lambda(d, lam, lam2):
    lo, hi = sorted([lam, lam2])
    assert np.all(th.fixed_point(d, lo, 12) <= th.fixed_point(d, hi, 12) * (1 + 1e-12))


# --------------------------------------------------------------------------- §4 k
@pytest.mark.parametrize(
    "d,lam,k",
    [
        (10, "0.9", 1),
        (10, 0.9, 1),
        (10, "0.9000001", 2),
        (10, 0.9000001, 2),
        (8, 1 - 2**-21, 7),
        (8, "0.999999523162841796875", 7),
        (8, "0.9999995231628419", 8),
        (100, 0.999, 2),
        (100, "0.99", 1),
        (100, "0.9900001", 2),
        (2, 0.5, 1),
        (2, 0.75, 2),
        (2, "0.7500001", 3),
        (1000, "0.999", 1),
        (1000, "0.999000000001", 2),
        (10, "0.99999", 5),
        (10, "0.999990000000001", 6),
    ],
)
def test_k_on_both_sides_of_boundaries(d, lam, k):
    assert th.k_lambda_d(d, lam) == k


@pytest.mark.parametrize("d", [2, 3, 5, 7, 10, 31, 1000])
@pytest.mark.parametrize("j", [1, 2, 3, 4, 6])
def test_k_exact_rational_boundaries(d, j):
    on = 1 - Fraction(1, d**j)  # 1/(1-λ) = d^j exactly
    assert th.k_lambda_d(d, on) == j
    assert th.k_lambda_d(d, on + Fraction(1, 10**40)) == j + 1
    assert th.k_lambda_d(d, on - Fraction(1, 10**40)) == j
    assert th.k_report(d, on).possible_max == (j, j + 1)


def test_k_binary_exact_float_boundaries():
    for j in range(1, 50):
        assert th.k_lambda_d(2, 1 - 2.0**-j) == j


def test_k_report_near_boundary_says_k_or_k_plus_one():
    rep = th.k_report(10, "0.9")
    assert rep.on_boundary and rep.possible_max == (1, 2) and "1 or 2" in rep.note
    far = th.k_report(20, 0.99)
    assert not far.near_boundary and far.possible_max == (2,)


def test_k_matches_definition_away_from_boundaries():
    rng = np.random.default_rng(1)
    for _ in range(300):
        d = int(rng.integers(2, 10**4))
        lam = float(1 - 10 ** rng.uniform(-12, -0.1))
        ratio = math.log(1 / (1 - lam)) / math.log(d)
        if abs(ratio - round(ratio)) > 1e-6:
            assert th.k_lambda_d(d, lam) == math.ceil(ratio)


def test_k_requires_d_at_least_2():
    with pytest.raises(ValueError, match="d must be"):
        th.k_lambda_d(1, 0.9)


def test_k_hypothesis_is_largest_k_with_n_pi_k_at_least_one():
    for n, d, lam in [(10**6, 100, 0.999), (10**4, 2, 0.9), (1000, 1, 0.5), (10**9, 3, 0.99)]:
        kh = th.k_hypothesis(n, d, lam)
        pi = th.fixed_point(d, lam, kh + 1)
        assert kh == 0 or n * pi[kh - 1] >= 1 * (1 - 1e-12)
        assert n * pi[kh] < 1


# --------------------------------------------------------------------------- §4 linearised profile
def test_linearised_q_closed_form_and_counts():
    d, lam, n = 20, 0.99, 10_000
    k = th.k_lambda_d(d, lam)
    q = th.linearised_q(d, lam, k)
    a = lam * d
    expected = (1 - lam) * (a ** np.arange(1, k + 1) - 1) / (a - 1)
    np.testing.assert_allclose(q, expected, rtol=1e-12)
    counts = th.predicted_counts(n, d, lam, k)
    assert counts.sum() == pytest.approx(n)
    np.testing.assert_allclose(counts[:k], n * (1 - lam) * a ** np.arange(k), rtol=1e-12)


# --------------------------------------------------------------------------- §5 good set
def _vector_from_counts(counts):
    return np.repeat(np.arange(len(counts)), np.rint(counts).astype(int))


def test_good_set_member_and_failing_clauses():
    n, d, lam = 100_000, 50, 0.999
    k = th.k_lambda_d(d, lam)
    x = _vector_from_counts(th.predicted_counts(n, d, lam, k))
    assert x.size == n and x.max() == k
    rep = th.good_set(x, d=d, lam=lam)
    assert rep.member and rep.failing is None
    y = x.copy()
    y[-1] = k + 1
    assert th.good_set(y, d=d, lam=lam).failing == "a"
    z = np.full(n, k)  # no short queues at all: clause (b) fails at j = 1
    rep = th.good_set(z, d=d, lam=lam)
    assert not rep.member and rep.failing == "b" and "j=1" in rep.clauses[1].detail


def test_good_set_accepts_profile_and_counts():
    n, d, lam = 10_000, 20, 0.99
    x = _vector_from_counts(th.predicted_counts(n, d, lam))
    c = np.array([(x >= i).sum() for i in range(1, x.max() + 1)])
    assert th.good_set(counts=c, n=n, d=d, lam=lam).member
    assert th.good_set(profile=c / n, n=n, d=d, lam=lam).member
    with pytest.raises(ValueError, match="non-increasing"):
        th.good_set(profile=[0.5, 0.7], n=n, d=d, lam=lam)
    with pytest.raises(TypeError, match="exactly one"):
        th.good_set(d=d, lam=lam)
    with pytest.raises(ValueError, match="eps"):
        th.good_set(x, d=d, lam=lam, eps=0.2)


# --------------------------------------------------------------------------- §5 Theorem 1.2
def test_theorem_conditions_can_all_hold():
    rep = th.theorem_1_2(10**20, 10**8, 1 - 1e-12, eps=0.1)
    assert rep.k == 2
    assert rep.applies, [c for c in rep.conditions if not c.holds]
    names = [c.name for c in rep.conditions]
    assert len(names) == len(set(names)) >= 5


def test_theorem_does_not_apply_when_any_condition_fails():
    rep = th.theorem_1_2(10**20, 10**8, 1 - 1e-12, eps=0.2)
    assert not rep.applies and not rep.conditions[0].holds
    rep = th.theorem_1_2(10**6, 100, 0.999)
    assert not rep.applies
    assert any(not c.holds for c in rep.conditions)


# --------------------------------------------------------------------------- §6 mixing, slow mode
def test_mixing_bounds_values():
    mb = th.mixing_bounds(10**6, 100, 0.999)
    assert mb.k == 2
    assert mb.upper_steps == pytest.approx(2 * 100 * 10**6 * math.log(10**6))
    assert mb.lower_steps == pytest.approx(100 * 10**6)
    assert mb.upper_time == pytest.approx(mb.upper_steps / (10**6 * 1.999))


@pytest.mark.parametrize("d,lam", [(2, 0.9), (5, 0.99), (3, 0.999), (20, 0.99), (100, 0.9999), (2, 0.9999)])
def test_slow_mode_matches_dense_eigenvalue(d, lam):
    sm = th.slow_mode(d, lam)
    ev = np.linalg.eigvals(th.slow_mode_matrix(d, lam))
    assert sm.mu == pytest.approx(-ev.real.max(), rel=1e-8)


def test_slow_mode_large_d_matches_closed_approximation():
    # dense eigensolvers lose μ ≈ d^{-(k-1)} here; the closed approximation is independent
    sm = th.slow_mode(10**6, 1 - 1e-12)
    assert sm.k == 2
    assert sm.mu == pytest.approx(sm.mu_approx, rel=1e-5)
    assert sm.mu == pytest.approx(1e-6, rel=1e-4)
    assert math.isfinite(th.slow_mode(10**12, 1 - 1e-15).mu)


def test_slow_mode_matrix_perron_frobenius():
    A = th.slow_mode_matrix(7, 0.999)
    a = 7 * 0.999
    M = A + (1 + a) * np.eye(len(A))
    assert len(A) == th.k_lambda_d(7, 0.999) == 4
    assert np.all(M >= 0)
    # irreducible (docs/model.md §6): every entry of (I + M)^(k-1) is positive
    assert np.all(np.linalg.matrix_power(np.eye(len(M)) + M, len(M) - 1) > 0)


@pytest.mark.parametrize("d,lam", [(7, 0.999), (2, 0.9), (20, 0.99), (10, 0.5), (100, 0.9999)])
def test_slow_mode_matrix_has_the_linearised_profile_as_equilibrium(d, lam):
    # docs/model.md §4 and §6: the linearised profile q_j = (1−λ)((λd)^j − 1)/(λd − 1) (checked
    # against its closed form above) is the rest point of dq/dt = A_k q + (1−λ)e_k; and the
    # slow mode is stable, μ_k > 0.
    k = th.k_lambda_d(d, lam)
    A = th.slow_mode_matrix(d, lam)
    q = th.linearised_q(d, lam, k)
    e = np.zeros(k)
    e[-1] = 1.0
    np.testing.assert_allclose(A @ q + (1 - lam) * e, 0.0, atol=1e-12 * max(1.0, np.abs(A).max()))
    assert th.slow_mode(d, lam).mu > 0


# --------------------------------------------------------------------------- §8 regime
def test_regime_002_quantities():
    n, d, lam = 10**4, 10, 0.95
    r = th.regime_002(n, d, lam)
    assert r.d_over_sqrt_n == pytest.approx(0.1)
    assert r.kappa == pytest.approx(d * lam**d)
    assert math.sqrt(n) * r.c_n**d == pytest.approx(1.0)  # √n c_n^{d_n} = 1
    assert r.zeta == pytest.approx(math.sqrt(n) * (r.c_n - lam))
    assert r.regime == "a"
    assert th.regime_002(10**4, 100, 0.99).regime == "b"
    assert th.regime_002(10**4, 10**4, 0.99).regime == "c"
    assert "warning" in th.regime_002(10**4, 10, 0.95).note  # d(1-λ) = 0.5


# --------------------------------------------------------------------------- design
@pytest.mark.parametrize("lam,K", [("0.999", 2), ("0.9", 1), ("0.99", 3), ("0.999999", 2), (0.9, 1), ("0.5", 5)])
def test_design_is_minimal(lam, K):
    rep = th.design(lam, K)
    assert th.k_lambda_d(rep.d, lam) <= K
    assert rep.d == 2 or th.k_lambda_d(rep.d - 1, lam) > K
    assert sum(rep.share_by_length) == pytest.approx(1.0)


@settings(max_examples=100, deadline=None)
@given(lam=st.floats(0.01, 1 - 1e-9), K=st.integers(1, 8))
def test_design_minimal_property(lam, K):
    rep = th.design(lam, K)
    assert th.k_lambda_d(rep.d, lam) <= K
    assert rep.d == 2 or th.k_lambda_d(rep.d - 1, lam) > K


def test_design_boundary_is_exact():
    # 1/(1-λ) = 10 = d^1 exactly: d = 10 suffices for K = 1, d = 9 does not
    assert th.design("0.9", 1).d == 10
    assert th.design("0.9000001", 1).d == 11


def test_summary_d1_has_no_k():
    rep = th.summary(100, 1, 0.5)
    assert rep["k"] is None and rep["theorem_1_2"] is None
    assert rep["fixed_point"][0] == 0.5


# --------------------------------------------------------------------------- regime of the linearisation
def test_linearisation_outside_its_regime_is_not_a_number():
    # n = 1000, d = 2, λ = 0.9: k = 4, q̃_4 = 0.1 (1.8^4 − 1)/0.8 = 1.1872 > 1, so n(1 − q̃_4) = −187.2
    q4 = 0.1 * (1.8**4 - 1) / 0.8
    assert th.predicted_counts(1000, 2, 0.9)[-1] == pytest.approx(1000 * (1 - q4))
    assert not th.linearisation_valid(2, 0.9)
    rep = th.summary(1000, 2, 0.9)
    assert rep["linearisation"]["valid"] is False
    assert rep["linearisation"]["q_k"] == pytest.approx(q4)
    assert rep["predicted_counts"][-1] is None and rep["linearised_q"][-1] is None
    # the entries inside the regime are kept: n(1−λ)(λd)^j, j < k
    assert rep["predicted_counts"][:3] == pytest.approx([100, 180, 324])
    assert all(c is None or c >= 0 for c in rep["predicted_counts"])


def test_linearisation_inside_its_regime_is_kept():
    assert th.linearisation_valid(20, 0.99)
    rep = th.summary(10_000, 20, 0.99)
    assert rep["linearisation"]["valid"] is True
    assert None not in rep["predicted_counts"]
    assert sum(rep["predicted_counts"]) == pytest.approx(10_000)


def test_design_never_reports_a_negative_share():
    # λ = 0.9, K = 3: d = 3 (3^3 >= 10 > 2^3), k = 3, q̃_3 = 0.1 (1 + 2.7 + 7.29) = 1.099 > 1
    rep = th.design(0.9, 3)
    assert (rep.d, rep.k) == (3, 3)
    assert not rep.linearisation_valid and "q̃_k = 1.099" in rep.note
    assert math.isnan(rep.share_by_length[-1])
    assert rep.share_by_length[:3] == pytest.approx([0.1, 0.27, 0.729])
    ok = th.design(0.9, 1)
    assert ok.linearisation_valid and ok.note == "" and ok.share_by_length == pytest.approx((0.1, 0.9))


def test_design_is_a_bisection_not_a_walk():
    # a float load stands for 1 − 10^-16 (as typed) and 1 − 2^-53 (its binary value): the
    # least d with k <= 1 is 2^53 (the smaller k is taken on such a boundary); this used to
    # walk down 10^15 values of d one at a time
    rep = th.design(1 - 2.0**-53, 1)
    assert rep.d == 2**53 and rep.k == 1
    for lam, K in [("0.9", 1), ("0.9", 2), ("0.99", 2), ("0.999999", 5), ("0.9999999999", 1)]:
        d = th.design(lam, K).d
        assert th.k_lambda_d(d, lam) <= K and (d == 2 or th.k_lambda_d(d - 1, lam) > K)


def test_good_set_bounds_exact_integer_edges():
    """Edges that are integers come out exactly (exact λ = 99/100, not the float 0.99)."""
    lo, hi = th.good_set_bounds(100_000, 5, 0.99, 0.1, 3)
    assert lo.tolist() == [500.0, 2475.0, 12251.25] and hi.tolist() == [1500.0, 7425.0, 36753.75]
    assert lo.dtype == float
    # a string load is read exactly too
    lo2, _ = th.good_set_bounds(100_000, 5, "0.99", 0.1, 3)
    assert lo2.tolist() == lo.tolist()
    # past the float range: inf, no OverflowError
    lo3, hi3 = th.good_set_bounds(10, 10**6, 0.5, 0.1, 60)
    assert math.isinf(hi3[-1]) and math.isinf(lo3[-1]) and np.isfinite(lo3[0])


def test_result_protocol_theory():
    """Every result of supermarket.theory: strict-JSON to_dict, a tidy DataFrame, a summary text."""
    import json

    import pandas as pd

    x = [0] * 100 + [1] * 1900 + [2] * 8000
    results = [
        th.k_report(20, 0.99),
        th.good_set(x, d=20, lam=0.99),
        th.good_set([3] + x[1:], d=20, lam=0.99),
        th.theorem_1_2(10_000, 20, 0.99),
        th.mixing_bounds(10_000, 20, 0.99),
        th.slow_mode(20, 0.99),
        th.regime_002(10_000, 20, 0.99),
        th.design(0.9, 3, 100),
        th.theory_report(10_000, 20, 0.99),
        th.theory_report(100, 1, 0.5),
    ]
    for r in results:
        json.dumps(r.to_dict(), allow_nan=False)
        f = r.to_frame()
        assert isinstance(f, pd.DataFrame) and len(f) > 0, type(r)
        assert isinstance(r.summary(), str) and r.summary(), type(r)
    gs_bad = results[2]
    assert "not a member (clause (a) fails)" in gs_bad.summary()
    assert gs_bad.to_frame().set_index("clause").loc["a", "holds"] == False  # noqa: E712
    assert "Theorem 1.2 does not apply" in results[3].summary()
    mb = results[4].to_frame().set_index("bound")
    assert mb.loc["upper", "steps"] == results[4].upper_steps and mb.loc["lower", "time"] == results[4].lower_time
    de = results[7]
    assert de.d == 3 and "d = 2 would give 4" in de.summary()
    assert de.to_frame()["queues"].iloc[0] == pytest.approx(10.0)
    assert "n" not in de.to_dict() and de.to_dict()["share_by_length"][-1] is None  # NaN: outside the regime
    rep = results[8]
    fr = rep.to_frame()
    assert fr["pi"].tolist()[:2] == rep.to_dict()["fixed_point"][:2]
    assert fr["predicted_queues_of_length_i_minus_1"].tolist()[:3] == pytest.approx([100.0, 1980.0, 7920.0])


def test_cli_theory_prints_the_report_summary():
    from click.testing import CliRunner

    from supermarket.cli import main

    r = CliRunner().invoke(main, ["theory", "--n", "1e4", "--d", "20", "--load", "0.99"])
    assert r.exit_code == 0 and r.stdout.rstrip("\n") == th.theory_report(10_000, 20, "0.99").summary()


def test_design_says_how_many_queues_the_mean_field_puts_above_K():
    # README's example: d = 32 at λ = 0.999 gives k = 2, but (d^3 − 1)/(d − 1) = 1057, so the
    # mean field leaves π(3) = 0.999^1057 ≈ 0.347 of the queues above K = 2 (near a boundary).
    rep = th.design("0.999", 2, 1000)
    assert rep.d == 32
    assert rep.share_above_max_queue == pytest.approx(0.999**1057, rel=1e-12)
    assert rep.hypothesis_max == 3  # n·π(3) ≈ 347 >= 1 > n·π(4) = 1000·0.999^33825
    assert "2 or 3" in rep.k_note
    text = rep.summary()
    assert "0.347313" in text and "347.313 of n = 1000" in text and "2 or 3" in text
    assert th.design(0.9, 2).to_dict()["share_above_max_queue"] == pytest.approx(0.9**21, rel=1e-12)
    assert th.design(0.9, 2).to_dict()["hypothesis_max"] is None
    # K far above k: π(K+1) underflows to 0 without building K levels
    assert th.design(0.5, 10**18).share_above_max_queue == 0.0
    assert "(d = 1 has no bounded maximum)" in th.design(0.5, 1).summary()


def test_k_report_has_a_note_at_light_load():
    # log_2(1/(1 − 0.03)) = 0.0439: near the boundary d^0 = 1, k = 1
    r = th.k_report(2, "0.03")
    assert r.k == 1 and r.near_boundary and r.note.startswith("1/(1-λ) is just above 1")


def test_mixing_bounds_say_when_the_orders_cross():
    # upper/lower = k log n: below 1 only for k log n < 1 (n = 2, k = 1), where the text says so
    assert th.mixing_bounds(2, 2, 0.5).upper_steps == pytest.approx(2 * math.log(2))
    assert "below the lower one" in th.mixing_bounds(2, 2, 0.5).summary()
    assert "below the lower one" not in th.mixing_bounds(3, 2, 0.5).summary()  # log 3 > 1
