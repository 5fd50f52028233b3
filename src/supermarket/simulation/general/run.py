"""Runs of the per-queue event engine, in chunks (docs/model.md §14); their error bars and
the result are made in :mod:`.estimate`."""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import time as _time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ... import model as _m
from ...engines import events as _ev
from ...engines.rng import next_double, state_from_seed_sequence
from ...system import policies as _pol
from ...system.event_starts import fixed_point_refusal
from ...system.service import ServerClasses, ServiceLaw, parse_server_classes, parse_service
from ...system.spec import System
from .. import records as _rec
from . import starts as _starts
from .config import GeneralRun
from .estimate import ONE_REPLICATION_NOTE as ONE_REPLICATION_NOTE  # sweep.measurements imports it from here
from .estimate import _hist, _summarize
from .result import GeneralResult

__all__ = [
    "simulate_general",
    "POLICIES",
    "DEFAULT_EVENTS",
    "DEFAULT_REPLICATIONS",
    "CHUNK_EVENTS",
]

POLICIES = _pol.POLICIES
"""The dispatch rules: the same names and meanings as the count engines'."""

DEFAULT_EVENTS = 2 * 10**7
"""Events per replication (burn-in included) when ``time`` is not given; in all, split among
the replications, when ``replications`` is not given either."""

DEFAULT_REPLICATIONS = 4
"""Replications when ``replications`` is not given: one replication's blocking error runs small
on this engine (docs/model.md §14), so the default run makes the independent replications its
error bars come from (Student t on 3 degrees of freedom)."""

CHUNK_EVENTS = 1 << 22
"""Events per kernel call: Ctrl-C and progress are seen at least this often."""

MAX_N = 2**31 - 1


def _check(
    n, d, lam, policy, replace, time, burn_in, replications, batches, quantiles
) -> tuple[int, int, float, float | None, float | None, int, int, tuple]:
    n = _m.check_positive_int("n", n, maximum=MAX_N)
    if not isinstance(policy, str) or policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}; got {policy!r}")
    rule = _pol.rule(policy, "events")
    d = _m.check_positive_int("d", d, maximum=n if not replace else 2**31 - 1) if rule.uses_d else 1
    if not isinstance(replace, (bool, np.bool_)):
        raise TypeError(f"replace must be True or False, got {type(replace).__name__}")
    lam = _m.check_load(lam, name="lam", require_stable=False)  # λ >= 1: a finite horizon (no equilibrium)
    if time is not None:
        time = _m.check_positive_float("time", time)
    if burn_in is not None:
        burn_in = float(burn_in)
        if not (math.isfinite(burn_in) and burn_in >= 0):
            raise ValueError(f"burn_in must be a finite number >= 0, got {burn_in!r}")
    replications = _m.check_positive_int("replications", replications, maximum=10**6)
    batches = _m.check_int("batches", batches, minimum=2, maximum=10**6)
    qs = tuple(float(q) for q in quantiles)
    if any(not 0.0 < q < 1.0 for q in qs):
        raise ValueError(f"quantiles must lie in (0, 1), got {quantiles!r}")
    return n, d, lam, time, burn_in, replications, batches, qs


