"""Storage of a sweep: the directory, part files, results table and sidecar, each written atomically
(docs/sweep.md, "Interruption and resume" and "The output directory")."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from ..files import atomic_write
from .columns import table_rows, to_table
from .points import current_names
from .seeds import SEED_RULE
from .spec import FORMAT_VERSION, Sweep, Task

if TYPE_CHECKING:
    import pyarrow as pa

PathLike = str | os.PathLike[str]

__all__ = [
    "RESULTS_FILE",
    "SIDECAR_FILE",
    "SWEEP_COPY",
    "PARTS_DIR",
    "ID_COLUMNS",
    "TIMING_COLUMNS",
    "LOCK_FILE",
    "SweepLock",
    "SweepDirError",
    "OutputError",
    "check_output_file",
    "check_not_sweep_file",
    "check_output_dir",
    "write_output",
    "to_table",
    "table_rows",
    "read_results",
    "read_sidecar",
    "upgrade",
]

RESULTS_FILE = "results.parquet"
SIDECAR_FILE = "sweep.json"
SWEEP_COPY = "sweep.toml"
PARTS_DIR = "parts"
LOCK_FILE = ".lock"  # held (flock) by the process running the sweep
ID_COLUMNS = (
    "sweep",
    "task_id",
    "task_index",
    "point",
    "measurement",
    "replication",
    "replications",
    "seed",
    "point_hash",
    "status",
    "error",
)
# Columns whose values depend on the machine and the moment, not on the seeds.
TIMING_COLUMNS = (
    "wall_seconds",
    "wall_time",
    "events_per_second",
    "seconds",
    "sim_seconds",
    "sim_events_per_second",
    "limit_seconds",
)


class SweepDirError(ValueError):
    """The output directory cannot be used for this sweep (one line: why, and what to do).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     try:
    ...         read_sidecar(d)                       # an empty directory is not a sweep
    ...     except SweepDirError as e:
    ...         print(isinstance(e, ValueError), "not a sweep directory" in str(e))
    True True
    """


class OutputError(ValueError):
    """An output file cannot be written (one line).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     try:
    ...         check_output_file(d)                  # a directory, not a file name
    ...     except OutputError as e:
    ...         print(isinstance(e, ValueError), "is a directory" in str(e))
    True True
    """


# =========================================================================== output paths
def _probe_dir(d: Path, label: str, err: type[Exception] = OutputError) -> None:
    if not d.exists():
        raise err(f"{label}: the directory {d} does not exist; create it first")
    if not d.is_dir():
        raise err(f"{label}: {d} is not a directory")
    try:
        fd, name = tempfile.mkstemp(prefix=".supermarket-probe-", dir=d)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        raise err(f"{label}: cannot write in {d} ({exc.strerror or exc})") from None


def check_output_file(path: PathLike, label: str = "output") -> Path:
    """``path``, checked before any work to be writable and not a directory (else :class:`OutputError`)."""
    p = Path(path)
    if p.is_dir():
        raise OutputError(f"{label}: {p} is a directory; give a file name")
    if p.exists() and not p.is_file():
        return p  # a device or a pipe (/dev/stdout): written directly, errors reported then
    _probe_dir(p.parent if str(p.parent) else Path("."), label)
    return p


def check_not_sweep_file(out_dir: PathLike, path: PathLike, label: str = "output") -> Path:
    """``path``, refused (:class:`OutputError`) if it is one of the sweep's own files in ``out_dir``.

    Examples
    --------
    >>> try:
    ...     check_not_sweep_file("quick", "quick/./sweep.json", "--md")
    ... except OutputError as e:
    ...     print(e)
    --md quick/./sweep.json is the sweep's own file quick/sweep.json: writing there would destroy the sweep;
    choose another name (e.g. quick/report.md)
    """
    d = Path(os.path.realpath(out_dir))
    p = Path(os.path.realpath(path))
    own = {d / SIDECAR_FILE, d / RESULTS_FILE, d / SWEEP_COPY, d / LOCK_FILE, d / PARTS_DIR}
    if p in own or (d / PARTS_DIR) in p.parents:
        rel = Path(out_dir) / p.relative_to(d)
        ext = ".md" if "md" in label else ".html"
        what = f"is the sweep's own file {rel}" if p in own else f"lies in the sweep's {PARTS_DIR}/ directory"
        raise OutputError(
            f"{label} {path} {what}: writing there would destroy the sweep; choose another "
            f"name (e.g. {Path(out_dir) / ('report' + ext)})"
        )
    return Path(path)


def check_output_dir(out: PathLike, label: str = "--out") -> Path:
    """``out``, checked before any work to be a writable directory, or missing in a writable one."""
    p = Path(out)
    if p.exists():
        if not p.is_dir():
            raise SweepDirError(f"{label} {p} exists and is not a directory")
        _probe_dir(p, label, SweepDirError)
    else:
        _probe_dir(p.parent if str(p.parent) else Path("."), label, SweepDirError)
    return p


def write_output(path: PathLike, data: str | bytes, label: str = "output") -> str:
    """Write ``data`` to ``path`` atomically (a device or pipe directly); a failure is :class:`OutputError`."""
    p = Path(path)
    try:
        atomic_write(p, data)  # a device or pipe is written directly, by the helper
    except OSError as exc:
        raise OutputError(f"{label}: cannot write {p} ({exc.strerror or exc})") from None
    return str(p)


def _atomic_write_table(path: Path, table: pa.Table) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = pa.BufferOutputStream()
    pq.write_table(table, buf)
    atomic_write(path, buf.getvalue().to_pybytes())


# =========================================================================== parts
def part_path(out: Path, task: Task) -> Path:
    return out / PARTS_DIR / f"{task.task_id}.parquet"


def write_part(out: Path, task: Task, row: dict) -> None:
    _atomic_write_table(part_path(out, task), to_table([row], ID_COLUMNS))


def _same(a: object, b: object) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def part_matches(task: Task, row: dict) -> bool:
    """Whether ``row`` is the result of ``task``: same identity, seed and parameters."""
    if any(row.get(k) != getattr(task, k) for k in ("task_id", "measurement", "point_hash", "replication", "seed")):
        return False
    return all(_same(row.get(k), float(x) if k == "load" else x) for k, x in task.params.items())


def read_part(path: Path, task: Task | None = None) -> dict | None:
    """The row of a part file; None if unreadable, not one row, or not ``task``'s result."""
    import pyarrow.parquet as pq

    try:
        rows = table_rows(pq.read_table(path))
    except Exception:
        return None
    if len(rows) != 1:
        return None
    row = current_names(rows[0])  # a row stored as engine "event" is the event engine's
    return None if task is not None and not part_matches(task, row) else row


