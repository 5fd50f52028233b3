"""JBT(T = d) in the exact solvers of a phase-type law and of server classes (issue #28: the
capability matrix said they ran while the rule registry refused them).  Independent facts: a
phase-type law that is exponential in disguise (two phases of rate 1) and classes of equal speeds
are lumpable onto the one-class exponential chain, so their laws equal the profile solver's; the
labelled join law is JBT's definition; the event engine agrees with a non-exponential law."""

from __future__ import annotations

import numpy as np

from supermarket import simulate
from supermarket.stationary.classes import solve_classes
from supermarket.stationary.phase import _join_law, solve_phase
from supermarket.stationary.profile import solve


def test_labelled_join_law_is_jbts_definition():
    # d = 2: the queues shorter than 2 share the arrival; none shorter: uniform over all
    np.testing.assert_allclose(_join_law([0, 1, 3], 2, True, "jbt"), [0.5, 0.5, 0.0])
    np.testing.assert_allclose(_join_law([2, 1, 3], 2, True, "jbt"), [0.0, 1.0, 0.0])
    np.testing.assert_allclose(_join_law([2, 2, 3], 2, True, "jbt"), [1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_allclose(_join_law([0, 1, 3], 1, True, "jbt"), [1.0, 0.0, 0.0])  # T = 1: JIQ


def test_exponential_in_two_phases_is_the_profile_law():
    lam, n, d = 0.7, 3, 2
    ph = solve_phase(n, d, lam, [0.5, 0.5], [[-1.0, 0.0], [0.0, -1.0]], policy="jbt", cap=22)
    one = solve(n, d, lam, policy="jbt", tol=1e-13)
    m = 6
    # each solver truncates at its own cap: above T the rule is random routing, whose geometric tail
    # at λ = 0.7 leaves ~1e-7 at cap 22
    np.testing.assert_allclose(ph.u[:m], one.u_mean[:m], rtol=0, atol=1e-6)
    jiq = solve(n, d, lam, policy="jiq", tol=1e-13)
    assert np.max(np.abs(ph.u[1:m] - jiq.u_mean[1:m])) > 1e-2  # the threshold is read: not JIQ


def test_classes_of_equal_speed_are_the_profile_law():
    lam, n, d = 0.7, 2, 2  # one server of each class
    cl = solve_classes(n, d, lam, "0.5:1,0.5:1", policy="jbt", tol=1e-13, cap=60)
    one = solve(n, d, lam, policy="jbt", tol=1e-13)
    m = 6
    np.testing.assert_allclose(cl.total_u_mean[:m], one.u_mean[:m], rtol=0, atol=1e-8)
    jiq = solve(n, d, lam, policy="jiq", tol=1e-13)
    assert np.max(np.abs(cl.total_u_mean[1:m] - jiq.u_mean[1:m])) > 1e-2


def test_erlang_law_agrees_with_the_event_engine():
    """n = 3, d = 2, Erlang-2 service: E[u_1..4] of the event engine within 4 s.e. of the exact law."""
    lam = 0.7
    a, T = [1.0, 0.0], [[-2.0, 2.0], [0.0, -2.0]]
    ex = solve_phase(3, 2, lam, a, T, policy="jbt", cap=30)
    res = simulate(3, 2, lam, policy="jbt", service="erlang:2", time=20000.0, seed=7, replications=8)
    m = 4
    se = np.asarray(res.u_stderr[:m])
    assert np.all(np.isfinite(se)) and np.all(se > 0)
    assert np.all(np.abs(np.asarray(res.u_mean[:m]) - ex.u[:m]) <= 4 * se), (res.u_mean[:m], ex.u[:m], se)


def test_classes_with_a_phase_type_law_read_the_threshold():
    """The solver of classes with a phase-type law (§15.6) given ``exp`` is the exponential chain with
    classes (§15.4), for T = d = 2 and 3: it solved T = 1 (JIQ) whatever ``d`` before; and ``d`` is
    what the result reports."""
    from supermarket.stationary.classes_phase import solve_classes_phase

    lam, n, two = 0.7, 2, "0.5:2,0.5:1"
    jiq = solve_classes(n, 1, lam, two, policy="jiq", cap=30)
    for d in (2, 3):
        ph = solve_classes_phase(n, d, lam, two, "exp", policy="jbt", cap=30)
        cl = solve_classes(n, d, lam, two, policy="jbt", cap=30)
        assert ph.d == d
        np.testing.assert_allclose(ph.mean_queue_length, cl.mean_queue_length, rtol=1e-10)
        np.testing.assert_allclose(ph.u_mean[:, :4], cl.u_mean[:, :4], rtol=0, atol=1e-12)
        assert abs(ph.total_mean_queue_length - jiq.total_mean_queue_length) > 0.3  # not JIQ
