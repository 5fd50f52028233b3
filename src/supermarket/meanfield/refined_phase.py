"""The refined mean field (the ``1/n`` term) and the linear noise with phase-type service
(docs/model.md §13): the generic expansion of :mod:`.expansion` applied to the drift of
:func:`.phase.phase_drift` and the jumps of :func:`.phase.phase_jumps` at the fixed point of
:func:`.phase.phase_fixed_point` [paper: Gast and Van Houdt 2018; the jumps: derived].

The state is ``x[ℓ, φ]`` (levels × phases); what is reported is the profile
``u_ℓ = s_ℓ = Σ_{i>=ℓ} Σ_φ x[i, φ]``, a linear map ``u = C x`` of it, so that
``V_u = C V_x`` and ``W_u = C W_x Cᵀ`` (exact: the expansion commutes with linear maps).
Sampling with replacement only: without it the drift has a ``1/n`` term of its own, derived
for exponential service only (docs/model.md §3).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..checks import check_bool
from ..model import check_load
from .corrections import RefinedMeanField
from .expansion import SECOND_STEP, refined_expansion
from .lyapunov import MAX_LYAPUNOV_LEVELS, AccuracyWarning
from .phase import _levels, phase_drift, phase_fixed_point, phase_jumps

__all__ = ["PhaseRefinedMeanField", "phase_refined_mean_field", "TOL"]

TOL = 1e-14  # the profile is reported up to its first level below this (the fixed point's own tol)


@dataclass(frozen=True)
class PhaseRefinedMeanField(RefinedMeanField):
    """:class:`~supermarket.meanfield.corrections.RefinedMeanField` of the profile ``u`` with a
    phase-type law (docs/model.md §13): ``pi``, ``V``, ``W`` are those of ``u`` (levels), and
    ``x``, ``V_x``, ``W_x`` those of the state by level and phase (flattened, index
    ``(ℓ−1)K + φ``).

    Examples
    --------
    >>> r = phase_refined_mean_field(1, 0.5, "erlang:2")   # M/E2/1 queues: no 1/n term
    >>> float(abs(r.V).max()) < 1e-12, r.service
    (True, 'erlang:2')
    """

    service: str = "exp"
    policy: str = "jsq-d"
    phases: int = 1
    derivative_error: float = 0.0
    x: np.ndarray | None = field(default=None, repr=False)
    V_x: np.ndarray | None = field(default=None, repr=False)
    W_x: np.ndarray | None = field(default=None, repr=False)

    _omit: ClassVar[tuple[str, ...]] = ("W", "V_drift", "x", "V_x", "W_x")
    _order: ClassVar[tuple[str, ...]] = ("service", "policy", "d", "load", "replace", "levels", "pi", "V")


def phase_refined_mean_field(
    d: int,
    lam: float | str,
    service: Any,
    *,
    policy: str = "jsq-d",
    replace: bool = True,
    levels: int | None = None,
) -> PhaseRefinedMeanField:
    """``E[u] ≈ π + V/n`` and ``Cov(√n u) ≈ W`` with phase-type service (docs/model.md §13).

    Parameters
    ----------
    d : int
        Choices ``>= 1`` (``random`` runs the drift with ``d = 1``).
    lam : float or str
        Load ``0 < λ < 1``.
    service : str or ServiceLaw
        A law with a phase-type form (``erlang:K``, ``hyperexp:SCV``, ``ph:FILE``, or
        :func:`supermarket.system.service.phase_type`; a law of one phase gives the exponential
        result of :func:`supermarket.meanfield.refined_mean_field` by another path).
    policy : {"jsq-d", "random"}
        A rule with a differentiable drift (the others are refused, by the method table).
    replace : bool
        Must be True (sampling with replacement); False is refused, with the table's reason.
    levels : int, optional
        Levels kept (:func:`supermarket.meanfield.phase.phase_fixed_point`); by default the
        fixed point's, and the profile ``u`` is reported up to its first level below
        :data:`TOL` (the state ``x`` keeps them all).

    Returns
    -------
    PhaseRefinedMeanField
        ``accurate`` is False (with an :class:`AccuracyWarning`) when the solves lost their
        accuracy.

    Raises
    ------
    ValueError
        The method table's refusal (no phase-type form, a discontinuous drift, sampling
        without replacement), a parameter out of range, or more than
        :data:`~supermarket.meanfield.lyapunov.MAX_LYAPUNOV_LEVELS` levels × phases.

    Examples
    --------
    >>> r = phase_refined_mean_field(2, 0.9, "erlang:2")
    >>> round(float(r.pi[0]), 12), bool(r.V[1] > 0)        # u_1 = λ; more queues of length >= 2 at finite n
    (0.9, True)
    """
    from ..system import methods
    from ..system import policies as pol
    from ..system.spec import System

    check_bool("replace", replace)
    lam = check_load(lam)
    system = System(None, d, lam, rule=pol.check_policy(policy), replace=replace, service=service)
    methods.refined_mean_field(system, "replace" if not replace else "service")  # the table's refusals
    law = system.service
    assert law.alpha is not None and law.T is not None  # the table let through a phase-type law only
    dd = int(pol.meanfield_d(system.rule, int(system.d)))
    from ..system.phase_law import check_ph

    a, M, t0 = check_ph(law.alpha, law.T)
    # refused before any work: the levels the fixed point starts from (it may double them, to the M/PH/1 count)
    L0 = levels if levels is not None else min(_levels(dd, lam, a, M, TOL), _levels(1, lam, a, M, TOL))
    if isinstance(L0, int) and L0 * a.size > MAX_LYAPUNOV_LEVELS:
        raise ValueError(
            f"levels: the refined mean field at d={d}, load={lam!r}, service {law.spec} would solve for "
            f"{L0} levels x {a.size} phases (more than {MAX_LYAPUNOV_LEVELS} unknowns; the dense Lyapunov solve "
            "costs O(unknowns^3)); pass fewer levels (levels=, --levels)"
        )
    fp = phase_fixed_point(dd, lam, law.alpha, law.T, levels=levels)
    L, K = fp.x.shape

    def f(v):
        return phase_drift(v.reshape(L, K), lam, dd, a, M, t0).ravel()

    def jumps(v):
        return phase_jumps(v.reshape(L, K), lam, dd, a, M, t0)

    # the drift has degree d: a shorter step for large d keeps the O((d t)^4) error small
    e = refined_expansion(f, jumps, fp.x.ravel(), step=min(SECOND_STEP, 1e-3 / dd))
    C = np.kron(np.triu(np.ones((L, L))), np.ones((1, K)))  # u_ℓ = Σ_{i>=ℓ} Σ_φ x[i, φ]
    if e.issues:
        warnings.warn(
            f"refined mean field at d={d}, load={lam!r}, service {law.spec} is not accurate "
            f"({'; '.join(e.issues)}): V and W are not to be used (the mean field π is)",
            AccuracyWarning,
            stacklevel=2,
        )
    # the profile is reported up to its first level below TOL (as the exponential one, levels_needed):
    # above it π is zero to rounding and V, W are rounding noise that would make π + V/n leave [0, 1]
    low = np.nonzero(fp.u < TOL)[0]
    top = L if levels is not None or low.size == 0 else int(low[0]) + 1
    Wu = (C @ e.W @ C.T)[:top, :top]
    return PhaseRefinedMeanField(
        d=int(system.d),
        lam=lam,
        levels=top,
        pi=fp.u[:top],
        V=(C @ e.V)[:top],
        W=0.5 * (Wu + Wu.T),
        accurate=e.accurate,
        error_estimate=e.error_estimate,
        issues=e.issues,
        replace=True,
        service=law.spec,
        policy=system.rule,
        phases=K,
        derivative_error=e.derivative_error,
        x=fp.x.ravel(),
        V_x=e.V,
        W_x=e.W,
    )
