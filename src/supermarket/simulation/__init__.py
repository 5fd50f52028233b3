"""Exact simulation of the (n, d, λ)-supermarket process (docs/model.md §1, §2, §5, §7).

:func:`simulate` runs the chain with one of three engines, all exact in law: ``"profile"``
(the counts chain of docs/model.md §2, cost per event independent of n and d, any n),
``"queues"`` (per-queue lengths as paper 000 defines the chain: the reference) and
``"buckets"`` (per queue, O(1) per event).  It returns a :class:`SimulationResult` whose
quantities (profile ``E[u_i]``, time average of ``P_i``, mean queue length, time in the good
set ``N^ε``, law of the maximum) are :class:`Estimate` records with autocorrelation-aware
errors (docs/model.md §9), plus response times (docs/model.md §10) and an optional
:class:`Trajectory`.  Replication ``r`` uses child ``r`` of the seed, so results depend
neither on ``workers`` nor on a Dask cluster (``client=``).  :class:`Chain` is the
low-level driver of one replication, for a loop of your own around a kernel.

Modules (import from the package, not from these):

- :mod:`.run`: :func:`simulate`: the run plan (validation before any work), the
  replications on threads or a cluster, the precision loop; ``ENGINES``, ``TIME_MODES``,
  ``BATCHES``, ``DEFAULT_STEPS``, ``MAX_RECORDS``, ``PRECISION_LEVEL_MIN``;
- :mod:`.chain`: :class:`Chain` and the batched replication built on it;
- :mod:`.estimate`: from batch integrals to a result: start-up (MSER-5), error bars,
  control variates (with :mod:`.control`), self-checks (``SELF_CHECK_Z``), response times;
- :mod:`.results`: :class:`SimulationResult`, :class:`Estimate`, :class:`Trajectory`;
- :mod:`.render`: the text of ``SimulationResult.summary`` and the figure of ``plot``.
"""

from __future__ import annotations

from .chain import Chain
from .estimate import SELF_CHECK_Z
from .results import Estimate, SimulationResult, Trajectory
from .run import BATCHES, DEFAULT_STEPS, ENGINES, MAX_RECORDS, PRECISION_LEVEL_MIN, TIME_MODES, simulate

__all__ = [
    "simulate",
    "SimulationResult",
    "Estimate",
    "Trajectory",
    "Chain",
    "ENGINES",
    "TIME_MODES",
    "BATCHES",
    "DEFAULT_STEPS",
    "MAX_RECORDS",
    "PRECISION_LEVEL_MIN",
    "SELF_CHECK_Z",
]
