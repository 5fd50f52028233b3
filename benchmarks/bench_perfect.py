"""Cost of one exact stationary sample (docs/model.md §12) against n and λ, d = 2.

Run: ``.venv/bin/python benchmarks/bench_perfect.py`` (the default grid: n = 10^3, 10^4,
λ = 0.9, 0.99; a few samples each, several minutes on one core).  ``--quick`` runs the
λ = 0.9 rows only; ``--json`` prints one JSON object.

For each cell: the coalescence horizon (time units of the continuous-time chain; the
sampler doubles the horizon, so the least coalescing horizon lies in (T/2, T]), the number
of steps simulated per sample (generation and regeneration of the dominating process, and
both bounding copies, summed over the doubling rounds), wall and CPU time per sample
(the CPU time is the fair figure on a shared machine), simulated steps per CPU second, the
sampler's own peak memory per sample and the process's maximum resident set size.  One sample at a time, one thread.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time

from supermarket import perfect


def row(n, lam, samples, seed, d=2):
    perfect.sample(20, d, 0.5, samples=2, seed=0)  # compile / load the kernels first
    t0 = time.perf_counter()
    c0 = time.process_time()
    res = perfect.sample(n, d, lam, samples=samples, seed=seed)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    return {
        "n": n,
        "d": d,
        "load": lam,
        "samples": samples,
        "horizon_time_units": res.coalescence_time.tolist(),
        "horizon_mean": float(res.coalescence_time.mean()),
        "steps_per_sample": float(res.work_steps.mean()),
        "seconds_per_sample": wall / samples,
        "cpu_seconds_per_sample": cpu / samples,
        "msteps_per_second": float(res.work_steps.sum()) / wall / 1e6,
        "peak_memory_mib": float(res.peak_memory.max()) / 2**20,
        "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "mean_u": [float(v) for v in res.mean_profile()[0][:6]],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="λ = 0.9 only")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    grid = [(1000, 0.9, 5), (10000, 0.9, 3)]
    if not args.quick:
        grid += [(1000, 0.99, 3), (10000, 0.99, 2)]
    rows = []
    for n, lam, S in grid:
        rows.append(row(n, lam, S, args.seed))
        if not args.json:
            r = rows[-1]
            print(
                f"n={n} λ={lam}: horizon {r['horizon_mean']:.4g} time units, {r['seconds_per_sample']:.3g} s/sample",
                flush=True,
            )
    out = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "load_average": [round(float(v), 2) for v in os.getloadavg()],
        "rows": rows,
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print()
    print(
        "| n | λ | samples | horizon T (time units), each | mean steps simulated | wall s/sample | CPU s/sample | "
        "Msteps/CPU s | sampler peak MiB | max RSS MiB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        hs = ", ".join(f"{h:.4g}" for h in r["horizon_time_units"])
        print(
            f"| {r['n']} | {r['load']} | {r['samples']} | {hs} | {r['steps_per_sample']:.3g} | "
            f"{r['seconds_per_sample']:.3g} | {r['cpu_seconds_per_sample']:.3g} | "
            f"{r['steps_per_sample'] / r['cpu_seconds_per_sample'] / 1e6:.3g} | {r['peak_memory_mib']:.3g} | "
            f"{r['maxrss_mib']:.0f} |"
        )
    print(f"\nload average during the run: {out['load_average']}")


if __name__ == "__main__":
    main()
