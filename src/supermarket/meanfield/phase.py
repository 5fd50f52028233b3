"""Mean field of the supermarket model with phase-type service (docs/model.md §13).

``x[ℓ, φ]`` is the share of queues of length ``ℓ >= 1`` whose customer in service is in phase
``φ`` (array row ``ℓ − 1``), ``s_ℓ = Σ_{i>=ℓ} Σ_φ x[i, φ]`` the share with at least ``ℓ``
customers (``s_0 = 1``).  As ``n → ∞`` the counts ``N/n`` of :mod:`supermarket.engines.phase`
follow the ODE [derived, the standard density-dependent limit of the counts chain]

    dx[ℓ, φ]/dt = λ g_{ℓ−1} x[ℓ−1, φ]  (ℓ >= 2)   |   λ (1 − s_1^d) α_φ  (ℓ = 1)
                  − λ g_ℓ x[ℓ, φ] + (x[ℓ, ·] T)_φ + α_φ Σ_ψ t0_ψ x[ℓ+1, ψ],

with ``g_ℓ = (s_ℓ^d − s_{ℓ+1}^d)/(s_ℓ − s_{ℓ+1}) = Σ_{k<d} s_ℓ^k s_{ℓ+1}^{d−1−k}`` the rate at
which one queue of length ``ℓ`` is joined per unit of ``λ`` (JSQ(d), sampling with
replacement; the joined queue's phase is that of a uniform queue of its length).  With one
phase (``α = 1``, ``T = −1``) summing over ``φ`` gives the drift of docs/model.md §3,
``ds_ℓ/dt = λ(s_{ℓ−1}^d − s_ℓ^d) − (s_ℓ − s_{ℓ+1})``.  At a fixed point the identities of §13
hold exactly: ``Σ_φ t0_φ x_{>=ℓ, φ} = λ s_{ℓ−1}^d`` (I1) and ``Σ_ℓ x[ℓ, ·] = λ α(−T)^{-1}`` (I2).

The truncation keeps ``L`` levels: an arrival at a queue of length ``L`` is dropped (the
level count is chosen so that ``s_L`` is below ``tol``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.integrate as si
import scipy.optimize as so
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ..model import check_load
from ..system.phase_law import check_ph
from .dynamics import check_d

__all__ = [
    "phase_drift",
    "phase_jumps",
    "PhaseFixedPoint",
    "phase_fixed_point",
    "phase_report",
    "solve_phase_meanfield",
]


def _g(s, d):
    """``g_ℓ = (s_ℓ^d − s_{ℓ+1}^d)/(s_ℓ − s_{ℓ+1})`` for ``ℓ = 0..L`` (``s`` has ``L + 2`` entries,
    ``s_0 = 1``, ``s_{L+1} = 0``), without the cancellation of the quotient when the two are close."""
    a, b = s[:-1], s[1:]
    if d <= 64:
        out = np.zeros_like(a)
        for k in range(d):
            out += a**k * b ** (d - 1 - k)
        return out
    diff = a - b
    with np.errstate(divide="ignore", invalid="ignore"):
        q = (a**d - b**d) / diff
    # close values: d a^{d-1} (1 − (d−1)δ/(2a)), δ = a − b (second order)
    near = np.abs(diff) <= 1e-6 * np.maximum(a, 1e-300)
    q[near] = d * a[near] ** (d - 1) * (1.0 - (d - 1) * diff[near] / (2.0 * np.maximum(a[near], 1e-300)))
    return q


def _profile(x):
    """``s_0..s_{L+1}`` from ``x`` (L, K)."""
    tail = np.cumsum(x.sum(axis=1)[::-1])[::-1]
    return np.concatenate([[1.0], tail, [0.0]])


def phase_drift(x: np.ndarray, lam: float, d: int, alpha: np.ndarray, T: np.ndarray, t0: np.ndarray) -> np.ndarray:
    """The mean-field drift ``dx/dt`` of docs/model.md §13 (see the module docstring).

    Parameters
    ----------
    x : numpy.ndarray (L, K)
        Shares by length (rows ``ℓ = 1..L``) and phase in service.
    lam : float
        Load.
    d : int
        Choices.
    alpha, T, t0 : numpy.ndarray
        The checked law (:func:`supermarket.system.phase_law.check_ph`).

    Returns
    -------
    numpy.ndarray (L, K)

    Examples
    --------
    One phase, summed from the top: the drift of §3, ``λ(s_{ℓ−1}^d − s_ℓ^d) − (s_ℓ − s_{ℓ+1})``.

    >>> import numpy as np
    >>> x = np.array([[0.3], [0.2]])              # s_1 = 0.5, s_2 = 0.2
    >>> dx = phase_drift(x, 0.5, 2, np.ones(1), -np.ones((1, 1)), np.ones(1))
    >>> np.cumsum(dx[::-1, 0])[::-1].round(12).tolist()   # 0.5·0.75 − 0.3, 0.5·0.21 − 0.2
    [0.075, -0.095]
    """
    L = x.shape[0]
    s = _profile(x)
    g = _g(s, d)  # g[ℓ], ℓ = 0..L
    out = x @ T  # phase moves and the loss of completions (diagonal)
    out[0] += lam * (1.0 - s[1] ** d) * alpha  # arrivals at idle queues
    join = lam * g[1 : L + 1, None] * x  # queues of length ℓ joined, ℓ = 1..L
    join[L - 1] = 0.0  # truncation: no arrivals at the top level
    out -= join
    out[1:] += join[:-1]
    out[:-1] += np.outer(x[1:] @ t0, alpha)  # completions at length ℓ + 1 start a service at ℓ
    return out


def phase_jumps(x: np.ndarray, lam: float, d: int, alpha: np.ndarray, T: np.ndarray, t0: np.ndarray) -> tuple:
    """The jumps of the counts ``n x[ℓ, φ]`` whose mean is :func:`phase_drift` (docs/model.md §13):
    each with its rate per queue and its vector over the flattened state (index ``(ℓ−1)K + φ``).

    - an arrival at an idle queue, starting phase ``φ``: rate ``λ(1 − s_1^d) α_φ``, ``+e_{1,φ}``;
    - an arrival joining a queue of length ``ℓ < L`` in phase ``φ``: rate ``λ g_ℓ x[ℓ, φ]``,
      ``−e_{ℓ,φ} + e_{ℓ+1,φ}`` (none at the top level ``L``: the truncation);
    - a phase change ``φ → ψ``: rate ``x[ℓ, φ] T_φψ``, ``−e_{ℓ,φ} + e_{ℓ,ψ}``;
    - a completion in phase ``φ``: at ``ℓ = 1`` rate ``x[1, φ] t0_φ``, ``−e_{1,φ}``; at ``ℓ >= 2``,
      restarting in ``ψ`` by ``α``, rate ``x[ℓ, φ] t0_φ α_ψ``, ``−e_{ℓ,φ} + e_{ℓ−1,ψ}``.

    Parameters
    ----------
    x, lam, d, alpha, T, t0 : as :func:`phase_drift`.

    Returns
    -------
    (rates, vectors)
        ``rates`` (m,) and ``vectors``, a SciPy CSR matrix (m, L·K) of entries ``±1``.

    Examples
    --------
    >>> import numpy as np
    >>> a, T, t0 = np.array([1.0, 0.0]), np.array([[-2.0, 2.0], [0.0, -2.0]]), np.array([0.0, 2.0])
    >>> x = np.array([[0.2, 0.3], [0.1, 0.1]])
    >>> r, J = phase_jumps(x, 0.7, 2, a, T, t0)
    >>> bool(np.allclose(J.T @ r, phase_drift(x, 0.7, 2, a, T, t0).ravel(), atol=1e-15))
    True
    """
    L, K = x.shape
    s = _profile(x)
    g = _g(s, d)
    idx = np.arange(L * K).reshape(L, K)
    none = np.full(K, -1)
    rates, src, dst = [lam * (1.0 - s[1] ** d) * alpha], [none], [idx[0]]  # arrivals at idle queues
    rates.append((lam * g[1:L, None] * x[: L - 1]).ravel())  # joins below the top level
    src.append(idx[: L - 1].ravel())
    dst.append(idx[1:].ravel())
    for p in range(K):  # phase changes p -> q
        for q in (q for q in range(K) if q != p):
            rates.append(x[:, p] * T[p, q])
            src.append(idx[:, p])
            dst.append(idx[:, q])
    rates.append(x[0] * t0)  # completions at length 1
    src.append(idx[0])
    dst.append(none)
    for q in range(K):  # completions at length ℓ >= 2, restarting in phase q
        rates.append((x[1:] * (t0 * alpha[q])).ravel())
        src.append(idx[1:].ravel())
        dst.append(np.repeat(idx[:-1, q], K))
    r, a_, b_ = (np.concatenate(v) for v in (rates, src, dst))
    rows = np.arange(r.size)
    ia, ib = a_ >= 0, b_ >= 0
    data = np.concatenate([-np.ones(int(ia.sum())), np.ones(int(ib.sum()))])
    J = sp.csr_matrix(
        (data, (np.concatenate([rows[ia], rows[ib]]), np.concatenate([a_[ia], b_[ib]]))), shape=(r.size, L * K)
    )
    return r, J


@dataclass(frozen=True)
class PhaseFixedPoint:
    """The mean-field fixed point with phase-type service (docs/model.md §13).

    Attributes
    ----------
    x : numpy.ndarray (L, K)
        Shares by length (rows ``ℓ = 1..L``) and phase of the customer in service.
    u : numpy.ndarray (L,)
        ``s_ℓ``, the share of queues with at least ``ℓ`` customers.
    mean_queue_length : float
        ``Σ_ℓ s_ℓ``.
    residual : float
        ``max |drift|`` at ``x``.
    flow_error : float
        ``max_ℓ |Σ_φ t0_φ x_{>=ℓ, φ} − λ s_{ℓ−1}^d|``, identity (I1) (zero up to rounding).

    Examples
    --------
    >>> fp = phase_fixed_point(2, 0.8, [1.0, 0.0], [[-2.0, 2.0], [0.0, -2.0]])   # Erlang-2
    >>> round(float(fp.u[0]), 12), fp.flow_error < 1e-14          # u_1 = λ
    (0.8, True)
    """

    x: np.ndarray
    u: np.ndarray
    mean_queue_length: float
    residual: float
    flow_error: float


def _check(
    d: int, lam: float | str, alpha: ArrayLike, T: ArrayLike, levels: int | None
) -> tuple[int, float, np.ndarray, np.ndarray, np.ndarray]:
    d = int(check_d(d))  # an int already (no allow_inf): typed float for the inf of other callers
    lam = check_load(lam)
    a, M, t0 = check_ph(alpha, T)
    if levels is not None and (not isinstance(levels, int) or isinstance(levels, bool) or levels < 2):
        raise ValueError(f"levels: must be an int >= 2, got {levels!r}")
    return d, lam, a, M, t0


def _levels(d, lam, a, M, tol):
    """Levels for the truncation: those of the M/PH/1 queue (``d = 1``, the slowest decay),
    whose tail ``P(Q >= ℓ)`` decays geometrically; enough for ``s_L < tol``."""
    K = a.size
    R = lam * np.linalg.inv(lam * np.eye(K) - lam * np.outer(np.ones(K), a) - M)
    eta = float(max(abs(np.linalg.eigvals(R))))
    if d == 1:
        L = int(np.ceil(np.log(tol) / np.log(eta))) + 2 if eta > 0 else 2
    else:
        # JSQ(d) decays doubly exponentially at exponential service; with PH service the tail
        # is lighter than M/PH/1's: start small and let the caller's check grow it
        L = min(int(np.ceil(np.log(tol) / np.log(eta))) + 2, 60) if eta > 0 else 2
    return max(L, 4)


def _flow_error(x, lam, d, t0):
    s = _profile(x)
    L = x.shape[0]
    left = np.cumsum((x @ t0)[::-1])[::-1]  # Σ_φ t0_φ x_{>=ℓ,φ}, ℓ = 1..L
    right = lam * s[:L] ** d  # λ s_{ℓ−1}^d
    right[0] = lam
    return float(np.max(np.abs(left - right)))


def phase_fixed_point(
    d: int, lam: float | str, alpha: ArrayLike, T: ArrayLike, *, levels: int | None = None, tol: float = 1e-14
) -> PhaseFixedPoint:
    """The fixed point of the phase-type mean field (docs/model.md §13).

    A Newton-type root finder (MINPACK ``hybr``) on the truncated drift, started from the
    exponential fixed point with the phases of a busy server (``∝ α(−T)^{-1}``), or, if that
    fails, from the ODE integrated from the empty state to time 200; levels are doubled until
    the top level's share is below ``tol`` (at most the M/PH/1 queue's count).  With one phase it equals
    ``λ^{(d^ℓ−1)/(d−1)}`` (:func:`supermarket.theory.fixed_point`) to rounding.

    Parameters
    ----------
    d : int
        Choices ``>= 1``.
    lam : float
        Load ``0 < λ < 1``.
    alpha, T : array_like
        ``PH(α, T)`` with mean 1 (:func:`supermarket.system.phase_law.check_ph`).
    levels : int, optional
        Levels kept (default: enough for ``s_L < tol`` at the M/PH/1 decay rate, at most 60
        for ``d >= 2``).
    tol : float
        Target for the top level's share.

    Returns
    -------
    PhaseFixedPoint

    Examples
    --------
    >>> fp = phase_fixed_point(2, 0.9, [1.0], [[-1.0]])
    >>> fp.u[:3].round(6).tolist()                       # λ, λ^3, λ^7
    [0.9, 0.729, 0.478297]
    """
    d, lam, a, M, t0 = _check(d, lam, alpha, T, levels)
    L_max = _levels(1, lam, a, M, tol)  # the M/PH/1 queue (d = 1) has the heaviest tail
    L = levels if levels is not None else min(_levels(d, lam, a, M, tol), L_max)
    busy = np.linalg.solve(-M.T, a)  # phase of the customer in service, α(−T)^{-1} (mean 1)
    while True:
        # first guess: the exponential fixed point, phases as in a busy server; Newton-type
        # polish; if that fails, integrate the ODE from the empty state first
        s0 = lam ** ((float(d) ** np.arange(1, L + 1) - 1.0) / (d - 1.0)) if d > 1 else lam ** np.arange(1, L + 1)
        m0 = s0 - np.concatenate([s0[1:], [0.0]])
        x, res = _polish(np.outer(m0, busy), lam, d, a, M, t0)
        if not (res < 1e-12 and x.min() > -1e-12):
            _, xs = solve_phase_meanfield(d, lam, a, M, T_end=200.0, levels=L)
            x, res = _polish(xs[-1], lam, d, a, M, t0)
        x = np.maximum(x, 0.0)
        s = _profile(x)[1 : L + 1]
        if levels is not None or s[-1] <= tol or L_max <= L:
            break
        L = min(2 * L, L_max)
    return PhaseFixedPoint(
        x=x, u=s, mean_queue_length=float(s.sum()), residual=res, flow_error=_flow_error(x, lam, d, t0)
    )


def phase_report(d: int, load: float | str, law: Any, *, policy: str = "jsq-d", levels: int | None = None) -> dict:
    """The phase-type mean-field fixed point of a rule as one JSON-ready mapping: what
    ``supermarket meanfield --service`` prints and a sweep's ``meanfield`` point stores
    (docs/model.md §13).

    Parameters
    ----------
    d : int
        Choices ``>= 1`` (``random`` runs the drift with ``d = 1``).
    load : float or str
        Load ``0 < λ < 1`` (its text is kept as ``load_text``).
    law : ServiceLaw
        A phase-type law of :func:`supermarket.system.service.parse_service`.
    policy : str
        ``jsq-d`` or ``random`` (a rule with a differentiable drift; the others are refused).
    levels : int, optional
        Levels kept (:func:`phase_fixed_point`).

    Examples
    --------
    >>> from supermarket.system.service import parse_service
    >>> r = phase_report(2, 0.8, parse_service("erlang:2"))
    >>> r["busy_fraction"], r["levels"] == len(r["u"])
    (0.8, True)
    """
    from ..system import policies as pol

    policy = pol.check_policy(policy)
    dd = int(pol.meanfield_d(policy, int(d)))  # jsq and jiq: refused with the registry's reason
    lam = check_load(load)
    fp = phase_fixed_point(dd, lam, law.alpha, law.T, levels=levels)
    busy = fp.x.sum(axis=0)
    return {
        "service": law.to_dict(),
        "engine": "meanfield-phase",
        "policy": policy,
        "d": int(d),
        "load": lam,
        "load_text": load if isinstance(load, str) else f"{lam!r}",
        "u": fp.u.tolist(),
        "mean_queue_length": fp.mean_queue_length,
        "mean_sojourn_time_little": fp.mean_queue_length / lam,
        "busy_fraction": float(fp.u[0]),
        "busy_by_phase": busy.tolist(),
        "residual": fp.residual,
        "flow_error": fp.flow_error,
        "levels": int(fp.u.size),
        "source": "fixed point of the phase-type mean field (docs/model.md §13)"
        + ("; random: the drift with d = 1, n independent M/PH/1 queues" if policy == "random" else ""),
    }


def _polish(x0, lam, d, a, M, t0):
    """A root of the truncated drift near ``x0`` (MINPACK ``hybr``) and its max residual."""
    L, K = x0.shape

    def f(v):
        return phase_drift(v.reshape(L, K), lam, d, a, M, t0).ravel()

    root = so.root(f, x0.ravel(), method="hybr", tol=1e-15)
    x = root.x.reshape(L, K)
    return x, float(np.max(np.abs(f(root.x))))


def solve_phase_meanfield(
    d: int,
    lam: float | str,
    alpha: ArrayLike,
    T: ArrayLike,
    *,
    T_end: float,
    levels: int = 40,
    start: ArrayLike | None = None,
    t_eval: ArrayLike | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-13,
) -> tuple[np.ndarray, list[np.ndarray]]:
    """The phase-type mean-field ODE from ``start`` (default: all queues empty) to time ``T_end``.

    Parameters
    ----------
    d, lam, alpha, T : as :func:`phase_fixed_point`.
    T_end : float
        Final time.
    levels : int
        Levels kept (arrivals at a queue of length ``levels`` are dropped).
    start : array_like (levels, K), optional
        Initial shares (default: all queues empty).
    t_eval : array_like, optional
        Times at which to return the state (default: the solver's steps).
    rtol, atol : float
        Tolerances of the stiff solver (LSODA).

    Returns
    -------
    (t, x)
        The times and the states ``x[i]`` of shape ``(levels, K)`` (rows ``ℓ = 1..levels``).

    Examples
    --------
    >>> t, x = solve_phase_meanfield(1, 0.5, [1.0], [[-1.0]], T_end=300.0, levels=50)
    >>> round(float(x[-1][:, 0].sum()), 8)     # d = 1: M/M/1, P(busy) = λ
    0.5
    """
    d, lam, a, M, t0 = _check(d, lam, alpha, T, levels)
    K = a.size
    L = levels
    y0 = np.zeros(L * K) if start is None else np.asarray(start, dtype=float).reshape(L * K)

    def rhs(_t, v):
        return phase_drift(v.reshape(L, K), lam, d, a, M, t0).ravel()

    r = si.solve_ivp(rhs, (0.0, float(T_end)), y0, method="LSODA", rtol=rtol, atol=atol, t_eval=t_eval)
    if not r.success:
        raise RuntimeError(f"mean-field ODE: {r.message}")
    return r.t, [r.y[:, i].reshape(L, K) for i in range(r.y.shape[1])]
