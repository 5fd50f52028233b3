"""The experiments of paper 000 at sizes a laptop can run (docs/model.md §4, §5, §6).

``run(out_dir, quick=False, seed=0, workers=None)`` writes, for each experiment, a table
(``E*.csv`` and ``E*.json``), a figure (``E*.png``) and a short Markdown summary
(``E*.md``), plus ``summary.md`` with every claim and what the runs show:

- **E1 equilibrium** (docs/model.md §4, §5): ``λ = 1 − n^{−α}``, ``d = ⌊n^β⌋``.  For ``α/β``
  not an integer: the maximum queue length against ``k = ⌈α/β⌉`` (and ``k_{λ,d}``, and the
  reconstructed hypothesis "largest k with nπ(k) >= 1"), the fraction of queues of length
  ``k`` against ``1 − 2n^{−α+(k−1)β}``, the counts of shorter queues against
  ``n(1−λ)(λd)^{j−1}``, the share of time in ``N^ε``.  For ``α/β`` an integer (``n`` chosen
  so that ``n^β`` is an integer and ``1/(1−λ) = d^k`` exactly): the maximum is ``k`` or
  ``k+1``.
- **E2 mixing scaling** (docs/model.md §6): coalescence time from the rounded fixed point (a good
  state) with a stationary copy, against ``k d^{k−1} n log n`` and ``d^{k−1} n``, log-log,
  with fitted slopes.
- **E3 bad starts** (docs/model.md §6): from ``‖x‖₁ = g n`` and from one queue of length ``ℓ``,
  against ``(1−λ)^{−1} g n`` and ``ℓ n``.
- **E4 power of two choices** (docs/model.md §3): the equilibrium maximum for ``d = 1`` against
  ``log n / log(1/λ)``, and for ``d = 2, 3`` against ``log log n / log d``.

Equilibrium statistics (E1, E4) come from :func:`supermarket.simulate` (profile engine,
discrete time) started at the rounded fixed point, with blocking standard errors and a
``reliable`` flag per error bar (docs/model.md §9); comparisons whose error bar is not
reliable are reported as "too short to know".  Mixing times come from
:func:`supermarket.mixing.coalescence`.  The
papers' orders are taken with constant 1.  Quick mode runs in under 3 minutes on 2 cores;
full mode prints its expected duration first.
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from .. import mixing as mx
from .. import parallel
from .. import simulation as sim
from .. import stats
from .. import theory as th
from ..mixing.coupling import _workers as _mixing_workers
from ..model import check_int, spawn_seeds
from ..jsonable import to_jsonable

__all__ = ["run", "e1_equilibrium", "e2_mixing_scaling", "e3_bad_starts", "e4_power_of_choices",
           "equilibrium", "good_set_mask", "expected_steps", "expected_seconds"]

RATE_STEPS_PER_S = 7.0e6  # coupling kernel (E2, E3): effective steps/s per core on a quick run
# simulate's profile engine (E1, E4), effective steps/s per thread (kernel, analysis and
# snapshots) measured on the shared 2-core development machine at load average 2.4: 35-47e6
# for the n = 10^6 runs of E1, 23-28e6 for E4 with d = 2, 3, 6e6 for d = 1 (an arrival's
# level is found by a scan over the ~log n/log(1/λ) occupied levels); at load 5-6 about half
PROFILE_RATE_STEPS_PER_S = 30e6
PROFILE_RATE_D1_STEPS_PER_S = 5e6
TASK_OVERHEAD_S = 1.0  # per equilibrium run: start-up analysis, snapshot blocking (2 s for d = 1)
SNAPSHOTS = 2**17  # snapshots per equilibrium run, for the error bars simulate does not give


# =========================================================================== helpers
def _progress(msg: str) -> None:
    """One progress line on stderr (only when stderr is a terminal)."""
    if sys.stderr.isatty():
        print(f"[paper000] {msg}", file=sys.stderr, flush=True)


def _jsonable(obj):
    """Plain JSON for the tables (non-finite values become null)."""
    return to_jsonable(obj, null_nonfinite=True)


def _write_table(out: Path, name: str, rows: list[dict], meta: dict) -> None:
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    with open(out / f"{name}.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow({k: (json.dumps(_jsonable(v)) if isinstance(v, (list, dict, tuple)) else _jsonable(v))
                        for k, v in r.items()})
    with open(out / f"{name}.json", "w") as fh:
        json.dump(_jsonable({"meta": meta, "rows": rows}), fh, indent=2)


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _fit_slope(x, y):
    """Least-squares slope and intercept of log y against log x."""
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    if lx.size < 2 or np.ptp(lx) == 0:
        return float("nan"), float("nan")
    b, a = np.polyfit(lx, ly, 1)
    return float(b), float(a)


def _fmt(x, digits=3):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    if isinstance(x, str):
        return x
    return f"{x:.{digits}g}"


# =========================================================================== equilibrium
def good_set_mask(snaps, n, d, lam, eps, k) -> np.ndarray:
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


def equilibrium(n, d, lam, *, steps, burn_in, levels, snapshots=SNAPSHOTS, seed=0, eps=0.1, k=None):
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
    res = sim.simulate(n, d, lam, steps=steps, burn_in=burn_in, start="fixed-point", eps=eps, seed=seed,
                       record_every=max(steps // snapshots, 1), record_levels=levels + 1, progress=False)
    failed = [c for c in res.self_checks if c["result"] == "fail"]
    trusted = bool(all(s["forgotten"] for s in res.start_up) and not failed)
    traj = res.trajectory
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
    out = {"u_mean": u_mean, "u_stderr": u_se, "u_reliable": u_rel,
           "frac_mean": frac_mean, "frac_stderr": np.array([f[0] for f in fs]),
           "frac_reliable": np.array([f[1] for f in fs]),
           "max_share": share, "max_share_stderr": np.array([s[0] for s in se_rel]),
           "max_share_reliable": np.array([s[1] for s in se_rel]),
           "mean_max": mean_max, "mean_max_stderr": mm_se, "mean_max_reliable": mm_rel,
           "good_set_fraction": res.good_set_fraction, "good_set_fraction_stderr": res.good_set_fraction_stderr,
           "good_set_fraction_reliable": res.good_set_fraction_reliable,
           "good_set_fraction_snapshots": gs_snap, "good_set_fraction_snapshots_stderr": gs_snap_se,
           "reliable": bool(res.reliable and trusted), "self_checks_failed": len(failed),
           "notes": list(res.notes), "snapshots": int(len(mxs)), "steps": int(res.steps),
           "events_per_second": float(res.events_per_second)}
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
        res = parallel.map_tasks(fn, [tasks[i] for i in order], workers=_mixing_workers(workers, len(tasks)),
                                 client=client, backend="threads")
    out = [None] * len(tasks)
    for i, r in zip(order, res):
        out[i] = r
    return out


# =========================================================================== E1
Z_FINDING = 4.5  # standard errors: a difference smaller than this is "within error"


def _bound_verdict(value, stderr, reliable, bound) -> str:
    """``value`` against a lower ``bound``: "meets", "within error", "below", or "too short
    to know" when the error bar is not reliable and the value is below the bound."""
    if value >= bound:
        return "meets"
    if not reliable or not math.isfinite(stderr):
        return "too short to know"
    return "within error" if bound - value <= Z_FINDING * stderr else "below"


