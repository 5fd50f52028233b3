"""From the batches of the per-queue event engine's replications to a
:class:`~supermarket.simulation.general.GeneralResult` (docs/model.md §14): the time averages
and customer means with their errors (the spread between replications; one replication's
blocking error, kept but not trusted), the capacity-balance control variate, and the quantiles
of the sojourn and waiting times from per-batch logarithmic histograms (Woodruff's error), and
their empirical distribution functions (:class:`ResponseCounts`, ``--cdf N``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ... import stats as _st
from ...checks import check_int
from ...model import MAX_CDF_POINTS
from ...stats import ErrorEstimate
from .config import GeneralRun
from .result import ClassResult, GeneralResult

HIST_LO, HIST_HI, HIST_BINS = 1e-6, 1e9, 8192
"""Sojourn and waiting times are kept per batch as counts in ``HIST_BINS`` logarithmic bins
over ``[HIST_LO, HIST_HI]`` (a bin is 0.42 % wide; times at or below ``HIST_LO``, such as
zero waits, in bin 0, those above ``HIST_HI`` in the last): quantiles interpolate within a bin."""

_LOG_LO = math.log(HIST_LO)
_SCALE = HIST_BINS / (math.log(HIST_HI) - _LOG_LO)
_EDGES = np.exp(_LOG_LO + np.arange(HIST_BINS + 1) / _SCALE)  # edges of bins 1..HIST_BINS


def _hist(v: np.ndarray) -> np.ndarray:
    idx = np.zeros(v.size, np.int64)
    pos = v > HIST_LO
    idx[pos] = np.minimum((np.log(v[pos]) - _LOG_LO) * _SCALE, HIST_BINS).astype(np.int64) + 1
    return np.bincount(idx, minlength=HIST_BINS + 2).astype(np.int32)


def _hist_quantile(h: np.ndarray, p: float) -> float:
    """The ``p``-quantile of the histogram ``h`` (interpolated log-linearly within a bin)."""
    cum = np.cumsum(h, dtype=np.float64)
    N = cum[-1]
    if N <= 0:
        return math.nan
    target = min(max(p, 0.0), 1.0) * N
    i = int(np.searchsorted(cum, target, side="left"))
    if i == 0:
        return 0.0
    if i > HIST_BINS:
        return math.inf
    below = cum[i - 1]
    frac = (target - below) / h[i] if h[i] > 0 else 0.0
    return float(_EDGES[i - 1] * math.exp(frac / _SCALE))


def _hist_cdf(h: np.ndarray, x: float) -> float:
    """Counts of ``h`` at or below ``x`` (the bin of ``x`` split log-linearly)."""
    if x <= HIST_LO:
        return float(h[0])
    if not math.isfinite(x):
        return float(h.sum())
    pos = (math.log(x) - _LOG_LO) * _SCALE
    i = min(int(pos), HIST_BINS - 1)
    return float(h[: i + 1].sum() + (pos - i) * h[i + 1])


RELAX_FACTOR = 1.0
"""Under random routing, blocks of the error analysis span at least this many relaxation
times of the slowest server's queue (:func:`_relaxation`)."""


def _relaxation(lam, law, sc, policy) -> float:
    """Under ``random`` routing each server is an M/G/1 queue at ``ρ = λ s̄/s``: a relaxation
    time scale of the slowest one, ``1/(s(1 − √ρ)²)`` (the M/M/1 value) times ``(1 + SCV)/2``
    (the heavy-traffic variance factor of M/G/1; SCV at most 100) [derived, a heuristic].  0
    (no floor) for the other rules, which balance the queues and relax faster, and for an
    unstable slow class (ρ >= 1)."""
    if policy != "random":
        return 0.0
    s_min = min(sc.speeds)
    rho = lam * sc.mean_speed / s_min
    if rho >= 1.0:
        return 0.0
    scv = min(law.scv, 100.0) if math.isfinite(law.scv) else 100.0
    return max(1.0, (1.0 + scv) / 2.0) / (s_min * (1.0 - math.sqrt(rho)) ** 2)


ONE_REPLICATION_NOTE = "one replication: its batch-means error runs small on this engine; use replications >= 2"


