"""Exact stationary laws of the supermarket chain for tiny n (docs/model.md §7): test oracles.

Three independent constructions, each a sparse linear system ``π (P − I) = 0, Σπ = 1``
solved with SciPy, on a space truncated at queue length ``M`` (an arrival that would make
a queue longer than ``M`` is dropped; choose ``M`` so that ``P(max >= M)`` is negligible,
:attr:`ExactLaw.tail` reports it):

- :func:`profile_law`: the counts chain of docs/model.md §2 (joined length ``ℓ`` with
  probability ``P_ℓ − P_{ℓ+1}``, with ``P_i = u_i^d`` or ``C(c_i,d)/C(n,d)``);
- :func:`queue_law`: the per-queue chain of docs/model.md §1 on all vectors ``x ∈ {0..M}^n``,
  enumerating every d-tuple (``n^d`` with replacement, every ordered d-tuple of distinct
  servers without) and joining the *first* minimal entry: the definition itself, nothing
  borrowed from the profile formulas;
- :func:`jsq_law`: join-the-shortest-queue (a shortest queue, whichever), on sorted
  vectors: what sampling without replacement with ``d = n`` must reduce to.

The discrete chain and the continuous-time chain (uniformized) have the same stationary
law, so one solution serves both time modes.

Measurements returned (as in ``SimulationResult``): ``u`` (``E[u_i]``, i = 1..M), ``P``
(``E[P_i]``), ``max_dist`` (law of the maximum), ``mean_queue_length``, and
``good(lo, hi, k)`` (probability of the good set for given clause-(b) bounds).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla


@dataclass(frozen=True)
class ExactLaw:
    n: int
    states: np.ndarray  # states x levels: counts c_1..c_M of each state
    prob: np.ndarray  # stationary probability of each state
    d: int
    replace: bool

    @property
    def u(self) -> np.ndarray:
        return self.prob @ self.states / self.n

    @property
    def P(self) -> np.ndarray:
        pm = np.array([[_p_all(c, self.n, self.d, self.replace) for c in row] for row in self.states])
        return self.prob @ pm

    @property
    def max_dist(self) -> dict:
        top = (self.states > 0).sum(axis=1)
        out: dict = {}
        for m, p in zip(top, self.prob):
            out[int(m)] = out.get(int(m), 0.0) + float(p)
        return out

    @property
    def mean_queue_length(self) -> float:
        return float(self.u.sum())

    @property
    def tail(self) -> float:
        """Probability that some queue has the truncation length M."""
        return float(self.prob[self.states[:, -1] > 0].sum())

    def good(self, lo, hi, k) -> float:
        """Stationary probability of N^ε: c_{k+1} = 0 and lo_j <= n − c_j <= hi_j (docs/model.md §5)."""
        ok = np.ones(len(self.prob), bool)
        if k < self.states.shape[1]:
            ok &= self.states[:, k] == 0
        for j in range(k):
            shorter = self.n - self.states[:, j]
            ok &= (shorter >= lo[j]) & (shorter <= hi[j])
        return float(self.prob[ok].sum())


def _p_all(c, n, d, replace) -> float:
    if replace:
        return (c / n) ** d
    return math.comb(int(c), d) / math.comb(n, d)


def _solve(index, rows, cols, vals, size) -> np.ndarray:
    P = sp.csr_matrix((vals, (rows, cols)), shape=(size, size))
    A = (P.T - sp.identity(size, format="csr")).tolil()
    A[0, :] = np.ones(size)
    b = np.zeros(size)
    b[0] = 1.0
    pi = spla.spsolve(A.tocsc(), b)
    pi = np.maximum(pi, 0.0)
    return pi / pi.sum()


def _sorted_states(n, M):
    """Non-increasing queue-length vectors (as tuples), i.e. multisets of n lengths in 0..M."""
    return [tuple(sorted(s, reverse=True)) for s in itertools.combinations_with_replacement(range(M + 1), n)]


def _counts(x, M):
    return [sum(1 for v in x if v >= i) for i in range(1, M + 1)]


def profile_law(n, d, lam, *, replace=True, M=12) -> ExactLaw:
    """Stationary law of the profile chain (docs/model.md §2), truncated at length ``M``."""
    if not replace and d > n:
        raise ValueError("d must be <= n without replacement")
    states = _sorted_states(n, M)
    counts = [_counts(x, M) for x in states]
    index = {tuple(c): i for i, c in enumerate(counts)}
    pa = lam / (1 + lam)
    pd = 1 / (1 + lam)
    rows, cols, vals = [], [], []
    for i, c in enumerate(counts):
        ext = [n] + list(c) + [0]  # ext[l] = c_l, with c_0 = n, c_{M+1} = 0
        P = [_p_all(ext[l], n, d, replace) for l in range(M + 2)]
        stay = 0.0
        for ell in range(M + 1):  # arrival joins a queue of length ell
            pr = pa * (P[ell] - P[ell + 1])
            if pr <= 0:
                continue
            if ell == M:
                stay += pr
                continue
            c2 = list(c)
            c2[ell] += 1
            rows.append(i)
            cols.append(index[tuple(c2)])
            vals.append(pr)
        stay += pd * (n - ext[1]) / n  # departure from an empty queue
        for ell in range(1, M + 1):
            pr = pd * (ext[ell] - ext[ell + 1]) / n
            if pr <= 0:
                continue
            c2 = list(c)
            c2[ell - 1] -= 1
            rows.append(i)
            cols.append(index[tuple(c2)])
            vals.append(pr)
        rows.append(i)
        cols.append(i)
        vals.append(stay)
    prob = _solve(index, rows, cols, vals, len(counts))
    return ExactLaw(n=n, states=np.array(counts, dtype=float), prob=prob, d=d, replace=replace)


def queue_law(n, d, lam, *, replace=True, M=10) -> ExactLaw:
    """Stationary law of the per-queue chain of docs/model.md §1 (every d-tuple enumerated, the
    customer joins the first minimal entry), reported as a law of the counts."""
    if not replace and d > n:
        raise ValueError("d must be <= n without replacement")
    vecs = list(itertools.product(range(M + 1), repeat=n))
    index = {x: i for i, x in enumerate(vecs)}
    tuples = list(itertools.product(range(n), repeat=d)) if replace else list(itertools.permutations(range(n), d))
    wt = 1.0 / len(tuples)
    pa = lam / (1 + lam)
    pd = 1 / (1 + lam)
    rows, cols, vals = [], [], []
    for i, x in enumerate(vecs):
        stay = 0.0
        for tup in tuples:
            j = tup[0]
            for q in tup[1:]:
                if x[q] < x[j]:  # strict: the first minimal entry wins
                    j = q
            if x[j] == M:
                stay += pa * wt
                continue
            y = list(x)
            y[j] += 1
            rows.append(i)
            cols.append(index[tuple(y)])
            vals.append(pa * wt)
        for j in range(n):
            if x[j] == 0:
                stay += pd / n
                continue
            y = list(x)
            y[j] -= 1
            rows.append(i)
            cols.append(index[tuple(y)])
            vals.append(pd / n)
        rows.append(i)
        cols.append(i)
        vals.append(stay)
    prob = _solve(index, rows, cols, vals, len(vecs))
    counts = np.array([_counts(x, M) for x in vecs], dtype=float)
    return ExactLaw(n=n, states=counts, prob=prob, d=d, replace=replace)


def jsq_law(n, lam, *, M=12) -> ExactLaw:
    """Join the shortest queue (docs/model.md §1 with d = n, no replacement), on sorted vectors."""
    states = _sorted_states(n, M)
    index = {x: i for i, x in enumerate(states)}
    pa = lam / (1 + lam)
    pd = 1 / (1 + lam)
    rows, cols, vals = [], [], []
    for i, x in enumerate(states):
        stay = 0.0
        y = list(x)
        if y[-1] == M:  # the shortest queue is full: the arrival is dropped
            stay += pa
        else:
            y[-1] += 1
            rows.append(i)
            cols.append(index[tuple(sorted(y, reverse=True))])
            vals.append(pa)
        for j in range(n):
            if x[j] == 0:
                stay += pd / n
                continue
            y = list(x)
            y[j] -= 1
            rows.append(i)
            cols.append(index[tuple(sorted(y, reverse=True))])
            vals.append(pd / n)
        rows.append(i)
        cols.append(i)
        vals.append(stay)
    prob = _solve(index, rows, cols, vals, len(states))
    counts = np.array([_counts(x, M) for x in states], dtype=float)
    return ExactLaw(n=n, states=counts, prob=prob, d=n, replace=False)
