"""JBT(T = d) on the phase-type count engine (docs/model.md §2, §13), against facts it did not
produce: the rule's closed form ``P_ℓ`` written out here, the exact stationary law of tiny
systems (:mod:`supermarket.stationary`), an exact joined law built here from the labelled-queue
chain (for the sojourn quantiles), the profile engine (exp service) and JIQ at ``T = 1``.

Tolerances: 4.5 standard errors of the compared difference (batch means), fixed seeds."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.optimize as so
import scipy.sparse as sp
import scipy.sparse.linalg as spl

from supermarket.engines.tables import JBT
from supermarket.simulation import simulate
from supermarket.simulation.phase import PhaseChain, simulate_phase
from supermarket.simulation.phase_run import simulate_phase_service
from supermarket.stationary.phase import solve_phase
from supermarket.stationary.profile import solve
from supermarket.system import policies as pol

ERLANG2 = (np.array([1.0, 0.0]), np.array([[-2.0, 2.0], [0.0, -2.0]]))
H2 = (np.array([0.8, 0.2]), np.array([[-1.6, 0.0], [0.0, -0.4]]))  # mean 0.8/1.6 + 0.2/0.4 = 1
EXP = (np.array([1.0]), np.array([[-1.0]]))
K_SE = 4.5


def _closed_form_p(c: np.ndarray, n: int, T: int) -> np.ndarray:
    """``P_ℓ`` of JBT(T) for the profile ``c`` (``c[ℓ] = c_ℓ``, ``c[0] = n``): a uniform queue
    shorter than ``T`` while one is (``c_T < n``), else a uniform queue (docs/model.md §2)."""
    ct = int(c[T]) if T < c.size else 0
    out = np.zeros(c.size)
    out[0] = 1.0
    for ell in range(1, c.size):
        if ct < n:
            out[ell] = max(int(c[ell]) - ct, 0) / (n - ct) if ell < T else 0.0
        else:
            out[ell] = int(c[ell]) / n
    return out


@pytest.mark.parametrize("d", [2, 3])
def test_the_kernels_p_is_the_rules_closed_form_after_every_chunk(d):
    # the P the kernel keeps (levels 1..top+1) after every few events, against the closed form:
    # a stale level (no refresh when c_T changes), T = d ± 1, or a P_ℓ that ignores c_T fails
    n = 5
    ch = PhaseChain(n, d, 0.9, *H2, -H2[1].sum(axis=1), replace=True, seed=np.random.SeedSequence(3),
                    holding_exp=False, policy=JBT)  # fmt: skip
    full = below = above = 0
    for _ in range(3000):
        ch.run_events(7)
        top = int(ch.ints[0])
        np.testing.assert_allclose(ch.P[: top + 2], _closed_form_p(ch.c[: top + 2], n, d), rtol=1e-15, atol=0)
        full += int(ch.c[d] == n)
        below += int(0 < ch.c[d] < n)
        above += int(ch.c[d] == n and top > d)
    assert full > 50 and below > 50 and above > 20  # both regimes, and levels above T opened
    # set_counts derives the same P, in both regimes
    for rows in ([[0, 0], [1, 0], [2, 1], [1, 0]], [[0, 0]] + [[0, 0]] * (d - 1) + [[4, 0], [0, 1]]):
        ch.set_counts(np.array(rows))
        np.testing.assert_allclose(ch.P, _closed_form_p(ch.c, n, d), rtol=1e-15, atol=0)


def test_threshold_one_is_jiq_event_for_event():
    # T = 1: JBT's P_ℓ is JIQ's 1{c_1 = n}·c_ℓ/n, the same doubles: the same path for the same seed
    kw = dict(t_end=300.0, batches=32, seed=4)
    a = simulate_phase(6, 1, 0.85, *H2, policy="jbt", **kw)
    b = simulate_phase(6, 1, 0.85, *H2, policy="jiq", **kw)
    assert a.events == b.events
    np.testing.assert_array_equal(a.u_mean, b.u_mean)
    np.testing.assert_array_equal(a.ud_mean, b.ud_mean)


def _pad(a, L):
    out = np.zeros(L)
    out[: min(len(a), L)] = np.asarray(a, dtype=float)[:L]
    return out


def _close(est, se, exact, what):
    assert np.all(np.abs(est - exact) <= K_SE * se + 1e-12), (what, est, exact, se)


def test_erlang_matches_the_exact_law():
    n, d, lam = 3, 2, 0.7
    law = solve_phase(n, d, lam, *ERLANG2, cap=18, policy="jbt")  # truncation 8e-7, far below the errors
    r = simulate_phase(n, d, lam, *ERLANG2, policy="jbt", t_end=1.5e5, batches=128, seed=21)
    L = 6
    seen = _pad(law.u, L) > 1e-3
    assert seen.sum() == L  # levels above T = d are reached (the "else uniform" branch runs)
    _close(_pad(r.u_mean, L)[seen], _pad(r.u_stderr, L)[seen], _pad(law.u, L)[seen], "u")
    _close(_pad(r.u_mean_cv, L)[seen], _pad(r.u_stderr_cv, L)[seen], _pad(law.u, L)[seen], "u (cv)")
    # E[P_ℓ]: the lazy ∫P_ℓ of every level, refreshed when c_T changes
    _close(_pad(r.ud_mean, L)[seen], _pad(r.ud_stderr, L)[seen], _pad(law.ud, L)[seen], "E[P]")
    _close(r.mean_queue_length, r.mean_queue_length_stderr, law.mean_queue_length, "mean queue length")


def test_exp_matches_the_exact_law_and_the_profile_engine():
    n, d, lam = 3, 2, 0.8
    law = solve(n, d, lam, policy="jbt", cap=30)
    r = simulate_phase(n, d, lam, *EXP, policy="jbt", t_end=1e5, batches=128, seed=8)
    b = simulate(n, d, lam, policy="jbt", engine="profile", time_mode="continuous", steps=10**6, seed=9)
    L = 6
    exact = _pad(law.u_mean, L)
    u, se = _pad(r.u_mean, L), _pad(r.u_stderr, L)
    _close(u, se, exact, "u vs exact")
    _close(u, np.hypot(se, _pad(b.u_stderr, L)), _pad(b.u_mean, L), "u vs profile engine")
    _close(_pad(r.ud_mean, L), _pad(r.ud_stderr, L), _pad(law.u_mean[1:], L) / lam, "E[P] vs exact (flow balance)")


def _exact_jbt_joined(n, T, lam, alpha, Tm, cap):
    """``p[ℓ, φ]``: the law of what an arrival joins (length ``ℓ``, the phase ``φ`` in service, or
    the starting phase at an idle queue) under JBT(T), from the labelled-queue chain built by
    the definition (a uniform queue of length < T if any, else a uniform queue); PASTA."""
    K = alpha.size
    t0 = -Tm.sum(axis=1)
    states = list(itertools.product(range(1 + cap * K), repeat=n))
    index = {s: i for i, s in enumerate(states)}

    def length(q):
        return 0 if q == 0 else (q - 1) // K + 1

    def joins(lens):
        below = [i for i, x in enumerate(lens) if x < T]
        pick = below or list(range(n))
        out = np.zeros(n)
        out[pick] = 1.0 / len(pick)
        return out

    rows, cols, vals = [], [], []

    def add(i, s, pos, q, rate):
        new = list(s)
        new[pos] = q
        rows.append(i), cols.append(index[tuple(new)]), vals.append(rate)

    for i, s in enumerate(states):
        lens = [length(q) for q in s]
        pj = joins(lens)
        for pos, q in enumerate(s):
            if lens[pos] < cap:
                if q == 0:
                    for ph in range(K):
                        add(i, s, pos, 1 + ph, n * lam * pj[pos] * alpha[ph])
                else:
                    add(i, s, pos, q + K, n * lam * pj[pos])
            if q == 0:
                continue
            ph = (q - 1) % K
            for to in range(K):
                if to != ph and Tm[ph, to] > 0:
                    add(i, s, pos, q - ph + to, Tm[ph, to])
            if lens[pos] == 1:
                add(i, s, pos, 0, t0[ph])
            else:
                for to in range(K):
                    add(i, s, pos, q - ph - K + to, t0[ph] * alpha[to])
    S = len(states)
    Q = sp.coo_matrix((vals, (rows, cols)), shape=(S, S)).tocsr()
    Q = (Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())).T.tolil()
    Q[0, :] = 1.0  # π Q = 0 with Σ π = 1
    rhs = np.zeros(S)
    rhs[0] = 1.0
    pi = spl.spsolve(Q.tocsc(), rhs)
    p = np.zeros((cap + 1, K))
    for i, s in enumerate(states):
        pj = joins([length(q) for q in s])
        for pos, q in enumerate(s):
            if q == 0:
                p[0] += pi[i] * pj[pos] * alpha
            else:
                p[length(q), (q - 1) % K] += pi[i] * pj[pos]
    return p


def _sojourn_quantile(p, alpha, Tm, q):
    """The ``q``-quantile of the FIFO sojourn of a customer joining ``(ℓ, φ)`` with law ``p``: the
    service left from ``φ`` and ``ℓ`` whole services (level r = services left, a matrix exponential)."""
    L, K = p.shape
    t0 = -Tm.sum(axis=1)
    G = np.kron(np.eye(L), Tm) + np.kron(np.eye(L, k=-1), np.outer(t0, alpha))

    def tail(t):
        return float((p * (sl.expm(G * t) @ np.ones(L * K)).reshape(L, K)).sum()) - (1 - q)

    hi = 1.0
    while tail(hi) > 0:
        hi *= 2
    return so.brentq(tail, 0.0, hi, xtol=1e-10)


def test_sojourn_quantiles_match_the_exact_joined_law():
    n, d, lam = 2, 2, 0.7
    p = _exact_jbt_joined(n, d, lam, *ERLANG2, cap=20)
    assert p.sum() == pytest.approx(1.0, abs=1e-6)  # the cap loses a negligible share of the arrivals
    r = simulate_phase_service(n, d, lam, "erlang:2", policy="jbt", steps=2 * 10**6, seed=13)
    for q in (0.5, 0.9, 0.99):
        e = r.response.sojourn_quantiles[q]
        exact = _sojourn_quantile(p, *ERLANG2, q)
        assert e.reliable and e.stderr > 0 and abs(e.mean - exact) < K_SE * e.stderr, (q, e.mean, exact, e.stderr)
    # the threshold d ± 1 gives another joined law, far outside these error bars
    e = r.response.sojourn_quantiles[0.9]
    for other in (1, 3):
        wrong = _sojourn_quantile(_exact_jbt_joined(n, other, lam, *ERLANG2, cap=20), *ERLANG2, 0.9)
        assert abs(e.mean - wrong) > 10 * e.stderr, (other, e.mean, wrong, e.stderr)


def test_an_unknown_code_is_refused_by_the_phase_kernel(monkeypatch):
    monkeypatch.setitem(pol.RULES, "jiq", dataclasses.replace(pol.RULES["jiq"], code=7))
    with pytest.raises(ValueError, match="policy code 7 is unknown to the phase kernel"):
        simulate_phase(5, 2, 0.8, *ERLANG2, policy="jiq", t_end=10.0, batches=32, seed=1)
    ch = PhaseChain(5, 2, 0.8, *ERLANG2, np.array([0.0, 2.0]), replace=True, seed=np.random.SeedSequence(1),
                    holding_exp=False, policy=7)  # fmt: skip
    with pytest.raises(ValueError, match="policy code 7"):
        ch.run_events(10)
    assert ch.events == 0 and math.isclose(ch.clock[0], 0.0)
