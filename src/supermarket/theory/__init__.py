"""Closed forms and calculators of the papers (docs/model.md §3–6 and §8).

Everything here is exact or closed-form and fast; nothing is simulated.  Each function
names the docs/model.md section it implements.  Items that docs/model.md marks **[derived]** (the
linearised profile, the slow mode, the paper-002 limits) are worked out for this project;
user-facing text says "derived" for them, never "Theorem".

The parts, one module each:

- :mod:`.equilibrium` (§3–§4): the fixed point ``π``, ``k_{λ,d}`` and the linearised
  profile [derived];
- :mod:`.good_set_theorem` (§5): the good set ``N^ε`` and the conditions of Theorem 1.2;
- :mod:`.mixing_time` (§6): the mixing-time orders and the slow mode [derived];
- :mod:`.paper002` (§8): the paper-002 quantities; :mod:`.sizing` (§4): :func:`design`;
- :mod:`.report`: all of the above for one ``(n, d, λ)``, behind ``supermarket theory``.

No submodule is named like a function: the package attribute is the function.

Conventions: a *profile* array ``u`` is indexed from level 1, ``u[0] = u_1``; likewise
``pi[0] = π(1)``.  ``n`` servers (``1 <= n <= MAX_THEORY_N``), ``d`` choices, load ``lam``
(λ in (0, 1): a float, or a string such as ``"0.999"`` read exactly).
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
    # public before the split too (documented, used by other modules), now listed so that the
    # API page, which renders what __all__ names, still shows them
    "steps_to_time",
    "mixing_lower_customers",
    "mixing_lower_long",
    "summary",
]