def _ratio(parts, min_block=1) -> ErrorEstimate:
    """``Σa/ΣT`` from batches ``(a_b, T_b)`` per replication, with its error: with two or more
    replications the spread between them (Student t on ``R − 1`` degrees of freedom); with one,
    the blocking error of the delta-method batch values ``ā + (a_b − āT_b)/T̄``, marked not
    reliable (docs/model.md §14: it runs 20–35 % small on this engine, so no ± is shown)."""
    parts = [(np.asarray(a, float), np.asarray(T, float)) for a, T in parts]
    parts = [(a, T) for a, T in parts if T.size > 0 and T.sum() > 0]
    if not parts:
        return ErrorEstimate(math.nan, math.nan, math.nan, math.nan, math.nan, False, "none", 0, 1, "nothing measured")
    ests = []
    for a, T in parts:
        abar = a.sum() / T.sum()
        if T.size < 2:
            ests.append(
                ErrorEstimate(float(abar), math.nan, math.nan, math.nan, math.nan, False, "blocking", 1, 1, "one batch")
            )
            continue
        ests.append(_st.blocking(abar + (a - abar * T) / T.mean(), min_block_size=min(int(min_block), T.size)))
    if len(parts) == 1:
        e = ests[0]
        if e.reliable:  # calibrated small (benchmarks/calibration/events_calibration.py): kept, not trusted
            return dataclasses.replace(e, reliable=False, note=ONE_REPLICATION_NOTE)
        if not e.note:
            e = ErrorEstimate(
                e.mean,
                e.stderr,
                e.dof,
                e.n_eff,
                e.tau_int,
                False,
                e.method,
                e.blocks,
                e.block_size,
                "no blocking plateau: batches shorter than the correlation time; run longer",
            )
        return e
    w = np.array([T.sum() for _, T in parts])
    means = np.array([a.sum() / T.sum() for a, T in parts])
    mean = float(np.dot(w, means) / w.sum())
    # independent replications: their spread (pooled blocking errors run small on this engine)
    e = _st.replication_error(means, weights=w)
    return ErrorEstimate(mean, e.stderr, e.dof, e.n_eff, e.tau_int, e.reliable, e.method, e.blocks, 1, e.note)


def _controlled(parts, xs, min_block, plain):
    """``plain`` (the estimate of ``Σa/ΣT`` from ``parts``) adjusted by the capacity control:
    per replication the batch values ``y_b = a_b/T_b`` less ``β x_b``, ``x_b`` the batch's busy
    capacity less its known mean (``xs``, one series per replication), ``β`` their regression
    coefficient over all batches (centred within each replication).  Returns the adjusted
    estimate (the replications' spread, or one run's untrusted blocking error, as
    :func:`_ratio`) and the measured variance reduction, or ``(plain, nan)`` when there is
    nothing to gain (docs/model.md §14)."""
    ys = [np.asarray(a, float) / np.asarray(T, float) for a, T in parts]
    if not ys or any(y.size < 2 or y.size != x.size for y, x in zip(ys, xs)):
        return plain, math.nan
    sxy = sum(float(np.dot(y - y.mean(), x - x.mean())) for y, x in zip(ys, xs))
    sxx = sum(float(np.dot(x - x.mean(), x - x.mean())) for x in xs)
    if not sxx > 0:
        return plain, math.nan
    beta = sxy / sxx
    adj = [y - beta * x for y, x in zip(ys, xs)]
    # the gain, as long-run variances of the two series (blocking within each replication)
    vp = sum(_st.blocking(y, min_block_size=min(int(min_block), y.size)).stderr ** 2 for y in ys)
    va = sum(_st.blocking(y, min_block_size=min(int(min_block), y.size)).stderr ** 2 for y in adj)
    if not (math.isfinite(vp) and math.isfinite(va) and va > 0 and vp > va):
        return plain, math.nan
    est = _ratio([(y, np.ones(y.size)) for y in adj], min_block)
    return dataclasses.replace(est, method=est.method + "+cv"), vp / va