def _run_one(run: GeneralRun, ss, progress, stop, init, rec=None):
    """One replication of ``run`` from the seed ``ss``: per batch, the level integrals per
    class, and the customers' sums and quantiles; ``init``: the start's lengths and phases
    (:func:`.starts.server_state`), None empty; ``rec``: the trajectory after the burn-in, on
    its grid in time (:mod:`..records`).  Returns a dict of per-batch arrays and
    ``interrupted``."""
    n, d, code, replace, law, counts = run.n, run.d, run.code, run.replace, run.law, run.counts
    rate, time, burn_in, batches = run.rate, run.time, run.burn_in, run.batches
    sorted_mode = code in (_ev.JSQ, _ev.JIQ, _ev.JBT)
    buf = int(min(max(rate * time / batches * 1.5 + 1024, 1 << 12), 1 << 24))
    s = state_from_seed_sequence(ss)
    spd = np.asarray(run.sc.speeds, np.float64)
    # the first arrival: drawn from the kernel's own stream (one exponential), then the start's works
    first = _first_arrival(s, rate)
    fl, it, a = _starts.kernel_state(init, counts, spd, law, rate, burn_in, first, s, sorted_mode, buf)
    cfg = np.array([n, d, int(bool(replace) or d == 1), code, law.code, int(sorted_mode)], np.int64)
    par = np.asarray(law.params, np.float64)
    tab = law.ph_table()
    K = len(counts)
    pieces_so, pieces_wa, pieces_rc = [], [], []
    out: dict[str, list] = {
        "area": [],
        "so_sum": [],
        "wa_sum": [],
        "cnt": [],
        "so_sum_k": [],
        "cnt_k": [],
        "h_so": [],
        "h_wa": [],
    }
    interrupted = False
    dt = time / batches

    def run_to(t_stop):  # with records on the way (the kernel stops at a time, drawing nothing)
        while (t := _rec.due(rec, t_stop)) is not None:
            advance(t)
            rec.add(t - rec.t0, a["c"])
        advance(t_stop)

    def advance(t_stop):
        nonlocal a
        while True:
            st = _ev.events_kernel(
                a["x"],
                a["lastdep"],
                a["bound"],
                spd,
                a["ht"],
                a["cal"],
                a["qt"],
                a["qn"],
                a["order"],
                a["pos"],
                a["bstart"],
                a["c"],
                a["area"],
                a["last"],
                a["ctot"],
                s,
                cfg,
                par,
                tab,
                fl,
                it,
                a["so"],
                a["wa"],
                a["rc"],
                t_stop,
                CHUNK_EVENTS,
            )
            if stop.is_set():
                raise KeyboardInterrupt
            if st == _ev.DONE:
                return
            if st == _ev.BAD_RULE:
                raise ValueError(f"policy code {code} is unknown to the event kernel")
            if st == _ev.GROW:
                _ev.grow(a, fl[_ev.F_NOW], it)
            elif st == _ev.FULL:
                drain()
            elif progress is not None:
                progress(fl[_ev.F_NOW])

    def drain():
        m = int(it[_ev.I_NREC])
        pieces_so.append(a["so"][:m].copy())
        pieces_wa.append(a["wa"][:m].copy())
        pieces_rc.append(a["rc"][:m].copy())
        it[_ev.I_NREC] = 0

    try:
        if burn_in > 0:
            run_to(burn_in)
        _rec.start(rec, burn_in, a["c"])
        _ev.close_areas(a["c"], a["area"], a["last"], burn_in)
        a["area"][:] = 0.0
        pieces_so.clear()
        pieces_wa.clear()
        pieces_rc.clear()
        it[_ev.I_NREC] = 0
        for b in range(batches):
            t_end = burn_in + (b + 1) * dt if b < batches - 1 else burn_in + time
            run_to(t_end)
            _ev.close_areas(a["c"], a["area"], a["last"], t_end)
            out["area"].append(a["area"].copy())
            a["area"][:] = 0.0
            drain()
            so = np.concatenate(pieces_so)
            wa = np.concatenate(pieces_wa)
            rc = np.concatenate(pieces_rc)
            pieces_so.clear()
            pieces_wa.clear()
            pieces_rc.clear()
            out["so_sum"].append(so.sum())
            out["wa_sum"].append(wa.sum())
            out["cnt"].append(so.size)
            out["so_sum_k"].append(np.bincount(rc, weights=so, minlength=K))
            out["cnt_k"].append(np.bincount(rc, minlength=K))
            out["h_so"].append(_hist(so))
            out["h_wa"].append(_hist(wa))
            if progress is not None:
                progress(t_end)
    except KeyboardInterrupt:
        interrupted = True
    return out, dt, int(it[_ev.I_EVENTS]), interrupted


