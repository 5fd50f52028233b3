"""Sizing by a latency target under a service law (docs/model.md §13.1): the mean-field
sojourn law of a FIFO customer with phase-type service, the least ``d`` whose sojourn
``q``-quantile meets a target, the comparison of the dispatch rules, and the check of an
answer with the per-queue event engine.

**Sojourn law [derived].**  At the fixed point ``x[ℓ, φ]`` of the phase-type mean field
(:func:`supermarket.meanfield.phase.phase_fixed_point`), an arrival joins a queue of length
``k`` with probability ``s_k^d − s_{k+1}^d`` and, given ``k >= 1``, the customer in service
is in phase ``φ`` with probability ``x[k, φ]/(s_k − s_{k+1})``.  Its sojourn is the residual
of that service, ``k − 1`` whole services and its own: the absorption time of the chain on
``(r, φ)`` (``r`` services left, phase ``φ`` of the current one) with generator ``T`` within
a level and ``t0 α`` from ``r`` to ``r − 1``, started in ``(k + 1, φ)`` with probability
``g_k x[k, φ]`` (``g_k = (s_k^d − s_{k+1}^d)/(s_k − s_{k+1})``) and in ``(1, ·) ~ α`` with
probability ``1 − s_1^d``.  Its tail is computed by uniformization.

Laws without a finite phase form (lognormal, Pareto with α > 2, deterministic) are replaced
by the classical two-moment fit (:func:`supermarket.system.service.fit_phase_type`), at most
:data:`MAX_FIT_PHASES` phases; the result says so.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.optimize as so
import scipy.sparse as sp
import scipy.stats as st

from ..meanfield.phase import phase_fixed_point
from ..model import check_load, check_positive_float, check_positive_int
from ..response import check_quantile
from ..result import Result, frame
from ..system.service import ServiceLaw, fit_phase_type, parse_service, phase_type

__all__ = [
    "MAX_FIT_PHASES",
    "PhaseSojourn",
    "ServiceDesign",
    "ServiceLoadDesign",
    "RuleComparison",
    "phase_form",
    "sojourn_law",
    "mph1_sojourn_tail",
    "mph1_sojourn_quantile",
    "service_tail",
    "least_d_for_service_latency",
    "max_load_for_service_latency",
    "compare_rules",
    "verify_service_design",
]

MAX_FIT_PHASES = 10
"""Most phases of a two-moment fit (SCV below ``1/MAX_FIT_PHASES`` is fitted at that SCV)."""

LOAD_MAX = 1.0 - 1e-4
"""Highest load the bisection of :func:`max_load_for_service_latency` evaluates: the mean-field
fixed point needs ever more levels as λ → 1, and λ = 1 itself is out of range; a target met at
``LOAD_MAX`` is reported as met "up to" it."""


@dataclass(frozen=True, eq=False)
class PhaseSojourn:
    """A phase-type sojourn law ``PH(β, Q)`` (``Q`` sparse) with its tail and quantiles.

    ``β`` may sum to slightly less than 1 (the fixed point's truncation drops arrivals at the
    top level, below ``1e-14``).

    Examples
    --------
    >>> s = PhaseSojourn(np.array([1.0]), sp.csr_matrix([[-0.5]]))   # exponential of rate 1/2
    >>> round(s.tail(2.0), 12) == round(math.exp(-1.0), 12), round(s.mean, 12)
    (True, 2.0)
    >>> round(s.quantile(0.99), 9) == round(2 * math.log(100), 9)
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
        from scipy.sparse.linalg import spsolve

        x = spsolve(sp.csc_matrix(-self.Q), np.ones(self.Q.shape[0]))
        return float(self.beta @ np.atleast_1d(x))

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

    def quantile(self, q: float) -> float:
        """The ``t`` with ``P(S > t) = 1 − q`` (bracketing, then Brent's method)."""
        target = 1.0 - q
        hi = max(1.0, self.mean)
        while self.tail(hi) > target:
            hi *= 2.0
        lo = 0.0
        return float(so.brentq(lambda t: self.tail(t) - target, lo, hi, xtol=1e-12, rtol=1e-12))


