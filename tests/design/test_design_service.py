"""Latency design under a service law (docs/model.md §13.1): the mean-field FIFO sojourn law
with phase-type service, checked against independent facts.

- d = 1 (random routing) is the M/PH/1 queue: its classical sojourn law (a geometric sum of
  equilibrium residuals, by a dense matrix exponential) and the Pollaczek–Khinchine mean;
  M/M/1 is exponential of rate 1 − λ;
- exponential service at any d: the Erlang-mixture quantiles of §10 (latency.py, closed-form
  fixed point) and least_d_for_latency's answers;
- any d and law: Little's law at the fixed point (E[S] = Σ_ℓ s_ℓ / λ) and the tail by a dense
  matrix exponential rather than uniformization;
- large n: the per-queue event engine's quantiles, within their error bars.
"""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pytest
import scipy.linalg as sl
from click.testing import CliRunner
from scipy.optimize import brentq

from supermarket.cli import main
from supermarket.design import service as ds
from supermarket.design.latency import _mf_quantile, least_d_for_latency
from supermarket.meanfield.phase import phase_fixed_point
from supermarket.system.service import fit_phase_type, parse_service, phase_type

PH_LAWS = ("erlang:4", "hyperexp:4", "hyperexp:1.5")


@pytest.mark.parametrize("spec", PH_LAWS)
def test_d1_is_the_mph1_queue(spec):
    """The fixed-point route at d = 1 against the classical M/PH/1 law and the P-K mean."""
    law = parse_service(spec)
    lam = 0.6
    s, note = ds.sojourn_law(1, lam, law)
    assert note == ""
    pk = 1.0 + lam * (1.0 + law.scv) / (2.0 * (1.0 - lam))
    assert s.mean == pytest.approx(pk, rel=1e-9)
    for t in (0.5, 2.0, 6.0, 15.0):
        assert s.tail(t) == pytest.approx(ds.mph1_sojourn_tail(lam, law.alpha, law.T, t), rel=1e-8, abs=1e-14)


def test_mm1_sojourn_is_exponential():
    lam = 0.7
    s, _ = ds.sojourn_law(1, lam, "exp")
    for t in (1.0, 5.0, 20.0):
        assert s.tail(t) == pytest.approx(math.exp(-(1 - lam) * t), rel=1e-10)
    assert s.quantile(0.99) == pytest.approx(math.log(100) / (1 - lam), rel=1e-10)
    assert ds.mph1_sojourn_quantile(lam, "exp", 0.9) == pytest.approx(math.log(10) / (1 - lam), rel=1e-10)


@pytest.mark.parametrize(("d", "lam", "q"), [(2, 0.9, 0.99), (3, 0.95, 0.999), (5, 0.8, 0.5), (100, 0.99, 0.99)])
def test_exponential_service_matches_the_erlang_mixture(d, lam, q):
    """§10's quantile from the closed-form fixed point λ^{(d^i−1)/(d−1)}."""
    s, _ = ds.sojourn_law(d, lam, "exp")
    assert s.quantile(q) == pytest.approx(_mf_quantile(d, lam, q), rel=1e-9)


@pytest.mark.parametrize(("lam", "q", "T"), [(0.9, 0.99, 8.0), (0.95, 0.99, 6.0), (0.7, 0.9, 2.5), (0.5, 0.99, 20.0)])
def test_exponential_design_is_todays_answer(lam, q, T):
    new = ds.least_d_for_service_latency(lam, q, T, "exp")
    old = least_d_for_latency(lam, q, T)
    assert new.answer == old.answer
    assert new.achieved == pytest.approx(old.achieved, rel=1e-9)
    assert new.fit == ""


@pytest.mark.parametrize(("d", "spec"), [(2, "erlang:4"), (2, "hyperexp:4"), (3, "hyperexp:10"), (4, "lognormal:0.3")])
def test_littles_law_at_the_fixed_point(d, spec):
    """E[S] = mean queue length / λ: catches a wrong join law, a full service in place of
    the residual, or a level off by one."""
    lam = 0.85
    s, _ = ds.sojourn_law(d, lam, spec)
    law, _ = ds.phase_form(spec)
    fp = phase_fixed_point(d, lam, law.alpha, law.T)
    assert s.mean == pytest.approx(fp.mean_queue_length / lam, rel=1e-9)
    assert s.beta.sum() == pytest.approx(1.0, abs=1e-12)