class _Estimator:
    """The estimates of one run's measured batches ``runs`` (per replication: the per-batch
    arrays of ``_run_one`` and the batch length): ratios with their errors, blocks of at least
    ``min_block`` batches (:func:`_ratio`), adjusted by the capacity control where
    ``control_variates`` (:func:`_controlled`); the measured variance reductions in ``gains``."""

    def __init__(self, run: GeneralRun, runs: list, control_variates: bool):
        n, sc = run.n, run.sc
        self.top = _top_level(runs)
        self.As = [(_areas(out, run.counts.size, self.top), dt, len(out["area"])) for out, dt in runs]
        # blocks span at least RELAX_FACTOR relaxation times (in batches of the run)
        dt0 = runs[0][1] if runs else 1.0
        self.min_block = max(1, math.ceil(RELAX_FACTOR * _relaxation(run.lam, run.law, sc, run.policy) / dt0))
        self.control_variates = control_variates
        # the capacity control per batch: busy capacity Σ_k s_k c_{k,1} / (n s̄), less λ
        speeds = np.asarray(sc.speeds, float)
        self.xs = [A[:, :, 0] @ speeds / (dt * n * sc.mean_speed) - float(run.lam) for A, dt, B in self.As]
        self.gains: dict = {}

    def ratio(self, parts) -> ErrorEstimate:
        return _ratio(parts, self.min_block)

    def controlled(self, parts, key) -> ErrorEstimate:
        plain = self.ratio(parts)
        if not self.control_variates:
            return plain
        est, g = _controlled(parts, self.xs, self.min_block, plain)
        self.gains[key] = g
        return est

    def levels(self, weight_k, sel, key) -> tuple[list, ErrorEstimate]:
        """Estimates of u_ℓ over the classes ``sel`` (ℓ = 1..top) and of Σ_ℓ u_ℓ."""
        ests = []
        for ell in range(self.top):
            parts = [(A[:, sel, ell].sum(axis=1), np.full(B, dt * weight_k)) for A, dt, B in self.As]
            ests.append(self.controlled(parts, (key, ell)))
        whole = [(A[:, sel, :].sum(axis=(1, 2)), np.full(B, dt * weight_k)) for A, dt, B in self.As]
        return ests, self.controlled(whole, (key, "q"))

    def variance_reduction(self) -> dict | None:
        if not self.control_variates:
            return None
        return {
            "u_mean": [self.gains.get(("all", ell), math.nan) for ell in range(self.top)],
            "mean_queue_length": self.gains.get(("all", "q"), math.nan),
        }


def _class_results(run: GeneralRun, runs: list, est: _Estimator) -> tuple:
    """Per class of servers: its levels, queue length and sojourn time, with their errors."""
    classes = []
    sc, counts = run.sc, run.counts
    for k in range(counts.size):
        ue, mqk = est.levels(int(counts[k]), [k], k)
        sok = est.ratio(
            [
                (np.array([v[k] for v in out["so_sum_k"]]), np.array([v[k] for v in out["cnt_k"]], float))
                for out, _ in runs
            ]
        )
        classes.append(
            ClassResult(
                sc.fractions[k],
                sc.speeds[k],
                int(counts[k]),
                np.array([e.mean for e in ue]),
                np.array([e.stderr for e in ue]),
                mqk,
                sok,
            )
        )
    return tuple(classes)


def _summarize(run: GeneralRun, runs: list, events: int, wall: float, interrupted: bool) -> GeneralResult:
    """The :class:`GeneralResult` of ``run`` from its measured batches ``runs`` (per
    replication: the per-batch arrays of ``_run_one`` and the batch length)."""
    sc, lam, policy = run.sc, run.lam, run.policy
    # the capacity control's mean holds in equilibrium only: random routing with an overloaded
    # class has none, and the control pulled the stable classes' queue lengths to wrong values,
    # so it is not used there
    unstable = [f"{f:g}:{v:g}" for f, v in zip(sc.fractions, sc.speeds) if lam * sc.mean_speed >= v]
    overloaded = float(lam) >= 1.0  # no equilibrium at all: the capacity balance does not hold
    cv_dropped = bool(run.control_variates) and ((policy == "random" and bool(unstable)) or overloaded)
    control_variates = bool(run.control_variates) and not cv_dropped
    est = _Estimator(run, runs, control_variates)
    u_est, mq = est.levels(run.n, list(range(run.counts.size)), "all")
    so = est.ratio([(np.array(out["so_sum"]), np.array(out["cnt"], float)) for out, _ in runs])
    wa = est.ratio([(np.array(out["wa_sum"]), np.array(out["cnt"], float)) for out, _ in runs])
    classes = _class_results(run, runs, est)
    notes = _notes(run.law, policy, unstable if not overloaded else [], cv_dropped, interrupted, overloaded)
    return GeneralResult(
        n=run.n,
        d=run.d,
        lam=lam,
        policy=policy,
        replace=bool(run.replace),
        service=run.law,
        server_classes=sc,
        arrival_rate=run.rate,
        time=run.time,
        burn_in=run.burn_in,
        replications=run.replications,
        batches=run.batches,
        events=events,
        wall_s=wall,
        u_mean=np.array([e.mean for e in u_est]),
        u_stderr=np.array([e.stderr for e in u_est]),
        mean_queue_length=mq,
        sojourn=so,
        waiting=wa,
        sojourn_quantiles=_quantiles(runs, "h_so", run.qs, est.ratio),
        waiting_quantiles=_quantiles(runs, "h_wa", run.qs, est.ratio),
        classes=classes,
        customers=int(sum(sum(out["cnt"]) for out, _ in runs)),
        interrupted=interrupted,
        notes=notes,
        control_variates=bool(control_variates),
        variance_reduction=est.variance_reduction(),
        cdf_counts=response_counts(runs, est.min_block, settles=not (policy == "random" and unstable)),
    )


