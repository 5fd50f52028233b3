"""General service laws and server classes on the per-queue event engine (docs/model.md §14).

:func:`simulate_general` runs :mod:`supermarket.engines.events` for any service law of
:mod:`supermarket.system.service` (exp, Erlang, H2, phase type, lognormal, Pareto, deterministic),
any dispatch rule (``jsq-d``, ``random``, ``jsq``, ``jiq``) and classes of servers with
speeds, and returns a :class:`GeneralResult` with autocorrelation-aware error bars.
"""

from .result import ClassResult, GeneralResult
from .run import POLICIES, simulate_general

__all__ = ["simulate_general", "GeneralResult", "ClassResult", "POLICIES"]