def _e1_configs(quick: bool):
    # k = 2, 2, 1 with (1−λ)d^k = n^{kβ−α} well above log n (the maximum is k at laptop n), and
    # k = 2, 3 with n^{kβ−α} below log n (the maximum is still k+1 at laptop n)
    non_integer = [(0.6, 0.5), (0.5, 0.4), (0.2, 0.5), (0.5, 0.3), (0.6, 0.25)]
    ns = [1000, 10_000] if quick else [1000, 10_000, 100_000, 1_000_000]
    cfg = []
    for a, b in non_integer:
        for n in ns:
            cfg.append((n, a, b))
    # α/β an integer: n with n^β an integer, so that 1/(1−λ) = d^k exactly
    integer = [(0.5, 0.25, [6, 10] if quick else [6, 10, 18, 32], 4),
               (0.5, 0.5, [32, 100] if quick else [32, 100, 316, 1000], 2)]
    for a, b, ms, power in integer:
        for m in ms:
            cfg.append((m ** power, a, b))
    return cfg


def _e1_params(n, a, b):
    d = int(round(n ** b)) if abs(n ** b - round(n ** b)) < 1e-9 else int(math.floor(n ** b))
    one = n ** (-a)
    lam = 1.0 - one
    return d, lam


def _e1_plan(quick: bool):
    plan = []
    for n, a, b in _e1_configs(quick):
        d, lam = _e1_params(n, a, b)
        up = th.mixing_bounds(n, d, lam).upper_steps
        factor, cap = (5, 1.5e8) if quick else (20, 2e9)
        steps = int(min(max(factor * up, 2e6), cap))
        burn = int(min(max(up, 2e5), cap / 4))
        plan.append((n, a, b, d, lam, steps, burn, steps >= int(5 * up)))
    return plan


def _equilibrium_task(args):
    """``("E1" | "E4", task)``: one equilibrium run of either experiment."""
    which, task = args
    return _e1_task(task) if which == "E1" else _e4_task(task)


def _e1_task(args):
    n, a, b, d, lam, steps, burn, ss = args
    k = th.k_lambda_d(d, lam)
    levels = k + 3
    eq = equilibrium(n, d, lam, steps=steps, burn_in=burn, levels=levels, seed=ss, k=k)
    return eq


def _e1_tasks(quick: bool, seed):
    """The E1 equilibrium runs: tasks for :func:`_e1_task` and their expected seconds."""
    plan = _e1_plan(quick)
    tasks = [p[:7] + (s,) for p, s in zip(plan, spawn_seeds(seed, len(plan)))]
    return tasks, [_task_seconds(p[3], p[5] + p[6]) for p in plan]


def e1_equilibrium(out: Path, *, quick: bool, seed, workers, client=None, results=None) -> dict:
    """E1 (see the module docstring); ``results``: the outputs of :func:`_e1_task` for
    :func:`_e1_tasks` ``(quick, seed)``, when already run (``run`` runs E1 and E4 together)."""
    plan = _e1_plan(quick)
    if results is None:
        tasks, cost = _e1_tasks(quick, seed)
        _progress(f"E1 equilibrium: {len(plan)} configurations, "
                  f"{sum(p[5] + p[6] for p in plan) / 1e6:.0f}M steps")
        results = _map_configs(_e1_task, tasks, workers, client, cost=cost)
    res = results
    rows = []
    for (n, a, b, d, lam, steps, burn, long_enough), eq in zip(plan, res):
        ratio = a / b
        integer = abs(ratio - round(ratio)) < 1e-9
        k_grid = math.ceil(ratio - 1e-12)
        k = th.k_lambda_d(d, lam)
        kr = th.k_report(d, lam)
        share = eq["max_share"]
        sse = eq["max_share_stderr"]
        srel = eq["max_share_reliable"]
        modal = int(np.argmax(share))
        u = eq["u_mean"]
        frac_k = float(eq["frac_mean"][k - 1])
        frac_k_se = float(eq["frac_stderr"][k - 1])
        frac_k_rel = bool(eq["frac_reliable"][k - 1])
        bound = 1 - 2 * n ** (-a + (k - 1) * b)
        at = lambda arr, i, default: (arr[i].item() if i < arr.size else default)  # noqa: E731
        row = {
            "n": n, "alpha": a, "beta": b, "alpha_over_beta": round(ratio, 6), "integer_ratio": integer,
            "d": d, "load": lam, "k_grid": k_grid, "k": k, "k_hypothesis": th.k_hypothesis(n, d, lam),
            "possible_max": list(kr.possible_max), "steps": steps, "burn_in": burn,
            "steps_at_least_5_upper": long_enough,
            "reliable": eq["reliable"], "notes": "; ".join(eq["notes"]),
            "modal_max": modal, "max_always": bool(share[modal] == 1.0), "mean_max": eq["mean_max"],
            "mean_max_stderr": eq["mean_max_stderr"], "mean_max_reliable": eq["mean_max_reliable"],
            "share_max_eq_k": at(share, k, 0.0), "share_max_eq_k_stderr": at(sse, k, math.nan),
            "share_max_eq_k_reliable": at(srel, k, False),
            "share_max_eq_k1": at(share, k + 1, 0.0), "share_max_eq_k1_stderr": at(sse, k + 1, math.nan),
            "share_max_eq_k1_reliable": at(srel, k + 1, False),
            "share_max_gt_k1": float(share[k + 2:].sum()),
            "frac_at_k": frac_k, "frac_at_k_stderr": frac_k_se, "frac_at_k_reliable": frac_k_rel,
            "frac_at_k_bound": bound, "frac_at_k_meets_bound": frac_k >= bound,
            "frac_at_k_verdict": _bound_verdict(frac_k, frac_k_se, frac_k_rel, bound),
            "good_set_fraction": eq["good_set_fraction"], "good_set_fraction_stderr": eq["good_set_fraction_stderr"],
            "good_set_fraction_reliable": eq["good_set_fraction_reliable"],
        }
        for j in range(1, k + 1):
            row[f"shorter_than_{j}"] = float(n * (1 - u[j - 1]))
            row[f"shorter_than_{j}_stderr"] = float(n * eq["u_stderr"][j - 1])
            row[f"shorter_than_{j}_reliable"] = bool(eq["u_reliable"][j - 1])
            row[f"shorter_than_{j}_pred"] = float(n * (1 - lam) * (lam * d) ** (j - 1))
        rows.append(row)
    meta = {"experiment": "E1 equilibrium", "quick": quick, "spec": "docs/model.md §4, §5",
            "lambda": "1 - n^-alpha", "d": "floor(n^beta) (exact n^beta when integer)", "eps": 0.1,
            "engine": "supermarket.simulate (profile engine, discrete time, start at the rounded fixed point)",
            "errors": "u, shorter_than_j, good_set_fraction: simulate's blocking analysis of 1024 batch means; "
                      "frac_at_k, mean_max, share_max_*: blocking analysis of about "
                      f"{SNAPSHOTS} equally spaced snapshots; *_reliable: the blocking reached a plateau "
                      "with at least 32 blocks, the start was forgotten and the self-checks passed",
            "frac_at_k": "E[u_k - u_(k+1)]",
            "frac_at_k_verdict": f"meets: frac >= bound; within error: below by at most {Z_FINDING} stderr; "
                                 f"below: by more; too short to know: error bar not reliable"}
    _write_table(out, "E1_equilibrium", rows, meta)
    _e1_figure(out, rows)
    md = _e1_markdown(rows)
    (out / "E1_equilibrium.md").write_text(md)
    return {"rows": rows, "markdown": md}


