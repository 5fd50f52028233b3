"""Mean-field theory of the supermarket model and its 1/n corrections (docs/model.md §3 and §8).

What is here, each with the docs/model.md section it implements:

- the drift of the profile ``u`` (eq. (1.1) of paper 000, §3), its Jacobian and Hessian,
  with sampling with replacement (``P(u) = u^d``) or without (``P_n(u) = C(nu,d)/C(n,d)``);
- :func:`solve_meanfield`: the transient ODE from any start profile to a time ``T``, with
  the number of levels chosen automatically and a stiff solver using the analytic
  (tridiagonal, sparse) Jacobian;
- :func:`fixed_point_newton`: a generic Newton solve of the truncated drift (a cross-check
  of the closed form :func:`supermarket.theory.fixed_point`);
- :func:`near_equilibrium_centre`: the finite-n centre ``x^n`` of paper 002 (§8);
- :func:`solve_dinf`: the ``d = ∞`` constrained (water-filling) ODE of paper 002 (§3),
  integrated exactly, piece by piece, in closed form between events;
- :func:`refined_mean_field`: the ``1/n`` term ``V`` of Gast and Van Houdt (2018) (§3);
- :func:`lna`: the linear-noise approximation, the stationary covariance of ``√n (u − x)``.

Conventions: profiles are indexed from level 1 (``u[0] = u_1``), ``u_0 ≡ 1`` is implicit
and the truncation sets ``u_{L+1} = 0`` above the top level ``L``.  Time is the continuous
time of docs/model.md §1 (arrivals at rate ``nλ``, services at rate 1).

Powers ``u^d`` are computed with ``numpy.power`` (the C library ``pow``, accurate to an ulp
for ``u`` near 1 and ``d`` up to 10^6 and beyond); without replacement ``log P_n`` is a sum of
``log1p`` terms, so that ``λ = 1 − 1e-9`` and ``d = 10^6`` stay accurate.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

from .model import check_load, check_positive_float, check_positive_int
from .states import parse_start
from .theory import log_fixed_point

__all__ = [
    "DEFAULT_TOL",
    "MAX_LEVELS",
    "MAX_LYAPUNOV_LEVELS",
    "check_profile",
    "check_d",
    "levels_needed",
    "sample_prob",
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
]

DEFAULT_TOL = 1e-13  # a level whose value stays below this is dropped
MAX_LEVELS = 5000  # more levels than this is refused (d = 1 with λ near 1)
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


# =========================================================================== validation
def check_d(d, *, allow_inf: bool = False):
    """``d`` as a positive ``int``, or ``math.inf`` (also the strings "inf", "infinity") when allowed.

    Parameters
    ----------
    d : int, float or str
        Number of choices.
    allow_inf : bool, default False
        Accept ``math.inf`` / ``"inf"`` (the constrained limit).

    Returns
    -------
    int or float
        ``d`` as an ``int``, or ``math.inf``.

    Raises
    ------
    TypeError, ValueError
        If ``d`` is not a positive integer (or ``inf`` where allowed).

    Examples
    --------
    >>> check_d(3), check_d("inf", allow_inf=True)
    (3, inf)
    """
    if allow_inf:
        if isinstance(d, str) and d.strip().lower() in ("inf", "infinity", "∞"):
            return math.inf
        if (isinstance(d, numbers.Real) and not isinstance(d, (bool, np.bool_, numbers.Integral))
                and math.isinf(d) and d > 0):
            return math.inf
    try:
        return check_positive_int("d", d)
    except TypeError:
        if allow_inf:
            raise TypeError(f"d must be an integer >= 1 or inf; got {d!r} ({type(d).__name__})") from None
        raise


def check_profile(u, name: str = "start profile") -> np.ndarray:
    """A profile ``u_1, u_2, …``: finite, in [0, 1], non-increasing; the first bad level is named.

    Parameters
    ----------
    u : array_like of float
        The profile, level 1 first.
    name : str
        What to call it in the message.

    Returns
    -------
    numpy.ndarray of float

    Raises
    ------
    TypeError, ValueError
        If it is not 1-d, not finite, outside [0, 1] or increases somewhere.

    Examples
    --------
    >>> check_profile([1, 0.5, 0.25]).tolist()
    [1.0, 0.5, 0.25]
    >>> check_profile([0.5, 0.6])
    Traceback (most recent call last):
    ValueError: start profile must be non-increasing; level 2 (0.6) exceeds level 1 (0.5)
    """
    try:
        arr = np.asarray(u, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a 1-d array of numbers in [0, 1]; got {type(u).__name__}") from None
    if arr.ndim != 1 or arr.size == 0:
        raise TypeError(f"{name} must be a non-empty 1-d array (u_1, u_2, ...); got shape {arr.shape}")
    bad = ~np.isfinite(arr) | (arr < 0) | (arr > 1)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{name} must have values in [0, 1]; level {i + 1} is {float(arr[i])!r}")
    inc = np.diff(arr) > 0
    if inc.any():
        i = int(np.argmax(inc)) + 2
        raise ValueError(f"{name} must be non-increasing; level {i} ({float(arr[i - 1])!r}) exceeds "
                         f"level {i - 1} ({float(arr[i - 2])!r})")
    return arr


def _check_n(n, d, replace):
    if n is None:
        if not replace:
            raise ValueError("replace=False (sampling without replacement) needs the number of servers n")
        return None
    n = check_positive_int("n", n)
    if not isinstance(replace, (bool, np.bool_)):
        raise TypeError(f"replace must be True or False; got {replace!r}")
    if not replace and d > n:
        raise ValueError(f"d must be <= n when sampling without replacement (replace=False); got d={d}, n={n}")
    return n


def levels_needed(d, lam, tol: float = DEFAULT_TOL, max_levels: int = MAX_LEVELS) -> int:
    """Number of levels ``L`` such that ``π(L) < tol`` (the first level below ``tol``), docs/model.md §3.

    Raises ``ValueError`` when more than ``max_levels`` would be needed (``d = 1`` with λ
    very close to 1: ``π(i) = λ^i``).

    Parameters
    ----------
    d : int
        Number of choices, ``d >= 1``.
    lam : float or str
        Load λ in (0, 1).
    tol : float
        Threshold of the last level.
    max_levels : int
        Largest number of levels allowed.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        Bad parameters, or more than ``max_levels`` levels needed.

    Examples
    --------
    >>> levels_needed(1, 0.5, tol=1e-3)   # π(i) = 0.5^i: 0.5^10 < 1e-3
    10
    """
    d = check_positive_int("d", d)
    lam = check_load(lam)
    tol = check_positive_float("tol", tol)
    max_levels = check_positive_int("max_levels", max_levels)
    if d == 1:
        need = int(math.floor(math.log(tol) / math.log1p(lam - 1.0))) + 1
        need = max(need, 1)
    else:
        logs = log_fixed_point(d, lam, min(max_levels, 64) + 1)
        below = np.nonzero(logs < math.log(tol))[0]
        need = int(below[0]) + 1 if below.size else max_levels + 1
    if need > max_levels:
        raise ValueError(f"levels: the fixed point stays above tol={tol:g} for more than max_levels={max_levels} "
                         f"levels at d={d}, load={lam!r}; raise max_levels or tol")
    return need


# =========================================================================== §1-§3: P(u)
def sample_prob(u, d, *, n=None, replace=True, order: int = 0) -> np.ndarray:
    """``P(u)`` (order 0), ``P'(u)`` (1) or ``P''(u)`` (2), elementwise (docs/model.md §2).

    ``P(u) = u^d`` with replacement; ``P_n(u) = C(nu, d)/C(n, d) = Π_{j<d} (nu − j)/(n − j)``
    without (``nu`` need not be an integer; ``P_n = 0`` for ``nu <= d − 1``, where the
    binomial of an integer argument vanishes).

    Parameters
    ----------
    u : array_like of float
        Values in [0, 1].
    d : int
        Number of choices.
    n : int, optional
        Servers; required with ``replace=False``.
    replace : bool, default True
    order : {0, 1, 2}
        Derivative order.

    Returns
    -------
    numpy.ndarray

    Raises
    ------
    ValueError
        Bad ``d``, ``n`` or ``order``; ``replace=False`` without ``n``.

    Examples
    --------
    >>> sample_prob([0.5], 2).tolist(), sample_prob([0.5], 2, order=1).tolist()
    ([0.25], [1.0])
    >>> round(float(sample_prob([0.5], 2, n=4, replace=False)[0]), 15)   # C(2, 2)/C(4, 2) = 1/6
    0.166666666666667
    """
    u = np.asarray(u, dtype=float)
    if replace:
        fd = float(d)
        if order == 0:
            return np.power(u, fd)
        if order == 1:
            return fd * np.power(u, fd - 1.0)
        if d == 1:
            return np.zeros_like(u)
        return fd * (fd - 1.0) * np.power(u, fd - 2.0)
    return _sample_prob_noreplace(u, int(d), int(n), order)


def _sample_prob_noreplace(u, d, n, order):
    if d == 1:  # C(nu,1)/C(n,1) = u
        return u.copy() if order == 0 else (np.ones_like(u) if order == 1 else np.zeros_like(u))
    flat = u.ravel()
    out = np.zeros_like(flat)
    m = n * flat
    ok = m > d - 1
    if ok.any():
        mo = m[ok]
        logp = np.zeros(mo.size)
        s1 = np.zeros(mo.size)
        s2 = np.zeros(mo.size)
        # log P = Σ_j log1p((m − n)/(n − j)); accurate when u is near 1.  Chunked over j.
        chunk = 1 << 14
        for j0 in range(0, d, chunk):
            j = np.arange(j0, min(d, j0 + chunk), dtype=float)
            logp += np.log1p((mo - n)[:, None] / (n - j)[None, :]).sum(axis=1)
            if order >= 1:
                r = n / (mo[:, None] - j[None, :])
                s1 += r.sum(axis=1)
                if order == 2:
                    s2 += (r * r).sum(axis=1)
        p = np.exp(logp)
        if order == 0:
            val = p
        elif order == 1:
            val = p * s1
        else:
            val = p * (s1 * s1 - s2)
        out[ok] = val
    return out.reshape(u.shape)


# =========================================================================== §3: the drift
def drift(u, d, lam, *, n=None, replace=True) -> np.ndarray:
    """The drift ``f_i(u) = λ(P(u_{i−1}) − P(u_i)) − (u_i − u_{i+1})`` of eq. (1.1), docs/model.md §3.

    ``u_0 ≡ 1`` and ``u_{L+1} = 0`` (truncation at the top level ``L = len(u)``).

    Parameters
    ----------
    u : array_like of float
        Profile ``u_1, …, u_L``.
    d : int
        Number of choices.
    lam : float
        Load λ > 0.
    n : int, optional
        Servers (needed without replacement).
    replace : bool, default True

    Returns
    -------
    numpy.ndarray
        ``f_1(u), …, f_L(u)``.

    Examples
    --------
    >>> from supermarket.theory import fixed_point
    >>> bool(abs(drift(fixed_point(2, 0.9, 12), 2, 0.9)).max() < 1e-15)   # π is a zero of f
    True
    """
    u = np.asarray(u, dtype=float)
    p = sample_prob(u, d, n=n, replace=replace)
    prev = np.concatenate(([1.0], p[:-1]))
    nxt = np.concatenate((u[1:], [0.0]))
    return lam * (prev - p) - (u - nxt)


def _jac_bands(u, d, lam, n, replace):
    """Diagonal, sub-diagonal and super-diagonal of the drift's Jacobian (tridiagonal)."""
    dp = sample_prob(u, d, n=n, replace=replace, order=1)
    diag = -lam * dp - 1.0
    sub = lam * dp[:-1]  # ∂f_{i}/∂u_{i−1}, i = 2..L
    sup = np.ones(u.size - 1)  # ∂f_i/∂u_{i+1}
    return diag, sub, sup


