"""The mean-field fixed point of a :class:`~supermarket.system.spec.System` whose mean field is not
the exponential ODE of :mod:`.ode`: phase-type service (docs/model.md §13), server classes
(§15.2) and both (§15.5), as one JSON-ready mapping.

Which of them serves a system, or why none does, is the method table's answer
(:func:`supermarket.system.methods.mean_field`); the command line (``meanfield --service``,
``--server-classes``) and a sweep's ``meanfield`` point both read it here, so that one system
gets one answer and one refusal through every door.
"""

from __future__ import annotations

from typing import Any

from ..system.methods import mean_field
from ..system.spec import System

__all__ = ["fixed_point_report"]


def fixed_point_report(system: System, *, levels: int | None = None) -> dict[str, Any]:
    """The fixed point of ``system``'s mean field, as the command line's ``--json`` prints it.

    Parameters
    ----------
    system : System
        ``n`` is not used (the fixed point does not depend on it); a phase-type law or server
        classes (a rule whose drift is discontinuous: its fluid fixed point).
    levels : int, optional
        Levels kept (by default as many as make the top level negligible).

    Raises
    ------
    ValueError
        The method table's refusal (no phase-type form), or the
        solver's own (an overloaded class under ``random``, a system too large to solve).

    Examples
    --------
    >>> r = fixed_point_report(System(None, 2, 0.8, service="erlang:2"))
    >>> r["engine"], r["busy_fraction"]
    ('meanfield-phase', 0.8)
    >>> [round(x, 12) for x in fixed_point_report(System(None, 2, 0.5, server_classes="1:1"))["u_mean"][:2]]
    [0.5, 0.125]
    """
    field = mean_field(system)
    lam, classes = system.lam, system.server_classes
    if field == "phase":
        from .phase import phase_report

        return phase_report(system.d, lam, system.service, policy=system.rule, levels=levels)
    if field == "classes":
        from .classes import classes_fixed_point

        assert classes is not None  # the table says "classes" only for a system with classes
        return classes_fixed_point(system.d, lam, classes, policy=system.rule, levels=levels).to_dict()
    if field == "classes_phase":
        from .classes_phase import classes_phase_fixed_point

        assert classes is not None
        return classes_phase_fixed_point(
            system.d, lam, classes, system.service, policy=system.rule, levels=levels
        ).to_dict()
    if field == "fluid" and (classes is not None or system.law_family != "exponential"):
        from .fluid import fluid_fixed_point

        return fluid_fixed_point(system.rule, system.d, lam, classes, system.service).to_dict()
    raise ValueError(
        f"{system.describe()}: its mean field is the {field!r} one (supermarket.meanfield), not a fixed point of a "
        "phase-type law or server classes"
    )