def phase_form(service: str | ServiceLaw) -> tuple[ServiceLaw, str]:
    """The phase-type law used for ``service`` and a note: the law itself when it has a phase
    form (``exp``, ``erlang``, ``hyperexp``, ``ph``), else the two-moment fit (labelled).

    Raises
    ------
    ValueError
        ``pareto:ALPHA`` with ``ALPHA <= 2`` (infinite SCV: no two-moment fit, and no
        equilibrium mean wait under random routing).

    Examples
    --------
    >>> law, note = phase_form("lognormal:4")
    >>> law.alpha.size, round(law.scv, 12), note.startswith("fit:")
    (2, 4.0, True)
    >>> phase_form("deterministic")[0].alpha.size == MAX_FIT_PHASES
    True
    """
    law = parse_service(service)
    if law.alpha is not None:
        return law, ""
    if not math.isfinite(law.scv):
        raise ValueError(
            f"service: {law.spec} has infinite variance (SCV = inf); no two-moment phase-type fit exists "
            "(use pareto:ALPHA with ALPHA > 2, or simulate it with the event engine)"
        )
    c2 = max(law.scv, 1.0 / MAX_FIT_PHASES)
    alpha, T = fit_phase_type(c2)
    fit = phase_type(alpha, T, spec=f"fit({law.spec})")
    clip = f"; its SCV {law.scv:g} is below 1/{MAX_FIT_PHASES}, fitted at SCV {c2:g}" if c2 != law.scv else ""
    kind = "mixed Erlang" if c2 < 1 else ("exponential" if c2 == 1 else "balanced-means H2")
    note = (
        f"fit: {law.spec} has no finite phase form; replaced by the two-moment phase-type fit "
        f"(mean 1, SCV {c2:g}: {kind}, {alpha.size} phase{'s' if alpha.size > 1 else ''}){clip}"
    )
    return fit, note


def _chain(beta_levels: np.ndarray, alpha: np.ndarray, T: np.ndarray) -> PhaseSojourn:
    """``PH(β, Q)`` on ``(r, φ)``, ``r = 1..R`` (``beta_levels`` of shape (R, K))."""
    R = beta_levels.shape[0]
    t0 = -T.sum(axis=1)
    diag = sp.kron(sp.identity(R), sp.csr_matrix(T))
    down = sp.kron(sp.eye(R, k=-1), sp.csr_matrix(np.outer(t0, alpha)))  # from r to r − 1
    return PhaseSojourn(beta_levels.ravel(), (diag + down).tocsr())


def _g(a: np.ndarray, b: np.ndarray, d: int) -> np.ndarray:
    """``(a^d − b^d)/(a − b) = Σ_{j<d} a^j b^{d−1−j}`` (``a >= b >= 0``), stable when close."""
    if d <= 64:
        out = np.zeros_like(a)
        for j in range(d):
            out += a**j * b ** (d - 1 - j)
        return out
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # non-finite: replaced below
        q = (a**d - b**d) / (a - b)
    near = ~np.isfinite(q) | (np.abs(a - b) <= 1e-6 * np.maximum(a, 1e-300))
    q[near] = d * a[near] ** (d - 1)
    return q


def sojourn_law(d: int, load: float | str, service: str | ServiceLaw) -> tuple[PhaseSojourn, str]:
    """The mean-field sojourn law of a FIFO customer under JSQ(``d``) (with replacement) with a
    phase-type service law (docs/model.md §13.1), and the note of :func:`phase_form`.

    Parameters
    ----------
    d : int
        Choices (>= 1; ``d = 1`` is random routing, the M/PH/1 queue).
    load : float
        λ in (0, 1).
    service : str or ServiceLaw
        Any law of :func:`supermarket.system.service.parse_service` with a finite SCV.

    Returns
    -------
    (PhaseSojourn, str)

    Examples
    --------
    Exponential service at ``d = 1``: the M/M/1 sojourn, exponential of rate ``1 − λ``.

    >>> s, note = sojourn_law(1, 0.5, "exp")
    >>> round(s.mean, 9), round(s.tail(3.0), 9) == round(math.exp(-1.5), 9), note
    (2.0, True, '')
    """
    d = check_positive_int("d", d)
    lam = check_load(load)
    law, note = phase_form(service)
    assert law.alpha is not None and law.T is not None
    alpha, T = np.asarray(law.alpha), np.asarray(law.T)
    fp = phase_fixed_point(d, lam, alpha, T)
    x = fp.x  # rows ℓ = 1..L
    L, K = x.shape
    s = np.concatenate([[1.0], fp.u, [0.0]])  # s_0..s_{L+1}
    g = _g(s[1 : L + 1], s[2 : L + 2], d)  # g_k, k = 1..L
    beta = np.zeros((L + 1, K))
    beta[0] = (1.0 - s[1] ** d) * alpha  # an idle queue: its own service only
    beta[1:] = g[:, None] * x  # length k: residual + (k − 1) + own, in level r = k + 1
    return _chain(beta, alpha, T), note