def drift_jacobian(u, d, lam, *, n=None, replace=True) -> np.ndarray:
    """Dense Jacobian ``∂f_i/∂u_j`` of :func:`drift` (tridiagonal), docs/model.md §3.

    Parameters
    ----------
    u, d, lam, n, replace
        As in :func:`drift`.

    Returns
    -------
    numpy.ndarray
        ``L x L``.

    Examples
    --------
    >>> drift_jacobian([0.5, 0.25], 1, 0.5).tolist()   # d = 1: −(1+λ) on the diagonal
    [[-1.5, 1.0], [0.5, -1.5]]
    """
    u = np.asarray(u, dtype=float)
    diag, sub, sup = _jac_bands(u, d, lam, n, replace)
    return np.diag(diag) + np.diag(sub, -1) + np.diag(sup, 1)


def _noise_diag(u, d, lam, n, replace):
    """Diagonal of the noise covariance ``Q = Σ_ℓ ℓ ℓ^T β_ℓ(u)`` (events move one level by 1/n)."""
    p = sample_prob(u, d, n=n, replace=replace)
    prev = np.concatenate(([1.0], p[:-1]))
    nxt = np.concatenate((u[1:], [0.0]))
    return lam * (prev - p) + (u - nxt)


# =========================================================================== result protocol
class _Trajectory:
    """``to_frame``, ``summary`` and ``plot`` shared by the two ODE solutions."""

    def to_frame(self):
        """Tidy table: one row per (time, level) with ``t``, ``level`` (from 1), ``u``."""
        import pandas as pd

        T, L = self.u.shape
        return pd.DataFrame({"t": np.repeat(self.t, L), "level": np.tile(np.arange(1, L + 1), T),
                             "u": self.u.ravel()})

    def summary(self, rows: int = 11, columns: int = 4) -> str:
        """A table of ``u_1 … u_columns`` and ``Σ u_i`` at ``rows`` times spread over the run."""
        from ._results import text_table

        shown = min(columns, self.u.shape[1])
        idx = np.unique(np.linspace(0, len(self.t) - 1, min(rows, len(self.t))).astype(int))
        body = [[f"{self.t[k]:.6g}", *[f"{self.u[k, i]:.8g}" for i in range(shown)],
                 f"{self.mean_queue_length[k]:.8g}"] for k in idx]
        d = "∞" if math.isinf(self.d) else f"{self.d:g}"
        return text_table(["t", *[f"u_{i + 1}" for i in range(shown)], "Σ u_i"], body,
                          title=f"mean-field ODE trajectory, d={d}, λ={self.lam!r} ({self.levels} levels)")

    def plot(self, path=None, *, max_levels: int = 8):
        """``u_i(t)`` for the first ``max_levels`` levels that leave 0.  Returns the figure;
        saves it (PNG) when ``path`` is given."""
        import matplotlib

        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        from ._results import save_figure

        fig, ax = plt.subplots(figsize=(7, 4.5))
        for i in range(min(max_levels, self.u.shape[1])):
            if self.u[:, i].max() > 1e-12:
                ax.plot(self.t, self.u[:, i], label=f"u_{i + 1}")
        ax.set_xlabel("time t")
        ax.set_ylabel("u_i(t)")
        d = "∞" if math.isinf(self.d) else f"{self.d:g}"
        ax.set_title(f"mean-field ODE, d={d}, λ={self.lam}")
        ax.legend()
        fig.tight_layout()
        return save_figure(fig, path)


def _jsonable(obj):
    from .jsonable import to_jsonable

    return to_jsonable(obj)


