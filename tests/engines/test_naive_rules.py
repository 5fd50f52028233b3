"""The dispatch rules other than JSQ(d) (random, JSQ, JIQ) in the profile and buckets engines,
against the naive reference of :mod:`naive`, state for state.

The reference draws the joined length from the rule's ``P_i`` (docs/model.md §2, "Other
dispatch rules"), written from its definition in :meth:`naive._Naive.P`; the kernels read
the table of :func:`supermarket.engines.tables.p_rule`, compute ``c/n`` in the hot loop
(random), or take JIQ's loops of their own: the idle loop while two queues or more are
idle (no good set only), the general loop otherwise, which closes every level's ``∫ P_i``
when ``1{c_1 = n}`` changes.  After every event the counts, the time and (buckets) the
sorted arrangement are compared; a second chain runs the same events in one call and must
end in the same state with the reference's time integrals, which for JIQ are those of
``P_i = 1{c_1 = n}·c_i/n``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from naive import NAIVE
from supermarket.model import Params
from supermarket.simulation import Chain

# (n, d, λ, replace, continuous, start counts, force the windowed P tables, k of the good
# set (clause (a) alone: no queue longer than k; 0: none), steps)
CASES = {
    "random-disc": ("random", 30, 2, 0.9, True, False, [20, 8, 2], False, 3, 6_000),
    "jsq-cont-window": ("jsq", 12, 2, 0.95, False, True, [12, 5], True, 1, 6_000),
    "jiq-idle-loop": ("jiq", 10, 2, 0.9, True, False, [], False, 0, 6_000),
    "jiq-general-cont": ("jiq", 10, 3, 0.95, False, True, [10, 10, 3], True, 2, 6_000),
}
SLOW_CASES = {
    "random-cont-window": ("random", 400, 2, 0.97, False, True, [300, 100], True, 4, 10_000),
    "jsq-disc": ("jsq", 40, 2, 0.99, True, False, [], False, 1, 10_000),
    "jiq-idle-cont-window": ("jiq", 25, 2, 0.97, True, True, [25, 25, 20], True, 0, 10_000),
    "jiq-general-disc": ("jiq", 6, 2, 0.8, True, False, [6], False, 1, 10_000),
}
ALL = {**CASES, **SLOW_CASES}
PARAMS = [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_CASES else c for c in ALL]


@pytest.mark.parametrize("engine", ["profile", "buckets"])
@pytest.mark.parametrize("case", PARAMS)
def test_rule_matches_naive_step_for_step(engine, case):
    policy, n, d, lam, rep, cont, counts, force, k, steps = ALL[case]
    seed = 300 + len(case)
    params = Params(n, d, lam, replace=rep)
    lo, hi = np.full(k, -1.0), np.full(k, n + 1.0)
    kw = dict(continuous=cont, policy=policy, _force_window=force)
    if k:
        kw.update(k=k, lo=lo, hi=hi)
    ch = Chain(params, engine, counts, seed, **kw)
    nv = NAIVE[engine](n, d, lam, rep, counts, seed, cont, policy=policy)
    if k:
        nv.watch_good_set(k, lo, hi)
    seen = {"idle2": 0, "idle1": 0, "busy": 0}
    for step in range(1, steps + 1):
        assert ch.advance(max_events=1) == 1
        nv.step()
        c1 = nv.c[0] if nv.c else 0
        seen["idle2" if c1 <= n - 2 else "idle1" if c1 == n - 1 else "busy"] += 1
        assert ch.counts().tolist() == nv.c, f"counts differ at step {step}"
        assert math.isclose(ch.now, nv.now, rel_tol=1e-12), f"time differs at step {step}"
        if engine == "buckets":
            assert ch.perm.tolist() == nv.perm, f"arrangement differs at step {step}"
    # every kind of state was visited many times (JIQ: its idle loop, the edge c_1 = n − 1
    # where an arrival closes the levels, and the busy state where it joins a uniform queue)
    if policy != "random":
        assert min(seen.values()) > 100, seen
    if engine == "buckets":
        assert ch.lengths().tolist() == nv.lengths()

    bulk = Chain(params, engine, counts, seed, **kw)
    assert bulk.advance(max_events=steps) == steps
    assert bulk.counts().tolist() == nv.c
    if engine == "buckets":
        assert bulk.perm.tolist() == nv.perm
    assert math.isclose(bulk.now, nv.now, rel_tol=1e-12)
    m = bulk.measures()
    L = len(nv.area_c)
    np.testing.assert_allclose(m["area_c"][:L], nv.area_c, rtol=1e-9)
    np.testing.assert_allclose(m["area_P"][:L], nv.area_P, rtol=1e-9, atol=1e-12 * nv.now)
    np.testing.assert_allclose(m["maxtime"][: len(nv.maxtime)], nv.maxtime, rtol=1e-9, atol=1e-12 * nv.now)
    assert not m["area_c"][L:].any()
    assert 0 < sum(nv.area_P) and nv.area_P[0] < nv.now  # P_1 < 1 some of the time
    if k:
        assert math.isclose(m["good_time"], nv.good_time, rel_tol=1e-9, abs_tol=1e-12 * nv.now)
        assert 0 < nv.good_time < nv.now  # the set was entered and left
