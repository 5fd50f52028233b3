"""Speed of the count engine with server classes (docs/model.md §15; target >= 2·10^7 events/s).

    PYTHONPATH=src python benchmarks/bench_classes.py [--events 5e7] [--repeat 3]

For each dispatch rule, ``n = 10^6`` servers in two classes ``0.5:2,0.5:1`` (``s̄ = 1.5``),
``d = 2``, ``λ = 0.9``: a burn-in of ``events`` events from empty, then ``repeat`` runs of
``events`` events each, timed by the process's CPU time (the machine is shared: CPU time is
what the kernel costs; wall time is printed too) and the best kept.  Also the same at
``n = 10^3`` and with one class (the per-class overhead) and three classes.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from supermarket.engines import classes as ck
from supermarket.engines.rng import state_from_seed_sequence
from supermarket.system.policies import policy_code
from supermarket.system.service import parse_server_classes


def bench(n, spec, lam, d, policy, replace, events, repeat):
    sc = parse_server_classes(spec)
    counts = sc.counts(n)
    a = ck.new_state(counts)
    s = state_from_seed_sequence(np.random.SeedSequence(2026))
    sp = np.asarray(sc.speeds, float)
    caps = np.cumsum(counts * sp)
    cfg = np.array([n, d, int(replace), policy_code(policy)], np.int64)
    st = np.zeros(2, np.int64)
    p = lam / (1 + lam)

    def run(m):
        target = st[1] + m
        while st[1] < target:
            r = ck.classes_kernel(
                a["c"], a["C"], a["pc"], a["area"], a["stamp"], s, cfg, caps, 1 / sp, p, st, int(target - st[1])
            )
            if r == ck.GROW:
                ck.grow(a, int(st[1]))

    run(events)  # burn-in (and compilation)
    best_cpu = best_wall = float("inf")
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        run(events)
        best_cpu = min(best_cpu, time.process_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    return events / best_cpu / 1e6, events / best_wall / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=float, default=5e7)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    ev = int(a.events)
    rows = [
        (10**6, "0.5:2,0.5:1", "jsq-d", True),
        (10**6, "0.5:2,0.5:1", "jsq-d", False),
        (10**6, "0.5:2,0.5:1", "random", True),
        (10**6, "0.5:2,0.5:1", "jsq", True),
        (10**6, "0.5:2,0.5:1", "jiq", True),
        (10**3, "0.5:2,0.5:1", "jsq-d", True),
        (10**6, "1:1", "jsq-d", True),
        (10**6, "0.25:4,0.25:2,0.5:0.5", "jsq-d", True),
    ]
    print("| n | classes | rule | replace | M events/s (CPU) | M events/s (wall) |")
    print("|---|---|---|---|---|---|")
    for n, spec, pol, rep in rows:
        lam = 0.9 if pol != "random" else 0.5  # random: every class below its own capacity (λ s̄/s_min < 1)
        cpu, wall = bench(n, spec, lam, 2, pol, rep, ev, a.repeat)
        print(f"| {n:.0e} | {spec} | {pol} (λ = {lam:g}) | {rep} | {cpu:.1f} | {wall:.1f} |", flush=True)


if __name__ == "__main__":
    main()
