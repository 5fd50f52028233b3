"""``supermarket reproduce paper000|paper002``: the papers' experiments end to end."""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path
from typing import Any

import click

from ._common import OutputError, print_json
from .options import dask_client, json_option, out_option, parallel_options, seed_option

EXPERIMENTS = {paper: f"supermarket.experiments.{paper}" for paper in ("paper000", "paper002")}


def manifest(out_dir: str | os.PathLike[str], wall_s: float, **extra: Any) -> dict:
    """What a run wrote under ``out_dir``: every file with its size, and the wall time."""
    root = Path(out_dir)
    files = [{"path": str(f), "bytes": f.stat().st_size} for f in sorted(root.rglob("*")) if f.is_file()]
    return {**extra, "out": str(root), "files": files, "total_bytes": sum(f["bytes"] for f in files), "wall_s": wall_s}


@click.command()
@click.argument("paper", type=click.Choice(sorted(EXPERIMENTS)))
@click.option("--quick", is_flag=True, help="Small sizes: under 3 minutes on 2 cores, every claim still shown.")
@out_option(help="Output directory for the tables, figures and summary.md (required).")
@seed_option()
@parallel_options
@json_option("Print a JSON manifest of the files written (paths, sizes) and the wall time.")
def reproduce(
    paper: str,
    quick: bool,
    out: str | None,
    seed: int,
    workers: int | None,
    scheduler: str | None,
    connect_timeout: float,
    as_json: bool,
) -> None:
    """Reproduce the claims of paper 000 (equilibrium at k, good set, mixing) or paper 002
    (the three diffusion regimes): tables (CSV, JSON), figures (PNG) and a Markdown summary
    in --out."""
    if out is None:
        raise click.UsageError(
            f"--out DIR is required: the directory for the tables, figures and summary.md "
            f"(e.g. --out {paper}{'-quick' if quick else ''})"
        )
    module = importlib.import_module(EXPERIMENTS[paper])
    client = dask_client(scheduler, connect_timeout, workers)
    t0 = time.perf_counter()
    try:
        module.run(out_dir=out, quick=quick, seed=seed, workers=workers, client=client)
    except OSError as exc:  # a file is written whole or not at all (supermarket.files.atomic_write)
        where = exc.filename if exc.filename is not None else out
        raise OutputError(
            f"could not write {os.fspath(where)!r}: {exc.strerror or exc}; every file there is "
            "whole (the earlier version of one not rewritten is unchanged)"
        ) from None
    finally:
        if client is not None:
            client.close()
    m = manifest(out, time.perf_counter() - t0, command="reproduce", paper=paper, quick=quick, seed=seed)
    if as_json:
        print_json(m)
    else:
        click.echo(closing_line(m))


def closing_line(m: dict) -> str:
    """What a reproduction wrote, in one line: files, size, where, the summary, the wall time."""
    summary = Path(m["out"]) / "summary.md"
    return (
        f"wrote {len(m['files'])} files ({m['total_bytes'] / 2**20:.1f} MiB) to {m['out']} in "
        f"{m['wall_s']:.0f} s" + (f"; start with {summary}" if summary.exists() else "")
    )