def mph1_sojourn_tail(load: float | str, alpha: Any, T: Any, t: float) -> float:
    """``P(S > t)`` of the FIFO M/PH/1 queue at utilisation ``λ`` (mean service 1) [classical].

    The waiting time is a geometric(λ) sum of ladder heights distributed as the equilibrium
    residual ``PH(α_e, T)``, ``α_e = α(−T)^{-1}`` (Pollaczek–Khinchine): ``PH(λα_e, T + λ t0 α_e)``
    with an atom ``1 − λ`` at 0; the sojourn adds the customer's own ``PH(α, T)``.  Evaluated
    by a dense matrix exponential (independent of :class:`PhaseSojourn`'s uniformization).

    Examples
    --------
    >>> round(mph1_sojourn_tail(0.5, [1.0], [[-1.0]], 2.0), 12) == round(math.exp(-1.0), 12)   # M/M/1
    True
    """
    import scipy.linalg as sl

    lam = check_load(load)
    a = np.asarray(alpha, dtype=float)
    M = np.asarray(T, dtype=float)
    K = a.size
    t0 = -M.sum(axis=1)
    ae = np.linalg.solve(-M.T, a)  # α(−T)^{-1}, sums to the mean 1
    G = np.zeros((2 * K, 2 * K))
    G[:K, :K] = M + lam * np.outer(t0, ae)
    G[:K, K:] = (1.0 - lam) * np.outer(t0, a)
    G[K:, K:] = M
    b = np.concatenate([lam * ae, (1.0 - lam) * a])
    return float(b @ sl.expm(G * float(t)) @ np.ones(2 * K))


def mph1_sojourn_quantile(load: float | str, service: str | ServiceLaw, quantile: float) -> float:
    """The ``quantile`` of the FIFO M/PH/1 sojourn (:func:`mph1_sojourn_tail`; bracketing, then
    Brent's method); the law must have a phase form.

    Examples
    --------
    >>> round(mph1_sojourn_quantile(0.5, "exp", 0.99), 9) == round(2 * math.log(100), 9)   # Exp(1 − λ)
    True
    """
    law = parse_service(service)
    if law.alpha is None or law.T is None:
        raise ValueError(f"service: {law.spec} has no phase form (use phase_form for its two-moment fit)")
    q = check_quantile(quantile)
    a, M = np.asarray(law.alpha), np.asarray(law.T)
    target = 1.0 - q
    hi = 1.0
    while mph1_sojourn_tail(load, a, M, hi) > target:
        hi *= 2.0
    return float(so.brentq(lambda t: mph1_sojourn_tail(load, a, M, t) - target, 0.0, hi, xtol=1e-12, rtol=1e-12))


def service_tail(service: str | ServiceLaw, t: float) -> float:
    """``P(S > t)`` of the service law itself (exact for every law: lognormal, Pareto and
    deterministic by their distribution functions, phase type by uniformization).

    Examples
    --------
    >>> round(service_tail("exp", 1.0), 12) == round(math.exp(-1.0), 12), service_tail("deterministic", 1.0)
    (True, 0.0)
    """
    law = parse_service(service)
    p = law.params
    if law.name == "lognormal":
        return float(st.lognorm.sf(t, s=p[1], scale=math.exp(p[0])))
    if law.name == "pareto":
        return float(min(1.0, (p[1] / t) ** p[0])) if t > 0 else 1.0
    if law.name == "deterministic":
        return 1.0 if t < 1.0 else 0.0
    assert law.alpha is not None and law.T is not None
    return PhaseSojourn(np.asarray(law.alpha), sp.csr_matrix(law.T)).tail(t)


def _service_quantile(law: ServiceLaw, q: float) -> float:
    p = law.params
    if law.name == "lognormal":
        return float(st.lognorm.isf(1.0 - q, s=p[1], scale=math.exp(p[0])))
    if law.name == "pareto":
        return float(p[1] * (1.0 - q) ** (-1.0 / p[0]))
    if law.name == "deterministic":
        return 1.0
    assert law.alpha is not None and law.T is not None
    return PhaseSojourn(np.asarray(law.alpha), sp.csr_matrix(law.T)).quantile(q)


