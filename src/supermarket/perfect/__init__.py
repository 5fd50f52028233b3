"""Exact stationary samples of the supermarket chain by dominated coupling from the past.

The method and its proof are in docs/model.md §12: random routing dominates the chain,
a lower copy from empty and an upper copy from the dominating process are run from ``−T``
with the same innovations, and ``T`` doubles over the *same* past until they meet at 0.
The past is kept in blocks: a block stores only its random seed and the state of ``D``
where it starts, and its innovations are regenerated when needed (bit-identical), so
memory grows by one counts array per block, not by one integer per step.

Where each part lives:

- :mod:`supermarket.perfect.sampler`: :func:`sample` (→ :class:`PerfectResult`), the driver
  (horizon doubling, budgets, threads or a Dask cluster), and :func:`sample_counts` (one
  sample in the counts representation of :mod:`supermarket.states`, for
  ``simulate(start="perfect")``);
- :mod:`supermarket.perfect.past`: the past of one sample (blocks of ``D``'s path, the
  innovations, the lower and upper copies);
- :mod:`supermarket.perfect.results`: :class:`PerfectResult`, :class:`BudgetExceeded`,
  :func:`steps_per_time_unit`.
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