def _e1_figure(out, rows):
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    ax = axes[0]
    for integer, mk in ((False, "o"), (True, "s")):
        sel = [r for r in rows if r["integer_ratio"] == integer]
        ax.scatter([r["k"] for r in sel], [r["mean_max"] for r in sel], marker=mk,
                   label="α/β integer" if integer else "α/β not integer")
    ks = sorted({r["k"] for r in rows})
    ax.plot(ks, ks, "k--", lw=1, label="max = k")
    ax.plot(ks, [k + 1 for k in ks], "k:", lw=1, label="max = k+1")
    ax.set_xlabel("k = k_(λ,d)")
    ax.set_ylabel("time-averaged maximum queue length")
    ax.legend(fontsize=8)
    ax.set_title("E1: maximum against k")
    ax = axes[1]
    sel = [r for r in rows if not r["integer_ratio"]]
    ax.errorbar([r["frac_at_k_bound"] for r in sel], [r["frac_at_k"] for r in sel],
                yerr=[Z_FINDING * r["frac_at_k_stderr"] if r["frac_at_k_reliable"] else 0.0 for r in sel], fmt="o")
    lo = min(min(r["frac_at_k_bound"] for r in sel), 0)
    ax.plot([lo, 1], [lo, 1], "k--", lw=1, label="fraction = bound")
    ax.set_xlabel("1 − 2 n^(−α+(k−1)β)")
    ax.set_ylabel("fraction of queues of length k")
    ax.set_title("E1: fraction at length k (α/β not integer)")
    ax.legend(fontsize=8)
    ax = axes[2]
    xs, ys, cs = [], [], []
    for r in rows:
        for j in range(1, r["k"] + 1):
            xs.append(r[f"shorter_than_{j}_pred"])
            ys.append(r[f"shorter_than_{j}"])
            cs.append(j)
    sc = ax.scatter(xs, ys, c=cs, cmap="viridis")
    m = [min(xs + ys) * 0.8, max(xs + ys) * 1.2]
    ax.plot(m, m, "k--", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n(1−λ)(λd)^(j−1)")
    ax.set_ylabel("queues shorter than j (simulated)")
    ax.set_title("E1: shorter queues (linearised, derived)")
    fig.colorbar(sc, ax=ax, label="j")
    fig.tight_layout()
    fig.savefig(out / "E1_equilibrium.png", dpi=110)
    plt.close(fig)


def _pm(value, stderr, reliable, digits=3, share=False) -> str:
    """``value ± stderr``, or ``value (too short to know)`` when the error bar is not reliable;
    with ``share``, a time share of exactly 0 or 1 reads "never" or "always" (a fact of the run)."""
    if value is None:
        return "—"
    if share and value in (0.0, 1.0):
        return f"{value:.0f} (never)" if value == 0.0 else f"{value:.0f} (always)"
    if reliable and stderr is not None and math.isfinite(stderr):
        return f"{value:.{digits}f} ± {stderr:.1g}"
    return f"{value:.{digits}f} (too short to know)"


def _modal_calls(rows):
    """``(close, unknown)``: rows where P(max = k) and P(max = k+1) differ by at most
    ``Z_FINDING`` standard errors (both error bars reliable), and rows where an error bar
    needed for the call is not reliable (shares of exactly 0 or 1 need none)."""
    close = unknown = 0
    for r in rows:
        a, b = r["share_max_eq_k"], r["share_max_eq_k1"]
        if a in (0.0, 1.0) or b in (0.0, 1.0):
            continue
        if not (r["share_max_eq_k_reliable"] and r["share_max_eq_k1_reliable"]):
            unknown += 1
        elif abs(a - b) <= Z_FINDING * math.hypot(r["share_max_eq_k_stderr"], r["share_max_eq_k1_stderr"]):
            close += 1
    return close, unknown


def _mean_max_cell(r) -> str:
    """The mean maximum ± its error, or "m (always)" when the maximum never left ``m``."""
    if r.get("max_always"):
        return f"{r['modal_max']} (always)"
    return _pm(r["mean_max"], r["mean_max_stderr"], r["mean_max_reliable"])


def _e1_markdown(rows):
    lines = ["# E1: equilibrium at length k (paper 000, docs/model.md §4–5)", "",
             "λ = 1 − n^−α, d = ⌊n^β⌋, chain started at the rounded fixed point (supermarket.simulate, "
             "profile engine); time averages ± standard error from a blocking analysis (\"too short to know\": "
             "the run is shorter than needed to estimate its own error).", "",
             "| n | α | β | α/β | d | λ | k | hyp. | modal max | mean max | P(max=k) | P(max=k+1) | "
             "frac at k | bound 1−2n^(−α+(k−1)β) | time in N^0.1 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['n']} | {r['alpha']} | {r['beta']} | {r['alpha_over_beta']:.3g}{' (int)' if r['integer_ratio'] else ''} "
            f"| {r['d']} | {r['load']:.6g} | {r['k']} | {r['k_hypothesis']} | {r['modal_max']} | "
            f"{_mean_max_cell(r)} | "
            f"{_pm(r['share_max_eq_k'], r['share_max_eq_k_stderr'], r['share_max_eq_k_reliable'], share=True)} | "
            f"{_pm(r['share_max_eq_k1'], r['share_max_eq_k1_stderr'], r['share_max_eq_k1_reliable'], share=True)} | "
            f"{_pm(r['frac_at_k'], r['frac_at_k_stderr'], r['frac_at_k_reliable'], 4)} | {r['frac_at_k_bound']:.3f} | "
            f"{_pm(r['good_set_fraction'], r['good_set_fraction_stderr'], r['good_set_fraction_reliable'], share=True)} |")
    ni = [r for r in rows if not r["integer_ratio"]]
    it = [r for r in rows if r["integer_ratio"]]
    lines += ["", "**What the runs show.**", ""]
    n_eq_k = sum(r["modal_max"] == r["k"] for r in ni)
    n_eq_hyp = sum(abs(r["modal_max"] - r["k_hypothesis"]) <= 1 for r in rows)
    hyp_k = [r for r in ni if r["k_hypothesis"] == r["k"]]
    others = [r for r in ni if r["modal_max"] != r["k"]]
    at_k1 = sum(r["modal_max"] == r["k"] + 1 for r in others)
    applies = [th.theorem_1_2(r["n"], r["d"], r["load"]).applies for r in rows]
    sentence = (f"- α/β not an integer: the modal maximum equals k in {n_eq_k} of {len(ni)} configurations; "
                f"in {sum(r['modal_max'] == r['k'] for r in hyp_k)} of the {len(hyp_k)} where the hypothesis "
                "(largest k with nπ(k) ≥ 1, reconstructed) is k itself.")
    if others:
        sentence += (f" In the other {len(others)} it is k+1 in {at_k1}"
                     + (f" and further from k in {len(others) - at_k1}" if at_k1 < len(others) else "") + ".")
    close, unknown = _modal_calls(ni)
    if close or unknown:
        sentence += (" Which of k and k+1 is modal is"
                     + (f" within {Z_FINDING:g} standard errors (too close to call) in {close}" if close else "")
                     + (" and" if close and unknown else "")
                     + (f" too short to know in {unknown}" if unknown else "")
                     + f" of the {len(ni)}.")
    sentence += (f" The conditions of Theorem 1.2 hold in {sum(applies)} of {len(rows)} configurations"
                 + (" (they need n of order 10^15 or more)." if not any(applies) else ".")
                 + f" The modal maximum is within 1 of the hypothesis in {n_eq_hyp} of {len(rows)} configurations.")
    lines.append(sentence)
    verdicts = {v: sum(r["frac_at_k_verdict"] == v for r in ni)
                for v in ("meets", "within error", "below", "too short to know")}
    line = (f"- The fraction of queues of length k is at least 1 − 2n^(−α+(k−1)β) in {verdicts['meets']} of {len(ni)} "
            "configurations with α/β not an integer")
    rest = [f"below it by at most {Z_FINDING:g} standard errors in {verdicts['within error']}"
            if verdicts["within error"] else "",
            f"below it by more in {verdicts['below']}" if verdicts["below"] else "",
            f"below it with an error bar too short to know in {verdicts['too short to know']}"
            if verdicts["too short to know"] else ""]
    rest = [x for x in rest if x]
    lines.append(line + ("; " + "; ".join(rest) if rest else "") + ".")
    ratios = [r[f"shorter_than_{j}"] / r[f"shorter_than_{j}_pred"] for r in rows for j in range(1, r["k"] + 1)]
    lines.append(f"- Queues shorter than j against n(1−λ)(λd)^(j−1) (linearised profile, derived): ratio "
                 f"from {min(ratios):.3g} to {max(ratios):.3g} (1 would be exact agreement).")
    in_km = sum(r["modal_max"] in (r["k"], r["k"] + 1) for r in it)
    lines.append(f"- α/β an integer (1/(1−λ) = d^k exactly): the modal maximum is k or k+1 in {in_km} of {len(it)} "
                 "configurations.")
    g = [r["good_set_fraction"] for r in rows]
    above = [r for r in rows if r["share_max_eq_k"] == 0.0 and r["modal_max"] > r["k"]]
    line = f"- Share of time in N^0.1 (clauses (a), (b)): from {min(g):.3g} to {max(g):.3g}."
    if above:
        line += (f" In the {len(above)} configuration(s) whose maximum never was k or less, it is at most "
                 f"{max(r['good_set_fraction'] for r in above):.3g} (membership needs no queue longer than k).")
    lines.append(line)
    unrel = [r for r in rows if not r["reliable"]]
    lines.append(f"- Error bars: {len(rows) - len(unrel)} of {len(rows)} runs were long enough for simulate to trust "
                 "every error bar that matters" + (
                     "; in the others (n = " + ", ".join(str(r["n"]) for r in unrel)
                     + ") the comparisons that need an error bar are too short to know." if unrel else "."))
    short = [r for r in rows if not r["steps_at_least_5_upper"]]
    if short:
        lines.append(f"- {len(short)} configuration(s) ran fewer than 5 × k d^(k−1) n log n steps (capped).")
    return "\n".join(lines) + "\n"


# =========================================================================== E2
def _e2_configs(quick):
    """(sweep, n, d, λ) rows and the replications per row.  Sweep "n": λ = 0.95 and
    d = 3, 5, 25 (k = 3, 2, 1) across n.  Sweep "d": λ = 0.99, k = 2 fixed, n fixed, d from
    12 to 80 (d^{k−1} = d)."""
    ns = [250, 500, 1000, 2000] if quick else [500, 1000, 2000, 4000, 8000, 16000]
    cfg = [("n", n, d, 0.95) for d in (3, 5, 25) for n in ns]
    n_d = 1000 if quick else 4000
    cfg += [("d", n_d, d, 0.99) for d in (12, 20, 40, 80)]
    return cfg, (12 if quick else 50)


def e2_mixing_scaling(out: Path, *, quick, seed, workers, client=None) -> dict:
    cfg, R = _e2_configs(quick)
    seeds = spawn_seeds(seed, len(cfg))
    rows = []
    for i, ((sweep, n, d, lam), ss) in enumerate(zip(cfg, seeds)):
        _progress(f"E2 mixing scaling {i + 1}/{len(cfg)}: n={n}, d={d}, λ={lam}")
        res = mx.coalescence(n, d, lam, start="fixed-point", replications=R, seed=ss, workers=workers, client=client)
        dd = res.to_dict()
        s = dd["coalescence_steps"]
        rows.append({"sweep": sweep, "n": n, "d": d, "load": lam, "k": dd["k"], "replications": R,
                     "mean_steps": s["mean"], "mean_ci": s["ci"], "median_steps": s["median"],
                     "median_ci": s["median_ci"], "q90_steps": s["q90"], "tmix_bound_steps": dd["tmix_steps"],
                     "censored": dd["censored"], "upper_order": dd["bound_upper_steps"],
                     "lower_order": dd["bound_lower_good_steps"],
                     "mean_over_upper": s["mean"] / dd["bound_upper_steps"],
                     "mean_over_lower": s["mean"] / dd["bound_lower_good_steps"],
                     "slow_mode_steps": n * (1 + lam) * th.slow_mode(d, lam).relaxation_time,
                     "mean_time": dd["coalescence_time"]["mean"], "burn_in": dd["burn_in_steps"],
                     "coupling_increases": dd["coupling_increases"]})
    ok = [r for r in rows if r["censored"] == 0]
    slope_up, icpt_up = _fit_slope([r["upper_order"] for r in ok], [r["mean_steps"] for r in ok])
    slope_lo, icpt_lo = _fit_slope([r["lower_order"] for r in ok], [r["mean_steps"] for r in ok])
    nsw = [r for r in ok if r["sweep"] == "n"]
    per_d = {}
    for d in sorted({r["d"] for r in nsw}):
        sel = [r for r in nsw if r["d"] == d]
        per_d[d] = _fit_slope([r["n"] for r in sel], [r["mean_steps"] for r in sel])[0]
    dsw = [r for r in ok if r["sweep"] == "d"]
    slope_d = _fit_slope([r["d"] for r in dsw], [r["mean_steps"] for r in dsw])[0]
    slope_slow = _fit_slope([r["slow_mode_steps"] * math.log(r["n"]) for r in ok], [r["mean_steps"] for r in ok])[0]
    ratio_by_d = {d: [min(r["mean_over_upper"] for r in nsw if r["d"] == d),
                      max(r["mean_over_upper"] for r in nsw if r["d"] == d)] for d in per_d}
    fits = {"slope_vs_upper": slope_up, "intercept_vs_upper": icpt_up, "slope_vs_lower": slope_lo,
            "intercept_vs_lower": icpt_lo, "slope_vs_n_by_d": per_d, "slope_vs_d_at_fixed_n_k": slope_d,
            "slope_vs_slow_mode_log_n": slope_slow, "mean_over_upper_range_by_d": ratio_by_d}
    meta = {"experiment": "E2 mixing scaling", "quick": quick, "spec": "docs/model.md §2, §6",
            "start": "rounded fixed point (good state) vs stationary copy", "fits": fits}
    _write_table(out, "E2_mixing_scaling", rows, meta)
    _e2_figure(out, rows, fits)
    md = _e2_markdown(rows, fits, R)
    (out / "E2_mixing_scaling.md").write_text(md)
    return {"rows": rows, "fits": fits, "markdown": md}


def _e2_figure(out, rows, fits):
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.6))
    groups = sorted({(r["sweep"], r["d"] if r["sweep"] == "n" else None, r["load"]) for r in rows},
                    key=lambda g: (g[0], g[1] or 0))

    def members(g):
        return [r for r in rows if (r["sweep"], r["d"] if r["sweep"] == "n" else None, r["load"]) == g
                and r["censored"] == 0]

    def errs(sel):
        return np.array([[r["mean_steps"] - r["mean_ci"][0], r["mean_ci"][1] - r["mean_steps"]] for r in sel]).T

    for ax, key, label, slope in ((axes[0], "upper_order", "k d^(k−1) n log n", fits["slope_vs_upper"]),
                                  (axes[1], "lower_order", "d^(k−1) n", fits["slope_vs_lower"])):
        for g in groups:
            sel = members(g)
            if not sel:
                continue
            lab = (f"n sweep, d={g[1]}, k={sel[0]['k']}, λ={g[2]}" if g[0] == "n"
                   else f"d sweep, n={sel[0]['n']}, k=2, λ={g[2]}")
            ax.errorbar([r[key] for r in sel], [r["mean_steps"] for r in sel], yerr=errs(sel), fmt="o", label=lab)
        xs = np.array([r[key] for r in rows])
        grid = np.geomspace(xs.min(), xs.max(), 20)
        icpt = fits["intercept_vs_upper"] if key == "upper_order" else fits["intercept_vs_lower"]
        ax.plot(grid, np.exp(icpt) * grid ** slope, "k-", lw=1, label=f"pooled fit: slope {slope:.2f}")
        ax.plot(grid, grid, "k--", lw=1, label="τ = order")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"{label} (steps)")
        ax.set_ylabel("mean coalescence time τ (steps, 95% CI)")
        ax.legend(fontsize=7)
    axes[0].set_title("E2: τ from a good state vs the upper order")
    axes[1].set_title("E2: τ vs the lower order")
    ax = axes[2]
    sel = [r for r in rows if r["sweep"] == "d" and r["censored"] == 0]
    if sel:
        ax.errorbar([r["d"] for r in sel], [r["mean_steps"] for r in sel], yerr=errs(sel), fmt="o",
                    label=f"slope {fits['slope_vs_d_at_fixed_n_k']:.2f} (d^(k−1) = d: 1)")
        dg = np.array([r["d"] for r in sel], float)
        ax.plot(dg, sel[0]["mean_steps"] * dg / dg[0], "k--", lw=1, label="∝ d")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    ax.set_xlabel("d (k = 2 fixed)")
    ax.set_ylabel("mean coalescence time τ (steps)")
    ax.set_title("E2: τ against d at fixed n and k")
    fig.tight_layout()
    fig.savefig(out / "E2_mixing_scaling.png", dpi=110)
    plt.close(fig)


