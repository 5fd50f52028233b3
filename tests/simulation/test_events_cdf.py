"""The response-time CDFs of the event engine (``--cdf N`` on ``engine="events"``) against
independent facts (docs/model.md §14):

- random routing with exponential service is n independent M/M/1 queues: the FIFO sojourn is
  Exp(1 − λ) and the waiting time has the atom 1 − λ at 0 and ``P(W > t) = λ e^{−(1−λ)t}``;
- random routing with Erlang-2 service is n independent M/E2/1 queues: the
  Pollaczek–Khinchine law (a dense matrix exponential), its atom ``P(W = 0) = 1 − λ`` and its
  mean ``1 + λ(1 + SCV)/(2(1 − λ))``;
- the binned CDF against the plain fraction of known times at or below ``t``, to within the
  one bin that holds ``t`` (catches a bin off by one, which no statistical check sees);
- one class of speed 1 is the engine without classes; the CDF is monotone in ``[0, 1]``;
- the command line: the profile engine's keys (``t``, ``sojourn``, ``waiting``) on the event
  engine, the count engines refused (with the table's reason), nothing else changed.

Tolerances are ``Z`` standard errors of the check itself (the spread between replications,
Student t), fixed seeds.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.linalg as sl
from click.testing import CliRunner

from supermarket.cli import main
from supermarket.design.sojourn import mph1_sojourn_tail
from supermarket.simulation.general import simulate_general
from supermarket.simulation.general.estimate import HIST_BINS, _hist, response_counts

Z = 4.0


def _within(cdf: dict, kind: str, exact: np.ndarray) -> None:
    v = np.array(cdf[kind])
    se = np.array([math.nan if e is None else e for e in cdf[f"{kind}_stderr"]])
    # R >= 2 replications: every point has its error, but where all gave the same 0 or 1 (no ± 0)
    same = ~np.isfinite(se)
    assert np.all((v[same] == 0.0) | (v[same] == 1.0)), "no error only where every replication agrees on 0 or 1"
    assert np.all(np.abs(v[same] - exact[same]) <= 1e-3)
    se = np.where(same, 0.0, se)
    ok = np.abs(v - exact) <= Z * se + 1e-12  # 1e-12: points where both are 0 or 1 exactly
    assert ok.all(), [(t, a, b, e) for t, a, b, e, k in zip(cdf["t"], v, exact, se, ok) if not k]


def test_mm1_sojourn_is_exponential_and_waiting_has_the_atom():
    lam = 0.7
    r = simulate_general(
        20, 1, lam, policy="random", service="exp", time=3000.0, burn_in=50.0, seed=21, replications=8, workers=1
    )
    c = r.cdf(12)
    t = np.array(c["t"])
    _within(c, "sojourn", 1.0 - np.exp(-(1.0 - lam) * t))
    _within(c, "waiting", 1.0 - lam * np.exp(-(1.0 - lam) * t))
    assert c["sojourn"][0] == 0.0 and abs(c["waiting"][0] - (1.0 - lam)) <= Z * c["waiting_stderr"][0]
    assert c["sojourn_stderr"][0] is None  # P(S ≤ 0) = 0 in every replication: no "0 ± 0"
    assert " 0 ± 0" not in r.summary(cdf_points=12)
    # the grid ends at 1.1 x the sojourn p99.9, -log(0.001)/(1 − λ) for M/M/1
    assert t[-1] == pytest.approx(1.1 * -math.log(1e-3) / (1.0 - lam), rel=0.05)


def _me21_waiting_tail(lam: float, t: np.ndarray) -> np.ndarray:
    """P(W > t) of M/E2/1 [classical, Pollaczek–Khinchine]: PH(λ α_e, T + λ t0 α_e)."""
    a, T = np.array([1.0, 0.0]), np.array([[-2.0, 2.0], [0.0, -2.0]])
    t0 = -T.sum(axis=1)
    ae = np.linalg.solve(-T.T, a)
    G = T + lam * np.outer(t0, ae)
    return np.array([float(lam * ae @ sl.expm(G * x) @ np.ones(2)) for x in t])


def test_erlang2_random_routing_is_me21():
    lam = 0.75
    r = simulate_general(
        20, 1, lam, policy="random", service="erlang:2", time=3000.0, burn_in=50.0, seed=7, replications=8, workers=1
    )
    c = r.cdf(40)
    t = np.array(c["t"])
    a, T = [1.0, 0.0], [[-2.0, 2.0], [0.0, -2.0]]
    exact_s = 1.0 - np.array([mph1_sojourn_tail(lam, a, T, x) for x in t])
    exact_w = 1.0 - _me21_waiting_tail(lam, t)
    assert exact_w[0] == pytest.approx(1.0 - lam, abs=1e-12)  # the atom, exactly 1 − λ
    _within(c, "sojourn", exact_s)
    _within(c, "waiting", exact_w)
    # the mean from the CDF (trapezoid of 1 − F on the grid) against the same functional of
    # the exact law, whose value is the P-K mean up to the tail past the grid; the error bound
    # adds the points' errors (as if fully correlated: an upper bound)
    h = t[1] - t[0]
    w = np.full(t.size, h)
    w[[0, -1]] = h / 2
    got = float(w @ (1.0 - np.array(c["sojourn"])))
    ref = float(w @ (1.0 - exact_s))
    bound = float(w @ np.array([0.0 if e is None else e for e in c["sojourn_stderr"]]))  # None: no spread
    assert abs(got - ref) <= Z * bound, (got, ref, bound)
    pk = 1.0 + lam * (1.0 + 0.5) / (2.0 * (1.0 - lam))  # E[S] of M/E2/1, SCV 1/2
    assert ref == pytest.approx(pk, abs=0.01 * pk)  # the grid keeps all but the tail past p99.9


def test_binned_cdf_is_the_fraction_at_or_below_to_within_its_bin():
    rng = np.random.default_rng(3)
    reps = []
    for _ in range(3):
        so = [rng.exponential(1.0, 500) + 1e-3 for _ in range(4)]
        wa = [np.where(rng.random(500) < 0.4, 0.0, rng.exponential(2.0, 500)) for _ in range(4)]
        reps.append(({"h_so": [_hist(v) for v in so], "h_wa": [_hist(v) for v in wa]}, 1.0, so, wa))
    rc = response_counts([(out, dt) for out, dt, _, _ in reps], min_block=1)
    c = rc.cdf(30)
    allso = np.concatenate([np.concatenate(s) for *_, s, _ in reps])
    allwa = np.concatenate([np.concatenate(w) for *_, w in reps])
    r = (1e9 / 1e-6) ** (1.0 / HIST_BINS)  # the engine's bins: logarithmic, 1e-6 to 1e9
    for kind, v in (("sojourn", allso), ("waiting", allwa)):
        for t, F in zip(c["t"], c[kind]):
            if t <= 1e-6:
                assert F == pytest.approx(np.mean(v <= 1e-6))
                continue
            lo = 1e-6 * r ** math.floor(math.log(t / 1e-6) / math.log(r))
            assert np.mean(v < lo) - 1e-12 <= F <= np.mean(v <= lo * r) + 1e-12, (kind, t, F)
    assert c["waiting"][0] == pytest.approx(np.mean(allwa == 0.0))
    assert c["t"][-1] == pytest.approx(1.1 * np.quantile(allso, 0.999), rel=0.01)
    # three replications: the totals are kept, and the error is their spread
    assert all(h.shape[0] == 1 for h in rc.sojourn)
    per = [np.mean(np.concatenate(s) <= c["t"][5]) for *_, s, _ in reps]
    assert c["sojourn_stderr"][5] == pytest.approx(np.std(per, ddof=1) / math.sqrt(3), rel=0.05)


def test_one_class_of_speed_one_is_the_engine_without_classes_and_the_cdf_is_a_cdf():
    kw = dict(service="lognormal:2", time=300.0, seed=4, replications=2, workers=1)
    a = simulate_general(30, 2, 0.8, **kw).cdf(25)
    b = simulate_general(30, 2, 0.8, server_classes="1:1", **kw).cdf(25)
    assert a == b
    for kind in ("sojourn", "waiting"):
        v = np.array(a[kind])
        assert np.all(np.diff(v) >= 0) and v[0] >= 0 and v[-1] <= 1
    assert a["waiting"][0] > a["sojourn"][0] == 0.0  # an atom of waits at 0, none of sojourns
    assert np.all(np.array(a["waiting"]) >= np.array(a["sojourn"]))  # W <= S


def test_one_replication_gives_no_trusted_error_and_points_are_checked():
    r = simulate_general(10, 2, 0.5, service="erlang:2", time=200.0, seed=1, replications=1)
    c = r.cdf(5)
    assert c["sojourn_stderr"] == [None] * 5 and len(c["t"]) == 5
    with pytest.raises(ValueError, match="cdf_points"):
        r.cdf(1)
    assert "cdf" not in r.to_dict() and r.to_dict(cdf_points=5)["cdf"] == c


def test_cli_cdf_on_the_event_engine_has_the_profile_keys_and_changes_nothing_else():
    args = ["simulate", "--n", "20", "--d", "2", "--load", "0.6", "--service", "lognormal:2", "--time", "100"]
    plain = json.loads(CliRunner().invoke(main, [*args, "--json"]).output)
    res = CliRunner().invoke(main, [*args, "--json", "--cdf", "7"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.output)
    cdf = got.pop("cdf")
    assert {"t", "sojourn", "waiting"} <= set(cdf) and all(len(cdf[k]) == 7 for k in cdf)
    for key in ("wall_s", "events_per_second"):
        plain.pop(key), got.pop(key)
    assert got == plain
    text = CliRunner().invoke(main, [*args, "--cdf", "3"]).output
    assert "Response-time CDF on 3 points" in text


@pytest.mark.parametrize(
    "extra",
    [
        ["--service", "erlang:2"],
        ["--server-classes", "0.5:2,0.5:1"],
        ["--service", "erlang:2", "--server-classes", "0.5:2,0.5:1", "--engine", "phase"],
    ],
)
def test_cli_count_engines_give_the_cdf_in_the_same_shape(extra):
    # the count engines' CDF is the joined law's (docs/model.md §13.2, §15.9): the event engine's keys
    args = ["simulate", "--n", "20", "--d", "2", "--load", "0.6", "--time", "10", "--cdf", "5", *extra]
    res = CliRunner().invoke(main, [*args, "--json"])
    assert res.exit_code == 0, res.output
    cdf = json.loads(res.output)["cdf"]
    assert set(cdf) == {"t", "sojourn", "waiting", "sojourn_stderr", "waiting_stderr"}
    assert all(len(v) == 5 for v in cdf.values()) and cdf["sojourn"][0] == 0.0
    assert "Response-time CDF on 5 points" in CliRunner().invoke(main, args).output


def test_an_overloaded_class_gives_its_cdf_no_error_bar():
    """Random routing sends λ s̄ = 1.5 × 0.8 = 1.2 to each server: the class of speed 1 is
    overloaded, its times grow without bound, and the CDF has no error bar (no stationary law)."""
    kw = dict(policy="random", time=100.0, seed=2, replications=2, workers=1)
    bad = simulate_general(20, 1, 0.8, server_classes="0.5:2,0.5:1", **kw).cdf(4)
    assert bad["sojourn_stderr"] == [None] * 4 == bad["waiting_stderr"]
    good = simulate_general(20, 1, 0.5, server_classes="0.5:2,0.5:1", **kw).cdf(4)
    assert all(e is not None or v in (0.0, 1.0) for e, v in zip(good["sojourn_stderr"][1:], good["sojourn"][1:]))
    assert any(e is not None for e in good["sojourn_stderr"])
