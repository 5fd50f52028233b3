"""Sweeps: validation of sweep files, seeds, storage and resume, local and Dask execution.

The facts checked are independent of the implementation's internals: a task's numbers
must equal those of the same measurement called directly with the documented seed;
rows must not depend on the backend, the number of workers or the rest of the grid; a
sweep killed with SIGKILL and resumed must end with the rows of an uninterrupted run.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from supermarket import sweep as sw
from supermarket.model import spawn_seeds

from conftest import free_port

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "supermarket"]


def cli(*args, timeout=120, **kw):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          cwd=kw.pop("cwd", ROOT), **kw)


def rows_of(out_dir) -> list[dict]:
    return sw.table_rows(pq.read_table(Path(out_dir) / sw.RESULTS_FILE))


def comparable(rows):
    """Rows without the columns that measure machine speed (the rest must be identical)."""
    return [{k: v for k, v in r.items() if k not in sw.TIMING_COLUMNS} for r in rows]


def same(a, b) -> bool:
    """Equal rows, NaN equal to NaN."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.keys() != y.keys():
            return False
        for k in x:
            u, v = x[k], y[k]
            if isinstance(u, float) and isinstance(v, float) and math.isnan(u) and math.isnan(v):
                continue
            if u != v:
                return False
    return True


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

SMALL = """
[sweep]
name = "small"
seed = 5
replications = 2

[[run]]
measurement = "theory"
n = 1000
d = [2, 5]
load = 0.95

[[run]]
measurement = "meanfield"
n = 50
d = 2
load = 0.9

[[run]]
measurement = "simulate"
n = 200
d = [2, 3]
load = 0.9
steps = 20000
burn_in = 2000
time_mode = ["discrete", "continuous"]

[[run]]
measurement = "mixing"
n = 30
d = 2
load = 0.8
"""


