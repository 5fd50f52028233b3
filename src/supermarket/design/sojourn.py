"""The sojourn laws behind sizing by a latency target under a service law (docs/model.md §13.1):
the mean-field sojourn law of a FIFO customer with phase-type service (:func:`sojourn_law`), the
classical M/PH/1 sojourn (:func:`mph1_sojourn_tail`), the service law's own tail and quantile
(:func:`service_tail`), and the two-moment phase-type fit of laws without a phase form
(:func:`phase_form`).  The searches that use them are in :mod:`.service_search`.

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

import math
from typing import Any

import numpy as np
import scipy.optimize as so
import scipy.sparse as sp
import scipy.stats as st

from ..meanfield.phase import phase_fixed_point
from ..model import check_load, check_positive_int
from ..response import check_quantile
from ..response.phase_sojourn import PhaseSojourn
from ..response.phase_sojourn import phase_chain as _chain
from ..system.service import ServiceLaw, fit_phase_type, parse_service, phase_type

__all__ = [
    "MAX_FIT_PHASES",
    "PhaseSojourn",
    "phase_form",
    "sojourn_law",
    "mph1_sojourn_tail",
    "mph1_sojourn_quantile",
    "service_tail",
]

MAX_FIT_PHASES = 10
"""Most phases of a two-moment fit (SCV below ``1/MAX_FIT_PHASES`` is fitted at that SCV)."""


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
