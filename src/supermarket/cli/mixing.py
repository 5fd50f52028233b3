"""``supermarket mixing``: coalescence and mixing times from a chosen start (docs/model.md §2, §6)."""

from __future__ import annotations

from dataclasses import dataclass

import click

from ._args import takes_args
from ._common import COUNT, LOAD, N_COUNT, TaskProgress, print_json, stderr_is_tty
from .options import (
    dask_session,
    deprecated_alias,
    json_option,
    parallel_options,
    policy_option,
    replace_option,
    replications_option,
    seed_option,
    server_classes_option,
    service_option,
    start_option,
)


@dataclass(frozen=True)
class MixingArgs:
    """The options of ``supermarket mixing``, one field per option (click's names)."""

    n: int
    d: int
    load: str
    start: str
    replications: int
    max_steps: int | None
    burn_in: int | None
    seed: int
    workers: int | None
    scheduler: str | None
    connect_timeout: float
    replace: bool
    policy: str
    service: str
    server_classes: str | None
    as_json: bool


@click.command()
@click.option("--n", "n", type=N_COUNT, default=1000, show_default=True, help="Number of servers (1e4 accepted).")
@click.option("--d", "d", type=COUNT, default=10, show_default=True, help="Number of choices d.")
@click.option(
    "--load",
    "load",
    type=LOAD,
    default="0.99",
    show_default=True,
    help="Load λ in (0, 1). The default is the heavy traffic of 0.99 (paper 000's regime, as in simulate and "
    "theory); meanfield, exact and perfect default to 0.9, where exact's and perfect's small systems fit.",
)
@start_option(
    "good",
    "Start: good or fixed-point (the same: the rounded fixed point, reported as "
    "fixed-point), empty, customers:G (every queue at G, ‖x‖₁ = Gn) "
    "or long:L (fixed point with one queue of length L).",
)
@replications_option(100, "Independent coupled pairs (replication r uses child r of --seed).")
@click.option(
    "--max-steps",
    type=COUNT,
    help="The most steps one replication (a coupled pair) runs after its burn-in; pairs not coalesced "
    "by then are reported as censored (default: 20 × (burn-in + the start's own lower order × "
    "(1+λ))).",
)
@click.option(
    "--burn-in-steps",
    "burn_in",
    type=COUNT,
    help="Steps of the stationary copy alone before the pair is coupled (default: 10 × k d^(k−1) n log n).",
)
@seed_option()
@parallel_options
@replace_option(
    True, "Sample the d queues with replacement (default) or, with --no-replace, without (as in paper 002)."
)
@policy_option("mixing measures JSQ(d) (the rule of its paper): the other rules are refused with the reason.")
@service_option("exp only (mixing measures a statement about exponential service): the others are refused.")
@server_classes_option("Server classes: refused with the reason (mixing measures identical servers).")
@json_option()
@deprecated_alias(
    "--burn-in",
    "--burn-in-steps",
    "burn_in",
    type=COUNT,
    why="--burn-in-steps and --burn-in-time say the unit in every command",
)
@takes_args(MixingArgs)
def mixing(args: MixingArgs) -> None:
    """Coalescence time of a copy started at --start with a stationary copy under the sorted
    coupling (docs/model.md §2), its mean, median and 90% quantile with 95% confidence intervals,
    the bound t_mix(1/4) ≤ 0.75-quantile of τ, and the paper-000 orders (docs/model.md §6).

    Steps are steps of the uniformized chain; n(1+λ) steps are one unit of time."""
    import warnings

    from .. import mixing as mx
    from ..system.methods import paper_method
    from ..system.spec import System

    a = args
    system = System(
        a.n, a.d, a.load, rule=a.policy, replace=a.replace, service=a.service, server_classes=a.server_classes
    )
    paper_method(system, "mixing", lambda key: "--" + key.replace("_", "-"))  # before any work

    bar = TaskProgress("coupled pairs", plain=a.as_json or not stderr_is_tty())
    # dask_session first: a bad address fails before any work
    with dask_session(a.scheduler, a.connect_timeout, a.workers) as client, warnings.catch_warnings(), bar:
        warnings.simplefilter("always", mx.MixingWarning)
        # the estimate is printed at once, before the long run starts
        warnings.showwarning = lambda message, *_, **__: click.echo(f"supermarket: warning: {message}", err=True)
        res = mx.coalescence(
            a.n,
            a.d,
            a.load,
            start=a.start,
            replications=a.replications,
            seed=a.seed,
            max_steps=a.max_steps,
            burn_in=a.burn_in,
            replace=a.replace,
            workers=a.workers,
            client=client,
            progress=bar,
        )
    if a.as_json:
        print_json(res.to_dict())
        return
    click.echo(res.summary())
