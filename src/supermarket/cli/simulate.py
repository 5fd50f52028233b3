"""``supermarket simulate``: run the chain and compare it with the theory (the main job)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import click

from ..model import MAX_CDF_POINTS
from ..simulation import BATCHES, DEFAULT_STEPS, ENGINES, PRECISION_LEVEL_MIN, TIME_MODES
from ..simulation import simulate as _simulate
from ..simulation.precision import DEFAULT_TARGET
from ..simulation.results import SimulationResult
from ..simulation.run import DEFAULT_MAX_STEPS
from ..system.methods import ENGINES as METHOD_ENGINES
from ..system.methods import SIMULATION, check_options, simulation_engine
from ..system.spec import System
from ._args import takes_args
from ._common import (
    COUNT,
    FLOAT,
    LOAD_ANY,
    N_COUNT,
    OUTPUT_FIGURE,
    OUTPUT_FILE,
    CountType,
    print_json,
    save_figure,
    to_jsonable,
    write_text,
)
from ._phase import ENGINE_HELP
from .options import (
    dask_client,
    deprecated_alias,
    json_option,
    parallel_options,
    policy_option,
    replace_option,
    replications_option,
    seed_option,
    service_option,
    start_option,
)


def _collect_warnings(caught: list) -> Callable[..., None]:
    """A ``warnings.showwarning`` that prints the run's cost estimate (a CostWarning) at once,
    before the run, and keeps the other warnings in ``caught`` for after it."""
    from ..simulation.run import CostWarning

    def show(message: Warning | str, category: type[Warning], *args: object, **kwargs: object) -> None:
        if issubclass(category, CostWarning):
            click.echo(f"supermarket: {message}", err=True)
        else:
            caught.append(warnings.WarningMessage(message, category, "", 0))

    return show


def _number(name: str, text: object) -> int | float | None:
    """``1e7`` -> 10000000 (int when integral), ``2.5`` -> 2.5."""
    if text is None:
        return None
    try:
        v = Decimal(str(text).strip())
    except (InvalidOperation, ValueError):
        raise click.BadParameter(f"{name} must be a number such as 1000, 1e7 or 2.5; got {text!r}") from None
    if not v.is_finite():
        raise click.BadParameter(f"{name} must be finite; got {text!r}")
    if v < 0:
        raise click.BadParameter(f"{name} must be >= 0; got {text!r}")
    return int(v) if v == v.to_integral_value() and v.adjusted() <= 18 else float(v)  # 1e400: float inf, refused


_FLAGS = {
    "steps": "--steps",
    "start": "--start",
    "precision": "--precision",
    "max_steps": "--max-steps",
    "client": "--scheduler",
    "cdf": "--cdf",
    "plot": "--plot",
    "time_mode": "--time-mode",
    "eps": "--eps",
    "load": "--load",
}


def _simulate_law(system: System, chosen: str, *, load: str, out: str | None, as_json: bool, **kw: Any) -> None:
    """``simulate`` of a system with a service law other than exp or server classes, on the engine
    the table chose (phase, classes, classes-phase or events): the options it does not take
    refused by the table's one refusal, then the library's run, its summary or JSON."""
    given = {key: kw[key] for key in ("steps", "start", "precision", "max_steps")}
    given |= {key: kw.pop(key) for key in ("cdf", "plot", "client", "eps")} | {"load": system.load}
    given["time_mode"] = kw["time_mode"]
    try:
        check_options(system, chosen, given, spell=_FLAGS.__getitem__, time="--time")
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    with warnings.catch_warnings(record=True) as caught:  # said as the profile engines' are (load >= 1, …)
        warnings.simplefilter("always")
        res = _simulate(system, **kw)
    for said in dict.fromkeys(str(w.message) for w in caught):  # once each (a precision run's rounds repeat them)
        click.echo(f"supermarket: warning: {said}", err=True)
    cdf = given["cdf"]  # measured (event engine) or of the joined law (count engines, docs/model.md §13.2)
    data = res.to_dict(cdf_points=cdf)
    data["system"]["load_text"] = load
    if out:
        write_text(str(out), json.dumps(to_jsonable(data), indent=2, allow_nan=False))
    if given["plot"]:
        _save_plot(res, given["plot"])  # the profile, and the maximum and trajectory from the records
    if as_json:
        print_json(data)
        return
    click.echo(res.summary(cdf_points=cdf))
    if out:
        click.echo(f"wrote {out}")
    if given["plot"]:
        click.echo(f"wrote {given['plot']}")


def _save_plot(res: Any, plot: str) -> None:
    """``res.plot()`` written to ``plot`` (a write error is one line, exit 1)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = res.plot()
    try:
        save_figure(fig, plot, dpi=120)
    finally:
        plt.close(fig)


