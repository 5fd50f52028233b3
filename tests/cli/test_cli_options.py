"""One CLI vocabulary: every command registered in ``supermarket.cli`` spells each shared
concept one way, with one type (``supermarket.cli.options`` defines them once).

Commands not yet converted are marked ``xfail(strict=True)`` with the reason, so that the
mark fails (and must be removed) the day they are converted.
"""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from supermarket.cli import COMMANDS, main
from supermarket.cli._common import CountType, OutputDir, OutputFile

# concept -> (canonical spelling(s), every spelling that means the concept, type check)
CONCEPTS = {
    "replace": (
        {"--replace", "--no-replace"},
        {"--replace", "--no-replace", "--without-replacement", "--with-replacement", "--no-replacement"},
        lambda p: (
            isinstance(p.type, click.types.BoolParamType)
            and set(p.opts) == {"--replace"}
            and set(p.secondary_opts) == {"--no-replace"}
        ),
    ),
    "start": (
        {"--start"},
        {"--start", "--from", "--initial", "--init"},
        lambda p: isinstance(p.type, click.types.StringParamType),
    ),
    "workers": (
        {"--workers"},
        {"--workers", "--jobs", "--threads", "--processes", "-j"},
        lambda p: isinstance(p.type, CountType),
    ),
    "seed": (
        {"--seed"},
        {"--seed", "--rng-seed", "--random-seed"},
        lambda p: isinstance(p.type, click.IntRange) and p.type.min == 0,
    ),
    "replications": (
        {"--replications"},
        {"--replications", "--reps", "--runs", "--repeats"},
        lambda p: isinstance(p.type, CountType),
    ),
    # --out is where a command's output goes, a path checked writable before any work
    # (cli/_common.py's OutputDir / OutputFile); one meaning (a directory) is checked by
    # test_one_meaning_per_option_name below (report's file --out is a hidden deprecated alias)
    "out": ({"--out"}, {"--out", "--output", "--out-dir", "-o"}, lambda p: isinstance(p.type, (OutputDir, OutputFile))),
    "json": ({"--json"}, {"--json", "--as-json"}, lambda p: p.is_flag and p.name == "as_json"),
    "scheduler": (
        {"--scheduler"},
        {"--scheduler", "--dask", "--cluster", "--address"},
        lambda p: isinstance(p.type, click.types.StringParamType),
    ),
    "timeout": (
        {"--timeout"},
        {"--timeout", "--connect-timeout"},
        lambda p: isinstance(p.type, click.FloatRange) and p.name == "connect_timeout",
    ),
}

# commands that do not follow the vocabulary yet (owned elsewhere): flips to XPASS when fixed
NOT_YET = {}


def _command(name):
    return main.get_command(click.Context(main), name)


def _problems(name, cmd=None) -> list[str]:
    cmd = cmd or _command(name)
    out = []
    for p in cmd.params:
        if not isinstance(p, click.Option):
            continue
        spellings = set(p.opts) | set(p.secondary_opts)
        for concept, (canon, family, ok) in CONCEPTS.items():
            if not spellings & family:
                continue
            extra = spellings - canon
            if extra:
                out.append(f"{name}: {concept} spelled {sorted(spellings)} (use {sorted(canon)})")
            elif not ok(p):
                out.append(f"{name}: {concept} ({sorted(spellings)}) has type {p.type!r}, not the shared one")
    return out


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=NOT_YET[n])) if n in NOT_YET else n for n in COMMANDS],
)
def test_each_concept_has_one_spelling_and_one_type(name):
    assert _problems(name) == []


def test_the_table_catches_a_second_spelling():
    """The check itself can fail: an old-style command is flagged on each concept."""

    @click.command()
    @click.option("--from", "start")
    @click.option("--no-replace", is_flag=True)
    @click.option("--seed", type=int)
    @click.option("--workers", type=click.IntRange(min=1))
    def old(start, no_replace, seed, workers):
        pass

    probs = _problems("_old", old)
    joined = " ".join(probs)
    for concept in ("start", "replace", "seed", "workers"):
        assert f"_old: {concept}" in joined, probs


