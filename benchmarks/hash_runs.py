"""One SHA-256 over the results of a fixed set of simulation runs: a refactoring of the
engines' kernels that means to keep every number must leave it unchanged.

    PYTHONPATH=src python benchmarks/hash_runs.py          # per-run digests and the total
    PYTHONPATH=src python benchmarks/hash_runs.py --quiet  # the total only

The set covers the three engines, discrete and continuous time, sampling with and without
replacement, small ``n`` (full P table) and ``n > 32767`` (windowed tables, and the forced
windows at small ``n``), more than 8 and more than 32 occupied levels (the general path),
trajectories (recording), the good set, several replications and starts.  Through
:func:`supermarket.simulate.simulate` it hashes ``u_mean``, ``u_stderr``, ``ud_mean``, the
maximum's distribution, the good-set fraction, the mean queue length, the final counts and
lengths, and the trajectory; through :class:`supermarket.simulate.Chain` the raw time
integrals, the clock and the random state after runs cut into uneven chunks.

The total depends on the platform's ``log``/``exp`` only through the last bits of
continuous-time clocks and ``P`` values: compare totals on one machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import warnings

import numpy as np

from supermarket.model import Params
from supermarket.simulation import Chain
from supermarket.simulation.plan import build_plan
from supermarket.simulation.run import _execute
from supermarket.system.states import start_counts

# (label, engine, n, d, lam, replace, time_mode, steps, extra keyword arguments)
SIM_RUNS = [
    ("profile small disc rep", "profile", 100, 2, 0.9, True, "discrete", 300_000, {}),
    ("profile small cont norep", "profile", 100, 3, 0.9, False, "continuous", 300_000, {}),
    ("profile big disc rep", "profile", 50_000, 2, 0.95, True, "discrete", 400_000, {"start": "fixed-point"}),
    ("profile big cont norep", "profile", 50_000, 5, 0.99, False, "continuous", 400_000, {"start": "fixed-point"}),
    ("profile d=1 >32 levels", "profile", 40_000, 1, 0.97, True, "discrete", 300_000, {"start": "fixed-point"}),
    ("profile d=1 cont >8 levels", "profile", 500, 1, 0.9, True, "continuous", 300_000, {}),
    ("profile record", "profile", 1000, 2, 0.9, True, "discrete", 200_000, {"record_every": 997, "record_levels": 6}),
    (
        "profile record cont",
        "profile",
        60_000,
        2,
        0.9,
        False,
        "continuous",
        200_000,
        {"record_every": 0.37, "record_levels": 5, "start": "fixed-point"},
    ),
    ("profile forced windows", "profile", 3000, 2, 0.99, True, "discrete", 300_000, {"_force_window": True}),
    ("profile 2 reps", "profile", 200, 2, 0.8, True, "discrete", 200_000, {"replications": 2, "workers": 1}),
    ("queues small disc rep", "queues", 100, 2, 0.9, True, "discrete", 200_000, {}),
    ("queues small cont norep", "queues", 100, 3, 0.9, False, "continuous", 200_000, {}),
    ("queues big disc norep", "queues", 40_000, 4, 0.95, False, "discrete", 300_000, {"start": "fixed-point"}),
    ("queues big cont rep", "queues", 40_000, 2, 0.95, True, "continuous", 300_000, {"start": "fixed-point"}),
    ("queues d=1 >32 levels", "queues", 40_000, 1, 0.97, True, "discrete", 200_000, {"start": "fixed-point"}),
    ("queues record", "queues", 300, 2, 0.9, True, "continuous", 200_000, {"record_every": 0.5, "record_levels": 4}),
    ("queues large d norep", "queues", 2000, 100, 0.99, False, "discrete", 100_000, {}),
    ("buckets small disc rep", "buckets", 100, 2, 0.9, True, "discrete", 200_000, {}),
    ("buckets small cont norep", "buckets", 100, 3, 0.9, False, "continuous", 200_000, {}),
    ("buckets big disc norep", "buckets", 40_000, 4, 0.95, False, "discrete", 300_000, {"start": "fixed-point"}),
    ("buckets big cont rep", "buckets", 40_000, 2, 0.95, True, "continuous", 300_000, {"start": "fixed-point"}),
    ("buckets d=1 >32 levels", "buckets", 40_000, 1, 0.97, True, "discrete", 200_000, {"start": "fixed-point"}),
    ("buckets record", "buckets", 300, 2, 0.9, True, "discrete", 200_000, {"record_every": 501, "record_levels": 4}),
    ("buckets forced windows", "buckets", 3000, 2, 0.99, False, "continuous", 200_000, {"_force_window": True}),
]

# Chain-level runs cut into uneven chunks: (label, engine, n, d, lam, replace, continuous, start, force window)
CHAIN_RUNS = [
    ("chain profile", "profile", 5000, 2, 0.99, True, False, "empty", False),
    ("chain profile win cont", "profile", 5000, 3, 0.95, False, True, "empty", True),
    ("chain queues", "queues", 70_000, 2, 0.9, False, True, "fixed-point", False),
    ("chain buckets", "buckets", 70_000, 3, 0.9, True, False, "fixed-point", False),
]


def _feed(h, *arrays):
    for a in arrays:
        a = np.ascontiguousarray(np.asarray(a))
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(a.tobytes())


def sim_digest(engine, n, d, lam, replace, mode, steps, kw, seed) -> str:
    kw = dict(kw)
    force = kw.pop("_force_window", False)  # a field of the run plan, not a keyword of simulate
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = build_plan(n, d, lam, steps=steps, engine=engine, replace=replace, time_mode=mode, seed=seed, **kw)
        r = _execute(dataclasses.replace(plan, force_window=force), progress=False)
    h = hashlib.sha256()
    mq = sorted(r.max_queue_dist.items())
    _feed(
        h,
        r.u_mean,
        r.u_stderr,
        r.ud_mean,
        np.array([m for m, _ in mq], np.int64),
        np.array([f for _, f in mq]),
        np.array([np.nan if r.good_set_fraction is None else r.good_set_fraction]),
        np.array([r.mean_queue_length, r.mean_queue_length_stderr, r.sim_time]),
        np.array([r.steps, r.burn_in], np.int64),
        r.final_counts,
    )
    if r.final_lengths is not None:
        _feed(h, r.final_lengths)
    if r.trajectory is not None:
        tr = r.trajectory
        _feed(h, tr.t, tr.u, tr.max, tr.total)
    return h.hexdigest()


def chain_digest(engine, n, d, lam, replace, cont, start, force, seed) -> str:
    p = Params(n, d, lam, replace=replace)
    ch = Chain(p, engine, start_counts(n, d, lam, start), seed, continuous=cont, _force_window=force)
    h = hashlib.sha256()
    for i, ev in enumerate((1, 17, 30_000, 123_457, 250_000)):
        ch.advance(max_events=ev)
        if i == 2:
            ch.start_measuring()
        m = ch.measures()
        _feed(
            h,
            m["area_c"],
            m["area_P"],
            m["maxtime"],
            np.array([m["good_time"], ch.now]),
            ch.counts(),
            ch.s,
            np.array([ch.events], np.int64),
        )
    ch.advance(t_stop=ch.now + 7.5)
    _feed(h, ch.counts(), np.array([ch.now]), ch.s)
    if ch.lengths() is not None:
        _feed(h, ch.lengths())
    return h.hexdigest()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quiet", action="store_true", help="print the total only")
    args = ap.parse_args(argv)
    total = hashlib.sha256()
    for i, (label, eng, n, d, lam, rep, mode, steps, kw) in enumerate(SIM_RUNS):
        dg = sim_digest(eng, n, d, lam, rep, mode, steps, kw, seed=1000 + i)
        total.update(dg.encode())
        if not args.quiet:
            print(f"{dg[:16]}  {label}", flush=True)
    for i, (label, eng, n, d, lam, rep, cont, start, force) in enumerate(CHAIN_RUNS):
        dg = chain_digest(eng, n, d, lam, rep, cont, start, force, seed=2000 + i)
        total.update(dg.encode())
        if not args.quiet:
            print(f"{dg[:16]}  {label}", flush=True)
    print(f"total {total.hexdigest()}")


if __name__ == "__main__":
    main()
