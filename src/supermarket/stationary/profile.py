"""Exact stationary law of the supermarket chain for small ``n`` (docs/model.md §11).

:func:`solve` builds the generator of the profile chain truncated at a queue-length cap
``M`` (``C(n+M, n)`` states, indexed by the combinatorial number system) as a sparse
matrix, solves ``π Q = 0`` with SciPy's sparse LU and raises the cap until the stationary
probability of a queue at the cap is below ``tol`` (docs/model.md §11).

Reported (keys as in :class:`~supermarket.simulation.SimulationResult` where they mean the
same): ``u_mean`` (``E[u_i]``), ``ud_mean`` (``E[P_i]``), ``max_queue_dist``,
``mean_queue_length``, the response times (:mod:`supermarket.response`, exact given
PASTA), ``states``, ``truncation`` and ``seconds``; the whole law ``P(u = ·)`` on request.
"""

from __future__ import annotations

import itertools
import math
import time as _time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from .. import response as _resp
from ..checks import check_bool
from ..model import Params, check_int, check_positive_float, check_positive_int
from ..response.mixture import check_quantiles
from ..result import Result, frame, pyplot
from ..system import policies as _pol
from .size import (
    DEFAULT_TOL,
    MAX_CAP,
    MAX_SECONDS,
    MAX_STATES,
    SLOW_STATES,
    START_CAP,
    _check_seconds,
    _check_size,
    _first_cap,
    _largest_fitting_cap,
    _least_cap,
    count_nonzeros,
    count_states,
    estimate_bytes,
    estimate_seconds,
    least_states,
)
from .solver import Budget, BudgetExceeded, stationary_vector

__all__ = [
    "solve",
    "ExactResult",
    "count_states",
    "count_nonzeros",
    "estimate_bytes",
    "estimate_seconds",
    "least_states",
    "DEFAULT_TOL",
    "MAX_STATES",
    "MAX_SECONDS",
    "SLOW_STATES",
    "BudgetExceeded",
]


