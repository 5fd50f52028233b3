"""Speed of the simulation engines (events per second, one core) and a side-by-side run
against Ciw and rmftool at n = 1000, d = 2, λ = 0.9.

    .venv/bin/python benchmarks/bench_engines.py            # everything (a few minutes)
    .venv/bin/python benchmarks/bench_engines.py --quick    # shorter runs
    .venv/bin/python benchmarks/bench_engines.py --no-others  # skip Ciw and rmftool
    .venv/bin/python benchmarks/bench_engines.py --config profile:1e6:100:0.999 --repeat 5
                                                 # only these rows (engine:n:d:λ, repeatable)
    .venv/bin/python benchmarks/bench_engines.py --against /tmp/old/src --repeat 7 \
        --config profile:1e6:100:0.999 --config profile:1e3:2:0.9 --config queues:1e6:2:0.9
                                                 # this tree against another source tree

Prints Markdown tables.  An "event" of our engines is one step of the uniformized chain
(docs/model.md §1: an arrival or a potential departure, rate n(1+λ)); to compare tools that
count only real events, the side-by-side table also gives customers served per wall
second (λ·n·simulated time / wall time), the same unit for every tool.  Each figure is
the best of ``--repeat`` runs (the machine is shared: the best is the least disturbed).
``--against SRC`` compares this tree with another checkout's ``src`` folder (a speed
regression check): one worker process per tree, runs interleaved (old, new, new, old, ...)
so that both see the same machine load, CPU time (``time.process_time``) instead of wall
time, best of ``--repeat`` per tree.
Ciw and rmftool are the optional ``bench`` extra (``pip install ciw rmftool sympy``).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import subprocess
import sys
import time

import numpy as np

from supermarket import theory as th
from supermarket.model import Params
from supermarket.simulation import Chain


def _start(n, d, lam):
    c = np.rint(n * th.fixed_point(d, lam)).astype(np.int64)
    return c[c > 0]


def engine_rate(engine, n, d, lam, events, repeat, replace=True):
    """Best events per second of ``engine`` from the rounded fixed point (measurements on)."""
    p = Params(n, d, lam, replace=replace)
    k = th.k_lambda_d(d, lam) if d >= 2 else 0
    lo, hi = th.good_set_bounds(n, d, lam, 0.1, k) if k else (None, None)
    ch = Chain(p, engine, _start(n, d, lam), 12345, k=k, lo=lo, hi=hi)
    ch.advance(max_events=min(events, 10**6))  # compile, warm caches and windows
    best = 0.0
    for _ in range(repeat):
        t = time.perf_counter()
        ch.advance(max_events=events)
        best = max(best, events / (time.perf_counter() - t))
    mem = None
    if engine == "queues":
        mem = ch.x.nbytes / n
    elif engine == "buckets":
        mem = ch.perm.nbytes / n
    return best, mem


_WORKER = r"""
import sys, time
import numpy as np
try:
    from supermarket.simulation import Chain
except ImportError:  # source trees from before the module was renamed
    from supermarket.simulate import Chain
from supermarket import theory as th
from supermarket.model import Params
chains = {}
print("ready", flush=True)
for line in sys.stdin:
    eng, n, d, lam, events = line.split()
    n, d, lam, events = int(float(n)), int(d), float(lam), int(events)
    key = (eng, n, d, lam)
    if key not in chains:
        k = th.k_lambda_d(d, lam) if d >= 2 else 0
        lo, hi = th.good_set_bounds(n, d, lam, 0.1, k) if k else (None, None)
        c = np.rint(n * th.fixed_point(d, lam)).astype(np.int64)
        chains[key] = ch = Chain(Params(n, d, lam), eng, c[c > 0], 12345, k=k, lo=lo, hi=hi)
        ch.advance(max_events=min(events, 10**6))
    t = time.process_time()
    chains[key].advance(max_events=events)
    print(time.process_time() - t, flush=True)
