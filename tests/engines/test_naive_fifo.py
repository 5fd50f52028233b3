"""The FIFO simulator (engines/fifo.py) against the naive reference :class:`naive.NaiveFifo`,
customer by customer.

After every event the queue lengths, every queue's pending departure times (the ring
buffers read from their heads), the counts, the clock and the next arrival are compared; at
the end the recorded sojourns, waits and joined lengths, ``∫ P_i dt``, ``∫ c_i dt`` and the
measured time.  The kernel's level capacity is large enough never to grow here: a growth
redraws the pending arrival's sample (engines/fifo.py says so), which changes the stream,
so the reference follows the kernel only while none happens.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from naive import NaiveFifo
from supermarket.engines import fifo as ff
from supermarket.engines.rng import new_state

# (n, d, λ, replace, t_meas, events)
CASES = {
    "rep": (10, 2, 0.9, True, 20.0, 4_000),
    "norep": (8, 3, 0.95, False, 0.0, 4_000),
}
SLOW_CASES = {
    "norep-d=n": (5, 5, 0.9, False, 50.0, 10_000),
    "rep-d1": (12, 1, 0.8, True, 10.0, 10_000),
}
ALL = {**CASES, **SLOW_CASES}
PARAMS = [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_CASES else c for c in ALL]


@pytest.mark.parametrize("case", PARAMS)
def test_fifo_kernel_matches_naive_event_for_event(case):
    n, d, lam, rep, t_meas, steps = ALL[case]
    cap = 64
    ring, head, qlen = np.zeros((n, cap)), np.zeros(n, np.int64), np.zeros(n, np.int64)
    c = np.zeros(cap + 2, np.int64)
    c[0] = n
    area_P, area_c = np.zeros(cap + 2), np.zeros(cap + 2)
    cnt = np.arange(n + 1)
    tab = (cnt / n) ** d if rep else np.array([math.comb(int(k), d) / math.comb(n, d) for k in cnt])
    s = new_state(60 + len(case))
    words = [int(w) for w in s]
    perm = np.arange(n, dtype=np.int64)
    pint = np.array([n, d, int(rep)], np.int64)
    first = 0.37 / (n * lam)
    sf = np.array([0.0, first, t_meas, n * lam, 0.0])
    si = np.zeros(1, np.int64)
    soj, wai, jl = np.zeros(steps), np.zeros(steps), np.zeros(steps, np.int64)
    nv = NaiveFifo(n, d, lam, rep, words, first, t_meas)
    for step in range(1, steps + 1):
        st = ff.fifo_kernel(ring, head, qlen, c, area_P, area_c, tab, s, perm, pint, sf, si, soj, wai, jl, 1)
        assert st == ff.EVENTS
        nv.step()
        where = f"at event {step}"
        assert qlen.tolist() == [len(q) for q in nv.deps], f"lengths differ {where}"
        assert math.isclose(sf[ff.S_NOW], nv.now, rel_tol=1e-12), f"clock differs {where}"
        assert math.isclose(sf[ff.S_NEXT], nv.next_arrival, rel_tol=1e-12), f"next arrival differs {where}"
        if step % 16 == 0 or step == steps:
            for q in range(n):
                pending = ring[q, (head[q] + np.arange(qlen[q])) % cap]
                np.testing.assert_allclose(pending, nv.deps[q], rtol=1e-12, err_msg=f"queue {q} {where}")
            cs = nv.counts()
            assert c[1 : len(cs) + 1].tolist() == cs and not c[len(cs) + 1 :].any(), f"counts differ {where}"
            if not rep:
                assert perm.tolist() == nv.perm
    assert [int(w) for w in s] == nv.rng.s
    assert max(nv.jl) >= 3  # queues of several customers were joined
    m = int(si[0])
    assert m == len(nv.so) > 0
    np.testing.assert_allclose(soj[:m], nv.so, rtol=1e-9, atol=1e-12 * nv.now)
    np.testing.assert_allclose(wai[:m], nv.wa, rtol=1e-9, atol=1e-12 * nv.now)
    assert jl[:m].tolist() == nv.jl
    assert math.isclose(sf[ff.S_MEASURED], nv.measured, rel_tol=1e-9)
    assert math.isclose(nv.measured, nv.now - t_meas, rel_tol=1e-9)
    for i, v in nv.area_P.items():
        assert math.isclose(area_P[i], v, rel_tol=1e-9, abs_tol=1e-12 * nv.now), i
        assert math.isclose(area_c[i], nv.area_c[i], rel_tol=1e-9), i
    assert not area_c[max(nv.area_c) + 1 :].any()