def _start(start, n, d, lam, policy, replace, law, sc, counts):
    """The lengths and phases of ``start`` (:mod:`.starts`), None for ``"empty"``; refused (ValueError
    naming ``start``) where the engine has no such start, with the method table's reason."""
    if not isinstance(start, str) or start not in ("empty", "fixed-point"):
        raise ValueError(f"start: the event engine starts 'empty' or at the 'fixed-point', got {start!r}")
    if start == "empty":
        return None
    system = System(n, d, lam, rule=policy, replace=replace, service=law, server_classes=sc)
    why = fixed_point_refusal(system)
    if why is not None:
        raise ValueError(f"start: {why}")
    return _starts.server_state(_starts.start_state(n, d, float(lam), policy, law, sc, counts), counts)


def _first_arrival(s, rate):
    return -math.log(1.0 - next_double(s)) / rate


def simulate_general(
    n: int,
    d: int,
    lam: float | str,
    *,
    policy: str = "jsq-d",
    replace: bool = True,
    service: str | ServiceLaw = "exp",
    server_classes: str | ServerClasses | None = None,
    time: float | None = None,
    burn_in: float | None = None,
    seed: int | np.random.SeedSequence = 0,
    replications: int | None = None,
    batches: int = 256,
    quantiles: Sequence[float] = (0.5, 0.9, 0.99),
    progress: Callable[[float], object] | None = None,
    workers: int | None = None,
    control_variates: bool = True,
    start: str = "empty",
    record_every: float | None = None,
    record_levels: int | None = None,
) -> GeneralResult:
    """Simulate ``n`` FIFO servers under a dispatch rule with any service law and server classes.

    Parameters
    ----------
    n, d, lam : int, int, float
        Servers, choices (``jsq-d`` and ``jbt``; ignored otherwise), load per unit of capacity
        (``λ > 0``): arrivals at rate ``nλ·s̄``.  At ``λ >= 1`` there is no equilibrium: the run
        measures its finite horizon from the empty start, without control variates.
    policy : {"jsq-d", "random", "jsq", "jiq", "jbt"}
        Dispatch rule (:mod:`supermarket.engines.events`); ties uniform among the sampled shortest.
    replace : bool
        ``jsq-d`` samples with replacement (paper 000) or without (paper 002).
    service : str or ServiceLaw
        See :func:`supermarket.system.service.parse_service` (mean 1).
    server_classes : str or ServerClasses, optional
        ``FRACTION:SPEED,…`` (:func:`supermarket.system.service.parse_server_classes`); default one
        class of speed 1.  Every ``f_k n`` must be whole.
    time, burn_in : float, optional
        Measured time per replication and the burn-in before it; default ``time`` gives about
        :data:`DEFAULT_EVENTS` events, ``burn_in`` a tenth of ``time``.
    seed : int or SeedSequence
        Replication ``r`` uses child ``r`` (:func:`supermarket.model.spawn_seeds`).
    replications : int, optional
        Independent runs; the error bars are their spread (one run shows none).  Default
        :data:`DEFAULT_REPLICATIONS`, sharing the default budget of :data:`DEFAULT_EVENTS`
        events when ``time`` is not given either.
    batches : int
        Time batches per run (at least 64 for a blocking plateau with the 32 blocks it needs).
    quantiles : sequence of float
        Quantiles of the sojourn and waiting times.
    progress : callable, optional
        Called with the fraction done.
    workers : int, optional
        Threads running replications at once (the kernel releases the GIL); default the
        cores, at most ``replications``.  The numbers do not depend on it.
    control_variates : bool, default True
        Adjust the time averages (``E[u_ℓ]``, queue lengths, per class too) with the capacity
        balance ``Σ_k f_k s_k E[u_{k,1}] = λ s̄`` (work conservation: it holds for every law of
        mean 1 and every rule; docs/model.md §14) where that reduces their error.
    start : {"empty", "fixed-point"}
        All queues empty, or the count engine's start of the same system (the mean field's
        fixed point, per class, rounded; ``jsq``, ``jiq`` with one class: ``u_1 = λ``), each
        customer in service with the remaining work of its phase and those waiting with full
        works (:mod:`.starts`); a law with no phase-type form has none
        (:func:`supermarket.system.event_starts.fixed_point_refusal`).
    record_every, record_levels : optional
        Record ``u_1..u_m`` (``m = record_levels``; per class too with classes) of replication
        0 every ``record_every`` units of **time** after the burn-in, this engine's unit of
        horizon (:mod:`supermarket.simulation.records`; the numbers are those of a run
        without): the result's ``trajectory``.

    Returns
    -------
    GeneralResult

    Raises
    ------
    ValueError, TypeError
        Bad parameters, before any work.

    Examples
    --------
    >>> r = simulate_general(4, 2, 0.5, service="deterministic", time=2000.0, seed=1)
    >>> bool(0.4 < r.u_mean[0] < 0.6), r.service.spec
    (True, 'deterministic')
    """
    share = replications is None  # the default replications share the default budget
    n, d, lam, time, burn_in, replications, batches, qs = _check(
        n, d, lam, policy, replace, time, burn_in, DEFAULT_REPLICATIONS if share else replications, batches, quantiles
    )
    if not isinstance(control_variates, (bool, np.bool_)):
        raise TypeError(f"control_variates must be True or False, got {type(control_variates).__name__}")
    law = parse_service(service)
    sc = parse_server_classes(server_classes)
    counts = sc.counts(n)
    init = _start(start, n, d, lam, policy, replace, law, sc if server_classes is not None else None, counts)
    rate = n * float(lam) * sc.mean_speed
    if time is None:
        time = DEFAULT_EVENTS / (1.1 * 2.0 * rate) / (replications if share else 1)
    if burn_in is None:
        burn_in = time / 10.0
    code = _pol.policy_code(policy, "events")
    every, levels = _rec.check_record(record_every, record_levels, unit="time", span=time, d=d, lam=float(lam))
    rec = None if every is None else _rec.Recorder(every, levels, counts)
    if workers is None:
        workers = max(1, min(os.cpu_count() or 1, replications))
    workers = _m.check_positive_int("workers", workers, maximum=1024)
    run = GeneralRun(
        n, d, lam, policy, replace, law, sc, counts, rate, time, burn_in, replications, batches, qs, code,
        bool(control_variates),
    )  # fmt: skip
    results, wall = _replicate(run, init, _m.spawn_seeds(seed, replications), workers, progress, rec)
    runs = [(out, dt) for out, dt, _, _ in results if out["area"]]
    events = sum(ev for _, _, ev, _ in results)
    interrupted = any(intr for _, _, _, intr in results)
    if interrupted and not runs:
        # stopped during the burn-in or the first batch: nothing was measured, so there is
        # no result to show (not a result of nan)
        raise KeyboardInterrupt("interrupted before any batch was measured: nothing to report")
    return _rec.with_trajectory(_summarize(run, runs, events, wall, interrupted), rec)


