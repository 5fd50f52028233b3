"""Server classes on the count engine (:mod:`supermarket.engines.classes`, docs/model.md §15).

:func:`simulate_classes` runs the per-class profile chain for exponential service and any
dispatch rule of :mod:`supermarket.system.policies` (``jsq-d`` with or without replacement,
``random``, ``jsq``, ``jiq``, ``jbt``) and returns a :class:`ClassesResult`: per-class tail fractions,
queue lengths and sojourn times, and the totals, each with an autocorrelation-aware error.

Error bars (docs/model.md §15.3; :mod:`.classes_errors`): time-batch means, the blocking
estimator per replication (pooled over replications), after a control variate from the one
identity that holds for every rule, capacity balance ``Σ_k f_k s_k E[u_{k,1}] = λ s̄`` (every
customer who arrives leaves). Sojourn times come from Little's law: ``E[W] = E[Q]/(λ s̄)`` over
all customers and ``E[W_k] = E[Q_k]/(s_k E[u_{k,1}])`` for those who join class ``k`` (its
throughput per server is ``s_k E[u_{k,1}]``), a ratio whose error is the delta method's.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from .. import model as _m
from .. import stats as _st
from ..engines import classes as _ck
from ..engines.rng import state_from_seed_sequence
from ..result import Result
from ..stats import ErrorEstimate
from ..system import policies as _pol
from ..system.service import ServerClasses, parse_server_classes
from . import class_starts as _starts
from . import records as _rec
from .class_runs import DEFAULT_EVENTS, _horizon, _replicate
from .classes_errors import _Estimator, _ratio_series

__all__ = [
    "simulate_classes",
    "ClassesResult",
    "ClassEstimates",
    "DEFAULT_EVENTS",
    "POLICIES",
]

POLICIES = _pol.POLICIES
_QUANTILES = ("sojourn_quantiles", "waiting_quantiles")
CHUNK = 1 << 23
MAX_N = 2**40
NO_EQUILIBRIUM = "and at load λ >= 1 there is none (the servers' capacity falls short of the arrivals)"
"""What a run at load ``λ >= 1`` lacks, in its notes."""
NO_BALANCE = "no check: capacity balance holds only in equilibrium, and at load λ >= 1 there is none"
"""The note of the capacity-balance self-check at load ``λ >= 1``."""


@dataclass(frozen=True, eq=False)
class ClassEstimates(Result):
    """One class of servers: ``fraction``, ``speed``, ``servers``; ``u_mean``/``u_stderr``:
    ``E[u_{k,ℓ}]`` (the fraction of the class's servers with at least ℓ customers), ℓ = 1, 2, …;
    ``mean_queue_length``: customers per server of the class; ``sojourn``: the mean sojourn
    time of the customers who join the class (Little's law); ``waiting``: ``sojourn − 1/s``."""

    fraction: float
    speed: float
    servers: int
    u_mean: np.ndarray
    u_stderr: np.ndarray
    mean_queue_length: ErrorEstimate
    sojourn: ErrorEstimate
    waiting: ErrorEstimate

    def to_dict(self) -> dict[str, Any]:
        return {
            "fraction": self.fraction,
            "speed": self.speed,
            "servers": self.servers,
            "u_mean": self.u_mean,
            "u_stderr": self.u_stderr,
            "mean_queue_length": self.mean_queue_length.brief(),
            "sojourn": self.sojourn.brief(),
            "waiting": self.waiting.brief(),
        }


@dataclass(frozen=True, eq=False)
class ClassesResult(Result):
    """Time averages of a run of the count engine with server classes (docs/model.md §15).

    Attributes
    ----------
    n, d, lam, policy, replace
        The system: servers, choices (``jsq-d``), load per unit of capacity, rule, sampling.
    server_classes : ServerClasses
    arrival_rate : float
        ``nλ s̄``.
    time, burn_in : float
        Measured time and burn-in per replication (``events/(n s̄ (1+λ))``).
    events : int
        Events simulated (all replications, burn-in included); ``wall_s`` their seconds.
    u_mean, u_stderr : numpy.ndarray
        ``E[U_ℓ] = Σ_k f_k E[u_{k,ℓ}]`` over all servers, ℓ = 1, 2, …; a standard error is NaN
        where the blocking estimator finds no plateau (too short to know its error).
    mean_queue_length, sojourn, waiting : ErrorEstimate
        Customers per server; mean sojourn and waiting times of all customers (Little's law).
    classes : tuple of ClassEstimates
    control_variates : bool
        Whether capacity balance was used as a control variate.
    variance_reduction : dict
        ``(plain s.e./this s.e.)²`` of the mean queue length and sojourn time.
    balance : ErrorEstimate
        The plain estimate of ``Σ_k f_k s_k E[u_{k,1}]/(λ s̄)`` (1 exactly): a self-check.
    response : JoinedResponse or None
        The sojourn and waiting laws of the (class, length, phase) the arrivals joined
        (:mod:`supermarket.simulation.joined`, docs/model.md §15.9; None at λ >= 1): the
        quantiles in ``sojourn`` and ``waiting``, the CDFs of :meth:`cdf`.
    service : ServiceLaw or None
        The phase-type law on :func:`supermarket.simulation.classes_phase.simulate_classes_phase`'s
        engine; None for exponential service.
    trajectory : Trajectory or None
        With ``record_every``: the records of replication 0, per class too (:mod:`.records`).

    ``to_dict()`` starts with :meth:`shared`, the keys and shapes every simulate result shares
    (:mod:`supermarket.simulation.shape`), then ``arrival_rate``, ``control_variates``, ``balance``, …
    """

    n: int
    d: int
    lam: float
    policy: str
    replace: bool
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
    classes: tuple
    control_variates: bool
    variance_reduction: dict
    balance: ErrorEstimate
    interrupted: bool = False
    notes: tuple = field(default=())
    service: Any = None  # a phase-type ServiceLaw on the classes x phase engine (docs/model.md §15.7); None: exp
    precision: dict | None = None  # with precision=: how the target went (simulation.law_precision)
    response: Any = None  # the joined law (simulation.joined.JoinedResponse); None at λ >= 1
    trajectory: Any = None  # with record_every=: the records of replication 0 (simulation.records)

    @property
    def engine(self) -> str:
        """The engine that ran: ``"classes"`` (exponential service) or ``"classes-phase"`` (a
        phase-type law, :attr:`service`; exp too when asked for with ``engine="phase"``)."""
        return "classes" if self.service is None else "classes-phase"

    #: the count engines with classes run their uniformized chain, each step held for its mean
    #: (docs/model.md §1.1, :data:`supermarket.system.methods.TIME_MODES`)
    time_mode: ClassVar[str] = "discrete"

    @property
    def events_per_second(self) -> float:
        return self.events / self.wall_s if self.wall_s > 0 else math.nan

    def cdf(self, points: int) -> dict:
        """The sojourn and waiting CDFs of the joined law (:meth:`.joined.JoinedResponse.cdf`).

        Raises
        ------
        ValueError
            At load >= 1 (no equilibrium), naming ``cdf_points``.
        """
        from .joined import law_cdf

        return law_cdf(self.response, points, "the count engine with classes")

    def to_dict(self, *, cdf_points: int | None = None) -> dict[str, Any]:
        """:meth:`shared`, then this engine's own keys; with ``cdf_points``, ``cdf`` (:meth:`cdf`)."""
        from ..jsonable import to_jsonable

        return to_jsonable(
            {
                **self.shared(),
                "arrival_rate": self.arrival_rate,
                "control_variates": self.control_variates,
                "balance": self.balance.brief(),
                "interrupted": self.interrupted,
                "notes": list(self.notes),
                "error_bars": (
                    "blocking of time-batch means per replication, pooled over replications"
                    + ("; control variate: capacity balance Σ f_k s_k u_(k,1) = λ s̄" if self.control_variates else "")
                ),
            }
            | ({} if self.precision is None else {"precision": self.precision})
            | ({} if cdf_points is None else {"cdf": self.cdf(cdf_points)})
            | ({} if self.trajectory is None else {"trajectory": self.trajectory.to_dict()})
        )

    def plot(self, path: Any = None) -> Any:
        """The figure of :func:`supermarket.simulation.law_figure.plot_law` (saved at ``path``)."""
        from .law_figure import plot_law

        return plot_law(self, path)

    def shared(self) -> dict[str, Any]:
        """The keys every simulate result shares, in the one shape of :mod:`.shape` (the start of
        :meth:`to_dict`): ``events`` simulated (burn-in included), ``time`` and ``burn_in`` per
        replication, ``mean_queue_length`` as an estimate dict, ``sojourn`` and ``waiting``: the
        means by Little's law (``source`` ``"little"``), the quantiles of the joined law
        (:func:`.joined.response_blocks`), ``classes``.

        Returns
        -------
        dict
        """
        from . import shape as _shape
        from .joined import response_blocks

        est = _shape.estimate_dict
        sojourn, waiting = response_blocks(self.response, est(self.sojourn), est(self.waiting), est)
        return _shape.shared_block(
            engine=self.engine,
            **_shape.law_engine_fields(self),
            mean_queue_length=est(self.mean_queue_length),
            sojourn=sojourn,
            waiting=waiting,
            variance_reduction=self.variance_reduction,
            variance_reduction_note="" if self.control_variates else "control variates off",
            classes=self.classes,
        )

    def __post_init__(self) -> None:
        # Screens: under random routing an overloaded class (λ s̄ >= its speed) grows without bound;
        # its averages and the totals have no stationary value, so no error bar (docs/model.md §15).
        from .general.result import GROWING, UNBALANCED, no_stationary_value, unstable_classes

        over = unstable_classes(self.policy, self.lam, self.server_classes)
        if not over:
            return
        _set = object.__setattr__
        for name in ("mean_queue_length", "sojourn", "waiting"):
            _set(self, name, no_stationary_value(getattr(self, name), GROWING))
        _set(self, "u_stderr", np.full_like(np.asarray(self.u_stderr, float), math.nan))
        _set(self, "balance", no_stationary_value(self.balance, UNBALANCED))
        if self.response is not None:  # the overloaded class's customers enter every response time
            r = self.response
            qs = {k: {q: no_stationary_value(e, GROWING) for q, e in getattr(r, k).items()} for k in _QUANTILES}
            means = {k: no_stationary_value(getattr(r, k), GROWING) for k in ("sojourn_mean", "waiting_mean")}
            _set(self, "response", dataclasses.replace(r, **qs, **means, settles=False))
        classes = []
        for k, c in enumerate(self.classes):
            if k in over:
                c = ClassEstimates(
                    c.fraction,
                    c.speed,
                    c.servers,
                    c.u_mean,
                    np.full_like(np.asarray(c.u_stderr, float), math.nan),
                    *(no_stationary_value(e, GROWING) for e in (c.mean_queue_length, c.sojourn, c.waiting)),
                )
            classes.append(c)
        _set(self, "classes", tuple(classes))

    def summary(self, *, cdf_points: int | None = None) -> str:
        """A few lines for people; with ``cdf_points``, the table of :meth:`cdf` after them."""
        from .general.result import render_estimate as pm

        sc = self.server_classes
        lines = [
            f"n={self.n} d={self.d} λ={self.lam:g} policy={self.policy} replace={self.replace} "
            f"classes={sc.spec} (s̄ = {sc.mean_speed:g}); count engine, "
            + ("exponential service" if self.service is None else f"service {self.service.spec} (docs/model.md §15.7)"),
            f"time {self.time:.6g} (+ burn-in {self.burn_in:.6g}) x {self.replications} replication(s), "
            f"{self.events:.3e} events in {self.wall_s:.2f} s ({self.events_per_second / 1e6:.1f} M events/s)",
            f"mean queue length {pm(self.mean_queue_length)}; sojourn {pm(self.sojourn)}; waiting {pm(self.waiting)}",
            "E[U_ℓ] (all servers): " + ", ".join(f"{v:.5g}" for v in self.u_mean[:6]),
        ]
        for c in self.classes:
            lines.append(
                f"class {c.fraction:g}:{c.speed:g} ({c.servers} servers): mean queue length "
                f"{pm(c.mean_queue_length)}; sojourn {pm(c.sojourn)}; E[u_1] {c.u_mean[0]:.5g}"
                + (f" ± {c.u_stderr[0]:.2g}" if math.isfinite(c.u_stderr[0]) else " (error unknown)")
            )
        b = self.balance
        from .joined import cdf_lines, quantile_lines

        lines.extend(quantile_lines(self.response, pm))
        lines.append(f"self-check Σ f s E[u_1]/(λ s̄) = 1: {pm(b)}")
        how = "blocking of batch means (pooled over replications)"
        if self.control_variates:
            vr = self.variance_reduction
            how += (
                "; control variate capacity balance (var. reduction: queue length "
                f"{vr.get('mean_queue_length', math.nan):.3g}, sojourn {vr.get('sojourn', math.nan):.3g})"
            )
        lines.append(f"(± one standard error: {how})")
        lines.extend(self.notes)
        if self.precision is not None:
            from .law_precision import summary_lines

            lines.extend(summary_lines(self.precision))
        if cdf_points is not None:
            lines.extend(cdf_lines(self.cdf(cdf_points)))
        return "\n".join(lines)


# ------------------------------------------------------------------------------------ runs
def _check(n, d, lam, policy, replace, replications, batches, engine="classes"):
    n = _m.check_positive_int("n", n, maximum=MAX_N)
    if not isinstance(policy, str) or policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}; got {policy!r}")
    rule = _pol.rule(policy, engine)
    if not isinstance(replace, (bool, np.bool_)):
        raise TypeError(f"replace must be True or False, got {type(replace).__name__}")
    d = _m.check_positive_int("d", d, maximum=n if not replace else 2**31 - 1) if rule.uses_d else 1
    lam = _m.check_load(lam, name="lam", require_stable=False)  # λ >= 1: a finite horizon (no equilibrium)
    replications = _m.check_positive_int("replications", replications, maximum=10**6)
    batches = _m.check_int("batches", batches, minimum=64, maximum=10**6)
    return n, d, lam, replications, batches


def _run_one(counts, speeds, cfg, p_arr, burn_ev, batch_ev, batches, ss, tick, stop, c0=None, rec=None):
    """One replication: the per-batch sums ``area[b, k, i]`` (levels 1..), the events, whether it
    was interrupted and the per-batch joined counts ``joined[b][k, ℓ]`` (docs/model.md §15.9); from
    empty, or from the counts ``c0[k, i]`` (the fixed-point start); with ``rec``, the trajectory
    after the burn-in (:mod:`.records`: chunks that end on its grid of events)."""
    if c0 is None:
        a, top = _ck.new_state(counts), 0
    else:
        a, top = _ck.start_state(c0, cfg)
    s = state_from_seed_sequence(ss)
    sp = np.asarray(speeds, float)
    caps = np.cumsum(counts * sp)
    inv_s = 1.0 / sp
    st = np.array([top, 0], np.int64)
    out: list[np.ndarray] = []

    def run(m):
        target = st[1] + m
        while st[1] < target:
            ev0 = int(st[1])
            r = _ck.classes_kernel(
                a["c"], a["C"], a["pc"], a["area"], a["stamp"], a["joined"], s, cfg, caps, inv_s, p_arr, st,
                _rec.cap(rec, int(min(CHUNK, target - st[1]))),
            )  # fmt: skip
            _rec.count(rec, int(st[1]) - ev0, int(st[1]), a["c"])
            if r == _ck.BAD_RULE:
                raise ValueError(f"policy code {cfg[3]} is unknown to the classes kernel")
            if r == _ck.GROW:
                _ck.grow(a, int(st[1]))
            if stop.is_set():
                raise KeyboardInterrupt
            tick(int(st[1]))

    joined: list[np.ndarray] = []  # per batch: arrivals by the (class, length) they join
    interrupted = False
    try:
        run(burn_ev)
        _rec.start(rec, int(st[1]), a["c"])
        _ck.close_areas(a["c"], a["area"], a["stamp"], int(st[1]))
        a["area"][:] = 0
        a["joined"][:] = 0
        for _ in range(batches):
            run(batch_ev)
            _ck.close_areas(a["c"], a["area"], a["stamp"], int(st[1]))
            out.append(a["area"][:, 1:].copy())
            joined.append(a["joined"].copy())
            a["area"][:] = 0
            a["joined"][:] = 0
    except KeyboardInterrupt:
        interrupted = True
    return out, int(st[1]), interrupted, joined


def simulate_classes(
    n: int,
    d: int,
    lam: float | str,
    *,
    server_classes: str | ServerClasses,
    policy: str = "jsq-d",
    replace: bool = True,
    time: float | None = None,
    events: int | float | None = None,
    burn_in: float | None = None,
    seed: int | np.random.SeedSequence = 0,
    replications: int = 1,
    batches: int = 256,
    control_variates: bool = True,
    progress: Callable[[float], object] | None = None,
    workers: int | None = None,
    start: str = "empty",
    record_every: int | None = None,
    record_levels: int | None = None,
) -> ClassesResult:
    """Simulate ``n`` servers in classes (exponential service) on the count engine.

    Parameters
    ----------
    n, d, lam : int, int, float
        Servers, choices (``jsq-d``; ``jbt``'s threshold ``T = d``), load per unit of capacity (``λ > 0``): arrivals
        at rate ``nλ s̄``.  At ``λ >= 1`` there is no equilibrium: the run measures its finite
        horizon, with no control variate and no capacity-balance self-check (a note says so).
    server_classes : str or ServerClasses
        ``FRACTION:SPEED,…`` (every ``f_k n`` whole).
    policy : {"jsq-d", "random", "jsq", "jiq", "jbt"}
        The dispatch rule (:mod:`supermarket.engines.classes`); ties uniform.
    replace : bool
        ``jsq-d`` samples with replacement or without.
    time, events : optional
        The measured horizon per replication in time units or in events (one of them;
        default :data:`DEFAULT_EVENTS` events); rounded to whole events per batch.
    burn_in : float, optional
        Time units discarded first (default ``max(time/10, BURN_MIN/s_min)``).
    seed : int or SeedSequence
        Replication ``r`` uses child ``r`` (:func:`supermarket.model.spawn_seeds`).
    replications, batches : int
        Independent runs; time batches per run (at least 64).
    control_variates : bool
        Adjust every estimate with capacity balance (docs/model.md §15.3).
    progress : callable, optional
        Called with the fraction done.
    workers : int, optional
        Threads (the kernel releases the GIL); the numbers do not depend on it.
    start : {"empty", "fixed-point"}
        All queues empty, or each class's counts at the mean field's fixed point, rounded
        (:func:`supermarket.simulation.class_starts.classes_start`: the mean field for ``jsq-d`` and
        ``random``, the fluid fixed point for ``jsq``, ``jiq`` and ``jbt``; ``λ < 1``).
    record_every, record_levels : int, optional
        Record ``u_1..u_m`` (``m = record_levels``) of all servers and of each class, for
        replication 0, every ``record_every`` events after the burn-in (:mod:`.records`; the
        numbers are those of a run without): the result's ``trajectory``.

    Returns
    -------
    ClassesResult

    Examples
    --------
    >>> r = simulate_classes(100, 2, 0.5, server_classes="0.5:2,0.5:1", events=10**6, seed=1)
    >>> round(r.balance.mean, 2), len(r.classes)
    (1.0, 2)
    """
    n, d, lam_f, replications, batches = _check(n, d, lam, policy, replace, replications, batches)
    sc = parse_server_classes(server_classes)
    counts = sc.counts(n)
    R_ev = n * sc.mean_speed * (1.0 + lam_f)  # events per unit of time
    time, burn_in, batch_ev, burn_ev = _horizon(control_variates, time, events, burn_in, batches, R_ev, sc)
    cfg = np.array([n, d, int(bool(replace) or d == 1), _pol.policy_code(policy, "classes")], np.int64)
    c0 = None if _starts.check_start(start) == "empty" else _starts.classes_start(counts, d, lam_f, sc, policy)
    run = functools.partial(_run_one, counts, sc.speeds, cfg, lam_f / (1.0 + lam_f), c0=c0)
    rec = _rec.recorder(record_every, record_levels, batch_ev * batches, d, lam_f, counts, R_ev)
    results, wall = _replicate(run, seed, replications, workers, burn_ev, batch_ev, batches, progress, rec)
    res = _summarize(
        n, d, lam_f, policy, replace, sc, counts, time, burn_in, replications, batches, batch_ev, control_variates,
        results, wall,
    )  # fmt: skip
    return _rec.with_trajectory(res, rec)


def _summarize(
    n, d, lam, policy, replace, sc, counts, time, burn_in, replications, batches, batch_ev, use_cv, results, wall,
    service=None,
):  # fmt: skip
    K = counts.size
    f = np.asarray(sc.fractions, float)
    s = np.asarray(sc.speeds, float)
    sbar = sc.mean_speed
    runs = [r[0] for r in results if len(r[0]) >= 2]
    interrupted = any(r[2] for r in results)
    if not runs:
        raise KeyboardInterrupt
    top = max(max(a.shape[1] for a in out) for out in runs)
    # u[r]: batches x K x levels, the per-class fractions u_{k,ℓ}
    us = []
    for out in runs:
        A = np.zeros((len(out), K, top))
        for b, a in enumerate(out):
            A[b, :, : a.shape[1]] = a
        us.append(A / (batch_ev * counts[None, :, None]))
    nz = max(int(np.nonzero(u.sum(axis=(0, 1)))[0].max(initial=-1)) + 1 for u in us)
    top = max(nz, 1)
    us = [u[:, :, :top] for u in us]
    X = [np.einsum("k,bk->b", f * s, u[:, :, 0]) for u in us]
    # random routing with an overloaded class: capacity balance, an identity of equilibrium, fails
    # (that class keeps customers), so it is no control variate (it pulled the stable classes'
    # estimates to a wrong value: E[u_1] of a 0.5:2 class to 0.5 ± 0 where it is 0.375)
    over = [f"{fk:g}:{sk:g}" for fk, sk in zip(sc.fractions, sc.speeds) if policy == "random" and lam * sbar >= sk]
    stable = lam < 1.0  # at λ >= 1 no equilibrium at all: capacity balance does not hold
    cv_dropped = bool(use_cv) and (bool(over) or not stable)
    use_cv = bool(use_cv) and not over and stable
    est = _Estimator(X, lam * sbar, use_cv)
    plain = _Estimator(X, lam * sbar, False)
    balance = plain([x / (lam * sbar) for x in X])
    if not stable:  # a self-check of equilibrium: none to check
        from .general.result import no_stationary_value

        balance = no_stationary_value(balance, NO_BALANCE)

    Utot = [np.einsum("k,bkl->bl", f, u) for u in us]
    u_est = [est([U[:, i] for U in Utot]) for i in range(top)]
    Q = [U.sum(axis=1) for U in Utot]
    mq = est(Q, "mean_queue_length")
    soj = est([q / (lam * sbar) for q in Q], "sojourn")
    wai = est([(q - U[:, 0]) / (lam * sbar) for q, U in zip(Q, Utot)])
    classes = []
    for k in range(K):
        uk = [est([u[:, k, i] for u in us]) for i in range(top)]
        Qk = [u[:, k, :].sum(axis=1) for u in us]
        mqk = est(Qk)
        _, ser = _ratio_series(Qk, [s[k] * u[:, k, 0] for u in us])
        sok = est(ser)
        wk = ErrorEstimate(
            sok.mean - 1.0 / s[k],
            sok.stderr,
            sok.dof,
            sok.n_eff,
            sok.tau_int,
            sok.reliable,
            sok.method,
            sok.blocks,
            sok.block_size,
            sok.note,
        )
        classes.append(
            ClassEstimates(
                float(f[k]),
                float(s[k]),
                int(counts[k]),
                np.array([e.mean for e in uk]),
                np.array([e.stderr if e.reliable else math.nan for e in uk]),
                mqk,
                sok,
                wk,
            )
        )
    notes = []
    if stable and any(q.size >= 10 and not _st.mser(q).forgotten for q in Q):
        notes.append(
            "the start-up transient is not forgotten (MSER-5 would drop more than half of the batches of the "
            "total queue length): the run is too short for its start from empty; give a longer burn_in or time"
        )
    if over and stable:
        notes.append(
            f"under random routing the servers of class {', '.join(over)} get more work than they can serve "
            "(λ·s̄ >= speed): their queues grow without bound and their averages do not settle"
        )
    if cv_dropped or not stable:
        notes.append(
            "no control variate: capacity balance Σ f s E[u_1] = λ s̄ holds only in equilibrium, "
            + ("and an overloaded class never reaches one" if stable else NO_EQUILIBRIUM)
        )
    if interrupted:
        notes.append("interrupted (Ctrl-C): the result holds the batches completed")
    return ClassesResult(
        n=n,
        d=d,
        lam=float(lam),
        policy=policy,
        replace=bool(replace),
        server_classes=sc,
        arrival_rate=n * lam * sbar,
        time=time,
        burn_in=burn_in,
        replications=replications,
        batches=batches,
        events=int(sum(r[1] for r in results)),
        wall_s=wall,
        u_mean=np.array([e.mean for e in u_est]),
        u_stderr=np.array([e.stderr if e.reliable else math.nan for e in u_est]),
        mean_queue_length=mq,
        sojourn=soj,
        waiting=wai,
        classes=tuple(classes),
        control_variates=bool(use_cv),
        variance_reduction=dict(est.reduction),
        balance=balance,
        interrupted=interrupted,
        notes=tuple(notes),
        service=service,
        response=_response(results, service, s) if stable else None,
    )


def _response(results, service, speeds):
    """The joined law of the replications' per-batch counts (:mod:`.joined`): ``(class, length)``
    for exponential service, ``(class, length, phase)`` with a phase-type law."""
    from .joined import joined_response

    if service is None:
        runs = [[h[:, :, None] for h in r[3]] for r in results if len(r[0]) >= 2]
        return joined_response(runs, np.ones(1), -np.ones((1, 1)), speeds)
    runs = [list(r[3]) for r in results if len(r[0]) >= 2]
    return joined_response(runs, np.asarray(service.alpha), np.asarray(service.T), speeds)
