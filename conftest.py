"""The documentation's examples run in the default test suite (``python -m pytest -q``).

Sybil collects README.md and docs/*.md (both are in ``testpaths``), with the parsers of
tools/doc_transcripts.py:

- ``python`` blocks run; a block written with ``>>>`` prompts is a doctest, so the results
  it shows are compared (ELLIPSIS, NORMALIZE_WHITESPACE). The blocks of one page share a
  namespace, like a session at the prompt;
- ``console`` blocks are transcripts: every ``$`` command runs and its output is compared
  with the shown output (``...`` for what differs between runs);
- every other command block (``bash``, ``sh``, ``text``, no language) must be skipped with
  its reason, ``<!-- skip: next "reason" -->`` on the line above: an unmarked one fails.

Each page runs in its own scratch directory (``examples/`` linked in), so the files an
example writes (``profile.png``, a sweep directory) land there, not in the checkout.
``SUPERMARKET_DOCS_LONG=1`` also runs the examples marked long;
``python tools/update_doc_transcripts.py`` rewrites the shown outputs from real runs.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent

if importlib.util.find_spec("sybil") is not None:  # sybil comes with the test extra
    sys.path.insert(0, str(ROOT / "tools"))
    import doc_transcripts

    pytest_collect_file = doc_transcripts.make_sybil(path=ROOT).pytest()


_HEAVY = ROOT / "tests" / "heavy.txt"


def pytest_collection_modifyitems(config, items):
    """Mark ``heavy`` the tests listed in tests/heavy.txt (a quarter second or more each,
    tools/heavy_tests.py): the fast tier ``-m "not slow and not integration and not heavy"``
    leaves them out; the default suite runs them."""
    import pytest

    if not _HEAVY.exists():
        return
    heavy = {line.strip() for line in _HEAVY.read_text().splitlines() if line.strip() and not line.startswith("#")}
    for item in items:
        if item.nodeid in heavy:
            item.add_marker(pytest.mark.heavy)
