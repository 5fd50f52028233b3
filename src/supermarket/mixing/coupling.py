"""Coupled copies of the profile chain under the sorted coupling (docs/model.md §2): the kernel
driver every mixing measurement runs on, the up-front work estimate and :func:`coupled_run`."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import parallel, theory
from ..engines import coupling as _k
from ..engines.rng import state_from_seed_sequence
from ..model import Params, as_seed_sequence, check_int, check_positive_int
from ..result import Result, frame, human_seconds, pyplot, save_figure, text_table
from ..system.states import parse_start, start_counts

__all__ = ["CoupledRun", "coupled_run", "task_workers", "MixingWarning", "MAX_LEVELS", "MAX_STEPS"]

#: Largest start level accepted (``customers:G``, ``long:L``): a copy's counts stay under 16 MiB.
MAX_LEVELS = 2_000_000
#: Largest step budget accepted (about an hour of kernel time).
MAX_STEPS = 10**12
#: Steps per kernel call (Ctrl-C is honoured between calls; results do not depend on it).
CHUNK_STEPS = 1 << 20
#: Rough speed of the coupling kernel (steps of one pair per second on one core), for estimates.
STEPS_PER_SECOND = 1.5e7
#: Refuse a run whose certain work exceeds this many steps (about a day); warn above WARN_STEPS.
REFUSE_STEPS = 10**12
WARN_STEPS = 10**9


class MixingWarning(UserWarning):
    """A mixing run estimated, before it starts, to take long (above the refusal threshold a
    ``ValueError`` is raised instead).

    Examples
    --------
    >>> import warnings
    >>> issubclass(MixingWarning, UserWarning)
    True
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", MixingWarning)   # accept long runs silently
    ...     warnings.warn("about 1e12 coupled steps", MixingWarning)
    """


def _check_work(certain_steps: float, what: str, option: str, workers: int = 1) -> None:
    """Refuse (ValueError) or warn (MixingWarning) up front with the estimated run time."""
    secs = certain_steps / (STEPS_PER_SECOND * max(workers, 1))
    msg = (
        f"{what}: about {certain_steps:.3g} coupled steps in all, at least {human_seconds(secs)} at "
        f"{STEPS_PER_SECOND:.2g} steps/s per core on {max(workers, 1)} core(s)"
    )
    if certain_steps > REFUSE_STEPS:
        raise ValueError(f"{msg}; refused (more than {REFUSE_STEPS:.0e} steps): {option}")
    if certain_steps > WARN_STEPS:
        warnings.warn(f"{msg}; {option} to shorten it", MixingWarning, stacklevel=3)


LEVEL_SLACK = 8  # free levels above the start's top when arrays are first allocated


# --------------------------------------------------------------------------- starts
def _counts(p: Params, start) -> np.ndarray:
    """Counts c_1.. of a start, with a clear error when it would not fit in memory."""
    name, need = parse_start(start)
    if name in ("customers", "long") and need > MAX_LEVELS:
        raise ValueError(
            f"start {start!r} needs {need} levels, more than the supported {MAX_LEVELS} "
            f"(memory of the counts arrays); use a smaller value"
        )
    return start_counts(p.n, p.d, p.lam, start)


def _start_label(start) -> str:
    if isinstance(start, str):
        name, val = parse_start(start)
        return name if val is None else f"{name}:{val}"
    return "array"


# --------------------------------------------------------------------------- kernel driver
class _Chains:
    """Arrays of M coupled copies and the loop that grows them when a queue outgrows them."""

    def __init__(
        self,
        p: Params,
        counts: list[np.ndarray],
        *,
        time_average=False,
        track_max=False,
        record_every=0,
        records=0,
        record_levels=0,
    ):
        self.p = p
        M = len(counts)
        L = max([len(c) for c in counts] + [1]) + LEVEL_SLACK
        self.c = np.zeros((M, L), dtype=np.int64)
        for m, cm in enumerate(counts):
            self.c[m, : len(cm)] = cm
        self.top = np.array([int(np.count_nonzero(cm)) for cm in counts], dtype=np.int64)
        self.dist = np.array([int(np.abs(self.c[m] - self.c[0]).sum()) for m in range(M)], dtype=np.int64)
        self.tau = np.where(self.dist == 0, 0, -1).astype(np.int64)
        self.time_average = time_average
        self.track_max = track_max
        self.area = np.zeros((M, L if time_average else 0), dtype=np.float64)
        self.last = np.zeros((M, L if time_average else 0), dtype=np.int64)
        self.top_time = np.zeros((M, L + 1 if track_max else 0), dtype=np.float64)
        self.record_every = int(record_every)
        self.rec_total = np.zeros((M, records), dtype=np.int64)
        self.rec_dist = np.zeros((M, records), dtype=np.int64)
        self.rec_c = np.zeros((M, records, record_levels), dtype=np.int64)
        self.rec_count = np.zeros(1, dtype=np.int64)
        self.step = self.increases = self.mismatches = 0

    def _grow(self):
        M, L = self.c.shape
        L2 = 2 * L
        if L2 > 4 * MAX_LEVELS:
            raise ValueError(
                f"a queue grew beyond {4 * MAX_LEVELS} customers; the load is too high for this step budget"
            )

        def widen(a, width):
            b = np.zeros((a.shape[0], width), dtype=a.dtype)
            b[:, : a.shape[1]] = a
            return b

        self.c = widen(self.c, L2)
        if self.time_average:
            self.area = widen(self.area, L2)
            last = np.full((M, L2), self.step, dtype=np.int64)  # new levels start now (value 0)
            last[:, :L] = self.last
            self.last = last
        if self.track_max:
            self.top_time = widen(self.top_time, L2 + 1)

    def run(self, steps: int, rng: Any, *, stop_when_coalesced: bool = False, check: bool = False) -> int:
        """Advance by ``steps`` steps (or until every copy equals copy 0) from xoshiro state ``rng``."""
        p = self.p
        target = self.step + int(steps)
        p_arrival = p.lam / (1.0 + p.lam)
        while True:
            parallel.check_stop()
            upto = min(target, self.step + CHUNK_STEPS)
            copies = (self.c, self.top, self.dist, self.tau)
            run = (p.n, p.d, p_arrival, p.replace, self.step, upto, rng, stop_when_coalesced)
            rec = (self.record_every, self.rec_total, self.rec_dist, self.rec_c, self.rec_count)
            args = (*copies, *run, self.area, self.last, self.top_time, *rec, check)
            status, step, inc, mis = _k.run_coupled(*args)
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


def _burned(p: Params, counts: np.ndarray, steps: int, rng: Any) -> np.ndarray:
    """The counts of one copy from ``counts`` after ``steps`` steps alone."""
    ch = _Chains(p, [counts])
    ch.run(steps, rng)
    return ch.c[0, : ch.top[0]].copy()


# --------------------------------------------------------------------------- coupled_run
@dataclass(frozen=True)
class CoupledRun(Result):
    """Copies of the chain driven by the sorted coupling (docs/model.md §2; docs/mixing.md).

    ``tau[m]``: first step at which copy ``m`` equalled copy 0 (``None``: censored);
    ``increases``: how often a distance increased (0 under the coupling); ``mismatches``: with
    ``check``, incremental distances that differed from a recomputation; ``records_*`` at
    steps ``record_every·(1..T)``.

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
        out = {
            "params": self.params.to_dict(),
            "steps": self.steps,
            "time": self.time,
            "tau": ["censored" if t is None else t for t in self.tau],
            "distance": list(self.distance),
            "increases": self.increases,
            "mismatches": self.mismatches,
            "final_counts": [c.tolist() for c in self.final_counts],
        }
        for key in ("mean_profile", "max_queue_share"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key).tolist()
        return out

    def to_frame(self) -> Any:
        """One row per copy (``tau_steps`` NaN: censored).

        Examples
        --------
        >>> r = coupled_run(20, 2, 0.5, ["fixed-point", "empty"], steps=2000, seed=1)
        >>> list(r.to_frame().columns)
        ['copy', 'tau_steps', 'censored', 'distance', 'total_customers']
        """
        return frame(
            {
                "copy": np.arange(len(self.tau)),
                "tau_steps": [np.nan if t is None else float(t) for t in self.tau],
                "censored": [t is None for t in self.tau],
                "distance": list(self.distance),
                # c_i = number of queues with at least i customers, so their sum is ‖x‖₁
                "total_customers": [int(np.sum(c)) for c in self.final_counts],
            }
        )

    def summary(self) -> str:
        """The copies' coalescence steps and final distances to copy 0.

        Examples
        --------
        >>> r = coupled_run(20, 2, 0.5, ["fixed-point", "empty"], steps=2000, seed=1)
        >>> r.summary().splitlines()[0]
        'coupled run: n=20 d=2 λ=0.5, 2 copies, 2000 steps (≈ 66.67 time units)'
        """
        p = self.params
        head = (
            f"coupled run: n={p.n} d={p.d} λ={p.lam:g}, {len(self.tau)} copies, {self.steps} steps "
            f"(≈ {self.time:.4g} time units)"
        )
        rows = [
            [str(m), "censored" if t is None else str(t), str(dist)]
            for m, (t, dist) in enumerate(zip(self.tau, self.distance))
        ]
        tail = f"distance increases under the coupling: {self.increases}"
        return "\n".join([head, text_table(["copy", "τ (steps)", "L1 distance"], rows), tail])

    def plot(self, path: Any = None) -> Any:
        """Total customers and L1 distance to copy 0 against steps (needs ``record_every``);
        saved at ``path`` when given.

        Examples
        --------
        >>> r = coupled_run(20, 2, 0.5, ["fixed-point", "empty"], steps=200, seed=1, record_every=10)
        >>> [ax.get_ylabel() for ax in r.plot().axes]
        ['total customers', 'L1 distance to copy 0']
        """
        if self.records_total is None:
            raise ValueError("record_every: nothing was recorded; run coupled_run with record_every >= 1")
        assert self.records_distance is not None  # recorded together with records_total
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


