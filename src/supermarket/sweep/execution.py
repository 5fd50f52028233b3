"""Execution of a sweep: :func:`run_task` on every backend, :func:`run_sweep` over :mod:`supermarket.parallel`."""

from __future__ import annotations

import contextlib
import datetime as _dt
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import parallel
from ..parallel import SchedulerError
from ..result import Result, frame
from . import storage as st
from .measurements import MEASUREMENTS
from .rows import flatten, scalar
from .seeds import task_seed
from .spec import Sweep, Task

if TYPE_CHECKING:
    import pandas as pd
    from distributed import Client

_Progress = Callable[[int, int, int, int], None]  # progress(done, running, failed, total)

__all__ = ["run_task", "run_sweep", "SweepOutcome", "SchedulerError"]

# result keys that repeat the task's own identity (one replication per task)
_DROP = {"params", "replications", "per_replication"}


def run_task(spec: dict) -> dict:
    """Run one task; a failing measurement is recorded, not raised (:class:`KeyboardInterrupt` propagates).

    Parameters
    ----------
    spec : dict
        From :meth:`Task.spec`.

    Returns
    -------
    dict
        ``task_id``, ``status`` (``"ok"`` or ``"failed"``), ``error``, ``error_detail``, ``result``,
        ``wall_seconds``.

    Examples
    --------
    >>> from supermarket.sweep import parse_sweep
    >>> t = parse_sweep('[[run]]\\nmeasurement = "theory"\\nn = 100\\nd = 2\\nload = 0.9\\n').tasks[0]
    >>> rec = run_task(t.spec())
    >>> rec["status"], rec["result"]["k"]
    ('ok', 4)
    """
    t0 = time.perf_counter()
    seed = task_seed(spec["seed"], spec["point_hash"], spec["replication"])
    try:
        raw = MEASUREMENTS[spec["measurement"]](dict(spec["params"]), seed)
        result = flatten({k: v for k, v in raw.items() if k not in _DROP})
    except Exception as exc:
        return _failed(spec["task_id"], exc, traceback.format_exc(limit=6), time.perf_counter() - t0)
    rec = {"task_id": spec["task_id"], "status": "ok", "error": None, "error_detail": None, "result": result}
    return rec | {"wall_seconds": time.perf_counter() - t0}


def _failed(task_id: str, exc: BaseException, detail: str | None, wall: float) -> dict:
    """The record of a failed task (see :func:`run_task`)."""
    rec = {"task_id": task_id, "status": "failed", "error": f"{type(exc).__name__}: {exc}", "error_detail": detail}
    return rec | {"result": {}, "wall_seconds": wall}


def _row(task: Task, sweep: Sweep, rec: dict) -> dict:
    """The tidy row of a task: identity and parameters, then the measured values."""
    t = task
    ident = (sweep.name, t.task_id, t.index, t.point, t.measurement, t.replication, t.replications, t.seed)
    row = dict(zip(st.ID_COLUMNS, (*ident, t.point_hash, rec["status"], rec["error"]), strict=True))
    for k, v in task.params.items():
        row[k] = float(v) if k == "load" else scalar(v)  # numbers in the table; the text is in the sidecar
    for k, v in rec["result"].items():
        if k not in row or row[k] != v:  # a measured value under a parameter's name, if different
            row[k if k not in row else f"result_{k}"] = v
    row["wall_seconds"] = rec["wall_seconds"]
    return row


