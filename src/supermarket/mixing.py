"""Mixing of the supermarket chain: coupled copies, coalescence times, t_mix, TV curves.

Everything rests on the sorted coupling of docs/model.md §2: copies of the profile chain driven
by the same random numbers (one sorted position per event), under which the L1 distance of
the sorted queue-lengths vectors never increases.  If ``τ`` is the first step at which a copy
started from ``x`` equals a copy started from the stationary law, then

    d_TV(L(X_t^x), Π) <= P(τ > t)

so the 0.75-quantile of ``τ`` bounds ``t_mix(1/4)`` (docs/model.md §2, §6).  The paper-000
orders of magnitude (docs/model.md §6, constants taken as 1) come from :mod:`supermarket.theory`:
``k d^{k−1} n log n`` (upper, from a good state), ``d^{k−1} n`` (lower),
``(1−λ)^{−1} g n`` (from ``‖x‖₁ = g n``) and ``ℓ n`` (from one queue of length ``ℓ``).

Steps are steps of the uniformized discrete chain; ``n(1+λ)`` steps are one unit of
continuous time (docs/model.md §1).  A copy that has not coalesced within the step budget is
*censored*: it is counted and reported as such, never as a number.

Public API: :func:`coupled_run`, :func:`coalescence` (→ :class:`MixingResult`),
:func:`tv_curve` (→ :class:`TVCurve`), :func:`order_statistic_ci`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from . import parallel, theory
from ._results import fmt as _fmt, human_seconds, pyplot, save_figure, text_table
from .engines import coupling as _k
from .engines.rng import state_from_seed_sequence
from .model import (Params, check_int, check_positive_int, spawn_seeds, as_seed_sequence,
                    check_fraction)
from .states import parse_start, start_counts
from .stats import replication_error

__all__ = [
    "CoupledRun",
    "coupled_run",
    "MixingResult",
    "coalescence",
    "TVCurve",
    "tv_curve",
    "order_statistic_ci",
    "start_bounds",
    "MAX_LEVELS",
    "MixingWarning",
]

#: Largest start level accepted (``customers:G`` needs G levels, ``long:L`` needs L): the
#: per-copy arrays hold one int64 per level, so this keeps a copy under 16 MiB.
MAX_LEVELS = 2_000_000
#: Largest step budget accepted (about an hour of kernel time).
MAX_STEPS = 10**12
#: Steps per kernel call: a call lasts well under a second, so Ctrl-C is honoured promptly
#: and every thread checks for a stop request between calls (results do not depend on it).
CHUNK_STEPS = 1 << 20
#: Rough speed of the coupling kernel (steps of one pair per second on one core), used
#: only for the up-front estimates below.
STEPS_PER_SECOND = 1.5e7
#: Refuse a run whose certain work (burn-in of every stationary copy) exceeds this many
#: steps (about a day at the speed above); warn above WARN_STEPS.
REFUSE_STEPS = 10**12
WARN_STEPS = 10**9


class MixingWarning(UserWarning):
    """A mixing run that will take long (the estimate is in the message).

    Issued (not raised) before the run starts, when the estimated number of coupled steps
    exceeds the warning threshold; above the refusal threshold a ``ValueError`` is raised
    instead.  Silence it with the :mod:`warnings` filters.

    Examples
    --------
    >>> import warnings
    >>> issubclass(MixingWarning, UserWarning)
    True
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", MixingWarning)   # accept long runs silently
    ...     warnings.warn("about 1e12 coupled steps", MixingWarning)
    """


_hms = human_seconds


def _check_work(certain_steps: float, what: str, option: str, workers: int = 1) -> None:
    """Refuse (ValueError) or warn (MixingWarning) up front with the estimated run time."""
    secs = certain_steps / (STEPS_PER_SECOND * max(workers, 1))
    msg = (f"{what}: about {certain_steps:.3g} coupled steps in all, at least {_hms(secs)} at "
           f"{STEPS_PER_SECOND:.2g} steps/s per core on {max(workers, 1)} core(s)")
    if certain_steps > REFUSE_STEPS:
        raise ValueError(f"{msg}; refused (more than {REFUSE_STEPS:.0e} steps): {option}")
    if certain_steps > WARN_STEPS:
        warnings.warn(f"{msg}; {option} to shorten it", MixingWarning, stacklevel=3)
LEVEL_SLACK = 8  # free levels above the start's top when arrays are first allocated


# --------------------------------------------------------------------------- starts
def _start_levels(start) -> int | None:
    """Levels a start spec needs, without building it (None for arrays)."""
    name, val = parse_start(start)
    if name in ("customers", "long"):
        return val
    return None


def _counts(p: Params, start) -> np.ndarray:
    """Counts c_1.. of a start, with a clear error when it would not fit in memory."""
    need = _start_levels(start)
    if need is not None and need > MAX_LEVELS:
        raise ValueError(f"start {start!r} needs {need} levels, more than the supported {MAX_LEVELS} "
                         f"(memory of the counts arrays); use a smaller value")
    return start_counts(p.n, p.d, p.lam, start)


def _start_label(start) -> str:
    if isinstance(start, str):
        name, val = parse_start(start)
        return name if val is None else f"{name}:{val}"
    return "array"


# --------------------------------------------------------------------------- kernel driver
def _empty(shape, dtype):
    return np.zeros(shape, dtype=dtype)


class _Chains:
    """Arrays of M coupled copies and the loop that grows them when a queue outgrows them."""

    def __init__(self, p: Params, counts: list[np.ndarray], *, time_average=False,
                 track_max=False, record_every=0, records=0, record_levels=0):
        self.p = p
        M = len(counts)
        L = max([len(c) for c in counts] + [1]) + LEVEL_SLACK
        self.c = np.zeros((M, L), dtype=np.int64)
        for m, cm in enumerate(counts):
            self.c[m, :len(cm)] = cm
        self.top = np.array([int(np.count_nonzero(cm)) for cm in counts], dtype=np.int64)
        self.dist = np.array([int(np.abs(self.c[m] - self.c[0]).sum()) for m in range(M)], dtype=np.int64)
        self.tau = np.where(self.dist == 0, 0, -1).astype(np.int64)
        self.time_average = time_average
        self.track_max = track_max
        self.area = _empty((M, L if time_average else 0), np.float64)
        self.last = _empty((M, L if time_average else 0), np.int64)
        self.top_time = _empty((M, L + 1 if track_max else 0), np.float64)
        self.record_every = int(record_every)
        self.rec_total = _empty((M, records), np.int64)
        self.rec_dist = _empty((M, records), np.int64)
        self.rec_c = _empty((M, records, record_levels), np.int64)
        self.rec_count = np.zeros(1, dtype=np.int64)
        self.step = 0
        self.increases = 0
        self.mismatches = 0

    def _grow(self):
        M, L = self.c.shape
        L2 = 2 * L
        if L2 > 4 * MAX_LEVELS:
            raise ValueError(f"a queue grew beyond {4 * MAX_LEVELS} customers; the load is too "
                             "high for this step budget")

        def widen(a, width):
            b = np.zeros((a.shape[0], width), dtype=a.dtype)
            b[:, :a.shape[1]] = a
            return b

        self.c = widen(self.c, L2)
        if self.time_average:
            self.area = widen(self.area, L2)
            last = np.full((M, L2), self.step, dtype=np.int64)  # new levels start now (value 0)
            last[:, :L] = self.last
            self.last = last
        if self.track_max:
            self.top_time = widen(self.top_time, L2 + 1)

    def run(self, steps: int, rng, *, stop_when_coalesced=False, check=False):
        """Advance by ``steps`` steps (or until every copy equals copy 0), in kernel calls of
        at most ``CHUNK_STEPS`` steps; between calls a KeyboardInterrupt can arrive and
        :func:`supermarket.parallel.check_stop` is called.  ``rng``: xoshiro256** state."""
        p = self.p
        target = self.step + int(steps)
        p_arrival = p.lam / (1.0 + p.lam)
        while True:
            parallel.check_stop()
            upto = min(target, self.step + CHUNK_STEPS)
            status, step, inc, mis = _k.run_coupled(
                self.c, self.top, self.dist, self.tau, p.n, p.d, p_arrival, p.replace,
                self.step, upto, rng, stop_when_coalesced, self.area, self.last,
                self.top_time, self.record_every, self.rec_total, self.rec_dist, self.rec_c,
                self.rec_count, check)
            self.step = int(step)
            self.increases += int(inc)
            self.mismatches += int(mis)
            if status == _k.STATUS_GROW:
                self._grow()
                continue
            if status == _k.STATUS_DONE and self.step < target:
                continue
            return status

    def mean_profile(self, start_step: int) -> np.ndarray:
        """Time-averaged counts / n over the states ``start_step .. step-1``."""
        _k.flush_area(self.c, self.area, self.last, self.step)
        span = max(self.step - start_step, 1)
        return self.area / (span * self.p.n)


# --------------------------------------------------------------------------- coupled_run
@dataclass(frozen=True)
class CoupledRun:
    """Copies of the chain driven by the sorted coupling (docs/model.md §2).

    ``tau[m]``: first step at which copy ``m`` equalled copy 0 (``None``: censored, not
    within ``steps``).  ``distance[m]``: final L1 distance to copy 0.  ``increases``: how
    often a distance increased (0 under the coupling).  ``mismatches``: with ``check``, how
    often the incremental distance differed from a recomputation.  ``mean_profile`` (M, L):
    time-averaged ``u_i`` of each copy (with ``time_average``); ``max_queue_share`` (M, L+1):
    fraction of steps with maximum queue length ``j`` (with ``track_max``).
    ``records_total`` / ``records_distance`` (M, T): total customers and distance at steps
    ``record_every·(1..T)``; ``records_counts`` (M, T, K): ``c_1..c_K`` at those steps.
    Result protocol: :meth:`to_dict`, :meth:`to_frame`, :meth:`summary`.

    Examples
    --------
    >>> r = coupled_run(20, 2, 0.5, ["fixed-point", "empty"], steps=2000, seed=1, stop_when_coalesced=True)
    >>> r.tau[1] is not None, r.increases
    (True, 0)
    """

    params: Params
    steps: int
    tau: tuple
    distance: tuple
    increases: int
    mismatches: int
    final_counts: tuple
    record_every: int
    records_total: np.ndarray | None = field(default=None, repr=False)
    records_distance: np.ndarray | None = field(default=None, repr=False)
    records_counts: np.ndarray | None = field(default=None, repr=False)
    mean_profile: np.ndarray | None = field(default=None, repr=False)
    max_queue_share: np.ndarray | None = field(default=None, repr=False)

    @property
    def time(self) -> float:
        """``steps`` in time units (``steps / (n(1+λ))``)."""
        return theory.steps_to_time(self.steps, self.params.n, self.params.lam)

    def to_dict(self) -> dict:
        out = {"params": self.params.to_dict(), "steps": self.steps, "time": self.time,
               "tau": ["censored" if t is None else t for t in self.tau],
               "distance": list(self.distance), "increases": self.increases,
               "mismatches": self.mismatches,
               "final_counts": [c.tolist() for c in self.final_counts]}
        if self.mean_profile is not None:
            out["mean_profile"] = self.mean_profile.tolist()
        if self.max_queue_share is not None:
            out["max_queue_share"] = self.max_queue_share.tolist()
        return out

    def to_frame(self):
        """One row per copy: ``copy``, ``tau_steps`` (NaN: censored), ``censored``, ``distance``.

        Examples
        --------
        >>> r = coupled_run(20, 2, 0.5, ["fixed-point", "empty"], steps=2000, seed=1)
        >>> list(r.to_frame().columns)
        ['copy', 'tau_steps', 'censored', 'distance', 'total_customers']
        """
        import pandas as pd

        return pd.DataFrame({
            "copy": np.arange(len(self.tau)),
            "tau_steps": [np.nan if t is None else float(t) for t in self.tau],
            "censored": [t is None for t in self.tau],
            "distance": list(self.distance),
            # c_i = number of queues with at least i customers, so their sum is ‖x‖₁
            "total_customers": [int(np.sum(c)) for c in self.final_counts],
        })

    def summary(self) -> str:
        """The copies' coalescence steps and final distances to copy 0, as text.

        Examples
        --------
        >>> r = coupled_run(20, 2, 0.5, ["fixed-point", "empty"], steps=2000, seed=1)
        >>> r.summary().splitlines()[0]
        'coupled run: n=20 d=2 λ=0.5, 2 copies, 2000 steps (≈ 66.67 time units)'
        """
        p = self.params
        head = (f"coupled run: n={p.n} d={p.d} λ={p.lam:g}, {len(self.tau)} copies, {self.steps} steps "
                f"(≈ {self.time:.4g} time units)")
        rows = [[str(m), "censored" if t is None else str(t), str(dist)]
                for m, (t, dist) in enumerate(zip(self.tau, self.distance))]
        tail = f"distance increases under the coupling: {self.increases}"
        return "\n".join([head, text_table(["copy", "τ (steps)", "L1 distance"], rows), tail])

    def plot(self, path=None):
        """Total customers of each copy and L1 distance to copy 0 against steps (needs
        ``record_every``); saved at ``path`` when given.

        Parameters
        ----------
        path : str or path-like, optional

        Returns
        -------
        matplotlib.figure.Figure

        Raises
        ------
        ValueError
            Nothing was recorded (``record_every=0``).

        Examples
        --------
        >>> r = coupled_run(20, 2, 0.5, ["fixed-point", "empty"], steps=200, seed=1, record_every=10)
        >>> [ax.get_ylabel() for ax in r.plot().axes]
        ['total customers', 'L1 distance to copy 0']
        """
        if self.records_total is None:
            raise ValueError("record_every: nothing was recorded; run coupled_run with record_every >= 1")
        plt = pyplot()
        x = self.record_every * np.arange(1, self.records_total.shape[1] + 1)
        fig, (a0, a1) = plt.subplots(1, 2, figsize=(10, 3.6))
        for m in range(self.records_total.shape[0]):
            a0.plot(x, self.records_total[m], lw=0.8, label=f"copy {m}")
            if m:
                a1.plot(x, self.records_distance[m], lw=0.8, label=f"copy {m}")
        a0.set_ylabel("total customers")
        a1.set_ylabel("L1 distance to copy 0")
        for ax in (a0, a1):
            ax.set_xlabel("step")
            ax.legend(fontsize=7)
        fig.tight_layout()
        plt.close(fig)
        return save_figure(fig, path)


def _check_steps(name, steps):
    return check_int(name, steps, minimum=0, maximum=MAX_STEPS)


def coupled_run(n, d, lam, starts, *, steps, seed=0, replace=True, burn_in=0,
                stop_when_coalesced=False, record_every=0, record_levels=0,
                time_average=False, track_max=False, check=False) -> CoupledRun:
    """Run copies of the chain from ``starts`` (a list of start specs, see
    :mod:`supermarket.states`; copy 0 first) under the sorted coupling for ``steps`` steps.

    ``burn_in``: steps that copy 0 runs alone first (its own random numbers), so that copy
    0 can stand for the stationary law.  ``stop_when_coalesced``: stop once every copy
    equals copy 0.  ``record_every``: record total customers and distances every so many
    steps (and ``c_1..c_{record_levels}``).  ``time_average``: time-averaged profile;
    ``track_max``: time share of each maximum queue length.  ``check``: recompute the L1
    distances after every step (debug mode, slow).

    Parameters
    ----------
    n, d, lam : int, int, float
        Servers, choices, load ``λ`` in ``(0, 1)`` (docs/model.md §1).
    starts : list
        One start spec per copy (``"empty"``, ``"fixed-point"``, ``"customers:g"``, …, or an
        array of counts); copy 0 is the reference.
    steps : int
        Steps of the jump chain to run (at most ``MAX_STEPS``).
    seed : int or numpy.random.SeedSequence, default 0
    replace : bool, default True
        Sample the ``d`` queues with replacement.
    burn_in, stop_when_coalesced, record_every, record_levels, time_average, track_max, check
        As above.

    Returns
    -------
    CoupledRun

    Raises
    ------
    TypeError
        ``starts`` is not a list of start specs.
    ValueError
        Bad parameters (named), an empty ``starts`` or an unknown start spec.

    Examples
    --------
    >>> r = coupled_run(20, 2, 0.5, ["fixed-point", "empty"], steps=2000, seed=1, stop_when_coalesced=True)
    >>> r.distance  # every copy has met copy 0
    (0, 0)
    """
    p = Params(n, d, lam, replace=replace)
    if isinstance(starts, (str, np.ndarray)) or not hasattr(starts, "__len__"):
        raise TypeError("starts must be a list of start specs (one per copy), e.g. ['fixed-point', 'empty']")
    if len(starts) < 1:
        raise ValueError("starts must name at least one copy")
    steps = _check_steps("steps", steps)
    burn_in = _check_steps("burn_in", burn_in)
    record_every = check_int("record_every", record_every, minimum=0)
    record_levels = check_int("record_levels", record_levels, minimum=0, maximum=1000)
    counts = [_counts(p, s) for s in starts]
    rng = state_from_seed_sequence(as_seed_sequence(seed))
    if burn_in:
        pre = _Chains(p, counts[:1])
        pre.run(burn_in, rng)
        counts[0] = pre.c[0, :pre.top[0]].copy()
    records = steps // record_every if record_every else 0
    ch = _Chains(p, counts, time_average=time_average, track_max=track_max,
                 record_every=record_every, records=records, record_levels=record_levels)
    ch.run(steps, rng, stop_when_coalesced=stop_when_coalesced, check=check)
    T = int(ch.rec_count[0])
    prof = ch.mean_profile(0) if time_average else None
    share = ch.top_time / max(ch.step, 1) if track_max else None
    return CoupledRun(
        params=p, steps=ch.step,
        tau=tuple(None if t < 0 else int(t) for t in ch.tau),
        distance=tuple(int(x) for x in ch.dist), increases=ch.increases,
        mismatches=ch.mismatches,
        final_counts=tuple(ch.c[m, :ch.top[m]].copy() for m in range(len(counts))),
        record_every=record_every,
        records_total=ch.rec_total[:, :T] if records else None,
        records_distance=ch.rec_dist[:, :T] if records else None,
        records_counts=ch.rec_c[:, :T] if records and record_levels else None,
        mean_profile=prof, max_queue_share=share)


# --------------------------------------------------------------------------- bounds
def start_bounds(n, d, lam, start) -> dict:
    """The paper-000 orders for a start (docs/model.md §6, constants taken as 1), in steps.

    ``upper``: ``k d^{k−1} n log n`` (from a good state); ``lower``: ``d^{k−1} n``;
    ``lower_start``: the start's own lower bound, ``(1−λ)^{−1} g n`` for ``customers:g``,
    ``ℓ n`` for ``long:ℓ``, else ``d^{k−1} n``.  ``None`` where undefined (``d = 1``).

    Parameters
    ----------
    n, d, lam : int, int, float
        Servers, choices and load (docs/model.md §1).
    start : str or array_like
        A start spec (:mod:`supermarket.states`).

    Returns
    -------
    dict
        ``{"k", "upper", "lower", "lower_start"}``.

    Raises
    ------
    ValueError
        Bad parameters (named).

    Examples
    --------
    >>> b = start_bounds(100, 2, 0.9, "good")
    >>> b["k"], b["lower"]
    (4, 800.0)
    """
    p = Params(n, d, lam)
    name, val = parse_start(start) if isinstance(start, str) else ("array", None)
    out = {"k": None, "upper": None, "lower": None, "lower_start": None}
    if p.d >= 2:
        mb = theory.mixing_bounds(p.n, p.d, lam)
        out.update(k=mb.k, upper=mb.upper_steps, lower=mb.lower_steps, lower_start=mb.lower_steps)
    if name == "customers" and val:
        out["lower_start"] = theory.mixing_lower_customers(p.n, p.lam, val)
    elif name == "long":
        out["lower_start"] = theory.mixing_lower_long(p.n, val)
    return out


BURN_IN_FACTOR = 10


def _default_burn_in(p: Params) -> int:
    """Steps for the stationary copy: 10 × the upper order ``k d^{k−1} n log n`` (d >= 2);
    for d = 1, 20 relaxation times ``(1−√λ)^{−2}`` of an M/M/1 queue (docs/model.md §6, §7)."""
    if p.d >= 2:
        up = theory.mixing_bounds(p.n, p.d, p.lam).upper_steps
        return int(min(max(BURN_IN_FACTOR * up, 20 * p.n), MAX_STEPS))
    relax = 1.0 / (1.0 - math.sqrt(p.lam)) ** 2
    return int(min(20 * relax * p.n * (1 + p.lam), MAX_STEPS))


def _default_budget(p: Params, start) -> int:
    """Default step budget: 20 × (burn-in + the start's own lower order × (1+λ))."""
    b = start_bounds(p.n, p.d, p.lam, start) if p.d >= 2 or isinstance(start, str) else {}
    extra = (b.get("lower_start") or 0.0) * (1 + p.lam)
    return int(min(20 * (_default_burn_in(p) + extra), MAX_STEPS))


# --------------------------------------------------------------------------- statistics
def order_statistic_ci(sample, q, level=0.95):
    """Distribution-free confidence interval for the ``q``-quantile from order statistics.

    ``sample`` may contain ``inf`` (censored values, all larger than every observed one:
    the Kaplan–Meier estimate with a common censoring time).  Returns
    ``(estimate, low, high)``: ``inf`` where the order statistic is censored, ``None``
    where its rank falls outside the sample (too few replications for that confidence).

    Parameters
    ----------
    sample : array_like
        Observations (``inf`` for censored ones).
    q : float
        The quantile, in ``(0, 1)``.
    level : float, default 0.95
        Confidence of the interval (binomial ranks).

    Returns
    -------
    (estimate, low, high)

    Raises
    ------
    ValueError
        An empty ``sample`` or ``q`` outside ``(0, 1)``.

    Examples
    --------
    >>> order_statistic_ci(range(1, 21), 0.5)
    (10.0, 6.0, 15.0)
    """
    x = np.sort(np.asarray(sample, dtype=float))
    R = x.size
    if R == 0:
        raise ValueError("empty sample")
    q = check_fraction("q", q, low=0.0, high=1.0, low_open=True, high_open=True)
    est = x[min(max(math.ceil(q * R), 1), R) - 1]
    a = (1 - level) / 2
    lo_rank = int(stats.binom.ppf(a, R, q))  # P(B <= lo_rank - 1) <= a
    hi_rank = int(stats.binom.ppf(1 - a, R, q)) + 1
    low = float(x[lo_rank - 1]) if lo_rank >= 1 else None
    high = float(x[hi_rank - 1]) if hi_rank <= R else None
    return float(est), low, high


CENSORED = "censored"
UNBOUNDED = "unbounded"


def _label(x, *, low=False):
    """A statistic for output: a float, ``"censored"`` (beyond the step budget) or, for a
    confidence limit whose rank falls outside the sample, 0 (lower) / ``"unbounded"``."""
    if x is None:
        return 0.0 if low else UNBOUNDED
    if not math.isfinite(x):
        return CENSORED
    return float(x)


def _num(x):
    """A statistic as a float, or None when censored / unbounded."""
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


def _summary(taus: np.ndarray, budget: float, level=0.95) -> dict:
    """Summary of coalescence times (censored = inf): mean (a lower bound, computed with
    censored times set to the budget, when any is censored) with a t-interval, median,
    q75 and q90 with order-statistic intervals; statistics beyond the budget are
    ``"censored"``."""
    R = taus.size
    cens = ~np.isfinite(taus)
    nc = int(cens.sum())
    filled = np.where(cens, float(budget), taus)
    err = replication_error(filled)  # Student t on R − 1 degrees of freedom
    mean = err.mean
    half = err.half_width(level) if R > 1 else math.inf
    out = {"mean": mean, "mean_is_lower_bound": nc > 0,
           "ci": [max(mean - half, 0.0), CENSORED if nc else (mean + half if R > 1 else UNBOUNDED)]}
    for name, q in (("median", 0.5), ("q75", 0.75), ("q90", 0.9)):
        est, lo, hi = order_statistic_ci(taus, q, level)
        out[name] = _label(est)
        out[f"{name}_ci"] = [_label(lo, low=True), CENSORED if hi is None and nc else _label(hi)]
    out["censored"] = nc
    return out


# --------------------------------------------------------------------------- workers
def _workers(workers, jobs: int) -> int:
    if workers is None:
        workers = parallel.default_workers()
    workers = check_positive_int("workers", workers)
    return max(1, min(workers, jobs))


def _map(fn, tasks, workers, client=None, progress=None):
    """``fn`` over ``tasks`` in task order through :func:`supermarket.parallel.map_tasks`:
    on ``client`` (Dask) when given, else on ``workers`` threads (the coupling kernels
    release the GIL).  Each task draws only from its own seed, so the results do not depend
    on the backend or on ``workers``."""
    return parallel.map_tasks(fn, tasks, workers=_workers(workers, len(tasks)), client=client,
                              backend="threads", progress=progress)


def _coalescence_task(args):
    n, d, lam, replace, counts, burn_in, budget, ss = args
    p = Params(n, d, lam, replace=replace)
    rng = state_from_seed_sequence(ss)
    stat = _Chains(p, [start_counts(n, d, lam, "fixed-point")])
    stat.run(burn_in, rng)
    pair = _Chains(p, [stat.c[0, :stat.top[0]].copy(), counts])
    pair.run(budget, rng, stop_when_coalesced=True)
    t = int(pair.tau[1])
    return (t if t >= 0 else -1), pair.increases


# --------------------------------------------------------------------------- coalescence
@dataclass(frozen=True)
class MixingResult:
    """Coalescence of a copy from ``start`` with a stationary copy (docs/model.md §2, §6).

    ``taus``: one entry per replication, the coalescence step or ``None`` (censored: not
    within ``max_steps``).  ``steps``: summary in steps (``mean`` is a lower bound when any
    replication is censored; quantiles are ``None`` when censored); ``time``: the same in
    time units (steps / (n(1+λ))).  ``tmix_steps``: the 0.75-quantile of τ, an upper bound
    for ``t_mix(1/4)`` since ``d_TV(t) <= P(τ > t)``; ``tmix_ci``: its 95% order-statistic
    interval.  ``bounds``: the paper-000 orders (constants 1) for this start.
    Result protocol: :meth:`to_dict`, :meth:`to_frame`, :meth:`summary`, :meth:`plot`.

    Examples
    --------
    >>> r = coalescence(20, 2, 0.5, replications=10, seed=1, workers=1)
    >>> r.censored, len(r.to_frame())
    (0, 10)
    """

    params: Params
    start: str
    replications: int
    max_steps: int
    burn_in: int
    taus: tuple
    steps: dict
    time: dict
    bounds: dict
    increases: int
    seed_entropy: int

    @property
    def censored(self) -> int:
        return self.steps["censored"]

    @property
    def tmix_steps(self):
        """0.75-quantile of τ in steps (None when censored)."""
        return _num(self.steps["q75"])

    def to_dict(self) -> dict:
        p = self.params
        u = p.n * (1.0 + p.lam)
        b = self.bounds

        def t(x):
            return None if x is None else x / u

        keep = ("mean", "mean_is_lower_bound", "ci", "median", "median_ci", "q75", "q75_ci", "q90", "q90_ci")
        return {
            "params": p.to_dict(), "start": self.start, "replications": self.replications,
            "max_steps": self.max_steps, "burn_in_steps": self.burn_in,
            "steps_per_time_unit": u, "k": b["k"],
            "censored": self.censored,
            "coalescence_steps": {key: self.steps[key] for key in keep},
            "coalescence_time": {key: self.time[key] for key in keep},
            "tmix_steps": self.steps["q75"], "tmix_ci_steps": self.steps["q75_ci"],
            "tmix_time": self.time["q75"], "tmix_ci_time": self.time["q75_ci"],
            "bound_upper_steps": b["upper"], "bound_lower_steps": b["lower_start"],
            "bound_lower_good_steps": b["lower"],
            "bound_upper_time": t(b["upper"]), "bound_lower_time": t(b["lower_start"]),
            "bound_lower_good_time": t(b["lower"]),
            "tmix_note": "t_mix(1/4) <= 0.75-quantile of the coalescence time, since d_TV(t) <= P(tau > t) "
                         "(docs/model.md §2)",
            "bounds_note": "paper 000 orders (docs/model.md §6), constants taken as 1; the upper "
                           "order holds from a good state",
            "coupling_increases": self.increases,
            "taus": [CENSORED if x is None else x for x in self.taus],
        }

    def to_frame(self):
        """One row per replication: ``replication``, ``tau_steps``, ``tau_time`` (NaN when
        censored), ``censored``.

        Examples
        --------
        >>> r = coalescence(30, 2, 0.5, replications=3, seed=1, workers=1)
        >>> r.to_frame().shape
        (3, 4)
        """
        import pandas as pd

        u = self.params.n * (1.0 + self.params.lam)
        steps = np.array([np.nan if t is None else float(t) for t in self.taus])
        return pd.DataFrame({"replication": np.arange(self.replications), "tau_steps": steps,
                             "tau_time": steps / u, "censored": np.isnan(steps)})

    def summary(self) -> str:
        """The text ``supermarket mixing`` prints: τ's mean, median, q90 and the bound
        ``t_mix(1/4) <= q75`` with 95% intervals, and the paper-000 orders.

        Examples
        --------
        >>> r = coalescence(30, 2, 0.5, replications=3, seed=1, workers=1)
        >>> r.summary().splitlines()[0]
        'supermarket mixing  n=30  d=2  λ=0.5  from fixed-point  replications=3  k=1'
        """
        out = self.to_dict()
        p = self.params
        lines = [f"supermarket mixing  n={p.n}  d={p.d}  λ={p.lam:g}  from {self.start}  "
                 f"replications={self.replications}  k={out['k']}",
                 f"stationary copy: rounded fixed point after {self.burn_in} steps; budget {self.max_steps} "
                 f"steps per pair; {out['steps_per_time_unit']:.6g} steps = 1 time unit", ""]
        s, u = out["coalescence_steps"], out["coalescence_time"]

        def ci(pair):
            return f"[{_fmt(pair[0])}, {_fmt(pair[1])}]"

        rows = [["mean (lower bound: censored)" if s["mean_is_lower_bound"] else "mean", _fmt(s["mean"]),
                 ci(s["ci"]), _fmt(u["mean"]), ci(u["ci"])]]
        for key in ("median", "q90"):
            rows.append([key, _fmt(s[key]), ci(s[key + "_ci"]), _fmt(u[key]), ci(u[key + "_ci"])])
        rows.append(["t_mix(1/4) ≤ q75", _fmt(out["tmix_steps"]), ci(out["tmix_ci_steps"]),
                     _fmt(out["tmix_time"]), ci(out["tmix_ci_time"])])
        lines.append(text_table(["", "steps", "95% CI (steps)", "time units", "95% CI (time)"], rows,
                                title="Coalescence time τ (sorted coupling, docs/model.md §2)"))
        if self.censored:
            lines.append(f"{self.censored} of {self.replications} pairs did not coalesce within "
                         f"{self.max_steps} steps (censored)")
        b = [["upper k d^(k−1) n log n (from a good state)", _fmt(out["bound_upper_steps"]),
              _fmt(out["bound_upper_time"])],
             ["lower d^(k−1) n", _fmt(out["bound_lower_good_steps"]), _fmt(out["bound_lower_good_time"])]]
        if out["bound_lower_steps"] != out["bound_lower_good_steps"]:
            b.append([f"lower from {self.start}", _fmt(out["bound_lower_steps"]), _fmt(out["bound_lower_time"])])
        lines += ["", text_table(["bound", "steps", "time units"], b,
                                 title="Paper 000 orders (docs/model.md §6, constants taken as 1)")]
        return "\n".join(lines)

    def plot(self, path=None):
        """The empirical survival ``P(τ > t)`` (an upper bound for ``d_TV(t)``) in time units,
        with ``q75`` and the paper-000 orders; saved at ``path`` when given.

        Returns
        -------
        matplotlib.figure.Figure
        """
        plt = pyplot()

        u = self.params.n * (1.0 + self.params.lam)
        t = np.sort(np.array([np.inf if x is None else x / u for x in self.taus]))
        fig, ax = plt.subplots(figsize=(6, 4))
        finite = t[np.isfinite(t)]
        surv = 1.0 - np.arange(1, finite.size + 1) / t.size
        ax.step(np.concatenate([[0.0], finite]), np.concatenate([[1.0], surv]), where="post",
                label="P(τ > t) (empirical)")
        ax.axhline(0.25, color="grey", lw=0.8, ls=":")
        for key, label in (("bound_upper_time", "upper order"), ("bound_lower_time", "lower order")):
            v = self.to_dict()[key]
            if v is not None:
                ax.axvline(v, ls="--", lw=0.8, label=label)
        ax.set_xlabel("time units")
        ax.set_ylabel("P(τ > t) ≥ d_TV(t)")
        ax.set_title(f"coalescence from {self.start}: n={self.params.n}, d={self.params.d}, λ={self.params.lam:g}")
        ax.legend()
        plt.close(fig)
        return save_figure(fig, path)


def coalescence(n, d, lam, *, start="good", replications=100, seed=0, max_steps=None,
                burn_in=None, replace=True, workers=None, client=None, progress=None) -> MixingResult:
    """Coalescence time of a copy started at ``start`` with a stationary copy.

    The stationary copy starts at the rounded fixed point and runs ``burn_in`` steps alone
    (default: 10 × ``k d^{k−1} n log n``); then both run under the sorted coupling until
    they are equal or ``max_steps`` steps have passed (default: 20 × (burn-in + the
    start's own lower order × (1+λ))).  Replication ``r`` uses child ``r`` of ``seed``;
    results do not depend on ``workers`` (default: all cores; 1 runs in this process).

    Parameters
    ----------
    n, d, lam : int, int, float
        Servers, choices and load (docs/model.md §1).
    start : str or array_like, default "good"
        Start spec of the non-stationary copy (:mod:`supermarket.states`).
    replications : int, default 100
    seed : int or numpy.random.SeedSequence, default 0
    max_steps, burn_in : int, optional
        Step budget and burn-in (defaults above).
    replace : bool, default True
    workers : int, optional
    client : dask.distributed.Client, optional
        Run the replications on this cluster instead.
    progress : callable, optional
        Called as replications finish.

    Returns
    -------
    MixingResult

    Raises
    ------
    ValueError
        Bad parameters (named), or a burn-in beyond the work limit (the message gives the
        estimate).

    Examples
    --------
    >>> r = coalescence(20, 2, 0.5, replications=10, seed=1, workers=1)
    >>> r.steps["mean"] > 0 and r.steps["censored"] == 0
    True
    """
    p = Params(n, d, lam, replace=replace)
    replications = check_positive_int("replications", replications, maximum=10**7)
    label = _start_label(start)
    counts = _counts(p, start)
    burn = _default_burn_in(p) if burn_in is None else _check_steps("burn_in", burn_in)
    budget = _default_budget(p, start) if max_steps is None else check_int(
        "max_steps", max_steps, minimum=1, maximum=MAX_STEPS)
    option = ("pass a smaller --burn-in (burn_in=) or fewer --replications" if burn_in is None
              else "lower burn_in, n or replications")
    label_b = "the default burn-in of 10 × k d^(k−1) n log n" if burn_in is None else "burn_in"
    _check_work(float(replications) * burn, f"{label_b} = {burn:.3g} steps per stationary copy × "
                f"{replications} replication(s)", option, _workers(workers, replications))
    root = as_seed_sequence(seed)
    seeds = spawn_seeds(root, replications)
    tasks = [(p.n, p.d, p.lam, p.replace, counts, burn, budget, ss) for ss in seeds]
    out = _map(_coalescence_task, tasks, workers, client, progress)
    taus = np.array([t if t >= 0 else math.inf for t, _ in out], dtype=float)
    s = _summary(taus, budget)
    u = p.n * (1.0 + p.lam)
    tu = _summary(taus / u, budget / u)
    bounds = start_bounds(p.n, p.d, p.lam, start) if isinstance(start, str) else start_bounds(p.n, p.d, p.lam, "good")
    return MixingResult(params=p, start=label, replications=replications, max_steps=budget,
                        burn_in=burn, taus=tuple(None if not math.isfinite(t) else int(t) for t in taus),
                        steps=s, time=tu, bounds=bounds, increases=sum(i for _, i in out),
                        seed_entropy=int(root.entropy) if isinstance(root.entropy, int) else 0)


# --------------------------------------------------------------------------- TV curve
def _tv_task(args):
    n, d, lam, replace, counts, burn_in, steps, every, ss = args
    p = Params(n, d, lam, replace=replace)
    rng = state_from_seed_sequence(ss)
    T = steps // every
    # coupled pair (stationary copy, copy from x): the coupling bound P(τ > t)
    stat = _Chains(p, [start_counts(n, d, lam, "fixed-point")])
    stat.run(burn_in, rng)
    pair = _Chains(p, [stat.c[0, :stat.top[0]].copy(), counts], record_every=every, records=T)
    pair.run(steps, rng)
    # an independent stationary copy: the reference law of the total number of customers
    ref = _Chains(p, [start_counts(n, d, lam, "fixed-point")])
    ref.run(burn_in, rng)
    ref2 = _Chains(p, [ref.c[0, :ref.top[0]].copy()], record_every=every, records=T)
    ref2.run(steps, rng)
    return pair.rec_total[1].copy(), pair.rec_dist[1].copy(), ref2.rec_total[0].copy()


def _binned_tv(a: np.ndarray, b: np.ndarray, edges: np.ndarray) -> float:
    ha = np.histogram(a, bins=edges)[0] / a.size
    hb = np.histogram(b, bins=edges)[0] / b.size
    return 0.5 * float(np.abs(ha - hb).sum())


@dataclass(frozen=True)
class TVCurve:
    """Total-variation distance to equilibrium of the total number of customers ``‖X_t‖₁``.

    ``tv[j]``: TV distance, over ``bins`` quantile bins of the stationary law, between the
    ``replications`` copies from ``start`` at step ``steps[j]`` and a stationary reference
    (independent stationary copies, pooled over all recorded steps).  Binning can only
    lower a TV distance, so this is a lower estimate of the TV distance of the observable,
    itself a lower bound for the TV distance of the chain.  ``noise_floor``: the expected
    value of the same statistic for ``replications`` draws from the reference itself (its
    mean over 200 resamples): values below it are indistinguishable from equilibrium.
    ``coupling_bound[j]``: the fraction of coupled pairs not yet coalesced, an estimate of
    ``P(τ > t)``, which bounds ``d_TV`` of the whole chain from above.
    Result protocol: :meth:`to_dict`, :meth:`to_frame`, :meth:`summary`, :meth:`plot`.

    Examples
    --------
    >>> c = tv_curve(20, 2, 0.5, replications=10, points=5, seed=1, workers=1)
    >>> c.tv.shape, bool(((c.tv >= 0) & (c.tv <= 1)).all())
    ((5,), True)
    """

    params: Params
    start: str
    replications: int
    steps: np.ndarray
    time: np.ndarray
    tv: np.ndarray
    noise_floor: float
    coupling_bound: np.ndarray
    mean_total: np.ndarray
    stationary_mean_total: float
    bins: int

    def first_below_floor(self):
        """First recorded step at which the TV estimate is at or below twice the noise floor."""
        idx = np.nonzero(self.tv <= 2 * self.noise_floor)[0]
        return int(self.steps[idx[0]]) if idx.size else None

    def to_dict(self) -> dict:
        return {"params": self.params.to_dict(), "start": self.start,
                "replications": self.replications, "bins": self.bins,
                "steps": self.steps.tolist(), "time": self.time.tolist(), "tv": self.tv.tolist(),
                "noise_floor": self.noise_floor, "coupling_bound": self.coupling_bound.tolist(),
                "mean_total": self.mean_total.tolist(),
                "stationary_mean_total": self.stationary_mean_total,
                "first_below_2x_floor_steps": self.first_below_floor()}

    def to_frame(self):
        """One row per recorded step: ``step``, ``time``, ``tv``, ``coupling_bound``,
        ``mean_total``.

        Examples
        --------
        >>> r = tv_curve(20, 2, 0.5, replications=10, steps=200, points=4, burn_in=100, workers=1)
        >>> r.to_frame().shape
        (4, 5)
        """
        import pandas as pd

        return pd.DataFrame({"step": self.steps, "time": self.time, "tv": self.tv,
                             "coupling_bound": self.coupling_bound, "mean_total": self.mean_total})

    def summary(self) -> str:
        """The curve as a text table, with the noise floor.

        Examples
        --------
        >>> r = tv_curve(20, 2, 0.5, replications=10, steps=200, points=4, burn_in=100, workers=1)
        >>> r.summary().splitlines()[0]
        'TV distance to equilibrium of ‖X_t‖₁ from empty: n=20 d=2 λ=0.5, 10 replications, 4 bins'
        """
        p = self.params
        head = (f"TV distance to equilibrium of ‖X_t‖₁ from {self.start}: n={p.n} d={p.d} λ={p.lam:g}, "
                f"{self.replications} replications, {self.bins} bins")
        rows = [[str(int(st)), _fmt(t), f"{tv:.3f}", f"{cb:.3f}", _fmt(m)]
                for st, t, tv, cb, m in zip(self.steps, self.time, self.tv, self.coupling_bound, self.mean_total)]
        first = self.first_below_floor()
        tail = (f"noise floor {self.noise_floor:.3f}; stationary mean of ‖X‖₁ {self.stationary_mean_total:.4g}; "
                f"first step at or below 2 × floor: {first if first is not None else 'none'}")
        return "\n".join([head, text_table(["step", "time", "TV (binned)", "P(τ > t)", "mean ‖X‖₁"], rows), tail])

    def plot(self, path=None):
        """TV estimate and coupling bound against time; saved at ``path`` when given.

        Returns
        -------
        matplotlib.figure.Figure
        """
        plt = pyplot()

        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(self.time, self.tv, marker="o", ms=3, label="TV of ‖X_t‖₁ (binned, lower estimate)")
        ax.plot(self.time, self.coupling_bound, label="P(τ > t) (coupling, upper bound)")
        ax.axhline(self.noise_floor, color="grey", ls=":", label="noise floor")
        ax.set_xlabel("time units")
        ax.set_ylabel("distance to equilibrium")
        ax.legend()
        plt.close(fig)
        return save_figure(fig, path)


def tv_curve(n, d, lam, *, start="empty", replications=200, steps=None, points=40, seed=0,
             burn_in=None, bins=None, replace=True, workers=None, client=None, progress=None) -> TVCurve:
    """TV distance to equilibrium over time of the total number of customers (see
    :class:`TVCurve`), with the coupling bound ``P(τ > t)`` from the same replications.

    ``steps``: horizon (default: 3 × the start's own order, at least the upper order
    ``k d^{k−1} n log n``); ``points``: recorded times; ``bins``: quantile bins of the
    stationary law (default ``⌈√replications⌉``, at most 30).

    Parameters
    ----------
    n, d, lam : int, int, float
        Servers, choices and load (docs/model.md §1).
    start : str or array_like, default "empty"
    replications : int, default 200
        At least 10.
    steps, points, bins, burn_in : int, optional
        As above.
    seed : int or numpy.random.SeedSequence, default 0
    replace : bool, default True
    workers, client, progress
        As for :func:`coalescence`.

    Returns
    -------
    TVCurve

    Raises
    ------
    ValueError
        Bad parameters (named) or work beyond the limit.

    Examples
    --------
    >>> c = tv_curve(20, 2, 0.5, replications=10, points=5, seed=1, workers=1)
    >>> bool(c.coupling_bound[-1] <= c.coupling_bound[0])
    True
    """
    p = Params(n, d, lam, replace=replace)
    replications = check_int("replications", replications, minimum=10, maximum=10**6)
    points = check_int("points", points, minimum=2, maximum=10_000)
    label = _start_label(start)
    counts = _counts(p, start)
    burn = _default_burn_in(p) if burn_in is None else _check_steps("burn_in", burn_in)
    if steps is None:
        b = start_bounds(p.n, p.d, p.lam, start) if isinstance(start, str) else {}
        base = max((b.get("lower_start") or 0.0) * (1 + p.lam), b.get("upper") or 0.0)
        steps = int(3 * base) if base else burn
    steps = check_int("steps", steps, minimum=points, maximum=MAX_STEPS)
    every = steps // points
    bins = min(30, math.ceil(math.sqrt(replications))) if bins is None else check_int("bins", bins, minimum=2, maximum=1000)
    _check_work(float(replications) * (2 * burn + 2 * every * points),
                f"tv_curve: 2 × (burn-in {burn:.3g} + horizon {every * points:.3g}) steps × {replications} "
                "replication(s)", "lower burn_in, steps or replications", _workers(workers, replications))
    seeds = spawn_seeds(seed, replications)
    tasks = [(p.n, p.d, p.lam, p.replace, counts, burn, every * points, every, ss) for ss in seeds]
    out = _map(_tv_task, tasks, workers, client, progress)
    X = np.stack([o[0] for o in out])  # (R, T)
    D = np.stack([o[1] for o in out])
    S = np.stack([o[2] for o in out])
    ref = S.ravel()
    qs = np.quantile(ref, np.linspace(0, 1, bins + 1))
    edges = np.unique(qs)
    edges[0], edges[-1] = -np.inf, np.inf
    tv = np.array([_binned_tv(X[:, j], ref, edges) for j in range(X.shape[1])])
    rng = np.random.default_rng(spawn_seeds(seed, replications + 1)[replications])
    floor = float(np.mean([_binned_tv(rng.choice(ref, replications), ref, edges) for _ in range(200)]))
    grid = every * np.arange(1, X.shape[1] + 1)
    return TVCurve(params=p, start=label, replications=replications, steps=grid,
                   time=grid / (p.n * (1 + p.lam)), tv=tv, noise_floor=floor,
                   coupling_bound=(D > 0).mean(axis=0), mean_total=X.mean(axis=0),
                   stationary_mean_total=float(ref.mean()), bins=len(edges) - 1)
