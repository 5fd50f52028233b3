"""The mean-field ODEs integrated from a start profile to a time ``T`` (docs/model.md §3):
:func:`solve_meanfield` (finite ``d``) and :func:`solve_dinf` (``d = ∞``, exactly).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

from ..model import check_load, check_positive_float, check_positive_int
from ..result import Result, frame, pyplot, save_figure, text_table
from ..system.states import parse_start
from ..theory import log_fixed_point
from .dynamics import (
    DEFAULT_TOL,
    MAX_LEVELS,
    _check_n,
    _jac_bands,
    check_d,
    check_profile,
    drift,
    levels_needed,
    near_equilibrium_centre,
    rule_d,
)


# =========================================================================== result protocol
class _Trajectory(Result):
    """What the two ODE solutions share: ``mean_queue_length``, ``final``, ``to_frame``,
    ``summary``, ``plot`` and the arrays of ``to_dict``."""

    d: float
    lam: float
    T: float
    t: np.ndarray
    u: np.ndarray
    levels: int

    @property
    def mean_queue_length(self) -> np.ndarray:
        """``Σ_i u_i(t)`` at each time (mean number of customers per server)."""
        return self.u.sum(axis=1)

    @property
    def final(self) -> np.ndarray:
        """The profile at the last time."""
        return self.u[-1]

    _rename: ClassVar[dict[str, str]] = {"lam": "load"}
    _extra = ("mean_queue_length",)
    _order = (
        "d",
        "load",
        "T",
        "levels",
        "tol",
        "method",
        "nfev",
        "njev",
        "success",
        "message",
        "n",
        "replace",
        "top_level_max",
        "events",
    )

    def to_frame(self) -> Any:
        """Tidy table: one row per (time, level) with ``t``, ``level`` (from 1), ``u``."""
        T, L = self.u.shape
        return frame({"t": np.repeat(self.t, L), "level": np.tile(np.arange(1, L + 1), T), "u": self.u.ravel()})

    def summary(self, rows: int = 11, columns: int = 4) -> str:
        """A table of ``u_1 … u_columns`` and ``Σ u_i`` at ``rows`` times spread over the run."""

        shown = min(columns, self.u.shape[1])
        idx = np.unique(np.linspace(0, len(self.t) - 1, min(rows, len(self.t))).astype(int))
        body = [
            [f"{self.t[k]:.6g}", *[f"{self.u[k, i]:.8g}" for i in range(shown)], f"{self.mean_queue_length[k]:.8g}"]
            for k in idx
        ]
        d = "∞" if math.isinf(self.d) else f"{self.d:g}"
        return text_table(
            ["t", *[f"u_{i + 1}" for i in range(shown)], "Σ u_i"],
            body,
            title=f"mean-field ODE trajectory, d={d}, λ={self.lam!r} ({self.levels} levels)",
        )

    def plot(self, path: Any = None, *, max_levels: int = 8) -> Any:
        """``u_i(t)`` for the first ``max_levels`` levels that leave 0.  Returns the figure;
        saves it (PNG) when ``path`` is given."""
        plt = pyplot(path is not None, force=False)

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


# =========================================================================== transient ODE
@dataclass(frozen=True)
class MeanFieldSolution(_Trajectory):
    """Solution of the mean-field ODE (1.1) (docs/model.md §3).

    ``t``: times, ``u``: array (times x levels), ``u[k, i−1] = u_i(t_k)``.  ``levels``: the
    number of levels kept (the top level stayed below ``tol`` over the run).  Properties:
    ``mean_queue_length``, ``Σ_i u_i(t)`` at each time (mean number of customers per
    server), and ``final``, the profile at the last time.

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
        base = (
            np.array([lam])
            if math.isinf(d)
            else np.exp(log_fixed_point(d, lam, levels_needed(d, lam, tol, max_levels)))
        )
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


