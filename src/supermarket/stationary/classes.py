"""Exact stationary law of tiny systems with server classes (docs/model.md §15.4).

The state is the per-class profile: for each class ``k`` the multiset of its ``n_k`` queue
lengths, each at most the cap (arrivals that would pass it are dropped, as in
:func:`supermarket.stationary.profile.solve`).  The generator is the model of §15: an arrival (rate
``nλ s̄``) joins a queue of length ``ℓ`` with probability ``P_ℓ − P_{ℓ+1}`` of the rule
(:func:`supermarket.system.policies.p_levels`, a function of the total counts), a uniform one among
the servers of length ``ℓ``, so one of class ``k`` with probability ``e_{k,ℓ}/E_ℓ``; each
class-``k`` server of length ``ℓ >= 1`` serves at rate ``s_k``.  The law is solved by
:func:`supermarket.stationary.solver.stationary_vector` (sparse LU, or GMRES with ILU for larger systems).
"""

from __future__ import annotations

import itertools
import math
import time as _time
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from .. import model as _m
from ..result import Result, class_rows, class_summary
from ..system import policies as _pol
from ..system.classes import check_random_stable
from ..system.service import ServerClasses, parse_server_classes
from .solver import Budget, stationary_vector

__all__ = ["solve_classes", "ClassesExactResult", "MAX_STATES"]

MAX_STATES = 60_000
DEFAULT_TOL = 1e-8


@dataclass(frozen=True, eq=False)
class ClassesExactResult(Result):
    """The exact stationary law of the truncated per-class chain.

    ``u_mean[k, i-1] = E[u_{k,i}]`` (fraction of class ``k``'s servers with at least ``i``
    customers), ``mean_queue_length[k]`` (per server of class ``k``), ``sojourn[k]`` (Little's
    law, ``E[Q_k]/(s_k E[u_{k,1}])``), the totals ``total_u_mean``, ``total_mean_queue_length``
    and ``total_sojourn`` (``E[Q]/(λ s̄)``), ``mass_at_cap`` (probability that some queue has
    the cap length), ``states``, ``residual``, ``method``.
    """

    n: int
    d: int
    lam: float
    policy: str
    replace: bool
    server_classes: ServerClasses
    cap: int
    u_mean: np.ndarray
    mean_queue_length: np.ndarray
    sojourn: np.ndarray
    total_u_mean: np.ndarray
    total_mean_queue_length: float
    total_sojourn: float
    mass_at_cap: float
    states: int
    residual: float
    method: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return exact_dict(self)

    def summary(self) -> str:
        head = (
            f"exact: n={self.n} d={self.d} λ={self.lam:g} policy={self.policy} replace={self.replace} "
            f"classes={self.server_classes.spec}; {self.states} states, cap {self.cap} (mass at cap "
            f"{self.mass_at_cap:.2g}), residual {self.residual:.1e} ({self.method})"
        )
        return class_summary(head, self, self.u_mean, self.total_u_mean)


def exact_dict(r: Any, service: Any = None, source: str | None = None, **per_class: Any) -> dict[str, Any]:
    """The ``to_dict()`` of the exact laws with server classes (:class:`ClassesExactResult`, and
    :class:`supermarket.stationary.classes_phase.ClassesPhaseExact` with its ``service``, ``source`` and
    ``per_class`` entries of :func:`supermarket.result.class_rows`)."""
    from ..jsonable import to_jsonable

    sc = r.server_classes
    return to_jsonable(
        {
            "n": r.n,
            "d": r.d,
            "load": r.lam,
            "policy": r.policy,
            "replace": r.replace,
            **({} if service is None else {"service": service.to_dict()}),
            "server_classes": sc.to_dict(),
            "classes": class_rows(sc, r.u_mean, r.mean_queue_length, r.sojourn, r.n, **per_class),
            "u_mean": r.total_u_mean,
            "mean_queue_length": r.total_mean_queue_length,
            "sojourn": r.total_sojourn,
            "truncation": {"cap": r.cap, "mass_at_cap": r.mass_at_cap},
            "states": r.states,
            "residual": r.residual,
            "method": r.method,
            "seconds": r.seconds,
            **({} if source is None else {"source": source}),
        }
    )


