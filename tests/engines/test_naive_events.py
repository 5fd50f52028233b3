"""The per-queue event engine (engines/events.py) against the naive reference
:class:`naive.NaiveEvents`, event for event.

The reference keeps each server's departures in a plain list and takes the least of the
servers' next departures; the kernel keeps every customer's departure in a calendar of
buckets with a heap for the far future (here a short window, so that both are used and
grow).  Both run on the same xoshiro stream.  After every event the queue
lengths, the clock, the next arrival and (``jsq``, ``jiq``) the sorted arrangement are
compared; every 16 events (and at the end) also the servers' last departures, the multiset
of pending departures (the calendar's and the heap's contents), the counts per class and level, their totals
and the maximum length.  At the end the level integrals per class and every recorded
customer's sojourn, wait and server class are; a second run does the same events without
stopping but to grow its arrays or to drain a customer buffer that fills, and must end in
the same state with the same customers.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from naive import NaiveEvents, service_params
from supermarket.engines import departures, rng
from supermarket.engines import events as ev
from supermarket.system.policies import policy_code
from supermarket.system.service import parse_service, phase_type

# (servers per class, speeds, d, replace, rule, service law, λ, time from which customers are
# recorded, events)
CASES = {
    "jsqd-rep-exp": ([12], [1.0], 2, True, "jsq-d", "exp", 0.9, 30.0, 4_000),
    "jsqd-norep-erlang-classes": ([6, 6], [1.5, 0.5], 3, False, "jsq-d", "erlang:3", 0.95, 0.0, 4_000),
    "random-hyperexp": ([10], [1.0], 1, True, "random", "hyperexp:4", 0.8, 10.0, 4_000),
    "jsq-lognormal-classes": ([4, 8], [2.0, 0.5], 1, True, "jsq", "lognormal:2", 0.95, 10.0, 4_000),
    "jiq-deterministic": ([10], [1.0], 1, True, "jiq", "deterministic", 0.9, 10.0, 4_000),
    "jbt3-exp": ([12], [1.0], 3, True, "jbt", "exp", 0.9, 10.0, 4_000),
    "jbt2-lognormal-classes": ([6, 6], [1.5, 0.5], 2, True, "jbt", "lognormal:2", 0.95, 0.0, 4_000),
    "jbt6-erlang": ([8], [1.0], 6, True, "jbt", "erlang:2", 0.97, 0.0, 4_000),  # T beyond the level arrays
}
SLOW_CASES = {
    "d1-norep-pareto": ([8], [1.0], 1, False, "jsq-d", "pareto:2.5", 0.9, 10.0, 10_000),
    "jsqd-norep-d=n-exp": ([5], [1.0], 5, False, "jsq-d", "exp", 0.9, 10.0, 10_000),
    "jsqd-rep-hyperexp-3classes": ([10, 10, 20], [3.0, 1.0, 0.5], 3, True, "jsq-d", "hyperexp:9", 0.95, 0.0, 10_000),
    "jiq-erlang-classes": ([10, 30], [2.0, 0.5], 1, True, "jiq", "erlang:4", 0.97, 0.0, 10_000),
    "jsq-exp": ([30], [1.0], 1, True, "jsq", "exp", 0.99, 0.0, 10_000),
    "random-lognormal-classes": ([15, 5], [0.8, 1.6], 1, True, "random", "lognormal:4", 0.9, 0.0, 10_000),
}
# a phase-type law with moves both ways and a phase with no exit, rescaled to mean 1
_ALPHA3 = [0.6, 0.0, 0.4]
_T3 = np.array([[-12.0, 8.0, 2.0], [4.0, -4.0, 0.0], [0.0, 2.0, -6.0]])
_T3 = _T3 * float(np.array(_ALPHA3) @ np.linalg.solve(-_T3, np.ones(3)))
SLOW_CASES["jsqd-rep-ph3-classes"] = ([6, 4], [0.5, 2.0], 2, True, "jsq-d", ("ph", _ALPHA3, _T3), 0.9, 10.0, 10_000)
ALL = {**CASES, **SLOW_CASES}
PARAMS = [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_CASES else c for c in ALL]


class Kernel:
    """The kernel's arrays and a call that runs ``events`` events, growing arrays as
    :mod:`supermarket.simulation.general.run` does."""

    def __init__(self, sizes, speeds, d, rep, policy, law, rate, t_meas, words, buffer, buckets=8, width=0.25):
        n = sum(sizes)
        self.sorted = policy in ("jsq", "jiq", "jbt")
        # a window of 8 buckets 0.25 wide (departures more than 1.75-2 ahead go to the far
        # heap) and small pools: every growth path is taken
        self.a = ev.new_arrays(
            sizes, levels=4, heap=8, buffer=buffer, sorted_mode=self.sorted, buckets=buckets, nodes=8
        )
        self.law = parse_service(law) if isinstance(law, str) else phase_type(law[1], law[2])
        self.cfg = np.array([n, d, int(rep or d == 1), policy_code(policy), self.law.code, int(self.sorted)])
        self.s = np.array(words, dtype=np.uint64)
        self.fl, self.it = ev.new_counters(rate, t_meas, -math.log(1.0 - rng.next_double(self.s)) / rate, 1 / width)
        self.spd = np.asarray(speeds, np.float64)
        self.grown = 0
        self.far_max = 0  # the most departures seen waiting in the far heap
        self.out: dict[str, list] = {"so": [], "wa": [], "rc": []}

    def run(self, events):
        a = self.a
        done = 0
        while done < events:
            before = int(self.it[ev.I_EVENTS])
            st = ev.events_kernel(
                a["x"], a["lastdep"], a["bound"], self.spd, a["ht"], a["cal"], a["qt"], a["qn"],
                a["order"], a["pos"], a["bstart"], a["c"], a["area"], a["last"], a["ctot"], self.s, self.cfg,
                self.law.params, self.law.ph_table(),
                self.fl, self.it, a["so"], a["wa"], a["rc"], math.inf, events - done,
            )  # fmt: skip
            done += int(self.it[ev.I_EVENTS]) - before
            self.far_max = max(self.far_max, int(self.it[ev.I_HSIZE]))
            if st == ev.GROW:
                ev.grow(a, self.fl[ev.F_NOW], self.it)
                self.grown += 1
            elif st == ev.FULL:
                self.drain()
            else:
                assert st == ev.EVENTS

    def drain(self):
        """Move the recorded customers out of the buffers (as a full buffer asks)."""
        m = int(self.it[ev.I_NREC])
        for key in ("so", "wa", "rc"):
            self.out[key].extend(self.a[key][:m].tolist())
        self.it[ev.I_NREC] = 0

    def heap(self):
        # the window's buckets and the far-future heap together
        return ev.pending_departures(self.a, self.it)[:, 0].tolist()


def _compare_quick(kr, nv, where):
    assert kr.a["x"].tolist() == nv.x, f"lengths differ {where}"
    assert math.isclose(kr.fl[ev.F_NOW], nv.now, rel_tol=1e-12), f"clock differs {where}"
    assert math.isclose(kr.fl[ev.F_NEXT], nv.next_arrival, rel_tol=1e-12), f"next arrival differs {where}"
    if kr.sorted:
        assert kr.a["order"].tolist() == nv.order, f"arrangement differs {where}"


def _compare(kr, nv, where):
    a = kr.a
    _compare_quick(kr, nv, where)
    np.testing.assert_allclose(a["lastdep"], nv.lastdep, rtol=1e-12, err_msg=f"last departures {where}")
    pending = sorted(t for q in nv.deps for t in q)
    np.testing.assert_allclose(kr.heap(), pending, rtol=1e-12, err_msg=f"pending departures {where}")
    c = nv.counts()
    top = len(c[0]) - 1
    assert int(kr.it[ev.I_TOP]) == top, f"maximum length differs {where}"
    assert a["c"][:, : top + 1].tolist() == c and not a["c"][:, top + 1 :].any(), f"counts differ {where}"
    assert a["ctot"][: top + 1].tolist() == [sum(col) for col in zip(*c)], f"total counts differ {where}"
    if kr.sorted:
        assert all(a["pos"][q] == p for p, q in enumerate(nv.order))


def test_service_parameters_from_their_definitions():
    # the reference's parameters, from the definitions of docs/model.md §14, are the laws'
    for law in ("erlang:3", "hyperexp:4", "hyperexp:9", "lognormal:2", "lognormal:4", "pareto:2.5"):
        np.testing.assert_allclose(service_params(law)[1], parse_service(law).params, rtol=1e-14)


@pytest.mark.parametrize("case", PARAMS)
def test_event_engine_matches_naive_event_for_event(case):
    sizes, speeds, d, rep, policy, law, lam, t_meas, steps = ALL[case]
    n = sum(sizes)
    rate = n * lam * sum(m * v for m, v in zip(sizes, speeds)) / n  # nλ·s̄ (docs/model.md §14)
    words = [int(w) for w in rng.new_state(900 + len(case))]
    kr = Kernel(sizes, speeds, d, rep, policy, law, rate, t_meas, words, steps + 1)
    nv = NaiveEvents(sizes, speeds, d, rep, policy, law, rate, words, t_meas)
    deps = 0
    for step in range(1, steps + 1):
        kr.run(1)
        busy = sum(nv.x)
        nv.step()
        deps += sum(nv.x) < busy
        # lengths, clock and arrangement after every event; the rest every 16 events (cost)
        (_compare if step % 16 == 0 or step == steps else _compare_quick)(kr, nv, f"at event {step}")
    assert kr.grown >= 2  # the heap and the levels were grown on the way
    assert [int(w) for w in kr.s] == nv.rng.s
    assert 0.3 * steps < deps < 0.7 * steps and max(nv.x) >= 2  # customers queued and left
    ev.close_areas(kr.a["c"], kr.a["area"], kr.a["last"], kr.fl[ev.F_NOW])
    area = kr.a["area"]
    for (k, ell), v in nv.area.items():
        assert math.isclose(area[k, ell], v, rel_tol=1e-9, abs_tol=1e-12 * nv.now), (k, ell)
    m = int(kr.it[ev.I_NREC])
    assert m == len(nv.so) > 0
    np.testing.assert_allclose(kr.a["so"][:m], nv.so, rtol=1e-9, atol=1e-12 * nv.now)
    np.testing.assert_allclose(kr.a["wa"][:m], nv.wa, rtol=1e-9, atol=1e-12 * nv.now)
    assert kr.a["rc"][:m].tolist() == nv.rc
    arrivals = steps - deps
    assert m < arrivals if t_meas > 0 else m == arrivals  # customers before t_meas are not recorded

    # the same events in one call, with a customer buffer that fills (drained on the way)
    bulk = Kernel(sizes, speeds, d, rep, policy, law, rate, t_meas, words, 97)
    bulk.run(steps)
    _compare(bulk, nv, "after one call")
    bulk.drain()
    assert len(bulk.out["so"]) == m > 2 * 97
    np.testing.assert_allclose(bulk.out["so"], nv.so, rtol=1e-9, atol=1e-12 * nv.now)
    assert bulk.out["rc"] == nv.rc


@pytest.mark.parametrize(
    "law, lam, buckets, width",
    [
        # heavy tail, a window of 2 buckets: most departures wait in the far heap, which grows
        ("pareto:1.5", 0.9, 2, 0.5),
        # light load, a window of 0.04 (every departure starts in the far heap): the front
        # crosses long runs of empty buckets between events, the system empties often
        ("deterministic", 0.2, 4, 0.01),
        # light load, a window of 0.64 wrapped around many times, both places used
        ("lognormal:4", 0.2, 64, 0.01),
    ],
)
def test_window_far_heap_and_growth_match_naive(law, lam, buckets, width):
    """The window of buckets, the far-future heap and their growth against the naive
    reference, event for event (docs/model.md §14)."""
    sizes, steps = [12], 3_000
    rate = 12 * lam
    words = [int(w) for w in rng.new_state(4242)]
    kr = Kernel(sizes, [1.0], 2, True, "jsq-d", law, rate, 0.0, words, steps + 1, buckets=buckets, width=width)
    nv = NaiveEvents(sizes, [1.0], 2, True, "jsq-d", law, rate, words, 0.0)
    empties = 0
    in_window = 0  # events after which some departure waited in the window
    for step in range(1, steps + 1):
        kr.run(1)
        nv.step()
        empties += sum(nv.x) == 0
        in_window += bool((kr.a["cal"] >= 0).any())
        (_compare if step % 16 == 0 or step == steps else _compare_quick)(kr, nv, f"at event {step}")
    assert kr.far_max >= (8 if lam > 0.5 or law == "deterministic" else 1)
    if lam > 0.5:
        assert kr.a["ht"].shape[0] > 8 + departures._H0 and kr.a["qt"].shape[0] > 8  # both grew
    else:
        assert empties > 100
    assert (in_window == 0) == (law == "deterministic")
    m = int(kr.it[ev.I_NREC])
    np.testing.assert_allclose(kr.a["so"][:m], nv.so, rtol=1e-9, atol=1e-12 * nv.now)