def solve_meanfield(
    d: float,
    lam: float | str,
    *,
    T: float,
    start: str | ArrayLike = "empty",
    t_eval: ArrayLike | None = None,
    n: int | None = None,
    replace: bool = True,
    levels: int | None = None,
    tol: float = DEFAULT_TOL,
    max_levels: int = MAX_LEVELS,
    method: str = "auto",
    rtol: float = 1e-10,
    atol: float = 1e-14,
    policy: str = "jsq-d",
) -> MeanFieldSolution | DInfSolution:
    """Integrate the mean-field ODE (1.1) from ``start`` to time ``T`` (docs/model.md §3).

    Parameters
    ----------
    d : int or inf
        Number of choices (``inf`` or ``"inf"`` calls :func:`solve_dinf`).
    lam : float or str
        Load λ > 0 (λ >= 1 allowed at finite ``d``: a transient).
    T : float
        Final time, positive and finite.
    start : str or array_like, default "empty"
        ``"empty"``, ``"fixed-point"``, ``"customers:G"``, ``"long:L"`` (needs ``n``), a
        queue-lengths vector (int array) or a profile ``u_1, u_2, …`` (float array).
    t_eval : array_like, optional
        Output times in ``[0, T]`` (default: the solver's steps).
    n : int, optional
        Servers (``long:L`` start, sampling without replacement).
    replace : bool, default True
    levels : int, optional
        Fixed number of levels; by default grown until the top level stays below ``tol``.
    tol : float
    max_levels : int
    method : str, default "auto"
        A stiff solver of ``scipy.integrate.solve_ivp`` ("Radau", "BDF", "LSODA") with the
        analytic Jacobian; "auto": LSODA up to 100 levels, BDF (sparse Jacobian) above.
    policy : {"jsq-d", "random"}, default "jsq-d"
        The dispatch rule (docs/model.md §2): ``random`` is the drift with ``d = 1``;
        ``jsq`` and ``jiq`` raise ``ValueError`` (discontinuous mean-field drift).
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
    d, replace = rule_d(policy, d, replace)  # random: d = 1; jsq, jiq: ValueError
    d = check_d(d, allow_inf=True)
    # a finite horizon needs no equilibrium: λ >= 1 is allowed for finite d (the levels grow)
    lam = check_load(lam, require_stable=math.isinf(d))
    T = _check_T(T)
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
    L, grow = _first_levels(u0, levels, d, lam, n, replace, T, tol, max_levels)
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
            raise ValueError(
                f"the top level exceeds tol={tol:g} even with max_levels={max_levels} levels; raise max_levels or tol"
            )
        L = min(max_levels, L + max(4, L // 2))
    # dense output on the requested grid
    u = sol.sol(t_eval).T if t_eval is not None else sol.y.T
    t = t_eval if t_eval is not None else sol.t
    u = np.clip(u, 0.0, 1.0)
    return MeanFieldSolution(
        d=d,
        lam=lam,
        T=T,
        t=np.asarray(t, dtype=float),
        u=u,
        levels=L,
        tol=tol,
        method=used,
        nfev=int(sol.nfev),
        njev=int(sol.njev),
        success=bool(sol.success),
        message=str(sol.message),
        n=n,
        replace=bool(replace),
        top_level_max=top,
    )


def _first_levels(u0, levels, d, lam, n, replace, T, tol, max_levels) -> tuple[int, bool]:
    """``(L, grow)``: the levels the integration starts with, and whether it may grow them
    (until the top level stays below ``tol``): ``levels`` when given (fixed), else those of the
    fixed point, or of the start's support plus what a run to ``T`` can fill when there is none."""
    if levels is not None:
        L = check_positive_int("levels", levels, maximum=max_levels)
        if _support(u0, 0.0) > L:
            raise ValueError(f"levels={L} is smaller than the start profile's {_support(u0, 0.0)} occupied levels")
        return L, False
    try:
        fp_levels = (
            levels_needed(d, lam, tol, max_levels)
            if (n is None or replace)
            else near_equilibrium_centre(n, d, lam, replace=False, tol=tol, max_levels=max_levels).size
        )
    except ValueError:
        # no fixed point (λ >= 1) or one with too many levels (d = 1, λ near 1): a
        # finite run may need far fewer.  The mass Σu_i grows at rate at most λ, so
        # start from the start's support + λT (one integration instead of a dozen
        # ever longer ones), and refuse at once when that exceeds max_levels
        grow_by = lam * T
        if _support(u0, 0.0) + grow_by > max_levels:
            raise ValueError(
                f"a run to T={T!r} at load={lam!r} may fill about {grow_by:.3g} more levels than "
                f"the start's {_support(u0, 0.0)}, more than max_levels={max_levels}; "
                "shorten T or raise max_levels"
            ) from None
        fp_levels = _support(u0, 0.0) + int(math.ceil(grow_by)) + 8
    L = max(fp_levels, _support(u0, 0.0) + 1, 2)
    if L > max_levels:
        raise ValueError(f"the start profile needs more than max_levels={max_levels} levels")
    return L, True


