"""Hostile inputs and faults (issue 19): every case ends in a one-line refusal before any work
(CLI: one line on stderr, exit code 2, no traceback; library: ValueError/TypeError naming the
parameter and its range), or a bounded run that says what it costs; no command overwrites a
sweep's files or an earlier output with a partial one; no orphaned workers after a kill."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

import _paths
from supermarket.cli import main

SRC = str(_paths.SRC)


def run_cli(*args, timeout=60):
    """The installed entry point in a subprocess: real stderr, real exit code."""
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "supermarket", *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env
    )
    return p, time.perf_counter() - t0


def refused(result, *needles, code=2):
    """One line `supermarket: error: …` on stderr, the exit code, no traceback."""
    err = result.stderr if hasattr(result, "stderr") else result.output
    rc = result.returncode if hasattr(result, "returncode") else result.exit_code
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == code, (rc, err)
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("supermarket: error: "), err
    for s in needles:
        assert s in lines[0], (s, lines[0])
    return lines[0]


def invoke(*args):
    return CliRunner().invoke(main, list(map(str, args)))


# =========================================================================== data destroyed
THEORY_SWEEP = '[[run]]\nmeasurement = "theory"\nn = 100\nd = [2, 3]\nload = 0.9\n'


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    from supermarket.sweep import parse_sweep, run_sweep

    out = tmp_path_factory.mktemp("hostile") / "sw"
    run_sweep(parse_sweep(THEORY_SWEEP), out, workers=1)
    return out


def _snapshot(d: Path) -> dict:
    return {p.relative_to(d): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    "opt,name",
    [
        ("--md", "sweep.json"),
        ("--html", "results.parquet"),
        ("--md", "sweep.toml"),
        ("--html", "parts/x.md"),
        ("--md", "./sweep.json"),
    ],
)
def test_report_never_writes_over_the_sweep(sweep_dir, opt, name):
    before = _snapshot(sweep_dir)
    r = invoke("report", sweep_dir, opt, sweep_dir / name)
    refused(r, opt if opt != "--out" else "--md", "would destroy the sweep")
    assert _snapshot(sweep_dir) == before


def test_report_beside_the_sweep_still_works(sweep_dir, tmp_path):
    r = invoke("report", sweep_dir, "--md", tmp_path / "r.md")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "r.md").read_text().startswith("# Sweep report")


def test_report_refuses_a_hand_edited_sidecar(sweep_dir, tmp_path):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(sweep_dir, bad)
    side = json.loads((bad / "sweep.json").read_text())
    side["runs"] = "x"
    (bad / "sweep.json").write_text(json.dumps(side))
    refused(invoke("report", bad), "'runs' must be a list")
    side["runs"], side["tasks_total"] = [], "7"
    (bad / "sweep.json").write_text(json.dumps(side))
    refused(invoke("report", bad), "'tasks_total' must be an integer")


def test_atomic_write_keeps_the_earlier_file_on_a_full_disk(tmp_path, monkeypatch):
    from supermarket import files as _files

    target = tmp_path / "result.json"
    target.write_text('{"earlier": 1}')

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_files.os, "fsync", full)
    with pytest.raises(OSError):
        _files.atomic_write(target, "x" * 10_000)
    assert target.read_text() == '{"earlier": 1}'
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temporary left


def test_simulate_out_on_a_full_disk_keeps_the_earlier_file(tmp_path, monkeypatch):
    from supermarket import files as _files

    out, fig = tmp_path / "r.json", tmp_path / "r.png"
    out.write_text("earlier")
    monkeypatch.setattr(_files.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space")))
    r = invoke("simulate", "--n", 20, "--d", 2, "--load", 0.5, "--steps", "1e4", "--save", out, "--plot", fig)
    refused(r, "could not write", str(out), code=1)
    assert out.read_text() == "earlier"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no 0-byte PNG, no temporary


def test_exact_plot_to_a_full_device_fails():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    r = invoke("exact", "--n", 2, "--plot", "/dev/full")
    refused(r, "/dev/full", "No space left", code=1)


def test_plot_path_of_the_library_is_atomic(tmp_path, monkeypatch):
    from supermarket import files as _files
    from supermarket.stationary.profile import solve

    res = solve(2, 2, 0.5)
    f = tmp_path / "x.png"
    f.write_bytes(b"earlier")
    monkeypatch.setattr(_files.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space")))
    with pytest.raises(OSError):
        res.plot(f)
    assert f.read_bytes() == b"earlier"


# =========================================================================== tracebacks
@pytest.mark.parametrize("cmd", ["theory", "simulate", "sweep", "exact", "perfect"])
def test_timeout_beyond_the_socket_layer_is_refused(cmd):
    refused(invoke(cmd, "--timeout", "1e10", "--scheduler", "tcp://127.0.0.1:1"), "--timeout")


def test_connect_timeout_range_in_the_library():
    from supermarket.cli.options import TIMEOUT
    from supermarket.parallel import MAX_TIMEOUT, connect

    assert TIMEOUT.max == MAX_TIMEOUT
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds, at most"):
        connect("tcp://127.0.0.1:1", 1e10)


@pytest.mark.parametrize(
    "args,needle",
    [
        (("perfect", "--max-memory-mb", "inf"), "--max-memory-mb"),
        (("perfect", "--max-memory-mb", "1e300"), "--max-memory-mb"),
        (("perfect", "--d", "1e12"), "--max-memory-mb"),
        (("simulate", "--n", 20, "--steps", "1e4", "--cdf", "1e12"), "--cdf"),
        (("exact", "--cdf", "1e12"), "--cdf"),
    ],
)
def test_sizes_that_used_to_allocate_terabytes(args, needle):
    refused(invoke(*args), needle)


def test_cdf_points_bounded_in_the_library():
    from supermarket.model import MAX_CDF_POINTS
    from supermarket.simulation import simulate

    r = simulate(20, 2, 0.5, steps=10_000, seed=1)
    with pytest.raises(ValueError, match=r"cdf_points must be an integer in \[2, 100000\]"):
        r.cdf_grid(10**12)
    assert len(r.cdf_grid(MAX_CDF_POINTS)) == MAX_CDF_POINTS


def test_perfect_memory_budget_counts_d():
    from supermarket import perfect

    with pytest.raises(perfect.BudgetExceeded, match="d=1000000000000"):
        perfect.sample(100, 10**12, 0.9)


# =========================================================================== sweep files
def _sweep_file(tmp_path, text, name="s.toml"):
    f = tmp_path / name
    f.write_text(text)
    return f


def test_sweep_beta_overflow_and_deep_nesting(tmp_path):
    f = _sweep_file(tmp_path, '[[run]]\nmeasurement = "theory"\nalpha = 0.5\nbeta = 400\nn = 100\n')
    refused(invoke("sweep", f, "--check"), "more than 2^62")
    f = _sweep_file(tmp_path, "x = " + "[" * 5000 + "]" * 5000 + "\n")
    refused(invoke("sweep", f, "--check"), "nested too deeply")


def test_sweep_size_counted_before_the_grid_is_built(tmp_path):
    loads = ", ".join(f"0.{5000 + i}" for i in range(4000))
    eps = ", ".join(f"0.0{100 + i}" for i in range(800))
    f = _sweep_file(
        tmp_path, f'[[run]]\nmeasurement = "theory"\nn = 100\nd = [2, 3, 4]\nload = [{loads}]\neps = [{eps}]\n'
    )
    refused(invoke("sweep", f, "--check"), "9,600,000 tasks")  # was minutes: the grid was built first
    small = _sweep_file(tmp_path, THEORY_SWEEP, "small.toml")
    refused(invoke("sweep", small, "--check", "--max-tasks", 1), "2 tasks", "more than --max-tasks 1")
    reps = _sweep_file(
        tmp_path,
        '[sweep]\nreplications = 1000000000000\n[[run]]\nmeasurement = "simulate"\n'
        "n = 100\nd = 2\nload = 0.9\nsteps = 1000\n",
        "reps.toml",
    )
    refused(invoke("sweep", reps, "--check"), "1,000,000,000,000 tasks")


@pytest.mark.parametrize(
    "block",
    [
        'measurement = "simulate"\nn = 100\nd = 2\nload = [0.9, "0.9"]\nsteps = 1000\n',
        'measurement = "simulate"\nn = 100\nd = 2\nload = [0.9, "9e-1"]\nsteps = 1000\n',
        'measurement = "simulate"\nn = 100\nd = 2\nload = ["0.90", 0.9]\nsteps = 1000\n',
        'measurement = "mixing"\nn = 100\nd = 2\nload = 0.9\nstart = ["good", "fixed-point"]\n',
        'measurement = "mixing"\nn = 100\nd = 2\nload = 0.9\nstart = ["long:5", "LONG:5"]\n',
    ],
)
def test_sweep_duplicates_written_differently_are_refused(block):
    from supermarket.sweep import SweepFileError, parse_sweep

    with pytest.raises(SweepFileError, match="repeats one of run"):
        parse_sweep("[[run]]\n" + block)


def test_sweep_duplicate_default_written_out_is_refused():
    from supermarket.sweep import SweepFileError, parse_sweep

    base = 'measurement = "mixing"\nn = 100\nd = 2\nload = 0.9\n'
    with pytest.raises(SweepFileError, match="repeats one of run"):
        parse_sweep(f"[[run]]\n{base}[[run]]\n{base}replace = true\n")
    with pytest.raises(SweepFileError, match="repeats one of run"):
        parse_sweep(f'[[run]]\n{base}[[run]]\n{base}start = "good"\n')
    # a different value is a different point
    assert parse_sweep(f"[[run]]\n{base}[[run]]\n{base}replace = false\n").points == 2
    assert parse_sweep('[[run]]\nmeasurement = "theory"\nn = 100\nd = 2\nload = [0.9, "0.9000001"]\n').points == 2


def test_sweep_refuses_a_simulate_horizon_the_command_refuses():
    from supermarket.sweep import SweepFileError, parse_sweep

    with pytest.raises(SweepFileError, match=r"refused \(more than 1e\+13 events\)"):
        parse_sweep('[[run]]\nmeasurement = "simulate"\nn = 100\nd = 2\nload = 0.9\ntime = 1e300\n')
    assert parse_sweep('[[run]]\nmeasurement = "simulate"\nn = 100\nd = 2\nload = 0.9\nsteps = 1e6\n').points == 1


@pytest.mark.parametrize(
    "keys,needle",
    [
        ('regime = "a"\nn = 1\nkappa = 1', "n must be an integer in [4,"),
        ('regime = "a"\nn = 100\nkappa = 1\ntheta = 0.5', "theta must lie in (0, 0.5)"),
        ('regime = "c"\nn = 100\nzeta = -5', "zeta must be > 0 in regime (c)"),
        ('regime = "b"\nn = 100\nc = 1\nzeta = 0\ndt = 1e-300', "refused"),
    ],
)
def test_sweep_refuses_what_the_fluctuations_command_refuses(keys, needle):
    from supermarket.sweep import SweepFileError, parse_sweep

    with pytest.raises(SweepFileError) as e:
        parse_sweep(f'[[run]]\nmeasurement = "fluctuations"\n{keys}\n')
    assert needle in str(e.value)


# =========================================================================== simulate costs
@pytest.mark.timeout(300)  # hang guard only: a refusal that ran the horizon would never end
def test_simulate_refuses_a_horizon_it_cannot_run():
    refused(invoke("simulate", "--time", "1e300"), "refused (more than 1e+13 events)")


@pytest.mark.timeout(300)  # hang guard only
def test_simulate_long_start_refused_before_any_work():
    refused(invoke("simulate", "--n", 20, "--start", "long:100000"), "long:100000", "GiB")


def test_simulate_above_load_one_refused_when_its_levels_would_not_fit():
    # n = 20, λ = 2, 1.1e8 events: the longest queue reaches >= 1.8e6, 42 GiB of per-level batch sums
    refused(invoke("simulate", "--n", 20, "--load", 2, "--steps", "1e8"), "at load > 1", "GiB")


def test_simulate_says_what_a_long_run_costs_before_it_starts():
    import warnings

    from supermarket.simulation import simulate
    from supermarket.simulation.run import CostWarning

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="refused"):
            simulate(100, 2, 0.9, steps=10**14)
    assert not w  # a refusal, not a warning and then a refusal
    # a run over the warning threshold says its cost first (checked without running it:
    # the estimate is made before anything is built, so an interrupt right after it is cheap)
    from supermarket.simulation.plan import cost_of

    assert cost_of(1e8, 1, 1) is None
    msg = cost_of(1e11, 2, 2)
    assert "2e+11 events" in msg and "core(s)" in msg and issubclass(CostWarning, UserWarning)


# =========================================================================== faults
def _group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group, from /proc."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(d.name))
    return out


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(d.name))
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_sigkill_of_a_local_sweep_leaves_no_workers(tmp_path):
    f = _sweep_file(tmp_path, '[[run]]\nmeasurement = "simulate"\nn = 1000\nd = 2\nload = [0.9, 0.8]\nsteps = 2e9\n')
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-m", "supermarket", "sweep", str(f), "--out", str(tmp_path / "o"), "--workers", "2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(_children(proc.pid)) < 2:
            time.sleep(0.2)
        assert len(_children(proc.pid)) >= 2, "the sweep did not start its workers"
        time.sleep(1.0)  # the workers have run their initializer
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _group_members(proc.pid):
            time.sleep(0.2)
        left = _group_members(proc.pid)
        assert not left, f"processes left after SIGKILL of the sweep: {left}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.slow  # two real processes racing (about 25 s on 2 shared cores); the lock itself is tested below
def test_two_sweeps_at_once_on_one_out(tmp_path):
    f = _sweep_file(
        tmp_path, '[[run]]\nmeasurement = "simulate"\nn = 100\nd = 2\nload = [0.9, 0.8, 0.7]\nsteps = 1e7\n'
    )
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "supermarket", "sweep", str(f), "--out", str(tmp_path / "o"), "--workers", "1"]
    procs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], (codes, outs)
    err = outs[[p.returncode for p in procs].index(2)][1]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "in use by another sweep running now" in lines[0], err
    assert "Directory not empty" not in err
    # the lock does not outlive the sweep: the same command resumes with nothing to run
    p, _ = run_cli("sweep", f, "--out", tmp_path / "o", "--workers", 1)
    assert p.returncode == 0 and "0 run now" in p.stdout, (p.stdout, p.stderr)


def test_sweep_lock_refuses_a_second_holder_and_is_released(tmp_path):
    from supermarket.sweep.storage import SweepDirError, SweepLock

    match = rf"in use by another sweep running now \(process {os.getpid()}\)"
    with SweepLock(tmp_path), pytest.raises(SweepDirError, match=match):
        SweepLock(tmp_path).acquire()
    with SweepLock(tmp_path):  # released on exit
        pass


def test_sweep_whose_out_appears_meanwhile_is_checked_not_crashed(tmp_path, monkeypatch):
    """Two sweeps started at once: the second's rename finds --out already made by the first."""
    from supermarket.sweep import parse_sweep, run_sweep, storage

    sweep = parse_sweep(THEORY_SWEEP)
    out = tmp_path / "o"
    real_rename = os.rename

    def racing_rename(src, dst):
        if Path(dst) == out and not out.exists():
            storage._populate(Path(out).parent / "first", sweep)  # the other process wins the race
            real_rename(Path(out).parent / "first", out)
        return real_rename(src, dst)

    (tmp_path / "first").mkdir()
    monkeypatch.setattr(storage.os, "rename", racing_rename)
    o = run_sweep(sweep, out, workers=1)
    assert o.total == 2 and o.failed == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".o.creating")]


