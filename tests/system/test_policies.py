"""Dispatch rules (supermarket.system.policies, docs/model.md §2 "Other dispatch rules"), checked
against independent facts:

- ``random`` is ``n`` independent M/M/1 queues: ``E[u_i] = λ^i`` at every ``n`` (and, with
  the queue lengths capped at ``M``, each queue is M/M/1/M: ``P(x >= i) = (λ^i −
  λ^{M+1})/(1 − λ^{M+1})``); its covariance is that of independent queues; its refined
  mean field is 0;
- ``jsq`` and ``jiq`` at ``n = 1`` are M/M/1, and at ``n = 2, 3`` the exact solver agrees to
  1e-10 with a generator written here by brute force over per-queue states (independent of
  stationary.py and of policies.p_levels);
- the profile and buckets engines, in both time modes and with the windowed tables,
  agree with the exact solver at tiny ``n`` for every rule, for ``E[u_i]`` and for the
  separately integrated ``E[P_i]`` (tolerances: 4.5 batch-means standard errors);
- at large ``n`` the simulation agrees with the mean field: ``random`` with ``λ^i``;
  ``jsq`` and ``jiq`` with the fluid fixed point ``(λ, 0, 0, …)``.

One-token mutations these catch (each tried by hand on the code): JIQ joining the idle
queue only when two are idle (``c_1 < n − 1``), i.e. joining position ``n − 1``; JIQ's
integrals of ``P_i`` not closed when ``1{c_1 = n}`` flips; ``random`` using ``d`` (its
tables ``(c/n)^d``: every random test runs with ``d = 3``); JSQ's table ``1{c >= n − 1}``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from supermarket import meanfield as mf
from supermarket.engines.tables import p_table
from supermarket.model import Params, seed_to_uint64
from supermarket.simulation import Chain
from supermarket.stationary.profile import solve
from supermarket.system import policies as pol

LAM = 0.7


# ----------------------------------------------------------------- helpers
def _chain(policy, n, lam, *, engine="profile", d=3, seed=1, continuous=False, force_window=False, counts=()):
    """A chain of the engines running dispatch rule ``policy`` (``d = 3``: unused but by jsq-d)."""
    return Chain(
        Params(n, d, lam),
        engine,
        list(counts),
        seed_to_uint64(np.random.SeedSequence(seed)),
        continuous=continuous,
        policy=policy,
        _force_window=force_window,
    )


def _time_averages(ch, n, levels, *, burn, batches, per_batch):
    """``E[u_i]`` and ``E[P_i]`` (i = 1..levels) as ratio estimators over equal batches of
    events, with batch-means standard errors (delta method for the ratio)."""
    ch.advance(max_events=burn)
    A_c, A_P, T = [], [], []
    for _ in range(batches):
        ch.start_measuring()
        t0 = ch.now
        ch.advance(max_events=per_batch)
        m = ch.measures()
        A_c.append(m["area_c"][:levels] / n)
        A_P.append(m["area_P"][:levels])
        T.append(ch.now - t0)
    T = np.array(T)[:, None]
    out = []
    for A in (np.array(A_c), np.array(A_P)):
        mean = A.sum(0) / T.sum()
        r = A - mean * T
        se = np.sqrt((r**2).sum(0) / (batches * (batches - 1))) / T.mean()
        out.append((mean, se))
    return out


def _brute_force_u(policy, n, lam, M):
    """``E[u_i]``, ``i = 1..M``, of rule ``policy`` with queue lengths capped at ``M`` (an
    arrival that would join a queue of length ``M`` is lost), from the generator over the
    per-queue states ``{0..M}^n`` written from the rule's definition."""
    states = list(itertools.product(range(M + 1), repeat=n))
    index = {s: i for i, s in enumerate(states)}
    S = len(states)
    Q = np.zeros((S, S))
    for s in states:
        i = index[s]
        if policy == "jsq":
            targets = [j for j in range(n) if s[j] == min(s)]  # a shortest queue, ties uniform
        elif policy == "jiq":
            idle = [j for j in range(n) if s[j] == 0]
            targets = idle or list(range(n))  # an idle queue if any, else a uniform one
        else:  # random
            targets = list(range(n))
        for j in targets:
            if s[j] < M:
                t = list(s)
                t[j] += 1
                Q[i, index[tuple(t)]] += n * lam / len(targets)
        for j in range(n):
            if s[j] > 0:
                t = list(s)
                t[j] -= 1
                Q[i, index[tuple(t)]] += 1.0
    Q[np.arange(S), np.arange(S)] = -Q.sum(axis=1)
    A = Q.T.copy()
    A[-1, :] = 1.0  # replace one balance equation by the normalisation
    b = np.zeros(S)
    b[-1] = 1.0
    pi = np.linalg.solve(A, b)
    X = np.array(states)
    return np.array([(pi * (X >= i).sum(axis=1)).sum() / n for i in range(1, M + 1)])