# "every command takes --scheduler" (issue #13), with this one exception:
NO_SCHEDULER = {
    "report": "computes nothing: it reads a sweep directory on this machine's disk and writes the "
    "report files here; a cluster's workers would not even see those files",
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_takes_scheduler_and_timeout(name):
    cmd = _command(name)
    opts = {o for p in cmd.params for o in (*getattr(p, "opts", []), *getattr(p, "secondary_opts", []))}
    if name in NO_SCHEDULER:
        assert "--scheduler" not in opts, f"{name} now takes --scheduler: remove it from NO_SCHEDULER"
        return
    assert {"--scheduler", "--timeout"} <= opts, f"{name} lacks --scheduler/--timeout"
    help_text = next(p.help for p in cmd.params if "--scheduler" in getattr(p, "opts", []))
    assert "Dask cluster" in help_text, help_text


# the commands that gained --scheduler last, each with a quick valid invocation
NEW_SCHEDULER_COMMANDS = {
    "perfect": ["perfect", "--n", "5", "--replications", "2"],
    "exact": ["exact", "--n", "3"],
    "theory": ["theory"],
    "meanfield": ["meanfield", "--d", "2"],
    "design": ["design", "--max-queue", "3", "--load", "0.9"],
    "design-latency": ["design", "--latency", "5", "--d", "2"],
    "design-verify": ["design", "--latency", "5", "--load", "0.8", "--n", "4", "--verify", "--steps", "1000"],
}


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:1", "localhost:8786"])
@pytest.mark.parametrize("case", list(NEW_SCHEDULER_COMMANDS))
def test_bad_scheduler_address_is_one_line_exit_2(case, address):
    """Nothing listening, or no tcp:// scheme: one line on stderr, exit 2, no output, within --timeout."""
    r = CliRunner().invoke(main, [*NEW_SCHEDULER_COMMANDS[case], "--scheduler", address, "--timeout", "2", "--json"])
    assert r.exit_code == 2, (case, r.output)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("supermarket: error:") and address in lines[0], r.stderr
    assert r.stdout == ""


def test_scheduler_without_dask_is_one_line(monkeypatch):
    """Without the dask extra, --scheduler says so in one line (exit 2)."""
    import supermarket.parallel as par

    monkeypatch.setattr(par, "dask_available", lambda: False)
    for args in (
        ["mixing", "--n", "20", "--d", "2", "--load", "0.5", "--replications", "2"],
        ["fluctuations", "--regime", "a", "--n", "100"],
        ["reproduce", "paper000", "--out", "unused-dir"],
        *list(NEW_SCHEDULER_COMMANDS.values()),
    ):
        r = CliRunner().invoke(main, [*args, "--scheduler", "tcp://127.0.0.1:1"])
        assert r.exit_code == 2, (args, r.output)
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and "dask" in lines[0] and lines[0].startswith("supermarket: error:"), r.stderr


def test_workers_and_scheduler_exclude_each_other():
    r = CliRunner().invoke(main, ["mixing", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"])
    assert r.exit_code == 2 and "exclude" in r.stderr


def test_report_json_manifest(tmp_path):
    """``report --json`` lists what it wrote, with sizes that match the files."""
    from supermarket import sweep as sw

    d = tmp_path / "sweep"
    text = '[sweep]\nname = "t"\nseed = 1\n[[run]]\nmeasurement = "meanfield"\nd = [2, 3]\nload = 0.5\n'
    sw.run_sweep(sw.parse_sweep(text), d, workers=1)
    (tmp_path / "rep").mkdir()
    r = CliRunner().invoke(main, ["report", str(d), "--md", str(tmp_path / "rep" / "r.md"), "--json"])
    assert r.exit_code == 0, r.output
    man = json.loads(r.stdout)
    assert man["reports"] and man["files"] and man["wall_s"] >= 0
    from pathlib import Path

    for f in man["files"]:
        assert Path(f["path"]).stat().st_size == f["bytes"]


# One meaning per option name (issue 19): --out is a directory, the burn-in says its unit,
# independent repetitions are --replications, --workers defaults to all cores; simulate's
# JSON file is --save.  A command listed here is a known exception (a strict xfail).
ONE_MEANING_NOT_YET: dict = {}


def _meaning_problems(name) -> list[str]:
    from supermarket.cli._common import FloatType

    out = []
    for p in _command(name).params:
        if not isinstance(p, click.Option) or p.hidden:
            continue
        opts = set(p.opts)
        if "--out" in opts and not isinstance(p.type, OutputDir):
            out.append(f"{name}: --out is not a directory ({p.type!r})")
        if opts & {"--burn-in", "--samples"}:
            out.append(f"{name}: {sorted(opts)} (use --burn-in-steps/--burn-in-time, --replications)")
        if "--burn-in-steps" in opts and not isinstance(p.type, CountType):
            out.append(f"{name}: --burn-in-steps is not a count")
        if "--burn-in-time" in opts and not isinstance(p.type, FloatType):
            out.append(f"{name}: --burn-in-time is not a number")
        if "--workers" in opts and p.default is not None:
            out.append(f"{name}: --workers defaults to {p.default!r}, not all cores")
    return out


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=ONE_MEANING_NOT_YET[n]))
        if n in ONE_MEANING_NOT_YET
        else n
        for n in COMMANDS
    ],
)
def test_one_meaning_per_option_name(name):
    assert _meaning_problems(name) == []


def test_deprecated_names_still_work_with_one_warning_line():
    new = CliRunner().invoke(
        main,
        [
            "mixing",
            "--n",
            "20",
            "--d",
            "2",
            "--load",
            "0.5",
            "--replications",
            "3",
            "--burn-in-steps",
            "50",
            "--workers",
            "1",
            "--json",
        ],
    )
    old = CliRunner().invoke(
        main,
        [
            "mixing",
            "--n",
            "20",
            "--d",
            "2",
            "--load",
            "0.5",
            "--replications",
            "3",
            "--burn-in",
            "50",
            "--workers",
            "1",
            "--json",
        ],
    )
    assert new.exit_code == old.exit_code == 0 and new.stderr == ""
    assert json.loads(new.stdout)["taus"] == json.loads(old.stdout)["taus"]
    assert json.loads(old.stdout)["burn_in_steps"] == 50
    assert old.stderr.splitlines() == [
        "supermarket: warning: --burn-in is deprecated; use --burn-in-steps "
        "(--burn-in-steps and --burn-in-time say the unit in every command)"
    ]
    hidden = {o for p in _command("mixing").params if getattr(p, "hidden", False) for o in p.opts}
    helptext = CliRunner().invoke(main, ["mixing", "--help"]).output
    assert hidden == {"--burn-in"} and "--burn-in " not in helptext and "--burn-in-steps" in helptext


def test_exact_plot_ends_with_what_it_wrote(tmp_path):
    r = CliRunner().invoke(main, ["exact", "--n", "2", "--d", "2", "--load", "0.5", "--plot", str(tmp_path / "e.png")])
    assert r.exit_code == 0, r.output
    assert r.stdout.rstrip().splitlines()[-1] == f"wrote {tmp_path / 'e.png'}" and (tmp_path / "e.png").stat().st_size