# =========================================================================== reading
def _format_error(out_dir: PathLike, fmt: object) -> SweepDirError:
    return SweepDirError(
        f"{out_dir} holds a sweep in the old format {fmt} (arrays as JSON text); convert it "
        f"with `supermarket sweep --upgrade {out_dir}` (or run the sweep again into a new --out)"
    )


# the sidecar's fields and their JSON types (a hand-edited sidecar is refused in one line)
_SIDECAR_TYPES = {"format": (int,), "sweep_name": (str,), "sweep_file": (str, type(None)), "sweep_text": (str,)}
_SIDECAR_TYPES |= {"sweep_sha256": (str,), "seed": (int,), "tasks_total": (int,), "status": (str,), "runs": (list,)}
_SIDECAR_TYPES |= {"task_seconds": (dict,), "points": (list,), "failures": (list,)}
_TYPE_WORDS = {int: "an integer", str: "a string", type(None): "null", list: "a list", dict: "an object"}


def _check_sidecar_types(path: PathLike, side: dict) -> None:
    for key, types in _SIDECAR_TYPES.items():
        if key in side and (not isinstance(side[key], types) or isinstance(side[key], bool)):
            want = " or ".join(_TYPE_WORDS[t] for t in types)
            raise SweepDirError(
                f"{path}: field {key!r} must be {want}, not {type(side[key]).__name__} "
                f"{str(side[key])[:30]!r} (hand-edited?); not a usable sweep directory"
            )
    for key in ("runs", "points", "failures"):
        if any(not isinstance(x, dict) for x in side.get(key, [])):
            raise SweepDirError(
                f"{path}: field {key!r} must be a list of objects (hand-edited?); not a usable sweep directory"
            )
    for p in side.get("points", []):
        if not isinstance(p.get("params", {}), dict):
            raise SweepDirError(
                f"{path}: a point's 'params' must be an object (hand-edited?); not a usable sweep directory"
            )


