"""The fluid fixed points of the rules whose mean-field drift is discontinuous (``jsq``, ``jiq``,
``jbt``), with server classes and with a phase-type law (docs/model.md §2.1 [derived]).

While some queue is shorter than the threshold ``T`` (``T = 1`` for ``jsq`` and ``jiq``, ``T = d``
for ``jbt``) every arrival joins one of those, uniformly: in the limit ``n → ∞`` the arrivals, at
rate ``λ' = λ s̄`` per server (``λ`` per unit of capacity, ``s̄ = Σ_k f_k s_k``), reach each queue
below ``T`` at rate ``a = λ'/F``, ``F`` the share of the queues below ``T``.  A class-``k`` queue is
then an M/PH/1/T queue (arrival rate ``a``, service ``PH(α, s_k T)``, no arrival at length ``T``),
a finite quasi-birth-death chain with stationary law ``π_k``, and ``F = Σ_k f_k (1 − π_k(T))``:
one root in ``F ∈ (0, 1)`` (:func:`fluid_fixed_point`).

- ``T = 1`` (``jsq``, ``jiq``): ``π_k(1) = b_k``, the busy share, with ``b_k s_k = λ'(1 − b_k)/I``,
  ``I = F`` the idle share; the busy servers' phases are ``∝ α(−T)^{-1}``; no job waits.
- One class, exponential service: the M/M/1/T law, which is ``jbt``'s fixed point of
  :mod:`supermarket.system.policies` (``u_ℓ = λ(u_{ℓ−1} − u_T)/(1 − u_T)``).

The flow balance per class (arrivals into class ``k`` = its departures) holds at the root;
:attr:`FluidFixedPoint.flow_error` is its largest deviation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import brentq
from scipy.sparse.linalg import spsolve

from ..model import check_int, check_load
from ..result import Result, class_summary
from ..system import policies as _pol
from ..system.classes import ServerClasses, parse_server_classes
from ..system.service import ServiceLaw, parse_service

__all__ = ["FluidFixedPoint", "fluid_fixed_point", "fluid_shares", "threshold", "MAX_THRESHOLD"]

MAX_THRESHOLD = 2000
"""Largest threshold ``T`` (``jbt``'s ``d``) solved: the chain of a queue has ``1 + T·phases`` states."""


def threshold(policy: str, d: int) -> int:
    """The threshold ``T`` below which a queue takes arrivals at the fluid point: 1 for ``jsq`` and
    ``jiq``, ``d`` for ``jbt``.

    >>> threshold("jiq", 5), threshold("jbt", 3)
    (1, 3)
    """
    name = _pol.check_policy(policy)
    if _pol.RULES[name].smooth:
        raise ValueError(f"policy: {name} has a differentiable drift: its mean field is the ODE's (not a fluid point)")
    return check_int("d", d, minimum=1, maximum=MAX_THRESHOLD) if _pol.RULES[name].uses_d else 1


def _queue_law(a: float, s: float, alpha: np.ndarray, M: np.ndarray, T: int) -> np.ndarray:
    """The stationary law ``(π(0), π(ℓ, φ))`` of the M/PH/1/T queue (arrival rate ``a``, service
    ``PH(α, s M)``): shape ``(T + 1, m)``, row 0 holding ``π(0)`` in column 0."""
    m = alpha.size
    if m == 1:  # M/M/1/T: π(ℓ) ∝ ρ^ℓ, scaled by its largest term
        lr = np.log(a / (s * -M[0, 0])) * np.arange(T + 1)
        w = np.exp(lr - lr.max())
        return (w / w.sum())[:, None]
    t0 = -M.sum(axis=1)
    N = 1 + T * m
    Q = sp.lil_matrix((N, N))
    Q[0, 1 : 1 + m] = a * alpha
    for ell in range(1, T + 1):
        i = 1 + (ell - 1) * m
        Q[i : i + m, i : i + m] = s * M
        if ell < T:
            Q[i : i + m, i + m : i + 2 * m] = a * np.eye(m)
        if ell == 1:
            Q[i : i + m, 0] = (s * t0)[:, None]
        else:
            Q[i : i + m, i - m : i] = s * np.outer(t0, alpha)
    Q = Q.tocsr()
    Q = Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())
    A = Q.T.tolil()
    A[0, :] = 1.0  # the normalization replaces one balance equation
    rhs = np.zeros(N)
    rhs[0] = 1.0
    p = np.clip(np.atleast_1d(spsolve(A.tocsc(), rhs)), 0.0, None)
    p /= p.sum()
    out = np.zeros((T + 1, m))
    out[0, 0] = p[0]
    out[1:] = p[1:].reshape(T, m)
    return out


