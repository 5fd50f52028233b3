"""The long documentation transcripts run under the ``slow`` marker.

The default suite skips the blocks marked ``if(not run_long, …)`` (they take minutes);
``python -m pytest -m slow tests/docs/test_screens_docs.py`` runs every block of each page that
has one, in order and in one scratch directory, as ``tools/update_doc_transcripts.py --long``
does, and fails if a shown output no longer matches the real one.
"""

from __future__ import annotations

import difflib
import sys

import pytest

from _paths import ROOT

sys.path.insert(0, str(ROOT / "tools"))

import doc_transcripts as dt

LONG_PAGES = [p for p in dt.documents(ROOT) if any(b.skip and "run_long" in b.skip for b in dt.scan(p))]


def test_some_pages_have_long_transcripts():
    assert LONG_PAGES, "no page marks a block run_long: the slow test below would run nothing"


@pytest.mark.slow
@pytest.mark.parametrize("page", LONG_PAGES, ids=lambda p: p.name)
def test_long_transcripts_match(page):
    import update_doc_transcripts as up

    old = page.read_text(encoding="utf-8")
    new = up.update_page(page, run_long=True)
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(page), "real run"))
    assert new == old, f"stale transcript (rewrite with tools/update_doc_transcripts.py --long):\n{diff}"


def test_perfect_none_finished_says_so():
    import subprocess

    cmd = ["supermarket", "perfect", "--n", "10000", "--load", "0.99", "--max-seconds", "0.01", "--replications", "2"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "none of the 2 samples finished within the budget" in lines[0]
    assert "--max-seconds" in lines[0] and "Traceback" not in res.stderr