@dataclass
class SweepOutcome(Result):
    """What :func:`run_sweep` did.

    Attributes
    ----------
    out_dir, results_path : str
        The sweep directory and its ``results.parquet``.
    total, skipped, ran, ok, failed : int
        Tasks in the sweep, finished in an earlier run, run now, succeeded (this run and
        earlier), failed.
    failures : list
        ``(task_id, error)`` of each failed task.
    wall_seconds : float
    backend : str
        ``"in-process"``, ``"local-processes"`` or ``"dask:ADDRESS"``.
    discarded : int
        Part files that did not hold their task's result (computed again).

    Examples
    --------
    >>> o = SweepOutcome("out", 3, 0, 3, 2, 1, [("theory-ab-r0", "ValueError: x")], 0.5, "in-process",
    ...                  "out/results.parquet")
    >>> print(o.summary())
    3 tasks, 3 run now, 0 finished earlier, 1 failed (in-process, 0.5 s) -> out/results.parquet
      failed theory-ab-r0: ValueError: x
    """

    out_dir: str
    total: int
    skipped: int
    ran: int
    ok: int
    failed: int
    failures: list
    wall_seconds: float
    backend: str
    results_path: str
    discarded: int = 0

    def to_frame(self) -> pd.DataFrame:
        """One row per failed task (``task_id``, ``error``); the counts are in :meth:`to_dict`."""
        return frame([{"task_id": str(t), "error": str(e)} for t, e in self.failures], columns=["task_id", "error"])

    def summary(self, max_failures: int = 10) -> str:
        """What ``supermarket sweep`` prints: the counts, then up to ``max_failures`` failed tasks."""
        lines = [
            f"{self.total} tasks, {self.ran} run now, {self.skipped} finished earlier, {self.failed} failed "
            f"({self.backend}, {self.wall_seconds:.1f} s) -> {self.results_path}"
        ]
        lines += [f"  failed {t}: {e}" for t, e in self.failures[:max_failures]]
        if len(self.failures) > max_failures:
            lines.append(f"  ... and {len(self.failures) - max_failures} more (see sweep.json)")
        return "\n".join(lines)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def run_sweep(
    sweep: Sweep,
    out_dir: st.PathLike,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    max_tasks: int | None = None,
    progress: _Progress | None = None,
    connect_timeout: float = 5.0,
) -> SweepOutcome:
    """Run (or resume) a sweep into ``out_dir``.

    Parameters
    ----------
    sweep : Sweep
        From :func:`load_sweep` or :func:`parse_sweep`.
    out_dir : str or path
        The output directory (created if missing; its parent must exist).
    workers : int, optional
        Local processes (default: the CPU cores; 1 runs in this process).
    scheduler : str, optional
        Address ``tcp://HOST:PORT`` of an existing Dask scheduler (needs the ``dask`` extra).
    max_tasks : int, optional
        Refuse, before running, a sweep with more tasks.
    progress : callable, optional
        ``progress(done, running, failed, total)``, called as tasks finish.
    connect_timeout : float
        Seconds to wait for the scheduler.

    Returns
    -------
    SweepOutcome

    Raises
    ------
    SweepDirError
        The directory cannot be used, or too many tasks.
    SchedulerError
        The scheduler cannot be used (within about ``connect_timeout``).
    KeyboardInterrupt
        Ctrl-C: the finished tasks are stored; call again to resume.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from supermarket.sweep import parse_sweep
    >>> s = parse_sweep('[[run]]\\nmeasurement = "theory"\\nn = 100\\nd = [2, 3]\\nload = 0.9\\n')
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "out"
    >>> o = run_sweep(s, out, workers=1)
    >>> o.total, o.failed, o.to_frame().empty
    (2, 0, True)
    >>> run_sweep(s, out, workers=1).skipped  # a second call resumes: nothing left to run
    2
    >>> import shutil; shutil.rmtree(out.parent)
    """
    total = len(sweep.tasks)
    if max_tasks is not None and total > max_tasks:
        raise st.SweepDirError(
            f"the sweep has {total} tasks ({sweep.points} grid points × replications), "
            f"more than --max-tasks {max_tasks}: refusing to start"
        )
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be an integer >= 1; got {workers!r}")
    out = st.check_output_dir(Path(out_dir))
    client = parallel.connect(scheduler, connect_timeout) if scheduler else None
    try:
        previous = st.prepare_dir(sweep, out)
        with st.SweepLock(out):  # one sweep at a time in a directory; released when it ends or dies
            nw = parallel.default_workers() if workers is None else workers
            return _run_locked(sweep, out, nw, scheduler, client, progress, previous)
    finally:
        if client is not None:
            with contextlib.suppress(Exception):  # closing a client of a dead cluster
                client.close(timeout=5)