# =========================================================================== exact, meanfield
def test_erlang_c_closed_forms():
    from supermarket.stationary.size import _erlang_c

    for lam in (0.1, 0.5, 0.9, 0.999):
        assert _erlang_c(1, lam) == pytest.approx(lam, rel=1e-12)  # M/M/1: P(wait) = λ
        assert _erlang_c(2, lam) == pytest.approx(2 * lam**2 / (1 + lam), rel=1e-12)  # M/M/2


@pytest.mark.parametrize("lam", [0.3, 0.7, 0.9, 0.99])
@pytest.mark.parametrize("tol", [1e-3, 1e-6, 1e-9])
def test_least_cap_from_the_queue_length_tails(lam, tol):
    """The bound from its definition: the least M with (1 − λ) P(N >= n(M−1)+1) < tol, where N
    is the M/M/n queue length (closed-form tails for n = 1, 2), searched by brute force."""
    from supermarket.stationary.profile import _least_cap

    tails = {
        1: lambda k: lam**k,  # M/M/1: P(N >= k) = λ^k
        2: lambda k: 2 * lam**2 / (1 + lam) * lam ** (k - 2),
    }  # M/M/2, k >= 2
    for n, tail in tails.items():
        M = 2
        while (1 - lam) * tail(n * (M - 1) + 1) >= tol:
            M += 1
        assert _least_cap(n, lam, tol) == M, (n, lam, tol)


