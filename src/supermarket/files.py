"""Whole-or-nothing file writes: the one helper every command and ``plot(path)`` uses.

:func:`atomic_write` writes the bytes to a temporary file in the target's own directory,
flushes and syncs it, then :func:`os.replace`\\ s it over the target.  A write that fails
part-way (a full disk, a kill) leaves the earlier file untouched and no temporary file; a
reader never sees a truncated file.  A target that is not a regular file (``/dev/stdout``,
``/dev/null``, ``/dev/full``, a pipe) cannot be replaced and is written directly; its error
(``ENOSPC`` from ``/dev/full``) is raised, never swallowed.  A symbolic link is followed:
the file it names is replaced, the link stays.  A writable file in a directory where no file
can be created is rewritten in place (the one case that cannot be atomic).

:func:`figure_bytes` renders a matplotlib figure in memory (some writers swallow the error
of their final flush, so a figure is never written straight to its path).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["atomic_write", "figure_bytes", "save_figure_atomic", "TEMP_PREFIX"]

#: Prefix of the temporary files (hidden; a killed writer's leftover ends in ``.tmp``).
TEMP_PREFIX = ".supermarket-"


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> str:
    """Write ``data`` (``str``, UTF-8, or ``bytes``) to ``path`` whole or not at all.

    Parameters
    ----------
    path : str or path-like
        The target; its directory must exist.
    data : str or bytes

    Returns
    -------
    str
        The path written.

    Raises
    ------
    OSError
        The write failed (the earlier file, if any, is unchanged).
    TypeError
        ``data`` is neither ``str`` nor bytes-like.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = atomic_write(d / "a.txt", "first")
    >>> _ = atomic_write(d / "a.txt", "second")
    >>> (d / "a.txt").read_text(), sorted(p.name for p in d.iterdir())
    ('second', ['a.txt'])
    >>> try:
    ...     atomic_write("/dev/full", b"x")            # a full device: an error, not "written"
    ... except OSError as e:
    ...     print(e.errno == __import__("errno").ENOSPC)
    True
    """
    if isinstance(data, str):
        raw = data.encode("utf-8")
    elif isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
    else:
        raise TypeError(f"data must be str or bytes; got {type(data).__name__}")
    target = Path(os.path.realpath(os.fspath(path)))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        # a device or a pipe: it cannot be replaced; write through and let its error show
        with open(target, "wb") as fh:
            fh.write(raw)
            fh.flush()
        return os.fspath(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f"{TEMP_PREFIX}{target.name}.", suffix=".tmp")
    except PermissionError:
        if st is None or not os.access(target, os.W_OK):
            raise
        # a writable file in a directory we may not create files in: it can only be
        # rewritten in place (not atomic: the one case where a failed write can truncate it)
        with open(target, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        return os.fspath(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        if st is not None:
            mode = stat.S_IMODE(st.st_mode)
        else:  # what open() would have given a new file
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return os.fspath(path)


def _figure_format(path: str | os.PathLike[str]) -> str:
    suffix = Path(os.fspath(path)).suffix.lower().lstrip(".")
    return suffix if suffix else "png"


def figure_bytes(fig: Any, fmt: str = "png", **kw: Any) -> bytes:
    """A matplotlib figure rendered in memory in format ``fmt`` (``savefig`` keywords in ``kw``)."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, **kw)
    return buf.getvalue()


def save_figure_atomic(fig: Any, path: str | os.PathLike[str], **kw: Any) -> str:
    """Render ``fig`` in memory (format from the suffix of ``path``, PNG without one) and
    :func:`atomic_write` it: a failed write raises :class:`OSError` and leaves no 0-byte or
    truncated file."""
    return atomic_write(path, figure_bytes(fig, _figure_format(path), **kw))
