"""Response-time quantiles and CDFs of the count engines from what each arrival joins
(docs/model.md §13.2, §15.9): checked against the exact joined law of tiny systems (an
independent generator here, PASTA, and dense matrix exponentials), the M/PH/1 closed form
(d = 1), the profile engine's Erlang mixture (one class of exponential servers), the event
engine, and the identity law mean = Little's law mean."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.optimize as so
import scipy.sparse as sp
import scipy.sparse.linalg as spl

from supermarket.design.sojourn import mph1_sojourn_quantile
from supermarket.simulation.classes import simulate_classes
from supermarket.simulation.classes_phase import simulate_classes_phase
from supermarket.simulation.phase_run import simulate_phase_service

QS = (0.5, 0.9, 0.99)
ERLANG2 = (np.array([1.0, 0.0]), np.array([[-2.0, 2.0], [0.0, -2.0]]))
EXP = (np.array([1.0]), np.array([[-1.0]]))


def _exact_joined(speeds, klass, lam, d, alpha, T, cap):
    """The law ``p[k, ℓ, φ]`` an arrival joins in the labelled-server chain of ``len(speeds)``
    servers (server ``i`` in class ``klass[i]`` at speed ``speeds[i]``), JSQ(d) with replacement:
    the joined length has ``P(ℓ >= i) = (C_i/n)^d`` and the server is uniform among those of that
    length (docs/model.md §15.1); by PASTA, the stationary law weighted by the join probabilities."""
    n, K = len(speeds), alpha.size
    t0 = -T.sum(axis=1)
    m = 1 + cap * K
    states = list(itertools.product(range(m), repeat=n))
    index = {s: i for i, s in enumerate(states)}
    arrival = n * lam * float(np.mean(speeds))

    def length(q):
        return 0 if q == 0 else (q - 1) // K + 1

    def joins(lens):
        out = np.zeros(n)
        for i, li in enumerate(lens):
            ge = sum(x >= li for x in lens) / n
            gt = sum(x >= li + 1 for x in lens) / n
            out[i] = (ge**d - gt**d) / sum(x == li for x in lens)
        return out

    rows, cols, vals = [], [], []
    for i, s in enumerate(states):
        lens = [length(q) for q in s]
        pj = joins(lens)
        for pos, q in enumerate(s):
            new = list(s)
            if lens[pos] < cap:
                if q == 0:
                    for ph in range(K):
                        new[pos] = 1 + ph
                        rows.append(i), cols.append(index[tuple(new)]), vals.append(arrival * pj[pos] * alpha[ph])
                else:
                    new[pos] = q + K
                    rows.append(i), cols.append(index[tuple(new)]), vals.append(arrival * pj[pos])
            if q == 0:
                continue
            ph, sp_ = (q - 1) % K, speeds[pos]
            base = q - ph
            for to in range(K):
                if to != ph and T[ph, to] > 0:
                    new[pos] = base + to
                    rows.append(i), cols.append(index[tuple(new)]), vals.append(sp_ * T[ph, to])
            if lens[pos] == 1:
                new[pos] = 0
                rows.append(i), cols.append(index[tuple(new)]), vals.append(sp_ * t0[ph])
            else:
                for to in range(K):
                    new[pos] = base - K + to
                    rows.append(i), cols.append(index[tuple(new)]), vals.append(sp_ * t0[ph] * alpha[to])
    S = len(states)
    Q = sp.coo_matrix((vals, (rows, cols)), shape=(S, S)).tocsr()
    Q = (Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())).T.tolil()
    Q[0, :] = 1.0  # π Q = 0 with Σ π = 1
    rhs = np.zeros(S)
    rhs[0] = 1.0
    pi = spl.spsolve(Q.tocsc(), rhs)
    p = np.zeros((max(klass) + 1, cap + 1, K))
    for i, s in enumerate(states):
        lens = [length(q) for q in s]
        pj = joins(lens)
        for pos, q in enumerate(s):
            if q == 0:
                p[klass[pos], 0] += pi[i] * pj[pos] * alpha
            else:
                p[klass[pos], lens[pos], (q - 1) % K] += pi[i] * pj[pos]
    return p


def _exact_tails(p, speeds, alpha, T, t):
    """``(P(S > t), P(W > t))`` of the FIFO customer who joins ``(k, ℓ, φ)`` with law ``p``: the
    service left from ``φ`` plus ``ℓ`` whole services (the wait: ``ℓ − 1``) at speed ``s_k``, by
    a dense matrix exponential of the chain (level r = services left)."""
    Kc, L, K = p.shape
    t0 = -T.sum(axis=1)
    G = np.kron(np.eye(L), T) + np.kron(np.eye(L, k=-1), np.outer(t0, alpha))
    S = W = 0.0
    for k in range(Kc):
        v = (sl.expm(G * speeds[k] * t) @ np.ones(L * K)).reshape(L, K)
        S += float((p[k] * v).sum())
        W += float((p[k, 1:] * v[:-1]).sum())
    return S, W


def _exact_quantile(p, speeds, alpha, T, q, kind):
    j = 0 if kind == "sojourn" else 1
    f = lambda t: _exact_tails(p, speeds, alpha, T, t)[j] - (1 - q)  # noqa: E731
    hi = 1.0
    while f(hi) > 0:
        hi *= 2
    return so.brentq(f, 0.0, hi, xtol=1e-10)


def _close(e, exact, k=4.0):
    assert e.reliable and math.isfinite(e.stderr) and e.stderr > 0, e
    assert abs(e.mean - exact) < k * e.stderr, (e.mean, exact, e.stderr)


@pytest.fixture(scope="module")
def tiny_phase():
    r = simulate_phase_service(2, 2, 0.7, "erlang:2", steps=3 * 10**6, seed=11)
    p = _exact_joined([1.0, 1.0], [0, 0], 0.7, 2, *ERLANG2, cap=24)
    return r, p


def test_tiny_phase_quantiles_match_the_exact_joined_law(tiny_phase):
    r, p = tiny_phase
    for q in QS:
        _close(r.response.sojourn_quantiles[q], _exact_quantile(p, [1.0], *ERLANG2, q, "sojourn"))
        _close(r.response.waiting_quantiles[q], _exact_quantile(p, [1.0], *ERLANG2, q, "waiting"))


def test_tiny_phase_cdf_matches_the_exact_joined_law(tiny_phase):
    r, p = tiny_phase
    c = r.cdf(7)
    assert c["sojourn"][0] == 0.0 and c["sojourn_stderr"][0] is None  # a sojourn is positive: no error bar
    for t, fs, es, fw, ew in zip(c["t"], c["sojourn"], c["sojourn_stderr"], c["waiting"], c["waiting_stderr"]):
        S, W = _exact_tails(p, [1.0], *ERLANG2, t) if t > 0 else (1.0, float(p[:, 1:].sum()))
        if es is not None:
            assert abs(fs - (1 - S)) < 4 * es
        assert ew is not None and abs(fw - (1 - W)) < 4 * ew  # at t = 0 the atom P(W = 0) = P(ℓ = 0)


def test_tiny_phase_law_mean_is_littles(tiny_phase):
    r, p = tiny_phase
    m = r.response.sojourn_mean
    # E[S | ℓ, φ] = E[residual from φ] + ℓ: Erlang-2's residual from phase 0 is 1, from phase 1 is 1/2
    exact = float((p[0].sum(axis=1) * np.arange(p.shape[1])).sum() + p[0, :, 0].sum() + 0.5 * p[0, :, 1].sum())
    _close(m, exact)
    lit = r.sojourn_little
    assert abs(m.mean - lit.mean) < 4 * math.hypot(m.stderr, lit.stderr)
    w = r.response.waiting_mean
    assert w.mean == pytest.approx(m.mean - 1.0, abs=3 * w.stderr)  # the wait is the sojourn less a mean-1 service


def test_tiny_classes_match_the_exact_joined_law():
    sc, speeds = "0.5:2,0.5:1", np.array([2.0, 1.0])
    r = simulate_classes(2, 2, 0.7, server_classes=sc, events=3 * 10**6, seed=12)
    p = _exact_joined(list(speeds), [0, 1], 0.7, 2, *EXP, cap=30)
    for q in QS:
        _close(r.response.sojourn_quantiles[q], _exact_quantile(p, speeds, *EXP, q, "sojourn"))
        _close(r.response.waiting_quantiles[q], _exact_quantile(p, speeds, *EXP, q, "waiting"))
    # Erlang(ℓ + 1) at rate s_k: the mean is Σ p (ℓ + 1)/s_k, and Little's law's is the same number
    exact_mean = float(sum((p[k, :, 0] * (np.arange(p.shape[1]) + 1)).sum() / speeds[k] for k in range(2)))
    _close(r.response.sojourn_mean, exact_mean)
    _close(r.sojourn, exact_mean)


def test_tiny_classes_phase_match_the_exact_joined_law():
    sc, speeds = "0.5:2,0.5:1", np.array([2.0, 1.0])
    r = simulate_classes_phase(2, 2, 0.6, server_classes=sc, service="erlang:2", events=4 * 10**6, seed=13)
    p = _exact_joined(list(speeds), [0, 1], 0.6, 2, *ERLANG2, cap=20)
    for q in QS:
        _close(r.response.sojourn_quantiles[q], _exact_quantile(p, speeds, *ERLANG2, q, "sojourn"))
        _close(r.response.waiting_quantiles[q], _exact_quantile(p, speeds, *ERLANG2, q, "waiting"))


@pytest.mark.parametrize("service", ["erlang:2", "hyperexp:2"])
def test_random_routing_is_mph1(service):
    # d = 1: n independent M/PH/1 queues at load λ; the sojourn quantile in closed form
    r = simulate_phase_service(50, 1, 0.6, service, policy="random", steps=4 * 10**6, seed=14)
    for q in QS:
        _close(r.response.sojourn_quantiles[q], mph1_sojourn_quantile(0.6, service, q))


def test_one_exponential_class_is_the_profile_engines_erlang_mixture():
    import supermarket as sm

    c = simulate_classes(100, 2, 0.9, server_classes="1:1", events=10**6, seed=15)
    prof = sm.simulate(100, 2, 0.9, steps=10**6, seed=16)
    se = prof.response.sojourn.stderr["quantiles"]
    for q in QS:
        a, b = c.response.sojourn_quantiles[q], prof.response.sojourn.quantiles[q]
        assert abs(a.mean - b) < 4 * math.hypot(a.stderr, se[q]), (q, a.mean, b)


def test_event_engine_agrees_at_moderate_n():
    sc = "0.5:2,0.5:1"
    import supermarket as sm

    r = simulate_classes_phase(20, 2, 0.8, server_classes=sc, service="erlang:2", events=4 * 10**6, seed=17)
    ev = sm.simulate(20, 2, 0.8, service="erlang:2", server_classes=sc, engine="events", time=3000.0, seed=18)
    for q, e in ev.sojourn_quantiles.items():
        a = r.response.sojourn_quantiles[q]
        assert abs(a.mean - e.mean) < 4 * math.hypot(a.stderr, e.stderr), (q, a.mean, e.mean)


def test_no_law_at_load_one_and_the_shape():
    r = simulate_phase_service(20, 2, 1.1, "erlang:2", steps=2 * 10**5, seed=1)
    d = r.to_dict()
    assert r.response is None and d["sojourn"]["quantiles"] == {} and d["sojourn"]["quantile_source"] is None
    with pytest.raises(ValueError, match="cdf_points"):
        r.cdf(5)
    ok = simulate_phase_service(20, 2, 0.8, "erlang:2", steps=2 * 10**5, seed=1).to_dict(cdf_points=5)
    assert ok["sojourn"]["source"] == "little" and ok["sojourn"]["quantile_source"] == "joined"
    assert set(ok["sojourn"]["quantiles"]) == {"0.5", "0.9", "0.99", "0.999"}
    assert set(ok["cdf"]) == {"t", "sojourn", "waiting", "sojourn_stderr", "waiting_stderr"}
    assert len(ok["cdf"]["t"]) == 5


def test_a_waiting_quantile_inside_the_atom_is_zero_with_no_error_bar():
    r = simulate_classes(20, 2, 0.3, server_classes="0.5:2,0.5:1", events=2 * 10**5, seed=19)
    atom = 1.0 - float(r.response.waiting_law.beta.sum())  # P(W = 0): the arrivals that find an idle server
    for q, e in r.response.waiting_quantiles.items():
        assert (e.mean == 0.0 and not e.reliable) == (q <= atom), (q, atom, e)
    assert "waiting q0.5: 0 (no wait" in r.summary()


def test_an_overloaded_class_has_no_stationary_quantile_nor_cdf_error():
    # random routing sends λ s̄ = 1.2 to each server: the class of speed 1 grows without bound
    r = simulate_classes(20, 1, 0.8, server_classes="0.5:2,0.5:1", policy="random", events=2 * 10**5, seed=20)
    assert all(not e.reliable and "without bound" in e.note for e in r.response.sojourn_quantiles.values())
    c = r.cdf(4)
    assert c["sojourn_stderr"] == [None] * 4 == c["waiting_stderr"]
