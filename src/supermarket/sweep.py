"""Parameter sweeps: a TOML grid of measurements, run locally or on a Dask cluster, stored
as one tidy Parquet table that survives interruption.

The layers, each independent of the others:

1. **Sweep file** (:func:`load_sweep`): TOML read with :mod:`tomllib`, validated in full
   before anything runs; every error is listed at once with its line and key
   (:class:`SweepFileError`).  The grid expands into *tasks*: one task is one grid point
   and one replication, and gives one row of the results table.
2. **Measurements** (:data:`MEASUREMENTS`): one small adapter per measurement
   (``theory``, ``meanfield``, ``simulate``, ``mixing``, ``fluctuations``) taking a task's
   parameters and a :class:`numpy.random.SeedSequence` and returning a flat dict of scalars
   (lists and irregular mappings as JSON strings).
3. **Seeds**: a grid point's root seed is ``SeedSequence(sweep_seed, spawn_key=(h0, h1))``
   with ``h0, h1`` two 32-bit words of the SHA-256 of its canonical parameters; replication
   ``r`` is child ``r`` of that root (:func:`supermarket.model.spawn_seeds`).  A task's
   numbers therefore depend only on the sweep seed and the task itself, never on the
   backend, the number of workers, the order of execution or the other grid points.
4. **Execution** (:func:`run_sweep`): in this process (``workers=1``), a local process pool,
   or an existing Dask cluster (``scheduler="tcp://host:port"``); the same task function
   :func:`run_task` everywhere.  A failing task is recorded with its error and the others go on.
5. **Storage**: each finished task is written to its own part file
   (``parts/<task_id>.parquet``) through a temporary file and :func:`os.replace`, so a part
   file either exists whole or not at all.  Running the same command again skips the
   finished tasks (failed ones are tried again), and the parts are consolidated, again
   atomically, into ``results.parquet``, in grid order: a sweep killed at any moment (SIGKILL
   included) and resumed ends with exactly the rows of an uninterrupted run.  ``sweep.json``
   (the sidecar) records the package version, the git commit, the sweep file's text and
   hashes, the seeds and the timings.  A directory made by a different sweep is refused.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import itertools
import json
import math
import numbers
import os
import re
import subprocess
import sys
import time
import tomllib
import traceback
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path

import numpy as np

from .model import Params, check_load, parse_count, spawn_seeds

__all__ = [
    "SweepFileError",
    "Task",
    "Sweep",
    "MEASUREMENTS",
    "MEASUREMENT_KEYS",
    "load_sweep",
    "parse_sweep",
    "task_seed",
    "run_task",
    "run_sweep",
    "SweepOutcome",
    "read_results",
    "read_sidecar",
    "TIMING_COLUMNS",
    "SweepDirError",
    "SchedulerError",
]

FORMAT_VERSION = 1
RESULTS_FILE = "results.parquet"
SIDECAR_FILE = "sweep.json"
SWEEP_COPY = "sweep.toml"
PARTS_DIR = "parts"
# Columns whose values depend on the machine and the moment, not on the seeds.
ID_COLUMNS = ("sweep", "task_id", "task_index", "point", "measurement", "replication", "replications",
              "seed", "point_hash", "status", "error")
TIMING_COLUMNS = ("wall_seconds", "wall_time", "events_per_second", "seconds", "sim_seconds",
                  "sim_events_per_second", "limit_seconds")


class SweepFileError(ValueError):
    """A sweep file with one or more errors; ``errors`` lists them all (one line each)."""

    def __init__(self, path: str, errors: list[str]):
        self.path = path
        self.errors = list(errors)
        head = f"{path}: {len(errors)} error{'s' if len(errors) != 1 else ''} in sweep file"
        super().__init__(head + ":\n  " + "\n  ".join(self.errors))


class SweepDirError(ValueError):
    """The output directory cannot be used for this sweep."""


class SchedulerError(RuntimeError):
    """The Dask scheduler cannot be reached or used."""


# =========================================================================== value types
# Each checker takes (key, value) and returns the canonical value or raises ValueError /
# TypeError with a message that names the key.
def _count(key, v):
    if isinstance(v, bool) or not isinstance(v, (numbers.Real, str)):
        raise TypeError(f"{key} must be a positive integer such as 1000 or 1e5; got {v!r} ({type(v).__name__})")
    if isinstance(v, float) and (not math.isfinite(v) or v != int(v)):
        raise ValueError(f"{key} must be a positive integer such as 1000 or 1e5; got {v!r}")
    return parse_count(key, v if not isinstance(v, float) else int(v))


def _count0(key, v):
    if isinstance(v, numbers.Integral) and not isinstance(v, bool) and v == 0:
        return 0
    if isinstance(v, float) and v == 0.0:
        return 0
    return _count(key, v)


def _load(key, v):
    if isinstance(v, bool) or not isinstance(v, (numbers.Real, str)):
        raise TypeError(f"{key} must be a number in (0, 1) (a float or a string such as \"0.999\"); got {v!r} ({type(v).__name__})")
    check_load(v if not isinstance(v, str) else v.strip(), name=key)
    return v.strip() if isinstance(v, str) else float(v)


def _real(key, v, *, positive=False, minimum=None, maximum=None):
    if isinstance(v, bool) or not isinstance(v, (numbers.Real, str)):
        raise TypeError(f"{key} must be a number; got {v!r} ({type(v).__name__})")
    try:
        x = float(Decimal(v.strip())) if isinstance(v, str) else float(v)
    except (InvalidOperation, ValueError):
        raise TypeError(f"{key} must be a number; got {v!r}") from None
    if not math.isfinite(x) or (positive and x <= 0) or (minimum is not None and x < minimum) or \
            (maximum is not None and x > maximum):
        rng = "a positive finite number" if positive else "a finite number"
        if minimum is not None or maximum is not None:
            rng += f" in [{minimum if minimum is not None else '-inf'}, {maximum if maximum is not None else 'inf'}]"
        raise ValueError(f"{key} must be {rng}; got {v!r}")
    return x


def _positive(key, v):
    return _real(key, v, positive=True)


def _nonneg(key, v):
    return _real(key, v, minimum=0.0)


def _exponent(key, v):
    x = _real(key, v, positive=True)
    return x


def _bool(key, v):
    if not isinstance(v, bool):
        raise TypeError(f"{key} must be true or false; got {v!r} ({type(v).__name__})")
    return v


def _choice(*options):
    def check(key, v):
        if not isinstance(v, str):
            raise TypeError(f"{key} must be one of {', '.join(options)}; got {v!r} ({type(v).__name__})")
        s = v.strip().lower()
        if s not in options:
            raise ValueError(f"{key} must be one of {', '.join(options)}; got {v!r}")
        return s
    check.options = options  # type: ignore[attr-defined]
    return check


def _start(key, v):
    from .states import parse_start

    if not isinstance(v, str):
        raise TypeError(f"{key} must be a start such as \"empty\", \"good\", \"customers:3\" or \"long:20\"; got {v!r}")
    parse_start(v)
    return v.strip()


def _text(key, v):
    if not isinstance(v, str):
        raise TypeError(f"{key} must be a string; got {v!r} ({type(v).__name__})")
    return v


# =========================================================================== measurements
_GRID_NDL = {
    "n": _count,
    "d": _count,
    "load": _load,
    "alpha": _exponent,
    "beta": _exponent,
}

# key -> checker, for each measurement (besides "measurement", "replications", "seed").
MEASUREMENT_KEYS: dict[str, dict] = {
    "theory": dict(_GRID_NDL, eps=lambda k, v: _real(k, v, minimum=1e-12, maximum=0.1)),
    "meanfield": dict(_GRID_NDL),
    "simulate": dict(
        _GRID_NDL,
        steps=_count,
        time=_positive,
        burn_in=_count0,
        engine=_choice("profile", "queues", "buckets"),
        time_mode=_choice("discrete", "continuous"),
        replace=_bool,
        start=_start,
        eps=lambda k, v: _real(k, v, minimum=1e-12, maximum=0.1),
    ),
    "mixing": dict(_GRID_NDL, start=_start, max_steps=_count, burn_in=_count0, replace=_bool),
    "fluctuations": dict(
        n=_count,
        regime=_choice("a", "b", "c"),
        d=_count,
        kappa=_positive,
        theta=lambda k, v: _real(k, v, positive=True, maximum=0.5),
        c=_positive,
        zeta=_real,
        time=_positive,
        burn_in=_nonneg,
        replace=_bool,
        sde_paths=_count,
        sde_time=_positive,
        dt=_positive,
    ),
}
DETERMINISTIC = {"theory", "meanfield"}
SWEEP_KEYS = {"name": _text, "description": _text, "seed": None, "replications": None}


@dataclass(frozen=True)
class Task:
    """One grid point and one replication: one row of the results table."""

    index: int  # position in grid order (rows are written in this order)
    point: int  # index of the grid point
    block: int  # index of the [[run]] block it came from
    measurement: str
    params: dict  # canonical parameters (scalars), defaults filled in
    point_hash: str  # SHA-256 (hex) of the canonical parameters
    replication: int
    replications: int
    seed: int  # the entropy of the sweep (or block) seed

    @property
    def task_id(self) -> str:
        return f"{self.measurement}-{self.point_hash[:16]}-r{self.replication}"

    def seed_sequence(self) -> np.random.SeedSequence:
        return task_seed(self.seed, self.point_hash, self.replication)

    def spec(self) -> dict:
        """Plain-data description sent to a worker (picklable, no numpy)."""
        return {"task_id": self.task_id, "measurement": self.measurement, "params": dict(self.params),
                "point_hash": self.point_hash, "replication": self.replication,
                "replications": self.replications, "seed": self.seed}


@dataclass(frozen=True)
class Sweep:
    path: str
    text: str
    text_sha256: str
    sweep_sha256: str  # hash of the parsed, canonical sweep (comments and layout do not count)
    name: str
    seed: int
    tasks: tuple[Task, ...]
    blocks: tuple[dict, ...] = field(repr=False, default=())

    @property
    def points(self) -> int:
        return len({t.point for t in self.tasks})


def task_seed(sweep_seed: int, point_hash: str, replication: int) -> np.random.SeedSequence:
    """Seed of replication ``r`` of a grid point: child ``r`` of
    ``SeedSequence(sweep_seed, spawn_key=(h0, h1))``, ``h0, h1`` from the point's hash."""
    h = bytes.fromhex(point_hash[:16])
    root = np.random.SeedSequence(int(sweep_seed),
                                  spawn_key=(int.from_bytes(h[:4], "big"), int.from_bytes(h[4:], "big")))
    return spawn_seeds(root, replication + 1)[replication]


