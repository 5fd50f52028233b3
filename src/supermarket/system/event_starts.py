"""Which systems the event engine (engine ``"events"``, docs/model.md §14) starts at the
``"fixed-point"`` from, and why not the others: the one reason, read by
:func:`supermarket.system.methods.check_options` (the library, the command line and the sweep)
and by :func:`supermarket.simulation.general.simulate_general`.

The event engine starts where the count engine of the same system starts: the mean field's
fixed point of a rule with a differentiable drift (``jsq-d``, ``random``), and the fluid fixed
point of ``jsq``, ``jiq`` and ``jbt`` (:mod:`supermarket.meanfield.fluid`, docs/model.md §2.1);
exponential or phase-type service, one class or server classes.  A law with no phase-type form
has no mean field of finitely many phases, so no fixed point.  :data:`NOT_YET` would name the
systems whose fixed point exists but is not implemented as a start (none now): a new rule
without a start is one entry there.
"""

from __future__ import annotations

from collections.abc import Callable

from ..model import exact_load
from .spec import System

__all__ = ["fixed_point_refusal", "NOT_YET"]

#: The systems with a fixed point the event engine does not start from yet, and the reason: none
#: now (every rule has its mean-field or fluid fixed point, with and without classes); an entry
#: here is all a new rule without a start takes.
NOT_YET: dict[str, Callable[[System], bool]] = {}


def fixed_point_refusal(system: System) -> str | None:
    """Why the event engine cannot start ``system`` at the ``"fixed-point"``, in the model's
    terms (the text follows the option's name), or None when it can.

    Examples
    --------
    >>> fixed_point_refusal(System(10, 2, 0.5, service="erlang:2", server_classes="0.5:2,0.5:1")) is None
    True
    >>> fixed_point_refusal(System(10, 2, 0.5, service="lognormal:2"))[:88]
    'service lognormal:2 has no phase-type form, so no mean-field fixed point to start from; '
    >>> fixed_point_refusal(System(10, 2, 0.5, rule="jbt", server_classes="0.5:2,0.5:1")) is None
    True
    """
    if system.law_family == "general":
        return (
            f"service {system.service.spec} has no phase-type form, so no mean-field fixed point to start from; "
            "start 'empty' with a burn-in"
        )
    if exact_load(system.load) >= 1:
        return (
            "'fixed-point' needs load λ < 1: at λ >= 1 the mean field has no fixed point (the queues grow without "
            "bound)"
        )
    for what, applies in NOT_YET.items():
        if applies(system):
            rule = system.rule + (" with server classes" if system.has_classes else "")
            return f"'fixed-point': the event engine has no fixed point of {rule} yet ({what}); start 'empty'"
    return None
