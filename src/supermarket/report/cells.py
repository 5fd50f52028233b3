"""The cells of a sweep's results table as the report's figures and tables read them: JSON and
numbers out of cells (:func:`_json`, :func:`_num`), rows grouped by grid point (:func:`_points`),
and the labels of a point's parameters and of its rule, service law and server classes
(:func:`law_label`, :data:`LAW_KEYS`)."""

from __future__ import annotations

import json
import math
from collections import OrderedDict

import numpy as np

__all__ = ["LAW_KEYS", "law_label"]


def _json(v):
    if v is None:
        return None
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def _num(v):
    """A finite float from a cell (numbers, numeric strings); None for censored/missing."""
    if v is None or isinstance(v, bool):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _points(rows: list[dict]) -> OrderedDict[int, list[dict]]:
    """Rows grouped by grid point (successful rows only), in grid order."""
    out: OrderedDict = OrderedDict()
    for r in sorted(rows, key=lambda r: r["task_index"]):
        if r.get("status") == "ok":
            out.setdefault(r["point"], []).append(r)
    return out


def _param_label(r: dict, keys=("n", "d", "load")) -> str:
    return ", ".join(
        f"{'λ' if k == 'load' else k}={v:.6g}" if isinstance(v, float) else f"{k}={v}"
        for k in keys
        if (v := r.get(k)) is not None
    )


# the axes of issue 21: a dispatch rule, a service law, server classes (absent: today's model)
LAW_KEYS = ("policy", "service", "server_classes")


def _law(r: dict) -> tuple[str, str, str | None]:
    """(policy, service, server classes) of a row, today's model where a key is absent."""
    return (r.get("policy") or "jsq-d", r.get("service") or "exp", r.get("server_classes") or None)


def law_label(r: dict, keys: tuple[str, ...] = LAW_KEYS) -> str:
    """The row's rule, service law and classes for a legend or a title (only ``keys``).

    >>> law_label({"policy": "jiq", "service": "erlang:2"}), law_label({}, ("policy",))
    ('jiq, erlang:2', 'jsq-d')
    """
    parts = dict(zip(LAW_KEYS, _law(r)))
    return ", ".join(
        f"classes {parts[k]}" if k == "server_classes" else str(parts[k]) for k in keys if parts[k] is not None
    )


def _padded(lists) -> np.ndarray:
    """Rows of unequal length as one matrix, padded with zeros on the right."""
    mat = np.zeros((len(lists), max(len(x) for x in lists)))
    for j, x in enumerate(lists):
        mat[j, : len(x)] = x
    return mat
