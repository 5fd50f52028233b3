"""Mean field with server classes (docs/model.md §15.2).

The state is ``u[k, i-1] = u_{k,i}``, the fraction of class-``k`` servers with at least ``i``
customers (``u_{k,0} = 1``; ``u_{k,L+1} = 0`` above the top level ``L``).  With
``U_i = Σ_k f_k u_{k,i}`` and the rule's ``P(U)`` (``U^d`` for ``jsq-d``, ``U`` for ``random``),
the drift is [derived]

    du_{k,i}/dt = λ s̄ · (P(U_{i−1}) − P(U_i))/(U_{i−1} − U_i) · (u_{k,i−1} − u_{k,i})
                  − s_k (u_{k,i} − u_{k,i+1}),

the ratio taken as ``P'(U_i)`` when ``U_{i−1} = U_i``: an arrival (rate ``λ s̄`` per server)
joins a queue of length ``i − 1`` with probability ``P(U_{i−1}) − P(U_i)``, a uniform one among
those servers, so a class-``k`` one with probability ``f_k (u_{k,i−1} − u_{k,i})/(U_{i−1} − U_i)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import root

from .. import model as _m
from ..result import Result, class_rows, class_summary
from ..system import policies as _pol
from ..system.service import ServerClasses, parse_server_classes

__all__ = ["classes_drift", "classes_ode", "classes_fixed_point", "ClassesFixedPoint", "MF_POLICIES"]

MF_POLICIES = _pol.SMOOTH_POLICIES
"""The rules with a smooth drift (``jsq`` and ``jiq`` have none: refused)."""


def _rule(policy: str, d: int):
    if policy == "random":
        return (lambda x: x), (lambda x: np.ones_like(x))
    return (lambda x: x**d), (lambda x: d * x ** (d - 1))


def classes_drift(
    u: np.ndarray, lam: float, f: np.ndarray, s: np.ndarray, d: int = 2, policy: str = "jsq-d"
) -> np.ndarray:
    """The drift ``du/dt`` of the ``K x L`` per-class profile ``u`` (module docstring).

    Examples
    --------
    >>> f, s = np.array([0.5, 0.5]), np.array([2.0, 1.0])
    >>> rho = 0.5 * 1.5 / s                       # random routing: per-class M/M/1 at ρ_k = λ s̄/s_k
    >>> u = rho[:, None] ** np.arange(1, 200)[None, :]
    >>> bool(np.abs(classes_drift(u, 0.5, f, s, policy="random")).max() < 1e-12)
    True
    """
    P, dP = _rule(policy, d)
    K = u.shape[0]
    ext = np.hstack([np.ones((K, 1)), u, np.zeros((K, 1))])
    U = f @ ext  # U_0..U_{L+1}
    dU = U[:-2] - U[1:-1]  # U_{i-1} − U_i, i = 1..L
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.where(dU > 1e-13, (P(U[:-2]) - P(U[1:-1])) / np.where(dU > 1e-13, dU, 1.0), dP(U[1:-1]))
    sbar = float(f @ s)
    return lam * sbar * g[None, :] * (ext[:, :-2] - ext[:, 1:-1]) - s[:, None] * (ext[:, 1:-1] - ext[:, 2:])


BYTES_PER_JACOBIAN_ENTRY = 16
"""Dense solvers here (MINPACK ``hybr``: its ``N x N`` Jacobian and the triangle of its QR;
LSODA: its ``N x N`` Jacobian and iteration matrix) hold about two ``N x N`` float64 arrays for
``N`` = classes x levels unknowns."""


def _memory_limit() -> int:
    """Half the physical memory (bytes): the most a dense solve here may ask for."""
    import os

    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        phys = 8 * 2**30
    return int(phys // 2)


def check_dense_size(classes: int, levels: int, phases: int = 1, limit: int | None = None) -> None:
    """Refuse (``ValueError``, before any allocation) a dense solve of ``classes x levels x
    phases`` unknowns whose ``N x N`` matrices would not fit in half the physical memory; the
    message says how much it would need and the most classes that fit."""
    lim = _memory_limit() if limit is None else int(limit)
    N = int(classes) * int(levels) * int(phases)
    need = BYTES_PER_JACOBIAN_ENTRY * N * N
    if need > lim:
        most_n = math.isqrt(lim // BYTES_PER_JACOBIAN_ENTRY)
        most_k = most_n // (int(levels) * int(phases))
        raise ValueError(
            f"server_classes: {classes:,} classes x {levels} levels"
            + (f" x {phases} phases" if phases > 1 else "")
            + f" = {N:,} unknowns need about {need / 2**30:.3g} GiB for the dense solve "
            f"({BYTES_PER_JACOBIAN_ENTRY} bytes per entry of an N x N matrix; limit {lim / 2**30:.3g} GiB, half "
            f"the physical memory): at most {most_k:,} classes fit at {levels} levels; merge classes of similar speed"
        )


def _check(d: int, lam: float | str, sc: str | ServerClasses, policy: str) -> tuple[int, float, ServerClasses]:
    if policy not in MF_POLICIES:  # the names as given (no case forgiven): the code below compares them
        raise ValueError(_pol.smooth_message(policy, "the mean field with server classes"))
    d = _m.check_positive_int("d", d, maximum=10**6) if _pol.RULES[policy].uses_d else 1
    lam_f = _m.check_load(lam, name="lam")
    return d, lam_f, parse_server_classes(sc)


def classes_ode(
    d: int,
    lam: float | str,
    server_classes: str | ServerClasses,
    T: float,
    *,
    policy: str = "jsq-d",
    levels: int = 60,
    u0: np.ndarray | None = None,
    points: int = 201,
) -> tuple[np.ndarray, np.ndarray]:
    """Integrate the drift from ``u0`` (default empty) to time ``T``: ``(times, u[t, k, i-1])``."""
    d, lam_f, sc = _check(d, lam, server_classes, policy)
    T = _m.check_positive_float("T", T)
    f = np.asarray(sc.fractions, float)
    s = np.asarray(sc.speeds, float)
    K = f.size
    L = _m.check_positive_int("levels", levels, maximum=100_000)
    check_dense_size(K, L)
    y0 = np.zeros(K * L) if u0 is None else np.asarray(u0, float).reshape(K * L)
    t_eval = np.linspace(0.0, T, points)
    sol = solve_ivp(
        lambda t, y: classes_drift(y.reshape(K, L), lam_f, f, s, d, policy).ravel(),
        (0.0, T),
        y0,
        method="LSODA",
        t_eval=t_eval,
        rtol=1e-10,
        atol=1e-13,
    )
    return sol.t, sol.y.T.reshape(-1, K, L)


@dataclass(frozen=True, eq=False)
class ClassesFixedPoint(Result):
    """The fixed point of the per-class mean field: ``u[k, i-1] = u_{k,i}``, the totals
    ``U`` (``Σ_k f_k u_{k,i}``), per class ``mean_queue_length`` and ``sojourn`` (Little's law,
    ``Σ_i u_{k,i}/(s_k u_{k,1})``), the totals ``total_mean_queue_length`` and ``total_sojourn``
    (``Σ_i U_i/(λ s̄)``), ``residual`` (``max |drift|``) and ``levels``."""

    d: int
    lam_f: float
    policy: str
    server_classes: ServerClasses
    u: np.ndarray
    U: np.ndarray
    mean_queue_length: np.ndarray
    sojourn: np.ndarray
    total_mean_queue_length: float
    total_sojourn: float
    residual: float
    levels: int

    def to_dict(self) -> dict[str, Any]:
        return fixed_point_dict(self, "mean-field fixed point with server classes, docs/model.md §15.2 [derived]")

    def summary(self) -> str:
        head = (
            f"mean field with classes (docs/model.md §15.2, [derived]): d={self.d} λ={self.lam_f:g} "
            f"policy={self.policy} classes={self.server_classes.spec}; residual {self.residual:.1e}, "
            f"{self.levels} levels"
        )
        return class_summary(head, self, self.u, self.U, expected=False)


def fixed_point_dict(r: Any, source: str, service: Any = None, flow_error: Any = None, **per_class: Any) -> dict:
    """The ``to_dict()`` of the mean-field fixed points with server classes
    (:class:`ClassesFixedPoint`, and :class:`supermarket.meanfield.classes_phase.ClassesPhaseFixedPoint`
    with its ``service``, ``flow_error`` and ``per_class`` entries of
    :func:`supermarket.result.class_rows`)."""
    from ..jsonable import to_jsonable

    sc = r.server_classes
    return to_jsonable(
        {
            "d": r.d,
            "load": r.lam_f,
            "policy": r.policy,
            **({} if service is None else {"service": service.to_dict()}),
            "server_classes": sc.to_dict(),
            "classes": class_rows(sc, r.u, r.mean_queue_length, r.sojourn, **per_class),
            "u_mean": r.U,
            "mean_queue_length": r.total_mean_queue_length,
            "sojourn": r.total_sojourn,
            "residual": r.residual,
            **({} if flow_error is None else {"flow_error": flow_error}),
            "levels": r.levels,
            "source": source,
        }
    )


def classes_fixed_point(
    d: int,
    lam: float | str,
    server_classes: str | ServerClasses,
    *,
    policy: str = "jsq-d",
    levels: int | None = None,
    tol: float = 1e-13,
) -> ClassesFixedPoint:
    """The fixed point of the per-class drift (docs/model.md §15.2): the ODE from empty until
    its drift is small (``jsq-d``), then Newton (``scipy.optimize.root``) on the drift.

    Levels: ``levels`` or, by default, as many as make the top level's ``u`` below ``tol``
    (for ``random`` from the closed form ``ρ_max^L``; for ``jsq-d`` doubled from 32).

    Raises
    ------
    ValueError
        Bad parameters; ``random`` with a class whose load ``λ s̄/s_k`` is 1 or more (no
        fixed point); more classes x levels than the dense solve fits in half the physical
        memory (:func:`check_dense_size`, before any work); no fixed point with the top level
        below ``tol`` within 4096 levels.

    Examples
    --------
    >>> r = classes_fixed_point(2, 0.5, "1:1")            # one class: π_i = λ^(2^i − 1)
    >>> [round(float(x), 10) for x in r.U[:3]]
    [0.5, 0.125, 0.0078125]
    """
    d, lam_f, sc = _check(d, lam, server_classes, policy)
    f = np.asarray(sc.fractions, float)
    s = np.asarray(sc.speeds, float)
    K = f.size
    sbar = sc.mean_speed
    if policy == "random":
        rho = lam_f * sbar / s.min()
        if rho >= 1.0:
            raise ValueError(
                f"lam_f: under random routing class speed {s.min():g} gets load λ s̄/s = {rho:g} >= 1: no fixed point"
            )
    if levels is not None:
        Ls = [_m.check_positive_int("levels", levels, maximum=100_000)]
    elif policy == "random":
        Ls = [max(8, math.ceil(math.log(tol) / math.log(lam_f * sbar / s.min())) + 4)]
    else:
        Ls = [32, 64, 128, 256, 512, 1024, 2048, 4096]
    check_dense_size(K, Ls[0])  # before any work; a larger L is checked before it is tried
    for L in Ls:
        check_dense_size(K, L)
        # the ODE from empty: time scale of the slowest class
        y = np.zeros((K, L))
        t_chunk = 20.0 / (s.min() * (1.0 - lam_f))
        for _ in range(200 if policy == "jsq-d" else 0):  # random: a linear drift, Newton alone
            _, traj = classes_ode(d, lam_f, sc, t_chunk, policy=policy, levels=L, u0=y, points=2)
            y = traj[-1]
            if np.abs(classes_drift(y, lam_f, f, s, d, policy)).max() < 1e-8 or y[:, -1].max() > 1e-3:
                break
        shape = (K, L)
        sol = root(
            lambda x, sh=shape: classes_drift(x.reshape(sh), lam_f, f, s, d, policy).ravel(), y.ravel(), method="hybr"
        )
        u = np.clip(sol.x.reshape(K, L), 0.0, 1.0)
        res = float(np.abs(classes_drift(u, lam_f, f, s, d, policy)).max())
        if u[:, -1].max() < tol or levels is not None:
            break
    else:
        raise ValueError(
            f"no fixed point with u below tol = {tol:g} at the top of {Ls[-1]} levels: the system may be "
            "unstable under this rule with these classes"
        )
    U = f @ u
    mq = u.sum(axis=1)
    return ClassesFixedPoint(
        d=d,
        lam_f=float(lam_f),
        policy=policy,
        server_classes=sc,
        u=u,
        U=U,
        mean_queue_length=mq,
        sojourn=mq / (s * u[:, 0]),
        total_mean_queue_length=float(U.sum()),
        total_sojourn=float(U.sum() / (lam_f * sbar)),
        residual=res,
        levels=L,
    )