def _top_level(runs) -> int:
    """The highest level occupied in any batch of any replication (at least 1)."""
    top = 1
    for out, _ in runs:
        for a in out["area"]:
            nz = np.nonzero(a[:, 1:].sum(axis=0))[0]
            if nz.size:
                top = max(top, int(nz[-1]) + 1)
    return top


def _areas(out, K: int, top: int) -> np.ndarray:
    """One replication's level integrals, batches x ``K`` classes x levels 1..``top``."""
    B = len(out["area"])
    A = np.zeros((B, K, top))
    for b, a in enumerate(out["area"]):
        m = min(a.shape[1] - 1, top)
        A[b, :, :m] = a[:, 1 : 1 + m]
    return A


def _quantiles(runs, key: str, qs, R) -> dict:
    """The quantiles ``qs`` of the pooled histogram ``key`` (``"h_so"``, ``"h_wa"``), with
    Woodruff's error: the batch-means error ``σ_F`` (``R``: the run's ratio estimator) of the
    empirical cdf at the quantile, mapped through the quantile function,
    ``(Q(p + 2σ_F) − Q(p − 2σ_F))/4``."""
    res = {}
    if not runs:
        return {q: R([]) for q in qs}
    H = [np.array(out[key], dtype=np.int64) for out, _ in runs]  # batches x bins
    tot = sum(h.sum(axis=0) for h in H)
    for q in qs:
        x = _hist_quantile(tot, q)
        F = R([(np.array([_hist_cdf(hb, x) for hb in h]), h.sum(axis=1).astype(float)) for h in H])
        if math.isfinite(F.stderr):
            se = (_hist_quantile(tot, q + 2 * F.stderr) - _hist_quantile(tot, q - 2 * F.stderr)) / 4.0
        else:
            se = math.nan
        res[q] = ErrorEstimate(
            x,
            se,
            F.dof,
            F.n_eff,
            F.tau_int,
            F.reliable and math.isfinite(se),
            "woodruff+" + F.method,
            F.blocks,
            F.block_size,
            F.note,
        )
    return res


def _notes(law, policy: str, unstable: list, cv_dropped: bool, interrupted: bool, overloaded: bool = False) -> tuple:
    """The notes of a run: the law's own, overloaded classes under random routing, the control
    variate dropped for them or for a load >= 1 (``overloaded``), an interrupted run."""
    notes = []
    if law.note:
        notes.append(law.note)
    if policy == "random" and unstable:
        notes.append(
            f"under random routing the servers of class {', '.join(unstable)} get more work than they "
            "can serve (λ·s̄ >= speed): their queues grow without bound and their averages do not settle"
        )
    if cv_dropped and overloaded:
        notes.append(
            "no control variate: capacity balance Σ f s E[u_1] = λ s̄ holds only in equilibrium, and at load "
            "λ >= 1 there is none (the servers' capacity falls short of the arrivals)"
        )
    elif cv_dropped:
        notes.append(
            "no control variate: capacity balance Σ f s E[u_1] = λ s̄ holds only in equilibrium, "
            "and an overloaded class never reaches one"
        )
    if interrupted:
        notes.append("interrupted (Ctrl-C): the result holds the batches completed")
    return tuple(notes)


CDF_TOP_QUANTILE = 0.999
"""The grid of :meth:`ResponseCounts.grid` ends at 1.1 × the sojourn quantile of this order (p99.9)."""