def _class_states(m: int, cap: int) -> list[tuple[int, ...]]:
    """The multisets of ``m`` lengths in ``0..cap`` as non-decreasing tuples, by total."""
    out = list(itertools.combinations_with_replacement(range(cap + 1), m))
    out.sort(key=sum)
    return out


def count_states(counts: Any, cap: int) -> int:
    """``Π_k C(n_k + cap, n_k)``."""
    return math.prod(math.comb(int(m) + cap, int(m)) for m in counts)


def _build(counts, speeds, d, lam, replace, policy, cap, budget=None):
    if budget is None:
        budget = Budget(None, "")
    n = int(sum(counts))
    K = len(counts)
    per = [_class_states(int(m), cap) for m in counts]
    states = list(itertools.product(*per))
    states.sort(key=lambda st: sum(sum(x) for x in st))  # the empty state first
    index = {st: i for i, st in enumerate(states)}
    S = len(states)
    # e[s, k, ℓ]: servers of class k with length exactly ℓ
    e = np.zeros((S, K, cap + 2), np.int64)
    for i, st in enumerate(states):
        for k, ys in enumerate(st):
            for y in ys:
                e[i, k, y] += 1
    c = np.cumsum(e[:, :, ::-1], axis=2)[:, :, ::-1]  # c[s, k, ℓ] = #{class k, length >= ℓ}
    C = c.sum(axis=1)  # totals, ℓ = 0..cap+1
    P = np.hstack([np.ones((S, 1)), _pol.p_levels(policy, C[:, 1:], n, d, replace)])
    sbar = float(np.dot(counts, speeds)) / n
    rows, cols, vals = [], [], []
    out = np.zeros(S)
    for i, st in enumerate(states):
        if i % 2048 == 0:
            budget.check(f"cap {cap}: building the generator ({i:,} of {S:,} states)")
        for ell in range(cap):
            pj = P[i, ell] - P[i, ell + 1]
            E = C[i, ell] - C[i, ell + 1]
            if pj <= 0 or E == 0:
                continue
            for k in range(K):
                if e[i, k, ell] == 0:
                    continue
                rate = n * lam * sbar * pj * e[i, k, ell] / E
                ys = list(st[k])
                ys[ys.index(ell)] = ell + 1
                ys.sort()
                dst = index[(*st[:k], tuple(ys), *st[k + 1 :])]
                rows.append(i)
                cols.append(dst)
                vals.append(rate)
                out[i] += rate
        for k in range(K):
            for ell in range(1, cap + 1):
                if e[i, k, ell] == 0:
                    continue
                rate = speeds[k] * e[i, k, ell]
                ys = list(st[k])
                ys[ys.index(ell)] = ell - 1
                ys.sort()
                dst = index[(*st[:k], tuple(ys), *st[k + 1 :])]
                rows.append(i)
                cols.append(dst)
                vals.append(rate)
                out[i] += rate
    R = np.asarray(rows, np.int64)
    Cc = np.asarray(cols, np.int64)
    V = np.asarray(vals, float)
    Q = sp.csr_matrix(
        (np.concatenate([V, -out]), (np.concatenate([R, np.arange(S)]), np.concatenate([Cc, np.arange(S)]))),
        shape=(S, S),
    )
    tot = np.array([sum(sum(x) for x in st) for st in states])
    return Q, c, tot, e


