"""Shared option types and output helpers for the CLI commands.

Every numeric option is checked by its type against what the machine can represent and what
the computation can do, before any work: a count such as ``--n 1e400`` is refused at once
(one line, exit code 2).  Output paths (``--plot``, ``--out``, …) are checked for
writability before any work too (:class:`OutputFile`, :class:`OutputDir`); a write that
still fails after the computation (a full disk, ``/dev/full``) is one line on stderr and
exit code 1 (an I/O failure, not a usage mistake), never a traceback and never "written".
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Literal

import click

from ..jsonable import to_jsonable
from ..model import INT64_MAX, MAX_N, MAX_REPLICATIONS, check_load, parse_count


def _opt_name(param: click.Parameter | None) -> str:
    if param is None:
        return "value"
    opts = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    return opts[0] if opts else f"--{param.name.replace('_', '-')}"


class CountType(click.ParamType):
    """A positive integer that may be written ``1e7``, at most ``maximum`` (default 2^63 − 1)."""

    name = "COUNT"

    def __init__(self, maximum: int = INT64_MAX, minimum: int = 1) -> None:
        self.maximum = maximum
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return parse_count(_opt_name(param), value, maximum=self.maximum, minimum=self.minimum)
        except (TypeError, ValueError) as exc:
            self.fail(str(exc), param, ctx)


def _exists_ancestor(path: Path) -> Path:
    p = path
    while not p.exists():
        if p.parent == p:
            break
        p = p.parent
    return p


def _can_create_in(directory: Path) -> bool:
    """Whether a file can be created in ``directory``: a real probe (a temporary file, removed
    at once), since permission bits do not tell for root, read-only mounts or /proc."""
    import tempfile

    if not os.access(directory, os.W_OK | os.X_OK):
        return False
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".supermarket-probe-"):
            pass
    except OSError:
        return False
    return True


def _path_text(
    ptype: click.ParamType, value: Any, what: str, param: click.Parameter | None, ctx: click.Context | None
) -> tuple[str, Path]:
    """The text of a path option and its expanded :class:`~pathlib.Path`; an empty path or
    one with a NUL character fails (``what``: "file" or "directory", for the message)."""
    text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
    if not text.strip():
        ptype.fail(f"an empty path is not a {what} name", param, ctx)
    if "\x00" in text:
        ptype.fail("a path cannot contain a NUL character", param, ctx)
    return text, Path(text).expanduser()


class OutputFile(click.ParamType):
    """A file the command will write: checked before any work.

    The parent directory must exist and be writable (or the file exist and be writable);
    with ``parents=True`` (the command creates missing directories) its nearest existing
    ancestor must be a writable directory.  The path must not be a directory.  Nothing is
    created here.  ``path_type=Path`` gives a ``pathlib.Path``.
    """

    name = "FILE"

    def __init__(self, path_type: type = str, figure: bool = False, parents: bool = False) -> None:
        self.path_type = path_type
        self.figure = figure  # a matplotlib figure: the suffix must name a format it writes
        self.parents = parents  # the command creates missing parent directories itself

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text, path = _path_text(self, value, "file", param, ctx)
        try:
            if path.is_dir():
                self.fail(f"{text!r} is a directory, not a file", param, ctx)
            parent = path.parent if str(path.parent) else Path(".")
            if self.parents and not parent.exists():
                parent = _exists_ancestor(parent.absolute())
            if not parent.is_dir():
                self.fail(f"the directory {str(parent)!r} of {text!r} does not exist (create it first)", param, ctx)
            if path.exists():
                if not os.access(path, os.W_OK):
                    self.fail(f"{text!r} is not writable", param, ctx)
            elif not _can_create_in(parent):
                self.fail(f"cannot create {text!r}: the directory {str(parent)!r} is not writable", param, ctx)
            if self.figure and _figure_format(path) not in FIGURE_FORMATS:
                self.fail(
                    f"unknown figure format {_figure_format(path)!r} of {text!r}; "
                    f"use one of {', '.join('.' + f for f in FIGURE_FORMATS)}",
                    param,
                    ctx,
                )
        except OSError as exc:  # e.g. a name too long
            self.fail(f"{text!r}: {exc.strerror or exc}", param, ctx)
        return self.path_type(text)


class OutputDir(click.ParamType):
    """A directory the command will create or fill: checked before any work.

    It may not exist yet; then its nearest existing ancestor must be a writable directory.
    An existing path must be a writable directory.
    """

    name = "DIR"

    def __init__(self, path_type: type = str) -> None:
        self.path_type = path_type

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text, path = _path_text(self, value, "directory", param, ctx)
        try:
            if path.exists():
                if not path.is_dir():
                    self.fail(f"{text!r} exists and is not a directory", param, ctx)
                if not os.access(path, os.W_OK | os.X_OK):
                    self.fail(f"the directory {text!r} is not writable", param, ctx)
            else:
                anc = _exists_ancestor(path.absolute())
                if not anc.is_dir():
                    self.fail(f"cannot create {text!r}: {str(anc)!r} is not a directory", param, ctx)
                if not _can_create_in(anc):
                    self.fail(f"cannot create {text!r}: the directory {str(anc)!r} is not writable", param, ctx)
        except OSError as exc:
            self.fail(f"{text!r}: {exc.strerror or exc}", param, ctx)
        return self.path_type(text)


class OutputError(click.ClickException):
    """Writing a result failed after the computation (disk full, device error): exit code 1."""

    exit_code = 1


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a temporary file in the same directory,
    then :func:`os.replace`), or raise :class:`OutputError` (one line).  A failed write (a full
    disk, ``/dev/full``) leaves the earlier file as it was.
    """
    write_bytes(path, text.encode("utf-8"))


