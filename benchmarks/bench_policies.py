"""Speed of the profile (and buckets) engine for each dispatch rule (supermarket.system.policies),
events per second on one core, and a side-by-side run against Ciw on the same system.

    .venv/bin/python benchmarks/bench_policies.py              # the table (about a minute)
    .venv/bin/python benchmarks/bench_policies.py --quick      # shorter runs
    .venv/bin/python benchmarks/bench_policies.py --no-ciw     # skip Ciw

Rows: n = 10^6, λ = 0.9 (JSQ(d) with d = 2), from the rule's rounded fluid fixed point,
all measurements on (time integrals of u_i and P_i, the maximum); best of ``--repeat``
runs of ``--events`` events, in CPU time (``time.process_time``: the machine is shared).
Target (issue 21): at least 20 million events/s for the count engines whatever n.  JIQ
runs a loop of its own while two queues or more are idle and the general loop otherwise
(its P_i depends on c_1 as well: every level's integral is closed when 1{c_1 = n} flips);
random routing computes P = c/n in the hot loop; JSQ(d) and JSQ look their P up.

Side by side (n = 100, λ = 0.9): Ciw 3 with a dispatcher node (rate nλ, zero service)
whose custom router applies the rule, to n single-server exponential(1) nodes; the common
unit is customers served per CPU second (λ·n·simulated time / CPU time).  Ciw runs every
rule here (custom routers); none is skipped.
"""

from __future__ import annotations

import argparse
import math
import platform
import time

import numpy as np

from supermarket.model import Params
from supermarket.simulation import Chain
from supermarket.system import policies as pol


def _chain(policy, n, d, lam, engine="profile"):
    """A chain running rule ``policy``, from the rule's rounded fluid fixed point."""
    c = np.rint(n * pol.fluid_fixed_point(policy, lam, 60, d=d)).astype(np.int64)
    c = c[c > 0]
    return Chain(Params(n, d, lam), engine, c, 12345, policy=policy)


def engine_rate(policy, n, d, lam, events, repeat, engine="profile"):
    """Best events per second over ``repeat`` runs of ``events`` events."""
    ch = _chain(policy, n, d, lam, engine)
    ch.advance(max_events=min(events, 10**6))  # compile, warm caches and windows
    best = 0.0
    for _ in range(repeat):
        t = time.process_time()  # CPU time: the machine is shared (wall time counts the others' work)
        ch.advance(max_events=events)
        best = max(best, events / (time.process_time() - t))
    return best


def ciw_rate(policy, n, d, lam, horizon, seed=1):
    """Ciw: a dispatcher node routes each customer by rule ``policy`` to one of n
    single-server exponential(1) nodes.  Returns customers served per CPU second."""
    import ciw

    class Rule(ciw.routing.NodeRouting):
        def __init__(self, destinations):
            self.destinations = destinations

        def _uniform(self, among):
            return among[int(ciw.random.random() * len(among))]

        def next_node(self, ind):
            nodes = self.simulation.nodes
            dests = self.destinations
            if policy == "random":
                j = self._uniform(dests)
            elif policy == "jsq-d":
                j, best = None, math.inf
                for _ in range(d):  # with replacement, ties to the first minimal entry
                    k = self._uniform(dests)
                    if nodes[k].number_of_individuals < best:
                        j, best = k, nodes[k].number_of_individuals
            else:
                lengths = [nodes[k].number_of_individuals for k in dests]
                m = min(lengths)
                if policy == "jsq":
                    j = self._uniform([k for k, x in zip(dests, lengths) if x == m])
                else:  # jiq
                    j = self._uniform([k for k, x in zip(dests, lengths) if x == 0] if m == 0 else dests)
            return nodes[j]

    ciw.seed(seed)
    dests = list(range(2, n + 2))
    net = ciw.create_network(
        arrival_distributions=[ciw.dists.Exponential(rate=n * lam)] + [None] * n,
        service_distributions=[ciw.dists.Deterministic(value=0.0)] + [ciw.dists.Exponential(rate=1.0)] * n,
        number_of_servers=[float("inf")] + [1] * n,
        routing=ciw.routing.NetworkRouting(routers=[Rule(dests)] + [ciw.routing.Leave() for _ in range(n)]),
    )
    sim = ciw.Simulation(net)
    t = time.process_time()
    sim.simulate_until_max_time(horizon)
    return lam * n * horizon / (time.process_time() - t)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter runs")
    ap.add_argument("--no-ciw", action="store_true", help="skip the Ciw comparison")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--events", type=float, default=3e7)
    args = ap.parse_args(argv)
    events = int(args.events / (5 if args.quick else 1))
    n, d, lam = 10**6, 2, 0.9
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"Python {platform.python_version()}, {platform.machine()}, {when}")
    print()
    print("| rule | engine | n | d | λ | million events/s | target |")
    print("|---|---|---|---|---|---|---|")
    counted = [r.name for r in pol.RULES.values() if "profile" in r.engines]  # the rules the count engines run
    for engine in ("profile", "buckets"):
        for p in counted:
            r = engine_rate(p, n, d, lam, events if engine == "profile" else events // 2, args.repeat, engine)
            print(
                f"| {p} | {engine} | {n:.0e} | {d if p == 'jsq-d' else '-'} | {lam} | {r / 1e6:.1f} | "
                f"{'>= 20' if engine == 'profile' else ''} |",
                flush=True,
            )
    if args.no_ciw:
        return
    ns, horizon = 100, (20.0 if args.quick else 100.0)
    print()
    print(f"Side by side at n = {ns}, λ = {lam}, d = {d} (jsq-d), one core; customers served per CPU second:")
    print()
    print("| rule | supermarket profile | Ciw 3 (custom router) | profile's advantage |")
    print("|---|---|---|---|")
    for p in counted:
        ev = engine_rate(p, ns, d, lam, events // 5, args.repeat)
        ours = ev * lam / (1 + lam)  # arrivals are λ/(1+λ) of the steps; served = arrived in equilibrium
        theirs = ciw_rate(p, ns, d, lam, horizon)
        print(f"| {p} | {ours:.3g} | {theirs:.3g} | {ours / theirs:.0f}x |", flush=True)


if __name__ == "__main__":
    main()