def read_sidecar(out_dir: PathLike, *, check_format: bool = True) -> dict:
    """The sidecar ``sweep.json`` of a sweep directory (a dict).

    Parameters
    ----------
    out_dir : str or path-like
    check_format : bool, default True
        Refuse a directory of another format.

    Returns
    -------
    dict

    Raises
    ------
    SweepDirError
        No sidecar, an unreadable one, or (``check_format``) another format.

    Examples
    --------
    >>> import tempfile, pathlib; from supermarket.sweep import parse_sweep, run_sweep
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "out"
    >>> sweep = parse_sweep('[[run]]\\nmeasurement = "theory"\\nn = 100\\nd = [2, 3]\\nload = 0.9\\n')
    >>> _ = run_sweep(sweep, out, workers=1)
    >>> read_sidecar(out)["tasks_total"]
    2
    >>> import shutil; shutil.rmtree(out.parent)
    """
    path = Path(out_dir) / SIDECAR_FILE
    if not path.exists():
        raise SweepDirError(f"{out_dir}: no {SIDECAR_FILE}: not a sweep directory")
    try:
        side = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SweepDirError(f"{path} is unreadable ({exc}); not a usable sweep directory") from None
    if not isinstance(side, dict):
        raise SweepDirError(f"{path} is not a sweep sidecar")
    _check_sidecar_types(path, side)
    fmt = side.get("format", 1)
    if check_format and fmt != FORMAT_VERSION:
        if isinstance(fmt, int) and fmt < FORMAT_VERSION:
            raise _format_error(out_dir, fmt)
        raise SweepDirError(f"{out_dir} was written by a newer supermarket (format {fmt}); upgrade supermarket")
    return side


def read_results(out_dir: PathLike, *, partial: bool = False) -> pa.Table:
    """The results table of a sweep directory (a :class:`pyarrow.Table`).

    Parameters
    ----------
    out_dir : str or path-like
    partial : bool, default False
        Without ``results.parquet`` (a sweep running or interrupted), read the finished parts.

    Returns
    -------
    pyarrow.Table

    Raises
    ------
    SweepDirError
        Not a sweep directory, or no results (and, with ``partial``, no finished task).

    Examples
    --------
    >>> import tempfile, pathlib; from supermarket.sweep import parse_sweep, run_sweep
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "out"
    >>> sweep = parse_sweep('[[run]]\\nmeasurement = "theory"\\nn = 100\\nd = [2, 3]\\nload = 0.9\\n')
    >>> _ = run_sweep(sweep, out, workers=1)
    >>> read_results(out).num_rows
    2
    >>> import shutil; shutil.rmtree(out.parent)
    """
    import pyarrow.parquet as pq

    out = Path(out_dir)
    read_sidecar(out)
    path = out / RESULTS_FILE
    if path.exists():
        return pq.read_table(path)
    parts = sorted((out / PARTS_DIR).glob("*.parquet")) if partial else []
    rows = [r for r in (read_part(p) for p in parts) if r is not None]
    if not rows:
        raise SweepDirError(
            f"{out_dir}: no {RESULTS_FILE} and no finished task (run `supermarket sweep FILE --out {out_dir}` first)"
        )
    rows.sort(key=lambda r: r["task_index"])
    return to_table(rows, ID_COLUMNS)


# =========================================================================== the directory
def _git_commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


