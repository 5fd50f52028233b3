"""Exact stationary samples of the supermarket chain by dominated coupling from the past
(docs/model.md §12): :func:`sample` (→ :class:`PerfectResult`, in :mod:`.sampler`), the past of
one sample in :mod:`.past`, the result types in :mod:`.results`.
"""

from __future__ import annotations

from .results import BudgetExceeded, PerfectResult, steps_per_time_unit
from .sampler import DEFAULT_MAX_MEMORY, MAX_HORIZON_STEPS, MAX_N, sample, sample_counts

__all__ = [
    "PerfectResult",
    "BudgetExceeded",
    "sample",
    "sample_counts",
    "steps_per_time_unit",
    "DEFAULT_MAX_MEMORY",
    "MAX_HORIZON_STEPS",
    "MAX_N",
]
