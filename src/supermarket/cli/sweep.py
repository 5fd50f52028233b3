"""``supermarket sweep`` and ``supermarket report``: parameter sweeps and their reports."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from . import UserError
from ._common import OutputDir, OutputFile, print_json, stderr_is_tty
from .options import json_option, scheduler_option, timeout_option, workers_option


def _progress_printer(label: str) -> tuple[Callable[[int, int, int, int], None] | None, Callable[[], None]]:
    """A progress callback: a rich bar on a terminal, else nothing (the summary follows)."""
    if not stderr_is_tty():
        return None, (lambda: None)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    prog = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("running {task.fields[running]}  failed {task.fields[failed]}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=False,
    )
    state: dict[str, Any] = {"id": None}

    def update(done: int, running: int, failed: int, total: int) -> None:
        if state["id"] is None:
            prog.start()
            state["id"] = prog.add_task(label, total=total, running=0, failed=0)
        prog.update(state["id"], completed=done, running=running, failed=failed)

    def stop() -> None:
        if state["id"] is not None:
            state["id"] = None
            prog.stop()

    return update, stop


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.option(
    "--out",
    type=OutputDir(path_type=Path),
    help="Output directory: results.parquet, sweep.json, parts/. Run the same command again to resume.",
)
@workers_option("Local worker processes [default: number of CPU cores; 1 runs in this process].")
@scheduler_option("Run the tasks on an existing Dask cluster (started with `dask scheduler` and `dask worker`).")
@click.option(
    "--max-tasks",
    type=click.IntRange(min=1),
    help="Refuse, before running, a sweep with more tasks (grid points × replications).",
)
@timeout_option()
@click.option("--check", is_flag=True, help="Only validate FILE and print the number of tasks.")
@click.option(
    "--upgrade",
    "upgrade_dir",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Convert the sweep directory DIR written by an older version (arrays as "
    "JSON text) to the current format, in place; no FILE needed.",
)
@json_option("Print one JSON object summarising the run.")
def sweep(
    file: Path | None,
    out: Path | None,
    workers: int | None,
    scheduler: str | None,
    max_tasks: int | None,
    connect_timeout: float,
    check: bool,
    upgrade_dir: Path | None,
    as_json: bool,
) -> None:
    """Run the parameter sweep described by the TOML FILE (see docs/sweep.md).

    Each task (one grid point, one replication) gets a seed from the sweep seed and its own
    parameters, so the numbers are the same locally and on a cluster, with any number of
    workers. Finished tasks are kept when the sweep is interrupted; the same command resumes.
    A failing task is recorded with its error (exit code 1 at the end) and the others go on.
    """
    from .. import sweep as sw

    if upgrade_dir is not None:
        if file is not None or out is not None:
            raise click.UsageError("--upgrade DIR takes no FILE and no --out")
        try:
            n = sw.upgrade(upgrade_dir)
        except sw.SweepDirError as exc:
            raise UserError(str(exc)) from None
        if as_json:
            print_json({"directory": str(upgrade_dir), "files_rewritten": n, "format": sw.FORMAT_VERSION})
        elif n:
            click.echo(f"{upgrade_dir}: converted to format {sw.FORMAT_VERSION} ({n} files rewritten)")
        else:
            click.echo(f"{upgrade_dir}: already in format {sw.FORMAT_VERSION}; nothing to do")
        return
    if file is None:
        raise click.UsageError("missing argument FILE (the sweep's TOML file)")
    if workers is not None and scheduler is not None:
        raise click.UsageError("--workers and --scheduler exclude each other (the cluster has its own workers)")
    try:
        spec = sw.load_sweep(file, max_tasks=max_tasks)  # the size is counted before the grid is built
    except sw.SweepFileError as exc:
        # every error at once, on one line (the CLI's rule for user mistakes)
        n_err = len(exc.errors)
        click.echo(
            f"supermarket: error: {exc.path}: {n_err} error{'s' if n_err != 1 else ''} in sweep file: "
            + "; ".join(exc.errors),
            err=True,
        )
        sys.exit(2)
    if check:
        info = dict(
            file=str(file), name=spec.name, tasks=len(spec.tasks), points=spec.points, sweep_sha256=spec.sweep_sha256
        )
        if max_tasks is not None and len(spec.tasks) > max_tasks:
            raise UserError(f"the sweep has {len(spec.tasks)} tasks, more than --max-tasks {max_tasks}")
        if as_json:
            print_json(info)
        else:
            click.echo(f"{file}: valid; {spec.points} grid points, {len(spec.tasks)} tasks")
        return
    if out is None:
        raise click.UsageError("--out DIR is required (the directory for results.parquet and sweep.json)")
    update, stop = _progress_printer(spec.name)
    try:
        outcome = sw.run_sweep(
            spec,
            out,
            workers=workers,
            scheduler=scheduler,
            max_tasks=max_tasks,
            progress=update,
            connect_timeout=connect_timeout,
        )
    except (sw.SweepDirError, sw.SchedulerError, sw.OutputError) as exc:
        raise UserError(str(exc)) from None
    except KeyboardInterrupt:
        stop()
        click.echo(f"supermarket: the finished tasks are kept in {out}: run the same command to resume", err=True)
        raise  # the CLI's main says "interrupted" (exit 130) or "terminated" (exit 143)
    finally:
        stop()
    if as_json:
        print_json(outcome.to_dict())
    else:
        head, *failures = outcome.summary().splitlines()
        click.echo(f"sweep {spec.name}: {head}")
        for line in failures:
            click.echo(line, err=True)
    if outcome.failed:
        sys.exit(1)


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--html",
    type=OutputFile(path_type=Path, parents=True),
    help="Write one self-contained HTML file (figures embedded).",
)
@click.option(
    "--md", type=OutputFile(path_type=Path, parents=True), help="Write Markdown, with the PNG figures beside it."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "md"]),
    help="Write DIRECTORY/report.html or report.md (when neither --html nor --md is given).",
)
@click.option(
    "--out",
    type=OutputFile(path_type=Path, parents=True),
    hidden=True,
    help="Deprecated: --out names a directory in every other command; use --html FILE or --md FILE.",
)
@json_option("Print a JSON manifest of the files written (paths, sizes) and the wall time.")
def report(
    directory: Path, html: Path | None, md: Path | None, fmt: str | None, out: Path | None, as_json: bool
) -> None:
    """Build a report of the sweep in DIRECTORY: its tables and the figures of the
    measurements present (profiles against π and the linearised profile, the maximum queue
    length against k_(λ,d), mixing times against the bounds, fluctuation moments against the
    limits)."""
    from .. import report as rp
    from ..sweep.storage import SweepDirError, check_not_sweep_file, check_output_file, read_sidecar

    if out is not None:
        click.echo(
            "supermarket: warning: report --out FILE is deprecated; use --html FILE or --md FILE (--out "
            "names a directory in every other command)",
            err=True,
        )
    targets = [(kind, p) for kind, p in (("html", html), ("md", md)) if p is not None]
    if out is not None:
        kind = fmt or ("md" if out.suffix.lower() in (".md", ".markdown") else "html")
        targets.append((kind, out))
    elif fmt is not None and not targets:
        targets.append((fmt, directory / ("report.md" if fmt == "md" else "report.html")))
    elif fmt is not None and len(targets) == 1 and targets[0][0] != fmt:
        targets = [(fmt, targets[0][1])]
    if not targets:
        targets.append(("html", directory / "report.html"))
    for kind, path in targets:  # every target checked before any work
        try:
            check_output_file(path, f"--{kind}")
            check_not_sweep_file(directory, path, f"--{kind}")
        except ValueError as exc:
            raise UserError(str(exc)) from None
    try:  # a directory that is no sweep is refused before anything is read or written
        read_sidecar(directory)
    except (SweepDirError, ValueError) as exc:
        raise UserError(str(exc)) from None
    t0 = time.perf_counter()

    def beside(path):  # the files next to a report: it writes itself and <stem>_<figure>.png there
        folder = Path(path).parent
        return [f for f in folder.iterdir() if f.is_file()] if folder.is_dir() else []

    before = {f: f.stat().st_mtime_ns for _, path in targets for f in beside(path)}
    reports = []
    for kind, path in targets:
        written = rp.build_report(directory, path, fmt=kind)
        reports.append(str(written))
        if not as_json:
            click.echo(f"report: {written}")
    if as_json:
        files = {f for _, path in targets for f in beside(path) if before.get(f) != f.stat().st_mtime_ns}
        listed = [{"path": str(f), "bytes": f.stat().st_size} for f in sorted(files)]
        print_json(
            {
                "command": "report",
                "directory": str(directory),
                "reports": reports,
                "files": listed,
                "total_bytes": sum(f["bytes"] for f in listed),
                "wall_s": time.perf_counter() - t0,
            }
        )
