"""Runs of the per-queue event engine, in chunks, and their error bars (docs/model.md §14)."""

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
from ... import stats as _st
from ...engines import events as _ev
from ...engines.rng import next_double, state_from_seed_sequence
from ...stats import ErrorEstimate
from ...system import policies as _pol
from ...system.service import ServerClasses, ServiceLaw, parse_server_classes, parse_service
from .result import ClassResult, GeneralResult

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

HIST_LO, HIST_HI, HIST_BINS = 1e-6, 1e9, 8192
"""Sojourn and waiting times are kept per batch as counts in ``HIST_BINS`` logarithmic bins
over ``[HIST_LO, HIST_HI]`` (a bin is 0.42 % wide; times at or below ``HIST_LO``, such as
zero waits, in bin 0, those above ``HIST_HI`` in the last): quantiles interpolate within a bin."""

_LOG_LO = math.log(HIST_LO)
_SCALE = HIST_BINS / (math.log(HIST_HI) - _LOG_LO)
_EDGES = np.exp(_LOG_LO + np.arange(HIST_BINS + 1) / _SCALE)  # edges of bins 1..HIST_BINS


def _hist(v: np.ndarray) -> np.ndarray:
    idx = np.zeros(v.size, np.int64)
    pos = v > HIST_LO
    idx[pos] = np.minimum((np.log(v[pos]) - _LOG_LO) * _SCALE, HIST_BINS).astype(np.int64) + 1
    return np.bincount(idx, minlength=HIST_BINS + 2).astype(np.int32)


def _hist_quantile(h: np.ndarray, p: float) -> float:
    """The ``p``-quantile of the histogram ``h`` (interpolated log-linearly within a bin)."""
    cum = np.cumsum(h, dtype=np.float64)
    N = cum[-1]
    if N <= 0:
        return math.nan
    target = min(max(p, 0.0), 1.0) * N
    i = int(np.searchsorted(cum, target, side="left"))
    if i == 0:
        return 0.0
    if i > HIST_BINS:
        return math.inf
    below = cum[i - 1]
    frac = (target - below) / h[i] if h[i] > 0 else 0.0
    return float(_EDGES[i - 1] * math.exp(frac / _SCALE))


def _hist_cdf(h: np.ndarray, x: float) -> float:
    """Counts of ``h`` at or below ``x`` (the bin of ``x`` split log-linearly)."""
    if x <= HIST_LO:
        return float(h[0])
    if not math.isfinite(x):
        return float(h.sum())
    pos = (math.log(x) - _LOG_LO) * _SCALE
    i = min(int(pos), HIST_BINS - 1)
    return float(h[: i + 1].sum() + (pos - i) * h[i + 1])


def _check(n, d, lam, policy, replace, time, burn_in, replications, batches, quantiles):
    n = _m.check_positive_int("n", n, maximum=MAX_N)
    if not isinstance(policy, str) or policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}; got {policy!r}")
    rule = _pol.rule(policy, "events")
    d = _m.check_positive_int("d", d, maximum=n if not replace else 2**31 - 1) if rule.uses_d else 1
    if not isinstance(replace, (bool, np.bool_)):
        raise TypeError(f"replace must be True or False, got {type(replace).__name__}")
    lam = _m.check_load(lam, name="lam")
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


def _run_one(n, d, lam, code, replace, law, counts, speeds, rate, time, burn_in, batches, qs, ss, progress, stop):
    """One replication: per batch, the level integrals per class, and the customers' sums and
    quantiles.  Returns a dict of per-batch arrays and ``interrupted``."""
    sorted_mode = code in (_ev.JSQ, _ev.JIQ, _ev.JBT)
    buf = int(min(max(rate * time / batches * 1.5 + 1024, 1 << 12), 1 << 24))
    nb, inv_width = _ev.window(rate, min(speeds))
    a = _ev.new_arrays(counts, buffer=buf, sorted_mode=sorted_mode, buckets=nb)
    s = state_from_seed_sequence(ss)
    cfg = np.array([n, d, int(bool(replace) or d == 1), code, law.code, int(sorted_mode)], np.int64)
    par = np.asarray(law.params, np.float64)
    tab = law.ph_table()
    spd = np.asarray(speeds, np.float64)
    # the first arrival: drawn from the kernel's own stream (one exponential)
    fl, it = _ev.new_counters(rate, burn_in, _first_arrival(s, rate), inv_width)
    K = len(counts)
    pieces_so, pieces_wa, pieces_rc = [], [], []
    out = {"area": [], "so_sum": [], "wa_sum": [], "cnt": [], "so_sum_k": [], "cnt_k": [], "h_so": [], "h_wa": []}
    interrupted = False
    dt = time / batches

    def run_to(t_stop):
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