# =========================================================================== transient ODE
@dataclass(frozen=True)
class MeanFieldSolution(_Trajectory):
    """Solution of the mean-field ODE (1.1) (docs/model.md §3).

    ``t``: times, ``u``: array (times x levels), ``u[k, i−1] = u_i(t_k)``.  ``levels``: the
    number of levels kept (the top level stayed below ``tol`` over the run).

    Examples
    --------
    >>> sol = solve_meanfield(2, 0.9, T=1.0, t_eval=[0.0, 1.0])
    >>> sol.u.shape[0], sol.to_frame().columns.tolist()
    (2, ['t', 'level', 'u'])
    """

    d: float
    lam: float
    T: float
    t: np.ndarray
    u: np.ndarray
    levels: int
    tol: float
    method: str
    nfev: int
    njev: int
    success: bool
    message: str
    n: int | None = None
    replace: bool = True
    top_level_max: float = 0.0

    @property
    def mean_queue_length(self) -> np.ndarray:
        """``Σ_i u_i(t)`` at each time (mean number of customers per server)."""
        return self.u.sum(axis=1)

    @property
    def final(self) -> np.ndarray:
        return self.u[-1]

    def to_dict(self) -> dict:
        """JSON-safe (``inf`` as ``"inf"``): parameters, solver statistics, ``t``, ``u``, Σu."""
        return _jsonable({"d": self.d, "load": self.lam, "T": self.T, "levels": self.levels, "tol": self.tol,
                "method": self.method, "nfev": self.nfev, "njev": self.njev, "success": self.success,
                "message": self.message, "n": self.n, "replace": self.replace,
                "top_level_max": self.top_level_max,
                "t": self.t.tolist(), "u": self.u.tolist(),
                "mean_queue_length": self.mean_queue_length.tolist()})


def _start_profile(start, d, lam, n, tol, max_levels, replace=True):
    """The start profile (a float array, indexed from level 1) for a start specification."""
    name, val = parse_start(start)
    if name == "empty":
        return np.zeros(1)
    if name == "customers":
        return np.ones(max(val, 1)) if val > 0 else np.zeros(1)
    if name == "fixed-point":
        if math.isinf(d):
            return np.array([lam])
        if n is not None and not replace:
            return near_equilibrium_centre(n, d, lam, replace=False, tol=tol, max_levels=max_levels)
        return np.exp(log_fixed_point(d, lam, levels_needed(d, lam, tol, max_levels)))
    if name == "long":
        if n is None:
            raise ValueError("start 'long:L' (one queue of length L) needs the number of servers n")
        base = (np.array([lam]) if math.isinf(d) else
                np.exp(log_fixed_point(d, lam, levels_needed(d, lam, tol, max_levels))))
        if val > max_levels:
            raise ValueError(f"start long:{val} needs more than max_levels={max_levels} levels")
        u = np.zeros(max(val, base.size))
        u[: base.size] = base
        u[:val] = np.minimum(1.0, u[:val] + 1.0 / n)
        return u
    arr = val
    if np.issubdtype(arr.dtype, np.integer) and arr.ndim == 1:
        if (arr < 0).any():
            raise ValueError("start queue-lengths vector must be >= 0")
        if arr.size == 0:
            raise TypeError("start array must be non-empty")
        top = int(arr.max())
        if top == 0:
            return np.zeros(1)
        c = np.bincount(arr, minlength=top + 1)[::-1].cumsum()[::-1][1:]
        return c / arr.size
    return check_profile(arr)


def _support(u, tol):
    nz = np.nonzero(u > tol)[0]
    return int(nz[-1]) + 1 if nz.size else 0


