"""The validated run of the per-queue event engine (docs/model.md §14): the system, its
horizon and what is measured, one value that :mod:`.run` runs and :mod:`.estimate` summarizes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...system.service import ServerClasses, ServiceLaw


@dataclass(frozen=True, eq=False)
class GeneralRun:
    """A run of :func:`~supermarket.simulation.general.simulate_general`, validated.

    ``lam`` is the load as checked, ``counts`` the servers per class
    (``sc.counts(n)``), ``rate`` the arrival rate ``nλs̄``, ``time`` and ``burn_in`` the measured
    time and the burn-in of each replication, ``qs`` the quantiles and ``code`` the rule's
    kernel code (:func:`supermarket.system.policies.policy_code`)."""

    n: int
    d: int
    lam: float
    policy: str
    replace: bool
    law: ServiceLaw
    sc: ServerClasses
    counts: np.ndarray
    rate: float
    time: float
    burn_in: float
    replications: int
    batches: int
    qs: tuple
    code: int
    control_variates: bool = True
