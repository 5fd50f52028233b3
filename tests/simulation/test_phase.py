"""Phase-type service (docs/model.md §13) against independent facts: Pollaczek–Khinchine's
M/PH/1 mean, Neuts' matrix-geometric M/PH/1 queue-length law, the exact law of tiny systems
built from the definition (labelled queues, enumerated d-tuples), today's exponential
engines and exact solver, and the exact identities (I1), (I2).  Tolerances: 4.5 standard
errors of the compared quantity (two-sided normal p ≈ 7e-6 per comparison)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from supermarket.engines.phase import STATUS_DONE
from supermarket.simulation.phase import PhaseChain, simulate_phase
from supermarket.stationary.phase import solve_phase
from supermarket.system.phase_law import check_ph, ph_moments

Z = 4.5


def erlang(K):
    """Erlang-K with mean 1: K phases in series, each of rate K."""
    T = np.diag(np.full(K, -float(K))) + np.diag(np.full(K - 1, float(K)), 1)
    a = np.zeros(K)
    a[0] = 1.0
    return a, T


def h2(scv):
    """Two-phase hyperexponential with balanced means (mean 1, the given SCV > 1)."""
    p = (1.0 + math.sqrt((scv - 1.0) / (scv + 1.0))) / 2.0
    return np.array([p, 1.0 - p]), np.diag([-2.0 * p, -2.0 * (1.0 - p)])


def coxian():
    """A 3-phase law with a loop back and exits from every phase, scaled to mean 1."""
    a = np.array([0.5, 0.3, 0.2])
    T = np.array([[-3.0, 1.0, 0.5], [0.4, -2.0, 1.0], [0.2, 0.3, -1.5]])
    m = float(a @ np.linalg.solve(-T, np.ones(3)))
    return a, T * m


LAWS = {"E2": erlang(2), "E4": erlang(4), "H2": h2(4.0), "C3": coxian()}
SCV = {"E2": 0.5, "E4": 0.25, "H2": 4.0}


def pk_mean(lam, scv):
    """Pollaczek–Khinchine: mean number in an M/G/1 queue with service mean 1 [classical]."""
    return lam + lam**2 * (1.0 + scv) / (2.0 * (1.0 - lam))


def mph1_tail(lam, alpha, T, levels):
    """``P(Q >= ℓ)``, ``ℓ = 1..levels``, of the M/PH/1 queue, service mean 1: Neuts' matrix-
    geometric solution ``π_ℓ = (1 − ρ) α R^ℓ``, ``R = λ(λI − λ1α − T)^{-1}`` (Neuts 1981, §3.2)."""
    K = len(alpha)
    R = lam * np.linalg.inv(lam * np.eye(K) - lam * np.outer(np.ones(K), alpha) - T)
    pis = []
    v = (1.0 - lam) * np.asarray(alpha)
    for _ in range(levels + 400):
        v = v @ R
        pis.append(v.sum())
    pis = np.array(pis)
    return np.cumsum(pis[::-1])[::-1][:levels]


# ------------------------------------------------------------ the oracles among themselves
def test_laws_have_the_stated_moments():
    for name, scv in SCV.items():
        m, s = ph_moments(*LAWS[name])
        assert abs(m - 1.0) < 1e-12 and abs(s - scv) < 1e-12


@pytest.mark.parametrize("name", ["E2", "E4", "H2"])
def test_neuts_law_has_pk_mean(name):
    lam = 0.7
    tail = mph1_tail(lam, *LAWS[name], 600)
    assert abs(tail[0] - lam) < 1e-12
    assert abs(tail.sum() - pk_mean(lam, SCV[name])) < 1e-9


# ------------------------------------------------------------ the exact solver
@pytest.mark.parametrize("name", ["E2", "E4", "H2"])
def test_exact_n1_is_mph1(name):
    lam = 0.6
    r = solve_phase(1, 2, lam, *LAWS[name], cap=200)
    assert r.truncation < 1e-15
    assert abs(r.mean_queue_length - pk_mean(lam, SCV[name])) < 1e-9
    # the sparse solve is accurate to rounding relative to the whole law (mass 1): its absolute
    # error is a few 1e-15 on every level, a CPU-dependent 1e-5 relative on a tail of 1e-10
    assert np.allclose(r.u[:30], mph1_tail(lam, *LAWS[name], 30), rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize(("n", "d", "rep"), [(2, 2, True), (3, 2, False), (3, 3, True)])
def test_exact_one_phase_is_todays_exact_solver(n, d, rep):
    from supermarket.stationary.profile import solve

    lam = 0.7
    r = solve_phase(n, d, lam, [1.0], [[-1.0]], cap=30, replace=rep)
    ref = solve(n, d, lam, replace=rep, cap=30)
    L = 12
    assert np.allclose(r.u[:L], np.asarray(ref.u_mean)[:L], rtol=1e-9, atol=1e-14)


def test_exact_random_routing_is_independent_mph1():
    # d = 1 with n = 2: two independent M/PH/1 queues
    lam = 0.4
    r = solve_phase(2, 1, lam, *LAWS["H2"], cap=60)
    assert r.truncation < 1e-9
    assert np.allclose(r.u[:20], mph1_tail(lam, *LAWS["H2"], 20), rtol=1e-6, atol=1e-12)


# ------------------------------------------------------------ simulation vs oracles
def _close(est, se, exact, seen):
    """Every compared level within Z standard errors (a level with se 0 must be exact)."""
    est, se, exact = (np.asarray(x, float)[: len(seen)] for x in (est, se, exact))
    ok = np.abs(est - exact) <= Z * se + 1e-12
    return bool(np.all(ok | ~seen)), np.round((est - exact) / np.where(se > 0, se, 1.0), 2)


@pytest.mark.parametrize(("name", "hold"), [("E2", "mean"), ("H2", "exp"), ("C3", "mean")])
def test_sim_n1_is_mph1(name, hold):
    lam = 0.6
    a, T = LAWS[name]
    r = simulate_phase(1, 2, lam, a, T, t_end=2e5, seed=11, holding=hold)
    ex = solve_phase(1, 1, lam, a, T, cap=300)  # = PK for E2 and H2 (test_exact_n1_is_mph1)
    assert abs(r.mean_queue_length - ex.mean_queue_length) <= Z * r.mean_queue_length_stderr
    L = 8
    ok, z = _close(r.u_mean[:L], r.u_stderr[:L], ex.u[:L], np.ones(L, bool))
    assert ok, z


@pytest.mark.parametrize("name", ["E4", "H2"])
def test_random_routing_is_n_independent_mph1(name):
    lam = 0.7
    a, T = LAWS[name]
    r = simulate_phase(200, 1, lam, a, T, t_end=3000.0, seed=5)
    L = 10
    tail = mph1_tail(lam, a, T, L)
    ok, z = _close(r.u_mean_cv[:L], r.u_stderr_cv[:L], tail, tail > 1e-3)
    assert ok, z
    assert abs(r.mean_queue_length - pk_mean(lam, SCV[name])) <= Z * r.mean_queue_length_stderr


@pytest.mark.parametrize(
    ("n", "d", "rep", "name", "lam", "cap"),
    [
        (2, 2, True, "E2", 0.7, 30),
        (2, 2, True, "H2", 0.6, 45),
        (3, 2, True, "H2", 0.4, 18),
        (3, 2, False, "E2", 0.7, 14),
        (3, 2, True, "C3", 0.5, 12),
    ],
)
def test_sim_tiny_n_is_exact(n, d, rep, name, lam, cap):
    a, T = LAWS[name]
    K = len(a)
    ex = solve_phase(n, d, lam, a, T, cap=cap, replace=rep)
    # P(some queue at the cap) < 1e-5: the truncation moves the compared u_ℓ by far less
    # than their standard errors (~1e-3)
    assert ex.truncation < 1e-5
    r = simulate_phase(n, d, lam, a, T, t_end=1.5e5, seed=7, replace=rep)
    L = 6
    seen = ex.u[:L] > 1e-3
    ok, z = _close(r.u_mean[:L], r.u_stderr[:L], ex.u[:L], seen)
    assert ok, z
    ok, z = _close(r.u_mean_cv[:L], r.u_stderr_cv[:L], ex.u[:L], seen)
    assert ok, z
    # E[P_ℓ]: the law of the joined length (the exact side enumerates d-tuples)
    ok, z = _close(r.ud_mean[:L], r.ud_stderr[:L], ex.ud[:L], ex.ud[:L] > 1e-3)
    assert ok, z
    # the phase of the customer in service, level by level
    pm = np.zeros((L, K))
    m = min(L, r.phase_mean.shape[0])
    pm[:m] = r.phase_mean[:m]
    assert np.all(np.abs(pm - ex.phase_mean[:L]) <= 0.02 * ex.phase_mean[:L] + 2e-3)


def test_one_phase_in_law_as_the_profile_engine():
    from supermarket.simulation import simulate

    n, d, lam = 100, 2, 0.9
    r = simulate_phase(n, d, lam, [1.0], [[-1.0]], t_end=4000.0, seed=3)
    p = simulate(n, d, lam, time=4000.0, time_mode="continuous", seed=3)
    L = 5
    diff = np.asarray(r.u_mean_cv[:L]) - np.asarray(p.u_mean[:L])
    se = np.hypot(r.u_stderr_cv[:L], np.asarray(p.u_stderr[:L]))
    assert np.all(np.abs(diff) <= Z * se + 1e-12), diff / se


@pytest.mark.parametrize("name", ["E4", "H2", "C3"])
def test_identities_hold(name):
    # (I1) flow across each level and (I2) phase balance, docs/model.md §13
    r = simulate_phase(1000, 2, 0.9, *LAWS[name], t_end=300.0, seed=2)
    z = r.flow_z[np.isfinite(r.flow_z)]  # NaN: a level too rare for a trusted error bar
    assert z.size >= 3 and np.all(np.abs(z) <= Z), r.flow_z
    assert np.all(np.abs(r.busy_z) <= Z), r.busy_z
    assert abs(r.busy_exact.sum() - 0.9) < 1e-12


# ------------------------------------------------------------ mechanics
def test_chunks_give_the_same_numbers():
    a, T = LAWS["H2"]
    _, T, t0 = check_ph(a, T)
    ss = np.random.SeedSequence(4)
    one = PhaseChain(50, 2, 0.8, a, T, t0, replace=True, seed=ss, holding_exp=True)
    one.run(300.0)
    cut = PhaseChain(50, 2, 0.8, a, T, t0, replace=True, seed=ss, holding_exp=True)
    for t in (0.5, 17.0, 17.0, 123.4, 300.0):
        cut.run(t)
    assert one.events == cut.events
    assert np.array_equal(one.N, cut.N) and np.array_equal(one.s, cut.s)
    assert np.allclose(one.integrals()[0], cut.integrals()[0], rtol=1e-12)
    assert STATUS_DONE == 0


def test_counts_stay_consistent():
    a, T = LAWS["C3"]
    _, T, t0 = check_ph(a, T)
    ch = PhaseChain(37, 3, 0.95, a, T, t0, replace=False, seed=np.random.SeedSequence(1), holding_exp=False)
    ch.run(500.0)
    Nge = np.cumsum(ch.N[::-1].sum(axis=1))[::-1]
    assert np.array_equal(Nge[1:], ch.c[1:]) and ch.c[0] == 37
    assert np.array_equal(ch.N.sum(axis=0), ch.B)
    assert ch.ints[1] == ch.c[1:].sum() and np.all(ch.N >= 0)


@pytest.mark.parametrize("replace", [True, False])
def test_counts_above_the_table_size_take_p_directly(replace):
    # n > FULL_MAX_N: no table, set_counts evaluates P_ℓ by p_of; against the closed form of
    # docs/model.md §2: (c/n)^d with replacement, C(c, d)/C(n, d) without
    from supermarket.engines.phase import FULL_MAX_N

    n, d = FULL_MAX_N + 7, 3
    ch = PhaseChain(
        n,
        d,
        0.5,
        np.ones(1),
        -np.ones((1, 1)),
        np.ones(1),
        replace=replace,
        seed=np.random.SeedSequence(0),
        holding_exp=True,
    )
    assert ch.tab.size == 0
    # counts of the order of n: the engine's log-domain P (log1p(−(n−c)/n)) loses ~n/c ulps
    ch.set_counts([[0], [2_000_000], [1_000_000], [500_000]])
    c = [n, 3_500_000, 1_500_000, 500_000]
    want = [(x / n) ** d if replace else math.comb(x, d) / math.comb(n, d) for x in c]
    assert np.array_equal(ch.c[:4], c) and ch.c[4:].sum() == 0
    assert np.allclose(ch.P[:4], want, rtol=1e-12, atol=0.0) and np.all(ch.P[4:] == 0.0)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"alpha": [0.5, 0.4], "T": [[-2.0, 0.0], [0.0, -2.0]]}, "sum to 1"),
        ({"alpha": [1.0], "T": [[-2.0]]}, "mean"),
        ({"alpha": [1.0, 0.0], "T": [[-1.0, 2.0], [0.0, -1.0]]}, "row sums"),
        ({"alpha": [1.0], "T": [[-1.0, 0.0]]}, "shape"),
        ({"alpha": [1.0, 0.0], "T": [[-1.0, -0.5], [0.0, -1.0]]}, "off-diagonal"),
        ({"lam": 1.0}, "load"),
        ({"n": 0}, "n"),
        ({"batches": 8}, "batches"),
        ({"holding": "none"}, "holding"),
        ({"start": "full"}, "start"),
        ({"d": 20, "n": 10, "replace": False}, "d"),
        ({"t_end": -1.0}, "t_end"),
    ],
)
def test_bad_input(kw, match):
    args = {"n": 10, "d": 2, "lam": 0.5, "alpha": [1.0], "T": [[-1.0]]} | kw
    with pytest.raises(ValueError, match=match):
        simulate_phase(args.pop("n"), args.pop("d"), args.pop("lam"), args.pop("alpha"), args.pop("T"), **args)


# ------------------------------------------------------------ mean field
@pytest.mark.parametrize(("d", "lam"), [(2, 0.9), (3, 0.99), (5, 0.95), (1, 0.7)])
def test_meanfield_one_phase_is_todays(d, lam):
    from supermarket.meanfield.phase import phase_fixed_point
    from supermarket.theory import fixed_point

    fp = phase_fixed_point(d, lam, [1.0], [[-1.0]])
    assert np.max(np.abs(fp.u - fixed_point(d, lam, levels=len(fp.u)))) < 1e-12


def test_meanfield_one_phase_drift_is_todays():
    from supermarket.meanfield.dynamics import drift
    from supermarket.meanfield.phase import phase_drift

    u = np.array([0.8, 0.5, 0.2, 0.05, 0.01, 0.0])
    x = (u - np.append(u[1:], 0.0))[:, None]
    dx = phase_drift(x, 0.85, 3, np.ones(1), -np.ones((1, 1)), np.ones(1))[:, 0]
    du = np.cumsum(dx[::-1])[::-1]
    ref = drift(u, 3, 0.85)
    assert np.allclose(du[:-1], np.asarray(ref)[:-1], rtol=0, atol=1e-15)


@pytest.mark.parametrize("name", ["E2", "E4", "H2", "C3"])
def test_meanfield_d1_is_mph1(name):
    from supermarket.meanfield.phase import phase_fixed_point

    fp = phase_fixed_point(1, 0.7, *LAWS[name])
    assert np.max(np.abs(fp.u[:40] - mph1_tail(0.7, *LAWS[name], 40))) < 1e-12


@pytest.mark.parametrize("name", ["E4", "H2", "C3"])
def test_meanfield_identities(name):
    # (I1) and (I2) hold exactly at the fixed point (docs/model.md §13)
    from supermarket.meanfield.phase import phase_fixed_point

    a, T = LAWS[name]
    fp = phase_fixed_point(2, 0.9, a, T)
    assert fp.flow_error < 1e-13 and fp.residual < 1e-13
    assert np.allclose(fp.x.sum(axis=0), 0.9 * np.linalg.solve(-np.asarray(T).T, a), atol=1e-13)


@pytest.mark.parametrize(
    ("name", "lam", "n", "t_end"),
    [("E4", 0.9, 10_000, 300.0), pytest.param("H2", 0.8, 10_000, 3000.0, marks=pytest.mark.slow)],
)
def test_meanfield_matches_large_n(name, lam, n, t_end):
    # the mean field is the n → ∞ limit; at n = 10^4 the 1/n bias is far below the error bars
    from supermarket.meanfield.phase import phase_fixed_point

    a, T = LAWS[name]
    fp = phase_fixed_point(2, lam, a, T)
    r = simulate_phase(n, 2, lam, a, T, t_end=t_end, burn_in=20.0, seed=1, start="fixed-point")
    assert r.reliable
    L = 6
    ok, z = _close(r.u_mean_cv[:L], r.u_stderr_cv[:L], fp.u[:L], fp.u[:L] > 1e-3)
    assert ok, z


def test_bad_input_exact_and_meanfield():
    from supermarket.meanfield.phase import phase_fixed_point

    with pytest.raises(ValueError, match="cap"):
        solve_phase(3, 2, 0.5, *LAWS["H2"], cap=500)
    with pytest.raises(ValueError, match="d"):
        solve_phase(2, 3, 0.5, [1.0], [[-1.0]], replace=False)
    with pytest.raises(ValueError, match="load"):
        phase_fixed_point(2, 1.2, [1.0], [[-1.0]])
    with pytest.raises(TypeError):
        check_ph("abc", [[-1.0]])
