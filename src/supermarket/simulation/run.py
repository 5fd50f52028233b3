"""The driver, :func:`simulate`: validates every argument before any work, builds one
``_Rep`` (:mod:`.chain`) per replication with child ``r`` of the seed, runs them on threads
or as tasks of a Dask cluster (``client=``), extends them in doubling stretches until a
precision target is met (``precision=``), and hands their batch integrals to
:mod:`.estimate` for the result.
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import time as _time
import warnings
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import theory as _th
from ..model import (
    Params,
    check_choice,
    check_fraction,
    check_int,
    check_positive_float,
    check_positive_int,
    spawn_seeds,
)
from ..system import methods as _methods
from ..system import policies as _pol
from ..system.spec import System
from ..system.states import counts_from_lengths, parse_start, start_counts
from . import control as _cv
from . import dispatch as _dispatch
from . import precision as _prec
from .chain import _Rep
from .estimate import _result, _summarize, relaxation_time
from .precision import DEFAULT_TARGET, PRECISION_LEVEL_MIN
from .protocol import SimulateResult
from .results import SimulationResult

__all__ = [
    "simulate",
    "RunPlan",
    "ENGINES",
    "TIME_MODES",
    "BATCHES",
    "DEFAULT_STEPS",
    "MAX_RECORDS",
    "PRECISION_LEVEL_MIN",
    "PRECISION_FIRST_STEPS",
]

ENGINES = ("profile", "queues", "buckets")
TIME_MODES = ("discrete", "continuous")
BATCHES = 1024  # batch means per replication (blocking needs many short ones, docs/model.md §9)
MAX_RECORDS = 10**7  # trajectory records per replication
DEFAULT_MAX_STEPS = 2 * 10**9  # cap on measured steps per replication with precision=
DEFAULT_STEPS = 10**8  # enough for every error bar of the default job (n = 10^4, d = 20, λ = 0.99)
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
    # measured peaks (tracemalloc, tests/engines/test_engines.py): queues 4 bytes per server (+ the bitset
    # without replacement; 4.5 with the final lengths at n = 4·10^6); buckets 8 (8.5 measured: the
    # final lengths are built beside the permutation)
    per = (
        8 * n
        if engine == "buckets"
        else 4 * n + (0 if replace else 8 * ((n + 63) // 64) + (8 * d if d * 64 < n else 0))
    )
    need = per * min(replications, workers)
    if n > _PER_QUEUE_MAX_N:
        raise ValueError(
            f"engine={engine!r} keeps one entry per server and supports n <= {_PER_QUEUE_MAX_N}; "
            f"n={n} would need {need / 2**30:.3g} GiB; use engine='profile' (exact, memory O(levels))"
        )
    avail = _available_memory()
    if avail is not None and need > 0.8 * avail:
        raise ValueError(
            f"engine={engine!r} with n={n} needs {need / 2**30:.3g} GiB of memory "
            f"({per / n:.3g} bytes per server), more than is available ({avail / 2**30:.3g} GiB); "
            "use engine='profile' (exact, memory O(levels))"
        )


def _default_record_levels(d: int, lam: float) -> int:
    if lam >= 1:
        return 16
    pi = _th.fixed_point(d, lam)
    levels = int(np.count_nonzero(pi > 1e-12))
    return int(min(max(levels + 2, 4), 32))


# =========================================================================== the plan
_FP_LEVELS = 200  # levels of a rule's fluid fixed point for the "fixed-point" start (λ^200 < 1e-9 at λ <= 0.9)


@dataclass(frozen=True)
class RunPlan:
    """Everything a run needs, validated (built by :func:`_plan`, read by :mod:`.chain` and
    :mod:`.estimate`).  A new keyword of :func:`simulate` is one more field here."""

    params: Params
    lam_in: float | str  # λ as given (str, Fraction, float): the exact value for k and perfect sampling
    engine: str
    continuous: bool
    horizon_kind: str  # "time": ``horizon`` is a time (steps in discrete mode); "events": an event count
    horizon: float
    burn: float  # in the unit of the horizon
    batches: int
    counts0: np.ndarray
    lengths: np.ndarray | None
    k: int  # k_{λ,d}, 0 when there is no good set
    lo: np.ndarray | None
    hi: np.ndarray | None
    eps: float
    stable: bool
    record_every: float  # 0: no records
    record_levels: int
    precision: float | None
    max_steps: int | None
    perfect: bool
    control_variates: bool
    replications: int
    workers: int
    seeds: tuple
    cautions: tuple = ()  # (message, warning class), issued when the run starts
    force_window: bool = False  # tests: the windowed P tables at any n
    policy: str = "jsq-d"  # the dispatch rule (supermarket.system.policies)
    second_order: bool = False  # the second-order controls A(u_i u_j), from sampled states (§9.1)
    records_internal: bool = False  # the records serve the second-order controls only: no trajectory
    plan_note: str = ""  # why the plan chose its replications and burn-in, in words ("" if the user did)


def _plan(
    n,
    d,
    lam,
    *,
    steps=None,
    time=None,
    burn_in=None,
    engine="profile",
    replace=True,
    start="empty",
    seed=0,
    replications=1,
    workers=None,
    time_mode="discrete",
    eps=0.1,
    record_every=None,
    record_levels=None,
    batches=None,
    precision=None,
    max_steps=None,
    client=None,
    control_variates=True,
    policy="jsq-d",
    second_order=False,
) -> RunPlan:
    """Validate the arguments of :func:`simulate` (ValueError/TypeError naming the parameter)
    and return the run plan; nothing is run."""
    if not isinstance(control_variates, (bool, np.bool_)):
        raise TypeError(f"control_variates must be True or False; got {control_variates!r}")
    _check_second_order(second_order, control_variates)
    engine = check_choice("engine", engine, ENGINES)
    policy = _pol.check_policy(policy)
    jsqd = policy == _pol.DEFAULT_POLICY
    if engine == "queues" and not jsqd:
        raise ValueError(
            f"engine 'queues' runs policy 'jsq-d' only (it samples the d queues); got policy={policy!r}: "
            "use engine 'profile' or 'buckets'"
        )
    time_mode = check_choice("time_mode", time_mode, TIME_MODES)
    params = Params(n, d, lam, replace=replace, stable=False)
    n, d, lamf = params.n, params.d, params.lam
    stable = params.lam_exact < 1
    auto_reps = replications is None  # the plan may choose them (heavy traffic with precision=)
    replications = 1 if auto_reps else check_positive_int("replications", replications)
    if client is not None:
        if not callable(getattr(client, "submit", None)):
            raise TypeError(f"client must be a dask.distributed.Client (or None); got {type(client).__name__}")
        if workers is not None:
            raise ValueError("workers and client exclude each other (the cluster has its own workers)")
        if precision is not None:
            raise ValueError(
                "precision= cannot run on a client: its stretches are planned from all "
                "replications together and keep every chain alive between them; run it locally "
                "(client=None, --scheduler not given)"
            )
    workers_given = workers
    workers = min(replications, os.cpu_count() or 1) if workers is None else check_positive_int("workers", workers)
    eps = check_fraction("eps", eps, low=0.0, high=0.1)
    continuous = time_mode == "continuous"
    rate = n * (1.0 + lamf)

    # horizon: ("time", T) in the chain's clock, or ("events", S) in continuous mode
    if steps is not None and time is not None:
        raise ValueError("give either steps or time, not both")
    if time is not None:
        T = check_positive_float("time", time)
        if continuous:
            kind, H = "time", T
        else:
            S = int(round(T * rate))
            if S < 1:
                raise ValueError(f"time={time} is less than one step (a step is 1/(n(1+λ)) = {1 / rate:.3g})")
            kind, H = "time", float(S)
    else:
        S = DEFAULT_STEPS if precision is None else PRECISION_FIRST_STEPS
        if steps is not None:
            S = _check_whole("steps", steps)
        kind, H = ("events", S) if continuous else ("time", float(S))
    timed = continuous and kind == "time"
    events_h = H * rate if timed else H
    if batches is None:
        B = BATCHES
        while B > 1 and events_h < B:
            B //= 2
    else:
        B = check_positive_int("batches", batches, maximum=2**20)
        if not timed and events_h < B:
            raise ValueError(f"batches must be <= the number of measured steps ({int(events_h)}); got {B}")
    if precision is not None:
        precision = check_positive_float("precision", precision)
        if not precision < 1:
            raise ValueError(f"precision must lie in (0, 1) (a relative half-width); got {precision!r}")
        if B < 4:
            raise ValueError("precision needs at least 4 batches (give more steps)")
    if max_steps is not None:
        max_steps = _check_whole("max_steps", max_steps)
        if precision is None:
            raise ValueError("max_steps caps a run with precision=; give precision too")
        if max_steps < events_h:
            raise ValueError(
                f"max_steps must be >= the first stretch of the run ({int(events_h)} steps); got {max_steps}"
            )
    elif precision is not None:
        max_steps = max(DEFAULT_MAX_STEPS, int(events_h))
    # heavy traffic with precision=: replications from independent near-stationary states
    # (docs/model.md §9, "Heavy traffic at large n") when one would need more than max_steps
    heavy_tau = None
    if auto_reps and precision is not None and stable and client is None:
        heavy_tau = _heavy_relaxation(n, d if jsqd else 1, lamf, rate, max_steps)
    plan_note = ""
    if heavy_tau is not None:
        replications = HEAVY_REPLICATIONS
        workers = min(replications, os.cpu_count() or 1) if workers_given is None else workers
        exact = isinstance(start, str) and start.strip().lower() == "perfect"
        plan_note = _heavy_note(heavy_tau, rate, max_steps, "exact" if exact else "own" if burn_in is None else "")
    # burn-in, in the unit the horizon was given in (steps, or time units with `time`)
    if burn_in is None:
        burn = H / 10.0 if heavy_tau is None else HEAVY_BURN_RELAXATION_TIMES * heavy_tau * (1.0 if timed else rate)
    elif time is not None:
        burn = _check_nonneg_float("burn_in", burn_in)
        if not continuous:
            burn = float(round(burn * rate))
    else:
        burn = float(_check_whole("burn_in", burn_in, minimum=0))
    if not timed:
        burn = float(math.floor(burn))

    # with precision= every replication's chain stays alive between stretches
    _check_memory(engine, n, d, params.replace, replications, replications if precision is not None else workers)

    # good set (docs/model.md §5): only for λ < 1 and d >= 2
    # (a statement of paper 000 about JSQ(d): none for the other rules)
    k, lo, hi = 0, None, None
    if stable and d >= 2 and jsqd:
        k = _th.k_lambda_d(d, lam)
        lo, hi = _th.good_set_bounds(n, d, lamf, eps, k)

    # start state
    perfect = isinstance(start, str) and start.strip().lower() == "perfect"
    if perfect and not stable:
        raise ValueError("start 'perfect' needs load < 1: an exact stationary sample exists only then")
    if perfect and not jsqd:
        raise ValueError(
            f"start 'perfect' samples the stationary law of JSQ(d) (policy 'jsq-d'); got policy={policy!r}: "
            "use another start (and a burn-in)"
        )
    name, val = ("perfect", None) if perfect else parse_start(start)
    lengths = None
    if perfect:
        counts0 = np.zeros(0, dtype=np.int64)  # each replication draws its own exact sample
        if burn_in is None:
            burn = 0.0  # the start is already stationary (docs/model.md §12): nothing to forget
    elif name == "array" and val is not None and np.issubdtype(val.dtype, np.integer):
        if val.ndim != 1 or val.size != n:
            raise ValueError(f"start queue-lengths vector must have n={n} entries; got shape {val.shape}")
        lengths = val.astype(np.int64)
        counts0 = counts_from_lengths(lengths)
    elif not jsqd and name == "fixed-point" and stable:
        # the rule's own fluid fixed point (supermarket.system.policies), rounded to counts
        fp = _pol.fluid_fixed_point(policy, lam, _FP_LEVELS, d=d)
        counts0 = np.rint(n * fp).astype(np.int64)
        counts0 = counts0[counts0 > 0]
    else:
        counts0 = start_counts(n, d, lam if stable else lamf, start)

    records_internal = bool(second_order) and record_every is None
    if records_internal:  # the state sampled every SECOND_ORDER_EVERY time units (§9.1)
        every = _cv.SECOND_ORDER_EVERY
        record_every = every if continuous else float(max(1, round(every * rate)))
    if record_every is not None:
        record_every = (
            check_positive_float("record_every", record_every)
            if continuous or isinstance(record_every, float)
            else float(check_positive_int("record_every", record_every))
        )
        span = max_steps if precision is not None else events_h
        span_t = span / rate if continuous else span
        if span_t / record_every > MAX_RECORDS:
            raise ValueError(
                f"record_every={record_every:g} would record {span_t / record_every:.3g} states per "
                f"replication; at most MAX_RECORDS = {MAX_RECORDS:.0e}: record less often"
            )
    rl = (
        _default_record_levels(d, lamf)
        if record_levels is None
        else check_positive_int("record_levels", record_levels, maximum=10_000)
    )
    if record_every is None:
        rl = 0
    elif second_order:
        rl = max(rl, _cv.SECOND_ORDER_LEVELS + 1)  # b_q needs u_(q+1)

    # sizes and costs, before anything is built: the per-level batch statistics of a start
    # with a queue of length L, and the events the horizon asks for
    burn_events = burn * rate if timed else burn
    top0 = len(counts0) if lengths is None else int(lengths.max(initial=0))
    # above load 1 the total grows by (λ − 1)/(1 + λ) per event and the maximum by at least 1/n of it
    growth = (events_h + burn_events) * max(lamf - 1.0, 0.0) / ((1.0 + lamf) * n)
    _check_start_levels(start, top0 + int(growth), B, min(replications, workers), growth=growth)
    cost = _cost_of(events_h + burn_events, replications, workers)
    seeds = tuple(spawn_seeds(seed, replications))

    # warnings, issued when the run starts: bad input raises before any of them
    cautions: list[tuple[str, type[Warning]]] = []
    if cost is not None:
        cautions.append((cost, CostWarning))
    if not stable:
        msg = f"load λ = {lam} >= 1: the chain has no equilibrium; the time averages describe this finite horizon only"
        cautions.append((msg, RuntimeWarning))
    if burn_in is None and stable and name == "empty":
        short = _short_burn_in(d, lamf, burn / rate if not timed else burn)
        if short:
            cautions.append((short, RuntimeWarning))

    return RunPlan(
        params=params,
        lam_in=lam,
        engine=engine,
        continuous=continuous,
        horizon_kind=kind,
        horizon=H,
        burn=burn,
        batches=B,
        counts0=counts0,
        lengths=lengths,
        k=k or 0,
        lo=lo,
        hi=hi,
        eps=eps,
        stable=stable,
        record_every=record_every or 0.0,
        record_levels=rl,
        precision=precision,
        max_steps=max_steps,
        perfect=perfect,
        control_variates=bool(control_variates),
        replications=replications,
        workers=workers,
        seeds=seeds,
        cautions=tuple(cautions),
        policy=policy,
        second_order=bool(second_order),
        records_internal=records_internal,
        plan_note=plan_note,
    )


def _check_second_order(second_order, control_variates) -> None:
    if not isinstance(second_order, (bool, np.bool_)):
        raise TypeError(f"second_order must be True or False; got {second_order!r}")
    if second_order and not control_variates:
        raise ValueError("second_order=True adds controls to the control variates: it needs control_variates=True")


# =========================================================================== simulate
def _as_system(n, d, lam, *, replace, policy, service, server_classes) -> System:
    """The :class:`System` of ``simulate``'s arguments: the one given as ``n``, or the one the
    keywords make (validated once, with the messages of each check)."""
    if isinstance(n, System):
        set_ = [k for k, v, default in (("d", d, None), ("lam", lam, None), ("replace", replace, True),
                ("policy", policy, "jsq-d"), ("service", service, "exp"), ("server_classes", server_classes, None))
                if not (v is default or (isinstance(v, str) and v == default))]  # fmt: skip
        if set_:
            raise TypeError(
                f"simulate(system, ...) takes the system's fields from it; do not also give {', '.join(set_)}"
            )
        if n.n is None:
            raise ValueError("system: simulate needs a finite n (n=None is the mean field)")
        return n
    if d is None or lam is None:
        raise TypeError("simulate needs a System, or n, d and lam")
    return System(n, d, lam, rule=policy, replace=replace, service=service, server_classes=server_classes)


def simulate(
    n: int | System,
    d: int | None = None,
    lam: float | str | None = None,
    *,
    steps: int | float | None = None,
    time: float | None = None,
    burn_in: int | float | None = None,
    engine: str = "profile",
    replace: bool = True,
    start: str | np.ndarray = "empty",
    seed: int | np.random.SeedSequence = 0,
    replications: int | None = None,
    workers: int | None = None,
    time_mode: str | None = None,
    eps: float | None = None,
    record_every: float | None = None,
    record_levels: int | None = None,
    batches: int | None = None,
    precision: float | None = None,
    max_steps: int | None = None,
    progress: bool | None = None,
    client: Any = None,
    control_variates: bool = True,
    policy: str = "jsq-d",
    service: Any = "exp",
    server_classes: Any = None,
    target: str | list[str] | None = None,
) -> SimulateResult:
    """Simulate the (n, d, λ)-supermarket process and measure its time averages with honest errors.

    Parameters
    ----------
    n, d, lam : int, int, float or str
        Servers, choices, load λ (λ >= 1 runs a finite horizon with a warning: no
        equilibrium, no good set, no self-checks).  Or ``n`` a
        :class:`~supermarket.system.spec.System` (with a finite ``n``), and then neither ``d``,
        ``lam``, ``replace``, ``policy``, ``service`` nor ``server_classes``: the keywords build
        the same value.  The engine that runs it is
        :func:`supermarket.system.methods.simulation_engine`'s.
    steps, time : int or float, optional
        Horizon after burn-in: ``steps`` events, or ``time`` continuous-time units (in
        discrete mode ``round(time·n(1+λ))`` steps); not both.  Default ``DEFAULT_STEPS``
        = 10^8; with ``precision``, the first stretch (``PRECISION_FIRST_STEPS`` = 10^7).
    burn_in : int or float, optional
        In the unit of the horizon; default a tenth of it (0 with ``start="perfect"``).
        MSER may extend it (docs/model.md §9).
    engine : {"profile", "queues", "buckets"}
        The engine, all exact in law (:mod:`supermarket.simulation`).  With a phase-type
        ``service``: ``"phase"`` (or the default ``"profile"``) runs the phase-type count
        engine, ``"events"`` the per-queue event engine.
    replace : bool
        Sample the d queues with replacement (paper 000) or without (paper 002).
    start : str or array
        A start of :mod:`supermarket.system.states` (``"empty"``, ``"fixed-point"``,
        ``"customers:G"``, ``"long:L"``, queue lengths, a profile), or ``"perfect"``: each
        replication from its own exact stationary sample (docs/model.md §12).
    seed : int or numpy.random.SeedSequence
        Replication ``r`` uses child ``r`` of ``SeedSequence(seed)``.
    replications, workers : int
        Independent runs (default 1; on the per-queue event engine 4, sharing its default
        budget: its error bars come from replications, docs/model.md §14; with ``precision``
        where one replication would need more than ``max_steps`` for its own error bars,
        ``HEAVY_REPLICATIONS`` after a burn-in of ``HEAVY_BURN_RELAXATION_TIMES`` relaxation
        times, their spread giving the errors: docs/model.md §9), on ``workers``
        threads (default: the cores, at most ``replications``); the numbers do not depend
        on ``workers``.
    time_mode : {"discrete", "continuous"}, optional
        The chain of paper 000, or exact exponential event times (docs/model.md §1).  Default
        ``"discrete"`` on the profile engines; the engines of a service law other than exp or of
        server classes run in continuous time only and refuse ``"discrete"``.
    eps : float, optional
        ε of the good set ``N^ε`` (docs/model.md §5), in (0, 1/10]; default 0.1.  Refused by the
        engines of a service law other than exp or of server classes (they report no good set).
    record_every, record_levels : optional
        Record ``u_1..u_m`` (``m = record_levels``), the maximum and the total of replication
        0 on this grid (steps, or time units in continuous mode); at most ``MAX_RECORDS``.
    batches : int, optional
        Batch means per replication (default ``BATCHES`` = 1024, fewer for shorter runs); at
        most the number of steps.
    precision : float, optional
        Target relative half-width of the 95 % intervals of the quantities ``target`` names
        (by default the mean queue length): after the first stretch the run says how many
        events it expects to need (a ``PrecisionPlanWarning``) and grows in doubling
        stretches until met or ``max_steps``; ``res.precision`` has the expected and used events.
    target : str or list of str, optional
        With ``precision``: the quantities it covers, comma-separated (``"mean-queue-length,p99"``):
        ``mean-queue-length``, ``u2``, ``u3``, … (``E[u_i]``), ``levels`` (every ``E[u_i]``,
        ``i >= 2``, at least ``PRECISION_LEVEL_MIN``), ``sojourn-mean``, ``waiting-mean``,
        ``sojourn-p50`` … ``sojourn-p99.9``, ``waiting-p50`` … (``p99`` is ``sojourn-p99``).
        ``E[u_1] = λ`` is exact (a self-check) and not a target (:mod:`.precision`).
    max_steps : int, optional
        Cap on measured events per replication with ``precision`` (default ``DEFAULT_MAX_STEPS``).
    progress : bool, optional
        Progress bar on stderr (default: on a terminal, after 2 s; none with ``client``).
    client : dask.distributed.Client, optional
        Run each replication as one task on this cluster, with the numbers of a local run.
        Excludes ``workers`` and ``precision``.
    control_variates : bool, default True
        Adjust every estimate with the identities ``Z_i = u_i − λ P_{i−1}`` (docs/model.md
        §9.1) where that reduces its error; the plain estimates are kept in the result.
    policy : {"jsq-d", "random", "jsq", "jiq"}, default "jsq-d"
        The dispatch rule (:mod:`supermarket.system.policies`, docs/model.md §2). The identities
        ``E[u_i] = λ E[P_{i−1}]`` (self-checks, control variates) hold for every rule; the
        statements of paper 000 (``k``, the good set) are about ``jsq-d`` only and are not
        made for the others; ``engine="queues"`` and ``start="perfect"`` run ``jsq-d`` only.
    service, server_classes : str, optional
        A service law of mean 1 other than ``"exp"`` (:mod:`supermarket.system.service`).  The
        phase-type laws ``erlang:K``, ``hyperexp:SCV``, ``ph:FILE.json`` run the phase-type
        count engine (:func:`supermarket.simulation.phase_run.simulate_phase_service`, docs/model.md
        §13; every ``policy``; horizon in ``steps`` or ``time``; (I1) control variates) and
        return a :class:`~supermarket.simulation.phase_run.PhaseSimulationResult`; with
        ``engine="events"`` they run the per-queue event engine instead.  ``lognormal:SCV``,
        ``pareto:ALPHA`` and ``deterministic`` run the per-queue event engine
        (:func:`supermarket.simulation.general.simulate_general`, docs/model.md §14) and return its
        :class:`~supermarket.simulation.general.GeneralResult`: a horizon in ``time`` (not ``steps``),
        continuous time, no control variates.  Server classes ``"FRACTION:SPEED,…"`` with
        exponential service run the count engine with classes
        (:func:`supermarket.simulation.classes.simulate_classes`, docs/model.md §15; a
        :class:`~supermarket.simulation.classes.ClassesResult`), or the event engine with
        ``engine="events"``; with any other law, the event engine, or with a phase-type law and
        ``engine="phase"`` the count engine of classes and phases
        (:func:`supermarket.simulation.classes_phase.simulate_classes_phase`, docs/model.md §15.7).

    Returns
    -------
    SimulateResult
        The protocol of the four result types (:mod:`supermarket.simulation.protocol`): a
        :class:`~supermarket.simulation.results.SimulationResult` on the profile engines (with error
        bars as docs/model.md §9 makes them; ``partial=True`` after Ctrl-C), a
        :class:`~supermarket.simulation.phase_run.PhaseSimulationResult` on the phase engine, a
        :class:`~supermarket.simulation.classes.ClassesResult` on the count engines with classes, a
        :class:`~supermarket.simulation.general.GeneralResult` on the event engine.

    Raises
    ------
    ValueError, TypeError
        Bad arguments, named with their valid range, before any work.
    KeyboardInterrupt
        Ctrl-C before anything was measured (otherwise a partial result is returned).

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
    if target is not None and precision is None:
        raise ValueError("target names the quantities of a precision= run; give precision too")
    system = _as_system(n, d, lam, replace=replace, policy=policy, service=service, server_classes=server_classes)
    chosen = _methods.simulation_engine(system, engine)  # the one engine choice (supermarket.system.methods)
    if chosen not in ENGINES:  # docs/model.md §13-§15
        others: dict[str, object] = dict(record_every=record_every, record_levels=record_levels, precision=precision)
        others |= dict(time_mode=time_mode, eps=eps)
        result: Any = _dispatch.run_engine(
            chosen, system, steps=steps, time=time, burn_in=burn_in, start=start, seed=seed,
            replications=replications, workers=workers, batches=batches, control_variates=control_variates,
            progress=progress, options=others | dict(max_steps=max_steps, client=client),
        )  # fmt: skip
        return result
    time_mode = "discrete" if time_mode is None else time_mode
    eps = 0.1 if eps is None else eps
    kw = dict(locals())  # the arguments, all but progress (and the system's) for the plan
    progress = kw.pop("progress")
    for key in ("service", "server_classes", "system", "chosen", "target"):
        kw.pop(key)
    kw.update(n=system.n, d=system.d, lam=system.load, replace=system.replace, policy=system.rule, engine=chosen)
    plan = _plan(**kw)
    targets = _prec.parse_target(target, stable=plan.stable) if precision is not None else None
    for msg, category in plan.cautions:
        warnings.warn(msg, category, stacklevel=2)
    res = _execute(plan, progress=progress, client=client, targets=targets)
    for msg in res.notes:
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
    return res


