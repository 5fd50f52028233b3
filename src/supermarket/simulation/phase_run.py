"""``simulate(service="erlang:K" | "hyperexp:SCV" | "ph:FILE.json")``: the phase-type count
engine behind :func:`supermarket.simulate` (docs/model.md §13).

The phase-type service laws run by default on the counts chain ``N[ℓ, φ]`` of
:mod:`supermarket.engines.phase` (cost per event independent of ``n``); ``engine="events"``
keeps the per-queue event engine (:mod:`supermarket.simulation.general`, docs/model.md §14), which also
gives response-time quantiles.  Laws without a finite phase representation (``lognormal``,
``pareto``, ``deterministic``) and server classes always run on the event engine.

Error bars (docs/model.md §13, "Error bars of simulate"): batch means over equal stretches of
time, blocking with the automatic plateau (:func:`supermarket.stats.blocking`) in each
replication, pooled over several (``√(Σ s_r²)/R``).  The identities of §13 hold for
every phase-type law of mean 1 and every dispatch rule of :mod:`supermarket.system.policies`:

- (I1) ``E[Σ_φ t0_φ N_{>=ℓ, φ}/n] = λ E[P_{ℓ−1}]``: the control variate of ``E[u_ℓ]``
  (level by level) and, summed over ``ℓ``, of the mean queue length;
- (I2) ``E[B_φ/n] = λ (α(−T)^{-1})_φ``, whose sum is ``E[u_1] = λ`` (the busy fraction):
  a self-check, reported as z-scores.

A control-variate estimate replaces the plain one only where it is reliable and has the
smaller error; the plain estimates are kept in the result.  The mean sojourn time is
``L/λ`` by Little's law and the mean wait ``L/λ − 1`` (labelled so); the quantiles and the
CDFs come from the (length, phase) each arrival joins, counted per batch (:mod:`.joined`,
docs/model.md §13.2).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time as _time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..checks import check_int, check_positive_float
from ..jsonable import to_jsonable
from ..model import as_seed_sequence, check_load
from ..result import Result
from ..stats import MIN_BLOCKS, ErrorEstimate, blocking
from ..system import policies as _pol
from ..system.methods import check_time_mode
from ..system.phase_law import check_ph
from ..system.service import ServiceLaw, parse_service
from .joined import JoinedResponse, cdf_lines, joined_response, law_cdf, quantile_lines, response_blocks
from .law_precision import summary_lines as precision_lines
from .phase import PhaseChain, flow_series, run_batches
from .records import recorder, with_trajectory

__all__ = [
    "PhaseSimulationResult",
    "simulate_phase_service",
    "PHASE_ENGINES",
    "DEFAULT_EVENTS",
    "IDENTITIES",
]

PHASE_ENGINES = ("phase", "events")
"""Engines for a phase-type service law: the count engine (default) or the per-queue event engine."""

_SUMMARY_LEVELS = 30  # levels shown by summary() (all are in the JSON)

DEFAULT_EVENTS = 2 * 10**7
"""Measured events per replication when neither ``steps`` nor ``time`` is given."""

IDENTITIES = (
    "I1: E[sum_phi t0_phi N_(>=l, phi)/n] = lam E[P_(l-1)] for every level l (control variate of E[u_l] "
    "and, summed, of the mean queue length)",
    "I2: E[B_phi/n] = lam (alpha (-T)^-1)_phi for every phase, so E[u_1] = lam (busy fraction; self-check)",
)
"""The exact identities of docs/model.md §13: they hold for every phase-type law of mean 1
and every dispatch rule here (jsq-d, random, jsq, jiq, jbt)."""

OVERLOADED_NOTE = (
    "no control variate and no self-check: the identities (I1) and (I2) of docs/model.md §13 hold only in "
    "equilibrium, and at load λ >= 1 there is none (the servers' capacity falls short of the arrivals); "
    "busy_exact is the servers' share by phase once all are busy, α(−T)^{-1}"
)
"""The note of a run at load ``λ >= 1`` (a finite horizon with no equilibrium)."""


@dataclass(frozen=True, eq=False)
class PhaseSimulationResult(Result):
    """Time averages of ``simulate`` on the phase-type count engine (docs/model.md §13).

    Attributes
    ----------
    n, d, lam : int, int, float
        Servers, choices, load (arrivals at rate ``nλ``; service mean 1).
    policy : str
        Dispatch rule; ``replace``: whether ``jsq-d`` samples with replacement.
    service : ServiceLaw
    engine : str
        ``"phase"``.
    time, burn_in : float
        Measured time and burn-in per replication (continuous-time units).
    replications, batches : int
    events : int
        Events measured (all replications, burn-in excluded).
    wall_s : float
        Wall-clock seconds of the runs.
    u_mean, u_stderr, u_reliable, u_method : numpy.ndarray
        ``E[u_ℓ]``, ℓ = 1, 2, …, the estimate used (control variate or plain), its error,
        whether the error is trusted and which (``"cv"``, ``"plain"``, ``"rare"``).
    u_plain, u_plain_stderr : numpy.ndarray
        The plain time averages and their errors.
    mean_queue_length, mean_queue_length_plain : ErrorEstimate
        Customers per server, ``Σ_ℓ E[u_ℓ]`` (with the summed (I1) control, and plain).
    sojourn_little, waiting_little : ErrorEstimate
        Mean sojourn ``L/λ`` and wait ``L/λ − 1`` by Little's law.
    busy_exact : numpy.ndarray
        ``λ (α(−T)^{-1})_φ`` (I2); ``busy_mean``, ``busy_z`` the simulated values and z-scores.
    busy_fraction_z : float
        z-score of ``E[u_1] = λ`` (plain estimate); NaN without a trusted error.
    flow_z : numpy.ndarray
        z-scores of (I1) by level (NaN where rare or without a trusted error).
    identities : tuple of str
        The identities used and checked (:data:`IDENTITIES`).
    control_variates : bool
    notes : tuple of str
    precision : dict or None
        With ``precision=``: how the target went (:mod:`supermarket.simulation.law_precision`).
    response : JoinedResponse or None
        The sojourn and waiting laws of what the arrivals joined (:mod:`.joined`; None at λ >= 1):
        the quantiles in ``sojourn`` and ``waiting``, the CDFs of :meth:`cdf`.
    trajectory : Trajectory or None
        With ``record_every``: the records of replication 0 (:mod:`.records`; JSON ``trajectory``).

    ``to_dict()`` starts with :meth:`shared`, the keys and shapes every simulate result shares
    (:mod:`supermarket.simulation.shape`): ``sojourn_little`` and ``waiting_little`` are its
    ``sojourn`` and ``waiting``; then this engine's own keys.
    """

    n: int
    d: int
    lam: float
    policy: str
    replace: bool
    service: ServiceLaw
    engine: str
    time: float
    burn_in: float
    replications: int
    batches: int
    events: int
    wall_s: float
    u_mean: np.ndarray
    u_stderr: np.ndarray
    u_reliable: np.ndarray
    u_method: tuple
    u_plain: np.ndarray
    u_plain_stderr: np.ndarray
    mean_queue_length: ErrorEstimate
    mean_queue_length_plain: ErrorEstimate
    sojourn_little: ErrorEstimate
    waiting_little: ErrorEstimate
    busy_exact: np.ndarray
    busy_mean: np.ndarray
    busy_z: np.ndarray
    busy_fraction_z: float
    flow_z: np.ndarray
    identities: tuple
    control_variates: bool
    notes: tuple = ()
    precision: dict | None = None
    response: JoinedResponse | None = None
    time_mode: str = "discrete"  # "continuous": exponential holding times (docs/model.md §1.1)
    trajectory: Any = None  # with record_every=: a result_parts.Trajectory (simulation.records)

    #: in the shared block (:meth:`shared`), not again among the engine's own keys
    _omit: ClassVar[tuple[str, ...]] = (
        *("n", "d", "lam", "policy", "replace", "service", "engine", "time", "burn_in", "replications"),
        *("batches", "events", "wall_s", "u_mean", "u_stderr", "mean_queue_length", "sojourn_little"),
        *("waiting_little", "precision", "response", "time_mode", "trajectory"),  # precision, trajectory: when made
    )
    _extra: ClassVar[tuple[str, ...]] = ("error_bars",)
    #: the ErrorEstimate fields this engine's JSON keeps beyond the shared estimate keys
    _EXTRA_ERROR_KEYS: ClassVar[tuple[str, ...]] = ("tau_int", "block_size", "skewness")

    def shared(self) -> dict:
        """The keys every simulate result shares, in the one shape of :mod:`.shape` (the start of
        :meth:`to_dict`): ``events`` measured (all replications), ``time`` and ``burn_in`` per
        replication, ``mean_queue_length`` as an estimate dict, ``sojourn`` and ``waiting``: the
        means by Little's law (``source`` ``"little"``), the quantiles of the joined law
        (:func:`.joined.response_blocks`); ``variance_reduction`` is ``{}`` (``u_plain_stderr`` and
        ``mean_queue_length_plain`` give the plain errors).

        Returns
        -------
        dict
        """
        from . import shape as _shape

        def est(e: ErrorEstimate) -> dict:
            return _shape.estimate_dict(e, extra=self._EXTRA_ERROR_KEYS)

        sojourn, waiting = response_blocks(self.response, est(self.sojourn_little), est(self.waiting_little), est)
        return _shape.shared_block(
            engine=self.engine,
            **_shape.law_engine_fields(self),
            mean_queue_length=est(self.mean_queue_length),
            sojourn=sojourn,
            waiting=waiting,
            variance_reduction={},
            variance_reduction_note=(
                "not measured on the phase-type count engine (u_plain_stderr and mean_queue_length_plain give "
                "the plain errors)"
            ),
        )

    def to_dict(self, *, cdf_points: int | None = None) -> dict:
        """:meth:`shared`, then this engine's own keys (the plain estimates, the self-checks),
        JSON-safe; with a precision target, also ``precision``; with ``cdf_points``, ``cdf``
        (:meth:`cdf`)."""

        out = to_jsonable({**self.shared(), **super().to_dict()})
        if self.precision is not None:
            out["precision"] = to_jsonable(self.precision)
        if cdf_points is not None:
            out["cdf"] = to_jsonable(self.cdf(cdf_points))
        if self.trajectory is not None:  # the profile engines' key (record_every=)
            out["trajectory"] = self.trajectory.to_dict()
        return out

    def plot(self, path: Any = None) -> Any:
        """The figure of :func:`supermarket.simulation.law_figure.plot_law` (saved at ``path``)."""
        from .law_figure import plot_law

        return plot_law(self, path)

    def cdf(self, points: int) -> dict:
        """The sojourn and waiting CDFs of the joined law (:meth:`.joined.JoinedResponse.cdf`).

        Raises
        ------
        ValueError
            At load >= 1 (no equilibrium), naming ``cdf_points``.
        """
        return law_cdf(self.response, points, "the phase-type count engine")

    @property
    def events_per_second(self) -> float:
        """Events measured per wall-clock second."""
        return self.events / self.wall_s if self.wall_s > 0 else math.nan

    @property
    def error_bars(self) -> str:
        """How the standard errors were made."""
        what = "blocking analysis of time-batch means (automatic plateau), docs/model.md §9"
        if self.replications > 1:
            return what + f"; {self.replications} independent replications pooled (s.e. √(Σ s_r²)/R)"
        return what

    def summary(self, *, cdf_points: int | None = None) -> str:
        """The result for people, in the layout of the exponential ``simulate``; with
        ``cdf_points``, the table of :meth:`cdf` after it."""

        def pm(e: ErrorEstimate) -> str:
            return f"{e.mean:.6g} ± {e.stderr:.2g}" if e.reliable else f"{e.mean:.6g} ({e.note or 'error unknown'})"

        head = (
            f"supermarket simulate  n={self.n}  d={self.d}  λ={self.lam:g}  policy={self.policy}  "
            f"service={self.service.spec} (SCV {self.service.scv:g})  engine=phase  time=continuous"
        )
        lines = [
            head,
            f"{self.events:,} events measured over {self.time:g} time units after {self.burn_in:g} of burn-in, "
            f"{self.replications} replication(s), {self.batches} batches",
            "",
            "Time-averaged profile (docs/model.md §13)",
        ]
        rows = []
        shown = min(self.u_mean.size, _SUMMARY_LEVELS)
        for i in range(shown):
            if self.u_method[i] == "rare":
                cell = f"{self.u_mean[i]:.6g} (rare: no error bar)"
            elif self.u_reliable[i]:
                cell = f"{self.u_mean[i]:.6g} ± {self.u_stderr[i]:.2g}"
            else:
                cell = f"{self.u_mean[i]:.6g} (too short to estimate)"
            rows.append(
                [str(i + 1), cell, self.u_method[i], f"{self.flow_z[i]:.2f}" if np.isfinite(self.flow_z[i]) else "—"]
            )
        from ..result import text_table

        lines.append(text_table(["i", "simulated E[u_i] ± s.e.", "estimate", "I1 z-score"], rows))
        if shown < self.u_mean.size:
            lines.append(f"levels {shown + 1}–{self.u_mean.size} not shown (in the JSON: u_mean, u_stderr, flow_z)")
        lines.append(f"mean queue length {pm(self.mean_queue_length)}  (plain {pm(self.mean_queue_length_plain)})")
        lines.append(
            f"mean sojourn time (Little's law, L/λ) {pm(self.sojourn_little)}; "
            f"mean waiting time (Little's law, L/λ − 1) {pm(self.waiting_little)}"
        )
        bz = f"{self.busy_fraction_z:.2f}" if math.isfinite(self.busy_fraction_z) else "— (no trusted error)"
        lines.append(
            f"self-checks: busy fraction E[u_1] = λ (I2) z = {bz}; busy by phase E[B_φ/n] (I2) z = "
            + ", ".join(f"{z:.2f}" if math.isfinite(z) else "—" for z in self.busy_z)
        )
        lines.append(f"error bars: 1 s.e., {self.error_bars}")
        if self.control_variates:
            lines.append(
                "control variates: the flow identities (I1) of docs/model.md §13, level by level and summed "
                "for the mean queue length, used where they reduce a reliable error ('estimate' = cv)"
            )
        lines.extend(quantile_lines(self.response, pm))
        lines.append(f"{self.events_per_second / 1e6:.1f} million events per second; wall time {self.wall_s:.2f} s")
        lines.extend(self.notes)
        if self.precision is not None:
            lines.extend(precision_lines(self.precision))
        if cdf_points is not None:
            lines.extend(cdf_lines(self.cdf(cdf_points)))
        return "\n".join(lines)


def _cv(y: np.ndarray, z: np.ndarray) -> ErrorEstimate:
    """Control-variate mean ``ȳ − β z̄`` of ``y`` with the mean-zero series ``z`` (β from the
    batches), error by blocking of ``y − β z``."""
    vz = float(np.var(z))
    beta = float(np.mean((y - y.mean()) * (z - z.mean())) / vz) if vz > 0 else 0.0
    return blocking(y - beta * z)


def _pick(plain: ErrorEstimate, cv: ErrorEstimate | None) -> tuple[ErrorEstimate, str]:
    if cv is not None and cv.reliable and plain.reliable and cv.stderr < plain.stderr:
        return cv, "cv"
    return plain, "plain"


def _one(ch: PhaseChain, burn_in: float, t_end: float, batches: int, lam: float, t0: np.ndarray, rec=None) -> dict:
    joined: list[np.ndarray] = []
    YN, YP, events = run_batches(ch, burn_in, t_end, batches, joined=joined, rec=rec)
    U, _Pl, Pprev, Z = flow_series(YN, YP, lam, t0)
    return {"U": U, "Z": Z, "B": YN.sum(axis=1), "Pprev": Pprev, "events": events, "joined": joined}


def _combine(ests: Sequence[ErrorEstimate]) -> ErrorEstimate:
    """One replication: its estimate; several (equal horizons): the mean of their means with
    the pooled blocking error ``√(Σ s_r²)/R`` on the summed degrees of freedom, trusted
    only when every replication's is."""
    if len(ests) == 1:
        return ests[0]
    R = len(ests)
    se = math.sqrt(sum(e.stderr**2 for e in ests)) / R
    reliable = all(e.reliable for e in ests) and math.isfinite(se)
    notes = sorted({e.note for e in ests if e.note})
    return ErrorEstimate(
        float(np.mean([e.mean for e in ests])),
        se,
        float(sum(e.dof for e in ests)),
        float(sum(e.n_eff for e in ests)),
        float(np.mean([e.tau_int for e in ests])),
        reliable,
        "pooled",
        int(sum(e.blocks for e in ests)),
        int(ests[0].block_size),
        "" if reliable else "; ".join(notes) or "error unknown",
    )


