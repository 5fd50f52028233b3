"""Shared option types and output helpers for the CLI commands."""

from __future__ import annotations

import json
import math
import sys

import click
import numpy as np

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


def to_jsonable(obj):
    """Convert numpy scalars/arrays, tuples and non-finite floats into plain JSON values."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        x = float(obj)
        return x if math.isfinite(x) else (None if math.isnan(x) else ("inf" if x > 0 else "-inf"))
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def print_json(obj) -> None:
    click.echo(json.dumps(to_jsonable(obj), indent=2, allow_nan=False))


def stderr_is_tty() -> bool:
    return sys.stderr.isatty()
