"""Paths of the repository, for tests at any depth of ``tests/``.

The test modules live in subfolders of ``tests/`` that mirror the package; each takes the
repository's places from here (``from _paths import ROOT``) instead of counting parents of its
own ``__file__``, so a test file can move between folders without a path changing.
``tests/`` is on ``sys.path`` through ``pythonpath`` in pyproject's
``[tool.pytest.ini_options]``, as for the other shared helpers (naive.py, exact_small.py,
calibration.py, _ports.py).
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
"""The folder ``tests/``."""

ROOT = TESTS.parent
"""The repository root (pyproject.toml, src/, docs/, tools/, benchmarks/, examples/)."""

SRC = ROOT / "src"
"""The folder holding the package ``supermarket``: what a subprocess needs on PYTHONPATH."""

TOOLS = ROOT / "tools"
"""The repository's scripts (doc_transcripts.py, compare_outputs.py, capability_matrix.py, ...)."""
