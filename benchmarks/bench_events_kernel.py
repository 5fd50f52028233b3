"""The per-queue event kernel alone (engines/events.py), this checkout's against another's,
in chunks that alternate between them in one process (the machine's speed drifts by tens of
per cent within minutes: only interleaved figures compare two kernels).

Command (about a minute)::

    git archive 4d02fd7 src | tar -x -C /tmp/old    # the kernel to compare with
    NUMBA_CACHE_DIR=/tmp/nb-evq PYTHONPATH=src python benchmarks/bench_events_kernel.py \\
        --against /tmp/old/src --n 1e5 --law lognormal:4 --rounds 10

Each kernel runs the same system from the same seed (JSQ(2) with replacement, λ = 0.9, one
class, customers recorded): ``3·10^6`` events to fill, then ``--rounds`` chunks of
``--chunk`` events each, alternating; printed: the median and every chunk's M events per
second of process CPU time, and whether both ended in the same state (lengths and
generator: the same events).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from bench_events import load_against
from supermarket.engines import events as ev
from supermarket.engines.rng import next_double, state_from_seed_sequence
from supermarket.system.service import parse_service

LAM, D = 0.9, 2


class Runner:
    """One kernel's arrays, run ``m`` events at a time (growing and draining as
    :mod:`supermarket.simulation.general.run` does); kernels with and without the calendar."""

    def __init__(self, mod, n, law, seed=1):
        self.ev, self.law = mod, law
        self.calendar = hasattr(mod, "window")
        rate = n * LAM
        self.s = state_from_seed_sequence(np.random.SeedSequence(seed))
        first = -math.log(1.0 - next_double(self.s)) / rate
        if self.calendar:
            nb, inv_width = mod.window(rate, 1.0)
            self.a = mod.new_arrays([n], buffer=1 << 21, buckets=nb)
            self.fl, self.it = mod.new_counters(rate, 0.0, first, inv_width)
            self.dep = ("ht", "cal", "qt", "qn")
        else:
            self.a = mod.new_arrays([n], buffer=1 << 21)
            self.fl, self.it = np.array([0.0, first, rate, 0.0]), np.zeros(4, np.int64)
            self.dep = ("ht", "hj")
        self.cfg = np.array([n, D, 1, mod.JSQ_D, law.code, 0], np.int64)
        self.spd = np.ones(1)

    def run(self, m):
        mod, a, it, fl = self.ev, self.a, self.it, self.fl
        done = 0
        while done < m:
            before = int(it[mod.I_EVENTS])
            st = mod.events_kernel(
                a["x"], a["lastdep"], a["bound"], self.spd, *(a[k] for k in self.dep), a["order"], a["pos"],
                a["bstart"], a["c"], a["area"], a["last"], a["ctot"], self.s, self.cfg, self.law.params,
                self.law.ph_table(), fl, it, a["so"], a["wa"], a["rc"], math.inf, m - done,
            )  # fmt: skip
            done += int(it[mod.I_EVENTS]) - before
            if st == mod.GROW:
                mod.grow(a, fl[mod.F_NOW], it) if self.calendar else mod.grow(a, fl[mod.F_NOW])
            elif st == mod.FULL:
                it[mod.I_NREC] = 0
        it[mod.I_NREC] = 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", metavar="DIR", required=True, help="the other checkout's src")
    ap.add_argument("--n", type=float, default=1e5)
    ap.add_argument("--law", default="lognormal:4")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--chunk", type=float, default=5e5)
    args = ap.parse_args()
    n, law, chunk = int(args.n), parse_service(args.law), int(args.chunk)
    runs = [("this", Runner(ev, n, law)), (args.against, Runner(load_against(args.against, "engines.events"), n, law))]
    for _, r in runs:
        r.run(3 * 10**6)
    rates = [[] for _ in runs]
    for _ in range(args.rounds):
        for (_, r), out in zip(runs, rates):
            c0 = time.process_time()
            r.run(chunk)
            out.append(chunk / (time.process_time() - c0) / 1e6)
    same = np.array_equal(runs[0][1].a["x"], runs[1][1].a["x"]) and np.array_equal(runs[0][1].s, runs[1][1].s)
    print(f"n = {n:.0e}, {args.law}, JSQ({D}), λ = {LAM}; load average {os.getloadavg()[0]:.1f}")
    for (name, _), out in zip(runs, rates):
        print(f"{name}: median {np.median(out):.2f} M events/s (CPU)  [{' '.join(f'{v:.2f}' for v in out)}]")
    print(f"same events: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
