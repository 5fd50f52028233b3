"""Tests of the mean-field theory (docs/model.md §3 and §8) against independent facts.

Independent facts used: the closed-form fixed point; the exact identity
d/dt Σ u_i = λ − u_1; the d = 1 independent M/M/1 covariance; the exact stationary law of
the profile chain for tiny n (solved here as a sparse linear system); exact binomials;
closed-form pieces of the d = ∞ water-filling ODE; rmftool when installed.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from hypothesis import given, settings
from hypothesis import strategies as st

from supermarket import meanfield as mf
from supermarket import theory as th
from supermarket.simulation import simulate


# --------------------------------------------------------------------------- ODE
def test_ode_long_time_limit_equals_closed_form():
    # (1, 0.75) needs 105 levels: the automatic method switches to BDF with the sparse Jacobian
    for d, lam, start, T in [
        (2, 0.9, "empty", 600),
        (3, 0.7, "customers:5", 600),
        (1, 0.5, "empty", 600),
        (1, 0.75, "empty", 1500),
    ]:
        sol = mf.solve_meanfield(d, lam, T=T, start=start, t_eval=[0.0, T])
        assert sol.success
        pi = th.fixed_point(d, lam, sol.levels)
        assert np.max(np.abs(sol.final - pi)) < 1e-10, (d, lam, start)


@pytest.mark.parametrize("method", ["Radau", "BDF", "LSODA"])
def test_mass_balance_along_solution(method):
    # d/dt Σ_i u_i = λ − u_1 (every arrival adds, every departure removes one customer)
    lam = 0.9
    t = np.linspace(0.0, 20.0, 4001)
    sol = mf.solve_meanfield(2, lam, T=20.0, start="customers:4", t_eval=t, method=method)
    total = sol.u.sum(axis=1)
    rhs = lam - sol.u[:, 0]
    # trapezoid integral of the right-hand side, error O(h^2) ~ 1e-7 here
    integral = np.concatenate(([0.0], np.cumsum(0.5 * (rhs[1:] + rhs[:-1]) * np.diff(t))))
    assert np.max(np.abs(total - total[0] - integral)) < 2e-6
    assert sol.top_level_max <= sol.tol


def test_automatic_levels_grow_for_long_queues():
    # every queue starts with 30 customers: levels above 30 fill transiently
    sol = mf.solve_meanfield(2, 0.9, T=5.0, start="customers:30")
    assert sol.levels > 31
    assert sol.top_level_max <= sol.tol
    assert np.all(np.diff(sol.u, axis=1) <= 1e-12)  # profile stays non-increasing


def test_empty_start_is_monotone_and_below_fixed_point():
    sol = mf.solve_meanfield(3, 0.95, T=50.0)
    pi = th.fixed_point(3, 0.95, sol.levels)
    assert np.all(sol.u <= pi + 1e-10)
    assert np.all(np.diff(sol.u, axis=0) >= -1e-10)


def test_extreme_parameters_finite_and_sensible():
    lam = 1 - 1e-9
    sol = mf.solve_meanfield(10**6, lam, T=100.0)
    assert sol.success and np.all(np.isfinite(sol.u))
    assert np.all((sol.u >= 0) & (sol.u <= 1))
    assert np.all(np.diff(sol.u, axis=1) <= 1e-12)
    pi = th.fixed_point(10**6, lam, sol.levels)
    # approaches the fixed point from below (monotone from empty)
    assert np.all(sol.final <= pi + 1e-12)
    assert sol.final[0] > 0.999
    # the fixed point is the exact root of the drift there too
    newton = mf.fixed_point_newton(10**6, lam, levels=sol.levels)
    assert np.max(np.abs(newton - pi)) < 1e-10
    r = mf.refined_mean_field(10**6, lam)
    assert np.all(np.isfinite(r.V)) and abs(r.V[0]) < 1e-6 * max(1.0, np.abs(r.V).max())
    c = mf.lna(10**6, lam)
    assert np.all(np.isfinite(c.covariance))
    assert np.all(np.linalg.eigvalsh(c.covariance) > -1e-9 * np.abs(c.covariance).max())


def test_d1_near_one_refused_with_levels_message():
    # the fixed point λ^i would need ~3e10 levels
    with pytest.raises(ValueError, match="levels"):
        mf.refined_mean_field(1, 1 - 1e-9)
    with pytest.raises(ValueError, match="levels"):
        mf.solve_meanfield(1, 1 - 1e-9, T=1.0, start="fixed-point")


def test_d1_transient_is_the_mm1_tail_near_lambda_one():
    # d = 1: u_i(t) = P(X(t) >= i) for an M/M/1 queue from 0 (Kolmogorov forward equation),
    # computed here from a truncated generator by a matrix exponential; a finite run needs
    # few levels even at 1 − λ = 1e-9 (the levels grow with the run, not with the fixed point)
    from scipy.linalg import expm

    lam, T, K = 1 - 1e-9, 30.0, 200
    sol = mf.solve_meanfield(1, lam, T=T, t_eval=[0.0, 10.0, T])
    G = np.diag(np.full(K, lam), 1) + np.diag(np.ones(K), -1)
    G -= np.diag(G.sum(axis=1))
    for k, t in enumerate(sol.t):
        p = expm(G * t)[0]
        tail = p[::-1].cumsum()[::-1][1:]  # P(X >= i), i = 1..K
        m = sol.levels
        assert np.max(np.abs(sol.u[k] - tail[:m])) < 1e-9
        assert tail[m:].max(initial=0.0) < 1e-12


def test_replace_false_limit_is_the_centre():
    n, d, lam = 30, 4, 0.9
    x = mf.near_equilibrium_centre(n, d, lam, replace=False)
    sol = mf.solve_meanfield(d, lam, T=400.0, n=n, replace=False, levels=x.size + 2, t_eval=[0, 400.0])
    assert np.max(np.abs(sol.final[: x.size] - x)) < 1e-10


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "bad, level",
    [
        ([0.5, 0.7], "level 2"),
        ([1.0, 0.5, 0.6, 0.1], "level 3"),
        ([0.5, 1.2], "level 2"),
        ([-0.1], "level 1"),
        ([0.5, float("nan")], "level 2"),
    ],
)
def test_bad_start_profile_names_first_offending_level(bad, level):
    with pytest.raises(ValueError, match=level):
        mf.solve_meanfield(2, 0.9, T=1.0, start=np.array(bad))


@pytest.mark.parametrize("T", [0, -1.0, float("inf"), float("nan")])
def test_bad_time(T):
    with pytest.raises(ValueError, match="T"):
        mf.solve_meanfield(2, 0.9, T=T)


def test_bad_params():
    with pytest.raises(TypeError, match="d"):
        mf.solve_meanfield(2.5, 0.9, T=1.0)
    with pytest.raises(ValueError, match="load"):
        mf.solve_meanfield(2, 0.0, T=1.0)
    with pytest.raises(ValueError, match="load"):
        mf.refined_mean_field(2, 1.0)
    with pytest.raises(ValueError, match="method"):
        mf.solve_meanfield(2, 0.9, T=1.0, method="RK45")
    with pytest.raises(ValueError, match="n"):
        mf.lna(2, 0.9, at="centre")
    with pytest.raises(ValueError, match="d must be <= n"):
        mf.near_equilibrium_centre(3, 5, 0.9, replace=False)


# --------------------------------------------------------------------------- fixed points
@pytest.mark.parametrize("d, lam", [(1, 0.6), (2, 0.9), (2, 0.99), (5, 0.999), (100, 1 - 1e-6)])
def test_newton_equals_closed_form(d, lam):
    x = mf.fixed_point_newton(d, lam)
    pi = th.fixed_point(d, lam, x.size)
    # the drift's Jacobian has condition number ~ 1/(1−λ): round-off allows ~1e-16/(1−λ)
    assert np.max(np.abs(x - pi)) < max(1e-12, 1e-15 / (1 - lam))


def test_known_values_sum_pi_and_sum_V():
    r = mf.refined_mean_field(2, 0.9)
    assert r.pi.sum() == pytest.approx(2.35265, abs=5e-6)
    assert r.V.sum() == pytest.approx(3.986, abs=1e-3)
    assert r.mean_queue_length(100) == pytest.approx(r.pi.sum() + r.V.sum() / 100)
    assert abs(r.V[0]) < 1e-12  # E[u_1] = λ exactly for every n


def test_sample_prob_without_replacement_is_the_binomial_ratio():
    n, d = 50, 7
    for c in range(n + 1):
        p = mf.sample_prob(np.array([c / n]), d, n=n, replace=False)[0]
        assert p == pytest.approx(math.comb(c, d) / math.comb(n, d), rel=1e-12, abs=1e-300)
    # derivatives against central differences at non-integer points
    u = np.array([0.4, 0.73, 0.95])
    h = 1e-6
    for order in (1, 2):
        num = (
            mf.sample_prob(u + h, d, n=n, replace=False, order=order - 1)
            - mf.sample_prob(u - h, d, n=n, replace=False, order=order - 1)
        ) / (2 * h)
        ana = mf.sample_prob(u, d, n=n, replace=False, order=order)
        assert np.allclose(num, ana, rtol=1e-6)


def test_sample_prob_refuses_bad_order_and_n_before_any_work():
    # the docstring's promise: ValueError naming the parameter (it used to be a TypeError
    # from int(None), or a silent answer for order 3 and for d > n without replacement)
    with pytest.raises(ValueError, match="order"):
        mf.sample_prob([0.5], 2, order=3)
    with pytest.raises(ValueError, match="n "):
        mf.sample_prob([0.5], 2, replace=False)
    with pytest.raises(ValueError, match="d must be in"):
        mf.sample_prob([0.5], 3, n=2, replace=False)
    # d = n is the edge that stays allowed: C(nu, n)/C(n, n) is 1 at u = 1, 0 below
    assert mf.sample_prob([1.0, 0.5], 2, n=2, replace=False).tolist() == [1.0, 0.0]


def test_centre_with_replacement_is_pi_and_without_is_newton_root():
    x = mf.near_equilibrium_centre(1000, 3, 0.95)
    assert np.allclose(x, th.fixed_point(3, 0.95, x.size), rtol=1e-13, atol=0)
    n, d, lam = 200, 10, 0.98
    xn = mf.near_equilibrium_centre(n, d, lam, replace=False)
    root = mf.fixed_point_newton(d, lam, levels=xn.size, n=n, replace=False)
    assert np.max(np.abs(root - xn)) < 1e-12
    # without replacement there are fewer collisions: x^n_2 = λ P_n(λ) < λ^{d+1}
    assert xn[1] < lam ** (d + 1)
    # and as n grows P_n -> x^d
    big = mf.near_equilibrium_centre(10**7, d, lam, replace=False, levels=3)
    assert np.allclose(big, th.fixed_point(d, lam, 3), rtol=1e-4)


# --------------------------------------------------------------------------- d = ∞
def test_dinf_first_piece_is_the_closed_form():
    # every queue has 3 customers: levels 1, 2 stay full, u_3 falls at rate 1−λ until it
    # reaches 1−λ at t = λ/(1−λ); then level 2 starts to empty
    lam = 0.9
    t = np.linspace(0, 8.9, 90)
    sol = mf.solve_dinf(lam, T=8.9, start="customers:3", t_eval=t)
    assert np.allclose(sol.u[:, 2], 1 - (1 - lam) * t, atol=1e-12)
    assert np.all(sol.u[:, :2] == 1.0)
    full = mf.solve_dinf(lam, T=30.0, start="customers:3")
    assert full.events[0][0] == pytest.approx(lam / (1 - lam), abs=1e-9)
    assert full.events[0][1] == 1


def test_dinf_fixed_point_and_mass_balance():
    lam = 0.8
    start = np.array([1.0, 0.7, 0.2])
    far = mf.solve_dinf(lam, T=60.0, start=start, t_eval=[0.0, 60.0])
    assert np.allclose(far.final, [lam, 0, 0, 0][: far.levels], atol=1e-10)
    t = np.linspace(0, 30, 1501)
    sol = mf.solve_dinf(lam, T=30.0, start=start, t_eval=t)
    total = sol.u.sum(axis=1)
    rhs = lam - sol.u[:, 0]
    integral = np.concatenate(([0.0], np.cumsum(0.5 * (rhs[1:] + rhs[:-1]) * np.diff(t))))
    assert np.max(np.abs(total - total[0] - integral)) < 1e-5


def test_finite_d_approaches_dinf():
    lam = 0.9
    t = np.array([0.0, 1.0, 3.0, 9.5, 12.0, 20.0, 25.0])
    ref = mf.solve_dinf(lam, T=25.0, start="customers:3", t_eval=t)
    errs = []
    for d in (10, 100, 1000, 10**4):
        sol = mf.solve_meanfield(d, lam, T=25.0, start="customers:3", t_eval=t, rtol=1e-8, atol=1e-12)
        u = np.zeros_like(sol.u)
        k = min(ref.levels, sol.levels)
        u[:, :k] = sol.u[:, :k]
        err = max(np.abs(u[:, :k] - ref.u[:, :k]).max(), np.abs(sol.u[:, k:]).max(initial=0.0))
        errs.append(err)
    assert all(b < a for a, b in itertools.pairwise(errs)), errs
    assert errs[-1] < 2e-3


def test_solve_meanfield_dispatches_inf():
    a = mf.solve_meanfield("inf", 0.9, T=5.0, start="customers:2")
    b = mf.solve_dinf(0.9, T=5.0, start="customers:2")
    assert np.array_equal(a.u, b.u)


# --------------------------------------------------------------------------- LNA
@pytest.mark.parametrize("lam", [0.5, 0.8])
def test_lna_d1_is_the_independent_mm1_covariance(lam):
    # d = 1: queues are independent M/M/1, P(X >= i) = λ^i, and
    # Cov(√n u_i, √n u_j) = λ^{max(i,j)} − λ^{i+j}
    res = mf.lna(1, lam)
    i = np.arange(1, res.levels + 1)
    exact = lam ** np.maximum.outer(i, i) - lam ** np.add.outer(i, i)
    assert np.max(np.abs(res.covariance - exact)) < 1e-11


def test_lna_centre_with_replacement_equals_fixed_point():
    a = mf.lna(3, 0.9, n=500, at="centre")
    b = mf.lna(3, 0.9)
    assert np.allclose(a.covariance, b.covariance, rtol=1e-12, atol=1e-15)
    c = mf.lna(3, 0.9, n=50, at="centre", replace=False)
    assert c.covariance.shape == (c.levels, c.levels)
    assert np.all(np.linalg.eigvalsh(c.covariance) > -1e-12)


# --------------------------------------------------------------------------- exact small n
def _exact_profile_mean(n, d, lam, K):
    """E[u_i] of the stationary profile chain (docs/model.md §2), queues truncated at length K."""
    states = list(itertools.combinations_with_replacement(range(K + 1), n))
    index = {s: k for k, s in enumerate(states)}
    rows, cols, vals = [], [], []
    for k, s in enumerate(states):
        lengths = np.array(s)
        u = np.array([(lengths >= i).sum() / n for i in range(K + 2)])  # u_0 .. u_{K+1}
        P = u**d
        for ell in range(K):  # arrival joins a queue of length ell (lost beyond K)
            rate = n * lam * (P[ell] - P[ell + 1])
            if rate > 0:
                new = list(s)
                new[new.index(ell)] = ell + 1
                rows.append(k), cols.append(index[tuple(sorted(new))]), vals.append(rate)
        for ell in range(1, K + 1):
            rate = n * (u[ell] - u[ell + 1])
            if rate > 0:
                new = list(s)
                new[new.index(ell)] = ell - 1
                rows.append(k), cols.append(index[tuple(sorted(new))]), vals.append(rate)
    m = len(states)
    Q = sp.csr_matrix((vals, (rows, cols)), shape=(m, m))
    Q = Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())
    A = Q.T.tolil()
    A[0, :] = np.ones(m)
    b = np.zeros(m)
    b[0] = 1.0
    p = spla.spsolve(A.tocsc(), b)
    U = np.array([[(np.array(s) >= i).sum() / n for i in range(1, K + 1)] for s in states])
    return p @ U


def test_refined_mean_field_against_exact_small_n():
    # queues truncated at K = 11: changing K to 13 moves E[u_i] by < 1e-6 here, far below
    # the O(1/n^2) ~ 1e-2 differences compared
    d, lam, K = 2, 0.5, 11
    r = mf.refined_mean_field(d, lam, levels=16)
    errs_mf, errs_rmf = [], []
    for n in (3, 4, 5):
        exact = _exact_profile_mean(n, d, lam, K)
        assert exact[0] == pytest.approx(lam, abs=1e-6)  # E[u_1] = λ exactly (up to truncation)
        errs_mf.append(np.abs(exact - r.pi[:K]).sum())
        errs_rmf.append(np.abs(exact - r.mean(n)[:K]).sum())
    # the plain mean field is off by O(1/n), the refined one by O(1/n^2)
    for n, e1, e2 in zip((3, 4, 5), errs_mf, errs_rmf):
        assert e2 < 0.35 * e1, (n, e1, e2)
    ratio_mf = errs_mf[0] / errs_mf[-1]
    ratio_rmf = errs_rmf[0] / errs_rmf[-1]
    assert ratio_mf == pytest.approx(5 / 3, rel=0.25)
    assert ratio_rmf > 2.0  # ~ (5/3)^2 = 2.78


def test_refined_mean_field_matches_rmftool():
    # rmftool (Gast's refined mean field tool) is in the test extra: a missing install fails
    # here instead of skipping, so the comparison with a second implementation always runs
    import rmftool as rmf

    L, lam, d = 8, 0.7, 2
    ddpp = rmf.DDPP()
    for i in range(L):
        e = np.zeros(L)
        e[i] = 1
        if i == 0:
            ddpp.add_transition(e, lambda x: lam * (1 - x[0] ** d))
        else:
            ddpp.add_transition(e, lambda x, i=i: lam * (x[i - 1] ** d - x[i] ** d))
        if i < L - 1:
            ddpp.add_transition(-e, lambda x, i=i: x[i] - x[i + 1])
        else:
            ddpp.add_transition(-e, lambda x, i=i: x[i])
    ddpp.set_initial_state(np.zeros(L))
    pi_r, V_r, _ = ddpp.meanFieldExpansionSteadyState(order=1)
    ours = mf.refined_mean_field(d, lam, levels=L)
    assert np.max(np.abs(ours.pi - pi_r)) < 1e-8
    assert np.max(np.abs(ours.V - V_r)) < 1e-6


def test_sampling_first_order_against_exact_binomial_ratios():
    # C(c, d)/C(n, d) = v^d + h(v)/n + O(1/n²) with h(v) = −½d(d−1)(v^{d−1} − v^d), v = c/n:
    # n² × the remainder stays bounded (here it settles), while without h even n × it does not vanish
    from math import comb

    from supermarket.meanfield.corrections import sampling_first_order

    for d in (2, 3, 4, 7):
        for v in (0.3, 0.7):
            rem2, rem1 = [], []
            for n in (100, 1000, 10000):
                c = round(v * n)
                exact = comb(c, d) / comb(n, d)
                rem2.append(n * n * abs(exact - v**d - float(sampling_first_order([v], d)[0]) / n))
                rem1.append(n * abs(exact - v**d))
            assert rem2[-1] < 1.2 * max(rem2[0], 1e-3) and rem2[-1] < 50, (d, v, rem2)
            assert rem1[-1] > 0.9 * rem1[0] > 0, (d, v, rem1)  # the 1/n term is really there
    assert np.all(sampling_first_order([0.0, 0.4, 1.0], 1) == 0)  # d = 1: one queue, no difference
    assert float(sampling_first_order([1.0], 5)[0]) == 0.0  # every queue qualifies: C(n, d)/C(n, d) = 1


def _exact_noreplace_errors(d, lam, ns, replace_V):
    """n² × Σ_i |E[u_i] − π_i − V_i/n| against the exact law without replacement (§11)."""
    from supermarket.stationary import profile as stationary

    r = mf.refined_mean_field(d, lam, replace=replace_V, levels=20)
    out = []
    for n in ns:
        e = stationary.solve(n, d, lam, replace=False, tol=1e-10)
        k = e.u_mean.size
        assert k < 20
        um = np.zeros(20)
        um[:k] = e.u_mean
        out.append(n * n * np.abs(um - (r.pi + r.V / n)).sum())
    return np.array(out)


def test_refined_without_replacement_against_exact_law():
    """docs/model.md §3 (refined mean field without replacement, derived): the error of π + V/n
    against the exact law of the chain without replacement is O(1/n²): n² × error does not grow
    from n = 4 to n = 7 (it falls, 0.45 → 0.35), while the with-replacement V leaves an O(1/n)
    error (n² × error grows like n: × 1.5 over the same range).  d = 4: the coefficient
    d(d−1)/2 = 6 differs from d, d − 1, d(d−1) and (d−1)(d−2)/2."""
    ns = (4, 5, 7)
    ours = _exact_noreplace_errors(4, 0.6, ns, False)
    theirs = _exact_noreplace_errors(4, 0.6, ns, True)
    assert ours[-1] <= 1.05 * ours[0], ours
    assert theirs[-1] >= 1.3 * theirs[0], theirs
    assert np.all(ours < theirs)


def test_refined_without_replacement_V_satisfies_the_flow_identity():
    # docs/model.md §3: E[u_i] = λ E[C(c_{i−1}, d)/C(n, d)] exactly; to order 1/n with
    # C(c, d)/C(n, d) = v^d + h(v)/n: V_i = λ(d π^{d−1} V + ½d(d−1) π^{d−2} W + h(π))_{i−1}, V_1 = 0
    from supermarket.meanfield.corrections import sampling_first_order

    for d, lam in [(2, 0.9), (3, 0.7), (10, 0.95)]:
        r = mf.refined_mean_field(d, lam, replace=False)
        pi, V, W = r.pi, r.V, r.W
        rhs = lam * (
            d * pi[:-1] ** (d - 1) * V[:-1]
            + 0.5 * d * (d - 1) * pi[:-1] ** (d - 2) * np.diag(W)[:-1]
            + sampling_first_order(pi[:-1], d)
        )
        assert abs(V[0]) < 1e-10 * np.abs(V).max()
        assert np.allclose(V[1:], rhs, rtol=1e-8, atol=1e-12 * np.abs(V).max())
        assert r.replace is False and r.to_dict()["replace"] is False
    # d = 1: sampling one queue is the same either way
    assert np.allclose(mf.refined_mean_field(1, 0.7, replace=False).V, mf.refined_mean_field(1, 0.7).V, rtol=0, atol=0)
    with pytest.raises(ValueError, match="n must be >= d"):
        mf.refined_mean_field(3, 0.7, replace=False).mean(2)


def test_refined_response_times_without_replacement_obey_littles_law():
    # E[S] = 1 + Σ T_i must equal E[Σ u_i]/λ (Little) with E[u] = π + V/n, the V without replacement
    d, lam, n = 3, 0.9, 20
    rt = mf.response_times(d, lam, n=n, refined=True, replace=False)
    r = mf.refined_mean_field(d, lam, replace=False)
    assert rt.sojourn.mean == pytest.approx(r.mean_queue_length(n) / lam, rel=1e-9)
    assert not rt.notes


# --------------------------------------------------------------------------- against simulation
def test_refined_without_replacement_against_simulation_n20():
    """λ = 0.9, d = 3, n = 20 without replacement (the case of issue 19): the simulated mean queue
    length sits O(1/n²) from Σπ + ΣV/n with the V without replacement, as the simulation with
    replacement sits from its own refined value: the two offsets agree within 4.5 standard
    errors of their difference plus 1/n² (the O(1/n²) remainders need not be equal).  With the
    with-replacement V the first offset would move by ΣV_drift/n = −0.056 and fail (7 s.e. of
    the difference); the exact-law test above separates the two V's sharply."""
    n, d, lam = 20, 3, 0.9
    r_nr = mf.refined_mean_field(d, lam, replace=False)
    r_wr = mf.refined_mean_field(d, lam)
    s_nr = simulate(n, d, lam, steps=2 * 10**7, seed=21, replace=False, start="fixed-point")
    s_wr = simulate(n, d, lam, steps=2 * 10**7, seed=22, start="fixed-point")
    off_nr = s_nr.mean_queue_length - r_nr.mean_queue_length(n)
    off_wr = s_wr.mean_queue_length - r_wr.mean_queue_length(n)
    se = math.hypot(s_nr.mean_queue_length_stderr, s_wr.mean_queue_length_stderr)
    assert abs(off_nr - off_wr) < 4.5 * se + 1 / n**2, (off_nr, off_wr, se)


