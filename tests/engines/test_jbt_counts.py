"""JBT(T = d) on the profile and bucket engines (docs/model.md §2), against facts they did not
produce: the exact stationary law of tiny systems (:mod:`supermarket.stationary`), the event
engine at n = 1000, JIQ at ``T = 1``, and each other.

Tolerances: 4.5 standard errors of the compared difference (batch means), fixed seeds.  The
exact law's ``E[P_ℓ]`` is read through its flow balance ``E[u_(ℓ+1)] = λ·E[P_ℓ]``."""

from __future__ import annotations

import numpy as np
import pytest

from supermarket.simulation import simulate
from supermarket.stationary.profile import solve

CASES = [(3, 2, 0.8, "discrete"), (4, 2, 0.9, "continuous"), (3, 3, 0.7, "discrete"), (4, 3, 0.85, "continuous")]


def _pad(a, L):
    out = np.zeros(L)
    out[: min(len(a), L)] = np.asarray(a, dtype=float)[:L]
    return out


@pytest.mark.parametrize("engine", ["profile", "buckets"])
@pytest.mark.parametrize("n,d,lam,mode", CASES)
def test_jbt_count_engines_match_the_exact_law(engine, n, d, lam, mode):
    law = solve(n, d, lam, policy="jbt", cap=30)  # truncation mass far below the error bars
    res = simulate(n, d, lam, policy="jbt", engine=engine, steps=600_000, time_mode=mode, seed=5)
    assert res.engine == engine and res.policy == "jbt"
    L = 8
    exact = _pad(law.u_mean, L)
    u, se = _pad(res.u_mean, L), _pad(res.u_stderr, L)
    seen = exact > 1e-3
    assert seen.sum() >= 3  # levels above T = d are reached (the "else uniform" branch runs)
    assert np.all(np.abs(u - exact)[seen] <= 4.5 * se[seen] + 1e-9), (u, exact, se)
    # E[P_ℓ] against the exact flow balance λ·E[P_ℓ] = E[u_(ℓ+1)]: the lazy ∫P_ℓ of every level
    p_exact = _pad(law.u_mean[1:], L) / lam
    p, pse = _pad(res.ud_mean, L), _pad(res.ud_stderr, L)
    assert np.all(np.abs(p - p_exact)[seen] <= 4.5 * pse[seen] + 1e-9), (p, p_exact, pse)
    assert abs(res.mean_queue_length - law.mean_queue_length) <= 4.5 * res.mean_queue_length_stderr + 1e-9


def test_jbt_threshold_one_is_jiq_on_the_profile_engine():
    # T = 1: JBT is JIQ by definition; the profile engine draws both from the same uniform
    a = simulate(20, 1, 0.9, policy="jbt", engine="profile", steps=200_000, seed=2, control_variates=False)
    b = simulate(20, 1, 0.9, policy="jiq", engine="profile", steps=200_000, seed=2, control_variates=False)
    np.testing.assert_allclose(a.u_mean, b.u_mean, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a.ud_mean, b.ud_mean, rtol=0, atol=1e-12)


def test_jbt_profile_engine_against_the_event_engine_at_n_1000():
    # the profile engine's error bar from the spread of independent replications (its batch
    # means at this horizon are too short for a blocking plateau), the event engine's its own
    kw = dict(policy="jbt", time=3000.0)
    a = simulate(1000, 2, 0.9, engine="profile", time_mode="continuous", replications=4, seed=7, **kw)
    b = simulate(1000, 2, 0.9, engine="events", replications=4, seed=8, **kw)
    reps = np.array([r.u_mean[:3] for r in a.per_replication])
    a_mean, a_se = reps.mean(axis=0), reps.std(axis=0, ddof=1) / np.sqrt(len(reps))
    for i in (0, 1):  # levels 1 and T = 2 (u_3 is 0 up to rare excursions)
        se = np.hypot(a_se[i], b.u_stderr[i])
        assert abs(a_mean[i] - b.u_mean[i]) <= 4.5 * se, (i, a_mean[i], b.u_mean[i], se)


def test_jbt_bucket_engine_against_the_profile_engine():
    kw = dict(policy="jbt", steps=3_000_000, time_mode="continuous")
    a = simulate(30, 3, 0.95, engine="profile", seed=1, **kw)
    b = simulate(30, 3, 0.95, engine="buckets", seed=2, **kw)
    for i in (1, 2, 3):
        se = np.hypot(a.u_stderr[i], b.u_stderr[i])
        assert abs(a.u_mean[i] - b.u_mean[i]) <= 4.5 * se + 1e-9, (i, a.u_mean[i], b.u_mean[i], se)


def test_jbt_default_stays_the_event_engine():
    from supermarket.system.methods import simulation_engine
    from supermarket.system.spec import System

    s = System(100, 2, 0.8, rule="jbt")
    assert simulation_engine(s) == "events"
    assert simulation_engine(s, "profile") == "profile" and simulation_engine(s, "buckets") == "buckets"
    assert simulation_engine(System(100, 2, 0.8)) == simulation_engine(System(100, 2, 0.8), "profile") == "profile"
    # with another law no count engine runs jbt: "profile" runs the event engine, as before
    assert simulation_engine(System(100, 2, 0.8, rule="jbt", service="erlang:2"), "profile") == "events"
