"""The ``--server-classes`` paths of ``meanfield`` and ``exact`` (docs/model.md §15):
each command calls one helper here, so that its own body changes by a few lines."""

from __future__ import annotations

import json
from typing import Any

import click

from ._common import print_json, to_jsonable, write_text

__all__ = ["meanfield_cli", "fluid_cli", "exact_cli"]


def _emit(data: dict, text: str, out: Any, as_json: bool) -> None:
    if out:
        write_text(str(out), json.dumps(to_jsonable(data), indent=2, allow_nan=False))
    if as_json:
        print_json(data)
        return
    click.echo(text)
    if out:
        click.echo(f"wrote {out}")


def meanfield_cli(
    *,
    d: Any,
    load: str,
    policy: str,
    server_classes: str,
    as_json: bool,
    out: Any = None,
    service: str = "exp",
    **other: Any,
) -> None:
    """``meanfield --server-classes``: the per-class fixed point (no --time, --plot, --cdf);
    with a phase-type ``--service``, per class and phase (docs/model.md §15.5); with ``--n``
    the refined mean field and the linear noise (§15.8, :mod:`._refined_classes`)."""
    import math

    from ..meanfield.classes import classes_fixed_point
    from ..system.service import parse_service
    from ._refined_classes import add_classes_refined, classes_refined_lines, classes_refined_of

    law = parse_service(service)  # phase-type: cli/meanfield.py refused the others (supermarket.system.methods)

    for key in ("time", "plot", "cdf", "levels", "scheduler"):
        if other.get(key) is not None:
            raise click.UsageError(
                f"--{key} does not go with --server-classes (the per-class fixed point, and with --n its refined "
                "mean field, only)"
            )
    if other.get("replace") is False:
        raise click.UsageError("--no-replace does not go with --server-classes (the mean field does not depend on it)")
    if isinstance(d, float) and math.isinf(d):
        raise click.UsageError("--d inf does not go with --server-classes")
    n = other.get("n")
    rmf = None if n is None else classes_refined_of(int(d), load, server_classes, law, policy)  # refusals first
    res: Any
    if law.is_exponential:
        res = classes_fixed_point(int(d), load, server_classes, policy=policy)
    else:
        from ..meanfield.classes_phase import classes_phase_fixed_point

        res = classes_phase_fixed_point(int(d), load, server_classes, law, policy=policy)
    data = res.to_dict()
    text = res.summary()
    if n is not None:  # docs/model.md §15.8
        add_classes_refined(data, rmf, n)
        text = "\n".join([text, *classes_refined_lines(data, n)])
    _emit(data, text, out, as_json)


def fluid_cli(
    *,
    d: Any,
    load: str,
    policy: str,
    as_json: bool,
    server_classes: str | None = None,
    service: str = "exp",
    out: Any = None,
    **other: Any,
) -> None:
    """``meanfield --policy jsq|jiq|jbt`` with ``--server-classes`` or a phase-type ``--service``: the
    fluid fixed point (docs/model.md §2.1; no --n, --time, --plot, --cdf, --levels)."""
    from ..meanfield.fixed_points import fixed_point_report
    from ..system.methods import smooth_mean_field
    from ..system.spec import System

    for key, part in (("time", "time"), ("n", "n")):  # the table's reason: a discontinuous drift
        if other.get(key) is not None:
            smooth_mean_field(policy, part, f"--{key}")
    for key in ("plot", "cdf", "levels", "scheduler"):
        if other.get(key) is not None:
            raise click.UsageError(f"--{key} does not go with --policy {policy} here (the fluid fixed point only)")
    if other.get("start", "empty") != "empty":
        raise click.UsageError("--start is the initial profile of the ODE: it needs --time")
    system = System(None, int(d), load, policy, service=service, server_classes=server_classes)
    from ..meanfield.fluid import fluid_fixed_point

    res = fluid_fixed_point(system.rule, system.d, system.lam, system.server_classes, system.service)
    data = fixed_point_report(system)
    _emit(data, res.summary(), out, as_json)


def exact_cli(
    *,
    n: int,
    d: int,
    load: str,
    policy: str,
    replace: bool,
    server_classes: str,
    cap: int | None,
    tol: float,
    as_json: bool,
    out: Any = None,
    refused: dict[str, Any] | None = None,
    service: str = "exp",
    max_seconds: float | None = None,
    progress: Any = None,
) -> None:
    """``exact --server-classes``: the stationary law of the per-class profile chain, or with a
    phase-type ``service`` of the per-class (length, phase) chain (the options in ``refused``
    must be unset)."""
    from ..stationary.classes import solve_classes
    from ..system.service import parse_service

    law = parse_service(service)  # phase-type: cli/exact.py refused the others (supermarket.system.methods)
    for flag, value in (refused or {}).items():
        if value:
            raise click.UsageError(f"{flag} does not go with --server-classes (per-class means only)")
    res: Any
    if law.is_exponential:
        res = solve_classes(
            n, d, load, server_classes, policy=policy, replace=replace, cap=cap, tol=tol,
            max_seconds=max_seconds, progress=progress,
        )  # fmt: skip
    else:
        from ..stationary.classes_phase import solve_classes_phase

        res = solve_classes_phase(
            n, d, load, server_classes, law, policy=policy, replace=replace, cap=cap, tol=tol,
            max_seconds=max_seconds, progress=progress,
        )  # fmt: skip
    if res.mass_at_cap >= tol:  # a fixed --cap (or the largest the state limit allows) too low for --tol
        click.echo(
            f"supermarket: warning: P(some queue at the cap) = {res.mass_at_cap:.3g} ≥ --tol {tol:g}: the numbers "
            f"are those of a system whose queues are capped at {res.cap}; raise --cap or leave it out",
            err=True,
        )
    _emit(res.to_dict(), res.summary(), out, as_json)