#: Replications a precision run in heavy traffic chooses (:func:`_heavy_relaxation`): Student t on
#: 15 degrees of freedom (t = 2.13 against 1.96), a multiple of the cores of a small machine.
HEAVY_REPLICATIONS = 16
#: Their burn-in from the start, in slow-mode relaxation times: the start's offset from the
#: stationary mean decays to e^−3 = 5 % of itself before anything is measured (docs/model.md §9).
HEAVY_BURN_RELAXATION_TIMES = 3.0


def _heavy_relaxation(n: int, d: int, lam: float, rate: float, max_steps: int | None) -> float | None:
    """The slow-mode relaxation time (time units) when one replication would need more than
    ``max_steps`` events for blocking to find its plateau (``2·MIN_BLOCKS`` relaxation times:
    32 blocks of at least ``1/μ`` after the pairwise merging), else None (docs/model.md §9)."""
    from ..stats import MIN_BLOCKS

    try:
        tau = relaxation_time(d, lam, n)
    except (ValueError, ArithmeticError):  # pragma: no cover - no slow mode (λ below double range)
        return None
    if not math.isfinite(tau) or max_steps is None:
        return None
    return tau if 2 * MIN_BLOCKS * tau * rate > max_steps else None


def _heavy_note(tau: float, rate: float, max_steps: int | None, burn: str) -> str:
    """The plan's choice in words; ``burn``: "own" (the plan's), "exact" (perfect samples) or ""."""
    from ..stats import MIN_BLOCKS

    start = {
        "own": f"after a burn-in of {HEAVY_BURN_RELAXATION_TIMES:g} relaxation times",
        "exact": "from an exact stationary sample",
    }.get(burn, "after the burn-in given")
    return (
        f"{HEAVY_REPLICATIONS} independent replications, each {start} (1/μ = {tau:.4g} time units, slow mode, "
        f"derived), chosen by the plan: blocking in one replication needs {2 * MIN_BLOCKS} relaxation times "
        f"({2 * MIN_BLOCKS * tau * rate:.3g} events), more than max_steps = {max_steps:,}; the error bars "
        "come from the spread between replications (Student t) unless each finds its own plateau"
    )