def test_refined_closer_to_simulation_than_mean_field():
    """λ = 0.9, d = 2, n = 10, 20, 50: the simulated mean queue length (batch-means standard
    error) is far from Σπ and much closer to Σπ + ΣV/n; at n = 20 and 50 it agrees with the
    refined value within 4.5 standard errors (at n = 10 the O(1/n²) remainder shows).  Plain
    estimators: with control variates (docs/model.md §9.1) the error bar at n = 20 is ten times
    smaller and the O(1/n²) remainder shows there too (0.0134 ± 0.0013)."""
    r = mf.refined_mean_field(2, 0.9)
    for n, seed in ((10, 11), (20, 12), (50, 13)):
        s = simulate(n, 2, 0.9, steps=2 * 10**7, seed=seed, control_variates=False)
        se = s.mean_queue_length_stderr
        off_mf = abs(s.mean_queue_length - r.mean_queue_length())
        off_rmf = abs(s.mean_queue_length - r.mean_queue_length(n))
        assert off_rmf < off_mf - 4.5 * se, (n, off_mf, off_rmf, se)
        if n >= 20:
            assert off_rmf < 4.5 * se, (n, off_rmf, se)
        # level by level too: the refined profile is closer in the sum of |differences|
        L = min(len(s.u_mean), r.levels)
        assert np.abs(s.u_mean[:L] - r.mean(n)[:L]).sum() < np.abs(s.u_mean[:L] - r.pi[:L]).sum()


