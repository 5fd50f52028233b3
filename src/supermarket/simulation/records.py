"""The trajectory of the engines of service laws and server classes (``simulate(...,
record_every=...)`` on the ``phase``, ``classes``, ``classes-phase`` and ``events`` engines).

A :class:`Recorder` keeps the state of replication 0 on a grid after the burn-in: ``u_i = c_i/n``
for the levels ``i = 1..record_levels`` (and, with server classes, ``u_{k,i} = c_{k,i}/n_k`` per
class), the maximum queue length and the customers in the system, as the profile engines'
:class:`~supermarket.simulation.result_parts.Trajectory` does.  The grid:

- on the count engines (``phase``, ``classes``, ``classes-phase``), every ``record_every``
  **events** counted from the end of the burn-in (the unit of their ``steps``): the drivers run
  their kernels in chunks that end on the grid, and the kernels keep their whole state between
  calls (the next event time included), so a run with records has every number of a run
  without;
- on the event engine, whose horizon, burn-in and batches are times (``steps`` is turned into a
  time), every ``record_every`` **units of time**: its kernel stops at a time without drawing.

The record at ``t = 0`` is the state at the end of the burn-in; ``t`` is the time (continuous
units) of each record from there.  On the count engines of classes, whose time is the event
count over the uniformized rate, the grid in events is a grid in time too; on the phase engine
a record's time is the time of its last event.

Nothing here runs a kernel; :func:`check_record` validates the two keywords.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..checks import check_positive_float
from .plan import MAX_RECORDS, _default_record_levels
from .result_parts import Trajectory

__all__ = ["Recorder", "check_record", "start", "cap", "count", "due", "MAX_RECORDS"]


def check_record(
    record_every: object, record_levels: object, *, unit: str, span: float, d: int, lam: float
) -> tuple[float | None, int]:
    """``(record_every, record_levels)`` validated: ``record_every`` None (no records) or, with
    ``unit`` ``"events"``, a whole number of events >= 1, with ``"time"`` a time > 0; at most
    :data:`MAX_RECORDS` records over ``span`` (the horizon in that unit).  ``record_levels``
    defaults to the profile engines' (levels of the JSQ(d) fixed point at ``d``, ``λ``, 4 to 32).

    >>> check_record(100, None, unit="events", span=1e4, d=2, lam=0.5)
    (100.0, 7)
    >>> check_record(2.5, 3, unit="events", span=1e4, d=2, lam=0.5)
    Traceback (most recent call last):
    ...
    ValueError: record_every: the count engine records every record_every events: a whole number >= 1; got 2.5
    """
    if record_every is None:
        if record_levels is not None:
            raise ValueError("record_levels: goes with record_every (the grid of the records); give record_every too")
        return None, 0
    if isinstance(record_every, bool):
        raise TypeError(f"record_every must be a number; got {record_every!r}")
    every = check_positive_float("record_every", record_every)
    if unit == "events" and every != math.floor(every):
        raise ValueError(
            "record_every: the count engine records every record_every events: a whole number >= 1; "
            f"got {record_every!r}"
        )
    if span / every > MAX_RECORDS:
        raise ValueError(
            f"record_every={every:g} would record {span / every:.3g} states per replication; at most "
            f"MAX_RECORDS = {MAX_RECORDS:.0e}: record less often"
        )
    if record_levels is None:
        levels = _default_record_levels(d, lam)
    else:
        if isinstance(record_levels, bool) or not isinstance(record_levels, (int, np.integer)):
            raise TypeError(f"record_levels must be an integer in 1..10000; got {record_levels!r}")
        levels = int(record_levels)
        if not 1 <= levels <= 10_000:
            raise ValueError(f"record_levels must be in 1..10000; got {record_levels!r}")
    return every, levels


class Recorder:
    """The records of one replication: :meth:`add` the per-class counts ``c[k, i]`` at a time;
    :meth:`trajectory` gives the :class:`Trajectory` (with ``u_class`` when there are classes).
    The drivers call :func:`start` at the end of the burn-in, then around each kernel call
    :func:`cap` and :func:`count` (a grid in events) or :func:`due` (a grid in time).

    Parameters
    ----------
    every : float
        The grid (events or time, :func:`check_record`).
    levels : int
        Levels ``1..levels`` recorded.
    counts : array_like of int
        Servers per class ``n_k`` (one entry: one class).
    scale : float
        Time per unit of the engine's clock (the classes engines count events: ``1/R``).
    """

    def __init__(self, every: float, levels: int, counts: np.ndarray, scale: float = 1.0):
        self.every = float(every)
        self.scale = float(scale)
        self.t0, self.left, self.started = 0.0, 0, False
        self.levels = int(levels)
        self.counts = np.asarray(counts, np.int64).reshape(-1)
        self.n = int(self.counts.sum())
        self.t: list[float] = []
        self.c: list[np.ndarray] = []
        self.max: list[int] = []
        self.total: list[int] = []

    def add(self, t: float, c: np.ndarray) -> None:
        """Record the state ``c[k, i]`` (class ``k``, servers with at least ``i`` customers, column
        0 ignored) at time ``t`` after the burn-in."""
        col = (c if c.ndim == 2 else c[None, :])[:, 1:]
        tot = col.sum(axis=0)  # non-increasing in the level: the maximum is the count of busy levels
        if col.shape[1] >= self.levels:
            row = col[:, : self.levels].copy()
        else:
            row = np.zeros((self.counts.size, self.levels), np.int64)
            row[:, : col.shape[1]] = col
        self.t.append(float(t))
        self.c.append(row)
        self.max.append(int(np.count_nonzero(tot)))
        self.total.append(int(tot.sum()))

    def trajectory(self) -> Trajectory:
        """The records as a :class:`Trajectory`: ``u`` the shares of all servers, ``u_class``
        (records x classes x levels) those of each class when there are several."""
        C = np.array(self.c, dtype=float).reshape(len(self.c), self.counts.size, self.levels)
        u = C.sum(axis=1) / self.n
        per = C / self.counts[None, :, None] if self.counts.size > 1 else None
        return Trajectory(
            t=np.array(self.t, float),
            u=u,
            max=np.array(self.max, np.int64),
            total=np.array(self.total, np.int64),
            u_class=per,
        )


def start(rec: Recorder | None, now: float, c: np.ndarray) -> None:
    """The end of the burn-in at ``now`` (events or time, the engine's clock): record the state
    there (``t = 0``) and count the grid from it."""
    if rec is not None:
        rec.t0, rec.left, rec.started = float(now), int(rec.every), True
        rec.add(0.0, c)


def cap(rec: Recorder | None, m: int) -> int:
    """The events of the next kernel call: ``m``, or fewer so that the call ends on the grid."""
    return m if rec is None or not rec.started else min(m, rec.left)


def count(rec: Recorder | None, done: int, now: float, c: np.ndarray) -> None:
    """``done`` events were run, the clock is at ``now``: record ``c`` if that ends a grid step."""
    if rec is not None and rec.started:
        rec.left -= int(done)
        if rec.left == 0:
            rec.add((now - rec.t0) * rec.scale, c)
            rec.left = int(rec.every)


def due(rec: Recorder | None, t_stop: float) -> float | None:
    """On a grid in time (the event engine): the next record's time if it is at most ``t_stop``."""
    if rec is None or not rec.started:
        return None
    t = rec.t0 + len(rec.t) * rec.every
    return t if t <= t_stop else None


def recorder(
    record_every: object, record_levels: object, span: float, d: int, lam: float, counts: np.ndarray, rate: float
) -> Recorder | None:
    """The :class:`Recorder` of a count engine (a grid in events, ``span`` events measured; with
    classes, ``rate`` events per unit of time; 0 on the phase engine, whose records carry its
    clock), or None without ``record_every``."""
    every, levels = check_record(record_every, record_levels, unit="events", span=span, d=d, lam=lam)
    return None if every is None else Recorder(every, levels, counts, scale=1.0 / rate if rate else 1.0)


def with_trajectory(res: Any, rec: Recorder | None) -> Any:
    """``res`` (a frozen result), its ``trajectory`` set from ``rec`` when there is one."""
    if rec is not None:
        object.__setattr__(res, "trajectory", rec.trajectory())
    return res
