"""The main job's screen reads true: every column beside an estimate has its own error or is the
same estimator, and the refined mean field ``π + V/n`` stands beside the mean field ``π``.

Independent facts: the exact stationary law of tiny systems (:func:`supermarket.stationary.solve`,
a linear solve, no simulation and no mean field), the closed form ``E[u_i] = λ^i`` of independent
M/M/1 queues (the ``random`` rule), ``E[u_1] = λ`` (flow balance), and the identity
``E[u_i] = λ·E[P_{i−1}]`` whose two sides the run measures on the same chain.
"""

from __future__ import annotations

import json
import math
import re
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from supermarket.cli import main
from supermarket.simulation import simulate
from supermarket.stationary import solve


def _run(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return simulate(**kw)


@pytest.fixture(scope="module")
def moderate():
    # 4·10^6 events at (1000, 2, 0.9): every level through 6 has a reliable error bar
    return _run(n=1000, d=2, lam=0.9, steps=4_000_000, seed=7, start="fixed-point")


def test_the_identity_column_has_its_own_error_consistent_with_the_estimate(moderate):
    r = moderate
    ide = r.identity()
    assert ide["value"][0] == 0.9 and ide["stderr"][0] == 0.0  # λ·P_0 = λ exactly
    checked = 0
    for i in range(1, 6):
        assert ide["reliable"][i] and r.u_reliable[i]
        se = ide["stderr"][i]
        assert math.isfinite(se) and se > 0
        # the identity holds at every n: the adjusted E[u_i] and the plain λ·E[P_(i−1)] differ by
        # their noise only; 4.5 combined s.e. is the self-checks' own threshold
        assert abs(r.u_mean[i] - ide["value"][i]) < 4.5 * math.hypot(se, r.u_stderr[i])
        checked += 1
    assert checked == 5


def test_the_screen_prints_the_identitys_own_error_and_says_what_it_is(moderate):
    text = moderate.summary()
    head = next(line for line in text.splitlines() if line.startswith("i  "))
    assert "identity λ·E[u_(i−1)^d] ± s.e. (plain)" in head
    rows = [line for line in text.splitlines() if re.match(r"^[2-5] ", line)]
    assert len(rows) == 4
    for line in rows:  # two "±" on each row: the estimate's and the identity's
        assert line.count("±") == 2, line
    assert "0.9 (exact)" in next(line for line in text.splitlines() if line.startswith("1 "))
    assert "a check apart from the control variates" in text


@pytest.mark.parametrize("d", [2, 3])
def test_the_refined_column_matches_the_exact_law_of_tiny_systems_to_order_1_over_n2(d):
    lam, err = 0.5, {}
    for n in (3, 5):
        r = _run(n=n, d=d, lam=lam, steps=20_000, seed=1)
        rp = r.refined_mean_field()
        assert rp.source == "classical"
        exact = solve(n, d, lam, tol=1e-9)
        L = min(3, len(rp.u))
        ex = np.asarray(exact.u_mean[:L])
        # measured: n²·|exact − (π + V/n)| ≤ 0.25 (levels 2, 3 and the mean queue length), while
        # n·|exact − π| stays near 0.15–0.27 (the 1/n term itself)
        assert np.all(n * n * np.abs(ex - rp.u[:L])[1:] < 0.35)
        assert abs(ex[0] - rp.u[0]) < 1e-9  # E[u_1] = λ at every n, and V_1 = 0
        err[n] = (abs(ex[1] - rp.u[1]), abs(exact.mean_queue_length - rp.mean_queue_length))
    # O(1/n²): from n = 3 to 5 the error falls by about (5/3)² = 2.8 (an O(1/n) error: by 1.7);
    # measured 2.6–3.1
    assert err[3][0] / err[5][0] > 2.3 and err[3][1] / err[5][1] > 2.3


def test_random_dispatch_has_no_1_over_n_term():
    r = _run(n=20, d=2, lam=0.6, steps=20_000, seed=2, policy="random")
    rp = r.refined_mean_field()
    assert rp.source == "exact" and rp.sum_V == 0.0
    assert np.allclose(rp.u, 0.6 ** np.arange(1, len(rp.u) + 1), rtol=1e-14)
    assert math.isclose(rp.mean_queue_length, 0.6 / 0.4, rel_tol=1e-14)


def test_jsq_says_why_it_has_no_refined_mean_field():
    r = _run(n=50, d=2, lam=0.8, steps=20_000, seed=3, policy="jsq")
    rp = r.refined_mean_field()
    assert rp.u is None and "discontinuous" in rp.note
    text = r.summary()
    assert "refined π(i) + V_i/n" not in text and "refined: π(i) + V_i/n none for jsq" in text


def test_the_mean_queue_line_shows_both_mean_fields_with_the_gap_in_standard_errors(moderate):
    r = moderate
    line = next(x for x in r.summary().splitlines() if x.startswith("  estimate − theory:"))
    rp = r.refined_mean_field()
    assert f"Σπ(i) = {r.fixed_point().sum():.6g}" in line
    assert f"refined Σπ + ΣV/n = {rp.mean_queue_length:.6g}" in line
    # ΣV = 3.986 at d = 2, λ = 0.9 (Gast and Van Houdt 2018): the 1/n term at n = 1000
    assert math.isclose(rp.sum_V, 3.986, abs_tol=5e-4) and f"ΣV/n = {rp.sum_V / 1000:+.3g}" in line
    z = (r.mean_queue_length - rp.mean_queue_length) / r.mean_queue_length_stderr
    assert f"({z:+.1f} s.e.)" in line


def test_no_refined_mean_field_without_an_equilibrium():
    r = _run(n=30, d=2, lam=1.1, steps=10_000, seed=4)
    assert r.refined_mean_field().u is None
    text = r.summary()
    assert "refined:" not in text and "estimate − theory" not in text
    assert "(exact)" not in text and "it need not hold" in text


def test_json_carries_the_identity_and_the_refined_mean_field():
    res = CliRunner().invoke(main, ["simulate", "--n", "200", "--d", "2", "--load", "0.9", "--steps", "1e6", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    ide, rmf = data["identity"], data["refined_mean_field"]
    L = len(data["u_mean"])
    assert len(ide["value"]) == len(ide["stderr"]) == len(ide["reliable"]) == L
    assert ide["value"][0] == 0.9 and ide["stderr"][0] == 0.0
    assert math.isclose(ide["value"][1], 0.9 * data["plain"]["ud_mean"][0], rel_tol=1e-15)
    assert rmf["source"] == "classical" and rmf["note"] == "" and len(rmf["u"]) == L
    assert rmf["u"][0] == pytest.approx(0.9, abs=1e-12)  # V_1 = 0: E[u_1] = λ at every n
    assert math.isclose(rmf["mean_queue_length"], 2.352651639591488 + rmf["sum_V"] / 200, rel_tol=1e-12)