# =========================================================================== result
@dataclass(frozen=True)
class ExactResult(Result):
    """The exact stationary law of the (truncated) profile chain (docs/model.md §11).

    Arrays are indexed from level 1 (``u_mean[0] = E[u_1]``) up to the cap.
    ``truncation``: ``cap``, ``tol``, ``mass_at_cap`` (probability that some queue has the cap
    length: the stopping rule), ``dropped_fraction`` (share of arrivals the truncation drops,
    ``E[P_cap]``), ``previous_cap`` and ``u_change_from_previous_cap`` (largest change of any
    ``E[u_i]`` between the last two caps: an empirical size of the truncation error).

    Examples
    --------
    >>> r = solve(1, 1, 0.5)                 # M/M/1: E[u_i] = λ^i, mean queue λ/(1−λ)
    >>> round(float(r.u_mean[0]), 4), round(r.mean_queue_length, 4)
    (0.5, 1.0)
    >>> sorted(r.to_dict())[:3]
    ['max_queue_dist', 'mean_queue_length', 'mean_sojourn_time']
    """

    params: Params
    u_mean: np.ndarray
    ud_mean: np.ndarray
    max_queue_dist: dict
    mean_queue_length: float
    mean_sojourn_time: float
    response: _resp.ResponseTimes
    states: int
    truncation: dict
    seconds: float
    residual: float
    method: str = ""
    policy: str = _pol.DEFAULT_POLICY
    profile_counts: np.ndarray | None = field(default=None, repr=False)
    profile_prob: np.ndarray | None = field(default=None, repr=False)

    @property
    def sojourn(self) -> _resp.TimeLaw:
        return self.response.sojourn

    @property
    def waiting(self) -> _resp.TimeLaw:
        return self.response.waiting

    def profile_law(self, min_prob: float = 0.0) -> list:
        """``P(u = ·)``: ``[(counts c_1..c_M, probability), …]`` sorted by probability, those
        ``>= min_prob``.  Needs ``solve(..., profile_law=True)``."""
        if self.profile_prob is None or self.profile_counts is None:
            raise ValueError("the profile law was not kept; call solve(..., profile_law=True)")
        order = np.argsort(-self.profile_prob, kind="stable")
        out = []
        for i in order:
            p = float(self.profile_prob[i])
            if p < min_prob:
                break
            c = self.profile_counts[i]
            top = int(np.count_nonzero(c))
            out.append((tuple(int(v) for v in c[:top]), p))
        return out

    _omit = ("response", "profile_counts", "profile_prob")
    _extra = ("sojourn", "waiting")
    _order = (
        "params",
        "u_mean",
        "ud_mean",
        "max_queue_dist",
        "mean_queue_length",
        "mean_sojourn_time",
        "sojourn",
        "waiting",
    )

    def to_dict(self, *, profile_law: bool | float = False) -> dict[str, Any]:
        """The fields (``response`` as ``sojourn`` and ``waiting``), JSON-safe; with
        ``profile_law`` (True, or the least probability kept), the law of the profile too."""
        out = super().to_dict()
        if profile_law is not False and self.profile_prob is not None:
            mp = 0.0 if profile_law is True else float(profile_law)
            out["profile_law"] = [{"counts": list(c), "prob": p} for c, p in self.profile_law(mp)]
        return out

    def to_frame(self) -> Any:
        """Tidy table: ``E[u_i]`` and ``E[P_i]`` per level, the law of the maximum, and the
        response-time statistics (columns ``quantity, level, value``)."""
        rows = []
        for i, (u, p) in enumerate(zip(self.u_mean, self.ud_mean), start=1):
            rows.append({"quantity": "u_mean", "level": i, "value": float(u)})
            rows.append({"quantity": "ud_mean", "level": i, "value": float(p)})
        for m, p in sorted(self.max_queue_dist.items()):
            rows.append({"quantity": "max_queue_dist", "level": m, "value": float(p)})
        for law in (self.response.sojourn, self.response.waiting):
            rows.append({"quantity": f"{law.kind}_mean", "level": None, "value": law.mean})
            for q, v in law.quantiles.items():
                rows.append({"quantity": f"{law.kind}_quantile", "level": q, "value": v})
        return frame(rows)

    def summary(self) -> str:
        p = self.params
        tr = self.truncation
        lines = [
            f"Exact stationary law (docs/model.md §11): n={p.n}, d={p.d}, λ={p.lam:g}, "
            + (
                f"{'with' if p.replace else 'without'} replacement"
                if self.policy == _pol.DEFAULT_POLICY
                else f"dispatch rule {_pol.describe(self.policy)} "
                + ("(replacement unused)" if _pol.RULES[self.policy].uses_d else "(d and replacement unused)")
            ),
            f"  {self.states} states (queue lengths capped at {tr['cap']}), solved in {self.seconds:.3g} s, "
            f"{self.method}, residual {self.residual:.2g}",
            f"  truncation: P(some queue at the cap) = {tr['mass_at_cap']:.3g} (tol {tr['tol']:g}); "
            f"arrivals dropped {tr['dropped_fraction']:.3g}"
            + (
                ""
                if tr.get("u_change_from_previous_cap") is None
                else f"; max |ΔE[u_i]| from cap {tr['previous_cap']}: {tr['u_change_from_previous_cap']:.3g}"
            ),
            f"  mean queue length {self.mean_queue_length:.10g}, mean sojourn time {self.mean_sojourn_time:.10g}",
        ]
        shown = [i for i, u in enumerate(self.u_mean) if u >= 1e-12]
        lines.append("  E[u_i]: " + ", ".join(f"{self.u_mean[i]:.8g}" for i in shown[:12]))
        lines.append(
            "  max queue length: "
            + ", ".join(f"{m}: {v:.6g}" for m, v in sorted(self.max_queue_dist.items()) if v >= 1e-12)
        )
        lines.append(self.response.summary())
        return "\n".join(lines)

    def plot(self, path: Any = None) -> Any:
        """``E[u_i]`` (log scale), the law of the maximum, and the response-time tails."""
        plt = pyplot(path is not None, force=False)
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
        lv = np.arange(1, self.u_mean.size + 1)
        a1.semilogy(lv, np.maximum(self.u_mean, 1e-300), "o-", label="exact E[u_i]")
        a1.set_xlabel("level i")
        a1.set_ylim(max(1e-16, float(self.u_mean[self.u_mean > 0].min()) / 2), 1.5)
        a1.legend(fontsize=8)
        ks = sorted(self.max_queue_dist)
        a2.bar(ks, [self.max_queue_dist[k] for k in ks])
        a2.set_xlabel("maximum queue length")
        a2.set_ylabel("probability")
        p = self.params
        fig.suptitle(f"exact law, n={p.n}, d={p.d}, λ={p.lam:g}", fontsize=10)
        fig.tight_layout()
        if path is not None:
            from ..files import save_figure_atomic

            save_figure_atomic(fig, path, dpi=120)  # whole or not at all
        return fig