def solve_classes(
    n: int,
    d: int,
    lam: float | str,
    server_classes: str | ServerClasses,
    *,
    policy: str = "jsq-d",
    replace: bool = True,
    cap: int | None = None,
    tol: float = DEFAULT_TOL,
    max_states: int = MAX_STATES,
    max_seconds: float | None = None,
    progress: Any = None,
) -> ClassesExactResult:
    """Exact stationary law of ``n`` servers in classes (docs/model.md §15.4).

    ``cap``: the largest queue length kept; by default raised from 8 in steps of 4 until the
    probability that some queue has the cap length is below ``tol`` (or the next cap would
    exceed ``max_states`` states: the mass at the cap then says how far the law is from the
    untruncated one).

    ``max_seconds``: a wall-clock budget, checked through the build, the solve and the cap search
    (:class:`supermarket.stationary.profile.BudgetExceeded`, a ``ValueError``, past it); ``progress``: a
    callable given a short text at each stage.

    Raises
    ------
    ValueError
        Bad input; or ``random`` routing with a class whose own load ``λ s̄/s_k`` is 1 or more
        (that class's queues are M/M/1 queues past saturation: no stationary law; a truncated
        solve would report a finite number that belongs to the cap, not to the model).

    Examples
    --------
    >>> r = solve_classes(2, 1, 0.5, "0.5:2,0.5:1", policy="random", cap=40)
    >>> [round(float(v), 4) for v in r.u_mean[:, 0]]   # per-class M/M/1: ρ_k = λ s̄/s_k (cap 40: 2e-6 off)
    [0.375, 0.75]
    """
    n = _m.check_positive_int("n", n, maximum=64)
    lam = _m.check_load(lam, name="lam")
    if policy not in _pol.POLICIES:
        raise ValueError(f"policy must be one of {', '.join(_pol.POLICIES)}; got {policy!r}")
    _pol.rule(policy, "exact-classes")
    d = _m.check_positive_int("d", d, maximum=n if not replace else 10**6) if _pol.RULES[policy].uses_d else 1
    sc = parse_server_classes(server_classes)
    counts = sc.counts(n)
    speeds = np.asarray(sc.speeds, float)
    max_states = _m.check_positive_int("max_states", max_states)
    if max_seconds is not None:
        max_seconds = _m.check_positive_float("max_seconds", max_seconds)
    check_random_stable(policy, lam, sc)
    t0 = _time.perf_counter()
    budget = Budget(max_seconds, f"n={n}, d={d}, λ={lam:g}, policy {policy}, classes {sc.spec}", progress)
    if cap is not None:
        cap = _m.check_positive_int("cap", cap, maximum=10**4)
        if count_states(counts, cap) > max_states:
            raise ValueError(
                f"cap: {count_states(counts, cap)} states at cap {cap} exceed max_states = {max_states}; lower cap"
            )
        caps = [cap]
    else:
        caps = []
        cp = 8
        while count_states(counts, cp) <= max_states and cp <= 400:
            caps.append(cp)
            cp += 4
        if not caps:
            raise ValueError(f"n: even cap 4 gives more than max_states = {max_states} states; lower n")
    for cp in caps:
        budget.stage(f"cap {cp}: enumerating {count_states(counts, cp):,} states and building the generator")
        Q, c, tot, _ = _build(counts, speeds, d, lam, replace, policy, cp, budget)
        pi, res, method = stationary_vector(Q, tot, budget=budget)
        at_cap = (c[:, :, cp].sum(axis=1) > 0).astype(float)
        mass = float(pi @ at_cap)
        budget.reached = f"cap {cp} solved ({Q.shape[0]:,} states), P(some queue at the cap) = {mass:.3g}"
        if mass < tol:
            break
    u = np.einsum("s,skl->kl", pi, c[:, :, 1 : cp + 1]) / counts[:, None]
    mq = u.sum(axis=1)
    soj = mq / (speeds * u[:, 0])
    f = np.asarray(sc.fractions, float)
    U = f @ u
    Qt = float(U.sum())
    return ClassesExactResult(
        n=n,
        d=d,
        lam=float(lam),
        policy=policy,
        replace=bool(replace),
        server_classes=sc,
        cap=cp,
        u_mean=u,
        mean_queue_length=mq,
        sojourn=soj,
        total_u_mean=U,
        total_mean_queue_length=Qt,
        total_sojourn=Qt / (lam * sc.mean_speed),
        mass_at_cap=mass,
        states=int(Q.shape[0]),
        residual=res,
        method=method,
        seconds=_time.perf_counter() - t0,
    )
