"""One equilibrium run of E1 and E4 (:func:`equilibrium`, :func:`good_set_mask`), the parallel
map over configurations and the expected cost of a run."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ... import parallel, stats
from ... import simulation as sim
from ... import theory as th
from ...mixing.coupling import task_workers as _mixing_workers
from ...model import check_int
from ...system.methods import good_set_refusal
from ...system.spec import System
from .output import _progress

# simulate's profile engine, effective steps/s per thread (measured: benchmarks/README.md)
PROFILE_RATE_STEPS_PER_S = 30e6
PROFILE_RATE_D1_STEPS_PER_S = 5e6
TASK_OVERHEAD_S = 1.0  # per equilibrium run: start-up analysis, snapshot blocking (2 s for d = 1)
SNAPSHOTS = 2**17  # snapshots per equilibrium run, for the error bars simulate does not give


def good_set_mask(snaps: ArrayLike, n: int, d: int, lam: float, eps: float, k: int) -> np.ndarray:
    """Membership of each snapshot (rows of counts ``c_1..c_K``, ``K > k``) in ``N^ε``: clauses
    (a), (b) of docs/model.md §5 with the bands of :func:`supermarket.theory.good_set_bounds`."""
    snaps = np.asarray(snaps)
    if snaps.ndim != 2 or snaps.shape[1] <= k:
        raise ValueError(f"snapshots must have more than k={k} levels")
    lo, hi = th.good_set_bounds(n, d, lam, eps, k)
    shorter = n - snaps[:, :k]
    ok_a = snaps[:, k] == 0
    ok_b = np.all((shorter >= lo) & (shorter <= hi), axis=1)
    return ok_a & ok_b


def _snapshot_error(series, trusted: bool):
    """``(stderr, reliable)`` of a snapshot series' average by blocking, reliable only if the run
    is trusted; ``(nan, False)`` when fewer than ``MIN_BLOCKS`` snapshots differ from the median."""
    x = np.asarray(series, dtype=float)
    if np.count_nonzero(x != np.median(x)) < stats.MIN_BLOCKS:
        return math.nan, False  # (almost) constant: too few changes seen to know the error
    e = stats.blocking(x)
    return float(e.stderr), bool(e.reliable and trusted)


def _max_stats(res: Any, mxs: np.ndarray, trusted: bool) -> dict[str, Any]:
    """The maximum queue length: the time share of each value (simulate's) and its mean, with
    errors from a blocking analysis of the snapshots' maxima ``mxs``."""
    traj = res.trajectory
    top = max(res.max_queue_dist) if res.max_queue_dist else 0
    width = max(top, int(traj.max.max()) if traj.max.size else 0) + 1
    share = np.zeros(width)
    for mm, p in res.max_queue_dist.items():
        share[mm] = p
    se_rel = [_snapshot_error(mxs == mm, trusted) for mm in range(width)]
    mean_max = float(np.dot(np.arange(width), share))
    mm_se, mm_rel = _snapshot_error(mxs, trusted)
    return {
        "max_share": share,
        "max_share_stderr": np.array([s[0] for s in se_rel]),
        "max_share_reliable": np.array([s[1] for s in se_rel]),
        "mean_max": mean_max,
        "mean_max_stderr": mm_se,
        "mean_max_reliable": mm_rel,
    }


def _snapshot_good_set(res: Any, us: np.ndarray, system: tuple, trusted: bool) -> tuple:
    """The fraction of snapshots ``us`` in the good set ``N^ε`` of ``system`` ``(n, d, λ, ε)``
    and its error, recounted with :func:`good_set_mask`; ``(None, None)`` without a good set
    or when the snapshots hold no more than ``k`` levels."""
    n, d, lam, eps = system
    if res.k is None or us.shape[1] <= res.k:
        return None, None
    good = good_set_mask(np.rint(us * n).astype(np.int64), n, d, lam, eps, res.k)
    return float(good.mean()), _snapshot_error(good, trusted)[0]


def equilibrium(
    n: int,
    d: int,
    lam: float,
    *,
    steps: int,
    burn_in: int,
    levels: int,
    snapshots: int = SNAPSHOTS,
    seed: int | np.random.SeedSequence = 0,
    eps: float = 0.1,
    k: int | None = None,
) -> dict[str, Any]:
    """Equilibrium statistics of the chain started at the rounded fixed point (one
    :func:`supermarket.simulate` run; docs/mixing.md, "The paper-000 experiments").

    Parameters
    ----------
    n, d, lam : int, int, float
        The system (``λ < 1``).
    steps, burn_in : int
        Measured steps, and steps of burn-in before them (MSER-5 may drop more).
    levels : int
        Profile levels returned, ``u_1..u_{levels+1}``, and fractions at length ``1..levels``.
    snapshots : int
        About this many equally spaced snapshots (error bars of the maximum and ``u_j − u_{j+1}``).
    seed : int or numpy.random.SeedSequence
    eps : float
        ε of the good set ``N^ε`` (docs/model.md §5).
    k : int, optional
        When given, must equal ``k_{λ,d}`` (the good set is always measured for ``d >= 2``).

    Returns
    -------
    dict
        ``u_mean``, ``u_stderr``, ``u_reliable`` (from simulate), likewise ``frac_*`` (``E[u_j −
        u_{j+1}]``, ``j = 1..levels``); ``X``, ``X_stderr``, ``X_reliable`` for ``X`` in ``max_share``
        (time share of each maximum), ``mean_max``, ``good_set_fraction`` (None for ``d = 1``);
        ``good_set_fraction_snapshots``
        and its ``_stderr`` (recounted with :func:`good_set_mask`; None when ``levels <= k``);
        ``reliable``, ``self_checks_failed``, ``notes``, ``snapshots``, ``steps``,
        ``events_per_second``.  The errors simulate does not give come from a blocking analysis
        of the snapshots (docs/mixing.md).

    Raises
    ------
    ValueError
        ``k`` is not ``k_{λ,d}``; bad parameters (from simulate).

    Examples
    --------
    >>> eq = equilibrium(100, 2, 0.8, steps=400_000, burn_in=20_000, levels=3, seed=1)
    >>> bool(eq["u_reliable"][0]), bool(abs(eq["u_mean"][0] - 0.8) < 5 * eq["u_stderr"][0])
    (True, True)
    """
    levels = check_int("levels", levels, minimum=1, maximum=10_000)
    snapshots = check_int("snapshots", snapshots, minimum=64, maximum=sim.MAX_RECORDS)
    steps = check_int("steps", steps, minimum=1)
    if k is not None:
        k_ld = th.k_lambda_d(check_int("d", d, minimum=2), lam)
        if check_int("k", k, minimum=1) != k_ld:
            raise ValueError(f"k must be k_(λ,d) = {k_ld} (the good set of docs/model.md §5); got {k!r}")
    res = sim.simulate(
        n,
        d,
        lam,
        steps=steps,
        burn_in=burn_in,
        start="fixed-point",
        eps=eps if good_set_refusal(System(n, d, lam)) is None else None,  # d = 1 (M/M/1) has no good set
        seed=seed,
        record_every=max(steps // snapshots, 1),
        record_levels=levels + 1,
        progress=False,
    )
    assert isinstance(res, sim.SimulationResult)  # exponential service, one class: the profile engine
    failed = [c for c in res.self_checks if c["result"] == "fail"]
    trusted = bool(all(s["forgotten"] for s in res.start_up) and not failed)
    traj = res.trajectory
    assert traj is not None  # record_every was given
    m = min(levels + 1, res.u_mean.size)  # levels never reached: exactly 0 in this run, no error to estimate

    def pad(a: np.ndarray, dtype: type = float) -> np.ndarray:
        return np.concatenate([np.asarray(a[:m], dtype=dtype), np.zeros(levels + 1 - m, dtype=dtype)])

    u_mean, u_se, u_rel = pad(res.u_mean), pad(res.u_stderr), pad(res.u_reliable, bool)
    us = np.asarray(traj.u)  # (T, L): u_1..u_{levels+1}
    frac_mean = u_mean[:-1] - u_mean[1:]
    fs = [_snapshot_error(us[:, j] - us[:, j + 1], trusted) for j in range(levels)]
    mxs = np.asarray(traj.max)
    # an independent recount of N^ε on the snapshots (good_set_mask, from theory's bands)
    gs_snap, gs_snap_se = _snapshot_good_set(res, us, (n, d, lam, eps), trusted)
    return {
        "u_mean": u_mean,
        "u_stderr": u_se,
        "u_reliable": u_rel,
        "frac_mean": frac_mean,
        "frac_stderr": np.array([f[0] for f in fs]),
        "frac_reliable": np.array([f[1] for f in fs]),
        **_max_stats(res, mxs, trusted),
        "good_set_fraction": res.good_set_fraction,
        "good_set_fraction_stderr": res.good_set_fraction_stderr,
        "good_set_fraction_reliable": res.good_set_fraction_reliable,
        "good_set_fraction_snapshots": gs_snap,
        "good_set_fraction_snapshots_stderr": gs_snap_se,
        "reliable": bool(res.reliable and trusted),
        "self_checks_failed": len(failed),
        "notes": list(res.notes),
        "snapshots": int(len(mxs)),
        "steps": int(res.steps),
        "events_per_second": float(res.events_per_second),
    }


def _map_configs(fn, tasks, workers, client=None, cost=None):
    """One configuration per task through :mod:`supermarket.parallel` (threads, or ``client``),
    results in task order; with ``cost`` the costliest start first (the results do not change)."""
    tasks = list(tasks)
    order = list(range(len(tasks))) if cost is None else sorted(range(len(tasks)), key=lambda i: -cost[i])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = parallel.map_tasks(
            fn,
            [tasks[i] for i in order],
            workers=_mixing_workers(workers, len(tasks)),
            client=client,
            backend="threads",
        )
    out = [None] * len(tasks)
    for i, r in zip(order, res):
        out[i] = r
    return out


def _task_seconds(d: int, steps: float) -> float:
    """Expected seconds of one equilibrium run of ``steps`` steps (burn-in included) on one core."""
    rate = PROFILE_RATE_D1_STEPS_PER_S if d == 1 else PROFILE_RATE_STEPS_PER_S
    return steps / rate + TASK_OVERHEAD_S * (2 if d == 1 else 1)


def _equilibrium_results(results, what, make_tasks, fn, steps_of, quick, seed, workers, client):
    """``results`` when given (:func:`.driver.run` runs E1 and E4 together), else the runs of
    ``make_tasks(quick, seed)`` by ``fn`` (``steps_of(task)`` for the progress line)."""
    if results is not None:
        return results
    tasks, cost = make_tasks(quick, seed)
    _progress(f"{what}: {len(tasks)} configurations, {sum(steps_of(t) for t in tasks) / 1e6:.0f}M steps")
    return _map_configs(fn, tasks, workers, client, cost=cost)
