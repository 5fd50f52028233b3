"""ruff's lint and format checks pass on the tree ([tool.ruff] in pyproject.toml; the same
checks as .pre-commit-config.yaml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _paths import ROOT

PATHS = ["src", "tests", "benchmarks", "tools", "conftest.py"]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if exe is None:
        pytest.skip("ruff is not installed (it comes with the test extra)")
    return subprocess.run([exe, *args, *PATHS], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_ruff_check():
    proc = _ruff("check", "--no-cache")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format():
    proc = _ruff("format", "--check", "--no-cache")
    assert proc.returncode == 0, proc.stdout + proc.stderr