@dataclass(frozen=True)
class SimulateArgs:
    """The options of ``supermarket simulate``, one field per option (click's names)."""

    n: int
    d: int
    load: str
    steps: int | None
    time_: float | None
    burn_in_steps: int | None
    burn_in_time: float | None
    burn_in: str | None
    engine: str | None
    replace: bool
    policy: str
    time_mode: str | None
    start: str
    seed: int
    replications: int | None
    workers: int | None
    scheduler: str | None
    connect_timeout: float
    eps: float | None
    plot: str | None
    record_every: float | None
    record_levels: int | None
    out: str | None
    precision: float | None
    target: str | None
    max_steps: int | None
    batches: int | None
    cdf: int | None
    control_variates: bool
    service: str
    server_classes: str | None
    as_json: bool


@click.command()
@click.option("--n", type=N_COUNT, default=10_000, show_default=True, help="Number of servers (1e6 accepted).")
@click.option("--d", type=COUNT, default=20, show_default=True, help="Number of choices d.")
@click.option(
    "--load",
    type=LOAD_ANY,
    default="0.99",
    show_default=True,
    help="Load λ (arrival rate per server). λ >= 1 runs a finite horizon with a warning (every engine; no "
    "control variate or self-check of equilibrium).",
)
@click.option(
    "--steps",
    type=COUNT,
    help=f"Events after burn-in (1e7 accepted). Default {DEFAULT_STEPS:.0e} unless --time is given.",
)
@click.option(
    "--time", "time_", type=FLOAT, help="Horizon in continuous-time units after burn-in (instead of --steps)."
)
@click.option(
    "--burn-in-steps",
    type=CountType(minimum=0),
    help="Burn-in in events, with a horizon in --steps. Default: a tenth of the horizon.",
)
@click.option(
    "--burn-in-time",
    type=FLOAT,
    help="Burn-in in continuous-time units, with a horizon in --time. Default: a tenth of the horizon.",
)
@click.option("--burn-in", type=str, hidden=True)
@click.option(
    "--engine",
    type=click.Choice(tuple(dict.fromkeys(req for row in SIMULATION.values() for req in row))),
    default=None,
    show_default="profile",
    help="profile: counts chain, O(1) per event, any n; queues: per-queue reference (O(d) per "
    "arrival); buckets: per-queue, O(1) per event; events: the per-queue event engine, for every law and classes "
    "(exp included: per-customer sojourn quantiles; load >= 1: a finite horizon)." + ENGINE_HELP + " With "
    "--server-classes: the count engine with classes (the default) or events.  jbt runs on events by default "
    "(every law, with or without classes); --engine profile or buckets runs its count chain (exp, one class), "
    "--engine phase its phase-type count chain (exp or a phase-type law; with --server-classes the count engine "
    "with classes).",
)
@replace_option(
    True, "Sample the d queues with replacement (default, paper 000) or, with --no-replace, without (paper 002)."
)
@policy_option(
    "Paper 000's k and good set are reported for jsq-d only; --start perfect runs "
    "the JSQ(d) chains (jsq-d, random, jsq); jbt runs on the event engine by default (every law), on the "
    "profile engines with --engine profile or buckets (exp service), on the phase-type count engine with "
    "--engine phase, and with --server-classes on the count engine with classes with --engine phase; each engine "
    "runs the rules of docs/model.md §2."
)
@click.option(
    "--time-mode",
    type=click.Choice(TIME_MODES),
    default=None,
    help="discrete: the engine's jump chain, each step held for its mean holding time (paper 000's chain with exp "
    "service and one class); continuous: exponential holding times (exact event times).  Default: the engine's own "
    "(discrete on the count engines, continuous on the event engine); with classes, continuous runs on the event "
    "engine, and discrete with a phase-type law and classes on the count engine (docs/model.md §1.1).  A general "
    "law has no discrete chain.",
)
@start_option(
    "empty",
    "Start state: empty, fixed-point, customers:G (every queue at G), long:L (one queue of L), "
    "or perfect (an exact stationary sample per replication, docs/model.md §12).  The count engines of a "
    "service law or of server classes start empty or at the mean field's fixed-point (per class, rounded; "
    "jsq-d and random, load < 1); the event engine (--engine events) at the same fixed point, and jsq, jiq "
    "with one class at u_1 = load, each customer in service with its remaining work (no fixed point for "
    "lognormal, pareto, deterministic).",
)
@seed_option()
@replications_option(
    None,
    "Independent replications (replication r uses child r of --seed); default 1, and 4 on the "
    "per-queue event engine (--service lognormal/pareto/deterministic, --engine events), whose "
    "error bars come from replications; with --precision where one replication would need more "
    "than --max-steps for its own error bars (heavy traffic at large n), 16 from independent starts "
    "(docs/model.md §9).",
)
@parallel_options
@click.option(
    "--eps",
    type=FLOAT,
    default=None,
    help="ε of the good set N^ε, in (0, 1/10] (default 0.1); the good set is of exponential service and one class.",
)
@click.option(
    "--plot",
    type=OUTPUT_FIGURE,
    help="Save a figure (profile vs π and the linearised prediction; maximum vs k) to this file.  On the engines "
    "of a law or of server classes: the profile, and with --record-every the maximum's distribution over the "
    "records and the trajectory.",
)
@click.option(
    "--record-every",
    "record_every",
    type=FLOAT,
    help="Record the trajectory of replication 0 (u_1..u_m, the maximum, the customers; the key 'trajectory' of "
    "the JSON) every so many steps (the profile engines; time units with --time-mode continuous) or events (the "
    "count engines of a law or of server classes: phase, classes), or units of time (the event engine, whose "
    "horizon is a time). Recording changes no number.",
)
@click.option("--record-levels", "record_levels", type=COUNT, help="Levels m of --record-every (default 4 to 32).")
@click.option("--save", "out", type=OUTPUT_FILE, help="Write the full result as JSON to this file.")
@click.option(
    "--precision",
    type=FLOAT,
    help="Run until the 95% intervals of the --target quantities have a relative half-width at most this "
    "(e.g. 1e-4). After a first stretch (1e7 steps, or --steps) the run says how many events it expects to "
    "need, then doubles until met, up to --max-steps; the screen and the JSON ('precision') give expected "
    "against used. E[u_1] = λ is exact: reported as a self-check, never a target. On the law engines (phase, "
    "classes, events) each round reruns from the same seed with the horizon at least doubled (the mean queue "
    "length and the levels as targets).",
)
@click.option(
    "--target",
    "target",
    metavar="NAMES",
    help=f"With --precision: the quantities it covers, comma-separated (default {','.join(DEFAULT_TARGET)}): "
    f"mean-queue-length; u2, u3, … (E[u_i]); levels (every E[u_i], i >= 2, at least {PRECISION_LEVEL_MIN:g}); "
    "sojourn-mean, waiting-mean; sojourn-p50, -p90, -p99, -p99.9 and waiting-p50 … (p50, p90, p99, p99.9 "
    "alone: the sojourn quantiles). E.g. --target mean-queue-length,p99.",
)
@click.option(
    "--max-steps",
    type=COUNT,
    help=f"Cap on measured steps per replication with --precision (default {DEFAULT_MAX_STEPS:.0e}).",
)
@click.option(
    "--batches",
    type=COUNT,
    help=f"Batch means per replication for the error analysis (default {BATCHES} on the profile engines, "
    f"{METHOD_ENGINES['events'].batches} on the engines of another law or of server classes, whose error bars were "
    "calibrated at that number, docs/model.md §13–§15; at most --steps).",
)
@click.option(
    "--cdf",
    type=CountType(maximum=MAX_CDF_POINTS, minimum=2),
    metavar="N",
    help="Also give the sojourn and waiting CDFs on N equally spaced times, 0 to 1.1 × the sojourn "
    "p99.9 (text table, and the key 'cdf' of the JSON); needs load < 1. On the event engine (general laws, "
    "--engine events) the measured customers' CDFs with their errors between replications; on the count "
    "engines of another law or of server classes the FIFO law of the length, phase and class each arrival "
    "joins, with delta-method errors from the batch means.",
)
@click.option(
    "--control-variates/--no-control-variates",
    "control_variates",
    default=True,
    show_default=True,
    help="Estimate with the model's identities Z_i = u_i − λ·P_(i−1) as control variates (split-sample "
    "regression on batch means, docs/model.md §9.1); --no-control-variates gives the plain time "
    "averages.",
)
@service_option(
    "erlang, hyperexp and ph run the phase-type count engine "
    "(docs/model.md §13; --steps or --time, the rules that run there, control variates; --engine events for the event "
    "engine); lognormal, pareto, deterministic the per-queue event engine (docs/model.md §14; horizon in "
    "--time, continuous time, no control variates)."
)
@click.option(
    "--server-classes",
    "server_classes",
    default=None,
    help="Classes of servers FRACTION:SPEED,… (e.g. 0.5:2,0.5:1; load per unit of total capacity; every "
    "fraction times n a whole number), per-class results: the count engine with exponential service "
    "(docs/model.md §15; --engine events for the per-queue event engine), the event engine otherwise "
    "(with erlang, hyperexp or ph, --engine phase runs the count engine of §15.7).",
)
@json_option("Print one JSON object instead of tables.")
@deprecated_alias("--out", "--save", "out", type=OUTPUT_FILE, why="--out names a directory in every other command")
@takes_args(SimulateArgs)
def simulate(a: SimulateArgs) -> None:
    """Simulate the (n, d, λ)-supermarket process exactly and compare with the theory.

    With no options: n = 10000, d = 20, λ = 0.99 (k = 2), a run of a few seconds.  Prints
    the time-averaged profile E[u_i] ± standard error against the mean-field fixed point
    π(i) and the linearised profile (derived), the distribution of the maximum queue length
    against k_(λ,d), the fraction of time in the good set N^ε, the response times (mean and
    quantiles of the sojourn and waiting times, FIFO) and the speed.

    \b
    Error bars (docs/model.md §9): blocking analysis of batch means, "too short to estimate"
    where the run is shorter than its correlation time allows, n_eff the effective number of
    independent batches, MSER-5 for the start-up transient, self-checks of the exact
    identities E[u_i] = λ·E[P_(i−1)].  Control variates
    (§9.1, on by default): "var. reduction" is (plain s.e. / this s.e.)².  Response times:
    §10.  Ctrl-C stops early and reports what was measured, marked partial.
    """
    burn = _burn_in(a)
    _check_simulate(a)
    system = System(
        a.n, a.d, a.load, rule=a.policy, replace=a.replace, service=a.service, server_classes=a.server_classes
    )
    chosen = simulation_engine(system, a.engine, a.time_mode)  # the one engine choice (supermarket.system.methods)
    if chosen not in ENGINES:  # docs/model.md §13-§15
        _simulate_law(
            system, chosen, load=a.load, out=a.out, as_json=a.as_json, cdf=a.cdf, plot=a.plot, client=a.scheduler,
            steps=a.steps, time=a.time_, burn_in=burn, engine=a.engine, start=a.start, seed=a.seed,
            replications=a.replications, workers=a.workers, batches=a.batches, precision=a.precision,
            max_steps=a.max_steps, target=a.target, control_variates=a.control_variates, time_mode=a.time_mode,
            eps=a.eps, record_every=a.record_every, record_levels=a.record_levels,
        )  # fmt: skip
        return
    try:  # honoured or refused, never ignored (the table's one refusal, spelled as the command spells it)
        given = {"time_mode": a.time_mode, "eps": a.eps}
        check_options(system, chosen, given, spell=_FLAGS.__getitem__, time="--time")
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    res, caught = _run_profile(system, a, burn)
    for w in caught:
        click.echo(f"supermarket: warning: {w.message}", err=True)
    _show(res, a)


