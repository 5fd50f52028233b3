"""The driver, :func:`simulate`: validates every argument before any work, builds one
``_Rep`` (:mod:`.chain`) per replication with child ``r`` of the seed, runs them on threads
or as tasks of a Dask cluster (``client=``), extends them in doubling stretches until a
precision target is met (``precision=``), and hands their batch integrals to
:mod:`.estimate` for the result.
"""

from __future__ import annotations

import math
import os
import threading
import time as _time
import warnings
from concurrent.futures import ThreadPoolExecutor, wait, FIRST_EXCEPTION

import numpy as np

from ..model import (
    Params, check_choice, check_fraction, check_int, check_positive_float, check_positive_int, spawn_seeds,
)
from ..states import counts_from_lengths, parse_start, start_counts
from .. import theory as _th
from .chain import _Rep
from .estimate import _summarize, relaxation_time
from .results import SimulationResult

__all__ = ["simulate", "ENGINES", "TIME_MODES", "BATCHES", "DEFAULT_STEPS", "MAX_RECORDS", "PRECISION_LEVEL_MIN",
           "PRECISION_FIRST_STEPS"]

ENGINES = ("profile", "queues", "buckets")
TIME_MODES = ("discrete", "continuous")
BATCHES = 1024  # batch means per replication (blocking needs many short ones, docs/model.md §9)
MAX_RECORDS = 10**7  # trajectory records per replication
PRECISION_LEVEL_MIN = 0.1  # precision= covers the levels with E[u_i] at least this (and the mean queue length)
DEFAULT_MAX_STEPS = 2 * 10**9  # cap on measured steps per replication with precision=
DEFAULT_STEPS = 10**8  # the default job (n = 10^4, d = 20, λ = 0.99) knows every error bar: 5e7 left E[u_3] "too short"
PRECISION_FIRST_STEPS = 10**7  # first stretch of a precision= run without steps/time: it doubles from there
PROGRESS_AFTER_S = 2.0
_PER_QUEUE_MAX_N = 2**31 - 1
PERFECT_CHILD = 0x7065  # child key of a replication's seed for its perfect-sampling start


# =========================================================================== validation
def _available_memory() -> int | None:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return None


