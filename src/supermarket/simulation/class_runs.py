"""The horizon and the replications of the count engines with server classes
(:mod:`.classes`, :mod:`.classes_phase`; docs/model.md §15): the measured time in whole events
per batch, and the replications on threads (the kernels release the GIL).
"""

from __future__ import annotations

import math
import os
import threading
import time as _time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import model as _m

DEFAULT_EVENTS = 4 * 10**7
"""Events per replication after the burn-in when neither ``time`` nor ``events`` is given."""
BURN_MIN = 20.0
"""The default burn-in is at least this long (in time units: ``20/s`` mean services)."""


def _horizon(control_variates, time, events, burn_in, batches, R_ev, sc):
    """Checks ``control_variates`` and the horizon, at ``R_ev`` events per unit of time:
    ``(time, burn_in, batch_ev, burn_ev)``, the times rounded to whole events (per batch)."""
    if not isinstance(control_variates, (bool, np.bool_)):
        raise TypeError(f"control_variates must be True or False, got {type(control_variates).__name__}")
    if time is not None and events is not None:
        raise ValueError("give time or events, not both")
    if time is not None:
        time = _m.check_positive_float("time", time)
        total = time * R_ev
    elif events is not None:
        total = float(_m.check_positive_int("events", events, maximum=2**62))
    else:
        total = float(DEFAULT_EVENTS)
    batch_ev = max(1, round(total / batches))
    time = batch_ev * batches / R_ev
    if burn_in is None:
        burn_in = max(time / 10.0, BURN_MIN / min(sc.speeds))
    else:
        burn_in = float(burn_in)
        if not (math.isfinite(burn_in) and burn_in >= 0):
            raise ValueError(f"burn_in must be a finite number >= 0, got {burn_in!r}")
    burn_ev = round(burn_in * R_ev)
    return time, burn_ev / R_ev, batch_ev, burn_ev


def _replicate(run_one, seed, replications, workers, burn_ev, batch_ev, batches, progress, rec=None):
    """The replications of ``run_one(burn_ev, batch_ev, batches, seed_sequence, tick, stop)`` on
    ``workers`` threads (the kernels release the GIL; the numbers do not depend on it), with
    ``progress`` called with the fraction done: ``(results, wall-clock seconds)``; replication 0
    records into ``rec`` (``rec=``, :mod:`.records`) when given."""
    if workers is None:
        workers = max(1, min(os.cpu_count() or 1, replications))
    workers = _m.check_positive_int("workers", workers, maximum=1024)
    seeds = _m.spawn_seeds(seed, replications)
    per = burn_ev + batch_ev * batches
    done = [0] * replications
    lock = threading.Lock()
    stop = threading.Event()

    def one(r):
        def tick(ev):
            if progress is not None:
                with lock:
                    done[r] = ev
                    progress(min(1.0, sum(done) / (per * replications)))

        return run_one(burn_ev, batch_ev, batches, seeds[r], tick, stop, **({} if rec is None or r else {"rec": rec}))

    # compile (or load from numba's cache) the kernels before the clock starts: one event of a
    # chain with its own seed (the replications' streams are untouched)
    run_one(1, 1, 1, np.random.SeedSequence(0), lambda ev: None, stop)
    t0 = _time.perf_counter()
    if workers == 1 or replications == 1:
        results = [one(r) for r in range(replications)]
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(one, r) for r in range(replications)]
            try:
                results = [f.result() for f in futures]
            except KeyboardInterrupt:
                stop.set()
                results = [f.result() for f in futures]
    return results, _time.perf_counter() - t0
