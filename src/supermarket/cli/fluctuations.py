"""``supermarket fluctuations``: the scaled process of paper 002 against its limit and the LNA."""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Any

import click
from rich.console import Console

from ._args import takes_args
from ._common import COUNT, FLOAT, OUTPUT_FIGURE, CountType, print_json, save_figure, stderr_is_tty
from .options import (
    dask_client,
    deprecated_alias,
    json_option,
    parallel_options,
    policy_option,
    replace_option,
    replications_option,
    seed_option,
    server_classes_option,
    service_option,
)

# fluctuations.regimes.MAX_REGIME_N, written out: importing it would load NumPy before any command runs
MAX_REGIME_N = 10**17


@dataclass(frozen=True)
class FluctuationsArgs:
    """The options of ``supermarket fluctuations``, one field per option (click's names)."""

    regime: str
    n: int
    kappa: float | None
    theta: float
    c: float | None
    zeta: float | None
    d: int | None
    centring: str
    time_: float
    burn_in: float | None
    replications: int
    seed: int
    replace: bool
    workers: int | None
    scheduler: str | None
    connect_timeout: float
    sde_paths: int
    sde_time: float
    dt: float
    reflection: str
    prelimit: bool
    grid_dt: float
    plot: str | None
    policy: str
    service: str
    server_classes: str | None
    as_json: bool


@click.command()
@click.option(
    "--regime",
    type=click.Choice(["a", "b", "c"]),
    required=True,
    help="a: d_n/√n → 0 (from --kappa); b: d_n/√n → c (from --c, --zeta); "
    "c: d_n/√n → ∞ (from --zeta, --d; d = n is JSQ).",
)
@click.option(
    "--n",
    type=CountType(maximum=MAX_REGIME_N, minimum=4),
    default=10_000,
    show_default=True,
    help="Number of servers, at least 4 (1e6 accepted).",
)
@click.option("--kappa", type=FLOAT, default=None, help="(a) κ = d_n λ_n^{d_n}; λ_n = (κ/d_n)^{1/d_n}. Default 1.")
@click.option("--theta", type=FLOAT, default=0.25, show_default=True, help="(a) d_n = ⌊n^θ⌋, 0 < θ < 1/2, unless --d.")
@click.option("--c", "c", type=FLOAT, default=None, help="(b) d_n = ⌊c√n⌋. Default 1.")
@click.option(
    "--zeta", type=FLOAT, help="(b), (c) ζ: λ_n = c_n − ζ/√n with c_n = n^(−1/(2d_n)). Default 0 in (b), 1 in (c)."
)
@click.option("--d", "d", type=COUNT, default=None, help="(a) d_n instead of ⌊n^θ⌋; (c) d_n (default n).")
@click.option(
    "--centring",
    type=click.Choice(["c_n", "one"]),
    default="c_n",
    show_default=True,
    help="(c) Q = √n(G1 − c_n) (docs/model.md §8) or √n(G1 − 1) with λ_n = 1 − ζ/√n (JSQ reading).",
)
@click.option(
    "--time",
    "time_",
    type=FLOAT,
    default=2000.0,
    show_default=True,
    help="Simulated time per replication after burn-in (10 batches each; the error bars need "
    "every batch 10 autocorrelation times long: 55-70 in each regime at the defaults, so the "
    "default has about 3 × margin).",
)
@click.option(
    "--burn-in-time",
    "burn_in",
    type=FLOAT,
    help="Burn-in, in time units, before each replication is measured (default max(20, time/10)).",
)
@replications_option(4)
@seed_option()
@replace_option(False, "Sample the d_n queues with replacement (default --no-replace: without, as in paper 002).")
@parallel_options
@click.option("--sde-paths", "sde_paths", type=COUNT, default=256, show_default=True, help="Paths of the limit SDE.")
@click.option("--sde-time", type=FLOAT, default=100.0, show_default=True, help="Time per SDE path after burn-in.")
@click.option("--dt", type=FLOAT, default=1e-3, show_default=True, help="Euler–Maruyama step.")
@click.option(
    "--reflection",
    type=click.Choice(["bridge", "projection"]),
    default="bridge",
    show_default=True,
    help="(c) reflection by the Brownian-bridge maximum over each step (no O(√dt) bias) or by "
    "projection (biased by O(√dt); docs/model.md §8).",
)
@click.option(
    "--prelimit/--no-prelimit",
    default=True,
    show_default=True,
    help="Also simulate the pre-limit diffusion (the limit's equations with this n's "
    "coefficients λ_n, c_n, d_n; derived, docs/model.md §8) as a third reference.",
)
@click.option(
    "--grid-dt",
    type=FLOAT,
    default=0.05,
    show_default=True,
    help="Spacing of the recorded grid (autocorrelations, histograms, error-bar check).",
)
@click.option("--plot", type=OUTPUT_FIGURE, help="Write a PNG: paths, histograms, autocorrelation.")
@policy_option("fluctuations measures JSQ(d) (the rule of its paper): the other rules are refused with the reason.")
@service_option("exp only (fluctuations measures a statement about exponential service): the others are refused.")
@server_classes_option("Server classes: refused with the reason (fluctuations measures identical servers).")
@json_option()
@deprecated_alias(
    "--burn-in",
    "--burn-in-time",
    "burn_in",
    type=FLOAT,
    why="--burn-in-steps and --burn-in-time say the unit in every command",
)
@takes_args(FluctuationsArgs)
def fluctuations(args: FluctuationsArgs) -> None:
    """Fluctuations of order n^(−1/2) about the near-equilibrium centre in the three regimes
    of paper 002 (docs/model.md §8; the limit diffusions are derived): the exact chain's stationary
    moments of the scaled process (z1, z2) = (Z1, Z2) in (a), (Q, Y) in (b), (c), with
    standard errors, beside the limit diffusion (Euler–Maruyama) and the finite-n linear
    noise approximation at x^n.  Conditions of the regime that fail are warned about."""
    _check(args)
    client = dask_client(args.scheduler, args.connect_timeout, args.workers)  # before any work: a bad address fails
    p = _regime_params(args)
    try:
        cmp = _compare(args, p, client)
    finally:
        if client is not None:
            client.close()
    _report(args, cmp)