@pytest.mark.slow
def test_lna_covariance_against_simulation_n_1e4():
    """Covariance of √n u at n = 10^4 (λ = 0.9, d = 2) from a recorded trajectory, with
    batch-means standard errors (20 batches of 500 records, 0.53 time units apart)."""
    n, d, lam, k = 10**4, 2, 0.9, 6
    s = simulate(n, d, lam, steps=10**8, seed=3, start="fixed-point", burn_in=10**6, record_every=n, record_levels=k)
    U = np.sqrt(n) * s.trajectory.u[:, :k]
    X = U - U.mean(axis=0)
    B = 20
    m = len(X) // B
    covs = np.array([X[b * m : (b + 1) * m].T @ X[b * m : (b + 1) * m] / m for b in range(B)])
    C = covs.mean(axis=0)
    se = covs.std(axis=0, ddof=1) / np.sqrt(B)
    W = mf.lna(d, lam).covariance[:k, :k]
    assert np.all(np.abs(C - W) <= 4.5 * se), (C - W) / se
    # and the empirical mean is the refined mean field within its standard error
    means = np.array([s.trajectory.u[b * m : (b + 1) * m, :k].mean(axis=0) for b in range(B)])
    mse = means.std(axis=0, ddof=1) / np.sqrt(B)
    ref = mf.refined_mean_field(d, lam).mean(n)[:k]
    assert np.all(np.abs(means.mean(axis=0) - ref) <= 4.5 * mse)