@dataclass(frozen=True)
class ServiceDesign(Result):
    """The least ``d`` whose mean-field sojourn ``quantile`` is at most ``latency`` under a
    service law (docs/model.md §13.1).

    ``answer``: that ``d``; ``achieved``: the quantile there; ``neighbour``: ``{"d", "value"}``
    at ``d − 1`` (empty when ``d = 1``); ``floor``: the quantile of one service of the law itself
    (``d = ∞``; exact, not of the fit);
    ``fit``: the note of the two-moment fit, empty when the law is phase type; ``checked``:
    ``(d, quantile)`` evaluated; ``verify``: the event-engine check, or None.

    Examples
    --------
    >>> r = least_d_for_service_latency(0.9, 0.99, 8.0, "exp")
    >>> int(r.answer), r.monotone, r.fit
    (3, True, '')
    """

    service: str
    load: float
    quantile: float
    latency: float
    answer: int
    achieved: float
    neighbour: dict
    floor: float
    fit: str
    checked: tuple
    monotone: bool
    verify: dict | None = None

    _order = ("service", "load", "quantile", "latency", "answer", "achieved", "neighbour", "floor", "fit", "monotone")

    def to_frame(self) -> Any:
        return frame([{"d": a, "sojourn_quantile": v} for a, v in self.checked])

    def summary(self) -> str:
        qn = f"p{100 * self.quantile:g}"
        d = int(self.answer)
        nb = self.neighbour
        line = (
            f"At load λ = {self.load:g} with {self.service} service, d = {d} choice{'' if d == 1 else 's'} "
            f"give{'s' if d == 1 else ''} sojourn {qn} = {self.achieved:.6g} ≤ {self.latency:g} (mean field)"
            + (f"; d = {nb['d']} would give {nb['value']:.6g}." if nb else " (random routing: M/PH/1 queues).")
        )
        lines = [line]
        if self.fit:
            lines.append(f"  {self.fit}")
        if not self.monotone:
            lines.append("  warning: the quantile was not monotone on the points checked; the answer may not be unique")
        if self.verify is not None:
            lines.append(f"  verify (event engine, n = {self.verify['n']}): " + self.verify["note"])
        return "\n".join(lines)


def _check_target(load, quantile, latency, service):
    lam = check_load(load)
    q = check_quantile(quantile)
    T = check_positive_float("latency", latency)
    law = parse_service(service)
    return lam, q, T, law