def _replicate(run: GeneralRun, init, seeds, workers: int, progress, rec=None) -> tuple[list, float]:
    """The replications of ``run`` (replication ``r`` from ``seeds[r]``), on ``workers`` threads
    (the kernel releases the GIL): their ``(out, dt, events, interrupted)`` and the wall time;
    ``rec``: the records of replication 0 (:mod:`..records`)."""
    replications = run.replications
    total = replications * (run.burn_in + run.time)
    done = [0.0] * replications
    lock = threading.Lock()
    stop = threading.Event()

    def one(r):
        def tick(t):  # the clock of replication r reached t
            if progress is not None:
                with lock:
                    done[r] = t
                    progress(min(1.0, sum(done) / total))

        return _run_one(run, seeds[r], tick, stop, init, rec if r == 0 else None)

    # compile (or load from numba's cache) the kernels before the clock starts: a run of no
    # time with its own seed (the replications' streams are untouched)
    warm = dataclasses.replace(run, time=1e-9, burn_in=0.0, batches=1)
    _run_one(warm, np.random.SeedSequence(0), None, stop, None)
    t0 = _time.perf_counter()
    results = []
    if workers == 1 or replications == 1:
        for r in range(replications):
            results.append(one(r))
            if results[-1][3]:
                break
    else:
        pool = ThreadPoolExecutor(max_workers=workers)
        futures = [pool.submit(one, r) for r in range(replications)]
        try:
            results = [f.result() for f in futures]
        except KeyboardInterrupt:
            stop.set()
            results = [f.result() for f in futures]
        finally:
            pool.shutdown(wait=True)
    return results, _time.perf_counter() - t0
