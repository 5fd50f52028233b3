"""A sweep's rows as a tidy Arrow table (format 2) and back; the column types are in docs/sweep.md,
"The output directory"."""

from __future__ import annotations

import json
from typing import Any

from .spec import FORMAT_VERSION

__all__ = ["to_table", "table_rows", "JSON_COLUMNS_KEY", "FORMAT_KEY"]

JSON_COLUMNS_KEY = b"supermarket.json_columns"
FORMAT_KEY = b"supermarket.format"


_KINDS = ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), ((list, tuple), "list"), (dict, "map"))


def _kind(x) -> str:
    return next((k for t, k in _KINDS if isinstance(x, t)), "other")


def _no_null(t):
    """The type with every null leaf replaced by float64 (an empty list is a list of numbers)."""
    import pyarrow as pa

    if pa.types.is_null(t):
        return pa.float64()
    if pa.types.is_list(t):
        return pa.list_(_no_null(t.value_type))
    return t


def _label(x) -> str | None:
    return None if x is None else (x if isinstance(x, str) else json.dumps(x))


def _int_key(k):
    if isinstance(k, int) and not isinstance(k, bool):
        return k
    return int(k) if isinstance(k, str) and k.strip().lstrip("-").isdigit() else None


def _column(vals: list):
    """(pyarrow array, is_json) for one column's values."""
    import pyarrow as pa

    kinds = {_kind(x) for x in vals if x is not None}
    if not kinds:
        return pa.array(vals, type=pa.null()), False
    if kinds <= {"bool"}:
        return pa.array(vals, type=pa.bool_()), False
    if kinds <= {"int"}:
        return pa.array(vals, type=pa.int64()), False
    if kinds <= {"int", "float"}:
        return pa.array([None if x is None else float(x) for x in vals], type=pa.float64()), False
    if kinds <= {"bool", "int", "float", "str"}:
        return pa.array([_label(x) for x in vals], type=pa.string()), False
    try:
        if kinds == {"list"}:
            arr = pa.array([None if x is None else list(x) for x in vals])
            return arr.cast(_no_null(arr.type)), False
        if kinds == {"map"}:
            keys = [_int_key(k) for x in vals if x is not None for k in x]
            as_int = all(k is not None for k in keys)
            items = [
                None if x is None else [(_int_key(k) if as_int else str(k), y) for k, y in x.items()] for x in vals
            ]
            vtype = _no_null(pa.array([y for x in vals if x is not None for y in x.values()]).type)
            return pa.array(items, type=pa.map_(pa.int64() if as_int else pa.string(), vtype)), False
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        pass
    flat = kinds == {"list"} and all(
        x is None or all(_kind(y) in ("bool", "int", "float", "str") or y is None for y in x) for x in vals
    )
    if flat:  # numbers mixed with labels ("censored", "unbounded")
        return pa.array(
            [None if x is None else [_label(y) for y in x] for x in vals], type=pa.list_(pa.string())
        ), False
    return pa.array([None if x is None else json.dumps(x) for x in vals], type=pa.string()), True


def to_table(rows: list[dict], first: tuple = ()) -> Any:  # a pyarrow.Table (pyarrow has no stubs)
    """A :class:`pyarrow.Table` from rows with possibly different keys (missing values are
    null), columns ``first`` first and ``wall_seconds`` last, typed as the module doc says."""
    import pyarrow as pa

    keys = dict.fromkeys(k for r in rows for k in r)  # in the order first seen
    head = [k for k in first if k in keys]
    cols = (
        head + [k for k in keys if k not in head and k != "wall_seconds"] + [k for k in ["wall_seconds"] if k in keys]
    )
    typed = {c: _column([r.get(c) for r in rows]) for c in cols}  # c -> (array, is_json)
    arrays, as_json = {c: a for c, (a, _) in typed.items()}, [c for c, (_, j) in typed.items() if j]
    meta = {FORMAT_KEY: str(FORMAT_VERSION).encode(), JSON_COLUMNS_KEY: json.dumps(as_json).encode()}
    return pa.table(arrays).replace_schema_metadata(meta)


def table_rows(table: Any) -> list[dict]:
    """Rows of a results table as plain Python: map columns as dicts, JSON columns decoded.

    Parameters
    ----------
    table : pyarrow.Table
        From :func:`read_results` (or :func:`to_table`).

    Returns
    -------
    list of dict

    Examples
    --------
    >>> table_rows(to_table([{"d": 2, "dist": {1: 0.5}}, {"d": 3}]))  # dist: map<int64, double>
    [{'d': 2, 'dist': {1: 0.5}}, {'d': 3, 'dist': None}]
    """
    import pyarrow as pa

    meta = table.schema.metadata or {}
    as_json = set(json.loads(meta.get(JSON_COLUMNS_KEY, b"[]")))
    maps = {f.name for f in table.schema if pa.types.is_map(f.type)}
    rows = table.to_pylist()
    if maps or as_json:
        for r in rows:
            r.update({c: dict(r[c]) for c in maps if r.get(c) is not None})
            r.update({c: json.loads(r[c]) for c in as_json if isinstance(r.get(c), str)})
    return rows
