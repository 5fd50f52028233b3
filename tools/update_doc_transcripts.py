"""Rewrite the shown outputs of the executed documentation from real runs.

    PYTHONPATH=src python tools/update_doc_transcripts.py [--long] [--check] [FILE.md ...]

For each page (default: README.md and docs/*.md) the blocks run in order in one scratch
directory, as the test suite runs them (conftest.py, tools/doc_transcripts.py):

- ``console`` transcripts: each command's shown output becomes its real output, keeping
  every shown line that still matches -- a ``...`` line keeps its place and absorbs what
  it covered, a line with ``...`` inside stays while it matches -- and writing ``...`` for
  speeds and wall times in the new lines (``doc_transcripts.VOLATILE``);
- ``python`` blocks with ``>>>`` prompts: the result of each example whose shown result no
  longer matches (ELLIPSIS, NORMALIZE_WHITESPACE) becomes the real one; blocks without
  prompts just run (later blocks may use their names).

Skipped blocks do not run; ``--long`` runs those marked ``if(not run_long, …)`` too.
``--check`` changes no file and exits 1 if some page would change. Review the diff
(``git diff``) before committing: a new line that differs between runs needs its ``...``.
"""

from __future__ import annotations

import argparse
import contextlib
import doctest
import io
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import doc_transcripts as dt

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


class _Recorder(doctest.DocTestRunner):
    def __init__(self):
        super().__init__(optionflags=FLAGS, verbose=False)
        self.got: dict[int, str] = {}

    def report_failure(self, out, test, example, got):
        self.got[id(example)] = got

    def report_unexpected_exception(self, out, test, example, exc_info):
        self.got[id(example)] = None
        out(f"{test.filename}:{test.lineno + example.lineno + 1}: {exc_info[0].__name__}: {exc_info[1]}\n")


def _update_python(source: str, namespace: dict, where: str) -> str:
    parser = doctest.DocTestParser()
    if not any(line.lstrip().startswith(">>>") for line in source.splitlines()):
        exec(compile(source, where, "exec"), namespace)  # the documentation's own example
        return source
    pieces = parser.parse(source, where)
    test = doctest.DocTest([p for p in pieces if isinstance(p, doctest.Example)], namespace, where, where, 0, source)
    runner = _Recorder()
    runner.run(test, out=sys.stderr.write, clear_globs=False)
    namespace.update(test.globs)  # DocTest ran on a copy: later blocks see its names
    out = []
    for piece in pieces:
        if isinstance(piece, str):
            out.append(piece)
            continue
        pad = " " * piece.indent
        src = piece.source.splitlines()
        out.append(pad + ">>> " + src[0] + "\n" + "".join(pad + "... " + s + "\n" for s in src[1:]))
        got = runner.got.get(id(piece), piece.want)
        if got is None:  # an exception: keep what was shown
            got = piece.want
        if got is not piece.want:
            got = "\n".join(dt.mask_volatile(line) for line in got.splitlines())
        out.append("".join(pad + (line.rstrip() or "<BLANKLINE>") + "\n" for line in got.splitlines()))
    return "".join(out)


def update_page(path: Path, run_long: bool) -> str:
    """The page's new text (blocks run in order, in one scratch directory)."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    blocks = dt.scan(path)
    work = dt.scratch_dir()
    here = os.getcwd()
    namespace: dict = {"__name__": "__docs__", "run_long": run_long}
    replacements: list[tuple[int, int, str]] = []
    os.chdir(work)
    try:
        for block in blocks:
            reason = dt.skip_reason(block.skip, run_long)
            where = f"{path.name}:{block.line}"
            if reason is not None or block.indent:
                continue  # skipped now, or inside a list item (update those by hand)
            if block.language == "console":
                steps = dt.parse_transcript(block.source)
                for step in steps:
                    try:
                        _, actual = dt.run(step.command, work)
                    except dt.MissingProgram as exc:
                        print(f"{where}: `{step.command}` not run ({exc}); output kept", file=sys.stderr)
                        continue
                    step.expected = dt.merge(step.expected, actual)
                new = dt.format_transcript(steps)
            elif block.language in dt.PYTHON_LANGUAGES:
                with contextlib.redirect_stdout(io.StringIO()):
                    new = _update_python(block.source, namespace, where)
            else:
                continue
            if new != block.source:
                replacements.append((block.body_start, block.body_end, new))
    finally:
        os.chdir(here)
        shutil.rmtree(work, ignore_errors=True)
    for start, end, new in reversed(replacements):
        lines[start:end] = [new]
    return "".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path, help="Markdown pages (default: README.md and docs/*.md)")
    ap.add_argument("--long", action="store_true", help="also run the examples marked long")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a page would change")
    args = ap.parse_args(argv)
    changed = []
    for path in args.files or dt.documents():
        path = path.resolve()
        new = update_page(path, args.long)
        if new != path.read_text(encoding="utf-8"):
            changed.append(path)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for path in changed:
        shown = path.relative_to(dt.ROOT) if path.is_relative_to(dt.ROOT) else path
        print(f"{'would change' if args.check else 'updated'}: {shown}")
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
