"""Screens of ``supermarket design``: bounded searches that never pass λ = 1 to a checked
function, and the verdict logic of the latency checks."""

from __future__ import annotations

import pytest

from supermarket.design import latency as lt
from supermarket.design import service as ds
from supermarket.design import service_search


def test_max_load_for_latency_never_evaluates_load_one():
    # p99 ≤ 60 at d = 2 holds up to loads within 2^-53 of 1: the bisection used to end with
    # hi = 1.0 and ask the mean field for λ = 1 ("load (λ) must be in (0, 1) ...; got 1.0")
    r = lt.max_load_for_latency(2, 0.99, 60.0)
    assert r.capped and r.answer == lt.LOAD_MAX and r.neighbour == {}
    assert all(0 < x <= lt.LOAD_MAX for x, _ in r.checked)
    assert "up to" in r.summary()


def test_max_load_for_latency_uncapped_unchanged():
    r = lt.max_load_for_latency(1, 0.99, 2 * 4.605170185988091)
    assert not r.capped and round(r.answer, 6) == 0.5
    r = lt.max_load_for_latency(2, 0.99, 8.0)
    assert not r.capped and r.achieved <= 8.0 < r.neighbour["value"]


def test_max_load_for_service_latency_bounded_and_capped(monkeypatch):
    # every evaluated load is checked below LOAD_MAX; a target met there is reported as capped
    # (both patched where the search reads them: design/service_search.py)
    seen = []
    real = service_search.sojourn_law

    def spy(d, lam, law):
        seen.append(lam)
        assert 0 < lam <= service_search.LOAD_MAX
        return real(d, lam, law)

    monkeypatch.setattr(service_search, "sojourn_law", spy)
    # patch the tail so that the target is met at every load (the fast stand-in for
    # erlang:4 at d = 3, p99 ≤ 8, whose real search needs the fixed point near λ = 1)
    monkeypatch.setattr(service_search, "LOAD_MAX", 0.99)
    notes = []
    r = ds.max_load_for_service_latency(2, 0.9, 30.0, "exp", progress=notes.append)
    assert r.capped and r.answer == 0.99 and r.neighbour == {}
    assert max(seen) <= 0.99 and len(notes) == len({x for x, _ in r.checked}) <= 20
    assert "up to" in r.summary()


def test_max_load_for_service_latency_uncapped():
    r = ds.max_load_for_service_latency(2, 0.99, 14.0, "hyperexp:4")
    assert not r.capped and round(r.answer, 3) == 0.445


def _design_verdict(monkeypatch, value, stderr, question="largest load"):
    """verify_latency on a stubbed simulation whose quantile is ``value ± stderr``."""
    import supermarket.simulation as simmod

    law = type("Law", (), {"quantiles": {0.99: value}, "stderr": {"quantiles": {0.99: stderr}}})()
    result = type("R", (), {"sojourn": law})()

    monkeypatch.setattr(simmod, "simulate", lambda *a, **k: object())
    monkeypatch.setattr(lt, "from_simulation", lambda res, quantiles: result)
    design = (
        lt.max_load_for_latency(2, 0.99, 8.0) if question == "largest load" else lt.least_d_for_latency(0.9, 0.99, 8.0)
    )
    return lt.verify_latency(design, 10, steps=10, replications=2)


@pytest.mark.parametrize(
    ("value", "stderr", "verdict"),
    [(7.0, 0.1, "meets"), (9.0, 0.1, "fails"), (7.9, 0.1, "undecided"), (8.1, 0.1, "undecided")],
)
def test_verify_latency_verdict(monkeypatch, value, stderr, verdict):
    # v + z·se < T meets, v − z·se > T fails, else undecided (z = 2, T = 8)
    v = _design_verdict(monkeypatch, value, stderr)
    assert [p["verdict"] for p in v["points"]] == [verdict]


def test_verify_latency_undecided_is_not_fewer_choices(monkeypatch):
    # both d and d − 1 within 2 s.e. of the target: undecided, not "finite n needs fewer choices"
    v = _design_verdict(monkeypatch, 7.95, 0.1, question="least d")
    assert [p["verdict"] for p in v["points"]] == ["undecided", "undecided"]
    assert v["changes_answer"] is None and "fewer" not in v["note"]


def test_service_tail_truncation_accuracy():
    # PhaseSojourn.tail drops Poisson terms past the 1 − 1e-16 quantile: an error below 1e-16
    # (plus rounding); Erlang-2 of rate 2 per phase against scipy's own gamma law
    import numpy as np
    import scipy.sparse as sp
    import scipy.stats as st

    s = ds.PhaseSojourn(np.array([1.0, 0.0]), sp.csr_matrix([[-2.0, 2.0], [0.0, -2.0]]))
    for t in (0.5, 2.0, 8.0, 20.0):
        exact = st.gamma.sf(t, a=2, scale=0.5)
        assert abs(s.tail(t) - exact) <= 1e-15 + 1e-12 * exact
    # a slow phase under a fast uniformization rate: the dropped Poisson terms carry weight
    # near 1, so a looser truncation shows (an isf(1e-8) cut gives errors near 1e-9)
    h = ds.PhaseSojourn(np.array([0.5, 0.5]), sp.csr_matrix([[-10.0, 0.0], [0.0, -0.1]]))
    for t in (0.3, 1.0, 3.0):
        exact = 0.5 * np.exp(-10.0 * t) + 0.5 * np.exp(-0.1 * t)
        assert abs(h.tail(t) - exact) <= 1e-14


def test_fit_tail_named_as_the_cause():
    # lognormal:4's own p99 is 8.56 < 10, but its two-moment fit's is 10.75: no d can help, and
    # the message says so instead of "needs more than d_max choices"
    with pytest.raises(ValueError, match=r"phase-type fit, whose own service p99 is 10\.7") as e:
        ds.least_d_for_service_latency(0.9, 0.99, 10.0, "lognormal:4")
    assert "d_max" not in str(e.value)


def test_rule_table_prints_no_nan():
    c = ds.compare_rules(0.9, 0.99, 6.0, "lognormal:4")
    text = c.summary()
    assert "nan" not in text.lower().replace("none read", "")
    assert "no d:" in text


def test_max_queue_screen_states_the_caveat():
    # k_(λ,d) ≤ K (heavy-traffic asymptotic) next to a mean-field share 0.347 above K: the
    # screen must say the asymptotic is not a bound at this d
    from supermarket.theory import design

    text = design(0.999, 2).summary()
    assert "heavy-traffic prediction" in text
    assert "caveat: k_(λ,d) ≤ 2 and the share 0 above 2 are heavy-traffic asymptotics, not a bound at d = 32" in text
