"""Simulation of the supermarket model with phase-type service (docs/model.md §13): the
friendly layer over :func:`supermarket.engines.phase.phase_kernel`.

:func:`simulate_phase` validates its input, runs the counts chain ``N[ℓ, φ]`` (queues of
length ``ℓ`` whose customer in service is in phase ``φ``) for a burn-in and then for
``batches`` batches of equal duration, and returns a :class:`PhaseRun`: the time averages
``E[u_ℓ]`` (``u_ℓ = c_ℓ/n``, the share of queues with at least ``ℓ`` customers), ``E[P_ℓ]``
and ``E[N[ℓ, φ]/n]``, with autocorrelation-aware standard errors (blocking of the batch
means, :func:`supermarket.stats.blocking`), control-variate estimates of ``E[u_ℓ]`` and the
self-checks of the exact identities of §13:

- (I1) flow across level ``ℓ`` (customers in places ``>= ℓ``): ``E[Σ_φ t0_φ N_{>=ℓ, φ}/n] =
  λ E[P_{ℓ−1}]`` for every ``ℓ >= 1`` (``P_0 = 1``; ``N_{>=ℓ, φ} = Σ_{i>=ℓ} N[i, φ]``);
- (I2) phase balance of the servers: ``E[B_φ/n] = λ (α(−T)^{-1})_φ`` (``B_φ`` = busy servers in
  phase ``φ``), and so ``E[u_1] = λ`` (their sum: the mean is 1).

(I1) is the control variate of ``E[u_ℓ]`` (for exponential service it is ``E[u_ℓ] = λ
E[P_{ℓ−1}]``, docs/model.md §3); both are reported as z-scores, which an exact chain keeps
of order 1.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from ..checks import check_int, check_positive_float
from ..engines.phase import BAD_RULE, POLICY_JSQD, STATUS_GROW, close_all, p_jbt, p_of, phase_kernel, phase_tables
from ..engines.rng import state_from_seed_sequence
from ..engines.tables import JBT, JIQ
from ..model import SeedLike, as_seed_sequence, check_load
from ..stats import blocking
from ..system import policies as _pol
from ..system.phase_law import check_ph
from . import records as _rec

__all__ = ["PhaseRun", "simulate_phase", "law_arrays", "PhaseChain", "MIN_CROSSINGS"]

_CHUNK_EVENTS = 1 << 24
MIN_CROSSINGS = 100
"""Fewest expected arrivals into a level for its (I1) z-score."""


def law_arrays(alpha: np.ndarray, T: np.ndarray, t0: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(alpha_cum, mu, move_cum)`` for the kernel (see :func:`.engines.phase.phase_kernel`)."""
    K = alpha.size
    alpha_cum = np.cumsum(alpha)
    alpha_cum[-1] = 1.0
    mu = -np.diag(T).copy()
    moves = T.copy()
    np.fill_diagonal(moves, 0.0)
    move_cum = np.empty((K, K + 1))
    move_cum[:, :K] = np.cumsum(moves, axis=1)
    move_cum[:, K] = mu
    for ph in range(K):
        if t0[ph] == 0.0:  # no completion from this phase: no rounding may create one
            move_cum[ph, K - 1] = mu[ph]
    return alpha_cum, mu, move_cum


