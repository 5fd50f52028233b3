"""The exact continuous-time profile chain at a regime's parameters (docs/model.md §1–2, §8),
engine :mod:`supermarket.engines.fluct`."""

from __future__ import annotations

import time as _time
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import gammaln

from .. import parallel
from ..engines.rng import state_from_seed_sequence
from ..model import check_int, check_positive_float, check_positive_int, spawn_seeds
from .moments import _grid_fields, _moments_from_blocks, _with_adequacy
from .regimes import LEVEL_CAPACITY, RegimeParams, _nonneg
from .runs import EVENTS_PER_SECOND, _check_grid, _default_burn_in, _run_jobs, _ScaledRun, _workers, check_work

__all__ = ["FluctuationSim", "simulate_fluctuations", "TABLE_MAX_N", "CHUNK_EVENTS"]

TABLE_MAX_N = 1 << 23  # up to this n, log P is tabulated (8 MiB per 10^6 servers); above, computed
#: Events per kernel call (Ctrl-C is honoured between calls; the numbers do not depend on it).
CHUNK_EVENTS = 1 << 21


@dataclass(frozen=True, kw_only=True)
class FluctuationSim(_ScaledRun):
    """The exact chain's scaled process after burn-in (docs/model.md §1–2, §8); ``grid``:
    ``(replications, G, 2)``.

    Examples
    --------
    >>> from supermarket.fluctuations import regime_a
    >>> p = regime_a(400, 1.0, d=2, warn=False)
    >>> s = simulate_fluctuations(p, time=20.0, burn_in=2.0, grid_dt=0.5, max_lag=2.0, workers=1)
    >>> list(s.to_frame()["moment"])
    ['mean_z1', 'mean_z2', 'var_z1', 'var_z2', 'cov_z1z2']
    """

    params: RegimeParams
    replications: int
    batches: int
    events: int

    def _label(self) -> str:
        return f"chain, regime ({self.params.regime}) n={self.params.n}"

    def _names(self) -> tuple[str, str]:
        return ("Z1", "Z2") if self.params.regime == "a" else ("Q", "Y")

    def _header(self) -> str:
        return (
            f"{self.replications} × {self.time:g} time units after burn-in {self.burn_in:g}, "
            f"{self.events:.3g} events in {self.seconds:.2f} s"
        )

    def to_dict(self) -> dict:
        return {
            "time": self.time,
            "burn_in": self.burn_in,
            "replications": self.replications,
            "batches_per_replication": self.batches,
            "events": self.events,
            "seconds": self.seconds,
            "events_per_second": self.events / max(self.seconds, 1e-12),
            **self.moments.to_dict(),
        }


def _logp_table(n: int, d: int, replace: bool) -> np.ndarray:
    """``log P`` for a level holding ``c = 0..n`` queues (docs/model.md §2)."""
    c = np.arange(n + 1, dtype=float)
    with np.errstate(divide="ignore"):
        if replace:
            out = d * np.log(c / n)
        else:
            out = np.full(n + 1, -np.inf)
            ok = c >= d
            out[ok] = gammaln(c[ok] + 1) - gammaln(c[ok] - d + 1) - gammaln(n + 1) + gammaln(n - d + 1)
    out[0] = -np.inf
    return out


def _chain_task(args):
    """One replication of the chain."""
    from ..engines.fluct import DONE, OVERFLOW, fluct_ctmc

    (n, lam, logp, start, m0, m1, burn_in, time, batches, grid_dt, ss, G, d, replace, lgn) = args
    counts = start.copy()
    clock = np.zeros(3)
    sums = np.zeros((batches, 5))
    grid = np.zeros((G, 2))
    state = state_from_seed_sequence(ss)
    run = (m0, m1, burn_in, time, batches, grid_dt)
    while True:
        parallel.check_stop()
        st = fluct_ctmc(n, lam, logp, counts, *run, state, sums, grid, d, replace, lgn, clock, CHUNK_EVENTS)
        if st in (DONE, OVERFLOW):
            return sums, grid, int(clock[2]), st == OVERFLOW


