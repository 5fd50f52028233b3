"""The sweep file (docs/sweep.md): TOML validated in full before anything runs, every error listed
at once with its line and key; the grid expands into tasks (a grid point and a replication each)."""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import re
import tomllib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..result import Result, frame
from . import values as vals

if TYPE_CHECKING:
    import pandas as pd
from .measurements import REGISTRY
from .points import stored_identity
from .seeds import canonical_hash as _canonical_hash

__all__ = ["SweepFileError", "Task", "Sweep", "load_sweep", "parse_sweep", "FORMAT_VERSION", "SWEEP_KEYS", "MAX_TASKS"]

FORMAT_VERSION = 2  # 1: arrays stored as JSON strings; 2: Arrow list and map columns
CANONICAL_FORMAT = 1  # enters the canonical hash of a sweep: unchanged, so old hashes still match
#: The most tasks (grid points × replications) one sweep may hold: each is a part file and a row.
MAX_TASKS = 10**6
SWEEP_KEYS: dict[str, vals.Checker] = {
    "name": vals.text,
    "description": vals.text,
    "seed": vals.seed,
    "replications": vals.count,
}


class SweepFileError(ValueError):
    """A sweep file with one or more errors; ``errors`` lists them all (one line each).

    Examples
    --------
    >>> e = SweepFileError("runs.toml", ["line 3: n must be a positive integer", "line 4: unknown key 'x'"])
    >>> isinstance(e, ValueError), e.path, len(e.errors)
    (True, 'runs.toml', 2)
    >>> print(e)
    runs.toml: 2 errors in sweep file:
      line 3: n must be a positive integer
      line 4: unknown key 'x'
    """

    def __init__(self, path: str, errors: list[str]):
        self.path = path
        self.errors = list(errors)
        head = f"{path}: {len(errors)} error{'s' if len(errors) != 1 else ''} in sweep file"
        super().__init__(head + ":\n  " + "\n  ".join(self.errors))


_SPEC_FIELDS = ("task_id", "measurement", "params", "point_hash", "replication", "replications", "seed")


@dataclass(frozen=True)
class Task:
    """One grid point and one replication: one row of the results table.

    Attributes
    ----------
    index, point, block : int
        Position in grid order, grid point, ``[[run]]`` block.
    measurement : str
    params : dict
        Canonical parameters (defaults filled in).
    point_hash : str
        Hex SHA-256 of the canonical parameters (the seed depends on it, not on the order).
    replication, replications : int
    seed : int
        The sweep's (or the block's) seed.

    Examples
    --------
    >>> t = parse_sweep('[[run]]\\nmeasurement = "theory"\\nn = 100\\nd = 2\\nload = 0.9\\n').tasks[0]
    >>> t.task_id.startswith("theory-"), t.params["d"]
    (True, 2)
    """

    index: int
    point: int
    block: int
    measurement: str
    params: dict
    point_hash: str
    replication: int
    replications: int
    seed: int

    @property
    def task_id(self) -> str:
        return f"{self.measurement}-{self.point_hash[:16]}-r{self.replication}"

    def spec(self) -> dict:
        """Plain-data description sent to a worker (picklable, no numpy)."""
        return {k: getattr(self, k) for k in _SPEC_FIELDS} | {"params": dict(self.params)}