class PhaseChain:
    """The state of one phase-type counts chain and its integrals (grown on demand).

    ``run(t_stop)`` advances it to time ``t_stop``; ``events`` counts the events done.
    """

    def __init__(
        self,
        n: int,
        d: int,
        lam: float,
        alpha: np.ndarray,
        T: np.ndarray,
        t0: np.ndarray,
        *,
        replace: bool,
        seed: np.random.SeedSequence,
        holding_exp: bool,
        levels: int = 16,
        policy: int = POLICY_JSQD,
    ):
        K = alpha.size
        self.n, self.K = n, K
        self.N = np.zeros((levels, K), np.int64)
        self.B = np.zeros(K, np.int64)
        self.c = np.zeros(levels, np.int64)
        self.c[0] = n
        self.P = np.zeros(levels)
        self.P[0] = 1.0
        self.ints = np.zeros(2, np.int64)
        self.areaN = np.zeros((levels, K))
        self.stampN = np.zeros((levels, K))
        self.areaP = np.zeros(levels)
        self.stampP = np.zeros(levels)
        self.joined = np.zeros((levels, K), np.int64)  # arrivals by the (length, phase) they join
        self.law = law_arrays(alpha, T, t0)
        self.policy = int(policy)
        self.setup = (np.int64(n), float(lam), np.int64(d), bool(replace), np.int64(policy), bool(holding_exp))
        self.tab = phase_tables(self.policy, n, d, bool(replace))
        self.s = state_from_seed_sequence(seed)
        self.clock = np.array([0.0, -1.0])
        self.events = 0

    def set_counts(self, N: ArrayLike) -> None:
        """Start from the counts ``N[ℓ, φ]`` (rows ``ℓ = 1..``; row 0 is ignored), with the
        derived ``c``, ``B``, ``P``, the maximum and the total; time and integrals restart at 0."""
        N = np.asarray(N, dtype=np.int64)
        L = max(N.shape[0] + 2, self.N.shape[0])
        K = self.K
        if N.shape[1] != K or np.any(N < 0) or N[1:].sum() > self.n:
            raise ValueError(f"N: counts must be >= 0, with {K} phases and at most n = {self.n} busy queues")
        self.N = np.zeros((L, K), np.int64)
        self.N[1 : N.shape[0]] = N[1:]
        self.B = self.N.sum(axis=0)
        self.c = np.cumsum(self.N.sum(axis=1)[::-1])[::-1].copy()
        self.c[0] = self.n
        self.P = np.array(
            [
                float(self.tab[x])
                if self.tab.size
                else p_of(self.policy, int(x), int(self.setup[0]), int(self.setup[2]), self.setup[3], self.tab)
                for x in self.c
            ]
        )
        if self.policy == JIQ and self.c[1] < self.n:  # join-idle-queue: P_ℓ = 1{c_1 = n}·c_ℓ/n
            self.P[1:] = 0.0
        if self.policy == JBT:  # join-below-threshold: P_ℓ reads c_T (T = d) too
            self.P = np.array([1.0] + [p_jbt(self.c, j, self.n, int(self.setup[2])) for j in range(1, L)])
        top = int(np.max(np.nonzero(self.c[1:])[0], initial=-1)) + 1
        self.ints = np.array([top, int(self.c[1:].sum())], np.int64)
        self.areaN = np.zeros((L, K))
        self.stampN = np.zeros((L, K))
        self.areaP = np.zeros(L)
        self.stampP = np.zeros(L)
        self.joined = np.zeros((L, K), np.int64)
        self.clock = np.array([0.0, -1.0])

    def _grow(self):
        L, K = self.N.shape
        now = self.clock[0]
        for name in ("N", "areaN", "joined"):
            a = getattr(self, name)
            setattr(self, name, np.concatenate([a, np.zeros((L, K), a.dtype)]))
        self.stampN = np.concatenate([self.stampN, np.full((L, K), now)])
        for name in ("c", "P", "areaP"):
            a = getattr(self, name)
            setattr(self, name, np.concatenate([a, np.zeros(L, a.dtype)]))
        self.stampP = np.concatenate([self.stampP, np.full(L, now)])

    def run(self, t_stop: float, rec: _rec.Recorder | None = None) -> None:
        """Advance to time ``t_stop``; with ``rec`` (started), in chunks that end on its grid of
        events, each recorded (the kernel keeps its state between calls: the same numbers)."""
        while True:
            state = (self.N, self.B, self.c, self.P, self.ints)
            meas = (self.areaN, self.stampN, self.areaP, self.stampP, self.joined)
            stop, cap = float(t_stop), _rec.cap(rec, _CHUNK_EVENTS)  # a call ends on the records' grid
            ev, status = phase_kernel(state, meas, self.law, self.setup, self.tab, self.s, self.clock, stop, cap)
            self.events += int(ev)
            if status == BAD_RULE:
                raise ValueError(f"policy code {self.policy} is unknown to the phase kernel")
            _rec.count(rec, int(ev), float(self.clock[0]), self.c)
            if status == STATUS_GROW:
                self._grow()
            elif self.clock[0] >= t_stop:
                return

    def run_events(self, events: int) -> None:
        """Advance by exactly ``events`` events (no time limit)."""
        left = int(events)
        while left > 0:
            state = (self.N, self.B, self.c, self.P, self.ints)
            meas = (self.areaN, self.stampN, self.areaP, self.stampP, self.joined)
            ev, status = phase_kernel(state, meas, self.law, self.setup, self.tab, self.s, self.clock, math.inf, left)
            self.events += int(ev)
            left -= int(ev)
            if status == BAD_RULE:
                raise ValueError(f"policy code {self.policy} is unknown to the phase kernel")
            if status == STATUS_GROW:
                self._grow()

    def integrals(self) -> tuple[np.ndarray, np.ndarray]:
        """``(∫N dt, ∫P dt)`` closed up to now (copies)."""
        close_all(self.N, self.P, self.areaN, self.stampN, self.areaP, self.stampP, self.clock[0])
        return self.areaN.copy(), self.areaP.copy()