def _burn_in(a: SimulateArgs) -> float | int | None:
    """The burn-in the options give, in the unit of the horizon (``--burn-in`` is the deprecated
    spelling of both), or None; refused when it goes with the other horizon."""
    if a.burn_in is not None:  # the deprecated spelling, in the unit of the horizon
        if a.burn_in_steps is not None or a.burn_in_time is not None:
            raise click.UsageError("give --burn-in-steps or --burn-in-time only (--burn-in is their deprecated name)")
        click.echo(
            "supermarket: warning: --burn-in is deprecated; use --burn-in-steps (with --steps) or "
            "--burn-in-time (with --time)",
            err=True,
        )
        return _number("--burn-in", a.burn_in)
    if a.burn_in_steps is not None:
        if a.time_ is not None:
            raise click.BadParameter(
                "goes with a horizon in --steps; with --time give --burn-in-time", param_hint="--burn-in-steps"
            )
        return a.burn_in_steps
    if a.burn_in_time is not None:
        if a.time_ is None:
            raise click.BadParameter(
                "goes with a horizon in --time; with --steps give --burn-in-steps", param_hint="--burn-in-time"
            )
        return a.burn_in_time
    return None


def _check_simulate(a: SimulateArgs) -> None:
    """The options that go together or not, refused before any work: ``--cdf`` (at least 2
    points, load < 1), ``--target`` (with ``--precision``), ``--precision`` (not on a cluster)."""
    if a.cdf is not None:
        if a.cdf < 2:
            raise click.BadParameter(f"must be an integer >= 2; got {a.cdf}", param_hint="--cdf")
        if Decimal(str(a.load)) >= 1:
            raise click.BadParameter(
                "needs load < 1: with load >= 1 there is no equilibrium and no response-time law", param_hint="--cdf"
            )
    if a.target is not None and a.precision is None:
        raise click.UsageError("--target names the quantities of a --precision run; give --precision too")
    if a.scheduler is not None and a.precision is not None:
        raise click.UsageError(
            "--precision cannot run on --scheduler: its stretches are planned from all "
            "replications together; run it locally"
        )


