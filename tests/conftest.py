"""Shared fixtures: a real Dask cluster on loopback and headless Chromium.

- ``dask_cluster``: starts ``dask scheduler`` and one ``dask worker`` (the CLI entry points
  from the interpreter's bin directory) on 127.0.0.1 with free ports and no dashboard, as
  subprocesses in their own process groups; yields the scheduler address and tears both down.
- ``chromium``: the path of a headless Chromium; installs the Debian ``chromium`` package
  with ``apt-get install -y chromium`` when none is found (CI runs as root); skips with the
  reason only when it cannot be installed.

Every test that uses either fixture is marked ``integration`` (:func:`pytest_collection_modifyitems`),
so the fast tier ``-m "not slow and not integration and not heavy"`` starts no cluster and no browser.

The fixtures here reach the tests of every subfolder of ``tests/``; the helpers they use (free
ports, the interpreter's bin directory) are in ``_ports.py``, which tests import themselves.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess

import pytest
from hypothesis import settings as _hypothesis_settings

from _ports import BIN, free_port, wait_port

# No plain progress lines in the suite (cli/_common.plain_progress_wanted): they come every
# few seconds of wall time, so on a loaded machine they would enter outputs that tests compare.
# The tests of the progress lines themselves set SUPERMARKET_PROGRESS=1.
os.environ["SUPERMARKET_PROGRESS"] = "0"

# A suite started in the background of a non-interactive shell (`cmd &`) inherits SIGINT
# ignored, and Python then never raises KeyboardInterrupt: the Ctrl-C tests (and the
# children they start, which inherit the disposition) would test nothing.  Restore
# Python's default handler, as an interactive start has it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Property tests draw their examples from a fixed seed, so a CI run is reproducible: the
# same examples every run (a counterexample, once found, is found again).
_hypothesis_settings.register_profile("reproducible", derandomize=True, deadline=None)
_hypothesis_settings.load_profile("reproducible")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def dask_cluster(tmp_path_factory):
    """Address ``tcp://127.0.0.1:PORT`` of a running scheduler with one worker (2 threads)."""
    dask = BIN / "dask"
    if not dask.exists():
        pytest.skip(f"the dask CLI is not installed in {BIN} (install the 'dask' extra)")
    logdir = tmp_path_factory.mktemp("dask")
    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    slog = logdir / "scheduler.log"
    sched = subprocess.Popen(
        [str(dask), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        stdout=open(slog, "wb"),  # noqa: SIM115 - the process keeps it open
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )
    procs = [sched]
    try:
        wait_port(port, sched, 60, slog)
        address = f"tcp://127.0.0.1:{port}"
        wlog = logdir / "worker.log"
        worker = subprocess.Popen(
            [
                str(dask),
                "worker",
                address,
                "--host",
                "127.0.0.1",
                "--nworkers",
                "1",
                "--nthreads",
                "2",
                "--no-dashboard",
                "--memory-limit",
                "0",
                "--local-directory",
                str(logdir / "w"),
            ],
            stdout=open(wlog, "wb"),  # noqa: SIM115 - the process keeps it open
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
        procs.append(worker)
        from dask.distributed import Client

        with Client(address, timeout="30s") as client:
            client.wait_for_workers(1, timeout=60)
        yield address
    finally:
        for p in reversed(procs):
            _stop(p)


CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def _find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="session")
def chromium():
    """Path of a Chromium that runs headless; installed with apt-get when missing."""
    path = _find_chromium()
    if path is None:
        if shutil.which("apt-get") is None:
            pytest.skip("Chromium is not installed and apt-get is not available to install it")
        if os.geteuid() != 0:
            pytest.skip("Chromium is not installed and installing it (apt-get install chromium) needs root")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        res = subprocess.run(
            ["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
        )
        if res.returncode != 0:
            upd = subprocess.run(["apt-get", "update"], capture_output=True, text=True, env=env, timeout=600)
            res = subprocess.run(
                ["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
                capture_output=True,
                text=True,
                env=env,
                timeout=900,
            )
            if res.returncode != 0:
                tail = (res.stderr or upd.stderr or "").strip().splitlines()
                pytest.skip("Chromium could not be installed with apt-get" + (f": {tail[-1]}" if tail else ""))
        path = _find_chromium()
        if path is None:
            pytest.skip("apt-get install chromium succeeded but no chromium executable was found")
    return path


INTEGRATION_FIXTURES = {"dask_cluster", "chromium"}


def pytest_collection_modifyitems(config, items):
    """Mark ``integration`` every test that starts a Dask cluster or a browser."""
    for item in items:
        if INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
