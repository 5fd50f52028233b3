"""The second-order controls ``A(u_i u_j)`` sampled from the state, a study path of the run
plan (``run.build_plan(..., second_order=True)``; docs/control-variates.md, "Second-order
controls"): not an option of ``simulate``, since their error bars do not hold in heavy
traffic.  Checked here against the exact law of tiny systems, with their gain, and their
refusals; the identities themselves in tests/simulation/test_second_order_identity.py; the calibration
in docs/control-variates.md (``tests/calibration.py --estimators=cv2``)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from supermarket.simulation import simulate
from supermarket.stationary.profile import solve


def _run(n, d, lam, second_order=False, **kw):
    from supermarket.simulation import run
    from supermarket.simulation.plan import build_plan

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not second_order:
            return simulate(n, d, lam, progress=False, **kw)
        return run._execute(build_plan(n, d, lam, second_order=True, **kw), progress=False)


@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(replace=False),
        dict(time_mode="continuous", steps=200_000),
        dict(engine="queues"),
        dict(policy="jiq", lam=0.8, n=4),
    ],
)
def test_second_order_estimates_agree_with_the_exact_law(kw):
    """n = 3 (4 for JIQ), d = 2: E[u_2], E[u_3] and the mean queue length with the
    second-order controls within 4.5 of their standard errors of the exact law, and the
    controls in use (named in the notes)."""
    kw = dict(kw)
    n, lam = kw.pop("n", 3), kw.pop("lam", 0.9)
    steps = kw.pop("steps", 400_000)
    ex = solve(n, 2, lam, replace=kw.get("replace", True), policy=kw.get("policy", "jsq-d"))
    r = _run(n, 2, lam, steps=steps, seed=5, second_order=True, **kw)
    assert any(note.startswith("second-order controls A(u_i·u_j)") for note in r.control_notes), r.control_notes
    for i in (1, 2):
        assert r.u_reliable[i], i
        assert abs(r.u_mean[i] - ex.u_mean[i]) <= 4.5 * r.u_stderr[i], (i, r.u_mean[i], ex.u_mean[i])
    if math.isfinite(r.mean_queue_length_stderr):
        assert abs(r.mean_queue_length - ex.mean_queue_length) <= 4.5 * r.mean_queue_length_stderr


def test_second_order_controls_cut_the_variance_of_e_u1_and_of_the_mean_queue_length():
    """At (1000, 2, 0.9), 10^7 steps, the same chain: the first-order controls leave E[u_1]
    (its own identity excluded) at a gain of about 3; with the second-order ones it is about
    2,000, and the mean queue length's gain grows from about 950 to about 1,500 (measured,
    docs/model.md §9.1).  The estimates stay within a few of their standard errors of each
    other and of E[u_1] = λ.  Mutation caught: the second-order columns not passed to the fit."""
    a = _run(1000, 2, 0.9, steps=10**7, seed=1, start="fixed-point")
    b = _run(1000, 2, 0.9, steps=10**7, seed=1, start="fixed-point", second_order=True)
    assert a.variance_reduction["u_mean"][0] < 10 < 500 < b.variance_reduction["u_mean"][0]
    assert b.variance_reduction["mean_queue_length"] > 1.2 * a.variance_reduction["mean_queue_length"]
    assert abs(b.u_mean[0] - 0.9) <= 4.5 * b.u_stderr[0]
    se = math.hypot(a.mean_queue_length_stderr, b.mean_queue_length_stderr)
    assert abs(a.mean_queue_length - b.mean_queue_length) <= 4.5 * se


def test_second_order_keeps_the_plain_numbers_and_records_nothing_unasked():
    """The plain estimates (the same chain: sampling the state draws no random number) are
    bit for bit those of a run without the option; no trajectory is returned unless asked
    for, and with ``record_every`` the trajectory holds at least the 4 levels the controls
    need."""
    a = _run(100, 2, 0.9, steps=200_000, seed=3, start="fixed-point")
    b = _run(100, 2, 0.9, steps=200_000, seed=3, start="fixed-point", second_order=True)
    assert np.array_equal(a.u_mean_plain, b.u_mean_plain) and a.trajectory is None and b.trajectory is None
    c = _run(100, 2, 0.9, steps=200_000, seed=3, start="fixed-point", second_order=True, record_every=50)
    assert c.trajectory is not None and c.trajectory.u.shape[1] >= 4
    assert np.array_equal(a.u_mean_plain, c.u_mean_plain)


def test_batches_without_a_sampled_state_turn_the_second_order_controls_off():
    """Sampled every 10^4 steps, 1024 batches of about 200 steps mostly hold no state: the
    controls are not used, the note says why, and the first-order estimate is unchanged."""
    a = _run(100, 2, 0.9, steps=200_000, seed=3, start="fixed-point")
    b = _run(100, 2, 0.9, steps=200_000, seed=3, start="fixed-point", second_order=True, record_every=10_000)
    assert any("no sampled state" in note for note in b.control_notes), b.control_notes
    assert np.array_equal(a.u_mean, b.u_mean) and np.array_equal(a.u_stderr, b.u_stderr, equal_nan=True)


def test_a_run_that_never_reaches_level_2_uses_what_it_has():
    """At λ = 0.001 no queue reaches length 2 in 2·10^5 steps (the profile has two levels):
    the pairs above the levels seen are left out, without an error (an IndexError before)."""
    r = _run(1000, 2, 0.001, second_order=True, steps=200_000, seed=1, start="fixed-point")
    assert len(r.u_mean) <= 3 and r.u_reliable[0]
    assert abs(r.u_mean[0] - 0.001) <= 4.5 * r.u_stderr[0]


@pytest.mark.parametrize(
    "kw, exc, match",
    [
        (dict(second_order="yes"), TypeError, "second_order must be True or False"),
        (dict(second_order=True, control_variates=False), ValueError, "needs control_variates=True"),
    ],
)
def test_second_order_bad_input_is_refused_before_any_work(kw, exc, match):
    from supermarket.simulation.plan import build_plan

    with pytest.raises(exc, match=match):
        build_plan(100, 2, 0.9, steps=10**12, **kw)


def test_simulate_offers_no_second_order_option():
    """Their error bars fail the heavy-traffic calibration (docs/control-variates.md): the
    public function does not offer them."""
    import inspect

    assert "second_order" not in inspect.signature(simulate).parameters
