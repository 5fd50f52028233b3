"""Plain-JSON conversion of result objects (NumPy scalars and arrays, tuples, non-finite floats)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["to_jsonable"]


def to_jsonable(obj, *, null_nonfinite: bool = False):
    """Convert NumPy scalars/arrays and tuples into plain JSON values.

    NaN becomes ``null``; ±inf becomes the strings ``"inf"``/``"-inf"`` (or ``null`` with
    ``null_nonfinite``), so the output is valid strict JSON (``allow_nan=False``).
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
