"""Fast paths against independent facts: the windowed P tables of large n against the full
table (bit for bit), the profile engine against the per-queue engine above the full-table
size (including the general scan over more than 8 levels), and the good-set band against
states written down by hand from docs/model.md §5."""

from __future__ import annotations

import math

import numpy as np
import pytest

from supermarket import theory as th
from supermarket.engines import tables
from supermarket.model import Params
from supermarket.simulation import Chain, simulate
from supermarket.system.states import start_counts


def _run(n, d, lam, replace, force, events, start="empty", cont=False):
    p = Params(n, d, lam, replace=replace)
    ch = Chain(p, "profile", start_counts(n, d, lam, start), 77, continuous=cont, _force_window=force)
    ch.advance(max_events=events)
    return ch


@pytest.mark.parametrize(
    "n,d,lam,replace,cont",
    [
        (5000, 2, 0.99, True, False),  # windows move as the counts climb from empty
        (5000, 3, 0.95, False, True),  # without replacement, continuous time
        (3000, 1, 0.9, True, False),  # d = 1: dozens of levels, past the LW windowed ones
    ],
)
def test_windowed_tables_are_bit_identical_to_the_full_table(n, d, lam, replace, cont):
    full = _run(n, d, lam, replace, False, 600_000, cont=cont)
    win = _run(n, d, lam, replace, True, 600_000, cont=cont)
    assert full.setup.full_table and not win.setup.full_table
    assert np.array_equal(full.c, win.c) and full.now == win.now
    mf, mw = full.measures(), win.measures()
    for key in ("area_c", "area_P", "maxtime"):
        assert np.array_equal(mf[key], mw[key]), key
    # every window entry in use is the full table's value at its own count (not a neighbour's)
    tab = tables.p_table(n, d, replace)
    used = 0
    for j in range(tables.LW):
        base = int(win.tables.winbase[j])
        if base < 0:
            continue
        hi = min(base + tables.WIN, n + 1)
        assert np.array_equal(win.tables.win[j, : hi - base], tab[base:hi]), j
        used += 1
    assert used >= 2
    if d == 1:
        assert int(win.clock[0]["top"]) > tables.LW  # the general path (direct evaluation) ran


def test_window_edges_follow_the_count():
    # a level whose count crosses a window edge many times (n = 5000 > WIN = 2048)
    p = Params(5000, 2, 0.9)
    ch = Chain(p, "profile", np.array([2500]), 3, _force_window=True)
    tab = tables.p_table(5000, 2, True)
    for _ in range(40):
        ch.advance(max_events=20_000)
        j = 0
        off = int(ch.c[j] - ch.tables.winbase[j])
        assert 0 <= off < tables.WIN and ch.tables.win[j, off] == tab[ch.c[j]]


def test_profile_and_queues_agree_above_the_full_table_size():
    # n = 40000 > 32767 (windowed tables) and d = 1, λ = 0.5: independent M/M/1 queues,
    # E[u_i] = λ^i exactly (docs/model.md §7), with more than 8 occupied levels (general scan)
    lam = 0.5
    res = {
        e: simulate(
            40_000, 1, lam, time=400.0, burn_in=30.0, start="fixed-point", engine=e, seed=8, time_mode="continuous"
        )
        for e in ("profile", "queues")
    }
    for e, r in res.items():
        assert max(r.max_queue_dist) > 8, e
        for i in range(6):
            assert r.u_reliable[i], (e, i)
            assert abs(r.u_mean[i] - lam ** (i + 1)) <= 4.5 * r.u_stderr[i], (e, i)
    a, b = res["profile"], res["queues"]
    for i in range(6):
        assert abs(a.u_mean[i] - b.u_mean[i]) <= 4.5 * math.hypot(a.u_stderr[i], b.u_stderr[i])


def test_profile_and_queues_agree_d2_large_n():
    # d = 2 at n = 40000: the engines agree with each other and with E[u_1] = λ
    # (λ = 0.8: relaxation time ≈ 7 time units, so 400 time units leave the errors known)
    lam = 0.8
    res = {
        e: simulate(40_000, 2, lam, time=400.0, burn_in=50.0, start="fixed-point", engine=e, seed=9)
        for e in ("profile", "queues")
    }
    a, b = res["profile"], res["queues"]
    for r in (a, b):
        assert r.u_reliable[0] and r.u_reliable[3] and abs(r.u_mean[0] - lam) <= 4.5 * r.u_stderr[0]
    for i in range(4):
        assert abs(a.u_mean[i] - b.u_mean[i]) <= 4.5 * math.hypot(a.u_stderr[i], b.u_stderr[i]), i


# ----------------------------------------------------------------- the good set, by hand
# n = 100000, d = 5, λ = 0.99: k = ⌈log 100 / log 5⌉ = 3.  Clause (b): the number of queues
# shorter than j lies in (1 ± 5ε)·n(1−λ)(λd)^(j−1), ε = 0.1, i.e. with n(1−λ) = 1000 and
# λd = 4.95:  j=1: [500, 1500];  j=2: [2475, 7425];  j=3: [12251.25, 36753.75].
N, D, LAM = 100_000, 5, 0.99


def _counts(s1, s2, s3, c4=0):
    """c_1..c_4 from the numbers of queues shorter than 1, 2, 3 and c_4."""
    return np.array([N - s1, N - s2, N - s3, c4])


@pytest.mark.parametrize(
    "short,member",
    [
        ((500, 2475, 12252), True),  # every lower edge exactly (exact bounds from λ = 99/100)
        ((501, 2476, 12252), True),  # one queue inside every lower edge
        ((1500, 7425, 36753), True),  # every upper edge, just inside
        ((1000, 4950, 24503), True),  # the targets
        ((499, 4950, 24503), False),  # j = 1 just below
        ((1501, 4950, 24503), False),  # j = 1 just above
        ((1000, 2474, 24503), False),  # j = 2 just below
        ((1000, 7426, 24503), False),  # j = 2 just above
        ((1000, 4950, 12251), False),  # j = 3 just below (12251 < 12251.25)
        ((1000, 4950, 36754), False),  # j = 3 just above (36754 > 36753.75)
    ],
)
def test_good_set_band_by_hand(short, member):
    assert th.k_lambda_d(D, LAM) == 3
    c = _counts(*short)
    assert th.good_set(counts=c, n=N, d=D, lam=LAM).member is member
    # the kernels' membership (integer bounds) agrees, state by state
    k = 3
    lo, hi = th.good_set_bounds(N, D, LAM, 0.1, k)
    ch = Chain(Params(N, D, LAM), "profile", c, 1, k=k, lo=lo, hi=hi)
    assert (int(ch.clock[0]["viol"]) == 0) is member


def test_good_set_clause_a_by_hand():
    c = _counts(1000, 4950, 24503, c4=1)  # one queue of length k + 1 = 4
    assert not th.good_set(counts=c, n=N, d=D, lam=LAM).member
    lo, hi = th.good_set_bounds(N, D, LAM, 0.1, 3)
    assert np.allclose(lo, [500, 2475, 12251.25]) and np.allclose(hi, [1500, 7425, 36753.75])
    ch = Chain(Params(N, D, LAM), "profile", c, 1, k=3, lo=lo, hi=hi)
    assert int(ch.clock[0]["viol"]) == 1
