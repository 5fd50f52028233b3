"""Exact stationary law of a tiny supermarket model with phase-type service (docs/model.md §13).

The state is the multiset of ``(length, phase)`` over the ``n`` queues (idle queues have no
phase), lengths truncated at ``cap`` (an arrival that would make a queue longer than
``cap`` is lost; :attr:`PhaseExact.truncation` is the stationary probability that some
queue is at ``cap``, an upper bound on the share of arrivals lost, which bounds the
truncation's effect).  The generator is built from the definition, independently of the
phase engine's formulas: the joined queue of an arrival is found by enumerating every
``d``-tuple of labelled queues (``n^d`` with replacement, ``n!/(n−d)!`` ordered tuples
without) and taking the first shortest in the tuple; phases move by ``T``, complete by
``t0 = −T·1``, and a new service starts in phase ``~ α``.  ``π Q = 0`` is solved as for exponential
service (:mod:`supermarket.stationary.profile`: sparse LU, or GMRES with an incomplete LU).  With
``n = 1`` this is the M/PH/1 queue, whose mean queue length is
Pollaczek–Khinchine's ``ρ + ρ²(1 + SCV)/(2(1 − ρ))`` [classical].
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ..checks import check_int
from ..model import check_load, check_positive_float
from ..system.phase_law import check_ph
from ..system.policies import rule
from .solver import Budget, stationary_vector

__all__ = ["PhaseExact", "solve_phase", "MAX_PHASE_STATES"]

MAX_PHASE_STATES = 400_000
"""Largest state space :func:`solve_phase` builds (a pure-Python build: about 10 s)."""


@dataclass(frozen=True)
class PhaseExact:
    """Stationary law of a tiny phase-type system; level ``ℓ`` at index ``ℓ − 1``.

    Attributes
    ----------
    n, d, lam, replace, cap : the model and the truncation.
    states : number of states.
    u : ``E[u_ℓ]``, ``u_ℓ`` the share of queues with at least ``ℓ`` customers, ``ℓ = 1..cap``.
    queue_law : ``P(a given queue holds ℓ customers)``, ``ℓ = 0..cap``.
    phase_mean : ``E[N[ℓ, φ]/n]`` (rows ``ℓ = 1..cap``).
    ud : ``E[P_ℓ]``, the probability that an arrival joins a queue of length ``>= ℓ``.
    mean_queue_length : ``E[length of a given queue] = Σ_ℓ u_ℓ``.
    truncation : stationary probability that some queue holds ``cap`` customers.
    residual, method : ``max|π Q| / max|Q_ii|`` and the linear solver used.
    policy : the dispatch rule.
    """

    n: int
    d: int
    lam: float
    replace: bool
    cap: int
    states: int
    u: np.ndarray
    queue_law: np.ndarray
    phase_mean: np.ndarray
    ud: np.ndarray
    mean_queue_length: float
    truncation: float
    residual: float
    method: str
    policy: str = "jsq-d"


def _join_law(lengths, d, replace, policy="jsq-d"):
    """Probability that each labelled queue is joined: the first shortest of a uniform
    ``d``-tuple (with replacement) or ordered ``d``-tuple of distinct queues (without) for
    ``jsq-d``; uniform for ``random``; uniform among the shortest for ``jsq``; uniform among
    the idle queues if any, else uniform, for ``jiq``; uniform among the queues shorter than ``d``
    if any, else uniform, for ``jbt`` (docs/model.md §2, by the definitions)."""
    n = len(lengths)
    if policy != "jsq-d":
        if policy == "random":
            sel = [True] * n
        elif policy == "jsq":
            sel = [x == min(lengths) for x in lengths]
        elif policy == "jiq":
            idle = [x == 0 for x in lengths]
            sel = idle if any(idle) else [True] * n
        elif policy == "jbt":  # JBT(T = d): uniform among the queues shorter than d if any, else uniform
            below = [x < d for x in lengths]
            sel = below if any(below) else [True] * n
        else:
            raise ValueError(f"policy {policy!r} has no join law here")  # refused before: rule(..., "exact-phase")
        w = np.array(sel, dtype=float)
        return w / w.sum()
    out = np.zeros(n)
    tuples = itertools.product(range(n), repeat=d) if replace else itertools.permutations(range(n), d)
    count = 0
    for tup in tuples:
        best = tup[0]
        for q in tup[1:]:
            if lengths[q] < lengths[best]:
                best = q
        out[best] += 1.0
        count += 1
    return out / count


@dataclass(frozen=True, eq=False)
class _Chain:
    """The chain :func:`solve_phase` solves, checked: ``n`` queues, the rule (``policy``,
    ``d``, ``replace``), load ``lam``, the phase-type law ``(a, M, t0)`` (start, phase moves,
    completion rates) and the ``cap`` on the lengths.  A queue's state is one code: 0 idle,
    ``1 + (ℓ − 1)K + φ`` at length ``ℓ`` in phase ``φ``."""

    n: int
    d: int
    lam: float
    replace: bool
    policy: str
    a: np.ndarray
    M: np.ndarray
    t0: np.ndarray
    cap: int

    @property
    def K(self) -> int:
        return self.a.size

    @property
    def m(self) -> int:
        """Per-queue states."""
        return 1 + self.cap * self.K

    def length(self, q: int) -> int:
        return 0 if q == 0 else (q - 1) // self.K + 1


def _generator(chain: _Chain, size: int, budget: Budget) -> tuple[list, Any, dict]:
    """``(states, Q, join_cache)``: the ``size`` states (sorted tuples of per-queue codes), the
    generator from the definition (arrivals join by the rule's law over the lengths, cached per
    lengths in ``join_cache``; phases move by ``M``, complete at ``t0``, restart by ``a``)."""
    n, d, lam, cap, K = chain.n, chain.d, chain.lam, chain.cap, chain.K
    a, M, t0, length = chain.a, chain.M, chain.t0, chain.length
    budget.stage(f"enumerating {size:,} states and building the generator")
    states = list(itertools.combinations_with_replacement(range(chain.m), n))
    index = {s: i for i, s in enumerate(states)}
    rows, cols, vals = [], [], []
    join_cache: dict = {}

    def add(i, new, rate):
        if rate > 0.0:
            rows.append(i)
            cols.append(index[tuple(sorted(new))])
            vals.append(rate)

    for i, s in enumerate(states):
        if i % 2048 == 0:
            budget.check(f"building the generator ({i:,} of {size:,} states)")
        lens = tuple(length(q) for q in s)
        jl = join_cache.get(lens)
        if jl is None:
            jl = join_cache[lens] = _join_law(lens, d, chain.replace, chain.policy)
        for pos, q in enumerate(s):
            ell = lens[pos]
            # arrival joins queue `pos`
            r = n * lam * jl[pos]
            if r > 0.0 and ell < cap:
                new = list(s)
                if ell == 0:
                    for ph in range(K):
                        new[pos] = 1 + ph
                        add(i, new, r * a[ph])
                else:
                    new[pos] = q + K
                    add(i, new, r)
            if ell == 0:
                continue
            ph = (q - 1) % K
            base = q - ph
            new = list(s)
            for to in range(K):  # phase moves
                if to != ph and M[ph, to] > 0.0:
                    new[pos] = base + to
                    add(i, new, M[ph, to])
            if t0[ph] > 0.0:  # completion
                if ell == 1:
                    new[pos] = 0
                    add(i, new, t0[ph])
                else:
                    for to in range(K):
                        new[pos] = base - K + to
                        add(i, new, t0[ph] * a[to])
    S = len(states)
    Q = sp.coo_matrix((vals, (rows, cols)), shape=(S, S)).tocsr()
    Q = Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())
    return states, Q, join_cache


def _queue_law(chain: _Chain, states: list, pi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(queue_law, phase_mean, u)`` of one queue under ``pi``: ``P(length = ℓ)``, ``P(length
    ℓ, phase φ)`` and ``P(length >= ℓ)``."""
    S, cap, K = len(states), chain.cap, chain.K
    code_hist = np.zeros((S, chain.m))
    for i, s in enumerate(states):
        for q in s:
            code_hist[i, q] += 1.0
    occ = pi @ code_hist / chain.n  # P(a given queue is in per-queue state q)
    queue_law = np.concatenate([[occ[0]], occ[1:].reshape(cap, K).sum(axis=1)])
    phase_mean = occ[1:].reshape(cap, K)
    u = np.cumsum(queue_law[::-1])[::-1][1:]  # P(length >= ℓ), summed from the tail (no cancellation)
    return queue_law, phase_mean, u