def least_d_for_service_latency(
    load: float | str, quantile: float, latency: float, service: str | ServiceLaw, *, d_max: int = 2**20
) -> ServiceDesign:
    """The least ``d`` whose mean-field FIFO sojourn ``quantile`` is at most ``latency`` under
    ``service`` (doubling, then bisection on ``d``; monotonicity checked on the points seen).

    Parameters
    ----------
    load : float
        λ in (0, 1).
    quantile : float
        Level in (0, 1).
    latency : float
        Target, in mean service times (> 0).
    service : str or ServiceLaw
        A law of :func:`supermarket.system.service.parse_service` (laws without a phase form are
        replaced by their two-moment fit: :func:`phase_form`).
    d_max : int
        Largest ``d`` searched.

    Returns
    -------
    ServiceDesign

    Raises
    ------
    ValueError
        A parameter out of range; or no ``d`` meets the target: with ``d = ∞`` a customer still
        needs its own service, whose ``q``-quantile (of the law itself, exact, even when the
        sojourn law uses the fit) is the floor.

    Examples
    --------
    >>> r = least_d_for_service_latency(0.9, 0.99, 14.0, "hyperexp:4")   # one service's p99 is 10.75
    >>> int(r.answer), r.achieved <= 14.0 < r.neighbour["value"]
    (11, True)
    """
    lam, q, T, law = _check_target(load, quantile, latency, service)
    d_max = check_positive_int("d_max", d_max)
    fit_law, note = phase_form(law)
    assert fit_law.alpha is not None and fit_law.T is not None
    floor = _service_quantile(law, q)  # of the law itself, not of its fit: no d beats it
    if T <= floor:
        raise ValueError(
            f"no d meets sojourn p{100 * q:g} ≤ {T:g} with {law.spec} service: even with d = ∞ every customer "
            f"still needs its own service, whose p{100 * q:g} is {floor:.6g}"
        )
    if note:
        fit_floor = _service_quantile(fit_law, q)
        if T <= fit_floor:
            raise ValueError(
                f"no d meets sojourn p{100 * q:g} ≤ {T:g} with {law.spec} service in the mean field: it uses the "
                f"two-moment phase-type fit, whose own service p{100 * q:g} is {fit_floor:.6g} (the law's is "
                f"{floor:.6g}); the fit's tail, not the number of choices, is the limit (simulate the law itself "
                "with the event engine)"
            )
    checked: dict[int, float] = {}

    def f(d: int) -> float:
        if d not in checked:
            # d = 1 is the M/PH/1 queue: its classical law is exact and avoids the fixed point's
            # many levels (the geometric tail of M/PH/1 at high load)
            checked[d] = (
                mph1_sojourn_quantile(lam, fit_law, q) if d == 1 else sojourn_law(d, lam, fit_law)[0].quantile(q)
            )
        return checked[d]

    d = 1
    while f(d) > T:
        if d >= d_max:
            raise ValueError(f"sojourn p{100 * q:g} ≤ {T:g} needs more than d_max = {d_max} choices at load {lam:g}")
        d = min(2 * d, d_max)
    lo, hi = d // 2, d
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if f(mid) <= T:
            hi = mid
        else:
            lo = mid
    vals = sorted(checked.items())
    monotone = all(b[1] <= a[1] + 1e-9 * max(1.0, a[1]) for a, b in itertools.pairwise(vals))
    nb = {} if hi == 1 else {"d": hi - 1, "value": f(hi - 1)}
    return ServiceDesign(
        service=law.spec,
        load=lam,
        quantile=q,
        latency=T,
        answer=int(hi),
        achieved=checked[hi],
        neighbour=nb,
        floor=floor,
        fit=note,
        checked=tuple(sorted(checked.items())),
        monotone=monotone,
    )


@dataclass(frozen=True)
class ServiceLoadDesign(Result):
    """The largest load whose mean-field sojourn ``quantile`` is at most ``latency`` with ``d``
    choices under a service law (docs/model.md §13.1).

    ``answer``: that load; ``achieved``: the quantile there; ``neighbour``: ``{"load",
    "value"}`` just above it; ``checked``: ``(load, P(sojourn > latency))`` evaluated by the
    bisection, ``monotone`` whether that tail grew with the load on them; ``floor`` and ``fit``
    as in :class:`ServiceDesign`.

    Examples
    --------
    >>> r = max_load_for_service_latency(1, 0.99, 2 * 4.605170185988091, "exp")   # M/M/1: λ = 1 − log(100)/T
    >>> round(r.answer, 5)
    0.5
    """

    service: str
    d: int
    quantile: float
    latency: float
    answer: float
    achieved: float
    neighbour: dict
    floor: float
    fit: str
    checked: tuple
    monotone: bool
    capped: bool = False

    _order = (
        "service",
        "d",
        "quantile",
        "latency",
        "answer",
        "achieved",
        "neighbour",
        "floor",
        "fit",
        "monotone",
        "capped",
    )

    def to_frame(self) -> Any:
        return frame([{"load": a, "tail_at_latency": v} for a, v in self.checked])

    def summary(self) -> str:
        qn = f"p{100 * self.quantile:g}"
        nb = self.neighbour
        if self.capped:
            first = (
                f"With d = {self.d} and {self.service} service, sojourn {qn} ≤ {self.latency:g} holds at every "
                f"load searched, up to λ = {self.answer:.6g} (mean field, {qn} = {self.achieved:.6g} there); "
                "higher loads are not evaluated (λ → 1 is outside the mean field's reach here)."
            )
        else:
            first = (
                f"With d = {self.d} and {self.service} service, the largest load with sojourn {qn} ≤ "
                f"{self.latency:g} is λ = {self.answer:.6g} (mean field, {qn} = {self.achieved:.6g} there; "
                f"{nb['value']:.6g} at λ = {nb['load']:.6g})."
            )
        lines = [first]
        if self.fit:
            lines.append(f"  {self.fit}")
        if not self.monotone:
            lines.append("  warning: the quantile was not monotone on the points checked; the answer may not be unique")
        return "\n".join(lines)