def _run_locked(
    sweep: Sweep,
    out: Path,
    nw: int,
    scheduler: str | None,
    client: Client | None,
    progress: _Progress | None,
    previous: dict,
) -> SweepOutcome:
    """:func:`run_sweep` in a prepared, locked directory (``previous``: its sidecar before)."""
    total = len(sweep.tasks)
    st.clean_stale(out)
    done, discarded = set(), []
    for t in sweep.tasks:
        p = st.part_path(out, t)
        if p.exists():
            row = st.read_part(p, t)
            if row is not None and row.get("status") == "ok":
                done.add(t.task_id)
            elif row is None:  # unreadable, or another task's result under this name
                discarded.append(t.task_id)
                p.unlink(missing_ok=True)
    # a part named after no task of this sweep (the same file read by another version, whose grid point
    # had other canonical parameters, e.g. the engine a service law runs on): never mixed into the table
    names = {st.part_path(out, t).name for t in sweep.tasks}
    for p in sorted((out / st.PARTS_DIR).glob("*.parquet")):
        if p.name not in names:
            discarded.append(p.stem)
            p.unlink(missing_ok=True)
    todo = [t for t in sweep.tasks if t.task_id not in done]
    skipped = len(done)
    backend = f"dask:{scheduler}" if scheduler else ("in-process" if min(nw, len(todo)) <= 1 else "local-processes")
    run_info = {"started": _now(), "backend": backend, "skipped": skipped, "to_run": len(todo)}
    if discarded:
        run_info["discarded_parts"] = discarded
    state: dict[str, Any] = {
        "status": "running",
        "runs": list(previous.get("runs", [])) + [run_info],
        "task_seconds": dict(previous.get("task_seconds", {})),
    }
    st.write_sidecar(out, st.sidecar(sweep, state))

    t0 = time.perf_counter()
    failures: list = []
    details: dict = {}
    counts = {"ok": 0}

    def finished(i: int, rec: Any, error: BaseException | None) -> None:
        task = todo[i]
        if error is not None:  # the worker itself failed (a crashed process, a lost Dask worker)
            rec = _failed(task.task_id, error, None, float("nan"))
        st.write_part(out, task, _row(task, sweep, rec))
        state["task_seconds"][task.task_id] = rec["wall_seconds"]
        if rec["status"] == "ok":
            counts["ok"] += 1
        else:
            failures.append((task.task_id, rec["error"]))
            details[task.task_id] = rec.get("error_detail")

    def report(n_done: int, running: int, _total: int) -> None:
        if progress is not None:
            progress(skipped + n_done, running, len(failures), total)

    try:
        parallel.map_tasks(
            run_task,
            [t.spec() for t in todo],
            workers=1 if scheduler else nw,
            client=client,
            on_result=finished,
            progress=report,
            return_errors=True,
            collect=False,
        )
    except KeyboardInterrupt:
        state["status"] = "interrupted"
        state["runs"][-1].update(interrupted=_now(), ok=counts["ok"], failed=len(failures))
        st.write_sidecar(out, st.sidecar(sweep, state))
        raise

    rows = []
    for t in sweep.tasks:
        row = st.read_part(st.part_path(out, t), t)
        if row is None:  # pragma: no cover - every task was just written
            raise RuntimeError(f"part file of task {t.task_id} is missing or does not hold its result")
        rows.append(row)
    param_cols = dict.fromkeys(k for t in sweep.tasks for k in t.params)
    st._atomic_write_table(out / st.RESULTS_FILE, st.to_table(rows, st.ID_COLUMNS + tuple(param_cols)))
    wall = time.perf_counter() - t0
    state["status"] = "complete" if not failures else "complete-with-failures"
    state["runs"][-1].update(finished=_now(), wall_seconds=wall, ok=counts["ok"], failed=len(failures))
    state["failures"] = [{"task_id": i, "error": e, "traceback": details.get(i)} for i, e in failures]
    st.write_sidecar(out, st.sidecar(sweep, state))
    ok, ran, results = counts["ok"] + skipped, len(todo), str(out / st.RESULTS_FILE)
    return SweepOutcome(
        str(out), total, skipped, ran, ok, len(failures), failures, wall, backend, results, len(discarded)
    )
