"""Fluctuations near equilibrium with growing choices: the three regimes of paper 002
(docs/model.md §8; the limits are derived, not theorems of the paper; docs/fluctuations.md).

Modules, importing one way: :mod:`.regimes`, :mod:`.moments` → :mod:`.runs` (work limits,
job runner, result base) → :mod:`.chain` (the exact chain), :mod:`.diffusions` (limit and
pre-limit SDEs) → :mod:`.comparison`.  Tuning constants are re-exported here for reading;
patch them in the submodule that uses them.  Coordinates ``Z_1, Z_2`` (a) or ``Q, Y`` (b, c)
are reported as ``z1``, ``z2``.
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

# The constants imported above are importable from here but not in ``__all__``.