"""


def compare_trees(old_src, configs, repeat):
    """Best CPU seconds per configuration for this tree ("new") and ``old_src`` ("old"),
    runs interleaved; ``configs`` = [(engine, n, d, λ, events)].  Yields (config, old, new)."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "src")
    procs = {}
    try:
        for name, src in (("old", old_src), ("new", here)):
            env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
            procs[name] = subprocess.Popen(
                [sys.executable, "-c", _WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
            )
            if procs[name].stdout.readline().strip() != "ready":
                raise RuntimeError(f"the worker for {src} did not start")

        def run(name, cfg):
            procs[name].stdin.write(" ".join(map(str, cfg)) + "\n")
            procs[name].stdin.flush()
            return float(procs[name].stdout.readline())

        for cfg in configs:
            run("old", cfg)  # warm-up: compile or load, fill the caches and windows
            run("new", cfg)
            best = {"old": math.inf, "new": math.inf}
            for r in range(repeat):
                for name in ("old", "new") if r % 2 == 0 else ("new", "old"):
                    best[name] = min(best[name], run(name, cfg))
            yield cfg, best["old"], best["new"]
    finally:
        for p in procs.values():
            p.stdin.close()
            p.wait()


def ciw_rate(n, d, lam, horizon, seed=1):
    """Ciw: a dispatcher node (rate nλ, zero service) routes with JSQ(d) to n single-server
    exponential(1) nodes.  Returns (events/s, customers served per second)."""
    import ciw

    class JSQd(ciw.routing.NodeRouting):
        def __init__(self, destinations, d):
            self.destinations = destinations
            self.d = d

        def next_node(self, ind):
            nodes = self.simulation.nodes
            best = None
            best_len = math.inf
            for _ in range(self.d):  # with replacement, ties to the first minimal entry
                j = self.destinations[int(ciw.random.random() * len(self.destinations))]
                length = nodes[j].number_of_individuals
                if length < best_len:
                    best, best_len = j, length
            return nodes[best]

    ciw.seed(seed)
    dests = list(range(2, n + 2))
    net = ciw.create_network(
        arrival_distributions=[ciw.dists.Exponential(rate=n * lam)] + [None] * n,
        service_distributions=[ciw.dists.Deterministic(value=0.0)] + [ciw.dists.Exponential(rate=1.0)] * n,
        number_of_servers=[float("inf")] + [1] * n,
        routing=ciw.routing.NetworkRouting(routers=[JSQd(dests, d)] + [ciw.routing.Leave() for _ in range(n)]),
    )
    sim = ciw.Simulation(net)
    t = time.perf_counter()
    sim.simulate_until_max_time(horizon)
    wall = time.perf_counter() - t
    recs = sim.get_all_records()
    served = sum(1 for r in recs if r.node != 1)
    arrivals = sum(1 for r in recs if r.node == 1)
    return (arrivals + served) / wall, lam * n * horizon / wall


def rmftool_rate(n, d, lam, horizon, levels=20):
    """rmftool's DDPP.simulate on the profile (u_1..u_K) of JSQ(d): (events/s, customers/s)."""
    import rmftool

    ddpp = rmftool.DDPP()
    for i in range(levels):
        up = np.zeros(levels)
        up[i] = 1

        def arr(x, i=i):
            prev = 1.0 if i == 0 else x[i - 1]
            return lam * (prev**d - x[i] ** d)

        def dep(x, i=i):
            nxt = x[i + 1] if i + 1 < levels else 0.0
            return x[i] - nxt

        ddpp.add_transition(up, arr)
        ddpp.add_transition(-up, dep)
    ddpp.set_initial_state(np.rint(n * th.fixed_point(d, lam, levels)) / n)  # a state of the chain
    t = time.perf_counter()
    T, _X = ddpp.simulate(n, horizon)
    wall = time.perf_counter() - t
    return (len(T) - 1) / wall, lam * n * horizon / wall


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="shorter runs")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-others", action="store_true", help="skip Ciw and rmftool")
    ap.add_argument(
        "--config",
        action="append",
        metavar="ENGINE:N:D:LAM",
        help="measure only these configurations (repeatable), e.g. profile:1e6:100:0.999",
    )
    ap.add_argument(
        "--against",
        metavar="SRC",
        help="compare with the package in another source tree (its src folder), CPU time, interleaved",
    )
    args = ap.parse_args(argv)
    E = 10**7 if args.quick else 5 * 10**7
    R = args.repeat
    configs = []
    for spec in args.config or []:
        try:
            eng, n, d, lam = spec.split(":")
            n, d, lam = int(float(n)), int(float(d)), float(lam)
        except ValueError:
            ap.error(f"--config must be ENGINE:N:D:LAM, e.g. profile:1e6:100:0.999; got {spec!r}")
        if eng not in ("profile", "buckets", "queues"):
            ap.error(f"--config: engine must be profile, buckets or queues; got {eng!r}")
        configs.append((eng, n, d, lam, E if eng == "profile" else E // 5 if eng == "queues" else E // 2))
    if args.against:
        if not os.path.isdir(os.path.join(args.against, "supermarket")):
            ap.error(f"--against must be a folder holding the package supermarket/; got {args.against!r}")
        if not configs:
            configs = [
                ("profile", 10**6, 100, 0.999, E),
                ("profile", 1000, 2, 0.9, E),
                ("queues", 10**6, 2, 0.9, E // 5),
            ]
        print(f"CPU time, best of {R} interleaved runs per tree, load average {os.getloadavg()[0]:.1f} at the start")
        print()
        print("| engine | n | d | λ | events | old: million events/s | new: million events/s | new/old time |")
        print("|---|---|---|---|---|---|---|---|")
        for (eng, n, d, lam, ev), t_old, t_new in compare_trees(args.against, configs, R):
            print(
                f"| {eng} | {n:.0e} | {d} | {lam} | {ev:.0e} | {ev / t_old / 1e6:.1f} | {ev / t_new / 1e6:.1f} "
                f"| {t_new / t_old:.3f} |",
                flush=True,
            )
        print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
        return
    if configs:
        print("| engine | n | d | λ | million events/s |")
        print("|---|---|---|---|---|")
        for eng, n, d, lam, ev in configs:
            r, _ = engine_rate(eng, n, d, lam, ev, R)
            print(f"| {eng} | {n:.0e} | {d} | {lam} | {r / 1e6:.1f} |", flush=True)
        return
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"python {platform.python_version()}, {platform.machine()}, {stamp}")
    print()
    print("| engine | n | d | λ | million events/s | bytes/server | target |")
    print("|---|---|---|---|---|---|---|")
    rows = [
        ("profile", 10**6, 100, 0.999, E, ">= 80"),
        ("profile", 1000, 2, 0.9, E, ">= 40"),
        ("buckets", 10**6, 2, 0.9, E // 2, ">= 20"),
        ("buckets", 10**6, 100, 0.999, E // 2, ">= 20"),
        ("queues", 10**6, 2, 0.9, E // 5, "4 bytes/server"),
        ("queues", 1000, 2, 0.9, E // 5, ""),
    ]
    for eng, n, d, lam, ev, target in rows:
        r, mem = engine_rate(eng, n, d, lam, ev, R)
        print(
            f"| {eng} | {n:.0e} | {d} | {lam} | {r / 1e6:.1f} | {'' if mem is None else f'{mem:g}'} | {target} |",
            flush=True,
        )
    print()
    print("profile engine across n and d (λ = 0.999, from the rounded fixed point), million events/s:")
    print()
    ds = [2, 100, 10**4, 10**9]
    print("| n \\ d | " + " | ".join(f"{d:.0e}" for d in ds) + " |")
    print("|---" * (len(ds) + 1) + "|")
    rates = []
    for n in [10**3, 10**6, 10**9, 10**12]:
        cells = []
        for d in ds:
            r, _ = engine_rate("profile", n, d, 0.999, E // 2, R)
            rates.append(r)
            cells.append(f"{r / 1e6:.1f}")
        print(f"| {n:.0e} | " + " | ".join(cells) + " |", flush=True)
    print(f"\nmax/min over the grid: {max(rates) / min(rates):.2f}")
    if args.no_others:
        return
    print()
    print("Side by side, n = 1000, d = 2, λ = 0.9 (one core):")
    print()
    print("| tool | events/s | customers served/s | profile's advantage (customers/s) |")
    print("|---|---|---|---|")
    n, d, lam = 1000, 2, 0.9
    r, _ = engine_rate("profile", n, d, lam, E, R)
    ours_c = r * lam / (1 + lam)  # customers/s: arrivals are a fraction λ/(1+λ) of the steps
    print(f"| supermarket profile | {r:.3g} | {ours_c:.3g} | 1 |", flush=True)
    for name, fn, horizon in (
        ("Ciw 3 (JSQ(d) custom router)", ciw_rate, 5.0 if args.quick else 20.0),
        ("rmftool DDPP.simulate", rmftool_rate, 5.0 if args.quick else 20.0),
    ):
        try:
            ev, cust = fn(n, d, lam, horizon)
        except ImportError as exc:
            print(f"| {name} | not installed ({exc.name}) | | |")
            continue
        print(f"| {name} | {ev:.3g} | {cust:.3g} | {ours_c / cust:.0f}x |", flush=True)


if __name__ == "__main__":
    main()
