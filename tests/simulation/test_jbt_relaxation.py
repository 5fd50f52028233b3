"""The relaxation time of jbt (docs/model.md §9, "The slowest time scale"): the heuristic of
``control.jbt_relaxation_time`` against the exact relaxation time of the tiny chains (one over
the spectral gap of the generator of ``supermarket.stationary.profile``, not the simulation),
its fluid part against a finite-difference Jacobian of the drift of docs/model.md §2, and a
profile-engine run whose error bars now exist against the exact stationary law.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse.linalg as sla
from scipy.optimize import fsolve

from supermarket.simulation import simulate
from supermarket.simulation.control import jbt_fluid_relaxation_time, jbt_relaxation_time
from supermarket.stationary import profile as stationary


def _exact_relaxation(n, d, lam, cap):
    """1/(spectral gap) of the truncated generator of jbt: the slowest relaxation time of the chain."""
    Q = stationary._build(n, d, lam, True, cap, "jbt")[0]
    ev = sla.eigs(Q.T.tocsc(), k=3, sigma=1e-4, which="LM", return_eigenvectors=False)
    return 1.0 / min(-z.real for z in ev if abs(z) > 1e-9)


@pytest.mark.parametrize(
    "n, d, lam, cap",
    [(2, 3, 0.95, 100), (2, 2, 0.9, 100), (3, 2, 0.5, 20), (3, 3, 0.8, 30), (4, 3, 0.5, 14), (4, 2, 0.8, 14)],
)
def test_jbt_relaxation_time_covers_the_exact_one(n, d, lam, cap):
    exact = _exact_relaxation(n, d, lam, cap)
    t = jbt_relaxation_time(lam, n, d)
    assert exact <= t <= 1.0 / (1.0 - math.sqrt(lam)) ** 2 + 1e-9, (exact, t)


def _drift(x, lam):
    """The fluid drift of u_1..u_T of jbt below u_T = 1 (docs/model.md §2), u_0 = 1, u_{T+1} = 0."""
    T = x.size
    u = np.concatenate([[1.0], x, [0.0]])
    P = (u[: T + 1] - u[T]) / (1.0 - u[T])  # P_0..P_T, P_T = 0
    return np.array([lam * (P[ell - 1] - P[ell]) - (u[ell] - u[ell + 1]) for ell in range(1, T + 1)])


@pytest.mark.parametrize("lam, T", [(0.5, 2), (0.95, 2), (0.9, 3), (0.8, 5)])
def test_fluid_time_is_the_slowest_mode_of_the_drift(lam, T):
    # the fixed point as a root of the drift itself, then a central-difference Jacobian
    x = fsolve(_drift, np.full(T, 0.5 * lam), args=(lam,), xtol=1e-13)
    assert np.abs(_drift(x, lam)).max() < 1e-10
    h = 1e-6
    J = np.column_stack([(_drift(x + h * e, lam) - _drift(x - h * e, lam)) / (2 * h) for e in np.eye(T)])
    want = 1.0 / min(-np.linalg.eigvals(J).real)
    assert jbt_fluid_relaxation_time(lam, T) == pytest.approx(want, rel=1e-5)


def test_jbt_relaxation_time_refuses_bad_input():
    with pytest.raises(ValueError, match="lam"):
        jbt_relaxation_time(1.0, 10, 2)
    with pytest.raises(ValueError, match="n >= 1"):
        jbt_relaxation_time(0.9, 0, 2)


def test_tiny_jbt_profile_run_has_error_bars_covering_the_exact_law():
    """n = 4, d = 2, λ = 0.7, 2·10^5 events against the exact stationary law (60 seeds: all
    reliable, 58 of the 95 % intervals held the exact mean)."""
    n, d, lam = 4, 2, 0.7
    exact = stationary.solve(n, d, lam, policy="jbt", tol=1e-6).mean_queue_length
    r = simulate(n, d, lam, policy="jbt", engine="profile", steps=2 * 10**5, seed=7)
    q = r.queue_length
    assert q.reliable and math.isfinite(q.stderr) and q.stderr > 0
    assert abs(q.value - exact) <= 4 * q.stderr, (q.value, exact, q.stderr)


def test_large_jbt_profile_run_now_has_error_bars():
    """n = 1000, d = 3, λ = 0.95, 2·10^6 events (about 1,030 time units): with random routing's
    M/M/1 time (1,560 time units) every error bar was "too short to estimate"; with jbt's (12.6)
    they exist, and the plain ``ū_1`` covers ``E[u_1] = λ`` with a s.e. near the exact
    ``√(2λ(1 + λ)/S)`` (docs/model.md §9; stated on about 8 degrees of freedom: ±25 %)."""
    n, d, lam, steps = 1000, 3, 0.95, 2 * 10**6
    r = simulate(n, d, lam, policy="jbt", engine="profile", steps=steps, seed=1)
    assert r.levels[0].reliable and r.queue_length.reliable
    u1, se = r.u_mean_plain[0], r.u_stderr_plain[0]
    assert abs(u1 - lam) <= 4 * se, (u1, se)
    assert 0.6 < se / math.sqrt(2 * lam * (1 + lam) / steps) < 1.6
