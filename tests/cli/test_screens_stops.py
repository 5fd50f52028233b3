"""Clean stops: SIGINT and SIGTERM end every command with one line, exit 128 + signal, no
traceback and never a result of nan.  Each test starts the real command line in a
subprocess, waits until it is working (a line on stderr, then CPU time spent), sends the
signal and checks the end; the bounds are hang guards, not timing assertions."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from _paths import SRC

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="readiness read from /proc")

HANG_GUARD = 240.0  # seconds: only a hung process ever gets near it


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stop(args: list[str], sig: int, *, cpu_after_ready: float = 2.0, tmp: Path | None = None):
    """Run ``supermarket ARGS``; once it printed a stderr line (or started at all) and spent
    ``cpu_after_ready`` more CPU seconds, send ``sig``.  Returns (rc, stdout, stderr)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC)
    p = subprocess.Popen(
        [sys.executable, "-m", "supermarket", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp,
    )
    err: list[str] = []
    out: list[str] = []
    first = threading.Event()

    def read_err():
        assert p.stderr is not None
        for line in p.stderr:
            err.append(line)
            first.set()
        first.set()

    def read_out():
        assert p.stdout is not None
        out.extend(p.stdout)

    threads = [threading.Thread(target=read_err, daemon=True), threading.Thread(target=read_out, daemon=True)]
    for t in threads:
        t.start()
    try:
        first.wait(HANG_GUARD / 4)  # the commands below all say something on stderr first
        start = _cpu_seconds(p.pid)
        deadline = time.monotonic() + HANG_GUARD / 2
        while p.poll() is None and _cpu_seconds(p.pid) - start < cpu_after_ready and time.monotonic() < deadline:
            time.sleep(0.1)
        assert p.poll() is None, f"ended before the signal: {''.join(err)}"
        p.send_signal(sig)
        rc = p.wait(HANG_GUARD)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    for t in threads:
        t.join(10)
    return rc, "".join(out), "".join(err)


def _clean(rc, out, err, sig):
    line = {signal.SIGINT: "supermarket: interrupted", signal.SIGTERM: "supermarket: terminated"}[sig]
    assert rc == 128 + sig, (rc, out, err)
    assert line in err, err
    assert "Traceback" not in err, err
    assert "leaked semaphore" not in err, err
    assert "nan" not in out.split(), out


def test_events_engine_ctrl_c_reports_no_nan():
    # the event engine swallowed Ctrl-C in its burn-in and printed "mean queue length nan", exit 0
    args = ["simulate", "--service", "lognormal:4", "--n", "1000", "--time", "1e7", "--burn-in", "1e6"]
    rc, out, err = _stop(args + ["--workers", "1"], signal.SIGINT)
    _clean(rc, out, err, signal.SIGINT)


def test_profile_engine_sigterm_is_a_clean_stop():
    # SIGTERM used to end the process silently (rc -15)
    args = ["simulate", "--n", "1000", "--time", "1e7", "--burn-in-time", "10", "--workers", "1"]
    rc, out, err = _stop(args, signal.SIGTERM)
    _clean(rc, out, err, signal.SIGTERM)


@pytest.mark.slow
@pytest.mark.parametrize(
    "sig",
    [
        signal.SIGINT,
        signal.SIGTERM,
    ],
)
def test_sweep_stops_cleanly_without_leaked_semaphores(tmp_path, sig):
    toml = tmp_path / "s.toml"
    toml.write_text(
        '[sweep]\nname = "stop"\nseed = 1\nreplications = 2\n\n'
        '[[run]]\nmeasurement = "simulate"\nn = 1000\nd = [2, 3, 4, 5]\nload = 0.99\n'
        "steps = 4000000000\nburn_in = 1000\n"
    )
    args = ["sweep", str(toml), "--out", str(tmp_path / "out"), "--workers", "2"]
    rc, _out, err = _stop(args, sig, cpu_after_ready=0.0, tmp=tmp_path)
    line = "interrupted" if sig == signal.SIGINT else "terminated"
    assert rc == 128 + sig, (rc, err)
    assert line in err, err
    assert "Traceback" not in err and "leaked semaphore" not in err, err


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "--engine", "buckets", "--n", "1000", "--time", "1e7", "--workers", "1"],
        ["simulate", "--engine", "queues", "--n", "1000", "--time", "1e7", "--workers", "1"],
        ["simulate", "--service", "erlang:2", "--n", "1000", "--time", "1e7", "--workers", "1"],
        ["simulate", "--server-classes", "0.5:2,0.5:1", "--n", "1000", "--time", "1e7", "--workers", "1"],
        [
            "simulate",
            "--server-classes",
            "0.5:2,0.5:1",
            "--service",
            "erlang:2",
            "--engine",
            "phase",
            "--n",
            "1000",
            "--time",
            "1e7",
            "--workers",
            "1",
        ],
        ["perfect", "--n", "1000", "--load", "0.99", "--replications", "100000"],
        ["mixing", "--n", "1000", "--load", "0.99", "--replications", "1000"],
        ["fluctuations", "--regime", "a", "--n", "10000", "--time", "1e6"],
    ],
    ids=["buckets", "queues", "phase", "classes", "classes-phase", "perfect", "mixing", "fluctuations"],
)
def test_every_engine_ctrl_c(args):
    rc, out, err = _stop(args, signal.SIGINT)
    _clean(rc, out, err, signal.SIGINT)
