"""Long runs are never silent: off a terminal, progress comes as plain lines on stderr.

The lines are timed by the clock (every ``PLAIN_PROGRESS_EVERY`` seconds); these tests set the
interval to zero or wait on the line itself, so nothing here depends on the machine's speed.
"""

from __future__ import annotations

import threading

import pytest

from supermarket.cli import _common


@pytest.fixture(autouse=True)
def _progress_on(monkeypatch):
    monkeypatch.setenv("SUPERMARKET_PROGRESS", "1")  # tests/conftest.py switches the lines off


def test_task_progress_prints_plain_lines_off_a_terminal(capsys, monkeypatch):
    monkeypatch.setattr(_common, "PLAIN_PROGRESS_EVERY", 0.0)
    with _common.TaskProgress("coupled pairs", plain=True) as bar:
        bar(3, 10)
        bar(4, 1, 10)  # the (done, running, total) form of parallel.map_tasks
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("coupled pairs: 3/10 done, elapsed ")
    assert err[1].startswith("coupled pairs: 4/10 done, elapsed ")


def test_task_progress_is_quiet_between_lines_and_when_disabled(capsys, monkeypatch):
    monkeypatch.setattr(_common, "PLAIN_PROGRESS_EVERY", 1e9)
    with _common.TaskProgress("samples", plain=True) as bar:
        bar(1, 2)
    with _common.TaskProgress("samples", enabled=False, plain=True) as bar:
        bar(1, 2)
    assert capsys.readouterr().err == ""


def test_heartbeat_says_it_is_still_working(monkeypatch):
    lines: list[str] = []
    seen = threading.Event()

    def echo(message, err=False):
        assert err
        lines.append(message)
        seen.set()

    monkeypatch.setattr(_common, "stderr_is_tty", lambda: False)
    monkeypatch.setattr(_common.click, "echo", echo)
    with _common.Heartbeat("exact solve", every=0.01) as hb:
        hb.note("building the generator")
        assert seen.wait(120), "no heartbeat line"
    n = len(lines)
    assert lines[0].startswith("exact solve: still working (building the generator), elapsed ")
    assert hb._thread is None  # joined on exit: no line after the block
    assert len(lines) == n


def test_heartbeat_disabled_starts_no_thread(monkeypatch):
    monkeypatch.setattr(_common, "stderr_is_tty", lambda: False)
    with _common.Heartbeat("x", enabled=False) as hb:
        assert hb._thread is None


def test_progress_lines_can_be_switched_off_by_the_environment(capsys, monkeypatch):
    monkeypatch.setattr(_common, "PLAIN_PROGRESS_EVERY", 0.0)
    monkeypatch.setenv("SUPERMARKET_PROGRESS", "0")
    monkeypatch.setattr(_common, "stderr_is_tty", lambda: False)
    with _common.TaskProgress("pairs", plain=True) as bar:
        bar(1, 2)
    with _common.Heartbeat("solve", every=0.001) as hb:
        assert hb._thread is None
    assert capsys.readouterr().err == ""


def test_doc_transcripts_run_without_progress_lines():
    import sys

    from _paths import TOOLS

    sys.path.insert(0, str(TOOLS))
    try:
        import doc_transcripts
    finally:
        sys.path.pop(0)
    assert doc_transcripts._env()["SUPERMARKET_PROGRESS"] == "0"