def simulate_phase_service(
    n: int,
    d: int,
    lam: float | str,
    service: str | ServiceLaw,
    *,
    policy: str = "jsq-d",
    replace: bool = True,
    time: float | None = None,
    steps: int | float | None = None,
    burn_in: float | None = None,
    batches: int = 256,
    seed: Any = 0,
    replications: int = 1,
    workers: int | None = None,
    start: str = "empty",
    control_variates: bool = True,
    time_mode: str = "discrete",
    record_every: int | None = None,
    record_levels: int | None = None,
) -> PhaseSimulationResult:
    """Simulate the supermarket model with a phase-type service law on the count engine.

    Parameters
    ----------
    n, d, lam : int, int, float or str
        Servers, choices (``d <= n`` without replacement), load ``λ > 0``.  At ``λ >= 1`` there
        is no equilibrium: the run measures its finite horizon, with no control variate and no
        self-check (the identities (I1), (I2) hold only in equilibrium; a note says so).
    service : str or ServiceLaw
        ``erlang:K``, ``hyperexp:SCV``, ``ph:FILE.json`` or a phase-type :class:`ServiceLaw`.
    policy : {"jsq-d", "random", "jsq", "jiq", "jbt"}
        The dispatch rule (:mod:`supermarket.system.policies`; ``jbt``'s threshold is ``T = d``).
    replace : bool
        ``jsq-d`` samples with replacement (default) or without.
    time, steps : float or int, optional
        Measured horizon per replication: a time, or a number of events (turned into the
        time ``steps/r`` with ``r = n(λ + Σ_φ μ_φ λ(α(−T)^{-1})_φ)`` the exact mean event
        rate); not both.  Default :data:`DEFAULT_EVENTS` events.
    burn_in : float, optional
        In the unit of the horizon (time or events); default a tenth of it.
    batches : int
        Time batches per replication (``>= 32``).
    seed : int or SeedSequence
        Replication ``r`` runs on child ``r`` of ``SeedSequence(seed)``.
    replications, workers : int
        Independent runs, on ``workers`` threads (the numbers do not depend on ``workers``).
    start : {"empty", "fixed-point"}
        All queues empty, or the phase mean-field fixed point (``jsq-d``, ``random``; ``jsq``, ``jiq``, ``jbt``:
        the fluid one; ``λ < 1``).
    control_variates : bool
        Use the (I1) identities as control variates (module docstring).
    time_mode : {"discrete", "continuous"}
        The jump chain with each holding time replaced by its mean ``1/R`` (the default), or
        exponential holding times (docs/model.md §1.1): the same limits, another stream.
    record_every, record_levels : int, optional
        The result's ``trajectory``: ``u_1..u_m`` (``m = record_levels``) of replication 0 every
        ``record_every`` events after the burn-in (:mod:`.records`; numbers as without).

    Returns
    -------
    PhaseSimulationResult

    Raises
    ------
    ValueError, TypeError
        Bad input, named, before any work; a law with no phase-type form points to the event engine.

    Examples
    --------
    >>> r = simulate_phase_service(100, 2, 0.8, "erlang:2", steps=10**6, seed=1)
    >>> r.engine, r.service.spec, bool(abs(r.u_plain[0] - 0.8) < 5 * r.u_plain_stderr[0])  # E[u_1] = λ
    ('phase', 'erlang:2', True)
    """
    n = check_int("n", n, minimum=1, maximum=1 << 40)
    d = check_int("d", d, minimum=1, maximum=1 << 40)
    if not isinstance(replace, (bool, np.bool_)):
        raise TypeError(f"replace: must be a bool, got {type(replace).__name__}")
    pol = _pol.check_policy(policy)
    if pol == "jsq-d" and not replace and d > n:
        raise ValueError(f"d: without replacement d must be <= n = {n}, got {d}")
    lam = check_load(lam, require_stable=False)  # λ >= 1: a finite horizon (no equilibrium)
    law = parse_service(service)
    if law.alpha is None or law.T is None:
        raise ValueError(
            f"service: {law.spec} has no phase-type form for the count engine; it runs on the per-queue "
            "event engine (engine='events', docs/model.md §14)"
        )
    a, M, t0 = check_ph(law.alpha, law.T)
    # λ α(−T)^{-1} (I2); at λ >= 1 the share of the servers by phase once all are busy, α(−T)^{-1}
    busy_exact = min(lam, 1.0) * np.linalg.solve(-M.T, a)
    rate = n * (lam + float(np.sum(-np.diag(M) * busy_exact)))  # exact mean event rate (I2; at λ >= 1 all busy)
    if time is not None and steps is not None:
        raise ValueError("time: give time or steps, not both")
    if time is not None:
        t_end = check_positive_float("time", time)
        burn = t_end / 10.0 if burn_in is None else float(burn_in)
    else:
        ev = DEFAULT_EVENTS if steps is None else check_positive_float("steps", steps)
        t_end = ev / rate
        burn = t_end / 10.0 if burn_in is None else float(burn_in) / rate
    if not (math.isfinite(burn) and burn >= 0.0):
        raise ValueError(f"burn_in: must be a finite number >= 0, got {burn_in!r}")
    batches = check_int("batches", batches, minimum=32, maximum=1 << 20)
    replications = check_int("replications", replications, minimum=1, maximum=1 << 20)
    if workers is not None:
        workers = check_int("workers", workers, minimum=1, maximum=4096)
    if start not in ("empty", "fixed-point"):
        raise ValueError(f"start: the phase engine starts 'empty' or at the 'fixed-point', got {start!r}")
    if start == "fixed-point" and lam >= 1.0:
        raise ValueError("start: 'fixed-point' needs load λ < 1: at λ >= 1 the mean field has no fixed point")
    seeds = as_seed_sequence(seed).spawn(replications)
    code = _pol.policy_code(pol, "phase")
    continuous = check_time_mode(time_mode) == "continuous"  # exponential holding times (the kernel's holding_exp)
    rec = recorder(record_every, record_levels, t_end * rate, d, lam, np.array([n]), 0.0)  # the clock's times

    def one(ss: np.random.SeedSequence) -> dict:
        ch = PhaseChain(n, d, lam, a, M, t0, replace=bool(replace), seed=ss, holding_exp=continuous, policy=code)
        if start == "fixed-point":
            from .class_starts import phase_start  # the mean field's point, or the fluid one (jsq, jiq)

            ch.set_counts(phase_start(n, d, lam, a, M, pol))
        return _one(ch, burn, t_end, batches, lam, t0, rec if ss is seeds[0] else None)

    # compile (or load from numba's cache) the kernel before the clock starts: a chain of
    # the same types run for no time (its own seed; the replications' streams are untouched)
    PhaseChain(
        n, d, lam, a, M, t0, replace=bool(replace), seed=np.random.SeedSequence(0), holding_exp=continuous, policy=code
    ).run(0.0)
    t_start = _time.perf_counter()
    nw = min(replications, workers or os.cpu_count() or 1)
    if nw == 1:
        outs = [one(ss) for ss in seeds]
    else:
        with ThreadPoolExecutor(max_workers=nw) as pool:
            outs = list(pool.map(one, seeds))
    wall = _time.perf_counter() - t_start
    res = _summarize(n, d, lam, pol, bool(replace), law, t_end, burn, batches, outs, wall, busy_exact, control_variates)
    return with_trajectory(dataclasses.replace(res, time_mode="continuous" if continuous else "discrete"), rec)