# ----------------------------------------------------------------- the definitions
def test_names_codes_and_bad_input():
    assert pol.POLICIES == ("jsq-d", "random", "jsq", "jiq", "jbt")
    assert [pol.policy_code(p) for p in pol.POLICIES] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="policy must be one of"):
        pol.check_policy("jsq2")
    with pytest.raises(TypeError, match="policy must be a string"):
        pol.check_policy(2)
    with pytest.raises(ValueError, match="policy must be one of"):
        solve(2, 1, 0.5, policy="power-of-two")


def test_p_levels_from_their_definitions():
    """P_ℓ(c) against the rules' definitions, counted over every queue-lengths vector of
    n = 4 with lengths <= 3: the probability that the joined queue has length >= ℓ."""
    n = 4
    for x in itertools.product(range(4), repeat=n):
        x = np.array(x)
        c = np.array([(x >= l).sum() for l in range(1, 4)])
        short = x == x.min()
        idle = x == 0
        for l in range(1, 4):
            want = {
                "random": (x >= l).mean(),
                "jsq": (x[short] >= l).mean(),
                "jiq": (x[idle] >= l).mean() if idle.any() else (x >= l).mean(),
                "jsq-d": ((x >= l).mean()) ** 2,
            }
            for p, w in want.items():
                assert pol.p_levels(p, c, n, d=2)[l - 1] == pytest.approx(w, abs=1e-15), (p, x, l)


@pytest.mark.parametrize("policy", ["random", "jsq", "jiq", "jsq-d"])
def test_kernel_tables_are_the_rules_p(policy):
    """The engines' tables (their own layer's P, tables.p_rule) equal policies.p_levels at
    every count, at level 2 with c_1 = n (JIQ's factor is 1 there) and at level 1."""
    n, d = 7, 3
    tab = p_table(n, d, True, pol.policy_code(policy))
    for c in range(n + 1):
        assert tab[c] == pytest.approx(pol.p_levels(policy, [n, c], n, d=d)[1], rel=1e-14, abs=1e-300)
        if policy != "jiq":
            assert tab[c] == pytest.approx(pol.p_levels(policy, [c], n, d=d)[0], rel=1e-14, abs=1e-300)


# ----------------------------------------------------------------- the exact solver
def test_random_is_independent_mm1_queues():
    """E[u_i] = λ^i at every n, and at a fixed cap M each queue is M/M/1/M (exact to
    1e-12); d is unused (d = 3 given).  Tolerance of the first: the truncation, whose cap
    has mass at least (1 − λ)λ^M (one queue at M) and below tol, so |E[u_i] − λ^i| <=
    λ^{M+1}/(1 − λ^{M+1}) <~ tol·λ/(1 − λ)."""
    tol = 1e-7
    for n in (1, 2, 3):
        r = solve(n, 3, LAM, policy="random", tol=tol)
        i = np.arange(1, 9)
        bound = 1.01 * tol * LAM / (1 - LAM)
        np.testing.assert_allclose(r.u_mean[:8], LAM**i, atol=bound, rtol=0)
        np.testing.assert_allclose(r.ud_mean[:8], LAM**i, atol=bound, rtol=0)  # P_i = u_i
        # Σ_i: the cap's M levels each within the bound, and the tail Σ_{i>M} λ^i = λ^{M+1}/(1 − λ)
        M = r.truncation["cap"]
        assert r.mean_queue_length == pytest.approx(LAM / (1 - LAM), abs=(M + 1 / (1 - LAM)) * bound)
    M = 6
    r = solve(3, 3, LAM, policy="random", cap=M)
    i = np.arange(1, M + 1)
    np.testing.assert_allclose(r.u_mean, (LAM**i - LAM ** (M + 1)) / (1 - LAM ** (M + 1)), atol=1e-12)