def test_lyapunov_size_guard():
    with pytest.raises(ValueError, match="tol"):
        mf.lna(1, 0.999)
    # a larger tol keeps it small and still accurate at the levels kept
    res = mf.lna(1, 0.9, tol=1e-8)
    i = np.arange(1, 21)
    exact = 0.9 ** np.maximum.outer(i, i) - 0.9 ** np.add.outer(i, i)
    assert np.max(np.abs(res.covariance[:20, :20] - exact)) < 1e-6


def test_V_satisfies_the_exact_equilibrium_identity():
    # docs/model.md §3 [derived]: E[u_i] = λ E[u_{i−1}^d] for every n.  Expanding both sides to
    # order 1/n with E[u] = π + V/n and Cov(u) = W/n gives
    # V_i = λ (d π_{i−1}^{d−1} V_{i−1} + ½ d(d−1) π_{i−1}^{d−2} W_{i−1,i−1}),  V_1 = 0.
    for d, lam in [(2, 0.9), (3, 0.7), (10, 0.99)]:
        r = mf.refined_mean_field(d, lam)
        pi, V, W = r.pi, r.V, r.W
        rhs = lam * (d * pi[:-1] ** (d - 1) * V[:-1] + 0.5 * d * (d - 1) * pi[:-1] ** (d - 2) * np.diag(W)[:-1])
        assert abs(V[0]) < 1e-10 * np.abs(V).max()
        assert np.allclose(V[1:], rhs, rtol=1e-8, atol=1e-12 * np.abs(V).max())


