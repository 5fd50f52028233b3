"""The events a ``precision=`` run expects before it starts (docs/model.md §9, "Before the run"):
the plain time average's variance from the linear-noise approximation, ``2(1 + λ) wᵀ(−A)⁻¹Σ w``
per event.

Independent facts: under random routing the queues are independent M/M/1 queues and the drift
is linear, so the formula must equal the M/M/1 variance constant of the time-averaged number in
system, ``2ρ(1 + ρ)/(1 − ρ)⁴`` per unit time (Whitt 1989), exactly; for JSQ(d) it is checked
against the spread of independent replications (slow).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from supermarket.simulation.precision import Z95_NORMAL, prior_events


@pytest.mark.parametrize("lam", [0.3, 0.5, 0.8, 0.95])
def test_random_routing_is_the_mm1_variance_constant(lam):
    e, source = prior_events(2, lam, 1e-2, ["mean-queue-length"], policy="random")
    mean = lam / (1 - lam)
    per_event = 2 * lam * (1 + lam) / (1 - lam) ** 4 * (1 + lam)  # per unit time, n(1 + λ) events a unit
    assert e == pytest.approx((Z95_NORMAL / 1e-2) ** 2 * per_event / mean**2, rel=1e-8)
    assert "mean queue length" in source and "[derived]" in source


def test_events_scale_as_the_inverse_square_of_the_precision_and_take_the_worst_target():
    e3, _ = prior_events(2, 0.9, 1e-3, ["mean-queue-length"])
    e4, _ = prior_events(2, 0.9, 1e-4, ["mean-queue-length"])
    assert e4 == pytest.approx(100 * e3, rel=1e-12)
    both, source = prior_events(2, 0.9, 1e-3, ["mean-queue-length", "u3"])
    u3, _ = prior_events(2, 0.9, 1e-3, ["u3"])
    assert both == max(e3, u3) and u3 > e3 and "E[u_3]" in source  # the smaller level is the harder one


def test_no_expectation_where_the_formula_does_not_exist():
    assert prior_events(2, 0.9, 1e-3, ["mean-queue-length"], policy="jsq")[0] is None
    e, why = prior_events(2, 0.9, 1e-3, ["sojourn-p99"])
    assert e is None and "quantiles" in why


def test_simulate_states_it_before_the_run():
    from supermarket.simulation import simulate
    from supermarket.simulation.run import PrecisionPlanWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = simulate(100, 2, 0.8, precision=0.05, seed=1, steps=20_000, control_variates=False)
    said = [str(w.message) for w in caught if issubclass(w.category, PrecisionPlanWarning)]
    assert said and said[0].startswith("precision 0.05 before the run:"), said
    want, _ = prior_events(2, 0.8, 0.05, ["mean-queue-length"])
    assert res.precision["prior_events"] == want and f"{want:.3g} events" in said[0]


@pytest.mark.slow
@pytest.mark.parametrize("n, d, lam", [(500, 2, 0.8), (1000, 3, 0.9)])
def test_jsq_d_matches_the_spread_of_replications(n, d, lam):
    """64 replications of 10^6 events from the fixed point (with a burn-in): the standard
    deviation of their plain means against the formula's; the spread's own relative error is
    about 1/√126 = 0.09, so the band is ±3 of it."""
    from supermarket.simulation import simulate

    E, R = 10**6, 64
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = simulate(
            n, d, lam, steps=E, replications=R, seed=11, control_variates=False, start="fixed-point", workers=2
        )
    means = np.array([r.mean_queue_length for r in res.per_replication])
    e, _ = prior_events(d, lam, 1.0, ["mean-queue-length"])
    sd_pred = means.mean() * math.sqrt(e / E) / Z95_NORMAL
    ratio = means.std(ddof=1) / sd_pred
    assert abs(ratio - 1) < 3 / math.sqrt(2 * (R - 1)), ratio
