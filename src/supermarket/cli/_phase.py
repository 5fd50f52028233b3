"""The ``--service`` routes of ``meanfield`` and ``exact`` for the phase-type
laws (docs/model.md §13): each command calls one function here with a few lines."""

from __future__ import annotations

import math
from typing import Any

import click

from ._common import print_json

__all__ = [
    "is_exponential_service",
    "meanfield_phase_cli",
    "exact_phase_cli",
    "ENGINE_HELP",
]

ENGINE_HELP = (
    " With --service erlang:K, hyperexp:SCV or ph:FILE: phase (the phase-type count engine, the default for "
    "those laws) or events (the per-queue event engine, with response-time quantiles)."
)


def is_exponential_service(service: str) -> bool:
    """Whether ``service`` names the exponential law (a ValueError names a bad law)."""
    from ..system.service import parse_service

    return parse_service(service).is_exponential


def _law(service: str, command: str) -> Any:
    """The phase-type law of ``service``, or a one-line refusal for a law without one."""
    from ..system.service import parse_service

    law = parse_service(service)
    if law.alpha is None:
        raise click.UsageError(
            f"--service {law.spec} has no phase-type form: {command} takes exp, erlang:K, hyperexp:SCV or "
            f"ph:FILE.json; `supermarket simulate --service {law.spec}` runs it on the per-queue event engine"
        )
    return law


def meanfield_phase_cli(
    d: float, load: str, *, service: str, policy: str, replace: bool, levels: int | None, as_json: bool, **refused: Any
) -> None:
    """``meanfield --service …``: the phase-type mean-field fixed point (docs/model.md §13)."""
    law = _law(service, "meanfield")
    from ..system import policies as pol

    policy = pol.check_policy(policy)
    if policy not in pol.SMOOTH_POLICIES:
        raise click.UsageError(
            f"--policy {policy} with --service {law.spec}: no phase-type mean field for a discontinuous drift "
            "(jsq-d and random only); `supermarket simulate` runs it"
        )
    for key, flag in {"time": "--time", "plot": "--plot", "cdf": "--cdf"}.items():
        if refused.get(key) is not None:
            raise click.UsageError(f"{flag} does not go with --service {law.spec} (the fixed point and --n only)")
    if refused.get("start", "empty") != "empty" or not replace:
        raise click.UsageError(
            f"--start and --no-replace do not go with --service {law.spec} (the fixed point and --n only)"
        )
    if not (isinstance(d, int) or (isinstance(d, float) and d.is_integer())) or math.isinf(d):
        raise click.UsageError(f"--d must be a whole number with --service {law.spec}, got {d}")
    from ..meanfield.phase import phase_report

    n = refused.get("n")
    rmf = None if n is None else _refined_of(int(d), load, law, policy, levels)  # its refusals before any work
    rep = phase_report(int(d), load, law, policy=policy, levels=levels)
    if n is not None:
        _add_refined(rep, rmf, n)
    lam = rep["load"]
    u = rep["u"]
    if as_json:
        print_json(rep)
        return
    lines = [
        f"supermarket meanfield  d={int(d)}  λ={lam:g}  policy={policy}  service={law.spec} (SCV {law.scv:g})",
        rep["source"],
        "i   s_i (share of queues with at least i customers)",
    ]
    for i, v in enumerate(u[:30]):
        if v < 1e-13:
            break
        lines.append(f"{i + 1:<3d} {v:.10g}")
    lines.append(
        f"mean queue length {rep['mean_queue_length']:.10g}; busy fraction {u[0]:.10g} (= λ, I2); "
        f"mean sojourn time (Little's law) {rep['mean_sojourn_time_little']:.10g}"
    )
    lines.append("busy servers by phase " + ", ".join(f"{b:.6g}" for b in rep["busy_by_phase"]))
    lines.append(f"residual {rep['residual']:.2g}; flow identity (I1) error {rep['flow_error']:.2g}")
    if n is not None:
        lines += _refined_lines(rep, n)
    click.echo("\n".join(lines))


def _refined_of(d: int, load: str, law: Any, policy: str, levels: int | None) -> Any:
    """The phase-type refined mean field (docs/model.md §13), its accuracy warnings silenced:
    they are reported in the block, in words."""
    import warnings

    from ..meanfield.lyapunov import AccuracyWarning
    from ..meanfield.refined_phase import phase_refined_mean_field

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AccuracyWarning)
        return phase_refined_mean_field(d, load, law, policy=policy, levels=levels)


def _add_refined(rep: dict, rmf: Any, n: int) -> None:
    """``meanfield --service … --n N``: the refined mean field ``π + V/n`` and the linear-noise
    covariance of ``√n u`` at the fixed point (docs/model.md §13), in the keys of the exponential
    report (``refined``, ``covariance_of``, ``covariance``)."""
    from ._refined import refined_block

    rep["n"] = n
    rep["refined"] = refined_block(rmf, n, rep["mean_queue_length"], True)
    rep["refined"]["sampling"] = (
        "with replacement (Gast-Van Houdt expansion of the phase-type drift, docs/model.md §13)"
    )
    rep["refined"]["derivative_error"] = rmf.derivative_error
    rep["covariance_of"] = "sqrt(n) (u - π): linear-noise approximation at the fixed point π (docs/model.md §13)"
    rep["covariance"] = rmf.W.tolist() if rmf.accurate else None
    if not rmf.accurate:
        rep["covariance_note"] = "not accurate: " + "; ".join(rmf.issues)


