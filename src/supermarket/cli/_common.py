"""Shared option types and output helpers for the CLI commands."""

from __future__ import annotations

import json
import sys

import click

from ..jsonable import to_jsonable  # noqa: F401 - re-exported for the commands
from ..model import check_load, parse_count


class CountType(click.ParamType):
    """A positive integer that may be written ``1e7``."""

    name = "COUNT"

    def convert(self, value, param, ctx):
        try:
            return parse_count(f"--{param.name.replace('_', '-')}" if param else "value", value)
        except (TypeError, ValueError) as exc:
            self.fail(str(exc), param, ctx)


class LoadType(click.ParamType):
    """The load λ as written (kept as a string so that boundaries are decided exactly)."""

    name = "LOAD"

    def __init__(self, require_stable: bool = True):
        self.require_stable = require_stable

    def convert(self, value, param, ctx):
        try:
            check_load(str(value), require_stable=self.require_stable, name="--load")
        except (TypeError, ValueError) as exc:
            self.fail(str(exc), param, ctx)
        return str(value).strip()


COUNT = CountType()
LOAD = LoadType()
LOAD_ANY = LoadType(require_stable=False)


def print_json(obj) -> None:
    click.echo(json.dumps(to_jsonable(obj), indent=2, allow_nan=False))


def stderr_is_tty() -> bool:
    return sys.stderr.isatty()