# =========================================================================== the chain
def _sample_table(n: int, d: int, replace: bool) -> np.ndarray:
    """``P`` of JSQ(d) as a function of the count ``c = 0..n``: ``(c/n)^d`` or ``C(c, d)/C(n, d)``
    (the other dispatch rules: :func:`supermarket.system.policies.p_levels`)."""
    c = np.arange(n + 1)
    if replace:
        return (c / n) ** d
    tot = math.comb(n, d)
    return np.array([math.comb(int(k), d) / tot for k in c])


def _states(n: int, cap: int):
    """All ascending length vectors (``S x n``, row ``r`` has rank ``r``) and the binomial table."""
    S = math.comb(n + cap, n)
    Cb = np.zeros((n + cap + 1, n + 2), dtype=np.int64)
    for a in range(n + cap + 1):
        for b in range(min(a, n + 1) + 1):
            Cb[a, b] = math.comb(a, b)
    Z = np.fromiter(
        itertools.chain.from_iterable(itertools.combinations(range(n + cap), n)), dtype=np.int64, count=S * n
    ).reshape(S, n)
    k = np.arange(n)
    rank = Cb[Z, k + 1].sum(axis=1)
    Y = np.empty((S, n), dtype=np.int64)
    Y[rank] = Z - k
    return Y, Cb


def _build(n: int, d: int, lam: float, replace: bool, cap: int, policy: str = _pol.DEFAULT_POLICY):
    """Generator ``Q`` (CSR, ``S x S``), the counts ``c_1..c_{cap}`` per state, and ``P`` per state
    (``P_ℓ(c)`` of the dispatch rule, :func:`supermarket.system.policies.p_levels`)."""
    Y, Cb = _states(n, cap)
    S = Y.shape[0]
    lev = np.arange(cap + 2)
    # counts: c[:, i] = #{k : y_k >= i}, i = 0..cap+1 (c_0 = n, c_{cap+1} = 0)
    c = np.empty((S, cap + 2), dtype=np.int64)
    for i in lev:
        c[:, i] = (Y >= i).sum(axis=1)
    if policy == _pol.DEFAULT_POLICY:
        tab = _sample_table(n, d, replace)
        P = tab[c]  # P_i per state, i = 0..cap+1
    else:  # P_0 = 1, then P_1..P_{cap+1} of the rule (JIQ's depends on c_1 too)
        P = np.hstack([np.ones((S, 1)), _pol.p_levels(policy, c[:, 1:], n, d, replace)])
    rows, cols, vals = [], [], []
    out = np.zeros(S)
    r = np.arange(S, dtype=np.int64)
    kk = np.arange(n)
    for ell in range(cap):  # arrivals joining a queue of length ell < cap
        rate = n * lam * (P[:, ell] - P[:, ell + 1])
        ok = rate > 0
        if not ok.any():
            continue
        src = r[ok]
        k = n - c[ok, ell + 1] - 1  # last ascending position holding ell
        z = ell + k
        dst = src + Cb[z, k]
        rows.append(src)
        cols.append(dst)
        vals.append(rate[ok])
        out[ok] += rate[ok]
    for ell in range(1, cap + 1):  # departures from a queue of length ell
        rate = (c[:, ell] - c[:, ell + 1]).astype(float)
        ok = rate > 0
        if not ok.any():
            continue
        src = r[ok]
        k = n - c[ok, ell]  # first ascending position holding ell
        z = ell + k
        dst = src - Cb[z - 1, k]
        rows.append(src)
        cols.append(dst)
        vals.append(rate[ok])
        out[ok] += rate[ok]
    del kk
    rows.append(r)
    cols.append(r)
    vals.append(-out)
    Q = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(S, S))
    return Q, c[:, 1 : cap + 1], P[:, 1 : cap + 1], Y[:, -1]