def _replications(plan: RunPlan) -> list[_Rep]:
    """One ``_Rep`` per replication; with ``start="perfect"`` each from an exact stationary
    sample drawn with its own child stream (``PERFECT_CHILD`` of the replication's seed)."""
    if not plan.perfect:
        return [_Rep(plan, ss, r) for r, ss in enumerate(plan.seeds)]
    from .. import perfect as _pf

    p = plan.params

    def exact_start(ss):
        seed = np.random.SeedSequence(ss.entropy, spawn_key=(*ss.spawn_key, PERFECT_CHILD))
        return dataclasses.replace(plan, counts0=_pf.sample_counts(p.n, p.d, plan.lam_in, seed=seed, replace=p.replace))

    return [_Rep(exact_start(ss), ss, r) for r, ss in enumerate(plan.seeds)]


def _execute(
    plan: RunPlan, *, progress: bool | None = None, client: Any = None, targets: tuple | None = None
) -> SimulationResult:
    """Run a validated plan: on ``client``, or on threads with the precision loop (``targets``:
    the canonical names of :func:`.precision.parse_target`, default the mean queue length)."""
    t0 = _time.perf_counter()
    reps = _replications(plan)
    if client is not None:
        reps, interrupted = _run_on_client(reps, client)
        return _summarize(plan, reps, _time.perf_counter() - t0, interrupted)
    stop = threading.Event()
    done_frac = [0.0] * plan.replications
    precision_state = None
    with ThreadPoolExecutor(max_workers=plan.workers) as pool:

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

        interrupted = not run_round(_Rep.first_stretch)
        if not interrupted and plan.precision is not None:
            precision_state, interrupted = _precision_loop(plan, reps, run_round, targets or DEFAULT_TARGET, t0)
    return _summarize(plan, reps, _time.perf_counter() - t0, interrupted, precision_state=precision_state)


