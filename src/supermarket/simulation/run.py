"""The driver, :func:`simulate`: has :mod:`.plan` validate every argument before any work,
builds one ``_Rep`` (:mod:`.chain`) per replication with child ``r`` of the seed, runs them on
threads or as tasks of a Dask cluster (``client=``), extends them in doubling stretches until a
precision target is met (``precision=``), and hands their batch integrals to :mod:`.estimate`
for the result.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time as _time
import warnings
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from ..system import methods as _methods
from ..system.spec import System
from . import dispatch as _dispatch
from . import precision as _prec
from .chain import _Rep
from .estimate import _result, _summarize
from .plan import (
    BATCHES,
    DEFAULT_STEPS,
    ENGINES,
    MAX_RECORDS,
    PRECISION_FIRST_STEPS,
    TIME_MODES,
    CostWarning,
    RunPlan,
    build_plan,
)

# names of the plan that others import from here, as before the plan had its own module
# (cli.simulate: DEFAULT_MAX_STEPS and CostWarning; sweep.measurements: CostWarning; tests: cost_of)
from .plan import DEFAULT_MAX_STEPS as DEFAULT_MAX_STEPS
from .plan import HEAVY_BURN_RELAXATION_TIMES as HEAVY_BURN_RELAXATION_TIMES
from .plan import HEAVY_REPLICATIONS as HEAVY_REPLICATIONS
from .plan import cost_of as cost_of
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

PROGRESS_AFTER_S = 2.0
PERFECT_CHILD = 0x7065  # child key of a replication's seed for its perfect-sampling start


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
    engine: str | None = None,
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
    engine : {"profile", "queues", "buckets", "phase", "events"}, optional
        The engine, all exact in law (:mod:`supermarket.simulation`); None (the default) is
        ``"profile"``, but for ``policy="jbt"``, whose default is ``"events"`` (``"profile"``
        or ``"buckets"`` runs its count chain).  With a phase-type ``service``: ``"phase"``
        (or ``"profile"``) runs the phase-type count engine, ``"events"`` the per-queue event
        engine, which runs every law (exp too) and ``jbt`` with any law.
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
        The engine's jump chain with each step held for its mean holding time (paper 000's
        chain for exp service and one class), or exponential holding times (docs/model.md
        §1.1).  Default: the engine's own (:attr:`supermarket.system.methods.Engine.time_modes`:
        ``"discrete"`` on the count engines, ``"continuous"`` on the event engine).  With the
        default engine, a mode it does not run picks one that does (classes, ``"continuous"``:
        the event engine); a general law has no discrete chain and is refused.
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
        On the law engines (another law or server classes) each round reruns from the same
        seed with the horizon at least doubled (:mod:`.law_precision`).
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
    policy : {"jsq-d", "random", "jsq", "jiq", "jbt"}, default "jsq-d"
        The dispatch rule (:mod:`supermarket.system.policies`, docs/model.md §2). The identities
        ``E[u_i] = λ E[P_{i−1}]`` (self-checks, control variates) hold for every rule; the
        statements of paper 000 (``k``, the good set) are about ``jsq-d`` only and are not
        made for the others; ``start="perfect"`` runs the rules
        that are JSQ(d) chains (``jsq-d``, ``random``, ``jsq``; docs/model.md §12.1).
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
    chosen = _methods.simulation_engine(system, engine, time_mode)  # the one engine choice (system.methods)
    if chosen not in ENGINES:  # docs/model.md §13-§15
        others: dict[str, object] = dict(record_every=record_every, record_levels=record_levels, precision=precision)
        others |= dict(time_mode=time_mode, eps=eps)
        result: Any = _dispatch.run_engine(
            chosen, system, steps=steps, time=time, burn_in=burn_in, start=start, seed=seed,
            replications=replications, workers=workers, batches=batches, control_variates=control_variates,
            progress=progress, options=others | dict(max_steps=max_steps, client=client), target=target,
        )  # fmt: skip
        return result
    _methods.check_options(system, chosen, {"time_mode": time_mode, "eps": eps})  # honoured or refused, never ignored
    time_mode = "discrete" if time_mode is None else time_mode
    eps = 0.1 if eps is None else eps
    kw = dict(locals())  # the arguments, all but progress (and the system's) for the plan
    progress = kw.pop("progress")
    for key in ("service", "server_classes", "system", "chosen", "target"):
        kw.pop(key)
    kw.update(n=system.n, d=system.d, lam=system.load, replace=system.replace, policy=system.rule, engine=chosen)
    plan = build_plan(**kw)
    targets = _prec.parse_target(target, stable=plan.stable) if precision is not None else None
    for msg, category in plan.cautions:
        warnings.warn(msg, category, stacklevel=2)
    prior = _prior(plan, targets) if targets is not None and plan.stable else None
    res = _execute(plan, progress=progress, client=client, targets=targets, prior=prior)
    for msg in res.notes:
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
    return res


def _replications(plan: RunPlan) -> list[_Rep]:
    """One ``_Rep`` per replication; with ``start="perfect"`` each from an exact stationary
    sample drawn with its own child stream (``PERFECT_CHILD`` of the replication's seed)."""
    if not plan.perfect:
        return [_Rep(plan, ss, r) for r, ss in enumerate(plan.seeds)]
    from .. import perfect as _pf

    p = plan.params

    def exact_start(ss):
        seed = np.random.SeedSequence(ss.entropy, spawn_key=(*ss.spawn_key, PERFECT_CHILD))
        counts0 = _pf.sample_counts(p.n, p.d, plan.lam_in, seed=seed, replace=p.replace, policy=plan.policy)
        return dataclasses.replace(plan, counts0=counts0)

    return [_Rep(exact_start(ss), ss, r) for r, ss in enumerate(plan.seeds)]


def _prior(plan: RunPlan, targets: tuple) -> dict:
    """What a ``precision=`` run expects before it starts (:func:`.precision.prior_events`), said at
    once as a :class:`PrecisionPlanWarning` (the count after the first stretch follows)."""
    p = plan.params
    events, source = _prec.prior_events(
        p.d, p.lam, float(plan.precision or math.nan), targets, policy=plan.policy, n=p.n, replace=p.replace
    )
    if events is None:
        msg = (
            f"precision {plan.precision:g}: no expectation before the run: {source}; the run states one after its "
            "first stretch"
        )
    else:
        cv = (
            "the control variates cancel this first-order noise, so the run should need fewer; it states its own "
            "count after its first stretch"
            if plan.control_variates
            else "the run states its own count after its first stretch"
        )
        msg = f"precision {plan.precision:g} before the run: {source} needs about {events:.3g} events; {cv}"
    warnings.warn(msg, PrecisionPlanWarning, stacklevel=4)  # at the caller of simulate()
    return {"prior_events": events, "prior_source": source}


def _execute(
    plan: RunPlan,
    *,
    progress: bool | None = None,
    client: Any = None,
    targets: tuple | None = None,
    prior: dict | None = None,
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
            precision_state.update(prior or {"prior_events": None, "prior_source": "not computed"})
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


class PrecisionPlanWarning(CostWarning):
    """What a ``precision=`` run expects to need, said once its first stretch has measured the
    errors and before it extends (the CLI prints it at once, as every CostWarning)."""


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