def _canonical_hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=True).encode()).hexdigest()


# --------------------------------------------------------------------------- line numbers
_HEADER = re.compile(r"^\s*\[\[\s*([A-Za-z0-9_.\-]+)\s*\]\]")
_TABLE = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\-]+)\s*\]")
_KEYLINE = re.compile(r"^\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_\-]+)\s*=")
_STRINGS = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'[^']*'")


def _key_lines(text: str) -> dict:
    """``(section, block index or None, key) -> line``, and ``(section, index, None)`` for the
    header lines, found by scanning the text (tomllib reports no positions)."""
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
def load_sweep(path) -> Sweep:
    """Read and validate a sweep file; raise :class:`SweepFileError` listing every error."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SweepFileError(str(path), ["file not found"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SweepFileError(str(path), [f"cannot read: {exc}"]) from None
    return parse_sweep(text, path=str(path))


def parse_sweep(text: str, path: str = "<sweep>") -> Sweep:
    """Validate the TOML text of a sweep file and expand its grid into tasks.

    Every problem found is collected; if there is any, :class:`SweepFileError` lists them
    all, each as ``line L: key: message``.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SweepFileError(path, [f"not valid TOML: {exc}"]) from None
    lines = _key_lines(text)
    errors: list[str] = []

    def err(section, idx, key, msg):
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
    for key, v in head.items():
        if key not in SWEEP_KEYS:
            err("sweep", None, key, f"unknown key {key!r}; valid keys: {', '.join(sorted(SWEEP_KEYS))}")
        elif key in ("name", "description") and not isinstance(v, str):
            err("sweep", None, key, f"must be a string; got {v!r} ({type(v).__name__})")
    if "seed" in head:
        try:
            seed = _seed("seed", head["seed"])
        except (TypeError, ValueError) as exc:
            err("sweep", None, "seed", str(exc))
    if "replications" in head:
        try:
            replications = _count("replications", head["replications"])
        except (TypeError, ValueError) as exc:
            err("sweep", None, "replications", str(exc))

    runs = data.get("run")
    if runs is None:
        errors.append("no [[run]] block: a sweep needs at least one, e.g. [[run]] measurement = \"simulate\"")
        runs = []
    elif not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        err(None, None, "run", "must be an array of tables written [[run]]")
        runs = []

    tasks: list[Task] = []
    blocks: list[dict] = []
    seen: dict[str, int] = {}
    point = 0
    for b, block in enumerate(runs):
        points, block_seed, block_reps, canon = _expand_block(b, block, seed, replications, err)
        blocks.append(canon)
        for params in points:
            h = _canonical_hash({"measurement": canon["measurement"], **params})
            if h in seen:
                err("run", b, None, f"grid point {_short(params)} repeats one of run[{seen[h] + 1}]; "
                    "each grid point may appear once")
                continue
            seen[h] = b
            reps = 1 if canon["measurement"] in DETERMINISTIC else block_reps
            for r in range(reps):
                tasks.append(Task(index=len(tasks), point=point, block=b, measurement=canon["measurement"],
                                  params=params, point_hash=h, replication=r, replications=reps,
                                  seed=block_seed))
            point += 1
    if errors:
        raise SweepFileError(path, sorted(errors, key=_line_of))
    if not tasks:
        raise SweepFileError(path, ["the grid is empty: no task to run"])
    canon_all = {"format": FORMAT_VERSION, "name": str(name), "seed": seed, "replications": replications,
                 "runs": blocks}
    return Sweep(path=path, text=text, text_sha256=hashlib.sha256(text.encode()).hexdigest(),
                 sweep_sha256=_canonical_hash(canon_all), name=str(name), seed=seed,
                 tasks=tuple(tasks), blocks=tuple(blocks))