def _first_arrival(s, rate):
    return -math.log(1.0 - next_double(s)) / rate


RELAX_FACTOR = 1.0
"""Under random routing, blocks of the error analysis span at least this many relaxation
times of the slowest server's queue (:func:`_relaxation`)."""


def _relaxation(lam, law, sc, policy) -> float:
    """Under ``random`` routing each server is an M/G/1 queue at ``ρ = λ s̄/s``: a relaxation
    time scale of the slowest one, ``1/(s(1 − √ρ)²)`` (the M/M/1 value) times ``(1 + SCV)/2``
    (the heavy-traffic variance factor of M/G/1; SCV at most 100) [derived, a heuristic].  0
    (no floor) for the other rules, which balance the queues and relax faster, and for an
    unstable slow class (ρ >= 1)."""
    if policy != "random":
        return 0.0
    s_min = min(sc.speeds)
    rho = lam * sc.mean_speed / s_min
    if rho >= 1.0:
        return 0.0
    scv = min(law.scv, 100.0) if math.isfinite(law.scv) else 100.0
    return max(1.0, (1.0 + scv) / 2.0) / (s_min * (1.0 - math.sqrt(rho)) ** 2)


ONE_REPLICATION_NOTE = "one replication: its batch-means error runs small on this engine; use replications >= 2"