@pytest.mark.parametrize(
    "n,d,lam,tol", [(1, 2, 0.7, 1e-3), (2, 2, 0.8, 1e-6), (2, 3, 0.9, 1e-3), (3, 2, 0.7, 1e-6), (3, 3, 0.5, 1e-9)]
)
def test_least_cap_never_above_the_search(n, d, lam, tol):
    """The [derived] M/M/n bound used to refuse early never exceeds the cap the search ends at."""
    from supermarket.stationary.profile import least_states, solve

    M, _ = least_states(n, d, lam, tol)
    assert solve(n, d, lam, tol=tol).truncation["cap"] >= M


def test_exact_refuses_hopeless_searches_at_once(monkeypatch):
    """Refused before anything is built or solved (both are made to fail)."""
    from supermarket.stationary import profile as stationary
    from supermarket.stationary.profile import least_states

    def never(*a, **k):
        raise AssertionError("built or solved before refusing")

    monkeypatch.setattr(stationary, "_build", never)
    monkeypatch.setattr(stationary, "stationary_vector", never)
    refused(invoke("exact", "--tol", "1e-100"), "least cap the search can end at")
    refused(invoke("exact", "--n", 10, "--d", 3, "--load", 0.9), "1,144,066 states")
    assert least_states(8, 3, 0.9)[1] > 100_000  # n = 8: refused by its predicted time (below)