def _check_memory(engine: str, n: int, d: int, replace: bool, replications: int, workers: int):
    if engine == "profile":
        return
    # measured peaks (tracemalloc, tests/test_engines.py): queues 4 bytes per server (+ the bitset
    # without replacement); buckets 8 (the final lengths are built beside the permutation)
    per = (8 * n if engine == "buckets" else
           4 * n + (0 if replace else 8 * ((n + 63) // 64) + (8 * d if d * 64 < n else 0)))
    need = per * min(replications, workers)
    if n > _PER_QUEUE_MAX_N:
        raise ValueError(f"engine={engine!r} keeps one entry per server and supports n <= {_PER_QUEUE_MAX_N}; "
                         f"n={n} would need {need / 2**30:.3g} GiB; use engine='profile' (exact, memory O(levels))")
    avail = _available_memory()
    if avail is not None and need > 0.8 * avail:
        raise ValueError(f"engine={engine!r} with n={n} needs {need / 2**30:.3g} GiB of memory "
                         f"({per / n:.3g} bytes per server), more than is available ({avail / 2**30:.3g} GiB); "
                         "use engine='profile' (exact, memory O(levels))")


def _default_record_levels(d: int, lam: float) -> int:
    if lam >= 1:
        return 16
    pi = _th.fixed_point(d, lam)
    levels = int(np.count_nonzero(pi > 1e-12))
    return int(min(max(levels + 2, 4), 32))


# =========================================================================== simulate
def simulate(n, d, lam, *, steps=None, time=None, burn_in=None, engine="profile", replace=True, start="empty",
             seed=0, replications=1, workers=None, time_mode="discrete", eps=0.1, record_every=None,
             record_levels=None, batches=None, precision=None, max_steps=None, progress=None, client=None,
             control_variates=True, _force_window=False) -> SimulationResult:
    """Simulate the (n, d, λ)-supermarket process and measure its time averages with honest errors.

    Parameters
    ----------
    n, d, lam : int, int, float or str
        Servers, choices, load λ (λ >= 1 runs a finite horizon with a warning: no
        equilibrium, no good set, no self-checks).
    steps, time : int or float, optional
        Horizon after burn-in: ``steps`` events, or ``time`` continuous-time units (in
        discrete mode converted to ``round(time·n(1+λ))`` steps); not both.  Default
        ``steps = DEFAULT_STEPS`` = 10^8.  With ``precision``, the first stretch of the run
        (default ``PRECISION_FIRST_STEPS`` = 10^7).
    burn_in : int or float, optional
        In the unit of the horizon; default a tenth of it.  MSER may extend it (see Notes).
    engine : {"profile", "queues", "buckets"}
        ``profile``: counts chain, any n; ``queues``: per-queue reference; ``buckets``: per
        queue, O(1) per event.  All exact in law.
    replace : bool
        Sample the d queues with replacement (paper 000) or without (paper 002).
    start : str or array
        See :mod:`supermarket.states` (``"empty"``, ``"fixed-point"``, ``"customers:G"``,
        ``"long:L"``, a queue-lengths vector, a profile array), or ``"perfect"``: each
        replication starts from its own exact stationary sample (:mod:`supermarket.perfect`,
        docs/model.md §12), so the default burn-in is 0 and no start-up bias exists.
    seed : int or numpy.random.SeedSequence
        Replication ``r`` uses child ``r`` of ``SeedSequence(seed)``.
    replications, workers : int
        Independent runs, on ``workers`` threads (numbers do not depend on ``workers``;
        default: the cores, at most ``replications``).
    time_mode : {"discrete", "continuous"}
        The chain of paper 000, or exact exponential event times (docs/model.md §1).
    eps : float
        ε of the good set ``N^ε`` (docs/model.md §5), ``k = k_{λ,d}``.
    record_every, record_levels : optional
        Record ``u_1..u_m`` (``m = record_levels``), the maximum and the total on a grid
        (steps, or time units in continuous mode) after burn-in; at most ``MAX_RECORDS``.
    batches : int, optional
        Batch means per replication (default ``BATCHES = 1024``, fewer for runs shorter
        than that many steps); a power of two keeps blocking exact.  Must not exceed the
        number of steps.
    precision : float, optional
        Target relative half-width of the 95 % intervals of the mean queue length and of
        every ``E[u_i] >= PRECISION_LEVEL_MIN``: the run is extended (doubling) until met or
        until ``max_steps``.
    max_steps : int, optional
        Cap on the measured events per replication with ``precision`` (default
        ``DEFAULT_MAX_STEPS`` = 2·10^9); a warning says when it was hit.
    progress : bool, optional
        Progress bar on stderr (default: only on a terminal, after 2 s; none with ``client``).
    client : dask.distributed.Client, optional
        Run each replication, whole, as one task on this Dask cluster
        (:func:`supermarket.parallel.connect`); the numbers are identical to a local run
        (replication ``r`` uses child ``r`` of the seed, and the results are combined the
        same way).  Excludes ``workers`` and ``precision`` (its stretches are planned from
        all replications together and keep every chain alive between them).
    control_variates : bool, default True
        Estimate every time average with the identities ``Z_i = u_i − λ P_{i−1}`` (mean 0
        in equilibrium) as control variates (docs/model.md §9.1): a split-sample regression on
        the batch means, per quantity, used only where it reduces the error.  False gives
        the plain time averages (the same numbers as before control variates existed); the
        plain estimates are in the result's ``*_plain`` fields either way.

    Returns
    -------
    SimulationResult
        Means, standard errors, per-quantity ``reliable`` flags and effective sample sizes,
        the self-checks, the start-up (MSER) diagnosis; ``partial=True`` after Ctrl-C.

    Raises
    ------
    ValueError, TypeError
        Bad parameters, named with their valid range, before any work; ``client`` with
        ``workers`` or ``precision``; ``client`` not a Dask client; ``control_variates`` not
        a bool.
    KeyboardInterrupt
        Ctrl-C during burn-in (nothing measured yet), or on a cluster before any
        replication finished (otherwise Ctrl-C returns a partial result).

    Notes
    -----
    Error bars (docs/model.md §9): blocking analysis of the ``batches`` batch means of each
    replication (:func:`supermarket.stats.blocking`); with several replications the
    blocking errors are pooled when every one is reliable, otherwise the spread between
    replications is used (Student t).  MSER-5 on the batch means of the queue length drops
    a start-up transient (extending the burn-in); if it would drop more than half the run,
    the start was not forgotten and nothing is flagged reliable.  Exact identities
    ``E[u_1] = λ`` and ``E[u_i] = λ E[P_{i−1}]`` are checked on the plain estimators; a miss
    beyond the Student-t quantile (on the error's own degrees of freedom) with the tail of 4
    normal standard errors is reported as error bars (or burn-in) too small.  Control
    variates (on by default) replace each batch integral ``a_b`` by ``a_b − β·Z_b``, with
    ``β`` fitted on the other half of the batches, and the adjusted series goes through the
    same error analysis with ``m`` fewer degrees of freedom (``m`` controls); a standard
    error the run cannot trust is NaN, with the reason in ``u_note`` or ``notes``.

    Examples
    --------
    >>> r = simulate(100, 2, 0.9, steps=200_000, seed=1)
    >>> bool(r.u_reliable[0]), bool(abs(r.u_mean[0] - 0.9) < 5 * r.u_stderr[0])
    (True, True)
    >>> r.sojourn.mean > r.waiting.mean > 0
    True
    >>> a = simulate(50, 2, 0.5, steps=20_000, seed=3, replications=2, workers=1, start="fixed-point")
    >>> b = simulate(50, 2, 0.5, steps=20_000, seed=3, replications=2, workers=2, start="fixed-point")
    >>> bool((a.u_mean == b.u_mean).all())  # results do not depend on workers
    True
    """
    if not isinstance(control_variates, (bool, np.bool_)):
        raise TypeError(f"control_variates must be True or False; got {control_variates!r}")
    engine = check_choice("engine", engine, ENGINES)
    time_mode = check_choice("time_mode", time_mode, TIME_MODES)
    lam_in = lam
    params = Params(n, d, lam, replace=replace, stable=False)
    n, d, lamf = params.n, params.d, params.lam
    stable = params.lam_exact < 1
    replications = check_positive_int("replications", replications)
    if client is not None:
        if not callable(getattr(client, "submit", None)):
            raise TypeError(f"client must be a dask.distributed.Client (or None); got {type(client).__name__}")
        if workers is not None:
            raise ValueError("workers and client exclude each other (the cluster has its own workers)")
        if precision is not None:
            raise ValueError("precision= cannot run on a client: its stretches are planned from all "
                             "replications together and keep every chain alive between them; run it locally "
                             "(client=None, --scheduler not given)")
    workers = (min(replications, os.cpu_count() or 1) if workers is None
               else check_positive_int("workers", workers))
    eps = check_fraction("eps", eps, low=0.0, high=0.1)
    continuous = time_mode == "continuous"
    rate = n * (1.0 + lamf)

    # horizon: ("time", T) measured in the chain's clock, or ("events", S) in continuous mode
    if steps is not None and time is not None:
        raise ValueError("give either steps or time, not both")
    if time is not None:
        T = check_positive_float("time", time)
        if continuous:
            horizon = ("time", T)
        else:
            S = int(round(T * rate))
            if S < 1:
                raise ValueError(f"time={time} is less than one step (a step is 1/(n(1+λ)) = {1 / rate:.3g})")
            horizon = ("time", float(S))
    else:
        S = ((PRECISION_FIRST_STEPS if precision is not None else DEFAULT_STEPS) if steps is None
             else _check_steps(steps))
        horizon = ("events", S) if continuous else ("time", float(S))
    # events in the horizon (expected, for `time` in continuous mode)
    events_h = horizon[1] * rate if (continuous and horizon[0] == "time") else horizon[1]
    if batches is None:
        B = BATCHES
        while B > 1 and B > events_h:
            B //= 2
    else:
        B = check_positive_int("batches", batches, maximum=2**20)
        if not (continuous and horizon[0] == "time") and B > events_h:
            raise ValueError(f"batches must be <= the number of measured steps ({int(events_h)}); got {B}")
    if precision is not None:
        precision = check_positive_float("precision", precision)
        if not precision < 1:
            raise ValueError(f"precision must lie in (0, 1) (a relative half-width); got {precision!r}")
        if B < 4:
            raise ValueError("precision needs at least 4 batches (give more steps)")
    if max_steps is not None:
        max_steps = _check_steps(max_steps) if not isinstance(max_steps, float) else _check_steps(max_steps)
        if precision is None:
            raise ValueError("max_steps caps a run with precision=; give precision too")
        if max_steps < events_h:
            raise ValueError(f"max_steps must be >= the first stretch of the run ({int(events_h)} steps); "
                             f"got {max_steps}")
    elif precision is not None:
        max_steps = max(DEFAULT_MAX_STEPS, int(events_h))
    # burn-in, in the unit the horizon was given in (steps, or time units with `time`)
    if burn_in is None:
        burn = horizon[1] / 10.0
    elif time is not None:
        burn = _check_nonneg_float("burn_in", burn_in)
        if not continuous:
            burn = float(round(burn * rate))
    else:
        burn = float(_check_count("burn_in", burn_in))
    if horizon[0] == "events" or not continuous:
        burn = float(math.floor(burn))

    # with precision= every replication's chain stays alive between stretches
    _check_memory(engine, n, d, params.replace, replications, replications if precision is not None else workers)

    # good set (docs/model.md §5): only for λ < 1 and d >= 2
    k = None
    lo = hi = None
    if stable and d >= 2:
        k = _th.k_lambda_d(d, lam_in)
        lo, hi = _th.good_set_bounds(n, d, lamf, eps, k)

    # start state
    perfect_start = isinstance(start, str) and start.strip().lower() == "perfect"
    if perfect_start and not stable:
        raise ValueError("start 'perfect' needs load < 1: an exact stationary sample exists only then")
    name, val = ("perfect", None) if perfect_start else parse_start(start)
    lengths = None
    if perfect_start:
        counts0 = np.zeros(0, dtype=np.int64)  # each replication draws its own exact sample below
        if burn_in is None:
            burn = 0.0  # the start is already stationary (docs/model.md §12): nothing to forget
    elif name == "array" and np.issubdtype(val.dtype, np.integer):
        if val.ndim != 1 or val.size != n:
            raise ValueError(f"start queue-lengths vector must have n={n} entries; got shape {val.shape}")
        lengths = val.astype(np.int64)
        counts0 = counts_from_lengths(lengths)
    else:
        counts0 = start_counts(n, d, lam_in if stable else lamf, start)

    if record_every is not None:
        record_every = (check_positive_float("record_every", record_every) if continuous
                        else float(check_positive_int("record_every", record_every)
                                   if not isinstance(record_every, float) else
                                   check_positive_float("record_every", record_every)))
        span = (max_steps if precision is not None else events_h)
        span_t = span / rate if continuous else span
        if span_t / record_every > MAX_RECORDS:
            raise ValueError(f"record_every={record_every:g} would record {span_t / record_every:.3g} states per "
                             f"replication; at most MAX_RECORDS = {MAX_RECORDS:.0e}: record less often")
    rl = (_default_record_levels(d, lamf) if record_levels is None
          else check_positive_int("record_levels", record_levels, maximum=10_000))
    if record_every is None:
        rl = 0

    # warnings come after validation: bad input raises before any of them
    if not stable:
        warnings.warn(f"load λ = {lam_in} >= 1: the chain has no equilibrium; the time averages describe this "
                      "finite horizon only", RuntimeWarning, stacklevel=2)
    if burn_in is None and stable and name == "empty":
        _warn_short_burn_in(d, lamf, burn / rate if (horizon[0] == "events" or not continuous) else burn)

    spec = dict(params=params, engine=engine, counts0=counts0, lengths=lengths, continuous=continuous, k=k or 0,
                lo=lo, hi=hi, horizon=horizon, burn=burn, batches=B, record_every=record_every or 0.0,
                record_levels=rl, eps=eps, stable=stable, precision=precision, max_steps=max_steps,
                force_window=bool(_force_window), perfect=perfect_start, control_variates=bool(control_variates))
    seeds = spawn_seeds(seed, replications)
    stop = threading.Event()
    done_frac = [0.0] * replications
    t0 = _time.perf_counter()
    if perfect_start:
        from .. import perfect as _pf
        # replication r starts from an exact stationary sample drawn with its own child
        # stream (PERFECT_CHILD of the replication's seed), independent of the chain's
        reps = [_Rep(dict(spec, counts0=_pf.sample_counts(
            n, d, lam_in, seed=np.random.SeedSequence(seeds[r].entropy, spawn_key=(*seeds[r].spawn_key, PERFECT_CHILD)),
            replace=params.replace)), seeds[r], r) for r in range(replications)]
    else:
        reps = [_Rep(spec, seeds[r], r) for r in range(replications)]
    interrupted = False
    precision_state = None
    if client is not None:
        reps, interrupted = _run_on_client(reps, client)
        wall = _time.perf_counter() - t0
        res = _summarize(spec, reps, wall, interrupted)
        for msg in res.notes:
            warnings.warn(msg, RuntimeWarning, stacklevel=2)
        return res
    with ThreadPoolExecutor(max_workers=workers) as pool:
        def run_round(fn):
            futs = [pool.submit(fn, rep, stop, done_frac) for rep in reps]
            try:
                _wait_with_progress(futs, done_frac, progress, t0)
            except KeyboardInterrupt:
                stop.set()
                wait(futs)
                return False
            for f in futs:
                f.result()
            return not stop.is_set()

        ok = run_round(_Rep.first_stretch)
        interrupted = not ok
        if ok and precision is not None:
            precision_state = {"target": precision, "met": False, "cap_hit": False, "rounds": 1}
            while True:
                res = _summarize(spec, reps, _time.perf_counter() - t0, False)
                worst, factor = _precision_need(res, precision)
                precision_state["achieved"] = worst
                if factor <= 1.0:
                    precision_state["met"] = True
                    break
                f = 2
                while f < factor and f < B // 2:
                    f *= 2
                done_ev = max(rep.measured_events() for rep in reps)
                while f >= 2 and done_ev * f > max_steps:
                    f //= 2
                if f < 2:
                    precision_state["cap_hit"] = True
                    break
                for rep in reps:
                    rep.plan_extension(f)
                precision_state["rounds"] += 1
                if not run_round(_Rep.extend):
                    interrupted = True
                    break
    wall = _time.perf_counter() - t0
    res = _summarize(spec, reps, wall, interrupted, precision_state=precision_state)
    for msg in res.notes:
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
    return res


def _replication_task(rep: "_Rep") -> "_Rep":
    """One whole replication (burn-in and measurement) as one task of a Dask cluster: the
    same :meth:`_Rep.first_stretch` as the local threads run, with the same seed, so the
    numbers are those of a local run.  Returns the replication with its chain released
    (batch integrals, final state): plain picklable data."""
    stop = threading.Event()  # a cluster task is cancelled, not stopped: never set here
    _Rep.first_stretch(rep, stop, [0.0] * (rep.r + 1))
    return rep


def _run_on_client(reps, client):
    """Run every replication as one task on ``client``; ``(finished replications in order,
    interrupted)``.  On Ctrl-C the unfinished tasks are cancelled and the replications that
    finished whole are kept (the result is then partial); none finished: KeyboardInterrupt."""
    from .. import parallel

    done = {}
    try:
        parallel.map_tasks(_replication_task, reps, client=client, collect=False,
                           on_result=lambda i, value, error: done.__setitem__(i, value))
    except KeyboardInterrupt:
        if not done:
            raise KeyboardInterrupt("interrupted before any replication finished on the cluster") from None
        return [done[i] for i in sorted(done)], True
    return [done[i] for i in range(len(reps))], False


def _precision_need(res: "SimulationResult", precision: float):
    """``(worst relative half-width, factor by which the run should grow)`` for the
    quantities a precision target covers: the mean queue length and every level with
    ``E[u_i] >= PRECISION_LEVEL_MIN``.  An unreliable one asks for a factor 4."""
    targets = [(res.mean_queue_length, res.mean_queue_length_half_width, res.mean_queue_length_reliable)]
    for i, u in enumerate(res.u_mean):
        if u >= PRECISION_LEVEL_MIN:
            targets.append((u, res.u_half_width[i], bool(res.u_reliable[i])))
    worst = 0.0
    factor = 1.0
    for value, hw, rel in targets:
        r = hw / abs(value) if value != 0 and math.isfinite(hw) else math.inf
        worst = max(worst, r)
        if not rel:
            factor = max(factor, 4.0)
        elif r > precision:
            factor = max(factor, 1.2 * (r / precision) ** 2)
    return worst, factor


BURN_IN_RELAXATION_TIMES = 5.0


def _warn_short_burn_in(d: int, lam: float, burn_time: float) -> None:
    """Warn when the default burn-in from an empty start is shorter than a few relaxation
    times: ``1/μ_k`` of the slow mode (docs/model.md §6, derived) for d >= 2, and the M/M/1
    relaxation time ``1/(1−√λ)²`` for d = 1.  A heuristic, stated as such."""
    t_relax = relaxation_time(d, lam)
    if burn_time < BURN_IN_RELAXATION_TIMES * t_relax:
        warnings.warn(
            f"the default burn-in ({burn_time:.3g} time units) is shorter than {BURN_IN_RELAXATION_TIMES:g} "
            f"relaxation times (1/μ = {t_relax:.3g} time units, slow mode, derived) from an empty start: the "
            "averages may carry start-up bias; give a longer burn-in (burn_in=, --burn-in) or start from the "
            "fixed point (start='fixed-point', --start fixed-point)", RuntimeWarning, stacklevel=3)


def _check_steps(steps) -> int:
    if isinstance(steps, float):
        if not math.isfinite(steps) or steps <= 0 or steps != math.floor(steps):
            raise ValueError(f"steps must be a positive finite integer; got {steps!r}")
        steps = int(steps)
    return check_positive_int("steps", steps)


def _check_count(name, value) -> int:
    if isinstance(value, float):
        if not math.isfinite(value) or value < 0 or value != math.floor(value):
            raise ValueError(f"{name} must be an integer >= 0; got {value!r}")
        value = int(value)
    return check_int(name, value, minimum=0)


def _check_nonneg_float(name, value) -> float:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value == 0:
        return 0.0
    return check_positive_float(name, value)


def _wait_with_progress(futs, done_frac, progress, t0):
    import sys
    show = sys.stderr.isatty() if progress is None else bool(progress)
    bar = None
    task = None
    try:
        while True:
            done, pending = wait(futs, timeout=0.2, return_when=FIRST_EXCEPTION)
            if not pending or any(f.exception() is not None for f in done):
                break
            if show and bar is None and (progress or _time.perf_counter() - t0 > PROGRESS_AFTER_S):
                from rich.console import Console
                from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
                bar = Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.percentage:>5.1f}%"),
                               TimeElapsedColumn(), TimeRemainingColumn(),
                               console=Console(stderr=True), transient=True)
                bar.start()
                task = bar.add_task("sim", total=float(len(done_frac)))
            if bar is not None:
                bar.update(task, completed=sum(done_frac))
    finally:
        if bar is not None:
            bar.stop()
