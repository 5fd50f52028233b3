"""One equilibrium run of the paper-000 experiments (E1, E4) and how they are run.

:func:`equilibrium` measures the chain started at the rounded fixed point with
:func:`supermarket.simulate` (profile engine, discrete time) and adds blocking error bars
from equally spaced snapshots for what simulate gives none (the maximum's law,
``u_j − u_{j+1}``); :func:`good_set_mask` recounts ``N^ε`` on the snapshots
(docs/model.md §5).  :func:`_map_configs` runs one configuration per task through
:mod:`supermarket.parallel`; :func:`_task_seconds` is a run's expected cost.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ... import parallel, stats
from ... import simulation as sim
from ... import theory as th
from ...mixing.coupling import _workers as _mixing_workers
from ...model import check_int
from .output import _progress

# simulate's profile engine (E1, E4), effective steps/s per thread (kernel, analysis and
# snapshots) measured on the shared 2-core development machine at load average 2.4: 35-47e6
# for the n = 10^6 runs of E1, 23-28e6 for E4 with d = 2, 3, 6e6 for d = 1 (an arrival's
# level is found by a scan over the ~log n/log(1/λ) occupied levels); at load 5-6 about half
PROFILE_RATE_STEPS_PER_S = 30e6
PROFILE_RATE_D1_STEPS_PER_S = 5e6
TASK_OVERHEAD_S = 1.0  # per equilibrium run: start-up analysis, snapshot blocking (2 s for d = 1)
SNAPSHOTS = 2**17  # snapshots per equilibrium run, for the error bars simulate does not give


def good_set_mask(snaps: ArrayLike, n: int, d: int, lam: float, eps: float, k: int) -> np.ndarray:
    """Membership of each snapshot (rows of counts ``c_1..c_K``, ``K > k``) in ``N^ε``:
    clause (a) ``c_{k+1} = 0`` and clause (b) ``n − c_j`` within the bands of
    :func:`supermarket.theory.good_set_bounds` for ``j = 1..k`` (docs/model.md §5)."""
    snaps = np.asarray(snaps)
    if snaps.ndim != 2 or snaps.shape[1] <= k:
        raise ValueError(f"snapshots must have more than k={k} levels")
    lo, hi = th.good_set_bounds(n, d, lam, eps, k)
    shorter = n - snaps[:, :k]
    ok_a = snaps[:, k] == 0
    ok_b = np.all((shorter >= lo) & (shorter <= hi), axis=1)
    return ok_a & ok_b


def _snapshot_error(series, trusted: bool):
    """Blocking standard error of the average of an equally spaced snapshot series
    (:func:`supermarket.stats.blocking`), as ``(stderr, reliable)``; ``reliable`` also needs
    the run itself to be trusted (start forgotten, self-checks passed).  A series that
    differs from its median in fewer than ``MIN_BLOCKS`` snapshots (a rare event) gets no
    error bar: ``(nan, False)``."""
    x = np.asarray(series, dtype=float)
    if np.count_nonzero(x != np.median(x)) < stats.MIN_BLOCKS:
        return math.nan, False  # (almost) constant: too few changes seen to know the error
    e = stats.blocking(x)
    return float(e.stderr), bool(e.reliable and trusted)


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
    """Equilibrium statistics of the chain started at the rounded fixed point, measured by
    :func:`supermarket.simulate` (profile engine, discrete time, one replication).

    Parameters
    ----------
    n, d, lam : int, int, float
        The system (``λ < 1``).
    steps, burn_in : int
        Measured steps, and steps of burn-in before them (MSER-5 may drop more).
    levels : int
        Profile levels returned, ``u_1..u_{levels+1}``, and fractions at length ``1..levels``.
    snapshots : int
        About this many equally spaced snapshots of the state after the burn-in (for the
        error bars of the maximum's law and of ``u_j − u_{j+1}``).
    seed : int or numpy.random.SeedSequence
    eps : float
        ε of the good set ``N^ε`` (docs/model.md §5).
    k : int, optional
        When given, must equal ``k_{λ,d}`` (the good set is always measured for ``d >= 2``).

    Returns
    -------
    dict
        ``u_mean``, ``u_stderr``, ``u_reliable`` (time averages with blocking errors, from
        simulate); ``frac_mean``, ``frac_stderr``, ``frac_reliable`` (fraction of queues of
        length ``j = 1..levels``, ``E[u_j − u_{j+1}]``); ``max_share`` (time share of each
        maximum queue length, from simulate), ``max_share_stderr``, ``max_share_reliable``;
        ``mean_max``, ``mean_max_stderr``, ``mean_max_reliable``; ``good_set_fraction``,
        ``good_set_fraction_stderr``, ``good_set_fraction_reliable`` (None for ``d = 1``);
        ``good_set_fraction_snapshots`` and its ``_stderr``: the same share recounted on the
        snapshots with :func:`good_set_mask` (None when ``levels <= k``);
        ``reliable`` (simulate's verdict: every error bar that matters is trusted),
        ``self_checks_failed``, ``notes``, ``snapshots``, ``steps``, ``events_per_second``.

    Notes
    -----
    The time shares of the maximum come from simulate's time averages; simulate gives no
    standard error for them, so theirs (and those of the mean maximum and of ``u_j − u_{j+1}``)
    come from a blocking analysis of the snapshot series: the standard error of the snapshot
    average.  With snapshots much denser than the correlation time it is close to that of
    the time average (and not smaller, up to its own noise).  Error bars are marked reliable
    only when the blocking reached a plateau and simulate trusts the run (start forgotten,
    self-checks passed).

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
        eps=eps,
        seed=seed,
        record_every=max(steps // snapshots, 1),
        record_levels=levels + 1,
        progress=False,
    )
    failed = [c for c in res.self_checks if c["result"] == "fail"]
    trusted = bool(all(s["forgotten"] for s in res.start_up) and not failed)
    traj = res.trajectory
    assert traj is not None  # record_every was given
    L = levels + 1
    u_mean = np.zeros(L)
    u_se = np.full(L, np.nan)
    u_rel = np.zeros(L, dtype=bool)
    m = min(L, res.u_mean.size)
    u_mean[:m] = res.u_mean[:m]
    u_se[:m] = res.u_stderr[:m]
    u_rel[:m] = res.u_reliable[:m]
    u_se[m:] = 0.0  # levels never reached: exactly 0 in this run, no error to estimate
    us = np.asarray(traj.u)  # (T, L): u_1..u_{levels+1}
    frac_mean = u_mean[:-1] - u_mean[1:]
    fs = [_snapshot_error(us[:, j] - us[:, j + 1], trusted) for j in range(levels)]
    top = max(res.max_queue_dist) if res.max_queue_dist else 0
    width = max(top, int(traj.max.max()) if traj.max.size else 0) + 1
    share = np.zeros(width)
    for mm, p in res.max_queue_dist.items():
        share[mm] = p
    mxs = np.asarray(traj.max)
    se_rel = [_snapshot_error(mxs == mm, trusted) for mm in range(width)]
    mean_max = float(np.dot(np.arange(width), share))
    mm_se, mm_rel = _snapshot_error(mxs, trusted)
    # an independent recount of N^ε on the snapshots (good_set_mask, from theory's bands)
    gs_snap = gs_snap_se = None
    if res.k is not None and us.shape[1] > res.k:
        good = good_set_mask(np.rint(us * n).astype(np.int64), n, d, lam, eps, res.k)
        gs_snap = float(good.mean())
        gs_snap_se = _snapshot_error(good, trusted)[0]
    out = {
        "u_mean": u_mean,
        "u_stderr": u_se,
        "u_reliable": u_rel,
        "frac_mean": frac_mean,
        "frac_stderr": np.array([f[0] for f in fs]),
        "frac_reliable": np.array([f[1] for f in fs]),
        "max_share": share,
        "max_share_stderr": np.array([s[0] for s in se_rel]),
        "max_share_reliable": np.array([s[1] for s in se_rel]),
        "mean_max": mean_max,
        "mean_max_stderr": mm_se,
        "mean_max_reliable": mm_rel,
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
    return out


def _map_configs(fn, tasks, workers, client=None, cost=None):
    """One configuration per task through the one parallel layer (threads locally: the
    kernels release the GIL; a Dask ``client`` when given); results in task order.  With
    ``cost`` (one number per task) the costliest tasks start first, so that the longest
    one does not start last (each task has its own seed: the results do not change).
    simulate's warnings are recorded in each result's ``notes`` instead of printed."""
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
    """``results`` when given (:func:`.driver.run` runs E1 and E4 together), else the
    experiment's equilibrium runs: ``make_tasks(quick, seed)`` gives the tasks and their
    costs, ``fn`` runs one, ``steps_of(task)`` is its steps (for the progress line)."""
    if results is not None:
        return results
    tasks, cost = make_tasks(quick, seed)
    _progress(f"{what}: {len(tasks)} configurations, {sum(steps_of(t) for t in tasks) / 1e6:.0f}M steps")
    return _map_configs(fn, tasks, workers, client, cost=cost)
