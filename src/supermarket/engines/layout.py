"""The state the engines' kernels share, as named structures (all arrays owned by the caller).

numba passes a ``typing.NamedTuple`` to a kernel as a tuple (its fields by name, no
copies), and a one-element structured array as a record whose fields are read and written
in place; so every kernel takes a handful of named arguments:

- :class:`Tables` ``(tab, win, winbase)``: ``P`` look-up (docs/model.md §2) — the full
  table ``P(0..n)`` when ``n`` is small, else for each of the first ``LW`` levels a window
  of ``WIN`` consecutive counts starting at ``winbase[j]`` (see :mod:`.tables`);
- :class:`Measures` ``(stamp, area_c, area_P, maxtime, good_lo, good_hi, good_bad)``: the
  lazy time integrals ``area_c[j] = ∫ c_{j+1} dt`` and ``area_P[j] = ∫ P_{j+1} dt`` (each
  closed up to ``stamp[j]``), ``maxtime[m]`` = time with maximum queue length ``m``, and the
  good set ``N^ε`` (docs/model.md §5): float bounds of clause (b) and, per clause, whether
  it fails now;
- :class:`Records` ``(t, c, max, total)``: the trajectory buffer (one row per grid point);
- :class:`Setup`: the constants of a run (``n``, ``d``, ``replace``, ``k`` of the good set,
  0 for none, ``continuous``, ``full_table``, ``rec_levels``, ``p_arrival = λ/(1+λ)``,
  ``rate = n(1+λ)``, ``policy`` the dispatch-rule code of :mod:`.tables`, 0 = JSQ(d));
- ``clock``: one record of :data:`CLOCK` — ``top`` (occupied levels = the maximum queue
  length), ``total`` customers, ``viol`` (failed good-set clauses), ``nrec`` (records
  written), ``now``, ``t_next`` (the next event time: part of the state, so a run cut into
  chunks gives the same numbers), ``top_since``, ``good_since``, ``good_time``,
  ``next_rec`` and ``rec_every`` (0: not recording).

Besides these, a kernel takes the counts ``c`` (``c[j] = c_{j+1}``, int64, with room above
``top``) and the generator state ``s`` (:mod:`.rng`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "I64",
    "Tables",
    "Measures",
    "Records",
    "Setup",
    "CLOCK",
    "new_clock",
    "STATUS_DONE",
    "STATUS_EVENTS",
    "STATUS_GROW",
    "STATUS_RECFULL",
    "ST_RECORD",
    "ST_WINDOW",
    "ST_GENERAL",
    "GO_ON",
]

# An integer as the kernels see it (for annotations only; numba ignores them): a Python int or
# a NumPy int64, which numba types alike.
I64 = int | np.int64


class Tables(NamedTuple):
    """``P`` look-up tables (docs/model.md §2)."""

    tab: np.ndarray  # float64 (n + 1,): P(c) for c = 0..n, or a dummy (1,) when windowed
    win: np.ndarray  # float64 (LW, WIN): per-level windows of P
    winbase: np.ndarray  # int64 (LW,): the count at the start of each window


class Measures(NamedTuple):
    """Time integrals and the good set (docs/model.md §2 measurements, §5)."""

    stamp: np.ndarray  # float64 (L,): time up to which level j's integrals are closed
    area_c: np.ndarray  # float64 (L,): ∫ c_{j+1} dt
    area_P: np.ndarray  # float64 (L,): ∫ P_{j+1} dt
    maxtime: np.ndarray  # float64 (L + 1,): time with maximum queue length m
    good_lo: np.ndarray  # float64 (k,): lower bounds of clause (b), in queues shorter than j + 1
    good_hi: np.ndarray  # float64 (k,): upper bounds
    good_bad: np.ndarray  # int64 (k + 1,): 1 where clause j fails now


class Records(NamedTuple):
    """Trajectory buffer: state at every grid point (rows ``< clock.nrec`` are written)."""

    t: np.ndarray  # float64 (R,)
    c: np.ndarray  # int64 (R, max(rec_levels, 1)): c_1..c_m
    max: np.ndarray  # int64 (R,): maximum queue length
    total: np.ndarray  # int64 (R,): customers in the system


class Setup(NamedTuple):
    """The constants of one run."""

    n: int
    d: int
    replace: bool
    k: int  # good set N^ε with clauses up to level k + 1; 0: no good set
    continuous: bool
    full_table: bool
    rec_levels: int
    p_arrival: float  # λ/(1+λ)
    rate: float  # n(1+λ): event rate of the uniformized chain
    policy: int = 0  # dispatch-rule code (tables.JSQ_D, RANDOM, JSQ, JIQ); 0: JSQ(d)


CLOCK = np.dtype(
    [
        ("top", np.int64),
        ("total", np.int64),
        ("viol", np.int64),
        ("nrec", np.int64),
        ("now", np.float64),
        ("t_next", np.float64),
        ("top_since", np.float64),
        ("good_since", np.float64),
        ("good_time", np.float64),
        ("next_rec", np.float64),
        ("rec_every", np.float64),
    ]
)


def new_clock() -> np.ndarray:
    """A zeroed clock: a one-element array of :data:`CLOCK` (kernels use ``clock[0]``)."""
    return np.zeros(1, CLOCK)


# kernel return statuses
STATUS_DONE, STATUS_EVENTS, STATUS_GROW, STATUS_RECFULL = 0, 1, 2, 3
ST_RECORD, ST_WINDOW, ST_GENERAL = 4, 5, 6  # internal: why a fast loop returned
GO_ON = -1  # internal: no reason to stop
