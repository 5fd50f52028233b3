"""One replication: :class:`Chain`, the arrays of one chain and the kernel that advances it
(the low-level driver), and ``_Rep``, a chain run in equal batches whose time integrals
:mod:`.estimate` turns into means and error bars (docs/model.md §9).
"""

from __future__ import annotations

import math
import time as _time
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ..engines.buckets import buckets_kernel, lengths_by_queue
from ..engines.layout import STATUS_GROW, STATUS_RECFULL, Measures, Records, Setup, Tables, new_clock
from ..engines.measure import flush, reset_measures
from ..engines.profile import profile_kernel
from ..engines.queues import bitset_words, queues_kernel
from ..engines.rng import new_state
from ..engines.tables import BAD_RULE, FULL_TABLE_MAX_N, LW, WIN, p_table
from ..model import Params, seed_to_uint64
from ..system import policies as _pol

if TYPE_CHECKING:
    from .run import RunPlan

__all__ = ["Chain", "CHUNK_EVENTS"]

CHUNK_EVENTS = 10_000_000  # events per kernel call: a long run is a loop of chunks, so that Ctrl-C is seen


class Chain:
    """The arrays of one replication and the kernel that advances it (low-level driver).

    :func:`simulate` builds one per replication; use it for a loop of your own around a
    kernel.  ``now`` is steps in discrete time, continuous time otherwise.  Nothing here is
    validated beyond what ``Params`` checks.

    Parameters
    ----------
    params : supermarket.model.Params
        n, d, λ, with or without replacement.
    engine : {"profile", "queues", "buckets"}
        The kernel (all exact in law).
    counts : array of int
        Start state as counts ``c_1, c_2, …`` (queues with at least ``i`` customers).
    seed_u64 : int
        Seed of the xoshiro stream (``supermarket.model.seed_to_uint64``).
    continuous : bool, default False
        Exact exponential event times instead of the jump chain.
    k : int, default 0
        ``k_{λ,d}`` for the good-set clock (0: none), with ``lo``, ``hi`` its bounds
        (``supermarket.theory.good_set_bounds``).
    lengths : array of int, optional
        Per-queue engines: the start as queue lengths (else built from ``counts``).
    record_every, record_levels : float, int
        Trajectory records (with :meth:`start_recording`); ``record_levels`` levels each.
    policy : {"jsq-d", "random", "jsq", "jiq", "jbt"}, default "jsq-d"
        The dispatch rule (:mod:`supermarket.system.policies`, docs/model.md §2); every engine
        here runs every rule (``queues``: each rule's definition on the queue lengths).

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

    def __init__(
        self,
        params: Params,
        engine: str,
        counts: ArrayLike,
        seed_u64: int,
        *,
        continuous: bool = False,
        k: int = 0,
        lo: ArrayLike | None = None,
        hi: ArrayLike | None = None,
        lengths: ArrayLike | None = None,
        record_every: float = 0.0,
        record_levels: int = 0,
        policy: str = "jsq-d",
        _force_window: bool = False,
    ) -> None:
        self.params = params
        self.engine = engine
        self.policy = _pol.check_policy(policy)
        if engine == "queues" and "queues" not in _pol.RULES[self.policy].engines:
            only = ", ".join(repr(r.name) for r in _pol.RULES.values() if "queues" in r.engines)
            raise ValueError(
                f"engine 'queues' runs policy {only} only (it samples the d queues); got "
                f"policy={policy!r}: use engine 'profile' or 'buckets'"
            )
        code = _pol.policy_code(self.policy, "queues" if engine == "queues" else "profile")
        n, d = params.n, params.d
        counts = np.asarray(counts, dtype=np.int64)
        L = 32
        while len(counts) + 4 > L or record_levels + 2 > L or k + 3 > L:
            L *= 2
        self.c = np.zeros(L, np.int64)
        self.c[: len(counts)] = counts
        self.meas = Measures(
            stamp=np.zeros(L),
            area_c=np.zeros(L),
            area_P=np.zeros(L),
            maxtime=np.zeros(L + 1),
            good_lo=np.asarray(lo if lo is not None else np.zeros(0), dtype=float),
            good_hi=np.asarray(hi if hi is not None else np.zeros(0), dtype=float),
            good_bad=np.zeros(k + 1, np.int64),
        )
        # ``_force_window`` (tests): the windowed P tables of large n at any n, to compare
        # them with the full table bit for bit
        full = n + 1 <= FULL_TABLE_MAX_N and not _force_window
        self.tables = Tables(
            tab=p_table(n, d, params.replace, code) if full else np.zeros(1),
            win=np.zeros((LW, WIN)),
            winbase=np.full(LW, -10 * WIN, np.int64),
        )
        self.s = new_state(seed_u64)
        lam = params.lam
        self.setup = Setup(
            n=int(n),
            d=int(d),
            replace=bool(params.replace),
            k=int(k),
            continuous=bool(continuous),
            full_table=bool(full),
            rec_levels=int(record_levels),
            p_arrival=lam / (1.0 + lam),
            rate=n * (1.0 + lam),
            policy=code,
        )
        self.clock = new_clock()
        self.continuous = bool(continuous)
        self.clock[0]["t_next"] = self._first_event_time()
        self.record_every = float(record_every)
        self.record_levels = int(record_levels)
        cap = 0
        self.recs = Records(
            t=np.zeros(cap),
            c=np.zeros((cap, max(record_levels, 1)), np.int64),
            max=np.zeros(cap, np.int64),
            total=np.zeros(cap, np.int64),
        )
        self.events = 0
        self._extra: tuple = ()
        self._kernel: Any = profile_kernel
        if engine == "queues":
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
        elif engine != "profile":  # pragma: no cover - validated by simulate()
            raise ValueError(f"unknown engine {engine!r}")
        reset_measures(self.c, self.meas, self.setup, self.clock)

    def _first_event_time(self) -> float:
        if not self.continuous:
            return 1.0
        from ..engines.rng import next_double  # numba function, callable from Python

        v = 1.0 - next_double(self.s)
        return -math.log(v) / self.setup.rate

    @property
    def now(self) -> float:
        return float(self.clock[0]["now"])

    def _grow_levels(self):
        L = self.c.shape[0]
        m = self.meas
        self.c = np.concatenate([self.c, np.zeros(L, np.int64)])
        self.meas = m._replace(
            stamp=np.concatenate([m.stamp, np.full(L, self.now)]),
            area_c=np.concatenate([m.area_c, np.zeros(L)]),
            area_P=np.concatenate([m.area_P, np.zeros(L)]),
            maxtime=np.concatenate([m.maxtime, np.zeros(L)]),
        )

    def _grow_records(self, extra: int):
        cap = self.recs.t.shape[0]
        new = max(2 * cap, cap + extra, 1024)

        def grow(a):
            b = np.zeros((new,) + a.shape[1:], a.dtype)
            b[: a.shape[0]] = a
            return b

        self.recs = Records(*(grow(a) for a in self.recs))

    def advance(self, t_stop: float = math.inf, max_events: int = CHUNK_EVENTS) -> int:
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
            The number of events run.
        """
        done = 0
        while True:
            ev, status = self._kernel(
                *self._extra,
                self.c,
                self.s,
                self.tables,
                self.meas,
                self.recs,
                self.setup,
                self.clock,
                float(t_stop),
                int(max_events - done),
            )
            done += ev
            if status == STATUS_GROW:
                self._grow_levels()
            elif status == STATUS_RECFULL:
                self._grow_records(1024)
            elif status == BAD_RULE:
                raise ValueError(f"policy code {self.setup.policy} is unknown to the {self.engine} kernel")
            else:
                break
        self.events += done
        return done

    def start_recording(self, every: float) -> None:
        """Record the state every ``every`` (steps or time units) from now on."""
        st = self.clock[0]
        st["rec_every"] = float(every)
        st["next_rec"] = self.now
        st["nrec"] = 0

    def start_measuring(self) -> None:
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
        return {
            "area_c": m.area_c.copy(),
            "area_P": m.area_P.copy(),
            "maxtime": m.maxtime.copy(),
            "good_time": float(self.clock[0]["good_time"]),
        }

    def counts(self) -> np.ndarray:
        """The current counts ``c_1, c_2, …`` (a copy), up to the highest occupied level."""
        top = int(self.clock[0]["top"])
        return self.c[:top].copy()

    def records(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
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


class _Rep:
    """One replication: a :class:`Chain` and the time integrals of each of its equal batches
    (batch ``b`` ends at ``num·(b+1)/den`` after the start of the measurement, in time or events).
    """

    def __init__(self, plan: RunPlan, ss: np.random.SeedSequence, r: int):
        self.plan = plan
        self.r = r
        self.ss = ss
        self.ch: Chain | None = None
        self.final: dict | None = None
        self.kind = kind = plan.horizon_kind
        H = plan.horizon
        self.num = H if kind == "time" else int(H)  # batch length = num/den
        self.den = plan.batches
        self.target_batches = plan.batches
        self.rows: dict[str, list] = {"c": [], "P": [], "max": [], "good": [], "T": [], "complete": []}
        self.burn_events = 0
        self.t_meas0 = 0.0
        self.ev_meas0 = 0
        self.partial = False
        self.wall = 0.0
        self.total_work = plan.burn + H

    # ------------------------------------------------------------------ running
    def _chain(self):
        p = self.plan
        ch = Chain(
            p.params,
            p.engine,
            p.counts0,
            seed_to_uint64(self.ss),
            continuous=p.continuous,
            k=p.k,
            lo=p.lo,
            hi=p.hi,
            lengths=p.lengths,
            record_levels=p.record_levels,
            policy=p.policy,
            _force_window=p.force_window,
        )
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
            return (
                ch.counts(),
                ch.lengths() if self.r == 0 else None,
                ch.records() if self.plan.record_every > 0 else None,
            )
        if self.final is not None:
            return self.final["counts"], self.final["lengths"], self.final["records"]
        return np.zeros(0, np.int64), None, None

    def first_stretch(self, stop, done_frac):
        """Burn-in, then the first ``batches`` batches."""
        self.ch = self._chain()  # compiles (or loads) every kernel: kept out of the timed work
        t = _time.perf_counter()
        ch = self.ch
        burn = self.plan.burn
        ok = True
        if burn > 0:
            ok = (
                self._run_to(stop, done_frac, target_time=burn)
                if self.kind == "time"
                else self._run_to(stop, done_frac, target_events=int(burn))
            )
        self.burn_events = ch.events
        self.t_meas0 = ch.now
        self.ev_meas0 = ch.events
        ch.start_measuring()
        if self.plan.record_every > 0:
            ch.start_recording(self.plan.record_every)
        if ok:
            self._batches(stop, done_frac)
        else:
            self.partial = True
        self.wall += _time.perf_counter() - t
        done_frac[self.r] = 1.0
        if self.plan.precision is None:
            self.release()

    def release(self):
        """Keep what the result needs and drop the chain (per-queue engines hold 4 bytes per
        server: replications beyond ``workers`` must not all stay in memory)."""
        counts, lengths, records = self.result_state()
        self.final = {"counts": counts, "lengths": lengths, "records": records, "events": self.ch.events}
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
        self.total_work = self.plan.burn + self.num

    def extend(self, stop, done_frac):
        t = _time.perf_counter()
        self._batches(stop, done_frac)
        self.wall += _time.perf_counter() - t
        done_frac[self.r] = 1.0

    # ------------------------------------------------------------------ results
    def arrays(self, L):
        """Batch integrals as arrays (batches × levels), zero-padded to ``L`` levels."""
        rows = self.rows
        B = len(rows["T"])

        def table(key, width):
            return np.array([_pad(a, width) for a in rows[key]]).reshape(B, width)

        return dict(
            c=table("c", L),
            P=table("P", L),
            max=table("max", L + 1),
            good=np.asarray(rows["good"], float),
            T=np.asarray(rows["T"], float),
            complete=np.asarray(rows["complete"], bool),
        )

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
