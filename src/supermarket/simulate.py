"""Exact simulation of the (n, d, λ)-supermarket process (docs/model.md §1, §2, §5, §7).

One call, :func:`simulate`, runs the chain with one of three engines (all exact in law)
and returns a :class:`SimulationResult`: the time-averaged profile ``E[u_i]`` with
standard errors, the time average of ``P_i`` (``u_i^d`` with replacement) for the identity
``E[u_i] = λ E[u_{i−1}^d]`` (docs/model.md §3, derived), the distribution of the maximum queue
length, the fraction of time in the good set ``N^ε`` (docs/model.md §5), the mean queue length
and sojourn time (Little), and optionally a trajectory.

Engines (``engine=``):

- ``"profile"``: the counts chain of docs/model.md §2; cost per event independent of ``n`` and
  ``d``; ``n`` up to 10^12 and beyond;
- ``"queues"``: per-queue lengths exactly as paper 000 defines the chain (d-tuple, ties to
  the first minimal entry); ``O(d)`` per arrival, 4 bytes per server; the reference;
- ``"buckets"``: per-queue identities sorted by length, ``O(1)`` per event.

Standard errors are batch means: each replication's measured horizon is cut into
``BATCHES`` equal batches, and all batches of all replications are pooled.
Replication ``r`` uses ``spawn_seeds(seed, R)[r]``, so results do not depend on ``workers``.

Low-level drivers, for code that needs its own loop around a kernel:
:class:`Chain` (allocates the arrays of one replication and advances it with
:meth:`Chain.advance`), and the kernels ``engines.profile.profile_kernel``,
``engines.queues.queues_kernel``, ``engines.buckets.buckets_kernel``.
"""

from __future__ import annotations

import math
import os
import threading
import time as _time
import warnings
from concurrent.futures import ThreadPoolExecutor, wait, FIRST_EXCEPTION
from dataclasses import dataclass, field

import numpy as np

from .engines import profile as _pk
from .engines.buckets import buckets_kernel, lengths_by_queue
from .engines.profile import flush, p_table, profile_kernel, reset_measures
from .engines.queues import bitset_words, queues_kernel
from .engines.rng import new_state
from .model import (
    Params, check_fraction, check_int, check_positive_float, check_positive_int,
    seed_to_uint64, spawn_seeds,
)
from .states import counts_from_lengths, lengths_from_counts, parse_start, start_counts
from . import theory as _th

__all__ = ["simulate", "SimulationResult", "Trajectory", "Chain", "ENGINES", "TIME_MODES", "BATCHES",
           "DEFAULT_STEPS"]

ENGINES = ("profile", "queues", "buckets")
TIME_MODES = ("discrete", "continuous")
BATCHES = 32
CHUNK_EVENTS = 10_000_000
DEFAULT_STEPS = 5 * 10**7
PROGRESS_AFTER_S = 2.0
_PER_QUEUE_MAX_N = 2**31 - 1


# =========================================================================== results
@dataclass(frozen=True)
class Trajectory:
    """A recorded trajectory: ``t`` (steps in discrete time, time units in continuous time,
    counted from the end of burn-in), ``u`` (records × levels: ``u_1, u_2, …``), ``max``
    (maximum queue length) and ``total`` (customers in the system)."""

    t: np.ndarray
    u: np.ndarray
    max: np.ndarray
    total: np.ndarray

    def __getitem__(self, key):
        if key not in ("t", "u", "max", "total"):
            raise KeyError(key)
        return getattr(self, key)

    def keys(self):
        return ("t", "u", "max", "total")

    def __len__(self):
        return len(self.t)

    def to_dict(self) -> dict:
        return {"t": self.t.tolist(), "u": self.u.tolist(), "max": self.max.tolist(),
                "total": self.total.tolist()}