@pytest.mark.parametrize("policy", ["jsq", "jiq"])
def test_n1_is_mm1(policy):
    """n = 1: every rule is M/M/1 (truncation bound as in the random test)."""
    tol = 1e-12
    r = solve(1, 2, LAM, policy=policy, tol=tol)
    np.testing.assert_allclose(r.u_mean[:8], LAM ** np.arange(1, 9), atol=1.01 * tol * LAM / (1 - LAM), rtol=0)


@pytest.mark.parametrize("policy,n", [("jsq", 2), ("jsq", 3), ("jiq", 2), ("jiq", 3), ("random", 3)])
def test_exact_solver_against_brute_force_generator(policy, n):
    M = 9
    want = _brute_force_u(policy, n, 0.8, M)
    got = solve(n, 2, 0.8, policy=policy, cap=M).u_mean
    np.testing.assert_allclose(got, want, atol=1e-10, rtol=0)


def test_rules_order_and_flow_balance():
    """E[u_1] = λ for every rule (flow balance, to the truncation tol), and the mean queue
    length orders JSQ < JSQ(2) < random (JSQ is the best rule that sees lengths only,
    random the d = 1 case of JSQ(d))."""
    r = {p: solve(3, 2, LAM, policy=p, tol=1e-7) for p in pol.POLICIES}
    for p, x in r.items():
        assert x.u_mean[0] == pytest.approx(LAM, abs=1e-7), p
        assert x.policy == p and x.to_dict()["policy"] == p
    assert r["jsq"].mean_queue_length < r["jsq-d"].mean_queue_length < r["random"].mean_queue_length


# ----------------------------------------------------------------- simulation vs exact
SIM_CASES = [
    # policy, engine, continuous, windowed tables
    ("random", "profile", False, False),
    ("random", "profile", True, True),
    ("random", "buckets", True, False),
    ("random", "buckets", False, True),
    ("jsq", "profile", False, False),
    ("jsq", "buckets", False, False),
    ("jsq", "profile", True, True),
    ("jiq", "profile", False, False),
    ("jiq", "profile", True, True),
    ("jiq", "buckets", False, False),
    ("jiq", "buckets", True, False),
    ("jsq-d", "profile", False, False),
]


@pytest.mark.parametrize("policy,engine,continuous,window", SIM_CASES)
def test_simulation_matches_exact_solver(policy, engine, continuous, window):
    """E[u_i] and E[P_i] (levels 1..4) of a run at n = 3 within 4.5 standard errors of the
    exact law: ~48 comparisons in all, so a false alarm has probability ~3e-4."""
    n, lam = 3, LAM
    exact = solve(n, 3, lam, policy=policy, tol=1e-6)  # truncation error ~1e-6, SE ~1e-3
    ch = _chain(policy, n, lam, engine=engine, seed=11, continuous=continuous, force_window=window)
    (u, se_u), (P, se_P) = _time_averages(ch, n, 4, burn=20_000, batches=40, per_batch=50_000)
    assert np.all(np.abs(u - exact.u_mean[:4]) <= 4.5 * se_u), (u, exact.u_mean[:4], se_u)
    assert np.all(np.abs(P - exact.ud_mean[:4]) <= 4.5 * se_P), (P, exact.ud_mean[:4], se_P)


def test_jiq_idle_arrivals_never_wait():
    """JIQ with an idle queue joins one: from an empty start at n = 50 and λ = 0.5, the
    probability that all 50 are busy is ~1e-5 (binomial bound), so no queue reaches 2 in
    a short run, while random routing puts ~λ² = 25 % of the queues at 2 or more."""
    ch = _chain("jiq", 50, 0.5, seed=3)
    (u, _), _ = _time_averages(ch, 50, 2, burn=5_000, batches=4, per_batch=20_000)
    assert u[1] == 0.0 and abs(u[0] - 0.5) < 0.05


