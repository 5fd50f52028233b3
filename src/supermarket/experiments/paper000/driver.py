"""The paper-000 driver: :func:`run` (E1–E4 and ``summary.md``) and its duration estimate, read
through the experiment modules' grids (so that a test shrinking a grid shrinks the estimate)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from ... import mixing as mx
from ... import theory as th
from ...checks import check_bool
from ...files import atomic_write
from ...model import check_int, spawn_seeds
from . import e1_e4_equilibrium as e1_e4
from . import e2_e3_mixing as e2_e3
from .claims import claims_markdown, claims_rows
from .e1_e4_equilibrium import _e1_tasks, _e4_tasks, _equilibrium_task, e1_equilibrium, e4_power_of_choices
from .e2_e3_mixing import e2_mixing_scaling, e3_bad_starts
from .equilibrium_run import _map_configs, _task_seconds
from .output import _progress

__all__ = ["run", "expected_steps", "expected_seconds"]

RATE_STEPS_PER_S = 7.0e6  # coupling kernel (E2, E3): effective steps/s per core on a quick run


def _equilibrium_tasks(quick: bool) -> list[tuple[int, int]]:
    """``(d, steps)`` of the planned equilibrium runs: E1, then E4 (simulate's profile engine)."""
    e1 = [(p[3], p[5] + p[6]) for p in e1_e4._e1_plan(quick)]
    lam4, ns, ds, T, burn = e1_e4._e4_configs(quick)
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
    cfg, R = e2_e3._e2_configs(quick)
    for _, n, d, lam in cfg:
        up = th.mixing_bounds(n, d, lam).upper_steps
        total += R * (mx.BURN_IN_FACTOR * up + 2 * 2 * up)  # burn-in + about twice the order, 2 copies
    n, d, lam3, gs, ls, R3 = e2_e3._e3_configs(quick)
    up = th.mixing_bounds(n, d, lam3).upper_steps
    for g in gs:
        total += R3 * (mx.BURN_IN_FACTOR * up + 2 * (1 + lam3) * th.mixing_lower_customers(n, lam3, g))
    for ell in ls:
        total += R3 * (mx.BURN_IN_FACTOR * up + 2 * (1 + lam3) * th.mixing_lower_long(n, ell))
    nt, dt, lt, st, Rt = e2_e3._e3_tv_config(quick)
    upt = th.mixing_bounds(nt, dt, lt).upper_steps
    span = 3 * max(mx.start_bounds(nt, dt, lt, st)["lower_start"] * (1 + lt), upt)
    total += Rt * (2 * mx.BURN_IN_FACTOR * upt + 3 * span)
    return float(total)


def run(out_dir: Any, quick: bool = False, seed: Any = 0, workers: int | None = None, client: Any = None) -> dict:
    """Run E1–E4 and write tables, figures and Markdown into ``out_dir`` (created if missing);
    experiment ``i`` uses child ``i`` of ``seed``; ``client``: a Dask client instead of local
    threads (the same numbers).  Returns each experiment's results and the summary."""
    check_bool("quick", quick)
    if workers is not None:
        workers = check_int("workers", workers, minimum=1, maximum=4096)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir {str(out)!r} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    cores = workers or os.cpu_count() or 1
    est = expected_seconds(quick, cores)
    msg = (
        f"paper 000 {'quick' if quick else 'full'} run: about {expected_steps(quick) / 1e9:.2f}e9 kernel steps, "
        f"expected {est / 60:.1f} minutes on {cores} core(s)"
    )
    print(msg, file=sys.stderr, flush=True) if not quick else _progress(msg)
    seeds = spawn_seeds(seed, 4)
    t0 = time.perf_counter()
    results, timings = {}, {}
    # the equilibrium runs of E1 and E4 share one pool, costliest first: the longest run
    # (E4, d = 1, largest n) overlaps with the others instead of ending last
    t = time.perf_counter()
    t1, c1 = _e1_tasks(quick, seeds[0])
    t4, c4 = _e4_tasks(quick, seeds[3])
    _progress(f"E1 and E4 equilibrium: {len(t1) + len(t4)} runs, {_equilibrium_steps(quick) / 1e6:.0f}M steps")
    eq = _map_configs(
        _equilibrium_task, [("E1", x) for x in t1] + [("E4", x) for x in t4], workers, client, cost=c1 + c4
    )
    timings["E1+E4 runs"] = time.perf_counter() - t
    pre = {"E1": eq[: len(t1)], "E4": eq[len(t1) :]}
    for name, fn, ss in (
        ("E1", e1_equilibrium, seeds[0]),
        ("E2", e2_mixing_scaling, seeds[1]),
        ("E3", e3_bad_starts, seeds[2]),
        ("E4", e4_power_of_choices, seeds[3]),
    ):
        t = time.perf_counter()
        kw = {"results": pre[name]} if name in pre else {}
        results[name] = fn(out, quick=quick, seed=ss, workers=workers, client=client, **kw)
        timings[name] = time.perf_counter() - t
        _progress(f"{name} done in {timings[name]:.1f} s")
    wall = time.perf_counter() - t0
    head = [
        f"# Paper 000 reproduced ({'quick' if quick else 'full'} mode)",
        "",
        f"Seed {seed}; wall time {wall:.0f} s (expected {est:.0f} s); "
        f"{', '.join(f'{k} {v:.0f} s' for k, v in timings.items())}.",
        'Orders of magnitude are the papers\' with constants taken as 1; "derived" marks items worked '
        "out for this project (docs/model.md), not theorems of the papers.",
        "",
    ]
    summary = "\n".join(head + [claims_markdown(results)] + [results[k]["markdown"] for k in ("E1", "E2", "E3", "E4")])
    atomic_write(out / "summary.md", summary)  # whole or not at all, as every file of a reproduction
    meta = {"quick": quick, "seed": seed, "workers": workers, "wall_s": wall, "expected_s": est, "timings_s": timings}
    atomic_write(out / "run.json", json.dumps(meta, indent=2))
    return {"summary": summary, "wall_s": wall, "expected_s": est, "claims": claims_rows(results), **results}