@dataclass(frozen=True)
class SimulationResult:
    """What :func:`simulate` measured.  Arrays are indexed from level 1 (``u_mean[0]`` is
    ``E[u_1]``) up to one past the highest level occupied during the measurement."""

    params: Params
    engine: str
    time_mode: str
    steps: int  # events after burn-in, all replications together
    burn_in: int  # events of burn-in, all replications together
    sim_time: float  # measured time (continuous-time units), all replications together
    u_mean: np.ndarray
    u_stderr: np.ndarray
    ud_mean: np.ndarray  # time average of P_i (u_i^d with replacement)
    ud_stderr: np.ndarray
    max_queue_dist: dict  # length -> fraction of time
    good_set_fraction: float | None
    good_set_fraction_stderr: float | None
    k: int | None
    eps: float
    mean_queue_length: float
    mean_queue_length_stderr: float
    mean_sojourn_time: float
    mean_sojourn_time_stderr: float
    events_per_second: float
    wall_time: float
    partial: bool
    replications: int
    batches: int
    final_counts: np.ndarray  # c_1, c_2, … at the end (replication 0)
    trajectory: Trajectory | None = None
    per_replication: tuple = field(default=(), repr=False)
    final_lengths: np.ndarray | None = field(default=None, repr=False)  # per-queue engines, replication 0

    # ------------------------------------------------------------------ output
    def fixed_point(self) -> np.ndarray | None:
        """Mean-field π(i) on the levels of ``u_mean`` (None when λ >= 1)."""
        if self.params.lam >= 1:
            return None
        return _th.fixed_point(self.params.d, self.params.lam, len(self.u_mean))

    def to_dict(self, *, per_replication: bool = True) -> dict:
        p = self.params
        out = {
            "params": p.to_dict(),
            "engine": self.engine,
            "time_mode": self.time_mode,
            "steps": self.steps,
            "burn_in": self.burn_in,
            "sim_time": self.sim_time,
            "u_mean": self.u_mean.tolist(),
            "u_stderr": self.u_stderr.tolist(),
            "ud_mean": self.ud_mean.tolist(),
            "ud_stderr": self.ud_stderr.tolist(),
            "max_queue_dist": {str(k): v for k, v in self.max_queue_dist.items()},
            "good_set_fraction": self.good_set_fraction,
            "good_set_fraction_stderr": self.good_set_fraction_stderr,
            "k": self.k,
            "eps": self.eps,
            "mean_queue_length": self.mean_queue_length,
            "mean_queue_length_stderr": self.mean_queue_length_stderr,
            "mean_sojourn_time": self.mean_sojourn_time,
            "mean_sojourn_time_stderr": self.mean_sojourn_time_stderr,
            "events_per_second": self.events_per_second,
            "wall_time": self.wall_time,
            "partial": self.partial,
            "replications": self.replications,
            "batches": self.batches,
            "final_counts": self.final_counts.tolist(),
        }
        fp = self.fixed_point()
        out["fixed_point"] = None if fp is None else fp.tolist()
        if self.trajectory is not None:
            out["trajectory"] = self.trajectory.to_dict()
        if per_replication and self.per_replication:
            out["per_replication"] = [r.to_dict(per_replication=False) for r in self.per_replication]
        return out

    def plot(self, path=None):
        """Simulated profile with error bars against π and the linearised prediction
        (derived); maximum-queue distribution against ``k_{λ,d}``.  Returns the figure;
        saves it when ``path`` is given."""
        import matplotlib
        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        p = self.params
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        lv = np.arange(1, len(self.u_mean) + 1)
        ax1.errorbar(lv, 1 - self.u_mean, yerr=4.5 * self.u_stderr, fmt="o", label="simulated 1 − E[u_i] (±4.5 s.e.)")
        fp = self.fixed_point()
        if fp is not None:
            ax1.plot(lv, 1 - fp, "s--", mfc="none", label="mean field 1 − π(i)")
        if self.k is not None:
            q = _th.linearised_q(p.d, p.lam_exact if p.lam < 1 else p.lam, self.k)
            ax1.plot(np.arange(1, self.k + 1), q, "x:", label="linearised q̃_i (derived)")
        ax1.set_yscale("log")
        ax1.set_xlabel("level i")
        ax1.set_ylabel("fraction of queues shorter than i")
        ax1.set_title(f"n={p.n}, d={p.d}, λ={p.lam:g} ({self.engine})")
        ax1.legend(fontsize=8)
        ks = sorted(self.max_queue_dist)
        ax2.bar(ks, [self.max_queue_dist[k] for k in ks], color="tab:blue")
        if self.k is not None:
            ax2.axvline(self.k, color="tab:red", ls="--", label=f"k_(λ,d) = {self.k} (paper 000)")
        if p.lam < 1:
            kh = _th.k_hypothesis(p.n, p.d, p.lam)
            ax2.axvline(kh, color="tab:green", ls=":", label=f"largest k with nπ(k) ≥ 1: {kh}")
        if self.k is not None or p.lam < 1:
            ax2.legend(fontsize=8)
        ax2.xaxis.get_major_locator().set_params(integer=True)
        ax2.set_xlabel("maximum queue length")
        ax2.set_ylabel("fraction of time")
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=120)
        return fig