def _growth_factor(factor: float, batches: int, done_events: int, max_steps: float) -> int:
    """The power of two (at least ``factor``, below ``batches/2``, within ``max_steps``) by
    which a precision run grows; below 2: the cap is hit."""
    f = 2
    while f < factor and f < batches // 2:
        f *= 2
    while f >= 2 and done_events * f > max_steps:
        f //= 2
    return f


def _replication_task(rep: _Rep) -> _Rep:
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
        parallel.map_tasks(
            _replication_task,
            reps,
            client=client,
            collect=False,
            on_result=lambda i, value, error: done.__setitem__(i, value),
        )
    except KeyboardInterrupt:
        if not done:
            raise KeyboardInterrupt("interrupted before any replication finished on the cluster") from None
        return [done[i] for i in sorted(done)], True
    return [done[i] for i in range(len(reps))], False


def _precision_need(res: SimulationResult, precision: float, targets: tuple = DEFAULT_TARGET):
    """``(worst relative half-width, factor by which the run should grow, rows)`` for the
    quantities ``targets`` names (:func:`.precision.parse_target`; by default the mean queue
    length).  ``E[u_1] = λ`` is exact and never a target.  A target without an error bar asks
    for a factor 4 (:func:`.precision.need`)."""
    rows = _prec.target_rows(res, targets)
    worst, factor = _prec.need(rows, precision)
    return worst, factor, rows