def _one(n, d, lam, replace, cap, keep, prev=None, policy=_pol.DEFAULT_POLICY, budget=None):
    if budget is None:
        budget = Budget(None, "")
    budget.stage(f"cap {cap}: enumerating {math.comb(n + cap, n):,} states and building the generator")
    Q, c, P, mx = _build(n, d, lam, replace, cap, policy)
    budget.check(f"cap {cap}: building the generator")
    tot = c.sum(axis=1)
    x0 = None
    if prev is not None and prev["pi"].size > 1:
        # the previous cap's law, extended to the new states (ranks of the old states are
        # unchanged: the colex rank does not depend on the cap) with a small floor
        x0 = np.full(Q.shape[0], prev["pi"].min() if prev["pi"].min() > 0 else 1e-300)
        x0[: prev["pi"].size] = prev["pi"]
    pi, res, method = stationary_vector(Q, tot, x0, budget)
    u = (pi @ c) / n
    ud = pi @ P
    mq = np.bincount(mx, weights=pi, minlength=cap + 1)
    out = {"u": u, "ud": ud, "max": mq, "res": res, "S": Q.shape[0], "method": method, "pi": pi}
    if keep:
        out["c"] = c
    return out


@dataclass(frozen=True)
class _Job:
    """What :func:`solve` solves, checked: the chain (``n``, ``d``, ``lam`` as a float,
    ``replace``, the rule ``policy``), the truncation's ``tol``, whether the whole law is kept
    (``profile_law``) and the limits on the states and the predicted seconds."""

    n: int
    d: int
    lam: float
    replace: bool
    policy: str
    tol: float
    profile_law: bool
    max_states: int
    max_seconds: float

    def one(self, cap: int, prev: Any, budget: Budget) -> dict:
        """The chain truncated at ``cap`` solved (``prev``: the last cap's solution, a start)."""
        return _one(self.n, self.d, self.lam, self.replace, cap, self.profile_law, prev, self.policy, budget)


def _fixed_cap(job: _Job, cap: int, budget: Budget) -> tuple[dict, int, Any]:
    """``(solution, cap, None)`` at the cap given: no search, refused first if too large."""
    _check_size(job.n, cap, job.max_states)
    _check_seconds(job.n, job.d, job.lam, job.tol, cap, job.max_states, job.max_seconds, fixed=True)
    return job.one(cap, None, budget), cap, None


def _search_cap(job: _Job, budget: Budget) -> tuple[dict, int, Any]:
    """``(solution, cap, (previous cap, its solution) or None)``: the cap raised until
    ``P(some queue has the cap length) < tol`` (docs/model.md §11), bounded in states and in
    predicted seconds."""
    n, d, lamf, tol, max_states, max_seconds = job.n, job.d, job.lam, job.tol, job.max_states, job.max_seconds
    policy = job.policy
    prev = None
    # E[u_M] >= π(M) (Jensen, with replacement; docs/model.md §3) and P(max >= M) >= E[u_M]:
    # no cap with π(M) >= tol can pass, so the search starts there (and refuses at once
    # when even that cap is too large).  Random routing is d = 1 (E[u_M] = λ^M exactly);
    # JSQ and JIQ have no such bound (their fluid fixed point vanishes above level 1)
    M = (
        START_CAP
        if not _pol.RULES[policy].smooth
        else max(START_CAP, _first_cap(int(_pol.meanfield_d(policy, d)), lamf, tol))
    )
    _check_size(n, M, max_states, " (the least cap with π(cap) < tol, which no smaller cap can meet)")
    # the finite-n bound (comparison with M/M/n, [derived]) is usually far above the
    # mean-field one: refuse now, not after solving ever larger caps for minutes
    _check_size(
        n,
        max(M, _least_cap(n, lamf, tol)),
        max_states,
        " (the least cap the search can end at: by comparison with M/M/n, P(max >= cap) "
        "stays above tol below it, docs/model.md §11)",
    )
    least = max(M, _least_cap(n, lamf, tol))
    _check_seconds(n, d, lamf, tol, least, max_states, max_seconds, fixed=False)
    hist: list[tuple[int, float]] = []
    while True:
        _check_size(n, M, max_states)
        # the predicted cost of the caps solved so far, not the clock: the caps tried (and so
        # the answer) depend on the inputs only, never on how busy the machine is
        spent = sum(estimate_seconds(n, m) for m, _ in hist)
        if prev is not None and spent + estimate_seconds(n, M) > max_seconds:
            # the extrapolated cap would take the run past its limit: the largest cap
            # above the last one that still fits, or a refusal (the run stays bounded)
            fit = _largest_fitting_cap(n, M, max_states, max_seconds - spent)
            if fit >= max(prev[0] + 1, least):
                M = fit
            else:
                _check_seconds(
                    n, d, lamf, tol, max(prev[0] + 1, least), max_states, max_seconds, fixed=False, spent=spent
                )
        sol = job.one(M, prev[1] if prev else None, budget)
        mass = float(sol["max"][M])
        hist.append((M, mass))
        budget.reached = f"cap {M} solved ({sol['S']:,} states), P(some queue at the cap) = {mass:.3g}"
        if mass < tol:
            return sol, M, prev
        prev = (M, sol)
        M = _next_cap(hist, tol)


