"""The refined mean field (the ``1/n`` term) and the linear noise with server classes
(docs/model.md §15.8): the generic expansion of :mod:`.expansion` applied to the drift of
:func:`.classes_phase.classes_phase_drift` (exponential service: one phase) and the jumps of
:func:`classes_jumps` at the fixed point of :func:`.classes.classes_fixed_point` or
:func:`.classes_phase.classes_phase_fixed_point` [paper: Gast and Van Houdt 2018; the jumps: derived].

The state is ``x[k, ℓ, φ]``, the fraction of the ``n f_k`` class-``k`` servers with ``ℓ``
customers whose customer in service is in phase ``φ``.  One event moves one class-``k`` server,
so it changes ``n x[k]`` by ``±1/f_k``: the jump vectors have entries ``±1/f_k`` and the rates
are per server of the whole system (``n`` of them), so ``E[x] = π + V/n`` and ``Cov(√n x) → W``
with the ``n`` of the whole system.  Reported: the per-class profiles
``u_{k,ℓ} = Σ_{i>=ℓ} Σ_φ x[k, i, φ]`` and the pooled ``U_ℓ = Σ_k f_k u_{k,ℓ}``, linear maps of
``x`` (``V_u = C V_x``, ``W_u = C W_x Cᵀ``: exact).  Sampling with replacement only.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from ..checks import check_bool
from ..model import check_load
from ..system.service import ServerClasses
from .classes_phase import _profiles, classes_phase_drift
from .corrections import RefinedMeanField
from .expansion import SECOND_STEP, refined_expansion
from .lyapunov import MAX_LYAPUNOV_LEVELS, AccuracyWarning
from .phase import _g

__all__ = ["ClassesRefinedMeanField", "classes_refined_mean_field", "classes_jumps", "TOL"]

TOL = 1e-14  # the profiles are reported up to the first level where every class is below this


def classes_jumps(
    x: np.ndarray,
    lam: float,
    f: np.ndarray,
    s: np.ndarray,
    alpha: np.ndarray,
    T: np.ndarray,
    t0: np.ndarray,
    d: int = 2,
    policy: str = "jsq-d",
) -> tuple[np.ndarray, Any]:
    """The jumps of ``n x`` whose mean is :func:`~supermarket.meanfield.classes_phase.classes_phase_drift`
    (docs/model.md §15.8): their rates per server (of all ``n``) and their vectors over the
    flattened state (index ``(k L + ℓ − 1) K + φ``), entries ``±1/f_k``.  With ``a = λ s̄``:

    - an arrival at an idle class-``k`` server, starting phase ``φ``: ``a g_0 f_k (1 − u_{k,1}) α_φ``;
    - an arrival joining a class-``k`` server of length ``ℓ < L`` in phase ``φ``: ``a g_ℓ f_k x[k,ℓ,φ]``;
    - a phase change ``φ → ψ``: ``f_k s_k x[k,ℓ,φ] T_φψ``;
    - a completion in phase ``φ`` at length ``ℓ``, the next customer starting in ``ψ`` (``ℓ >= 2``):
      ``f_k s_k x[k,ℓ,φ] t0_φ α_ψ`` (``ℓ = 1``: ``f_k s_k x[k,1,φ] t0_φ``, the server idles).

    Parameters
    ----------
    x : numpy.ndarray (classes, levels, phases)
    lam, f, s, alpha, T, t0, d, policy : as :func:`~supermarket.meanfield.classes_phase.classes_phase_drift`.

    Returns
    -------
    (rates, vectors)
        ``rates`` (m,) and ``vectors``, a SciPy CSR matrix (m, classes·levels·phases).

    Examples
    --------
    >>> f, s = np.array([0.3, 0.7]), np.array([2.0, 1.0])
    >>> a, T, t0 = np.array([1.0, 0.0]), np.array([[-2.0, 2.0], [0.0, -2.0]]), np.array([0.0, 2.0])
    >>> x = np.random.default_rng(1).uniform(0.0, 0.1, size=(2, 5, 2))
    >>> r, J = classes_jumps(x, 0.6, f, s, a, T, t0)
    >>> bool(np.allclose(J.T @ r, classes_phase_drift(x, 0.6, f, s, a, T, t0).ravel(), atol=1e-15))
    True
    """
    Kc, L, K = x.shape
    u = _profiles(x)
    U = f @ u
    g = np.ones(L + 1) if policy == "random" else _g(U, d)
    arr = lam * float(f @ s)
    idx = np.arange(Kc * L * K).reshape(Kc, L, K)
    rates: list[np.ndarray] = []
    src: list[np.ndarray] = []
    dst: list[np.ndarray] = []
    cls: list[np.ndarray] = []

    def add(rate, a_, b_, k):
        rates.append(np.asarray(rate).ravel())
        src.append(np.broadcast_to(a_, np.shape(rate)).ravel())
        dst.append(np.broadcast_to(b_, np.shape(rate)).ravel())
        cls.append(np.full(rates[-1].size, k))

    none = np.full(K, -1)
    for k in range(Kc):
        fk, sk = f[k], s[k]
        add(arr * g[0] * fk * (1.0 - u[k, 1]) * alpha, none, idx[k, 0], k)  # arrivals at idle servers
        add(arr * g[1:L, None] * fk * x[k, : L - 1], idx[k, : L - 1], idx[k, 1:], k)  # joins below the top
        for p in range(K):  # phase changes p -> q
            for q in (q for q in range(K) if q != p):
                add(fk * sk * x[k, :, p] * T[p, q], idx[k, :, p], idx[k, :, q], k)
        add(fk * sk * x[k, 0] * t0, idx[k, 0], none, k)  # completions at length 1
        for q in range(K):  # completions at length ℓ >= 2, the next service in phase q
            add(fk * sk * x[k, 1:] * (t0 * alpha[q]), idx[k, 1:], np.repeat(idx[k, :-1, q][:, None], K, 1), k)
    r, a_, b_, c_ = (np.concatenate(v) for v in (rates, src, dst, cls))
    w = 1.0 / f[c_]  # one class-k server of n f_k moves: n x[k] changes by 1/f_k
    rows = np.arange(r.size)
    ia, ib = a_ >= 0, b_ >= 0
    J = sp.csr_matrix(
        (
            np.concatenate([-w[ia], w[ib]]),
            (np.concatenate([rows[ia], rows[ib]]), np.concatenate([a_[ia], b_[ib]])),
        ),
        shape=(r.size, Kc * L * K),
    )
    return r, J


@dataclass(frozen=True)
class ClassesRefinedMeanField(RefinedMeanField):
    """:class:`~supermarket.meanfield.corrections.RefinedMeanField` with server classes
    (docs/model.md §15.8): ``pi``, ``V``, ``W`` are those of the pooled profile
    ``U_ℓ = Σ_k f_k u_{k,ℓ}`` (the share of all servers with at least ``ℓ`` customers), and
    ``u``, ``V_u``, ``W_u`` those of the per-class profiles.

    Attributes
    ----------
    u, V_u : numpy.ndarray (classes, levels)
        ``π_{k,ℓ}`` and the ``1/n`` term of ``E[u_{k,ℓ}]``.
    W_u : numpy.ndarray (classes·levels, classes·levels)
        The limit of ``Cov(√n u)`` (index ``k·levels + ℓ − 1``; ``n`` the number of all servers).
    x, V_x, W_x : numpy.ndarray
        The same of the state by class, level and phase (flattened; kept levels all).

    Examples
    --------
    >>> r = classes_refined_mean_field(2, 0.5, "0.5:2,0.5:1")
    >>> r.V_u.shape[0], bool(abs(float(r.f @ (r.s * r.V_u[:, 0]))) < 1e-12)   # Σ_k f_k s_k u_{k,1} = λ s̄ at every n
    (2, True)
    """

    service: str = "exp"
    policy: str = "jsq-d"
    phases: int = 1
    server_classes: ServerClasses | None = None
    derivative_error: float = 0.0
    u: np.ndarray | None = field(default=None, repr=False)
    V_u: np.ndarray | None = field(default=None, repr=False)
    W_u: np.ndarray | None = field(default=None, repr=False)
    x: np.ndarray | None = field(default=None, repr=False)
    V_x: np.ndarray | None = field(default=None, repr=False)
    W_x: np.ndarray | None = field(default=None, repr=False)

    _omit: ClassVar[tuple[str, ...]] = ("W", "V_drift", "x", "V_x", "W_x", "W_u")
    _order: ClassVar[tuple[str, ...]] = (
        "service", "policy", "server_classes", "d", "load", "replace", "levels", "pi", "V", "u", "V_u",
    )  # fmt: skip

    @property
    def f(self) -> np.ndarray:
        """The class fractions ``f_k``."""
        assert self.server_classes is not None
        return np.asarray(self.server_classes.fractions, float)

    @property
    def s(self) -> np.ndarray:
        """The class speeds ``s_k``."""
        assert self.server_classes is not None
        return np.asarray(self.server_classes.speeds, float)

    def valid_for(self, n: int) -> bool:
        """As :meth:`RefinedMeanField.valid_for`, and every class's ``π_k + V_k/n`` a profile too."""
        if not super().valid_for(n):
            return False
        assert self.u is not None and self.V_u is not None
        m = self.u + self.V_u / n
        return bool(np.all(np.isfinite(m)) and np.all((m >= 0) & (m <= 1)) and np.all(np.diff(m, axis=1) <= 0))

    def class_mean(self, n: int) -> np.ndarray:
        """``π_k + V_k/n`` per class (classes, levels), without the checks of :meth:`mean`."""
        n = self._check_n(n)
        assert self.u is not None and self.V_u is not None
        return self.u + self.V_u / n

    def class_covariance(self, k: int) -> np.ndarray:
        """The block of ``W_u`` of class ``k``: the limit of ``Cov(√n u_k)``."""
        assert self.W_u is not None
        L = self.levels
        return self.W_u[k * L : (k + 1) * L, k * L : (k + 1) * L]