#: The shortest horizon: over a shorter time every u_i moves by less than (1 + λ)·T, under
#: the solver's absolute tolerance, and the stiff solvers' step control underflows (T = 1e-150
#: never returned).
MIN_T = 1e-12


def _check_T(T) -> float:
    T = check_positive_float("T", T)
    if T < MIN_T:
        raise ValueError(
            f"T must be a time in [{MIN_T:g}, inf) (shorter, the profile moves by less than the "
            f"solver's tolerance); got {T!r}"
        )
    return T


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

    return solve_ivp(rhs, (0.0, T), y0, method=method, jac=jac, rtol=rtol, atol=atol, dense_output=True, t_eval=None)


# =========================================================================== d = ∞ (paper 002)
@dataclass(frozen=True)
class DInfSolution(_Trajectory):
    """Solution of the constrained (water-filling) ODE for ``d = ∞`` (docs/model.md §3, paper 002).

    ``t``, ``u`` (times x levels), ``mean_queue_length`` and ``final`` as in
    :class:`MeanFieldSolution`; ``events``: list of ``(time, full_levels_after)`` at which a
    level filled or unfilled.

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


def solve_dinf(
    lam: float | str,
    *,
    T: float,
    start: str | ArrayLike = "empty",
    t_eval: ArrayLike | None = None,
    n: int | None = None,
    event_grid: float = 0.05,
) -> DInfSolution:
    """Integrate the ``d = ∞`` constrained ODE of paper 002 exactly, piece by piece (docs/model.md §3).

    Water-filling (docs/model.md §3): with the first ``m`` levels full the others have a
    closed-form solution (:func:`_dinf_piece`); a piece ends when level ``m+1`` fills or level
    ``m`` unfills, found by Brent's method bracketed on a grid of step ``event_grid``.  For
    ``λ < 1`` the truncation is exact; the fixed point is ``(λ, 0, 0, …)``.

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
    times = _check_t_eval(t_eval, T)
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

    out = np.empty((times.size, L))
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

                def fj(x, j=j, m=m, z0=z0):
                    return crit(_dinf_piece(m, z0, np.array([x]), lam)[0, 0])[j]

                roots.append((brentq(fj, grid[k], grid[k + 1], xtol=1e-15, rtol=1e-15), int(j)))
            event = min(roots)
        piece_end = t + (event[0] if event else t_end)
        tj = ti
        while tj < times.size and times[tj] <= piece_end:
            tj += 1
        if tj > ti:
            out[ti:tj, :m] = 1.0
            out[ti:tj, m:] = _dinf_piece(m, z0, times[ti:tj] - t, lam)
            ti = tj
        if event is None:
            break
        s_ev, which = event
        gnew = g.copy()
        gnew[m:] = _dinf_piece(m, z0, np.array([s_ev]), lam)[0]
        if which == 0:  # level m+1 fills
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
    return DInfSolution(lam=lam, T=T, t=times, u=np.clip(out, 0.0, 1.0), levels=L, events=tuple(events))
