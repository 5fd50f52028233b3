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
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from _paths import ROOT
from _ports import free_port
from supermarket import sweep as sw
from supermarket.model import spawn_seeds
from sweep_runs import CLI, THEORY, cli, cli_here, comparable, equal, rows_of, same, write

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
    expected = [
        (3, "sweep.seed"),
        (4, "sweep.colour"),
        (8, "run[1].n"),
        (9, "run[1].d"),
        (10, "run[1].load"),
        (11, "run[1].bogus"),
        (18, "run[2].engine"),
        (20, "run[2].time"),
        (23, "run[3].measurement"),
    ]
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
    for line, key in [
        (2, "sweep.seed"),
        (3, "sweep.replications"),
        (7, "run[1].n"),
        (8, "run[1].d"),
        (9, "run[1].load"),
        (10, "run[1].steps"),
        (11, "run[1].replace"),
        (12, "run[1].time_mode"),
    ]:
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
    assert lams == [pytest.approx(1 - 10000**-0.6, rel=1e-15)] * 2


def test_duplicate_grid_point_refused():
    with pytest.raises(sw.SweepFileError, match="repeats"):
        sw.parse_sweep('[[run]]\nmeasurement = "theory"\nn = [10, 10]\nd = 2\nload = 0.9\n')


# =========================================================================== seeds
def test_task_seed_is_child_r_of_the_point_root():
    h = "ab" * 32
    root = np.random.SeedSequence(7, spawn_key=(0xABABABAB, 0xABABABAB))
    for r in range(3):
        assert sw.task_seed(7, h, r).generate_state(4).tolist() == spawn_seeds(root, 3)[r].generate_state(4).tolist()


def test_task_row_equals_direct_call_with_documented_seed(tmp_path):
    """The simulate row equals supermarket.simulate called by hand with the task's seed."""
    from supermarket.simulation import simulate

    s = sw.parse_sweep(SMALL, path="small.toml")
    out = sw.run_sweep(s, tmp_path / "o", workers=1)
    assert out.failed == 0
    rows = rows_of(tmp_path / "o")
    task = next(t for t in s.tasks if t.measurement == "simulate" and t.replication == 1)
    row = next(r for r in rows if r["task_id"] == task.task_id)
    direct = simulate(
        200,
        task.params["d"],
        0.9,
        steps=20000,
        burn_in=2000,
        time_mode=task.params["time_mode"],
        seed=sw.task_seed(5, task.point_hash, 1),
        replications=1,
        workers=1,
        progress=False,
    )
    assert row["u_mean"] == direct.u_mean.tolist()  # an Arrow list column, exact floats
    assert equal(row["u_stderr"], direct.u_stderr.tolist())  # NaN where the run distrusts the error
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
    sub = (
        SMALL.split('[[run]]\nmeasurement = "simulate"')[0]
        + """
[[run]]
measurement = "simulate"
n = 200
d = 3
load = 0.9
steps = 20000
burn_in = 2000
time_mode = "continuous"
"""
    )
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
    # result protocol of the outcome: the failures, in JSON, in a frame and in the summary
    from supermarket.jsonable import to_jsonable

    d = json.loads(json.dumps(to_jsonable(out.to_dict()), allow_nan=False))
    assert d["failed"] == 4 and len(d["failures"]) == 4 and "boom at d=10" in d["failures"][0][1]
    df = out.to_frame()
    assert list(df.columns) == ["task_id", "error"] and len(df) == 4
    text = out.summary(max_failures=2)
    assert text.startswith("8 tasks, 8 run now, 0 finished earlier, 4 failed")
    assert text.count("  failed ") == 2 and "... and 2 more" in text
    # the sweep itself: one frame row per task, its parameters as columns
    sf = s.to_frame()
    assert len(sf) == len(s.tasks) == 8 and sorted(set(sf["d"])) == [2, 10]
    assert json.loads(json.dumps(s.to_dict()))["points"] == s.points
    assert f"{s.points} grid points, 8 tasks" in s.summary()
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
    r = cli("sweep", f, "--out", tmp_path / "o", "--scheduler", f"tcp://127.0.0.1:{port}", "--timeout", "2")
    assert r.returncode == 2
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
    proc = subprocess.Popen(
        [*CLI, "sweep", str(f), "--out", str(out), "--workers", "1"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
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
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (2, "continuous", 2),
        (2, "discrete", 2),
        (3, "continuous", 2),
        (3, "discrete", 2),
    ]
    for _, _, _, mass_err, monotone, u1, gap in rows:
        assert mass_err < 1e-9 and monotone and gap == 0  # a distribution; a profile u_1 >= u_2 >= ...
        assert abs(u1 - 0.9) < 0.05  # E[u_1] = λ in equilibrium (flow balance), short runs
    # meanfield: π(1) = λ and Σ π(i) is the stored mean queue length (docs/model.md §3)
    ((pi1, err),) = con.execute(f"""SELECT fixed_point[1], abs(list_sum(fixed_point) - mean_queue_length)
        FROM read_parquet('{path}') WHERE measurement = 'meanfield'""").fetchall()
    assert pi1 == pytest.approx(0.9, rel=1e-15) and err < 1e-12


def _downgrade_to_format_1(d: Path) -> None:
    """Rewrite a sweep directory as the first version wrote it: arrays and maps as JSON text."""

    def old(path):
        rows = sw.table_rows(pq.read_table(path))
        rows = [
            {
                k: (
                    json.dumps({str(a): b for a, b in v.items()} if isinstance(v, dict) else v)
                    if isinstance(v, (list, dict))
                    else v
                )
                for k, v in r.items()
            }
            for r in rows
        ]
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
        r = cli_here(*args)
        assert r.returncode == 2, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and f"supermarket sweep --upgrade {d}" in lines[0], r.stderr
    r = cli_here("sweep", "--upgrade", d)
    assert r.returncode == 0 and "converted to format 2" in r.stdout, r.stderr
    assert same(rows_of(d), before)
    (part,) = sw.table_rows(pq.read_table(d / "parts" / f"{sw.parse_sweep(SMALL).tasks[5].task_id}.parquet"))
    assert isinstance(part["u_mean"], list) and same([part], [{k: before[5][k] for k in part}])
    assert cli_here("sweep", "--upgrade", d).stdout.strip().endswith("nothing to do")
    r = cli_here("sweep", f, "--out", d, "--workers", "1", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["skipped"] == len(before)