def classes_refined_mean_field(
    d: int,
    lam: float | str,
    server_classes: str | ServerClasses,
    service: Any = "exp",
    *,
    policy: str = "jsq-d",
    replace: bool = True,
    levels: int | None = None,
) -> ClassesRefinedMeanField:
    """``E[u_k] ≈ π_k + V_k/n`` and ``Cov(√n u) ≈ W`` with server classes (docs/model.md §15.8).

    Parameters
    ----------
    d : int
        Choices of ``jsq-d`` (``random`` ignores it).
    lam : float or str
        Load per unit of capacity, ``0 < λ < 1``.
    server_classes : str or ServerClasses
        ``FRACTION:SPEED,…``.
    service : str or ServiceLaw
        ``exp`` or a law with a phase-type form (``erlang:K``, ``hyperexp:SCV``, ``ph:FILE``).
    policy : {"jsq-d", "random"}
        A rule with a differentiable drift (the others are refused, by the method table).
    replace : bool
        Must be True (sampling with replacement); False is refused, with the table's reason.
    levels : int, optional
        Levels of the fixed point (by default its own); the profiles are reported up to the
        first level where every class is below :data:`TOL`.

    Returns
    -------
    ClassesRefinedMeanField
        ``accurate`` is False (with an :class:`AccuracyWarning`) when the solves lost their accuracy.

    Raises
    ------
    ValueError
        The method table's refusal, a parameter out of range, or more than
        :data:`~supermarket.meanfield.lyapunov.MAX_LYAPUNOV_LEVELS` classes × levels × phases.

    Examples
    --------
    >>> r = classes_refined_mean_field(2, 0.5, "1:1")      # one class: the refined mean field of §3
    >>> round(float(r.pi[1]), 12), bool(r.V[1] > 0)
    (0.125, True)
    """
    from ..system import methods
    from ..system import policies as pol
    from ..system.spec import System

    check_bool("replace", replace)
    lam_f = check_load(lam)
    system = System(
        None, d, lam_f, rule=pol.check_policy(policy), replace=replace, service=service, server_classes=server_classes
    )
    methods.refined_mean_field(system, "replace" if not replace else "server_classes")  # the table's refusals
    law = system.service
    sc = system.server_classes
    assert sc is not None  # the table let through classes only
    f = np.asarray(sc.fractions, float)
    s = np.asarray(sc.speeds, float)
    a, M, t0 = _phase_form(law)
    Kc, K = f.size, a.size
    L0 = int(levels) if levels is not None else _first_levels(system.rule, lam_f, f, s, a, M)
    if Kc * L0 * K > MAX_LYAPUNOV_LEVELS:  # refused before any work: the fixed point's first level count
        raise ValueError(_too_many(Kc, L0, K, system))
    dd, x = _fixed_point(system, d, lam_f, levels)
    L = x.shape[1]
    if Kc * L * K > MAX_LYAPUNOV_LEVELS:
        raise ValueError(_too_many(Kc, L, K, system))
    shape = x.shape
    rule = system.rule

    def drift(v):
        return classes_phase_drift(v.reshape(shape), lam_f, f, s, a, M, t0, dd, rule).ravel()

    def jumps(v):
        return classes_jumps(v.reshape(shape), lam_f, f, s, a, M, t0, dd, rule)

    e = refined_expansion(drift, jumps, x.ravel(), step=min(SECOND_STEP, 1e-3 / max(dd, 1)))
    if e.issues:
        warnings.warn(
            f"refined mean field with classes {sc.spec} at d={d}, load={lam_f!r}, service {law.spec} is not accurate "
            f"({'; '.join(e.issues)}): V and W are not to be used (the mean field π is)",
            AccuracyWarning,
            stacklevel=2,
        )
    u, top, Cu, CU = _projections(x, f, levels is not None)
    Wu, WU = Cu @ e.W @ Cu.T, CU @ e.W @ CU.T
    return ClassesRefinedMeanField(
        d=int(system.d),
        lam=lam_f,
        levels=top,
        pi=CU @ x.ravel(),
        V=CU @ e.V,
        W=0.5 * (WU + WU.T),
        accurate=e.accurate,
        error_estimate=e.error_estimate,
        issues=e.issues,
        replace=True,
        service=law.spec,
        policy=rule,
        phases=K,
        server_classes=sc,
        derivative_error=e.derivative_error,
        u=u[:, :top],
        V_u=(Cu @ e.V).reshape(Kc, top),
        W_u=0.5 * (Wu + Wu.T),
        x=x.ravel(),
        V_x=e.V,
        W_x=e.W,
    )