def simulate_fluctuations(
    p: RegimeParams,
    *,
    time: float = 200.0,
    burn_in: float | None = None,
    replications: int = 1,
    seed: Any = 0,
    workers: int | None = None,
    grid_dt: float = 0.05,
    batches: int = 10,
    max_lag: float = 10.0,
    client: Any = None,
    progress: Any = None,
) -> FluctuationSim:
    """The continuous-time profile chain at ``p`` from the rounded centre ``n x^n``: moments of
    ``(z1, z2)`` with checked batch-means errors (docs/model.md §1–2, §8; docs/fluctuations.md).

    Parameters
    ----------
    p : RegimeParams
    time : float, default 200.0
        Measured time units per replication, after ``burn_in``.
    burn_in : float, optional
        Default ``max(20, time/10)``, and at least ``5/ζ²`` in (c).
    replications : int, default 1
    seed : int or numpy.random.SeedSequence, default 0
        Replication ``r``: child ``r`` (results do not depend on ``workers``).
    grid_dt : float, default 0.05
        Spacing of the recorded grid.
    batches : int, default 10
        Batches per replication (at least 2).
    max_lag : float, default 10.0
        Largest autocorrelation lag (time units).
    workers, client, progress
        Threads (default: all cores) or a Dask client; a callback as replications finish.

    Returns
    -------
    FluctuationSim

    Examples
    --------
    >>> import math
    >>> from supermarket.fluctuations import regime_c
    >>> p = regime_c(100, 1.0, warn=False)
    >>> s = simulate_fluctuations(p, time=20.0, burn_in=5.0, grid_dt=0.5, max_lag=2.0, workers=1)
    >>> s.grid.shape, bool(s.grid[:, :, 0].max() <= math.sqrt(100) * (1 - p.c_n))
    ((1, 40, 2), True)
    """
    if not isinstance(p, RegimeParams):
        raise TypeError("p must be a RegimeParams (from regime_a, regime_b or regime_c)")
    time = check_positive_float("time", time)
    burn_in = (
        _default_burn_in(p.regime, p.limit.get("zeta"), max(20.0, time / 10))
        if burn_in is None
        else _nonneg("burn_in", burn_in)
    )
    R = check_positive_int("replications", replications)
    batches = check_int("batches", batches, minimum=2)
    grid_dt = check_positive_float("grid_dt", grid_dt)
    max_lag = check_positive_float("max_lag", max_lag)
    Gf = time / grid_dt
    _check_grid(
        R,
        Gf,
        f"time = {time:g} with grid_dt = {grid_dt:g} and {R} replication(s)",
        "lower time (--time) or raise grid_dt (--grid-dt)",
    )
    G = int(Gf)
    if G < 2:
        raise ValueError(f"time must be at least 2·grid_dt = {2 * grid_dt:g}; got {time!r}")
    n, d = p.n, p.d
    # E c_1 = nλ exactly (docs/model.md §7): events per time unit ≈ nλ + nλ
    events_est = float(R) * (burn_in + time) * 2.0 * n * p.lam
    check_work(
        events_est,
        EVENTS_PER_SECOND,
        f"the chain at n = {n:.6g} for {R} × (burn-in {burn_in:g} + time {time:g}) time units "
        f"needs events (≈ 2nλ per time unit)",
        "lower n, time (--time) or burn_in (--burn-in-time)",
        _workers(workers, R),
    )
    if n <= TABLE_MAX_N:
        logp, lgn = _logp_table(n, d, p.replace), 0.0
    else:
        logp = np.empty(0)
        lgn = float(gammaln(n + 1) - gammaln(d + 1) - gammaln(n - d + 1)) if not p.replace else 0.0
    start = np.zeros(LEVEL_CAPACITY, dtype=np.int64)
    start[0] = n
    x = np.asarray(p.x)
    start[1 : 1 + x.size] = np.minimum(np.round(n * x), n).astype(np.int64)
    tasks = [
        (n, p.lam, logp, start, p.m[0], p.m[1], burn_in, time, batches, grid_dt, ss, G, d, p.replace, lgn)
        for ss in spawn_seeds(seed, R)
    ]
    t0 = _time.perf_counter()
    out = _run_jobs(_chain_task, tasks, workers, client, progress)
    secs = _time.perf_counter() - t0
    sums = np.stack([o[0] for o in out])
    grid = np.stack([o[1] for o in out])
    if any(o[3] for o in out):
        raise RuntimeError(
            f"a queue grew past {LEVEL_CAPACITY - 1} customers; the parameters are far from the near-equilibrium regime"
        )
    avg = sums.reshape(R * batches, 5) / (time / batches)
    mom = _with_adequacy(_moments_from_blocks(avg), grid, grid_dt, time / batches, batches)
    run = dict(time=time, burn_in=burn_in, replications=R, batches=batches, events=sum(o[2] for o in out), seconds=secs)
    return FluctuationSim(params=p, **run, moments=mom, **_grid_fields(grid, G, grid_dt, max_lag))
