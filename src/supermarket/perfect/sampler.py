"""The perfect sampler's driver (docs/model.md §12.6): :func:`sample` and :func:`sample_counts`."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..model import Params, SeedLike, as_seed_sequence, check_positive_float, check_positive_int, spawn_seeds
from ..parallel import STOP, map_tasks
from .past import BLOCK_MAX, _OutOfTime, _Past
from .results import BudgetExceeded, PerfectResult, _result, steps_per_time_unit

__all__ = ["sample", "sample_counts", "DEFAULT_MAX_MEMORY", "MAX_HORIZON_STEPS", "MAX_N"]

#: Default memory budget of one sample (bytes): buffer, checkpoints and the three copies.
DEFAULT_MAX_MEMORY = 1 << 30
#: Largest horizon (steps of the uniformized chain) ever tried; beyond it a sample is refused.
MAX_HORIZON_STEPS = 1 << 52
#: Largest n (three sorted vectors of n int64 are held per sample, plus a scratch array).
MAX_N = 1 << 27


def _t0(n: int) -> int:
    """Smallest horizon tried: the power of two >= max(64, n) (about half a time unit)."""
    return max(64, 1 << (n - 1).bit_length())


_WARM = False


def _warm() -> None:
    """Load (or compile) the kernels once, so that a time budget measures sampling only."""
    global _WARM
    if not _WARM:
        for replace in (True, False):
            _one(Params(2, 2, 0.5, replace=replace), np.random.SeedSequence(0), 64, None, DEFAULT_MAX_MEMORY, None)
        _WARM = True


def _one(p: Params, ss, t0, deadline, max_memory, stop):
    began = time.perf_counter()
    past = _Past(p, ss, t0, stop, deadline)
    horizon, work, peak = t0, 0, past.memory_bytes()
    for rounds in itertools.count(1):
        if horizon > MAX_HORIZON_STEPS:
            raise BudgetExceeded(f"no coalescence within {MAX_HORIZON_STEPS} steps of the past; sample refused")
        # memory after extending: one checkpoint per new block, each about D's level count
        new_blocks = 0
        b = past.horizon
        while b < horizon:
            b += min(b, past.block_max) if b else t0
            new_blocks += 1
        projected = (
            past.memory_bytes()
            + new_blocks * (past.pathmax + 2) * 8
            + (past.pathmax + 4) * 16
            + min(horizon, past.block_max) * 8
        )
        if projected > max_memory:
            raise BudgetExceeded(
                f"the next round (horizon {horizon} steps) would need about "
                f"{projected / 2**20:.1f} MiB, more than max_memory="
                f"{max_memory / 2**20:.1f} MiB; sample refused"
            )
        if deadline is not None and work > 0:
            # refuse a round that the throughput measured so far says cannot finish in time
            rate = work / max(time.perf_counter() - began, 1e-9)
            cost = (horizon - past.horizon) + 3 * horizon
            if time.perf_counter() + cost / rate > deadline:
                raise _OutOfTime(horizon, predicted=True)
        before = past.steps_generated
        past.extend(horizon)
        peak = max(peak, past.memory_bytes())
        met, x, copy_steps = past.run_from(horizon, deadline)
        work += past.steps_generated - before + copy_steps
        if met:
            return x, horizon, rounds, work, peak
        horizon *= 2


def _job(p, ss, s, t0, deadline, max_time, max_memory, stop):
    """Sample ``s`` (seed ``ss``): :func:`_one`, with running out of time as :class:`BudgetExceeded`."""
    try:
        return _one(p, ss, t0, deadline, max_memory, stop)
    except _OutOfTime as exc:
        what = "would not finish" if exc.predicted else "was being tried"
        raise BudgetExceeded(
            f"sample {s} did not coalesce within max_time={max_time:g} s (the round "
            f"with horizon {exc.horizon / steps_per_time_unit(p.n, p.lam):.4g} time units "
            f"{what}); no approximate sample is returned"
        ) from None


def _cluster_task(task):
    """One sample as a Dask task: the wall-clock deadline becomes a local one once the kernels are loaded."""
    p, ss, s, t0, wall_deadline, max_time, max_memory = task
    _warm()
    deadline = None if wall_deadline is None else time.perf_counter() + (wall_deadline - time.time())
    return _job(p, ss, s, t0, deadline, max_time, max_memory, None)


def _check_client(client: Any, workers: int) -> None:
    """A Dask client, when given, excludes ``workers`` > 1."""
    if client is not None:
        if not callable(getattr(client, "submit", None)):
            raise TypeError(f"client must be a dask.distributed.Client (or None); got {type(client).__name__}")
        if workers != 1:
            raise ValueError("workers and client exclude each other (the cluster has its own workers)")


def _check_first_memory(p: Params, d_run: int, t0: int, max_memory: int) -> None:
    """Refuse up front what cannot fit: three copies and a scratch vector of n entries, the first
    buffer, D's level arrays (max of n geometric lengths ≈ log n / log(1/λ)) and the ``d_run``
    sampled indices of one arrival (d may be > n)."""
    levels = (math.log(p.n) + 40.0) / -math.log(p.lam)
    first = 4 * 8 * p.n + 8 * min(t0, BLOCK_MAX) + 3 * 8 * (levels + 64) + 8 * d_run
    if first > max_memory:
        raise BudgetExceeded(
            f"a sample needs at least {first / 2**20:.1f} MiB (n={p.n}, d={p.d}, λ={p.lam:g}), "
            f"more than max_memory={max_memory / 2**20:.1f} MiB; refused"
        )


@dataclass(frozen=True)
class _Draws:
    """The samples to draw: of the chain ``run``, sample ``s`` from ``children[s]``, from the
    horizon ``t0`` on, within ``max_time`` (the whole call) and ``max_memory`` (one sample)."""

    run: Params
    children: tuple
    t0: int
    max_time: float | None
    max_memory: int


def _draw(draws: _Draws, out: list, deadline: float | None, client: Any, workers: int, progress: Any) -> None:
    """Draw the samples into ``out`` (``out[s]``: sample ``s``'s :func:`_one`), on the Dask
    ``client`` or on ``workers`` threads, by ``deadline`` (``perf_counter`` time, or None)."""
    run, children, t0, max_time, max_memory = draws.run, draws.children, draws.t0, draws.max_time, draws.max_memory
    S = len(children)

    def store(s: int, value: Any, error: BaseException | None) -> None:
        out[s] = value  # an error is raised by map_tasks itself (return_errors=False)

    report = None if progress is None else (lambda done, running, total: progress(done, total))
    if client is not None:
        # the deadline travels as wall-clock (epoch) time: perf_counter is per machine
        wall_deadline = None if deadline is None else time.time() + (deadline - time.perf_counter())
        tasks = [(run, children[s], s, t0, wall_deadline, max_time, max_memory) for s in range(S)]
        map_tasks(_cluster_task, tasks, client=client, collect=False, on_result=store, progress=report)
    else:  # threads: on a failure or Ctrl-C the others stop at their next chunk (stop_requested)
        map_tasks(
            lambda s: _job(run, children[s], s, t0, deadline, max_time, max_memory, STOP),
            range(S),
            workers=workers,
            backend="threads",
            collect=False,
            on_result=store,
            progress=report,
        )


def sample(
    n: int,
    d: int,
    lam: float | str | Fraction,
    *,
    samples: int = 1,
    seed: SeedLike = 0,
    replace: bool = True,
    max_time: float | None = None,
    max_memory: int | None = None,
    workers: int = 1,
    client: Any = None,
    progress: Callable[[int, int], None] | None = None,
    policy: str = "jsq-d",
) -> PerfectResult:
    """Exact samples from the stationary law of the (n, d, λ) supermarket chain.

    Dominated coupling from the past (docs/model.md §12): no burn-in, no truncation.  Sample ``s``
    uses child ``s`` of ``seed``, so the samples do not depend on ``workers`` or ``client``.

    Parameters
    ----------
    n : int
        Number of servers, ``1 <= n <= 2**27``.
    d : int
        Number of choices, ``>= 1`` (``<= n`` without replacement).
    lam : float
        Load λ in (0, 1).
    samples : int, optional
        Number of independent samples.
    seed : int, SeedSequence or None, optional
        Root seed.
    replace : bool, optional
        Sample the ``d`` queues with replacement or without.
    max_time : float, optional
        Wall-clock budget of the whole call in seconds.
    max_memory : int, optional
        Memory budget of one sample in bytes (default 1 GiB).
    workers : int, optional
        Threads running samples in parallel.
    client : dask.distributed.Client, optional
        Run each sample as one task on this Dask cluster; excludes ``workers`` > 1.  ``max_time``
        is then measured on the workers' (assumed synchronised) clocks.
    progress : callable, optional
        ``progress(done, total)`` before the first sample and after each one.
    policy : str, optional
        The dispatch rule: ``jsq-d`` (the default), or another rule that is a JSQ(d) chain
        (``random`` is JSQ(1), ``jsq`` JSQ(n) without replacement: the same coupling samples
        them); the others are refused with the reason
        (:func:`supermarket.system.methods.perfect_sampler`).

    Returns
    -------
    PerfectResult

    Raises
    ------
    TypeError, ValueError
        Bad parameters (named, with their valid range).
    BudgetExceeded
        A sample would exceed ``max_time``, ``max_memory`` or the horizon limit.

    Examples
    --------
    >>> from supermarket import perfect
    >>> res = perfect.sample(3, 2, 0.7, samples=4, seed=1)
    >>> res.samples.shape
    (4, 3)
    >>> bool((res.samples[:, :-1] >= res.samples[:, 1:]).all())   # sorted, longest first
    True
    >>> perfect.sample(3, 2, 0.7, samples=4, seed=1, workers=2).samples.tolist() == res.samples.tolist()
    True
    """
    from ..system.methods import perfect_sampler
    from ..system.policies import check_policy
    from ..system.spec import System

    p = Params(n, d, lam, replace=replace)
    policy = check_policy(policy)
    d_run, replace_run = perfect_sampler(System(p.n, p.d, p.lam_exact, rule=policy, replace=p.replace))
    run = p if (d_run, replace_run) == (p.d, p.replace) else Params(p.n, d_run, p.lam_exact, replace=replace_run)
    if p.n > MAX_N:
        raise ValueError(f"n must be <= {MAX_N} for perfect sampling (memory of the sorted vectors); got {p.n}")
    S = check_positive_int("samples", samples)
    workers = check_positive_int("workers", workers)
    _check_client(client, workers)
    if max_time is not None:
        max_time = check_positive_float("max_time", max_time, allow_inf=True)
    max_memory = DEFAULT_MAX_MEMORY if max_memory is None else check_positive_int("max_memory", max_memory)
    root = as_seed_sequence(seed)
    children = spawn_seeds(root, S)
    t0 = _t0(p.n)
    _check_first_memory(p, run.d, t0, max_memory)
    if client is None:
        _warm()
    start = time.perf_counter()
    deadline = None if max_time is None or math.isinf(max_time) else start + max_time
    out: list[Any] = [None] * S
    try:
        _draw(_Draws(run, tuple(children), t0, max_time, max_memory), out, deadline, client, workers, progress)
    except BudgetExceeded as exc:
        done = [s for s in range(S) if out[s] is not None]
        partial = _result(p, [out[s] for s in done], time.perf_counter() - start, root, t0, policy) if done else None
        raise BudgetExceeded(f"{exc} ({len(done)} of {S} samples completed)", partial) from None
    return _result(p, out, time.perf_counter() - start, root, t0, policy)


def sample_counts(
    n: int,
    d: int,
    lam: float | str | Fraction,
    seed: SeedLike = 0,
    replace: bool = True,
    *,
    max_time: float | None = None,
    max_memory: int | None = None,
    policy: str = "jsq-d",
) -> np.ndarray:
    """One exact stationary sample as counts ``c_1, c_2, …`` (int64, ``c[0] = c_1``).

    The start state of :mod:`supermarket.system.states` (empty state: an empty array) from
    ``sample(n, d, lam, samples=1, seed=seed).samples[0]``; pass a seed independent of the simulation's.

    Parameters
    ----------
    n, d, lam, seed, replace, max_time, max_memory, policy
        As in :func:`sample`.

    Returns
    -------
    numpy.ndarray
        ``c_i = #{queues with length >= i}`` for ``i = 1..max``.

    Examples
    --------
    >>> from supermarket import perfect
    >>> c = perfect.sample_counts(5, 2, 0.5, seed=3)
    >>> bool(c.size == 0 or (c[0] <= 5 and (c[:-1] >= c[1:]).all() and c[-1] > 0))
    True
    """
    res = sample(
        n, d, lam, samples=1, seed=seed, replace=replace, max_time=max_time, max_memory=max_memory, policy=policy
    )
    c = res.counts[0]
    return c[c > 0]