def _phase_form(law: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(α, T, t0)`` of the service law: one phase of rate 1 for ``exp``."""
    if law.is_exponential:
        return np.ones(1), -np.ones((1, 1)), np.ones(1)
    assert law.alpha is not None and law.T is not None
    a, M = np.asarray(law.alpha, float), np.asarray(law.T, float)
    return a, M, -M.sum(axis=1)


def _fixed_point(system: Any, d: int, lam_f: float, levels: int | None) -> tuple[Any, np.ndarray]:
    """``(d, x)``: the rule's ``d`` (from ``d`` as given) and the fixed point of the classes'
    mean field as ``x[k, ℓ, φ]`` (class, length, phase; one phase for ``exp``)."""
    sc, law = system.server_classes, system.service
    if law.is_exponential:
        from .classes import classes_fixed_point

        fpe = classes_fixed_point(d, lam_f, sc, policy=system.rule, levels=levels)
        uu = fpe.u
        return fpe.d, (uu - np.hstack([uu[:, 1:], np.zeros((uu.shape[0], 1))]))[:, :, None]
    from .classes_phase import classes_phase_fixed_point

    fpp = classes_phase_fixed_point(d, lam_f, sc, law, policy=system.rule, levels=levels)
    return fpp.d, fpp.x


def _projections(x: np.ndarray, f: np.ndarray, fixed: bool) -> tuple:
    """``(u, top, Cu, CU)``: the profiles ``u_{k,ℓ} = Σ_{i>=ℓ} Σ_φ x[k, i, φ]``, the levels
    reported (all when ``fixed``, else up to the first where every class is below :data:`TOL`),
    and the maps from ``x`` to ``u_{k,ℓ}`` and to ``U_ℓ = Σ_k f_k u_{k,ℓ}`` on those levels."""
    Kc, L, K = x.shape
    Cu = np.kron(np.eye(Kc), np.kron(np.triu(np.ones((L, L))), np.ones((1, K))))
    u = (Cu @ x.ravel()).reshape(Kc, L)
    low = np.nonzero(u.max(axis=0) < TOL)[0]
    top = L if fixed or low.size == 0 else int(low[0]) + 1
    keep = (np.arange(Kc)[:, None] * L + np.arange(top)[None, :]).ravel()
    Cu = Cu[keep]
    CU = np.kron(f[None, :], np.eye(top)) @ Cu
    return u, top, Cu, CU


def _first_levels(rule: str, lam: float, f: np.ndarray, s: np.ndarray, a: np.ndarray, M: np.ndarray) -> int:
    """The fewest levels the fixed point solves for (it may double them): ``jsq-d`` starts from 32
    (exp) or 24 (phase-type); ``random`` takes the slowest class's tail to 1e-13, as the fixed points do."""
    import math

    if rule != "random":
        return 32 if a.size == 1 else 24
    load = lam * float(f @ s) / float(s.min())  # the slowest class's own load, < 1 (the table checked it)
    if a.size == 1:
        return max(8, math.ceil(math.log(1e-13) / math.log(load)) + 4)
    from .classes_phase import _mph1_decay

    return max(8, math.ceil(math.log(1e-13) / math.log(_mph1_decay(load, a, M))) + 4)


def _too_many(Kc: int, L: int, K: int, system: Any) -> str:
    return (
        f"levels: the refined mean field of {system.describe()} would solve for {Kc} classes x {L} levels x {K} "
        f"phases = {Kc * L * K} unknowns (more than {MAX_LYAPUNOV_LEVELS}; the dense Lyapunov solve costs "
        "O(unknowns^3)); pass fewer levels (levels=, in the library) or merge classes"
    )