def max_load_for_service_latency(
    d: int,
    quantile: float,
    latency: float,
    service: str | ServiceLaw,
    *,
    rtol: float = 1e-5,
    progress: Callable[[str], None] | None = None,
) -> ServiceLoadDesign:
    """The largest load λ whose mean-field FIFO sojourn ``quantile`` is at most ``latency`` with
    ``d`` choices under ``service`` (bisection on λ; monotonicity checked on the points seen).

    Parameters
    ----------
    d : int
        Choices (>= 1).
    quantile, latency, service
        As :func:`least_d_for_service_latency`.
    rtol : float
        Width of the final bracket, relative to the answer.
    progress : callable, optional
        Called with a short text (the load being evaluated) before each evaluation.

    Returns
    -------
    ServiceLoadDesign
        When the target is still met at :data:`LOAD_MAX` (the highest load evaluated; λ = 1 is
        out of range), ``answer`` is ``LOAD_MAX``, ``capped`` is True and ``neighbour`` is empty.
        The bisection takes at most ``log2(1/(rtol·1e-3)) + 2`` evaluations.

    Raises
    ------
    ValueError
        A parameter out of range, or ``latency`` at or below the service's own quantile.

    Examples
    --------
    >>> r = max_load_for_service_latency(2, 0.99, 14.0, "hyperexp:4")
    >>> round(r.answer, 3), r.achieved <= 14.0 < r.neighbour["value"], r.fit
    (0.445, True, '')
    """
    d = check_positive_int("d", d)
    q = check_quantile(quantile)
    T = check_positive_float("latency", latency)
    rtol = check_positive_float("rtol", rtol)
    law = parse_service(service)
    fit_law, note = phase_form(law)
    floor = _service_quantile(law, q)
    if T <= floor:
        raise ValueError(
            f"no load meets sojourn p{100 * q:g} ≤ {T:g} with {law.spec} service: even at vanishing load every "
            f"customer needs its own service, whose p{100 * q:g} is {floor:.6g}"
        )
    assert fit_law.alpha is not None and fit_law.T is not None
    a, M = np.asarray(fit_law.alpha), np.asarray(fit_law.T)
    checked: dict[float, float] = {}  # λ -> P(S > T): the bisection needs the tail at T only

    def tail(lam: float) -> float:
        if lam not in checked:
            if progress is not None:
                progress(f"λ = {lam:.8g}, {len(checked)} loads evaluated")
            checked[lam] = mph1_sojourn_tail(lam, a, M, T) if d == 1 else sojourn_law(d, lam, fit_law)[0].tail(T)
        return checked[lam]

    def f(lam: float) -> float:
        return mph1_sojourn_quantile(lam, fit_law, q) if d == 1 else sojourn_law(d, lam, fit_law)[0].quantile(q)

    lo, hi = 0.0, 1.0
    capped = False
    # every evaluated load lies in (0, LOAD_MAX]; the bracket halves each step (LOAD_MAX
    # replaces a midpoint above it once), so at most log2(1 / (rtol · 1e-3)) + 2 steps
    for _ in range(int(math.ceil(math.log2(1.0 / (rtol * 1e-3)))) + 2):
        if hi - lo <= rtol * max(lo, 1e-3):
            break
        mid = 0.5 * (lo + hi)
        if mid > LOAD_MAX:  # only when every load so far met the target
            if tail(LOAD_MAX) <= 1.0 - q:
                lo, capped = LOAD_MAX, True
                break
            hi = LOAD_MAX
            continue
        if tail(mid) <= 1.0 - q:
            lo = mid
        else:
            hi = mid
    if lo == 0.0:
        raise ValueError(
            f"no load meets sojourn p{100 * q:g} ≤ {T:g} at d = {d} with {law.spec} service"
            + (" (the fit's tail is heavier there than the law's floor)" if note else "")
        )
    pts = sorted(checked.items())
    monotone = all(b[1] >= a[1] - 1e-9 * max(1.0, a[1]) for a, b in itertools.pairwise(pts))
    return ServiceLoadDesign(
        service=law.spec,
        d=d,
        quantile=q,
        latency=T,
        answer=lo,
        achieved=f(lo),
        neighbour={} if capped else {"load": hi, "value": f(hi)},
        floor=floor,
        fit=note,
        checked=tuple(pts),
        monotone=monotone,
        capped=capped,
    )


