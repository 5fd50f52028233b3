"""The linear-noise approximation (docs/model.md §3, §8): the stationary covariance of
``√n (u − x)`` at the mean-field fixed point or at the finite-n centre ``x^n``
(:func:`lna`, :class:`LNAResult`), solved by :mod:`.lyapunov` with its accuracy estimate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..model import check_load, check_positive_int
from ..result import Result, frame, text_table
from ..theory import log_fixed_point
from .dynamics import DEFAULT_TOL, MAX_LEVELS, _check_n, _levels, _noise_diag, near_equilibrium_centre, rule_d
from .lyapunov import AccuracyWarning, _accuracy, _lyapunov

__all__ = ["LNAResult", "lna"]


@dataclass(frozen=True)
class LNAResult(Result):
    """Linear-noise approximation: stationary covariance of ``√n (u − x)`` (docs/model.md §3, §8).

    ``centre``: the point ``x`` (the fixed point π or the finite-n centre ``x^n``);
    ``covariance``: ``levels x levels``; ``jacobian``: the drift's Jacobian at ``x``.

    Examples
    --------
    >>> lna(2, 0.9).std.size == lna(2, 0.9).levels
    True
    """

    d: int
    lam: float
    n: int | None
    at: str
    replace: bool
    levels: int
    centre: np.ndarray
    covariance: np.ndarray
    jacobian: np.ndarray = field(repr=False)
    accurate: bool = True  # False: the Lyapunov solve lost its accuracy; the covariance is not to be used
    error_estimate: float = 0.0
    issues: tuple = ()

    @property
    def mean(self) -> np.ndarray:
        return self.centre

    @property
    def std(self) -> np.ndarray:
        """Standard deviations of ``√n u_i``."""
        return np.sqrt(np.clip(np.diag(self.covariance), 0.0, None))

    _rename: ClassVar[dict[str, str]] = {"lam": "load"}
    _omit = ("jacobian",)

    def to_frame(self) -> Any:
        """Tidy table: one row per pair of levels (``i``, ``j`` from 1) with ``covariance``;
        the diagonal rows also carry ``centre`` and ``std`` (NaN elsewhere)."""
        L = self.levels
        i, j = np.meshgrid(np.arange(1, L + 1), np.arange(1, L + 1), indexing="ij")
        diag = i.ravel() == j.ravel()
        centre = np.where(diag, self.centre[i.ravel() - 1], np.nan)
        std = np.where(diag, self.std[i.ravel() - 1], np.nan)
        return frame(
            {"i": i.ravel(), "j": j.ravel(), "covariance": self.covariance.ravel(), "centre": centre, "std": std}
        )

    def summary(self) -> str:
        """The centre and the standard deviation of √n u_i by level (or why they are not shown)."""
        where = "fixed point π" if self.at == "fixed-point" else f"near-equilibrium centre x^n (n={self.n})"
        head = (
            f"linear-noise approximation at the {where}, d={self.d}, λ={self.lam!r}"
            + ("" if self.replace else ", without replacement")
            + " (docs/model.md §3, §8)"
        )
        if not self.accurate:
            return head + f"\ncovariance not shown: not accurate ({'; '.join(self.issues)})"
        rows = [[str(k + 1), f"{self.centre[k]:.8g}", f"{self.std[k]:.6g}"] for k in range(self.levels)]
        return head + "\n" + text_table(["i", "centre", "sd of √n u_i"], rows)


def lna(
    d: int,
    lam: float | str,
    *,
    n: int | None = None,
    at: str = "fixed-point",
    replace: bool = True,
    levels: int | None = None,
    tol: float = DEFAULT_TOL,
    max_levels: int = MAX_LEVELS,
    policy: str = "jsq-d",
) -> LNAResult:
    """Stationary covariance of ``√n (u − x)`` in the linear-noise approximation (docs/model.md §3, §8).

    Solves ``A W + W A^T + Q = 0`` with ``A`` the drift's Jacobian and ``Q`` the noise
    covariance at ``x``:
    - ``at="fixed-point"``: ``x = π`` (mean-field fixed point, sampling with replacement);
    - ``at="centre"``: ``x = x^n``, the near-equilibrium centre of paper 002, with the drift
      of the finite-n sampling law ``P_n`` (needs ``n``; with ``replace=True`` it equals π).

    Parameters
    ----------
    d, lam
        The choices ``d >= 1`` (int) and the load λ in (0, 1) (float or str).
    n : int, optional
        Servers (needed with ``at="centre"``).
    at : {"fixed-point", "centre"}
        Where the noise is linearised: the fixed point ``π`` or the finite-n centre ``x^n``.
    replace : bool, default True
        Sampling with replacement; ``False`` (without) needs ``at="centre"``.
    policy : {"jsq-d", "random"}, default "jsq-d"
        The dispatch rule (docs/model.md §2): ``random`` is the drift with ``d = 1``;
        ``jsq`` and ``jiq`` raise ``ValueError`` (discontinuous mean-field drift).
    levels, tol, max_levels
        Truncation, as in :func:`refined_mean_field`.

    Returns
    -------
    LNAResult

    Raises
    ------
    ValueError
        If ``at`` is neither ``"fixed-point"`` nor ``"centre"``, ``at="centre"`` lacks ``n``,
        ``at="fixed-point"`` is asked with ``replace=False``, or a parameter is out of range.

    Examples
    --------
    >>> c = lna(1, 0.5)   # d = 1: independent M/M/1 queues, Var(√n u_1) = λ(1 − λ)
    >>> round(float(c.covariance[0, 0]), 12)
    0.25
    """
    d_rule, replace = rule_d(policy, d, replace)  # random: d = 1; jsq, jiq: ValueError
    d = check_positive_int("d", d_rule)
    lam = check_load(lam)
    if at not in ("fixed-point", "centre", "center"):
        raise ValueError(f"at must be 'fixed-point' or 'centre'; got {at!r}")
    at = "centre" if at in ("centre", "center") else at
    if at == "centre":
        if n is None:
            raise ValueError("at='centre' needs the number of servers n")
        n = _check_n(n, d, replace)
        x = near_equilibrium_centre(n, d, lam, replace=replace, levels=levels, tol=tol, max_levels=max_levels)
        pn = None if replace else n
        A, W = _lyapunov(x, d, lam, pn, replace)
    else:
        if n is not None:
            n = check_positive_int("n", n)
        if not replace:
            raise ValueError("at='fixed-point' uses sampling with replacement; use at='centre' for replace=False")
        x = np.exp(log_fixed_point(d, lam, _levels(d, lam, levels, tol, max_levels)))
        A, W = _lyapunov(x, d, lam, None, True)
        pn = None
    est, issues = _accuracy(A, W, _noise_diag(x, d, lam, pn, replace if at == "centre" else True))
    if issues:
        import warnings

        warnings.warn(
            f"linear-noise covariance at d={d}, load={lam!r} is not accurate ({'; '.join(issues)}): "
            "it is not to be used (the centre is)",
            AccuracyWarning,
            stacklevel=2,
        )
    return LNAResult(
        d=d,
        lam=lam,
        n=n,
        at=at,
        replace=bool(replace),
        levels=int(x.size),
        centre=x,
        covariance=W,
        jacobian=A,
        accurate=not issues,
        error_estimate=float(est),
        issues=issues,
    )