def _solve(T: int, lam1: float, f: np.ndarray, s: np.ndarray, alpha: np.ndarray, M: np.ndarray) -> tuple:
    """``F`` (the root of module docstring) and each class's queue law at it."""

    def laws(F: float) -> list[np.ndarray]:
        return [_queue_law(lam1 / F, float(sk), alpha, M, T) for sk in s]

    def excess(F: float) -> float:
        return float(sum(fk * p[:T].sum() for fk, p in zip(f, laws(F)))) - F  # p[:T]: the queues below T

    lo = 0.5
    while excess(lo) <= 0.0:  # excess(F)/F → 1/λ − 1 > 0 as F → 0; excess(1) < 0
        lo *= 0.5
        if lo < 1e-200:  # pragma: no cover - λ < 1 keeps the root well above this
            raise ValueError(f"lam: no fluid fixed point found at arrival rate {lam1!r} (the share below T vanishes)")
    F = float(brentq(excess, lo, 1.0, xtol=1e-15, rtol=1e-15))
    return F, laws(F)


def fluid_shares(policy: str, d: int, lam: float, alpha: np.ndarray, M: np.ndarray) -> np.ndarray:
    """``x[ℓ−1, φ]``: the share of the queues of length ``ℓ`` serving in phase ``φ`` at the fluid
    fixed point of ``jsq``, ``jiq`` or ``jbt`` with one class and the law ``PH(α, M)`` (the
    ``start="fixed-point"`` of the phase engine).

    >>> fluid_shares("jiq", 1, 0.5, np.array([1.0, 0.0]), np.array([[-2.0, 2.0], [0.0, -2.0]])).tolist()
    [[0.25, 0.25]]
    """
    T = threshold(policy, d)
    one = np.ones(1)
    _, ps = _solve(T, check_load(lam), one, one, np.asarray(alpha, float), np.asarray(M, float))
    return ps[0][1:]


@dataclass(frozen=True, eq=False)
class FluidFixedPoint(Result):
    """The fluid fixed point of ``jsq``, ``jiq`` or ``jbt`` with server classes and a phase-type
    law (module docstring; one class of speed 1 and ``exp`` included).

    Attributes
    ----------
    x : numpy.ndarray (classes, T, phases)
        ``x[k, ℓ−1, φ]``: share of class-``k`` servers of length ``ℓ`` serving in phase ``φ``.
    u : numpy.ndarray (classes, T)
        ``u[k, ℓ−1] = u_{k,ℓ}``: share of class-``k`` servers with at least ``ℓ`` customers (none above ``T``).
    U : numpy.ndarray (T,)
        ``Σ_k f_k u_{k,ℓ}``.
    below : float
        ``F``, the share of the queues shorter than ``T`` (the idle share ``I`` for ``T = 1``).
    join : numpy.ndarray (classes, T, phases)
        ``join[k, ℓ, φ]``: share of the arrivals that join a class-``k`` queue of length ``ℓ``
        (``ℓ = 0..T−1``) whose customer in service is in phase ``φ`` (``ℓ = 0``: ``φ`` drawn from ``α``).
    arrival_share : numpy.ndarray (classes,)
        Share of the arrivals that join class ``k``: ``f_k (1 − π_k(T))/F``.
    busy_by_phase : numpy.ndarray (classes, phases)
        ``Σ_ℓ x[k, ℓ, φ]``.
    mean_queue_length, sojourn : numpy.ndarray (classes,)
        Per class-``k`` server ``Σ_ℓ u_{k,ℓ}``, and its mean sojourn (Little's law over its throughput).
    total_mean_queue_length, total_sojourn : float
        ``Σ_ℓ U_ℓ`` and ``Σ_ℓ U_ℓ/(λ s̄)``.
    flow_error : float
        ``max_k |arrivals into class k − departures from class k|`` per server.
    """

    policy: str
    d: int
    threshold: int
    lam_f: float
    server_classes: ServerClasses
    service: ServiceLaw
    x: np.ndarray
    u: np.ndarray
    U: np.ndarray
    below: float
    join: np.ndarray
    arrival_share: np.ndarray
    busy_by_phase: np.ndarray
    mean_queue_length: np.ndarray
    sojourn: np.ndarray
    total_mean_queue_length: float
    total_sojourn: float
    flow_error: float

    @property
    def levels(self) -> int:
        """The levels ``1..T`` kept (no queue is longer at the fluid point)."""
        return self.threshold

    @property
    def residual(self) -> float:
        """The flow balance's error (the fluid point is no zero of a drift: its flows balance)."""
        return self.flow_error

    @property
    def source(self) -> str:
        """Where the point comes from, for reports."""
        return (
            f"fluid fixed point of {self.policy} (T = {self.threshold}: every class an M/PH/1/T queue fed at rate "
            "λ s̄/F, F the share below T), docs/model.md §2.1 [derived]"
        )

    def to_dict(self) -> dict[str, Any]:
        from .classes import fixed_point_dict

        out = fixed_point_dict(
            self,
            self.source,
            self.service,
            self.flow_error,
            busy_by_phase=self.busy_by_phase,
            arrival_share=self.arrival_share,
        )
        out["below_threshold"] = self.below
        out["refined"] = None
        out["refined_note"] = _pol.RULES[self.policy].rough + ": no refined mean field or linear noise"
        return out

    def summary(self) -> str:
        head = (
            f"fluid fixed point (docs/model.md §2.1, [derived]): policy={self.policy} T={self.threshold} "
            f"λ={self.lam_f:g} classes={self.server_classes.spec} service={self.service.spec}; share below T "
            f"{self.below:.10g}, flow balance error {self.flow_error:.1e}"
        )
        return class_summary(head, self, self.u, self.U, expected=False, little=True)


