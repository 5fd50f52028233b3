"""The documentation's examples run in the default test suite (``python -m pytest -q``).

Sybil collects README.md and docs/*.md (both are in ``testpaths``):

- ``python`` blocks run; a block written with ``>>>`` prompts is a doctest, so the results
  it shows are compared (ELLIPSIS, NORMALIZE_WHITESPACE). The blocks of one page share a
  namespace, like a session at the prompt;
- ``console`` blocks are transcripts: every ``$`` command runs and its output is compared
  with the shown output (``...`` for what differs between runs), tools/doc_transcripts.py;
- every other command block (``bash``, ``sh``, ``text``, no language) must be skipped with
  its reason, ``<!-- skip: next "reason" -->`` on the line above: an unmarked one fails.

Each page runs in its own scratch directory (``examples/`` linked in), so the files an
example writes (``profile.png``, a sweep directory) land there, not in the checkout.
``SUPERMARKET_DOCS_LONG=1`` also runs the examples marked long.
"""

from __future__ import annotations

import doctest
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tools"))

import doc_transcripts as transcripts  # noqa: E402

try:
    from sybil import Sybil
    from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser
except ImportError:  # pragma: no cover - sybil comes with the test extra
    Sybil = None


class _Chdir:
    def __init__(self):
        self.saved: dict[int, tuple[str, Path]] = {}


_DIRS = _Chdir()


def _setup(namespace: dict) -> None:
    work = transcripts.scratch_dir()
    _DIRS.saved[id(namespace)] = (os.getcwd(), work)
    os.chdir(work)
    namespace["run_long"] = bool(os.environ.get(transcripts.LONG_ENV))
    namespace["__docs_dir__"] = work


def _teardown(namespace: dict) -> None:
    here, work = _DIRS.saved.pop(id(namespace))
    os.chdir(here)
    shutil.rmtree(work, ignore_errors=True)


def _evaluate_command_block(example) -> None:
    language = example.parsed.get("language") if isinstance(example.parsed, dict) else None
    if language != "console":
        shown = "no language" if not language else f"`{language}`"
        raise AssertionError(
            f"{example.path}:{example.line}: a {shown} block is neither checked nor skipped: write it "
            "as a ```console transcript ($ commands and their output) or put "
            '<!-- skip: next "reason" --> on the line above it')
    source = example.parsed["source"]
    try:
        transcripts.check(str(source), example.namespace["__docs_dir__"],
                          where=f"{Path(example.path).name}:{example.line}")
    except transcripts.MissingProgram as exc:
        import pytest

        pytest.skip(str(exc))


class _CommandBlockParser:
    """Fenced command blocks: console, bash, sh, shell, zsh, text, or no language."""

    def __init__(self):
        from sybil.parsers.markdown.lexers import FencedCodeBlockLexer

        langs = "|".join(x for x in transcripts.COMMAND_LANGUAGES if x)
        self.lexer = FencedCodeBlockLexer(language=f"(?:{langs})?")

    def __call__(self, document):
        from sybil import Region

        for lexed in self.lexer(document):
            parsed = {"language": lexed.lexemes["language"], "source": lexed.lexemes["source"]}
            yield Region(lexed.start, lexed.end, parsed, _evaluate_command_block)


if Sybil is not None:
    pytest_collect_file = Sybil(
        parsers=[
            PythonCodeBlockParser(doctest_optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE),
            _CommandBlockParser(),
            SkipParser(),
        ],
        patterns=["README.md", "docs/*.md"],
        setup=_setup,
        teardown=_teardown,
    ).pytest()
