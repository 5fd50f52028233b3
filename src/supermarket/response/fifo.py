"""A FIFO simulation that follows every customer (``engines/fifo.py``, docs/model.md §10), independent of the laws."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..model import Params, as_seed_sequence, check_int, check_positive_float, seed_to_uint64
from ..result import Result, frame
from .laws import ResponseTimes, _qkey, from_tails
from .mixture import DEFAULT_QUANTILES, check_quantiles
from .sources import _pad

__all__ = ["FifoSample", "simulate_fifo"]


@dataclass(frozen=True)
class FifoSample(Result):
    """Customers recorded after the burn-in by :func:`simulate_fifo`, in arrival order.

    ``sojourn``, ``waiting``, ``joined`` (length of the queue joined): one entry per customer, in
    ``batches`` equal batches; ``tails``: time average of ``P_i`` (per batch: ``tails_batches``);
    ``u_mean``: time average of ``u_i``.

    Examples
    --------
    >>> s = simulate_fifo(4, 2, 0.5, customers=2000, seed=1)
    >>> s.sojourn.shape, s.batches
    ((2000,), 32)
    >>> bool((s.sojourn >= s.waiting).all())                   # sojourn = waiting + service
    True
    """

    params: dict
    sojourn: np.ndarray = field(repr=False)
    waiting: np.ndarray = field(repr=False)
    joined: np.ndarray = field(repr=False)
    tails: np.ndarray
    tails_batches: np.ndarray = field(repr=False)
    u_mean: np.ndarray
    measured_time: float
    batches: int

    def _batched(self, x):
        return np.array_split(x, self.batches)

    def empirical(self, quantiles: Any = DEFAULT_QUANTILES) -> dict:
        """Empirical means and quantiles with batch-means standard errors, by ``"sojourn"``/``"waiting"``."""
        qs = check_quantiles(quantiles)
        out = {}
        for kind, x in (("sojourn", self.sojourn), ("waiting", self.waiting)):
            parts = self._batched(x)
            bm = np.array([p.mean() for p in parts])
            entry: dict[str, Any] = {
                "mean": float(x.mean()),
                "mean_stderr": float(bm.std(ddof=1) / math.sqrt(len(parts))),
                "quantiles": {},
            }
            for q in qs:
                bq = np.array([np.quantile(p, q) for p in parts])
                entry["quantiles"][q] = (float(np.quantile(x, q)), float(bq.std(ddof=1) / math.sqrt(len(parts))))
            out[kind] = entry
        return out

    def empirical_cdf(self, t: ArrayLike, kind: str = "sojourn") -> np.ndarray:
        """Fraction of recorded customers with sojourn (or waiting) time ``<= t``."""
        x = np.sort(self.sojourn if kind == "sojourn" else self.waiting)
        return np.searchsorted(x, np.asarray(t, dtype=float), side="right") / x.size

    def predicted(self, quantiles: Any = DEFAULT_QUANTILES) -> ResponseTimes:
        """The Erlang mixture from this run's own ``P_i`` averages (batch-means covariance, delta method)."""
        B = self.tails_batches
        cov = np.cov(B, rowvar=False, ddof=1).reshape(B.shape[1], B.shape[1]) / B.shape[0]
        return from_tails(
            np.minimum.accumulate(np.clip(self.tails, 0, 1)),
            cov=cov,
            quantiles=quantiles,
            source="FIFO simulation, its own time-averaged P_i",
            params=self.params,
        )

    def to_dict(self) -> dict:
        emp = self.empirical()

        def law(e):
            return {
                "mean": e["mean"],
                "quantiles": {_qkey(q): v[0] for q, v in e["quantiles"].items()},
                "stderr": {
                    "mean": e["mean_stderr"],
                    "quantiles": {_qkey(q): v[1] for q, v in e["quantiles"].items()},
                    "kind": "batch means",
                },
            }

        return {
            "params": dict(self.params),
            "customers": int(self.sojourn.size),
            "measured_time": self.measured_time,
            "batches": self.batches,
            "sojourn": law(emp["sojourn"]),
            "waiting": law(emp["waiting"]),
            "tails": self.tails.tolist(),
            "u_mean": self.u_mean.tolist(),
        }

    def to_frame(self) -> Any:
        """Tidy table of the empirical statistics (kind, statistic, value, stderr)."""
        rows = []
        for kind, e in self.empirical().items():
            stats = [("mean", e["mean"], e["mean_stderr"])]
            stats += [(f"p{100 * q:g}", v, s) for q, (v, s) in e["quantiles"].items()]
            rows += [{"kind": kind, "statistic": k, "value": v, "stderr": s} for k, v, s in stats]
        return frame(rows)

    def summary(self) -> str:
        lines = [
            f"FIFO simulation: {self.sojourn.size} customers over {self.measured_time:.6g} time units "
            f"({self.batches} batches)"
        ]
        for kind, e in self.empirical().items():
            qs = ", ".join(f"p{100 * q:g} {v:.6g} ± {s:.2g}" for q, (v, s) in e["quantiles"].items())
            lines.append(f"  {kind:8s} mean {e['mean']:.6g} ± {e['mean_stderr']:.2g}, {qs}")
        return "\n".join(lines)


