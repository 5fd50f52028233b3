"""The server-classes counts engine (engines/classes.py) against the naive reference
:class:`naive.NaiveClasses`, event for event.

The reference keeps each class's multiset of queue lengths and steps the uniformized chain of
docs/model.md §15.1 from its definition with the same xoshiro stream: the joined length from
the rule's ``P_i`` of the totals ``C``, the joined server uniform among those of that length
(its class in proportion to ``c_{k,ℓ} − c_{k,ℓ+1}``), a potential departure at a uniform unit of
capacity (class ``k`` with probability ``n_k s_k/(n s̄)``).  After every event the per-class
profile ``c``, the totals ``C``, the highest level and the event count are compared; at the end
the generator's words and the integer integrals ``Σ_events c_{k,i}``.  A second run does the
same events in one call (with the arrays grown on the way) and must end in the same state.
The engine's time is the event count: it has no second time mode to compare.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from naive import NaiveClasses, NaiveProfile, Xoshiro
from supermarket.engines import classes as ck
from supermarket.engines.rng import new_state
from supermarket.simulation.classes import simulate_classes
from supermarket.system.policies import policy_code

# (policy, class sizes, speeds, d, λ, replace, start lengths per class (None: empty), events)
CASES = {
    "jsqd-rep-2cls": ("jsq-d", [6, 4], [2.0, 0.5], 2, 0.9, True, None, 2_000),
    "jsqd-norep-3cls": (
        "jsq-d",
        [3, 5, 4],
        [1.0, 3.0, 0.25],
        3,
        0.95,
        False,
        [[2, 0, 1], [4, 4, 0, 0, 1], [3, 3, 3, 2]],
        3_000,
    ),
    "random-2cls": ("random", [5, 5], [1.5, 1.0], 1, 0.85, True, None, 2_000),
    "jsq-2cls": ("jsq", [4, 8], [0.5, 2.0], 2, 0.97, True, None, 2_000),
    "jiq-2cls": ("jiq", [5, 3], [1.0, 2.5], 2, 0.9, True, None, 2_000),
    "jsqd-1cls": ("jsq-d", [9], [1.0], 2, 0.9, False, None, 2_000),
    "jsqd-rep-d9-generic": ("jsq-d", [4, 6], [2.0, 1.0], 9, 0.95, True, None, 1_500),  # P from p_rule (d > 8)
    # jbt(T = d): P_i reads C_T, renewed at every level when C_T changes; both regimes (C_T < n, C_T = n)
    "jbt-2cls": ("jbt", [3, 3], [1.5, 1.0], 2, 0.9, True, [[2, 2, 3], [2, 2, 2]], 3_000),
    "jbt-3cls-d3": ("jbt", [2, 2, 2], [1.0, 1.5, 0.75], 3, 0.98, False, [[3, 3], [4, 3], [5, 3]], 3_000),
    "jbt-d1-2cls": ("jbt", [5, 3], [1.0, 2.5], 1, 0.9, True, None, 2_000),  # T = 1: JIQ's law
}
SLOW_CASES = {
    "jsqd-rep-d12-generic": ("jsq-d", [6, 6], [2.0, 1.0], 12, 0.95, True, None, 10_000),
    "jsqd-norep-d10-generic": ("jsq-d", [8, 4], [0.75, 1.5], 10, 0.95, False, None, 10_000),
    "jiq-3cls-start": ("jiq", [10, 10, 10], [1.0, 2.0, 0.5], 2, 0.95, False, [[1] * 10, [2] * 10, [0] * 10], 10_000),
    "jsq-3cls": ("jsq", [8, 8, 4], [1.0, 0.5, 3.0], 2, 0.95, True, None, 10_000),
    "random-1cls": ("random", [12], [1.0], 1, 0.8, True, None, 10_000),
    "jsqd-norep-big": ("jsq-d", [20, 20], [1.25, 0.75], 2, 0.99, False, None, 10_000),
}
ALL = {**CASES, **SLOW_CASES}
PARAMS = [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_CASES else c for c in ALL]


def _kernel_state(sizes, speeds, d, lam, rep, policy, lengths, words, nv):
    """The kernel's arrays for a start state, levels kept small so that they grow."""
    a = ck.new_state(np.array(sizes), levels=3)
    L = max(a["c"].shape[1], nv.top() + 2)
    if L > a["c"].shape[1]:
        ck.grow(a, 0)
    for k in range(len(sizes)):
        for i in range(1, nv.top() + 1):
            a["c"][k, i] = nv.c(k, i)
    a["C"][:] = a["c"].sum(axis=0)
    if policy in ("jsq-d", "jbt"):  # the rules whose P_i the kernel keeps per level
        for i in range(1, nv.top() + 1):
            a["pc"][i] = nv.P(i)
    sp = np.array(speeds, float)
    return {
        "a": a,
        "s": np.array(words, np.uint64),
        "cfg": np.array([sum(sizes), d, int(rep), policy_code(policy)], np.int64),
        "caps": np.cumsum(np.array(sizes) * sp),
        "inv_s": 1.0 / sp,
        "p_arr": lam / (1.0 + lam),
        "st": np.array([nv.top(), 0], np.int64),
    }