def _line_of(msg: str) -> int:
    m = re.match(r"line (\d+):", msg)
    return int(m.group(1)) if m else 0


def _seed(key, v):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{key} must be an integer >= 0; got {v!r} ({type(v).__name__})")
    if v < 0:
        raise ValueError(f"{key} must be an integer >= 0; got {v}")
    return int(v)


def _short(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _expand_block(b, block, seed, replications, err):
    """Validate one [[run]] block; return (grid points, seed, replications, canonical block)."""
    meas = block.get("measurement")
    if meas is None:
        err("run", b, None, f"missing key 'measurement' (one of {', '.join(MEASUREMENT_KEYS)})")
        return [], seed, replications, {"measurement": None}
    if not isinstance(meas, str) or meas.strip().lower() not in MEASUREMENT_KEYS:
        err("run", b, "measurement", f"must be one of {', '.join(MEASUREMENT_KEYS)}; got {meas!r}")
        return [], seed, replications, {"measurement": None}
    meas = meas.strip().lower()
    schema = MEASUREMENT_KEYS[meas]
    axes: dict[str, list] = {}
    bad = False
    block_seed, block_reps = seed, replications
    for key, raw in block.items():
        if key == "measurement":
            continue
        if key == "seed":
            try:
                block_seed = _seed("seed", raw)
            except (TypeError, ValueError) as exc:
                err("run", b, key, str(exc)); bad = True
            continue
        if key == "replications":
            try:
                block_reps = _count("replications", raw)
                if meas in DETERMINISTIC and block_reps != 1:
                    err("run", b, key, f"measurement {meas!r} is deterministic: replications must be 1")
                    bad = True
            except (TypeError, ValueError) as exc:
                err("run", b, key, str(exc)); bad = True
            continue
        if key not in schema:
            err("run", b, key, f"unknown key {key!r} for measurement {meas!r}; valid keys: "
                f"{', '.join(['measurement', 'replications', 'seed', *schema])}")
            bad = True
            continue
        values = raw if isinstance(raw, list) else [raw]
        if not values:
            err("run", b, key, "an empty list gives an empty grid; give at least one value")
            bad = True
            continue
        out = []
        for j, v in enumerate(values):
            label = key if not isinstance(raw, list) else f"{key}[{j}]"
            try:
                out.append(schema[key](label, v))
            except (TypeError, ValueError) as exc:
                err("run", b, key, str(exc)); bad = True
        axes[key] = out
    bad |= _block_rules(meas, axes, lambda k, m: err("run", b, k, m))
    canon = {"measurement": meas, "seed": block_seed, "replications": block_reps,
             "axes": {k: axes[k] for k in sorted(axes)}}
    if bad:
        return [], block_seed, block_reps, canon
    keys = list(axes)
    points = []
    errs_seen = set()
    for combo in itertools.product(*(axes[k] for k in keys)):
        params = dict(zip(keys, combo))
        try:
            params = _derive(meas, params)
        except (TypeError, ValueError) as exc:
            msg = str(exc)
            if msg not in errs_seen:
                errs_seen.add(msg)
                err("run", b, None, f"grid point {_short(params)}: {msg}")
            continue
        points.append(params)
    return points, block_seed, block_reps, canon


def _block_rules(meas, axes, err) -> bool:
    """Rules between keys of a block (both given, one missing); True if any broke."""
    bad = False

    def need(cond, key, msg):
        nonlocal bad
        if not cond:
            err(key, msg)
            bad = True

    if meas == "fluctuations":
        need("n" in axes, None, "missing key 'n'")
        need("regime" in axes, None, "missing key 'regime' (a, b or c)")
        return bad
    need(("load" in axes) != ("alpha" in axes), "alpha" if "alpha" in axes else None,
         "give exactly one of 'load' and 'alpha' (λ = 1 − n^(−α))")
    need(("d" in axes) != ("beta" in axes), "beta" if "beta" in axes else None,
         "give exactly one of 'd' and 'beta' (d = ⌊n^β⌋)")
    if ("alpha" in axes or "beta" in axes) and "n" not in axes:
        need(False, "alpha" if "alpha" in axes else "beta", "alpha and beta need 'n'")
    if meas in ("simulate", "mixing", "theory"):
        need("n" in axes, None, "missing key 'n'")
    if meas == "simulate":
        need(("steps" in axes) != ("time" in axes), "time" if "time" in axes else None,
             "give exactly one of 'steps' and 'time'")
    return bad


def _derive(meas, params: dict) -> dict:
    """Fill the derived parameters of one grid point (d from β, λ from α), check them, and
    return the canonical parameter dict (fixed key order)."""
    p = dict(params)
    if meas == "fluctuations":
        return _derive_fluct(p)
    n = p.get("n")
    if "alpha" in p:
        lam = 1.0 - float(n) ** (-p["alpha"])
        if not 0.0 < lam < 1.0:
            raise ValueError(f"λ = 1 − n^(−α) = {lam!r} is not in (0, 1)")
        p["load"] = lam
    if "beta" in p:
        p["d"] = max(1, int(math.floor(float(n) ** p["beta"] * (1 + 1e-12))))
    replace = p.get("replace", True)
    if meas in ("theory", "mixing") and p["d"] < 2:
        raise ValueError(f"measurement {meas!r} needs d >= 2 (k_(λ,d) is defined for d >= 2); got d={p['d']}")
    Params(n if n is not None else max(p["d"], 1), p["d"], p["load"], replace=replace)
    if meas == "simulate":
        p.setdefault("engine", "profile")
        p.setdefault("time_mode", "discrete")
        p.setdefault("replace", True)
        p.setdefault("start", "empty")
    if meas == "mixing":
        p.setdefault("start", "good")
    order = ["n", "d", "load", "alpha", "beta"]
    return {k: p[k] for k in order if k in p} | {k: v for k, v in sorted(p.items()) if k not in order}


def _derive_fluct(p: dict) -> dict:
    reg = p["regime"]
    allowed = {"a": {"kappa", "d", "theta"}, "b": {"c", "zeta"}, "c": {"zeta", "d"}}[reg]
    extra = {"kappa", "theta", "c", "zeta", "d"} - allowed
    used = sorted(k for k in extra if k in p)
    if used:
        raise ValueError(f"regime {reg!r} does not use {', '.join(used)} (it takes {', '.join(sorted(allowed))})")
    if reg == "a" and "kappa" not in p:
        raise ValueError("regime 'a' needs kappa")
    if reg == "a" and "d" in p and "theta" in p:
        raise ValueError("regime 'a' takes d or theta, not both")
    if reg == "b" and ("c" not in p or "zeta" not in p):
        raise ValueError("regime 'b' needs c and zeta")
    if reg == "c" and "zeta" not in p:
        raise ValueError("regime 'c' needs zeta")
    p.setdefault("replace", False)
    order = ["n", "regime"]
    return {k: p[k] for k in order} | {k: v for k, v in sorted(p.items()) if k not in order}


# =========================================================================== adapters
def _flatten(d: dict, prefix: str = "") -> dict:
    """Flatten a result's ``to_dict()`` into scalar columns: nested mappings with
    identifier keys become ``outer_inner``; lists and other mappings become JSON strings."""
    out = {}
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict) and v and all(isinstance(x, str) and x.isidentifier() for x in v):
            out.update(_flatten(v, name + "_"))
        elif isinstance(v, (dict, list, tuple, np.ndarray)):
            out[name] = json.dumps(_jsonable(v), allow_nan=True)
        else:
            out[name] = _scalar(v)
    return out


