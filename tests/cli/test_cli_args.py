"""One value per command (``supermarket.cli._args.takes_args``): a command's options arrive as
one frozen dataclass, with one field per option, and the help text is the decorators' own."""

from __future__ import annotations

import ast
import dataclasses

import click
import pytest
from click.testing import CliRunner

from _paths import SRC
from supermarket.cli import main
from supermarket.cli._args import takes_args
from supermarket.cli.exact import ExactArgs
from supermarket.cli.fluctuations import FluctuationsArgs
from supermarket.cli.meanfield import MeanfieldArgs
from supermarket.cli.mixing import MixingArgs
from supermarket.cli.perfect import PerfectArgs
from supermarket.cli.simulate import SimulateArgs
from supermarket.cli.theory import DesignArgs

ARGS = {
    "exact": ExactArgs,
    "fluctuations": FluctuationsArgs,
    "meanfield": MeanfieldArgs,
    "mixing": MixingArgs,
    "perfect": PerfectArgs,
    "design": DesignArgs,
    "simulate": SimulateArgs,
}

#: functions of cli/ still over 12 parameters (the rule of CONTRIBUTING.md): none
STILL_OVER: set[str] = set()
MAX_PARAMS = 12


@dataclasses.dataclass(frozen=True)
class _Toy:
    count: int
    name: str
    loud: bool


@click.command()
@click.option("--count", type=int, default=2, show_default=True, help="How many.")
@click.option("--name", default="x", help="What.")
@click.option("--loud", is_flag=True, help="Loudly.")
@takes_args(_Toy)
def _toy(args: _Toy) -> None:
    """Echo the value it got."""
    click.echo(repr(args))


@click.command()
@click.option("--count", type=int, default=2, show_default=True, help="How many.")
@click.option("--name", default="x", help="What.")
@click.option("--loud", is_flag=True, help="Loudly.")
def _toy_loose(count: int, name: str, loud: bool) -> None:
    """Echo the value it got."""
    click.echo(repr(_Toy(count, name, loud)))


def test_takes_args_hands_one_frozen_value_and_keeps_the_help():
    r = CliRunner().invoke(_toy, ["--count", "5", "--loud"])
    assert r.exit_code == 0 and r.output == "_Toy(count=5, name='x', loud=True)\n"
    loose = CliRunner().invoke(_toy_loose, ["--count", "5", "--loud"])
    assert loose.output == r.output
    h, h_loose = (CliRunner().invoke(c, ["--help"]).output for c in (_toy, _toy_loose))
    assert h.splitlines()[1:] == h_loose.splitlines()[1:]  # all but the usage line, which names the command
    assert "Echo the value it got." in h and h.index("--count") < h.index("--name") < h.index("--loud")
    with pytest.raises(dataclasses.FrozenInstanceError):
        _Toy(1, "a", False).count = 2  # type: ignore[misc]


def test_an_option_without_a_field_is_a_type_error():
    @click.command()
    @click.option("--count", type=int, default=2)
    @click.option("--extra", default=None)
    @takes_args(_Toy)
    def bad(args: _Toy) -> None:
        pass

    r = CliRunner().invoke(bad, [])
    assert isinstance(r.exception, TypeError) and "extra" in str(r.exception)


@pytest.mark.parametrize("name", sorted(ARGS))
def test_each_command_has_one_field_per_option(name):
    """The dataclass names exactly the command's visible options (a deprecated hidden spelling
    hands its value to the new option's field), in the order of the decorators."""
    cmd = main.get_command(click.Context(main), name)
    options = [p.name for p in cmd.params if not getattr(p, "hidden", False)]
    hidden = {p.name for p in cmd.params if getattr(p, "hidden", False)}  # e.g. simulate's --burn-in
    fields = [f.name for f in dataclasses.fields(ARGS[name])]
    assert [f for f in fields if f not in hidden] == options
    assert set(fields) - set(options) <= hidden
    assert ARGS[name].__dataclass_params__.frozen  # type: ignore[attr-defined]


def _params_over(limit: int) -> set[str]:
    out = set()
    for f in sorted((SRC / "supermarket" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                a = node.args
                names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.arg not in ("self", "cls")]
                if len(names) > limit:
                    out.add(f"{f.name}::{node.name}")
    return out


def test_no_cli_function_takes_over_12_parameters():
    assert _params_over(MAX_PARAMS) <= STILL_OVER
    assert _params_over(0) > {"exact.py::_exact"}  # the scan sees functions at all