def fluid_fixed_point(
    policy: str,
    d: int,
    lam: float | str,
    server_classes: str | ServerClasses | None = None,
    service: str | ServiceLaw = "exp",
) -> FluidFixedPoint:
    """The fluid fixed point of ``jsq``, ``jiq`` or ``jbt(T = d)`` (module docstring).

    Parameters
    ----------
    policy : str
        ``jsq``, ``jiq`` or ``jbt``.
    d : int
        ``jbt``'s threshold ``T`` (at most :data:`MAX_THRESHOLD`); ignored by ``jsq`` and ``jiq``.
    lam : float or str
        Load ``0 < λ < 1``, per unit of capacity with classes.
    server_classes : str or ServerClasses, optional
        ``FRACTION:SPEED,…`` (one class of speed 1 when None).
    service : str or ServiceLaw, default "exp"
        A law of mean 1 with a phase-type form.

    Returns
    -------
    FluidFixedPoint

    Raises
    ------
    ValueError
        A rule with a differentiable drift, a load outside (0, 1), a law without a phase form.

    Examples
    --------
    >>> r = fluid_fixed_point("jiq", 1, 0.5, "0.5:2,0.5:1")   # b_k = λ s̄/(λ s̄ + s_k I)
    >>> I = r.below
    >>> [round(float(b), 12) for b in r.u[:, 0]] == [round(0.75 / (0.75 + s * I), 12) for s in (2, 1)]
    True
    >>> fluid_fixed_point("jbt", 2, 0.9).u.round(12).tolist() == [
    ...     _pol.RULES["jbt"].fixed_point(0.9, 2, 2).round(12).tolist()]
    True
    """
    name = _pol.check_policy(policy)
    T = threshold(name, d)
    lam_f = check_load(lam)
    sc = parse_server_classes(server_classes)
    law = parse_service(service)
    if law.alpha is None or law.T is None:
        raise ValueError(f"service: {law.spec} has no phase-type form, so no fluid fixed point of finitely many phases")
    alpha, M = np.asarray(law.alpha, float), np.asarray(law.T, float)
    f, s = np.asarray(sc.fractions, float), np.asarray(sc.speeds, float)
    lam1 = lam_f * sc.mean_speed  # arrivals per server
    F, ps = _solve(T, lam1, f, s, alpha, M)
    K, m = f.size, alpha.size
    x = np.stack([p[1:] for p in ps])  # (K, T, m)
    u = np.cumsum(x.sum(axis=2)[:, ::-1], axis=1)[:, ::-1]
    join = np.zeros((K, T, m))
    for k, p in enumerate(ps):
        join[k, 0] = f[k] * p[0, 0] * alpha / F
        join[k, 1:] = f[k] * p[1:T] / F
    t0 = -M.sum(axis=1)
    share = join.sum(axis=(1, 2))
    arrivals = lam1 * share  # per server of the system, into class k
    departures = f * s * (x.sum(axis=1) @ t0)
    mq = u.sum(axis=1)
    U = f @ u
    return FluidFixedPoint(
        policy=name,
        d=int(d),
        threshold=T,
        lam_f=float(lam_f),
        server_classes=sc,
        service=law,
        x=x,
        u=u,
        U=U,
        below=F,
        join=join,
        arrival_share=share,
        busy_by_phase=x.sum(axis=1),
        mean_queue_length=mq,
        sojourn=f * mq / arrivals,
        total_mean_queue_length=float(U.sum()),
        total_sojourn=float(U.sum() / lam1),
        flow_error=float(np.abs(arrivals - departures).max()),
    )
