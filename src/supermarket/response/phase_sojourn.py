"""Phase-type sojourn laws of FIFO customers (docs/model.md §13.1, §13.2): :class:`PhaseSojourn`,
a law ``PH(β, Q)`` with its tail, quantiles and per-state tails, and :func:`phase_chain`, the
chain of a customer who finds ``r − 1`` customers ahead of it at one server.

A customer's sojourn at a FIFO server whose customer in service is in phase ``φ`` with
``r − 1`` more services to do after it (its own included) is the absorption time of the chain on
``(r, φ)`` with generator ``T`` within a level and ``t0 α`` from level ``r`` to ``r − 1``
(``t0 = −T1``), started in ``(r, φ)``.  At a server of speed ``s`` every rate is multiplied by
``s``.  The mean-field sizing laws (:mod:`supermarket.design.sojourn`) and the count engines'
joined-length laws (:mod:`supermarket.simulation.joined`) are such laws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.optimize as so
import scipy.sparse as sp
import scipy.stats as st

__all__ = ["PhaseSojourn", "phase_chain", "classes_chain"]

_CACHE_MAX = 1 << 22
"""Most numbers (powers x states) :meth:`PhaseSojourn.state_tail` keeps (32 MiB); beyond, it
sums the powers as they come."""


@dataclass(frozen=True, eq=False)
class PhaseSojourn:
    """A phase-type sojourn law ``PH(β, Q)`` (``Q`` sparse) with its tail and quantiles.

    ``β`` may sum to less than 1: the rest is an atom at 0 (a waiting time's ``P(W = 0)``), or
    the fixed point's truncation (arrivals at the top level, below ``1e-14``).

    Examples
    --------
    >>> s = PhaseSojourn(np.array([1.0]), sp.csr_matrix([[-0.5]]))   # exponential of rate 1/2
    >>> round(s.tail(2.0), 12) == round(float(np.exp(-1.0)), 12), round(s.mean, 12)
    (True, 2.0)
    >>> round(s.quantile(0.99), 9) == round(2 * float(np.log(100)), 9)
    True
    """

    beta: np.ndarray
    Q: Any

    @property
    def rate(self) -> float:
        """The uniformization rate ``Λ = max_i −Q_ii``."""
        return float(-self.Q.diagonal().min())

    @property
    def mean(self) -> float:
        """``E[S] = β(−Q)^{-1}1``."""
        return float(self.beta @ self.state_mean())

    def state_mean(self) -> np.ndarray:
        """``(−Q)^{-1}1``: the mean absorption time from each state.

        Returns
        -------
        numpy.ndarray
        """
        from scipy.sparse.linalg import spsolve

        return np.atleast_1d(spsolve(sp.csc_matrix(-self.Q), np.ones(self.Q.shape[0])))

    def _h(self, m_max: int) -> np.ndarray:
        """``h_m = β P^m 1`` for ``m = 0..m_max``, ``P = I + Q/Λ`` (sub-stochastic)."""
        cache = getattr(self, "_hcache", None)
        if cache is not None and cache.size > m_max:
            return cache
        lam = self.rate
        P = (sp.identity(self.Q.shape[0], format="csr") + self.Q / lam).tocsr()
        v = np.ones(self.Q.shape[0])
        out = np.empty(m_max + 1)
        for m in range(m_max + 1):
            out[m] = self.beta @ v
            v = P @ v
        object.__setattr__(self, "_hcache", out)
        return out

    def _powers(self, m_max: int) -> np.ndarray:
        """``P^m 1`` for ``m = 0..m_max`` (rows), cached and grown by doubling."""
        cache = getattr(self, "_vcache", None)
        if cache is not None and cache.shape[0] > m_max:
            return cache
        size = max(m_max + 1, 2 * (0 if cache is None else cache.shape[0]))
        P = (sp.identity(self.Q.shape[0], format="csr") + self.Q / self.rate).tocsr()
        out = np.empty((size, self.Q.shape[0]))
        out[0] = 1.0
        for m in range(1, size):
            out[m] = P @ out[m - 1]
        object.__setattr__(self, "_vcache", out)
        return out

    def tail(self, t: float) -> float:
        """``P(S > t) = Σ_m e^{−Λt} (Λt)^m/m! · β P^m 1`` (terms past the Poisson
        ``1 − 1e-16`` quantile dropped: an error below 1e-16)."""
        if t <= 0:
            return float(self.beta.sum())
        mu = self.rate * float(t)
        m_max = int(st.poisson.isf(1e-16, mu)) + 1
        h = self._h(m_max)
        w = st.poisson.pmf(np.arange(m_max + 1), mu)
        return float(np.clip(w @ h[: m_max + 1], 0.0, 1.0))

    def state_tail(self, t: float) -> np.ndarray:
        """``e^{Qt} 1``: the probability from each state of absorbing after ``t`` (the tail
        ``P(S > t | start)``), by the uniformization of :meth:`tail`.

        Returns
        -------
        numpy.ndarray
        """
        if t <= 0:
            return np.ones(self.Q.shape[0])
        mu = self.rate * float(t)
        m_max = int(st.poisson.isf(1e-16, mu)) + 1
        w = st.poisson.pmf(np.arange(m_max + 1), mu)
        if (m_max + 1) * self.Q.shape[0] <= _CACHE_MAX:
            return np.clip(w @ self._powers(m_max)[: m_max + 1], 0.0, 1.0)
        P = (sp.identity(self.Q.shape[0], format="csr") + self.Q / self.rate).tocsr()
        v = np.ones(self.Q.shape[0])  # too many powers to keep: summed as they come (memory O(states))
        out = w[0] * v
        for m in range(1, m_max + 1):
            v = P @ v
            out += w[m] * v
        return np.clip(out, 0.0, 1.0)

    def state_density(self, t: float) -> np.ndarray:
        """``−d/dt e^{Qt} 1 = −Q e^{Qt} 1``: the density of the absorption time at ``t`` from
        each state.

        Returns
        -------
        numpy.ndarray
        """
        return -(self.Q @ self.state_tail(t))

    def quantile(self, q: float) -> float:
        """The ``t`` with ``P(S > t) = 1 − q`` (bracketing, then Brent's method); 0 when an atom
        at 0 holds at least ``q`` (``β`` sums to ``1 − q`` or less)."""
        target = 1.0 - q
        if float(self.beta.sum()) <= target:
            return 0.0
        hi = max(1.0, self.mean)
        while self.tail(hi) > target:
            hi *= 2.0
        lo = 0.0
        return float(so.brentq(lambda t: self.tail(t) - target, lo, hi, xtol=1e-12, rtol=1e-12))


def phase_chain(beta_levels: np.ndarray, alpha: np.ndarray, T: np.ndarray) -> PhaseSojourn:
    """``PH(β, Q)`` on ``(r, φ)``, ``r = 1..R`` (``beta_levels`` of shape (R, K): row ``r − 1``
    the probability of starting with ``r`` services to do, the current one in phase ``φ``).

    Examples
    --------
    >>> s = phase_chain(np.array([[0.0], [1.0]]), np.array([1.0]), np.array([[-1.0]]))  # Erlang(2, 1)
    >>> round(s.mean, 12), round(s.tail(1.0), 12) == round(2 * float(np.exp(-1.0)), 12)
    (2.0, True)
    """
    R = beta_levels.shape[0]
    t0 = -T.sum(axis=1)
    diag = sp.kron(sp.identity(R), sp.csr_matrix(T))
    down = sp.kron(sp.eye(R, k=-1), sp.csr_matrix(np.outer(t0, alpha)))  # from r to r − 1
    return PhaseSojourn(beta_levels.ravel(), (diag + down).tocsr())


def classes_chain(beta: np.ndarray, alpha: np.ndarray, T: np.ndarray, speeds: np.ndarray) -> PhaseSojourn:
    """``PH(β, Q)`` on ``(k, r, φ)``: class ``k``'s block is :func:`phase_chain`'s generator times
    its speed ``s_k`` (``beta`` of shape (classes, R, K)).

    Examples
    --------
    >>> s = classes_chain(np.array([[[0.5]], [[0.5]]]), np.ones(1), -np.eye(1), np.array([2.0, 1.0]))
    >>> round(s.mean, 12)                     # Exp(2) or Exp(1), half and half
    0.75
    """
    R, K = beta.shape[1:]
    base = phase_chain(np.zeros((R, K)), np.asarray(alpha, float), np.asarray(T, float)).Q
    Q = sp.block_diag([float(s) * base for s in speeds], format="csr")
    return PhaseSojourn(np.asarray(beta, float).ravel(), Q)