def _ratio(parts, min_block=1) -> ErrorEstimate:
    """``Σa/ΣT`` from batches ``(a_b, T_b)`` per replication, with its error: with two or more
    replications the spread between them (Student t on ``R − 1`` degrees of freedom); with one,
    the blocking error of the delta-method batch values ``ā + (a_b − āT_b)/T̄``, marked not
    reliable (docs/model.md §14: it runs 20–35 % small on this engine, so no ± is shown)."""
    parts = [(np.asarray(a, float), np.asarray(T, float)) for a, T in parts]
    parts = [(a, T) for a, T in parts if T.size > 0 and T.sum() > 0]
    if not parts:
        return ErrorEstimate(math.nan, math.nan, math.nan, math.nan, math.nan, False, "none", 0, 1, "nothing measured")
    ests = []
    for a, T in parts:
        abar = a.sum() / T.sum()
        if T.size < 2:
            ests.append(
                ErrorEstimate(float(abar), math.nan, math.nan, math.nan, math.nan, False, "blocking", 1, 1, "one batch")
            )
            continue
        ests.append(_st.blocking(abar + (a - abar * T) / T.mean(), min_block_size=min(int(min_block), T.size)))
    if len(parts) == 1:
        e = ests[0]
        if e.reliable:  # calibrated small (benchmarks/events_calibration.py): kept, not trusted
            return dataclasses.replace(e, reliable=False, note=ONE_REPLICATION_NOTE)
        if not e.note:
            e = ErrorEstimate(
                e.mean,
                e.stderr,
                e.dof,
                e.n_eff,
                e.tau_int,
                False,
                e.method,
                e.blocks,
                e.block_size,
                "no blocking plateau: batches shorter than the correlation time; run longer",
            )
        return e
    w = np.array([T.sum() for _, T in parts])
    means = np.array([a.sum() / T.sum() for a, T in parts])
    mean = float(np.dot(w, means) / w.sum())
    # independent replications: their spread (pooled blocking errors run small on this engine)
    e = _st.replication_error(means, weights=w)
    return ErrorEstimate(mean, e.stderr, e.dof, e.n_eff, e.tau_int, e.reliable, e.method, e.blocks, 1, e.note)


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
) -> GeneralResult:
    """Simulate ``n`` FIFO servers under a dispatch rule with any service law and server classes.

    Parameters
    ----------
    n, d, lam : int, int, float
        Servers, choices (``jsq-d`` only; ignored otherwise), load per unit of capacity
        (``0 < λ < 1``): arrivals at rate ``nλ·s̄``.
    policy : {"jsq-d", "random", "jsq", "jiq"}
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
    rate = n * float(lam) * sc.mean_speed
    if time is None:
        time = DEFAULT_EVENTS / (1.1 * 2.0 * rate) / (replications if share else 1)
    if burn_in is None:
        burn_in = time / 10.0
    code = _pol.policy_code(policy, "events")
    if workers is None:
        workers = max(1, min(os.cpu_count() or 1, replications))
    workers = _m.check_positive_int("workers", workers, maximum=1024)
    seeds = _m.spawn_seeds(seed, replications)
    total = replications * (burn_in + time)
    done = [0.0] * replications
    lock = threading.Lock()
    stop = threading.Event()

    def one(r):
        def tick(t):  # the clock of replication r reached t
            if progress is not None:
                with lock:
                    done[r] = t
                    progress(min(1.0, sum(done) / total))

        return _run_one(
            n, d, lam, code, replace, law, counts, sc.speeds, rate, time, burn_in, batches, qs, seeds[r], tick, stop
        )

    # compile (or load from numba's cache) the kernels before the clock starts: a run of no
    # time with its own seed (the replications' streams are untouched)
    _run_one(
        n, d, lam, code, replace, law, counts, sc.speeds, rate, 1e-9, 0.0, 1, qs, np.random.SeedSequence(0), None, stop
    )
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
    wall = _time.perf_counter() - t0
    runs = [(out, dt) for out, dt, _, _ in results if out["area"]]
    events = sum(ev for _, _, ev, _ in results)
    interrupted = any(intr for _, _, _, intr in results)
    if interrupted and not runs:
        # stopped during the burn-in or the first batch: nothing was measured, so there is
        # no result to show (not a result of nan)
        raise KeyboardInterrupt("interrupted before any batch was measured: nothing to report")
    return _summarize(
        n,
        d,
        lam,
        policy,
        replace,
        law,
        sc,
        counts,
        rate,
        time,
        burn_in,
        replications,
        batches,
        qs,
        runs,
        events,
        wall,
        interrupted,
        bool(control_variates),
    )


def _controlled(parts, xs, min_block, plain):
    """``plain`` (the estimate of ``Σa/ΣT`` from ``parts``) adjusted by the capacity control:
    per replication the batch values ``y_b = a_b/T_b`` less ``β x_b``, ``x_b`` the batch's busy
    capacity less its known mean (``xs``, one series per replication), ``β`` their regression
    coefficient over all batches (centred within each replication).  Returns the adjusted
    estimate (the replications' spread, or one run's untrusted blocking error, as
    :func:`_ratio`) and the measured variance reduction, or ``(plain, nan)`` when there is
    nothing to gain (docs/model.md §14)."""
    ys = [np.asarray(a, float) / np.asarray(T, float) for a, T in parts]
    if not ys or any(y.size < 2 or y.size != x.size for y, x in zip(ys, xs)):
        return plain, math.nan
    sxy = sum(float(np.dot(y - y.mean(), x - x.mean())) for y, x in zip(ys, xs))
    sxx = sum(float(np.dot(x - x.mean(), x - x.mean())) for x in xs)
    if not sxx > 0:
        return plain, math.nan
    beta = sxy / sxx
    adj = [y - beta * x for y, x in zip(ys, xs)]
    # the gain, as long-run variances of the two series (blocking within each replication)
    vp = sum(_st.blocking(y, min_block_size=min(int(min_block), y.size)).stderr ** 2 for y in ys)
    va = sum(_st.blocking(y, min_block_size=min(int(min_block), y.size)).stderr ** 2 for y in adj)
    if not (math.isfinite(vp) and math.isfinite(va) and va > 0 and vp > va):
        return plain, math.nan
    est = _ratio([(y, np.ones(y.size)) for y in adj], min_block)
    return dataclasses.replace(est, method=est.method + "+cv"), vp / va


def _summarize(
    n,
    d,
    lam,
    policy,
    replace,
    law,
    sc,
    counts,
    rate,
    time,
    burn_in,
    replications,
    batches,
    qs,
    runs,
    events,
    wall,
    interrupted,
    control_variates=True,
):
    K = counts.size
    top = 1
    for out, _ in runs:
        for a in out["area"]:
            nz = np.nonzero(a[:, 1:].sum(axis=0))[0]
            if nz.size:
                top = max(top, int(nz[-1]) + 1)

    def areas(out):  # batches x K x levels 1..top
        B = len(out["area"])
        A = np.zeros((B, K, top))
        for b, a in enumerate(out["area"]):
            m = min(a.shape[1] - 1, top)
            A[b, :, :m] = a[:, 1 : 1 + m]
        return A

    As = [(areas(out), dt, len(out["area"])) for out, dt in runs]
    # blocks span at least RELAX_FACTOR relaxation times (in batches of the run)
    dt0 = runs[0][1] if runs else 1.0
    mb = max(1, math.ceil(RELAX_FACTOR * _relaxation(lam, law, sc, policy) / dt0))

    def R(parts):
        return _ratio(parts, mb)

    # the capacity control per batch: busy capacity Σ_k s_k c_{k,1} / (n s̄), less λ (its mean in
    # equilibrium only: random routing with an overloaded class has none, and the control pulled
    # the stable classes' queue lengths to wrong values, so it is not used there)
    unstable = [f"{f:g}:{v:g}" for f, v in zip(sc.fractions, sc.speeds) if lam * sc.mean_speed >= v]
    cv_dropped = bool(control_variates) and policy == "random" and bool(unstable)
    control_variates = bool(control_variates) and not cv_dropped
    speeds = np.asarray(sc.speeds, float)
    xs = [A[:, :, 0] @ speeds / (dt * n * sc.mean_speed) - float(lam) for A, dt, B in As]
    gains: dict = {}

    def C(parts, key):
        plain = R(parts)
        if not control_variates:
            return plain
        est, g = _controlled(parts, xs, mb, plain)
        gains[key] = g
        return est

    def level_est(weight_k, sel, key):
        """Estimates of u_ℓ over the classes ``sel`` (ℓ = 1..top) and of Σ_ℓ u_ℓ."""
        ests = []
        for ell in range(top):
            parts = [(A[:, sel, ell].sum(axis=1), np.full(B, dt * weight_k)) for A, dt, B in As]
            ests.append(C(parts, (key, ell)))
        mq = C([(A[:, sel, :].sum(axis=(1, 2)), np.full(B, dt * weight_k)) for A, dt, B in As], (key, "q"))
        return ests, mq

    u_est, mq = level_est(n, list(range(K)), "all")
    so = R([(np.array(out["so_sum"]), np.array(out["cnt"], float)) for out, _ in runs])
    wa = R([(np.array(out["wa_sum"]), np.array(out["cnt"], float)) for out, _ in runs])

    def qest(key):
        """Quantiles of the pooled histogram, with Woodruff's error: the batch-means error
        ``σ_F`` of the empirical cdf at the quantile, mapped through the quantile function,
        ``(Q(p + 2σ_F) − Q(p − 2σ_F))/4``."""
        res = {}
        if not runs:
            return {q: R([]) for q in qs}
        H = [np.array(out[key], dtype=np.int64) for out, _ in runs]  # batches x bins
        tot = sum(h.sum(axis=0) for h in H)
        for q in qs:
            x = _hist_quantile(tot, q)
            F = R([(np.array([_hist_cdf(hb, x) for hb in h]), h.sum(axis=1).astype(float)) for h in H])
            if math.isfinite(F.stderr):
                se = (_hist_quantile(tot, q + 2 * F.stderr) - _hist_quantile(tot, q - 2 * F.stderr)) / 4.0
            else:
                se = math.nan
            res[q] = ErrorEstimate(
                x,
                se,
                F.dof,
                F.n_eff,
                F.tau_int,
                F.reliable and math.isfinite(se),
                "woodruff+" + F.method,
                F.blocks,
                F.block_size,
                F.note,
            )
        return res

    classes = []
    for k in range(K):
        ue, mqk = level_est(int(counts[k]), [k], k)
        sok = R(
            [
                (np.array([v[k] for v in out["so_sum_k"]]), np.array([v[k] for v in out["cnt_k"]], float))
                for out, _ in runs
            ]
        )
        classes.append(
            ClassResult(
                sc.fractions[k],
                sc.speeds[k],
                int(counts[k]),
                np.array([e.mean for e in ue]),
                np.array([e.stderr for e in ue]),
                mqk,
                sok,
            )
        )
    notes = []
    if law.note:
        notes.append(law.note)
    if policy == "random" and unstable:
        notes.append(
            f"under random routing the servers of class {', '.join(unstable)} get more work than they "
            "can serve (λ·s̄ >= speed): their queues grow without bound and their averages do not settle"
        )
    if cv_dropped:
        notes.append(
            "no control variate: capacity balance Σ f s E[u_1] = λ s̄ holds only in equilibrium, "
            "and an overloaded class never reaches one"
        )
    if interrupted:
        notes.append("interrupted (Ctrl-C): the result holds the batches completed")
    return GeneralResult(
        n=n,
        d=d,
        lam=lam,
        policy=policy,
        replace=bool(replace),
        service=law,
        server_classes=sc,
        arrival_rate=rate,
        time=time,
        burn_in=burn_in,
        replications=replications,
        batches=batches,
        events=events,
        wall_s=wall,
        u_mean=np.array([e.mean for e in u_est]),
        u_stderr=np.array([e.stderr for e in u_est]),
        mean_queue_length=mq,
        sojourn=so,
        waiting=wa,
        sojourn_quantiles=qest("h_so"),
        waiting_quantiles=qest("h_wa"),
        classes=tuple(classes),
        customers=int(sum(sum(out["cnt"]) for out, _ in runs)),
        interrupted=interrupted,
        notes=tuple(notes),
        control_variates=bool(control_variates),
        variance_reduction=(
            {
                "u_mean": [gains.get(("all", ell), math.nan) for ell in range(top)],
                "mean_queue_length": gains.get(("all", "q"), math.nan),
            }
            if control_variates
            else None
        ),
    )
