"""``supermarket exact``: the exact stationary law of a small system (docs/model.md §11)."""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from typing import Any

import click

from ..model import MAX_CDF_POINTS
from ._args import takes_args
from ._budget import SECONDS
from ._common import COUNT, LOAD, OUTPUT_FIGURE, CountType, print_json, save_figure
from ._phase import exact_phase_cli
from .options import one_task_options, policy_option, replace_option, run_once, service_option

NOTE_SECONDS = 5.0  # a search predicted to take longer says so before it starts


@dataclass(frozen=True)
class ExactArgs:
    """The options of ``supermarket exact``, one field per option (click's names)."""

    n: int
    d: int
    load: str
    replace: bool
    policy: str
    tol: float
    cap: int | None
    quantiles: tuple[float, ...]
    profile_law: bool
    cdf_points: int | None
    max_seconds: float
    plot: str | None
    service: str
    scheduler: str | None
    connect_timeout: float
    as_json: bool
    server_classes: str | None


@click.command()
@click.option(
    "--n", "n", type=COUNT, default=3, show_default=True, help="Number of servers (small: the states are C(n+cap, n))."
)
@click.option("--d", "d", type=COUNT, default=2, show_default=True, help="Number of choices d.")
@click.option(
    "--load",
    "load",
    type=LOAD,
    default="0.9",
    show_default=True,
    help="Load λ in (0, 1). The default is 0.9, not the 0.99 of simulate, theory and mixing: at 0.99 the "
    "default n = 3 needs queue lengths into the hundreds, millions of states, beyond the solver's limit.",
)
@replace_option(True, "Sample the d queues with replacement (--no-replace: without, d ≤ n).")
@policy_option("--no-replace is for jsq-d only.")
@click.option(
    "--tol",
    "tol",
    type=float,
    default=1e-6,
    show_default=True,
    help="Raise the queue-length cap until P(some queue at the cap) < tol.",
)
@click.option("--cap", "cap", type=COUNT, default=None, help="A fixed queue-length cap instead of the search.")
@click.option(
    "--quantile",
    "quantiles",
    type=float,
    multiple=True,
    help="Response-time quantile level (repeatable; default 0.5 0.9 0.99 0.999).",
)
@click.option("--profile-law", "profile_law", is_flag=True, help="Also print P(u = ·) (states with probability ≥ tol).")
@click.option(
    "--cdf",
    "cdf_points",
    type=CountType(maximum=MAX_CDF_POINTS, minimum=2),
    default=None,
    help="Also print the sojourn/waiting CDF on this many grid points.",
)
@click.option(
    "--max-seconds",
    "max_seconds",
    type=SECONDS,
    default=60.0,
    show_default=True,
    help="Refuse at once a solve predicted (one idle core) to take longer; the refusal names the "
    "largest n (or --cap) that fits.",
)
@click.option(
    "--plot",
    "plot",
    type=OUTPUT_FIGURE,
    default=None,
    help="Save a figure (PNG, or by the suffix) of E[u_i] and the maximum.",
)
@service_option(
    "A phase-type law gives the exact law of a tiny phase-type system (docs/model.md §13: E[u_i], the "
    "queue-length law, the mean queue length).",
    phase_type_only=True,
)
@one_task_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option(
    "--server-classes",
    "server_classes",
    default=None,
    help="Classes of servers FRACTION:SPEED,… (e.g. 0.5:2,0.5:1; load per unit of capacity): the per-class "
    "chain (docs/model.md §15.4); per-class E[u], queue lengths and sojourn times; with a phase-type --service, "
    "by class, length and phase (§15.6).",
)
@takes_args(ExactArgs)
def exact(args: ExactArgs) -> None:
    """Exact stationary law of the profile chain for small n (docs/model.md §11): E[u_i], the
    law of the maximum queue length, the mean queue length and the response-time law, with
    the truncation bound; sparse linear algebra, no simulation."""
    from ._common import Heartbeat

    with Heartbeat("exact") as hb:
        try:
            _exact(args, progress=hb.note)
        except ValueError as exc:
            import threading

            from ..stationary.solver import ILU_THREAD, BudgetExceeded

            if isinstance(exc, BudgetExceeded) and any(
                t.name == ILU_THREAD and t.is_alive() for t in threading.enumerate()
            ):
                # the budget ran out inside an incomplete LU (one C call that cannot be
                # stopped): say so and leave now instead of waiting for it to end
                hb.__exit__(None, None, None)
                click.echo(f"supermarket: error: {' '.join(str(exc).split())}", err=True)
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(2)
            raise


