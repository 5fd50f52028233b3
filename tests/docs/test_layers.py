"""The layers of CONTRIBUTING.md hold: import-linter's contracts in pyproject.toml (layers,
and no import cycle between sibling modules at any depth, imports inside functions
included) are kept, and every top-level module of the package is placed in a layer."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib

import pytest

from _paths import ROOT


def test_import_contracts_are_kept():
    pytest.importorskip("importlinter", reason="import-linter is in the test extra")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
            "--no-cache",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "BROKEN" not in out, out
    assert "2 kept, 0 broken" in out, out


def test_every_module_is_in_a_layer():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    placed = {m.strip() for layer in layers for m in layer.replace("|", ":").split(":")}
    src = ROOT / "src" / "supermarket"
    modules = {f"supermarket.{p.stem}" for p in src.glob("*.py") if p.stem != "__init__"} | {
        f"supermarket.{p.parent.name}" for p in src.glob("*/__init__.py")
    }
    assert modules - placed == set(), "modules in no layer: add them to [tool.importlinter] in pyproject.toml"
    assert placed - modules == set(), "layers name modules that do not exist"
