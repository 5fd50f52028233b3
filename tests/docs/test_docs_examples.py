"""The executed documentation (conftest.py, tools/doc_transcripts.py) checks what it claims.

- every fenced block of README.md and docs/*.md is run (python, console) or data, or it is
  skipped with a reason written in the Markdown source;
- the transcript check fails on a changed output, a changed exit status, an unmarked command
  block, and passes ``...`` only where it is written;
- the update script keeps the wildcards that still match;
- every repository path the pages name exists.
"""

from __future__ import annotations

import re
import sys
import tomllib

import pytest

from _paths import ROOT

sys.path.insert(0, str(ROOT / "tools"))

import doc_transcripts as dt

PAGES = dt.documents(ROOT)


def _blocks():
    return [b for page in PAGES for b in dt.scan(page)]


def test_the_pages_are_collected_by_the_default_run():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    testpaths = config["tool"]["pytest"]["ini_options"]["testpaths"]
    assert "README.md" in testpaths and "docs" in testpaths
    assert "pytest_collect_file" in (ROOT / "conftest.py").read_text(encoding="utf-8")
    sybil = dt.make_sybil(path=ROOT)
    for page in PAGES:
        assert sybil.should_parse(page), page
    assert not sybil.should_parse(ROOT / "docs" / "results" / "index.md")  # generated pages: no examples
    test_extra = " ".join(config["project"]["optional-dependencies"]["test"])
    assert "sybil" in test_extra


@pytest.mark.parametrize("block", _blocks(), ids=lambda b: f"{b.path.name}:{b.line}")
def test_every_block_is_run_or_data_or_skipped_with_a_reason(block):
    known = dt.COMMAND_LANGUAGES + dt.DATA_LANGUAGES + dt.PYTHON_LANGUAGES
    assert block.language in known, f"unknown fence language {block.language!r}: add it to doc_transcripts"
    if block.skip is not None:
        reason = dt.skip_reason(block.skip, run_long=False)  # raises on a malformed directive
        assert reason and len(reason) >= 10, f"skip directive without a reason worth reading: {block.skip!r}"
        assert block.language not in dt.DATA_LANGUAGES, "a skip directive above data, which never runs"
    elif block.language in dt.COMMAND_LANGUAGES:
        assert block.language == "console", (
            f"a {block.language or 'plain'} command block without a skip directive: make it a console "
            "transcript or skip it with a reason"
        )
    if block.language == "console":
        steps = dt.parse_transcript(block.source)
        for step in steps:
            assert step.command.startswith(("supermarket", "python")) or "|" in step.command, step.command
            if block.skip is None or "run_long" in block.skip:
                assert step.expected, f"`$ {step.command}` shows no output: show it (or '...')"


def test_a_bare_skip_directive_is_refused():
    with pytest.raises(ValueError, match="reason"):
        dt.skip_reason("next", run_long=False)
    assert dt.skip_reason('next "needs a cluster"', run_long=True) == "needs a cluster"
    long = 'next if(not run_long, "a minute")'
    assert dt.skip_reason(long, run_long=False) == "a minute"
    assert dt.skip_reason(long, run_long=True) is None


# -- the matcher: each one-token change of the rules must fail one of these


@pytest.mark.parametrize(
    "expected, actual, ok",
    [
        (["a 1"], ["a 1"], True),
        (["a 1"], ["a 2"], False),  # exact elsewhere
        (["a ..."], ["a 2.5 s"], True),  # wildcard within a line
        (["a ... b"], ["a x b", "c"], False),  # an extra line is output that differs
        (["a ... b"], ["a x\nb"], False),  # within a line only
        (["h", "...", "t"], ["h", "t"], True),  # a wildcard line may match no line
        (["h", "...", "t"], ["h", "1", "2", "t"], True),
        (["h", "...", "t"], ["h", "1", "2"], False),
        (["h", "...", "t"], ["x", "1", "t"], False),
        ([], [], True),
        ([], ["x"], False),
        (["x"], [], False),
        (["a  b"], ["a  b   "], True),  # trailing spaces ignored (normalise)
        (["a.b"], ["axb"], False),  # literal text is escaped, not a regex
    ],
)
def test_matcher(expected, actual, ok):
    assert dt.matches(expected, dt.normalise("\n".join(actual))) is ok


def test_transcript_parsing_and_exit_status():
    steps = dt.parse_transcript(
        "$ supermarket a \\\n  --b 1   # note\nout 1\n\n$ supermarket c\nsupermarket: error: bad\n"
    )
    assert [s.command for s in steps] == ["supermarket a  --b 1   # note", "supermarket c"]
    assert steps[0].expected == ["out 1"] and steps[0].expected_code() == 0
    assert steps[1].expected_code() == 2
    with pytest.raises(ValueError):
        dt.parse_transcript("text before a command\n$ supermarket x\n")
    with pytest.raises(ValueError):
        dt.parse_transcript("\n")