_POINT_FIELDS = ("point", "measurement", "params", "point_hash", "replications", "seed")


def sidecar(sweep: Sweep, state: dict) -> dict:
    from .. import __version__

    return {
        "format": FORMAT_VERSION,
        "package": "supermarket",
        "package_version": __version__,
        "git_commit": _git_commit(),
        "python": sys.version.split()[0],
        "sweep_name": sweep.name,
        "sweep_file": sweep.path,
        "sweep_text": sweep.text,
        "sweep_text_sha256": sweep.text_sha256,
        "sweep_sha256": sweep.sweep_sha256,
        "seed": sweep.seed,
        "seed_rule": SEED_RULE,
        "tasks_total": len(sweep.tasks),
        "points": [{k: getattr(t, k) for k in _POINT_FIELDS} for t in sweep.tasks if t.replication == 0],
        **state,
    }


def write_sidecar(out: Path, side: dict) -> None:
    atomic_write(out / SIDECAR_FILE, json.dumps(side, indent=1).encode())


def _stale(name: str) -> bool:
    return name.startswith(".") and (name.endswith(".tmp") or name.startswith(".supermarket-probe-"))


def _clean_creations(out: Path) -> None:
    """Remove the half-built directories ``.<name>.creating-<pid>-*`` of dead processes."""
    for p in out.parent.glob(f".{out.name}.creating-*"):
        try:
            pid = int(p.name.rsplit(".creating-", 1)[1].split("-", 1)[0])
            os.kill(pid, 0)
            continue  # still being built by a live process
        except ProcessLookupError:
            shutil.rmtree(p, ignore_errors=True)
        except (ValueError, IndexError, PermissionError, OSError):
            continue


def _populate(d: Path, sweep: Sweep) -> None:
    write_sidecar(d, sidecar(sweep, {"status": "created", "runs": [], "task_seconds": {}}))
    atomic_write(d / SWEEP_COPY, sweep.text.encode())
    (d / PARTS_DIR).mkdir(exist_ok=True)


def prepare_dir(sweep: Sweep, out: Path) -> dict:
    """Create the sweep directory atomically, or check an existing one; returns the previous sidecar
    (``{}`` for a new one).  Refuses another sweep's directory, a non-empty non-sweep one, an old format."""
    check_output_dir(out)
    if not out.exists():
        _clean_creations(out)
        tmp = out.parent / f".{out.name}.creating-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            _populate(tmp, sweep)
            os.rename(tmp, out)
            return {}
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not out.is_dir():
                raise
            # another process created --out first (two sweeps started at once): check its
            # directory as any existing one; the lock then tells whether that sweep runs
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    entries = [p for p in out.iterdir() if not _stale(p.name) and p.name != LOCK_FILE]
    side = out / SIDECAR_FILE
    if not entries:
        _populate(out, sweep)  # the sidecar first: from then on, the directory is this sweep's
        return {}
    if not side.exists():
        # a directory left by an older version killed before it wrote the sidecar: resume
        # it when it holds only this sweep's file and parts
        names = {p.name for p in entries}
        copy = out / SWEEP_COPY
        if names <= {SWEEP_COPY, PARTS_DIR} and copy.exists():
            from .spec import SweepFileError, parse_sweep

            try:
                same = parse_sweep(copy.read_text(encoding="utf-8"), str(copy)).sweep_sha256 == sweep.sweep_sha256
            except (SweepFileError, OSError, UnicodeDecodeError):
                same = False
            if same:
                _populate(out, sweep)
                return {}
        raise SweepDirError(
            f"--out {out} is not empty and holds no {SIDECAR_FILE}: refusing to write a "
            "sweep into it; choose a new or empty directory"
        )
    old = read_sidecar(out)
    if old.get("sweep_sha256") != sweep.sweep_sha256:
        raise SweepDirError(
            f"--out {out} holds results of a different sweep ({old.get('sweep_file', '?')}, "
            f"hash {str(old.get('sweep_sha256'))[:12]}) than {sweep.path} (hash {sweep.sweep_sha256[:12]}); "
            "refusing to mix them: choose another --out"
        )
    (out / PARTS_DIR).mkdir(exist_ok=True)
    if not (out / SWEEP_COPY).exists():
        atomic_write(out / SWEEP_COPY, sweep.text.encode())
    return old


