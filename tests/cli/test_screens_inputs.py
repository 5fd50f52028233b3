"""Input screens: bad parameters are refused with one clean line naming the parameter."""

from __future__ import annotations

import math
import re

import pytest
from click.testing import CliRunner

from _paths import ROOT
from supermarket.cli import main
from supermarket.system.service import parse_server_classes, parse_service


def test_examples_cite_no_issue_numbers() -> None:
    for path in sorted((ROOT / "examples").iterdir()):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"issue\s*#?\d+|#\d+\b", text, re.IGNORECASE), path.name


@pytest.mark.parametrize(
    "text, needle",
    [
        ("hyperexp:1e300", "SCV in (1, 1e+06]"),
        ("hyperexp:inf", "finite"),
        ("hyperexp:nan", "finite"),
        ("hyperexp:1", "SCV in (1, 1e+06]"),
        ("hyperexp:abc", "not a number"),
        ("lognormal:1e300", "SCV in (0, 1e+06]"),
        ("lognormal:0", "SCV in (0, 1e+06]"),
        ("lognormal:-1", "SCV in (0, 1e+06]"),
        ("pareto:1e300", "ALPHA in (1, 1e+06]"),
        ("pareto:1", "ALPHA in (1, 1e+06]"),
        ("erlang:0", "integer K"),
        ("erlang:1e300", "integer K"),
        ("erlang:2.5", "integer K"),
    ],
)
def test_service_parameters_are_screened_at_parse_time(text: str, needle: str) -> None:
    with pytest.raises(ValueError) as exc:
        parse_service(text)
    assert exc.value.args[0].startswith("service must be one of")
    assert needle in exc.value.args[0]


def test_valid_service_laws_are_unchanged() -> None:
    law = parse_service("hyperexp:4")
    assert law.params.tolist() == [(1.0 + math.sqrt(3.0 / 5.0)) / 2.0, *law.params.tolist()[1:]]
    assert parse_service("hyperexp:1e6").scv == 1e6
    assert parse_service("lognormal:4").scv == 4.0
    assert parse_service("pareto:2.5").scv == pytest.approx(1.0 / (2.5 * 0.5))


@pytest.mark.parametrize("text", ["0.5:1e300,0.5:1e-300", "0.5:1e12,0.5:1", "0.5:1001,0.5:1"])
def test_extreme_speed_ratios_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"server_classes: the speeds .* at most 1000 times the slowest"):
        parse_server_classes(text)


def test_moderate_speed_ratios_still_parse() -> None:
    assert parse_server_classes("0.5:1000,0.5:1").speeds == (1000.0, 1.0)


@pytest.mark.parametrize(
    "args",
    [
        ["--server-classes", "0.5:1e300,0.5:1e-300"],
        ["--server-classes", "0.5:1e12,0.5:1"],
        ["--service", "hyperexp:1e300"],
    ],
)
def test_cli_refuses_extreme_inputs_with_one_line(args: list[str]) -> None:
    result = CliRunner().invoke(main, ["simulate", "--n", "10", "--d", "2", "--load", "0.9", *args])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("supermarket: error: "), result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", ["simulate", "theory", "exact", "meanfield", "mixing", "perfect"])
def test_positional_n_d_load_get_a_hint(command: str) -> None:
    result = CliRunner().invoke(main, [command, "1000", "2", "0.9"])
    assert result.exit_code == 2
    assert "Got unexpected extra arguments" in result.output
    assert "use --n, --d, --load; did you mean --n 1000 --d 2 --load 0.9?" in result.output


def test_perfect_says_why_its_default_load_differs() -> None:
    result = CliRunner().invoke(main, ["perfect", "--help"])
    assert result.exit_code == 0
    assert "not the 0.99 of simulate" in " ".join(result.output.split())


def test_long_start_with_few_batches_is_refused_before_work():
    # the memory check counted only the batch sums: 16 batches let long:100000 through, and the
    # per-level results then took 617 MB and minutes for 1,000 steps
    import pytest

    from supermarket.simulation import simulate

    with pytest.raises(ValueError, match=r"long:100000.*GiB"):
        simulate(100, 2, 0.9, start="long:100000", batches=16, steps=1000, seed=1, progress=False)