# ----------------------------------------------------------------- mean field vs simulation
def test_random_large_n_matches_mean_field():
    """n = 2000: E[u_i] = λ^i (the mean field, exact at every n for random routing).  Each
    batch is 100 time units, ~3 relaxation times of M/M/1 at λ = 0.7 (1/(1 − √λ)² ≈ 37)."""
    n = 2000
    start = np.rint(n * LAM ** np.arange(1, 20)).astype(int)
    ch = _chain("random", n, LAM, seed=5, counts=start)
    per = int(100 * n * (1 + LAM))
    (u, se), _ = _time_averages(ch, n, 5, burn=per, batches=40, per_batch=per)
    want = pol.fluid_fixed_point("random", LAM, 5)
    assert np.all(np.abs(u - want) <= 4.5 * se), (u, want, se)


@pytest.mark.parametrize("policy", ["jsq", "jiq"])
def test_jsq_jiq_large_n_fluid_fixed_point(policy):
    """n = 10^4, λ = 0.9: the fluid fixed point (λ, 0, 0, …): E[u_1] within 4.5 standard
    errors of λ, and no queue reaches length 2 (all n busy needs the ~10^3 idle queues of
    a ~30-standard-deviation excursion)."""
    n = 10_000
    ch = _chain(policy, n, 0.9, seed=7, counts=[9000])
    (u, se), _ = _time_averages(ch, n, 2, burn=100_000, batches=20, per_batch=100_000)
    fp = pol.fluid_fixed_point(policy, 0.9, 2)
    assert abs(u[0] - fp[0]) <= 4.5 * se[0] and u[1] == fp[1] == 0.0


def test_mean_field_rules():
    """random: the drift of d = 1 (fixed point λ^i, V = 0, covariance of independent
    queues λ^{max(i,j)} − λ^{i+j}); jsq and jiq refused with a ValueError that says why."""
    r = mf.refined_mean_field(4, LAM, policy="random")
    np.testing.assert_allclose(r.pi[:6], LAM ** np.arange(1, 7), rtol=1e-12)
    assert np.abs(r.V).max() == 0.0
    c = mf.lna(4, LAM, policy="random").covariance[:4, :4]
    i = np.arange(1, 5)
    np.testing.assert_allclose(c, LAM ** np.maximum.outer(i, i) - LAM ** np.add.outer(i, i), atol=1e-9)
    sol = mf.solve_meanfield(3, LAM, T=2000.0, policy="random")  # ~50 relaxation times
    np.testing.assert_allclose(sol.final[:4], LAM**i, atol=1e-6)
    for p in ("jsq", "jiq"):
        calls = (
            lambda p=p: mf.refined_mean_field(2, LAM, policy=p),
            lambda p=p: mf.lna(2, LAM, policy=p),
            lambda p=p: mf.solve_meanfield(2, LAM, T=1.0, policy=p),
            lambda p=p: mf.fixed_point_newton(2, LAM, policy=p),
            lambda p=p: pol.p_meanfield(p, [0.5]),
        )
        for call in calls:
            with pytest.raises(ValueError, match="discontinuous"):
                call()


# ----------------------------------------------------------------- the CLI
def _cli(args):
    from click.testing import CliRunner

    from supermarket.cli import main

    return CliRunner().invoke(main, args, catch_exceptions=False)