# =========================================================================== one chain
class Chain:
    """The arrays of one replication and the kernel that advances it (low-level driver).

    ``Chain(params, engine, counts, seed_u64, continuous=False, k=0, lo=None, hi=None,
    lengths=None, record_every=0.0, record_levels=0)``; then :meth:`advance` (to a time or
    by a number of events), :meth:`start_measuring`, :meth:`measures` (flushes and returns
    the time integrals since the last :meth:`start_measuring`).  ``now`` is steps in
    discrete time, continuous time otherwise.
    """

    def __init__(self, params: Params, engine: str, counts, seed_u64: int, *, continuous=False, k=0,
                 lo=None, hi=None, lengths=None, record_every=0.0, record_levels=0):
        self.params = params
        self.engine = engine
        n, d = params.n, params.d
        counts = np.asarray(counts, dtype=np.int64)
        L = 32
        while L < len(counts) + 4 or L < record_levels + 2 or L < k + 3:
            L *= 2
        self.c = np.zeros(L, np.int64)
        self.c[: len(counts)] = counts
        self.stamp = np.zeros(L)
        self.area_c = np.zeros(L)
        self.area_P = np.zeros(L)
        self.maxtime = np.zeros(L + 1)
        full = n + 1 <= _pk.FULL_TABLE_MAX_N
        self.tab = p_table(n, d, params.replace) if full else np.zeros(1)
        self.win = np.zeros((_pk.LW, _pk.WIN))
        self.winbase = np.full(_pk.LW, -10 * _pk.WIN, np.int64)
        self.lo = np.asarray(lo if lo is not None else np.zeros(0), dtype=float)
        self.hi = np.asarray(hi if hi is not None else np.zeros(0), dtype=float)
        self.gbad = np.zeros(k + 1, np.int64)
        self.s = new_state(seed_u64)
        self.pi = np.array([n, d, int(params.replace), k, int(continuous), int(full), record_levels], np.int64)
        lam = params.lam
        rate = n * (1.0 + lam)
        self.pf = np.array([lam / (1.0 + lam), rate, 0.0])
        self.si = np.zeros(4, np.int64)
        self.sf = np.zeros(6)
        self.continuous = bool(continuous)
        self.sf[_pk.T_NEXT] = self._first_event_time()
        self.record_every = float(record_every)
        self.record_levels = int(record_levels)
        cap = 0
        self.rec_t = np.zeros(cap)
        self.rec_c = np.zeros((cap, max(record_levels, 1)), np.int64)
        self.rec_max = np.zeros(cap, np.int64)
        self.rec_tot = np.zeros(cap, np.int64)
        self.events = 0
        if engine == "profile":
            self._extra = ()
            self._kernel = profile_kernel
        elif engine == "queues":
            x = lengths if lengths is not None else lengths_from_counts(counts, n)
            self.x = np.ascontiguousarray(x, dtype=np.int32)
            self.bits = np.zeros(bitset_words(n, params.replace), np.uint64)
            small = (not params.replace) and d * 64 < n
            self.scratch = np.zeros(d if small else 0, np.int64)
            self._extra = (self.x, self.bits, self.scratch)
            self._kernel = queues_kernel
        elif engine == "buckets":
            if lengths is not None:
                perm = np.argsort(-np.asarray(lengths), kind="stable")
            else:
                perm = np.arange(n)
            self.perm = perm.astype(np.int32)
            self._extra = (self.perm,)
            self._kernel = buckets_kernel
        else:  # pragma: no cover - validated by simulate()
            raise ValueError(f"unknown engine {engine!r}")
        reset_measures(self.c, self.stamp, self.area_c, self.area_P, self.maxtime, self.pi, self.lo, self.hi,
                       self.gbad, self.si, self.sf)

    def _first_event_time(self) -> float:
        if not self.continuous:
            return 1.0
        from .engines.rng import next_double  # numba function, callable from Python
        v = 1.0 - next_double(self.s)
        return -math.log(v) / self.pf[_pk.F_RATE]

    @property
    def now(self) -> float:
        return float(self.sf[_pk.T_NOW])

    def _grow_levels(self):
        L = self.c.shape[0]
        self.c = np.concatenate([self.c, np.zeros(L, np.int64)])
        self.stamp = np.concatenate([self.stamp, np.full(L, self.now)])
        self.area_c = np.concatenate([self.area_c, np.zeros(L)])
        self.area_P = np.concatenate([self.area_P, np.zeros(L)])
        self.maxtime = np.concatenate([self.maxtime, np.zeros(L)])

    def _grow_records(self, extra: int):
        cap = self.rec_t.shape[0]
        new = max(2 * cap, cap + extra, 1024)
        def grow(a, shape):
            b = np.zeros(shape, a.dtype)
            b[: a.shape[0]] = a
            return b
        self.rec_t = grow(self.rec_t, new)
        self.rec_c = grow(self.rec_c, (new, self.rec_c.shape[1]))
        self.rec_max = grow(self.rec_max, new)
        self.rec_tot = grow(self.rec_tot, new)

    def advance(self, t_stop=math.inf, max_events=CHUNK_EVENTS) -> int:
        """Run until time ``t_stop`` or ``max_events`` events (whichever first); returns
        the number of events.  Handles level growth and record buffers."""
        done = 0
        while True:
            ev, status = self._kernel(*self._extra, self.c, self.stamp, self.area_c, self.area_P, self.maxtime,
                                      self.tab, self.win, self.winbase, self.lo, self.hi, self.gbad,
                                      self.rec_t, self.rec_c, self.rec_max, self.rec_tot, self.s, self.pi,
                                      self.pf, self.si, self.sf, float(t_stop), int(max_events - done))
            done += ev
            if status == _pk.STATUS_GROW:
                self._grow_levels()
            elif status == _pk.STATUS_RECFULL:
                self._grow_records(1024)
            else:
                break
        self.events += done
        return done

    def start_recording(self, every: float):
        self.pf[_pk.F_REC] = float(every)
        self.sf[_pk.T_NEXTREC] = self.now
        self.si[_pk.S_NREC] = 0

    def start_measuring(self):
        reset_measures(self.c, self.stamp, self.area_c, self.area_P, self.maxtime, self.pi, self.lo, self.hi,
                       self.gbad, self.si, self.sf)

    def measures(self) -> dict:
        """Flush and copy the time integrals since the last :meth:`start_measuring`."""
        flush(self.c, self.stamp, self.area_c, self.area_P, self.maxtime, self.tab, self.win, self.winbase,
              self.pi, self.si, self.sf)
        return {"area_c": self.area_c.copy(), "area_P": self.area_P.copy(), "maxtime": self.maxtime.copy(),
                "good_time": float(self.sf[_pk.T_GOODTIME])}

    def counts(self) -> np.ndarray:
        top = int(self.si[_pk.S_TOP])
        return self.c[:top].copy()

    def records(self):
        m = int(self.si[_pk.S_NREC])
        return (self.rec_t[:m].copy(), self.rec_c[:m, : self.record_levels].copy(),
                self.rec_max[:m].copy(), self.rec_tot[:m].copy())

    def lengths(self) -> np.ndarray | None:
        if self.engine == "queues":
            return self.x.astype(np.int64)
        if self.engine == "buckets":
            return lengths_by_queue(self.perm, self.counts())
        return None