@settings(max_examples=15, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12), st.integers(1, 50), st.sampled_from([0.3, 0.9, 0.999]))
def test_any_valid_start_stays_a_profile_and_balances_mass(values, d, lam):
    start = np.sort(np.array(values))[::-1]
    t = np.linspace(0.0, 3.0, 601)
    sol = mf.solve_meanfield(d, lam, T=3.0, start=start, t_eval=t)
    assert sol.success
    assert np.all((sol.u >= 0) & (sol.u <= 1))
    assert np.all(np.diff(sol.u, axis=1) <= 1e-9)
    total = sol.u.sum(axis=1)
    rhs = lam - sol.u[:, 0]
    integral = np.concatenate(([0.0], np.cumsum(0.5 * (rhs[1:] + rhs[:-1]) * np.diff(t))))
    # trapezoid error, h = 0.005 (observed at most 2e-6 over 60 random cases)
    assert abs(total[-1] - total[0] - integral[-1]) < 1e-4


def test_overload_transient_grows_levels_and_balances_mass():
    # λ > 1: no equilibrium, but a finite horizon is fine; customers pile up at rate λ − u_1
    # trapezoid error h²/12 |u_1'(T) − u_1'(0)| ≈ 1.5 h²/12 = 3e-6 with h = 0.005
    lam, T = 1.5, 40.0
    t = np.linspace(0.0, T, 8001)
    sol = mf.solve_meanfield(2, lam, T=T, t_eval=t)
    assert sol.top_level_max <= sol.tol and sol.levels > 20
    total = sol.u.sum(axis=1)
    rhs = lam - sol.u[:, 0]
    integral = np.concatenate(([0.0], np.cumsum(0.5 * (rhs[1:] + rhs[:-1]) * np.diff(t))))
    assert np.max(np.abs(total - integral)) < 1e-5
    assert sol.u[-1, 0] == pytest.approx(1.0, abs=1e-6)  # every server busy
    with pytest.raises(ValueError, match="load"):
        mf.solve_meanfield("inf", 1.5, T=1.0)
    with pytest.raises(ValueError, match="load"):
        mf.solve_meanfield(2, 1.5, T=1.0, start="fixed-point")


