"""``supermarket simulate``: run the chain and compare it with the theory (the main job)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

import click

from ..classes_sim import wants_classes_engine
from ..general import simulate_general as _simulate_general_lib
from ..general import wants_event_engine
from ..model import MAX_CDF_POINTS
from ..phase_run import PHASE_ENGINES
from ..simulation import BATCHES, DEFAULT_STEPS, ENGINES, PRECISION_LEVEL_MIN, TIME_MODES
from ..simulation import simulate as _simulate
from ..simulation.run import DEFAULT_MAX_STEPS
from . import _classes as _classes_cli
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
from ._phase import ENGINE_HELP, is_phase_service, simulate_phase_cli
from .options import (
    dask_client,
    deprecated_alias,
    json_option,
    parallel_options,
    policy_option,
    replace_option,
    replications_option,
    seed_option,
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


def _simulate_general(
    n: int,
    d: int,
    load: str,
    time_: float | None,
    burn: float | None,
    replace: bool,
    policy: str,
    seed: int,
    replications: int | None,
    workers: int | None,
    batches: int | None,
    service: str,
    server_classes: str | None,
    **unused: object,
) -> None:
    """``simulate --service/--server-classes``: the event engine, its summary or JSON."""
    refused = {
        "steps": "--steps (give --time)",
        "precision": "--precision",
        "max_steps": "--max-steps",
        "scheduler": "--scheduler",
        "cdf": "--cdf",
        "plot": "--plot",
    }
    for key, flag in refused.items():
        if unused.get(key) is not None:
            raise click.UsageError(
                f"{flag} does not go with --service other than exp or --server-classes "
                "(the per-queue event engine, docs/model.md §14)"
            )
    if unused.get("engine") not in ("profile", "events") or unused.get("start") != "empty":
        raise click.UsageError(
            "--engine and --start do not go with --service other than exp or --server-classes "
            "(the per-queue event engine starts empty)"
        )
    res = _simulate_general_lib(
        n,
        d,
        load,
        policy=policy,
        replace=replace,
        service=service,
        server_classes=server_classes,
        time=time_,
        burn_in=burn,
        seed=seed,
        replications=replications,
        workers=workers,
        batches=256 if batches is None else batches,
        control_variates=bool(unused.get("control_variates", True)),
    )
    data = res.to_dict()
    data["load_text"] = load
    out = unused.get("out")
    if out:
        write_text(str(out), json.dumps(to_jsonable(data), indent=2, allow_nan=False))
    if unused.get("as_json"):
        print_json(data)
        return
    click.echo(res.summary())
    if out:
        click.echo(f"wrote {out}")


@click.command()
@click.option("--n", type=N_COUNT, default=10_000, show_default=True, help="Number of servers (1e6 accepted).")
@click.option("--d", type=COUNT, default=20, show_default=True, help="Number of choices d.")
@click.option(
    "--load",
    type=LOAD_ANY,
    default="0.99",
    show_default=True,
    help="Load λ (arrival rate per server). λ >= 1 runs a finite horizon with a warning.",
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
    type=click.Choice((*ENGINES, *PHASE_ENGINES)),
    default="profile",
    show_default=True,
    help="profile: counts chain, O(1) per event, any n; queues: per-queue reference (O(d) per "
    "arrival); buckets: per-queue, O(1) per event." + ENGINE_HELP + " With --server-classes: the count engine "
    "with classes (the default) or events.",
)
@replace_option(
    True, "Sample the d queues with replacement (default, paper 000) or, with --no-replace, without (paper 002)."
)
@policy_option(
    "Dispatch rule: jsq-d (default: the shortest of d sampled queues), random (one uniform queue), jsq (a "
    "shortest of all n), jiq (an idle queue if any, else a uniform one); docs/model.md §2. Paper 000's k and "
    "good set are reported for jsq-d only; --engine queues and --start perfect run jsq-d only."
)
@click.option(
    "--time-mode",
    type=click.Choice(TIME_MODES),
    default="discrete",
    show_default=True,
    help="discrete: the chain of paper 000; continuous: exact exponential event times.",
)
@start_option(
    "empty",
    "Start state: empty, fixed-point, customers:G (every queue at G), long:L (one queue of L), "
    "or perfect (an exact stationary sample per replication, docs/model.md §12).",
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
@click.option("--eps", type=FLOAT, default=0.1, show_default=True, help="ε of the good set N^ε, in (0, 1/10].")
@click.option(
    "--plot",
    type=OUTPUT_FIGURE,
    help="Save a figure (profile vs π and the linearised prediction; maximum vs k) to this file.",
)
@click.option("--save", "out", type=OUTPUT_FILE, help="Write the full result as JSON to this file.")
@click.option(
    "--precision",
    type=FLOAT,
    help=f"Run until the 95% intervals of the mean queue length and of every E[u_i] >= {PRECISION_LEVEL_MIN:g} have a "
    "relative half-width at most this (e.g. 1e-3); the run doubles until then, up to --max-steps.",
)
@click.option(
    "--max-steps",
    type=COUNT,
    help=f"Cap on measured steps per replication with --precision (default {DEFAULT_MAX_STEPS:.0e}).",
)
@click.option(
    "--batches",
    type=COUNT,
    help=f"Batch means per replication for the error analysis (default {BATCHES}; at most --steps).",
)
@click.option(
    "--cdf",
    type=CountType(maximum=MAX_CDF_POINTS, minimum=2),
    metavar="N",
    help="Also give the sojourn and waiting CDFs on N equally spaced times, 0 to 1.1 × the sojourn "
    "p99.9 (text table, and the key 'cdf' of the JSON); needs load < 1.",
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
@click.option(
    "--service",
    default="exp",
    show_default=True,
    help="Service law of mean 1: exp, erlang:K, hyperexp:SCV (SCV > 1), ph:FILE.json, lognormal:SCV, "
    "pareto:ALPHA (ALPHA > 1), deterministic. erlang, hyperexp and ph run the phase-type count engine "
    "(docs/model.md §13; --steps or --time, every --policy, control variates; --engine events for the event "
    "engine); lognormal, pareto, deterministic the per-queue event engine (docs/model.md §14; horizon in "
    "--time, continuous time, no control variates).",
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
def simulate(
    n: int,
    d: int,
    load: str,
    steps: int | None,
    time_: float | None,
    burn_in_steps: int | None,
    burn_in_time: float | None,
    burn_in: str | None,
    engine: str,
    replace: bool,
    policy: str,
    time_mode: str,
    start: str,
    seed: int,
    replications: int | None,
    workers: int | None,
    scheduler: str | None,
    connect_timeout: float,
    eps: float,
    precision: float | None,
    max_steps: int | None,
    batches: int | None,
    cdf: int | None,
    control_variates: bool,
    plot: str | None,
    out: str | None,
    as_json: bool,
    service: str = "exp",
    server_classes: str | None = None,
) -> None:
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
    if burn_in is not None:  # the deprecated spelling, in the unit of the horizon
        if burn_in_steps is not None or burn_in_time is not None:
            raise click.UsageError("give --burn-in-steps or --burn-in-time only (--burn-in is their deprecated name)")
        click.echo(
            "supermarket: warning: --burn-in is deprecated; use --burn-in-steps (with --steps) or "
            "--burn-in-time (with --time)",
            err=True,
        )
        burn = _number("--burn-in", burn_in)
    elif burn_in_steps is not None:
        if time_ is not None:
            raise click.BadParameter(
                "goes with a horizon in --steps; with --time give --burn-in-time", param_hint="--burn-in-steps"
            )
        burn = burn_in_steps
    elif burn_in_time is not None:
        if time_ is None:
            raise click.BadParameter(
                "goes with a horizon in --time; with --steps give --burn-in-steps", param_hint="--burn-in-time"
            )
        burn = burn_in_time
    else:
        burn = None
    if cdf is not None:
        if cdf < 2:
            raise click.BadParameter(f"must be an integer >= 2; got {cdf}", param_hint="--cdf")
        if Decimal(str(load)) >= 1:
            raise click.BadParameter(
                "needs load < 1: with load >= 1 there is no equilibrium and no response-time law", param_hint="--cdf"
            )
    if scheduler is not None and precision is not None:
        raise click.UsageError(
            "--precision cannot run on --scheduler: its stretches are planned from all "
            "replications together; run it locally"
        )
    if replications is None:  # 1, or the event engine's own default (supermarket.general.DEFAULT_REPLICATIONS)
        on_count = (
            (server_classes is None and engine != "events" and is_phase_service(service))
            or wants_classes_engine(service, server_classes, engine)
            or (server_classes is not None and engine == "phase" and is_phase_service(service))
        )
        # the count engine: None lets the plan choose (heavy traffic with --precision), else 1
        replications = 1 if on_count else None
    if server_classes is None and engine != "events" and is_phase_service(service):  # docs/model.md §13
        simulate_phase_cli(
            n, d, load, service=service, policy=policy, replace=replace, steps=steps, time_=time_, burn=burn,
            seed=seed, replications=replications or 1, workers=workers, batches=batches, start=start,
            control_variates=control_variates, out=out, as_json=as_json, precision=precision,
            max_steps=max_steps, scheduler=scheduler, cdf=cdf, plot=plot, engine=engine,
        )  # fmt: skip
        return
    if wants_classes_engine(service, server_classes, engine):  # docs/model.md §15: classes, exponential service
        _classes_cli.simulate_cli(**locals())
        return
    if server_classes is not None and engine == "phase" and is_phase_service(service):  # §15.7, on request
        _classes_cli.simulate_cli(**locals())
        return
    if wants_event_engine(service, server_classes):  # a ValueError names a bad law or classes
        _simulate_general(
            n,
            d,
            load,
            time_,
            burn,
            replace,
            policy,
            seed,
            replications,
            workers,
            batches,
            service,
            server_classes,
            steps=steps,
            engine=engine,
            start=start,
            precision=precision,
            max_steps=max_steps,
            scheduler=scheduler,
            cdf=cdf,
            plot=plot,
            out=out,
            as_json=as_json,
            control_variates=control_variates,
        )
        return
    client = dask_client(scheduler, connect_timeout, workers)
    try:
        caught: list[warnings.WarningMessage] = []
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = _collect_warnings(caught)
            res = _simulate(
                n,
                d,
                load,
                steps=steps,
                time=time_,
                burn_in=burn,
                engine=engine,
                replace=replace,
                start=start,
                seed=seed,
                replications=replications,
                workers=workers,
                time_mode=time_mode,
                eps=eps,
                precision=precision,
                max_steps=max_steps,
                batches=batches,
                client=client,
                control_variates=control_variates,
                policy=policy,
            )
    finally:
        if client is not None:
            client.close()
    for w in caught:
        click.echo(f"supermarket: warning: {w.message}", err=True)
    data = res.to_dict(cdf_points=cdf)
    data["params"]["load"] = float(load)
    data["params"]["load_text"] = load
    if out:
        write_text(out, json.dumps(to_jsonable(data), indent=2, allow_nan=False))  # whole or not at all
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig = res.plot()
        try:
            save_figure(fig, plot, dpi=120)  # a write error (disk full) is one line, exit 1
        finally:
            plt.close(fig)
    if as_json:
        print_json(data)
        return
    click.echo(res.summary(cdf_points=cdf))
    if out:
        click.echo(f"wrote {out}")
    if plot:
        click.echo(f"wrote {plot}")