FIGURE_FORMATS = ("png", "pdf", "svg", "svgz", "eps", "ps", "jpg", "jpeg", "tif", "tiff", "webp", "pgf")


def _figure_format(path: str | os.PathLike[str]) -> str:
    suffix = Path(os.fspath(path)).suffix.lower().lstrip(".")
    return suffix if suffix else "png"


def save_figure(fig: Any, path: str | os.PathLike[str], **kw: Any) -> None:
    """Save a matplotlib figure to ``path``; any write error is :class:`OutputError`.

    The figure is rendered in memory (some writers swallow the error of the final flush: a
    PNG to ``/dev/full`` "succeeds") and written with :func:`write_bytes`: whole or not at
    all, never a 0-byte or truncated file.
    """
    from ..files import figure_bytes

    write_bytes(path, figure_bytes(fig, _figure_format(path), **kw))


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (:func:`supermarket.files.atomic_write`),
    or raise :class:`OutputError` (one line)."""
    from ..files import atomic_write

    try:
        existed = os.path.isfile(path)  # a regular file (not a device such as /dev/full)
        atomic_write(path, data)
    except OSError as exc:
        kept = "; the earlier file there is unchanged" if existed else ""
        raise OutputError(f"could not write {os.fspath(path)!r}: {exc.strerror or exc}{kept}") from None


class LoadType(click.ParamType):
    """The load λ as written (kept as a string so that boundaries are decided exactly)."""

    name = "LOAD"

    def __init__(self, require_stable: bool = True) -> None:
        self.require_stable = require_stable

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            check_load(str(value), require_stable=self.require_stable, name="--load")
        except (TypeError, ValueError) as exc:
            self.fail(str(exc), param, ctx)
        return str(value).strip()


COUNT = CountType()
N_COUNT = CountType(maximum=MAX_N)  # number of servers for the simulation engines (2^53)
REPLICATIONS = CountType(maximum=MAX_REPLICATIONS)
OUTPUT_FILE = OutputFile()
OUTPUT_FIGURE = OutputFile(figure=True)
OUTPUT_DIR = OutputDir()
LOAD = LoadType()
LOAD_ANY = LoadType(require_stable=False)


class FloatType(click.ParamType):
    """A real number, finite unless ``allow_inf``; NaN never.  ``1e400`` (inf) is refused
    with the option's name instead of being passed on as infinity."""

    name = "FLOAT"

    def __init__(self, allow_inf: bool = False) -> None:
        self.allow_inf = allow_inf

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        import math

        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{_opt_name(param)} must be a number; got {str(value)[:40]!r}", param, ctx)
        if math.isnan(x) or (math.isinf(x) and not self.allow_inf):
            self.fail(f"{_opt_name(param)} must be a finite number; got {str(value)[:40]!r}", param, ctx)
        return x


FLOAT = FloatType()


def print_json(obj: object) -> None:
    click.echo(json.dumps(to_jsonable(obj), indent=2, allow_nan=False))


def stderr_is_tty() -> bool:
    return sys.stderr.isatty()