@pytest.mark.parametrize(
    "args,needles",
    [
        # issue 19: 47 s of work before refusing; its least cap is predicted to take 3 min
        (("--n", 8, "--d", 3, "--load", 0.9), ("too slow", "735,471 states", "n <= 6 fits", "supermarket perfect")),
        (("--n", 20), ("too large", "3,108,105 states")),
        (("--tol", "1e-100"), ("least cap the search can end at",)),
        (("--n", 7, "--d", 3, "--load", 0.9), ("too slow", "--max-seconds", "n <= 6 fits")),
        (("--n", 4, "--cap", 60), ("too slow", "the cap 60", "a --cap up to 56 fits")),
        (("--n", 5, "--load", 0.9, "--max-seconds", 1), ("max_seconds = 1 s", "n <= 4 fits")),
    ],
)
def test_exact_refuses_slow_solves_before_any_work(args, needles, monkeypatch):
    """The cost is predicted from the sizes alone: nothing is built (both the build and the
    solve are made to fail), and the refusal is immediate."""
    from supermarket.stationary import profile as stationary

    def never(*a, **k):
        raise AssertionError("built or solved before refusing")

    monkeypatch.setattr(stationary, "_build", never)
    monkeypatch.setattr(stationary, "stationary_vector", never)
    refused(invoke("exact", *args), *needles)


