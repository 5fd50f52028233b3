"""Speed of the phase-type counts engine (docs/model.md §13): events per second, one core,
JSQ(2) at λ = 0.9 with Erlang-4 and hyperexponential (H2, SCV 4, balanced means) service.

    .venv/bin/python benchmarks/bench_phase.py                 # n = 10^6, both laws (about a minute)
    .venv/bin/python benchmarks/bench_phase.py --n 1000 --events 1e7 --repeat 5

Each chain starts from the mean-field fixed point (counts rounded), runs 10^6 events to
warm up, then ``--events`` events are timed (CPU time of this process,
``time.process_time``, best of ``--repeat``: the machine may be shared).  An *event* is a
real transition of the jump chain: an arrival, a phase move or a service completion (no
dummy events: the engine is not uniformized); the table also gives customers served per
second (arrivals per event × events/s) for comparison with engines that count only
arrivals and departures.  Target: >= 20 million events/s at n = 10^6.
"""

from __future__ import annotations

import argparse
import math
import platform
import time

import numba
import numpy as np

from supermarket.meanfield.phase import phase_fixed_point
from supermarket.simulation.phase import PhaseChain
from supermarket.system.phase_law import check_ph


def erlang(K):
    T = np.diag(np.full(K, -float(K))) + np.diag(np.full(K - 1, float(K)), 1)
    a = np.zeros(K)
    a[0] = 1.0
    return a, T


def h2(scv):
    p = (1.0 + math.sqrt((scv - 1.0) / (scv + 1.0))) / 2.0
    return np.array([p, 1.0 - p]), np.diag([-2.0 * p, -2.0 * (1.0 - p)])


def bench(name, alpha, T, n, d, lam, events, repeat, holding_exp):
    a, M, t0 = check_ph(alpha, T)
    fp = phase_fixed_point(d, lam, a, M)
    N0 = np.zeros((fp.x.shape[0] + 1, a.size), np.int64)
    N0[1:] = np.rint(fp.x * n).astype(np.int64)
    best = math.inf
    per_event = math.nan
    for r in range(repeat):
        ch = PhaseChain(n, d, lam, a, M, t0, replace=True, seed=np.random.SeedSequence(r), holding_exp=holding_exp)
        ch.set_counts(N0)
        ch.run_events(10**6)
        t_sim0, served0 = ch.clock[0], ch.events
        w = time.process_time()
        ch.run_events(events)
        w = time.process_time() - w
        best = min(best, w)
        per_event = lam * n * (ch.clock[0] - t_sim0) / (ch.events - served0)  # arrivals per event
    ev_s = events / best
    return {"law": name, "n": n, "d": d, "lam": lam, "Mev_s": ev_s / 1e6, "served_s": ev_s * per_event}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=float, default=1e6)
    ap.add_argument("--d", type=int, default=2)
    ap.add_argument("--lam", type=float, default=0.9)
    ap.add_argument("--events", type=float, default=3e7)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--exp-holding", action="store_true", help="exponential holding times (default: their means)")
    args = ap.parse_args(argv)
    n = int(args.n)
    print(
        f"Python {platform.python_version()}, numba {numba.__version__}, {platform.machine()}, "
        f"holding times: {'exponential' if args.exp_holding else 'conditional means'}\n"
    )
    print("| law | n | d | λ | million events/s | customers served/s | target |")
    print("|---|---|---|---|---|---|---|")
    for name, (a, T) in (("Erlang-4", erlang(4)), ("H2, SCV 4", h2(4.0))):
        r = bench(name, a, T, n, args.d, args.lam, int(args.events), args.repeat, args.exp_holding)
        print(f"| {r['law']} | {n:.0e} | {r['d']} | {r['lam']} | {r['Mev_s']:.1f} | {r['served_s']:.3g} | >= 20 |")


if __name__ == "__main__":
    main()