def _joined_law(chain: _Chain, states: list, pi: np.ndarray, join_cache: dict, budget: Budget) -> tuple:
    """``(ud, trunc)``: ``E[P_ℓ]`` = P(the joined queue has length >= ℓ), and the probability
    that some queue is at the cap."""
    ud = np.zeros(chain.cap)
    trunc = 0.0
    budget.stage("the laws of the queue length and of the joined queue")
    for i, s in enumerate(states):
        if i % 2048 == 0:
            budget.check("the laws of the queue length and of the joined queue")
        lens = tuple(chain.length(q) for q in s)
        jl = join_cache[lens]
        for pos in range(chain.n):
            if lens[pos] >= 1:
                ud[: lens[pos]] += pi[i] * jl[pos]
        if max(lens) == chain.cap:
            trunc += pi[i]
    return ud, trunc


def solve_phase(
    n: int,
    d: int,
    lam: float | str,
    alpha: ArrayLike,
    T: ArrayLike,
    *,
    cap: int = 30,
    replace: bool = True,
    policy: str = "jsq-d",
    max_seconds: float | None = None,
    progress: Any = None,
) -> PhaseExact:
    """Exact stationary law of JSQ(d), or another dispatch rule, with ``PH(α, T)`` service
    for tiny ``n`` (docs/model.md §13).

    Parameters
    ----------
    n, d : int
        Servers ``n >= 1`` and choices ``d >= 1`` (``d <= n`` without replacement); ``n^d``
        at most 10^4.
    lam : float
        Load ``0 < λ < 1``.
    alpha, T : array_like
        The phase-type law, mean 1 (:func:`supermarket.system.phase_law.check_ph`).
    cap : int
        Largest queue length kept (``>= 1``).
    replace : bool
        Sampling with replacement (default) or without.
    policy : {"jsq-d", "random", "jsq", "jiq", "jbt"}
        The dispatch rule (:mod:`supermarket.system.policies`); ``d`` and ``replace`` are for ``jsq-d``.
    max_seconds : float, optional
        A wall-clock budget, checked through the enumeration, the build, the solve and the
        post-processing (:class:`supermarket.stationary.profile.BudgetExceeded`, a ``ValueError``, past it).
    progress : callable, optional
        Given a short text at each stage.

    Returns
    -------
    PhaseExact

    Raises
    ------
    TypeError, ValueError
        Bad input, or a state space above :data:`MAX_PHASE_STATES`, before any work.

    Examples
    --------
    M/E2/1 at load 0.5: Pollaczek–Khinchine gives ``0.5 + 0.25·1.5/1 = 0.875``.

    >>> r = solve_phase(1, 1, 0.5, [1.0, 0.0], [[-2.0, 2.0], [0.0, -2.0]], cap=120)
    >>> round(r.mean_queue_length, 10), r.truncation < 1e-20
    (0.875, True)
    """
    n = check_int("n", n, minimum=1, maximum=64)
    d = check_int("d", d, minimum=1, maximum=64)
    policy = rule(policy, "exact-phase").name
    if policy == "jsq-d" and not replace and d > n:
        raise ValueError(f"d: without replacement d must be <= n = {n}, got {d}")
    if policy == "jsq-d" and n**d > 10_000:
        raise ValueError(f"d: n^d = {n}^{d} tuples per state is too many (at most 10^4)")
    lam = check_load(lam)
    a, M, t0 = check_ph(alpha, T)
    cap = check_int("cap", cap, minimum=1, maximum=10_000)
    K = a.size
    m = 1 + cap * K  # per-queue states: 0 idle, 1 + (ℓ−1)K + φ busy
    size = math.comb(m + n - 1, n)
    if size > MAX_PHASE_STATES:
        raise ValueError(f"cap: {size} states for n = {n}, cap = {cap}, K = {K} (at most {MAX_PHASE_STATES})")

    if max_seconds is not None:
        max_seconds = check_positive_float("max_seconds", max_seconds)
    budget = Budget(max_seconds, f"n={n}, d={d}, λ={lam:g}, policy {policy}, cap {cap}", progress)

    chain = _Chain(n, d, lam, replace, policy, a, M, t0, cap)
    states, Q, join_cache = _generator(chain, size, budget)
    S = len(states)
    tot = np.array([sum(chain.length(q) for q in s) for s in states])
    # the exact solver's own π Q = 0 (sparse LU or GMRES + ILU)
    pi, residual, method = stationary_vector(Q, tot, budget=budget)
    queue_law, phase_mean, u = _queue_law(chain, states, pi)
    budget.reached = f"the law of {S:,} states solved"
    ud, trunc = _joined_law(chain, states, pi, join_cache, budget)
    return PhaseExact(
        n=n,
        d=d,
        lam=lam,
        replace=bool(replace),
        cap=cap,
        states=S,
        u=u,
        queue_law=queue_law,
        phase_mean=phase_mean,
        ud=ud,
        mean_queue_length=float(u.sum()),
        truncation=float(trunc),
        residual=residual,
        method=method,
        policy=policy,
    )
