"""Reports of a sweep directory: one self-contained HTML file, or Markdown with PNGs.

:func:`build_report` (:mod:`.document`) reads ``results.parquet`` and ``sweep.json`` and writes
the per-measurement summary tables (mean ± standard error over replications) and the figures
(:mod:`.figures`, with :mod:`.simulate_figures`; rendered by :mod:`.render` with matplotlib's Agg
backend; embedded as base64 PNG in HTML; the cells read by :mod:`.cells`) of each measurement
present: ``simulate`` (the profile against π(i) and the linearised profile, the maximum queue
length against ``k_{λ,d}``, docs/model.md §3, §4), ``mixing`` (coalescence times against the
paper-000 orders, §6), ``fluctuations`` (moments against the limit diffusions, §8) and
``meanfield`` (π(i) and the refined ``π(i) + V_i/n``, §3).
"""

from __future__ import annotations

from .document import build_report
from .figures import Figure, collect_figures

__all__ = ["build_report", "Figure", "collect_figures"]