def _jsonable(v):
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return _jsonable(v.tolist())
    return _scalar(v)


def _scalar(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return float(v)
    if v is None or isinstance(v, str):
        return v
    return str(v)


def _missing(measurement: str, module: str, name: str, exc: Exception):
    return RuntimeError(f"measurement {measurement!r} is not available: {module}.{name} could not be "
                        f"loaded ({type(exc).__name__}: {exc})")


def _import(measurement: str, module: str, name: str):
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise _missing(measurement, module, name, exc) from None


def measure_theory(params: dict, seed: np.random.SeedSequence) -> dict:
    """Closed forms of docs/model.md §3–6, §8 (:func:`supermarket.theory.summary`)."""
    from . import theory as th

    rep = th.summary(params["n"], params["d"], params["load"], params.get("eps", 0.1))
    rep.pop("params", None)
    if rep.get("theorem_1_2"):
        rep["theorem_1_2_applies"] = rep["theorem_1_2"]["applies"]
        rep["theorem_1_2"] = rep["theorem_1_2"]["conditions"]
    return rep


def measure_meanfield(params: dict, seed: np.random.SeedSequence) -> dict:
    """Fixed point, refined mean field and linear noise at π (docs/model.md §3;
    :func:`supermarket.meanfield.refined_mean_field` and :func:`supermarket.meanfield.lna`)."""
    refined_mean_field = _import("meanfield", "supermarket.meanfield", "refined_mean_field")
    lna = _import("meanfield", "supermarket.meanfield", "lna")
    d, lam = params["d"], params["load"]
    rmf = refined_mean_field(d, lam)
    out = {"levels": rmf.levels, "fixed_point": rmf.pi, "mean_queue_length": float(rmf.pi.sum()),
           "refined_V": rmf.V, "refined_sum_V": float(rmf.V.sum())}
    if "n" in params:
        out["refined_u"] = rmf.mean(params["n"])
        out["refined_mean_queue_length"] = rmf.mean_queue_length(params["n"])
    cov = lna(d, lam).covariance
    out["lna_variance"] = np.diag(cov)
    out["lna_covariance"] = cov
    return out


def measure_simulate(params: dict, seed: np.random.SeedSequence) -> dict:
    """One replication of :func:`supermarket.simulate.simulate` (docs/model.md §1–2, §5)."""
    simulate = _import("simulate", "supermarket.simulate", "simulate")
    kw = {k: params[k] for k in ("steps", "time", "burn_in", "engine", "replace", "start", "time_mode", "eps")
          if k in params}
    res = simulate(params["n"], params["d"], params["load"], seed=seed, replications=1, workers=1,
                   progress=False, **kw)
    return res.to_dict(per_replication=False)


def measure_mixing(params: dict, seed: np.random.SeedSequence) -> dict:
    """One replication of :func:`supermarket.mixing.coalescence` (docs/model.md §2, §6)."""
    coalescence = _import("mixing", "supermarket.mixing", "coalescence")
    kw = {k: params[k] for k in ("start", "max_steps", "burn_in", "replace") if k in params}
    res = coalescence(params["n"], params["d"], params["load"], seed=seed, replications=1, workers=1, **kw)
    return res.to_dict()


def measure_fluctuations(params: dict, seed: np.random.SeedSequence) -> dict:
    """One replication of the paper-002 measurement (docs/model.md §8, limits derived): the exact
    chain's scaled moments (``sim_*``), the limit diffusion's (``limit_*``: closed form in
    regime (a), Euler–Maruyama in (b), (c)) and the finite-n linear noise at ``x^n``
    (``lna_*``), from :mod:`supermarket.fluctuations`."""
    regime_params = _import("fluctuations", "supermarket.fluctuations", "regime_params")
    simulate_fluctuations = _import("fluctuations", "supermarket.fluctuations", "simulate_fluctuations")
    limit_for = _import("fluctuations", "supermarket.fluctuations", "limit_for")
    limit_closed_form = _import("fluctuations", "supermarket.fluctuations", "limit_closed_form")
    lna_moments = _import("fluctuations", "supermarket.fluctuations", "lna_moments")
    kw = {k: params[k] for k in ("kappa", "c", "zeta", "d", "theta", "replace") if k in params}
    p = regime_params(params["regime"], params["n"], warn=False, **kw)
    ss_sim, ss_lim = spawn_seeds(seed, 2)
    sim = simulate_fluctuations(p, time=params.get("time", 200.0), burn_in=params.get("burn_in"),
                                replications=1, seed=ss_sim, workers=1)
    if p.regime == "a":
        lim = limit_closed_form(p.limit["kappa"]).to_dict()
        lim["method"] = "closed form (derived)"
    else:
        lim = limit_for(p, paths=params.get("sde_paths", 256), time=params.get("sde_time", 100.0),
                        dt=params.get("dt", 1e-3), seed=ss_lim, workers=1).to_dict()
        lim.pop("params", None)
    out = {"d_n": p.d, "lambda_n": p.lam, "b_n": p.b_n, "kappa_n": p.kappa_n, "zeta_n": p.zeta_n,
           "d_one_minus_lambda": p.d_one_minus_lambda, "coordinates": p.coordinates,
           "warnings": list(p.warnings), "sim": sim.to_dict(), "limit": lim}
    try:
        out["lna"] = lna_moments(p).to_dict()
    except (ValueError, np.linalg.LinAlgError) as exc:
        out["lna_note"] = f"not available: {exc}"
    return out


MEASUREMENTS = {
    "theory": measure_theory,
    "meanfield": measure_meanfield,
    "simulate": measure_simulate,
    "mixing": measure_mixing,
    "fluctuations": measure_fluctuations,
}


def run_task(spec: dict) -> dict:
    """Run one task (a plain dict from :meth:`Task.spec`) and return its record:
    ``{"task_id", "status": "ok"|"failed", "error", "row", "wall_seconds"}``.

    Never raises for a failing measurement: the error is recorded instead.
    """
    t0 = time.perf_counter()
    params = spec["params"]
    seed = task_seed(spec["seed"], spec["point_hash"], spec["replication"])
    try:
        raw = MEASUREMENTS[spec["measurement"]](dict(params), seed)
        result = _flatten({k: v for k, v in raw.items() if k not in _DROP})
        status, error = "ok", None
    except Exception as exc:  # noqa: BLE001 - recorded, the sweep goes on
        result = {}
        status = "failed"
        error = f"{type(exc).__name__}: {exc}"
        tb = traceback.format_exc(limit=6)
        error_detail = tb
    else:
        error_detail = None
    wall = time.perf_counter() - t0
    return {"task_id": spec["task_id"], "status": status, "error": error, "error_detail": error_detail,
            "result": result, "wall_seconds": wall}


# result keys that repeat the task's own identity (one replication per task)
_DROP = {"params", "replications", "per_replication"}


def _row(task: Task, sweep: Sweep, rec: dict) -> dict:
    """The tidy row of a task: identity and parameters, then the measured values."""
    row = {"sweep": sweep.name, "task_id": task.task_id, "task_index": task.index, "point": task.point,
           "measurement": task.measurement, "replication": task.replication,
           "replications": task.replications, "seed": task.seed, "point_hash": task.point_hash,
           "status": rec["status"], "error": rec["error"]}
    for k, v in task.params.items():
        row[k] = _scalar(v) if not isinstance(v, str) or k != "load" else v
    if "load" in task.params:
        row["load"] = float(task.params["load"])  # numbers in the table; the text is in the sidecar
    for k, v in rec["result"].items():
        if k in row:
            if row[k] == v:
                continue
            k = f"result_{k}"
        row[k] = v
    row["wall_seconds"] = rec["wall_seconds"]
    return row


# =========================================================================== storage
def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _atomic_write_table(path: Path, rows: list[dict], first: tuple = ()) -> None:
    import pyarrow.parquet as pq

    table = _to_table(rows, first)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(table, tmp)
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _to_table(rows: list[dict], first: tuple = ()):
    """A pyarrow table from rows with possibly different keys (missing values are null).

    Column types: a column holding only integers (and nulls) is int64; one mixing integers
    and floats is float64; booleans stay bool; anything else is string.
    """
    import pyarrow as pa

    cols: list[str] = []
    seen = set()
    for k in first:
        if any(k in r for r in rows):
            seen.add(k)
            cols.append(k)
    last = [k for k in TIMING_COLUMNS if k == "wall_seconds"]
    seen.update(last)
    for r in rows:
        for k in r:
            if k not in seen:
                seen.add(k)
                cols.append(k)
    cols += [k for k in last if any(k in r for r in rows)]
    arrays = {}
    for c in cols:
        vals = [r.get(c) for r in rows]
        kinds = {type(v) for v in vals if v is not None}
        if not kinds:
            arrays[c] = pa.array(vals, type=pa.null())
        elif kinds <= {bool}:
            arrays[c] = pa.array(vals, type=pa.bool_())
        elif kinds <= {int}:
            arrays[c] = pa.array(vals, type=pa.int64())
        elif kinds <= {int, float}:
            arrays[c] = pa.array([None if v is None else float(v) for v in vals], type=pa.float64())
        else:
            arrays[c] = pa.array([None if v is None else (v if isinstance(v, str) else json.dumps(v))
                                  for v in vals], type=pa.string())
    return pa.table(arrays)


def _read_part(path: Path) -> dict | None:
    import pyarrow.parquet as pq

    try:
        rows = pq.read_table(path).to_pylist()
    except Exception:  # noqa: BLE001 - an unreadable part is treated as not done
        return None
    return rows[0] if len(rows) == 1 else None


def read_results(out_dir, *, partial: bool = False):
    """The results table of a sweep directory (a :class:`pyarrow.Table`).

    With ``partial=True`` and no ``results.parquet`` yet (a sweep still running, or
    interrupted), the finished tasks' part files are read instead, in grid order.
    """
    import pyarrow.parquet as pq

    path = Path(out_dir) / RESULTS_FILE
    if path.exists():
        return pq.read_table(path)
    parts = sorted((Path(out_dir) / PARTS_DIR).glob("*.parquet")) if partial else []
    rows = [r for r in (_read_part(p) for p in parts) if r is not None]
    if not rows:
        raise SweepDirError(f"{out_dir}: no {RESULTS_FILE} and no finished task "
                            f"(run `supermarket sweep FILE --out {out_dir}` first)")
    rows.sort(key=lambda r: r["task_index"])
    return _to_table(rows, ID_COLUMNS)


def read_sidecar(out_dir) -> dict:
    path = Path(out_dir) / SIDECAR_FILE
    if not path.exists():
        raise SweepDirError(f"{out_dir}: no {SIDECAR_FILE}: not a sweep directory")
    return json.loads(path.read_text())


def _git_commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _package_version() -> str:
    from . import __version__

    return __version__


def _prepare_dir(sweep: Sweep, out: Path) -> dict:
    """Create or check the output directory; refuse one made from another sweep."""
    if out.exists() and not out.is_dir():
        raise SweepDirError(f"--out {out} exists and is not a directory")
    side = out / SIDECAR_FILE
    if out.exists() and any(out.iterdir()):
        if not side.exists():
            raise SweepDirError(f"--out {out} is not empty and holds no {SIDECAR_FILE}: refusing to write a "
                                "sweep into it; choose a new or empty directory")
        try:
            old = json.loads(side.read_text())
        except (OSError, ValueError) as exc:
            raise SweepDirError(f"{side} is unreadable ({exc}); choose a new directory") from None
        if old.get("sweep_sha256") != sweep.sweep_sha256:
            raise SweepDirError(
                f"--out {out} holds results of a different sweep ({old.get('sweep_file', '?')}, "
                f"hash {str(old.get('sweep_sha256'))[:12]}) than {sweep.path} (hash {sweep.sweep_sha256[:12]}); "
                "refusing to mix them: choose another --out")
        return old
    (out / PARTS_DIR).mkdir(parents=True, exist_ok=True)
    return {}


def _sidecar(sweep: Sweep, out: Path, state: dict) -> dict:
    return {
        "format": FORMAT_VERSION,
        "package": "supermarket",
        "package_version": _package_version(),
        "git_commit": _git_commit(),
        "python": sys.version.split()[0],
        "sweep_name": sweep.name,
        "sweep_file": sweep.path,
        "sweep_text": sweep.text,
        "sweep_text_sha256": sweep.text_sha256,
        "sweep_sha256": sweep.sweep_sha256,
        "seed": sweep.seed,
        "seed_rule": "grid point root = SeedSequence(seed, spawn_key=(h0, h1)), h0,h1 = first two 32-bit "
                     "words of point_hash (SHA-256 of the canonical parameters); replication r = child r",
        "tasks_total": len(sweep.tasks),
        "points": [
            {"point": t.point, "measurement": t.measurement, "params": t.params, "point_hash": t.point_hash,
             "replications": t.replications, "seed": t.seed}
            for t in sweep.tasks if t.replication == 0
        ],
        **state,
    }


@dataclass
class SweepOutcome:
    out_dir: str
    total: int
    skipped: int  # finished in an earlier run
    ran: int
    ok: int
    failed: int
    failures: list  # [(task_id, error)]
    wall_seconds: float
    backend: str
    results_path: str

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


# =========================================================================== execution
def _connect(address: str, timeout: float):
    if not re.match(r"^(tcp|tls|inproc|ws|wss|ucx)://[^\s/]+$", address):
        raise SchedulerError(f"--scheduler {address!r} is not an address like tcp://HOST:PORT")
    try:
        from dask.distributed import Client
    except ImportError as exc:  # pragma: no cover - dask is a dependency of the extra
        raise SchedulerError(f"--scheduler needs dask.distributed (pip install 'supermarket[dask]'): {exc}") from None
    try:
        return Client(address, timeout=f"{timeout}s")
    except (OSError, TimeoutError) as exc:
        raise SchedulerError(f"cannot reach the Dask scheduler at {address} within {timeout:g} s "
                             f"({type(exc).__name__}); is `dask scheduler` running there?") from None


def run_sweep(sweep: Sweep, out_dir, *, workers: int | None = None, scheduler: str | None = None,
              max_tasks: int | None = None, progress=None, connect_timeout: float = 5.0) -> SweepOutcome:
    """Run (or resume) a sweep into ``out_dir``.

    ``workers``: local processes (default: the number of CPU cores; 1 runs in this
    process).  ``scheduler``: address of an existing Dask scheduler; then the tasks run on
    its workers.  ``max_tasks``: refuse a sweep with more tasks than this before running.
    ``progress``: a callable ``(done, running, failed, total)`` called as tasks finish.
    """
    total = len(sweep.tasks)
    if max_tasks is not None and total > max_tasks:
        raise SweepDirError(f"the sweep has {total} tasks ({sweep.points} grid points × replications), "
                            f"more than --max-tasks {max_tasks}: refusing to start")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be an integer >= 1; got {workers!r}")
    out = Path(out_dir)
    client = _connect(scheduler, connect_timeout) if scheduler else None
    try:
        return _run_sweep(sweep, out, workers, scheduler, client, progress)
    finally:
        if client is not None:
            client.close(timeout=5)


def _run_sweep(sweep, out, workers, scheduler, client, progress) -> SweepOutcome:
    total = len(sweep.tasks)
    previous = _prepare_dir(sweep, out)
    parts = out / PARTS_DIR
    parts.mkdir(parents=True, exist_ok=True)
    for stale in parts.glob(".*.tmp"):
        try:
            stale.unlink()
        except OSError:
            pass
    if not (out / SWEEP_COPY).exists():
        _atomic_write_bytes(out / SWEEP_COPY, sweep.text.encode())

    done: dict[str, dict] = {}
    for t in sweep.tasks:
        p = parts / f"{t.task_id}.parquet"
        if p.exists():
            row = _read_part(p)
            if row is not None and row.get("status") == "ok":
                done[t.task_id] = row
    todo = [t for t in sweep.tasks if t.task_id not in done]
    skipped = len(done)
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    runs = list(previous.get("runs", []))
    backend = f"dask:{scheduler}" if scheduler else ("in-process" if (workers or os.cpu_count() or 1) == 1
                                                     or len(todo) <= 1 else "local-processes")
    state = {"status": "running", "runs": runs + [{"started": started, "backend": backend,
                                                   "skipped": skipped, "to_run": len(todo)}],
             "task_seconds": previous.get("task_seconds", {})}
    _atomic_write_bytes(out / SIDECAR_FILE, json.dumps(_sidecar(sweep, out, state), indent=1).encode())

    t0 = time.perf_counter()
    failures: list = []
    details: dict = {}
    ok = 0
    by_id = {t.task_id: t for t in sweep.tasks}

    def finished(rec: dict):
        nonlocal ok
        task = by_id[rec["task_id"]]
        row = _row(task, sweep, rec)
        _atomic_write_table(parts / f"{task.task_id}.parquet", [row])
        state["task_seconds"][task.task_id] = rec["wall_seconds"]
        if rec["status"] == "ok":
            ok += 1
        else:
            failures.append((task.task_id, rec["error"]))
            details[task.task_id] = rec.get("error_detail")

    def report(running):
        if progress is not None:
            progress(skipped + ok + len(failures), running, len(failures), total)

    report(0)
    if todo:
        if scheduler:
            _run_dask(todo, client, finished, report)
        else:
            nw = min(workers or os.cpu_count() or 1, len(todo))
            if nw == 1 or len(todo) == 1:
                for t in todo:
                    report(1)
                    finished(run_task(t.spec()))
                    report(0)
            else:
                _run_pool(todo, nw, finished, report)

    rows = []
    for t in sweep.tasks:
        row = _read_part(parts / f"{t.task_id}.parquet")
        if row is None:  # pragma: no cover - every task was just written
            raise RuntimeError(f"part file of task {t.task_id} is missing or unreadable")
        rows.append(row)
    param_cols = []
    for t in sweep.tasks:
        param_cols += [k for k in t.params if k not in param_cols]
    _atomic_write_table(out / RESULTS_FILE, rows, first=ID_COLUMNS + tuple(param_cols))
    wall = time.perf_counter() - t0
    state["status"] = "complete" if not failures else "complete-with-failures"
    state["runs"][-1].update(finished=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                             wall_seconds=wall, ok=ok, failed=len(failures))
    state["failures"] = [{"task_id": i, "error": e, "traceback": details.get(i)} for i, e in failures]
    _atomic_write_bytes(out / SIDECAR_FILE, json.dumps(_sidecar(sweep, out, state), indent=1).encode())
    return SweepOutcome(out_dir=str(out), total=total, skipped=skipped, ran=len(todo), ok=ok + skipped,
                        failed=len(failures), failures=failures, wall_seconds=wall, backend=backend,
                        results_path=str(out / RESULTS_FILE))


def _run_pool(todo, nw, finished, report):
    import concurrent.futures as cf
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # no fork of a process with threads (rich, numba)
    pool = cf.ProcessPoolExecutor(max_workers=nw, mp_context=ctx)
    try:
        futs = {pool.submit(run_task, t.spec()): t for t in todo}
        pending = len(futs)
        report(min(nw, pending))
        for fut in cf.as_completed(futs):
            t = futs[fut]
            try:
                rec = fut.result()
            except Exception as exc:  # noqa: BLE001 - a crashed worker fails this task only
                rec = {"task_id": t.task_id, "status": "failed", "error": f"{type(exc).__name__}: {exc}",
                       "result": {}, "wall_seconds": float("nan")}
            finished(rec)
            pending -= 1
            report(min(nw, pending))
    except BaseException:
        # interrupted (Ctrl-C): finished tasks are on disk; do not wait for the others
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _run_dask(todo, client, finished, report):
    from dask.distributed import as_completed

    nthreads = sum(client.nthreads().values())
    if not nthreads:
        raise SchedulerError("the Dask scheduler has no workers; start some with `dask worker ADDRESS`")
    futs = {}
    for t in todo:
        f = client.submit(run_task, t.spec(), key=f"supermarket-sweep-{t.task_id}", pure=False)
        futs[f.key] = (f, t)
    pending = len(futs)
    report(min(nthreads, pending))
    for fut in as_completed([f for f, _ in futs.values()]):
        _, t = futs[fut.key]
        try:
            rec = fut.result()
        except Exception as exc:  # noqa: BLE001 - e.g. KilledWorker: this task fails, others go on
            rec = {"task_id": t.task_id, "status": "failed", "error": f"{type(exc).__name__}: {exc}",
                   "result": {}, "wall_seconds": float("nan")}
        finished(rec)
        pending -= 1
        report(min(nthreads, pending))