# --------------------------------------------------------------------------- loss of accuracy near λ = 1
def _refined_exact(d, lam, L, dps=40):
    """V and W of the refined mean field at L levels, in 40-digit arithmetic (mpmath): the
    Lyapunov equation written as its Kronecker system, π from the closed form at the exact
    binary value of λ.  An independent reference for the double-precision solver."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = dps
    lam = mp.mpf(lam)
    pi = [lam ** ((mp.mpf(d) ** i - 1) / (d - 1)) for i in range(1, L + 1)]
    p1 = [d * p ** (d - 1) for p in pi]
    p2 = [d * (d - 1) * p ** (d - 2) for p in pi]
    pd = [p**d for p in pi]
    A = mp.zeros(L, L)
    for i in range(L):
        A[i, i] = -lam * p1[i] - 1
        if i > 0:
            A[i, i - 1] = lam * p1[i - 1]
        if i < L - 1:
            A[i, i + 1] = 1
    Q = [lam * ((1 if i == 0 else pd[i - 1]) - pd[i]) + pi[i] - (pi[i + 1] if i < L - 1 else 0) for i in range(L)]
    K = mp.zeros(L * L, L * L)
    for i in range(L):
        for j in range(L):
            for k in range(L):
                K[i * L + j, k * L + j] += A[i, k]
                K[i * L + j, i * L + k] += A[j, k]
    w = mp.lu_solve(K, mp.matrix([-(Q[i] if i == j else 0) for i in range(L) for j in range(L)]))
    W = [[w[i * L + j] for j in range(L)] for i in range(L)]
    term = [-lam * p2[i] * W[i][i] + (lam * p2[i - 1] * W[i - 1][i - 1] if i else 0) for i in range(L)]
    V = mp.lu_solve(A, mp.matrix([-t / 2 for t in term]))
    return np.array([float(x) for x in V]), np.array([[float(x) for x in r] for r in W])


@pytest.mark.parametrize("d, lam", [(20, 0.99), (20, 1 - 1e-6), (10**6, 0.999999999), (100, 1 - 1e-13)])
def test_refined_error_estimate_is_honest(d, lam):
    """The a-posteriori error estimate is within a factor 3 of the true error (40-digit
    reference), and the flag follows it: accurate iff the estimate is below ACCURACY_TOL."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mf.AccuracyWarning)
        r = mf.refined_mean_field(d, lam)
    V, W = _refined_exact(d, lam, r.levels)
    err = max(np.max(np.abs(r.V - V)) / np.max(np.abs(V)), np.max(np.abs(r.W - W)) / np.max(np.abs(W)))
    assert err <= 3 * r.error_estimate + 1e-14
    assert r.error_estimate <= 3 * err + 1e-14
    assert r.accurate == (r.error_estimate <= mf.ACCURACY_TOL)
    if (d, lam) == (100, 1 - 1e-13):
        assert not r.accurate and err > 1e-3  # flagged, and rightly so