#: seconds between two progress lines when stderr is not a terminal (a log file, a pipe, CI)
PLAIN_PROGRESS_EVERY = 5.0


def plain_progress_wanted() -> bool:
    """Whether plain progress lines may be printed: yes, unless the environment sets
    ``SUPERMARKET_PROGRESS=0`` (the doc transcripts do, so that a slow machine's "still
    working" lines do not enter the outputs they compare)."""
    return os.environ.get("SUPERMARKET_PROGRESS", "1").strip().lower() not in ("0", "off", "no", "false")


class TaskProgress:
    """Progress of a command's independent tasks on stderr.

    On a terminal: a rich bar with the count done, the elapsed time and the time left (like
    ``simulate``'s).  Elsewhere (a log file, a pipe, CI): one plain line every
    :data:`PLAIN_PROGRESS_EVERY` seconds, ``label: done/total done, elapsed 12 s``, so that a
    long run is never silent.  ``enabled=False`` shows nothing at all (``--json`` runs keep the
    plain lines, which go to stderr, unless the caller disables them).  ``update(done, total)``
    (also accepts ``(done, running, total)`` as :func:`supermarket.parallel.map_tasks` calls
    it); a context manager that stops the bar.

    Examples
    --------
    >>> with TaskProgress("pairs", enabled=False) as p:
    ...     p.update(1, 2)
    """

    def __init__(self, label: str, enabled: bool | None = None, plain: bool | None = None):
        self.label = label
        tty = stderr_is_tty()
        self.enabled = True if enabled is None else bool(enabled)
        # a rich bar on a terminal, plain lines elsewhere
        self.plain = (not tty) if plain is None else bool(plain)
        self._prog: Any = None  # a rich.progress.Progress once started
        self._id: Any = None
        self._t0 = time.monotonic()
        self._last = self._t0

    def update(self, done: int, *rest: int) -> None:
        if not self.enabled:
            return
        total = rest[-1]
        if self.plain:
            if not plain_progress_wanted():
                return
            now = time.monotonic()
            if now - self._last >= PLAIN_PROGRESS_EVERY:
                self._last = now
                click.echo(f"{self.label}: {done}/{total} done, elapsed {now - self._t0:.0f} s", err=True)
            return
        if self._prog is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._prog = Progress(
                TextColumn(self.label),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("left"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._prog.start()
            self._id = self._prog.add_task(self.label, total=total)
        self._prog.update(self._id, completed=done)

    def __call__(self, done: int, *rest: int) -> None:
        self.update(done, *rest)

    def __enter__(self) -> TaskProgress:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        if self._prog is not None:
            self._prog.stop()
            self._prog = None
        return False


class Heartbeat:
    """A line on stderr every :data:`PLAIN_PROGRESS_EVERY` seconds while one long step runs
    (a sparse solve, a search), from a daemon thread: ``label: still working, elapsed 15 s``,
    with the text of :meth:`note` when the step has said where it is.  A terminal shows a
    spinner instead (rich's status line).  A context manager; ``enabled=False`` shows nothing.

    Examples
    --------
    >>> with Heartbeat("exact solve", enabled=False) as hb:
    ...     hb.note("state space 1,234")
    """

    def __init__(self, label: str, enabled: bool = True, every: float | None = None):
        import threading

        self.label = label
        self.enabled = bool(enabled)
        self.every = PLAIN_PROGRESS_EVERY if every is None else float(every)
        self._where = ""
        self._stop = threading.Event()
        self._thread: Any = None
        self._status: Any = None
        self._t0 = time.monotonic()

    def note(self, where: str) -> None:
        """Say where the step is; the next line (or the spinner) shows it."""
        self._where = str(where)
        if self._status is not None:
            self._status.update(f"{self.label}: {self._where}")

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            where = f" ({self._where})" if self._where else ""
            click.echo(f"{self.label}: still working{where}, elapsed {time.monotonic() - self._t0:.0f} s", err=True)

    def __enter__(self) -> Heartbeat:
        import threading

        if not self.enabled:
            return self
        self._t0 = time.monotonic()
        if stderr_is_tty():
            from rich.console import Console

            self._status = Console(stderr=True).status(self.label)
            self._status.start()
        elif plain_progress_wanted():
            self._thread = threading.Thread(target=self._run, name="supermarket-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)  # no line after the block; a stuck echo is not waited on
            self._thread = None
        if self._status is not None:
            self._status.stop()
            self._status = None
        return False