def _refined_lines(rep: dict, n: int) -> list[str]:
    """The text of the refined block of :func:`_add_refined`."""
    ref = rep["refined"]
    if not ref["trusted"]:
        return [f"refined mean field at n={n}: not shown, the linear solves lost their accuracy ({ref['reason']})"]
    out = [
        f"refined mean field at n={n} (Gast–Van Houdt, docs/model.md §13): ΣV = {ref['sum_V']:.6g}; "
        + (
            f"refined mean queue length {ref['mean_queue_length']:.10g}"
            if ref["valid_for_n"]
            else ref.get("note", "π + V/n is no profile at this n")
        ),
        "i   V_i          s_i + V_i/n    sd of √n u_i",
    ]
    cov = rep["covariance"]
    for i, (s, v, m) in enumerate(zip(rep["u"][:30], ref["V"], ref["mean"])):
        if s < 1e-13:
            break
        sd = "—" if cov is None else f"{max(cov[i][i], 0.0) ** 0.5:.6g}"
        mean = "—" if m is None or not ref["valid_for_n"] else f"{m:.10g}"
        out.append(f"{i + 1:<3d} {v:<12.6g} {mean:<14s} {sd}")
    return out


def exact_phase_cli(
    n: int,
    d: int,
    load: str,
    *,
    service: str,
    policy: str,
    replace: bool,
    cap: int | None,
    tol: float,
    as_json: bool,
    **refused: Any,
) -> None:
    """``exact --service …``: the exact stationary law of a tiny phase-type system (solve_phase)."""
    law = _law(service, "exact")
    for key, flag in {"plot": "--plot", "cdf_points": "--cdf"}.items():
        if refused.get(key) is not None:
            raise click.UsageError(f"{flag} does not go with --service {law.spec} (the queue-length law only)")
    if refused.get("quantiles") or refused.get("profile_law"):
        raise click.UsageError(f"--quantile and --profile-law do not go with --service {law.spec}")
    import time

    from ..stationary.phase import solve_phase

    max_seconds = refused.get("max_seconds")
    progress = refused.get("progress")
    t_start = time.perf_counter()

    def budget_kw() -> dict[str, Any]:  # one wall-clock budget over the whole cap search
        left = None if max_seconds is None else max(1e-9, max_seconds - (time.perf_counter() - t_start))
        return {"max_seconds": left, "progress": progress}

    from ..stationary.solver import BudgetExceeded

    try:
        if cap is not None:
            res = solve_phase(n, d, load, law.alpha, law.T, cap=cap, replace=replace, policy=policy, **budget_kw())
        else:
            c = 8
            res = solve_phase(n, d, load, law.alpha, law.T, cap=c, replace=replace, policy=policy, **budget_kw())
            while res.truncation >= tol:
                c = 2 * c
                res = solve_phase(n, d, load, law.alpha, law.T, cap=c, replace=replace, policy=policy, **budget_kw())
    except BudgetExceeded as exc:  # each cap's solve got what was left: say the user's budget and the time spent
        import re

        spent = time.perf_counter() - t_start
        text = re.sub(
            r"max_seconds = \S+ s \(--max-seconds\) ran out after \S+ s",
            f"max_seconds = {max_seconds:g} s (--max-seconds) ran out after {spent:.3g} s",
            str(exc),
        )
        raise BudgetExceeded(text) from None
    lam = res.lam
    out = {
        "service": law.to_dict(),
        "engine": "exact-phase",
        "policy": res.policy,
        "n": res.n,
        "d": res.d,
        "load": lam,
        "load_text": load,
        "replace": res.replace,
        "cap": res.cap,
        "states": res.states,
        "u": res.u.tolist(),
        "queue_law": res.queue_law.tolist(),
        "mean_queue_length": res.mean_queue_length,
        "mean_sojourn_time_little": res.mean_queue_length / lam,
        "busy_fraction": float(res.u[0]),
        "truncation": res.truncation,
        "residual": res.residual,
        "method": res.method,
    }
    if as_json:
        print_json(out)
        return
    lines = [
        f"supermarket exact  n={res.n}  d={res.d}  λ={lam:g}  policy={res.policy}  service={law.spec} "
        f"(SCV {law.scv:g})",
        f"exact stationary law (docs/model.md §13): {res.states:,} states, queues capped at {res.cap}, "
        f"P(some queue at the cap) = {res.truncation:.3g}; residual {res.residual:.2g} ({res.method})",
        "i   E[u_i]",
    ]
    for i, v in enumerate(res.u[:30]):
        if v < 1e-13:
            break
        lines.append(f"{i + 1:<3d} {v:.10g}")
    lines.append(
        f"mean queue length {res.mean_queue_length:.10g}; busy fraction {res.u[0]:.10g}; "
        f"mean sojourn time (Little's law) {res.mean_queue_length / lam:.10g}"
    )
    click.echo("\n".join(lines))