def _run_profile(system: System, a: SimulateArgs, burn: Any) -> tuple[SimulationResult, list]:
    """The run on the profile engines (on ``--scheduler``'s cluster when given), with the
    warnings it raised, said after it."""
    client = dask_client(a.scheduler, a.connect_timeout, a.workers)
    try:
        caught: list[warnings.WarningMessage] = []
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = _collect_warnings(caught)
            res = _simulate(
                system,
                steps=a.steps,
                time=a.time_,
                burn_in=burn,
                engine=a.engine,
                start=a.start,
                seed=a.seed,
                replications=a.replications,
                workers=a.workers,
                time_mode=a.time_mode,
                eps=a.eps,
                precision=a.precision,
                target=a.target,
                max_steps=a.max_steps,
                batches=a.batches,
                client=client,
                control_variates=a.control_variates,
                record_every=a.record_every,
                record_levels=a.record_levels,
            )
            assert isinstance(res, SimulationResult)  # exponential service, one class: the profile engines
    finally:
        if client is not None:
            client.close()
    return res, caught


def _show(res: SimulationResult, a: SimulateArgs) -> None:
    """The result as the options ask: the JSON file (``--save``), the figure (``--plot``), then
    one JSON object (``--json``) or the tables."""
    data = res.to_dict(cdf_points=a.cdf)
    data["system"]["load"] = float(a.load)
    data["system"]["load_text"] = a.load
    if a.out:
        write_text(a.out, json.dumps(to_jsonable(data), indent=2, allow_nan=False))  # whole or not at all
    if a.plot:
        _save_plot(res, a.plot)
    if a.as_json:
        print_json(data)
        return
    click.echo(res.summary(cdf_points=a.cdf))
    if a.out:
        click.echo(f"wrote {a.out}")
    if a.plot:
        click.echo(f"wrote {a.plot}")
