"""Fluctuations near equilibrium with growing choices: the three regimes of paper 002.

docs/model.md §8.  Continuous time, arrival rate ``nλ_n``, ``d_n <= n`` choices, sampled
*without* replacement by default (as in paper 002; ``replace=True`` on request).  The
occupancy ``G_i`` (fraction of queues with at least ``i`` customers) fluctuates by order
``n^{-1/2}`` around the near-equilibrium centre ``x^n``; the scaled process has one of three
limits as ``d_n/√n → 0, c, ∞``.  **The limits and their parametrisations are derived** for
this project (docs/model.md marks them [derived]); nothing here is a theorem of the paper.

The parts, one module each (every public name is importable from this package):

1. :mod:`.regimes`: :func:`regime_a`, :func:`regime_b`, :func:`regime_c`,
   :func:`regime_params` (→ :class:`RegimeParams`, conditions checked), :func:`centre`,
   :func:`scaled`;
2. :mod:`.moments`: :class:`Moments` with batch-means standard errors,
   :func:`integrated_autocorrelation_time`, :func:`autocorrelation`;
3. :mod:`.runs`: work limits (:class:`WorkWarning`), the job runner, the burn-in rule and
   the result base of a run;
4. :mod:`.chain`: :func:`simulate_fluctuations`, the exact chain (→ :class:`FluctuationSim`);
5. :mod:`.diffusions`: :func:`limit_sde`, :func:`limit_for`, :func:`prelimit_sde`
   (→ :class:`LimitSDE`), :func:`limit_closed_form`, :func:`limit_acf_a`;
6. :mod:`.comparison`: :func:`lna_moments`, :func:`lna_acf`, :func:`compare`
   (→ :class:`Comparison`), :func:`scaling` (→ :class:`ScalingResult`).

Submodules import one way: ``regimes``, ``moments`` → ``runs`` → ``chain``, ``diffusions``
→ ``comparison``.  The tuning constants (``chain.TABLE_MAX_N``, ``chain.CHUNK_EVENTS``,
``diffusions.CHUNK_STEPS``, the work limits in ``runs``) are re-exported here for reading;
to change one (tests do), patch it in the submodule that uses it.

Coordinates (docs/model.md §8): ``Z_1, Z_2`` in regime (a), ``Q, Y`` in (b) and (c), both
reported under the keys ``z1`` and ``z2``.
"""

from __future__ import annotations

from .chain import CHUNK_EVENTS, TABLE_MAX_N, FluctuationSim, simulate_fluctuations
from .comparison import Comparison, ScalingResult, ScalingRow, compare, lna_acf, lna_moments, scaling
from .diffusions import (
    CHUNK_STEPS,
    REFLECTIONS,
    SDE_CHUNK,
    LimitSDE,
    limit_acf_a,
    limit_closed_form,
    limit_for,
    limit_sde,
    prelimit_sde,
)
from .moments import BATCH_TAU_FACTOR, KEYS, Moments, autocorrelation, integrated_autocorrelation_time
from .regimes import (
    DERIVED_NOTE,
    LARGE_D_ONE_MINUS_LAMBDA,
    LEVEL_CAPACITY,
    MAX_REGIME_N,
    REGIMES,
    SMALL_SQRT_N_GAP,
    Condition,
    RegimeCondition,
    RegimeParams,
    RegimeWarning,
    centre,
    regime_a,
    regime_b,
    regime_c,
    regime_params,
    scaled,
)
from .runs import EVENTS_PER_SECOND, MAX_GRID_BYTES, REFUSE_EVENTS, SDE_STEPS_PER_SECOND, WARN_EVENTS, WorkWarning

__all__ = [
    "RegimeWarning",
    "RegimeCondition",
    "Condition",
    "REGIMES",
    "RegimeParams",
    "regime_a",
    "regime_b",
    "regime_c",
    "regime_params",
    "centre",
    "scaled",
    "Moments",
    "FluctuationSim",
    "simulate_fluctuations",
    "LimitSDE",
    "limit_sde",
    "prelimit_sde",
    "integrated_autocorrelation_time",
    "WorkWarning",
    "limit_for",
    "limit_closed_form",
    "limit_acf_a",
    "lna_moments",
    "lna_acf",
    "Comparison",
    "compare",
    "ScalingRow",
    "ScalingResult",
    "scaling",
    "autocorrelation",
    "LARGE_D_ONE_MINUS_LAMBDA",
]

# Public constants of the former single module, importable from here as before (not in
# ``__all__``, as before): KEYS, DERIVED_NOTE, BATCH_TAU_FACTOR, REFLECTIONS, SDE_CHUNK,
# LEVEL_CAPACITY, MAX_REGIME_N, SMALL_SQRT_N_GAP, TABLE_MAX_N, CHUNK_EVENTS, CHUNK_STEPS,
# EVENTS_PER_SECOND, SDE_STEPS_PER_SECOND, REFUSE_EVENTS, WARN_EVENTS, MAX_GRID_BYTES.
