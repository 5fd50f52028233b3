"""Each engine of ``supermarket`` beside Ciw on the same system: first the same answer, then the speed.

Command (about three minutes of CPU, most of it Ciw's)::

    NUMBA_CACHE_DIR=/tmp/numba-bench PYTHONPATH=src python benchmarks/bench_vs_ciw.py

(``--quick``: shorter Ciw runs, for a smoke test; ``--no-probe``: skip the n = 1000 probe).
Ciw is the ``bench`` extra.  The systems, all at ``n = 100``, λ = 0.9 (load per unit of
capacity), FIFO single-server queues, a dispatcher that sees queue lengths (customers present,
the one in service included):

* the profile engine (``simulate``, default engine, exponential service): ``random``, ``jsq``
  (shortest of all, ties uniform), ``jiq`` (an idle queue uniformly if any, else a uniform one);
* the classes count engine (``server_classes="0.5:2,0.5:1"``, exponential service at rates 2
  and 1, arrivals at ``nλ s̄ = 135``; docs/model.md §15), JSQ(2);
* the phase-type count engine, ``erlang:4`` and ``hyperexp:4`` (mean 1, SCV 1/4 and 4), JSQ(2);
* the event engine, ``lognormal:4``, JSQ(2).

JSQ(2) samples two queues with replacement and joins the shorter, a tie to the first sample
(uniform among the sampled slots, as in docs/model.md §14).  In Ciw every system is a
dispatcher node (infinitely many servers, zero service) that routes each arrival with a custom
``NodeRouting`` to one of ``n`` single-server FIFO nodes.

**The check.**  Before timing, each pair must simulate the same system: the time average of the
customers per server over the window ``[10, 60]`` from an empty start, in independent runs of
each tool (ours 48, Ciw 6; mean ± standard error of the runs, Ciw's with 5 degrees of
freedom), agrees within the combined standard error (``|z| <= 3`` is printed ``ok``, otherwise
``DISAGREE``: a bug to report, not to hide).  A window from empty is the same law for both
tools whatever the relaxation time, so no warm-up bias enters the comparison (``random`` is
M/M/1 at ρ = 0.9 per queue, relaxation ~ 1/(1 − √ρ)² ≈ 380: no warm-up Ciw can afford would
do), and independent runs give an error that needs no autocorrelation model.  Ours: the plain
time average (no control variates: they assume stationarity; the profile engine in continuous
time; the count engines' clock is events over their uniformization rate, and the classes
engine rounds the window up to whole batches, ``[10, 60.3]``); the library's warnings about
these short runs from empty are silenced.  Ciw: the customers at the server nodes, integrated
over the window from its records plus the customers still present at the end.  The Ciw
distributions are checked first: mean 1 and second moment ``1 + SCV`` of 2·10^5 samples of
each, within 4 standard errors of the samples (against our law's definition, not Ciw's own
``mean``/``variance``).

**The speed.**  Customers served per second of CPU time (``time.process_time``: the machine
is shared).  Ciw: customers that completed service at a server node in the check's runs (from empty
to time 60), over the CPU time of their ``simulate_until_max_time``.  Ours: the whole library call (burn-in, batches,
error analysis) after a first call that compiles; customers = arrival rate × simulated time,
burn-in included (the event engine counts them: ``GeneralResult.customers``).  Ours runs a
stationary run at the same ``n`` (time 2·10^4 from the fixed point, or from empty with a
tenth of burn-in; its mean queue length is printed, with the library's error), and again at
``n = 10^6`` (count engines, about 2·10^7 events) and ``n = 10^5`` (event engine, about 10^7
events), sizes Ciw cannot reach: a probe of Ciw at ``n = 1000`` (its cost per customer grows
with ``n``) prints what the check would cost there.  Ciw is a general-purpose discrete-event
library (a Python object per customer; its cost per customer grows with the number of nodes:
about 1.4·10^4 customers per CPU second at 20 nodes, 3·10^3 at 100, 80 at 1000 on this
machine), so the ratio measures what a specialised engine gains, not a flaw of Ciw.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

import supermarket as sm
from supermarket.system.service import parse_service

LAM = 0.9
N = 100
CLASSES = "0.5:2,0.5:1"
BATCHES = 8
Z_OK = 3.0


# --------------------------------------------------------------------------- Ciw side
def _ciw():
    import ciw

    return ciw


def ciw_dist(service):
    """Ciw's distribution for one of our laws of mean 1 (exponential rate 1 for ``"exp"``)."""
    ciw = _ciw()
    law = parse_service(service)
    if law.name == "exp":
        return ciw.dists.Exponential(rate=1.0)
    if law.name == "erlang":
        k = int(law.params[0])
        return ciw.dists.Erlang(rate=float(k), num_phases=k)  # k phases of rate k: mean 1
    if law.name == "hyperexp":
        p, r1, r2 = (float(v) for v in law.params)
        return ciw.dists.HyperExponential(rates=[r1, r2], probs=[p, 1.0 - p])
    if law.name == "lognormal":
        mu, sigma = (float(v) for v in law.params)
        return ciw.dists.Lognormal(mu, sigma)  # Ciw's (mean, sd) are those of the normal log
    raise ValueError(f"no Ciw law for {service}")


