"""JBT(T = d) on the count engines with server classes (docs/model.md §15.1, §15.7): the classes
kernel (exponential service) and the classes x phase kernel.

Independent facts: the exact stationary laws of a tiny system (`supermarket.stationary.classes`,
`supermarket.stationary.classes_phase`, from the labelled join law of JBT's definition); the
per-queue event engine as a second engine; ``T = 1`` is JIQ's law, and on these kernels JIQ's
draws too.  The exact laws at ``T = d ± 1`` are checked to be far (many standard errors) from the
one at ``T = d``, so a kernel that read the threshold one off fails the comparison.  The
event-for-event check against the plain-Python chain (the one that catches a ``P_ℓ`` left stale
when ``C_T`` changes) is in tests/engines/test_naive_classes.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from supermarket import simulate
from supermarket.simulation.class_starts import classes_phase_start, classes_start
from supermarket.simulation.classes import simulate_classes
from supermarket.simulation.classes_phase import simulate_classes_phase
from supermarket.simulation.general import simulate_general
from supermarket.stationary.classes import solve_classes
from supermarket.stationary.classes_phase import solve_classes_phase
from supermarket.system import methods
from supermarket.system.service import parse_server_classes, parse_service
from supermarket.system.spec import System

Z = 4.0  # standard errors allowed (fixed seeds: a failure is a bug)
TWO = "0.5:2,0.5:1"  # s̄ = 1.5
LAM = 0.7


def _exact(service, d):
    if service is None:
        return solve_classes(2, d, LAM, TWO, policy="jbt", cap=30)
    return solve_classes_phase(2, d, LAM, TWO, service, policy="jbt", cap=30)


def _run(service, d, policy="jbt", events=2 * 10**6, seed=3):
    if service is None:
        return simulate_classes(2, d, LAM, server_classes=TWO, policy=policy, events=events, seed=seed)
    return simulate_classes_phase(
        2, d, LAM, server_classes=TWO, service=service, policy=policy, events=events, seed=seed
    )


@pytest.mark.parametrize("service", [None, "erlang:2"])
def test_count_engines_against_the_exact_law(service):
    """n = 2 (one server per class), T = d = 2: per-class E[u_1], E[u_2], mean queue lengths and
    sojourn times and the total mean queue length within Z standard errors (plus 10 times the
    exact law's mass at its cap); the laws of T = 1 and T = 3 are far off."""
    d = 2
    ex = _exact(service, d)
    assert ex.mass_at_cap < 1e-4
    slack = 10 * ex.mass_at_cap
    r = _run(service, d)
    assert r.engine == ("classes" if service is None else "classes-phase")
    for k, c in enumerate(r.classes):
        for i in range(2):
            assert abs(c.u_mean[i] - ex.u_mean[k, i]) <= Z * c.u_stderr[i] + slack, (k, i)
        for est, exact in ((c.mean_queue_length, ex.mean_queue_length[k]), (c.sojourn, ex.sojourn[k])):
            assert est.reliable and abs(est.mean - exact) <= Z * est.stderr + slack, (k, est.mean, exact)
    tot = r.mean_queue_length
    assert tot.reliable and abs(tot.mean - ex.total_mean_queue_length) <= Z * tot.stderr + slack
    # the check has the power to see the threshold: at T = d ± 1 the fast class's mean queue length is
    # more than 2Z of its standard errors away
    fast = r.classes[0].mean_queue_length
    for other in (d - 1, d + 1):
        off = _exact(service, other)
        assert abs(off.mean_queue_length[0] - ex.mean_queue_length[0]) > 2 * Z * fast.stderr, other


@pytest.mark.parametrize("service", [None, "erlang:2", "exp"])
def test_threshold_one_is_jiq(service):
    """JBT(T = 1) joins an idle server while there is one, else a uniform one: JIQ.  The kernels
    draw the joined length from ``P_i`` for both (JIQ's ``C_i/n`` and JBT's ``jbt_p``, the same
    value here), so the runs agree number for number on the classes x phase kernel; on the classes
    kernel JIQ's uniform server is drawn as an integer, ``C_i > ⌊nU⌋``, the same event but for
    rounding (none in these events)."""
    a = _run(service, 1, events=2 * 10**5, seed=11).to_dict()
    b = _run(service, 1, policy="jiq", events=2 * 10**5, seed=11).to_dict()
    for k in ("mean_queue_length", "u_mean", "classes", "sojourn"):
        assert a[k] == b[k], k


def test_count_engine_against_the_event_engine():
    """n = 10, λ = 0.8, T = 2: the classes kernel and the per-queue event engine agree on every
    class's mean queue length and sojourn time within Z combined standard errors."""
    kw = dict(server_classes=TWO, policy="jbt")
    a = simulate_classes(10, 2, 0.8, events=4 * 10**6, seed=1, **kw)
    b = simulate_general(10, 2, 0.8, time=1500.0, burn_in=100.0, seed=2, replications=4, workers=1, **kw)
    assert a.engine == "classes" and b.policy == "jbt"
    for ca, cb in zip(a.classes, b.classes):
        for ea, eb in ((ca.mean_queue_length, cb.mean_queue_length), (ca.sojourn, cb.sojourn)):
            assert ea.reliable and eb.reliable
            assert abs(ea.mean - eb.mean) <= Z * math.hypot(ea.stderr, eb.stderr)


def test_fixed_point_start_holds_no_queue_above_the_threshold():
    """``start="fixed-point"``: jbt's fluid fixed point has no queue longer than T = d (docs/model.md
    §2.1); its rounded counts start the run."""
    sc = parse_server_classes(TWO)
    counts = sc.counts(1000)
    c0 = classes_start(counts, 3, 0.9, sc, "jbt")
    assert c0.shape[1] <= 4 and (c0[:, 1] > 0).all()  # levels 0..T at most
    N0 = classes_phase_start(counts, 3, 0.9, sc, parse_service("erlang:2"), "jbt")
    assert N0.shape[1] <= 4
    r = simulate_classes(1000, 3, 0.9, server_classes=TWO, policy="jbt", events=2 * 10**5, seed=1, start="fixed-point")
    assert r.classes[0].u_mean[0] > 0


def test_which_engine_runs_jbt_with_classes():
    """The default stays the event engine, and so does ``engine="profile"`` (it stands for the row's
    default, whose numbers it keeps); ``"phase"`` runs the count engine with classes and phases; the
    note of the default names it; ``time_mode="discrete"`` runs the first count engine of the row
    that runs jbt (the count engine with classes runs it from the library, ``simulate_classes``)."""
    exp, erl = (
        System(10, 2, 0.5, rule="jbt", server_classes=TWO),
        System(10, 2, 0.5, rule="jbt", server_classes=TWO, service="erlang:2"),
    )
    assert [methods.simulation_engine(exp, e) for e in (None, "profile", "phase", "events")] == [
        "events",
        "events",
        "classes-phase",
        "events",
    ]
    assert methods.simulation_engine(exp, None, "discrete") == "classes-phase"
    assert [methods.simulation_engine(erl, e) for e in (None, "profile", "phase")] == [
        "events",
        "events",
        "classes-phase",
    ]
    assert methods.engine_note(exp, "events").endswith("engine 'phase' runs it on request")
    r = simulate(10, 2, 0.7, policy="jbt", server_classes=TWO, service="erlang:2", engine="phase", steps=10**5, seed=2)
    assert r.engine == "classes-phase" and np.isfinite(r.mean_queue_length.mean)


@pytest.mark.slow
def test_large_n_against_the_fluid_fixed_point():
    """n = 10^4, λ = 0.9, T = 2, 2·10^7 events: per class and in total, the mean queue length within
    Z standard errors plus 2/n of jbt's fluid fixed point with classes (docs/model.md §2.1)."""
    from supermarket.meanfield.fluid import fluid_fixed_point

    n, lam = 10**4, 0.9
    fp = fluid_fixed_point("jbt", 2, lam, parse_server_classes(TWO))
    r = simulate_classes(n, 2, lam, server_classes=TWO, policy="jbt", events=2 * 10**7, seed=1)
    for k, c in enumerate(r.classes):
        est = c.mean_queue_length
        assert est.reliable and abs(est.mean - fp.u[k].sum()) <= Z * est.stderr + 2.0 / n, (k, est.mean)
    tot = r.mean_queue_length
    want = float(np.dot(parse_server_classes(TWO).fractions, fp.u.sum(axis=1)))
    assert tot.reliable and abs(tot.mean - want) <= Z * tot.stderr + 2.0 / n