def test_residual_phase_matters():
    """H2 at d = 2: the residual of the phase in service (slow phases are over-represented
    among busy servers) is not a fresh service; the tail differs from the wrong chain."""
    lam, d = 0.85, 2
    law = parse_service("hyperexp:10")
    s, _ = ds.sojourn_law(d, lam, law)
    fp = phase_fixed_point(d, lam, law.alpha, law.T)
    m = fp.x.sum(axis=1)
    wrong = s.beta.reshape(-1, 2).copy()
    wrong[1:] = wrong[1:].sum(axis=1, keepdims=True) * law.alpha  # a fresh service in place of the residual
    bad = ds.PhaseSojourn(wrong.ravel(), s.Q)
    assert abs(bad.mean - s.mean) > 0.05
    assert m.sum() == pytest.approx(lam, abs=1e-12)  # u_1 = λ


@pytest.mark.parametrize("spec", ["erlang:3", "hyperexp:4"])
def test_uniformization_against_a_dense_matrix_exponential(spec):
    s, _ = ds.sojourn_law(2, 0.8, spec)
    Q = s.Q.toarray()
    one = np.ones(Q.shape[0])
    for t in (0.3, 3.0, 12.0):
        assert s.tail(t) == pytest.approx(float(s.beta @ sl.expm(Q * t) @ one), rel=1e-9, abs=1e-15)


def test_fit_is_labelled_and_has_the_two_moments():
    law, note = ds.phase_form("lognormal:0.3")
    assert note.startswith("fit: lognormal:0.3 ") and "mixed Erlang" in note
    assert law.scv == pytest.approx(0.3, rel=1e-12) and law.mean == 1.0
    h2, note = ds.phase_form("pareto:3")  # SCV 1/3
    assert h2.scv == pytest.approx(1 / 3, rel=1e-12)
    det, note = ds.phase_form("deterministic")
    assert det.alpha.size == ds.MAX_FIT_PHASES and "fitted at SCV 0.1" in note
    assert ds.phase_form("erlang:4")[1] == ""
    with pytest.raises(ValueError, match="infinite variance"):
        ds.phase_form("pareto:2")
    r = ds.least_d_for_service_latency(0.9, 0.99, 4.0, "lognormal:0.25")
    a, T = fit_phase_type(0.25)
    assert r.fit and "fit:" in r.summary()
    assert r.achieved == pytest.approx(ds.sojourn_law(r.answer, 0.9, phase_type(a, T))[0].quantile(0.99), rel=1e-12)


def test_service_quantiles_are_the_laws_own():
    """jsq and jiq: one service; the exact quantile of each law, by its own formula."""
    q = 0.99
    z = statistics.NormalDist().inv_cdf(q)
    s2 = math.log1p(0.25)
    c = ds.compare_rules(0.9, q, 4.0, "lognormal:0.25")
    rows = {r["policy"]: r for r in c.rows}
    assert rows["jsq"]["value"] == pytest.approx(math.exp(-s2 / 2 + math.sqrt(s2) * z), rel=1e-10)
    assert rows["jiq"]["value"] == rows["jsq"]["value"]
    assert rows["random"]["value"] == pytest.approx(
        ds.mph1_sojourn_quantile(0.9, phase_type(*fit_phase_type(0.25)), q), rel=1e-12
    )
    assert rows["jsq-d"]["d"] == 4 and not rows["random"]["meets"]
    assert [r["samples"] for r in c.rows] == ["1 (none read)", "d = 4", "0", "n"]
    pa = ds.compare_rules(0.5, 0.9, 3.0, "pareto:3")
    p3 = {r["policy"]: r for r in pa.rows}["jsq"]["value"]
    assert p3 == pytest.approx((2 / 3) * 0.1 ** (-1 / 3), rel=1e-12)
    e = {r["policy"]: r for r in ds.compare_rules(0.5, 0.99, 6.0, "exp").rows}
    assert e["jsq"]["value"] == pytest.approx(math.log(100), rel=1e-10)
    assert e["random"]["value"] == pytest.approx(math.log(100) / 0.5, rel=1e-10)