def check_ciw_law(service, samples=200_000, seed=7):
    """Sample Ciw's distribution: mean 1 and E[S²] = 1 + SCV, each within 4 sample standard errors.

    The target is our law's definition (mean 1, ``law.scv``), not Ciw's own ``mean``/``variance``."""
    ciw = _ciw()
    ciw.seed(seed)
    dist = ciw_dist(service)
    x = np.array([dist.sample() for _ in range(samples)])
    scv = parse_service(service).scv
    m1, s1 = x.mean(), x.std(ddof=1) / math.sqrt(samples)
    x2 = x * x
    m2, s2 = x2.mean(), x2.std(ddof=1) / math.sqrt(samples)
    z1, z2 = (m1 - 1.0) / s1, (m2 - (1.0 + scv)) / s2
    ok = abs(z1) <= 4 and abs(z2) <= 4
    return (
        f"{service}: Ciw {dist!r}: mean {m1:.4f} ± {s1:.4f} (z {z1:+.1f}), "
        f"E[S²] {m2:.3f} ± {s2:.3f} vs {1 + scv:g} (z {z2:+.1f}) {'ok' if ok else 'WRONG LAW'}"
    )


def _router_class(policy, d=2):
    ciw = _ciw()

    class Dispatch(ciw.routing.NodeRouting):
        def __init__(self, destinations):
            self.destinations = destinations
            self.m = len(destinations)

        def next_node(self, ind):
            nodes = self.simulation.nodes
            dest = self.destinations
            rnd = ciw.random.random
            if policy == "random":
                return nodes[dest[int(rnd() * self.m)]]
            if policy == "jsq-d":
                best, best_len = None, math.inf
                for _ in range(d):
                    j = dest[int(rnd() * self.m)]
                    length = nodes[j].number_of_individuals
                    if length < best_len:  # a tie goes to the first sample: uniform among the slots
                        best, best_len = j, length
                return nodes[best]
            lengths = [nodes[j].number_of_individuals for j in dest]
            if policy == "jsq":
                m = min(lengths)
                tied = [j for j, x in zip(dest, lengths) if x == m]
                return nodes[tied[int(rnd() * len(tied))]]
            if policy == "jiq":
                idle = [j for j, x in zip(dest, lengths) if x == 0]
                if idle:
                    return nodes[idle[int(rnd() * len(idle))]]
                return nodes[dest[int(rnd() * self.m)]]
            raise ValueError(policy)

    return Dispatch


