"""Closed forms and calculators of the papers (docs/model.md §3–6 and §8); nothing is simulated.

:mod:`.equilibrium` (§3–§4: ``π``, ``k_{λ,d}``, the linearised profile), :mod:`.good_set_theorem`
(§5), :mod:`.mixing_time` (§6), :mod:`.paper002` (§8), :mod:`.sizing` (:func:`design`) and
:mod:`.report` (``supermarket theory``).  What docs/model.md marks [derived] is called "derived"
in user-facing text, never "Theorem".  Profiles are indexed from level 1 (``u[0] = u_1``).
"""

from __future__ import annotations

from .equilibrium import (
    LINEARISATION_NOTE,
    MAX_FIXED_POINT_LEVELS,
    MAX_K,
    TINY,
    KReport,
    fixed_point,
    k_hypothesis,
    k_lambda_d,
    k_report,
    linearisation_valid,
    linearised_q,
    log_fixed_point,
    mean_queue_length,
    mean_sojourn_time,
    predicted_counts,
)
from .good_set_theorem import (
    SMALL_HEAVY_TRAFFIC,
    Clause,
    Condition,
    GoodSetReport,
    TheoremReport,
    good_set,
    good_set_bounds,
    theorem_1_2,
)
from .mixing_time import (
    MixingBounds,
    SlowMode,
    mixing_bounds,
    mixing_lower_customers,
    mixing_lower_long,
    slow_mode,
    slow_mode_matrix,
    steps_to_time,
)
from .paper002 import REGIME_A_BELOW, REGIME_C_ABOVE, Regime002, regime_002
from .report import TheoryReport, summary, theory_report
from .sizing import DesignReport, design

__all__ = [
    "log_fixed_point",
    "fixed_point",
    "mean_queue_length",
    "mean_sojourn_time",
    "k_lambda_d",
    "KReport",
    "k_report",
    "k_hypothesis",
    "linearised_q",
    "predicted_counts",
    "linearisation_valid",
    "LINEARISATION_NOTE",
    "good_set_bounds",
    "GoodSetReport",
    "good_set",
    "Condition",
    "TheoremReport",
    "theorem_1_2",
    "MixingBounds",
    "mixing_bounds",
    "slow_mode_matrix",
    "SlowMode",
    "slow_mode",
    "Regime002",
    "regime_002",
    "design",
    "TheoryReport",
    "theory_report",
    "DesignReport",
    "steps_to_time",
    "mixing_lower_customers",
    "mixing_lower_long",
    "summary",
]
