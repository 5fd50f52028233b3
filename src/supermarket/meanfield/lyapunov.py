"""The Lyapunov equation of the ``1/n`` corrections (docs/model.md §3, §8): its solve at a profile,
``A W + W A^T + Q = 0`` with ``A`` the drift's Jacobian and ``Q`` the noise covariance
(:data:`MAX_LYAPUNOV_LEVELS` levels at most), and the a-posteriori estimate of the accuracy of
``W`` and of the refined mean field's ``V`` (:data:`ACCURACY_TOL`, :class:`AccuracyWarning`),
shared by :mod:`.corrections` and :mod:`.linear_noise`.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg as sla

from .dynamics import _noise_diag, drift_jacobian

__all__ = ["MAX_LYAPUNOV_LEVELS", "ACCURACY_TOL", "AccuracyWarning"]

MAX_LYAPUNOV_LEVELS = 1000  # the dense Lyapunov solve costs O(L^3): ~10 s at L = 800 on 2 cores
ACCURACY_TOL = 1e-4  # a refined mean field / covariance whose estimated relative error exceeds this is flagged


class AccuracyWarning(RuntimeWarning):
    """A linear solve lost its accuracy (ill-conditioned near λ = 1): the result is flagged
    ``accurate=False`` and its numbers must not be used.

    Examples
    --------
    >>> issubclass(AccuracyWarning, RuntimeWarning)
    True
    """


def _lyapunov(u, d, lam, n, replace):
    """Jacobian ``A`` and the solution ``W`` of ``A W + W A^T + Q = 0`` at the profile ``u``."""
    if u.size > MAX_LYAPUNOV_LEVELS:
        raise ValueError(
            f"levels: the Lyapunov equation would have {u.size} levels (more than "
            f"{MAX_LYAPUNOV_LEVELS}; its dense solve costs O(levels^3)); at d={d}, load={lam!r} "
            "pass a larger tol (e.g. tol=1e-6) or fewer levels"
        )
    A = drift_jacobian(u, d, lam, n=n, replace=replace)
    Q = np.diag(_noise_diag(u, d, lam, n, replace))
    import warnings

    with warnings.catch_warnings():
        # SciPy's own ill-conditioning warnings are replaced by the flag of _accuracy
        warnings.simplefilter("ignore", sla.LinAlgWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        W = sla.solve_continuous_lyapunov(A, -Q)
    return A, 0.5 * (W + W.T)


def _accuracy(A, W, Q_diag, V=None, rhs_of=None):
    """Estimated relative error of the solution ``W`` of ``A W + W A^T + Q = 0`` (``Q_diag``: the
    diagonal of ``Q``, or the matrix ``Q`` itself) (and of ``V``,
    the solution of ``A V = rhs_of(W)``), and the reasons to distrust them, if any.

    Up to 300 levels the estimate is a posteriori: one step of iterative refinement with the
    residuals computed in extended precision (``numpy.longdouble``), ``‖δW‖/‖W‖`` with
    ``A δW + δW A^T = −R``, and for ``V`` its own residual correction plus the change of
    ``V`` under ``W + δW``.  Above 300 levels (the dense solves are costly) the worst-case
    bound ``cond_1(A)·ε`` is used.  The drift's Jacobian has an eigenvalue near 0 when λ is
    near 1 (the slow mode of docs/model.md §6), so both grow like ``1/(1−λ)``.  Then checks
    that the covariance is one: finite, variances >= 0, no eigenvalue below
    ``−(estimate)·‖W‖``.  Flagged when the estimate exceeds :data:`ACCURACY_TOL` or
    ``cond_1(A)·ε >= 1`` (then no estimate can be trusted either).
    """
    import warnings

    issues = []
    eps = np.finfo(float).eps
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            cond = float(np.linalg.norm(A, 1) * np.linalg.norm(np.linalg.inv(A), 1))
        except np.linalg.LinAlgError:
            cond = math.inf
        if not math.isfinite(cond):
            cond = math.inf
        wmax = float(np.max(np.abs(W))) if W.size and np.all(np.isfinite(W)) else math.inf
        finite = bool(np.all(np.isfinite(W)) and (V is None or np.all(np.isfinite(V))))
        if not finite:
            issues.append("non-finite values")
            est = math.inf
        elif W.shape[0] <= 300 and math.isfinite(cond):
            Al = A.astype(np.longdouble)
            Wl = W.astype(np.longdouble)
            Ql = np.asarray(Q_diag, dtype=np.longdouble)  # the diagonal of Q, or Q itself (2-D)
            R = (Al @ Wl + Wl @ Al.T + (np.diag(Ql) if Ql.ndim == 1 else Ql)).astype(float)
            dW = sla.solve_continuous_lyapunov(A, -R)
            est = float(np.max(np.abs(dW))) / wmax if wmax > 0 else 0.0
            if V is not None and rhs_of is not None:
                b = rhs_of(W)
                rv = (Al @ V.astype(np.longdouble) - np.asarray(b, dtype=np.longdouble)).astype(float)
                dV = np.linalg.solve(A, -rv) + (np.linalg.solve(A, rhs_of(W + dW)) - V)
                vmax = float(np.max(np.abs(V)))
                if vmax > 0:
                    est = max(est, float(np.max(np.abs(dV))) / vmax)
            if not math.isfinite(est):
                est = math.inf
        else:
            est = cond * eps
    if cond * eps >= 1.0:
        issues.append(
            f"the drift's Jacobian has condition number {cond:.3g} (more than 1/ε = 4.5e15), so a "
            "solve with it keeps no correct digit"
        )
    elif est > ACCURACY_TOL:
        issues.append(f"estimated relative error {est:.3g} (the drift's Jacobian has condition number {cond:.3g})")
    if finite and W.size:
        wd = np.diag(W)
        tol_w = max(min(est, 1.0), 1e-12) * wmax
        if np.any(wd < -tol_w):
            i = int(np.argmin(wd))
            issues.append(f"negative variance {wd[i]:.3g} at level {i + 1}")
        else:
            try:
                lo = float(np.linalg.eigvalsh(W)[0])
            except np.linalg.LinAlgError:
                lo = -math.inf
            if lo < -tol_w * W.shape[0]:
                issues.append(f"the covariance is not positive semi-definite (eigenvalue {lo:.3g})")
    return est, tuple(issues)
