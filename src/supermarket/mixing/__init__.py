"""Mixing of the supermarket chain under the sorted coupling (docs/model.md §2, §6;
docs/mixing.md): coupled copies (:mod:`.coupling`), coalescence times and the bound
``t_mix(1/4) <= q75(τ)`` (:mod:`.coalescence_time`), TV curves (:mod:`.tv`).  Steps are those
of the uniformized chain, ``n(1+λ)`` per time unit; a pair not coalesced within the budget is
*censored*, reported as such, never as a number.
"""

from __future__ import annotations

# BURN_IN_FACTOR and MAX_STEPS (not in __all__) stay readable as mixing.NAME
from .coalescence_time import BURN_IN_FACTOR, MixingResult, coalescence, order_statistic_ci, start_bounds
from .coupling import MAX_LEVELS, MAX_STEPS, CoupledRun, MixingWarning, coupled_run
from .tv import TVCurve, tv_curve

__all__ = [
    "CoupledRun",
    "coupled_run",
    "MixingResult",
    "coalescence",
    "TVCurve",
    "tv_curve",
    "order_statistic_ci",
    "start_bounds",
    "MAX_LEVELS",
    "MixingWarning",
]