def solve_meanfield(d, lam, *, T, start="empty", t_eval=None, n=None, replace=True,
                    levels=None, tol: float = DEFAULT_TOL, max_levels: int = MAX_LEVELS,
                    method: str = "auto", rtol: float = 1e-10, atol: float = 1e-14):
    """Integrate the mean-field ODE (1.1) from ``start`` to time ``T`` (docs/model.md §3).

    ``dv_i/dt = λ(P(v_{i−1}) − P(v_i)) − (v_i − v_{i+1})``, ``v_0 ≡ 1``.

    - ``start``: ``"empty"``, ``"fixed-point"``, ``"customers:G"`` (every queue of length
      G), ``"long:L"`` (needs ``n``), a queue-lengths vector (int array) or a profile
      ``u_1, u_2, …`` (float array, non-increasing in [0, 1]).
    - ``levels``: fixed number of levels; by default chosen automatically: start from the
      levels where the fixed point and the start profile exceed ``tol``, and grow until the
      top level stays below ``tol`` over the whole run.
    - ``method``: a stiff solver of ``scipy.integrate.solve_ivp`` ("Radau", "BDF", "LSODA"),
      given the analytic tridiagonal Jacobian (sparse for Radau/BDF, dense for LSODA).
      ``"auto"`` (default): LSODA up to 100 levels (fastest there), BDF with the sparse
      Jacobian above.
    - ``n``/``replace``: sampling without replacement at finite ``n`` (``P_n``).
    - ``d = math.inf`` (or ``"inf"``) dispatches to :func:`solve_dinf` (λ < 1 there).
    - ``lam >= 1`` is allowed for finite ``d`` (a finite horizon needs no equilibrium).
    - ``t_eval``: output times (default 201 equally spaced points in ``[0, T]``).

    Parameters
    ----------
    d : int or inf
        Number of choices (``inf`` calls :func:`solve_dinf`).
    lam : float or str
        Load λ > 0 (λ >= 1 allowed at finite ``d``: a transient).
    T : float
        Final time, positive and finite.
    start : str or array_like, default "empty"
    t_eval : array_like, optional
        Output times in ``[0, T]`` (default: the solver's steps).
    n : int, optional
        Servers (``long:L`` start, sampling without replacement).
    replace : bool, default True
    levels : int, optional
    tol : float
    max_levels : int
    method : str, default "auto"
    rtol, atol : float
        Tolerances of the solver.

    Returns
    -------
    MeanFieldSolution or DInfSolution

    Raises
    ------
    TypeError, ValueError
        A bad parameter or start.

    Examples
    --------
    >>> sol = solve_meanfield(1, 0.5, T=300.0, start="empty")
    >>> round(float(sol.final[0]), 6), round(float(sol.mean_queue_length[-1]), 5)   # M/M/1: u_1 → λ, Σu → 1
    (0.5, 1.0)
    """
    d = check_d(d, allow_inf=True)
    # a finite horizon needs no equilibrium: λ >= 1 is allowed for finite d (the levels grow)
    lam = check_load(lam, require_stable=math.isinf(d))
    T = check_positive_float("T", T)
    tol = check_positive_float("tol", tol)
    max_levels = check_positive_int("max_levels", max_levels)
    if math.isinf(d):
        return solve_dinf(lam, T=T, start=start, t_eval=t_eval, n=n)
    n = _check_n(n, d, replace)
    if method not in ("auto", "Radau", "BDF", "LSODA"):
        raise ValueError(f"method must be one of 'auto', 'Radau', 'BDF', 'LSODA' (stiff solvers); got {method!r}")
    rtol = check_positive_float("rtol", rtol)
    atol = check_positive_float("atol", atol)
    t_eval = _check_t_eval(t_eval, T)
    u0 = _start_profile(start, d, lam, n, tol, max_levels, replace)
    if levels is not None:
        L = check_positive_int("levels", levels, maximum=max_levels)
        if _support(u0, 0.0) > L:
            raise ValueError(f"levels={L} is smaller than the start profile's {_support(u0, 0.0)} occupied levels")
        grow = False
    else:
        try:
            fp_levels = (levels_needed(d, lam, tol, max_levels) if (n is None or replace)
                         else near_equilibrium_centre(n, d, lam, replace=False, tol=tol,
                                                      max_levels=max_levels).size)
        except ValueError:
            # no fixed point (λ >= 1) or one with too many levels (d = 1, λ near 1): a
            # finite run may need far fewer.  The mass Σu_i grows at rate at most λ, so
            # start from the start's support + λT (one integration instead of a dozen
            # ever longer ones), and refuse at once when that exceeds max_levels
            grow_by = lam * T
            if _support(u0, 0.0) + grow_by > max_levels:
                raise ValueError(f"a run to T={T!r} at load={lam!r} may fill about {grow_by:.3g} more levels than "
                                 f"the start's {_support(u0, 0.0)}, more than max_levels={max_levels}; "
                                 "shorten T or raise max_levels") from None
            fp_levels = _support(u0, 0.0) + int(math.ceil(grow_by)) + 8
        L = max(fp_levels, _support(u0, 0.0) + 1, 2)
        if L > max_levels:
            raise ValueError(f"the start profile needs more than max_levels={max_levels} levels")
        grow = True
    pn = n if not replace else None
    while True:
        y0 = np.zeros(L)
        k = min(L, u0.size)
        y0[:k] = u0[:k]
        used = method if method != "auto" else ("LSODA" if L <= 100 else "BDF")
        sol = _integrate(d, lam, pn, replace, y0, T, t_eval, used, rtol, atol)
        top = float(np.max(sol.y[-1])) if sol.y.size else 0.0
        if not grow or top <= tol or not sol.success:
            break
        if L >= max_levels:
            raise ValueError(f"the top level exceeds tol={tol:g} even with max_levels={max_levels} levels; "
                             "raise max_levels or tol")
        L = min(max_levels, L + max(4, L // 2))
    # dense output on the requested grid
    u = sol.sol(t_eval).T if t_eval is not None else sol.y.T
    t = t_eval if t_eval is not None else sol.t
    u = np.clip(u, 0.0, 1.0)
    return MeanFieldSolution(d=d, lam=lam, T=T, t=np.asarray(t, dtype=float), u=u, levels=L, tol=tol,
                             method=used, nfev=int(sol.nfev), njev=int(sol.njev), success=bool(sol.success),
                             message=str(sol.message), n=n, replace=bool(replace), top_level_max=top)


def _check_t_eval(t_eval, T):
    if t_eval is None:
        return np.linspace(0.0, T, 201)
    t = np.asarray(t_eval, dtype=float)
    if t.ndim != 1 or t.size == 0 or not np.all(np.isfinite(t)):
        raise TypeError("t_eval must be a non-empty 1-d array of finite times")
    if (t < 0).any() or (t > T).any() or (np.diff(t) < 0).any():
        raise ValueError(f"t_eval must be sorted times in [0, T={T!r}]")
    return t


def _integrate(d, lam, n, replace, y0, T, t_eval, method, rtol, atol):
    L = y0.size
    rows = np.concatenate((np.arange(L), np.arange(1, L), np.arange(L - 1)))
    cols = np.concatenate((np.arange(L), np.arange(L - 1), np.arange(1, L)))

    def rhs(_t, y):
        return drift(np.clip(y, 0.0, 1.0), d, lam, n=n, replace=replace)

    def jac(_t, y):
        diag, sub, sup = _jac_bands(np.clip(y, 0.0, 1.0), d, lam, n, replace)
        data = np.concatenate((diag, sub, sup))
        if method == "LSODA":
            return sp.csc_matrix((data, (rows, cols)), shape=(L, L)).toarray()
        return sp.csc_matrix((data, (rows, cols)), shape=(L, L))

    return solve_ivp(rhs, (0.0, T), y0, method=method, jac=jac, rtol=rtol, atol=atol,
                     dense_output=True, t_eval=None)


# =========================================================================== fixed points
def fixed_point_newton(d, lam, levels=None, *, n=None, replace=True, start=None,
                       tol: float = DEFAULT_TOL, max_levels: int = MAX_LEVELS,
                       max_iter: int = 500) -> np.ndarray:
    """Root of the truncated drift ``f(u) = 0`` by Newton's method (docs/model.md §3).

    A generic solver that does not use the closed form; tests compare it with
    :func:`supermarket.theory.fixed_point`.  Globalised by pseudo-transient continuation:
    each step solves ``(I/τ − J) δ = f`` with the analytic tridiagonal Jacobian ``J``
    (an implicit Euler step of the ODE, which is globally attracted to the fixed point), and
    ``τ`` grows as the residual falls (switched evolution relaxation), so the last steps are
    pure Newton steps with quadratic convergence.  ``start`` defaults to the empty profile.

    Parameters
    ----------
    d : int
        Number of choices.
    lam : float
        Load λ in (0, 1).
    levels : int, optional
        Number of levels (default: automatic).
    n : int, optional
        Servers (without replacement).
    replace : bool, default True
    start : array_like, optional
    tol, max_levels, max_iter
        Truncation and iteration limits.

    Returns
    -------
    numpy.ndarray
        The root ``u_1, …, u_L``.

    Raises
    ------
    ValueError
        Bad parameters; RuntimeError when the iteration does not converge.

    Examples
    --------
    >>> from supermarket.theory import fixed_point
    >>> u = fixed_point_newton(2, 0.9)
    >>> bool(abs(u - fixed_point(2, 0.9, u.size)).max() < 1e-12)
    True
    """
    d = check_positive_int("d", d)
    lam = check_load(lam)
    n = _check_n(n, d, replace)
    L = (check_positive_int("levels", levels, maximum=max_levels) if levels is not None
         else levels_needed(d, lam, tol, max_levels))
    max_iter = check_positive_int("max_iter", max_iter)
    pn = n if not replace else None
    if start is None:
        u = np.zeros(L)
    else:
        u = check_profile(start, "start").copy()
        if u.size != L:
            raise ValueError(f"start has {u.size} levels but levels={L}")
    f = drift(u, d, lam, n=pn, replace=replace)
    fnorm = float(np.max(np.abs(f)))
    tau = 1.0
    for _ in range(max_iter):
        if fnorm == 0.0:
            break
        diag, sub, sup = _jac_bands(u, d, lam, pn, replace)
        ab = np.zeros((3, L))
        ab[0, 1:] = -sup
        ab[1] = 1.0 / tau - diag
        ab[2, :-1] = -sub
        step = sla.solve_banded((1, 1), ab, f)
        u_new = np.clip(u + step, 0.0, 1.0)
        f_new = drift(u_new, d, lam, n=pn, replace=replace)
        fn_new = float(np.max(np.abs(f_new)))
        if fn_new < 10.0 * fnorm or tau < 1e-12:
            # accept; grow τ by the residual ratio (bounded) so that it tends to pure Newton
            tau = min(tau * 2.0 * min(max(fnorm / max(fn_new, 1e-300), 0.1), 1e3), 1e300)
            change = float(np.max(np.abs(u_new - u)))
            u, f, fnorm = u_new, f_new, fn_new
            if tau > 1e8 and change <= 1e-14:
                break
        else:
            tau *= 0.25
    return u


def near_equilibrium_centre(n, d, lam, *, replace=True, levels=None, tol: float = DEFAULT_TOL,
                            max_levels: int = MAX_LEVELS) -> np.ndarray:
    """The near-equilibrium centre ``x^n`` of paper 002 (docs/model.md §8).

    ``x^n_1 = λ``, ``x^n_i = λ P_n(x^n_{i−1})`` with ``P_n(x) = x^d`` (with replacement: then
    ``x^n = π``) or ``C(nx, d)/C(n, d)`` (without; ``nx`` need not be an integer).  By
    default the levels run until the first value below ``tol``.  It is the fixed point of the
    drift with ``P_n``.

    Parameters
    ----------
    n : int
        Servers.
    d : int
        Number of choices, ``d <= n`` without replacement.
    lam : float
        Load λ in (0, 1).
    replace : bool, default True
    levels : int, optional
    tol, max_levels
        Truncation.

    Returns
    -------
    numpy.ndarray
        ``x^n_1, x^n_2, …``.

    Raises
    ------
    ValueError
        Bad parameters.

    Examples
    --------
    >>> x = near_equilibrium_centre(20, 5, 0.9, replace=False)
    >>> round(float(x[1]), 12) == round(0.9 * 8568 / 15504, 12)   # λ C(18, 5)/C(20, 5)
    True
    """
    n = check_positive_int("n", n)
    d = check_positive_int("d", d)
    lam = check_load(lam)
    _check_n(n, d, replace)
    tol = check_positive_float("tol", tol)
    if levels is not None:
        L = check_positive_int("levels", levels, maximum=max_levels)
    else:
        L = None
    out = [lam]
    while (L is not None and len(out) < L) or (L is None and out[-1] >= tol):
        if L is None and len(out) >= max_levels:
            raise ValueError(f"levels: the centre stays above tol={tol:g} for more than max_levels={max_levels} "
                             f"levels at d={d}, load={lam!r}; raise max_levels or tol")
        out.append(lam * float(sample_prob(np.array([out[-1]]), d, n=n, replace=replace)[0]))
    return np.array(out)


# =========================================================================== d = ∞ (paper 002)
@dataclass(frozen=True)
class DInfSolution(_Trajectory):
    """Solution of the constrained (water-filling) ODE for ``d = ∞`` (docs/model.md §3, paper 002).

    ``t``, ``u`` (times x levels) as in :class:`MeanFieldSolution`; ``events``: list of
    ``(time, full_levels_after)`` at which a level filled or unfilled.

    Examples
    --------
    >>> solve_dinf(0.5, T=1.0).to_dict()["d"]
    'inf'
    """

    lam: float
    T: float
    t: np.ndarray
    u: np.ndarray
    levels: int
    events: tuple
    d: float = math.inf

    @property
    def mean_queue_length(self) -> np.ndarray:
        return self.u.sum(axis=1)

    @property
    def final(self) -> np.ndarray:
        return self.u[-1]

    def to_dict(self) -> dict:
        """JSON-safe: parameters, the fill/unfill ``events``, ``t``, ``u``, Σu."""
        return _jsonable({"d": "inf", "load": self.lam, "T": self.T, "levels": self.levels,
                          "events": [list(e) for e in self.events], "t": self.t.tolist(), "u": self.u.tolist(),
                          "mean_queue_length": self.mean_queue_length.tolist()})


def _dinf_piece(m, z0, s, lam):
    """Closed-form solution of one piece of the d = ∞ ODE (docs/model.md §3, paper 002).

    ``m`` levels are full (``g_1 = … = g_m = 1``); ``z0 = (g_{m+1}, …, g_L)`` at the start of
    the piece; ``s``: array of elapsed times.  Returns ``z(s)``, shape ``(len(s), L − m)``.

    Above the first free level every ``g_i`` obeys ``g_i' = g_{i+1} − g_i`` (departures
    only), whose solution is ``g_i(s) = Σ_k e^{−s} s^k/k! · g_{i+k}(0)`` (a Poisson
    mixture).  The first free level receives all arrivals that overflow the full levels:
    ``g_1' = λ − g_1 + g_2`` when ``m = 0``, which adds ``λ(1 − e^{−s})``; and when
    ``m >= 1`` its own departures are replaced by the overflow ``λ − (1 − g_{m+1})``, so
    ``g_{m+1}' = λ − 1 + g_{m+2}`` and ``g_{m+1}(s) = g_{m+1}(0) + (λ−1)s +
    Σ_k g_{m+2+k}(0) P(k+1, s)`` with ``P`` the regularised lower incomplete gamma function.
    """
    from scipy.special import gammainc, gammaln

    s = np.asarray(s, dtype=float)[:, None]
    K = z0.size
    k = np.arange(K, dtype=float)[None, :]
    with np.errstate(divide="ignore"):
        logs = np.log(s)  # −inf at s = 0
    # Poisson weights e^{−s} s^k / k!, k = 0..K−1 (the k = 0 weight at s = 0 is 1)
    klogs = np.multiply(k, logs, out=np.zeros((s.shape[0], K)), where=k > 0)
    w = np.exp(-s + klogs - gammaln(k + 1.0))
    z = np.empty((s.shape[0], K))
    for i in range(K):
        z[:, i] = w[:, : K - i] @ z0[i:]
    if m == 0:
        z[:, 0] += lam * (1.0 - np.exp(-s[:, 0]))
    else:
        z[:, 0] = z0[0] + (lam - 1.0) * s[:, 0]
        if K > 1:
            inc = gammainc(k[:, : K - 1] + 1.0, s)  # P(k+1, s), k = 0..K−2
            z[:, 0] += inc @ z0[1:]
    return np.clip(z, 0.0, 1.0)


def solve_dinf(lam, *, T, start="empty", t_eval=None, n=None, event_grid: float = 0.05):
    """Integrate the ``d = ∞`` constrained ODE of paper 002 exactly, piece by piece (docs/model.md §3).

    Water-filling: arrivals (rate λ) go to the lowest level that is not full; every level
    ``g_i <= 1``.  With the first ``m`` levels full, the others solve a linear ODE whose
    solution is written in closed form (:func:`_dinf_piece`: Poisson mixtures and incomplete
    gamma functions).  A piece ends at an event: level ``m+1`` fills (``g_{m+1}`` reaches 1)
    or level ``m`` unfills (its overflow rate ``λ − 1 + g_{m+1}`` turns negative, i.e.
    ``g_{m+1}`` falls to ``1 − λ``); event times are found by Brent's method on the closed
    form, bracketed on a grid of step ``event_grid``.  For ``λ < 1`` no level above the
    start's top occupied level + 1 is ever reached, so the truncation is exact.  Fixed point
    ``(λ, 0, 0, …)``.

    Parameters
    ----------
    lam : float
        Load λ in (0, 1).
    T : float
        Final time.
    start : str or array_like, default "empty"
    t_eval : array_like, optional
        Output times in ``[0, T]``.
    n : int, optional
        Servers (for ``long:L``).
    event_grid : float
        Step of the grid that brackets the events.

    Returns
    -------
    DInfSolution

    Raises
    ------
    ValueError
        Bad parameters or start.

    Examples
    --------
    >>> sol = solve_dinf(0.9, T=9.0, start="customers:3", t_eval=[0.0, 9.0])
    >>> [round(float(v), 12) for v in sol.u[-1, :3]]   # level 3 drains at rate 1 − λ
    [1.0, 1.0, 0.1]
    """
    lam = check_load(lam)
    T = check_positive_float("T", T)
    t_eval = _check_t_eval(t_eval, T)
    event_grid = check_positive_float("event_grid", event_grid)
    u0 = _start_profile(start, math.inf, lam, n, DEFAULT_TOL, MAX_LEVELS)
    L = max(_support(u0, 0.0) + 1, 2)
    g = np.zeros(L)
    g[: u0.size] = u0[:L]

    m = 0
    while m < L and g[m] >= 1.0:
        m += 1
    # a full level whose overflow would be negative unfills at once
    while m >= 1 and lam - 1.0 + g[m] < 0.0:
        m -= 1

    out = np.empty((t_eval.size, L))
    events = []
    t = 0.0
    ti = 0
    while True:
        z0 = g[m:].copy()
        t_end = T - t

        def crit(z1, m=m):
            """Sign changes end the piece: column 0, level m+1 fills; column 1, level m unfills."""
            c = [1.0 - z1]
            if m >= 1:
                c.append(z1 - (1.0 - lam))
            return np.stack(c, axis=-1)

        grid = np.arange(0.0, t_end + event_grid, event_grid)
        grid[-1] = min(grid[-1], t_end)
        grid = np.unique(np.minimum(grid, t_end))
        cvals = crit(_dinf_piece(m, z0, grid, lam)[:, 0])
        event = None
        # the first grid interval where a criterion goes from > 0 to <= 0
        hit = (cvals[:-1] > 0) & (cvals[1:] <= 0)
        if hit.any():
            k = int(np.argmax(hit.any(axis=1)))
            roots = []
            for j in np.nonzero(hit[k])[0]:
                def fj(x, j=j):
                    return crit(_dinf_piece(m, z0, np.array([x]), lam)[0, 0])[j]
                roots.append((brentq(fj, grid[k], grid[k + 1], xtol=1e-15, rtol=1e-15), int(j)))
            event = min(roots)
        piece_end = t + (event[0] if event else t_end)
        tj = ti
        while tj < t_eval.size and t_eval[tj] <= piece_end:
            tj += 1
        if tj > ti:
            out[ti:tj, :m] = 1.0
            out[ti:tj, m:] = _dinf_piece(m, z0, t_eval[ti:tj] - t, lam)
            ti = tj
        if event is None:
            break
        s_ev, j = event
        gnew = g.copy()
        gnew[m:] = _dinf_piece(m, z0, np.array([s_ev]), lam)[0]
        if j == 0:  # level m+1 fills
            gnew[m] = 1.0
            m += 1
        else:  # level m unfills
            gnew[m - 1] = 1.0
            m -= 1
        g = gnew
        t = piece_end
        events.append((t, m))
        if len(events) > 100000:
            raise RuntimeError("solve_dinf: too many events (chattering)")
    return DInfSolution(lam=lam, T=T, t=t_eval, u=np.clip(out, 0.0, 1.0), levels=L, events=tuple(events))


# =========================================================================== refined mean field
@dataclass(frozen=True)
class RefinedMeanField:
    """Refined mean field (Gast and Van Houdt 2018), docs/model.md §3: ``E[u_i] ≈ π(i) + V_i/n``.

    ``pi``: fixed point; ``V``: the 1/n correction; ``W``: the LNA covariance at ``π``
    (solution of ``A W + W A^T + Q = 0``).

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

    def valid_for(self, n) -> bool:
        """Whether ``π + V/n`` is a profile at all for ``n`` servers: accurate, every value in
        [0, 1].  Otherwise ``n`` is too small for the 1/n expansion at this load (or the
        numbers are not accurate)."""
        n = check_positive_int("n", n)
        m = self.pi + self.V / n
        return bool(self.accurate and np.all(np.isfinite(m)) and np.all((m >= 0) & (m <= 1)))

    def mean(self, n) -> np.ndarray:
        """``π + V/n``: the refined approximation of ``E[u]`` for ``n`` servers.

        Warns (:class:`AccuracyWarning`) when the result is not accurate or leaves [0, 1]
        (see :meth:`valid_for`)."""
        n = check_positive_int("n", n)
        if not self.accurate:
            import warnings

            warnings.warn(f"refined mean field at d={self.d}, load={self.lam!r} is not accurate: "
                          + "; ".join(self.issues), AccuracyWarning, stacklevel=2)
        elif not self.valid_for(n):
            import warnings

            warnings.warn(f"π + V/n leaves [0, 1] at n={n} (d={self.d}, load={self.lam!r}): n is too small "
                          "for the 1/n expansion here", AccuracyWarning, stacklevel=2)
        return self.pi + self.V / n

    def mean_queue_length(self, n=None) -> float:
        """``Σπ + ΣV/n`` (``Σπ`` when ``n`` is None)."""
        if n is None:
            return float(self.pi.sum())
        n = check_positive_int("n", n)
        return float(self.pi.sum() + self.V.sum() / n)

    def to_dict(self) -> dict:
        """JSON-safe: ``pi``, ``V``, their sums and the accuracy flags (``W`` is left out)."""
        return _jsonable({"d": self.d, "load": self.lam, "levels": self.levels, "pi": self.pi.tolist(),
                          "V": self.V.tolist(), "sum_pi": float(self.pi.sum()), "sum_V": float(self.V.sum()),
                          "accurate": self.accurate, "error_estimate": self.error_estimate,
                          "issues": list(self.issues)})

    def to_frame(self, n=None):
        """Tidy table by level: ``level``, ``pi``, ``V``, ``W_ii``, and ``refined`` = π + V/n when
        ``n`` is given (no warning here: check :meth:`valid_for`)."""
        import pandas as pd

        out = {"level": np.arange(1, self.levels + 1), "pi": self.pi, "V": self.V, "W_ii": np.diag(self.W)}
        if n is not None:
            out["refined"] = self.pi + self.V / check_positive_int("n", n)
        return pd.DataFrame(out)

    def summary(self, n=None) -> str:
        """π and V by level (and π + V/n with ``n``), Σπ and ΣV; the numbers are replaced by the
        reason when the solves lost their accuracy, and π + V/n by a note when it leaves [0, 1]."""
        from ._results import text_table

        head = (f"refined mean field, d={self.d}, λ={self.lam!r} ({self.levels} levels, docs/model.md §3): "
                f"Σπ = {self.pi.sum():.10g}")
        if not self.accurate:
            return (head + f"\nV not shown: the linear solves lost their accuracy ({'; '.join(self.issues)}; "
                    f"estimated relative error {self.error_estimate:.3g})")
        ok = n is not None and self.valid_for(n)
        m = self.pi + self.V / n if n is not None else None
        rows = [[str(i + 1), f"{self.pi[i]:.8g}", f"{self.V[i]:.6g}"] + ([f"{m[i]:.8g}" if ok else "—"] if n is not None else [])
                for i in range(self.levels)]
        t = text_table(["i", "π(i)", "V_i"] + ([f"π(i)+V_i/n, n={n}"] if n is not None else []), rows)
        out = head + f", ΣV = {self.V.sum():.6g}\n" + t
        if n is not None:
            out += (f"\nrefined mean queue length Σπ + ΣV/n = {self.mean_queue_length(n):.10g}" if ok else
                    f"\nπ + V/n leaves [0, 1] at n={n}: n is too small for the 1/n expansion here (—)")
        return out

    def plot(self, path=None, *, n):
        """π(i) against π(i) + V_i/n on a log scale.  Returns the figure; saves it when ``path``
        is given."""
        import matplotlib

        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        from ._results import save_figure

        n = check_positive_int("n", n)
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


def _lyapunov(u, d, lam, n, replace):
    """Jacobian ``A`` and the solution ``W`` of ``A W + W A^T + Q = 0`` at the profile ``u``."""
    if u.size > MAX_LYAPUNOV_LEVELS:
        raise ValueError(f"levels: the Lyapunov equation would have {u.size} levels (more than "
                         f"{MAX_LYAPUNOV_LEVELS}; its dense solve costs O(levels^3)); at d={d}, load={lam!r} "
                         "pass a larger tol (e.g. tol=1e-6) or fewer levels")
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
    """Estimated relative error of the solution ``W`` of ``A W + W A^T + Q = 0`` (and of ``V``,
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
            R = (Al @ Wl + Wl @ Al.T + np.diag(np.asarray(Q_diag, dtype=np.longdouble))).astype(float)
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
        issues.append(f"the drift's Jacobian has condition number {cond:.3g} (more than 1/ε = 4.5e15), so a "
                      "solve with it keeps no correct digit")
    elif est > ACCURACY_TOL:
        issues.append(f"estimated relative error {est:.3g} (the drift's Jacobian has condition number "
                      f"{cond:.3g})")
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


def refined_mean_field(d, lam, *, levels=None, tol: float = DEFAULT_TOL,
                       max_levels: int = MAX_LEVELS) -> RefinedMeanField:
    """The ``1/n`` term of the steady state (Gast and Van Houdt 2018), docs/model.md §3.

    With ``A = Df(π)``, ``B = D²f(π)`` and the noise covariance ``Q`` at ``π``
    (``Q_ii = λ(π_{i−1}^d − π_i^d) + (π_i − π_{i+1})``: every event moves one level by 1/n),
    ``W`` solves ``A W + W A^T + Q = 0`` and ``V = −A^{−1} (½ Σ_{jk} B_{·,jk} W_{jk})``.
    The drift's Hessian is diagonal in each component: ``∂²f_i/∂u_{i−1}² = λP''(π_{i−1})``
    and ``∂²f_i/∂u_i² = −λP''(π_i)``.  Sampling with replacement.

    Parameters
    ----------
    d : int
        Number of choices, ``d >= 1``.
    lam : float or str
        Load λ in (0, 1).
    levels : int, optional
    tol, max_levels
        Truncation.

    Returns
    -------
    RefinedMeanField
        ``accurate`` is False (with an :class:`AccuracyWarning`) when the solves lost their
        accuracy near λ = 1.

    Raises
    ------
    ValueError
        Bad parameters.

    Examples
    --------
    >>> r = refined_mean_field(2, 0.9)
    >>> round(r.mean_queue_length(), 5), round(float(r.V.sum()), 3)
    (2.35265, 3.986)
    """
    d = check_positive_int("d", d)
    lam = check_load(lam)
    L = (check_positive_int("levels", levels, maximum=max_levels) if levels is not None
         else levels_needed(d, lam, tol, max_levels))
    pi = np.exp(log_fixed_point(d, lam, L))
    A, W = _lyapunov(pi, d, lam, None, True)
    p2 = sample_prob(pi, d, order=2)
    wdiag = np.diag(W)
    # (½ Σ_jk B_{i,jk} W_jk) = ½ λ (P''(π_{i−1}) W_{i−1,i−1} − P''(π_i) W_ii), with π_0 = 1 fixed
    term = -lam * p2 * wdiag
    term[1:] += lam * p2[:-1] * wdiag[:-1]
    import warnings

    def rhs_of(w):
        wd = np.diag(w)
        t = -lam * p2 * wd
        t[1:] += lam * p2[:-1] * wd[:-1]
        return -0.5 * t

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        V = -np.linalg.solve(A, 0.5 * term)
    est, issues = _accuracy(A, W, _noise_diag(pi, d, lam, None, True), V, rhs_of)
    accurate = not issues
    if not accurate:
        warnings.warn(f"refined mean field at d={d}, load={lam!r} is not accurate ({'; '.join(issues)}): "
                      "V and W are not to be used (the mean field π is)", AccuracyWarning, stacklevel=2)
    return RefinedMeanField(d=d, lam=lam, levels=L, pi=pi, V=V, W=W, accurate=accurate,
                            error_estimate=float(est), issues=issues)


# =========================================================================== linear noise
@dataclass(frozen=True)
class LNAResult:
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

    def to_dict(self) -> dict:
        """JSON-safe: parameters, ``centre``, ``covariance`` and the accuracy flags."""
        return _jsonable({"d": self.d, "load": self.lam, "n": self.n, "at": self.at, "replace": self.replace,
                          "levels": self.levels, "centre": self.centre.tolist(),
                          "covariance": self.covariance.tolist(), "accurate": self.accurate,
                          "error_estimate": self.error_estimate, "issues": list(self.issues)})

    def to_frame(self):
        """Tidy table: one row per pair of levels (``i``, ``j`` from 1) with ``covariance``;
        the diagonal rows also carry ``centre`` and ``std`` (NaN elsewhere)."""
        import pandas as pd

        L = self.levels
        i, j = np.meshgrid(np.arange(1, L + 1), np.arange(1, L + 1), indexing="ij")
        diag = i.ravel() == j.ravel()
        centre = np.where(diag, self.centre[i.ravel() - 1], np.nan)
        std = np.where(diag, self.std[i.ravel() - 1], np.nan)
        return pd.DataFrame({"i": i.ravel(), "j": j.ravel(), "covariance": self.covariance.ravel(),
                             "centre": centre, "std": std})

    def summary(self) -> str:
        """The centre and the standard deviation of √n u_i by level (or why they are not shown)."""
        from ._results import text_table

        where = "fixed point π" if self.at == "fixed-point" else f"near-equilibrium centre x^n (n={self.n})"
        head = (f"linear-noise approximation at the {where}, d={self.d}, λ={self.lam!r}"
                + ("" if self.replace else ", without replacement") + " (docs/model.md §3, §8)")
        if not self.accurate:
            return head + f"\ncovariance not shown: not accurate ({'; '.join(self.issues)})"
        rows = [[str(k + 1), f"{self.centre[k]:.8g}", f"{self.std[k]:.6g}"] for k in range(self.levels)]
        return head + "\n" + text_table(["i", "centre", "sd of √n u_i"], rows)


def lna(d, lam, *, n=None, at="fixed-point", replace=True, levels=None, tol: float = DEFAULT_TOL,
        max_levels: int = MAX_LEVELS) -> LNAResult:
    """Stationary covariance of ``√n (u − x)`` in the linear-noise approximation (docs/model.md §3, §8).

    Solves ``A W + W A^T + Q = 0`` with ``A`` the drift's Jacobian and ``Q`` the noise
    covariance at ``x``:
    - ``at="fixed-point"``: ``x = π`` (mean-field fixed point, sampling with replacement);
    - ``at="centre"``: ``x = x^n``, the near-equilibrium centre of paper 002, with the drift
      of the finite-n sampling law ``P_n`` (needs ``n``; with ``replace=True`` it equals π).

    Parameters
    ----------
    d : int
        Number of choices.
    lam : float or str
        Load λ in (0, 1).
    n : int, optional
        Servers (needed with ``at="centre"``).
    at : {"fixed-point", "centre"}
    replace : bool, default True
    levels : int, optional
    tol, max_levels
        Truncation.

    Returns
    -------
    LNAResult

    Raises
    ------
    ValueError
        Bad parameters.

    Examples
    --------
    >>> c = lna(1, 0.5)   # d = 1: independent M/M/1 queues, Var(√n u_1) = λ(1 − λ)
    >>> round(float(c.covariance[0, 0]), 12)
    0.25
    """
    d = check_positive_int("d", d)
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
        L = (check_positive_int("levels", levels, maximum=max_levels) if levels is not None
             else levels_needed(d, lam, tol, max_levels))
        x = np.exp(log_fixed_point(d, lam, L))
        A, W = _lyapunov(x, d, lam, None, True)
        pn = None
    est, issues = _accuracy(A, W, _noise_diag(x, d, lam, pn, replace if at == "centre" else True))
    if issues:
        import warnings

        warnings.warn(f"linear-noise covariance at d={d}, load={lam!r} is not accurate ({'; '.join(issues)}): "
                      "it is not to be used (the centre is)", AccuracyWarning, stacklevel=2)
    return LNAResult(d=d, lam=lam, n=n, at=at, replace=bool(replace), levels=int(x.size), centre=x,
                     covariance=W, jacobian=A, accurate=not issues, error_estimate=float(est), issues=issues)


# =========================================================================== response times
def response_times(d, lam, *, n=None, refined=False, replace=True, quantiles=(0.5, 0.9, 0.99, 0.999)):
    """Equilibrium sojourn and waiting times of the mean field, or to order ``1/n`` (docs/model.md §10).

    A thin entry point for ``supermarket meanfield``: see
    :func:`supermarket.response.from_meanfield` (Erlang mixtures over the law of the joined
    queue length, ``P(J >= i) = π(i)^d``; refined: derived).

    Examples
    --------
    >>> from supermarket.theory import fixed_point
    >>> r = response_times(2, 0.9)
    >>> bool(abs(r.sojourn.mean - fixed_point(2, 0.9).sum() / 0.9) < 1e-12)     # Little's law
    True

    Parameters
    ----------
    d : int
        Number of choices.
    lam : float or str
        Load λ in (0, 1).
    n : int, optional
        Servers; needed with ``refined`` or ``replace=False``.
    refined : bool, default False
        Add the ``1/n`` term (derived).
    replace : bool, default True
    quantiles : sequence of float

    Returns
    -------
    supermarket.response.ResponseTimes

    Raises
    ------
    TypeError, ValueError
        As :func:`supermarket.response.from_meanfield`.
    """
    from .response import from_meanfield
    return from_meanfield(d, lam, n=n, refined=refined, replace=replace, quantiles=quantiles)



# =========================================================================== the command's report
def _response_lines(title: str, soj: dict, wai: dict) -> list:
    out = [f"response times ({title}; FIFO, exponential(1) service, docs/model.md §10)"]
    for kind, law in (("sojourn", soj), ("waiting", wai)):
        parts = [f"mean {law['mean']:.6g}"] + [f"p{100 * float(q):g} {v:.6g}" for q, v in law["quantiles"].items()]
        extra = f"  (P(W = 0) = {law['atom_at_zero']:.6g})" if kind == "waiting" else ""
        out.append(f"  {kind:8s} " + ", ".join(parts) + extra)
    return out


@dataclass(frozen=True)
class MeanFieldReport:
    """What ``supermarket meanfield`` reports for one ``(d, λ[, n])``, as a result.

    ``data`` is the JSON object of ``supermarket meanfield --json`` (keys ``params``,
    ``fixed_point``, ``mean_queue_length``, ``levels``, ``sojourn``, ``waiting``,
    ``response_source``, and with ``n``: ``refined``, ``centre``, ``covariance``; with a time
    horizon: ``trajectory``; see docs/meanfield.md).  ``summary()`` is the text the command
    prints, ``to_frame()`` the fixed point by level, ``plot()`` the trajectory or π against
    π + V/n.

    Examples
    --------
    >>> rep = MeanFieldReport({"params": {"d": 1, "load": 0.5, "n": None, "replace": True,
    ...                                   "time": None, "start": "empty"},
    ...                        "fixed_point": [0.5, 0.25], "mean_queue_length": 1.0, "levels": 2})
    >>> print(rep.summary().splitlines()[1])
    mean-field mean queue length Σπ(i) = 1   (docs/model.md §3)
    >>> rep.to_frame()["pi"].tolist()
    [0.5, 0.25]
    """

    data: dict

    def to_dict(self) -> dict:
        """The JSON object (strict JSON values)."""
        from .jsonable import to_jsonable

        return to_jsonable(self.data)

    def to_frame(self):
        """Tidy table by level: ``level``, ``pi`` and, where shown, ``V``, ``refined`` (π + V/n)
        and ``sd_lna`` (standard deviation of √n u_i)."""
        import pandas as pd

        r = self.data
        pi = r["fixed_point"]
        out = {"level": list(range(1, len(pi) + 1)), "pi": pi}
        ref = r.get("refined")
        if ref and ref.get("trusted"):
            out["V"] = ref["V"]
            out["refined"] = ref["mean"]
        cov = r.get("covariance")
        if cov is not None:
            out["sd_lna"] = [math.sqrt(max(cov[i][i], 0.0)) if i < len(cov) else 0.0 for i in range(len(pi))]
        return pd.DataFrame(out)

    def summary(self) -> str:
        """The text ``supermarket meanfield`` prints."""
        from ._results import text_table

        r, p = self.data, self.data["params"]
        n = p.get("n")
        lines = [f"supermarket meanfield  d={p['d']}  λ={p['load']!r}" + (f"  n={n}" if n is not None else "")
                 + ("" if p["replace"] else "  (without replacement)")]
        lines.append(f"mean-field mean queue length Σπ(i) = {r['mean_queue_length']:.10g}   (docs/model.md §3)")
        if "note" in r:
            lines.append(r["note"])
        ref = r.get("refined")
        shown = bool(ref and ref.get("trusted"))
        cov = r.get("covariance")
        header = ["i", "π(i)"] + (["V_i", "π(i)+V_i/n"] if shown else []) + (["sd of √n u_i (LNA)"] if cov is not None else [])
        rows = []
        for i, pi in enumerate(r["fixed_point"]):
            row = [str(i + 1), f"{pi:.8g}"]
            if shown:
                mi = ref["mean"][i]
                row += [f"{ref['V'][i]:.6g}", "—" if mi is None else f"{mi:.8g}"]
            if cov is not None:
                row.append(f"{math.sqrt(max(cov[i][i], 0.0)):.6g}" if i < len(cov) else "0")
            rows.append(row)
        lines.append(text_table(header, rows, title=f"Fixed point π(i) ({r['levels']} levels)"
                                + (" and 1/n corrections" if ref else "")))
        if ref and not ref.get("trusted"):
            lines.append("refined mean field π + V/n: not shown — the linear solves lost their accuracy here "
                         f"({ref['reason']}; estimated relative error {ref['error_estimate']:.3g}). Only the mean "
                         "field π(i) above can be trusted.")
        elif shown:
            if ref["mean_queue_length"] is not None:
                lines.append(f"refined mean queue length Σπ + ΣV/n = {ref['mean_queue_length']:.10g}  "
                             f"(ΣV = {ref['sum_V']:.6g})")
            else:
                lines.append(f"refined mean queue length: not shown — {ref['note']} (— in the table); "
                             f"ΣV = {ref['sum_V']:.6g}")
        if r.get("covariance_note"):
            lines.append(f"linear-noise covariance: not shown — {r['covariance_note']}.")
        if "sojourn" in r:
            lines += _response_lines(r["response_source"], r["sojourn"], r["waiting"])
            lines += [f"  note: {x}" for x in r.get("response_notes", ())]
        if ref and ref.get("sojourn"):
            lines += _response_lines(ref["response_source"], ref["sojourn"], ref["waiting"])
        elif ref and ref.get("response_note"):
            lines.append(f"refined response times (1/n, derived): not shown — {ref['response_note']}.")
        if r.get("cdf"):
            c = r["cdf"]
            lines.append(f"CDFs of the sojourn and waiting times on {len(c['t'])} points from t = 0 to "
                         f"{c['t'][-1]:.6g} (in --json: cdf{', refined.cdf' if ref and ref.get('cdf') else ''})")
        tr = r.get("trajectory")
        if tr:
            k = min(4, len(tr["u"][0]))
            idx = np.unique(np.linspace(0, len(tr["t"]) - 1, min(11, len(tr["t"]))).astype(int))
            body = [[f"{tr['t'][j]:.6g}", *[f"{tr['u'][j][i]:.8g}" for i in range(k)],
                     f"{tr['mean_queue_length'][j]:.8g}"] for j in idx]
            lines.append(text_table(["t", *[f"u_{i + 1}" for i in range(k)], "Σ u_i"], body,
                                    title=f"ODE trajectory from {p['start']} ({tr['levels']} levels)"))
        if r.get("plot"):
            lines.append(f"plot written to {r['plot']}")
        return "\n".join(lines)

    def plot(self, path=None):
        """The trajectory ``u_i(t)`` when there is one, else π(i) against π(i) + V_i/n (log
        scale).  Returns the figure; saves it when ``path`` is given."""
        import matplotlib

        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        from ._results import save_figure

        r, p = self.data, self.data["params"]
        fig, ax = plt.subplots(figsize=(7, 4.5))
        tr = r.get("trajectory")
        if tr:
            u = np.asarray(tr["u"])
            for i in range(min(8, u.shape[1])):
                if u[:, i].max() > 1e-12:
                    ax.plot(tr["t"], u[:, i], label=f"u_{i + 1}")
            ax.set_xlabel("time t")
            ax.set_ylabel("u_i(t)")
            ax.set_title(f"mean-field ODE, d={p['d']}, λ={p['load']}")
        else:
            pi = np.asarray(r["fixed_point"])
            lv = np.arange(1, pi.size + 1)
            ax.semilogy(lv, np.where(pi > 0, pi, np.nan), "o-", label="π(i) (mean field)")
            if r.get("refined") and r["refined"].get("trusted"):
                m = np.asarray([np.nan if v is None else v for v in r["refined"]["mean"]], dtype=float)
                ax.semilogy(lv, np.where(m > 0, m, np.nan), "s--", label=f"π(i) + V_i/n, n={p['n']}")
            ax.set_xlabel("level i")
            ax.set_ylabel("fraction of queues with ≥ i customers")
            ax.set_title(f"fixed point, d={p['d']}, λ={p['load']}")
        ax.legend()
        fig.tight_layout()
        return save_figure(fig, path)