def coupled_run(
    n: int,
    d: int,
    lam: float | str,
    starts: list,
    *,
    steps: int,
    seed: Any = 0,
    replace: bool = True,
    burn_in: int = 0,
    stop_when_coalesced: bool = False,
    record_every: int = 0,
    record_levels: int = 0,
    time_average: bool = False,
    track_max: bool = False,
    check: bool = False,
) -> CoupledRun:
    """Copies of the chain from ``starts`` under the sorted coupling for ``steps`` steps.

    Parameters
    ----------
    n, d, lam : int, int, float
        Servers, choices, load (docs/model.md §1).
    starts : list
        One start spec per copy (:mod:`supermarket.system.states`); copy 0 is the reference.
    steps : int
        At most ``MAX_STEPS``.
    seed : int or numpy.random.SeedSequence, default 0
    replace : bool, default True
    burn_in : int, default 0
        Steps copy 0 runs alone first, to stand for the stationary law.
    stop_when_coalesced : bool, default False
        Stop once every copy equals copy 0.
    record_every, record_levels : int, default 0
        Record total customers, distances (and ``c_1..c_{record_levels}``) every so many steps.
    time_average, track_max : bool, default False
        Time-averaged profile; time share of each maximum queue length.
    check : bool, default False
        Recompute the L1 distances after every step (debug mode, slow).

    Returns
    -------
    CoupledRun

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
        counts[0] = _burned(p, counts[0], burn_in, rng)
    records = steps // record_every if record_every else 0
    ch = _Chains(
        p,
        counts,
        time_average=time_average,
        track_max=track_max,
        record_every=record_every,
        records=records,
        record_levels=record_levels,
    )
    ch.run(steps, rng, stop_when_coalesced=stop_when_coalesced, check=check)
    T = int(ch.rec_count[0])
    return CoupledRun(
        params=p,
        steps=ch.step,
        tau=tuple(None if t < 0 else int(t) for t in ch.tau),
        distance=tuple(int(x) for x in ch.dist),
        increases=ch.increases,
        mismatches=ch.mismatches,
        final_counts=tuple(ch.c[m, : ch.top[m]].copy() for m in range(len(counts))),
        record_every=record_every,
        records_total=ch.rec_total[:, :T] if records else None,
        records_distance=ch.rec_dist[:, :T] if records else None,
        records_counts=ch.rec_c[:, :T] if records and record_levels else None,
        mean_profile=ch.mean_profile(0) if time_average else None,
        max_queue_share=ch.top_time / max(ch.step, 1) if track_max else None,
    )


# --------------------------------------------------------------------------- workers
def task_workers(workers: object, jobs: int) -> int:
    """Threads for ``jobs`` jobs: ``workers`` (default: all cores), at most one per job.

    Parameters
    ----------
    workers : int or None
        Threads asked for (``None``: all cores).
    jobs : int
        Independent jobs.

    Returns
    -------
    int

    Examples
    --------
    >>> task_workers(8, 3), task_workers(1, 3)
    (3, 1)
    """
    n = parallel.default_workers() if workers is None else check_positive_int("workers", workers)
    return max(1, min(n, jobs))


_workers = task_workers  # the name the mixing modules use


_WARM = False


def _warm() -> None:
    """Load (or compile) the coupling kernel here, in the calling thread, before any worker
    thread runs it.  Compiled in a worker thread (a cold numba cache: seconds, more on a busy
    machine), it kept Ctrl-C waiting: the main thread stops the workers at once, but each ends
    only after its kernel call, the compilation included.  Here Ctrl-C interrupts the
    compiler's own Python code.  Nothing random is shared: the results do not change."""
    global _WARM
    if not _WARM:
        ch = _Chains(Params(2, 2, 0.5), [np.array([2, 1], dtype=np.int64), np.zeros(0, dtype=np.int64)])
        ch.run(8, state_from_seed_sequence(np.random.SeedSequence(0)), stop_when_coalesced=True)
        _WARM = True


def _map(fn, tasks, workers, client=None, progress=None):
    """``fn`` over ``tasks`` in order, on ``client`` (Dask) or ``workers`` threads; each task has its own seed."""
    if client is None:
        _warm()
    return parallel.map_tasks(
        fn, tasks, workers=_workers(workers, len(tasks)), client=client, backend="threads", progress=progress
    )