def test_refusals_before_any_work():
    with pytest.raises(ValueError, match="own service"):
        ds.least_d_for_service_latency(0.9, 0.99, 3.0, "erlang:2")  # Erlang-2's p99 is 3.32
    with pytest.raises(ValueError, match="quantile"):
        ds.least_d_for_service_latency(0.9, 1.5, 3.0, "exp")
    with pytest.raises(ValueError, match="latency"):
        ds.least_d_for_service_latency(0.9, 0.9, -1.0, "exp")
    with pytest.raises(ValueError, match="service must be one of"):
        ds.least_d_for_service_latency(0.9, 0.9, 5.0, "gamma:2")
    with pytest.raises(ValueError, match="d_max"):
        ds.least_d_for_service_latency(0.99, 0.99, 12.0, "hyperexp:4", d_max=4)


def test_answer_is_tight_and_monotone():
    r = ds.least_d_for_service_latency(0.9, 0.99, 14.0, "hyperexp:4")
    assert r.monotone and r.achieved <= 14.0 < r.neighbour["value"]
    assert r.neighbour["d"] == r.answer - 1
    # d = ∞: one H2 service, P(S > t) = p e^{−2pt} + (1−p) e^{−2(1−p)t} = 0.01
    p = (1 + math.sqrt(3 / 5)) / 2
    floor = brentq(lambda t: p * math.exp(-2 * p * t) + (1 - p) * math.exp(-2 * (1 - p) * t) - 0.01, 0, 100)
    assert r.floor == pytest.approx(floor, rel=1e-9)
    qs = [v for _, v in r.checked]
    assert r.to_dict()["answer"] == r.answer and len(qs) == len(r.to_frame())


def test_event_engine_quantiles_at_large_n():
    """n = 4000 servers, H2 of SCV 4, JSQ(2), λ = 0.8: the simulated sojourn p50, p90, p99
    and mean within 4 standard errors (spread of 4 replications, fixed seed) of the mean
    field.  The finite-n bias, measured at n = 1000 and 4000 with 7x longer runs (p99 19.99 ±
    0.05 at 4000 against 19.96), is a fraction of one error bar at this size."""
    from supermarket.simulation.general import simulate_general

    lam, d, spec = 0.8, 2, "hyperexp:4"
    s, _ = ds.sojourn_law(d, lam, spec)
    r = simulate_general(4000, d, lam, service=spec, time=200.0, replications=4, seed=11, workers=2)
    assert abs(r.sojourn.mean - s.mean) < 4 * r.sojourn.stderr
    for q in (0.5, 0.9, 0.99):
        e = r.sojourn_quantiles[q]
        assert e.reliable
        assert abs(e.mean - s.quantile(q)) < 4 * e.stderr, (q, e.mean, e.stderr, s.quantile(q))


@pytest.mark.slow
@pytest.mark.parametrize(("spec", "lam", "d"), [("erlang:4", 0.9, 2), ("lognormal:0.25", 0.85, 3)])
def test_event_engine_quantiles_at_large_n_slow(spec, lam, d):
    """The same at longer runs.  For lognormal the engine runs the two-moment fit itself (a
    phase-type law): the mean field of a fit is checked against the fit; the law itself differs
    (mean sojourn 1.4663 ± 0.0006 for lognormal:0.25 at λ = 0.85, d = 3, n = 4000, against the
    fit's 1.4715: the residual service depends on more than two moments)."""
    from supermarket.simulation.general import simulate_general

    law, _ = ds.phase_form(spec)
    s, _ = ds.sojourn_law(d, lam, law)
    r = simulate_general(4000, d, lam, service=law, time=1000.0, replications=4, seed=12, workers=2)
    assert abs(r.sojourn.mean - s.mean) < 4 * r.sojourn.stderr
    for q in (0.5, 0.9, 0.99):
        e = r.sojourn_quantiles[q]
        assert abs(e.mean - s.quantile(q)) < 4 * e.stderr, (q, e.mean, e.stderr, s.quantile(q))