def _advance(k, m):
    a = k["a"]
    target = int(k["st"][1]) + m
    while k["st"][1] < target:
        left = target - int(k["st"][1])
        r = ck.classes_kernel(
            a["c"],
            a["C"],
            a["pc"],
            a["area"],
            a["stamp"],
            a["joined"],
            k["s"],
            k["cfg"],
            k["caps"],
            k["inv_s"],
            k["p_arr"],
            k["st"],
            left,
        )
        if r == ck.GROW:
            ck.grow(a, int(k["st"][1]))


def _compare(k, nv, where):
    a = k["a"]
    prof = nv.profile()
    top = len(prof[0]) - 1
    assert int(k["st"][0]) == top, f"highest level differs {where}"
    assert int(k["st"][1]) == nv.steps, f"event count differs {where}"
    assert a["c"][:, : top + 1].tolist() == prof, f"per-class counts differ {where}"
    assert not a["c"][:, top + 1 :].any(), f"counts above the top {where}"
    assert a["C"][: top + 1].tolist() == [sum(col) for col in zip(*prof)], f"totals differ {where}"
    assert not a["C"][top + 1 :].any(), f"totals above the top {where}"


def _areas(k, nv):
    a = k["a"]
    ck.close_areas(a["c"], a["area"], a["stamp"], int(k["st"][1]))
    want = np.zeros_like(a["area"])
    for (cls, i), v in nv.area.items():
        want[cls, i] = v
    np.testing.assert_array_equal(a["area"], want)


@pytest.mark.parametrize("case", PARAMS)
def test_classes_engine_matches_naive_event_for_event(case):
    policy, sizes, speeds, d, lam, rep, lengths, events = ALL[case]
    words = [int(w) for w in new_state(700 + len(case))]
    nv = NaiveClasses(sizes, speeds, d, lam, rep, policy, words, lengths)
    k = _kernel_state(sizes, speeds, d, lam, rep, policy, lengths, words, nv)
    _compare(k, nv, "at the start")
    kinds: Counter = Counter()
    mixed = 0  # arrivals whose joined length is held by servers of two classes or more
    jiq = Counter()
    for ev in range(1, events + 1):
        jiq["idle" if nv.C(1) < nv.n else "busy"] += 1
        if policy == "jbt":  # below the threshold T = d, or every server at T or more
            jiq["below" if nv.C(d) < nv.n else "all at T"] += 1
        kind = nv.step()
        if kind.startswith("arrival"):
            mixed += sum(1 for m in nv.last_join[1] if m) >= 2
        kinds[kind] += 1
        _advance(k, 1)
        _compare(k, nv, f"at event {ev}")
    assert [int(w) for w in k["s"]] == nv.rng.s
    _areas(k, nv)
    # every kind of event in every class; the class draw decided between classes often;
    # queues formed; JIQ saw idle servers and none
    K = len(sizes)
    want = [f"{e} {c}" for e in ("arrival", "departure") for c in range(K)]
    assert min(kinds[w] for w in want) >= 20 and sum(kinds[f"idle {c}"] for c in range(K)) >= 20, kinds
    if K > 1:
        assert mixed > events // 20, mixed
    assert max(max(r) for r in nv.x) >= 2 or policy in ("jsq", "jiq")
    if policy in ("jiq", "jsq", "jbt"):
        assert min(jiq.values()) > events // 50, jiq

    bulk = _kernel_state(
        sizes,
        speeds,
        d,
        lam,
        rep,
        policy,
        lengths,
        words,
        NaiveClasses(sizes, speeds, d, lam, rep, policy, words, lengths),
    )
    _advance(bulk, events)
    _compare(bulk, nv, "after one call")
    assert [int(w) for w in bulk["s"]] == nv.rng.s
    _areas(bulk, nv)