def ciw_run(n, policy, service, speeds, horizon, warm, seed, batches=BATCHES):
    """One Ciw run from empty until ``horizon``.

    Returns (batch means of the customers per server over [warm, horizon], customers served,
    CPU seconds of the simulation)."""
    ciw = _ciw()
    base = ciw_dist(service)
    rate = n * LAM * float(np.mean(speeds))
    if service == "exp":
        serv = [ciw.dists.Exponential(rate=float(s)) for s in speeds]
    else:
        if any(s != 1.0 for s in speeds):
            raise ValueError("classes only with exponential service")
        serv = [base] * n
    dests = list(range(2, n + 2))
    ciw.seed(seed)
    net = ciw.create_network(
        arrival_distributions=[ciw.dists.Exponential(rate=rate)] + [None] * n,
        service_distributions=[ciw.dists.Deterministic(value=0.0)] + serv,
        number_of_servers=[float("inf")] + [1] * n,
        routing=ciw.routing.NetworkRouting(
            routers=[_router_class(policy)(dests)] + [ciw.routing.Leave() for _ in range(n)]
        ),
    )
    sim = ciw.Simulation(net)
    c0 = time.process_time()
    sim.simulate_until_max_time(horizon)
    cpu = time.process_time() - c0
    recs = [r for r in sim.get_all_records() if r.node != 1]
    a = [r.arrival_date for r in recs]
    e = [r.exit_date for r in recs]
    for j in dests:  # customers still at a server at the horizon
        for ind in sim.nodes[j].all_individuals:
            a.append(ind.arrival_date)
            e.append(horizon)
    a, e = np.asarray(a), np.asarray(e)
    edges = np.linspace(warm, horizon, batches + 1)
    lo, hi = edges[:-1], edges[1:]
    overlap = np.clip(np.minimum(e[:, None], hi) - np.maximum(a[:, None], lo), 0.0, None)
    per_batch = overlap.sum(axis=0) / (n * (hi - lo))
    return per_batch, len(recs), cpu


# --------------------------------------------------------------------------- our side
def _call(kind, policy, service, seed, n=N, **kw):
    ss = np.random.SeedSequence(seed)
    if kind == "classes":
        return sm.simulate(n, 2, LAM, policy=policy, server_classes=CLASSES, seed=ss, **kw)
    return sm.simulate(n, 2, LAM, policy=policy, service=service, seed=ss, **kw)


def ours_window(kind, policy, service, seed, warm, horizon):
    """One run from empty, the plain time average of the customers per server over [warm, horizon]
    (continuous time; no control variates: they assume stationarity).  The library warns about
    such a run (start-up bias, identities off), rightly: the warnings are silenced here."""
    extra = {"time_mode": "continuous"} if kind == "profile" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        r = _call(
            kind,
            policy,
            service,
            seed,
            time=horizon - warm,
            burn_in=warm,
            start="empty",
            control_variates=False,
            **extra,
        )
    if kind == "profile":
        return float(r.queue_length.plain)
    if kind == "phase":
        return float(r.mean_queue_length_plain.mean)
    return float(r.mean_queue_length.mean)


def ours_speed(kind, policy, service, horizon, seed, n=N):
    """A stationary run (the library's defaults, burn-in a tenth); returns (L, its error,
    reliable, customers, CPU seconds of the whole call)."""
    start = "fixed-point" if kind in ("profile", "phase") else "empty"
    c0 = time.process_time()
    r = _call(kind, policy, service, seed, n=n, time=horizon, start=start)
    cpu = time.process_time() - c0
    if kind == "profile":
        q = r.queue_length
        est = (q.value, q.stderr, q.reliable)
        customers = n * LAM * (r.sim_time + r.burn_in / (n * (1 + LAM)))  # burn_in in steps
    else:
        q = r.mean_queue_length
        est = (q.mean, q.stderr, q.reliable)
        if kind == "events":
            customers = r.customers
        else:
            rate = r.arrival_rate if kind == "classes" else n * LAM
            customers = rate * (r.time + r.burn_in)
    return (*est, customers, cpu)


BIG_COUNT = 10**6  # the count engines' cost per event does not depend on n
BIG_EVENTS = 10**5  # the event engine at the size of its target (benchmarks/bench_events.py)


def big_time(kind, n):
    """A horizon of about 2·10^7 events (10^7 for the event engine), burn-in a tenth more."""
    return (10**7 if kind == "events" else 2 * 10**7) / (n * (1 + LAM))


SYSTEMS = [
    # label, our kind, policy, service
    ("profile", "profile", "random", "exp"),
    ("profile", "profile", "jsq", "exp"),
    ("profile", "profile", "jiq", "exp"),
    ("classes 0.5:2,0.5:1", "classes", "jsq-d", "exp"),
    ("phase", "phase", "jsq-d", "erlang:4"),
    ("phase", "phase", "jsq-d", "hyperexp:4"),
    ("events", "events", "jsq-d", "lognormal:4"),
]


