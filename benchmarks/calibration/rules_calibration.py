"""Coverage of the error bars of JSQ and JIQ (docs/model.md §9, "The slowest time scale").

    PYTHONPATH=src python benchmarks/calibration/rules_calibration.py [--seeds 200] [--tiny-seeds 100]
        [--events 1e7] [--reference-events 1e9] [--mid-events 1e6] [--only tiny,large,mid]

For each case and seed, a run of ``--events`` events (seed ``1000 + s``): whether the mean
queue length is called reliable, whether its 95 % interval (value ± half_width) holds the
true value, and the standard deviation of the standardized errors (1 when the error bars are
right).  True values: the exact law of the tiny systems (``supermarket.stationary.solve``,
tol 1e-10), and at n = 1000 one long run of ``--reference-events`` events (seed 999,999),
whose own error enters the standardized error; at n = 100 (``mid``), runs of ``--mid-events``
against one of 300 times as many.  ``E[u_1] = λ`` (exact) and ``E[u_2]`` against
the same reference are reported too.
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np

from supermarket.simulation import simulate
from supermarket.stationary import solve

TINY = (("jsq", 3, 0.9), ("jiq", 3, 0.7))
LARGE = (("jsq", 1000, 0.9), ("jiq", 1000, 0.9))
MID = (("jsq", 100, 0.9), ("jiq", 100, 0.9))


def _row(name, what, rows):
    rel = [r for r in rows if r[0]]
    z = np.array([r[2] for r in rel])
    sd = f"{z.std(ddof=1):.2f}" if z.size > 1 else "-"
    cov = sum(r[1] for r in rel)
    print(
        f"| {name} | {what} | {cov}/{len(rel)} ({cov / max(len(rel), 1):.3f}) | {sd} | {len(rows) - len(rel)} |",
        flush=True,
    )


def _case(name, kw, truth, seeds, events):
    """truth: {quantity: (value, its standard error)}"""
    rows: dict[str, list] = {q: [] for q in truth}
    t0 = time.time()
    for s in range(seeds):
        r = simulate(steps=int(events), seed=1000 + s, **kw)
        got = {"mean queue length": r.queue_length, "E[u_1]": r.levels[0], "E[u_2]": r.levels[1]}
        for q, (x, sx) in truth.items():
            e = got[q]
            ok = bool(e.reliable)
            se = math.hypot(e.stderr, sx) if ok else math.nan
            hw = math.hypot(e.half_width, 1.96 * sx) if ok else math.nan
            rows[q].append((ok, ok and abs(e.value - x) <= hw, (e.value - x) / se if ok else math.nan))
    for q, v in rows.items():
        _row(name, q, v)
    print(f"<!-- {name}: {seeds} seeds in {time.time() - t0:.0f} s -->", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--tiny-seeds", type=int, default=100)
    ap.add_argument("--events", type=float, default=1e7)
    ap.add_argument("--reference-events", type=float, default=1e9)
    ap.add_argument("--mid-events", type=float, default=1e6)
    ap.add_argument("--only", default="tiny,large,mid", help="comma-separated groups of cases")
    a = ap.parse_args()
    only = set(a.only.split(","))
    warnings.simplefilter("ignore", RuntimeWarning)  # "too short" warnings are counted, not printed
    print("| system | quantity | 95 % intervals cover | sd of standardized errors | unreliable |")
    print("|---|---|---|---|---|")
    for pol, n, lam in TINY if "tiny" in only else ():
        ex = solve(n, 2, lam, policy=pol, tol=1e-10)
        truth = {"mean queue length": (ex.mean_queue_length, 0.0), "E[u_1]": (lam, 0.0)}
        _case(f"{pol} n={n} λ={lam} (exact)", dict(n=n, d=2, lam=lam, policy=pol), truth, a.tiny_seeds, a.events)
    groups = [(LARGE, a.events, a.reference_events)] if "large" in only else []
    groups += [(MID, a.mid_events, 300 * a.mid_events)] if "mid" in only else []
    for cases, events, ref_events in groups:
        for pol, n, lam in cases:
            ref = simulate(n, 2, lam, policy=pol, steps=int(ref_events), seed=999_999)
            q, u2 = ref.queue_length, ref.levels[1]
            print(
                f"<!-- reference {pol} n={n}: Q = {q.value:.8g} ± {q.stderr:.2g}, "
                f"E[u_2] = {u2.value:.6g} ± {u2.stderr:.2g} -->"
            )
            truth = {
                "mean queue length": (q.value, q.stderr),
                "E[u_1]": (lam, 0.0),
                "E[u_2]": (u2.value, u2.stderr),
            }
            name = f"{pol} n={n} λ={lam}, {events:.0e} events (long run)"
            _case(name, dict(n=n, d=2, lam=lam, policy=pol), truth, a.seeds, events)


if __name__ == "__main__":
    main()
