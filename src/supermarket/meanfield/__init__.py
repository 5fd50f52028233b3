"""Mean-field theory of the supermarket model and its 1/n corrections (docs/model.md §3 and §8).

What is here, each with the docs/model.md section it implements, one module each:

- :mod:`.dynamics`: the drift (eq. (1.1), §3) and its Jacobian, with or without
  replacement; :func:`fixed_point_newton`, :func:`near_equilibrium_centre` (``x^n``, §8) and
  the shared checks;
- :mod:`.ode`: :func:`solve_meanfield` (the transient ODE) and :func:`solve_dinf` (the
  ``d = ∞`` water-filling ODE, integrated exactly);
- :mod:`.corrections`: :func:`refined_mean_field` (the ``1/n`` term ``V``), with
  :mod:`.linear_noise` (:func:`lna`, the linear-noise covariance) and :mod:`.lyapunov` (their
  Lyapunov solve and the estimate of its accuracy);
- :mod:`.phase`: phase-type service (§13): :func:`phase_drift`, :func:`solve_phase_meanfield`
  and :func:`phase_fixed_point`;
- :mod:`.classes` and :mod:`.classes_phase` (imported by name, not re-exported here): server
  classes (§15.2), and with a phase-type law (§15.5); :mod:`.refined_classes`: their refined
  mean field and linear noise, :func:`classes_refined_mean_field` (§15.8); :mod:`.fluid` (likewise): the
  fluid fixed points of ``jsq``, ``jiq`` and ``jbt`` with classes and phase-type laws (§2.1);
- :mod:`.report`: :func:`response_times` and :class:`MeanFieldReport`.

Conventions: profiles are indexed from level 1 (``u[0] = u_1``), ``u_0 ≡ 1`` is implicit
and the truncation sets ``u_{L+1} = 0`` above the top level ``L``.  Time is the continuous
time of docs/model.md §1 (arrivals at rate ``nλ``, services at rate 1).

Powers ``u^d`` are computed with ``numpy.power`` (the C library ``pow``, accurate to an ulp
for ``u`` near 1 and ``d`` up to 10^6 and beyond); without replacement ``log P_n`` is a sum of
``log1p`` terms, so that ``λ = 1 − 1e-9`` and ``d = 10^6`` stay accurate.
"""

from __future__ import annotations

from .corrections import (
    ACCURACY_TOL,
    MAX_LYAPUNOV_LEVELS,
    AccuracyWarning,
    LNAResult,
    RefinedMeanField,
    lna,
    refined_mean_field,
)
from .dynamics import (
    DEFAULT_TOL,
    MAX_LEVELS,
    check_d,
    check_profile,
    drift,
    drift_jacobian,
    fixed_point_newton,
    levels_needed,
    near_equilibrium_centre,
    rule_d,
    sample_prob,
)
from .ode import DInfSolution, MeanFieldSolution, solve_dinf, solve_meanfield
from .phase import PhaseFixedPoint, phase_drift, phase_fixed_point, solve_phase_meanfield
from .refined_classes import ClassesRefinedMeanField, classes_refined_mean_field
from .report import MeanFieldReport, response_times

__all__ = [
    "DEFAULT_TOL",
    "MAX_LEVELS",
    "MAX_LYAPUNOV_LEVELS",
    "check_profile",
    "check_d",
    "levels_needed",
    "sample_prob",
    "rule_d",
    "drift",
    "drift_jacobian",
    "MeanFieldSolution",
    "solve_meanfield",
    "fixed_point_newton",
    "near_equilibrium_centre",
    "DInfSolution",
    "solve_dinf",
    "RefinedMeanField",
    "refined_mean_field",
    "LNAResult",
    "lna",
    "AccuracyWarning",
    "ACCURACY_TOL",
    "response_times",
    "MeanFieldReport",
    "phase_drift",
    "PhaseFixedPoint",
    "phase_fixed_point",
    "solve_phase_meanfield",
    "ClassesRefinedMeanField",
    "classes_refined_mean_field",
]