def _e2_markdown(rows, fits, R):
    lines = ["# E2: mixing time from a good state (paper 000, docs/model.md §6)", "",
             "Coalescence time τ of a copy started at the rounded fixed point with a stationary copy "
             f"(sorted coupling, docs/model.md §2), {R} pairs per row; t_mix(1/4) ≤ q75(τ).", "",
             "| sweep | n | d | λ | k | mean τ (95% CI) | median | q75 (t_mix bound) | k d^(k−1) n log n | d^(k−1) n | "
             "τ/upper | τ/lower | censored |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['sweep']} | {r['n']} | {r['d']} | {r['load']} | {r['k']} | {_fmt(r['mean_steps'])} "
                     f"({_fmt(r['mean_ci'][0])}–{_fmt(r['mean_ci'][1])}) | {_fmt(r['median_steps'])} | "
                     f"{_fmt(r['tmix_bound_steps'])} | {_fmt(r['upper_order'])} | {_fmt(r['lower_order'])} | "
                     f"{_fmt(r['mean_over_upper'])} | {_fmt(r['mean_over_lower'])} | {r['censored']} |")
    lo = min(r["mean_over_lower"] for r in rows)
    hi = max(r["mean_over_lower"] for r in rows)
    up = [r["mean_over_upper"] for r in rows]
    n_sweep = sorted({r["n"] for r in rows if r["sweep"] == "n"})
    nlogn = _fit_slope(n_sweep, [m * math.log(m) for m in n_sweep])[0] if len(n_sweep) > 1 else float("nan")
    dsw = [r for r in rows if r["sweep"] == "d"]
    cond = [th.theorem_1_2(r["n"], r["d"], r["load"]).applies for r in dsw]
    spread = {d: (b / a if a > 0 else float("inf")) for d, (a, b) in fits["mean_over_upper_range_by_d"].items()}
    increases = sum(r["coupling_increases"] for r in rows)
    lines += ["", "**What the runs show.**", "",
              "- slope of log τ against log n at fixed d: " + ", ".join(
                  f"d={d}: {s:.3f}" for d, s in fits["slope_vs_n_by_d"].items()) +
              f" (n log n over n = {n_sweep[0] if n_sweep else '—'}…{n_sweep[-1] if n_sweep else '—'} "
              f"has slope {nlogn:.3f}).",
              f"- slope of log τ against log d at fixed n and k = 2: {_fmt(fits['slope_vs_d_at_fixed_n_k'])} "
              f"(d^(k−1) = d predicts 1); the conditions of Theorem 1.2 hold in {sum(cond)} of the {len(dsw)} "
              "rows of this sweep.",
              "- at fixed d, τ / (k d^(k−1) n log n) across n: " + ", ".join(
                  f"d={d}: {a:.3g}–{b:.3g} (max/min {spread[d]:.2g})"
                  for d, (a, b) in fits["mean_over_upper_range_by_d"].items()) +
              f"; overall {min(up):.3g}–{max(up):.3g}. The papers give orders without constants, so the pooled "
              f"log-log slope against k d^(k−1) n log n, {fits['slope_vs_upper']:.3f}, mixes configurations with "
              f"different constants (against d^(k−1) n: {fits['slope_vs_lower']:.3f}).",
              f"- τ / (d^(k−1) n) ranges from {lo:.3g} to {hi:.3g}"
              + (" (at least 1 everywhere, as the Ω(d^(k−1) n) lower order allows)." if lo >= 1 else
                 f" (below 1 in {sum(r['mean_over_lower'] < 1 for r in rows)} rows; the order has no constant)."),
              f"- against the slow mode (derived): log-log slope of τ against n(1+λ)/μ_k · log n is "
              f"{fits['slope_vs_slow_mode_log_n']:.3f} (μ_k from theory.slow_mode; column slow_mode_steps).",
              ("- the L1 distance never increased in any pair." if increases == 0 else
               f"- the L1 distance increased {increases} times (the sorted coupling should never let it grow)."),
              ]
    return "\n".join(lines) + "\n"


