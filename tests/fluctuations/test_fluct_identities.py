"""Stationary identities that depend on the drift (docs/model.md §8), for the limit
diffusions of regimes (b) and (c), the pre-limit diffusion and the exact chain.

For a stationary process with generator ``L``, ``E[L f] = 0`` for every smooth ``f``; with a
reflection, the pushing ``U`` adds ``E[(∂_y f − ∂_q f) dU]/dt``.  Applied to ``y``, ``q²``,
``q·y``, ``y²`` these give linear relations among stationary moments that a one-token
change of the drift breaks (e.g. ``e^{cQ}`` → ``e^{2cQ}``), whereas the flow balance
``E Q = −ζ`` holds for any drift.  Every function of the state is computed here, in NumPy,
from the recorded sample paths: not from the kernel's own sums.  Expectations are
averages over independent paths (or replications) of time averages; tolerances are 4.5
standard errors, plus the Euler–Maruyama bias where stated.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.special import gammaln

from supermarket import fluctuations as fl

TOL = 4.5


def quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fl.RegimeWarning)
        return fn(*a, **k)


def path_mean(values: np.ndarray) -> tuple[float, float]:
    """Mean over independent paths (rows) of per-path time averages, with its standard error."""
    per = values.mean(axis=1)
    return float(per.mean()), float(per.std(ddof=1) / math.sqrt(per.size))


def assert_zero(name, values, extra=0.0):
    m, se = path_mean(values)
    assert abs(m) <= TOL * se + extra, (name, m, se)
    return m, se


# ----------------------------------------------------------------- regime (b)
def identities_b(Q, Y, c, zeta):
    """E[L f] for f = y, q², y², q·y under dQ = (−ζ − Q + Y − e^{cQ})dt + √2 dW,
    dY = (e^{cQ} − Y)dt (docs/model.md §8): arrays whose expectation must vanish."""
    e = np.exp(c * Q)
    b = -zeta - Q + Y - e  # drift of Q
    return {
        "y": e - Y,  # E Y = E e^{cQ}
        "q2": 2 * Q * b + 2.0,
        "y2": 2 * Y * (e - Y),  # E Y² = E[Y e^{cQ}]
        "qy": Y * b + Q * (e - Y),
    }


@pytest.mark.parametrize("c, zeta", [(1.0, 0.5), (2.0, -0.3)])
def test_limit_b_generator_identities(c, zeta):
    sde = fl.limit_sde(
        "b", c=c, zeta=zeta, paths=64, time=60.0, burn_in=15.0, dt=1e-3, seed=21, record_paths=64, grid_dt=0.05
    )
    Q, Y = sde.grid[:, :, 0], sde.grid[:, :, 1]
    for name, v in identities_b(Q, Y, c, zeta).items():
        # Euler–Maruyama: O(dt) bias (second-order terms of the step), far below the errors here
        assert_zero(name, v, extra=0.02)
    # the identity E Y = E e^{cQ} is not a consequence of the flow balance: it pins the law
    assert abs(path_mean(np.exp(c * Q))[0] - path_mean(np.exp(2 * c * Q))[0]) > 0.05


def test_prelimit_b_generator_identities():
    """The pre-limit diffusion at finite n: the same identities with A(Q) = λ√n P_n(c_n + Q/√n)
    computed here from the Gamma function (without replacement) and the state-dependent
    noise σ_1² = λ(1 − P_n) + G_1 − G_2 (docs/model.md §8, derived)."""
    p = quiet(fl.regime_b, 2500, 1.0, 0.5)  # d = 50
    sde = fl.prelimit_sde(p, paths=48, time=40.0, burn_in=10.0, dt=2e-3, seed=4, record_paths=48)
    Q, Y = sde.grid[:, :, 0], sde.grid[:, :, 1]  # regime (b) reports Q = √n(G1 − c_n), Y = √n G2
    n, d, lam, sq = p.n, p.d, p.lam, math.sqrt(p.n)
    G1 = p.c_n + Q / sq
    m = n * G1
    P = np.exp(gammaln(m + 1) - gammaln(m - d + 1) - gammaln(n + 1) + gammaln(n - d + 1))
    A = lam * sq * P
    b = -sq * (p.c_n - lam) - Q + Y - A
    s1 = lam * (1 - P) + G1 - Y / sq
    s2 = (A + Y) / sq
    assert_zero("y", A - Y, extra=0.01)
    assert_zero("q2", 2 * Q * b + s1, extra=0.02)
    assert_zero("y2", 2 * Y * (A - Y) + s2, extra=0.02)
    assert_zero("qy", Y * b + Q * (A - Y), extra=0.02)


# ----------------------------------------------------------------- regime (c)
@pytest.mark.parametrize("zeta", [0.5, 1.0])
def test_limit_c_reflected_identities(zeta):
    """Reflected at Q <= 0: E[dU]/dt = E Y (f = y), E QY = −ζ E Y/2 (f = q·y with f = y²),
    Var Q = 1 + E QY (f = q², using Q = 0 where U grows), E Y² = E[Y dU]/dt (f = y²)."""
    dt = 1e-3
    sde = fl.limit_sde("c", zeta=zeta, paths=64, time=80.0, dt=dt, seed=33, record_paths=64, grid_dt=0.05)
    Q, Y = sde.grid[:, :, 0], sde.grid[:, :, 1]
    EY, EY_se = path_mean(Y)
    # E[dU]/dt = E Y (the kernel's pushing sum against the recorded Y)
    assert abs(sde.push_rate - EY) <= TOL * math.hypot(sde.push_rate_stderr, EY_se)
    # E QY + ζ E Y / 2 = 0
    assert_zero("qy", Q * Y + zeta * Y / 2, extra=0.02)
    # E Q² − ζ² − 1 − E QY = 0
    assert_zero("q2", Q * Q - zeta**2 - 1.0 - Q * Y, extra=0.02)
    # E Y² = E[Y dU]/dt, up to the scheme's E[ΔU²]/(2dt) (of order √dt; small with the bridge)
    EY2, EY2_se = path_mean(Y * Y)
    assert abs(sde.y_push_rate - EY2) <= TOL * math.hypot(sde.y_push_rate_stderr, EY2_se) + 0.05 * EY2


def test_bridge_and_projection_converge_to_the_same_limit_projection_biased():
    """Both schemes tend to the same E Y as dt → 0 (docs/model.md §8); at a coarse step the
    projection's O(√dt) bias shows, the bridge's does not."""
    kw = dict(zeta=1.0, paths=256, time=100.0, burn_in=10.0, seed=5, record_paths=0)
    fine = fl.limit_sde("c", dt=2e-3, reflection="bridge", **kw).moments
    coarse_b = fl.limit_sde("c", dt=3e-2, reflection="bridge", **kw).moments
    coarse_p = fl.limit_sde("c", dt=3e-2, reflection="projection", **kw).moments
    se = math.hypot(fine.stderr["mean_z2"], coarse_b.stderr["mean_z2"])
    assert abs(coarse_b.mean_z2 - fine.mean_z2) <= TOL * se + 0.02
    se_p = math.hypot(fine.stderr["mean_z2"], coarse_p.stderr["mean_z2"])
    assert fine.mean_z2 - coarse_p.mean_z2 > TOL * se_p  # projection pushes too little


# ----------------------------------------------------------------- the chain
def chain_generator_terms(p, Q, Y):
    """The chain's generator on f = c_1 and f = (c_1 − n c_n)²/n (functions of level 1,
    whose jumps depend on c_1 and c_2 only): arrivals at an empty queue at rate
    a = nλ(1 − P_n(c_1/n)), departures from a queue of length 1 at rate b = c_1 − c_2.
    Returns (D, 2QD + S) with D = (a − b)/√n and S = (a + b)/n: both have mean 0."""
    n, d, lam, sq = p.n, p.d, p.lam, math.sqrt(p.n)
    c1 = np.rint(n * p.m[0] + sq * Q)
    c2 = np.rint(n * p.m[1] + sq * Y)
    with np.errstate(divide="ignore", invalid="ignore"):
        if p.replace:
            P = (c1 / n) ** d
        else:
            P = np.where(
                c1 >= d, np.exp(gammaln(c1 + 1) - gammaln(c1 - d + 1) - gammaln(n + 1) + gammaln(n - d + 1)), 0.0
            )
    a = n * lam * (1 - P)
    b = c1 - c2
    D = (a - b) / sq
    S = (a + b) / n
    Qc = (c1 - n * p.c_n) / sq
    return D, 2 * Qc * D + S


@pytest.mark.parametrize("replace", [False, True])
def test_chain_generator_identities_regime_b(replace):
    p = quiet(fl.regime_b, 2500, 1.0, 0.5, replace=replace)
    sim = fl.simulate_fluctuations(p, time=400.0, replications=6, seed=8, grid_dt=0.02)
    D, F = chain_generator_terms(p, sim.grid[:, :, 0], sim.grid[:, :, 1])
    # replications are independent; the grid samples within one are correlated, which the
    # per-replication average absorbs
    assert_zero("c1", D)
    assert_zero("c1^2", F)


def test_chain_generator_identities_regime_c():
    p = quiet(fl.regime_c, 2500, 1.0, d=300)
    sim = fl.simulate_fluctuations(p, time=300.0, replications=6, seed=9, grid_dt=0.02)
    D, F = chain_generator_terms(p, sim.grid[:, :, 0], sim.grid[:, :, 1])
    assert_zero("c1", D)
    assert_zero("c1^2", F)


# ----------------------------------------------------------------- chain against diffusions
def test_chain_matches_prelimit_diffusion_at_moderate_n():
    """The exact chain against the pre-limit diffusion (another method: a diffusion
    approximation, not a simulation of the chain) at n = 900, d = 30."""
    p = quiet(fl.regime_b, 900, 1.0, 0.5)
    sim = fl.simulate_fluctuations(p, time=1500.0, replications=4, seed=12, batches=10)
    assert sim.moments.adequate, sim.moments.note
    pre = fl.prelimit_sde(p, paths=64, time=60.0, dt=2e-3, seed=13, record_paths=0)
    for k in ("mean_z2", "var_z1", "var_z2", "cov_z1z2"):
        se = math.hypot(sim.moments.stderr[k], pre.moments.stderr[k])
        # the diffusion approximation errs by O(1/n) ≈ 0.001 here, plus the O(dt) scheme bias
        assert abs(getattr(sim.moments, k) - getattr(pre.moments, k)) <= TOL * se + 0.01, k


@pytest.mark.slow
def test_chain_matches_prelimit_not_limit_at_n_1e4():
    """n = 10^4, c = 1, ζ = 0.5: the chain agrees with the pre-limit diffusion; the limit's
    E Y is off by more than the errors (the approach is slow: c_n = 0.955)."""
    p = quiet(fl.regime_b, 10**4, 1.0, 0.5)
    sim = fl.simulate_fluctuations(p, time=6000.0, replications=2, seed=14, batches=20)
    assert sim.moments.adequate, sim.moments.note
    pre = fl.prelimit_sde(p, paths=256, time=100.0, seed=15, record_paths=0)
    lim = fl.limit_for(p, paths=256, time=100.0, seed=16, record_paths=0)
    for k in fl.KEYS:
        se = math.hypot(sim.moments.stderr[k], pre.moments.stderr[k])
        assert abs(getattr(sim.moments, k) - getattr(pre.moments, k)) <= TOL * se + 0.01, k
    se = math.hypot(sim.moments.stderr["mean_z2"], lim.moments.stderr["mean_z2"])
    assert lim.moments.mean_z2 - sim.moments.mean_z2 > 2 * se