def _exact(a: ExactArgs, progress: Any = None) -> None:
    """The solver the method table names for the system, run and printed."""
    from ..system.methods import exact_solver
    from ..system.spec import System

    system = System(
        a.n, a.d, a.load, rule=a.policy, replace=a.replace, service=a.service, server_classes=a.server_classes
    )
    solver = exact_solver(system)  # the one table (supermarket.system.methods): a law without one is refused
    if solver in ("classes", "classes_phase") and a.server_classes is not None:  # §15.4; phase-type --service §15.6
        from ._classes import exact_cli

        exact_cli(a, progress)
        return
    if solver == "phase":  # docs/model.md §13
        exact_phase_cli(
            a.n, a.d, a.load, service=a.service, policy=a.policy, replace=a.replace, cap=a.cap, tol=a.tol,
            as_json=a.as_json, plot=a.plot, cdf_points=a.cdf_points, quantiles=a.quantiles,
            profile_law=a.profile_law, max_seconds=a.max_seconds, progress=progress,
        )  # fmt: skip
        return
    _note_long_search(a)
    res = _solve(a, progress)
    _warn_capped(res, a.tol)
    _show(a, res)


def _note_long_search(a: ExactArgs) -> None:
    """One line on stderr, before the work, when the cap search is predicted to take over
    :data:`NOTE_SECONDS` (and fits in ``--max-seconds``)."""
    if a.cap is None and 0 < a.tol <= 0.1 and a.max_seconds > 0:
        from ..result import human_seconds
        from ..stationary.profile import MAX_STATES, estimate_seconds, least_states

        M, S = least_states(a.n, a.d, a.load, a.tol)
        secs = estimate_seconds(a.n, M) if S <= MAX_STATES else math.inf
        if NOTE_SECONDS < secs <= a.max_seconds:  # (beyond the limits solve refuses at once, in one line)
            click.echo(
                f"supermarket: the cap search ends at a cap of at least {M} ({S:,} states): expect at "
                f"least {human_seconds(secs)} (one idle core; more on a busy one); a larger --tol or a "
                "fixed --cap is faster",
                err=True,
            )


def _solve(a: ExactArgs, progress: Any) -> Any:
    """:func:`supermarket.stationary.profile.solve` here or as one task on ``--scheduler``; Ctrl-C
    inside an incomplete LU leaves at once (exit 130)."""
    from ..response import DEFAULT_QUANTILES
    from ..stationary.profile import solve

    qs = tuple(a.quantiles) if a.quantiles else DEFAULT_QUANTILES
    try:
        return run_once(
            a.scheduler,
            a.connect_timeout,
            solve,
            a.n,
            a.d,
            a.load,
            replace=a.replace,
            tol=a.tol,
            cap=a.cap,
            quantiles=qs,
            profile_law=a.profile_law,
            max_seconds=a.max_seconds,
            policy=a.policy,
            **({"progress": progress} if a.scheduler is None else {}),
        )
    except KeyboardInterrupt:
        import threading

        from ..stationary.solver import ILU_THREAD

        if any(t.name == ILU_THREAD and t.is_alive() for t in threading.enumerate()):
            # Ctrl-C during an incomplete LU (one C call that cannot be stopped): nothing is
            # left to write, so leave now instead of waiting for the factorization to end
            click.echo("supermarket: interrupted", err=True)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        raise


def _warn_capped(res: Any, tol: float) -> None:
    """The warning of a fixed ``--cap`` too low for ``--tol``: the law of a capped system."""
    tr = res.truncation
    if tr["mass_at_cap"] >= tol:  # only a fixed --cap gets here: the law of a capped system, not of the model
        click.echo(
            f"supermarket: warning: P(some queue at the cap) = {tr['mass_at_cap']:.3g} ≥ --tol {tol:g} "
            f"(arrivals dropped {tr['dropped_fraction']:.3g}): the numbers are those of a system whose "
            f"queues are capped at {tr['cap']} and may differ from the model's by about that much; "
            "raise --cap or leave it out (the search raises the cap until below --tol)",
            err=True,
        )


def _show(a: ExactArgs, res: Any) -> None:
    """The figure (``--plot``), then the law as JSON or text, with ``--cdf`` and ``--profile-law``."""
    grid = None
    if a.cdf_points is not None:
        import numpy as np

        grid = np.linspace(0.0, 1.1 * max(res.sojourn.quantiles.values()), a.cdf_points)
    plot = a.plot
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig = res.plot()
        try:
            save_figure(fig, plot, dpi=120)  # whole or not at all; a write error is one line, exit 1
        finally:
            plt.close(fig)
    if a.as_json:
        out = res.to_dict(profile_law=a.tol if a.profile_law else False)
        if grid is not None:
            out["cdf"] = res.response.to_dict(cdf_grid=grid)["cdf"]
        print_json(out)
        return
    click.echo(res.summary())
    if grid is not None:
        click.echo("  t           P(S <= t)     P(W <= t)")
        for t, x, y in zip(grid, res.response.sojourn_cdf(grid), res.response.waiting_cdf(grid)):
            click.echo(f"  {t:<11.5g} {x:<13.8g} {y:.8g}")
    if a.profile_law:
        click.echo(f"P(u = ·): counts (c_1, c_2, …) with probability ≥ {a.tol:g}")
        for c, p in res.profile_law(a.tol):
            click.echo(f"  {c!s:<30} {p:.10g}")
    if plot:
        click.echo(f"wrote {plot}")  # the closing line of every command that writes a file