def test_refined_near_one_is_flagged_not_printed_as_a_number():
    lam = 1 - 2.0**-53  # 0.99999999999999989
    with pytest.warns(mf.AccuracyWarning, match="not accurate"):
        r = mf.refined_mean_field(2, lam)
    assert not r.accurate and r.error_estimate > 1
    assert any("condition number" in x for x in r.issues)
    assert r.to_dict()["accurate"] is False
    with pytest.warns(mf.AccuracyWarning):
        r.mean(1000)
    assert not r.valid_for(1000)
    with pytest.warns(mf.AccuracyWarning, match="not accurate"):
        res = mf.lna(2, lam, n=1000, at="centre")
    assert not res.accurate
    # the mean field itself stays exact: π(1) = λ
    assert r.pi[0] == lam


def test_refined_ordinary_case_is_accurate_and_silent():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = mf.refined_mean_field(2, 0.9)
        res = mf.lna(2, 0.9)
        r.mean(1000)
    assert r.accurate and r.error_estimate < 1e-12 and r.issues == ()
    assert res.accurate and np.all(np.diag(res.covariance) >= 0)
    assert r.valid_for(1000)


def test_refined_mean_outside_unit_interval_is_not_valid_for_small_n():
    r = mf.refined_mean_field(2, 1 - 1e-6)
    assert r.accurate
    assert not r.valid_for(1000)  # π + V/n reaches 187 at n = 1000
    with pytest.warns(mf.AccuracyWarning, match="leaves"):
        r.mean(1000)
    assert r.valid_for(10**12)


