"""The experiments of paper 000 at sizes a laptop can run (docs/model.md §4, §5, §6).

``run(out_dir, quick=False, seed=0, workers=None)`` writes, for each experiment, a table
(``E*.csv`` and ``E*.json``), a figure (``E*.png``) and a short Markdown summary
(``E*.md``), plus ``summary.md`` with every claim and what the runs show:

- **E1 equilibrium** (§4, §5): ``λ = 1 − n^{−α}``, ``d = ⌊n^β⌋``; the maximum queue length
  against ``k``, the fraction of queues of length ``k``, the share of time in ``N^ε``.
- **E2 mixing scaling** (§6): coalescence time from a good state against the two orders.
- **E3 bad starts** (§6): from ``‖x‖₁ = g n`` and from one long queue.
- **E4 power of two choices** (§3): the equilibrium maximum against ``log n`` and ``log log n``.

Equilibrium statistics come from :func:`supermarket.simulate` with blocking standard errors
(§9): a comparison whose error bar is not reliable says "too short to know".  The papers'
orders are taken with constant 1.  Quick mode runs in under 3 minutes on 2 cores.

The parts, one module each:

1. **Output** (:mod:`.output`): tables (CSV + JSON), the figures' backend, log-log slopes,
   numbers with their error bars and the verdict rule (:data:`Z_FINDING`).
2. **Equilibrium run** (:mod:`.equilibrium_run`): :func:`equilibrium`, :func:`good_set_mask`,
   the parallel map over configurations and the expected cost of a run.
3. **E1 and E4** (:mod:`.e1_e4_equilibrium`): :func:`e1_equilibrium`,
   :func:`e4_power_of_choices`.
4. **E2 and E3** (:mod:`.e2_e3_mixing`): :func:`e2_mixing_scaling`, :func:`e3_bad_starts`
   (with the TV curve).
5. **Driver** (:mod:`.driver`): :func:`run`, :func:`expected_steps`, :func:`expected_seconds`.
6. **Claims** (:mod:`.claims`): the "Claims" table at the top of ``summary.md``, one row
   per claim of paper 000 with a verdict and evidence computed from the rows and fits of E1–E4.
"""

from __future__ import annotations

# the constants (RATE_STEPS_PER_S, SNAPSHOTS, Z_FINDING, ...) stay readable as paper000.NAME, as before the split
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
