"""Reports of a sweep directory: one self-contained HTML file, or Markdown with PNGs.

:func:`build_report` reads ``results.parquet`` and ``sweep.json`` (written by
:mod:`supermarket.sweep`) and writes the sweep's tables and, for each measurement present,
the figures a reader of the papers expects:

- ``simulate``: the time-averaged profile ``E[u_i]`` against the mean-field fixed point
  ``π(i)`` (docs/model.md §3) and the linearised profile ``1 − q̃_i`` [derived] (docs/model.md §4);
  the equilibrium maximum queue length against ``k_{λ,d}`` over the grid (docs/model.md §4);
- ``mixing``: coalescence times against the paper-000 orders ``d^{k−1} n`` and
  ``k d^{k−1} n log n`` (docs/model.md §6, constants 1);
- ``fluctuations``: simulated stationary moments against the limit diffusion's (docs/model.md §8,
  limits derived);
- ``meanfield``: ``π(i)`` and the refined ``π(i) + V_i/n`` (docs/model.md §3).

Statistics over replications are the mean and its standard error across replications.
Figures are rendered with matplotlib's Agg backend; in HTML they are embedded as base64
PNG, so the file can be mailed or archived alone.

The parts, one module each:

1. **Figures** (:mod:`.figures`): :class:`Figure` and :func:`collect_figures`, one figure
   maker per measurement, and the helpers that read a results table's cells and group its
   rows by grid point.
2. **Document** (:mod:`.document`): :func:`build_report`: the per-measurement summary tables
   (mean ± standard error over replications) and the HTML or Markdown writer.
"""

from __future__ import annotations

from .document import build_report
from .figures import Figure, collect_figures

__all__ = ["build_report", "Figure", "collect_figures"]
