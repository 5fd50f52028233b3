"""Exact stationary laws of small systems (docs/model.md §7, §13, §15).

One solver per state space, each a sparse solve of the generator with a truncation below a
tolerance and a wall-clock budget:

- :mod:`.profile`: the profile chain of identical exponential servers (:func:`solve`, the
  ``supermarket exact`` default);
- :mod:`.phase`: phase-type service (:func:`supermarket.stationary.phase.solve_phase`);
- :mod:`.classes`: server classes (:func:`supermarket.stationary.classes.solve_classes`);
- :mod:`.classes_phase`: server classes with a phase-type law
  (:func:`supermarket.stationary.classes_phase.solve_classes_phase`).

The names of :mod:`.profile` are re-exported here, so ``supermarket.stationary.solve`` is the
plain solver.
"""

from __future__ import annotations

from .profile import (
    DEFAULT_TOL,
    MAX_SECONDS,
    MAX_STATES,
    SLOW_STATES,
    BudgetExceeded,
    ExactResult,
    count_nonzeros,
    count_states,
    estimate_bytes,
    estimate_seconds,
    least_states,
    solve,
)

__all__ = [
    "solve",
    "ExactResult",
    "count_states",
    "count_nonzeros",
    "estimate_bytes",
    "estimate_seconds",
    "least_states",
    "DEFAULT_TOL",
    "MAX_STATES",
    "MAX_SECONDS",
    "SLOW_STATES",
    "BudgetExceeded",
]