def test_check_runs_the_command_and_catches_drift(tmp_path):
    good = (
        "$ supermarket design --load 0.999 --max-queue 2\n"
        "At load λ = 0.999, d = 32 choices give k_(λ,d) = 2 ≤ 2 (d = 31 would give 3).\n...\n"
    )
    dt.check(good, tmp_path)
    with pytest.raises(dt.TranscriptMismatch, match="d = 33"):
        dt.check(good.replace("d = 32 choices", "d = 33 choices"), tmp_path)
    with pytest.raises(dt.TranscriptMismatch):  # a wildcard line does not excuse a missing line
        dt.check("$ supermarket design --load 0.999 --max-queue 2\nAt load ...\nnot printed\n", tmp_path)
    # an error shown as such must exit with 2; the same output claimed for a success fails
    err = "$ supermarket design --load 1.5 --max-queue 2\nsupermarket: error: ...\n"
    dt.check(err, tmp_path)
    with pytest.raises(dt.TranscriptMismatch, match="exited with 2"):
        dt.check("$ supermarket design --load 1.5 --max-queue 2\n...\n", tmp_path)


def test_sybil_fails_an_unmarked_command_block_and_honours_skips(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\nsupermarket theory\n```\n\n"
        '<!-- skip: next "needs a cluster" -->\n```bash\nsupermarket sweep x --scheduler tcp://h:1\n```\n\n'
        "```console\n$ supermarket design --load 0.999 --max-queue 2\nAt load λ = 0.999, d = 32 ...\n...\n```\n\n"
        "```python\n>>> 1 + 1\n3\n```\n",
        encoding="utf-8",
    )
    sybil = dt.make_sybil(patterns=["*.md"], path=tmp_path)
    document = sybil.parse(page)
    examples = list(document.examples())
    assert len(examples) == 5  # two bash, one console, one doctest, one skip directive
    sybil.setup(document.namespace)
    outcomes = []
    try:
        for example in examples:
            try:
                example.evaluate()
                outcomes.append("ok")
            except AssertionError as exc:
                outcomes.append("fail: " + str(exc))
            except Exception as exc:  # SkipTest
                outcomes.append(type(exc).__name__)
    finally:
        sybil.teardown(document.namespace)
    assert outcomes[0].startswith("fail:") and "neither checked nor skipped" in outcomes[0]
    assert outcomes[1] == "ok"  # the directive itself
    assert outcomes[2] == "SkipTest"
    assert outcomes[3] == "ok"
    assert outcomes[4].startswith("fail:") and "Got:" in outcomes[4]  # 1 + 1 is not 3


def test_merge_keeps_wildcards_that_still_match_and_masks_timings():
    shown = ["head", "x = ...", "...", "tail 1", "2.1 million events per second per core; wall time 0.84 s"]
    new = ["head", "x = 7", "a", "b", "tail 2", "3.5 million events per second per core; wall time 1.2 s"]
    merged = dt.merge(shown, new)
    assert merged == ["head", "x = ...", "...", "tail 2", "... million events per second per core; wall time ..."]
    assert dt.matches(merged, new)
    assert dt.merge(["a", "..."], ["b", "c"]) == ["b", "..."]  # a changed line replaces the old in place
    assert dt.merge(["same"], ["same"]) == ["same"]


def test_update_script_rewrites_a_doctest_and_a_transcript(tmp_path):
    import update_doc_transcripts as up

    page = tmp_path / "page.md"
    page.write_text(
        "```python\n>>> x = 2\n>>> x + 1\n4\n```\n\n"
        "```console\n$ supermarket design --load 0.999 --max-queue 2\nstale\n```\n",
        encoding="utf-8",
    )
    text = up.update_page(page, run_long=False)
    assert ">>> x + 1\n3\n" in text
    assert "At load λ = 0.999, d = 32 choices give k_(λ,d) = 2 ≤ 2 (d = 31 would give 3).\n" in text
    assert "stale" not in text
    page.write_text(text, encoding="utf-8")
    assert up.update_page(page, run_long=False) == text  # a fixed point


PATH = re.compile(r"`((?:benchmarks|tests|examples|tools|src|docs)/[\w./-]+)`")
LINK = re.compile(r"\]\(([\w./-]+\.(?:md|py|toml|png|csv))(?:#[\w-]*)?\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_named_repository_files_exist(page):
    text = page.read_text(encoding="utf-8")
    missing = [p for p in PATH.findall(text) if not (ROOT / p.rstrip(".")).exists() and not any(ch in p for ch in "*{")]
    missing += [p for p in LINK.findall(text) if not (page.parent / p).exists()]
    assert not missing, f"{page.name} names files that do not exist: {missing}"
