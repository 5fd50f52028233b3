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
  the first minimal entry); ``O(d)`` per arrival, 4 bytes per server (measured peak, with
  the final lengths in the result: 4.5 bytes at n = 4·10^6); the reference;
- ``"buckets"``: per-queue identities sorted by length, ``O(1)`` per event; 4 bytes per
  server while running, 8 at the end while the final lengths are built (measured peak 8.5).

Standard errors (docs/model.md §9): each replication's measured horizon is cut into
``BATCHES`` (1024) equal batches, at no cost per event; :mod:`supermarket.stats` does a
blocking analysis of the batch means with an automatic plateau, says "too short to
estimate" instead of a number when there is none, drops a start-up transient found by
MSER-5, and checks exact identities (``E[u_1] = λ``, ``E[u_i] = λ E[P_{i−1}]``).
Replication ``r`` uses ``spawn_seeds(seed, R)[r]``, so results do not depend on ``workers``,
nor on running the replications on a Dask cluster (``client=``, one task per replication).

Output (one protocol): :meth:`SimulationResult.summary` (the text ``supermarket simulate``
prints), :meth:`~SimulationResult.to_dict` (JSON-safe), :meth:`~SimulationResult.to_frame`
(tidy, one row per level), :meth:`~SimulationResult.plot`; response times (sojourn and
waiting laws with standard errors, docs/model.md §10) in ``result.response``.

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

from .engines.buckets import buckets_kernel, lengths_by_queue
from .engines.layout import STATUS_GROW, STATUS_RECFULL, Measures, Records, Setup, Tables, new_clock
from .engines.measure import flush, reset_measures
from .engines.profile import profile_kernel
from .engines.queues import bitset_words, queues_kernel
from .engines.tables import FULL_TABLE_MAX_N, LW, WIN, p_table
from .engines.rng import new_state
from .model import (
    Params, check_fraction, check_int, check_positive_float, check_positive_int,
    seed_to_uint64, spawn_seeds,
)
from .states import counts_from_lengths, lengths_from_counts, parse_start, start_counts
from . import stats as _st
from . import theory as _th
from .stats import MIN_BLOCKS, ErrorEstimate

__all__ = ["simulate", "SimulationResult", "Trajectory", "Chain", "ENGINES", "TIME_MODES", "BATCHES",
           "DEFAULT_STEPS", "MAX_RECORDS", "PRECISION_LEVEL_MIN", "SELF_CHECK_Z"]

ENGINES = ("profile", "queues", "buckets")
TIME_MODES = ("discrete", "continuous")
BATCHES = 1024  # batch means per replication (blocking needs many short ones, docs/model.md §9)
MAX_RECORDS = 10**7  # trajectory records per replication
PRECISION_LEVEL_MIN = 0.1  # precision= covers the levels with E[u_i] at least this (and the mean queue length)
SELF_CHECK_Z = 4.0  # an exact identity off by more than this many standard errors fails
CHUNK_EVENTS = 10_000_000
DEFAULT_STEPS = 5 * 10**7
PROGRESS_AFTER_S = 2.0
_PER_QUEUE_MAX_N = 2**31 - 1
PERFECT_CHILD = 0x7065  # child key of a replication's seed for its perfect-sampling start


# =========================================================================== results
@dataclass(frozen=True)
class Trajectory:
    """A recorded trajectory of replication 0 (``simulate(..., record_every=...)``).

    Also readable as a mapping (``traj["u"]``, ``traj.keys()``); ``len(traj)`` is the number
    of records.

    Parameters
    ----------
    t : numpy.ndarray
        Record times: steps in discrete time, time units in continuous time, counted from
        the end of burn-in.
    u : numpy.ndarray
        Records × levels: ``u_1, u_2, …, u_m`` (``m = record_levels``).
    max : numpy.ndarray
        Maximum queue length at each record.
    total : numpy.ndarray
        Customers in the system at each record.

    Examples
    --------
    >>> r = simulate(100, 2, 0.9, steps=10_000, seed=1, start="fixed-point", record_every=1000)
    >>> traj = r.trajectory
    >>> len(traj), traj["u"].shape[0], [float(x) for x in traj.t[:3]]
    (10, 10, [0.0, 1000.0, 2000.0])
    >>> bool(((traj.u >= 0) & (traj.u <= 1)).all())
    True
    """

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

    def to_frame(self):
        """Tidy table: one row per record and level (``t``, ``level``, ``u``), with the
        record's ``max`` and ``total`` repeated on each of its rows.

        Returns
        -------
        pandas.DataFrame
        """
        import pandas as pd
        u = np.asarray(self.u, dtype=float).reshape(len(self.t), -1)
        R, L = u.shape
        return pd.DataFrame({"t": np.repeat(np.asarray(self.t, dtype=float), L),
                             "level": np.tile(np.arange(1, L + 1), R), "u": u.ravel(),
                             "max": np.repeat(np.asarray(self.max), L), "total": np.repeat(np.asarray(self.total), L)})

    def summary(self) -> str:
        """One line: how many records, over which span, the range of the maximum."""
        if len(self.t) == 0:
            return "trajectory: no records"
        return (f"trajectory: {len(self.t)} records from t = {float(self.t[0]):.6g} to {float(self.t[-1]):.6g}; "
                f"maximum queue length {int(np.min(self.max))}–{int(np.max(self.max))}; "
                f"customers {int(np.min(self.total))}–{int(np.max(self.total))}")

    def to_dict(self) -> dict:
        """The four arrays as lists (JSON-safe).

        Returns
        -------
        dict
            Keys ``t``, ``u``, ``max``, ``total``.
        """
        return {"t": self.t.tolist(), "u": self.u.tolist(), "max": self.max.tolist(),
                "total": self.total.tolist()}


