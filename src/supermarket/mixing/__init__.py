"""Mixing of the supermarket chain: coupled copies, coalescence times, t_mix, TV curves.

Everything rests on the sorted coupling of docs/model.md §2, under which
``d_TV(L(X_t^x), Π) <= P(τ > t)`` for the coalescence time ``τ`` with a stationary copy, so
the 0.75-quantile of ``τ`` bounds ``t_mix(1/4)``; the paper-000 orders (§6, constants 1)
come from :mod:`supermarket.theory`.  Steps are steps of the uniformized chain (``n(1+λ)``
per time unit, §1).  A copy that has not coalesced within the step budget is
*censored*: it is counted and reported as such, never as a number.

The parts, one module each:

1. **Coupled copies** (:mod:`.coupling`): the driver of the coupling kernel (arrays of M
   copies that grow as queues do, chunked kernel calls that honour Ctrl-C), the up-front
   work estimate (:class:`MixingWarning`), and :func:`coupled_run` (→ :class:`CoupledRun`).
2. **Coalescence** (:mod:`.coalescence_time`): a copy from a start against a stationary copy,
   replicated (:func:`coalescence` → :class:`MixingResult`), with the paper-000 orders
   (:func:`start_bounds`), the default burn-in and budget, and the censored summary
   statistics (:func:`order_statistic_ci`).
3. **TV curve** (:mod:`.tv`): binned TV distance of ``‖X_t‖₁`` to equilibrium over time,
   with the coupling bound (:func:`tv_curve` → :class:`TVCurve`).
"""

from __future__ import annotations

# BURN_IN_FACTOR and MAX_STEPS (not in __all__) stay readable as mixing.NAME, as before the split
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
