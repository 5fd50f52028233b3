"""The experiments of paper 000 at sizes a laptop can run (docs/model.md §3–§6): E1 equilibrium
at length ``k``, E2 mixing from a good state, E3 bad starts, E4 the power of two choices; what
each measures, writes and costs is in docs/mixing.md ("The paper-000 experiments").

One module each: :mod:`.output` (tables, figures' backend, error-bar cells, the verdict rule
:data:`Z_FINDING`), :mod:`.equilibrium_run` (:func:`equilibrium`, :func:`good_set_mask`),
:mod:`.e1_e4_equilibrium`, :mod:`.e2_e3_mixing`, :mod:`.driver` (:func:`run`, the duration
estimate) and :mod:`.claims` (the "Claims" table of ``summary.md``).
"""

from __future__ import annotations

# the constants stay readable as paper000.NAME
from .driver import RATE_STEPS_PER_S, expected_seconds, expected_steps, run
from .e1_e4_equilibrium import e1_equilibrium, e4_power_of_choices
from .e2_e3_mixing import e2_mixing_scaling, e3_bad_starts
from .equilibrium_run import (
    PROFILE_RATE_D1_STEPS_PER_S,
    PROFILE_RATE_STEPS_PER_S,
    SNAPSHOTS,
    TASK_OVERHEAD_S,
    equilibrium,
    good_set_mask,
)
from .output import Z_FINDING

__all__ = [
    "run",
    "e1_equilibrium",
    "e2_mixing_scaling",
    "e3_bad_starts",
    "e4_power_of_choices",
    "equilibrium",
    "good_set_mask",
    "expected_steps",
    "expected_seconds",
]
