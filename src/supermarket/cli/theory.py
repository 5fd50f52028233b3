"""``supermarket theory`` and ``supermarket design``: the papers' calculators."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import click

from .. import theory as th
from ..model import MAX_THEORY_N
from ..parallel import call
from ..system.policies import DEFAULT_POLICY, POLICIES, RULES
from ._args import takes_args
from ._budget import SECONDS, WallBudget
from ._common import COUNT, FLOAT, LOAD, CountType, print_json
from .options import (
    ONE_TASK_HELP,
    dask_session,
    one_task_options,
    run_once,
    scheduler_option,
    seed_option,
    server_classes_option,
    timeout_option,
    workers_option,
)

#: ``design --max-seconds``'s default: exact's (a search takes seconds; --verify's default steps, seconds)
DESIGN_MAX_SECONDS = 60.0
THEORY_N = CountType(maximum=MAX_THEORY_N)  # closed forms: n up to 1e100 (Theorem 1.2 needs n >= 1e15)


@dataclass(frozen=True)
class DesignArgs:
    """The options of ``supermarket design``, one field per option (click's names)."""

    n: int | None
    load: str | None
    max_queue: int | None
    latency: float | None
    quantile: float
    d: int | None
    service: str | None
    policy: str
    server_classes: str | None
    verify: bool
    steps: int
    seed: int
    workers: int | None
    scheduler: str | None
    connect_timeout: float
    max_seconds: float
    as_json: bool


@click.command()
@click.option(
    "--n", "n", type=THEORY_N, default=10_000, show_default=True, help="Number of servers (1e6 accepted; up to 1e100)."
)
@click.option("--d", "d", type=COUNT, default=20, show_default=True, help="Number of choices d.")
@click.option(
    "--load",
    "load",
    type=LOAD,
    default="0.99",
    show_default=True,
    help="Load λ in (0, 1), read exactly as written. The default is the heavy traffic of 0.99 "
    "(paper 000's regime, as in simulate and mixing); meanfield, exact and perfect default to 0.9, where "
    "exact's and perfect's small systems fit.",
)
@click.option("--eps", "eps", type=FLOAT, default=0.1, show_default=True, help="ε of the good set N^ε, in (0, 1/10].")
@one_task_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def theory(n: int, d: int, load: str, eps: float, scheduler: str | None, connect_timeout: float, as_json: bool) -> None:
    """Closed forms for (n, d, λ): k_{λ,d}, the fixed point π, the linearised profile
    (derived), the good set, the conditions of Theorem 1.2, mixing bounds, the slow mode
    (derived) and the paper-002 regime (derived)."""
    if not 0 < eps <= 0.1:  # checked here so that the message names the option
        raise click.BadParameter(f"ε must lie in (0, 0.1] (0.1 = 1/10, paper 000); got {eps!r}", param_hint="'--eps'")
    rep = run_once(scheduler, connect_timeout, th.theory_report, n, d, load, eps)
    if as_json:
        print_json(rep.to_dict())
        return
    click.echo(rep.summary())


def _pred(values: Sequence[float | None], j: int) -> str:
    """A prediction as text: empty past the end, "—" where it is outside its range (None)."""
    if j >= len(values):
        return ""
    return "—" if values[j] is None else f"{values[j]:.6g}"


@click.command()
@click.option(
    "--n",
    "n",
    type=THEORY_N,
    default=None,
    help="Number of servers (predicted counts; with --verify, the simulated n).",
)
@click.option("--load", "load", type=LOAD, default=None, help="Load λ in (0, 1).")
@click.option("--max-queue", "max_queue", type=COUNT, default=None, help="Largest acceptable queue length K.")
@click.option(
    "--latency",
    "latency",
    type=FLOAT,
    default=None,
    help="Target sojourn-time quantile, in mean service times (with --load: least d; with --d: largest load).",
)
@click.option(
    "--quantile", "quantile", type=FLOAT, default=0.99, show_default=True, help="Quantile level of --latency."
)
@click.option(
    "--d", "d", type=COUNT, default=None, help="Number of choices (with --latency: the largest load that meets it)."
)
@click.option(
    "--service",
    "service",
    type=str,
    default=None,
    help="With --latency: the service law (exp, erlang:K, hyperexp:SCV, ph:FILE.json; lognormal:SCV, "
    "pareto:ALPHA, deterministic by their two-moment phase-type fit), docs/model.md §13.1.",
)
@click.option(
    "--policy",
    "policy",
    type=click.Choice([*POLICIES, "best"], case_sensitive=False),
    default=DEFAULT_POLICY,
    show_default=True,
    help="With --latency: the dispatch rule ("
    + ", ".join(POLICIES)
    + "; docs/model.md §2), or best (random, jsq-d, jiq and jsq compared at --load, with their costs). A rule "
    "that reads d ("
    + ", ".join(r.name for r in RULES.values() if r.uses_d)
    + ") gives the least d at --load (or the largest load at --d); one that reads none says whether the target "
    "holds at --load and the largest load that meets it. The other rules' sojourn laws are those of their "
    "mean-field (fluid) fixed points: in the mean-field limit; at finite n use --verify.",
)
@server_classes_option(
    "With --latency: classes of servers FRACTION:SPEED,… (e.g. 0.5:2,0.5:1; load per unit of total capacity), "
    "the least d (or the largest load) whose sojourn quantile, mixed over the classes, meets the target, from "
    "the mean field with classes (docs/model.md §15.2; with erlang, hyperexp or ph §15.5). Rules without a "
    "mean field with classes (jsq, jiq, jbt) are refused with the reason."
)
@click.option(
    "--verify", "verify", is_flag=True, help="With --latency and --n: check the answer by simulating n servers."
)
@click.option(
    "--steps",
    "steps",
    type=COUNT,
    default=2_000_000,
    show_default=True,
    help="Events per replication for --verify (with --service: the event engine, about 2 events per customer).",
)
@seed_option("Root seed (integer >= 0) for --verify.")
@workers_option(
    "With --verify: local processes running the replications (default: all cores); the numbers do not depend on it."
)
@scheduler_option(
    ONE_TASK_HELP + " With --verify, each verification replication is one task on the "
    "cluster instead (replication r keeps child r of --seed: the same numbers as locally)."
)
@timeout_option()
@click.option(
    "--max-seconds",
    "max_seconds",
    type=SECONDS,
    default=DESIGN_MAX_SECONDS,
    show_default=True,
    help="Wall-clock budget of the whole design, every stage (the mean-field or phase-type search, the "
    "fits, --verify's simulation, a cluster's wait): when it runs out, the command stops with one line "
    "naming the stage (exit 2), as exact --max-seconds does.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@takes_args(DesignArgs)
def design(args: DesignArgs) -> None:
    """Size a load balancer.  --max-queue K: the least d with k_(λ,d) ≤ K (docs/model.md §4).
    --latency T: the least d (given --load) or the largest load (given --d) whose mean-field
    sojourn-time --quantile is at most T (docs/model.md §10); --n N --verify checks it by simulation.
    --service LAW: the least d (or the largest load) under that service law (docs/model.md
    §13.1), --verify with the event engine; --policy best compares random, jsq-d, jiq and jsq
    with their costs.  --policy RULE: any rule (the least d of a rule that reads d; whether the
    target holds and the largest load for one that reads none); --server-classes: the mean field
    with classes (docs/model.md §15); both --verify with the event engine."""
    _check_design(args)
    verify = args.verify
    fix = "a larger --max-seconds, or fewer --steps for --verify" if verify else "a larger --max-seconds"
    with WallBudget(args.max_seconds, "design", fix) as budget:
        show = _design(replace(args, policy=args.policy.lower()), budget)
    show()


def _check_design(a: DesignArgs) -> None:
    """Refuse, before any work, the options that do not go together (the ones given for a
    question they do not apply to)."""
    if a.max_queue is not None and a.latency is not None:
        raise click.UsageError("give either --max-queue or --latency, not both")
    given = _given_options(("quantile", "d", "service", "policy", "server_classes", "verify", "steps", "seed"))
    if a.latency is None and a.max_queue is not None and given:
        raise click.UsageError(
            f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to --latency only; "
            "--max-queue K computes the least d for --load (drop "
            f"{'it' if len(given) == 1 else 'them'})"
        )
    unused = [o for o in _given_options(("steps", "seed")) if not a.verify]
    if unused:
        raise click.UsageError(f"{', '.join(unused)} appl{'ies' if len(unused) == 1 else 'y'} to --verify only")
    if a.workers is not None and not a.verify:
        raise click.UsageError("--workers is for the replications of --verify")


def _design(a: DesignArgs, budget: WallBudget) -> Callable[[], None]:
    """The design's answer, computed under ``budget`` (``a.policy`` in lower case); returns what
    prints it (no argument)."""
    if a.latency is not None and a.policy == "best" and a.server_classes is not None:
        raise click.UsageError("--policy best compares the rules with one server class; drop --server-classes")
    if a.latency is not None and (a.server_classes is not None or a.policy not in ("jsq-d", "best")):
        from ._design_rules import design_rule_cli

        return _printer(design_rule_cli(a, budget), a.as_json)
    if a.latency is not None and (a.service is not None or a.policy != "jsq-d"):
        return _design_service(a, budget)
    if a.latency is not None:
        return _design_latency(a, budget)
    if a.max_queue is None:
        raise click.UsageError("give --max-queue K (with --load) or --latency T (with --load or --d)")
    if a.load is None:
        raise click.UsageError("--max-queue needs --load")
    budget.stage("the least d for --max-queue")
    return _design_max_queue(a)


def _printer(rep: Any, as_json: bool, out: dict | None = None) -> Callable[[], None]:
    """What prints a design's answer (after the budget: an answer is never cut in the middle)."""
    if as_json:
        return lambda: print_json(rep.to_dict() if out is None else out)
    return lambda: click.echo(rep.summary())


def _given_options(names: Iterable[str]) -> list[str]:
    """The options among ``names`` that the user gave on the command line (not defaults)."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    return [
        f"--{name.replace('_', '-')}"
        for name in names
        if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)
    ]


def _design_latency(a: DesignArgs, budget: WallBudget) -> Callable[[], None]:
    """``--latency`` for ``jsq-d`` with exponential service: the mean-field search, and with
    ``--verify`` its simulation."""
    from ..design import latency as lt

    load, d, n = a.load, a.d, a.n
    if (load is None) == (d is None):
        raise click.UsageError("--latency needs exactly one of --load (answer: least d) or --d (answer: largest load)")
    if a.verify and n is None:
        raise click.UsageError("--verify needs --n (the number of servers to simulate)")
    budget.stage("connecting to the scheduler" if a.scheduler else "the mean-field search")
    with dask_session(a.scheduler, a.connect_timeout, a.workers) as client:
        # the mean-field answer is one computation (one task on the cluster); the
        # replications of --verify are one task each
        budget.stage("the mean-field search")
        if load is not None:
            rep = call(lt.least_d_for_latency, load, a.quantile, a.latency, client=client)
        else:
            rep = call(lt.max_load_for_latency, d, a.quantile, a.latency, client=client)
        if a.verify:
            assert n is not None  # refused above
            budget.stage("--verify's simulation")
            v = lt.verify_latency(rep, n, steps=a.steps, seed=a.seed, workers=a.workers, client=client)
            rep = lt.LatencyDesign(**{**rep.__dict__, "verify": v})
    return _printer(rep, a.as_json)


def _design_service(a: DesignArgs, budget: WallBudget) -> Callable[[], None]:
    """``--latency`` with ``--service`` or ``--policy best``: the least d, the largest load or the
    rules compared, under the service law (exp by default)."""
    from ..design import service as ds

    load, d, n, policy, verify, scheduler = a.load, a.d, a.n, a.policy, a.verify, a.scheduler
    service = a.service or "exp"
    if (load is None) == (d is None):
        raise click.UsageError("--latency needs exactly one of --load (answer: least d) or --d (answer: largest load)")
    if d is not None and policy == "best":
        raise click.UsageError("--policy best compares the rules at a load: give --load, not --d")
    if d is not None and verify:
        raise click.UsageError("--verify with --service checks a least d: give --load, not --d")
    if verify and n is None:
        raise click.UsageError("--verify needs --n (the number of servers to simulate)")
    if verify and policy == "best":
        raise click.UsageError("--verify checks one d; use it without --policy best")
    if verify and scheduler is not None:
        raise click.UsageError("--verify with --service runs the event engine locally; drop --scheduler")
    quantile, latency = a.quantile, a.latency
    assert latency is not None  # the command comes here with --latency only
    rep: ds.RuleComparison | ds.ServiceDesign | ds.ServiceLoadDesign
    if d is not None:
        budget.stage("the search for the largest load")
        if scheduler is None:  # a local search: a heartbeat on stderr says which load it evaluates
            from ._common import Heartbeat

            with Heartbeat("design: largest load") as hb:

                def note(where: str) -> None:
                    hb.note(where)
                    budget.stage(f"the search for the largest load, at {where}")

                rep = ds.max_load_for_service_latency(d, quantile, latency, service, progress=note)
        else:
            rep = run_once(scheduler, a.connect_timeout, ds.max_load_for_service_latency, d, quantile, latency, service)
    elif policy == "best":
        budget.stage("the comparison of the rules")
        rep = run_once(scheduler, a.connect_timeout, ds.compare_rules, load, quantile, latency, service)
    else:
        budget.stage("the search for the least d")
        design = run_once(
            scheduler, a.connect_timeout, ds.least_d_for_service_latency, load, quantile, latency, service
        )
        if verify:
            assert n is not None  # refused above
            budget.stage("--verify's simulation")
            time = a.steps / (2.0 * n * design.load)  # an arrival and a departure per customer
            v = ds.verify_service_design(design, n, time=time, seed=a.seed, workers=a.workers)
            design = ds.ServiceDesign(**{**design.__dict__, "verify": v})
        rep = design
    return _printer(rep, a.as_json)


def _design_max_queue(a: DesignArgs) -> Callable[[], None]:
    """``--max-queue K``: the least d whose k_(λ,d) is at most K, with the counts of ``--n`` servers."""
    n = a.n
    rep = run_once(a.scheduler, a.connect_timeout, th.design, a.load, a.max_queue, n)
    out = rep.to_dict()
    if n is not None:
        out["predicted_counts"] = [n * s for s in rep.share_by_length]  # NaN (outside the regime) -> null
    return _printer(rep, a.as_json, out)