@dataclass(frozen=True)
class Sweep(Result):
    """A validated sweep file and its tasks (from :func:`load_sweep` or :func:`parse_sweep`).

    Attributes
    ----------
    path, text : str
        Where it came from and its text.
    text_sha256, sweep_sha256 : str
        Hashes of the text and of the parsed, canonical sweep (layout and comments do not count).
    name : str
    seed : int
    tasks : tuple of Task
        In grid order.
    blocks : tuple of dict
        The parsed ``[[run]]`` blocks.

    Examples
    --------
    >>> s = parse_sweep('[[run]]\\nmeasurement = "theory"\\nn = 100\\nd = [2, 3]\\nload = 0.9\\n')
    >>> s.points, len(s.to_frame()), s.summary().splitlines()[0]
    (2, 2, 'sweep <sweep>: 2 grid points, 2 tasks, seed 0')
    """

    path: str
    text: str
    text_sha256: str
    sweep_sha256: str
    name: str
    seed: int
    tasks: tuple[Task, ...]
    blocks: tuple[dict, ...] = field(repr=False, default=())

    @property
    def points(self) -> int:
        """Number of grid points."""
        return len({t.point for t in self.tasks})

    def to_dict(self) -> dict:
        """JSON-safe: name, path, hashes, seed, the counts and each task's ``spec()``."""
        head = {k: getattr(self, k) for k in ("name", "path", "text_sha256", "sweep_sha256", "seed", "points")}
        return head | {"tasks": [t.spec() for t in self.tasks]}

    def to_frame(self) -> pd.DataFrame:
        """One row per task: ``task_id``, ``measurement``, ``point``, ``replication``, the parameters."""
        ids = ("task_id", "measurement", "point", "replication")
        return frame([{k: getattr(t, k) for k in ids} | t.params for t in self.tasks])

    def summary(self) -> str:
        """Plain text: the counts, then the tasks per measurement."""
        per = Counter(t.measurement for t in self.tasks)  # in the order first seen
        return "\n".join(
            [f"sweep {self.name}: {self.points} grid points, {len(self.tasks)} tasks, seed {self.seed}"]
            + [f"  {m}: {k} task(s)" for m, k in per.items()]
        )


# --------------------------------------------------------------------------- line numbers
_HEADER = re.compile(r"^\s*\[\[\s*([A-Za-z0-9_.\-]+)\s*\]\]")
_TABLE = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\-]+)\s*\]")
_KEYLINE = re.compile(r"^\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_\-]+)\s*=")
_STRINGS = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'[^']*'")


def _key_lines(text: str) -> dict:
    """``(section, block index or None, key or None) -> line``, by scanning the text (tomllib has no positions)."""
    where: dict = {}
    section, idx = None, None
    counts: dict = {}
    depth = 0  # inside a multi-line array or inline table
    for no, line in enumerate(text.splitlines(), start=1):
        bare = _STRINGS.sub('""', line).split("#", 1)[0]
        if depth == 0:
            m = _HEADER.match(bare)
            if m:
                section = m.group(1)
                idx = counts.get(section, 0)
                counts[section] = idx + 1
                where[(section, idx, None)] = no
                continue
            m = _TABLE.match(bare)
            if m:
                section, idx = m.group(1), None
                where[(section, None, None)] = no
                continue
            m = _KEYLINE.match(bare)
            if m:
                where.setdefault((section, idx, m.group(1).strip("\"'")), no)
        depth = max(0, depth + bare.count("[") + bare.count("{") - bare.count("]") - bare.count("}"))
    return where


