"""A sweep never stores a wrong row and always resumes: Ctrl-C during a task, SIGKILL at many
instants (the first half-second included), part files that do not hold their task's result,
scheduler addresses that are not Dask schedulers, a plain install without dask, and output
places that cannot be written (all checked before any work)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from _paths import ROOT
from supermarket import sweep as sw
from sweep_runs import CLI, THEORY, cli, cli_here, comparable, rows_of, same, write

# =========================================================================== interruption (issue 11)
INTERRUPT = """
[sweep]
name = "interrupt"
seed = 4

[[run]]
measurement = "theory"
n = 1000
d = 2
load = 0.9

[[run]]
measurement = "simulate"
n = 1000
d = 2
load = 0.9
steps = [100000, 100000000]
burn_in = 1000
"""


def test_ctrl_c_in_process_stops_stores_nothing_partial_and_resumes(tmp_path):
    """Ctrl-C while a --workers 1 task is measuring: exit 130, the interrupted task is not
    stored (simulate returns a partial result on Ctrl-C: it must not become a row), and the same
    command resumes and stores the full measurement."""
    f = write(tmp_path, INTERRUPT)
    out = tmp_path / "o"
    parts = out / "parts"
    proc = subprocess.Popen(
        [*CLI, "sweep", str(f), "--out", str(out), "--workers", "1"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if parts.exists() and len(list(parts.glob("*.parquet"))) >= 2:
                break
            time.sleep(0.01)
        # the long task starts as soon as the second part is written; its burn-in is 1000 events
        # and its 10^8 measured events take a second or more, so 0.1 s later it is measuring (0.5 s
        # raced a 3e7-event task to its end on a fast CI machine: the signal then hit the exit)
        time.sleep(0.1)
        assert proc.poll() is None, "the sweep ended before it could be interrupted"
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert len(list(parts.glob("*.parquet"))) == 2
    assert not (out / "results.parquet").exists()
    side = json.loads((out / "sweep.json").read_text())
    assert side["status"] == "interrupted"
    r = cli("sweep", f, "--out", out, "--workers", "1", "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert (summary["skipped"], summary["ran"], summary["failed"]) == (2, 1, 0)
    long = [x for x in rows_of(out) if x.get("steps") == 100000000]
    assert len(long) == 1 and long[0]["status"] == "ok" and long[0]["partial"] is False
    assert "result_steps" not in long[0] or long[0]["result_steps"] is None  # the whole horizon was measured


def _fork_sweep(text: str, out: Path) -> int:
    pid = os.fork()
    if pid == 0:  # the child: run the sweep and leave without any cleanup of the parent's
        code = 1
        try:
            sw.run_sweep(sw.parse_sweep(text, path="k.toml"), out, workers=1)
            code = 0
        finally:
            os._exit(code)
    return pid


KILL_GRID = """
[sweep]
name = "kill-grid"
seed = 8

