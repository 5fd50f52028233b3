"""The ``--server-classes`` paths of ``meanfield`` and ``exact`` (docs/model.md §15):
each command calls one helper here, so that its own body changes by a few lines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ._common import print_json

if TYPE_CHECKING:
    from .exact import ExactArgs
    from .meanfield import MeanfieldArgs

__all__ = ["meanfield_cli", "fluid_cli", "exact_cli"]


def _emit(data: dict, text: str, as_json: bool) -> None:
    if as_json:
        print_json(data)
        return
    click.echo(text)


def meanfield_cli(a: MeanfieldArgs) -> None:
    """``meanfield --server-classes``: the per-class fixed point (no --time, --plot, --cdf);
    with a phase-type ``--service``, per class and phase (docs/model.md §15.5); with ``--n``
    the refined mean field and the linear noise (§15.8, :mod:`._refined_classes`)."""
    import math

    from ..meanfield.classes import classes_fixed_point
    from ..system.service import parse_service
    from ._refined_classes import add_classes_refined, classes_refined_lines, classes_refined_of

    law = parse_service(a.service)  # phase-type: cli/meanfield.py refused the others (supermarket.system.methods)
    assert a.server_classes is not None  # the command comes here with --server-classes only
    for key in ("time", "plot", "cdf", "levels", "scheduler"):
        if getattr(a, key) is not None:
            raise click.UsageError(
                f"--{key} does not go with --server-classes (the per-class fixed point, and with --n its refined "
                "mean field, only)"
            )
    if a.replace is False:
        raise click.UsageError("--no-replace does not go with --server-classes (the mean field does not depend on it)")
    d = a.d
    if isinstance(d, float) and math.isinf(d):
        raise click.UsageError("--d inf does not go with --server-classes")
    n = a.n
    rmf = None if n is None else classes_refined_of(int(d), a.load, a.server_classes, law, a.policy)  # refusals first
    res: Any
    if law.is_exponential:
        res = classes_fixed_point(int(d), a.load, a.server_classes, policy=a.policy)
    else:
        from ..meanfield.classes_phase import classes_phase_fixed_point

        res = classes_phase_fixed_point(int(d), a.load, a.server_classes, law, policy=a.policy)
    data = res.to_dict()
    text = res.summary()
    if n is not None:  # docs/model.md §15.8
        add_classes_refined(data, rmf, n)
        text = "\n".join([text, *classes_refined_lines(data, n)])
    _emit(data, text, a.as_json)


def fluid_cli(a: MeanfieldArgs) -> None:
    """``meanfield --policy jsq|jiq|jbt`` with ``--server-classes`` or a phase-type ``--service``: the
    fluid fixed point (docs/model.md §2.1; no --n, --time, --plot, --cdf, --levels)."""
    from ..meanfield.fixed_points import fixed_point_report
    from ..system.methods import smooth_mean_field
    from ..system.spec import System

    policy = a.policy
    for key, part in (("time", "time"), ("n", "n")):  # the table's reason: a discontinuous drift
        if getattr(a, key) is not None:
            smooth_mean_field(policy, part, f"--{key}")
    for key in ("plot", "cdf", "levels", "scheduler"):
        if getattr(a, key) is not None:
            raise click.UsageError(f"--{key} does not go with --policy {policy} here (the fluid fixed point only)")
    if a.start != "empty":
        raise click.UsageError("--start is the initial profile of the ODE: it needs --time")
    system = System(None, int(a.d), a.load, policy, service=a.service, server_classes=a.server_classes)
    from ..meanfield.fluid import fluid_fixed_point

    res = fluid_fixed_point(system.rule, system.d, system.lam, system.server_classes, system.service)
    data = fixed_point_report(system)
    _emit(data, res.summary(), a.as_json)


def exact_cli(a: ExactArgs, progress: Any = None) -> None:
    """``exact --server-classes``: the stationary law of the per-class profile chain, or with a
    phase-type ``--service`` of the per-class (length, phase) chain (``--quantile``,
    ``--profile-law``, ``--cdf`` and ``--plot`` must be unset)."""
    from ..stationary.classes import solve_classes
    from ..system.service import parse_service

    assert a.server_classes is not None  # the command comes here with --server-classes only
    law = parse_service(a.service)  # phase-type: cli/exact.py refused the others (supermarket.system.methods)
    refused = {"--quantile": a.quantiles, "--profile-law": a.profile_law, "--cdf": a.cdf_points, "--plot": a.plot}
    for flag, value in refused.items():
        if value:
            raise click.UsageError(f"{flag} does not go with --server-classes (per-class means only)")
    kw: dict[str, Any] = dict(
        policy=a.policy, replace=a.replace, cap=a.cap, tol=a.tol, max_seconds=a.max_seconds, progress=progress
    )
    res: Any
    if law.is_exponential:
        res = solve_classes(a.n, a.d, a.load, a.server_classes, **kw)
    else:
        from ..stationary.classes_phase import solve_classes_phase

        res = solve_classes_phase(a.n, a.d, a.load, a.server_classes, law, **kw)
    if res.mass_at_cap >= a.tol:  # a fixed --cap (or the largest the state limit allows) too low for --tol
        click.echo(
            f"supermarket: warning: P(some queue at the cap) = {res.mass_at_cap:.3g} ≥ --tol {a.tol:g}: the numbers "
            f"are those of a system whose queues are capped at {res.cap}; raise --cap or leave it out",
            err=True,
        )
    _emit(res.to_dict(), res.summary(), a.as_json)