def test_exact_refusal_of_the_library_is_the_same_line():
    from supermarket.stationary.profile import solve

    with pytest.raises(ValueError, match="too slow") as e:
        solve(8, 3, 0.9)
    line = refused(invoke("exact", "--n", 8, "--d", 3, "--load", 0.9))
    assert line == f"supermarket: error: {e.value}"
    with pytest.raises(ValueError, match="max_seconds must be"):
        solve(2, 2, 0.5, max_seconds=0)
    refused(invoke("exact", "--max-seconds", "0"), "--max-seconds must be a positive number")


def test_exact_largest_fitting_n_is_the_boundary():
    """The n the refusal names fits and n + 1 does not, by the same cost model."""
    import re

    from supermarket.stationary.profile import estimate_seconds, least_states, solve

    for n, d, lam, limit in ((8, 3, 0.9, 60.0), (6, 2, 0.9, 1.0), (7, 2, 0.9, 10.0)):
        with pytest.raises(ValueError, match=r"n <= (\d+) fits") as e:
            solve(n, d, lam, max_seconds=limit)
        m = int(re.search(r"n <= (\d+) fits", str(e.value)).group(1))
        assert 1 <= m < n
        assert estimate_seconds(m, least_states(m, d, lam)[0]) <= limit
        assert estimate_seconds(m + 1, least_states(m + 1, d, lam)[0]) > limit
    with pytest.raises(ValueError, match=r"a --cap up to (\d+) fits") as e:
        solve(4, 2, 0.9, cap=60)
    c = int(re.search(r"up to (\d+) fits", str(e.value)).group(1))
    assert estimate_seconds(4, c) <= 60 < estimate_seconds(4, c + 1)


