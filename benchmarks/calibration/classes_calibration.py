"""Coverage of the count engine's error bars with server classes (docs/model.md §15.3).

    PYTHONPATH=src python benchmarks/calibration/classes_calibration.py [--seeds 40] [--events 1e6]

Against exact values: random routing (per-class M/M/1, closed forms) at n = 20, and JSQ(2)
at n = 2 (the exact law of :func:`supermarket.stationary.classes.solve_classes`), classes
0.5:2,0.5:1.  For each seed, whether the 95 % interval (``ErrorEstimate.covers``) of each
class's mean queue length and sojourn time, and of the total mean queue length, holds the
exact value; and the standard deviation of the standardized errors (1 when the error bars
are right).
"""

from __future__ import annotations

import argparse

import numpy as np

from supermarket.simulation.classes import simulate_classes
from supermarket.stationary.classes import solve_classes

TWO = "0.5:2,0.5:1"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--events", type=float, default=1e6)
    a = ap.parse_args()
    lam = 0.5
    mm1 = {}
    for k, s in enumerate((2.0, 1.0)):
        rho = lam * 1.5 / s
        mm1[k] = (rho / (1 - rho), 1 / (s - lam * 1.5))
    ex = solve_classes(2, 2, 0.8, TWO, cap=28)
    cases = {
        "random n=20 λ=0.5": (
            dict(n=20, d=1, lam=lam, policy="random"),
            dict(mm1),
            0.5 * (mm1[0][0] + mm1[1][0]),
        ),
        "jsq-d n=2 d=2 λ=0.8": (
            dict(n=2, d=2, lam=0.8, policy="jsq-d"),
            {k: (ex.mean_queue_length[k], ex.sojourn[k]) for k in range(2)},
            ex.total_mean_queue_length,
        ),
    }
    print("| system | quantity | covered (95 %) | sd of standardized errors | unreliable |")
    print("|---|---|---|---|---|")
    for name, (kw, per, total) in cases.items():
        rows: dict[str, list] = {}
        for seed in range(a.seeds):
            r = simulate_classes(server_classes=TWO, events=int(a.events), seed=1000 + seed, **kw)
            items = [("total mean queue length", r.mean_queue_length, total)]
            for k, c in enumerate(r.classes):
                items.append((f"class {c.speed:g} mean queue length", c.mean_queue_length, per[k][0]))
                items.append((f"class {c.speed:g} sojourn", c.sojourn, per[k][1]))
            for q, e, x in items:
                rows.setdefault(q, []).append((e.reliable, e.reliable and e.covers(x), (e.mean - x) / e.stderr))
        for q, v in rows.items():
            rel = [t for t in v if t[0]]
            z = np.array([t[2] for t in rel])
            print(
                f"| {name} | {q} | {sum(t[1] for t in rel)}/{len(rel)} | {z.std(ddof=1):.2f} | {len(v) - len(rel)} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