def test_result_protocol_meanfield(tmp_path):
    """to_dict (strict JSON), to_frame (tidy), summary (text), plot (PNG) of the four results."""
    import json

    sol = mf.solve_meanfield(2, 0.9, T=2.0, t_eval=np.linspace(0, 2, 5))
    f = sol.to_frame()
    assert list(f.columns) == ["t", "level", "u"] and len(f) == sol.u.size
    assert f[(f.t == 2.0) & (f.level == 1)]["u"].item() == sol.u[-1, 0]
    assert "mean-field ODE trajectory" in sol.summary() and f"{sol.mean_queue_length[-1]:.8g}" in sol.summary()
    json.dumps(sol.to_dict(), allow_nan=False)
    sol.plot(tmp_path / "u.png")
    assert (tmp_path / "u.png").read_bytes()[:4] == b"\x89PNG"

    di = mf.solve_dinf(0.9, T=5.0, start="customers:3", t_eval=np.linspace(0, 5, 3))
    assert json.loads(json.dumps(di.to_dict(), allow_nan=False))["d"] == "inf"
    assert "d=∞" in di.summary() and len(di.to_frame()) == di.u.size

    r = mf.refined_mean_field(2, 0.9)
    fr = r.to_frame(100)
    assert np.allclose(fr["refined"], r.pi + r.V / 100, rtol=0, atol=0)
    assert f"{r.mean_queue_length(100):.10g}" in r.summary(n=100)
    json.dumps(r.to_dict(), allow_nan=False)
    r.plot(tmp_path / "r.png", n=100)
    assert (tmp_path / "r.png").stat().st_size > 1000

    ln = mf.lna(1, 0.5)
    fl = ln.to_frame()
    assert len(fl) == ln.levels**2
    d1 = fl[fl.i == fl.j]
    # d = 1: independent M/M/1 queues, Var(√n u_i) = λ^i − λ^{2i}
    assert np.allclose(d1["std"] ** 2, 0.5 ** d1["i"] - 0.25 ** d1["i"], atol=1e-11)
    assert "sd of √n u_i" in ln.summary()
    json.dumps(ln.to_dict(), allow_nan=False)


def test_check_profile_type_errors_name_the_problem():
    """Not numbers, empty, or not 1-d: a TypeError naming the parameter and what it must be
    (the messages are built by model.check_vector since the meanfield split)."""
    with pytest.raises(TypeError, match=r"^start profile must be a 1-d array of numbers in \[0, 1\]; got str$"):
        mf.check_profile("abc")
    with pytest.raises(
        TypeError,
        match=r"^start profile must be a non-empty 1-d array \(u_1, u_2, \.\.\.\); "
        r"got shape \(0,\)$",
    ):
        mf.check_profile([])
    with pytest.raises(TypeError, match=r"^u must be a non-empty 1-d array \(u_1, u_2, \.\.\.\); got shape \(1, 2\)$"):
        mf.check_profile([[0.5, 0.25]], "u")


@pytest.mark.parametrize("d,lam,replace", [(2, 0.9, True), (3, 0.99, True), (2, 0.999, True), (3, 0.9, False)])
def test_min_n_is_the_least_n_where_pi_plus_V_over_n_is_a_profile(d, lam, replace):
    # checked against the definition by a scan: every n below fails (a value outside [0, 1] or
    # an increase with i), min_n passes, and so does every n above (the conditions are n >= c)
    r = mf.refined_mean_field(d, lam, replace=replace)
    m = r.min_n()
    low = 1 if replace else d

    def profile(n):
        v = r.pi + r.V / n
        return bool(np.all((v >= 0) & (v <= 1)) and np.all(np.diff(v) <= 0))

    assert profile(m) and all(not profile(n) for n in range(low, m))
    assert all(profile(n) for n in (m + 1, 2 * m, 10 * m, 10**9))
    assert r.valid_for(m) and (m == low or not r.valid_for(m - 1))


def test_valid_for_refuses_a_refined_profile_that_increases():
    # without replacement at n = 2 (d = 2, λ = 0.9): π + V/n stays in [0, 1] but rises from
    # level 3 (0.666) to level 4 (0.747), which no E[u_i] can do
    r = mf.refined_mean_field(2, 0.9, replace=False)
    v = r.pi + r.V / 2
    assert np.all((v >= 0) & (v <= 1)) and v[3] > v[2]
    assert not r.valid_for(2) and r.min_n() == 3