# =========================================================================== E3
def _e3_configs(quick):
    n = 500 if quick else 2000
    d, lam = 3, 0.9
    gs = [5, 10, 20, 40] if quick else [5, 10, 20, 40, 80]
    ls = [50, 100, 200, 400] if quick else [50, 100, 200, 400, 800]
    return n, d, lam, gs, ls, (10 if quick else 40)


def e3_bad_starts(out: Path, *, quick, seed, workers, client=None) -> dict:
    n, d, lam, gs, ls, R = _e3_configs(quick)
    starts = [f"customers:{g}" for g in gs] + [f"long:{l}" for l in ls]
    seeds = spawn_seeds(seed, len(starts))
    rows = []
    for i, (st, ss) in enumerate(zip(starts, seeds)):
        _progress(f"E3 bad starts {i + 1}/{len(starts)}: n={n}, d={d}, λ={lam}, from {st}")
        res = mx.coalescence(n, d, lam, start=st, replications=R, seed=ss, workers=workers, client=client)
        dd = res.to_dict()
        s = dd["coalescence_steps"]
        kind, val = st.split(":")
        rows.append({"start": st, "kind": kind, "value": int(val), "n": n, "d": d, "load": lam, "k": dd["k"],
                     "replications": R, "mean_steps": s["mean"], "mean_ci": s["ci"],
                     "median_steps": s["median"], "tmix_bound_steps": dd["tmix_steps"],
                     "censored": dd["censored"], "lower_order": dd["bound_lower_steps"],
                     "mean_over_lower": s["mean"] / dd["bound_lower_steps"],
                     "good_state_upper": dd["bound_upper_steps"]})
    fits, lin = {}, {}
    for kind in ("customers", "long"):
        sel = [r for r in rows if r["kind"] == kind and r["censored"] == 0]
        fits[kind] = _fit_slope([r["lower_order"] for r in sel], [r["mean_steps"] for r in sel])[0]
        if len(sel) >= 2:
            b, a = np.polyfit([r["lower_order"] for r in sel], [r["mean_steps"] for r in sel], 1)
            lin[kind] = {"slope": float(b), "intercept": float(a)}
        else:
            lin[kind] = {"slope": float("nan"), "intercept": float("nan")}
    meta = {"experiment": "E3 bad starts", "quick": quick, "spec": "docs/model.md §6", "n": n, "d": d, "load": lam,
            "fits_slope_vs_lower": fits, "linear_fit_vs_lower": lin}
    _write_table(out, "E3_bad_starts", rows, meta)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.6))
    for kind, label in (("customers", "‖x‖₁ = g n: (1−λ)^(−1) g n"), ("long", "one queue ℓ: ℓ n")):
        sel = [r for r in rows if r["kind"] == kind]
        x = np.array([r["lower_order"] for r in sel])
        y = np.array([r["mean_steps"] for r in sel])
        err = np.array([[r["mean_steps"] - r["mean_ci"][0],
                         (r["mean_ci"][1] - r["mean_steps"]) if isinstance(r["mean_ci"][1], float) else 0]
                        for r in sel]).T
        ax.errorbar(x, y, yerr=err, fmt="o-", label=f"{label} (slope {fits[kind]:.2f})")
    xs = np.array([r["lower_order"] for r in rows])
    grid = np.geomspace(xs.min(), xs.max(), 10)
    ax.plot(grid, grid, "k--", lw=1, label="τ = lower order")
    ax.plot(grid, (1 + lam) * grid, "k:", lw=1, label="τ = (1+λ) × lower order")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("lower order (steps)")
    ax.set_ylabel("mean coalescence time (steps)")
    ax.set_title(f"E3: bad starts, n={n}, d={d}, λ={lam}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "E3_bad_starts.png", dpi=110)
    plt.close(fig)
    lines = _e3_markdown(rows, fits, lin, n=n, d=d, lam=lam, R=R)
    tv_lines, tv_dict = _e3_tv(out, quick=quick, seed=spawn_seeds(seed, len(starts) + 1)[-1], workers=workers, client=client)
    md = "\n".join(lines + tv_lines) + "\n"
    (out / "E3_bad_starts.md").write_text(md)
    return {"rows": rows, "fits": fits, "linear": lin, "tv": tv_dict, "markdown": md}


def _e3_markdown(rows, fits, lin, *, n, d, lam, R) -> list[str]:
    """The E3 summary, every sentence computed from ``rows`` and the fits."""
    lines = ["# E3: mixing from bad starts (paper 000, docs/model.md §6)", "",
             f"n = {n}, d = {d}, λ = {lam}, {R} coupled pairs per start (copy from the start vs a stationary copy).", "",
             "| start | mean τ (95% CI) | median | q75 (t_mix bound) | lower order | τ / lower order | censored |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['start']} | {_fmt(r['mean_steps'])} ({_fmt(r['mean_ci'][0])}–{_fmt(r['mean_ci'][1])}) | "
                     f"{_fmt(r['median_steps'])} | {_fmt(r['tmix_bound_steps'])} | {_fmt(r['lower_order'])} | "
                     f"{_fmt(r['mean_over_lower'])} | {r['censored']} |")
    ratios = [r["mean_over_lower"] for r in rows]
    below = sum(x < 1 for x in ratios)
    lines += ["", "**What the runs show.**", "",
              (f"- every mean coalescence time is at least its lower order" if below == 0 else
               f"- {below} of {len(rows)} mean coalescence times are below their lower order")
              + f" (ratios {min(ratios):.3g}–{max(ratios):.3g}).",
              f"- linear fit τ = a + b × order: b = {lin['customers']['slope']:.3f} for ‖x‖₁ = g n and "
              f"b = {lin['long']['slope']:.3f} for one long queue, against 1+λ = {1 + lam:g} if the excess drains at "
              "(1−λ)/(1+λ) customers per step (a step is a departure with probability 1/(1+λ)); "
              f"the intercepts ({_fmt(lin['customers']['intercept'])}, {_fmt(lin['long']['intercept'])} steps) "
              f"compare with the good-state order k d^(k−1) n log n = {_fmt(rows[0]['good_state_upper'])}."]
    local = []
    for kind, name in (("customers", "‖x‖₁ = g n"), ("long", "one long queue")):
        sel = [r for r in rows if r["kind"] == kind and r["censored"] == 0]
        if len(sel) >= 3:
            first = _fit_slope([r["lower_order"] for r in sel[:2]], [r["mean_steps"] for r in sel[:2]])[0]
            last = _fit_slope([r["lower_order"] for r in sel[-2:]], [r["mean_steps"] for r in sel[-2:]])[0]
            local.append(f"{name}: {fits[kind]:.3f} overall, {first:.3f} between the two smallest starts and "
                         f"{last:.3f} between the two largest")
        else:
            local.append(f"{name}: {fits[kind]:.3f}")
    lines.append("- log-log slopes of τ against the lower order (1 when draining dominates): " + "; ".join(local) + ".")
    return lines


def _e3_tv_config(quick):
    return (100, 3, 0.9, "customers:10", 100) if quick else (500, 3, 0.9, "customers:10", 400)


def _e3_tv(out: Path, *, quick, seed, workers, client=None):
    """TV distance to equilibrium of the total number of customers over time, from a bad start."""
    n, d, lam, start, R = _e3_tv_config(quick)
    _progress(f"E3 TV curve: n={n}, d={d}, λ={lam}, from {start}, {R} replicas")
    tv = mx.tv_curve(n, d, lam, start=start, replications=R, points=30, seed=seed, workers=workers, client=client)
    rows = [{"step": int(s), "time": float(t), "tv": float(v), "coupling_bound": float(c),
             "mean_total": float(m)} for s, t, v, c, m in zip(tv.steps, tv.time, tv.tv, tv.coupling_bound,
                                                              tv.mean_total)]
    meta = {"experiment": "E3 TV curve", "n": n, "d": d, "load": lam, "start": start, "replications": R,
            "bins": tv.bins, "noise_floor": tv.noise_floor, "stationary_mean_total": tv.stationary_mean_total,
            "first_below_2x_floor_steps": tv.first_below_floor(),
            "lower_order_steps": mx.start_bounds(n, d, lam, start)["lower_start"]}
    _write_table(out, "E3_tv_curve", rows, meta)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.4))
    ax.plot(tv.steps, tv.tv, "o-", ms=3, label="TV of ‖X_t‖₁ (binned, lower estimate)")
    ax.plot(tv.steps, tv.coupling_bound, "s-", ms=3, label="P(τ > t) (coupling, upper bound)")
    ax.axhline(tv.noise_floor, color="gray", ls=":", label=f"noise floor {tv.noise_floor:.3f} ({R} replicas)")
    ax.axvline(meta["lower_order_steps"], color="k", ls="--", lw=1, label="(1−λ)^(−1) g n")
    ax.set_xlabel("steps")
    ax.set_ylabel("distance to equilibrium")
    ax.set_title(f"E3: from {start}, n={n}, d={d}, λ={lam}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "E3_tv_curve.png", dpi=110)
    plt.close(fig)
    first = tv.first_below_floor()
    lines = ["", f"TV distance to equilibrium of the total number of customers, n = {n}, from {start}, {R} replicas "
             f"(E3_tv_curve.*): {tv.tv[0]:.2f} at step {int(tv.steps[0])}, at most twice the noise floor "
             f"({tv.noise_floor:.3f}) from step {first if first is not None else 'never'} on; the coupling bound "
             f"P(τ > t) reaches {tv.coupling_bound[-1]:.2f} at step {int(tv.steps[-1])}. "
             f"The lower order (1−λ)^(−1) g n is {meta['lower_order_steps']:.3g} steps."]
    return lines, {"meta": meta, "rows": rows}


# =========================================================================== E4
def _e4_configs(quick):
    lam = 0.8
    ns = [100, 1000, 10_000, 100_000] if quick else [100, 1000, 10_000, 100_000, 1_000_000]
    T, burn = (200.0, 50.0) if quick else (2000.0, 200.0)
    return lam, ns, [1, 2, 3], T, burn


def _e4_task(args):
    n, d, lam, steps, burn, ss = args
    return equilibrium(n, d, lam, steps=steps, burn_in=burn, levels=2, seed=ss)


def _e4_tasks(quick: bool, seed):
    """The E4 equilibrium runs: tasks for :func:`_e4_task` and their expected seconds."""
    lam, ns, ds, T, burn_t = _e4_configs(quick)
    cfg = [(n, d) for d in ds for n in ns]
    rate = lambda n: n * (1 + lam)  # noqa: E731 - steps per time unit
    tasks = [(n, d, lam, int(T * rate(n)), int(burn_t * rate(n)), ss)
             for (n, d), ss in zip(cfg, spawn_seeds(seed, len(cfg)))]
    return tasks, [_task_seconds(t[1], t[3] + t[4]) for t in tasks]


def e4_power_of_choices(out: Path, *, quick, seed, workers, client=None, results=None) -> dict:
    """E4 (see the module docstring); ``results`` as for :func:`e1_equilibrium`."""
    lam, ns, ds, T, burn_t = _e4_configs(quick)
    cfg = [(n, d) for d in ds for n in ns]
    if results is None:
        tasks, cost = _e4_tasks(quick, seed)
        _progress(f"E4 power of choices: {len(cfg)} configurations, "
                  f"{sum(t[3] + t[4] for t in tasks) / 1e6:.0f}M steps")
        results = _map_configs(_e4_task, tasks, workers, client, cost=cost)
    res = results
    rows = []
    for (n, d), eq in zip(cfg, res):
        pred = math.log(n) / math.log(1 / lam) if d == 1 else math.log(math.log(n)) / math.log(d)
        rows.append({"n": n, "d": d, "load": lam, "time_units": T, "mean_max": eq["mean_max"],
                     "mean_max_stderr": eq["mean_max_stderr"], "mean_max_reliable": eq["mean_max_reliable"],
                     "reliable": eq["reliable"], "notes": "; ".join(eq["notes"]),
                     "modal_max": int(np.argmax(eq["max_share"])),
                     "max_always": bool(np.max(eq["max_share"]) == 1.0),
                     "predictor": pred,
                     "predictor_name": "log n / log(1/λ)" if d == 1 else "log log n / log d",
                     "k_hypothesis": th.k_hypothesis(n, d, lam)})
    fits = {}
    for d in ds:
        sel = [r for r in rows if r["d"] == d]
        x = np.array([r["predictor"] for r in sel])
        y = np.array([r["mean_max"] for r in sel])
        b, a = np.polyfit(x, y, 1)
        fits[d] = {"slope": float(b), "intercept": float(a)}
    meta = {"experiment": "E4 power of two choices", "quick": quick, "spec": "docs/model.md §3", "load": lam,
            "fits_mean_max_vs_predictor": fits}
    _write_table(out, "E4_power_of_choices", rows, meta)
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    for d in ds:
        sel = [r for r in rows if r["d"] == d]
        axes[0].errorbar([r["n"] for r in sel], [r["mean_max"] for r in sel],
                         yerr=[Z_FINDING * r["mean_max_stderr"] if r["mean_max_reliable"] else 0.0 for r in sel],
                         fmt="o-", label=f"d = {d}")
        ax = axes[1]
        ax.plot([r["predictor"] for r in sel], [r["mean_max"] for r in sel], "o",
                label=f"d={d} vs {sel[0]['predictor_name']}: slope {fits[d]['slope']:.2f}")
        xs = np.array([r["predictor"] for r in sel])
        ax.plot(xs, fits[d]["intercept"] + fits[d]["slope"] * xs, "-", lw=1)
    axes[0].set_xscale("log")
    axes[0].set_xlabel("n")
    axes[0].set_ylabel("time-averaged maximum queue length")
    axes[0].set_title(f"E4: maximum queue, λ = {lam}")
    axes[0].legend()
    axes[1].set_xlabel("predictor (log n/log(1/λ) for d = 1, log log n/log d for d ≥ 2)")
    axes[1].set_ylabel("time-averaged maximum")
    axes[1].set_title("E4: against the classical orders")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "E4_power_of_choices.png", dpi=110)
    plt.close(fig)
    lines = ["# E4: the power of two choices (docs/model.md §3, classical)", "",
             f"λ = {lam}, start at the rounded fixed point, {T:g} time units after {burn_t:g} of burn-in; "
             "time-averaged maximum queue length (supermarket.simulate, profile engine; ± standard error from a "
             "blocking analysis of equally spaced snapshots, \"too short to know\" where it reached no plateau).", "",
             "| n | d | mean max | modal max | predictor | hypothesis (largest k with nπ(k) ≥ 1) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['n']} | {r['d']} | {_mean_max_cell(r)} | "
                     f"{r['modal_max']} | "
                     f"{r['predictor_name']} = {r['predictor']:.3g} | {r['k_hypothesis']} |")
    lines += _e4_findings(rows, fits, ds)
    md = "\n".join(lines) + "\n"
    (out / "E4_power_of_choices.md").write_text(md)
    return {"rows": rows, "fits": fits, "markdown": md}