def test_exact_search_is_bounded_by_max_seconds(monkeypatch):
    """With a cost model of k seconds per cap level, the search never starts a cap that would
    take the predicted total past max_seconds: it clamps the extrapolated cap or refuses,
    saying so (the predicted cost, not the clock: the caps tried depend on the inputs only)."""
    from supermarket.stationary import profile as stationary
    from supermarket.stationary import size as stationary_size

    tried = []
    one = stationary._one

    def counted(n, d, lam, replace, cap, *a):
        tried.append(cap)
        return one(n, d, lam, replace, cap, *a)

    k = 1000.0  # predicted seconds per cap level
    monkeypatch.setattr(stationary, "estimate_seconds", lambda n, cap: k * cap)
    monkeypatch.setattr(stationary_size, "estimate_seconds", lambda n, cap: k * cap)
    monkeypatch.setattr(stationary, "_one", counted)
    args = (2, 2, 0.9)
    free = stationary.solve(*args, max_seconds=1e9)  # the unbounded search, for reference
    end, steps = free.truncation["cap"], list(tried)
    least = stationary.least_states(*args)[0]
    assert len(steps) >= 3 and steps[-2] >= least and end > steps[-2] + 2, (steps, least)  # [8, 12, 56, 62]
    tried.clear()
    # the caps before the last fit, the last does not, nor any above the one before it: refused
    with pytest.raises(ValueError, match=r"after caps predicted to take \S+ s the cap search needs a cap of at least"):
        stationary.solve(*args, max_seconds=k * (sum(steps[:-1]) + 0.5))
    assert tried == steps[:-1], (tried, steps)
    tried.clear()
    # the last is clamped to the largest cap that fits: that one is solved, then passes or is refused
    try:
        r = stationary.solve(*args, max_seconds=k * (sum(steps[:-1]) + end - 1.5))
        assert r.truncation["cap"] == end - 2 and r.truncation["mass_at_cap"] < 1e-6
    except ValueError as e:
        assert "the cap search needs a cap of at least" in str(e)
    assert tried == [*steps[:-1], end - 2], (tried, steps)
    tried.clear()
    r = stationary.solve(*args, max_seconds=k * (sum(steps) + 0.5))  # the whole search fits: the same one
    assert tried == steps and r.truncation == free.truncation


