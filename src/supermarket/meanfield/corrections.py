"""The ``1/n`` corrections to the mean field (docs/model.md §3, §8): the refined mean field of Gast and
Van Houdt (2018) (:func:`refined_mean_field`: ``E[u] ≈ π + V/n``, here, with the ``1/n`` term of
sampling without replacement, :func:`sampling_first_order`) and the linear-noise approximation
(:func:`lna`, in :mod:`.linear_noise`), each with an a-posteriori estimate of its accuracy
(:mod:`.lyapunov`: :class:`AccuracyWarning`, :data:`ACCURACY_TOL`).  Every public name of those
modules is importable from here too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from ..checks import check_bool
from ..model import check_load, check_positive_int
from ..result import Result, frame, pyplot, save_figure, text_table
from ..theory import log_fixed_point
from .dynamics import DEFAULT_TOL, MAX_LEVELS, _levels, _noise_diag, rule_d, sample_prob
from .linear_noise import LNAResult, lna
from .lyapunov import ACCURACY_TOL, MAX_LYAPUNOV_LEVELS, AccuracyWarning, _accuracy, _lyapunov

__all__ = [
    "RefinedMeanField",
    "refined_mean_field",
    "sampling_first_order",
    "drift_first_order",
    "LNAResult",
    "lna",
    "AccuracyWarning",
    "ACCURACY_TOL",
    "MAX_LYAPUNOV_LEVELS",
]


@dataclass(frozen=True)
class RefinedMeanField(Result):
    """Refined mean field (Gast and Van Houdt 2018), docs/model.md §3: ``E[u_i] ≈ π(i) + V_i/n``.

    ``pi``: fixed point; ``V``: the 1/n correction; ``W``: the LNA covariance at ``π``
    (solution of ``A W + W A^T + Q = 0``); ``replace``: the sampling law ``V`` is for (without
    replacement ``V`` also holds the drift's own ``1/n`` term, ``V_drift``; zero with replacement).

    Examples
    --------
    >>> r = refined_mean_field(1, 0.5)
    >>> r.valid_for(100), r.to_frame(100).columns.tolist()
    (True, ['level', 'pi', 'V', 'W_ii', 'refined'])
    """

    d: int
    lam: float
    levels: int
    pi: np.ndarray
    V: np.ndarray
    W: np.ndarray = field(repr=False)
    accurate: bool = True  # False: the linear solves lost their accuracy; V and W are not to be used
    error_estimate: float = 0.0  # estimated relative error of V and W (see _accuracy)
    issues: tuple = ()  # why accurate is False, in words
    replace: bool = True  # sampling with replacement (True) or without (False)
    V_drift: np.ndarray | None = field(default=None, repr=False)  # −A^{−1} g(π), included in V (without replacement)

    def _check_n(self, n) -> int:
        n = check_positive_int("n", n)
        if not self.replace and self.d > n:
            raise ValueError(f"n must be >= d={self.d} when sampling without replacement; got n={n}")
        return n

    def valid_for(self, n: int) -> bool:
        """Whether ``π + V/n`` is a profile at all for ``n`` servers: accurate, every value in
        [0, 1] and non-increasing in the level (as ``E[u_i]`` is).  Otherwise ``n`` is too small
        for the 1/n expansion at this load (or the numbers are not accurate); see :meth:`min_n`."""
        n = self._check_n(n)
        m = self.pi + self.V / n
        return bool(
            self.accurate and np.all(np.isfinite(m)) and np.all((m >= 0) & (m <= 1)) and np.all(np.diff(m) <= 0)
        )

    def min_n(self) -> float:
        """The least ``n`` from which ``π + V/n`` is a profile (:meth:`valid_for`): every
        condition is ``n >= c`` — ``−V_i/π(i)`` where ``V_i < 0``, ``V_i/(1 − π(i))`` where
        ``V_i > 0``, ``(V_{i+1} − V_i)/(π(i) − π(i+1))`` where ``V`` increases — so it is
        ``⌈max c⌉`` (``inf`` when no ``n`` will do, e.g. ``V_1 > 0 = 1 − π(1)``).  Being a
        profile is necessary, not sufficient: the expansion is only trusted well above it.

        >>> from supermarket.meanfield import refined_mean_field
        >>> r = refined_mean_field(1, 0.5)  # d = 1: V = 0, π + V/n = π for every n
        >>> r.min_n()
        1
        """
        if not self.accurate:
            return math.inf
        pi, V = self.pi, self.V
        low = 1 if self.replace else int(self.d)  # without replacement n >= d
        c = [float(low)]
        with np.errstate(divide="ignore", invalid="ignore"):
            c += [float(x) for x in np.where(V < 0, -V / pi, 0.0)]
            c += [float(x) for x in np.where(V > 0, V / (1.0 - pi), 0.0)]
            dV, dpi = np.diff(V), -np.diff(pi)
            c += [float(x) for x in np.where(dV > 0, dV / dpi, 0.0)]
        worst = max(math.inf if math.isnan(x) else x for x in c)
        if not math.isfinite(worst):
            return math.inf
        n = math.ceil(worst)
        for _ in range(4):  # rounding of the quotients: step to the least n that passes
            if n > low and self.valid_for(n - 1):
                n -= 1
            elif not self.valid_for(n):
                n += 1
        return n

    def mean(self, n: int) -> np.ndarray:
        """``π + V/n``: the refined approximation of ``E[u]`` for ``n`` servers.

        Warns (:class:`AccuracyWarning`) when the result is not accurate or leaves [0, 1]
        (see :meth:`valid_for`)."""
        n = self._check_n(n)
        if not self.accurate:
            import warnings

            warnings.warn(
                f"refined mean field at d={self.d}, load={self.lam!r} is not accurate: " + "; ".join(self.issues),
                AccuracyWarning,
                stacklevel=2,
            )
        elif not self.valid_for(n):
            import warnings

            warnings.warn(
                f"π + V/n leaves [0, 1] or increases with the level at n={n} (d={self.d}, "
                f"load={self.lam!r}): n is too small for the 1/n expansion here (a profile from "
                f"n = {self.min_n()})",
                AccuracyWarning,
                stacklevel=2,
            )
        return self.pi + self.V / n

    def mean_queue_length(self, n: int | None = None) -> float:
        """``Σπ + ΣV/n`` (``Σπ`` when ``n`` is None)."""
        if n is None:
            return float(self.pi.sum())
        n = self._check_n(n)
        return float(self.pi.sum() + self.V.sum() / n)

    _rename: ClassVar[dict[str, str]] = {"lam": "load"}
    _omit: ClassVar[tuple[str, ...]] = ("W", "V_drift")
    _extra = ("sum_pi", "sum_V")
    _order: ClassVar[tuple[str, ...]] = ("d", "load", "replace", "levels", "pi", "V", "sum_pi", "sum_V")

    @property
    def sum_pi(self) -> float:
        return float(self.pi.sum())

    @property
    def sum_V(self) -> float:
        return float(self.V.sum())

    def to_frame(self, n: int | None = None) -> Any:
        """Tidy table by level: ``level``, ``pi``, ``V``, ``W_ii``, and ``refined`` = π + V/n when
        ``n`` is given (no warning here: check :meth:`valid_for`)."""
        out = {"level": np.arange(1, self.levels + 1), "pi": self.pi, "V": self.V, "W_ii": np.diag(self.W)}
        if n is not None:
            out["refined"] = self.pi + self.V / self._check_n(n)
        return frame(out)

    def summary(self, n: int | None = None) -> str:
        """π and V by level (and π + V/n with ``n``), Σπ and ΣV; the numbers are replaced by the
        reason when the solves lost their accuracy, and π + V/n by a note when it leaves [0, 1]."""
        head = (
            f"refined mean field, d={self.d}, λ={self.lam!r}"
            + ("" if self.replace else ", without replacement (V includes the drift's 1/n term)")
            + f" ({self.levels} levels, docs/model.md §3): "
            f"Σπ = {self.pi.sum():.10g}"
        )
        if not self.accurate:
            return (
                head + f"\nV not shown: the linear solves lost their accuracy ({'; '.join(self.issues)}; "
                f"estimated relative error {self.error_estimate:.3g})"
            )
        ok = n is not None and self.valid_for(n)
        m = self.pi + self.V / n if n is not None else None
        rows = [
            [str(i + 1), f"{self.pi[i]:.8g}", f"{self.V[i]:.6g}"]
            + ([f"{m[i]:.8g}" if ok and m is not None else "—"] if n is not None else [])
            for i in range(self.levels)
        ]
        t = text_table(["i", "π(i)", "V_i"] + ([f"π(i)+V_i/n, n={n}"] if n is not None else []), rows)
        out = head + f", ΣV = {self.V.sum():.6g}\n" + t
        if n is not None:
            out += (
                f"\nrefined mean queue length Σπ + ΣV/n = {self.mean_queue_length(n):.10g}"
                if ok
                else f"\nπ + V/n leaves [0, 1] or increases with the level at n={n}: n is too small for the 1/n "
                f"expansion here (a profile from n = {self.min_n()}) (—)"
            )
        return out

    def plot(self, path: Any = None, *, n: int) -> Any:
        """π(i) against π(i) + V_i/n on a log scale.  Returns the figure; saves it when ``path``
        is given."""
        plt = pyplot(path is not None, force=False)

        n = self._check_n(n)
        lv = np.arange(1, self.levels + 1)
        fig, ax = plt.subplots(figsize=(7, 4.5))
        ax.semilogy(lv, np.where(self.pi > 0, self.pi, np.nan), "o-", label="π(i) (mean field)")
        if self.accurate:
            m = self.pi + self.V / n
            ax.semilogy(lv, np.where(m > 0, m, np.nan), "s--", label=f"π(i) + V_i/n, n={n}")
        ax.set_xlabel("level i")
        ax.set_ylabel("fraction of queues with ≥ i customers")
        ax.set_title(f"refined mean field, d={self.d}, λ={self.lam}")
        ax.legend()
        fig.tight_layout()
        return save_figure(fig, path)


def refined_mean_field(
    d: int,
    lam: float | str,
    *,
    replace: bool = True,
    levels: int | None = None,
    tol: float = DEFAULT_TOL,
    max_levels: int = MAX_LEVELS,
    policy: str = "jsq-d",
) -> RefinedMeanField:
    """The ``1/n`` term of the steady state (Gast and Van Houdt 2018), docs/model.md §3.

    ``W`` solves ``A W + W A^T + Q = 0`` and ``V = −A^{−1} (½ B:W)``, with ``A``, ``B`` the
    drift's Jacobian and Hessian at ``π`` and ``Q`` the noise covariance; without replacement
    ([derived]) ``V`` gains the drift's own ``1/n`` term, ``V_drift = −A^{−1} g(π)``.  The
    formulas are in docs/model.md §3; ``V`` does not depend on ``n``.

    Parameters
    ----------
    d, lam
        The choices ``d >= 1`` (int) and the load λ in (0, 1) (float or str).
    replace : bool, default True
        Sampling with replacement, or without (then ``π + V/n`` needs ``n >= d``).
    policy : {"jsq-d", "random"}, default "jsq-d"
        The dispatch rule (docs/model.md §2): ``random`` is the drift with ``d = 1``;
        ``jsq`` and ``jiq`` raise ``ValueError`` (discontinuous mean-field drift).
    levels : int, optional
        Number of levels kept (at most ``max_levels``); by default up to the first level
        with ``π(i) < tol`` (:func:`levels_needed`).
    tol, max_levels
        That threshold and the largest number of levels allowed.

    Returns
    -------
    RefinedMeanField
        ``accurate`` is False (with an :class:`AccuracyWarning`) when the solves lost their
        accuracy near λ = 1.

    Raises
    ------
    ValueError
        If ``d`` or λ is out of range, or the truncation needs more than ``max_levels`` levels
        (or more than :data:`MAX_LYAPUNOV_LEVELS` for the dense Lyapunov solve).

    Examples
    --------
    >>> r = refined_mean_field(2, 0.9)
    >>> round(r.mean_queue_length(), 5), round(float(r.V.sum()), 3)
    (2.35265, 3.986)
    >>> float(abs(refined_mean_field(3, 0.9, policy="random").V).max())   # M/M/1 queues: no 1/n term
    0.0
    """
    d_rule, replace = rule_d(policy, d, replace)  # random: d = 1; jsq, jiq: ValueError
    d = check_positive_int("d", d_rule)
    lam = check_load(lam)
    check_bool("replace", replace)
    L = _levels(d, lam, levels, tol, max_levels)
    pi = np.exp(log_fixed_point(d, lam, L))
    A, W = _lyapunov(pi, d, lam, None, True)
    p2 = sample_prob(pi, d, order=2)
    g = np.zeros(L) if replace else drift_first_order(pi, d, lam)
    import warnings

    def half_hessian_term(w):
        """``½ Σ_jk B_{i,jk} w_jk = ½ λ (P''(π_{i−1}) w_{i−1,i−1} − P''(π_i) w_ii)``, ``π_0 = 1`` fixed."""
        wd = np.diag(w)
        t = -lam * p2 * wd
        t[1:] += lam * p2[:-1] * wd[:-1]
        return 0.5 * t

    def rhs_of(w):  # V solves A V = rhs_of(W)
        return -half_hessian_term(w) - g

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        V = np.linalg.solve(A, rhs_of(W))
        V_drift = None if replace else -np.linalg.solve(A, g)
    est, issues = _accuracy(A, W, _noise_diag(pi, d, lam, None, True), V, rhs_of)
    accurate = not issues
    if not accurate:
        warnings.warn(
            f"refined mean field at d={d}, load={lam!r} is not accurate ({'; '.join(issues)}): "
            "V and W are not to be used (the mean field π is)",
            AccuracyWarning,
            stacklevel=2,
        )
    return RefinedMeanField(
        d=d,
        lam=lam,
        levels=L,
        pi=pi,
        V=V,
        W=W,
        accurate=accurate,
        error_estimate=float(est),
        issues=issues,
        replace=bool(replace),
        V_drift=V_drift,
    )


def sampling_first_order(v: ArrayLike, d: int) -> np.ndarray:
    """``h(v) = −½d(d−1)(v^{d−1} − v^d)``, the ``1/n`` term of sampling without replacement:
    ``C(nv, d)/C(n, d) = v^d + h(v)/n + O(1/n²)`` (docs/model.md §3, derived).

    Examples
    --------
    >>> from math import comb
    >>> n, c, d = 1000, 700, 3                   # 1000² × (exact − (v^d + h/n)) stays O(1)
    >>> v = c / n
    >>> abs(comb(c, d) / comb(n, d) - v**d - float(sampling_first_order([v], d)[0]) / n) * n**2 < 1
    True
    """
    v = np.asarray(v, dtype=float)
    if d == 1:
        return np.zeros_like(v)
    return -0.5 * d * (d - 1.0) * np.power(v, d - 1.0) * (1.0 - v)


def drift_first_order(u: ArrayLike, d: int, lam: float | str) -> np.ndarray:
    """``g_i(u) = λ(h(u_{i−1}) − h(u_i))`` (``u_0 = 1``, ``h(1) = 0``): the ``1/n`` term of the
    drift without replacement, ``f_n = f + g/n + O(1/n²)`` (docs/model.md §3, derived)."""
    hu = sampling_first_order(u, d)
    return lam * (np.concatenate(([0.0], hu[:-1])) - hu)
