"""The error bars of the count engines with server classes (docs/model.md §15.3): blocking
per replication of the time-batch means, pooled over replications; the capacity-balance
control variate ``Σ_k f_k s_k E[u_{k,1}] = λ s̄`` (every customer who arrives leaves); and the
delta-method batch series of a ratio (the sojourn times of Little's law).
"""

from __future__ import annotations

import math

import numpy as np

from .. import stats as _st
from ..stats import ErrorEstimate

NO_SPREAD = "no spread: every batch gave the same value, which is no error bar"


def _constant(x: np.ndarray) -> bool:
    return x.size >= 2 and float(np.ptp(x)) <= 1e-12 * max(1.0, abs(float(x.mean())))


def _pooled(series: list[np.ndarray], *, identity: bool = False) -> ErrorEstimate:
    """Blocking per replication, pooled: the mean of the means, ``√(Σ s_r²)/R``.  A batch series
    with no spread is exact (error 0, ``"identity"``) when ``identity`` says that the control
    explains all of its variation; otherwise its error is unknown (:data:`NO_SPREAD`: every
    server busy throughout at load >= 1, a level no queue reached)."""
    ests = []
    for x in series:
        if _constant(x) and identity:
            ests.append(ErrorEstimate(float(x.mean()), 0.0, math.inf, math.inf, 0.0, True, "identity", x.size, 1))
        elif _constant(x):
            m = float(x.mean())
            ests.append(ErrorEstimate(m, math.nan, 0.0, 0.0, math.nan, False, "none", x.size, 1, NO_SPREAD))
        else:
            ests.append(_st.blocking(x))
    if len(ests) == 1:
        return ests[0]
    R = len(ests)
    mean = float(np.mean([e.mean for e in ests]))
    se = math.sqrt(sum(e.stderr**2 for e in ests)) / R
    rel = all(e.reliable for e in ests)
    notes = sorted({e.note for e in ests if e.note})
    return ErrorEstimate(
        mean,
        se,
        float(sum(e.dof for e in ests)),
        float(sum(e.n_eff for e in ests)),
        float(np.mean([e.tau_int for e in ests])),
        rel,
        "blocking (pooled over replications)",
        int(sum(e.blocks for e in ests)),
        ests[0].block_size,
        "; ".join(notes),
    )


class _Estimator:
    """Estimates from per-replication batch series, with the capacity-balance control variate."""

    def __init__(self, X: list[np.ndarray], mu: float, use_cv: bool):
        self.X = [x - mu for x in X]  # mean 0 under the identity
        self.use_cv = use_cv
        self.reduction: dict[str, float] = {}

    def __call__(self, Y: list[np.ndarray], key: str | None = None) -> ErrorEstimate:
        plain = _pooled(Y)
        if not self.use_cv or all(_constant(y) for y in Y):  # no spread at all: the control cannot make one
            return plain
        x = np.concatenate(self.X)
        y = np.concatenate(Y)
        vx = float(np.dot(x - x.mean(), x - x.mean()))
        beta = float(np.dot(x - x.mean(), y - y.mean())) / vx if vx > 0 else 0.0
        e = _pooled([yy - beta * xx for yy, xx in zip(Y, self.X)], identity=True)
        if key is not None:
            self.reduction[key] = (plain.stderr / e.stderr) ** 2 if e.stderr > 0 else math.inf
        return e


def _ratio_series(A: list[np.ndarray], B: list[np.ndarray]) -> tuple[float, list[np.ndarray]]:
    """``ΣA/ΣB`` and its delta-method batch series ``r + (a − r b)/b̄`` (the mean of each is
    ``r`` to first order)."""
    r = float(sum(a.sum() for a in A) / sum(b.sum() for b in B))
    bbar = float(np.mean(np.concatenate(B)))
    return r, [r + (a - r * b) / bbar for a, b in zip(A, B)]
