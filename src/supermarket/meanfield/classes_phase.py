"""Mean field with server classes and a phase-type service law (docs/model.md §15.5).

The model is the event engine's (§14): a fraction ``f_k`` of the servers works at speed
``s_k``, a customer brings a work ``S ~ PH(α, T)`` of mean 1 served at the server's speed, so
on a class-``k`` server the phases move at rates ``s_k T`` and end at rates ``s_k t0``;
arrivals at rate ``λ s̄`` per server (``s̄ = Σ_k f_k s_k``), the rule's joined length a
function of the pooled profile, the joined server uniform among those of that length.

``x[k, ℓ−1, φ]`` is the fraction of the class-``k`` servers with exactly ``ℓ`` customers whose
customer in service is in phase ``φ``; ``u_{k,ℓ} = Σ_{i>=ℓ} Σ_φ x[k, i−1, φ]`` (``u_{k,0} = 1``),
``U_ℓ = Σ_k f_k u_{k,ℓ}``, ``g_ℓ = (P(U_ℓ) − P(U_{ℓ+1}))/(U_ℓ − U_{ℓ+1})`` (``P(U) = U^d`` for
``jsq-d``, ``U`` for ``random``). The drift is [derived]

    dx[k,ℓ,φ]/dt = λ s̄ g_{ℓ−1} x[k,ℓ−1,φ]  (ℓ >= 2)   |   λ s̄ g_0 (1 − u_{k,1}) α_φ  (ℓ = 1)
                   − λ s̄ g_ℓ x[k,ℓ,φ] + s_k (x[k,ℓ,·] T)_φ + s_k α_φ Σ_ψ t0_ψ x[k,ℓ+1,ψ].

One class of speed 1 is the drift of §13 (:func:`supermarket.meanfield.phase.phase_drift`);
one phase summed over the levels above is the drift of §15.2
(:func:`supermarket.meanfield.classes.classes_drift`).  An arrival at a queue of the top
level ``L`` is dropped (the level count makes ``u_{k,L}`` below ``tol``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.integrate as si
import scipy.optimize as so

from .. import model as _m
from ..result import Result, class_summary
from ..system import policies as _pol
from ..system.service import ServerClasses, ServiceLaw, parse_phase_type, parse_server_classes
from .classes import fixed_point_dict
from .phase import _g

__all__ = [
    "classes_phase_drift",
    "classes_phase_ode",
    "classes_phase_fixed_point",
    "ClassesPhaseFixedPoint",
    "MAX_CP_LEVELS",
    "MAX_UNKNOWNS",
]

MAX_CP_LEVELS = 768
"""Most levels the fixed point tries before it reports that the profile does not settle."""

MAX_UNKNOWNS = 4000
"""Most unknowns (classes x levels x phases) of the dense Newton-type solve of ``jsq-d`` (about 30 s)."""


def _gain(U: np.ndarray, d: int, policy: str) -> np.ndarray:
    """``g_ℓ`` for ``ℓ = 0..L`` from ``U_0..U_{L+1}`` (``U_0 = 1``, ``U_{L+1} = 0``)."""
    if policy == "random":
        return np.ones(U.size - 1)
    return _g(U, d)


def _profiles(x: np.ndarray) -> np.ndarray:
    """``u_{k,0..L+1}`` from ``x`` (Kc, L, K): ``(Kc, L + 2)``, ``u_{k,0} = 1``, ``u_{k,L+1} = 0``."""
    tail = np.cumsum(x.sum(axis=2)[:, ::-1], axis=1)[:, ::-1]
    Kc = x.shape[0]
    return np.hstack([np.ones((Kc, 1)), tail, np.zeros((Kc, 1))])


def classes_phase_drift(
    x: np.ndarray,
    lam: float,
    f: np.ndarray,
    s: np.ndarray,
    alpha: np.ndarray,
    T: np.ndarray,
    t0: np.ndarray,
    d: int = 2,
    policy: str = "jsq-d",
) -> np.ndarray:
    """The drift ``dx/dt`` of the module docstring; ``x`` has shape ``(classes, levels, phases)``.

    Examples
    --------
    Random routing with exponential service: per-class M/M/1, ``x[k, ℓ] = (1 − ρ_k) ρ_k^ℓ``
    with ``ρ_k = λ s̄/s_k`` is at rest.

    >>> f, s = np.array([0.5, 0.5]), np.array([2.0, 1.0])
    >>> rho = 0.5 * 1.5 / s
    >>> x = ((1 - rho)[:, None] * rho[:, None] ** np.arange(1, 120)[None, :])[:, :, None]
    >>> one = np.ones(1)
    >>> bool(np.abs(classes_phase_drift(x, 0.5, f, s, one, -np.ones((1, 1)), one, policy="random")).max() < 1e-12)
    True
    """
    L = x.shape[1]
    u = _profiles(x)  # (classes, L + 2)
    U = f @ u  # U_0..U_{L+1}
    g = _gain(U, d, policy)  # g_0..g_L
    a = lam * float(f @ s)  # arrivals per server
    out = s[:, None, None] * (x @ T)  # phase moves and the loss of completions (diagonal)
    out[:, 0, :] += a * g[0] * (1.0 - u[:, 1])[:, None] * alpha[None, :]  # arrivals at idle servers
    join = a * g[None, 1 : L + 1, None] * x  # servers of length ℓ joined, ℓ = 1..L
    join[:, L - 1, :] = 0.0  # truncation: no arrivals at the top level
    out -= join
    out[:, 1:, :] += join[:, :-1, :]
    done = s[:, None] * (x[:, 1:, :] @ t0)  # completions at length ℓ + 1, per class-k server
    out[:, :-1, :] += done[:, :, None] * alpha[None, None, :]
    return out


def _check(d, lam, server_classes, service, policy):
    policy = _pol.check_smooth(policy, "the mean field with server classes and a phase-type law")
    d = _m.check_positive_int("d", d, maximum=10**6) if _pol.RULES[policy].uses_d else 1
    lam_f = _m.check_load(lam, name="lam")
    sc = parse_server_classes(server_classes)
    law = parse_phase_type(service, "the mean field")
    return d, lam_f, sc, law, policy


def _arrays(sc: ServerClasses, law: ServiceLaw):
    f = np.asarray(sc.fractions, float)
    s = np.asarray(sc.speeds, float)
    a = np.asarray(law.alpha, float)
    M = np.asarray(law.T, float)
    t0 = -M.sum(axis=1)
    return f, s, a, M, t0


def classes_phase_ode(
    d: int,
    lam: float | str,
    server_classes: str | ServerClasses,
    service: str | ServiceLaw,
    T_end: float,
    *,
    policy: str = "jsq-d",
    levels: int = 60,
    x0: np.ndarray | None = None,
    points: int = 201,
) -> tuple[np.ndarray, np.ndarray]:
    """Integrate the drift from ``x0`` (default: every server idle) to time ``T_end``.

    Returns ``(times, x)`` with ``x[t]`` of shape ``(classes, levels, phases)``.

    Examples
    --------
    >>> t, x = classes_phase_ode(2, 0.5, "0.5:2,0.5:1", "erlang:2", 200.0, levels=30, points=2)
    >>> f = np.array([0.5, 0.5]); s = np.array([2.0, 1.0])
    >>> round(float(f @ (s * x[-1].sum(axis=(1, 2)))), 8)      # capacity balance: Σ f_k s_k u_{k,1} = λ s̄
    0.75
    """
    d, lam_f, sc, law, policy = _check(d, lam, server_classes, service, policy)
    T_end = _m.check_positive_float("T_end", T_end)
    L = _m.check_positive_int("levels", levels, maximum=100_000)
    points = _m.check_positive_int("points", points, maximum=10**6)
    f, s, a, M, t0 = _arrays(sc, law)
    shape = (f.size, L, a.size)
    y0 = np.zeros(math.prod(shape)) if x0 is None else np.asarray(x0, float).reshape(-1)
    sol = si.solve_ivp(
        lambda _t, y: classes_phase_drift(y.reshape(shape), lam_f, f, s, a, M, t0, d, policy).ravel(),
        (0.0, T_end),
        y0,
        method="LSODA",
        t_eval=np.linspace(0.0, T_end, points),
        rtol=1e-10,
        atol=1e-13,
    )
    if not sol.success:
        raise RuntimeError(f"mean-field ODE: {sol.message}")
    return sol.t, sol.y.T.reshape(-1, *shape)


@dataclass(frozen=True, eq=False)
class ClassesPhaseFixedPoint(Result):
    """The fixed point of the per-class phase-type mean field (docs/model.md §15.5).

    Attributes
    ----------
    x : numpy.ndarray (classes, levels, phases)
        ``x[k, ℓ−1, φ]``: share of class-``k`` servers of length ``ℓ`` serving in phase ``φ``.
    u : numpy.ndarray (classes, levels)
        ``u[k, ℓ−1] = u_{k,ℓ}``, share of class-``k`` servers with at least ``ℓ`` customers.
    U : numpy.ndarray (levels,)
        ``Σ_k f_k u_{k,ℓ}``.
    busy_by_phase : numpy.ndarray (classes, phases)
        ``Σ_ℓ x[k, ℓ, φ]`` (identity (I2) per class: ``u_{k,1} α(−T)^{-1}``).
    mean_queue_length, sojourn : numpy.ndarray (classes,)
        Per class-``k`` server ``Σ_ℓ u_{k,ℓ}``, and Little's law ``Σ_ℓ u_{k,ℓ}/(s_k u_{k,1})``.
    total_mean_queue_length, total_sojourn : float
        ``Σ_ℓ U_ℓ`` and ``Σ_ℓ U_ℓ/(λ s̄)``.
    residual : float
        ``max |drift|`` at ``x``.
    flow_error : float
        ``max_ℓ |Σ_k f_k s_k Σ_φ t0_φ x_{k,>=ℓ,φ} − λ s̄ P(U_{ℓ−1})|`` (flow across each level).
    levels : int
    """

    d: int
    lam_f: float
    policy: str
    server_classes: ServerClasses
    service: ServiceLaw
    x: np.ndarray
    u: np.ndarray
    U: np.ndarray
    busy_by_phase: np.ndarray
    mean_queue_length: np.ndarray
    sojourn: np.ndarray
    total_mean_queue_length: float
    total_sojourn: float
    residual: float
    flow_error: float
    levels: int

    def to_dict(self) -> dict[str, Any]:
        return fixed_point_dict(
            self,
            "mean-field fixed point with server classes and a phase-type law, docs/model.md §15.5 [derived]",
            self.service,
            self.flow_error,
            busy_by_phase=self.busy_by_phase,
        )

    def summary(self) -> str:
        head = (
            f"mean field with classes and phase-type service (docs/model.md §15.5, [derived]): d={self.d} "
            f"λ={self.lam_f:g} policy={self.policy} classes={self.server_classes.spec} service={self.service.spec} "
            f"(SCV {self.service.scv:g}); residual {self.residual:.1e}, flow identity error {self.flow_error:.1e}, "
            f"{self.levels} levels"
        )
        return class_summary(head, self, self.u, self.U, expected=False, little=True)


def _polish(x0, lam, f, s, a, M, t0, d, policy):
    shape = x0.shape

    def F(v):
        return classes_phase_drift(v.reshape(shape), lam, f, s, a, M, t0, d, policy).ravel()

    r = so.root(F, x0.ravel(), method="hybr", tol=1e-15)
    x = r.x.reshape(shape)
    return x, float(np.max(np.abs(F(r.x))))


def _solve_affine(shape, lam, f, s, a, M, t0):
    """Random routing (``g ≡ 1``): the drift is affine in ``x``, ``F(x) = F(0) + J x``; ``J``
    column by column (exact for an affine map), then one sparse solve of ``J x = −F(0)``."""
    import scipy.sparse as sp
    import scipy.sparse.linalg as spl

    N = math.prod(shape)

    def F(v):
        return classes_phase_drift(v.reshape(shape), lam, f, s, a, M, t0, 1, "random").ravel()

    b = F(np.zeros(N))
    rows, cols, vals = [], [], []
    e = np.zeros(N)
    for j in range(N):
        e[j] = 1.0
        col = F(e) - b
        e[j] = 0.0
        nz = np.nonzero(col)[0]
        rows.append(nz)
        cols.append(np.full(nz.size, j))
        vals.append(col[nz])
    J = sp.csc_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(N, N))
    x = spl.spsolve(J, -b)
    return x.reshape(shape), float(np.max(np.abs(F(x))))


def _mph1_decay(rate: float, a: np.ndarray, M: np.ndarray) -> float:
    """Spectral radius of Neuts' ``R = a(aI − a1α − T)^{-1}`` of the M/PH/1 queue (arrival rate
    ``a``, service ``PH(α, T)``): ``P(L >= ℓ)`` decays as its ``ℓ``-th power."""
    K = a.size
    R = rate * np.linalg.inv(rate * np.eye(K) - rate * np.outer(np.ones(K), a) - M)
    return float(max(abs(np.linalg.eigvals(R))))


def _levels_tried(
    levels: int | None, random: bool, load: float, s: np.ndarray, tol: float, a: np.ndarray, M: np.ndarray, Kc: int
) -> list[int]:
    """The level counts the fixed point tries: ``levels`` alone; under random routing
    (``random``: the rule, or ``d = 1``) enough for the slowest class's M/PH/1 tail at
    ``load``/speed (``load``: λ s̄) to fall below ``tol``, refused when that class is unstable;
    under ``jsq-d`` 24 doubled within :data:`MAX_CP_LEVELS` and :data:`MAX_UNKNOWNS`."""
    K = a.size
    if random:
        rho = load / s.min()
        if rho >= 1.0:
            raise ValueError(
                f"lam: under random routing class speed {s.min():g} gets load λ s̄/s = {rho:g} >= 1: no fixed point"
            )
    if levels is not None:
        Ls = [_m.check_positive_int("levels", levels, maximum=100_000)]
        if Ls[0] < 2:
            raise ValueError(f"levels: must be an int >= 2, got {levels!r}")
    elif random:  # d = 1 is random routing
        eta = _mph1_decay(load / s.min(), a, M)  # per class-k server in its own time
        Ls = [max(8, math.ceil(math.log(tol) / math.log(eta)) + 4)]
    else:
        Ls = [L for L in (24, 48, 96, 192, 384, 768) if L <= MAX_CP_LEVELS and Kc * L * K <= MAX_UNKNOWNS] or [24]
    most = MAX_UNKNOWNS if not random else 50 * MAX_UNKNOWNS  # random: a sparse solve
    if Kc * Ls[0] * K > most:
        raise ValueError(
            f"levels: {Ls[0]} levels x {Kc} classes x {K} phases exceed {most} unknowns (the M/PH/1 tail "
            "of the slowest class is too heavy at this load); pass fewer levels or a lower load"
        )
    return Ls


def classes_phase_fixed_point(
    d: int,
    lam: float | str,
    server_classes: str | ServerClasses,
    service: str | ServiceLaw,
    *,
    policy: str = "jsq-d",
    levels: int | None = None,
    tol: float = 1e-13,
) -> ClassesPhaseFixedPoint:
    """The fixed point of the per-class phase-type mean field (docs/model.md §15.5).

    Under ``random`` (or ``d = 1``) the drift is affine and one sparse linear solve gives the
    fixed point.  Under ``jsq-d``: started from the exponential per-class fixed point (§15.2)
    with the phases of a busy server (``∝ α(−T)^{-1}``) and polished by a Newton-type solve
    (MINPACK ``hybr``) on the truncated drift; where that fails, the ODE from that start first.  Levels: ``levels``, or
    under ``random`` enough for the slowest class's M/PH/1 tail to fall below ``tol``, under
    ``jsq-d`` doubled from 24 until the top level's share is below ``tol``.

    Parameters
    ----------
    d : int
        Choices of ``jsq-d`` (ignored by ``random``).
    lam : float or str
        Load per unit of capacity, ``0 < λ < 1``.
    server_classes : str or ServerClasses
        ``FRACTION:SPEED,…``.
    service : str or ServiceLaw
        A law with a phase-type form, mean 1 (``exp``, ``erlang:K``, ``hyperexp:SCV``, ``ph:FILE``).
    policy : {"jsq-d", "random"}
    levels : int, optional
    tol : float

    Raises
    ------
    ValueError
        Bad parameters (named); ``random`` with a class at load ``λ s̄/s_k >= 1``; a profile that
        does not settle within :data:`MAX_CP_LEVELS` levels.

    Examples
    --------
    Random routing: per class an M/E2/1 queue at ``ρ_k = λ s̄/s_k``, Pollaczek–Khinchine
    ``ρ + ρ²(1 + 1/2)/(2(1 − ρ))``.

    >>> r = classes_phase_fixed_point(1, 0.5, "0.5:2,0.5:1", "erlang:2", policy="random")
    >>> [round(float(q), 10) for q in r.mean_queue_length]          # ρ = 0.375, 0.75: 0.375 + 0.16875, 0.75 + 1.6875
    [0.54375, 2.4375]
    """
    d, lam_f, sc, law, policy = _check(d, lam, server_classes, service, policy)
    tol = _m.check_positive_float("tol", tol)
    f, s, a, M, t0 = _arrays(sc, law)
    Kc, K = f.size, a.size
    sbar = float(f @ s)
    Ls = _levels_tried(levels, policy == "random" or d == 1, lam_f * sbar, s, tol, a, M, Kc)
    busy = np.linalg.solve(-M.T, a)  # α(−T)^{-1}: the phase law of a busy server (mean 1)
    from .classes import classes_fixed_point

    for L in Ls:
        if policy == "random" or d == 1:
            x, res = _solve_affine((Kc, L, K), lam_f, f, s, a, M, t0)
            x = np.maximum(x, 0.0)
            u = _profiles(x)[:, 1 : L + 1]
            break
        try:
            ex = classes_fixed_point(d, lam_f, sc, policy=policy, levels=L).u
        except ValueError:
            ex = np.zeros((Kc, L))
        m = ex - np.hstack([ex[:, 1:], np.zeros((Kc, 1))])
        x, res = _polish(m[:, :, None] * busy[None, None, :], lam_f, f, s, a, M, t0, d, policy)
        if not (res < 1e-12 and x.min() > -1e-12):
            _, xs = classes_phase_ode(
                d, lam_f, sc, law, 40.0 / (s.min() * (1.0 - lam_f)), policy=policy, levels=L, points=2
            )
            x, res = _polish(xs[-1], lam_f, f, s, a, M, t0, d, policy)
        x = np.maximum(x, 0.0)
        u = _profiles(x)[:, 1 : L + 1]
        if levels is not None or u[:, -1].max() < tol:
            break
    else:
        raise ValueError(
            f"no fixed point with u below tol = {tol:g} at the top of {Ls[-1]} levels: the system may be "
            "unstable under this rule with these classes and this law"
        )
    U = f @ u
    mq = u.sum(axis=1)
    flows = s[:, None] * np.cumsum((x @ t0)[:, ::-1], axis=1)[:, ::-1]  # s_k Σ_φ t0_φ x_{k,>=ℓ,φ}
    Uext = np.concatenate([[1.0], U])
    P = Uext[:L] ** d if policy == "jsq-d" else Uext[:L]
    flow_error = float(np.max(np.abs(f @ flows - lam_f * sbar * P)))
    return ClassesPhaseFixedPoint(
        d=d,
        lam_f=float(lam_f),
        policy=policy,
        server_classes=sc,
        service=law,
        x=x,
        u=u,
        U=U,
        busy_by_phase=x.sum(axis=1),
        mean_queue_length=mq,
        sojourn=mq / (s * u[:, 0]),
        total_mean_queue_length=float(U.sum()),
        total_sojourn=float(U.sum() / (lam_f * sbar)),
        residual=float(np.abs(classes_phase_drift(x, lam_f, f, s, a, M, t0, d, policy)).max()),
        flow_error=flow_error,
        levels=L,
    )