# =========================================================================== validation
def _check_engine(engine) -> str:
    if not isinstance(engine, str):
        raise TypeError(f"engine must be one of {', '.join(ENGINES)}; got {engine!r}")
    e = engine.strip().lower()
    if e not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; valid engines: {', '.join(ENGINES)}")
    return e


def _check_time_mode(mode) -> str:
    if not isinstance(mode, str) or mode.strip().lower() not in TIME_MODES:
        raise ValueError(f"time_mode must be 'discrete' or 'continuous'; got {mode!r}")
    return mode.strip().lower()


def _available_memory() -> int | None:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return None


def _check_memory(engine: str, n: int, d: int, replace: bool, replications: int, workers: int):
    if engine == "profile":
        return
    per = 4 * n + (0 if (engine == "buckets" or replace) else 8 * ((n + 63) // 64) + (8 * d if d * 64 < n else 0))
    need = per * min(replications, workers)
    if n > _PER_QUEUE_MAX_N:
        raise ValueError(f"engine={engine!r} keeps one entry per server and supports n <= {_PER_QUEUE_MAX_N}; "
                         f"n={n} would need {need / 2**30:.3g} GiB; use engine='profile' (exact, memory O(levels))")
    avail = _available_memory()
    if avail is not None and need > 0.8 * avail:
        raise ValueError(f"engine={engine!r} with n={n} needs {need / 2**30:.3g} GiB of memory "
                         f"({per / n:.3g} bytes per server), more than is available ({avail / 2**30:.3g} GiB); "
                         "use engine='profile' (exact, memory O(levels))")


def _default_record_levels(d: int, lam: float) -> int:
    if lam >= 1:
        return 16
    pi = _th.fixed_point(d, lam)
    levels = int(np.count_nonzero(pi > 1e-12))
    return int(min(max(levels + 2, 4), 32))


# =========================================================================== simulate
def simulate(n, d, lam, *, steps=None, time=None, burn_in=None, engine="profile", replace=True, start="empty",
             seed=0, replications=1, workers=None, time_mode="discrete", eps=0.1, record_every=None,
             record_levels=None, batches=BATCHES, progress=None) -> SimulationResult:
    """Simulate the (n, d, λ)-supermarket process and measure its time averages.

    Horizon: ``steps`` (events after burn-in) or ``time`` (continuous-time units after
    burn-in; in discrete mode converted to ``round(time·n(1+λ))`` steps), not both; default
    ``steps = 5·10**7``.  ``burn_in`` is in the same unit as the horizon (default a tenth of
    it).  ``time_mode="continuous"`` uses exact exponential event times (docs/model.md §1).
    ``start``: see :mod:`supermarket.states` (``"empty"``, ``"fixed-point"``,
    ``"customers:G"``, ``"long:L"``, a queue-lengths vector, a profile array).
    ``replications`` independent runs from ``spawn_seeds(seed, R)``, run on ``workers``
    threads (default: up to the number of cores); the numbers do not depend on ``workers``.
    ``eps``: ε of the good set ``N^ε`` (docs/model.md §5), ``k = k_{λ,d}``.
    ``record_every`` (steps, or time units in continuous mode): record ``u_1..u_m``
    (``m = record_levels``), the maximum and the total on that grid after burn-in.
    ``progress``: a progress bar on stderr (default: only on a terminal, after 2 s).
    Ctrl-C returns what was measured so far with ``partial=True``.

    λ >= 1 is allowed (finite horizon; a warning says that no equilibrium exists; no
    good set or fixed point then).
    """
    engine = _check_engine(engine)
    time_mode = _check_time_mode(time_mode)
    lam_in = lam
    params = Params(n, d, lam, replace=replace, stable=False)
    n, d, lamf = params.n, params.d, params.lam
    stable = params.lam_exact < 1
    if not stable:
        warnings.warn(f"load λ = {lam_in} >= 1: the chain has no equilibrium; the time averages describe this "
                      "finite horizon only", RuntimeWarning, stacklevel=2)
    replications = check_positive_int("replications", replications)
    workers = (min(replications, os.cpu_count() or 1) if workers is None
               else check_positive_int("workers", workers))
    batches = check_int("batches", batches, minimum=2)
    eps = check_fraction("eps", eps, low=0.0, high=0.1)
    continuous = time_mode == "continuous"
    rate = n * (1.0 + lamf)

    # horizon: ("time", T) measured in the chain's clock, or ("events", S) in continuous mode
    if steps is not None and time is not None:
        raise ValueError("give either steps or time, not both")
    if time is not None:
        T = check_positive_float("time", time)
        if continuous:
            horizon = ("time", T)
        else:
            S = int(round(T * rate))
            if S < 1:
                raise ValueError(f"time={time} is less than one step (a step is 1/(n(1+λ)) = {1 / rate:.3g})")
            horizon = ("time", float(S))
    else:
        S = DEFAULT_STEPS if steps is None else _check_steps(steps)
        horizon = ("events", S) if continuous else ("time", float(S))
    # burn-in, in the unit the horizon was given in (steps, or time units with `time`)
    if burn_in is None:
        burn = horizon[1] / 10.0
    elif time is not None:
        burn = _check_nonneg_float("burn_in", burn_in)
        if not continuous:
            burn = float(round(burn * rate))
    else:
        burn = float(_check_count("burn_in", burn_in))
    if horizon[0] == "events" or not continuous:
        burn = float(math.floor(burn))

    _check_memory(engine, n, d, params.replace, replications, workers)

    # good set (docs/model.md §5): only for λ < 1 and d >= 2
    k = None
    lo = hi = None
    if stable and d >= 2:
        k = _th.k_lambda_d(d, lam_in)
        lo, hi = _th.good_set_bounds(n, d, lamf, eps, k)

    # start state
    name, val = parse_start(start)
    lengths = None
    if name == "array" and np.issubdtype(val.dtype, np.integer):
        if val.ndim != 1 or val.size != n:
            raise ValueError(f"start queue-lengths vector must have n={n} entries; got shape {val.shape}")
        lengths = val.astype(np.int64)
        counts0 = counts_from_lengths(lengths)
    else:
        counts0 = start_counts(n, d, lam_in if stable else lamf, start)

    if burn_in is None and stable and name == "empty":
        _warn_short_burn_in(d, lamf, burn / rate if (horizon[0] == "events" or not continuous) else burn)

    if record_every is not None:
        record_every = (check_positive_float("record_every", record_every) if continuous
                        else float(check_positive_int("record_every", record_every)
                                   if not isinstance(record_every, float) else
                                   check_positive_float("record_every", record_every)))
    rl = (_default_record_levels(d, lamf) if record_levels is None
          else check_positive_int("record_levels", record_levels, maximum=10_000))
    if record_every is None:
        rl = 0

    spec = dict(params=params, engine=engine, counts0=counts0, lengths=lengths, continuous=continuous, k=k or 0,
                lo=lo, hi=hi, horizon=horizon, burn=burn, batches=batches, record_every=record_every or 0.0,
                record_levels=rl, eps=eps)
    seeds = spawn_seeds(seed, replications)
    stop = threading.Event()
    done_frac = [0.0] * replications
    t0 = _time.perf_counter()
    raws = [None] * replications
    interrupted = False
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futs = {pool.submit(_run_one, spec, seeds[r], stop, done_frac, r): r for r in range(replications)}
        try:
            _wait_with_progress(list(futs), done_frac, progress, t0)
        except KeyboardInterrupt:
            interrupted = True
            stop.set()
            wait(list(futs))
        for f, r in futs.items():
            raws[r] = f.result()
    wall = _time.perf_counter() - t0
    return _summarize(spec, raws, wall, interrupted)


BURN_IN_RELAXATION_TIMES = 5.0


def _warn_short_burn_in(d: int, lam: float, burn_time: float) -> None:
    """Warn when the default burn-in from an empty start is shorter than a few relaxation
    times: ``1/μ_k`` of the slow mode (docs/model.md §6, derived) for d >= 2, and the M/M/1
    relaxation time ``1/(1−√λ)²`` for d = 1.  A heuristic, stated as such."""
    t_relax = (1.0 / _th.slow_mode(d, lam).mu if d >= 2 else 1.0 / (1.0 - math.sqrt(lam)) ** 2)
    if burn_time < BURN_IN_RELAXATION_TIMES * t_relax:
        warnings.warn(
            f"the default burn-in ({burn_time:.3g} time units) is shorter than {BURN_IN_RELAXATION_TIMES:g} "
            f"relaxation times (1/μ = {t_relax:.3g} time units, slow mode, derived) from an empty start: the "
            "averages may carry start-up bias; give a longer burn-in (burn_in=, --burn-in) or start from the "
            "fixed point (start='fixed-point', --start fixed-point)", RuntimeWarning, stacklevel=3)


def _check_steps(steps) -> int:
    if isinstance(steps, float):
        if not math.isfinite(steps) or steps <= 0 or steps != math.floor(steps):
            raise ValueError(f"steps must be a positive finite integer; got {steps!r}")
        steps = int(steps)
    return check_positive_int("steps", steps)


def _check_count(name, value) -> int:
    if isinstance(value, float):
        if not math.isfinite(value) or value < 0 or value != math.floor(value):
            raise ValueError(f"{name} must be an integer >= 0; got {value!r}")
        value = int(value)
    return check_int(name, value, minimum=0)


def _check_nonneg_float(name, value) -> float:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value == 0:
        return 0.0
    return check_positive_float(name, value)


def _wait_with_progress(futs, done_frac, progress, t0):
    import sys
    show = sys.stderr.isatty() if progress is None else bool(progress)
    bar = None
    task = None
    try:
        while True:
            done, pending = wait(futs, timeout=0.2, return_when=FIRST_EXCEPTION)
            if not pending or any(f.exception() is not None for f in done):
                break
            if show and bar is None and (progress or _time.perf_counter() - t0 > PROGRESS_AFTER_S):
                from rich.console import Console
                from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
                bar = Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.percentage:>5.1f}%"),
                               TimeElapsedColumn(), TimeRemainingColumn(),
                               console=Console(stderr=True), transient=True)
                bar.start()
                task = bar.add_task("sim", total=float(len(done_frac)))
            if bar is not None:
                bar.update(task, completed=sum(done_frac))
    finally:
        if bar is not None:
            bar.stop()