def _precision_loop(plan: RunPlan, reps: list, run_round, targets: tuple, t0: float):
    """Extend the replications until every target meets ``plan.precision`` or the cap is hit:
    ``(precision state, interrupted)``.  After the first stretch whose targets all have an
    error bar the run says how many events it expects to need (a :class:`PrecisionPlanWarning`,
    before it extends), and the state keeps that expectation beside the events used."""
    precision = float(plan.precision or math.nan)  # set: the loop runs only with precision=
    cap_events = (plan.max_steps or math.inf) * len(reps)
    state: dict[str, Any] = {
        "target": plan.precision, "targets": list(targets), "met": False, "cap_hit": False, "rounds": 1,
        "expected_events": None, "expected_after_events": None, "max_events": cap_events,
    }  # fmt: skip
    interrupted = False
    while True:
        res = _result(plan, reps, _time.perf_counter() - t0, False)
        worst, factor, rows = _precision_need(res, precision, targets)
        state["achieved"], state["quantities"] = worst, rows
        done = float(sum(rep.measured_events() for rep in reps))
        if state["expected_events"] is None and factor > 1.0:
            expect = _prec.expected_events(done, [r["relative"] for r in rows], precision)
            if math.isfinite(expect) or state["rounds"] == 1:
                _announce(plan, rows, done, expect, cap_events)
            if math.isfinite(expect):
                state["expected_events"], state["expected_after_events"] = expect, done
        if factor <= 1.0:
            state["met"] = True
            if state["rounds"] == 1:  # met in the first stretch: it needed no more
                state["expected_events"], state["expected_after_events"] = done, done
            break
        f = _growth_factor(factor, plan.batches, max(rep.measured_events() for rep in reps), plan.max_steps or math.inf)
        if f < 2:
            state["cap_hit"] = True
            break
        for rep in reps:
            rep.plan_extension(f)
        state["rounds"] += 1
        if not run_round(_Rep.extend):
            interrupted = True
            break
    state["events"] = int(sum(rep.measured_events() for rep in reps))
    state["exact"] = _prec.exact_lines(res) if plan.stable else []
    return state, interrupted


