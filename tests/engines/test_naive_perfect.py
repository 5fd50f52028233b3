"""The perfect sampler's kernels (engines/perfect.py) against the naive references
:class:`naive.NaivePast` and :func:`naive.apply_code`, step for step.

``generate_past`` steps the dominating process ``D`` into the past and draws the innovation
of each forward step; ``apply_codes`` runs the lower and upper JSQ(d) copies forwards
through those innovations.  The reference generates ``D`` on the same xoshiro stream, in
sorted form with the counts counted from the lengths, and applies every code to two copies
in sorted form; after every step ``D``'s lengths and counts, its maximum and path maximum,
the code, both copies, their totals and the step at which they met are compared.  The
start of ``D`` is the kernel's ``geometric_fill``, checked against its definition first.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from naive import NaivePast, Xoshiro, apply_code
from supermarket.engines import perfect as pk
from supermarket.engines.rng import new_state

# (n, d, λ, replace, steps): every branch of conditional_max
CASES = {
    "rep-explicit": (20, 3, 0.9, True, 5_000),
    "norep-rejection": (20, 3, 0.85, False, 5_000),  # (d−1)² = 4 <= n − 1
    "norep-top-down": (10, 6, 0.9, False, 5_000),  # (d−1)² = 25 > n − 1
    "rep-inversion": (12, 70, 0.8, True, 3_000),  # d − 1 > 64
}
SLOW_CASES = {
    "rep-d1": (30, 1, 0.95, True, 10_000),
    "norep-d=n": (8, 8, 0.9, False, 10_000),
}
ALL = {**CASES, **SLOW_CASES}
PARAMS = [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_CASES else c for c in ALL]


def _counts(x, cap):
    return [sum(1 for v in x if v >= m) for m in range(cap)]


@pytest.mark.parametrize("case", PARAMS)
def test_perfect_kernels_match_naive_step_for_step(case):
    n, d, lam, rep, steps = ALL[case]
    # D's start: n i.i.d. geometric lengths, P(length >= m) = λ^m, by inversion
    g = np.empty(n, np.int64)
    s = new_state(11 + len(case))
    py = Xoshiro([int(w) for w in s])
    pk.geometric_fill(g, math.log(lam), s)
    assert g.tolist() == [math.floor(math.log(1.0 - py.double()) / math.log(lam)) for _ in range(n)]
    x = np.sort(g)[::-1].copy()
    cap = int(x.max()) + 64
    c = np.array(_counts(x, cap), np.int64)
    gs = np.array([x.max(), x.max()], np.int64)
    s = new_state(23 + len(case))
    nv = NaivePast(x, n, d, lam, rep, [int(w) for w in s])
    buf = np.zeros(steps, np.int64)
    mark, picks = np.zeros(n, np.int8), np.zeros(max(d, 1), np.int64)
    p_arr = lam / (1.0 + lam)
    codes = []
    for i in range(steps):
        assert pk.generate_past(x, c, gs, s, buf, i, 1, n, d, rep, p_arr, mark, picks) == 1
        codes.append(nv.step())
        assert buf[i] == codes[-1], f"code differs at step {i}"
        assert x.tolist() == nv.x, f"D differs at step {i}"
        assert gs.tolist() == [nv.top, nv.pathmax], f"maximum differs at step {i}"
        if i % 16 == 0:
            assert c.tolist() == _counts(nv.x, cap), f"counts differ at step {i}"
    assert not mark.any() and [int(w) for w in s] == nv.rng.s
    kinds = np.bincount(np.sign(buf) + 1, minlength=3)
    assert kinds[0] > steps // 4 and kinds[2] > steps // 4  # forward departures and arrivals

    # the copies: L from empty, U from D's last state, forwards through buf[steps-1], …, buf[0]
    cap2 = nv.pathmax + 4
    xl, cl = np.zeros(n, np.int64), np.zeros(cap2, np.int64)
    cl[0] = n
    xu = x.copy()
    cu = np.array(_counts(xu, cap2), np.int64)
    st = np.zeros(6, np.int64)
    st[pk.A_TOTU] = int(xu.sum())
    nl, nu = [0] * n, xu.tolist()
    met_at = None
    for j, i in enumerate(range(steps - 1, -1, -1), start=1):
        assert pk.apply_codes(buf, i, i + 1, xl, cl, xu, cu, st) == pk.STATUS_OK
        apply_code(nl, codes[i])
        if met_at is None:
            apply_code(nu, codes[i])
            if sum(nl) == sum(nu):
                met_at = j
                assert nl == nu  # L <= U with equal totals: they met
        assert xl.tolist() == nl, f"L differs at forward step {j}"
        assert st[pk.A_TOTL] == sum(nl) and st[pk.A_STEP] == j
        if met_at is None:
            assert xu.tolist() == nu and st[pk.A_TOTU] == sum(nu), f"U differs at forward step {j}"
            assert all(a <= b for a, b in zip(nl, nu))  # L <= U (docs/model.md §12)
    assert cl.tolist() == _counts(nl, cap2)
    assert st[pk.A_MET] == (met_at is not None) and st[pk.A_METSTEP] == (met_at or 0)
    assert met_at is not None or d == 1  # the copies met (JSQ(1) is D's own rule: slower)