def _e4_findings(rows, fits, ds) -> list[str]:
    """The E4 findings, every sentence computed from ``rows`` and the fits."""
    big = max(r["n"] for r in rows)
    means = {r["d"]: r["mean_max"] for r in rows if r["n"] == big}
    out = ["", "**What the runs show.**", ""]
    for d in ds:
        sel = [r for r in rows if r["d"] == d]
        modes = sorted({r["modal_max"] for r in sel})
        out.append(f"- d = {d}: fitted slope of the mean maximum against {sel[0]['predictor_name']} is "
                   f"{fits[d]['slope']:.3f} (the classical order predicts 1); over n = {sel[0]['n']}…{sel[-1]['n']} "
                   f"the modal maximum takes the values {', '.join(map(str, modes))}.")
    out.append(f"- at n = {big}: mean maximum " + ", ".join(
        f"{means[d]:.2f} with d = {d}" for d in ds if d in means) + ".")
    unrel = [r for r in rows if not r["mean_max_reliable"] and not r.get("max_always")]
    out.append(f"- error bars of the mean maximum: reliable in {len(rows) - len(unrel)} of {len(rows)} runs"
               + (("; too short to know in " + ", ".join(f"n = {r['n']} with d = {r['d']}" for r in unrel)
                   + " (the slopes above are fits of the means, with no error bar).") if unrel else "."))
    return out


