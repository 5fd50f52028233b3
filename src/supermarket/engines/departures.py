"""The waiting departures of the event kernel (:mod:`.events`, docs/model.md §14): the window of
the calendar queue (:func:`window`, :data:`WINDOW_PER_BUCKET`, :data:`WINDOW_TIME`,
:data:`MAX_BUCKETS`), its free list of nodes (:func:`_free_chain`), and the 4-ary min-heap of the
far future (:func:`_push`, Floyd's bottom-up :func:`_pop_bottom_up`, rows from
:func:`_heap_rows`).  The kernel's module docstring describes how they work together.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["WINDOW_PER_BUCKET", "WINDOW_TIME", "MAX_BUCKETS", "window"]


# The heap: logical node i (root 0, children 4i+1..4i+4) is row i + _H0 of ``h`` (n x 2:
# departure time, server as a float, exact below 2^53).  With the row offset 3 the four
# children of a node are rows 4i+4..4i+7: one 64-byte cache line when row 0 is 64-byte
# aligned (new_arrays and grow allocate so), so a level of the descent reads one line.
_H0 = 3


@njit(cache=True, inline="always")
def _pop_bottom_up(h, size):
    """Remove the root of a heap of ``size + 1`` entries: the hole goes down along the least
    children to a leaf, the last entry fills it and sifts up (Floyd)."""
    t = h[size + _H0, 0]
    j = h[size + _H0, 1]
    i = 0
    while True:
        l = 4 * i + 1
        if l >= size:
            break
        m = l
        tm = h[l + _H0, 0]
        e = l + 4 if l + 4 <= size else size
        for r in range(l + 1, e):
            tr = h[r + _H0, 0]
            if tr < tm:
                m = r
                tm = tr
        h[i + _H0, 0] = tm
        h[i + _H0, 1] = h[m + _H0, 1]
        i = m
    while i > 0:
        p = (i - 1) >> 2
        if h[p + _H0, 0] <= t:
            break
        h[i + _H0, 0] = h[p + _H0, 0]
        h[i + _H0, 1] = h[p + _H0, 1]
        i = p
    h[i + _H0, 0] = t
    h[i + _H0, 1] = j


@njit(cache=True, inline="always")
def _push(h, size, t, j):
    i = size
    while i > 0:
        p = (i - 1) >> 2
        if h[p + _H0, 0] <= t:
            break
        h[i + _H0, 0] = h[p + _H0, 0]
        h[i + _H0, 1] = h[p + _H0, 1]
        i = p
    h[i + _H0, 0] = t
    h[i + _H0, 1] = j


def _heap_rows(capacity: int) -> np.ndarray:
    """Zeros of shape ``(capacity + _H0, 2)`` whose row 0 is 64-byte aligned (see ``_H0``)."""
    raw = np.zeros((capacity + _H0 + 4, 2))
    off = (-raw.ctypes.data % 64) // 16  # NumPy aligns to 16 bytes at least
    return raw[off : off + capacity + _H0]


WINDOW_PER_BUCKET = 8.0
"""Departures per bucket near the front of the window: the bucket width is this over the
arrival rate."""

WINDOW_TIME = 64.0
"""The window of buckets spans at least this time over the slowest speed (at λ = 0.9 with
lognormal SCV 4 and JSQ(2), about 0.1 % of the waiting departures lie further ahead);
later departures wait in the heap."""

MAX_BUCKETS = 1 << 22


def window(rate: float, min_speed: float = 1.0) -> tuple[int, float]:
    """The buckets of the departures' window for arrivals at ``rate``: ``(count, 1/width)``
    (a power of two from 64 to :data:`MAX_BUCKETS`; see :data:`WINDOW_PER_BUCKET`)."""
    width = WINDOW_PER_BUCKET / rate
    want = WINDOW_TIME / min_speed / width
    nb = 64
    while nb < want and nb < MAX_BUCKETS:
        nb *= 2
    return nb, 1.0 / width


def _free_chain(start: int, stop: int) -> np.ndarray:
    """Nodes ``start..stop-1`` chained as a free list (``-1`` ends it)."""
    q = np.arange(start + 1, stop + 1, dtype=np.int32)
    if q.size:
        q[-1] = -1
    return q