@dataclass(frozen=True)
class RuleComparison(Result):
    """The dispatch rules of :mod:`supermarket.system.policies` against one latency target in the
    mean-field limit, with what each costs per arrival (docs/model.md §13.1).

    ``rows``: one dict per rule: ``policy``, ``d`` (jsq-d only), ``value`` (the sojourn
    quantile), ``meets``, ``samples`` (queue lengths read per arrival, as text: ``d``, ``1``,
    ``n``, ``0``), ``bookkeeping`` and ``law`` (how the quantile was computed).

    Examples
    --------
    >>> c = compare_rules(0.9, 0.99, 8.0, "exp")
    >>> [(r["policy"], r["meets"]) for r in c.rows]
    [('random', False), ('jsq-d', True), ('jiq', True), ('jsq', True)]
    """

    service: str
    load: float
    quantile: float
    latency: float
    rows: tuple
    fit: str
    design: ServiceDesign | None

    _order = ("service", "load", "quantile", "latency", "rows", "fit")
    _omit = ("design",)

    def to_frame(self) -> Any:
        return frame(list(self.rows))

    def summary(self) -> str:
        qn = f"p{100 * self.quantile:g}"
        head = (
            f"Sojourn {qn} ≤ {self.latency:g} at load λ = {self.load:g} with {self.service} service "
            "(mean field, n → ∞), by rule:"
        )
        lines = [head, f"  {'rule':<12} {qn:>10}  meets  samples/arrival  bookkeeping"]
        for r in self.rows:
            name = r["policy"] + (f" (d={r['d']})" if r.get("d") else "")
            meets = "yes" if r["meets"] else "no"
            # no number where none exists (jsq-d without a d): the law column says why
            val = f"{r['value']:>10.5g}" if math.isfinite(r["value"]) else f"{'none':>10}"
            lines.append(f"  {name:<12} {val}  {meets:<5}  {r['samples']:<15}  {r['bookkeeping']}")
        lines.append("  " + "; ".join(f"{r['policy']}: {r['law']}" for r in self.rows))
        if self.fit:
            lines.append(f"  {self.fit}")
        lines.append(
            "  jsq and jiq reach the service's own quantile only as n → ∞; at finite n they queue "
            "sometimes (check with simulate --service ... --policy)."
        )
        return "\n".join(lines)


def compare_rules(
    load: float | str, quantile: float, latency: float, service: str | ServiceLaw, *, d_max: int = 2**20
) -> RuleComparison:
    """The rules ``random``, ``jsq-d`` (at its least ``d``), ``jiq`` and ``jsq`` against a
    sojourn target in the mean-field limit, with their costs per arrival.

    random: the M/PH/1 FIFO sojourn (:func:`mph1_sojourn_tail`; of the fit for laws without a
    phase form); jsq-d: :func:`least_d_for_service_latency`; jsq and jiq: in the limit every
    arrival finds an idle server, so the sojourn is one service (the law's own quantile, exact
    for every law).

    Examples
    --------
    >>> c = compare_rules(0.9, 0.99, 14.0, "hyperexp:4")
    >>> [(r["policy"], round(r["value"], 2)) for r in c.rows]
    [('random', 118.93), ('jsq-d', 13.91), ('jiq', 10.75), ('jsq', 10.75)]
    """
    lam, q, T, law = _check_target(load, quantile, latency, service)
    fit_law, note = phase_form(law)
    assert fit_law.alpha is not None and fit_law.T is not None
    v_random = mph1_sojourn_quantile(lam, fit_law, q)
    v_one = _service_quantile(law, q)
    lawtxt = "fit" if note else "exact"
    rows = [
        {
            "policy": "random",
            "d": None,
            "value": v_random,
            "meets": v_random <= T,
            "samples": "1 (none read)",
            "bookkeeping": "none",
            "law": f"M/PH/1 FIFO ({lawtxt})",
        }
    ]
    design = None
    try:
        design = least_d_for_service_latency(lam, q, T, law, d_max=d_max)
        rows.append(
            {
                "policy": "jsq-d",
                "d": int(design.answer),
                "value": design.achieved,
                "meets": True,
                "samples": f"d = {int(design.answer)}",
                "bookkeeping": "none",
                "law": "mean-field sojourn law, docs/model.md §13.1",
            }
        )
    except ValueError as exc:
        rows.append(
            {
                "policy": "jsq-d",
                "d": None,
                "value": math.nan,
                "meets": False,
                "samples": "—",
                "bookkeeping": "none",
                "law": f"no d: {exc}",
            }
        )
    one = "one service (the law's own quantile" + (", exact, not the fit)" if note else ")")
    rows.append(
        {
            "policy": "jiq",
            "d": None,
            "value": v_one,
            "meets": v_one <= T,
            "samples": "0",
            "bookkeeping": "idle list; ~1 idle report per arrival",
            "law": one,
        }
    )
    rows.append(
        {
            "policy": "jsq",
            "d": None,
            "value": v_one,
            "meets": v_one <= T,
            "samples": "n",
            "bookkeeping": "or all n lengths kept",
            "law": one,
        }
    )
    return RuleComparison(law.spec, lam, q, T, tuple(rows), note, design)


