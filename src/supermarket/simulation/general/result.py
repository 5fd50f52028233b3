"""The result of :func:`supermarket.simulation.general.simulate_general`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ...jsonable import to_jsonable
from ...stats import ErrorEstimate
from ...system.service import ServerClasses, ServiceLaw

if TYPE_CHECKING:  # for the annotation only: estimate builds it and imports this module
    from .estimate import ResponseCounts

__all__ = ["ClassResult", "GeneralResult", "no_stationary_value", "unstable_classes"]

#: The note of an estimate of a quantity that is infinite in equilibrium (no error bar is printed).
INFINITE = "infinite in equilibrium"
#: The note of an estimate of a quantity that grows with time (an overloaded class of servers).
GROWING = "grows without bound (no stationary value)"
#: The note of the capacity-balance self-check when a class is overloaded: the identity is one of
#: equilibrium, and the overloaded class keeps part of the arrivals (no error bar is printed).
UNBALANCED = "no check: an overloaded class keeps customers, and capacity balance holds only in equilibrium"


def no_stationary_value(e: ErrorEstimate, why: str) -> ErrorEstimate:
    """``e`` with no error bar: the run's average is kept as ``mean`` but the standard error is
    NaN and ``reliable`` False, ``note`` saying why (``why``: :data:`INFINITE` or :data:`GROWING`)."""
    return ErrorEstimate(e.mean, math.nan, math.nan, math.nan, math.nan, False, "none", e.blocks, e.block_size, why)


def unstable_classes(policy: str, lam: float, server_classes: ServerClasses) -> list[int]:
    """The classes whose own load ``λ s̄/s_k`` is at least 1 under random routing (each server
    gets the same arrival rate ``λ s̄`` whatever its speed); none under the other rules, which
    are stable for ``λ < 1`` (docs/model.md §15)."""
    if policy != "random":
        return []
    sbar = server_classes.mean_speed
    return [k for k, v in enumerate(server_classes.speeds) if lam * sbar >= v]


def render_estimate(e: ErrorEstimate) -> str:
    """``mean ± stderr``; for a quantity with no stationary value, what it is and no ±."""
    if e.method == "none" and e.note in (INFINITE, GROWING, UNBALANCED):
        return f"{e.note} (this run's average {e.mean:.5g}; no error bar)"
    return f"{e.mean:.5g} ± {e.stderr:.2g}" if e.reliable else f"{e.mean:.5g} (error unknown: {e.note})"


@dataclass(frozen=True, eq=False)
class ClassResult:
    """One class of servers.

    Attributes
    ----------
    fraction, speed : float
        Its share of the servers and their speed.
    servers : int
        Its number of servers.
    u_mean, u_stderr : numpy.ndarray
        ``E[u_ℓ]`` for ℓ = 1, 2, … (the fraction of the class's servers with at least ℓ
        customers, time average) and standard errors.
    mean_queue_length : ErrorEstimate
        Time-average number of customers per server of the class (``Σ_ℓ u_ℓ``).
    sojourn : ErrorEstimate
        Mean sojourn time of the customers who joined a server of the class.
    """

    fraction: float
    speed: float
    servers: int
    u_mean: np.ndarray
    u_stderr: np.ndarray
    mean_queue_length: ErrorEstimate
    sojourn: ErrorEstimate

    def to_dict(self) -> dict:
        return {
            "fraction": self.fraction,
            "speed": self.speed,
            "servers": self.servers,
            "u_mean": self.u_mean,
            "u_stderr": self.u_stderr,
            "mean_queue_length": self.mean_queue_length.brief(),
            "sojourn": self.sojourn.brief(),
        }


@dataclass(frozen=True, eq=False)
class GeneralResult:
    """Time averages and response times of a run of the per-queue event engine.

    Every estimate is an :class:`~supermarket.stats.ErrorEstimate`: batch means over the
    run's time batches with the blocking estimator (one replication), pooled over
    replications (several).  The time averages are adjusted by the capacity-balance control
    variate where it reduces their error (docs/model.md §14); response times are not.

    Attributes
    ----------
    n, d, lam : int, int, float
        Servers, choices, load per unit of capacity.
    policy : str
        Dispatch rule; ``replace`` says whether ``jsq-d`` samples with replacement.
    service : ServiceLaw
    server_classes : ServerClasses
    arrival_rate : float
        ``nλ·s̄``.
    time, burn_in : float
        Measured time and burn-in (continuous-time units) per replication.
    replications, batches : int
    events : int
        Events simulated (arrivals and departures, burn-in included).
    wall_s : float
        Wall-clock seconds of the runs (compilation excluded on a warm cache).
    u_mean, u_stderr : numpy.ndarray
        ``E[u_ℓ]``, ℓ = 1, 2, …, over all servers, and standard errors.
    mean_queue_length : ErrorEstimate
        Time-average customers per server, ``Σ_ℓ E[u_ℓ]``.
    sojourn, waiting : ErrorEstimate
        Mean sojourn and waiting times of the customers who arrived in the measured window.
    sojourn_quantiles, waiting_quantiles : dict
        ``{q: ErrorEstimate}``: the mean of the batch quantiles with its blocking error (the
        bias of a batch quantile is of order 1/(customers per batch)).
    classes : tuple of ClassResult
    customers : int
        Customers measured.
    interrupted : bool
        Stopped by Ctrl-C: the result holds the batches completed.
    notes : tuple of str
    control_variates : bool
        Whether the capacity control was applied where it pays.
    variance_reduction : dict or None
        Measured ratio of long-run variances, plain over adjusted, for ``u_mean`` (per level)
        and ``mean_queue_length``; NaN where the control was not used (no gain).
    cdf_counts : ResponseCounts or None
        The measured sojourn and waiting times, binned: the CDFs of :meth:`cdf` (None: not kept).
    precision : dict or None
        With ``precision=``: how the target went (:mod:`supermarket.simulation.law_precision`).
    trajectory : Trajectory or None
        With ``record_every``: the records of replication 0 on a grid in time
        (:mod:`supermarket.simulation.records`; JSON ``trajectory``).

    ``to_dict()`` starts with :meth:`shared`, the keys and shapes every simulate result shares
    (:mod:`supermarket.simulation.shape`): the quantiles sit inside ``sojourn`` and ``waiting``.
    """

    n: int
    d: int
    lam: float
    policy: str
    replace: bool
    service: ServiceLaw
    server_classes: ServerClasses
    arrival_rate: float
    time: float
    burn_in: float
    replications: int
    batches: int
    events: int
    wall_s: float
    u_mean: np.ndarray
    u_stderr: np.ndarray
    mean_queue_length: ErrorEstimate
    sojourn: ErrorEstimate
    waiting: ErrorEstimate
    sojourn_quantiles: dict
    waiting_quantiles: dict
    classes: tuple
    customers: int
    interrupted: bool = False
    notes: tuple = ()
    control_variates: bool = False
    variance_reduction: dict | None = None
    cdf_counts: ResponseCounts | None = None
    precision: dict | None = None
    trajectory: Any = None  # with record_every=: the records of replication 0 (simulation.records)
    engine: ClassVar[str] = "events"  # the engine that ran
    time_mode: ClassVar[str] = "continuous"  # exact event times (docs/model.md §1.1)

    def __post_init__(self) -> None:
        # Screens: no error bar (nor a "reliable" flag) on a quantity that has no stationary value.
        # Pareto with alpha <= 2 has E[S²] = ∞: mean waiting, sojourn and queue length are infinite
        # in equilibrium (a customer can join behind a residual service of infinite mean).
        # Under random routing an overloaded class grows without bound, and so do the totals.
        infinite = self.service.name == "pareto" and not math.isfinite(self.service.scv)
        over = unstable_classes(self.policy, self.lam, self.server_classes)
        if not (infinite or over):
            return
        why = INFINITE if infinite else GROWING
        _set = object.__setattr__
        for name in ("mean_queue_length", "sojourn", "waiting"):
            _set(self, name, no_stationary_value(getattr(self, name), why))
        classes = []
        for k, c in enumerate(self.classes):
            if infinite or k in over:
                w = INFINITE if infinite else GROWING
                c = ClassResult(
                    c.fraction,
                    c.speed,
                    c.servers,
                    c.u_mean,
                    np.full_like(np.asarray(c.u_stderr, float), math.nan) if k in over else c.u_stderr,
                    no_stationary_value(c.mean_queue_length, w),
                    no_stationary_value(c.sojourn, w),
                )
            classes.append(c)
        _set(self, "classes", tuple(classes))
        if over:
            # the overloaded class's customers and levels enter every total
            _set(self, "u_stderr", np.full_like(np.asarray(self.u_stderr, float), math.nan))
            for name in ("sojourn_quantiles", "waiting_quantiles"):
                _set(self, name, {q: no_stationary_value(e, GROWING) for q, e in getattr(self, name).items()})

    @property
    def events_per_second(self) -> float:
        return self.events / self.wall_s if self.wall_s > 0 else math.nan

    def cdf(self, points: int) -> dict:
        """The empirical sojourn and waiting CDFs of the measured customers on ``points`` times
        from 0 to 1.1 × the measured sojourn p99.9, with their errors between replications
        (docs/model.md §14).

        Parameters
        ----------
        points : int
            Number of grid points, >= 2 (ValueError naming ``cdf_points`` otherwise).

        Returns
        -------
        dict
            ``t``, ``sojourn`` (``P(S ≤ t)``), ``waiting`` (``P(W ≤ t)``; at 0 the atom
            ``P(W = 0)``), the keys of the profile engine's ``cdf``, and ``sojourn_stderr``,
            ``waiting_stderr`` (None where no error is trusted: one replication, an overloaded
            class, or every replication giving the same 0 or 1, as ``P(S ≤ 0) = 0``).
        """
        if self.cdf_counts is None:
            raise ValueError("cdf_points: this result keeps no response times (it was made without them)")
        return self.cdf_counts.cdf(points)

    def to_dict(self, *, cdf_points: int | None = None) -> dict:
        """Plain JSON (through :func:`supermarket.jsonable.to_jsonable`); with ``cdf_points``,
        also ``cdf``: :meth:`cdf` on that many points."""
        out: dict[str, Any] = to_jsonable(
            {
                **self.shared(),
                "arrival_rate": self.arrival_rate,
                "customers": self.customers,
                "interrupted": self.interrupted,
                "notes": list(self.notes),
                "control_variates": self.control_variates,
                "error_bars": (
                    "between independent replications, Student t (none from one replication); time averages "
                    "adjusted by the capacity-balance control variate where it pays"
                    if self.control_variates
                    else "between independent replications, Student t (none from one replication; no control variates)"
                ),
            }
        )
        if self.precision is not None:
            out["precision"] = to_jsonable(self.precision)
        if cdf_points is not None:
            out["cdf"] = to_jsonable(self.cdf(cdf_points))
        if self.trajectory is not None:  # the profile engines' key (record_every=)
            out["trajectory"] = self.trajectory.to_dict()
        return out

    def plot(self, path: Any = None) -> Any:
        """The figure of :func:`supermarket.simulation.law_figure.plot_law` (saved at ``path``)."""
        from ..law_figure import plot_law

        return plot_law(self, path)

    def shared(self) -> dict:
        """The keys every simulate result shares, in the one shape of
        :mod:`supermarket.simulation.shape` (the start of :meth:`to_dict`): ``events`` simulated
        (burn-in included), ``time`` and ``burn_in`` per replication, ``mean_queue_length`` as an
        estimate dict, ``sojourn`` and ``waiting`` with their quantiles inside, ``classes``.

        Returns
        -------
        dict
        """
        from .. import shape as _shape

        est = _shape.estimate_dict
        return _shape.shared_block(
            engine="events",
            **_shape.law_engine_fields(self),
            mean_queue_length=est(self.mean_queue_length),
            sojourn=_shape.response_block(
                est(self.sojourn), {q: est(e) for q, e in self.sojourn_quantiles.items()}, "customers"
            ),
            waiting=_shape.response_block(
                est(self.waiting), {q: est(e) for q, e in self.waiting_quantiles.items()}, "customers"
            ),
            variance_reduction=self.variance_reduction,
            variance_reduction_note=(
                "" if self.control_variates else "control variates off (no control variates asked for)"
            ),
            classes=self.classes,
        )

    def summary(self, *, cdf_points: int | None = None) -> str:
        """A few lines for people; with ``cdf_points``, the table of :meth:`cdf` after them."""

        pm = render_estimate

        lines = [
            f"n={self.n} d={self.d} λ={self.lam:g} policy={self.policy} service={self.service.spec} "
            f"classes={self.server_classes.spec}",
            f"{self.events:,} events, {self.replications} replication(s) of {self.time:g} time units after "
            f"{self.burn_in:g} of burn-in; {self.events_per_second / 1e6:.3g} million events per second",
            f"mean queue length {pm(self.mean_queue_length)}; sojourn {pm(self.sojourn)}; waiting {pm(self.waiting)}",
        ]
        for q, e in self.sojourn_quantiles.items():
            lines.append(f"sojourn q{q:g}: {pm(e)}")
        if len(self.classes) > 1:
            for c in self.classes:
                lines.append(
                    f"class {c.fraction:g}:{c.speed:g} ({c.servers} servers): mean queue length "
                    f"{pm(c.mean_queue_length)}; sojourn {pm(c.sojourn)}"
                )
        vr = (self.variance_reduction or {}).get("mean_queue_length", math.nan)
        if self.control_variates and math.isfinite(vr) and self.mean_queue_length.reliable:
            lines[2] = lines[2].replace(";", f" (variance reduction ×{vr:.3g});", 1)
        lines.append(
            "(± one standard error between independent replications, Student t on R − 1 degrees of freedom; "
            + (
                "time averages adjusted by the capacity balance Σ f_k s_k E[u_k1] = λ s̄ where it pays, "
                "docs/model.md §14)"
                if self.control_variates
                else "no control variates)"
            )
        )
        lines.extend(self.notes)
        if self.precision is not None:
            from ..law_precision import summary_lines

            lines.extend(summary_lines(self.precision))
        if cdf_points is not None:
            lines.extend(_cdf_table(self.cdf(cdf_points)))
        return "\n".join(lines)


def _cdf_table(cdf: dict) -> list[str]:
    """The lines of the measured customers' response-time CDF (:meth:`GeneralResult.cdf`)."""
    from ..joined import cdf_lines

    return cdf_lines(cdf, "the measured customers; docs/model.md §14")