@dataclass(frozen=True, eq=False)
class ResponseCounts:
    """The measured sojourn and waiting times of a run, binned, per replication.

    Attributes
    ----------
    sojourn, waiting : tuple of numpy.ndarray
        Per replication, a ``batches x width`` array of counts in the bins ``offset`` to
        ``offset + width − 1`` of the engine's logarithmic histogram (the bins outside are
        empty); one row, the replication's totals, when there are several replications.
    offset : int
        The first bin kept.
    min_block : int
        The least block of the one-replication blocking error (the engine's relaxation floor).
    settles : bool
        False when a class of servers is overloaded (random routing): the times then grow
        without bound and the CDF has no error bar.
    """

    sojourn: tuple
    waiting: tuple
    offset: int
    min_block: int
    settles: bool = True

    def _below(self, H: np.ndarray, cum: np.ndarray, x: float) -> np.ndarray:
        """Per row of ``H`` (``cum`` its cumulative sums along the bins), the counts at or below
        ``x`` (the bin of ``x`` split log-linearly, as the quantiles interpolate)."""
        width = H.shape[1]

        def upto(g: int) -> np.ndarray:  # counts in the bins 0..g
            j = g - self.offset
            if j < 0:
                return np.zeros(H.shape[0])
            return cum[:, min(j, width - 1)]

        if x <= HIST_LO:
            return upto(0)
        if not math.isfinite(x):
            return cum[:, -1]
        pos = (math.log(x) - _LOG_LO) * _SCALE
        i = min(int(pos), HIST_BINS - 1)
        j = i + 1 - self.offset
        nxt = H[:, j].astype(np.float64) if 0 <= j < width else np.zeros(H.shape[0])
        return upto(i) + (pos - i) * nxt

    def _total(self, kind: str) -> np.ndarray:
        full = np.zeros(HIST_BINS + 2, np.int64)
        rows = sum(h.sum(axis=0) for h in getattr(self, kind))
        full[self.offset : self.offset + len(rows)] = rows
        return full

    def grid(self, points: int) -> np.ndarray:
        """``points`` equally spaced times from 0 to 1.1 × the measured sojourn p99.9 (10 when
        nothing was measured).

        Parameters
        ----------
        points : int
            Number of grid points, from 2 to :data:`supermarket.model.MAX_CDF_POINTS`
            (ValueError naming ``cdf_points`` otherwise).

        Returns
        -------
        numpy.ndarray
            The times, in mean service times.
        """
        points = check_int("cdf_points", points, minimum=2, maximum=MAX_CDF_POINTS)
        top = _hist_quantile(self._total("sojourn"), CDF_TOP_QUANTILE)
        if not (math.isfinite(top) and top > 0):
            top = 10.0 / 1.1
        return np.linspace(0.0, 1.1 * top, points)

    def cdf(self, points: int) -> dict:
        """The sojourn and waiting CDFs on :meth:`grid`, with their errors.

        Parameters
        ----------
        points : int
            Number of grid points (:meth:`grid`).

        Returns
        -------
        dict
            ``t``, ``sojourn`` (``P(S ≤ t)``), ``waiting`` (``P(W ≤ t)``; at ``t = 0`` the atom
            ``P(W = 0)``), the fractions of the measured customers, and ``sojourn_stderr``,
            ``waiting_stderr``: their standard errors between replications, None where there
            is no trusted error (one replication, or an overloaded class) and where every
            replication gave the same fraction (``P(S ≤ 0) = 0``, as a sojourn is positive; 1 past
            every measured time): a spread of 0 is no error bar.
        """
        g = self.grid(points)
        out: dict = {"t": g.tolist()}
        for kind in ("sojourn", "waiting"):
            values, errors = [], []
            hs = getattr(self, kind)
            cums = [np.cumsum(h, axis=1, dtype=np.float64) for h in hs]
            for x in g:
                parts = [(self._below(h, c, float(x)), c[:, -1]) for h, c in zip(hs, cums)]
                e = _ratio(parts, self.min_block)
                values.append(float(e.mean))
                ok = self.settles and e.reliable and math.isfinite(e.stderr) and e.stderr > 0
                errors.append(float(e.stderr) if ok else None)
            out[kind] = values
            out[f"{kind}_stderr"] = errors
        return out


def response_counts(runs: list, min_block: int, settles: bool = True) -> ResponseCounts:
    """The :class:`ResponseCounts` of the measured batches ``runs`` (per replication: the
    per-batch arrays of the engine, with the histograms ``h_so`` and ``h_wa``, and the batch
    length)."""
    hists = {}
    lo, hi = HIST_BINS + 1, 0
    for key in ("h_so", "h_wa"):
        H = [np.asarray(out[key], dtype=np.int64).reshape(-1, HIST_BINS + 2) for out, _ in runs]
        if len(H) > 1:  # several replications: their totals are all their spread needs
            H = [h.sum(axis=0, keepdims=True) for h in H]
        hists[key] = H
        for h in H:
            nz = np.nonzero(h.sum(axis=0))[0]
            if nz.size:
                lo, hi = min(lo, int(nz[0])), max(hi, int(nz[-1]))
    if hi < lo:
        lo, hi = 0, 0
    trim = {key: tuple(h[:, lo : hi + 1].copy() for h in H) for key, H in hists.items()}
    return ResponseCounts(trim["h_so"], trim["h_wa"], lo, int(min_block), bool(settles))
