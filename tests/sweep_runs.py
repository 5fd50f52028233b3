"""Running sweeps in the tests: the command line in a subprocess or in this process, the rows
of a sweep's directory, and rows compared with NaN equal to NaN.

Shared by tests/sweep/test_sweep.py and tests/sweep/test_sweep_robust.py (``from sweep_runs
import cli, rows_of, same``); ``tests/`` is on ``sys.path`` (``pythonpath`` in pyproject's
``[tool.pytest.ini_options]``).
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from _paths import ROOT
from supermarket import sweep as sw

CLI = [sys.executable, "-m", "supermarket"]


def cli(*args, timeout=120, **kw):
    """``supermarket ARGS`` in a subprocess started in the repository root (or ``cwd=``)."""
    return subprocess.run(
        [*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=kw.pop("cwd", ROOT), **kw
    )


def cli_here(*args):
    """The CLI in this process (no interpreter start-up): returncode, stdout, stderr."""
    from types import SimpleNamespace

    from click.testing import CliRunner

    from supermarket.cli import main

    r = CliRunner().invoke(main, [str(a) for a in args])
    return SimpleNamespace(returncode=r.exit_code, stdout=r.stdout, stderr=r.stderr)


def rows_of(out_dir) -> list[dict]:
    """The rows of a sweep's results table, as dicts."""
    return sw.table_rows(pq.read_table(Path(out_dir) / sw.RESULTS_FILE))


def comparable(rows):
    """Rows without the columns that measure machine speed (the rest must be identical)."""
    return [{k: v for k, v in r.items() if k not in sw.TIMING_COLUMNS} for r in rows]


def equal(u, v) -> bool:
    """Equal values, NaN equal to NaN, also inside lists, tuples, dicts and arrays."""
    if isinstance(u, np.ndarray) or isinstance(v, np.ndarray):
        u, v = np.asarray(u).tolist(), np.asarray(v).tolist()
    if isinstance(u, float) and isinstance(v, float) and math.isnan(u) and math.isnan(v):
        return True
    if isinstance(u, (list, tuple)) and isinstance(v, (list, tuple)):
        return len(u) == len(v) and all(equal(a, b) for a, b in zip(u, v))
    if isinstance(u, dict) and isinstance(v, dict):
        return u.keys() == v.keys() and all(equal(u[k], v[k]) for k in u)
    return u == v


def same(a, b) -> bool:
    """Equal rows, NaN equal to NaN (also inside array-valued columns)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.keys() != y.keys():
            return False
        if not all(equal(x[k], y[k]) for k in x):
            return False
    return True


# A small grid of closed forms: quick to run, every row known in advance.
THEORY = """
[sweep]
name = "t"
seed = 11

[[run]]
measurement = "theory"
n = [100, 10000]
d = [2, 10]
load = ["0.9", 0.99]
"""


def write(tmp_path, text, name="s.toml") -> Path:
    """A sweep file ``tmp_path/name`` holding ``text``."""
    p = tmp_path / name
    p.write_text(text)
    return p
