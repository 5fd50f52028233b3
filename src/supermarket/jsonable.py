"""Plain-JSON conversion of result objects (NumPy scalars and arrays, tuples, non-finite floats).

The CLI's ``--json`` output and the experiments' JSON tables go through
[`to_jsonable`][supermarket.jsonable.to_jsonable], so they are strict JSON (no ``NaN`` or
``Infinity`` tokens).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["to_jsonable"]


def to_jsonable(obj: Any, *, null_nonfinite: bool = False) -> Any:
    """Convert NumPy scalars/arrays and tuples into plain JSON values.

    NaN becomes ``null``; ±inf becomes the strings ``"inf"``/``"-inf"`` (or ``null`` with
    ``null_nonfinite``), so the output is valid strict JSON (``allow_nan=False``).

    Parameters
    ----------
    obj : object
        A result's ``to_dict()`` or any nesting of dicts, lists, tuples, NumPy arrays and
        scalars, Python numbers, strings and ``None``.  Other objects are returned as they
        are.
    null_nonfinite : bool, optional
        Write ±inf as ``null`` instead of ``"inf"``/``"-inf"`` (default ``False``).

    Returns
    -------
    object
        The same structure made of ``dict`` (string keys), ``list``, ``bool``, ``int``,
        ``float`` (finite), ``str`` and ``None``.

    Examples
    --------
    >>> import json
    >>> import numpy as np
    >>> to_jsonable({"u": np.array([0.5, np.nan]), 2: (np.int64(3), np.inf)})
    {'u': [0.5, None], '2': [3, 'inf']}
    >>> json.dumps(to_jsonable([-np.inf], null_nonfinite=True), allow_nan=False)
    '[null]'
    """
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v, null_nonfinite=null_nonfinite) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, null_nonfinite=null_nonfinite) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist(), null_nonfinite=null_nonfinite)
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        x = float(obj)
        if math.isfinite(x):
            return x
        if math.isnan(x) or null_nonfinite:
            return None
        return "inf" if x > 0 else "-inf"
    return obj
