"""The ``supermarket`` command line: thin commands over the library.

Each command lives in its own module of this package (``cli/theory.py``,
``cli/simulate.py``, …) and is loaded only when used, so ``supermarket --help`` stays fast
and a heavy import (numba, dask) is paid only by the command that needs it.

User mistakes (bad option values, bad parameters, an output path that cannot be written)
print one line on stderr and exit with code 2, without a traceback, before any work.  A
write that fails after the computation (a full disk) prints one line and exits with code 1.
Ctrl-C prints ``supermarket: interrupted`` and exits with code 130; SIGTERM is handled the same
way (the same clean stop: workers ended, partial work kept only where valid) and prints
``supermarket: terminated``, exit code 143.  A command that catches the stop and prints a
partial result still exits 130 (143): its output is labelled interrupted.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util  # find_spec below; not loaded by `import importlib` alone
import re
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any, ClassVar, NoReturn

import click

# command name -> (module, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "simulate": ("supermarket.cli.simulate", "simulate", "Simulate the chain and compare with theory (main job)."),
    "theory": (
        "supermarket.cli.theory",
        "theory",
        "The papers' calculators: k, fixed point, good set, Theorem 1.2, mixing bounds.",
    ),
    "design": ("supermarket.cli.theory", "design", "Least d that keeps every queue at most K long at this load."),
    "exact": (
        "supermarket.cli.exact",
        "exact",
        "Exact stationary law and response times of a small system (sparse solve).",
    ),
    "meanfield": (
        "supermarket.cli.meanfield",
        "meanfield",
        "Mean-field ODE, fixed point, refined mean field and linear noise.",
    ),
    "mixing": ("supermarket.cli.mixing", "mixing", "Coalescence and mixing times from a chosen start."),
    "fluctuations": (
        "supermarket.cli.fluctuations",
        "fluctuations",
        "Near-equilibrium fluctuations in the regimes of paper 002.",
    ),
    "reproduce": ("supermarket.cli.reproduce", "reproduce", "Reproduce the experiments of paper 000 or paper 002."),
    "perfect": ("supermarket.cli.perfect", "perfect", "Exact stationary samples (dominated coupling from the past)."),
    "sweep": ("supermarket.cli.sweep", "sweep", "Run a parameter sweep (TOML) locally or on a Dask cluster."),
    "report": ("supermarket.cli.sweep", "report", "Build an HTML or Markdown report from a sweep directory."),
}


class UserError(click.ClickException):
    """A mistake of the user: one line, exit code 2."""

    exit_code = 2


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name, (mod, _, _) in COMMANDS.items() if importlib.util.find_spec(mod) is not None]

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else None
        if name is not None and name not in COMMANDS and not name.startswith("-"):
            import difflib

            close = difflib.get_close_matches(name, list(COMMANDS), n=3, cutoff=0.6)
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise click.UsageError(f"No such command {name!r}.{hint} Commands: {', '.join(COMMANDS)}.", ctx)
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        mod, attr, _ = COMMANDS[name]
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name == mod:
                return None
            raise
        return getattr(module, attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        _quiet_dask_client_logs()
        stops = _StopSignals()
        try:
            with stops:
                rv = super().main(
                    args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False, **extra
                )
        except (click.exceptions.Abort, KeyboardInterrupt):
            stops.exit()
        except BrokenPipeError:
            # the reader went away (`supermarket theory | head -1`): stop quietly
            import os

            with contextlib.suppress(OSError, ValueError, AttributeError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())  # no flush of a dead pipe at exit
            sys.exit(1)
        except click.exceptions.NoArgsIsHelpError as exc:  # pragma: no cover - click >= 8.2
            click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
            sys.exit(0)
        except click.exceptions.UsageError as exc:
            _fail(exc.format_message() + _positional_hint(exc))
        except click.ClickException as exc:
            _fail(exc.format_message(), exc.exit_code)
        except (ValueError, TypeError) as exc:
            _fail(str(exc))
        except OSError as exc:
            # an I/O failure outside the commands' own checks (writing a result, reading a
            # file): one line, exit code 1
            where = f" {exc.filename!r}:" if getattr(exc, "filename", None) else ""
            _fail(f"I/O error:{where} {exc.strerror or exc}", 1)
        if stops.fired is not None:
            # the command caught the stop and finished with what it had (a partial result,
            # labelled as such): still not a success
            stops.exit()
        if isinstance(rv, int) and standalone_mode:
            sys.exit(rv)
        return rv


def _positional_hint(exc: click.exceptions.UsageError) -> str:
    """A hint for ``supermarket simulate 1000 2 0.9``: the system size, choices and load
    are options, not positional arguments."""
    ctx = exc.ctx
    if ctx is None or "unexpected extra argument" not in exc.format_message():
        return ""
    names = [p.name for p in ctx.command.params]
    wanted = [name for name in ("n", "d", "load") if name in names]
    if not wanted:
        return ""
    found = re.search(r"arguments? \((.*)\)", exc.format_message())
    extra = found.group(1).split() if found else []
    options = ", ".join(f"--{name}" for name in wanted)
    guess = " ".join(f"--{name} {value}" for name, value in zip(wanted, extra))
    mean = f"; did you mean {guess}?" if guess and len(extra) <= len(wanted) else ""
    return f" (use {options}{mean})"


class _StopSignals:
    """While a command runs, SIGINT and SIGTERM both raise :class:`KeyboardInterrupt` in the
    main thread (so every engine's interrupt path, pool shutdown included, runs for either),
    and the first signal is remembered: :meth:`exit` then prints one line and exits 130
    (SIGINT) or 143 (SIGTERM)."""

    LINES: ClassVar[dict[int, str]] = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}

    def __init__(self) -> None:
        self.fired: int | None = None
        self._previous: dict[int, Any] = {}

    def _handler(self, signum: int, frame: object) -> None:
        if self.fired is None:
            self.fired = signum
        raise KeyboardInterrupt

    def __enter__(self) -> _StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in self.LINES:
                previous = signal.getsignal(sig)
                if previous is signal.SIG_IGN:  # `nohup`-style: an ignored signal stays ignored
                    continue
                self._previous[sig] = previous
                signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    def exit(self) -> NoReturn:
        signum = self.fired if self.fired is not None else signal.SIGINT
        click.echo(f"supermarket: {self.LINES[signum]}", err=True)
        sys.exit(128 + int(signum))


def _quiet_dask_client_logs() -> None:
    """A lost scheduler is reported by the command in one line (``SchedulerError``); the Dask
    client's own reconnection tracebacks (30 lines of CancelledError on stderr) are not
    shown.  Only the client side is quieted: nothing of the cluster's own logs changes."""
    import logging

    def drop(record: logging.LogRecord) -> bool:  # a filter, not a level: importing distributed resets the levels
        return record.levelno >= logging.CRITICAL

    for name in ("distributed.client", "distributed.comm", "tornado.application"):
        logging.getLogger(name).addFilter(drop)


def _fail(message: str, code: int = 2) -> NoReturn:
    line = " ".join(str(message).split())
    click.echo(f"supermarket: error: {line}", err=True)
    sys.exit(code)


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """``--version``: the version of the imported package (also from an uninstalled source tree)."""
    if not value or ctx.resilient_parsing:
        return
    from supermarket import __version__

    click.echo(f"supermarket, version {__version__}")
    ctx.exit()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
def main() -> None:
    """supermarket: the supermarket model (JSQ(d), power of d choices), simulated exactly and
    fast, with the mean-field theory and the calculators of its heavy-traffic papers.

    Start with `supermarket simulate` (heavy-traffic defaults) or `supermarket theory`.
    """


__all__ = ["main", "UserError", "COMMANDS"]