def _next_cap(hist: list[tuple[int, float]], tol: float) -> int:
    """The next cap to try after the caps and masses at the cap ``hist``: the mass at the cap
    falls geometrically in M, so extrapolate from the last two caps."""
    M = hist[-1][0]
    mass = hist[-1][1]
    if len(hist) >= 2 and hist[-2][1] > mass > 0:
        (M1, m1), (M2, m2) = hist[-2], hist[-1]
        rate = (math.log(m2) - math.log(m1)) / (M2 - M1)
        step = math.ceil(math.log(tol / m2) / rate) + 1 if rate < 0 else M2
        M = M2 + max(1, min(step, 4 * M2))
    else:
        M = M + max(2, M // 2)
    if M > MAX_CAP:  # pragma: no cover - λ < 1 always gets there
        raise ValueError(f"the cap would exceed {MAX_CAP}; pass a larger tol")
    return M


def _response(job: _Job, ud: np.ndarray, quantiles: Any, budget: Budget) -> Any:
    """The response-time law from the stationary ``E[P_i]`` (``ud``), exact given PASTA."""
    budget.stage("the response-time law")
    resp = _resp.from_tails(
        ud,
        quantiles=quantiles,
        source="exact stationary law",
        params={"n": job.n, "d": job.d, "load": job.lam, "replace": job.replace},
    )
    budget.check("the response-time law")
    return resp


def _truncation(sol: dict, M: int, tol: float, prev: Any) -> dict:
    """The ``truncation`` block of the result at the cap ``M``: the mass at the cap, the
    fraction dropped, and how far ``u`` moved from the previous cap's (``prev``, if any)."""
    u, ud, mq = sol["u"], sol["ud"], sol["max"]
    trunc = {
        "cap": M,
        "tol": tol,
        "mass_at_cap": float(mq[M]),
        "dropped_fraction": float(ud[M - 1]),
        "previous_cap": None,
        "u_change_from_previous_cap": None,
    }
    if prev is not None:
        Mp, sp_ = prev
        du = np.abs(u[:Mp] - sp_["u"]).max()
        du = max(du, float(u[Mp:].max()) if M > Mp else 0.0)
        trunc["previous_cap"] = Mp
        trunc["u_change_from_previous_cap"] = float(du)
    return trunc


def solve(
    n: int,
    d: int,
    lam: float | str,
    *,
    replace: bool = True,
    tol: float = DEFAULT_TOL,
    cap: int | None = None,
    quantiles: Any = _resp.DEFAULT_QUANTILES,
    profile_law: bool = False,
    max_states: int = MAX_STATES,
    max_seconds: float = MAX_SECONDS,
    policy: str = _pol.DEFAULT_POLICY,
    progress: Any = None,
) -> ExactResult:
    """Exact stationary law of the ``(n, d, λ)`` supermarket chain (docs/model.md §11).

    Parameters
    ----------
    n : int
        Servers, >= 1 (the state count ``C(n+cap, n)`` limits it to about 10).
    d : int
        Choices, >= 1 (``<= n`` without replacement).
    lam : float
        Load in (0, 1).
    replace : bool
        Sample the ``d`` queues with replacement (default) or without.
    tol : float
        Stop raising the cap once ``P(some queue has the cap length) < tol``; in (0, 0.1].
    cap : int, optional
        A fixed queue-length cap instead (no search); the mass at the cap is still reported.
    quantiles : sequence of float
        Response-time quantile levels.
    profile_law : bool
        Keep the whole law ``P(u = ·)`` (see :meth:`ExactResult.profile_law`).
    max_states : int
        Refuse (``ValueError``, before building) a cap whose state count exceeds this.
    max_seconds : float, default MAX_SECONDS (60)
        Refuse (``ValueError``, before building anything) when the predicted time
        (:func:`estimate_seconds`, one idle core) of the fixed ``cap``, or of the least cap the
        search can end at (:func:`least_states`), exceeds this; the message names the largest
        ``n`` (or ``cap``) that fits.  During the search a cap that would take the total past
        it (the predicted time of the caps solved so far plus this one: never the clock, so
        the caps tried depend on the inputs only) is clamped to the largest cap that fits, or
        refused: the run is bounded.
    policy : {"jsq-d", "random", "jsq", "jiq"}, default "jsq-d"
        The dispatch rule (:mod:`supermarket.system.policies`): the generator's arrival rates are
        ``nλ (P_ℓ(c) − P_{ℓ+1}(c))``; ``d`` and ``replace`` are used by ``jsq-d`` only.
    progress : callable, optional
        Called with a short text at each stage (enumeration and build, each factorisation, the
        response-time law).  The wall clock is checked too, between those stages (and while
        an incomplete LU runs): past ``max_seconds`` the solve ends with
        :class:`BudgetExceeded` (a ``ValueError``) saying the stage and the caps solved; a
        solve that ends in time is unchanged.

    Returns
    -------
    ExactResult

    Raises
    ------
    TypeError, ValueError
        Bad parameters; or the system too large for memory (says so before trying).

    Examples
    --------
    >>> r = solve(1, 2, 0.5, tol=1e-12)                      # n = 1: M/M/1
    >>> round(float(r.u_mean[0]), 12), round(r.mean_queue_length, 9), round(r.sojourn.mean, 9)
    (0.5, 1.0, 2.0)
    >>> r = solve(3, 2, 0.6)
    >>> round(float(r.u_mean[0]), 6)                            # E[u_1] = λ for every n, d (tol 1e-6)
    0.6
    >>> r = solve(3, 1, 0.5, policy="random", tol=1e-12)        # n independent M/M/1: E[u_i] = λ^i
    >>> r.u_mean[:3].round(10).tolist()
    [0.5, 0.25, 0.125]
    """
    params = Params(n, d, lam, replace=replace)
    n, d, lamf = params.n, params.d, params.lam
    policy = _pol.rule(policy, "exact").name
    tol = check_positive_float("tol", tol)
    if tol > 0.1:
        raise ValueError(f"tol must lie in (0, 0.1]; got {tol!r}")
    max_states = check_positive_int("max_states", max_states)
    max_seconds = check_positive_float("max_seconds", max_seconds)
    check_bool("profile_law", profile_law)
    quantiles = check_quantiles(quantiles)
    if cap is not None:
        cap = check_int("cap", cap, minimum=1, maximum=MAX_CAP)
    t0 = _time.perf_counter()
    budget = Budget(max_seconds, f"n={n}, d={d}, λ={lamf:g}, policy {policy}", progress)
    job = _Job(n, d, lamf, params.replace, policy, tol, profile_law, max_states, max_seconds)
    sol, M, prev = _fixed_cap(job, cap, budget) if cap is not None else _search_cap(job, budget)
    seconds = _time.perf_counter() - t0
    u, ud, mq = sol["u"], sol["ud"], sol["max"]
    trunc = _truncation(sol, M, tol, prev)
    budget.reached = f"cap {M} solved ({sol['S']:,} states), P(some queue at the cap) = {float(mq[M]):.3g}"
    resp = _response(job, ud, quantiles, budget)
    mql = float(u.sum())
    return ExactResult(
        params=params,
        u_mean=u,
        ud_mean=ud,
        max_queue_dist={int(m): float(p) for m, p in enumerate(mq) if p > 0},
        mean_queue_length=mql,
        mean_sojourn_time=mql / lamf,
        response=resp,
        states=int(sol["S"]),
        truncation=trunc,
        seconds=float(seconds),
        residual=float(sol["res"]),
        method=sol["method"],
        policy=policy,
        profile_counts=sol.get("c"),
        profile_prob=sol["pi"] if profile_law else None,
    )
