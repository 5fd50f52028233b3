"""The phase-type counts engine (engines/phase.py) against the naive reference
:class:`naive.NaivePhase`, event for event.

The reference steps the jump chain of docs/model.md §13 on the counts ``N[ℓ][φ]`` with the
same xoshiro stream, written from the definition (the phase of a joined queue in
proportion to ``N[ℓ][φ]``, a phase event's queue uniform among those in its phase, moves
from the rows of ``T``); after every event the counts ``N``, the busy servers per phase
``B``, the profile ``c``, the maximum, the total, the time and the next event's time are
compared, in both holding modes (an exponential holding time, or its mean), with the
table of ``P`` or its direct evaluation (as above ``FULL_MAX_N``), and at the end
the integrals ``∫ N[ℓ][φ] dt`` and ``∫ P_ℓ dt``.  A second chain runs the same events in
one call and must end in the same state.

The dispatch rules random, JSQ and JIQ (the rule's ``P_i`` from its definition in
:meth:`naive.NaivePhase.P_levels`) are compared the same way, and the kernel's ``P``
level by level too: JIQ's gate ``1{c_1 = n}`` is kept by refreshing every level when
``c_1`` reaches or leaves ``n``, so its cases spend many events with two or more queues
idle, with exactly one idle (where an arrival opens the gate and a completion at length 1
closes it) and with none idle.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from naive import NaivePhase
from supermarket.engines.rng import new_state
from supermarket.simulation.phase import PhaseChain
from supermarket.system.policies import policy_code
from supermarket.system.service import parse_service

# A law with moves both ways and a phase with no exit (Coxian-like, three phases): the
# kernel's move table must never complete from phase 1
_ALPHA3 = [0.6, 0.0, 0.4]
_T3 = [[-12.0, 8.0, 2.0], [4.0, -4.0, 0.0], [0.0, 2.0, -6.0]]  # mean α(−T)^{-1}1 = 0.87


def _law(name):
    if name == "ph3":
        return np.array(_ALPHA3), np.array(_T3)
    law = parse_service(name)
    return law.alpha, law.T


# (n, d, λ, replace, law, holding exponential, start N (rows ℓ = 0.., row 0 unused), events)
CASES = {
    "h2-rep-exp": (8, 2, 0.9, True, "hyperexp:4", True, None, 4_000),
    "erlang3-norep-mean": (10, 3, 0.95, False, "erlang:3", False, [[0, 0, 0], [3, 2, 1], [0, 2, 0], [1, 0, 0]], 4_000),
    "ph3-rep-exp": (6, 2, 0.8, True, "ph3", True, [[0, 0, 0], [1, 1, 0], [0, 0, 2]], 4_000),
}
SLOW_CASES = {
    "h2-norep-mean-d=n": (5, 5, 0.9, False, "hyperexp:9", False, None, 10_000),
    "erlang4-rep-exp": (30, 2, 0.97, True, "erlang:4", True, None, 10_000),
    "ph3-norep-mean": (12, 3, 0.9, False, "ph3", False, None, 10_000),
}
ALL = {**CASES, **SLOW_CASES}
PARAMS = [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_CASES else c for c in ALL]


def _chain(n, d, lam, rep, alpha, T, hexp, N, words, direct=False, policy="jsq-d"):
    t0 = -T.sum(axis=1)
    ch = PhaseChain(
        n,
        d,
        lam,
        alpha,
        T,
        t0,
        replace=rep,
        seed=np.random.SeedSequence(0),
        holding_exp=hexp,
        levels=4,
        policy=policy_code(policy),
    )
    if direct:  # P evaluated per change, as above FULL_MAX_N, instead of the table
        ch.tab = np.zeros(0)
    if N is not None:
        ch.set_counts(np.array(N))
    ch.s = np.array(words, dtype=np.uint64)
    return ch


def _compare(ch, nv, where):
    top = len(nv.N) - 1
    assert int(ch.ints[0]) == top, f"maximum differs {where}"
    assert ch.N[1 : top + 1].tolist() == nv.N[1:] and not ch.N[top + 1 :].any(), f"N differs {where}"
    assert ch.B.tolist() == nv.B, f"B differs {where}"
    c = [nv.c(ell) for ell in range(top + 1)]
    assert ch.c[: top + 1].tolist() == c and not ch.c[top + 1 :].any(), f"c differs {where}"
    assert int(ch.ints[1]) == sum(c[1:]), f"total differs {where}"
    assert math.isclose(ch.clock[0], nv.now, rel_tol=1e-12), f"time differs {where}"
    assert math.isclose(ch.clock[1], nv.t_next, rel_tol=1e-12), f"next event time differs {where}"


@pytest.mark.parametrize("case", PARAMS)
def test_phase_engine_matches_naive_event_for_event(case):
    n, d, lam, rep, law, hexp, N, steps = ALL[case]
    alpha, T = _law(law)
    words = [int(w) for w in new_state(40 + len(case))]
    direct = case in ("erlang3-norep-mean", "ph3-norep-mean")
    ch = _chain(n, d, lam, rep, alpha, T, hexp, N, words, direct)
    nv = NaivePhase(n, d, lam, rep, alpha, T, words, hexp, N)
    kinds = {"arrival": 0, "move": 0, "completion": 0}
    longest = 0
    for step in range(1, steps + 1):
        total = sum(nv.c(ell) for ell in range(1, len(nv.N)))
        ch.run_events(1)
        nv.step()
        new_total = sum(nv.c(ell) for ell in range(1, len(nv.N)))
        kinds["arrival" if new_total > total else "completion" if new_total < total else "move"] += 1
        _compare(ch, nv, f"at event {step}")
        longest = max(longest, len(nv.N) - 1)
    assert [int(w) for w in ch.s] == nv.rng.s
    if law.startswith("hyperexp"):  # no moves between phases in H2
        del kinds["move"]
    assert longest >= 4 and min(kinds.values()) > steps // 20, kinds  # queues formed; every kind of event
    areaN, areaP = ch.integrals()
    for (ell, f), v in nv.areaN.items():
        assert math.isclose(areaN[ell, f], v, rel_tol=1e-9, abs_tol=1e-12 * nv.now), (ell, f)
    for ell, v in nv.areaP.items():
        assert math.isclose(areaP[ell], v, rel_tol=1e-9, abs_tol=1e-12 * nv.now), ell

    bulk = _chain(n, d, lam, rep, alpha, T, hexp, N, words, direct)
    bulk.run_events(steps)
    _compare(bulk, nv, "after one call")


# The other dispatch rules: (rule, n, d, λ, replace, law, holding exponential, P evaluated
# directly, start N, events); n small and λ near 1, so that JIQ's three states (two or more
# queues idle, exactly one, none) each hold many events and queues still grow long
RULE_CASES = {
    "random-h2-rep-exp": ("random", 5, 2, 0.8, True, "hyperexp:4", True, False, None, 3_000),
    "random-ph3-norep-mean-direct": ("random", 4, 3, 0.9, False, "ph3", False, True, [[0, 0, 0], [1, 0, 1]], 3_000),
    "jsq-erlang3-norep-mean": (
        "jsq",
        4,
        2,
        0.95,
        False,
        "erlang:3",
        False,
        False,
        [[0] * 3, [2, 1, 0], [1, 0, 0]],
        3_000,
    ),
    "jsq-ph3-rep-exp-direct": ("jsq", 3, 2, 0.9, True, "ph3", True, True, None, 3_000),
    "jiq-h2-rep-exp": ("jiq", 4, 2, 0.9, True, "hyperexp:4", True, False, None, 3_000),
    "jiq-ph3-norep-mean-direct": ("jiq", 3, 2, 0.9, False, "ph3", False, True, [[0] * 3, [0, 1, 1], [1, 0, 0]], 3_000),
}
SLOW_RULE_CASES = {
    "random-erlang4-rep-mean": ("random", 8, 2, 0.95, True, "erlang:4", False, False, None, 10_000),
    "jsq-h2-rep-exp": ("jsq", 6, 3, 0.93, True, "hyperexp:9", True, False, None, 10_000),
    "jiq-erlang3-rep-mean-direct": ("jiq", 6, 2, 0.9, True, "erlang:3", False, True, None, 10_000),
    "jiq-h2-norep-exp": ("jiq", 8, 3, 0.97, False, "hyperexp:9", True, False, None, 10_000),
}
ALL_RULES = {**RULE_CASES, **SLOW_RULE_CASES}
RULE_PARAMS = [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_RULE_CASES else c for c in ALL_RULES]


@pytest.mark.parametrize("case", RULE_PARAMS)
def test_phase_engine_rules_match_naive_event_for_event(case):
    policy, n, d, lam, rep, law, hexp, direct, N, steps = ALL_RULES[case]
    alpha, T = _law(law)
    words = [int(w) for w in new_state(70 + len(case))]
    ch = _chain(n, d, lam, rep, alpha, T, hexp, N, words, direct, policy)
    nv = NaivePhase(n, d, lam, rep, alpha, T, words, hexp, N, policy=policy)
    kinds = {"arrival": 0, "move": 0, "completion": 0}
    seen = {"idle2": 0, "idle1": 0, "busy": 0, "opens": 0, "closes": 0}
    longest = 0
    for step in range(1, steps + 1):
        total = sum(nv.c(ell) for ell in range(1, len(nv.N)))
        was = nv.c(1)
        ch.run_events(1)
        nv.step()
        new_total = sum(nv.c(ell) for ell in range(1, len(nv.N)))
        kinds["arrival" if new_total > total else "completion" if new_total < total else "move"] += 1
        c1 = nv.c(1)
        seen["idle2" if c1 <= n - 2 else "idle1" if c1 == n - 1 else "busy"] += 1
        if c1 != was and n in (c1, was):  # JIQ's gate 1{c_1 = n} opens or closes
            seen["opens" if c1 == n else "closes"] += 1
        _compare(ch, nv, f"at event {step}")
        top = len(nv.N) - 1  # the kernel's P: the rule's at every level, 0 above the maximum
        assert ch.P[1 : top + 1].tolist() == nv.P_levels() and not ch.P[top + 1 :].any(), f"P differs at event {step}"
        longest = max(longest, len(nv.N) - 1)
    assert [int(w) for w in ch.s] == nv.rng.s
    if law.startswith("hyperexp"):
        del kinds["move"]
    assert longest >= 3 and min(kinds.values()) > steps // 20, kinds
    # every state JIQ tells apart many times, and (JIQ) its gate opened and closed often
    assert min(seen["idle2"], seen["idle1"], seen["busy"]) > steps // 20, seen
    assert policy != "jiq" or min(seen["opens"], seen["closes"]) > steps // 50, seen
    areaN, areaP = ch.integrals()
    for (ell, f), v in nv.areaN.items():
        assert math.isclose(areaN[ell, f], v, rel_tol=1e-9, abs_tol=1e-12 * nv.now), (ell, f)
    for ell, v in nv.areaP.items():
        assert math.isclose(areaP[ell], v, rel_tol=1e-9, abs_tol=1e-12 * nv.now), ell
    assert not areaP[len(nv.areaP) + 1 :].any()

    bulk = _chain(n, d, lam, rep, alpha, T, hexp, N, words, direct, policy)
    bulk.run_events(steps)
    _compare(bulk, nv, "after one call")