@pytest.mark.slow
def test_exact_solve_stops_at_ctrl_c():
    """spilu runs in a thread: SIGINT mid-solve ends the command within seconds (130)."""
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen(
        [sys.executable, "-m", "supermarket", "exact", "--n", "6", "--load", "0.9", "--cap", "20"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    time.sleep(6)  # into the factorization of 230,230 states (about 25 s of CPU)
    assert p.poll() is None
    p.send_signal(signal.SIGINT)
    rc = p.wait(timeout=120)  # hang guard: without the thread, the factorization ran on (~25 s CPU)
    assert rc == 130, (rc, p.stderr.read())


def test_meanfield_tiny_horizon_refused():
    from supermarket.meanfield import solve_meanfield

    with pytest.raises(ValueError, match=r"T must be a time in \[1e-12, inf\)"):
        solve_meanfield(2, 0.9, T=1e-150)
    refused(invoke("meanfield", "--time", "1e-150"), "--time must be in [1e-12, inf)")


# =========================================================================== misleading
def test_design_options_that_would_do_nothing_are_refused():
    refused(invoke("design", "--d", 3, "--max-queue", 2, "--load", 0.9), "--d applies to --latency only")
    refused(invoke("design", "--max-queue", 2, "--load", 0.9, "--quantile", 0.9), "--quantile")
    refused(invoke("design", "--latency", 5, "--load", 0.9, "--steps", "1e5"), "--steps applies to --verify only")
    refused(invoke("fluctuations", "--regime", "c", "--theta", 0.3), "--theta applies to --regime a only")


def test_verify_from_a_run_whose_self_check_failed_confirms_nothing(monkeypatch):
    import dataclasses

    import supermarket.simulation as simmod

    try:  # latency sizing lives in supermarket.design.latency on main (it was in supermarket.response)
        from supermarket.design import latency as rs
    except ImportError:
        from supermarket import response as rs

    real = simmod.simulate

    def failing(*a, **k):
        res = real(*a, **k)
        bad = {"identity": "E[u_1] = λ", "level": 1, "difference": 0.1, "stderr": 1e-4, "z": 694.0, "result": "fail"}
        return dataclasses.replace(res, self_checks=(bad,))

    monkeypatch.setattr(simmod, "simulate", failing)
    design = rs.max_load_for_latency(2, 0.9, 5.0)
    v = rs.verify_latency(design, 20, steps=20_000, replications=2, seed=1, workers=1)
    assert v["changes_answer"] is None
    assert v["note"].startswith("not verified") and "694" in v["note"]
    assert "±" not in v["note"] and "confirmed" not in v["note"]
    assert all(p["stderr"] is None and p["verdict"] == "unknown" for p in v["points"])


# =========================================================================== library, hostile values
HOSTILE = [
    0,
    -1,
    0.5,
    float("nan"),
    float("inf"),
    -float("inf"),
    10**400,
    1e308,
    Fraction(10**400 - 1, 10**400),
    True,
    "x",
    None,
    10**18,
]


def _theory_calls():
    from supermarket import theory as th

    good = {"d": 10, "lam": 0.9, "n": 100, "eps": 0.1, "levels": 10, "max_queue": 2, "steps": 1000, "g": 3, "ell": 5}
    sigs = {
        th.log_fixed_point: ("d", "lam", "levels"),
        th.fixed_point: ("d", "lam"),
        th.mean_queue_length: ("d", "lam"),
        th.k_lambda_d: ("d", "lam"),
        th.k_hypothesis: ("n", "d", "lam"),
        th.linearised_q: ("d", "lam"),
        th.predicted_counts: ("n", "d", "lam"),
        th.good_set_bounds: ("n", "d", "lam", "eps"),
        th.theorem_1_2: ("n", "d", "lam", "eps"),
        th.mixing_bounds: ("n", "d", "lam"),
        th.slow_mode: ("d", "lam"),
        th.regime_002: ("n", "d", "lam"),
        th.design: ("lam", "max_queue"),
        th.steps_to_time: ("steps", "n", "lam"),
        th.mixing_lower_customers: ("n", "lam", "g"),
        th.mixing_lower_long: ("n", "ell"),
    }
    for f, names in sigs.items():
        for pos in range(len(names)):
            yield f, [good[k] for k in names], pos


def _no_nan_or_complex(value, where):
    import numpy as np

    if isinstance(value, dict):
        for v in value.values():
            _no_nan_or_complex(v, where)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _no_nan_or_complex(v, where)
    elif isinstance(value, np.ndarray) and value.dtype.kind in "fc":
        assert value.dtype.kind == "f" and not np.isnan(value).any(), where
    elif isinstance(value, (float, complex)):
        assert isinstance(value, float) and value == value, where


def test_theory_functions_refuse_hostile_values_cleanly():
    """Every public calculator, each argument replaced by a hostile value: a result without NaN
    or complex numbers, or ValueError/TypeError — never OverflowError, ZeroDivisionError,
    MemoryError."""
    import numpy as np

    for f, args, pos in _theory_calls():
        for x in HOSTILE:
            a = list(args)
            a[pos] = x
            where = f"{f.__name__}{tuple(a)!r:.120}"
            try:
                r = f(*a)
            except (ValueError, TypeError):
                continue
            if f.__name__ == "design":  # predictions outside their range are NaN by design ("not shown")
                continue
            d = r.to_dict() if hasattr(r, "to_dict") else r
            _no_nan_or_complex(d if not isinstance(d, np.ndarray) else d.astype(float), where)


def test_k_lambda_d_with_a_load_within_1e_400_of_one():
    from supermarket import theory

    assert theory.k_lambda_d(10, Fraction(10**400 - 1, 10**400)) == 400  # 1/(1−λ) = 10^400 = d^400
    assert theory.k_lambda_d(10, Fraction(10**400 - 2, 10**400)) == 400
    assert theory.k_lambda_d(10, Fraction(10**401 - 1, 10**401)) == 401


def test_steps_to_time_validates():
    from supermarket import theory

    assert theory.steps_to_time(1900, 100, 0.9) == 10.0
    with pytest.raises(ValueError, match=r"n must be an integer in \[1,"):
        theory.steps_to_time(1000, 0, 0.9)
    with pytest.raises(ValueError, match="load"):
        theory.steps_to_time(1000, 100, -1)
    with pytest.raises(ValueError, match="steps must be a finite number >= 0"):
        theory.steps_to_time(float("nan"), 100, 0.9)


# =========================================================================== a Dask cluster that goes away
def _own_cluster(tmp_path, workers: int = 1):
    """A private scheduler and worker(s) (this test kills them; the session cluster stays)."""
    from _ports import BIN, free_port, wait_port

    dask = BIN / "dask"
    if not dask.exists():
        pytest.skip("the dask CLI is not installed (install the 'dask' extra)")
    port = free_port()
    slog = tmp_path / "scheduler.log"
    sched = subprocess.Popen(
        [str(dask), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        stdout=open(slog, "wb"),  # noqa: SIM115 - the scheduler writes it for its whole life
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wait_port(port, sched, 60, slog)
    address = f"tcp://127.0.0.1:{port}"
    worker = subprocess.Popen(
        [
            str(dask),
            "worker",
            address,
            "--host",
            "127.0.0.1",
            "--nworkers",
            str(workers),
            "--nthreads",
            "1",
            "--no-dashboard",
            "--memory-limit",
            "0",
            "--local-directory",
            str(tmp_path / "w"),
        ],
        stdout=open(tmp_path / "worker.log", "wb"),  # noqa: SIM115 - as the scheduler's
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    from dask.distributed import Client

    with Client(address, timeout="30s") as client:
        client.wait_for_workers(workers, timeout=60)
    return address, sched, worker


SLOW_SWEEP = '[[run]]\nmeasurement = "simulate"\nn = 1000\nd = 2\nload = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]\nsteps = 1e9\n'


def _sweep_then_kill(tmp_path, victim: str):
    f = _sweep_file(tmp_path, SLOW_SWEEP)
    address, sched, worker = _own_cluster(tmp_path)
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "supermarket",
                "sweep",
                str(f),
                "--out",
                str(tmp_path / "o"),
                "--scheduler",
                address,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(15)  # connected, tasks running on the worker
        target = sched if victim == "scheduler" else worker
        os.killpg(target.pid, signal.SIGKILL)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=180)
        return proc.returncode, err, time.monotonic() - t0
    finally:
        for p in (worker, sched):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)


@pytest.mark.slow  # a private cluster, killed mid-sweep (about a minute)
def test_sweep_says_when_the_cluster_has_no_workers_left(tmp_path):
    from supermarket.parallel import DASK_POLL_SECONDS, NO_WORKERS_GRACE_SECONDS

    rc, err, waited = _sweep_then_kill(tmp_path, "worker")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "has had no workers" in lines[0], err
    assert waited < NO_WORKERS_GRACE_SECONDS + 4 * DASK_POLL_SECONDS + 30


@pytest.mark.slow
def test_sweep_says_when_the_scheduler_is_gone(tmp_path):
    rc, err, _ = _sweep_then_kill(tmp_path, "scheduler")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "lost the Dask scheduler" in lines[0], err
    assert "Traceback" not in err and "CancelledError" not in err


# =========================================================================== reproduce: files whole
def _failing_fsync(fd):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_reproduce_tables_and_figures_are_written_whole(tmp_path, monkeypatch):
    """A write that fails midway (a full disk at the final sync) leaves each earlier file of a
    reproduction unchanged and no temporary file beside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from supermarket import files as _files
    from supermarket.experiments import paper002
    from supermarket.experiments.paper000 import output

    names = ["T.csv", "T.json", "F.png", "m.csv", "g.png"]
    for name in names:
        (tmp_path / name).write_text("earlier")
    monkeypatch.setattr(_files.os, "fsync", _failing_fsync)
    rows = [{"a": 1, "b": [1, 2]}]
    with pytest.raises(OSError):
        output._write_table(tmp_path, "T", rows, {"x": 1})
    with pytest.raises(OSError):
        output._save_figure(plt.figure(), tmp_path, "F")
    with pytest.raises(OSError):
        output._write_csv(tmp_path / "m.csv", rows)
    with pytest.raises(OSError):
        paper002._save_figure(plt.figure(), tmp_path / "g.png", 100)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)  # no temporary left
    assert all((tmp_path / name).read_text() == "earlier" for name in names)
    monkeypatch.undo()
    output._write_table(tmp_path, "T", rows, {"x": 1})  # and a write that succeeds replaces them
    assert (tmp_path / "T.csv").read_bytes() == b'a,b\r\n1,"[1, 2]"\r\n'  # as csv writes it
    assert json.loads((tmp_path / "T.json").read_text()) == {"meta": {"x": 1}, "rows": [{"a": 1, "b": [1, 2]}]}


def test_reproduce_writes_only_through_the_atomic_writer():
    """No plain open(..., "w"), write_text or savefig-to-a-path left in the experiments."""
    import re

    root = Path(SRC) / "supermarket" / "experiments"
    bad = re.compile(r"""open\([^)]*["'][wa]b?["']|\.write_text\(|\.write_bytes\(|savefig\((?!buf)""")
    hits = [
        f"{p.name}:{i}: {ln.strip()}"
        for p in root.rglob("*.py")
        for i, ln in enumerate(p.read_text().splitlines(), 1)
        if bad.search(ln)
    ]
    assert not hits, hits


def test_reproduce_write_failure_is_one_line(tmp_path, monkeypatch):
    from supermarket.experiments import paper002

    def run(out_dir, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(paper002, "run", run)
    r = invoke("reproduce", "paper002", "--quick", "--out", tmp_path)
    refused(r, "could not write", str(tmp_path), "No space left", code=1)
