"""Free loopback ports and the interpreter's scripts, for tests that start servers.

``tests/conftest.py`` starts its Dask cluster with these, and the tests that start a scheduler
of their own or need a port where nothing listens import them (``from _ports import
free_port``): a helper module, not the conftest, so that the import names one file whichever
``conftest`` (the repository root's or this folder's) Python loaded last.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
"""The interpreter's bin directory: the ``dask`` CLI and the other installed scripts."""


def free_port() -> int:
    """A TCP port of 127.0.0.1 that was free a moment ago (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, timeout: float, log: Path) -> None:
    """Wait until ``port`` of 127.0.0.1 accepts connections; raise if ``proc`` exits first or
    ``timeout`` seconds pass (the error quotes the end of ``log``)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}: {log.read_text()[-2000:]}")
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"port {port} did not open within {timeout} s: {log.read_text()[-2000:]}")
