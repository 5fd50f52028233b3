"""How the paper-000 experiments write and phrase results: tables, figures, log-log slopes,
numbers with their error bars, and the rule that calls a value against a bound (:data:`Z_FINDING`)."""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import sys
from pathlib import Path

import numpy as np

from ...files import atomic_write, save_figure_atomic
from ...jsonable import to_jsonable
from ...result import pyplot as _plt

Z_FINDING = 4.5  # standard errors: a difference smaller than this is "within error"


def _progress(msg: str, tag: str = "paper000") -> None:
    """One progress line on stderr (only when stderr is a terminal)."""
    if sys.stderr.isatty():
        print(f"[{tag}] {msg}", file=sys.stderr, flush=True)


_jsonable = functools.partial(to_jsonable, null_nonfinite=True)  # plain JSON for the tables, non-finite as null


def _write_csv(path, rows: list[dict]) -> None:
    """``rows`` as CSV (the union of their columns), written whole or not at all."""
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
    w.writeheader()
    w.writerows(rows)
    atomic_write(path, buf.getvalue())


def _write_table(out: Path, name: str, rows: list[dict], meta: dict) -> None:
    """``out/<name>.csv`` (lists and dicts as JSON text) and ``out/<name>.json``, each whole or not at all."""
    cell = lambda v: json.dumps(_jsonable(v)) if isinstance(v, (list, dict, tuple)) else _jsonable(v)  # noqa: E731
    _write_csv(out / f"{name}.csv", [{k: cell(v) for k, v in r.items()} for r in rows])
    atomic_write(out / f"{name}.json", json.dumps(_jsonable({"meta": meta, "rows": rows}), indent=2))


def _save_figure(fig, out: Path, name: str) -> None:
    """Lay ``fig`` out, write it to ``out/<name>.png`` (110 dpi) and close it."""
    fig.tight_layout()
    try:
        save_figure_atomic(fig, out / f"{name}.png", dpi=110)  # whole or not at all
    finally:
        _plt().close(fig)


def _fit_slope(x, y):
    """Least-squares slope and intercept of log y against log x."""
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    if lx.size < 2 or np.ptp(lx) == 0:
        return float("nan"), float("nan")
    b, a = np.polyfit(lx, ly, 1)
    return float(b), float(a)


def _fmt(x, digits=3):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    if isinstance(x, str):
        return x
    return f"{x:.{digits}g}"


def _bound_verdict(value, stderr, reliable, bound) -> str:
    """``value`` against a lower ``bound``: "meets", "within error", "below", or "too short
    to know" when the error bar is not reliable and the value is below the bound."""
    if value >= bound:
        return "meets"
    if not reliable or not math.isfinite(stderr):
        return "too short to know"
    return "within error" if bound - value <= Z_FINDING * stderr else "below"


def _pm(value, stderr, reliable, digits=3, share=False) -> str:
    """``value ± stderr``, or ``value (too short to know)`` when the error bar is not reliable;
    with ``share``, a time share of exactly 0 or 1 reads "never" or "always" (a fact of the run)."""
    if value is None:
        return "—"
    if share and value in (0.0, 1.0):
        return f"{value:.0f} (never)" if value == 0.0 else f"{value:.0f} (always)"
    if reliable and stderr is not None and math.isfinite(stderr):
        return f"{value:.{digits}f} ± {stderr:.1g}"
    return f"{value:.{digits}f} (too short to know)"


def _pm_of(r: dict, key: str, digits: int = 3, share: bool = False) -> str:
    """:func:`_pm` of a row's ``key``, ``key_stderr`` and ``key_reliable``."""
    return _pm(r[key], r[f"{key}_stderr"], r[f"{key}_reliable"], digits, share)


def _mean_max_cell(r) -> str:
    """The mean maximum ± its error, or "m (always)" when the maximum never left ``m``."""
    return f"{r['modal_max']} (always)" if r.get("max_always") else _pm_of(r, "mean_max")
