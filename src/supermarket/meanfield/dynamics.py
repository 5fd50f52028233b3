"""The drift of the mean-field profile, its Jacobian and its zeros, and the checks every
mean-field calculation shares (docs/model.md §3, §8).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import scipy.linalg as sla
from numpy.typing import ArrayLike

from ..checks import check_bool
from ..model import check_load, check_positive_float, check_positive_int, check_vector
from ..system import policies as _pol
from ..theory import log_fixed_point

DEFAULT_TOL = 1e-13  # a level whose value stays below this is dropped
MAX_LEVELS = 5000  # more levels than this is refused (d = 1 with λ near 1)


# =========================================================================== validation
def check_d(d: Any, *, allow_inf: bool = False) -> float:
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
        if (
            isinstance(d, numbers.Real)
            and not isinstance(d, (bool, np.bool_, numbers.Integral))
            and math.isinf(d)
            and float(d) > 0
        ):
            return math.inf
    try:
        return check_positive_int("d", d)
    except TypeError:
        if allow_inf:
            raise TypeError(f"d must be an integer >= 1 or inf; got {d!r} ({type(d).__name__})") from None
        raise


def check_profile(u: ArrayLike, name: str = "start profile") -> np.ndarray:
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
    arr = check_vector(name, u, of="numbers in [0, 1]", shape=" (u_1, u_2, ...)")
    bad = ~np.isfinite(arr) | (arr < 0) | (arr > 1)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{name} must have values in [0, 1]; level {i + 1} is {float(arr[i])!r}")
    inc = np.diff(arr) > 0
    if inc.any():
        i = int(np.argmax(inc)) + 2
        raise ValueError(
            f"{name} must be non-increasing; level {i} ({float(arr[i - 1])!r}) exceeds "
            f"level {i - 1} ({float(arr[i - 2])!r})"
        )
    return arr


def rule_d(policy: str, d: int | float, replace: bool = True) -> tuple[int | float, bool]:
    """``(d, replace)`` of the drift that stands for a dispatch rule (docs/model.md §2,
    "Other dispatch rules").

    Parameters
    ----------
    policy : str
        A rule of :data:`supermarket.system.policies.POLICIES`.
    d : int
        JSQ(d)'s choices.
    replace : bool, default True
        JSQ(d)'s sampling.

    Returns
    -------
    (int, bool)
        Unchanged for ``jsq-d``; ``(1, True)`` for ``random`` (``P(u) = u``, whatever the
        sampling).

    Raises
    ------
    ValueError
        For ``jsq`` and ``jiq``, whose mean-field ``P_ℓ(u)`` is discontinuous
        (:func:`supermarket.system.policies.meanfield_d`).

    Examples
    --------
    >>> rule_d("random", 5, False), rule_d("jsq-d", 5, False)
    ((1, True), (5, False))
    """
    p = _pol.check_policy(policy)
    return _pol.meanfield_d(p, d), (replace if p == "jsq-d" else True)


def _check_n(n, d, replace):
    if n is None:
        if not replace:
            raise ValueError("replace=False (sampling without replacement) needs the number of servers n")
        return None
    n = check_positive_int("n", n)
    check_bool("replace", replace)
    if not replace and d > n:
        raise ValueError(f"d must be <= n when sampling without replacement (replace=False); got d={d}, n={n}")
    return n


def levels_needed(d: float, lam: float | str, tol: float = DEFAULT_TOL, max_levels: int = MAX_LEVELS) -> int:
    """Number of levels ``L`` such that ``π(L) < tol`` (the first level below ``tol``), docs/model.md §3.

    Raises ``ValueError`` when more than ``max_levels`` would be needed (``d = 1`` with λ
    very close to 1: ``π(i) = λ^i``).

    Parameters
    ----------
    d, lam
        The choices ``d >= 1`` (int) and the load λ in (0, 1) (float or str).
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
        raise ValueError(
            f"levels: the fixed point stays above tol={tol:g} for more than max_levels={max_levels} "
            f"levels at d={d}, load={lam!r}; raise max_levels or tol"
        )
    return need


def _levels(d, lam, levels, tol, max_levels) -> int:
    """The number of levels to keep: ``levels`` when given (at most ``max_levels``), else
    :func:`levels_needed` (``π`` below ``tol``)."""
    return (
        check_positive_int("levels", levels, maximum=max_levels)
        if levels is not None
        else levels_needed(d, lam, tol, max_levels)
    )


# =========================================================================== §1-§3: P(u)
def sample_prob(u: ArrayLike, d: float, *, n: int | None = None, replace: bool = True, order: int = 0) -> np.ndarray:
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
    if order not in (0, 1, 2):
        raise ValueError(f"order must be 0, 1 or 2; got {order!r}")
    if not replace:
        if n is None:
            raise ValueError("n (the number of servers) is required with replace=False")
        n = check_positive_int("n", n)
        if not 1 <= d <= n:
            raise ValueError(f"d must be in [1, n = {n}] with replace=False; got {d!r}")
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
    assert n is not None  # checked above: replace is False
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
def drift(u: ArrayLike, d: float, lam: float | str, *, n: int | None = None, replace: bool = True) -> np.ndarray:
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


def drift_jacobian(
    u: ArrayLike, d: float, lam: float | str, *, n: int | None = None, replace: bool = True
) -> np.ndarray:
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


# =========================================================================== fixed points
def fixed_point_newton(
    d: float,
    lam: float | str,
    levels: int | None = None,
    *,
    n: int | None = None,
    replace: bool = True,
    start: ArrayLike | None = None,
    tol: float = DEFAULT_TOL,
    max_levels: int = MAX_LEVELS,
    max_iter: int = 500,
    policy: str = "jsq-d",
) -> np.ndarray:
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
    policy : {"jsq-d", "random"}, default "jsq-d"
        The dispatch rule (docs/model.md §2): ``random`` is the drift with ``d = 1``;
        ``jsq`` and ``jiq`` raise ``ValueError`` (discontinuous mean-field drift).

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
    >>> fixed_point_newton(2, 0.5, policy="random")[:3].round(12).tolist()   # M/M/1: λ^i
    [0.5, 0.25, 0.125]
    """
    d_rule, replace = rule_d(policy, d, replace)
    d = check_positive_int("d", d_rule)
    lam = check_load(lam)
    n = _check_n(n, d, replace)
    L = _levels(d, lam, levels, tol, max_levels)
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


def near_equilibrium_centre(
    n: int,
    d: float,
    lam: float | str,
    *,
    replace: bool = True,
    levels: int | None = None,
    tol: float = DEFAULT_TOL,
    max_levels: int = MAX_LEVELS,
) -> np.ndarray:
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
        Sampling with replacement (``P_n(x) = x^d``) or without.
    levels : int, optional
        Number of levels; by default up to the first value below ``tol``.
    tol, max_levels
        That threshold and the largest number of levels allowed.

    Returns
    -------
    numpy.ndarray
        ``x^n_1, x^n_2, …``.

    Raises
    ------
    ValueError
        If a parameter is out of range, ``d > n`` without replacement, or the centre stays
        above ``tol`` for more than ``max_levels`` levels.

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
            raise ValueError(
                f"levels: the centre stays above tol={tol:g} for more than max_levels={max_levels} "
                f"levels at d={d}, load={lam!r}; raise max_levels or tol"
            )
        out.append(lam * float(sample_prob(np.array([out[-1]]), d, n=n, replace=replace)[0]))
    return np.array(out)