def _summarize(n, d, lam, pol, replace, law, t_end, burn, batches, outs, wall, busy_exact, use_cv):
    stable = lam < 1.0  # at λ >= 1 no equilibrium: no control variate, no self-check (they are its identities)
    use_cv = bool(use_cv) and stable
    L = max(o["U"].shape[1] for o in outs)

    def pad(x):
        out = np.zeros((x.shape[0], L))
        out[:, : x.shape[1]] = x
        return out

    Us = [pad(o["U"]) for o in outs]
    Zs = [pad(o["Z"]) for o in outs]
    top = 0
    for U in Us:
        nz = np.nonzero(U.max(axis=0) > 0)[0]
        if nz.size:
            top = max(top, int(nz[-1]) + 1)
    top = max(top, 1)
    u_mean, u_se, u_rel, u_pl, u_pl_se, fz = (np.full(top, math.nan) for _ in range(6))
    methods = []
    for i in range(top):
        seen = sum(int(np.count_nonzero(U[:, i] > 0)) for U in Us)
        plains = [blocking(U[:, i]) for U in Us]
        pe = _combine(plains)
        u_pl[i], u_pl_se[i] = pe.mean, pe.stderr
        if seen < MIN_BLOCKS:
            u_mean[i], u_se[i], u_rel[i] = pe.mean, math.nan, False
            methods.append("rare")
            continue
        ce = _combine([_cv(U[:, i], Z[:, i]) for U, Z in zip(Us, Zs)]) if use_cv else None
        e, how = _pick(pe, ce)
        u_mean[i], u_se[i], u_rel[i] = e.mean, e.stderr, e.reliable
        methods.append(how)
        ze = _combine([blocking(Z[:, i]) for Z in Zs])
        fz[i] = ze.mean / ze.stderr if stable and ze.reliable and ze.stderr > 0 else math.nan
    q_plain = _combine([blocking(U.sum(axis=1)) for U in Us])
    q_cv = _combine([_cv(U.sum(axis=1), Z.sum(axis=1)) for U, Z in zip(Us, Zs)]) if use_cv else None
    mq, _how = _pick(q_plain, q_cv)

    def scaled(e: ErrorEstimate, shift: float = 0.0) -> ErrorEstimate:
        return dataclasses.replace(e, mean=e.mean / lam + shift, stderr=e.stderr / lam)

    K = busy_exact.size
    busy_mean, busy_z = np.zeros(K), np.zeros(K)
    for ph in range(K):
        be = _combine([blocking(o["B"][:, ph]) for o in outs])
        busy_mean[ph] = be.mean
        busy_z[ph] = (be.mean - busy_exact[ph]) / be.stderr if stable and be.reliable and be.stderr > 0 else math.nan
    u1 = _combine([blocking(U[:, 0]) for U in Us])
    bfz = (u1.mean - lam) / u1.stderr if stable and u1.reliable and u1.stderr > 0 else math.nan
    notes = []
    if law.note:
        notes.append(law.note)
    if not stable:
        notes.append(OVERLOADED_NOTE)
    elif not mq.reliable:
        notes.append(
            "the run is too short to know the error of the mean queue length (no blocking plateau): run longer "
            "(time=/--time) or with replications"
        )
    return PhaseSimulationResult(
        n=n,
        d=d,
        lam=lam,
        policy=pol,
        replace=replace,
        service=law,
        engine="phase",
        time=t_end,
        burn_in=burn,
        replications=len(outs),
        batches=batches,
        events=int(sum(o["events"] for o in outs)),
        wall_s=wall,
        u_mean=u_mean,
        u_stderr=u_se,
        u_reliable=u_rel.astype(bool),
        u_method=tuple(methods),
        u_plain=u_pl,
        u_plain_stderr=u_pl_se,
        mean_queue_length=mq,
        mean_queue_length_plain=q_plain,
        sojourn_little=scaled(mq),
        waiting_little=scaled(mq, -1.0),
        busy_exact=busy_exact,
        busy_mean=busy_mean,
        busy_z=busy_z,
        busy_fraction_z=float(bfz),
        flow_z=fz,
        identities=IDENTITIES,
        control_variates=bool(use_cv),
        notes=tuple(notes),
        response=None
        if not stable
        else joined_response([[h[None] for h in o["joined"]] for o in outs], law.alpha, law.T, np.ones(1)),
    )
