"""Execution of a sweep: the task function, and :func:`run_sweep` over :mod:`supermarket.parallel`.

The same function :func:`run_task` runs every task on every backend (this process, a local
process pool, a Dask cluster).  A task whose measurement raises is recorded with its error and
the others go on; an interrupted task (Ctrl-C) is never recorded: the sweep stops with
:class:`KeyboardInterrupt` and the same call resumes it.
"""

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
from .._results import Result, frame
from ..parallel import SchedulerError
from .measurements import MEASUREMENTS, flatten, scalar
from .seeds import task_seed
from .spec import Sweep, Task
from .storage import (
    ID_COLUMNS,
    RESULTS_FILE,
    PathLike,
    SweepDirError,
    SweepLock,
    _atomic_write_table,
    clean_stale,
    part_path,
    prepare_dir,
    read_part,
    sidecar,
    to_table,
    write_part,
    write_sidecar,
)

if TYPE_CHECKING:
    import pandas as pd
    from distributed import Client

_Progress = Callable[[int, int, int, int], None]  # progress(done, running, failed, total)

__all__ = ["run_task", "run_sweep", "SweepOutcome", "SchedulerError"]

# result keys that repeat the task's own identity (one replication per task)
_DROP = {"params", "replications", "per_replication"}


def run_task(spec: dict) -> dict:
    """Run one task (a plain dict from :meth:`Task.spec`) and return its record:
    ``{"task_id", "status": "ok"|"failed", "error", "error_detail", "result", "wall_seconds"}``.

    Never raises for a failing measurement: the error is recorded instead.  An interruption
    (:class:`KeyboardInterrupt`) is not a failure: it propagates.

    Parameters
    ----------
    spec : dict
        ``Task.spec()``: ``task_id``, ``measurement``, ``params``, ``point_hash``,
        ``replication``, ``replications``, ``seed``.

    Returns
    -------
    dict

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
    error_detail = None
    try:
        raw = MEASUREMENTS[spec["measurement"]](dict(spec["params"]), seed)
        result = flatten({k: v for k, v in raw.items() if k not in _DROP})
        status, error = "ok", None
    except Exception as exc:
        result, status = {}, "failed"
        error = f"{type(exc).__name__}: {exc}"
        error_detail = traceback.format_exc(limit=6)
    return {
        "task_id": spec["task_id"],
        "status": status,
        "error": error,
        "error_detail": error_detail,
        "result": result,
        "wall_seconds": time.perf_counter() - t0,
    }


def _row(task: Task, sweep: Sweep, rec: dict) -> dict:
    """The tidy row of a task: identity and parameters, then the measured values."""
    row = {
        "sweep": sweep.name,
        "task_id": task.task_id,
        "task_index": task.index,
        "point": task.point,
        "measurement": task.measurement,
        "replication": task.replication,
        "replications": task.replications,
        "seed": task.seed,
        "point_hash": task.point_hash,
        "status": rec["status"],
        "error": rec["error"],
    }
    for k, v in task.params.items():
        row[k] = float(v) if k == "load" else scalar(v)  # numbers in the table; the text is in the sidecar
    for k, v in rec["result"].items():
        if k in row:
            if row[k] == v:
                continue
            k = f"result_{k}"
        row[k] = v
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
        Wall time of this run.
    backend : str
        ``"in-process"``, a local process pool or the Dask scheduler.
    discarded : int
        Part files that did not hold their task's result (computed again).

    Result protocol: :meth:`to_dict`, :meth:`to_frame`, :meth:`summary`.

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
    skipped: int  # finished in an earlier run
    ran: int
    ok: int
    failed: int
    failures: list  # [(task_id, error)]
    wall_seconds: float
    backend: str
    results_path: str
    discarded: int = 0  # part files that did not hold their task's result (computed again)

    def to_dict(self) -> dict:
        """The fields as a JSON-safe dict (``failures`` as ``[task_id, error]`` lists)."""
        out = super().to_dict()
        out["failures"] = [[str(t), str(e)] for t, e in self.failures]
        return out

    def to_frame(self) -> pd.DataFrame:
        """One row per failed task (``task_id``, ``error``); empty (with those columns) when
        none failed.  The counts are in :meth:`to_dict`."""
        return frame([{"task_id": str(t), "error": str(e)} for t, e in self.failures], columns=["task_id", "error"])

    def summary(self, max_failures: int = 10) -> str:
        """The lines ``supermarket sweep`` prints: the counts, then up to ``max_failures``
        failed tasks (one line each)."""
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
    out_dir: PathLike,
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
        Address ``tcp://HOST:PORT`` of an existing Dask scheduler; the tasks run on its
        workers.  Needs the ``dask`` extra.
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
        The directory cannot be used (another sweep's, old format, not writable), or too many tasks.
    SchedulerError
        The scheduler cannot be used (one line, within about ``connect_timeout``).
    KeyboardInterrupt
        Ctrl-C: the finished tasks are stored, the interrupted ones are not; call again to resume.

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
        raise SweepDirError(
            f"the sweep has {total} tasks ({sweep.points} grid points × replications), "
            f"more than --max-tasks {max_tasks}: refusing to start"
        )
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be an integer >= 1; got {workers!r}")
    from .storage import check_output_dir

    out = check_output_dir(Path(out_dir))
    client = parallel.connect(scheduler, connect_timeout) if scheduler else None
    try:
        return _run(sweep, out, workers, scheduler, client, progress)
    finally:
        if client is not None:
            with contextlib.suppress(Exception):  # closing a client of a dead cluster
                client.close(timeout=5)


def _run(
    sweep: Sweep,
    out: Path,
    workers: int | None,
    scheduler: str | None,
    client: Client | None,
    progress: _Progress | None,
) -> SweepOutcome:
    previous = prepare_dir(sweep, out)
    with SweepLock(out):  # one sweep at a time in a directory; released when it ends or dies
        return _run_locked(sweep, out, workers, scheduler, client, progress, previous)


def _run_locked(
    sweep: Sweep,
    out: Path,
    workers: int | None,
    scheduler: str | None,
    client: Client | None,
    progress: _Progress | None,
    previous: dict,
) -> SweepOutcome:
    total = len(sweep.tasks)
    clean_stale(out)
    done, discarded = set(), []
    for t in sweep.tasks:
        p = part_path(out, t)
        if p.exists():
            row = read_part(p, t)
            if row is not None and row.get("status") == "ok":
                done.add(t.task_id)
            elif row is None:  # unreadable, or another task's result under this name
                discarded.append(t.task_id)
                p.unlink(missing_ok=True)
    todo = [t for t in sweep.tasks if t.task_id not in done]
    skipped = len(done)
    nw = parallel.default_workers() if workers is None else workers
    backend = f"dask:{scheduler}" if scheduler else ("in-process" if min(nw, len(todo)) <= 1 else "local-processes")
    run_info = {"started": _now(), "backend": backend, "skipped": skipped, "to_run": len(todo)}
    if discarded:
        run_info["discarded_parts"] = discarded
    state: dict[str, Any] = {
        "status": "running",
        "runs": list(previous.get("runs", [])) + [run_info],
        "task_seconds": dict(previous.get("task_seconds", {})),
    }
    write_sidecar(out, sidecar(sweep, state))

    t0 = time.perf_counter()
    failures: list = []
    details: dict = {}
    counts = {"ok": 0}

    def finished(i: int, rec: Any, error: BaseException | None) -> None:
        task = todo[i]
        if error is not None:  # the worker itself failed (a crashed process, a lost Dask worker)
            rec = {
                "task_id": task.task_id,
                "status": "failed",
                "error": f"{type(error).__name__}: {error}",
                "error_detail": None,
                "result": {},
                "wall_seconds": float("nan"),
            }
        write_part(out, task, _row(task, sweep, rec))
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
        write_sidecar(out, sidecar(sweep, state))
        raise

    rows = []
    for t in sweep.tasks:
        row = read_part(part_path(out, t), t)
        if row is None:  # pragma: no cover - every task was just written
            raise RuntimeError(f"part file of task {t.task_id} is missing or does not hold its result")
        rows.append(row)
    param_cols: list[str] = []
    for t in sweep.tasks:
        param_cols += [k for k in t.params if k not in param_cols]
    _atomic_write_table(out / RESULTS_FILE, to_table(rows, ID_COLUMNS + tuple(param_cols)))
    wall = time.perf_counter() - t0
    state["status"] = "complete" if not failures else "complete-with-failures"
    state["runs"][-1].update(finished=_now(), wall_seconds=wall, ok=counts["ok"], failed=len(failures))
    state["failures"] = [{"task_id": i, "error": e, "traceback": details.get(i)} for i, e in failures]
    write_sidecar(out, sidecar(sweep, state))
    return SweepOutcome(
        out_dir=str(out),
        total=total,
        skipped=skipped,
        ran=len(todo),
        ok=counts["ok"] + skipped,
        failed=len(failures),
        failures=failures,
        wall_seconds=wall,
        backend=backend,
        results_path=str(out / RESULTS_FILE),
        discarded=len(discarded),
    )