def test_cli_exact_and_meanfield_policy():
    import json

    r = _cli(["exact", "--n", "2", "--load", "0.7", "--policy", "random", "--tol", "1e-8", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["policy"] == "random"
    np.testing.assert_allclose(out["u_mean"][:4], LAM ** np.arange(1, 5), atol=1e-7)
    r = _cli(["meanfield", "--policy", "random", "--d", "3", "--load", "0.7", "--n", "100", "--json"])
    out = json.loads(r.stdout)
    assert out["params"]["policy"] == "random"
    np.testing.assert_allclose(out["fixed_point"][:4], LAM ** np.arange(1, 5), rtol=1e-12)
    assert out["mean_queue_length"] == pytest.approx(LAM / (1 - LAM), rel=1e-12)
    r = _cli(["meanfield", "--policy", "jiq", "--load", "0.7", "--json"])
    out = json.loads(r.stdout)
    assert out["fixed_point"] == [0.7] and out["sojourn"]["mean"] == pytest.approx(1.0)
    r = _cli(["meanfield", "--policy", "jsq", "--time", "2"])
    assert r.exit_code == 2 and "discontinuous" in r.stderr and "Traceback" not in r.stderr
    r = _cli(["exact", "--policy", "jsq3"])
    assert r.exit_code == 2


@pytest.mark.parametrize("engine", ["profile", "buckets"])
@pytest.mark.parametrize("policy", ["jsq-d", "random", "jsq", "jiq"])
def test_integrals_over_a_quiet_stretch_are_p_levels(policy, engine):
    """No event before t = 1 in discrete time: over [0, 0.5] the integrals are exactly
    c_i·t and P_i(c)·t, with P of policies.p_levels, with an idle queue (c_1 < n: JIQ's
    P_i are all 0) and without."""
    n = 4
    for counts in ([3, 1], [4, 2, 1]):
        ch = _chain(policy, n, LAM, engine=engine, counts=counts)
        ch.start_measuring()
        ch.advance(t_stop=0.5)
        m = ch.measures()
        k = len(counts)
        np.testing.assert_array_equal(m["area_c"][:k], 0.5 * np.array(counts))
        np.testing.assert_allclose(m["area_P"][:k], 0.5 * pol.p_levels(policy, counts, n, d=3), rtol=1e-14)


@pytest.mark.parametrize("engine", ["profile", "buckets"])
@pytest.mark.parametrize("continuous", [False, True])
def test_jiq_idle_loop_is_the_general_loop_bit_for_bit(continuous, engine):
    """The engines run JIQ in a loop of their own while two queues or more are idle, and in
    the general loop otherwise; a good-set clock (k = 1) keeps them in the general loop
    throughout.  Same seed, same random numbers: the same counts, integrals (and queues)."""
    out = []
    for k in (0, 1):
        ch = Chain(
            Params(20, 2, 0.9),
            engine,
            [15, 3],
            seed_to_uint64(np.random.SeedSequence(4)),
            continuous=continuous,
            k=k,
            lo=np.zeros(k),
            hi=np.full(k, 20.0),
            policy="jiq",
        )
        ch.start_measuring()
        ch.advance(max_events=300_000)
        m = ch.measures()
        lengths = ch.lengths() if engine == "buckets" else np.zeros(1)
        out.append((ch.counts(), m["area_c"], m["area_P"], m["maxtime"], ch.now, lengths))
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------- simulate(policy=) and the CLI
@pytest.mark.parametrize("policy", ["random", "jsq", "jiq"])
def test_simulate_policy_matches_exact(policy):
    """simulate(..., policy=) at n = 3: E[u_i] within 4.5 of its own standard errors of the
    exact law; no paper-000 statement (k, good set) for rules other than JSQ(d); the
    flow-balance self-checks (every rule) are kept."""
    from supermarket.simulation import simulate

    exact = solve(3, 2, LAM, policy=policy, tol=1e-6)
    r = simulate(3, 2, LAM, policy=policy, steps=2_000_000, seed=3)
    u, se = np.asarray(r.u_mean[:3]), np.asarray(r.u_stderr[:3])
    assert np.all(np.abs(u - exact.u_mean[:3]) <= 4.5 * se), (u, exact.u_mean[:3], se)
    assert r.policy == policy and r.to_dict()["system"]["policy"] == policy
    assert r.k is None and r.good_set_fraction is None
    text = r.summary()
    assert "k_(λ,d)" not in text and "good set" not in text and policy in text
    assert r.self_checks and r.self_checks[0]["identity"] == "E[u_1] = λ"


def test_simulate_policy_bad_input():
    from supermarket.simulation import simulate

    with pytest.raises(ValueError, match="policy must be one of"):
        simulate(3, 2, LAM, policy="jsq2", steps=1000)
    assert simulate(3, 2, LAM, policy="jiq", engine="queues", steps=1000).engine == "queues"  # every rule runs there
    with pytest.raises(ValueError, match="start 'perfect': policy: jiq is no JSQ"):
        simulate(3, 2, LAM, policy="jiq", start="perfect", steps=1000)
    assert Chain(Params(3, 2, LAM), "queues", [], 1, policy="random").advance(max_events=10) == 10


def test_cli_simulate_policy():
    import json

    r = _cli(["simulate", "--n", "50", "--load", "0.7", "--policy", "random", "--steps", "200000", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["system"]["policy"] == "random" and out["k"] is None
    r = _cli(["simulate", "--policy", "jsq2"])
    assert r.exit_code == 2