@dataclass(frozen=True)
class PhaseRun:
    """Time averages of a phase-type run (docs/model.md §13); level ``ℓ`` at index ``ℓ − 1``.

    Attributes
    ----------
    n, d, lam, replace, alpha, T : the model (``alpha``, ``T`` as lists).
    t_end, burn_in, batches, events, holding : the run (``holding``: ``"mean"`` or ``"exp"``).
    u_mean, u_stderr : ``E[u_ℓ]`` and its standard error (blocking of the batch means).
    u_mean_cv, u_stderr_cv : ``E[u_ℓ]`` with the control variate (I1).
    ud_mean, ud_stderr : ``E[P_ℓ]`` (for JSQ(d) with replacement the time average of ``u_ℓ^d``).
    phase_mean : ``E[N[ℓ, φ]/n]`` (rows: levels).
    busy_mean, busy_stderr, busy_exact : ``E[B_φ/n]`` and its value ``λ (α(−T)^{-1})_φ`` (I2).
    flow_z : z-scores of (I1), one per level (NaN where blocking finds no trusted error bar or
        fewer than :data:`MIN_CROSSINGS` arrivals are expected into the level: the count of
        crossings is then too small for a normal error bar).
    busy_z : z-scores of (I2), one per phase.
    mean_queue_length, mean_queue_length_stderr : ``E[Σ_ℓ u_ℓ]`` (plain).
    reliable : whether every standard error came from a blocking plateau.
    """

    n: int
    d: int
    lam: float
    replace: bool
    alpha: list
    T: list
    t_end: float
    burn_in: float
    batches: int
    events: int
    holding: str
    u_mean: np.ndarray
    u_stderr: np.ndarray
    u_mean_cv: np.ndarray
    u_stderr_cv: np.ndarray
    ud_mean: np.ndarray
    ud_stderr: np.ndarray
    phase_mean: np.ndarray
    busy_mean: np.ndarray
    busy_stderr: np.ndarray
    busy_exact: np.ndarray
    flow_z: np.ndarray
    busy_z: np.ndarray
    mean_queue_length: float
    mean_queue_length_stderr: float
    reliable: bool
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready dictionary (arrays as lists)."""
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in asdict(self).items()}


def _cv(y, z):
    """Control-variate mean of the series ``y`` with the mean-zero series ``z``: ``ȳ − β z̄``,
    ``β = cov(y, z)/var(z)`` from the batches, error by blocking of ``y − β z``."""
    vz = float(np.var(z))
    beta = float(np.mean((y - y.mean()) * (z - z.mean())) / vz) if vz > 0 else 0.0
    return blocking(y - beta * z)


def simulate_phase(
    n: int,
    d: int,
    lam: float | str,
    alpha: ArrayLike,
    T: ArrayLike,
    *,
    t_end: float = 2000.0,
    burn_in: float | None = None,
    batches: int = 128,
    replace: bool = True,
    seed: SeedLike = None,
    holding: str = "mean",
    start: str = "empty",
    policy: str = "jsq-d",
) -> PhaseRun:
    """Simulate JSQ(d), or another dispatch rule, with phase-type service ``PH(α, T)`` of
    mean 1 (docs/model.md §13).

    Parameters
    ----------
    n, d : int
        Servers ``n >= 1`` and choices ``1 <= d`` (``d <= n`` without replacement).
    lam : float
        Load ``0 < λ < 1`` (arrivals at rate ``nλ``; the service mean is 1).
    alpha, T : array_like
        The phase-type representation (:func:`supermarket.system.phase_law.check_ph`).
    t_end : float
        Measured time after the burn-in (continuous time, service mean 1).
    burn_in : float, optional
        Time discarded first (default ``t_end/10``).
    batches : int
        Batches of equal duration for the error bars (``>= 32``).
    replace : bool
        Sample the ``d`` queues with replacement (default) or without.
    seed : None, int, SeedSequence or Generator
        Randomness (:func:`supermarket.model.as_seed_sequence`).
    holding : ``"mean"`` or ``"exp"``
        Holding times: their conditional means ``1/R`` (default: one logarithm less per event) or exponential
        draws (the path is the process in law); see :mod:`supermarket.engines.phase`.
    start : ``"empty"`` or ``"fixed-point"``
        All queues empty, or the counts ``round(n x)`` of the mean-field fixed point
        (:func:`supermarket.meanfield.phase.phase_fixed_point`; for ``jsq``, ``jiq`` and ``jbt`` the
        fluid fixed point, :func:`supermarket.meanfield.fluid.fluid_shares`; shortens the burn-in at large ``n``).
    policy : {"jsq-d", "random", "jsq", "jiq", "jbt"}
        The dispatch rule (:mod:`supermarket.system.policies`; ``jbt``'s threshold is ``T = d``);
        (I1) and (I2) hold for each.

    Returns
    -------
    PhaseRun

    Raises
    ------
    TypeError, ValueError
        Bad input, naming the parameter, before any work.

    Examples
    --------
    >>> r = simulate_phase(1000, 2, 0.7, [1.0, 0.0], [[-2.0, 2.0], [0.0, -2.0]], t_end=200.0, seed=1)
    >>> bool(abs(r.u_mean[0] - 0.7) < 4.5 * r.u_stderr[0])       # E[u_1] = λ (§13, I2)
    True
    """
    n = check_int("n", n, minimum=1, maximum=1 << 40)
    d = check_int("d", d, minimum=1, maximum=1 << 40)
    if not replace and d > n:
        raise ValueError(f"d: without replacement d must be <= n = {n}, got {d}")
    lam = check_load(lam)
    a, M, t0 = check_ph(alpha, T)
    t_end = check_positive_float("t_end", t_end)
    burn_in = t_end / 10.0 if burn_in is None else float(burn_in)
    if not (math.isfinite(burn_in) and burn_in >= 0.0):
        raise ValueError(f"burn_in: must be a finite time >= 0, got {burn_in!r}")
    batches = check_int("batches", batches, minimum=32, maximum=1 << 20)
    if holding not in ("mean", "exp"):
        raise ValueError(f"holding: must be 'mean' or 'exp', got {holding!r}")
    if not isinstance(replace, (bool, np.bool_)):
        raise TypeError(f"replace: must be a bool, got {type(replace).__name__}")
    if start not in ("empty", "fixed-point"):
        raise ValueError(f"start: must be 'empty' or 'fixed-point', got {start!r}")
    pol = _pol.check_policy(policy)
    ss = as_seed_sequence(seed)

    ch = PhaseChain(
        n,
        d,
        lam,
        a,
        M,
        t0,
        replace=replace,
        seed=ss,
        holding_exp=(holding == "exp"),
        policy=_pol.policy_code(pol, "phase"),
    )
    if start == "fixed-point":
        from .class_starts import phase_start  # the mean field's point, or the fluid one (jsq, jiq)

        ch.set_counts(phase_start(n, d, lam, a, M, pol))
    YN, YP, events = run_batches(ch, burn_in, t_end, batches)
    return summarize_batches(YN, YP, a, M, t0, n, d, lam, replace, t_end, burn_in, batches, events, holding)


def run_batches(
    ch: PhaseChain,
    burn_in: float,
    t_end: float,
    batches: int,
    *,
    joined: list | None = None,
    rec: _rec.Recorder | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Run ``ch`` for ``burn_in`` and then ``batches`` batches of equal duration ``t_end/batches``;
    returns ``(YN, YP, events)``: the batch means of ``N[ℓ, φ]/n`` (batches x levels x
    phases, row 0 empty), of ``P_ℓ`` (batches x levels) and the events after the burn-in.
    With a list ``joined``, each batch's counts of the arrivals by the (length, phase) they
    join (int64 levels x phases, docs/model.md §13.2) are appended to it; with ``rec``, the
    trajectory after the burn-in is recorded into it (:mod:`.records`)."""
    n = ch.n
    ch.run(burn_in)
    _rec.start(rec, float(ch.clock[0]), ch.c)
    events0 = ch.events
    prevN, prevP = ch.integrals()
    ch.joined[:] = 0
    tau = t_end / batches
    bN, bP = [], []
    for b in range(batches):
        ch.run(burn_in + (b + 1) * tau, rec)
        if joined is not None:
            joined.append(ch.joined.copy())
        ch.joined[:] = 0
        aN, aP = ch.integrals()
        L0 = prevN.shape[0]
        dN = aN.copy()
        dN[:L0] -= prevN
        dP = aP.copy()
        dP[:L0] -= prevP
        bN.append(dN / (tau * n))
        bP.append(dP / tau)
        prevN, prevP = aN, aP
    L = max(x.shape[0] for x in bN)
    K = ch.K
    YN = np.zeros((batches, L, K))
    YP = np.zeros((batches, L))
    for b in range(batches):
        YN[b, : bN[b].shape[0]] = bN[b]
        YP[b, : bP[b].shape[0]] = bP[b]
    return YN, YP, ch.events - events0


def flow_series(YN: np.ndarray, YP: np.ndarray, lam: float, t0: np.ndarray) -> tuple[np.ndarray, ...]:
    """From the batch means of :func:`run_batches`: ``(U, Pl, Pprev, Z)``, batches x levels
    ``ℓ = 1..L−1``: ``u_ℓ``, ``P_ℓ``, ``P_{ℓ−1}`` and the (I1) series ``Z_ℓ = Σ_φ t0_φ
    N_{>=ℓ, φ}/n − λ P_{ℓ−1}`` (mean 0 in equilibrium)."""
    batches = YN.shape[0]
    Nge = np.cumsum(YN[:, ::-1], axis=1)[:, ::-1]  # N_{>=ℓ, φ}/n per batch
    U = Nge.sum(axis=2)[:, 1:]  # u_ℓ, ℓ = 1..L-1
    Pl = YP[:, 1:]
    Pprev = np.concatenate([np.ones((batches, 1)), YP[:, 1:-1]], axis=1)  # P_{ℓ−1}
    Z = Nge[:, 1:] @ t0 - lam * Pprev
    return U, Pl, Pprev, Z


def summarize_batches(
    YN: np.ndarray,
    YP: np.ndarray,
    a: np.ndarray,
    M: np.ndarray,
    t0: np.ndarray,
    n: int,
    d: int,
    lam: float,
    replace: bool,
    t_end: float,
    burn_in: float,
    batches: int,
    events: int,
    holding: str,
) -> PhaseRun:
    """The :class:`PhaseRun` of the batch means of :func:`run_batches`."""
    K = a.size
    # levels 1..L-1 (row 0 of N is empty; the top row is always 0 by the capacity rule)
    U, Pl, Pprev, Z = flow_series(YN, YP, lam, t0)
    nl = U.shape[1]
    u_mean, u_se, ucv, ucv_se, ud, ud_se, fz = (np.zeros(nl) for _ in range(7))
    reliable = True
    for i in range(nl):
        if U[:, i].max() == 0.0 and Pprev[:, i].max() < 1e-300:
            continue
        e = blocking(U[:, i])
        u_mean[i], u_se[i] = e.mean, e.stderr
        ecv = _cv(U[:, i], Z[:, i])
        ucv[i], ucv_se[i] = ecv.mean, ecv.stderr
        ep = blocking(Pl[:, i])
        ud[i], ud_se[i] = ep.mean, ep.stderr
        ez = blocking(Z[:, i])
        crossings = n * lam * float(Pprev[:, i].mean()) * t_end  # expected arrivals into places >= ℓ
        if not ez.reliable or crossings < MIN_CROSSINGS:
            fz[i] = math.nan
        else:
            fz[i] = ez.mean / ez.stderr if ez.stderr > 0 else (0.0 if ez.mean == 0 else math.inf)
        if u_mean[i] > 1e-3:
            reliable = reliable and e.reliable and ecv.reliable
    Bser = YN.sum(axis=1)  # B_φ/n per batch
    busy_exact = lam * np.linalg.solve(-M.T, a)  # λ α(−T)^{-1} (row vector)
    busy_mean, busy_se, busy_z = (np.zeros(K) for _ in range(3))
    for ph in range(K):
        e = blocking(Bser[:, ph])
        busy_mean[ph], busy_se[ph] = e.mean, e.stderr
        busy_z[ph] = (e.mean - busy_exact[ph]) / e.stderr if e.stderr > 0 else 0.0
    eq = blocking(U.sum(axis=1))
    last = int(np.max(np.nonzero(u_mean)[0], initial=-1)) + 2
    cut = slice(0, max(last, 1))
    return PhaseRun(
        n=n,
        d=d,
        lam=lam,
        replace=bool(replace),
        alpha=a.tolist(),
        T=M.tolist(),
        t_end=t_end,
        burn_in=burn_in,
        batches=batches,
        events=events,
        holding=holding,
        u_mean=u_mean[cut],
        u_stderr=u_se[cut],
        u_mean_cv=ucv[cut],
        u_stderr_cv=ucv_se[cut],
        ud_mean=ud[cut],
        ud_stderr=ud_se[cut],
        phase_mean=YN.mean(axis=0)[1:][cut],
        busy_mean=busy_mean,
        busy_stderr=busy_se,
        busy_exact=busy_exact,
        flow_z=fz[cut],
        busy_z=busy_z,
        mean_queue_length=eq.mean,
        mean_queue_length_stderr=eq.stderr,
        reliable=bool(reliable and eq.reliable),
    )
