"""Speed of ``simulate(service=...)`` on the phase-type counts chain (docs/model.md §13): the
whole library call (burn-in, batches, integrals, error analysis), one replication, one core.

    PYTHONPATH=src python benchmarks/bench_phase_simulate.py                  # n = 10^6, erlang:4 and hyperexp:4
    PYTHONPATH=src python benchmarks/bench_phase_simulate.py --steps 1e7 --policy jiq
    PYTHONPATH=src python benchmarks/bench_phase_simulate.py --events-time 5   # also the event engine, time 5

Events per second = events measured (burn-in excluded) / CPU time of the whole call
(``time.process_time``, best of ``--repeat``: the machine may be shared), JSQ(2) at λ = 0.9
from the mean-field fixed point unless told otherwise.  A first short call compiles the
kernel (not timed).
"""

from __future__ import annotations

import argparse
import platform
import time

import numba

import supermarket as sm


def one(n, d, lam, service, policy, steps, seed):
    c0 = time.process_time()
    w0 = time.perf_counter()
    start = "fixed-point" if policy in ("jsq-d", "random") else "empty"
    r = sm.simulate(n, d, lam, service=service, policy=policy, steps=steps, burn_in=steps / 20, start=start, seed=seed)
    return r, time.process_time() - c0, time.perf_counter() - w0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=float, default=1e6)
    ap.add_argument("--d", type=int, default=2)
    ap.add_argument("--load", type=float, default=0.9)
    ap.add_argument("--steps", type=float, default=3e7)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--policy", default="jsq-d")
    ap.add_argument("--service", action="append", default=None)
    ap.add_argument("--events-time", type=float, default=None, help="also time the event engine over this time")
    a = ap.parse_args()
    services = a.service or ["erlang:4", "hyperexp:4"]
    n = int(a.n)
    sm.simulate(100, 2, 0.5, service="erlang:2", steps=10**5, seed=0)  # compile
    print(f"# {platform.python_version()} {platform.machine()} numba {numba.__version__}")
    head = "| law | n | d | λ | policy | events measured | CPU s | wall s | M events/s (CPU) | mean queue length |"
    print(head)
    print("|---|---|---|---|---|---|---|---|---|---|")
    for service in services:
        best = None
        for rep in range(a.repeat):
            r, cpu, wall = one(n, a.d, a.load, service, a.policy, a.steps, rep + 1)
            if best is None or cpu < best[1]:
                best = (r, cpu, wall)
        r, cpu, wall = best
        q = r.mean_queue_length
        qs = f"{q.mean:.5f} ± {q.stderr:.1g}" if q.reliable else f"{q.mean:.5f} (no error bar)"
        print(
            f"| {service} | {n:.0e} | {a.d} | {a.load:g} | {a.policy} | {r.events:.3g} | {cpu:.2f} | {wall:.2f} | "
            f"{r.events / cpu / 1e6:.1f} | {qs} |"
        )
        if a.events_time:
            c0 = time.process_time()
            ev = sm.simulate(
                n, a.d, a.load, service=service, policy=a.policy, engine="events", time=a.events_time,
                burn_in=a.events_time / 10, seed=1, batches=64, workers=1,
            )  # fmt: skip
            cpu = time.process_time() - c0
            print(
                f"| {service} (event engine) | {n:.0e} | {a.d} | {a.load:g} | {a.policy} | {ev.events:.3g} "
                f"(with burn-in) | {cpu:.2f} | — | {ev.events / cpu / 1e6:.2f}; {ev.customers / cpu / 1e6:.2f} M "
                "customers/s | — |"
            )


if __name__ == "__main__":
    main()
