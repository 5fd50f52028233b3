"""The second-order identities of docs/control-variates.md ([derived]) against exact laws:
``E[A(u_i u_j)] = 0`` in equilibrium, with ``A(u_i u_j)`` as computed by the library
(``control.second_order_terms`` with ``engines.tables.p_rule_counts``, which
benchmarks/calibration/second_order_controls.py uses too), summed over the exact stationary law of n = 3 built
from the per-queue definition (tests/exact_small.py, ``queue_law``), with and without
replacement.  A sign or a factor of n wrong in the δ_ij term, or the departures' sign, gives
a mean of order 0.01 to 0.1 here, far above the truncation error."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from _paths import ROOT
from exact_small import queue_law

_PATH = ROOT / "benchmarks" / "calibration" / "second_order_controls.py"


def _module():
    spec = importlib.util.spec_from_file_location("second_order_controls", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("replace", [True, False])
def test_quadratic_identities_hold_under_the_exact_law(replace):
    n, d, lam = 3, 2, 0.5
    law = queue_law(n, d, lam, replace=replace, M=16)
    assert law.tail < 1e-9  # the truncation (arrivals beyond M dropped) moves each mean by about this
    u = law.states / n
    Z, Y = _module().controls(u, n, d, lam, replace, m=4, q=3)
    EZ = law.prob @ Z
    EY = law.prob @ Y
    assert np.all(np.abs(EZ) < 1e-8), EZ  # the first-order identities, as a check of the setup
    assert np.all(np.abs(EY) < 1e-8), EY
    # and they are not trivially zero: each control varies under the law
    assert np.all(law.prob @ Y**2 > 1e-4)


@pytest.mark.parametrize("policy,replace", [("jsq-d", True), ("jsq-d", False), ("jiq", True), ("jsq", True)])
def test_library_second_order_terms_have_mean_zero_under_each_rules_exact_law(policy, replace):
    """The library's ``A(u_i u_j)`` with ``p_rule_counts`` (JIQ's factor ``1{c_1 = n}``
    included) summed over the exact law of the profile chain of each rule
    (``stationary.solve``, n = 4): 0 to the solver's tolerance, while each control varies.
    Mutations caught: JIQ without its factor, the hypergeometric ``P`` replaced by ``(c/n)^d``."""
    from supermarket.engines.tables import p_rule_counts
    from supermarket.simulation.control import second_order_pairs, second_order_terms
    from supermarket.stationary.profile import solve
    from supermarket.system.policies import policy_code

    n, d, lam = 4, 2, 0.7
    ex = solve(n, d, lam, replace=replace, policy=policy, profile_law=True)
    law = ex.profile_law()
    L = 5
    c = np.zeros((len(law), L), dtype=np.int64)
    for r, (cc, _) in enumerate(law):
        m = min(len(cc), L)
        c[r, :m] = cc[:m]
    prob = np.array([p for _, p in law])
    assert abs(prob.sum() - 1) < 1e-9
    P = p_rule_counts(policy_code(policy), c, n, d, replace)
    Y = second_order_terms(c / n, P, lam, n, second_order_pairs(3))
    assert np.all(np.abs(prob @ Y) < 1e-7), prob @ Y
    assert np.all(prob @ Y**2 > 1e-5)


def test_p_rule_counts_equals_the_rules_p_levels():
    """The numba ``P_i`` of every rule equals ``policies.p_levels`` (exact integer arithmetic)
    on every profile of n = 5 with 3 levels, with and without replacement."""
    import itertools

    from supermarket.engines.tables import p_rule_counts
    from supermarket.system.policies import POLICIES, RULES, p_levels, policy_code

    n, d = 5, 3
    rows = [c for c in itertools.product(range(n + 1), repeat=3) if c[0] >= c[1] >= c[2]]
    c = np.array(rows, dtype=np.int64)
    counted = [p for p in POLICIES if "profile" in RULES[p].engines]  # the count kernels' rules
    assert len(counted) >= 4
    for policy in counted:
        for replace in (True, False):
            got = p_rule_counts(policy_code(policy), c, n, d, replace)
            want = p_levels(policy, c, n, d, replace=replace)
            assert np.allclose(got, want, rtol=1e-13, atol=0), (policy, replace)