class _Queues:
    """The FIFO queues the kernel advances: per queue a ring of ``cap`` customers from ``head``
    (``qlen`` of them), the counts ``c_ℓ`` of queues with at least ``ℓ`` customers and the areas
    of ``P_ℓ`` and ``c_ℓ`` over the batch; :meth:`grow` doubles ``cap`` when the kernel asks."""

    def __init__(self, n: int, cap: int = 64) -> None:
        self.n, self.cap = n, cap
        self.ring = np.zeros((n, cap))
        self.head = np.zeros(n, np.int64)
        self.qlen = np.zeros(n, np.int64)
        self.c = np.zeros(cap + 2, np.int64)
        self.c[0] = n
        self.area_P = np.zeros(cap + 2)
        self.area_c = np.zeros(cap + 2)

    def grow(self) -> None:
        cap, new = self.cap, 2 * self.cap
        r2 = np.zeros((self.n, new))
        for q in range(self.n):
            idx = (self.head[q] + np.arange(self.qlen[q])) % cap
            r2[q, : self.qlen[q]] = self.ring[q, idx]
        self.ring, self.cap = r2, new
        self.head[:] = 0
        self.c = np.concatenate([self.c, np.zeros(new - self.c.size + 2, np.int64)])
        self.area_P = np.concatenate([self.area_P, np.zeros(new - self.area_P.size + 2)])
        self.area_c = np.concatenate([self.area_c, np.zeros(new - self.area_c.size + 2)])


def simulate_fifo(
    n: int,
    d: int,
    lam: float | str,
    *,
    customers: int = 200_000,
    burn_in: int | None = None,
    seed: Any = None,
    replace: bool = True,
    batches: int = 32,
) -> FifoSample:
    """Follow every customer of the ``(n, d, λ)`` system with FIFO queues (docs/model.md §10).

    Own exponential(1) service times, departures by the Lindley recursion; for small ``n``.

    Parameters
    ----------
    n, d : int
    lam : float
        Load in (0, 1).
    customers : int
        Customers recorded after the burn-in (>= 2 per batch).
    burn_in : float, optional
        Time before recording (default ``20/(1 − √λ)²``, twenty M/M/1 relaxation times).
    seed : int or numpy.random.SeedSequence, optional
    replace : bool
    batches : int
        Batches for the standard errors (>= 2).

    Returns
    -------
    FifoSample

    Examples
    --------
    >>> s = simulate_fifo(1, 1, 0.5, customers=20_000, seed=1)     # M/M/1: E[S] = 2
    >>> e = s.empirical()["sojourn"]
    >>> abs(e["mean"] - 2.0) < 5 * e["mean_stderr"]
    True
    """
    from ..engines import fifo as _f
    from ..engines.rng import new_state

    p = Params(n, d, lam, replace=replace)
    customers = check_int("customers", customers, minimum=4, maximum=10**9)
    batches = check_int("batches", batches, minimum=2, maximum=customers // 2)
    if burn_in is None:
        burn = 20.0 / (1.0 - math.sqrt(p.lam)) ** 2
    else:
        zero = isinstance(burn_in, numbers.Real) and not isinstance(burn_in, bool) and burn_in == 0
        burn = 0.0 if zero else check_positive_float("burn_in", burn_in)
    ss = as_seed_sequence(seed)
    n, d = p.n, p.d
    qs = _Queues(n)
    cnt = np.arange(n + 1)
    if p.replace:
        tab = (cnt / n) ** d
    else:
        tab = np.array([math.comb(int(k), d) / math.comb(n, d) for k in cnt])
    s = new_state(seed_to_uint64(ss))
    perm = np.arange(n, dtype=np.int64)
    pint = np.array([n, d, int(p.replace)], np.int64)
    rate = n * p.lam
    sf = np.array([0.0, 0.0, burn, rate, 0.0])
    sf[_f.S_NEXT] = -math.log(1.0 - float(np.random.default_rng(ss.spawn(1)[0]).random())) / rate
    si = np.zeros(1, np.int64)
    soj = np.zeros(customers)
    wai = np.zeros(customers)
    jl = np.zeros(customers, np.int64)
    edges = [(customers * b) // batches for b in range(batches + 1)]
    tails_b, u_b, T_b = [], [], []
    for b in range(batches):
        sl = slice(edges[b], edges[b + 1])
        qs.area_P[:] = 0.0
        qs.area_c[:] = 0.0
        sf[_f.S_MEASURED] = 0.0
        si[0] = 0
        while True:
            st = _f.fifo_kernel(
                qs.ring, qs.head, qs.qlen, qs.c, qs.area_P, qs.area_c, tab, s, perm, pint, sf, si,
                soj[sl], wai[sl], jl[sl], 50_000_000,
            )  # fmt: skip
            if st == _f.GROW:
                qs.grow()
            elif st == _f.DONE:
                break
        T = sf[_f.S_MEASURED]
        T_b.append(T)
        tails_b.append(qs.area_P[1:].copy() / T)
        u_b.append(qs.area_c[1:].copy() / (n * T))
        sf[_f.S_TMEAS] = sf[_f.S_NOW]  # later batches measure from where this one stopped
    top = max((int(np.nonzero(tb)[0][-1]) + 1 if np.any(tb) else 0) for tb in tails_b) + 1
    L = max(top, 1)
    TB = np.array([_pad(tb, L) for tb in tails_b])
    UB = np.array([_pad(ub, L) for ub in u_b])
    w = np.array(T_b) / sum(T_b)
    params = {"n": n, "d": d, "load": p.lam, "replace": p.replace, "customers": customers, "burn_in": burn}
    return FifoSample(
        params=params,
        sojourn=soj,
        waiting=wai,
        joined=jl,
        tails=w @ TB,
        tails_batches=TB,
        u_mean=w @ UB,
        measured_time=float(sum(T_b)),
        batches=batches,
    )
