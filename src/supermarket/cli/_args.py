"""A command's options as one value: :func:`takes_args` calls the body of a click command with
one frozen dataclass (``FluctuationsArgs``, ``ExactArgs``…) built from click's keyword arguments.

click reads the options from the decorators above the function, so the help text, the option
order and the parsing stay those of the decorators; only the function under them changes: it
takes one typed value instead of a dozen loose keyword arguments, and hands that value (or a
part of it) to its helpers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["takes_args"]

A = TypeVar("A")
R = TypeVar("R")


def takes_args(cls: Callable[..., A]) -> Callable[[Callable[[A], R]], Callable[..., R]]:
    """Decorator: the command's keyword arguments (one per option) become ``cls(**kwargs)``,
    the function's only argument.

    Apply it directly above the ``def``, below every option (and below
    :func:`~supermarket.cli.options.deprecated_alias`, which hands on the new option's name):
    the options' decorators then attach to the function it returns.  An option without a field
    of ``cls`` (or a field without an option) is a TypeError at the first call, which every
    command's tests make."""

    def deco(body: Callable[[A], R]) -> Callable[..., R]:
        @functools.wraps(body)
        def command(**kwargs: Any) -> R:
            return body(cls(**kwargs))

        return command

    return deco