def _announce(plan: RunPlan, rows: list, done: float, expect: float, cap: float) -> None:
    names = ", ".join(r["quantity"] for r in rows) or "nothing"
    if math.isfinite(expect):
        worst = max(rows, key=lambda r: r["relative"])
        msg = (
            f"precision {plan.precision:g} on {names}: after {done:.3g} events the worst is "
            f"{worst['quantity']} at {worst['relative']:.3g}; expecting about {expect:.3g} events in all "
            "(an error shrinks as events^(-1/2)), run in doubling stretches"
        )
        if expect > cap:
            msg += f": more than the cap of {cap:.3g} (max_steps per replication): the target will not be met"
    else:
        missing = ", ".join(r["quantity"] for r in rows if r["relative"] is None)
        msg = (
            f"precision {plan.precision:g} on {names}: after {done:.3g} events {missing} has no error bar "
            "yet, so the events needed cannot be estimated; the run grows fourfold until it has one "
            f"(at most {cap:.3g} events)"
        )
    warnings.warn(msg, PrecisionPlanWarning, stacklevel=5)  # at the caller of simulate()


BURN_IN_RELAXATION_TIMES = 5.0


def _short_burn_in(d: int, lam: float, burn_time: float) -> str:
    """The warning when the default burn-in from an empty start is shorter than a few
    relaxation times (``relaxation_time``: docs/model.md §6, derived; a heuristic), else ""."""
    t_relax = relaxation_time(d, lam)
    if burn_time >= BURN_IN_RELAXATION_TIMES * t_relax:
        return ""
    return (
        f"the default burn-in ({burn_time:.3g} time units) is shorter than {BURN_IN_RELAXATION_TIMES:g} "
        f"relaxation times (1/μ = {t_relax:.3g} time units, slow mode, derived) from an empty start: the "
        "averages may carry start-up bias; give a longer burn-in (burn_in=, --burn-in) or start from the "
        "fixed point (start='fixed-point', --start fixed-point)"
    )