def _run_one(spec, ss, stop, done_frac, r) -> dict:
    """One replication: burn-in, then ``batches`` equal batches; returns raw integrals."""
    params = spec["params"]
    ch = Chain(params, spec["engine"], spec["counts0"], seed_to_uint64(ss), continuous=spec["continuous"],
               k=spec["k"], lo=spec["lo"], hi=spec["hi"], lengths=spec["lengths"],
               record_levels=spec["record_levels"])
    kind, H = spec["horizon"]
    burn = spec["burn"]
    B = spec["batches"]
    total_work = burn + H
    # compile (or load from numba's cache) every kernel of the run before the clock starts
    ch.advance(max_events=0)
    ch.measures()
    ch.start_measuring()
    t_start = _time.perf_counter()
    partial = False

    def run_to(target_time=math.inf, target_events=None, base_work=0.0):
        """Advance in chunks; returns False if stopped by the user."""
        ev0 = ch.events
        while True:
            if stop.is_set():
                return False
            if target_events is not None:
                left = target_events - (ch.events - ev0)
                if left <= 0:
                    return True
                ch.advance(max_events=min(left, CHUNK_EVENTS))
                done_frac[r] = (base_work + (ch.events - ev0)) / total_work
            else:
                if ch.now >= target_time:
                    return True
                ch.advance(t_stop=target_time, max_events=CHUNK_EVENTS)
                done_frac[r] = (base_work + ch.now - t_burn0) / total_work if kind == "time" else done_frac[r]

    t_burn0 = ch.now
    ok = True
    if burn > 0:
        ok = run_to(target_time=burn) if kind == "time" else run_to(target_events=int(burn))
    burn_events = ch.events
    ch.start_measuring()
    t_meas0 = ch.now
    if spec["record_every"] > 0:
        ch.start_recording(spec["record_every"])
    batches = []
    if ok:
        for b in range(B):
            if kind == "time":
                target = t_meas0 + H * (b + 1) / B
                ok = run_to(target_time=target, base_work=0.0)
            else:
                ev_target = (int(H) * (b + 1)) // B - (int(H) * b) // B
                ok = run_to(target_events=ev_target, base_work=burn + (int(H) * b) // B)
            tb = ch.now - (t_meas0 if not batches else batches[-1]["t_end"])
            m = ch.measures()
            m["T"] = tb
            m["t_end"] = ch.now
            m["complete"] = ok
            batches.append(m)
            ch.start_measuring()
            if not ok:
                break
    partial = not ok
    done_frac[r] = 1.0
    rec = ch.records() if spec["record_every"] > 0 else None
    return {"batches": batches, "burn_events": burn_events, "events": ch.events - burn_events,
            "wall": _time.perf_counter() - t_start, "partial": partial, "counts": ch.counts(),
            "records": rec, "t_meas0": t_meas0, "lengths": ch.lengths() if r == 0 else None,
            "total_events": ch.events}


def _pad(a, L):
    out = np.zeros(L)
    m = min(len(a), L)
    out[:m] = a[:m]
    return out


def _summarize(spec, raws, wall, interrupted, single=False) -> SimulationResult:
    params = spec["params"]
    n, lamf = params.n, params.lam
    rate = n * (1.0 + lamf)
    continuous = spec["continuous"]
    batches = [b for raw in raws for b in raw["batches"] if b["T"] > 0]
    # highest level occupied during the measurement
    top = 0
    for b in batches:
        nz = np.nonzero(b["maxtime"] > 0)[0]
        if nz.size:
            top = max(top, int(nz[-1]))
    L = top + 1
    Ttot = sum(b["T"] for b in batches)
    if Ttot <= 0:
        if interrupted:
            raise KeyboardInterrupt("interrupted during burn-in: nothing was measured yet")
        raise RuntimeError("nothing was measured")  # pragma: no cover - horizons are positive
    area_c = sum(_pad(b["area_c"], L) for b in batches)
    area_P = sum(_pad(b["area_P"], L) for b in batches)
    u_mean = area_c / (n * Ttot)
    ud_mean = area_P / Ttot
    maxtime = sum(_pad(b["maxtime"], L + 1) for b in batches)
    mq = {int(m): float(maxtime[m] / Ttot) for m in range(L + 1) if maxtime[m] > 0}
    full = [b for b in batches if b["complete"]]
    if len(full) >= 2:
        bu = np.array([_pad(b["area_c"], L) / (n * b["T"]) for b in full])
        bp = np.array([_pad(b["area_P"], L) / b["T"] for b in full])
        nb = len(full)
        u_se = bu.std(axis=0, ddof=1) / math.sqrt(nb)
        ud_se = bp.std(axis=0, ddof=1) / math.sqrt(nb)
        mql_b = bu.sum(axis=1)
        mql_se = float(mql_b.std(ddof=1) / math.sqrt(nb))
        g_b = np.array([b["good_time"] / b["T"] for b in full])
        g_se = float(g_b.std(ddof=1) / math.sqrt(nb))
    else:
        u_se = np.full(L, np.nan)
        ud_se = np.full(L, np.nan)
        mql_se = g_se = math.nan
    mql = float(u_mean.sum())
    k = spec["k"] or None
    good = (sum(b["good_time"] for b in batches) / Ttot) if k else None
    events = sum(raw["events"] for raw in raws)
    burn_events = sum(raw["burn_events"] for raw in raws)
    total_events = sum(raw["total_events"] for raw in raws)
    kernel_wall = sum(raw["wall"] for raw in raws)
    sim_time = Ttot if continuous else Ttot / rate
    traj = None
    r0 = raws[0]
    if r0["records"] is not None:
        t, cc, mx, tot = r0["records"]
        traj = Trajectory(t=t - r0["t_meas0"], u=cc / n, max=mx, total=tot)
    per = ()
    if not single and len(raws) > 1:
        per = tuple(_summarize({**spec}, [raw], raw["wall"], interrupted, single=True) for raw in raws)
    return SimulationResult(
        params=params, engine=spec["engine"], time_mode="continuous" if continuous else "discrete",
        steps=int(events), burn_in=int(burn_events), sim_time=float(sim_time),
        u_mean=u_mean, u_stderr=u_se, ud_mean=ud_mean, ud_stderr=ud_se, max_queue_dist=mq,
        good_set_fraction=good, good_set_fraction_stderr=(g_se if k else None), k=k,
        eps=float(spec["eps"]), mean_queue_length=mql, mean_queue_length_stderr=mql_se,
        mean_sojourn_time=mql / lamf, mean_sojourn_time_stderr=mql_se / lamf,
        events_per_second=(total_events / kernel_wall if kernel_wall > 0 else math.nan),
        wall_time=float(wall), partial=bool(interrupted or any(raw["partial"] for raw in raws)),
        replications=len(raws), batches=len(batches), final_counts=r0["counts"], trajectory=traj,
        per_replication=per, final_lengths=r0["lengths"],
    )

