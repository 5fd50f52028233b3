"""The documentation is executed: the console transcripts of README.md and docs/*.md.

Every fenced block of README.md and docs/*.md is one of

- ``python``: run by Sybil (``conftest.py``); a block with ``>>>`` prompts is a doctest,
  so its shown results are compared;
- ``console``: a **transcript**, checked here: each ``$ `` line is a command, the lines up
  to the next ``$ `` line are its output (stdout and stderr as a terminal shows them);
- a command block in any other spelling (``bash``, ``sh``, ``shell``, ``zsh``, ``text`` or
  no language): not allowed unless skipped, so a new example cannot escape the check;
- data (``toml``, ``sql``, ``json``, ``yaml``): not run.

A block that cannot run here (it installs packages, needs a Dask cluster, takes minutes) is
skipped with its reason in the Markdown source, on the line before the block::

    <!-- skip: next "installs into a fresh virtual environment" -->

A long block runs when ``SUPERMARKET_DOCS_LONG=1`` is set::

    <!-- skip: next if(not run_long, "about 40 s; SUPERMARKET_DOCS_LONG=1 runs it") -->

Transcript syntax:

- ``$ supermarket …`` runs in-process through click's ``CliRunner`` (the same ``main`` as
  the console script); a command with a pipe or redirection runs under ``bash -c`` with
  this checkout's ``src`` first on ``PYTHONPATH``. ``# comments`` after a command are
  ignored; a line ending in ``\\`` continues on the next.
- ``...`` inside an output line matches any text on that line (wall times, speeds); a line
  that is exactly ``...`` matches any number of lines, none included (an elided table).
  Everything else must match exactly (trailing spaces ignored).
- The exit status must be 0, or 2 when the shown output contains ``supermarket: error:``.

Commands run in a scratch directory per document, in which ``examples`` is a link to the
repository's ``examples/``; files written by one block are there for the next.

``python tools/update_doc_transcripts.py`` rewrites the shown outputs from real runs,
keeping every wildcard line that still matches (see that script).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: fence languages of command blocks: ``console`` is checked, the others must be skipped
COMMAND_LANGUAGES = ("console", "bash", "sh", "shell", "zsh", "text", "")
#: fence languages of data shown as is (never run)
DATA_LANGUAGES = ("toml", "sql", "json", "yaml")
#: fence languages run by Sybil's Python parser
PYTHON_LANGUAGES = ("python",)

WILDCARD = "..."
ERROR_PREFIX = "supermarket: error:"
LONG_ENV = "SUPERMARKET_DOCS_LONG"
SHELL_CHARS = re.compile(r"[|<>;&`$(){}*?]")
FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")
SKIP = re.compile(r"^<!--\s*skip:\s*(?P<args>.*?)\s*-->\s*$")


def documents(root: Path = ROOT) -> list[Path]:
    """The Markdown files whose examples run: README.md and docs/*.md."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


# --------------------------------------------------------------------------- transcripts


@dataclass
class Step:
    """One ``$`` command of a transcript and its shown output lines."""

    command: str
    expected: list[str] = field(default_factory=list)

    def expected_code(self) -> int:
        return 2 if any(line.startswith(ERROR_PREFIX) for line in self.expected) else 0


def parse_transcript(source: str) -> list[Step]:
    """The steps of a ``console`` block; text before the first ``$`` line is an error."""
    steps: list[Step] = []
    lines = source.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command[:-1] + " " + lines[i].removeprefix("> ").strip()
            steps.append(Step(command.strip()))
        elif not steps:
            if line.strip():
                raise ValueError(f"a console block must start with a '$ ' command line; got {line!r}")
        else:
            steps[-1].expected.append(line.rstrip())
        i += 1
    for step in steps:  # blank lines between an output and the next command are layout
        while step.expected and not step.expected[-1]:
            step.expected.pop()
    if not steps:
        raise ValueError("a console block without any '$ ' command line")
    return steps


def format_transcript(steps: list[Step]) -> str:
    out = []
    for step in steps:
        out.append(f"$ {step.command}")
        out.extend(step.expected)
    return "\n".join(out) + "\n"


def _line_regex(pattern: str) -> str:
    return ".*?".join(re.escape(part) for part in pattern.split(WILDCARD))


def output_regex(expected: list[str]) -> re.Pattern[str]:
    """A regex matching the whole output: ``...`` within a line, or as a line of its own."""
    parts = []
    for line in expected:
        if line.strip() == WILDCARD:
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(_line_regex(line) + r"\n")
    return re.compile("".join(parts), re.DOTALL)


def normalise(output: str) -> list[str]:
    lines = [line.rstrip() for line in output.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def matches(expected: list[str], actual: list[str]) -> bool:
    text = "".join(line + "\n" for line in actual)
    return output_regex(expected).fullmatch(text) is not None


def _line_matches(pattern: str, line: str) -> bool:
    return re.fullmatch(_line_regex(pattern), line, re.DOTALL) is not None


#: output that differs from run to run (speeds, wall times): the update script writes
#: ``...`` in its place in every line it takes from a real run
VOLATILE = [
    (re.compile(r"\b[\d.]+(?:e[+-]?\d+)? million events per second"), "... million events per second"),
    (re.compile(r"wall time [\d.]+(?:e[+-]?\d+)? ?(?:s|min|h)\b"), "wall time ..."),
    (re.compile(r"\b(solved|computed|finished|took|ran) in [\d.]+(?:e[+-]?\d+)? ?(?:s|ms|min)\b"), r"\1 in ..."),
    (re.compile(r"\b[\d.]+(?:e[+-]?\d+)? ?(?:s|ms) (?:wall|elapsed)\b"), "... wall"),
    (re.compile(r"(?<=; )[\d.]+(?:e[+-]?\d+)? s$"), "... s"),
    (re.compile(r", [\d.]+(?:e[+-]?\d+)? s\)"), ", ... s)"),  # "(local-processes, 76.2 s)"
    # "…; peak memory 0.26 MiB; 0.255 s"
    (re.compile(r"events in [\d.]+(?:e[+-]?\d+)? s \([\d.]+(?:e[+-]?\d+)?/s\)"), "events in ... s (.../s)"),
]


def mask_volatile(line: str) -> str:
    """``line`` with its speeds and wall times replaced by ``...``."""
    for pattern, repl in VOLATILE:
        line = pattern.sub(repl, line)
    return line


def merge(expected: list[str], actual: list[str]) -> list[str]:
    """The new shown output: ``actual`` (speeds and wall times masked), keeping each line of
    ``expected`` that still matches -- the ``...`` lines above all, which keep their place and
    absorb the lines they covered -- and putting a changed line in place of the old one."""
    if matches(expected, actual):
        return list(expected)
    n, m = len(expected), len(actual)
    # score of the best alignment of expected[i:] with actual[j:]: a shown line kept 1, a
    # shown line replaced in place 0.5 (the layout survives), a line dropped or added 0
    best = [[0.0] * (m + 1) for _ in range(n + 1)]
    choice: list[list[tuple[str, int]]] = [[("", 0)] * (m + 1) for _ in range(n + 1)]
    for i in range(n, -1, -1):
        for j in range(m, -1, -1):
            if i == n and j == m:
                continue
            options: list[tuple[float, str, int]] = []  # in order of preference on ties
            if i < n:
                e = expected[i]
                if e.strip() == WILDCARD:
                    options += [(1 + best[i + 1][k], "keep", k) for k in range(m, j - 1, -1)]
                elif j < m and _line_matches(e, actual[j]):
                    options.append((1 + best[i + 1][j + 1], "keep", j + 1))
                if j < m and e.strip() != WILDCARD:
                    options.append((0.5 + best[i + 1][j + 1], "replace", j + 1))
                options.append((best[i + 1][j], "drop", j))
            if j < m:
                options.append((best[i][j + 1], "insert", j + 1))
            top = max(o[0] for o in options)
            _, kind, k = next(o for o in options if o[0] == top)
            best[i][j], choice[i][j] = top, (kind, k)
    out: list[str] = []
    i = j = 0
    while i < n or j < m:
        kind, k = choice[i][j]
        if kind == "keep":
            out.append(expected[i])
            i, j = i + 1, k
        elif kind == "replace":
            out.append(mask_volatile(actual[j]))
            i, j = i + 1, j + 1
        elif kind == "drop":
            i += 1
        else:
            out.append(mask_volatile(actual[j]))
            j += 1
    return out


# --------------------------------------------------------------------------- running


def _env() -> dict[str, str]:
    # no plain progress lines: their number depends on the machine's speed
    env = dict(os.environ, PYTHONUNBUFFERED="1", NO_COLOR="1", TERM="dumb", COLUMNS="100", SUPERMARKET_PROGRESS="0")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p)
    env["PATH"] = os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", "")))
    return env


def scratch_dir() -> Path:
    """A fresh working directory for one document's commands, with ``examples`` linked."""
    work = Path(tempfile.mkdtemp(prefix="supermarket-docs-"))
    (work / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    return work


class MissingProgram(RuntimeError):
    """A command needs a program that is not installed (the check is skipped)."""


def run(command: str, cwd: Path, timeout: float = 600) -> tuple[int, list[str]]:
    """Exit status and output lines of one transcript command."""
    words = shlex.split(command, comments=True)
    if not words:
        raise ValueError(f"empty command {command!r}")
    if words[0] == "supermarket" and not SHELL_CHARS.search(" ".join(words)):
        return _run_in_process(words[1:], cwd)
    for part in re.split(r"\|\|?|&&|;", command.split(" #")[0]):
        prog = part.split()[0] if part.split() else ""
        if prog and shutil.which(prog, path=_env()["PATH"]) is None:
            raise MissingProgram(f"{prog} is not installed")
    proc = subprocess.run(
        ["bash", "-c", command],
        check=False,
        cwd=cwd,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    return proc.returncode, normalise(proc.stdout)


def _run_in_process(args: list[str], cwd: Path) -> tuple[int, list[str]]:
    from click.testing import CliRunner

    from supermarket.cli import main

    here = os.getcwd()
    os.chdir(cwd)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            result = CliRunner().invoke(
                main,
                args,
                prog_name="supermarket",
                catch_exceptions=True,
                env={"NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "100"},
            )
    finally:
        os.chdir(here)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, normalise(result.output)


class TranscriptMismatch(AssertionError):
    pass


def check(source: str, cwd: Path, where: str = "") -> None:
    """Run every step of a ``console`` block; raise with a diff at the first mismatch."""
    import difflib

    for step in parse_transcript(source):
        code, actual = run(step.command, cwd)
        want = step.expected_code()
        if code != want or not matches(step.expected, actual):
            diff = "\n".join(difflib.unified_diff(step.expected, actual, "shown", "actual", lineterm=""))
            raise TranscriptMismatch(
                f"{where}: `$ {step.command}` exited with {code} (expected {want}) or its output differs "
                f"from the shown output (`...` matches any text):\n{diff}\n"
                "(regenerate the shown outputs with: python tools/update_doc_transcripts.py)"
            )


# --------------------------------------------------------------------------- Markdown scan


@dataclass
class Block:
    """A fenced block of a Markdown file: language, source, position, skip directive."""

    path: Path
    language: str
    source: str
    line: int  # 1-based line of the opening fence
    body_start: int  # index into the file's lines of the first source line
    body_end: int  # index of the closing fence
    skip: str | None  # the arguments of a ``skip: next`` directive just above, if any
    indent: int = 0  # columns of indentation of the fence (a block inside a list item)


def scan(path: Path) -> list[Block]:
    """Fenced blocks (backtick or tilde fences, also indented in a list item) with the
    ``skip: next`` directive on the line above each (blank lines between allowed)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    pending: str | None = None
    while i < len(lines):
        text = lines[i].strip()
        skip = SKIP.match(text)
        if skip:
            pending = skip.group("args")
            i += 1
            continue
        fence = FENCE.match(text)
        if fence:
            mark = fence.group("fence")
            j = i + 1
            while j < len(lines) and not (
                lines[j].strip().startswith(mark[0] * len(mark)) and not lines[j].strip().strip(mark[0])
            ):
                j += 1
            blocks.append(
                Block(
                    path,
                    fence.group("info").strip(),
                    "\n".join(lines[i + 1 : j]) + "\n",
                    i + 1,
                    i + 1,
                    j,
                    pending,
                    len(lines[i]) - len(lines[i].lstrip()),
                )
            )
            pending = None
            i = j + 1
            continue
        if text and not text.startswith("<!--"):
            pending = None
        i += 1
    return blocks


def skip_reason(args: str | None, run_long: bool) -> str | None:
    """The reason a block is skipped now (None: it runs)."""
    if args is None:
        return None
    m = re.fullmatch(r'next\s+if\(\s*not\s+run_long\s*,\s*"(?P<r>[^"]+)"\s*\)', args)
    if m:
        return None if run_long else m.group("r")
    m = re.fullmatch(r'next\s+"(?P<r>[^"]+)"', args)
    if m:
        return m.group("r")
    raise ValueError(f'skip directive {args!r}: use `skip: next "reason"` or `skip: next if(not run_long, "reason")`')


# --------------------------------------------------------------------------- Sybil


def evaluate_command_block(example) -> None:
    """Sybil evaluator of a command block: a ``console`` transcript is checked; any other
    command block fails (it reaches here only when no skip directive stands above it)."""
    language = example.parsed["language"]
    if language != "console":
        shown = "no language" if not language else f"`{language}`"
        raise AssertionError(
            f"{example.path}:{example.line}: a command block ({shown}) is neither checked nor skipped: "
            "write it as a ```console transcript ($ commands and their output) or put "
            '<!-- skip: next "reason" --> on the line above it'
        )
    try:
        check(
            str(example.parsed["source"]),
            example.namespace["__docs_dir__"],
            where=f"{Path(example.path).name}:{example.line}",
        )
    except MissingProgram as exc:
        import pytest

        pytest.skip(str(exc))


class CommandBlockParser:
    """Sybil parser of fenced command blocks: console, bash, sh, shell, zsh, text, or none."""

    def __init__(self):
        from sybil.parsers.markdown.lexers import FencedCodeBlockLexer

        langs = "|".join(x for x in COMMAND_LANGUAGES if x)
        self.lexer = FencedCodeBlockLexer(language=f"(?:{langs})?")

    def __call__(self, document):
        from sybil import Region

        for lexed in self.lexer(document):
            parsed = {"language": lexed.lexemes["language"], "source": lexed.lexemes["source"]}
            yield Region(lexed.start, lexed.end, parsed, evaluate_command_block)


def setup_page(namespace: dict) -> None:
    """Sybil setup of one page: a scratch working directory, ``run_long`` from the environment."""
    work = scratch_dir()
    namespace["__docs_dir__"] = work
    namespace["__docs_cwd__"] = os.getcwd()
    namespace["run_long"] = bool(os.environ.get(LONG_ENV))
    os.chdir(work)


def teardown_page(namespace: dict) -> None:
    os.chdir(namespace["__docs_cwd__"])
    shutil.rmtree(namespace["__docs_dir__"], ignore_errors=True)


def make_sybil(patterns=("README.md", "docs/*.md"), path: str | Path = ROOT):
    """The Sybil that runs the documentation (conftest.py)."""
    import doctest

    from sybil import Sybil
    from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

    return Sybil(
        parsers=[
            PythonCodeBlockParser(doctest_optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE),
            CommandBlockParser(),
            SkipParser(),
        ],
        patterns=list(patterns),
        path=str(path),
        setup=setup_page,
        teardown=teardown_page,
    )