class CostWarning(UserWarning):
    """A run long enough to say beforehand what it will cost (issued before it starts)."""


class PrecisionPlanWarning(CostWarning):
    """What a ``precision=`` run expects to need, said once its first stretch has measured the
    errors and before it extends (the CLI prints it at once, as every CostWarning)."""


#: Events per second per core assumed for the up-front estimate (profile engine, measured
#: 2e7-1e8 in benchmarks/README.md: the low end, so that the estimate is not optimistic).
EST_EVENTS_PER_SECOND = 2e7
#: Runs of more events than this are refused (about 6 days on one core at the rate above).
MAX_RUN_EVENTS = 10**13
#: Above this many events the run first says what it will cost (about 2.5 min on one core).
WARN_RUN_EVENTS = 3 * 10**9
#: Memory allowed for the per-level batch statistics of one replication.
MAX_LEVEL_BYTES = 2**30


def _cost_of(events: float, replications: int, workers: int) -> str | None:
    total = float(events) * replications
    cores = max(1, min(workers, replications))
    secs = total / (EST_EVENTS_PER_SECOND * cores)
    from ..result import human_seconds

    msg = (
        f"this run is about {total:.3g} events ({replications} replication(s) of {float(events):.3g}), "
        f"about {human_seconds(secs)} at {EST_EVENTS_PER_SECOND:.0e} events/s per core on {cores} core(s)"
    )
    if total > MAX_RUN_EVENTS:
        raise ValueError(f"{msg}: refused (more than {MAX_RUN_EVENTS:.0e} events); give fewer steps or a shorter time")
    return msg if total > WARN_RUN_EVENTS else None