# =========================================================================== driver
def _task_seconds(d: int, steps: float) -> float:
    """Expected seconds of one equilibrium run of ``steps`` steps (burn-in included) on one core."""
    rate = PROFILE_RATE_D1_STEPS_PER_S if d == 1 else PROFILE_RATE_STEPS_PER_S
    return steps / rate + TASK_OVERHEAD_S * (2 if d == 1 else 1)


def _equilibrium_tasks(quick: bool) -> list[tuple[int, int]]:
    """``(d, steps)`` of the planned equilibrium runs: E1, then E4 (simulate's profile engine)."""
    e1 = [(p[3], p[5] + p[6]) for p in _e1_plan(quick)]
    lam4, ns, ds, T, burn = _e4_configs(quick)
    e4 = [(d, int(T * n * (1 + lam4)) + int(burn * n * (1 + lam4))) for d in ds for n in ns]
    return e1 + e4


def _equilibrium_steps(quick: bool) -> float:
    """Planned steps of the equilibrium runs (E1 and E4)."""
    return float(sum(s for _, s in _equilibrium_tasks(quick)))


def expected_seconds(quick: bool, cores: int) -> float:
    """Expected wall time on ``cores`` free cores: coupling steps (E2, E3) at
    :data:`RATE_STEPS_PER_S`; the equilibrium runs of E1 and E4 (run together, costliest
    first) take the longer of their total run time shared over the cores and the longest
    run (one run uses one core)."""
    cores = max(int(cores), 1)
    secs = [_task_seconds(d, s) for d, s in _equilibrium_tasks(quick)]
    eq = max(sum(secs) / cores, max(secs)) if secs else 0.0
    return eq + (expected_steps(quick) - _equilibrium_steps(quick)) / (RATE_STEPS_PER_S * cores)


