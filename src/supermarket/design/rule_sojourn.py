"""The mean-field sojourn laws behind sizing every dispatch rule, with or without server classes
(docs/model.md §10, §15.2, §15.5).

**One class, exponential service.**  At the rule's fluid fixed point ``u``
(:attr:`~supermarket.system.policies.Rule.fixed_point`) an arrival joins a queue of length at
least ``k`` with probability ``P_k(u)`` (:attr:`~supermarket.system.policies.Rule.p_fluid`), and
a job that joins a queue of length ``k`` has sojourn Erlang(``k + 1``) (FIFO, exponential
service): the Erlang mixture of docs/model.md §10 with the tails ``T_k = P_k(u)``.  For ``jsq``
and ``jiq`` (fluid point ``(λ, 0, 0, …)``, ``P ≡ 0``) no job waits: the sojourn is one service.

**Server classes, exponential service [derived].**  At the fixed point ``u_{c,k}`` of the mean
field with classes (:func:`supermarket.meanfield.classes.classes_fixed_point`), with
``U_k = Σ_c f_c u_{c,k}`` and ``g_k = (P(U_k) − P(U_{k+1}))/(U_k − U_{k+1})``, a share
``w_{c,k} = f_c g_k (u_{c,k} − u_{c,k+1})`` of the arrivals joins a class-``c`` queue of
length ``k`` (``u_{c,0} = 1``); such a job has sojourn Erlang(``k + 1``) at rate ``s_c``.  The
sojourn law is the mixture ``P(S > t) = Σ_c Σ_{i>=0} W_{c,i} e^{−s_c t}(s_c t)^i/i!`` with
``W_{c,i} = Σ_{k>=i} w_{c,k}``.

**Server classes, phase-type service [derived].**  At the fixed point ``x[c, ℓ, φ]`` of
:func:`supermarket.meanfield.classes_phase.classes_phase_fixed_point`, a share
``f_c g_ℓ x[c, ℓ, φ]`` of the arrivals joins a class-``c`` queue of length ``ℓ >= 1`` whose
customer in service is in phase ``φ`` (``f_c g_0 (1 − u_{c,1}) α`` an idle one); its sojourn is
the absorption time of the chain of :mod:`.sojourn` with every rate times ``s_c``; the law is
the mixture over the classes (one block-diagonal phase-type law).

**A rule whose drift is discontinuous, with classes or a phase-type law [derived].**  At the fluid
fixed point of :func:`supermarket.meanfield.fluid.fluid_fixed_point` a share ``join[c, ℓ, φ]`` of
the arrivals joins a class-``c`` queue of length ``ℓ < T`` whose customer in service is in phase
``φ``; its sojourn is the same absorption time at speed ``s_c`` (``jsq``, ``jiq``: ``T = 1``, one
service, ``PH(α, s_c T)``, with the class weights ``∝ f_c (1 − b_c)``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import scipy.optimize as so
import scipy.sparse as sp
from scipy.special import gammaln

from ..response import from_tails
from ..system import policies as _pol
from ..system.classes import ServerClasses
from ..system.service import ServiceLaw
from .sojourn import PhaseSojourn, _chain, _g, mph1_sojourn_quantile, phase_form

__all__ = [
    "MAX_FLUID_LEVELS",
    "fluid_quantile",
    "fluid_law_quantile",
    "classes_quantile",
    "classes_phase_quantile",
    "quantile_function",
]

MAX_FLUID_LEVELS = 100_000
"""Most levels of a fluid fixed point read into the Erlang mixture (random routing near λ = 1
would need more: there the mixture of its geometric tails ``λ^k``, Exp(1 − λ), is used)."""


def fluid_quantile(policy: str, d: int, lam: float, q: float) -> float:
    """The sojourn ``q``-quantile at the fluid fixed point of a rule, one class, exponential service.

    Examples
    --------
    >>> round(fluid_quantile("random", 1, 0.5, 0.99), 9) == round(2 * math.log(100), 9)   # M/M/1
    True
    >>> round(fluid_quantile("jiq", 1, 0.9, 0.99), 12) == round(math.log(100), 12)      # one service
    True
    """
    rule = _pol.rule(policy)
    if policy == "random":
        levels = math.ceil(math.log(1e-17) / math.log(lam)) + 1
        if levels > MAX_FLUID_LEVELS:  # the tails λ^k: the mixture is Exp(1 − λ) exactly
            return -math.log1p(-q) / (1.0 - lam)
    elif rule.uses_d:
        levels = int(d) + 1  # jbt(T = d): no queue longer than T
    else:
        levels = 2  # jsq, jiq: (λ, 0, 0, …)
    u = rule.fixed_point(lam, levels, int(d))
    tails = np.clip(rule.p_fluid(np.asarray(u, float), int(d)), 0.0, 1.0)
    return float(from_tails(tails, quantiles=(q,)).sojourn.quantiles[q])


def _weights(u: np.ndarray, f: np.ndarray, d: int, policy: str) -> tuple[np.ndarray, np.ndarray]:
    """``g_k`` (``k = 0..L``) and the pooled ``U_0..U_{L+1}`` from the per-class ``u`` (K, L)."""
    K = u.shape[0]
    ext = np.hstack([np.ones((K, 1)), u, np.zeros((K, 1))])
    U = f @ ext
    if policy == "random" or d == 1:
        return np.ones(U.size - 1), U
    return _g(U[:-1], U[1:], d), U


def _mixture_survival(W: np.ndarray, s: np.ndarray, t: float) -> float:
    """``Σ_c Σ_i W[c, i] e^{−s_c t}(s_c t)^i/i!`` (``W[c, 0]`` the share joining class ``c``)."""
    m = W.shape[1]
    i = np.arange(m, dtype=float)
    out = 0.0
    for c in range(W.shape[0]):
        x = float(s[c]) * t
        pmf = np.exp(i * math.log(x) - x - gammaln(i + 1.0)) if x > 0 else (i == 0).astype(float)
        out += float(pmf @ W[c])
    return out


def _random_classes_profile(lam: float, sc: ServerClasses) -> np.ndarray | None:
    """The fixed point of the mean field with classes under random routing, ``u_{c,k} = ρ_c^k`` with
    ``ρ_c = λ s̄/s_c`` (its drift vanishes there: :func:`supermarket.meanfield.classes.classes_drift`),
    to the level where ``ρ_max^k < 1e-17`` (at most :data:`MAX_FLUID_LEVELS`); None when a class is
    overloaded (no fixed point)."""
    rho = float(lam) * sc.mean_speed / np.asarray(sc.speeds, float)
    top = float(rho.max())
    if top >= 1.0:
        return None
    levels = min(MAX_FLUID_LEVELS, math.ceil(math.log(1e-17) / math.log(top)) + 1)
    return rho[:, None] ** np.arange(1, levels + 1)[None, :]


def classes_quantile(policy: str, d: int, lam: float, sc: ServerClasses, q: float) -> float:
    """The sojourn ``q``-quantile of the mean field with server classes, exponential service
    (module docstring); ``math.inf`` where the mean field has no fixed point at this load.

    Examples
    --------
    >>> from supermarket.system.classes import parse_server_classes
    >>> sc = parse_server_classes("0.5:2,0.5:1")     # random: M/M/1 queues of rates 2 and 1 at arrival rate 0.75
    >>> t = classes_quantile("random", 1, 0.5, sc, 0.9)
    >>> round(0.5 * math.exp(-1.25 * t) + 0.5 * math.exp(-0.25 * t), 9)
    0.1
    """
    from ..meanfield.classes import classes_fixed_point

    rule = "random" if policy == "random" or int(d) == 1 else policy  # JSQ(1) is random routing
    f = np.asarray(sc.fractions, float)
    s = np.asarray(sc.speeds, float)
    if rule == "random":
        u = _random_classes_profile(lam, sc)
        if u is None:
            return math.inf
    else:
        try:
            u = classes_fixed_point(int(d), lam, sc, policy=rule).u
        except ValueError:  # no fixed point at this load (the profile does not settle)
            return math.inf
    g, _ = _weights(u, f, int(d), rule)
    K = f.size
    ext = np.hstack([np.ones((K, 1)), u, np.zeros((K, 1))])
    w = f[:, None] * g[None, :] * (ext[:, :-1] - ext[:, 1:])  # w[c, k], k = 0..L
    W = np.cumsum(w[:, ::-1], axis=1)[:, ::-1]  # W[c, i] = Σ_{k>=i} w[c, k]
    target = 1.0 - q
    hi = 1.0
    while _mixture_survival(W, s, hi) > target:
        hi *= 2.0
    return float(so.brentq(lambda t: _mixture_survival(W, s, t) - target, 0.0, hi, xtol=1e-13, rtol=1e-13))


def classes_phase_quantile(policy: str, d: int, lam: float, sc: ServerClasses, law: ServiceLaw, q: float) -> float:
    """The sojourn ``q``-quantile of the mean field with server classes and a phase-type law
    (module docstring); ``math.inf`` where the mean field has no fixed point at this load.

    Examples
    --------
    One class of speed 1 is the classless phase-type sojourn law (:func:`.sojourn.sojourn_law`):

    >>> from supermarket.system.classes import parse_server_classes
    >>> from supermarket.design.sojourn import sojourn_law
    >>> a = classes_phase_quantile("jsq-d", 2, 0.8, parse_server_classes("1:1"), phase_form("erlang:2")[0], 0.99)
    >>> abs(a - sojourn_law(2, 0.8, "erlang:2")[0].quantile(0.99)) < 1e-6
    True
    """
    from ..meanfield.classes_phase import classes_phase_fixed_point

    rule = "random" if policy == "random" or int(d) == 1 else policy
    try:
        fp = classes_phase_fixed_point(int(d), lam, sc, law, policy=rule)
    except ValueError:
        return math.inf
    assert law.alpha is not None and law.T is not None
    alpha, T = np.asarray(law.alpha, float), np.asarray(law.T, float)
    f = np.asarray(sc.fractions, float)
    g, _ = _weights(fp.u, f, int(d), rule)
    blocks, betas = [], []
    for c in range(f.size):
        L = fp.x.shape[1]
        beta = np.zeros((L + 1, alpha.size))
        beta[0] = f[c] * g[0] * (1.0 - fp.u[c, 0]) * alpha  # an idle queue: its own service only
        beta[1:] = f[c] * g[1 : L + 1, None] * fp.x[c]  # length ℓ: residual + (ℓ − 1) + own
        ch = _chain(beta, alpha, float(sc.speeds[c]) * T)
        blocks.append(ch.Q)
        betas.append(ch.beta)
    return PhaseSojourn(np.concatenate(betas), sp.block_diag(blocks, format="csr")).quantile(q)


def fluid_law_quantile(policy: str, d: int, lam: float, sc: ServerClasses | None, law: ServiceLaw, q: float) -> float:
    """The sojourn ``q``-quantile at the fluid fixed point of ``jsq``, ``jiq`` or ``jbt`` with server
    classes and a phase-type law (module docstring).

    Examples
    --------
    >>> from supermarket.system.service import parse_service
    >>> t = fluid_law_quantile("jsq", 1, 0.9, None, parse_service("erlang:2"), 0.99)   # one Erlang(2, 2) service
    >>> round(math.exp(-2 * t) * (1 + 2 * t), 10)
    0.01
    """
    from ..meanfield.fluid import MAX_THRESHOLD, fluid_fixed_point

    if _pol.RULES[policy].uses_d and int(d) > MAX_THRESHOLD:  # the least-d search went past what is solved
        raise ValueError(
            f"latency: no d <= {MAX_THRESHOLD} meets the target under {policy} (its fluid fixed point with server "
            f"classes or a phase-type law is solved up to T = d = {MAX_THRESHOLD}: a queue's chain has 1 + T·phases "
            "states)"
        )
    fp = fluid_fixed_point(policy, int(d), lam, sc, law)
    assert law.alpha is not None and law.T is not None
    alpha, T = np.asarray(law.alpha, float), np.asarray(law.T, float)
    blocks, betas = [], []
    for c, speed in enumerate(fp.server_classes.speeds):
        ch = _chain(fp.join[c], alpha, float(speed) * T)
        blocks.append(ch.Q)
        betas.append(ch.beta)
    return PhaseSojourn(np.concatenate(betas), sp.block_diag(blocks, format="csr")).quantile(q)


def quantile_function(
    policy: str, service: ServiceLaw, sc: ServerClasses | None, q: float
) -> tuple[Callable[[int, float], float], str]:
    """``f(d, λ)``, the mean-field sojourn ``q``-quantile of the rule under ``service`` (with
    ``sc`` or one class), and a note (the two-moment fit of a law without a phase form); the
    system is one the design serves (:func:`.rule_latency.latency_method`)."""
    fit, note = (service, "") if service.is_exponential else phase_form(service)
    if not _pol.RULES[policy].smooth and (sc is not None or not service.is_exponential):
        return (lambda d, lam: fluid_law_quantile(policy, d, lam, sc, fit, q)), note
    if sc is not None:
        if service.is_exponential:
            return (lambda d, lam: classes_quantile(policy, d, lam, sc, q)), note
        return (lambda d, lam: classes_phase_quantile(policy, d, lam, sc, fit, q)), note
    if service.is_exponential:
        return (lambda d, lam: fluid_quantile(policy, d, lam, q)), note
    # random routing (the one rule other than jsq-d with a phase-type mean field): the M/PH/1 queue
    return (lambda d, lam: mph1_sojourn_quantile(lam, fit, q)), note