# The driver (simulation.classes.simulate_classes): its arrays, capacities, rule code, sampling flag and
# seed, burn-in and batches.  One replication without control variates: the plain estimate
# of u_{k,i} is the mean over the measured events of c_{k,i}/n_k, which the reference gives
# from its own run on the stream of child 0 of the root seed (numpy's SeedSequence spawning).
# (policy, server classes, n, d, λ, replace)
DRIVER = {
    "jiq": ("jiq", "0.6:2,0.4:1", 10, 2, 0.9, True),
    "jsqd-norep": ("jsq-d", "0.25:0.5,0.75:1.5", 8, 3, 0.9, False),
    "jsqd-rep": ("jsq-d", "0.5:1,0.5:3", 6, 2, 0.95, True),
    "random": ("random", "0.5:1.25,0.5:0.75", 10, 1, 0.8, True),
    "jsq": ("jsq", "0.2:4,0.8:1", 10, 2, 0.95, True),
}
DRIVER_PARAMS = [c if c == "jsqd-norep" else pytest.param(c, marks=pytest.mark.slow) for c in DRIVER]


@pytest.mark.parametrize("case", DRIVER_PARAMS)
def test_simulate_classes_matches_naive(case):
    policy, text, n, d, lam, rep = DRIVER[case]
    pairs = [tuple(float(x) for x in part.split(":")) for part in text.split(",")]
    sizes = [round(f * n) for f, _ in pairs]
    speeds = [s for _, s in pairs]
    rate = n * sum(f * s for f, s in pairs) * (1.0 + lam)  # events per unit of time, n s̄ (1+λ)
    batches, batch_ev, burn_ev = 64, 40, 500
    r = simulate_classes(
        n, d, lam, server_classes=text, policy=policy, replace=rep, events=batches * batch_ev,
        burn_in=burn_ev / rate, seed=17, replications=1, batches=batches, control_variates=False, workers=1,
    )  # fmt: skip
    assert r.events == burn_ev + batches * batch_ev
    words = np.random.SeedSequence(17).spawn(1)[0].generate_state(4, np.uint64)
    nv = NaiveClasses(sizes, speeds, d, lam, rep, policy, [int(w) for w in words])
    nv.run(burn_ev)
    before = dict(nv.area)
    nv.run(batches * batch_ev)
    top = max(i for (_, i) in nv.area)  # the highest level ever held
    for k, ce in enumerate(r.classes):
        want = [
            (nv.area.get((k, i), 0) - before.get((k, i), 0)) / (sizes[k] * batches * batch_ev)
            for i in range(1, top + 1)
        ]
        got = list(ce.u_mean) + [0.0] * (top - len(ce.u_mean))
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15, err_msg=f"class {k}")
        assert ce.servers == sizes[k] and ce.speed == speeds[k]


@pytest.mark.parametrize("policy", ["jsq-d", "random", "jsq", "jiq"])
def test_one_class_is_the_one_class_reference(policy):
    """One class of any speed is the chain of docs/model.md §2 (uniformization at ``n s (1+λ)``
    makes the jump chain independent of ``s``): the reference steps as :class:`naive.NaiveProfile`
    in discrete time, state for state, on the same numbers; its sums over the events' new states
    are that chain's ``∫ c_i dt`` over ``[1, E + 1]``."""
    n, d, lam, rep, events = 7, 2, 0.9, policy != "jsq-d", 1_500
    one = NaiveProfile(n, d, lam, rep, [], 91, False, policy=policy)
    words = Xoshiro.from_seed(91).s
    nv = NaiveClasses([n], [2.5], d, lam, rep, policy, list(words))
    assert one.t_next == 1.0  # discrete time: no holding time drawn
    for ev in range(1, events + 1):
        nv.step()
        one.step()
        assert nv.profile()[0][1:] == one.c, f"counts differ at event {ev}"
    one.step()  # integrates [E, E + 1], the state after event E ([0, 1] holds the empty start: nothing)
    top = max(i for (_, i) in nv.area)
    assert [nv.area.get((0, i), 0) for i in range(1, top + 1)] == one.area_c[:top]
    assert max(one.area_c) > 0