@dataclass(frozen=True)
class SimulationResult:
    """What :func:`simulate` measured (frozen; built by :func:`simulate`, not by hand).

    Arrays are indexed from level 1 (``u_mean[0]`` is ``E[u_1]``) up to one past the highest
    level occupied during the measurement.  Output: :meth:`summary` (the text the CLI
    prints), :meth:`to_dict` (JSON-safe), :meth:`to_frame` (tidy, one row per level),
    :meth:`plot`.

    Parameters
    ----------
    params : supermarket.model.Params
        n, d, λ and the sampling (with or without replacement).
    engine, time_mode : str
        The engine and clock that ran.
    steps, burn_in : int
        Events measured after burn-in, and of burn-in, all replications together.
    sim_time : float
        Measured time (continuous-time units), all replications together.
    u_mean, u_stderr : numpy.ndarray
        Time-averaged profile ``E[u_i]`` and its standard error (docs/model.md §9).
    ud_mean, ud_stderr : numpy.ndarray
        Time average of ``P_i`` (``u_i^d`` with replacement): ``E[u_{i+1}] = λ E[P_i]``.
    max_queue_dist : dict
        Maximum queue length -> fraction of time.
    good_set_fraction, good_set_fraction_stderr : float or None
        Fraction of time in ``N^ε`` (docs/model.md §5); None when λ >= 1 or d = 1.
    k : int or None
        ``k_{λ,d}`` (None when λ >= 1 or d = 1).
    eps : float
        ε of the good set.
    mean_queue_length, mean_queue_length_stderr : float
        ``Σ E[u_i]`` and its standard error.
    mean_sojourn_time, mean_sojourn_time_stderr : float
        By Little's law, ``Σ E[u_i] / λ``.
    events_per_second, wall_time : float
        Speed of the kernels (per core) and wall time of the call.
    partial : bool
        True after Ctrl-C: what was measured until then.
    replications, batches : int
        Replications and batch means (all replications together).
    final_counts : numpy.ndarray
        ``c_1, c_2, …`` at the end of replication 0.
    trajectory : Trajectory or None
        With ``record_every``.
    per_replication : tuple of SimulationResult
        Each replication's own result (when there are several).
    final_lengths : numpy.ndarray or None
        Per-queue engines: the final queue lengths of replication 0.
    u_reliable, u_half_width, u_n_eff, u_note
        Per level: whether the error bar can be trusted, the 95 % half-width (Student t),
        the effective number of independent batches, and why not reliable.
    mean_queue_length_reliable, mean_queue_length_half_width, mean_queue_length_n_eff
        The same for the mean queue length.
    good_set_fraction_reliable : bool or None
    error_method : str
        ``"blocking"``, ``"pooled"`` (blocking over replications) or ``"replications"``.
    self_checks : tuple of dict
        Exact identities checked on the data: identity, level, difference, stderr, z, result.
    start_up : tuple of dict
        Per replication: MSER-5 truncation and whether the start was forgotten.
    notes : tuple of str
        The warnings of the run, in words.
    precision : dict or None
        With ``precision=``: target, achieved, met, cap_hit, rounds.
    response : supermarket.response.ResponseTimes or None
        Sojourn and waiting time laws with standard errors (docs/model.md §10); None when
        λ >= 1.
    start_note : str
        What the start means for the measurement (``start="perfect"``), else "".

    Examples
    --------
    >>> r = simulate(50, 2, 0.5, steps=20_000, seed=1, start="fixed-point")
    >>> r.steps, r.replications, r.partial
    (20000, 1, False)
    >>> bool(abs(r.u_mean[0] - 0.5) < 5 * r.u_stderr[0])  # E[u_1] = λ exactly
    True
    >>> bool(abs(r.sojourn.mean - r.mean_sojourn_time) < 5 * r.mean_sojourn_time_stderr)  # Little
    True
    """

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
    # error analysis (docs/model.md §9)
    u_reliable: np.ndarray | None = None  # per level: can u_stderr be trusted?
    u_half_width: np.ndarray | None = None  # 95 % half-width (Student t on the estimate's dof)
    u_n_eff: np.ndarray | None = None  # effective number of independent batches
    u_note: tuple = ()  # per level: why not reliable ("" when reliable)
    mean_queue_length_reliable: bool = False
    mean_queue_length_half_width: float = math.nan
    mean_queue_length_n_eff: float = math.nan
    good_set_fraction_reliable: bool | None = None
    error_method: str = ""  # "blocking", "pooled" (blocking over replications) or "replications"
    self_checks: tuple = ()  # dicts: identity, level, difference, stderr, z, result (pass/fail/inconclusive)
    start_up: tuple = ()  # per replication: MSER-5 truncation and whether the start was forgotten
    notes: tuple = ()  # the warnings of this run, in words
    precision: dict | None = None  # target, achieved, met, cap_hit, rounds (with precision=)
    response: object | None = field(default=None, repr=False)  # response.ResponseTimes (λ < 1)
    start_note: str = ""  # what the start state means for the measurement (e.g. a perfect sample)

    @property
    def sojourn(self):
        """Sojourn-time law (``response.TimeLaw``: mean, quantiles, standard errors), or None
        when λ >= 1 (no equilibrium).

        Examples
        --------
        >>> r = simulate(50, 2, 0.5, steps=20_000, seed=1, start="fixed-point")
        >>> sorted(r.sojourn.quantiles)
        [0.5, 0.9, 0.99, 0.999]
        """
        return None if self.response is None else self.response.sojourn

    @property
    def waiting(self):
        """Waiting-time law (``response.TimeLaw``), or None when λ >= 1.

        Examples
        --------
        >>> r = simulate(50, 2, 0.5, steps=20_000, seed=1, start="fixed-point")
        >>> bool(0 < r.waiting.atom_at_zero < 1) and r.waiting.mean < r.sojourn.mean
        True
        """
        return None if self.response is None else self.response.waiting

    @property
    def reliable(self) -> bool:
        """Whether every error bar that matters (levels seen often enough, the mean queue
        length) is reliable and every self-check passed or was inconclusive.

        Examples
        --------
        >>> simulate(50, 2, 0.5, steps=20_000, seed=1, start="fixed-point").reliable
        True
        """
        if self.u_reliable is None:
            return False
        lv = [i for i, x in enumerate(self.u_note) if not x.startswith("rare level")]
        return bool(self.mean_queue_length_reliable and all(self.u_reliable[i] for i in lv))

    # ------------------------------------------------------------------ output
    def fixed_point(self) -> np.ndarray | None:
        """Mean-field π(i) on the levels of ``u_mean`` (None when λ >= 1).

        Returns
        -------
        numpy.ndarray or None
            ``π(i) = λ^((d^i − 1)/(d − 1))`` (docs/model.md §3; ``λ^i`` when d = 1),
            ``i = 1..len(u_mean)``.

        Examples
        --------
        >>> r = simulate(50, 2, 0.5, steps=20_000, seed=1, start="fixed-point")
        >>> [round(float(x), 12) for x in r.fixed_point()[:3]]
        [0.5, 0.125, 0.0078125]
        """
        if self.params.lam >= 1:
            return None
        return _th.fixed_point(self.params.d, self.params.lam, len(self.u_mean))

    def to_dict(self, *, per_replication: bool = True, cdf_points=None) -> dict:
        """Everything, JSON-safe (lists, numbers, strings, None).

        Parameters
        ----------
        per_replication : bool, default True
            Include ``per_replication`` (each replication's own result) when there are several.
        cdf_points : int, optional
            Add ``cdf``: ``{"t", "sojourn", "waiting"}``, the two CDFs on :meth:`cdf_grid`.

        Returns
        -------
        dict
            The fields of the result, with ``reliable``, ``fixed_point``, ``start_note``,
            ``sojourn`` and ``waiting`` (mean, quantiles, standard errors; None when λ >= 1).

        Raises
        ------
        ValueError
            ``cdf_points`` < 2, or given when λ >= 1.

        Examples
        --------
        >>> import json
        >>> r = simulate(50, 2, 0.5, steps=20_000, seed=1, start="fixed-point")
        >>> d = r.to_dict(cdf_points=4)
        >>> len(d["cdf"]["t"]), d["sojourn"]["mean"] == r.response.sojourn.mean
        (4, True)
        >>> s = json.dumps(d)
        """
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
            "reliable": self.reliable,
            "u_reliable": None if self.u_reliable is None else [bool(x) for x in self.u_reliable],
            "u_half_width": None if self.u_half_width is None else self.u_half_width.tolist(),
            "u_n_eff": None if self.u_n_eff is None else self.u_n_eff.tolist(),
            "u_note": list(self.u_note),
            "mean_queue_length_reliable": self.mean_queue_length_reliable,
            "mean_queue_length_half_width": self.mean_queue_length_half_width,
            "mean_queue_length_n_eff": self.mean_queue_length_n_eff,
            "good_set_fraction_reliable": self.good_set_fraction_reliable,
            "error_method": self.error_method,
            "self_checks": [dict(c) for c in self.self_checks],
            "start_up": [dict(c) for c in self.start_up],
            "notes": list(self.notes),
            "precision": None if self.precision is None else dict(self.precision),
        }
        fp = self.fixed_point()
        out["fixed_point"] = None if fp is None else fp.tolist()
        out["start_note"] = self.start_note
        out["sojourn"] = None if self.response is None else self.response.sojourn.to_dict()
        out["waiting"] = None if self.response is None else self.response.waiting.to_dict()
        if cdf_points is not None:
            out["cdf"] = self._cdf(cdf_points)
        if self.trajectory is not None:
            out["trajectory"] = self.trajectory.to_dict()
        if per_replication and self.per_replication:
            out["per_replication"] = [r.to_dict(per_replication=False) for r in self.per_replication]
        return out

    # ------------------------------------------------------------------ response-time CDF
    def cdf_grid(self, points: int) -> np.ndarray:
        """``points`` equally spaced times from 0 to 1.1 × the largest sojourn quantile
        (p99.9 by default): the grid of :meth:`summary` and :meth:`to_dict` with ``cdf_points``.

        Parameters
        ----------
        points : int
            Number of grid points, >= 2.

        Returns
        -------
        numpy.ndarray
            The times, in mean service times.

        Raises
        ------
        ValueError
            ``points`` < 2, or no response times (λ >= 1: no equilibrium).

        Examples
        --------
        >>> r = simulate(50, 2, 0.5, steps=20_000, seed=1, start="fixed-point")
        >>> g = r.cdf_grid(3)
        >>> len(g), float(g[0])
        (3, 0.0)
        """
        points = check_positive_int("cdf_points", points)
        if points < 2:
            raise ValueError(f"cdf_points must be an integer >= 2; got {points}")
        if self.response is None:
            raise ValueError("no response-time CDF: load >= 1 has no equilibrium (cdf_points needs load < 1)")
        top = max(self.response.sojourn.quantiles.values()) if self.response.sojourn.quantiles else 10.0
        return np.linspace(0.0, 1.1 * top, points)

    def _cdf(self, points):
        g = self.cdf_grid(points)
        return self.response.to_dict(cdf_grid=g)["cdf"]

    # ------------------------------------------------------------------ tidy table and text
    def to_frame(self):
        """Tidy table: one row per level ``i`` of the profile.

        Returns
        -------
        pandas.DataFrame
            Columns ``level``, ``u_mean``, ``u_stderr``, ``u_half_width`` (95 %),
            ``u_n_eff``, ``u_reliable``, ``u_note``, ``ud_mean`` and ``ud_stderr`` (time
            average of ``P_i``), ``identity`` (``λ·E[P_{i−1}]``, equal to ``E[u_i]`` in
            equilibrium, derived), ``fixed_point`` (mean-field π(i), NaN when λ >= 1),
            ``linearised`` (``1 − q̃_i``, derived, NaN beyond ``k + 1``), and the run's
            ``n``, ``d``, ``load``, ``replace``, ``engine``, ``time_mode``.

        Examples
        --------
        >>> r = simulate(50, 2, 0.5, steps=20_000, seed=1, start="fixed-point")
        >>> f = r.to_frame()
        >>> list(f["level"][:2]), bool(f["u_mean"].iloc[0] == r.u_mean[0])
        ([1, 2], True)
        """
        import pandas as pd

        p = self.params
        L = len(self.u_mean)
        fp = self.fixed_point()
        lin = self._linearised(L)
        nan = np.full(L, np.nan)
        prev = np.concatenate(([1.0], self.ud_mean[:-1])) if L else np.zeros(0)
        return pd.DataFrame({
            "level": np.arange(1, L + 1),
            "u_mean": self.u_mean, "u_stderr": self.u_stderr,
            "u_half_width": self.u_half_width if self.u_half_width is not None else nan,
            "u_n_eff": self.u_n_eff if self.u_n_eff is not None else nan,
            "u_reliable": (np.asarray(self.u_reliable, bool) if self.u_reliable is not None
                           else np.zeros(L, bool)),
            "u_note": list(self.u_note) if len(self.u_note) == L else [""] * L,
            "ud_mean": self.ud_mean, "ud_stderr": self.ud_stderr,
            "identity": p.lam * prev,
            "fixed_point": fp if fp is not None else nan,
            "linearised": lin,
            "n": p.n, "d": p.d, "load": p.lam, "replace": p.replace, "engine": self.engine,
            "time_mode": self.time_mode,
        })

    def _linearised(self, L):
        """``1 − q̃_i`` (derived) for ``i = 1..k``, 0 at ``k + 1``, NaN elsewhere."""
        out = np.full(L, np.nan)
        if self.k is None or not _th.linearisation_valid(self.params.d, self.params.lam_exact, self.k):
            return out  # outside its regime (q̃_k > 1) the linearised profile predicts nothing
        q = _th.linearised_q(self.params.d, self.params.lam_exact, self.k)
        m = min(self.k, L)
        out[:m] = 1.0 - np.asarray(q, float)[:m]
        if self.k < L:
            out[self.k] = 0.0
        return out

    def summary(self, *, cdf_points=None) -> str:
        """The text ``supermarket simulate`` prints (plain text, no markup).

        Parameters
        ----------
        cdf_points : int, optional
            Also tabulate the sojourn and waiting CDFs on this many times (see
            :meth:`cdf_grid`).

        Returns
        -------
        str
            The run, the profile table (``E[u_i]`` ± s.e. against π(i), the linearised
            profile and the identity), the maximum queue length against ``k_{λ,d}``, the
            good set, the mean queue length, the response times (mean and quantiles ± s.e.
            of sojourn and waiting), how the error bars were made, the self-checks, the
            start (``start_note``), the precision target and the speed.

        Raises
        ------
        ValueError
            ``cdf_points`` < 2, or given when λ >= 1.

        Examples
        --------
        >>> r = simulate(50, 2, 0.5, steps=20_000, seed=1, start="fixed-point")
        >>> text = r.summary()
        >>> "E[u_i]" in text and "sojourn" in text and "waiting" in text
        True
        """
        cdf = self._cdf(cdf_points) if cdf_points is not None else None
        p = self.params
        lam_txt = f"{p.lam:.10g}"
        out = [f"supermarket simulate  n={p.n}  d={p.d}  λ={lam_txt}  "
               f"{'with' if p.replace else 'without'} replacement  engine={self.engine}  time={self.time_mode}",
               f"{self.steps:,} events measured after {self.burn_in:,} of burn-in ({self.sim_time:.6g} time units), "
               f"{self.replications} replication(s), {self.batches} batches"
               + ("  PARTIAL (interrupted)" if self.partial else "")]
        if self.start_note:
            out.append(f"start: {self.start_note}")
        k = self.k
        fp = self.fixed_point()
        L = len(self.u_mean)
        lin = self._linearised(L)
        ident = "λ·E[u_(i−1)^d] (identity, derived)" if p.replace else "λ·E[P_(i−1)] (identity, derived)"
        rows = []
        for i in range(1, L + 1):
            rel = bool(self.u_reliable[i - 1]) if self.u_reliable is not None else False
            note = self.u_note[i - 1] if len(self.u_note) == L else ""
            prev = 1.0 if i == 1 else self.ud_mean[i - 2]
            rows.append([str(i), _pm(self.u_mean[i - 1], self.u_stderr[i - 1], rel, note),
                         _fmt(self.u_n_eff[i - 1], 3) if rel and self.u_n_eff is not None else "",
                         _fmt(fp[i - 1]) if fp is not None else "—",
                         ("—" if k and i <= k else "") if math.isnan(lin[i - 1]) else _fmt(lin[i - 1]),
                         _fmt(p.lam * prev)])
        out.append("")
        out.append("Time-averaged profile (docs/model.md §1–3)")
        out.append(_table(["i", "simulated E[u_i] ± s.e.", "n_eff", "mean field π(i)",
                           "linearised 1 − q̃_i (derived)", ident], rows))
        if k and np.all(np.isnan(lin)):
            out.append(f"linearised profile not shown: q̃_k > 1 for k = {k}, outside the regime where it "
                       "holds (docs/model.md §4)")
        kr = _th.k_report(p.d, p.lam_exact) if k else None
        mrows = []
        for m in sorted(self.max_queue_dist):
            mark = ""
            if k is not None and m == k:
                mark = "= k_(λ,d)"
            elif kr is not None and m in kr.possible_max:
                mark = "allowed near the boundary"
            mrows.append([str(m), f"{self.max_queue_dist[m]:.6g}", mark])
        out.append("")
        out.append("Maximum queue length: fraction of time")
        out.append(_table(["max length", "fraction", ""], mrows, left=(2,)))
        out.append("")
        if k is not None:
            out.append(f"k_(λ,d) = {k}  ({kr.note}; paper 000's regime needs n ≥ 1e15)")
            out.append(f"general hypothesis (docs/model.md §4, reconstructed): the maximum is within 1 of the largest "
                       f"k with n·π(k) ≥ 1, here {_th.k_hypothesis(p.n, p.d, p.lam)}")
            out.append(f"time in the good set N^ε (ε = {self.eps:g}, clauses (a),(b) of docs/model.md §5): "
                       + _pm(self.good_set_fraction, self.good_set_fraction_stderr,
                             bool(self.good_set_fraction_reliable)))
            above = sum(f for m, f in self.max_queue_dist.items() if m > k)
            if above > 0:
                out.append(f"  a queue longer than k = {k} existed {above:.3g} of the time, and clause (a) fails then")
        mf = _th.mean_queue_length(p.d, p.lam) if p.lam < 1 else None
        out.append("mean queue length "
                   + _pm(self.mean_queue_length, self.mean_queue_length_stderr, self.mean_queue_length_reliable)
                   + (f"  (mean field Σπ(i) = {mf:.6g})" if mf is not None else "")
                   + f";  mean sojourn time (Little) {self.mean_sojourn_time:.6g}")
        if self.response is not None:
            out.append(self.response.summary())
        else:
            out.append("response times: none (load >= 1: no equilibrium)")
        if cdf is not None:
            out.append("")
            out.append(f"Response-time CDF on {len(cdf['t'])} points (docs/model.md §10)")
            out.append(_table(["t", "P(S ≤ t)", "P(W ≤ t)"],
                              [[f"{t:.6g}", f"{a:.6g}", f"{b:.6g}"]
                               for t, a, b in zip(cdf["t"], cdf["sojourn"], cdf["waiting"])]))
        out.extend(self._error_lines())
        out.append(f"{self.events_per_second / 1e6:.1f} million events per second per core; "
                   f"wall time {self.wall_time:.2f} s")
        return "\n".join(out)

    def _error_lines(self) -> list:
        """How the error bars were made, the self-checks and the start-up diagnosis."""
        how = {"blocking": "blocking analysis of batch means (automatic plateau)",
               "pooled": f"blocking analysis of batch means, pooled over {self.replications} replications",
               "replications": f"spread of {self.replications} replications (Student t)"}.get(self.error_method,
                                                                                             self.error_method)
        out = [f"error bars: 1 s.e., {how}; 95% intervals use Student t (docs/model.md §9)"]
        if self.self_checks:
            done = [c for c in self.self_checks if c["result"] != "inconclusive"]
            fails = [c for c in done if c["result"] == "fail"]
            inc = len(self.self_checks) - len(done)
            text = "self-checks (exact identities E[u_1] = λ, E[u_i] = λ·E[P_(i−1)]): "
            if done:
                w = max(done, key=lambda c: abs(c["z"]))
                text += (f"{len(done) - len(fails)} pass, {len(fails)} FAIL; largest |z| = {abs(w['z']):.1f} s.e. "
                         f"(i = {w['level']})")
            else:
                text += "none conclusive"
            if inc:
                text += f"; {inc} inconclusive (rare levels or unknown error)"
            out.append(text)
        trunc = [s for s in self.start_up if s["truncated_batches"] > 0 and s["forgotten"]]
        if trunc:
            tt = sum(s["truncated_time"] for s in trunc)
            out.append(f"start-up transient detected: burn-in extended by {tt:.4g} time units in all "
                       f"(MSER-5, {len(trunc)} replication(s))")
        if self.precision is not None:
            pr = self.precision
            state = ("met" if pr["met"] else ("NOT met: max steps reached" if pr["cap_hit"]
                                              else "not met (interrupted)"))
            out.append(f"precision target {pr['target']:g} (relative 95% half-width): {state}; worst "
                       f"{pr.get('achieved', float('nan')):.3g} after {pr['rounds']} stretch(es)")
        return out

    def plot(self, path=None):
        """Simulated profile with error bars against π and the linearised prediction
        (derived); maximum-queue distribution against ``k_{λ,d}``; and, when there are
        response times (λ < 1), the sojourn and waiting survival ``P(S > t)``, ``P(W > t)``
        with the sojourn quantiles ± 2 s.e.

        Parameters
        ----------
        path : str or path-like, optional
            Save the figure there (any format matplotlib knows, by the suffix).

        Returns
        -------
        matplotlib.figure.Figure

        Examples
        --------
        >>> r = simulate(50, 2, 0.5, steps=20_000, seed=1, start="fixed-point")
        >>> fig = r.plot()
        >>> len(fig.axes)
        3
        >>> import matplotlib.pyplot as plt; plt.close(fig)
        """
        import matplotlib
        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        p = self.params
        panels = 3 if self.response is not None else 2
        fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.2))
        ax1, ax2 = axes[0], axes[1]
        lv = np.arange(1, len(self.u_mean) + 1)
        ax1.errorbar(lv, 1 - self.u_mean, yerr=4.5 * self.u_stderr, fmt="o", label="simulated 1 − E[u_i] (±4.5 s.e.)")
        fp = self.fixed_point()
        if fp is not None:
            ax1.plot(lv, 1 - fp, "s--", mfc="none", label="mean field 1 − π(i)")
        if self.k is not None and _th.linearisation_valid(p.d, p.lam_exact, self.k):
            q = _th.linearised_q(p.d, p.lam_exact, self.k)
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
        if self.response is not None:
            ax3 = axes[2]
            rt = self.response
            grid = self.cdf_grid(300)
            ax3.semilogy(grid, np.maximum(1.0 - rt.sojourn_cdf(grid), 1e-300), label="sojourn P(S > t)")
            ax3.semilogy(grid, np.maximum(1.0 - rt.waiting_cdf(grid), 1e-300), label="waiting P(W > t)")
            se = rt.sojourn.stderr
            for q, v in rt.sojourn.quantiles.items():
                xe = None if se is None or not math.isfinite(se["quantiles"][q]) else 2 * se["quantiles"][q]
                ax3.errorbar([v], [1.0 - q], xerr=xe, fmt="k|", ms=8, capsize=3)
                ax3.text(v, 1.0 - q, f" p{100 * q:g}", fontsize=7, va="bottom")
            ax3.set_ylim(max(1e-6, 0.1 * (1 - max(rt.sojourn.quantiles))), 1.05)
            ax3.set_xlabel("time (mean service times)")
            ax3.set_ylabel("survival")
            ax3.set_title("response times (quantiles ± 2 s.e.)", fontsize=9)
            ax3.legend(fontsize=8)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=120)
        return fig