#: bytes per level of a run's results beyond the batch sums: the estimates, their error
#: analyses, the plain and adjusted copies and the self-checks each hold a value per level
#: (measured: 339 MB for 20,001 levels, about 9 KB a level; 16 KiB leaves room)
RESULT_BYTES_PER_LEVEL = 16 * 1024


def _check_start_levels(start, top: int, batches: int, alive: int, growth: float = 0.0) -> None:
    # the batch sums (3 arrays of batches × levels per live replication) and the per-level
    # results, which do not shrink with fewer batches (long:100000 with 16 batches: 617 MB)
    need = (3 * 8 * batches + RESULT_BYTES_PER_LEVEL) * (top + 1) * alive
    if need > MAX_LEVEL_BYTES:
        what, fix = f"start={start!r} has a queue of length {top}", "start with a shorter queue or give fewer batches"
        if growth >= 1:
            what = f"at load > 1 the longest queue grows to at least {top} over this horizon"
            fix = "give fewer steps or a shorter time"
        raise ValueError(
            f"{what}: the per-level statistics over {batches} batches need about {need / 2**30:.3g} "
            f"GiB (more than {MAX_LEVEL_BYTES / 2**30:.3g} GiB); {fix}"
        )


def _check_whole(name, value, minimum=1) -> int:
    """An integer, or a float with an integral value (``1e7``), at least ``minimum`` (1 or 0)."""
    if isinstance(value, float):
        if not math.isfinite(value) or value < minimum or value != math.floor(value):
            what = "a positive finite integer" if minimum else "an integer >= 0"
            raise ValueError(f"{name} must be {what}; got {value!r}")
        value = int(value)
    return check_int(name, value, minimum=minimum)


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

                bar = Progress(
                    TextColumn("simulating"),
                    BarColumn(),
                    TextColumn("{task.percentage:>5.1f}%"),
                    TimeElapsedColumn(),
                    TimeRemainingColumn(),
                    console=Console(stderr=True),
                    transient=True,
                )
                bar.start()
                task = bar.add_task("sim", total=float(len(done_frac)))
            if bar is not None:
                bar.update(task, completed=sum(done_frac))
    finally:
        if bar is not None:
            bar.stop()
