"""The ``--server-classes`` paths of ``simulate``, ``meanfield`` and ``exact`` (docs/model.md §15):
each command calls one helper here, so that its own body changes by a few lines."""

from __future__ import annotations

import json
from typing import Any

import click

from ._common import print_json, to_jsonable, write_text

__all__ = ["simulate_cli", "meanfield_cli", "exact_cli"]


def _emit(data: dict, text: str, out: Any, as_json: bool) -> None:
    if out:
        write_text(str(out), json.dumps(to_jsonable(data), indent=2, allow_nan=False))
    if as_json:
        print_json(data)
        return
    click.echo(text)
    if out:
        click.echo(f"wrote {out}")


def simulate_cli(
    *,
    n: int,
    d: int,
    load: str,
    steps: int | None,
    time_: float | None,
    burn: float | None,
    replace: bool,
    policy: str,
    seed: int,
    replications: int,
    workers: int | None,
    batches: int | None,
    control_variates: bool,
    server_classes: str,
    out: Any,
    as_json: bool,
    **unused: Any,
) -> None:
    """``simulate --server-classes`` with exponential service: the count engine; with a phase-type
    ``--service`` and ``--engine phase``, the count engine of docs/model.md §15.7."""
    from ..simulation.classes import simulate_classes

    refused = {
        "precision": "--precision",
        "max_steps": "--max-steps",
        "scheduler": "--scheduler",
        "cdf": "--cdf",
        "plot": "--plot",
    }
    for key, flag in refused.items():
        if unused.get(key) is not None:
            raise click.UsageError(
                f"{flag} does not go with --server-classes (the count engine with classes, docs/model.md §15)"
            )
    service = unused.get("service") or "exp"
    phase = unused.get("engine") == "phase"
    if (unused.get("engine") not in ("profile", None) and not phase) or unused.get("start") not in ("empty", None):
        raise click.UsageError(
            "--engine and --start do not go with --server-classes (the count engine with classes starts empty; "
            "--engine events runs the per-queue event engine)"
        )
    burn_time = None
    if burn is not None:
        from ..system.service import parse_server_classes

        lam = float(load)
        per = 1.0  # events per unit of capacity and time: 1 + λ, or λ + μ̂ on the phase engine (§15.7)
        if phase:
            import numpy as np

            from ..system.service import parse_service

            per = float(np.max(-np.diag(np.asarray(parse_service(service).T, float))))
        burn_time = (
            float(burn)
            if steps is None
            else float(burn) / (n * parse_server_classes(server_classes).mean_speed * (per + lam))
        )
    kw: dict[str, Any] = dict(
        server_classes=server_classes,
        policy=policy,
        replace=replace,
        time=time_,
        events=steps,
        burn_in=burn_time,
        seed=seed,
        replications=replications,
        workers=workers,
        batches=256 if batches is None else batches,
        control_variates=control_variates,
    )
    res: Any
    if phase:
        from ..simulation.classes_phase import simulate_classes_phase

        res = simulate_classes_phase(n, d, load, service=service, **kw)
    else:
        res = simulate_classes(n, d, load, **kw)
    data = res.to_dict()
    data["load_text"] = load
    _emit(data, res.summary(), out, as_json)


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
    """``meanfield --server-classes``: the per-class fixed point (no --n, --time, --plot, --cdf);
    with a phase-type ``--service``, per class and phase (docs/model.md §15.5)."""
    import math

    from ..meanfield.classes import classes_fixed_point
    from ..system.service import parse_service

    law = parse_service(service)
    if law.alpha is None:
        raise click.UsageError(
            f"--service {law.spec} has no phase-type form: meanfield --server-classes takes exp, erlang:K, "
            f"hyperexp:SCV or ph:FILE.json; `supermarket simulate --server-classes … --service {law.spec}` runs it "
            "on the per-queue event engine"
        )

    for key in ("n", "time", "plot", "cdf", "levels", "scheduler"):
        if other.get(key) is not None:
            raise click.UsageError(f"--{key} does not go with --server-classes (the per-class fixed point only)")
    if other.get("replace") is False:
        raise click.UsageError("--no-replace does not go with --server-classes (the mean field does not depend on it)")
    if isinstance(d, float) and math.isinf(d):
        raise click.UsageError("--d inf does not go with --server-classes")
    res: Any
    if law.is_exponential:
        res = classes_fixed_point(int(d), load, server_classes, policy=policy)
    else:
        from ..meanfield.classes_phase import classes_phase_fixed_point

        res = classes_phase_fixed_point(int(d), load, server_classes, law, policy=policy)
    data = res.to_dict()
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

    law = parse_service(service)  # a bad law first, then the refused options
    for flag, value in (refused or {}).items():
        if value:
            raise click.UsageError(f"{flag} does not go with --server-classes (per-class means only)")
    if law.alpha is None:
        raise click.UsageError(
            f"--service {law.spec} has no phase-type form: exact --server-classes takes exp, erlang:K, "
            f"hyperexp:SCV or ph:FILE.json; `supermarket simulate --server-classes … --service {law.spec}` runs it "
            "on the per-queue event engine"
        )
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