def _fmt(x, digits=6):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}g}"


def _pm(mean, se, reliable, note=""):
    """``mean ± s.e.`` when the error bar is reliable; otherwise say why there is none."""
    if mean is None:
        return "—"
    if reliable:
        return f"{mean:.6g} ± {_fmt(se, 2)}"
    if note.startswith("rare level") or mean == 0:
        return f"{mean:.6g} (rare: no error bar)"
    if "start not forgotten" in note:
        return f"{mean:.6g} (start not forgotten)"
    if "self-check" in note:
        return f"{mean:.6g} (error bars failed a self-check)"
    return f"{mean:.6g} (too short to estimate)"


def _table(header, rows, left=()) -> str:
    """A plain-text table: columns right-aligned (those in ``left`` left-aligned)."""
    cols = len(header)
    w = [max([len(header[j])] + [len(r[j]) for r in rows]) for j in range(cols)]

    def line(cells):
        return "  ".join(c.ljust(w[j]) if j in left else c.rjust(w[j]) for j, c in enumerate(cells)).rstrip()
    return "\n".join([line(header), line(["-" * x for x in w])] + [line(r) for r in rows])


# =========================================================================== one chain
class Chain:
    """The arrays of one replication and the kernel that advances it (low-level driver).

    :func:`simulate` builds one per replication; use it directly for a loop of your own
    around a kernel: :meth:`advance` (to a time or by a number of events),
    :meth:`start_measuring`, :meth:`measures` (flushes and returns the time integrals since
    the last :meth:`start_measuring`).  ``now`` is steps in discrete time, continuous time
    otherwise.  Nothing here is validated beyond what ``Params`` checks.

    Parameters
    ----------
    params : supermarket.model.Params
        n, d, λ, with or without replacement.
    engine : {"profile", "queues", "buckets"}
        The kernel (all exact in law; see the module docstring).
    counts : array of int
        Start state as counts ``c_1, c_2, …`` (``c_i``: queues with at least ``i``
        customers, non-increasing).
    seed_u64 : int
        Seed of the xoshiro stream (``supermarket.model.seed_to_uint64`` of a SeedSequence).
    continuous : bool, default False
        Exact exponential event times instead of the jump chain.
    k : int, default 0
        ``k_{λ,d}`` for the good-set clock (0: none), with ``lo``, ``hi`` its bounds
        (``supermarket.theory.good_set_bounds``).
    lengths : array of int, optional
        Per-queue engines: the start as queue lengths (else built from ``counts``).
    record_every, record_levels : float, int
        Trajectory records (with :meth:`start_recording`); ``record_levels`` levels each.

    Examples
    --------
    >>> import numpy as np
    >>> from supermarket.model import Params, seed_to_uint64
    >>> ch = Chain(Params(100, 2, 0.9), "profile", [50, 10], seed_to_uint64(np.random.SeedSequence(1)))
    >>> ch.advance(max_events=20_000), ch.now
    (20000, 20000.0)
    >>> ch.start_measuring()
    >>> ch.advance(max_events=200_000)
    200000
    >>> u1 = ch.measures()["area_c"][0] / (ch.now - 20_000) / 100  # time average of u_1
    >>> bool(abs(u1 - 0.9) < 0.02)  # E[u_1] = λ
    True
    >>> ch = Chain(Params(100, 2, 0.9), "queues", [50, 10], 7, continuous=True)
    >>> _ = ch.advance(t_stop=5.0)
    >>> ch.now, len(ch.lengths()), int(ch.lengths().sum()) == int(ch.counts().sum())
    (5.0, 100, True)
    """

    def __init__(self, params: Params, engine: str, counts, seed_u64: int, *, continuous=False, k=0,
                 lo=None, hi=None, lengths=None, record_every=0.0, record_levels=0, _force_window=False):
        self.params = params
        self.engine = engine
        n, d = params.n, params.d
        counts = np.asarray(counts, dtype=np.int64)
        L = 32
        while L < len(counts) + 4 or L < record_levels + 2 or L < k + 3:
            L *= 2
        self.c = np.zeros(L, np.int64)
        self.c[: len(counts)] = counts
        self.meas = Measures(stamp=np.zeros(L), area_c=np.zeros(L), area_P=np.zeros(L), maxtime=np.zeros(L + 1),
                             good_lo=np.asarray(lo if lo is not None else np.zeros(0), dtype=float),
                             good_hi=np.asarray(hi if hi is not None else np.zeros(0), dtype=float),
                             good_bad=np.zeros(k + 1, np.int64))
        # ``_force_window`` (tests): the windowed P tables of large n at any n, to compare
        # them with the full table bit for bit
        full = n + 1 <= FULL_TABLE_MAX_N and not _force_window
        self.tables = Tables(tab=p_table(n, d, params.replace) if full else np.zeros(1),
                             win=np.zeros((LW, WIN)), winbase=np.full(LW, -10 * WIN, np.int64))
        self.s = new_state(seed_u64)
        lam = params.lam
        self.setup = Setup(n=int(n), d=int(d), replace=bool(params.replace), k=int(k), continuous=bool(continuous),
                           full_table=bool(full), rec_levels=int(record_levels), p_arrival=lam / (1.0 + lam),
                           rate=n * (1.0 + lam))
        self.clock = new_clock()
        self.continuous = bool(continuous)
        self.clock[0]["t_next"] = self._first_event_time()
        self.record_every = float(record_every)
        self.record_levels = int(record_levels)
        cap = 0
        self.recs = Records(t=np.zeros(cap), c=np.zeros((cap, max(record_levels, 1)), np.int64),
                            max=np.zeros(cap, np.int64), total=np.zeros(cap, np.int64))
        self.events = 0
        if engine == "profile":
            self._extra = ()
            self._kernel = profile_kernel
        elif engine == "queues":
            if lengths is not None:
                self.x = np.ascontiguousarray(lengths, dtype=np.int32)
            else:  # built in place: no int64 temporary (8 more bytes per server at the peak)
                self.x = np.zeros(n, np.int32)
                for i, ci in enumerate(counts, start=1):
                    self.x[:ci] = i
            self.bits = np.zeros(bitset_words(n, params.replace), np.uint64)
            small = (not params.replace) and d * 64 < n
            self.scratch = np.zeros(d if small else 0, np.int64)
            self._extra = ((self.x, self.bits, self.scratch),)
            self._kernel = queues_kernel
        elif engine == "buckets":
            if lengths is not None:
                self.perm = np.argsort(-np.asarray(lengths), kind="stable").astype(np.int32)
            else:
                self.perm = np.arange(n, dtype=np.int32)
            self._extra = (self.perm,)
            self._kernel = buckets_kernel
        else:  # pragma: no cover - validated by simulate()
            raise ValueError(f"unknown engine {engine!r}")
        reset_measures(self.c, self.meas, self.setup, self.clock)

    def _first_event_time(self) -> float:
        if not self.continuous:
            return 1.0
        from .engines.rng import next_double  # numba function, callable from Python
        v = 1.0 - next_double(self.s)
        return -math.log(v) / self.setup.rate

    @property
    def now(self) -> float:
        return float(self.clock[0]["now"])

    def _grow_levels(self):
        L = self.c.shape[0]
        m = self.meas
        self.c = np.concatenate([self.c, np.zeros(L, np.int64)])
        self.meas = m._replace(stamp=np.concatenate([m.stamp, np.full(L, self.now)]),
                               area_c=np.concatenate([m.area_c, np.zeros(L)]),
                               area_P=np.concatenate([m.area_P, np.zeros(L)]),
                               maxtime=np.concatenate([m.maxtime, np.zeros(L)]))

    def _grow_records(self, extra: int):
        cap = self.recs.t.shape[0]
        new = max(2 * cap, cap + extra, 1024)
        def grow(a):
            b = np.zeros((new,) + a.shape[1:], a.dtype)
            b[: a.shape[0]] = a
            return b
        self.recs = Records(*(grow(a) for a in self.recs))

    def advance(self, t_stop=math.inf, max_events=CHUNK_EVENTS) -> int:
        """Run until time ``t_stop`` or ``max_events`` events, whichever comes first.

        Parameters
        ----------
        t_stop : float, default inf
            Stop time (steps in discrete time, time units in continuous time).
        max_events : int, default CHUNK_EVENTS
            At most this many events (a long run is a loop of chunks, so that Ctrl-C is seen).

        Returns
        -------
        int
            The number of events run.  Level growth and record buffers are handled here.
        """
        done = 0
        while True:
            ev, status = self._kernel(*self._extra, self.c, self.s, self.tables, self.meas, self.recs, self.setup,
                                      self.clock, float(t_stop), int(max_events - done))
            done += ev
            if status == STATUS_GROW:
                self._grow_levels()
            elif status == STATUS_RECFULL:
                self._grow_records(1024)
            else:
                break
        self.events += done
        return done

    def start_recording(self, every: float):
        """Record the state every ``every`` (steps or time units) from now on."""
        st = self.clock[0]
        st["rec_every"] = float(every)
        st["next_rec"] = self.now
        st["nrec"] = 0

    def start_measuring(self):
        """Reset the time integrals: :meth:`measures` counts from now on."""
        reset_measures(self.c, self.meas, self.setup, self.clock)

    def measures(self) -> dict:
        """Flush and copy the time integrals since the last :meth:`start_measuring`.

        Returns
        -------
        dict
            ``area_c`` (∫ c_i dt per level), ``area_P`` (∫ P_i dt), ``maxtime`` (time with
            maximum queue length m, per m), ``good_time`` (time in the good set).
        """
        flush(self.c, self.tables, self.meas, self.setup, self.clock)
        m = self.meas
        return {"area_c": m.area_c.copy(), "area_P": m.area_P.copy(), "maxtime": m.maxtime.copy(),
                "good_time": float(self.clock[0]["good_time"])}

    def counts(self) -> np.ndarray:
        """The current counts ``c_1, c_2, …`` (a copy), up to the highest occupied level."""
        top = int(self.clock[0]["top"])
        return self.c[:top].copy()

    def records(self):
        """The records so far: ``(t, counts of the recorded levels, max, total)``."""
        m = int(self.clock[0]["nrec"])
        r = self.recs
        return (r.t[:m].copy(), r.c[:m, : self.record_levels].copy(), r.max[:m].copy(), r.total[:m].copy())

    def lengths(self) -> np.ndarray | None:
        """Per-queue engines: the queue lengths (``queues``: the chain's own array, not a
        copy); None for the profile engine."""
        if self.engine == "queues":
            return self.x  # the chain's own array (int32), not a copy: no extra bytes per server
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
    # measured peaks (tracemalloc, tests/test_engines.py): queues 4 bytes per server (+ the bitset
    # without replacement); buckets 8 (the final lengths are built beside the permutation)
    per = (8 * n if engine == "buckets" else
           4 * n + (0 if replace else 8 * ((n + 63) // 64) + (8 * d if d * 64 < n else 0)))
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
             record_levels=None, batches=None, precision=None, max_steps=None, progress=None, client=None,
             _force_window=False) -> SimulationResult:
    """Simulate the (n, d, λ)-supermarket process and measure its time averages with honest errors.

    Parameters
    ----------
    n, d, lam : int, int, float or str
        Servers, choices, load λ (λ >= 1 runs a finite horizon with a warning: no
        equilibrium, no good set, no self-checks).
    steps, time : int or float, optional
        Horizon after burn-in: ``steps`` events, or ``time`` continuous-time units (in
        discrete mode converted to ``round(time·n(1+λ))`` steps); not both.  Default
        ``steps = 5·10**7``.  With ``precision``, the first stretch of the run.
    burn_in : int or float, optional
        In the unit of the horizon; default a tenth of it.  MSER may extend it (see Notes).
    engine : {"profile", "queues", "buckets"}
        ``profile``: counts chain, any n; ``queues``: per-queue reference; ``buckets``: per
        queue, O(1) per event.  All exact in law.
    replace : bool
        Sample the d queues with replacement (paper 000) or without (paper 002).
    start : str or array
        See :mod:`supermarket.states` (``"empty"``, ``"fixed-point"``, ``"customers:G"``,
        ``"long:L"``, a queue-lengths vector, a profile array), or ``"perfect"``: each
        replication starts from its own exact stationary sample (:mod:`supermarket.perfect`,
        docs/model.md §12), so the default burn-in is 0 and no start-up bias exists.
    seed : int or numpy.random.SeedSequence
        Replication ``r`` uses child ``r`` of ``SeedSequence(seed)``.
    replications, workers : int
        Independent runs, on ``workers`` threads (numbers do not depend on ``workers``;
        default: the cores, at most ``replications``).
    time_mode : {"discrete", "continuous"}
        The chain of paper 000, or exact exponential event times (docs/model.md §1).
    eps : float
        ε of the good set ``N^ε`` (docs/model.md §5), ``k = k_{λ,d}``.
    record_every, record_levels : optional
        Record ``u_1..u_m`` (``m = record_levels``), the maximum and the total on a grid
        (steps, or time units in continuous mode) after burn-in; at most ``MAX_RECORDS``.
    batches : int, optional
        Batch means per replication (default ``BATCHES = 1024``, fewer for runs shorter
        than that many steps); a power of two keeps blocking exact.  Must not exceed the
        number of steps.
    precision : float, optional
        Target relative half-width of the 95 % intervals of the mean queue length and of
        every ``E[u_i] >= PRECISION_LEVEL_MIN``: the run is extended (doubling) until met or
        until ``max_steps``.
    max_steps : int, optional
        Cap on the measured events per replication with ``precision`` (default
        ``40·DEFAULT_STEPS``); a warning says when it was hit.
    progress : bool, optional
        Progress bar on stderr (default: only on a terminal, after 2 s; none with ``client``).
    client : dask.distributed.Client, optional
        Run each replication, whole, as one task on this Dask cluster
        (:func:`supermarket.parallel.connect`); the numbers are identical to a local run
        (replication ``r`` uses child ``r`` of the seed, and the results are combined the
        same way).  Excludes ``workers`` and ``precision`` (its stretches are planned from
        all replications together and keep every chain alive between them).

    Returns
    -------
    SimulationResult
        Means, standard errors, per-quantity ``reliable`` flags and effective sample sizes,
        the self-checks, the start-up (MSER) diagnosis; ``partial=True`` after Ctrl-C.

    Raises
    ------
    ValueError, TypeError
        Bad parameters, named with their valid range, before any work; ``client`` with
        ``workers`` or ``precision``; ``client`` not a Dask client.
    KeyboardInterrupt
        Ctrl-C during burn-in (nothing measured yet), or on a cluster before any
        replication finished (otherwise Ctrl-C returns a partial result).

    Notes
    -----
    Error bars (docs/model.md §9): blocking analysis of the ``batches`` batch means of each
    replication (:func:`supermarket.stats.blocking`); with several replications the
    blocking errors are pooled when every one is reliable, otherwise the spread between
    replications is used (Student t).  MSER-5 on the batch means of the queue length drops
    a start-up transient (extending the burn-in); if it would drop more than half the run,
    the start was not forgotten and nothing is flagged reliable.  Exact identities
    ``E[u_1] = λ`` and ``E[u_i] = λ E[P_{i−1}]`` are checked; a failure by more than 4
    standard errors is reported as error bars (or burn-in) too small.

    Examples
    --------
    >>> r = simulate(100, 2, 0.9, steps=200_000, seed=1)
    >>> bool(r.u_reliable[0]), bool(abs(r.u_mean[0] - 0.9) < 5 * r.u_stderr[0])
    (True, True)
    >>> r.sojourn.mean > r.waiting.mean > 0
    True
    >>> a = simulate(50, 2, 0.5, steps=20_000, seed=3, replications=2, workers=1, start="fixed-point")
    >>> b = simulate(50, 2, 0.5, steps=20_000, seed=3, replications=2, workers=2, start="fixed-point")
    >>> bool((a.u_mean == b.u_mean).all())  # results do not depend on workers
    True
    """
    engine = _check_engine(engine)
    time_mode = _check_time_mode(time_mode)
    lam_in = lam
    params = Params(n, d, lam, replace=replace, stable=False)
    n, d, lamf = params.n, params.d, params.lam
    stable = params.lam_exact < 1
    replications = check_positive_int("replications", replications)
    if client is not None:
        if not callable(getattr(client, "submit", None)):
            raise TypeError(f"client must be a dask.distributed.Client (or None); got {type(client).__name__}")
        if workers is not None:
            raise ValueError("workers and client exclude each other (the cluster has its own workers)")
        if precision is not None:
            raise ValueError("precision= cannot run on a client: its stretches are planned from all "
                             "replications together and keep every chain alive between them; run it locally "
                             "(client=None, --scheduler not given)")
    workers = (min(replications, os.cpu_count() or 1) if workers is None
               else check_positive_int("workers", workers))
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
    # events in the horizon (expected, for `time` in continuous mode)
    events_h = horizon[1] * rate if (continuous and horizon[0] == "time") else horizon[1]
    if batches is None:
        B = BATCHES
        while B > 1 and B > events_h:
            B //= 2
    else:
        B = check_positive_int("batches", batches, maximum=2**20)
        if not (continuous and horizon[0] == "time") and B > events_h:
            raise ValueError(f"batches must be <= the number of measured steps ({int(events_h)}); got {B}")
    if precision is not None:
        precision = check_positive_float("precision", precision)
        if not precision < 1:
            raise ValueError(f"precision must lie in (0, 1) (a relative half-width); got {precision!r}")
        if B < 4:
            raise ValueError("precision needs at least 4 batches (give more steps)")
    if max_steps is not None:
        max_steps = _check_steps(max_steps) if not isinstance(max_steps, float) else _check_steps(max_steps)
        if precision is None:
            raise ValueError("max_steps caps a run with precision=; give precision too")
        if max_steps < events_h:
            raise ValueError(f"max_steps must be >= the first stretch of the run ({int(events_h)} steps); "
                             f"got {max_steps}")
    elif precision is not None:
        max_steps = max(int(40 * DEFAULT_STEPS), int(events_h))
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

    # with precision= every replication's chain stays alive between stretches
    _check_memory(engine, n, d, params.replace, replications, replications if precision is not None else workers)

    # good set (docs/model.md §5): only for λ < 1 and d >= 2
    k = None
    lo = hi = None
    if stable and d >= 2:
        k = _th.k_lambda_d(d, lam_in)
        lo, hi = _th.good_set_bounds(n, d, lamf, eps, k)

    # start state
    perfect_start = isinstance(start, str) and start.strip().lower() == "perfect"
    if perfect_start and not stable:
        raise ValueError("start 'perfect' needs load < 1: an exact stationary sample exists only then")
    name, val = ("perfect", None) if perfect_start else parse_start(start)
    lengths = None
    if perfect_start:
        counts0 = np.zeros(0, dtype=np.int64)  # each replication draws its own exact sample below
        if burn_in is None:
            burn = 0.0  # the start is already stationary (docs/model.md §12): nothing to forget
    elif name == "array" and np.issubdtype(val.dtype, np.integer):
        if val.ndim != 1 or val.size != n:
            raise ValueError(f"start queue-lengths vector must have n={n} entries; got shape {val.shape}")
        lengths = val.astype(np.int64)
        counts0 = counts_from_lengths(lengths)
    else:
        counts0 = start_counts(n, d, lam_in if stable else lamf, start)

    if record_every is not None:
        record_every = (check_positive_float("record_every", record_every) if continuous
                        else float(check_positive_int("record_every", record_every)
                                   if not isinstance(record_every, float) else
                                   check_positive_float("record_every", record_every)))
        span = (max_steps if precision is not None else events_h)
        span_t = span / rate if continuous else span
        if span_t / record_every > MAX_RECORDS:
            raise ValueError(f"record_every={record_every:g} would record {span_t / record_every:.3g} states per "
                             f"replication; at most MAX_RECORDS = {MAX_RECORDS:.0e}: record less often")
    rl = (_default_record_levels(d, lamf) if record_levels is None
          else check_positive_int("record_levels", record_levels, maximum=10_000))
    if record_every is None:
        rl = 0

    # warnings come after validation: bad input raises before any of them
    if not stable:
        warnings.warn(f"load λ = {lam_in} >= 1: the chain has no equilibrium; the time averages describe this "
                      "finite horizon only", RuntimeWarning, stacklevel=2)
    if burn_in is None and stable and name == "empty":
        _warn_short_burn_in(d, lamf, burn / rate if (horizon[0] == "events" or not continuous) else burn)

    spec = dict(params=params, engine=engine, counts0=counts0, lengths=lengths, continuous=continuous, k=k or 0,
                lo=lo, hi=hi, horizon=horizon, burn=burn, batches=B, record_every=record_every or 0.0,
                record_levels=rl, eps=eps, stable=stable, precision=precision, max_steps=max_steps,
                force_window=bool(_force_window), perfect=perfect_start)
    seeds = spawn_seeds(seed, replications)
    stop = threading.Event()
    done_frac = [0.0] * replications
    t0 = _time.perf_counter()
    if perfect_start:
        from . import perfect as _pf
        # replication r starts from an exact stationary sample drawn with its own child
        # stream (PERFECT_CHILD of the replication's seed), independent of the chain's
        reps = [_Rep(dict(spec, counts0=_pf.sample_counts(
            n, d, lam_in, seed=np.random.SeedSequence(seeds[r].entropy, spawn_key=(*seeds[r].spawn_key, PERFECT_CHILD)),
            replace=params.replace)), seeds[r], r) for r in range(replications)]
    else:
        reps = [_Rep(spec, seeds[r], r) for r in range(replications)]
    interrupted = False
    precision_state = None
    if client is not None:
        reps, interrupted = _run_on_client(reps, client)
        wall = _time.perf_counter() - t0
        res = _summarize(spec, reps, wall, interrupted)
        for msg in res.notes:
            warnings.warn(msg, RuntimeWarning, stacklevel=2)
        return res
    with ThreadPoolExecutor(max_workers=workers) as pool:
        def run_round(fn):
            futs = [pool.submit(fn, rep, stop, done_frac) for rep in reps]
            try:
                _wait_with_progress(futs, done_frac, progress, t0)
            except KeyboardInterrupt:
                stop.set()
                wait(futs)
                return False
            for f in futs:
                f.result()
            return not stop.is_set()

        ok = run_round(_Rep.first_stretch)
        interrupted = not ok
        if ok and precision is not None:
            precision_state = {"target": precision, "met": False, "cap_hit": False, "rounds": 1}
            while True:
                res = _summarize(spec, reps, _time.perf_counter() - t0, False)
                worst, factor = _precision_need(res, precision)
                precision_state["achieved"] = worst
                if factor <= 1.0:
                    precision_state["met"] = True
                    break
                f = 2
                while f < factor and f < B // 2:
                    f *= 2
                done_ev = max(rep.measured_events() for rep in reps)
                while f >= 2 and done_ev * f > max_steps:
                    f //= 2
                if f < 2:
                    precision_state["cap_hit"] = True
                    break
                for rep in reps:
                    rep.plan_extension(f)
                precision_state["rounds"] += 1
                if not run_round(_Rep.extend):
                    interrupted = True
                    break
    wall = _time.perf_counter() - t0
    res = _summarize(spec, reps, wall, interrupted, precision_state=precision_state)
    for msg in res.notes:
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
    return res


def _replication_task(rep: "_Rep") -> "_Rep":
    """One whole replication (burn-in and measurement) as one task of a Dask cluster: the
    same :meth:`_Rep.first_stretch` as the local threads run, with the same seed, so the
    numbers are those of a local run.  Returns the replication with its chain released
    (batch integrals, final state): plain picklable data."""
    stop = threading.Event()  # a cluster task is cancelled, not stopped: never set here
    _Rep.first_stretch(rep, stop, [0.0] * (rep.r + 1))
    return rep


def _run_on_client(reps, client):
    """Run every replication as one task on ``client``; ``(finished replications in order,
    interrupted)``.  On Ctrl-C the unfinished tasks are cancelled and the replications that
    finished whole are kept (the result is then partial); none finished: KeyboardInterrupt."""
    from . import parallel

    done = {}
    try:
        parallel.map_tasks(_replication_task, reps, client=client, collect=False,
                           on_result=lambda i, value, error: done.__setitem__(i, value))
    except KeyboardInterrupt:
        if not done:
            raise KeyboardInterrupt("interrupted before any replication finished on the cluster") from None
        return [done[i] for i in sorted(done)], True
    return [done[i] for i in range(len(reps))], False


def _precision_need(res: "SimulationResult", precision: float):
    """``(worst relative half-width, factor by which the run should grow)`` for the
    quantities a precision target covers: the mean queue length and every level with
    ``E[u_i] >= PRECISION_LEVEL_MIN``.  An unreliable one asks for a factor 4."""
    targets = [(res.mean_queue_length, res.mean_queue_length_half_width, res.mean_queue_length_reliable)]
    for i, u in enumerate(res.u_mean):
        if u >= PRECISION_LEVEL_MIN:
            targets.append((u, res.u_half_width[i], bool(res.u_reliable[i])))
    worst = 0.0
    factor = 1.0
    for value, hw, rel in targets:
        r = hw / abs(value) if value != 0 and math.isfinite(hw) else math.inf
        worst = max(worst, r)
        if not rel:
            factor = max(factor, 4.0)
        elif r > precision:
            factor = max(factor, 1.2 * (r / precision) ** 2)
    return worst, factor


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


class _Rep:
    """One replication: a :class:`Chain` and the time integrals of each of its batches.

    The measured stretch is cut into batches of equal length ``h`` (time, or events in
    continuous mode with ``steps``); batch ``b`` ends at ``num·(b+1)/den`` after the start of
    the measurement, so that extending a run (``precision``) merges batches in groups of
    ``f`` and goes on with batches ``f`` times longer: the batches always stay equal.
    """

    def __init__(self, spec, ss, r):
        self.spec = spec
        self.r = r
        self.ss = ss
        self.ch = None
        self.final = None
        kind, H = spec["horizon"]
        self.kind = kind
        self.num = H if kind == "time" else int(H)  # batch length = num/den
        self.den = spec["batches"]
        self.target_batches = spec["batches"]
        self.rows = {"c": [], "P": [], "max": [], "good": [], "T": [], "complete": []}
        self.burn_events = 0
        self.t_meas0 = 0.0
        self.ev_meas0 = 0
        self.partial = False
        self.wall = 0.0
        self.total_work = spec["burn"] + H

    # ------------------------------------------------------------------ running
    def _chain(self):
        spec = self.spec
        ch = Chain(spec["params"], spec["engine"], spec["counts0"], seed_to_uint64(self.ss),
                   continuous=spec["continuous"], k=spec["k"], lo=spec["lo"], hi=spec["hi"], lengths=spec["lengths"],
                   record_levels=spec["record_levels"], _force_window=spec["force_window"])
        # compile (or load from numba's cache) every kernel of the run before the clock starts
        ch.advance(max_events=0)
        ch.measures()
        ch.start_measuring()
        return ch

    def _run_to(self, stop, done_frac, target_time=math.inf, target_events=None):
        """Advance in chunks to a time or an absolute event count; False if stopped."""
        ch = self.ch
        while True:
            if stop.is_set():
                return False
            if target_events is not None:
                left = target_events - ch.events
                if left <= 0:
                    return True
                ch.advance(max_events=min(left, CHUNK_EVENTS))
                done_frac[self.r] = min(ch.events / self.total_work, 1.0)
            else:
                if ch.now >= target_time:
                    return True
                ch.advance(t_stop=target_time, max_events=CHUNK_EVENTS)
                done_frac[self.r] = min(ch.now / self.total_work, 1.0)

    def events(self) -> int:
        if self.ch is not None:
            return self.ch.events
        return self.final["events"] if self.final is not None else 0

    def measured_events(self) -> int:
        return self.events() - self.burn_events if (self.ch is not None or self.final is not None) else 0

    def result_state(self):
        """``(final counts, final lengths or None, records or None)``."""
        if self.ch is not None:
            ch = self.ch
            return (ch.counts(), ch.lengths() if self.r == 0 else None,
                    ch.records() if self.spec["record_every"] > 0 else None)
        if self.final is not None:
            return self.final["counts"], self.final["lengths"], self.final["records"]
        return np.zeros(0, np.int64), None, None

    @staticmethod
    def first_stretch(rep, stop, done_frac):
        """Burn-in, then the first ``batches`` batches."""
        rep.ch = rep._chain()  # compiles (or loads) every kernel: kept out of the timed work
        t = _time.perf_counter()
        ch = rep.ch
        burn = rep.spec["burn"]
        ok = True
        if burn > 0:
            ok = (rep._run_to(stop, done_frac, target_time=burn) if rep.kind == "time"
                  else rep._run_to(stop, done_frac, target_events=int(burn)))
        rep.burn_events = ch.events
        rep.t_meas0 = ch.now
        rep.ev_meas0 = ch.events
        ch.start_measuring()
        if rep.spec["record_every"] > 0:
            ch.start_recording(rep.spec["record_every"])
        if ok:
            rep._batches(stop, done_frac)
        else:
            rep.partial = True
        rep.wall += _time.perf_counter() - t
        done_frac[rep.r] = 1.0
        if rep.spec["precision"] is None:
            rep.release()

    def release(self):
        """Keep what the result needs and drop the chain (per-queue engines hold 4 bytes per
        server: replications beyond ``workers`` must not all stay in memory)."""
        ch = self.ch
        self.final = {"counts": ch.counts(), "lengths": ch.lengths() if self.r == 0 else None,
                      "records": ch.records() if self.spec["record_every"] > 0 else None, "events": ch.events}
        self.ch = None

    def _batches(self, stop, done_frac):
        ch = self.ch
        while len(self.rows["T"]) < self.target_batches:
            b = len(self.rows["T"])
            t_begin = ch.now
            if self.kind == "time":
                ok = self._run_to(stop, done_frac, target_time=self.t_meas0 + self.num * (b + 1) / self.den)
            else:
                ok = self._run_to(stop, done_frac, target_events=self.ev_meas0 + (self.num * (b + 1)) // self.den)
            m = ch.measures()
            rows = self.rows
            rows["c"].append(m["area_c"])
            rows["P"].append(m["area_P"])
            rows["max"].append(m["maxtime"])
            rows["good"].append(m["good_time"])
            rows["T"].append(ch.now - t_begin)
            rows["complete"].append(ok)
            ch.start_measuring()
            if not ok:
                self.partial = True
                return False
        return True

    def plan_extension(self, f: int):
        """Merge the batches in groups of ``f`` (``f`` a power of two dividing their number)
        and plan as many batches again, ``f`` times longer each."""
        rows = self.rows
        B = len(rows["T"])
        if B % f:
            raise RuntimeError("internal: batches do not divide")  # pragma: no cover
        for key in ("c", "P", "max"):
            L = max(len(a) for a in rows[key])
            M = np.array([_pad(a, L) for a in rows[key]]).reshape(B // f, f, L).sum(axis=1)
            rows[key] = list(M)
        for key in ("good", "T"):
            rows[key] = list(np.asarray(rows[key]).reshape(B // f, f).sum(axis=1))
        rows["complete"] = [True] * (B // f)
        self.num = self.num * f
        self.total_work = self.spec["burn"] + self.num

    @staticmethod
    def extend(rep, stop, done_frac):
        t = _time.perf_counter()
        rep._batches(stop, done_frac)
        rep.wall += _time.perf_counter() - t
        done_frac[rep.r] = 1.0

    # ------------------------------------------------------------------ results
    def arrays(self, L):
        """Batch integrals as arrays (batches × levels), zero-padded to ``L`` levels."""
        rows = self.rows
        B = len(rows["T"])
        if B == 0:
            return dict(c=np.zeros((0, L)), P=np.zeros((0, L)), max=np.zeros((0, L + 1)), good=np.zeros(0),
                        T=np.zeros(0), complete=np.zeros(0, bool))
        return dict(c=np.array([_pad(a, L) for a in rows["c"]]), P=np.array([_pad(a, L) for a in rows["P"]]),
                    max=np.array([_pad(a, L + 1) for a in rows["max"]]), good=np.asarray(rows["good"], float),
                    T=np.asarray(rows["T"], float), complete=np.asarray(rows["complete"], bool))

    def top_level(self) -> int:
        top = 0
        for m in self.rows["max"]:
            nz = np.nonzero(m > 0)[0]
            if nz.size:
                top = max(top, int(nz[-1]))
        return top


def _pad(a, L):
    out = np.zeros(L)
    m = min(len(a), L)
    out[:m] = a[:m]
    return out


START_UP_Z = 4.0  # first tenth against last half of the run, in standard errors


def _start_up(q):
    """Start-up bias of one replication from the batch means ``q`` of the queue length:
    ``(batches to drop, forgotten)``.  Detection: the first tenth of the run against its
    last half, in standard errors scaled from the whole run's blocking estimate (``|z| >
    START_UP_Z``).  If they disagree, MSER-5 (grouped at least as coarsely as the blocking
    plateau, so that the groups are nearly uncorrelated) chooses the truncation, and the
    test is repeated on what is left; if MSER wants more than half, or the rest still
    disagrees, the start was not forgotten.  When the error itself is unknown, nothing is
    dropped (the quantities are flagged unreliable anyway)."""
    est = _st.blocking(q)
    if not est.reliable or not est.stderr > 0:
        return 0, True
    sigma = est.stderr * math.sqrt(q.size)  # s.d. of one batch mean's contribution

    def disagree(x):
        a, b = x[: max(x.size // 10, 1)], x[x.size // 2:]
        se = sigma * math.sqrt(1.0 / a.size + 1.0 / b.size)
        return abs(a.mean() - b.mean()) > START_UP_Z * se

    if not disagree(q):
        return 0, True
    m = _st.mser(q, group=int(max(5, est.block_size)))
    if not m.forgotten or disagree(q[m.truncate:]):
        return m.truncate, False
    return m.truncate, True


def _ratio_series(a, T):
    """Batch values of a time average ``Σa/ΣT`` as equally weighted terms (delta method):
    ``ā + (a_b − ā T_b)/T̄``; their mean is ``ā``, and for equal ``T_b`` they are ``a_b/T_b``."""
    abar = a.sum() / T.sum()
    return abar + (a - abar * T) / T.mean()


def _estimate(parts, min_blocks=MIN_BLOCKS) -> ErrorEstimate:
    """Combine replications: ``parts`` is a list of ``(a, T)`` (batch integrals and batch
    lengths of the batches kept for the error analysis).  One replication: blocking.
    Several: the blocking errors pooled when every one is reliable; otherwise the spread
    between replications (Student t, R − 1 degrees of freedom)."""
    parts = [(a, T) for a, T in parts if T.size > 0 and T.sum() > 0]
    if not parts:
        return ErrorEstimate(math.nan, math.nan, math.nan, math.nan, math.nan, False, "none", 0, 1,
                             "nothing measured")
    ests = [_st.blocking(_ratio_series(a, T), min_blocks=min_blocks) if T.size >= 2 else
            ErrorEstimate(float(a.sum() / T.sum()), math.nan, math.nan, math.nan, math.nan, False, "blocking", 1, 1,
                          "too short to estimate: one batch")
            for a, T in parts]
    if len(parts) == 1:
        return ests[0]
    w = np.array([T.sum() for _, T in parts])
    means = np.array([a.sum() / T.sum() for a, T in parts])
    mean = float(np.dot(w, means) / w.sum())
    if all(e.reliable for e in ests):
        ww = w / w.sum()
        terms = np.array([(wi * e.stderr) ** 2 for wi, e in zip(ww, ests)])
        var = float(terms.sum())
        se = math.sqrt(var)
        dof = var**2 / float(np.sum(terms**2 / np.array([e.dof for e in ests]))) if var > 0 else math.inf
        n_eff = float(sum(e.n_eff for e in ests))
        blocks = int(sum(e.blocks for e in ests))
        return ErrorEstimate(mean, se, dof, n_eff, math.nan, True, "pooled", blocks, ests[0].block_size, "")
    e = _st.replication_error(means, weights=w)
    return ErrorEstimate(mean, e.stderr, e.dof, e.n_eff, e.tau_int, e.reliable, e.method, e.blocks, 1, e.note)


def _summarize(spec, reps, wall, interrupted, single=False, precision_state=None) -> SimulationResult:
    params = spec["params"]
    n, lamf = params.n, params.lam
    rate = n * (1.0 + lamf)
    continuous = spec["continuous"]
    stable = spec["stable"]
    Lall = max(rep.top_level() for rep in reps) + 1
    arrs = [rep.arrays(Lall) for rep in reps]
    notes = []
    # ---- start-up bias: MSER-5 on the batch means of the queue length, per replication
    startup = []
    keep = []
    for rep, A in zip(reps, arrs):
        comp = np.nonzero(A["complete"] & (A["T"] > 0))[0]
        trunc, forgotten = 0, True
        if stable and comp.size >= 20:
            q = _ratio_series(A["c"][comp].sum(axis=1) / n, A["T"][comp])
            trunc, forgotten = _start_up(q)
        idx = comp[trunc:] if forgotten else comp
        keep.append(idx)
        startup.append({"replication": rep.r, "batches": int(comp.size), "truncated_batches": int(trunc),
                        "truncated_time": float(A["T"][comp[:trunc]].sum() / (1.0 if continuous else rate)),
                        "forgotten": bool(forgotten)})
    forgotten_all = all(s["forgotten"] for s in startup)
    if not forgotten_all:
        bad = [s["replication"] for s in startup if not s["forgotten"]]
        notes.append(f"the start was not forgotten (replication(s) {bad}): MSER-5 would drop more than half of "
                     "the run as start-up transient; give a longer burn-in or run, or start from the fixed point; "
                     "no error bar is marked reliable")
    # ---- the batches kept: levels and time averages
    used = [(A, idx) for A, idx in zip(arrs, keep)]
    Ttot = sum(float(A["T"][idx].sum()) for A, idx in used)
    if Ttot <= 0:  # nothing complete: fall back to every batch measured
        used = [(A, np.nonzero(A["T"] > 0)[0]) for A in arrs]
        Ttot = sum(float(A["T"][idx].sum()) for A, idx in used)
    if Ttot <= 0:
        if interrupted:
            raise KeyboardInterrupt("interrupted during burn-in: nothing was measured yet")
        raise RuntimeError("nothing was measured")  # pragma: no cover - horizons are positive
    mx = sum(A["max"][idx].sum(axis=0) for A, idx in used)
    top = int(np.nonzero(mx > 0)[0][-1]) if np.any(mx > 0) else 0
    L = top + 1
    parts_c = [[(A["c"][idx, i] / n, A["T"][idx]) for A, idx in used] for i in range(L)]
    parts_P = [[(A["P"][idx, i], A["T"][idx]) for A, idx in used] for i in range(L)]
    area_c = sum(A["c"][idx, :L].sum(axis=0) for A, idx in used)
    area_P = sum(A["P"][idx, :L].sum(axis=0) for A, idx in used)
    u_mean = area_c / (n * Ttot)
    ud_mean = area_P / Ttot
    mq = {int(m): float(mx[m] / Ttot) for m in range(L + 1) if mx[m] > 0}
    est_u = [_estimate(p) for p in parts_c]
    est_P = [_estimate(p) for p in parts_P]
    est_q = _estimate([(A["c"][idx, :L].sum(axis=1) / n, A["T"][idx]) for A, idx in used])
    k = spec["k"] or None
    good = (sum(float(A["good"][idx].sum()) for A, idx in used) / Ttot) if k else None
    est_g = _estimate([(A["good"][idx], A["T"][idx]) for A, idx in used]) if k else None
    # rare levels: too few batches ever saw them for an error estimate
    seen = [sum(int(np.count_nonzero(A["c"][idx, i] > 0)) for A, idx in used) for i in range(L)]
    u_rel = np.array([e.reliable and seen[i] >= MIN_BLOCKS and forgotten_all for i, e in enumerate(est_u)])
    u_note = []
    for i, e in enumerate(est_u):
        if not forgotten_all:
            u_note.append("start not forgotten")
        elif seen[i] < MIN_BLOCKS:
            u_note.append(f"rare level: seen in only {seen[i]} batches")
        else:
            u_note.append(e.note)
    # ---- self-checks from exact identities (docs/model.md §9)
    checks = []
    if stable:
        for i in range(L):
            if i == 0:
                parts = [(A["c"][idx, 0] / n - lamf * A["T"][idx], A["T"][idx]) for A, idx in used]
                name = "E[u_1] = λ"
            else:
                parts = [(A["c"][idx, i] / n - lamf * A["P"][idx, i - 1], A["T"][idx]) for A, idx in used]
                name = f"E[u_{i + 1}] = λ·E[P_{i}]"
            e = _estimate(parts)
            z = e.mean / e.stderr if e.stderr > 0 else math.nan
            if not (e.reliable and seen[i] >= MIN_BLOCKS):
                verdict = "inconclusive"
            else:
                verdict = "pass" if abs(z) <= SELF_CHECK_Z else "fail"
            checks.append({"identity": name, "level": i + 1, "difference": e.mean, "stderr": e.stderr, "z": z,
                           "result": verdict})
    failed = [c for c in checks if c["result"] == "fail"]
    if failed:
        c = failed[0]
        notes.append(f"self-check failed: {c['identity']} is off by {abs(c['z']):.1f} standard errors "
                      f"({len(failed)} identity check(s) beyond {SELF_CHECK_Z:g}): the error bars (or the burn-in) "
                      "are too small; no error bar is marked reliable")
        u_rel[:] = False
        u_note = [((x + "; ") if x else "") + "a self-check failed" for x in u_note]
    ok_all = forgotten_all and not failed
    q_rel = bool(est_q.reliable and ok_all)
    if stable and not est_q.reliable and ok_all:
        # the queue length carries the slowest mode (docs/model.md §6): when its error cannot
        # be estimated, a level whose own series looks settled may still drift with it
        for i in range(L):
            if u_rel[i]:
                u_rel[i] = False
                u_note[i] = "too short to estimate: the mean queue length (slowest mode) is not settled"
    g_rel = bool(est_g.reliable and ok_all) if est_g is not None else None
    unrel = [i + 1 for i in range(L) if not u_rel[i] and u_mean[i] > 0 and seen[i] >= MIN_BLOCKS]
    if ok_all and (unrel or not q_rel):
        names = [f"E[u_{i}]" for i in unrel]
        if len(names) > 4:
            names = names[:3] + [f"… E[u_{unrel[-1]}] ({len(unrel)} levels)"]
        what = ", ".join(names + ([] if q_rel else ["the mean queue length"]))
        notes.append(f"run too short to estimate the error of {what}: no blocking plateau with at least "
                     f"{MIN_BLOCKS} blocks (batches shorter than the correlation time); run longer, or use "
                     "precision=/--precision")
    if precision_state is not None and precision_state.get("cap_hit"):
        notes.append(f"precision {precision_state['target']:g} not reached: stopped at max_steps = "
                     f"{spec['max_steps']:,} steps per replication (worst relative half-width "
                     f"{precision_state.get('achieved', math.nan):.3g}); raise max_steps/--max-steps")
    # ---- the rest
    events = sum(rep.measured_events() for rep in reps)
    burn_events = sum(rep.burn_events for rep in reps)
    total_events = sum(rep.events() for rep in reps)
    kernel_wall = sum(rep.wall for rep in reps)
    sim_time = Ttot if continuous else Ttot / rate
    traj = None
    r0 = reps[0]
    counts0, lengths0, records0 = r0.result_state()
    if records0 is not None:
        t, cc, mxr, tot = records0
        traj = Trajectory(t=t - r0.t_meas0, u=cc / n, max=mxr, total=tot)
    per = ()
    if not single and len(reps) > 1:
        per = tuple(_summarize(spec, [rep], rep.wall, interrupted, single=True) for rep in reps)
    lamx = lamf
    hw = lambda e: e.half_width() if math.isfinite(e.stderr) else math.nan  # noqa: E731
    response = _response_times(ud_mean, used, L, params, spec["engine"]) if stable else None
    return SimulationResult(
        params=params, engine=spec["engine"], time_mode="continuous" if continuous else "discrete",
        steps=int(events), burn_in=int(burn_events), sim_time=float(sim_time),
        u_mean=u_mean, u_stderr=np.array([e.stderr for e in est_u]), ud_mean=ud_mean,
        ud_stderr=np.array([e.stderr for e in est_P]), max_queue_dist=mq,
        good_set_fraction=good, good_set_fraction_stderr=(est_g.stderr if k else None), k=k,
        eps=float(spec["eps"]), mean_queue_length=float(u_mean.sum()), mean_queue_length_stderr=est_q.stderr,
        mean_sojourn_time=float(u_mean.sum()) / lamx, mean_sojourn_time_stderr=est_q.stderr / lamx,
        events_per_second=(total_events / kernel_wall if kernel_wall > 0 else math.nan),
        wall_time=float(wall), partial=bool(interrupted or any(rep.partial for rep in reps)),
        replications=len(reps), batches=int(sum(len(rep.rows["T"]) for rep in reps)),
        final_counts=counts0, trajectory=traj, per_replication=per, final_lengths=lengths0,
        u_reliable=u_rel, u_half_width=np.array([hw(e) for e in est_u]),
        u_n_eff=np.array([e.n_eff for e in est_u]), u_note=tuple(u_note),
        mean_queue_length_reliable=q_rel, mean_queue_length_half_width=hw(est_q),
        mean_queue_length_n_eff=est_q.n_eff,
        good_set_fraction_reliable=g_rel, error_method=est_q.method,
        self_checks=tuple(checks), start_up=tuple(startup), notes=tuple(notes), precision=precision_state,
        response=response,
        start_note=("the start is an exact stationary sample (perfect sampling, docs/model.md §12): no burn-in "
                    "was needed" + ("" if burn_events == 0 else f"; {int(burn_events):,} burn-in events were run anyway")
                    if spec.get("perfect") else ""),
    )


def _response_times(ud_mean, used, L, params, engine):
    """Sojourn and waiting time laws (docs/model.md §10) from the time averages of ``P_i``:
    exact given them (PASTA, FIFO).  The standard error of each quantile is the error of a
    linear functional of the ``P_i`` (delta method), estimated on the batch series itself with
    the same blocking analysis as every other time average (docs/model.md §9)."""
    from . import response as _rs

    def stderr_of(g):
        m = min(g.size, L)
        return _estimate([(A["P"][idx, :m] @ g[:m], A["T"][idx]) for A, idx in used]).stderr

    T = np.minimum.accumulate(np.clip(np.asarray(ud_mean, dtype=float), 0.0, 1.0))
    p = params
    return _rs.from_tails(T, stderr_of=stderr_of, source="simulation",
                          params={"n": p.n, "d": p.d, "load": p.lam, "replace": p.replace, "engine": engine})