# --------------------------------------------------------------------------- parsing
def load_sweep(path: str | os.PathLike[str], *, max_tasks: int | None = None) -> Sweep:
    """Read and validate a sweep file; raise :class:`SweepFileError` listing every error.

    Parameters
    ----------
    path : str or path-like
        A TOML sweep file.
    max_tasks : int, optional
        As in :func:`parse_sweep`.

    Returns
    -------
    Sweep
        The validated sweep, read as :func:`parse_sweep` reads text.

    Raises
    ------
    SweepFileError
        A missing or unreadable file, or any error in it (all listed, with lines).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "s.toml"
    >>> _ = f.write_text('[[run]]\\nmeasurement = "theory"\\nn = 100\\nd = 2\\nload = 0.9\\n')
    >>> len(load_sweep(f).tasks)
    1
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SweepFileError(str(path), ["file not found"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SweepFileError(str(path), [f"cannot read: {exc}"]) from None
    return parse_sweep(text, path=str(path), max_tasks=max_tasks)


def parse_sweep(text: str, path: str = "<sweep>", *, max_tasks: int | None = None) -> Sweep:
    """Validate the TOML text of a sweep file and expand its grid into tasks.

    Parameters
    ----------
    text : str
        The TOML text.
    path : str, default "<sweep>"
        A name for messages and the sidecar.
    max_tasks : int, optional
        Refuse a sweep with more tasks (counted before the grid is built); at most :data:`MAX_TASKS`.

    Returns
    -------
    Sweep
        The validated sweep with its grid expanded into tasks.

    Raises
    ------
    SweepFileError
        Every problem of the file, at once, each as ``line L: key: message``.

    Examples
    --------
    >>> parse_sweep('[[run]]\\nmeasurement = "theory"\\nn = 100\\nd = [2, 3]\\nload = 0.9\\n').points
    2
    >>> try:
    ...     parse_sweep('[[run]]\\nmeasurement = "theory"\\nn = 0\\nd = 2\\nload = 1.5\\n')
    ... except SweepFileError as e:
    ...     len(e.errors)
    2
    """
    if max_tasks is not None:
        max_tasks = vals.count("max_tasks", max_tasks)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SweepFileError(path, [f"not valid TOML: {exc}"]) from None
    except RecursionError:  # arrays or tables nested thousands deep
        why = "arrays or tables nested too deeply (a sweep file needs at most one level of lists)"
        raise SweepFileError(path, [f"not a usable sweep file: {why}"]) from None
    lines = _key_lines(text)
    errors: list[str] = []

    def err(section: str | None, idx: int | None, key: str | None, msg: str) -> None:
        no = lines.get((section, idx, key)) or lines.get((section, idx, None))
        label = section if idx is None else f"{section}[{idx + 1}]"
        where = f"{label}.{key}" if key else label
        errors.append(f"line {no}: {where}: {msg}" if no else f"{where}: {msg}")

    for key in data:
        if key not in ("sweep", "run"):
            err(None, None, key, f"unknown top-level key {key!r}; expected a [sweep] table and [[run]] blocks")
    head = data.get("sweep", {})
    if not isinstance(head, dict):
        err(None, None, "sweep", "must be a table: [sweep]")
        head = {}
    name = head.get("name", Path(path).stem)
    seed, replications = 0, 1
    for key, value in head.items():
        if key not in SWEEP_KEYS:
            err("sweep", None, key, f"unknown key {key!r}; valid keys: {', '.join(sorted(SWEEP_KEYS))}")
            continue
        try:
            checked = SWEEP_KEYS[key](key, value)
        except (TypeError, ValueError) as exc:
            msg = f"must be a string; got {value!r} ({type(value).__name__})"
            err("sweep", None, key, str(exc) if key in ("seed", "replications") else msg)
            continue
        if key == "seed":
            seed = checked
        elif key == "replications":
            replications = checked

    runs = data.get("run")
    if runs is None:
        errors.append('no [[run]] block: a sweep needs at least one, e.g. [[run]] measurement = "simulate"')
        runs = []
    elif not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        err(None, None, "run", "must be an array of tables written [[run]]")
        runs = []

    tasks: list[Task] = []
    blocks: list[dict] = []
    seen: dict[str, int] = {}
    point = 0
    checked = [_check_block(b, block, seed, replications, err) for b, block in enumerate(runs)]
    # the size of the grid, counted before it is built (a 10^7-point grid or 10^12
    # replications are refused at once, not after minutes of expansion)
    limit = MAX_TASKS if max_tasks is None else min(max_tasks, MAX_TASKS)
    count = sum(c[4] for c in checked if c[4] is not None)
    if count > limit:
        if max_tasks is not None and count <= MAX_TASKS:
            why = f"more than --max-tasks {max_tasks}"
        else:
            why = f"more than the {MAX_TASKS:,} a sweep may hold; split it into several sweeps"
        raise SweepFileError(path, [f"the sweep has {count:,} tasks (grid points × replications), {why}"])
    for b, c in enumerate(checked):
        points, block_seed, block_reps, canon = _expand_block(b, c, err)
        blocks.append(canon)
        for params in points:
            h = _canonical_hash({"measurement": canon["measurement"], **stored_identity(params)})
            same = _canonical_hash({"measurement": canon["measurement"], **_normalised(canon["measurement"], params)})
            if same in seen:
                again = f"repeats one of run[{seen[same] + 1}] (the same values, perhaps written differently)"
                err("run", b, None, f"grid point {_short(params)} {again}; each grid point may appear once")
                continue
            seen[same] = b
            reps = 1 if REGISTRY[canon["measurement"]].deterministic else block_reps
            for r in range(reps):
                tasks.append(Task(len(tasks), point, b, canon["measurement"], params, h, r, reps, block_seed))
            point += 1
    if errors:
        raise SweepFileError(path, sorted(errors, key=_line_of))
    if not tasks:
        raise SweepFileError(path, ["the grid is empty: no task to run"])
    canon_all = {"format": CANONICAL_FORMAT, "name": str(name), "seed": seed, "replications": replications}
    canon_all["runs"] = blocks
    text_sha256, sweep_sha256 = hashlib.sha256(text.encode()).hexdigest(), _canonical_hash(canon_all)
    return Sweep(path, text, text_sha256, sweep_sha256, str(name), seed, tuple(tasks), tuple(blocks))


def _line_of(msg: str) -> int:
    m = re.match(r"line (\d+):", msg)
    return int(m.group(1)) if m else 0


def _short(params: dict) -> str:
    return ", ".join(f"{k}={x}" for k, x in params.items())


_Err = Callable[[str | None, int | None, str | None, str], None]  # err(section, index, key, message)


def _normalised(measurement: str, params: dict) -> dict:
    """The values of a grid point as the library reads them, for the duplicate check (docs/sweep.md, "Duplicates")."""
    from ..model import exact_load
    from ..system.states import parse_start

    p = dict(REGISTRY[measurement].defaults) | dict(params)
    if measurement == "mixing":
        p.setdefault("replace", True)
    for k, x in list(p.items()):
        if k == "load":
            q = exact_load(x)
            p[k] = f"{q.numerator}/{q.denominator}"
        elif k == "start" and isinstance(x, str):
            name, value = parse_start(x)
            p[k] = name if value is None else f"{name}:{value}"
    return {k: p[k] for k in sorted(p)}


def _check_block(b: int, block: dict, seed: int, replications: int, err: _Err) -> tuple:
    """Validate one [[run]] block; return ``(spec, axes, seed, replications, task count, canonical block, bad)``."""
    names = ", ".join(REGISTRY)
    meas = block.get("measurement")
    if meas is None:
        err("run", b, None, f"missing key 'measurement' (one of {names})")
        return None, {}, seed, replications, None, {"measurement": None}, True
    if not isinstance(meas, str) or meas.strip().lower() not in REGISTRY:
        err("run", b, "measurement", f"must be one of {names}; got {meas!r}")
        return None, {}, seed, replications, None, {"measurement": None}, True
    meas = meas.strip().lower()
    spec = REGISTRY[meas]
    axes: dict[str, list] = {}
    bad = False
    block_seed, block_reps = seed, replications

    def fail(key: str | None, msg: str) -> None:
        nonlocal bad
        err("run", b, key, msg)
        bad = True

    for key, raw in block.items():
        if key == "measurement":
            continue
        if key in ("seed", "replications"):
            try:
                value = SWEEP_KEYS[key](key, raw)
            except (TypeError, ValueError) as exc:
                fail(key, str(exc))
                continue
            if key == "seed":
                block_seed = value
            else:
                block_reps = value
                if spec.deterministic and value != 1:
                    fail(key, f"measurement {meas!r} is deterministic: replications must be 1")
            continue
        if key not in spec.keys:
            valid = ", ".join(["measurement", "replications", "seed", *spec.keys])
            fail(key, f"unknown key {key!r} for measurement {meas!r}; valid keys: {valid}")
            continue
        values = raw if isinstance(raw, list) else [raw]
        if not values:
            fail(key, "an empty list gives an empty grid; give at least one value")
            continue
        out = []
        for j, x in enumerate(values):
            try:
                out.append(spec.keys[key](key if not isinstance(raw, list) else f"{key}[{j}]", x))
            except (TypeError, ValueError) as exc:
                fail(key, str(exc))
        axes[key] = out

    spec.rules(axes, fail)
    canon = {"measurement": meas, "seed": block_seed, "replications": block_reps}
    canon["axes"] = {k: axes[k] for k in sorted(axes)}
    count = math.prod(len(x) for x in axes.values()) * (1 if spec.deterministic else block_reps)
    return spec, axes, block_seed, block_reps, count, canon, bad


def _expand_block(b, checked, err):
    """Expand a :func:`_check_block` result into ``(grid points, seed, replications, canonical block)``."""
    spec, axes, block_seed, block_reps, _, canon, bad = checked
    if bad:
        return [], block_seed, block_reps, canon
    keys = list(axes)
    points = []
    errs_seen = set()
    for combo in itertools.product(*(axes[k] for k in keys)):
        params = dict(zip(keys, combo))
        try:
            params = spec.derive(params)
        except (TypeError, ValueError, ArithmeticError) as exc:
            msg = str(exc)
            if msg not in errs_seen:
                errs_seen.add(msg)
                err("run", b, getattr(exc, "key", None), f"grid point {_short(params)}: {msg}")
            continue
        points.append(params)
    return points, block_seed, block_reps, canon