def write(tmp_path, text, name="s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# =========================================================================== validation
BAD = """[sweep]
name = "bad"
seed = -1
colour = "red"

[[run]]
measurement = "theory"
n = [100, "x"]
d = 2.5
load = [0.9, 1.2]
bogus = 1

[[run]]
measurement = "simulate"
n = 100
d = 2
load = 0.9
engine = "warp"
steps = 1000
time = 5.0

[[run]]
measurement = "nope"
"""


def test_every_error_listed_at_once_with_line_and_key(tmp_path):
    with pytest.raises(sw.SweepFileError) as ei:
        sw.load_sweep(write(tmp_path, BAD))
    errs = ei.value.errors
    expected = [(3, "sweep.seed"), (4, "sweep.colour"), (8, "run[1].n"), (9, "run[1].d"), (10, "run[1].load"),
                (11, "run[1].bogus"), (18, "run[2].engine"), (20, "run[2].time"), (23, "run[3].measurement")]
    assert len(errs) == len(expected), errs
    for (line, key), e in zip(expected, errs):
        assert e.startswith(f"line {line}: {key}:"), e
    assert "unknown key 'colour'" in errs[1] and "unknown key 'bogus'" in errs[5]
    assert "got 'x'" in errs[2] and "2.5" in errs[3] and "1.2" in errs[4]


def test_wrong_types_all_reported_by_cli(tmp_path):
    text = """[sweep]
seed = "one"
replications = 0

[[run]]
measurement = "simulate"
n = 1.5
d = "two"
load = true
steps = [1000, -5]
replace = "yes"
time_mode = 3
"""
    r = cli("sweep", write(tmp_path, text), "--out", tmp_path / "o")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    for line, key in [(2, "sweep.seed"), (3, "sweep.replications"), (7, "run[1].n"), (8, "run[1].d"),
                      (9, "run[1].load"), (10, "run[1].steps"), (11, "run[1].replace"), (12, "run[1].time_mode")]:
        assert f"line {line}: {key}:" in r.stderr, (key, r.stderr)
    assert "8 errors" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_rules_between_keys(tmp_path):
    text = """
[[run]]
measurement = "simulate"
n = 100
load = 0.9
alpha = 0.5
beta = 0.3

[[run]]
measurement = "fluctuations"
n = 100
regime = "b"
kappa = 1.0

[[run]]
measurement = "meanfield"
d = 2
load = 0.9
replications = 3
"""
    with pytest.raises(sw.SweepFileError) as ei:
        sw.parse_sweep(text)
    msg = str(ei.value)
    assert "exactly one of 'load' and 'alpha'" in msg
    assert "exactly one of 'steps' and 'time'" in msg
    assert "regime 'b' does not use kappa" in msg
    assert "deterministic: replications must be 1" in msg


def test_not_toml_and_missing_file(tmp_path):
    with pytest.raises(sw.SweepFileError, match="not valid TOML"):
        sw.parse_sweep("[[run]\nmeasurement = ")
    with pytest.raises(sw.SweepFileError, match="file not found"):
        sw.load_sweep(tmp_path / "absent.toml")


def test_alpha_beta_grid_gives_paper_family():
    s = sw.parse_sweep("""
[[run]]
measurement = "theory"
n = 10000
alpha = 0.6
beta = [0.25, 0.4]
""")
    ds = [t.params["d"] for t in s.tasks]
    lams = [t.params["load"] for t in s.tasks]
    assert ds == [10, 39]  # ⌊10^4 ** 0.25⌋ = 10 exactly, ⌊10^1.6⌋ = 39
    assert lams == [pytest.approx(1 - 10000 ** -0.6, rel=1e-15)] * 2


def test_duplicate_grid_point_refused():
    with pytest.raises(sw.SweepFileError, match="repeats"):
        sw.parse_sweep('[[run]]\nmeasurement = "theory"\nn = [10, 10]\nd = 2\nload = 0.9\n')


# =========================================================================== seeds
def test_task_seed_is_child_r_of_the_point_root():
    h = "ab" * 32
    root = np.random.SeedSequence(7, spawn_key=(0xABABABAB, 0xABABABAB))
    for r in range(3):
        assert sw.task_seed(7, h, r).generate_state(4).tolist() == \
            spawn_seeds(root, 3)[r].generate_state(4).tolist()


def test_task_row_equals_direct_call_with_documented_seed(tmp_path):
    """The simulate row equals supermarket.simulate called by hand with the task's seed."""
    from supermarket.simulate import simulate

    s = sw.parse_sweep(SMALL, path="small.toml")
    out = sw.run_sweep(s, tmp_path / "o", workers=1)
    assert out.failed == 0
    rows = rows_of(tmp_path / "o")
    task = next(t for t in s.tasks if t.measurement == "simulate" and t.replication == 1)
    row = next(r for r in rows if r["task_id"] == task.task_id)
    direct = simulate(200, task.params["d"], 0.9, steps=20000, burn_in=2000, time_mode=task.params["time_mode"],
                      seed=sw.task_seed(5, task.point_hash, 1), replications=1, workers=1, progress=False)
    assert row["u_mean"] == direct.u_mean.tolist()  # an Arrow list column, exact floats
    assert row["u_stderr"] == direct.u_stderr.tolist()
    assert row["max_queue_dist"] == direct.max_queue_dist  # a map<int64, double> column
    assert row["mean_queue_length"] == direct.mean_queue_length
    # meanfield row: Σ V at λ = 0.9, d = 2 is about 3.986 (docs/model.md §3)
    mf = next(r for r in rows if r["measurement"] == "meanfield")
    assert mf["refined_sum_V"] == pytest.approx(3.986, abs=1e-3)


def test_rows_independent_of_workers_and_of_the_rest_of_the_grid(tmp_path):
    s = sw.parse_sweep(SMALL, path="small.toml")
    sw.run_sweep(s, tmp_path / "one", workers=1)
    sw.run_sweep(s, tmp_path / "two", workers=2)
    a, b = comparable(rows_of(tmp_path / "one")), comparable(rows_of(tmp_path / "two"))
    assert same(a, b)
    # a sweep holding only one of the simulate points gives the same row for it
    sub = SMALL.split("[[run]]\nmeasurement = \"simulate\"")[0] + """
[[run]]
measurement = "simulate"
n = 200
d = 3
load = 0.9
steps = 20000
burn_in = 2000
time_mode = "continuous"
"""
    s2 = sw.parse_sweep(sub, path="sub.toml")
    sw.run_sweep(s2, tmp_path / "sub", workers=1)
    c = {r["task_id"]: r for r in comparable(rows_of(tmp_path / "sub"))}
    common = [r for r in a if r["task_id"] in c]
    assert len(common) == 2 + 1 + 2  # theory 2, meanfield 1, simulate point × 2 replications
    for r in common:  # the same values (columns absent from the smaller grid are null here)
        other = dict(c[r["task_id"]], task_index=r["task_index"], point=r["point"], sweep=r["sweep"])
        mine = {k: v for k, v in r.items() if v is not None}
        assert same([mine], [{k: v for k, v in other.items() if v is not None}])


def test_failed_task_recorded_others_go_on_and_rerun_retries(tmp_path, monkeypatch):
    real = sw.MEASUREMENTS["theory"]

    def flaky(params, seed):
        if params["d"] == 10:
            raise RuntimeError("boom at d=10")
        return real(params, seed)

    s = sw.parse_sweep(THEORY, path="t.toml")
    monkeypatch.setitem(sw.MEASUREMENTS, "theory", flaky)
    out = sw.run_sweep(s, tmp_path / "o", workers=1)
    assert (out.total, out.ok, out.failed) == (8, 4, 4)
    rows = rows_of(tmp_path / "o")
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(failed) == 4 and all(r["d"] == 10 and "boom at d=10" in r["error"] for r in failed)
    assert all(r["status"] == "ok" and r["k"] is not None for r in rows if r["d"] == 2)
    side = json.loads((tmp_path / "o" / "sweep.json").read_text())
    assert side["status"] == "complete-with-failures" and len(side["failures"]) == 4
    assert "RuntimeError: boom at d=10" in side["failures"][0]["traceback"]
    # the same command again retries only the failed tasks
    monkeypatch.setitem(sw.MEASUREMENTS, "theory", real)
    out2 = sw.run_sweep(s, tmp_path / "o", workers=1)
    assert (out2.skipped, out2.ran, out2.failed) == (4, 4, 0)
    sw.run_sweep(s, tmp_path / "clean", workers=1)
    assert same(comparable(rows_of(tmp_path / "o")), comparable(rows_of(tmp_path / "clean")))


# =========================================================================== storage
def test_sidecar_and_table(tmp_path):
    f = write(tmp_path, THEORY)
    r = cli("sweep", f, "--out", tmp_path / "o", "--workers", "1", "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["total"] == 8 and summary["failed"] == 0
    side = json.loads((tmp_path / "o" / "sweep.json").read_text())
    assert side["sweep_text"] == f.read_text()
    assert side["seed"] == 11 and side["status"] == "complete"
    assert side["package_version"] and len(side["sweep_sha256"]) == 64
    assert len(side["points"]) == 8 and len(side["task_seconds"]) == 8
    rows = rows_of(tmp_path / "o")
    assert [r["task_index"] for r in rows] == list(range(8))
    assert len({r["task_id"] for r in rows}) == 8
    from supermarket import theory as th
    for row in rows:  # the closed forms, computed independently here
        assert row["k"] == th.k_lambda_d(row["d"], row["load"])
        assert row["fixed_point"][0] == pytest.approx(row["load"], rel=1e-15)


def test_different_sweep_refused_same_sweep_resumes(tmp_path):
    f = write(tmp_path, THEORY)
    assert cli("sweep", f, "--out", tmp_path / "o", "--workers", "1").returncode == 0
    before = (tmp_path / "o" / "results.parquet").read_bytes()
    # only comments and layout changed: the same sweep, nothing to run
    f2 = write(tmp_path, "# a comment\n" + THEORY.replace("seed = 11", "seed   =   11"), "s2.toml")
    r = cli("sweep", f2, "--out", tmp_path / "o", "--workers", "1", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["skipped"] == 8
    f3 = write(tmp_path, THEORY.replace("seed = 11", "seed = 12"), "s3.toml")
    r = cli("sweep", f3, "--out", tmp_path / "o")
    assert r.returncode == 2
    assert "different sweep" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert len(rows_of(tmp_path / "o")) == 8 and before[:4] == b"PAR1"
    # a non-empty directory that is not a sweep is refused too
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    r = cli("sweep", f, "--out", tmp_path / "other")
    assert r.returncode == 2 and "not empty" in r.stderr


def test_max_tasks_refused_before_running(tmp_path):
    f = write(tmp_path, THEORY)
    r = cli("sweep", f, "--out", tmp_path / "o", "--max-tasks", "7")
    assert r.returncode == 2
    assert "8 tasks" in r.stderr and "--max-tasks 7" in r.stderr
    assert not (tmp_path / "o").exists()
    assert cli("sweep", f, "--out", tmp_path / "o", "--max-tasks", "8", "--workers", "1").returncode == 0


def test_unreachable_scheduler_fails_fast(tmp_path):
    f = write(tmp_path, THEORY)
    port = free_port()  # nothing listens there
    t0 = time.monotonic()
    r = cli("sweep", f, "--out", tmp_path / "o", "--scheduler", f"tcp://127.0.0.1:{port}", "--timeout", "2")
    elapsed = time.monotonic() - t0
    assert r.returncode == 2
    assert elapsed < 20
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the Dask scheduler" in lines[0], r.stderr
    assert not (tmp_path / "o").exists()
    r = cli("sweep", f, "--out", tmp_path / "o", "--scheduler", "not-an-address")
    assert r.returncode == 2 and "tcp://HOST:PORT" in r.stderr


KILL = """
[sweep]
name = "kill"
seed = 3
replications = 4

[[run]]
measurement = "simulate"
n = 1000
d = [2, 3]
load = 0.9
steps = 2000000
burn_in = 10000
"""


def test_sigkill_then_resume_gives_the_uninterrupted_rows(tmp_path):
    f = write(tmp_path, KILL)
    out = tmp_path / "killed"
    parts = out / "parts"
    proc = subprocess.Popen([*CLI, "sweep", str(f), "--out", str(out), "--workers", "1"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    total = 8
    killed_at = None
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            n = len(list(parts.glob("*.parquet"))) if parts.exists() else 0
            if 1 <= n < total:
                os.killpg(proc.pid, signal.SIGKILL)
                killed_at = n
                break
            time.sleep(0.01)
    finally:
        if proc.poll() is None and killed_at is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert killed_at is not None, "the sweep finished before it could be killed part way"
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "results.parquet").exists()
    # a report of the interrupted sweep uses the finished tasks and says it is partial
    from supermarket.report import build_report
    text = Path(build_report(out, tmp_path / "partial.html")).read_text()
    assert "(partial: sweep not finished)" in text
    done = int(re.search(r"<td>(\d+) of 8 \(", text).group(1))
    assert killed_at <= done < total
    # the same command resumes: runs only the missing tasks
    r = cli("sweep", f, "--out", out, "--workers", "1", "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["skipped"] >= killed_at and summary["skipped"] + summary["ran"] == total
    side = json.loads((out / "sweep.json").read_text())
    assert len(side["runs"]) == 2
    # an uninterrupted run of the same file
    sw.run_sweep(sw.load_sweep(f), tmp_path / "clean", workers=1)
    a, b = rows_of(out), rows_of(tmp_path / "clean")
    assert len(a) == total and len({r["task_id"] for r in a}) == total
    assert same(comparable(a), comparable(b))


# =========================================================================== Dask
def test_dask_cluster_gives_the_local_rows(tmp_path, dask_cluster):
    f = write(tmp_path, SMALL)
    r = cli("sweep", f, "--out", tmp_path / "dask", "--scheduler", dask_cluster, "--json", timeout=240)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["backend"] == f"dask:{dask_cluster}"
    sw.run_sweep(sw.load_sweep(f), tmp_path / "local", workers=1)
    a, b = rows_of(tmp_path / "dask"), rows_of(tmp_path / "local")
    assert len(a) == len(sw.load_sweep(f).tasks)
    assert all(r["status"] == "ok" for r in a)
    for x, y in zip(comparable(a), comparable(b)):  # row by row
        assert same([x], [y]), (x["task_id"], {k: (x[k], y.get(k)) for k in x if x[k] != y.get(k)})


def test_examples_are_valid():
    s = sw.load_sweep(ROOT / "examples" / "sweep-quick.toml")
    assert {t.measurement for t in s.tasks} == {"theory", "meanfield", "simulate", "mixing", "fluctuations"}
    for path in sorted((ROOT / "examples").glob("*.toml")):
        assert sw.load_sweep(path).tasks, path
    # the heavy-traffic example keeps α/β away from integers: k = ⌈α/β⌉ (docs/model.md §4)
    from supermarket import theory as th
    heavy = sw.load_sweep(ROOT / "examples" / "sweep-heavy-traffic.toml")
    for t in heavy.tasks:
        ratio = t.params["alpha"] / t.params["beta"]
        assert abs(ratio - round(ratio)) > 0.1
        assert th.k_lambda_d(t.params["d"], t.params["load"]) == math.ceil(ratio)


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
steps = [100000, 50000000]
burn_in = 1000
"""


def test_ctrl_c_in_process_stops_stores_nothing_partial_and_resumes(tmp_path):
    """Ctrl-C while a --workers 1 task is measuring: exit 130, the interrupted task is not
    stored (simulate returns a partial result on Ctrl-C: it must not become a row), and the same
    command resumes and stores the full measurement."""
    f = write(tmp_path, INTERRUPT)
    out = tmp_path / "o"
    parts = out / "parts"
    proc = subprocess.Popen([*CLI, "sweep", str(f), "--out", str(out), "--workers", "1"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if parts.exists() and len(list(parts.glob("*.parquet"))) >= 2:
                break
            time.sleep(0.01)
        time.sleep(0.5)  # the long simulation is now measuring (burn-in: 1000 events)
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
    long = [x for x in rows_of(out) if x.get("steps") == 50000000]
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
        states["nothing" if not out.exists() else
               "complete" if (out / "results.parquet").exists() else "directory"] += 1
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
    instants, states = _kill_at_instants(tmp_path, 300, seed=2)
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
            try:
                conn.sendall(greeting)
            except OSError:
                pass

    threading.Thread(target=serve, daemon=True).start()
    return srv, held


@pytest.mark.parametrize("greeting", [b"", b"HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n"])
def test_scheduler_that_is_not_dask_fails_in_one_line_within_the_timeout(tmp_path, greeting):
    srv, held = _server(greeting)
    try:
        f = write(tmp_path, THEORY)
        t0 = time.monotonic()
        r = cli("sweep", f, "--out", tmp_path / "o", "--scheduler", f"tcp://127.0.0.1:{srv.getsockname()[1]}",
                "--timeout", "2", timeout=60)
        elapsed = time.monotonic() - t0
    finally:
        srv.close()
        for c in held:
            c.close()
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a Dask scheduler" in lines[0], r.stderr
    assert elapsed < 15  # interpreter start-up + the 2 s timeout
    assert not (tmp_path / "o").exists()


BLOCKER = '''
import importlib.abc, sys

class _NoDask(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("dask", "distributed"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoDask())
'''


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
    for workers in ("1", "2"):
        r = cli("sweep", f, "--out", tmp_path / f"o{workers}", "--workers", workers, env=env)
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
    for out, what in [(tmp_path / "missing" / "o", "does not exist"), (Path("/proc/supermarket-x"), "cannot write"),
                      (Path("/dev/full"), "not a directory")]:
        t0 = time.monotonic()
        r = cli("sweep", f, "--out", out, "--workers", "1")
        assert r.returncode == 2 and time.monotonic() - t0 < 10, (out, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and what in lines[0], (out, r.stderr)
    assert not (tmp_path / "missing").exists()


def test_report_output_places(tmp_path):
    s = sw.parse_sweep(THEORY, path="t.toml")
    sw.run_sweep(s, tmp_path / "o", workers=1)
    for opt, target, what in [("--html", tmp_path / "missing" / "r.html", "does not exist"),
                              ("--md", tmp_path / "missing" / "r.md", "does not exist"),
                              ("--md", Path("/proc/r.md"), "cannot write"),
                              ("--html", tmp_path, "is a directory"),
                              ("--html", Path("/dev/full"), "cannot write /dev/full")]:
        r = cli("report", tmp_path / "o", opt, target)
        assert r.returncode == 2, (opt, target, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and what in lines[0], (target, r.stderr)
        assert "report:" not in r.stdout  # never reported as written
    # both targets are checked before the first is written
    r = cli("report", tmp_path / "o", "--html", tmp_path / "ok.html", "--md", tmp_path / "missing" / "r.md")
    assert r.returncode == 2 and not (tmp_path / "ok.html").exists()


# =========================================================================== tidy Arrow tables
@pytest.fixture(scope="module")
def small_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("small") / "o"
    res = sw.run_sweep(sw.parse_sweep(SMALL, path="small.toml"), d, workers=1)
    assert res.failed == 0
    return d


def test_arrays_are_arrow_list_columns(small_dir):
    import pyarrow as pa

    schema = pq.read_schema(small_dir / "results.parquet")
    for col in ("u_mean", "u_stderr", "fixed_point", "refined_V", "lna_variance", "linearised_q"):
        assert pa.types.is_list(schema.field(col).type) and schema.field(col).type.value_type == pa.float64(), col
    cov = schema.field("lna_covariance").type
    assert pa.types.is_list(cov) and pa.types.is_list(cov.value_type)
    assert schema.field("max_queue_dist").type == pa.map_(pa.int64(), pa.float64())
    assert json.loads(schema.metadata[b"supermarket.json_columns"]) == []
    import pandas as pd

    df = pd.read_parquet(small_dir / "results.parquet")
    sim = df[df.measurement == "simulate"]
    assert all(len(u) == len(s) and u[0] > u[-1] for u, s in zip(sim.u_mean, sim.u_stderr))


def test_duckdb_queries_a_sweep_directly(small_dir):
    duckdb = pytest.importorskip("duckdb")
    path = str(small_dir / "results.parquet")
    con = duckdb.connect()
    rows = con.execute(f"""
        SELECT d, time_mode, count(*) AS reps,
               max(abs(list_sum(map_values(max_queue_dist)) - 1)) AS dist_mass_error,
               bool_and(list_sort(u_mean, 'DESC') = u_mean) AS profile_non_increasing,
               avg(u_mean[1]) AS u1, max(len(u_mean) - len(u_stderr)) AS len_gap
        FROM read_parquet('{path}') WHERE measurement = 'simulate'
        GROUP BY d, time_mode ORDER BY d, time_mode""").fetchall()
    assert [(r[0], r[1], r[2]) for r in rows] == [(2, "continuous", 2), (2, "discrete", 2),
                                                  (3, "continuous", 2), (3, "discrete", 2)]
    for _, _, _, mass_err, monotone, u1, gap in rows:
        assert mass_err < 1e-9 and monotone and gap == 0  # a distribution; a profile u_1 >= u_2 >= ...
        assert abs(u1 - 0.9) < 0.05  # E[u_1] = λ in equilibrium (flow balance), short runs
    # meanfield: π(1) = λ and Σ π(i) is the stored mean queue length (docs/model.md §3)
    (pi1, err), = con.execute(f"""SELECT fixed_point[1], abs(list_sum(fixed_point) - mean_queue_length)
        FROM read_parquet('{path}') WHERE measurement = 'meanfield'""").fetchall()
    assert pi1 == pytest.approx(0.9, rel=1e-15) and err < 1e-12


def _downgrade_to_format_1(d: Path) -> None:
    """Rewrite a sweep directory as the first version wrote it: arrays and maps as JSON text."""
    def old(path):
        rows = sw.table_rows(pq.read_table(path))
        rows = [{k: (json.dumps({str(a): b for a, b in v.items()} if isinstance(v, dict) else v)
                     if isinstance(v, (list, dict)) else v) for k, v in r.items()} for r in rows]
        pq.write_table(pa.Table.from_pylist(rows), path)
    for p in [d / "results.parquet", *sorted((d / "parts").glob("*.parquet"))]:
        old(p)
    side = json.loads((d / "sweep.json").read_text())
    side["format"] = 1
    (d / "sweep.json").write_text(json.dumps(side))


def test_old_directories_refused_with_the_command_that_converts_them(small_dir, tmp_path):
    import shutil

    d = tmp_path / "old"
    shutil.copytree(small_dir, d)
    before = rows_of(d)
    _downgrade_to_format_1(d)
    f = write(tmp_path, SMALL, "small.toml")
    for args in (("report", d, "--html", tmp_path / "r.html"), ("sweep", f, "--out", d, "--workers", "1")):
        r = cli(*args)
        assert r.returncode == 2, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and f"supermarket sweep --upgrade {d}" in lines[0], r.stderr
    r = cli("sweep", "--upgrade", d)
    assert r.returncode == 0 and "converted to format 2" in r.stdout, r.stderr
    assert same(rows_of(d), before)
    part, = sw.table_rows(pq.read_table(d / "parts" / f"{sw.parse_sweep(SMALL).tasks[5].task_id}.parquet"))
    assert isinstance(part["u_mean"], list) and same([part], [{k: before[5][k] for k in part}])
    assert cli("sweep", "--upgrade", d).stdout.strip().endswith("nothing to do")
    r = cli("sweep", f, "--out", d, "--workers", "1", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["skipped"] == len(before)