def verify_service_design(
    design: ServiceDesign,
    n: int,
    *,
    time: float | None = None,
    replications: int = 4,
    seed: Any = 0,
    z: float = 2.0,
    workers: int | None = None,
) -> dict:
    """Check a :class:`ServiceDesign` with the per-queue event engine at ``n`` servers, under
    the law itself (not its fit): ``d`` and ``d − 1`` are simulated, and a quantile counts as
    meeting the target when it is below it by more than ``z`` standard errors (the spread of
    ``replications`` independent runs), failing when above by more, undecided otherwise.

    Returns
    -------
    dict
        ``n``, ``points`` (``d``, ``value``, ``stderr``, ``verdict``), ``changes_answer``
        (True / False / None) and a one-line ``note``.

    Examples
    --------
    >>> r = least_d_for_service_latency(0.7, 0.9, 4.0, "lognormal:2")
    >>> v = verify_service_design(r, 20, time=200.0, replications=2, seed=1, workers=1)
    >>> v["n"], [p["d"] for p in v["points"]], v["points"][0]["verdict"] in ("meets", "fails", "undecided", "unknown")
    (20, [3, 2], True)
    """
    from ..simulation.general import simulate_general  # here: it loads numba, which sizing alone does not need

    n = check_positive_int("n", n)
    replications = check_positive_int("replications", replications)
    q, T = design.quantile, design.latency
    cand = [int(design.answer)] + ([int(design.answer) - 1] if design.answer > 1 else [])
    pts = []
    for d in cand:
        if d > n:
            pts.append({"d": d, "value": None, "stderr": None, "verdict": "unknown", "why": f"d = {d} > n = {n}"})
            continue
        res = simulate_general(
            n,
            d,
            design.load,
            service=design.service,
            time=time,
            replications=replications,
            seed=seed,
            quantiles=(q,),
            workers=workers,
        )
        e = res.sojourn_quantiles[q]
        se = e.stderr if e.reliable else None
        if se is None or not math.isfinite(se):
            pts.append({"d": d, "value": e.mean, "stderr": None, "verdict": "unknown", "why": "no reliable error bar"})
            continue
        verdict = "meets" if e.mean + z * se < T else ("fails" if e.mean - z * se > T else "undecided")
        pts.append({"d": d, "value": e.mean, "stderr": se, "verdict": verdict})
    qn = f"p{100 * q:g}"

    def show(p):
        if p["value"] is None:
            return f"d = {p['d']}: {p['why']}"
        err = f" ± {p['stderr']:.2g}" if p["stderr"] is not None else " (no error bar: " + p["why"] + ")"
        return f"d = {p['d']} gives {qn} = {p['value']:.4g}{err}"

    a = pts[0]
    b = pts[1] if len(pts) > 1 else None
    shown = ", ".join(show(p) for p in pts)
    if a["verdict"] == "fails":
        change, note = True, f"{shown}: finite n needs more choices than the mean field says"
    elif b is not None and b["verdict"] == "meets":
        change, note = True, f"{shown}: finite n needs fewer choices than the mean field says"
    elif a["verdict"] == "meets" and (b is None or b["verdict"] == "fails"):
        change, note = False, f"confirmed: {shown}"
    else:
        change, note = None, f"undecided within {z:g} standard errors: {shown}; simulate longer"
    return {"n": n, "replications": replications, "points": pts, "changes_answer": change, "note": note}