def _check(args: FluctuationsArgs) -> None:
    """Refuse, before any work, what the regimes' theorems do not cover (JSQ(d_n), exponential
    service, identical servers) and the options of another regime."""
    from click.core import ParameterSource

    from ..system.methods import paper_method
    from ..system.spec import System

    paper_method(
        System(max(args.n, 2), 2, 0.5, rule=args.policy, service=args.service, server_classes=args.server_classes),
        "fluctuations",
        lambda key: "--" + key.replace("_", "-"),
    )
    regime = args.regime
    if regime != "a" and click.get_current_context().get_parameter_source("theta") != ParameterSource.DEFAULT:
        raise click.UsageError(
            f"--theta applies to --regime a only (regime {regime} sets d_n from {'--c' if regime == 'b' else '--d'})"
        )
    for option, changed in (("--centring", args.centring != "c_n"), ("--reflection", args.reflection != "bridge")):
        if regime != "c" and changed:
            raise click.UsageError(f"{option} applies to --regime c only")


def _regime_params(args: FluctuationsArgs) -> Any:
    """The regime's parameters at this n (:func:`supermarket.fluctuations.regime_params`), its
    warnings printed one line each."""
    from .. import fluctuations as fl

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", fl.RegimeWarning)
        warnings.simplefilter("always", fl.WorkWarning)
        kw: dict[str, Any] = dict(kappa=args.kappa, c=args.c, zeta=args.zeta, d=args.d, replace=args.replace)
        if args.regime == "a":
            kw["theta"] = args.theta
        if args.regime == "c":
            kw["centring"] = args.centring
        p = fl.regime_params(args.regime, args.n, **kw)
    for w in caught:
        click.echo(f"supermarket: warning: {w.message}", err=True)
    return p


def _compare(args: FluctuationsArgs, p: Any, client: Any) -> Any:
    """The chain, the limit diffusion and the LNA compared (:func:`supermarket.fluctuations.compare`),
    a status line on a terminal."""
    from .. import fluctuations as fl

    busy = "simulating the chain and the diffusions… (Ctrl-C stops)"
    status = Console(stderr=True).status(busy) if stderr_is_tty() else contextlib.nullcontext()
    with status, warnings.catch_warnings():
        warnings.simplefilter("always", fl.WorkWarning)
        # the estimate is printed at once, before the long run starts
        warnings.showwarning = lambda message, *a, **k: click.echo(f"supermarket: warning: {message}", err=True)
        return fl.compare(
            p,
            time=args.time_,
            burn_in=args.burn_in,
            replications=args.replications,
            seed=args.seed,
            workers=args.workers,
            sde_paths=args.sde_paths,
            sde_time=args.sde_time,
            dt=args.dt,
            reflection=args.reflection,
            prelimit=args.prelimit,
            grid_dt=args.grid_dt,
            client=client,
        )


def _report(args: FluctuationsArgs, cmp: Any) -> None:
    """The figure (``--plot``), then the comparison as JSON or text, with the advice of a run too
    short for its error bars."""
    plot = args.plot
    if plot:
        import matplotlib.pyplot as plt

        fig = cmp.plot()
        try:
            save_figure(fig, plot, dpi=110)  # a failed write (a full disk) is one line, exit 1
        finally:
            plt.close(fig)
    out = cmp.to_dict()
    if plot:
        out["plot"] = plot
    if args.as_json:
        print_json(out)
        return
    click.echo(cmp.summary())
    m = cmp.sim.moments
    if m.adequate is False:
        click.echo(
            f"advice: the chain's error bars are too short to know: rerun with --time {m.time_needed:g} "
            "(more --replications do not lengthen the batches)"
        )
    if plot:
        click.echo(f"plot written to {plot}")
