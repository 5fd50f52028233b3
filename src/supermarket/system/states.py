"""Start states of the chain as counts ``c_i = #{queues with length >= i}`` (docs/model.md §1–2).

Counts are indexed from level 1 (``c[0] = c_1``); per-queue engines expand them into the
sorted queue-lengths vector (longest first).  Start specifications (``start=``):

- ``"empty"``; ``"fixed-point"`` (``"good"``): ``c_i = round(n·π(i))``;
- ``"customers:G"`` (``"uniform:G"``): every queue at length ``G``;
- ``"long:L"``: the rounded fixed point with one queue of length ``L``;
- an integer array of length ``n`` (queue lengths), or a float array in [0, 1] (a profile).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..model import check_int, check_load, check_positive_int
from ..theory import fixed_point

__all__ = ["start_counts", "counts_from_lengths", "lengths_from_counts", "parse_start"]

MAX_START_LEVEL = 10**8  # a queue longer than this is refused (memory of the profile arrays)


def counts_from_lengths(lengths: ArrayLike) -> np.ndarray:
    """``c_i = #{j : x(j) >= i}`` for ``i = 1..max x`` from a queue-lengths vector.

    Parameters
    ----------
    lengths : array_like of int
        A non-empty 1-d vector of lengths ``>= 0``.

    Returns
    -------
    numpy.ndarray of int64
        ``c_1, …, c_{max x}`` (empty when every queue is empty).

    Examples
    --------
    >>> counts_from_lengths(np.array([0, 2, 1, 2])).tolist()
    [3, 2]
    """
    x = np.asarray(lengths)
    if x.ndim != 1 or x.size == 0 or not np.issubdtype(x.dtype, np.integer):
        raise TypeError("a queue-lengths vector must be a non-empty 1-d integer array")
    if (x < 0).any():
        raise ValueError(f"queue lengths must be >= 0; queue {int(np.argmax(x < 0))} has {int(x.min())}")
    top = int(x.max())
    if top > MAX_START_LEVEL:
        raise ValueError(f"queue length {top} exceeds the supported maximum {MAX_START_LEVEL}")
    hist = np.bincount(x, minlength=top + 1)
    return np.cumsum(hist[::-1])[::-1][1:].astype(np.int64)


def lengths_from_counts(counts: ArrayLike, n: int) -> np.ndarray:
    """The sorted queue-lengths vector (longest first) with the given counts.

    Parameters
    ----------
    counts : array_like of int
        ``n >= c_1 >= c_2 >= … >= 0``.
    n : int

    Returns
    -------
    numpy.ndarray of int64
        ``x(p) = #{i >= 1 : c_i >= p}``, ``p = 1..n``.

    Examples
    --------
    >>> lengths_from_counts([3, 2], 4).tolist()
    [2, 2, 1, 0]
    >>> counts_from_lengths(lengths_from_counts([3, 2], 4)).tolist()
    [3, 2]
    """
    n = check_positive_int("n", n)
    c = np.asarray(counts, dtype=np.int64)
    if c.ndim != 1 or (c.size and (c[0] > n or c[-1] < 0 or (np.diff(c) > 0).any())):
        raise ValueError(f"counts must be a 1-d array with n >= c_1 >= c_2 >= ... >= 0 (n={n})")
    x = np.zeros(n, dtype=np.int64)
    for i, ci in enumerate(c, start=1):
        x[:ci] = i
    return x


def parse_start(start: str | ArrayLike) -> tuple[str, Any]:
    """Split a start specification (module doc) such as ``"customers:3"`` into ``(name, value)``.

    Parameters
    ----------
    start : str or array_like

    Returns
    -------
    tuple
        ``name`` in ``"empty"``, ``"fixed-point"``, ``"customers"``, ``"long"``, ``"array"``;
        ``value`` the integer, the array, or ``None``.

    Examples
    --------
    >>> parse_start("customers:3"), parse_start("good")
    (('customers', 3), ('fixed-point', None))
    """
    if isinstance(start, str):
        name, _, arg = start.partition(":")
        name = name.strip().lower().replace("_", "-")
        if name in ("empty", "fixed-point", "fixedpoint", "good"):
            if arg:
                raise ValueError(f"start {start!r} takes no value")
            return ("fixed-point" if name in ("fixed-point", "fixedpoint", "good") else "empty"), None
        if name in ("customers", "uniform", "long"):
            try:
                val = int(arg)
            except ValueError:
                raise ValueError(f"start {start!r}: expected an integer after ':', e.g. {name}:3") from None
            key = "long" if name == "long" else "customers"
            minimum = 1 if key == "long" else 0
            val = check_int(f"start {key}:value", val, minimum=minimum, maximum=MAX_START_LEVEL)
            return key, val
        raise ValueError(
            f"unknown start {start!r}; valid: empty, fixed-point (good), customers:G, long:L, "
            "a queue-lengths vector or a profile array"
        )
    return "array", np.asarray(start)


def start_counts(n: int, d: int, lam: float, start: str | ArrayLike = "empty") -> np.ndarray:
    """Counts ``c_1, c_2, …`` (int64) of a start state (module doc), ``n >= c_1 >= … > 0``.

    Parameters
    ----------
    n, d : int
        Servers and choices (``d`` for the fixed point).
    lam : float or str
        Load λ (``< 1`` for ``"fixed-point"`` and ``"long:L"``).
    start : str or array_like

    Returns
    -------
    numpy.ndarray of int64

    Examples
    --------
    >>> start_counts(10, 2, 0.5, "customers:2").tolist()
    [10, 10]
    >>> start_counts(1000, 2, 0.9, "fixed-point").tolist()  # round(1000 π(i)), π(i) = 0.9^(2^i − 1)
    [900, 729, 478, 206, 38, 1]
    >>> start_counts(4, 2, 0.5, np.array([0, 2, 1, 2])).tolist()
    [3, 2]
    """
    n = check_positive_int("n", n)
    d = check_positive_int("d", d)
    name, val = parse_start(start)
    if name == "empty":
        return np.zeros(0, dtype=np.int64)
    if name == "customers":
        return np.full(val, n, dtype=np.int64)
    if name in ("fixed-point", "long"):
        lam_f = check_load(lam, require_stable=False)
        if lam_f >= 1:
            raise ValueError("start 'fixed-point'/'long' needs load < 1 (the fixed point exists only then)")
        pi = fixed_point(d, lam_f)
        c = np.rint(n * pi).astype(np.int64)
        c = c[c > 0]
        if name == "long":
            c = _with_one_long_queue(c, n, val)
        return c
    arr = val
    if arr.ndim != 1 or arr.size == 0:
        raise TypeError("start array must be a non-empty 1-d array (queue lengths or a profile)")
    if np.issubdtype(arr.dtype, np.integer):
        if arr.size != n:
            raise ValueError(f"start queue-lengths vector has {arr.size} entries but n={n}")
        return counts_from_lengths(arr)
    u = arr.astype(float)
    if not np.all(np.isfinite(u)) or (u < 0).any() or (u > 1).any():
        i = int(np.argmax(~np.isfinite(u) | (u < 0) | (u > 1))) + 1
        raise ValueError(f"start profile must have values in [0, 1]; level {i} is {arr[i - 1]!r}")
    if (np.diff(u) > 0).any():
        i = int(np.argmax(np.diff(u) > 0)) + 2
        raise ValueError(f"start profile must be non-increasing; level {i} exceeds level {i - 1}")
    c = np.rint(u * n).astype(np.int64)
    return c[c > 0]


def _with_one_long_queue(c: np.ndarray, n: int, ell: int) -> np.ndarray:
    """Replace one queue of the (sorted) state by a queue of length ``ell``."""
    x = lengths_from_counts(c, n)
    x[-1] = ell  # the shortest queue becomes the long one
    return counts_from_lengths(x)
