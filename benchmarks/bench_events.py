"""Speed of the per-queue event engine (engines/events.py), beside Ciw on the same system.

Command (about two minutes on one quiet core, ten on a loaded one)::

    NUMBA_CACHE_DIR=/tmp/numba-bench .venv/bin/python benchmarks/bench_events.py

(``--quick`` for a smaller run; ``--n 1e5 --runs 3 --no-ciw`` prints three runs at one size;
``--against DIR`` also runs the package of another checkout, ``DIR/supermarket`` (for
example ``git archive COMMIT src | tar -x -C /tmp/old`` and ``--against /tmp/old/src``),
alternating with this one run by run, in the same process: the machine's speed drifts within
minutes, so only interleaved figures compare two kernels). The system: JSQ(2) with
replacement, λ = 0.9, lognormal service with SCV 4 (mean 1), FIFO. An *event* is an arrival
or a departure. For each size the best of 2 runs of about 10^7 events (burn-in included, all
measurements on: the level integrals, every customer's sojourn and waiting time into the
per-batch histograms), from an empty system; the wall-clock rate and the process CPU-time
rate (the second is the one to read on a shared machine). Ciw (the ``bench`` extra) runs the
same system with a custom router at n = 100 for a short horizon; the common unit is
customers served per second.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from supermarket.simulation.general import simulate_general
from supermarket.system.service import parse_service

SERVICE = "lognormal:4"
LAM = 0.9
D = 2


def load_against(src, module="general"):
    """The module ``module`` of the ``supermarket`` package of another checkout's ``src``
    (the package imported as ``against``); bench_events_kernel.py uses it too."""
    import importlib.util

    root = os.path.join(src, "supermarket")
    spec = importlib.util.spec_from_file_location(
        "against", os.path.join(root, "__init__.py"), submodule_search_locations=[root]
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules["against"] = mod
    spec.loader.exec_module(mod)
    import importlib

    return importlib.import_module(f"against.{module}")


def ours(n, events, reps=3, seed0=0, sim=simulate_general):
    """Best of ``reps`` runs of about ``events`` events: (events/s wall, events/s CPU, customers/s)."""
    rate = n * LAM
    horizon = events / (2.0 * rate)
    sim(n, D, LAM, service=SERVICE, time=1.0, burn_in=0.5, batches=4, seed=0)  # compile
    best = (0.0, 0.0, 0.0)
    for r in range(reps):
        c0 = time.process_time()
        res = sim(
            n, D, LAM, service=SERVICE, time=horizon * 10 / 11, burn_in=horizon / 11, batches=64, seed=seed0 + r + 1
        )
        cpu = time.process_time() - c0
        out = (res.events / res.wall_s, res.events / cpu, res.customers / res.wall_s)
        best = max(best, out)
    return best


def ciw_rate(n, horizon, seed=1):
    """Ciw: a dispatcher node (rate nλ, zero service) routes with JSQ(2) to n single-server
    FIFO nodes with the same lognormal service.  Returns customers served per second."""
    import ciw

    law = parse_service(SERVICE)
    mu, sigma = (float(v) for v in law.params)

    class JSQd(ciw.routing.NodeRouting):
        def __init__(self, destinations, d):
            self.destinations = destinations
            self.d = d

        def next_node(self, ind):
            nodes = self.simulation.nodes
            best, best_len = None, math.inf
            for _ in range(self.d):
                j = self.destinations[int(ciw.random.random() * len(self.destinations))]
                length = nodes[j].number_of_individuals
                if length < best_len:
                    best, best_len = j, length
            return nodes[best]

    ciw.seed(seed)
    dests = list(range(2, n + 2))
    net = ciw.create_network(
        arrival_distributions=[ciw.dists.Exponential(rate=n * LAM)] + [None] * n,
        service_distributions=[ciw.dists.Deterministic(value=0.0)] + [ciw.dists.Lognormal(mu, sigma)] * n,
        number_of_servers=[float("inf")] + [1] * n,
        routing=ciw.routing.NetworkRouting(routers=[JSQd(dests, D)] + [ciw.routing.Leave() for _ in range(n)]),
    )
    sim = ciw.Simulation(net)
    t = time.perf_counter()
    sim.simulate_until_max_time(horizon)
    wall = time.perf_counter() - t
    served = sum(1 for r in sim.get_all_records() if r.node != 1)
    return served / wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10^6 events per run, one run")
    ap.add_argument("--n", type=float, nargs="*", default=None, help="sizes (default 1e3 1e5 1e6)")
    ap.add_argument("--runs", type=int, default=None, help="runs per size, each printed (default: best of 2)")
    ap.add_argument("--no-ciw", action="store_true", help="leave out the Ciw comparison")
    ap.add_argument("--against", metavar="DIR", help="also run DIR/supermarket, alternating run by run")
    args = ap.parse_args()
    events, reps = (10**6, 1) if args.quick else (10**7, 2)
    sizes = [int(v) for v in args.n] if args.n else [10**3, 10**5, 10**6]
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, Python {platform.python_version()}, "
        f"{platform.machine()}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(f"\nJSQ({D}), λ = {LAM}, service {SERVICE}\n")
    print("| engine | n | M events/s (wall) | M events/s (CPU) | customers/s | target |")
    print("|---|---|---|---|---|---|")
    engines = [("events", simulate_general)]
    if args.against:
        engines.append((f"events ({args.against})", load_against(args.against).simulate_general))
    for n in sizes:
        for r in range(args.runs or 1):
            for name, sim in engines:
                w, c, cust = ours(n, events, 1, seed0=r, sim=sim) if args.runs else ours(n, events, reps, sim=sim)
                target = ">= 5" if n == 10**5 else ""
                print(f"| {name} | {n:.0e} | {w / 1e6:.2f} | {c / 1e6:.2f} | {cust:.3g} | {target} |", flush=True)
    if args.no_ciw:
        return 0
    try:
        n = 100
        w, c, cust = ours(n, events // 4, 1)
        cr = ciw_rate(n, horizon=30.0)
        print(f"| events | {n} | {w / 1e6:.2f} | {c / 1e6:.2f} | {cust:.3g} | |")
        print(f"| Ciw 3 (JSQ(2) router) | {n} | | | {cr:.3g} | ours {cust / cr:.0f}x |")
    except ImportError:
        print("(Ciw not installed: pip install ciw)")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
