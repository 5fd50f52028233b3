"""Exact stationary law of tiny systems with server classes and a phase-type law (docs/model.md §15.6).

The model is the event engine's (§14): ``n_k = f_k n`` servers of speed ``s_k``; arrivals at
rate ``nλ s̄``; a customer's work ``S ~ PH(α, T)`` (mean 1) is served at the server's speed, so
on a class-``k`` server its phase moves at rates ``s_k T`` and ends at rates ``s_k t0``
(``t0 = −T·1``); the next customer, if any, starts in a phase drawn from ``α``.

The state is, for each class, the multiset of its servers' states (0 for idle, else the
pair (length ``ℓ``, phase of the customer in service)), lengths at most the cap (an
arrival that would pass it is dropped).  The generator is built from the definition, as in
:func:`supermarket.stationary.phase.solve_phase`: the joined server is found by enumerating every
``d``-tuple of labelled servers (with replacement, or ordered tuples of distinct servers
without) and taking the first shortest (the law of the joined server is that of a uniform
pick among the sampled slots at the least length, the tie rule of §14: the tuple is
exchangeable); ``random``, ``jsq`` and ``jiq`` by their definitions.  ``π Q = 0`` by the
solver of §11 (:func:`supermarket.stationary.solver.stationary_vector`).
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
from ..result import Result, class_summary
from ..system import policies as _pol
from ..system.classes import check_random_stable
from ..system.service import ServerClasses, ServiceLaw, parse_phase_type, parse_server_classes
from .classes import exact_dict
from .phase import _join_law
from .solver import Budget, stationary_vector

__all__ = ["solve_classes_phase", "ClassesPhaseExact", "MAX_CP_STATES", "count_cp_states"]

MAX_CP_STATES = 150_000
"""Largest state space :func:`solve_classes_phase` builds (a pure-Python build: about 10 s)."""

DEFAULT_TOL = 1e-8


@dataclass(frozen=True, eq=False)
class ClassesPhaseExact(Result):
    """The exact stationary law of the truncated chain, per class.

    Attributes
    ----------
    u_mean : numpy.ndarray (classes, cap)
        ``E[u_{k,ℓ}]``, the fraction of class ``k``'s servers with at least ``ℓ`` customers.
    phase_mean : numpy.ndarray (classes, cap, phases)
        ``P(a given class-k server has length ℓ and serves in phase φ)``.
    mean_queue_length, sojourn : numpy.ndarray (classes,)
        Per class-``k`` server ``Σ_ℓ E[u_{k,ℓ}]``, and Little's law ``E[Q_k]/(s_k E[u_{k,1}])``
        (a class-``k`` server completes services at rate ``s_k`` per unit of busy time on average).
    total_u_mean, total_mean_queue_length, total_sojourn
        ``Σ_k f_k E[u_{k,ℓ}]``, its sum, and ``E[Q]/(λ s̄)``.
    mass_at_cap : float
        Stationary probability that some queue has the cap length (bounds the arrivals dropped).
    states, residual, method, seconds
    """

    n: int
    d: int
    lam: float
    policy: str
    replace: bool
    server_classes: ServerClasses
    service: ServiceLaw
    cap: int
    u_mean: np.ndarray
    phase_mean: np.ndarray
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
        return exact_dict(
            self,
            self.service,
            "exact stationary law with server classes and a phase-type law, docs/model.md §15.6",
            busy_by_phase=[pm.sum(axis=0) for pm in self.phase_mean],
        )

    def summary(self) -> str:
        head = (
            f"exact: n={self.n} d={self.d} λ={self.lam:g} policy={self.policy} replace={self.replace} "
            f"classes={self.server_classes.spec} service={self.service.spec} (SCV {self.service.scv:g}); "
            f"{self.states} states, cap {self.cap} (mass at cap {self.mass_at_cap:.2g}), residual "
            f"{self.residual:.1e} ({self.method})"
        )
        return class_summary(head, self, self.u_mean, self.total_u_mean, little=True)


def count_cp_states(counts: Any, cap: int, phases: int) -> int:
    """``Π_k C(m + n_k − 1, n_k)`` with ``m = 1 + cap·phases`` states per server."""
    m = 1 + cap * phases
    return math.prod(math.comb(m + int(c) - 1, int(c)) for c in counts)


def _build(counts, speeds, d, lam, replace, policy, cap, a, M, t0, budget=None):
    if budget is None:
        budget = Budget(None, "")
    n = int(sum(counts))
    K = a.size
    m = 1 + cap * K  # per-server states: 0 idle, 1 + (ℓ−1)K + φ busy
    per = [list(itertools.combinations_with_replacement(range(m), int(c))) for c in counts]
    states = list(itertools.product(*per))
    index = {st: i for i, st in enumerate(states)}
    S = len(states)
    sbar = float(np.dot(counts, speeds)) / n

    def length(q):
        return 0 if q == 0 else (q - 1) // K + 1

    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    join_cache: dict = {}

    def add(i, st, k, pos, code, rate):
        if rate > 0.0:
            new = list(st[k])
            new[pos] = code
            rows.append(i)
            cols.append(index[(*st[:k], tuple(sorted(new)), *st[k + 1 :])])
            vals.append(rate)

    for i, st in enumerate(states):
        if i % 2048 == 0:
            budget.check(f"cap {cap}: building the generator ({i:,} of {S:,} states)")
        lens = tuple(length(q) for ys in st for q in ys)  # labelled servers, class by class
        jl = join_cache.get(lens)
        if jl is None:
            jl = join_cache[lens] = _join_law(lens, d, replace, policy)
        label = 0
        for k, ys in enumerate(st):
            sk = speeds[k]
            for pos, q in enumerate(ys):
                ell = length(q)
                r = n * lam * sbar * jl[label]
                label += 1
                if r > 0.0 and ell < cap:  # an arrival joins this server
                    if ell == 0:
                        for ph in range(K):
                            add(i, st, k, pos, 1 + ph, r * a[ph])
                    else:
                        add(i, st, k, pos, q + K, r)
                if ell == 0:
                    continue
                ph = (q - 1) % K
                base = q - ph
                for to in range(K):  # phase moves at the server's speed
                    if to != ph and M[ph, to] > 0.0:
                        add(i, st, k, pos, base + to, sk * M[ph, to])
                if t0[ph] > 0.0:  # completion; the next customer starts in a phase ~ α
                    if ell == 1:
                        add(i, st, k, pos, 0, sk * t0[ph])
                    else:
                        for to in range(K):
                            add(i, st, k, pos, base - K + to, sk * t0[ph] * a[to])
    Q = sp.coo_matrix((vals, (rows, cols)), shape=(S, S)).tocsr()
    Q = Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())
    # occupation: occ[s, k, q] = number of class-k servers in per-server state q
    occ = np.zeros((S, len(counts), m))
    for i, st in enumerate(states):
        for k, ys in enumerate(st):
            for q in ys:
                occ[i, k, q] += 1.0
    tot = np.array([sum(length(q) for ys in st for q in ys) for st in states])
    at_cap = np.array([float(any(length(q) == cap for ys in st for q in ys)) for st in states])
    return Q, occ, tot, at_cap


def _caps(counts: np.ndarray, cap: int | None, K: int, max_states: int) -> list[int]:
    """The caps to try: ``cap`` alone when given (refused beyond ``max_states``), else 8
    doubled, then the largest that fits in ``max_states``."""
    if cap is not None:
        cap = _m.check_positive_int("cap", cap, maximum=10**4)
        if count_cp_states(counts, cap, K) > max_states:
            raise ValueError(
                f"cap: {count_cp_states(counts, cap, K)} states at cap {cap} exceed max_states = {max_states}; "
                "lower cap or n"
            )
        return [cap]
    fits = [c for c in range(8, 401) if count_cp_states(counts, c, K) <= max_states]
    caps: list[int] = [c for c in (8, 16, 32, 64, 128, 256) if c in fits]  # doubling, then the largest that fits
    if fits and fits[-1] not in caps:
        caps.append(fits[-1])
    if not caps:
        raise ValueError(
            f"n: {count_cp_states(counts, 8, K)} states already at cap 8 (at most max_states = {max_states}); "
            "lower n or pass a smaller cap"
        )
    return caps


def _class_laws(pi: np.ndarray, occ: np.ndarray, counts: np.ndarray, cap: int, K: int) -> tuple:
    """``(phase_mean, u)`` per class: ``P(a class-k server at length ℓ in phase φ)`` and
    ``P(length >= ℓ)`` under ``pi`` (``occ``: the servers of each class per state and code)."""
    law_k = np.einsum("s,skq->kq", pi, occ) / counts[:, None]  # P(a class-k server in state q)
    phase_mean = law_k[:, 1:].reshape(len(counts), cap, K)
    by_len = phase_mean.sum(axis=2)
    u = np.cumsum(by_len[:, ::-1], axis=1)[:, ::-1]  # P(length >= ℓ), summed from the tail
    return phase_mean, u


def solve_classes_phase(
    n: int,
    d: int,
    lam: float | str,
    server_classes: str | ServerClasses,
    service: str | ServiceLaw,
    *,
    policy: str = "jsq-d",
    replace: bool = True,
    cap: int | None = None,
    tol: float = DEFAULT_TOL,
    max_states: int = MAX_CP_STATES,
    max_seconds: float | None = None,
    progress: Any = None,
) -> ClassesPhaseExact:
    """Exact stationary law of ``n`` servers in classes with a phase-type law (docs/model.md §15.6).

    Parameters
    ----------
    n, d : int
        Servers (each class a whole number of them) and choices (``jsq-d``; ``d <= n`` without
        replacement; ``n^d`` at most 10^4), or ``jbt``'s threshold ``T = d``.
    lam : float or str
        Load per unit of capacity, ``0 < λ < 1``.
    server_classes : str or ServerClasses
        ``FRACTION:SPEED,…``.
    service : str or ServiceLaw
        A law with a phase-type form, mean 1.
    policy : {"jsq-d", "random", "jsq", "jiq", "jbt"}
    replace : bool
    cap : int, optional
        Largest queue length kept; by default doubled from 8 until the
        probability that some queue has the cap length is below ``tol`` (or the next cap would
        exceed ``max_states``: ``mass_at_cap`` then says how far the law is from the model's).
    tol : float
    max_states : int
    max_seconds : float, optional
        A wall-clock budget, checked through the build, the solve and the cap search
        (:class:`supermarket.stationary.profile.BudgetExceeded`, a ``ValueError``, past it).
    progress : callable, optional
        Given a short text at each stage.

    Raises
    ------
    TypeError, ValueError
        Bad input, named, before any work; ``random`` routing with a class whose own load
        ``λ s̄/s_k`` is 1 or more (no stationary law).

    Examples
    --------
    One class of speed 1 and ``n = 1``: the M/E2/1 queue, Pollaczek–Khinchine ``0.5 + 0.25·1.5 = 0.875``.

    >>> r = solve_classes_phase(1, 1, 0.5, "1:1", "erlang:2", cap=60)
    >>> round(float(r.total_mean_queue_length), 9)
    0.875
    """
    n = _m.check_positive_int("n", n, maximum=64)
    lam_f = _m.check_load(lam, name="lam")
    policy = _pol.rule(policy, "exact-phase").name
    if not isinstance(replace, bool):
        raise TypeError(f"replace must be True or False, got {replace!r}")
    if policy == "jsq-d":
        d = _m.check_positive_int("d", d, maximum=64)
        if not replace and d > n:
            raise ValueError(f"d: without replacement d must be <= n = {n}, got {d}")
        if n**d > 10_000:
            raise ValueError(f"d: n^d = {n}^{d} tuples per state is too many (at most 10^4)")
    elif _pol.RULES[policy].uses_d:  # jbt: its threshold T = d (it samples nothing)
        d = _m.check_positive_int("d", d, maximum=n if not replace else 10**6)
    else:
        d = 1
    sc = parse_server_classes(server_classes)
    law = parse_phase_type(service, "the exact solver")
    counts = sc.counts(n)
    speeds = np.asarray(sc.speeds, float)
    a = np.asarray(law.alpha, float)
    M = np.asarray(law.T, float)
    t0 = -M.sum(axis=1)
    K = a.size
    max_states = _m.check_positive_int("max_states", max_states)
    tol = _m.check_positive_float("tol", tol)
    if max_seconds is not None:
        max_seconds = _m.check_positive_float("max_seconds", max_seconds)
    check_random_stable(policy, lam_f, sc)
    caps = _caps(counts, cap, K, max_states)
    start = _time.perf_counter()
    budget = Budget(max_seconds, f"n={n}, d={d}, λ={lam_f:g}, policy {policy}, classes {sc.spec}", progress)
    for cp in caps:
        budget.stage(f"cap {cp}: enumerating {count_cp_states(counts, cp, K):,} states and building the generator")
        Q, occ, tot, at_cap = _build(counts, speeds, d, lam_f, replace, policy, cp, a, M, t0, budget)
        pi, res, method = stationary_vector(Q, tot, budget=budget)
        mass = float(pi @ at_cap)
        budget.reached = f"cap {cp} solved ({Q.shape[0]:,} states), P(some queue at the cap) = {mass:.3g}"
        if mass < tol:
            break
    phase_mean, u = _class_laws(pi, occ, counts, cp, K)
    mq = u.sum(axis=1)
    f = np.asarray(sc.fractions, float)
    U = f @ u
    return ClassesPhaseExact(
        n=n,
        d=d,
        lam=float(lam_f),
        policy=policy,
        replace=bool(replace),
        server_classes=sc,
        service=law,
        cap=cp,
        u_mean=u,
        phase_mean=phase_mean,
        mean_queue_length=mq,
        sojourn=mq / (speeds * u[:, 0]),
        total_u_mean=U,
        total_mean_queue_length=float(U.sum()),
        total_sojourn=float(U.sum() / (lam_f * sc.mean_speed)),
        mass_at_cap=mass,
        states=int(Q.shape[0]),
        residual=res,
        method=method,
        seconds=_time.perf_counter() - start,
    )
