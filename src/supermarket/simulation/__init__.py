"""Exact simulation of the (n, d, λ)-supermarket process (docs/model.md §1, §2, §5, §7).

:func:`simulate` runs the chain with one of three engines, all exact in law (``"profile"``: the
counts chain of docs/model.md §2, any n; ``"queues"``: per queue, the reference; ``"buckets"``:
per queue, O(1) per event), and returns a :class:`SimulationResult` of :class:`Estimate`
records with autocorrelation-aware errors (docs/model.md §9), response times (§10) and an
optional :class:`Trajectory`.  Replication ``r`` uses child ``r`` of the seed, so results depend
neither on ``workers`` nor on a Dask cluster.  :class:`Chain` drives one replication, for a loop
of your own around a kernel.

Modules (import from the package): :mod:`.run` (:func:`simulate`), :mod:`.plan` (the run plan),
:mod:`.chain`, :mod:`.estimate` (batch integrals to a result, with :mod:`.batch_errors` for the
error bars and :mod:`.controlled` for the control variates of :mod:`.control`), :mod:`.results`
and :mod:`.result_parts` (the records), :mod:`.render` (their text and figure) and
:mod:`.references` (what the text puts beside an estimate: the identity with its own error, the
refined mean field).
"""

from __future__ import annotations

from .chain import Chain
from .estimate import SELF_CHECK_Z
from .protocol import SimulateResult
from .results import Estimate, SimulationResult, Trajectory
from .run import BATCHES, DEFAULT_STEPS, ENGINES, MAX_RECORDS, PRECISION_LEVEL_MIN, TIME_MODES, simulate

__all__ = [
    "simulate",
    "SimulationResult",
    "SimulateResult",
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