def speeds_of(kind, n):
    if kind != "classes":
        return [1.0] * n
    return [2.0] * (n // 2) + [1.0] * (n - n // 2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer, shorter Ciw runs (smoke test)")
    ap.add_argument("--no-probe", action="store_true", help="skip the n = 1000 Ciw probe")
    args = ap.parse_args()
    warm, horizon = 10.0, 60.0
    ciw_reps, our_reps = (3, 16) if args.quick else (6, 48)
    if args.quick:
        horizon = 30.0
    our_time = 20_000.0
    try:
        import ciw
    except ImportError:
        print("Ciw is not installed (pip install -e '.[bench]')")
        return 1

    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, Python {platform.python_version()}, "
        f"Ciw {ciw.__version__}, {platform.machine()}, load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores"
    )
    print("\nCiw's laws (2·10^5 samples each):")
    for s in ("erlang:4", "hyperexp:4", "lognormal:4"):
        print("  " + check_ciw_law(s))
    for _, kind, pol, svc in SYSTEMS:  # compile (not timed)
        ours_window(kind, pol, svc, 0, 1.0, 3.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ours_speed(kind, pol, svc, 5.0, 0)

    print(
        f"\nThe check: customers per server, time average over [{warm:g}, {horizon:g}] from empty, "
        f"n = {N}, λ = {LAM}; ours {our_reps} runs, Ciw {ciw_reps} (mean ± s.e. of the runs)"
    )
    print("| engine | rule | service | ours | Ciw | z |")
    print("|---|---|---|---|---|---|")
    rows = []
    for i, (label, kind, pol, svc) in enumerate(SYSTEMS):
        sp = speeds_of(kind, N)
        o = np.array([ours_window(kind, pol, svc, 1000 * i + k, warm, horizon) for k in range(our_reps)])
        c, served, ccpu = [], 0, 0.0
        for k in range(ciw_reps):
            pb, s_, c_ = ciw_run(N, pol, svc, sp, horizon, warm, seed=1000 * i + k, batches=1)
            c.append(pb[0])
            served += s_
            ccpu += c_
        c = np.array(c)
        om, ose = o.mean(), o.std(ddof=1) / math.sqrt(o.size)
        cm, cse = c.mean(), c.std(ddof=1) / math.sqrt(c.size)
        z = (om - cm) / math.hypot(ose, cse)
        verdict = "ok" if abs(z) <= Z_OK else "DISAGREE"
        print(
            f"| {label} | {pol} | {svc} | {om:.3f} ± {ose:.3f} | {cm:.3f} ± {cse:.3f} | {z:+.1f} {verdict} |",
            flush=True,
        )
        with warnings.catch_warnings():  # the long run's own warnings about far, rare levels
            warnings.simplefilter("ignore", RuntimeWarning)
            L, se, rel, cust, cpu = ours_speed(kind, pol, svc, our_time, 7 + i)
        big = BIG_EVENTS if kind == "events" else BIG_COUNT
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            *_, bcust, bcpu = ours_speed(kind, pol, svc, big_time(kind, big), 70 + i, n=big)
        rows.append((label, pol, svc, L, se, rel, cust / cpu, served / ccpu, served, ccpu, big, bcust / bcpu))

    print(f"\nThe speed: customers served per CPU second, n = {N}, λ = {LAM}")
    print(
        "| engine | rule | service | ours: stationary L (time 20000) | ours | Ciw | Ciw customers (CPU s) "
        "| ratio | ours at large n |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for label, pol, svc, L, se, rel, o, c, served, ccpu, big, ob in rows:
        Ls = f"{L:.4f} ± {se:.4f}" if rel else f"{L:.4f} (error not trusted)"
        print(
            f"| {label} | {pol} | {svc} | {Ls} | {o:.3g} | {c:.3g} | {served} ({ccpu:.1f}) | {o / c:.0f}x "
            f"| {ob:.3g} (n = {big:.0e}) |"
        )

    if not args.no_probe:
        n, h = 1000, 2.0
        _, served, ccpu = ciw_run(n, "jsq-d", "exp", [1.0] * n, h, 0.0, seed=300, batches=1)
        need = ciw_reps * horizon * n * LAM / (served / ccpu)
        print(
            f"\nn = {n} probe (Ciw, JSQ(2), exp, horizon {h:g} from empty): {served / ccpu:.3g} customers "
            f"per CPU s; the check ({ciw_reps} runs to time {horizon:g}) would take ~{need:.0f} CPU s"
            + (" (over a minute: not run)" if need > 60 else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