[[run]]
measurement = "theory"
n = [100, 1000, 10000]
d = [2, 3]
load = [0.9, 0.99]
"""


def _kill_at_instants(tmp_path, count: int, seed: int):
    """SIGKILL a sweep at ``count`` instants spread over its run (the first half-second
    included), then run the same sweep again: it must resume and give the clean rows."""
    s = sw.parse_sweep(KILL_GRID, path="k.toml")
    sw.run_sweep(s, tmp_path / "clean", workers=1)
    clean = comparable(rows_of(tmp_path / "clean"))
    t0 = time.monotonic()
    pid = _fork_sweep(KILL_GRID, tmp_path / "timed")
    os.waitpid(pid, 0)
    span = max(0.5, 1.3 * (time.monotonic() - t0))
    rng = np.random.default_rng(seed)
    instants = np.sort(np.concatenate([rng.uniform(0, 0.5, count // 2), rng.uniform(0, span, count - count // 2)]))
    states = {"nothing": 0, "directory": 0, "complete": 0}
    for j, instant in enumerate(instants):
        out = tmp_path / f"k{j}"
        pid = _fork_sweep(KILL_GRID, out)
        time.sleep(instant)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        states[
            "nothing" if not out.exists() else "complete" if (out / "results.parquet").exists() else "directory"
        ] += 1
        res = sw.run_sweep(s, out, workers=1)  # the same command: must resume, whatever was left
        assert res.failed == 0 and res.skipped + res.ran == len(s.tasks)
        assert same(comparable(rows_of(out)), clean), f"instant {instant:.4f} s"
        assert not list(tmp_path.glob(f".k{j}.creating-*"))
    return instants, states


def test_sigkill_at_many_instants_always_resumes(tmp_path):
    instants, states = _kill_at_instants(tmp_path, 16, seed=1)
    assert len(instants) == 16 and (instants < 0.5).sum() >= 8
    assert states["directory"] >= 1, states  # some kills landed in the middle of the run


@pytest.mark.slow
def test_sigkill_at_hundreds_of_instants_always_resumes(tmp_path):
    _instants, states = _kill_at_instants(tmp_path, 300, seed=2)
    assert states["directory"] >= 30 and states["nothing"] >= 1, states


def test_directory_without_sidecar_from_an_older_version_resumes(tmp_path):
    """An older version could be killed after writing parts/ and sweep.toml but before
    sweep.json: the same command resumes such a directory."""
    s = sw.parse_sweep(THEORY, path="t.toml")
    out = tmp_path / "o"
    (out / "parts").mkdir(parents=True)
    (out / "sweep.toml").write_text(THEORY)
    res = sw.run_sweep(s, out, workers=1)
    assert res.ran == 8 and res.failed == 0
    (tmp_path / "x" / "parts").mkdir(parents=True)
    (tmp_path / "x" / "sweep.toml").write_text(THEORY.replace("seed = 11", "seed = 12"))
    with pytest.raises(sw.SweepDirError, match="not empty"):
        sw.run_sweep(s, tmp_path / "x", workers=1)


def test_part_holding_another_tasks_result_is_computed_again(tmp_path):
    s = sw.parse_sweep(THEORY, path="t.toml")
    out = tmp_path / "o"
    sw.run_sweep(s, out, workers=1)
    clean = comparable(rows_of(out))
    a, b, c = s.tasks[0], s.tasks[1], s.tasks[2]
    parts = out / "parts"
    # B's part now holds A's (valid) row; C's row claims another seed
    (parts / f"{b.task_id}.parquet").write_bytes((parts / f"{a.task_id}.parquet").read_bytes())
    t = pq.read_table(parts / f"{c.task_id}.parquet")
    t = t.set_column(t.schema.get_field_index("seed"), "seed", pa.array([c.seed + 1], pa.int64()))
    pq.write_table(t, parts / f"{c.task_id}.parquet")
    res = sw.run_sweep(s, out, workers=1)
    assert (res.discarded, res.ran, res.skipped) == (2, 2, 6)
    assert same(comparable(rows_of(out)), clean)
    assert len({r["task_id"] for r in rows_of(out)}) == 8
    side = json.loads((out / "sweep.json").read_text())
    assert sorted(side["runs"][-1]["discarded_parts"]) == sorted([b.task_id, c.task_id])


# =========================================================================== schedulers, plain install
def _server(greeting: bytes):
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held = []

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)
            with contextlib.suppress(OSError):
                conn.sendall(greeting)

    threading.Thread(target=serve, daemon=True).start()
    return srv, held


@pytest.mark.parametrize("greeting", [b"HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n"])
def test_scheduler_that_is_not_dask_fails_in_one_line_within_the_timeout(tmp_path, greeting):
    srv, held = _server(greeting)
    try:
        f = write(tmp_path, THEORY)
        r = cli(
            "sweep",
            f,
            "--out",
            tmp_path / "o",
            "--scheduler",
            f"tcp://127.0.0.1:{srv.getsockname()[1]}",
            "--timeout",
            "2",
            timeout=300,  # hang guard only
        )
    finally:
        srv.close()
        for c in held:
            c.close()
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a Dask scheduler" in lines[0], r.stderr
    assert not (tmp_path / "o").exists()


BLOCKER = """
import importlib.abc, sys

class _NoDask(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("dask", "distributed"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoDask())
"""


def test_local_sweep_and_report_without_dask(tmp_path):
    """A plain install (no dask, no distributed): local sweeps (in-process and a pool) and
    reports work; --scheduler says in one line that it needs the dask extra."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)  # also loaded by the pool's spawned workers
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT / "src")]))
    check = subprocess.run([sys.executable, "-c", "import dask"], capture_output=True, text=True, env=env)
    assert check.returncode != 0 and "No module named 'dask'" in check.stderr
    f = write(tmp_path, THEORY)
    r = cli("sweep", f, "--out", tmp_path / "o2", "--workers", "2", env=env)  # a pool: its workers blocked too
    assert r.returncode == 0, r.stderr
    r = cli("report", tmp_path / "o2", "--html", tmp_path / "r.html", env=env)
    assert r.returncode == 0, r.stderr
    assert "<h2>theory</h2>" in (tmp_path / "r.html").read_text()
    r = cli("sweep", f, "--out", tmp_path / "o3", "--scheduler", "tcp://127.0.0.1:8786", env=env)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "'dask' extra" in lines[0], r.stderr


# =========================================================================== output paths
def test_output_places_checked_before_any_work(tmp_path):
    f = write(tmp_path, INTERRUPT)  # a 3 s task: a check made after it would show in the time
    for out, what in [
        (tmp_path / "missing" / "o", "does not exist"),
        (Path("/proc/supermarket-x"), "not writable"),
        (Path("/dev/full"), "not a directory"),
    ]:
        r = cli_here("sweep", f, "--out", out, "--workers", "1")
        assert r.returncode == 2, (out, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and what in lines[0], (out, r.stderr)
    assert not (tmp_path / "missing").exists()


def test_report_output_places(tmp_path):
    s = sw.parse_sweep(THEORY, path="t.toml")
    sw.run_sweep(s, tmp_path / "o", workers=1)
    for opt, target, what in [
        ("--html", tmp_path / "missing" / "r.html", "does not exist"),
        ("--md", tmp_path / "missing" / "r.md", "does not exist"),
        ("--md", Path("/proc/r.md"), "not writable"),
        ("--html", tmp_path, "is a directory"),
        ("--html", Path("/dev/full"), "cannot write /dev/full"),
    ]:
        r = cli_here("report", tmp_path / "o", opt, target)
        assert r.returncode == 2, (opt, target, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and what in lines[0], (target, r.stderr)
        assert "report:" not in r.stdout  # never reported as written
    # both targets are checked before the first is written
    r = cli_here("report", tmp_path / "o", "--html", tmp_path / "ok.html", "--md", tmp_path / "missing" / "r.md")
    assert r.returncode == 2 and not (tmp_path / "ok.html").exists()
