"""Input screens: bad parameters are refused with one clean line naming the parameter."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_examples_cite_no_issue_numbers() -> None:
    for path in sorted((ROOT / "examples").iterdir()):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"issue\s*#?\d+|#\d+\b", text, re.IGNORECASE), path.name
