"""Mixing of the supermarket chain: coupled copies, coalescence times, t_mix, TV curves.

Everything rests on the sorted coupling of docs/model.md §2: copies of the profile chain driven
by the same random numbers (one sorted position per event), under which the L1 distance of
the sorted queue-lengths vectors never increases.  If ``τ`` is the first step at which a copy
started from ``x`` equals a copy started from the stationary law, then

    d_TV(L(X_t^x), Π) <= P(τ > t)

so the 0.75-quantile of ``τ`` bounds ``t_mix(1/4)`` (docs/model.md §2, §6).  The paper-000
orders of magnitude (docs/model.md §6, constants taken as 1) come from :mod:`supermarket.theory`:
``k d^{k−1} n log n`` (upper, from a good state), ``d^{k−1} n`` (lower),
``(1−λ)^{−1} g n`` (from ``‖x‖₁ = g n``) and ``ℓ n`` (from one queue of length ``ℓ``).

Steps are steps of the uniformized discrete chain; ``n(1+λ)`` steps are one unit of
continuous time (docs/model.md §1).  A copy that has not coalesced within the step budget is
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

Public API: :func:`coupled_run`, :func:`coalescence` (→ :class:`MixingResult`),
:func:`tv_curve` (→ :class:`TVCurve`), :func:`order_statistic_ci`, :func:`start_bounds`.
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
