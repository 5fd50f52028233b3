"""Checks of the documentation's helpers: the commands of ``tools/compare_outputs.py``."""

from __future__ import annotations

import shlex
import sys

import click
import pytest

from _paths import ROOT

sys.path.insert(0, str(ROOT / "tools"))

import compare_outputs


@pytest.mark.parametrize("command", compare_outputs.COMMANDS, ids=lambda c: c.split()[0])
def test_compare_outputs_commands_parse(command):
    """Every command of the refactor check parses (options and values), as ``run`` passes it;
    parsing does no work, so this costs milliseconds."""
    from supermarket.cli import main

    words = [*shlex.split(command), "--json"]
    ctx = click.Context(main, info_name="supermarket")
    cmd = main.get_command(ctx, words[0])
    assert cmd is not None, words[0]
    cmd.make_context(words[0], words[1:], parent=ctx)  # raises click.UsageError on a bad option
