"""The run plan of :func:`~supermarket.simulation.simulate`: :func:`build_plan` validates every
argument before any work (ValueError/TypeError naming the parameter) and returns a
:class:`RunPlan`, everything a run needs, which :mod:`.chain` and :mod:`.estimate` read.  It
fixes the horizon and the burn-in, the batches, the precision cap, the start state, the
records, the replications of a precision run in heavy traffic (docs/model.md §9), and what the
run costs in events and memory (refused beyond the limits, said beforehand above
``WARN_RUN_EVENTS``).
"""

from __future__ import annotations

import math
import os
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
from ..system import policies as _pol
from ..system.states import counts_from_lengths, parse_start, start_counts
from . import control as _cv
from . import precision as _prec
from .batch_errors import relaxation_time

__all__ = [
    "RunPlan",
    "build_plan",
    "cost_of",
    "CostWarning",
    "ENGINES",
    "TIME_MODES",
    "BATCHES",
    "DEFAULT_STEPS",
    "DEFAULT_MAX_STEPS",
    "MAX_RECORDS",
    "PRECISION_FIRST_STEPS",
    "HEAVY_REPLICATIONS",
    "HEAVY_BURN_RELAXATION_TIMES",
]

ENGINES = ("profile", "queues", "buckets")
TIME_MODES = ("discrete", "continuous")
BATCHES = 1024  # batch means per replication (blocking needs many short ones, docs/model.md §9)
MAX_RECORDS = 10**7  # trajectory records per replication
DEFAULT_MAX_STEPS = 2 * 10**9  # cap on measured steps per replication with precision=
DEFAULT_STEPS = 10**8  # enough for every error bar of the default job (n = 10^4, d = 20, λ = 0.99)
PRECISION_FIRST_STEPS = 10**7  # first stretch of a precision= run without steps/time: it doubles from there
_PER_QUEUE_MAX_N = 2**31 - 1


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
    """Everything a run needs, validated (built by :func:`build_plan`, read by :mod:`.chain` and
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


def build_plan(
    n: int,
    d: int,
    lam: float | str,
    *,
    steps: float | None = None,
    time: float | None = None,
    burn_in: float | None = None,
    engine: str = "profile",
    replace: bool = True,
    start: Any = "empty",
    seed: Any = 0,
    replications: int | None = 1,
    workers: int | None = None,
    time_mode: str = "discrete",
    eps: float = 0.1,
    record_every: float | None = None,
    record_levels: int | None = None,
    batches: int | None = None,
    precision: float | None = None,
    max_steps: float | None = None,
    client: Any = None,
    control_variates: bool = True,
    policy: str = "jsq-d",
    second_order: bool = False,
) -> RunPlan:
    """Validate the arguments of :func:`simulate` (ValueError/TypeError naming the parameter)
    and return the run plan; nothing is run.  The checks run in the order of the helpers
    below, so that the first bad argument is the one named."""
    engine, policy = _check_engine(control_variates, second_order, engine, policy)
    jsqd = policy == _pol.DEFAULT_POLICY
    time_mode = check_choice("time_mode", time_mode, TIME_MODES)
    params = Params(n, d, lam, replace=replace, stable=False)
    n, d, lamf = params.n, params.d, params.lam
    stable = params.lam_exact < 1
    auto_reps = replications is None  # the plan may choose them (heavy traffic with precision=)
    replications = 1 if auto_reps else check_positive_int("replications", replications)
    _check_client(client, workers, precision)
    workers_given = workers
    workers = min(replications, os.cpu_count() or 1) if workers is None else check_positive_int("workers", workers)
    eps = check_fraction("eps", eps, low=0.0, high=0.1)
    continuous = time_mode == "continuous"
    rate = n * (1.0 + lamf)

    kind, H = _horizon(steps, time, continuous, rate, precision)
    timed = continuous and kind == "time"
    events_h = H * rate if timed else H
    B = _batch_count(batches, events_h, timed)
    _prec.check_equilibrium(precision, lamf)
    precision, max_steps = _precision_cap(precision, max_steps, B, events_h)
    # heavy traffic with precision=: replications from independent near-stationary states
    # (docs/model.md §9, "Heavy traffic at large n") when one would need more than max_steps
    heavy = auto_reps and precision is not None and stable and client is None
    heavy_tau = _heavy_relaxation(n, d if jsqd else 1, lamf, rate, max_steps) if heavy else None
    plan_note = ""
    if heavy_tau is not None:
        replications = HEAVY_REPLICATIONS
        workers = min(replications, os.cpu_count() or 1) if workers_given is None else workers
        exact = isinstance(start, str) and start.strip().lower() == "perfect"
        plan_note = _heavy_note(heavy_tau, rate, max_steps, "exact" if exact else "own" if burn_in is None else "")
    burn = _burn(burn_in, time, continuous, timed, H, rate, heavy_tau)

    # with precision= every replication's chain stays alive between stretches
    _check_memory(engine, n, d, params.replace, replications, replications if precision is not None else workers)

    # good set (docs/model.md §5): only for λ < 1 and d >= 2
    # (a statement of paper 000 about JSQ(d): none for the other rules)
    k, lo, hi = _good_set(n, d, lam, lamf, eps) if stable and d >= 2 and jsqd else (0, None, None)
    perfect, name, counts0, lengths = _start_state(start, n, d, lam, lamf, stable, policy)
    if perfect and burn_in is None:
        burn = 0.0  # the start is already stationary (docs/model.md §12): nothing to forget

    span = max_steps if precision is not None else events_h  # the events recorded at most
    record_every, rl, records_internal = _recording(
        record_every, record_levels, second_order, continuous, rate, span, d, lamf, policy
    )

    burn_events = burn * rate if timed else burn
    cost = _check_sizes(start, counts0, lengths, n, lamf, events_h + burn_events, B, replications, workers)
    seeds = tuple(spawn_seeds(seed, replications))
    short = ""
    if burn_in is None and stable and name == "empty":
        short = _short_burn_in(d, lamf, burn / rate if not timed else burn)

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
        cautions=_cautions(cost, lam, stable, short),
        policy=policy,
        second_order=bool(second_order),
        records_internal=records_internal,
        plan_note=plan_note,
    )


def _check_engine(control_variates, second_order, engine, policy) -> tuple[str, str]:
    """``(engine, policy)`` checked, with the control-variate switches they go with (every engine
    runs every rule: the registry, :mod:`supermarket.system.policies`)."""
    if not isinstance(control_variates, (bool, np.bool_)):
        raise TypeError(f"control_variates must be True or False; got {control_variates!r}")
    _check_second_order(second_order, control_variates)
    engine = check_choice("engine", engine, ENGINES)
    policy = _pol.check_policy(policy)
    return engine, policy


def _good_set(n: int, d: int, lam, lamf: float, eps: float) -> tuple:
    """``(k, lo, hi)``: ``k_{λ,d}`` (from λ as given, exactly) and the good set's bounds
    (docs/model.md §5)."""
    k = _th.k_lambda_d(d, lam)
    lo, hi = _th.good_set_bounds(n, d, lamf, eps, k)
    return k, lo, hi


def _check_client(client, workers, precision) -> None:
    """A Dask client, when given, excludes ``workers`` and ``precision``."""
    if client is None:
        return
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


def _horizon(steps, time, continuous: bool, rate: float, precision) -> tuple[str, float]:
    """The horizon ``(kind, H)``: ``("time", T)`` in the chain's clock (steps in discrete
    mode), or ``("events", S)`` in continuous mode; ``rate`` is ``n(1+λ)``."""
    if steps is not None and time is not None:
        raise ValueError("give either steps or time, not both")
    if time is not None:
        T = check_positive_float("time", time)
        if continuous:
            return "time", T
        S = int(round(T * rate))
        if S < 1:
            raise ValueError(f"time={time} is less than one step (a step is 1/(n(1+λ)) = {1 / rate:.3g})")
        return "time", float(S)
    S = DEFAULT_STEPS if precision is None else PRECISION_FIRST_STEPS
    if steps is not None:
        S = _check_whole("steps", steps)
    return ("events", S) if continuous else ("time", float(S))


def _batch_count(batches, events_h: float, timed: bool) -> int:
    """The batches per replication: ``BATCHES``, halved until each holds an event, or those
    given (at most the measured events, unless the horizon is a time)."""
    if batches is None:
        B = BATCHES
        while B > 1 and events_h < B:
            B //= 2
        return B
    B = check_positive_int("batches", batches, maximum=2**20)
    if not timed and events_h < B:
        raise ValueError(f"batches must be <= the number of measured steps ({int(events_h)}); got {B}")
    return B


def _precision_cap(precision, max_steps, B: int, events_h: float) -> tuple[float | None, int | None]:
    """``(precision, max_steps)`` checked: a relative half-width in (0, 1), and the cap on the
    measured events per replication (default ``DEFAULT_MAX_STEPS``), only with a precision."""
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
    return precision, max_steps


def _burn(burn_in, time, continuous: bool, timed: bool, H: float, rate: float, heavy_tau: float | None) -> float:
    """The burn-in, in the unit the horizon was given in (steps, or time units with ``time``):
    a tenth of the horizon by default, ``HEAVY_BURN_RELAXATION_TIMES`` relaxation times when
    the plan chose the replications of heavy traffic (``heavy_tau``)."""
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
    return burn


def _start_state(start, n: int, d: int, lam, lamf: float, stable: bool, policy: str) -> tuple:
    """``(perfect, name, counts0, lengths)``: the start of every replication, as the counts
    profile and (for a vector of queue lengths) the lengths; with ``"perfect"`` no counts:
    each replication draws its own exact sample (``lam``: λ as given, ``lamf``: as a float)."""
    perfect = isinstance(start, str) and start.strip().lower() == "perfect"
    jsqd = policy == _pol.DEFAULT_POLICY
    if perfect and not stable:
        raise ValueError("start 'perfect' needs load < 1: an exact stationary sample exists only then")
    if perfect:  # a rule that is a JSQ(d) chain (random: JSQ(1), jsq: JSQ(n)); the others refused with why
        from ..system.methods import perfect_sampler
        from ..system.spec import System

        try:
            perfect_sampler(System(n, d, lam, rule=policy))
        except ValueError as exc:
            raise ValueError(f"start 'perfect': {exc}") from None
    name, val = ("perfect", None) if perfect else parse_start(start)
    lengths = None
    if perfect:
        counts0 = np.zeros(0, dtype=np.int64)  # each replication draws its own exact sample
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
    return perfect, name, counts0, lengths


def _recording(
    record_every, record_levels, second_order, continuous: bool, rate: float, span, d: int, lamf: float, policy: str
):
    """``(record_every, record_levels, records_internal)``: the grid of the records (None:
    none) and the levels recorded; with ``second_order`` and no grid given, the state sampled
    every ``SECOND_ORDER_EVERY`` time units for the second-order controls only (§9.1).  At most
    ``MAX_RECORDS`` records over ``span`` events."""
    if record_every is None and record_levels is not None and not second_order:
        # as the law engines say (records.check_record): the levels of no records would be ignored
        raise ValueError("record_levels: goes with record_every (the grid of the records); give record_every too")
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
    elif second_order:  # b_q needs u_(q+1), and P_ℓ the levels it reads (jbt: c_T, T = d)
        from ..engines.tables import p_levels  # numba, only here

        rl = max(rl, p_levels(_pol.policy_code(policy), d, _cv.SECOND_ORDER_LEVELS + 1))
    return record_every, rl, records_internal


def _check_sizes(start, counts0, lengths, n: int, lamf: float, events: float, B: int, replications: int, workers: int):
    """Sizes and costs, before anything is built: the per-level batch statistics of a start
    with a queue of length L (above load 1, of the longest queue the horizon grows), and the
    ``events`` the run asks for, burn-in included: their cost in words (:func:`cost_of`)."""
    top0 = len(counts0) if lengths is None else int(lengths.max(initial=0))
    # above load 1 the total grows by (λ − 1)/(1 + λ) per event and the maximum by at least 1/n of it
    growth = events * max(lamf - 1.0, 0.0) / ((1.0 + lamf) * n)
    _check_start_levels(start, top0 + int(growth), B, min(replications, workers), growth=growth)
    return cost_of(events, replications, workers)


def _cautions(cost: str | None, lam, stable: bool, short: str) -> tuple:
    """The warnings a run issues when it starts, ``(message, warning class)``: its cost, no
    equilibrium (λ >= 1), a default burn-in ``short`` of the relaxation (bad input raised before)."""
    cautions: list[tuple[str, type[Warning]]] = []
    if cost is not None:
        cautions.append((cost, CostWarning))
    if not stable:
        msg = f"load λ = {lam} >= 1: the chain has no equilibrium; the time averages describe this finite horizon only"
        cautions.append((msg, RuntimeWarning))
    if short:
        cautions.append((short, RuntimeWarning))
    return tuple(cautions)


def _check_second_order(second_order, control_variates) -> None:
    if not isinstance(second_order, (bool, np.bool_)):
        raise TypeError(f"second_order must be True or False; got {second_order!r}")
    if second_order and not control_variates:
        raise ValueError("second_order=True adds controls to the control variates: it needs control_variates=True")


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


#: Events per second per core assumed for the up-front estimate (profile engine, measured
#: 2e7-1e8 in benchmarks/README.md: the low end, so that the estimate is not optimistic).
EST_EVENTS_PER_SECOND = 2e7
#: Runs of more events than this are refused (about 6 days on one core at the rate above).
MAX_RUN_EVENTS = 10**13
#: Above this many events the run first says what it will cost (about 2.5 min on one core).
WARN_RUN_EVENTS = 3 * 10**9
#: Memory allowed for the per-level batch statistics of one replication.
MAX_LEVEL_BYTES = 2**30


def cost_of(events: float, replications: int, workers: int) -> str | None:
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
