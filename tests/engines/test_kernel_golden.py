"""The engines' random stream and bookkeeping, pinned: a golden SHA-256 of discrete-time runs
of every engine that the kernels must reproduce bit for bit.

Refactoring a kernel must leave this hash unchanged.  A DELIBERATE change to the random
stream or to the order in which a kernel uses its random numbers (a new sampling method,
another generator) changes it: then update ``GOLDEN`` below and say so in the commit
message.  Only quantities that are exact in discrete time are hashed (counts, integer time
integrals ``∫ c_i dt``, time at each maximum, time in the good set, records, per-queue
lengths, the generator's state), so the hash does not depend on the platform's ``log``/
``exp``: ``P_i`` enters only through comparisons with a uniform.  The broader
``benchmarks/hash_runs.py`` hashes every returned array, continuous time included.
"""

from __future__ import annotations

import hashlib

import numpy as np

from supermarket import theory as th
from supermarket.model import Params
from supermarket.simulation import Chain
from supermarket.system.states import start_counts

GOLDEN = "f7c19392e1ef0c804812c703679b50a32cc3f5e7ba04647ecc32e9074d31abdc"  # good-set bounds exact (was ee538ec2…)

# engine, n, d, λ, replace, start, force windowed tables
RUNS = [
    ("profile", 200, 2, 0.9, True, "empty", False),
    ("profile", 200, 3, 0.9, False, "empty", True),
    ("profile", 50_000, 2, 0.95, False, "fixed-point", False),
    ("profile", 40_000, 1, 0.97, True, "fixed-point", False),  # > 32 levels: the general path
    ("queues", 200, 2, 0.9, True, "empty", False),
    ("queues", 40_000, 3, 0.95, False, "fixed-point", False),
    ("queues", 40_000, 1, 0.97, True, "fixed-point", False),
    ("buckets", 200, 2, 0.9, False, "empty", False),
    ("buckets", 40_000, 3, 0.95, True, "fixed-point", False),
    ("buckets", 40_000, 1, 0.97, True, "fixed-point", False),
]


def _feed(h, *arrays):
    for a in arrays:
        a = np.ascontiguousarray(np.asarray(a))
        h.update(str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())


def _digest(engine, n, d, lam, replace, start, force, seed):
    k = th.k_lambda_d(d, lam) if d >= 2 else 0
    lo, hi = th.good_set_bounds(n, d, lam, 0.1, k) if k else (None, None)
    ch = Chain(
        Params(n, d, lam, replace=replace),
        engine,
        start_counts(n, d, lam, start),
        seed,
        k=k,
        lo=lo,
        hi=hi,
        record_levels=3,
        _force_window=force,
    )
    h = hashlib.sha256()
    ch.advance(max_events=20_000)
    ch.start_measuring()
    ch.start_recording(333)
    for ev in (1, 4_999, 60_000):
        ch.advance(max_events=ev)
        m = ch.measures()
        _feed(h, m["area_c"], m["maxtime"], np.array([m["good_time"], ch.now]), ch.counts(), ch.s)
    ch.advance(t_stop=ch.now + 10_000.5)  # stop between two steps
    ch.advance(max_events=1_000)
    _feed(h, *ch.records(), ch.counts(), ch.s, np.array([ch.now]))
    if ch.lengths() is not None:
        _feed(h, ch.lengths())
    return h.hexdigest()


def golden_hash() -> str:
    total = hashlib.sha256()
    for i, run in enumerate(RUNS):
        total.update(_digest(*run, seed=31 + i).encode())
    return total.hexdigest()


def test_kernels_reproduce_the_golden_hash():
    assert golden_hash() == GOLDEN