@pytest.mark.parametrize(("d", "q", "T"), [(1, 0.99, 2 * math.log(100)), (3, 0.999, 12.0), (2, 0.9, 4.0)])
def test_largest_load_with_exponential_service_is_todays(d, q, T):
    from supermarket.design.latency import max_load_for_latency

    new = ds.max_load_for_service_latency(d, q, T, "exp")
    assert new.answer == pytest.approx(max_load_for_latency(d, q, T).answer, rel=2e-5)
    assert new.monotone and new.achieved <= T * (1 + 1e-12) and T < new.neighbour["value"]


def test_largest_load_random_routing_mh2():
    """d = 1, H2: the answer λ* solves the classical M/PH/1 law's p90 = T (a root in λ of the
    dense-matrix-exponential tail, independent of the bisection's fixed points)."""
    law = parse_service("hyperexp:4")
    r = ds.max_load_for_service_latency(1, 0.9, 10.0, law)
    lam = brentq(lambda x: ds.mph1_sojourn_tail(x, law.alpha, law.T, 10.0) - 0.1, 0.01, 0.99, xtol=1e-12)
    assert r.answer == pytest.approx(lam, rel=2e-5)
    with pytest.raises(ValueError, match="own service"):
        ds.max_load_for_service_latency(2, 0.99, 10.0, law)  # one H2 service's p99 is 10.75
    out = json.loads(
        _run(["design", "--d", "1", "--latency", "10", "--quantile", "0.9", "--service", "hyperexp:4", "--json"]).output
    )
    assert out["d"] == 1 and out["answer"] == pytest.approx(lam, rel=2e-5)


def _run(args):
    return CliRunner().invoke(main, args)


def test_cli_design_service_text_and_json():
    r = _run(["design", "--load", "0.9", "--latency", "14", "--service", "hyperexp:4"])
    assert r.exit_code == 0, r.output
    assert "d = 11 choices give sojourn p99 = 13.9128 ≤ 14 (mean field); d = 10 would give 14.0351." in r.output
    r = _run(["design", "--load", "0.9", "--latency", "4", "--service", "lognormal:0.25", "--json"])
    out = json.loads(r.output)
    assert out["answer"] == 4 and out["fit"].startswith("fit:") and out["service"] == "lognormal:0.25"
    r = _run(["design", "--load", "0.9", "--latency", "4", "--service", "lognormal:0.25", "--policy", "best"])
    assert r.exit_code == 0
    assert "jsq-d (d=4)" in r.output and "fit:" in r.output and "samples/arrival" in r.output
    # explicit exp keeps today's answer
    a = json.loads(_run(["design", "--load", "0.9", "--latency", "8", "--service", "exp", "--json"]).output)
    assert a["answer"] == least_d_for_latency(0.9, 0.99, 8.0).answer


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--load", "0.9", "--latency", "4", "--service", "bogus"], "service must be one of"),
        (["--load", "0.9", "--latency", "1", "--service", "erlang:2"], "own service"),
        (["--d", "2", "--load", "0.9", "--latency", "4", "--service", "erlang:2"], "exactly one of"),
        (["--d", "2", "--latency", "9", "--service", "erlang:2", "--policy", "best"], "give --load"),
        (["--load", "0.9", "--latency", "9", "--service", "pareto:1.5"], "infinite variance"),
        (["--load", "0.9", "--latency", "9", "--service", "exp", "--verify"], "--verify needs --n"),
        (["--load", "0.9", "--max-queue", "3", "--service", "exp"], "--latency only"),
    ],
)
def test_cli_refusals(args, needle):
    r = CliRunner().invoke(main, ["design", *args])
    assert r.exit_code == 2
    assert needle in r.output
    assert "Traceback" not in r.output