def expected_steps(quick: bool) -> float:
    """Planned kernel steps of a run (all experiments), for the duration estimate."""
    total = _equilibrium_steps(quick)
    cfg, R = _e2_configs(quick)
    for _, n, d, lam in cfg:
        up = th.mixing_bounds(n, d, lam).upper_steps
        total += R * (mx.BURN_IN_FACTOR * up + 2 * 2 * up)  # burn-in + about twice the order, 2 copies
    n, d, lam3, gs, ls, R3 = _e3_configs(quick)
    up = th.mixing_bounds(n, d, lam3).upper_steps
    for g in gs:
        total += R3 * (mx.BURN_IN_FACTOR * up + 2 * (1 + lam3) * th.mixing_lower_customers(n, lam3, g))
    for ell in ls:
        total += R3 * (mx.BURN_IN_FACTOR * up + 2 * (1 + lam3) * th.mixing_lower_long(n, ell))
    nt, dt, lt, st, Rt = _e3_tv_config(quick)
    upt = th.mixing_bounds(nt, dt, lt).upper_steps
    span = 3 * max(mx.start_bounds(nt, dt, lt, st)["lower_start"] * (1 + lt), upt)
    total += Rt * (2 * mx.BURN_IN_FACTOR * upt + 3 * span)
    return float(total)


def run(out_dir, quick=False, seed=0, workers=None, client=None) -> dict:
    """Run E1–E4 and write tables, figures and Markdown into ``out_dir`` (created if missing).

    ``quick``: small sizes (under 3 minutes on 2 cores, every claim still shown).
    ``seed``: root seed (experiment ``i`` uses child ``i``); ``workers``: threads
    (default: all cores); ``client``: a :class:`dask.distributed.Client` to run the
    replications on instead (the numbers are the same).  Returns a dict with each experiment's rows and the summary.
    """
    if not isinstance(quick, (bool, np.bool_)):
        raise TypeError(f"quick must be True or False; got {quick!r}")
    if workers is not None:
        workers = check_int("workers", workers, minimum=1, maximum=4096)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir {str(out)!r} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    cores = workers or os.cpu_count() or 1
    est = expected_seconds(quick, cores)
    msg = (f"paper 000 {'quick' if quick else 'full'} run: about {expected_steps(quick) / 1e9:.2f}e9 kernel steps, "
           f"expected {est / 60:.1f} minutes on {cores} core(s)")
    print(msg, file=sys.stderr, flush=True) if not quick else _progress(msg)
    seeds = spawn_seeds(seed, 4)
    t0 = time.perf_counter()
    results = {}
    timings = {}
    # the equilibrium runs of E1 and E4 share one pool, costliest first: the longest run
    # (E4, d = 1, largest n) overlaps with the others instead of ending last
    t = time.perf_counter()
    t1, c1 = _e1_tasks(quick, seeds[0])
    t4, c4 = _e4_tasks(quick, seeds[3])
    _progress(f"E1 and E4 equilibrium: {len(t1) + len(t4)} runs, "
              f"{_equilibrium_steps(quick) / 1e6:.0f}M steps")
    eq = _map_configs(_equilibrium_task, [("E1", x) for x in t1] + [("E4", x) for x in t4], workers, client,
                      cost=c1 + c4)
    timings["E1+E4 runs"] = time.perf_counter() - t
    pre = {"E1": eq[:len(t1)], "E4": eq[len(t1):]}
    for name, fn, ss in (("E1", e1_equilibrium, seeds[0]), ("E2", e2_mixing_scaling, seeds[1]),
                         ("E3", e3_bad_starts, seeds[2]), ("E4", e4_power_of_choices, seeds[3])):
        t = time.perf_counter()
        kw = {"results": pre[name]} if name in pre else {}
        results[name] = fn(out, quick=quick, seed=ss, workers=workers, client=client, **kw)
        timings[name] = time.perf_counter() - t
        _progress(f"{name} done in {timings[name]:.1f} s")
    wall = time.perf_counter() - t0
    head = [f"# Paper 000 reproduced ({'quick' if quick else 'full'} mode)", "",
            f"Seed {seed}; wall time {wall:.0f} s (expected {est:.0f} s); "
            + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()) + ".",
            "Orders of magnitude are the papers' with constants taken as 1; \"derived\" marks items worked "
            "out for this project (docs/model.md), not theorems of the papers.", ""]
    summary = "\n".join(head) + "\n" + "\n".join(results[k]["markdown"] for k in ("E1", "E2", "E3", "E4"))
    (out / "summary.md").write_text(summary)
    with open(out / "run.json", "w") as fh:
        json.dump({"quick": quick, "seed": seed, "workers": workers, "wall_s": wall, "expected_s": est,
                   "timings_s": timings}, fh, indent=2)
    return {"summary": summary, "wall_s": wall, "expected_s": est, **results}