class SweepLock:
    """An exclusive ``flock`` of ``<out>/.lock`` while a sweep runs there (released by the kernel when
    the process dies): a second sweep on the same ``--out`` is refused in one line."""

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self.fd: int | None = None

    def acquire(self) -> SweepLock:
        import fcntl

        path = self.out / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.read(fd, 64).decode("ascii", "replace").strip()
            except OSError:
                holder = ""
            os.close(fd)
            who = f" (process {holder})" if holder.isdigit() else ""
            raise SweepDirError(
                f"--out {self.out} is in use by another sweep running now{who}; wait for it "
                "to finish (then run the same command to resume) or choose another --out"
            ) from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor releases the flock
            self.fd = None

    def __enter__(self) -> SweepLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def clean_stale(out: Path) -> None:
    """Remove temporary files left by a killed run (they are never read)."""
    for d in (out, out / PARTS_DIR):
        for p in d.glob(".*"):
            if _stale(p.name) and p.is_file():
                p.unlink(missing_ok=True)


# =========================================================================== format upgrade
def _decode_json_text(rows: list[dict]) -> list[dict]:
    """Format 1 -> 2: the columns whose every value is JSON text of an array or a mapping."""
    cols = {k for r in rows for k in r if k not in ID_COLUMNS}
    for c in cols:
        vals = [r.get(c) for r in rows if r.get(c) is not None]
        if not vals or not all(isinstance(x, str) and x[:1] in "[{" for x in vals):
            continue
        try:
            parsed = [None if r.get(c) is None else json.loads(r[c]) for r in rows]
        except ValueError:
            continue
        for r, x in zip(rows, parsed):
            if c in r:
                r[c] = x
    return rows


def upgrade(out_dir: PathLike) -> int:
    """Convert a sweep directory of format 1 (arrays as JSON text) in place, file by file.

    Parameters
    ----------
    out_dir : str or path-like

    Returns
    -------
    int
        The number of files rewritten (0 when already current).

    Examples
    --------
    >>> import tempfile, pathlib; from supermarket.sweep import parse_sweep, run_sweep
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "out"
    >>> sweep = parse_sweep('[[run]]\\nmeasurement = "theory"\\nn = 100\\nd = [2, 3]\\nload = 0.9\\n')
    >>> _ = run_sweep(sweep, out, workers=1)
    >>> upgrade(out)  # already current
    0
    >>> import shutil; shutil.rmtree(out.parent)

    Raises
    ------
    SweepDirError
        Not a sweep directory, or one written by a newer version.
    """
    import pyarrow.parquet as pq

    out = Path(out_dir)
    side = read_sidecar(out, check_format=False)
    fmt = side.get("format", 1)
    if fmt == FORMAT_VERSION:
        return 0
    if not isinstance(fmt, int) or fmt > FORMAT_VERSION:
        raise SweepDirError(f"{out} was written by a newer supermarket (format {fmt}); upgrade supermarket")
    files = sorted((out / PARTS_DIR).glob("*.parquet")) + [out / RESULTS_FILE]
    done = 0
    for f in files:
        if not f.exists():
            continue
        try:
            rows = pq.read_table(f).to_pylist()
        except Exception as exc:
            if f.parent.name == PARTS_DIR:
                f.unlink(missing_ok=True)
                continue
            raise SweepDirError(f"{f} is unreadable ({type(exc).__name__}); run the sweep again") from None
        _atomic_write_table(f, to_table(_decode_json_text(rows), ID_COLUMNS))
        done += 1
    side["format"] = FORMAT_VERSION
    side.setdefault("upgrades", []).append({"from_format": fmt, "to_format": FORMAT_VERSION})
    write_sidecar(out, side)
    return done
