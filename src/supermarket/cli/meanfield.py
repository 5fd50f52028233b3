"""``supermarket meanfield``: mean-field ODE, fixed point, refined mean field and linear noise."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import click
import numpy as np

from ._args import takes_args
from ._common import COUNT, FLOAT, LOAD, OUTPUT_FIGURE, CountType, print_json, save_figure
from ._phase import meanfield_phase_cli
from ._refined import refined_block
from .options import json_option, one_task_options, policy_option, replace_option, run_once, service_option


@dataclass(frozen=True)
class MeanfieldArgs:
    """The options of ``supermarket meanfield``, one field per option (click's names)."""

    d: int | float
    load: str
    n: int | None
    time: float | None
    start: str
    replace: bool
    policy: str
    levels: int | None
    tol: float | None
    points: int
    plot: str | None
    cdf: int | None
    service: str
    scheduler: str | None
    connect_timeout: float
    as_json: bool
    server_classes: str | None


class DType(click.ParamType):
    """``d``: a positive integer (``1e6`` accepted) or ``inf`` for the constrained limit."""

    name = "D"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | float:
        from ..model import parse_count

        text = str(value).strip().lower()
        if text in ("inf", "infinity", "∞"):
            return math.inf
        try:
            return parse_count("--d", value)
        except (TypeError, ValueError) as exc:
            self.fail(f"{exc} (or 'inf')", param, ctx)


def _parse_start(start):
    """A start name (empty, fixed-point, customers:G, long:L) or a profile written "0.9,0.5,0.1"."""
    if (isinstance(start, str) and "," in start) or _is_number(start):
        try:
            return np.array([float(x) for x in str(start).split(",") if x.strip()])
        except ValueError:
            raise ValueError(
                f"--start: a profile must be numbers separated by commas, e.g. 1,0.8,0.3; got {start!r}"
            ) from None
    return start


def _is_number(text: Any) -> bool:
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


def build_report(
    d: float,
    load: str | float,
    n: int | None = None,
    time: float | None = None,
    start: str = "empty",
    replace: bool = True,
    points: int = 201,
    levels: int | None = None,
    tol: float | None = None,
    cdf: int | None = None,
    policy: str = "jsq-d",
) -> dict:
    """Everything ``supermarket meanfield`` prints, as a plain dict (also used by ``--json``).

    ``policy`` (docs/model.md §2, "Other dispatch rules"): ``random`` is the drift with
    ``d = 1``; ``jsq``, ``jiq`` and ``jbt`` have no differentiable drift: their fluid fixed point
    only (``(λ, 0, 0, …)``, ``jbt``'s of docs/model.md §2; the ODE, ``--time``, and ``--n`` are refused)."""
    from .. import meanfield as mf
    from ..model import check_load, check_positive_float, check_positive_int
    from ..system import policies as pol

    policy = pol.check_policy(policy)
    lam = check_load(load)
    if policy not in pol.SMOOTH_POLICIES:
        return _fluid_report(policy, lam, n, time, cdf, d)
    # the drift that stands for the rule (random: d = 1)
    d, replace = mf.rule_d(policy, d, replace)
    if time is not None:
        time = check_positive_float("--time", time)
        from ..meanfield.ode import MIN_T

        if time < MIN_T:
            raise ValueError(
                f"--time must be in [{MIN_T:g}, inf) (shorter, the profile moves by less than the "
                f"solver's tolerance); got {time!r}"
            )
    points = check_positive_int("--points", points, maximum=100_000)
    kw: dict[str, Any] = {} if tol is None else {"tol": check_positive_float("--tol", tol)}
    if tol is not None and kw["tol"] >= 1:
        raise ValueError(f"--tol must be in (0, 1); got {tol!r}")
    if levels is not None and levels > mf.MAX_LEVELS:
        raise ValueError(f"--levels must be an integer in [1, {mf.MAX_LEVELS}]; got {levels}")
    rep: dict = {
        "params": {
            "d": "inf" if math.isinf(d) else d,
            "load": lam,
            "n": n,
            "replace": replace,
            "time": time,
            "start": start if isinstance(start, str) else "array",
            "policy": policy,
        }
    }
    if policy == "random":
        rep["note"] = (
            f"{pol.describe(policy)}: the drift with d = 1, P(u) = u (n independent M/M/1 queues; docs/model.md §2)"
        )
    if math.isinf(d):
        rep["fixed_point"] = [lam]
        rep["mean_queue_length"] = lam
        rep["levels"] = 1
        rep["note"] = (
            "d = inf: constrained (water-filling) ODE of paper 002 (docs/model.md §3), fixed point "
            "(λ, 0, 0, ...); the refined mean field and the covariance are not defined there"
        )
        if n is not None:
            rep["refined"] = None
            rep["covariance"] = None
    else:
        d = check_positive_int("d", d)  # finite here: an int (what the solvers below require)
        if n is not None and not replace and d > n:
            raise ValueError(f"--d must be <= --n without replacement; got d={d}, n={n}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", mf.AccuracyWarning)  # reported below, in words
            rmf = mf.refined_mean_field(d, lam, replace=replace, levels=levels, **kw)
        rep["fixed_point"] = rmf.pi.tolist()
        from ..theory import mean_queue_length

        mql = mean_queue_length(d, lam)  # the whole series Σ_{i>=1} π(i), not only the levels kept
        rep["mean_queue_length"] = mql
        rep["levels"] = rmf.levels
        if n is not None:
            rep["refined"] = refined_block(rmf, n, mql, replace)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", mf.AccuracyWarning)
                res = mf.lna(d, lam, n=n, at="centre", replace=replace, levels=levels, **kw)
            rep["centre"] = res.centre.tolist()
            rep["covariance_of"] = "sqrt(n) (u - x^n): linear-noise approximation at the near-equilibrium " + (
                "centre x^n (= the fixed point with replacement)"
                if replace
                else f"centre x^n of the drift without replacement at n={n} (docs/model.md §8)"
            )
            if res.accurate:
                rep["covariance"] = res.covariance.tolist()
            else:
                rep["covariance"] = None
                rep["covariance_note"] = "not accurate: " + "; ".join(res.issues)
    cdf_points = None if cdf is None else check_positive_int("--cdf", cdf, maximum=100_000)
    _add_response_times(rep, d, lam, n, replace, cdf_points, kw.get("tol", mf.DEFAULT_TOL))
    if time is not None:
        t_eval = np.linspace(0.0, time, points)
        sol = mf.solve_meanfield(d, lam, T=time, start=_parse_start(start), t_eval=t_eval, n=n, replace=replace, **kw)
        rep["trajectory"] = {
            "t": sol.t.tolist(),
            "u": sol.u.tolist(),
            "levels": sol.levels,
            "mean_queue_length": sol.mean_queue_length.tolist(),
        }
    return rep


def _fluid_report(
    policy: str, lam: float, n: int | None, time: float | None, cdf: int | None, d: float | None = None
) -> dict:
    """The report of a rule without a differentiable drift (``jsq``, ``jiq``, ``jbt``): its fluid
    fixed point (``(λ, 0, 0, …)``; ``jbt``'s up to ``T = d``) and its response times; ``--time``
    and ``--n`` refused."""
    from .. import meanfield as mf
    from ..model import check_int, check_positive_int
    from ..system import policies as pol
    from ..system.methods import fluid_note, smooth_mean_field

    # the one table (supermarket.system.methods): the fluid fixed point exists, the ODE and the
    # refined mean field do not (a discontinuous drift); refused as the sweep refuses them
    if time is not None:
        smooth_mean_field(policy, "time", "--time")
    if n is not None:
        smooth_mean_field(policy, "n", "--n")
    rule = pol.RULES[policy]
    T = None
    if rule.uses_d:  # jbt(T = d): a whole threshold
        from ..meanfield.fluid import MAX_THRESHOLD

        if d is None or (isinstance(d, float) and not d.is_integer()):
            raise ValueError(f"--d must be a whole number in [1, {MAX_THRESHOLD}] for --policy {policy}; got {d!r}")
        T = check_int("--d", int(d), minimum=1, maximum=MAX_THRESHOLD)
    cdf_points = None if cdf is None else check_positive_int("--cdf", cdf, maximum=100_000)
    fp = [lam] if T is None else rule.fixed_point(lam, T, T).tolist()
    rt = {
        "params": {
            "d": T,
            "load": lam,
            "n": n,
            "replace": True,
            "time": None,
            "start": "empty",
            "policy": policy,
        },
        "fixed_point": fp,
        "mean_queue_length": lam if T is None else float(sum(fp)),
        "levels": len(fp),
        "note": fluid_note(policy),
    }
    if T is None:
        _add_response_times(rt, math.inf, lam, None, True, cdf_points, mf.DEFAULT_TOL)
        rt["response_source"] = f"mean field, {policy} (every customer joins an empty queue in the limit)"
        return rt
    _add_fluid_response_times(rt, rule, T, np.asarray(fp), cdf_points)
    return rt


def _add_fluid_response_times(rep: dict, rule: Any, T: int, u: np.ndarray, cdf: int | None) -> None:
    """Sojourn and waiting times at ``jbt``'s fluid fixed point ``u`` (docs/model.md §10): an arrival
    joins a queue of length at least ``k`` with probability ``P_k(u)`` (the rule's fluid ``P``)."""
    from .. import response as rs

    tails = np.clip(rule.p_fluid(np.append(u, 0.0), T), 0.0, 1.0)
    rt = rs.from_tails(tails, source=f"mean field, {rule.name} (T = {T}): its fluid fixed point [derived]",
                       params={"d": T, "load": rep["params"]["load"]})  # fmt: skip
    rep["response_source"] = rt.source
    rep["sojourn"], rep["waiting"] = rt.sojourn.to_dict(), rt.waiting.to_dict()
    if cdf is not None:
        _add_cdf(rep, rt, cdf)


def _add_cdf(rep: dict, rt: Any, cdf: int) -> np.ndarray:
    """``rep["cdf"]``: the sojourn and waiting CDFs of ``rt`` on ``cdf`` times from 0 to 1.1 × its
    largest sojourn quantile; returns the grid."""
    grid = np.linspace(0.0, 1.1 * max(rt.sojourn.quantiles.values()), cdf)
    rep["cdf"] = {
        "t": grid.tolist(),
        "sojourn": rt.sojourn_cdf(grid).tolist(),
        "waiting": rt.waiting_cdf(grid).tolist(),
    }
    return grid


def _add_response_times(
    rep: dict, d: float, lam: float, n: int | None, replace: bool, cdf: int | None, tol: float
) -> None:
    """Sojourn and waiting times (docs/model.md §10) into ``rep``: the mean field's at the top
    level (``sojourn``, ``waiting``, ``response_source``, ``cdf``), the refined ones (derived,
    order 1/n) inside ``rep["refined"]`` when the refined mean field is trusted at this n."""
    from .. import meanfield as mf
    from .. import response as rs

    if math.isinf(d):  # fixed point (λ, 0, 0, ...): every customer finds an empty queue
        rt = rs.from_tails(
            np.zeros(1),
            source="mean field, d = ∞ (every customer joins an empty queue)",
            params={"d": "inf", "load": lam},
        )
    else:
        rt = mf.response_times(int(d), lam, n=None if replace else n, replace=replace, tol=tol)
    rep["response_source"] = rt.source
    rep["sojourn"], rep["waiting"] = rt.sojourn.to_dict(), rt.waiting.to_dict()
    if rt.notes:
        rep["response_notes"] = list(rt.notes)
    grid = None if cdf is None else _add_cdf(rep, rt, cdf)
    ref = rep.get("refined")
    if not ref:
        return
    why = None
    if not ref.get("trusted"):
        why = "the refined mean field is not trusted here (see above)"
    elif not ref.get("valid_for_n"):
        why = f"π + V/n is no profile at n={n} (n is too small for the 1/n expansion)"
    rt2 = None
    if why is None:
        with warnings.catch_warnings():
            from .. import meanfield as mf

            warnings.simplefilter("ignore", mf.AccuracyWarning)
            rt2 = mf.response_times(int(d), lam, n=n, refined=True, replace=replace, tol=tol)
        if rt2.notes:
            why = "; ".join(rt2.notes)
            rt2 = None
    if rt2 is None:
        ref["sojourn"] = ref["waiting"] = None
        ref["response_note"] = why
        return
    ref["response_source"] = rt2.source
    ref["sojourn"], ref["waiting"] = rt2.sojourn.to_dict(), rt2.waiting.to_dict()
    if grid is not None:
        ref["cdf"] = {
            "t": grid.tolist(),
            "sojourn": rt2.sojourn_cdf(grid).tolist(),
            "waiting": rt2.waiting_cdf(grid).tolist(),
        }


@click.command()
@click.option(
    "--d",
    "d",
    type=DType(),
    default="2",
    show_default=True,
    help="Number of choices d (1e6 accepted), or 'inf' for the constrained d = ∞ limit.",
)
@click.option(
    "--load",
    "load",
    type=LOAD,
    default="0.9",
    show_default=True,
    help="Load λ in (0, 1). The default is 0.9, as in exact and perfect, whose answers for small n it is "
    "compared with (exact's default n = 3 is beyond its solver's limit at 0.99); simulate, theory and "
    "mixing default to the heavy traffic of 0.99.",
)
@click.option(
    "--n",
    "n",
    type=COUNT,
    default=None,
    help="Number of servers: adds the refined mean field π + V/n and the covariance of √n u.",
)
@click.option(
    "--time",
    "time",
    type=FLOAT,
    default=None,
    help="Integrate the ODE (1.1) from --start up to this time (positive, finite).",
)
@click.option(
    "--start",
    "start",
    default="empty",
    show_default=True,
    help="Start of the ODE: empty, fixed-point, customers:G, long:L (needs --n), or a profile "
    "u_1,u_2,... such as 1,0.8,0.3 (non-increasing in [0, 1]).",
)
@replace_option(
    True, "Sample the d queues with replacement (default; --no-replace: without, as in paper 002, needs --n)."
)
@policy_option("random is the drift with d = 1; a rule with a discontinuous drift gives its fluid fixed point only.")
@click.option(
    "--levels", "levels", type=CountType(maximum=5000), default=None, help="Number of levels (default: automatic)."
)
@click.option(
    "--tol", "tol", type=FLOAT, default=None, help="Drop levels whose value stays below this (default 1e-13)."
)
@click.option(
    "--points",
    "points",
    type=CountType(maximum=100_000),
    default=201,
    show_default=True,
    help="Output times of the trajectory.",
)
@click.option(
    "--plot",
    "plot",
    type=OUTPUT_FIGURE,
    default=None,
    help="Write a PNG: the trajectory u_i(t), or the fixed point vs the refined mean field.",
)
@click.option(
    "--cdf",
    "cdf",
    type=CountType(maximum=100_000),
    default=None,
    help="Add the sojourn and waiting time CDFs on this many grid points (0 to 1.1 × the p99.9 sojourn time).",
)
@service_option(
    "A phase-type law gives the phase-type mean-field fixed point (docs/model.md §13; its mean queue length "
    "and busy fraction; jsq, jiq and jbt: their fluid fixed point, §2.1), and with --n its refined mean field "
    "and linear noise (a rule with a smooth drift).",
    phase_type_only=True,
)
@one_task_options
@json_option("Print one JSON object instead of tables.")
@click.option(
    "--server-classes",
    "server_classes",
    default=None,
    help="Classes of servers FRACTION:SPEED,… (e.g. 0.5:2,0.5:1; load per unit of capacity): the per-class "
    "fixed point (docs/model.md §15.2; jsq, jiq and jbt: their fluid fixed point, §2.1); with a phase-type "
    "--service, per class and phase (§15.5); with --n, its refined mean field and linear noise (§15.8).",
)
@takes_args(MeanfieldArgs)
def meanfield(args: MeanfieldArgs) -> None:
    """Mean-field theory for (d, λ) (docs/model.md §3, §8): the fixed point π, the ODE (1.1) from a
    start profile, and with --n the refined mean field E[u_i] ≈ π(i) + V_i/n (Gast–Van Houdt)
    and the linear-noise covariance of √n u.  --d inf gives the water-filling limit of paper 002."""
    field = _field(args)
    if field == "fluid":  # a discontinuous drift with a law or classes: its fluid fixed point (§2.1)
        from ._classes import fluid_cli

        fluid_cli(args)
        return
    if field in ("classes", "classes_phase"):  # docs/model.md §15.2, with a phase-type law §15.5
        from ._classes import meanfield_cli

        meanfield_cli(args)
        return
    a = args
    if field == "phase":  # docs/model.md §13
        meanfield_phase_cli(
            a.d, a.load, service=a.service, policy=a.policy, replace=a.replace, levels=a.levels, as_json=a.as_json,
            n=a.n, time=a.time, plot=a.plot, cdf=a.cdf, start=a.start,
        )  # fmt: skip
        return
    _check_ode_options(a)
    rep = run_once(
        a.scheduler,
        a.connect_timeout,
        build_report,
        a.d,
        a.load,
        n=a.n,
        time=a.time,
        start=a.start,
        replace=a.replace,
        points=a.points,
        levels=a.levels,
        tol=a.tol,
        cdf=a.cdf,
        policy=a.policy,
    )
    _show(a, rep)


def _field(a: MeanfieldArgs) -> str:
    """Which mean field answers (the method table's name: ``ode``, ``fluid``, ``phase``,
    ``classes``, ``classes_phase``); a system without one is refused with the table's reason."""
    field = "ode"
    if a.server_classes is not None or a.service != "exp":
        from ..system.methods import mean_field, refined_mean_field
        from ..system.spec import System

        d = a.d
        if isinstance(d, int) or (isinstance(d, float) and d.is_integer()):  # --d inf: refused below
            system = System(
                None, int(d), a.load, a.policy, a.replace, service=a.service, server_classes=a.server_classes
            )
            field = mean_field(system)  # the one table (supermarket.system.methods): refused with the reason
            if a.n is not None:  # the refined mean field: refused with the table's reason
                refined_mean_field(system, "--n")
        else:
            field = "classes" if a.server_classes is not None else "phase"
    return field


def _check_ode_options(a: MeanfieldArgs) -> None:
    """Refuse the options of the ODE without ``--time``, and ``--no-replace`` without ``--n``."""
    if not a.replace and a.n is None:
        raise click.UsageError("--no-replace needs --n (the sampling law without replacement depends on n)")
    if a.time is None and a.start != "empty":
        raise click.UsageError("--start is the initial profile of the ODE: it needs --time")
    if a.time is None and click.get_current_context().get_parameter_source("points") not in (
        click.core.ParameterSource.DEFAULT,
        None,
    ):
        raise click.UsageError("--points are the output times of the ODE: it needs --time")


def _show(a: MeanfieldArgs, rep: dict) -> None:
    """The figure (``--plot``), then the report as JSON or text."""
    from ..meanfield import MeanFieldReport

    if a.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig = MeanFieldReport(rep).plot()
        try:
            save_figure(fig, a.plot, dpi=110)
        finally:
            plt.close(fig)
        rep["plot"] = a.plot
    if a.as_json:
        print_json(rep)
        return
    click.echo(MeanFieldReport(rep).summary())
