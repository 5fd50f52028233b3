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
import os
import threading
import time as _time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from .. import response as _resp
from ..checks import check_bool
from ..model import Params, check_int, check_positive_float, check_positive_int
from ..response.mixture import _check_quantiles
from ..result import Result, frame, pyplot
from ..system import policies as _pol
from ..theory import log_fixed_point

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

DEFAULT_TOL = 1e-6
MAX_STATES = 1_000_000  # beyond this the solve takes many minutes on one core
BYTES_PER_NONZERO = 220  # measured: COO build + CSC + SuperLU fill, per generator non-zero (see docs/exact.md)
START_CAP = 4
MAX_CAP = 100_000


def count_states(n: int, cap: int) -> int:
    """Number of states of the profile chain with queue lengths ``0..cap``: ``C(n+cap, n)``.

    Parameters
    ----------
    n : int
        Servers (at least 1).
    cap : int
        Largest queue length kept (at least 1).

    Returns
    -------
    int
        The number of profiles (multisets of ``n`` queue lengths in ``0..cap``).

    Raises
    ------
    TypeError, ValueError
        ``n`` or ``cap`` is not a positive integer.

    Examples
    --------
    >>> count_states(1, 10), count_states(4, 10), count_states(8, 20)
    (11, 1001, 3108105)
    """
    n = check_positive_int("n", n)
    cap = check_positive_int("cap", cap)
    return math.comb(n + cap, n)


def _nonzeros_per_state(n: int, cap: int) -> int:
    return 2 * min(n, cap + 1) + 1


def count_nonzeros(n: int, cap: int) -> int:
    """Non-zeros of the generator :func:`solve` builds at ``(n, cap)``, with replacement:
    ``C(n+cap, n) + 2 cap C(n+cap−1, n−1)`` [derived].

    One diagonal entry per state, one arrival per distinct length ``ℓ < cap`` present and one
    departure per distinct length ``ℓ >= 1`` present; summed over the profiles, the number of
    distinct lengths in ``{0..cap−1}`` (or in ``{1..cap}``) present is ``cap C(n+cap−1, n−1)``
    (a given length is absent from ``C(n+cap−1, n)`` of the ``C(n+cap, n)`` profiles).
    Without replacement an arrival's rate ``nλ (C(c_ℓ, d) − C(c_{ℓ+1}, d))/C(n, d)`` can be 0
    (fewer than ``d`` queues at ``ℓ`` or above): then this is an upper bound.

    Parameters
    ----------
    n : int
        Servers, >= 1.
    cap : int
        The queue-length cap, >= 1.

    Returns
    -------
    int
        The number of non-zero entries of the generator.

    Examples
    --------
    >>> count_nonzeros(1, 5)        # M/M/1/5: 6 diagonal, 5 up, 5 down
    16
    >>> count_nonzeros(8, 8)
    115830
    """
    n = check_positive_int("n", n)
    cap = check_positive_int("cap", cap)
    return math.comb(n + cap, n) + 2 * cap * math.comb(n + cap - 1, n - 1)


#: The cost model of one cap (one core, seconds; measured with ``time.process_time`` on the
#: project's 2-core machine, d = 2, 3, λ = 0.7, 0.9, with replacement):
#:
#:   build ≈ BUILD_COEF · S · (n + cap)         (S states; the counts and the 2·cap event passes)
#:   solve ≈ SOLVE_COEF · nnz ** SOLVE_EXP       (nnz = count_nonzeros: ILU(drop 1e-2) + GMRES)
#:
#: measured (n, d, cap: states, non-zeros, build s, solve s):
#:   (8, 3,   8:  12,870,   115,830, 0.018, 0.20)   (4, 2,  30:  46,376,   373,736, 0.134, 1.56)
#:   (5, 3,  20:  53,130,   478,170, 0.099, 1.47)   (5, 2,  15:  15,504,   131,784, 0.016, 0.30)
#:   (6, 3,  14:  38,760,   364,344, 0.053, 0.81)   (8, 3,  10:  43,758,   432,718, 0.044, 1.00)
#:   (3, 2,  60:  39,711,   266,631, 0.155, 0.94)   (4, 2,  40: 135,751, 1,123,031, 0.741, 8.66)
#:   (2, 2, 300:  45,451,   226,051, 1.099, 0.28)   (3, 2, 100: 176,851, 1,207,051, 1.390, 7.81)
#:   (7, 3,  14: 116,280, 1,201,560, 0.211, 3.29)   (5, 2,  24: 118,755, 1,101,555, 0.345, 9.76)
#:   (6, 2,  20: 230,230, 2,355,430, 0.711, 35.8)
#:
#: a least-squares fit of log(solve) on log(nnz) (13 points, λ = 0.9 but (5, 2, 15) at 0.7):
#: slope 1.63, each point within a factor 0.43–1.55 of the fit (ILU fill varies with the shape
#: of the matrix; log-residual sd a factor 1.5); build within a factor 0.7–1.4.  Wall time
#: equals this on an idle core and is 2–5 times more on a loaded machine.  (Before GMRES
#: stopped on a residual relative to the solution, (8, 3, 8) took 28 s instead of 0.2 s:
#: three ILUs x 40 restarts that could not reach |r| <= 1e-13 |b|.)
BUILD_COEF = 9e-8
SOLVE_COEF = 8.9e-10
SOLVE_EXP = 1.63
#: Default ``max_seconds`` of :func:`solve`: refuse a solve predicted to take longer.
MAX_SECONDS = 60.0


def estimate_seconds(n: int, cap: int) -> float:
    """Predicted seconds (one idle core) to build and solve the chain at one ``(n, cap)``:
    ``BUILD_COEF · S (n + cap) + SOLVE_COEF · nnz^SOLVE_EXP`` (fitted to measurements, see the
    comment above :data:`BUILD_COEF`; good to a factor of about 2).

    Parameters
    ----------
    n, cap : int
        As in :func:`count_nonzeros`.

    Returns
    -------
    float
        Predicted CPU seconds of the build and the solve at this one cap (a whole cap search
        solves several caps).

    Examples
    --------
    >>> round(estimate_seconds(8, 16))     # n = 8, d = 3, λ = 0.9: the least cap its search can end at
    180
    >>> estimate_seconds(3, 20) < 0.1
    True
    """
    S = count_states(n, cap)
    return BUILD_COEF * S * (n + cap) + SOLVE_COEF * count_nonzeros(n, cap) ** SOLVE_EXP


ILU_THREAD = "supermarket-exact-ilu"


class BudgetExceeded(ValueError):
    """The wall-clock budget ``max_seconds`` of an exact solve ran out (a ``ValueError``: the CLI
    prints it in one line and exits 2, as the refusal before work).  The message says the stage
    and what had been reached.

    Examples
    --------
    >>> issubclass(BudgetExceeded, ValueError)
    True
    """


class _Budget:
    """A wall-clock budget, checked between the stages of a solve (enumeration, build, each
    factorisation, each GMRES restart, each cap of a search, the post-processing); ``stage``
    also reports the stage to an optional ``progress(text)`` callback.  ``max_seconds=None``:
    no limit (the callback only)."""

    def __init__(self, max_seconds: float | None, what: str, progress: Any = None):
        self.limit = max_seconds
        self.what = what
        self.progress = progress
        self.reached = "nothing solved yet"
        self.t0 = _time.perf_counter()

    def remaining(self) -> float | None:
        return None if self.limit is None else self.limit - (_time.perf_counter() - self.t0)

    def check(self, where: str) -> None:
        if self.limit is None:
            return
        spent = _time.perf_counter() - self.t0
        if spent > self.limit:
            raise BudgetExceeded(
                f"budget: max_seconds = {self.limit:g} s (--max-seconds) ran out after {spent:.3g} s during "
                f"{where} ({self.what}); reached: {self.reached}; a larger --max-seconds, a larger --tol or "
                "a smaller n or --cap"
            )

    def stage(self, where: str) -> None:
        if self.progress is not None:
            self.progress(where)
        self.check(where)


def _interruptible(fn, *args, _budget=None, _where="", **kw):
    """``fn(*args, **kw)`` in a helper thread, the calling thread waiting in short waits.

    SuperLU's ``spilu`` is one C call that releases the GIL but never checks for signals: run
    directly, Ctrl-C waits until it returns (tens of seconds for 10^5 states).  Here the main
    thread takes the ``KeyboardInterrupt`` at once; the abandoned factorization runs on to its
    end (bounded by ``max_seconds``) and its result is dropped.  The thread is not a daemon:
    an interpreter that exits meanwhile waits for it (a daemon thread inside SuperLU crashes
    the interpreter's finalization); the CLI, which has nothing left to do, exits at once
    (:data:`ILU_THREAD` names it).  The result is the same call's, bit for bit."""
    box: dict = {}
    done = threading.Event()

    def target():
        try:
            box["value"] = fn(*args, **kw)
        except BaseException as exc:  # handed to the caller
            box["error"] = exc
        finally:
            done.set()

    th = threading.Thread(target=target, name=ILU_THREAD, daemon=False)
    th.start()
    # an Event, not Thread.join: a KeyboardInterrupt inside join's lock leaves the thread
    # marked as stopped while it runs on (Python 3.11), and the exit then crashes
    while not done.wait(0.1):
        if _budget is not None:
            _budget.check(_where)  # the factorization runs on, its result dropped (as on Ctrl-C)
    th.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def estimate_bytes(n: int, cap: int) -> int:
    """A rough estimate of the memory :func:`solve` needs at this ``(n, cap)`` (bytes):
    ``states × non-zeros per state × BYTES_PER_NONZERO`` (build, matrix and LU fill).

    Parameters
    ----------
    n, cap : int
        As in :func:`count_states`.

    Returns
    -------
    int
        Estimated peak memory in bytes.

    Raises
    ------
    TypeError, ValueError
        As :func:`count_states`.

    Examples
    --------
    >>> estimate_bytes(4, 10) < 10**7
    True
    """
    return count_states(n, cap) * _nonzeros_per_state(n, cap) * BYTES_PER_NONZERO


def _memory_limit() -> int:
    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        phys = 8 * 2**30
    return int(phys // 2)


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


GMRES_TOL = 1e-15  # |πQ|_2 relative to max|Q_ii| Σπ: GMRES stops below it (see _stationary)


class _Converged(Exception):
    def __init__(self, y):
        super().__init__()
        self.y = y


DIRECT_MAX_STATES = 6000  # below this a sparse LU is fastest; above, its fill-in explodes


def _stationary(Q, tot, x0=None, budget=None) -> tuple[np.ndarray, float, str]:
    """``π Q = 0``, ``Σπ = 1``: fix ``π`` at the empty state (rank 0) and solve for the rest.

    Small systems: sparse LU.  Larger ones: GMRES preconditioned by an incomplete LU of the
    matrix with the states ordered by their total number of customers (every event changes
    it by one, so the matrix is block tridiagonal in that order), started from ``x0`` (the
    previous cap's solution) when given.  Returns the law, the residual
    ``max|π Q| / max|Q_ii|`` and the method used.  ``budget`` (a :class:`_Budget`) is checked
    before each factorisation, while it runs and after each GMRES restart.
    """
    if budget is None:
        budget = _Budget(None, "")
    S = Q.shape[0]
    if S == 1:
        return np.ones(1), 0.0, "trivial"
    A = Q.T.tocsc()
    scale = float(np.abs(Q.diagonal()).max())
    if S <= DIRECT_MAX_STATES:
        budget.stage(f"sparse LU solve of {S:,} states")
        x = spla.spsolve(A[1:, 1:], -np.asarray(A[1:, 0].todense()).ravel())
        pi = np.concatenate(([1.0], np.asarray(x).ravel()))
        method = "sparse LU"
    else:
        order = np.argsort(tot, kind="stable")  # order[0] = 0: the empty state stays first
        B = A[order][:, order].tocsc()
        sub = B[1:, 1:].tocsc()
        rhs = -np.asarray(B[1:, 0].todense()).ravel()
        guess = None
        if x0 is not None:
            g = x0[order] / x0[0]
            guess = g[1:]
        found: str | None = None

        def small_enough(y):
            # GMRES's own test, |r| <= 1e-13 |b|, is out of reach in floating point when the
            # empty state is rare (|y| = 1/π_0 - 1 huge: n = 8, d = 3, λ = 0.9 has π_0 ~ 5e-5,
            # and 3 x 40 restarts took 67 s for 12,870 states); stop instead, after a restart,
            # once the residual is small relative to the scale of the solution
            if np.linalg.norm(sub @ y - rhs) <= GMRES_TOL * scale * (1.0 + np.abs(y).sum()):
                raise _Converged(y)
            budget.check(f"GMRES on {S:,} states")

        for drop, fill in ((1e-2, 5), (1e-3, 10), (1e-4, 20)):
            where = f"incomplete LU (drop {drop:g}) of {S:,} states"
            budget.stage(where)
            ilu = _interruptible(
                spla.spilu, sub, drop_tol=drop, fill_factor=fill, permc_spec="NATURAL", _budget=budget, _where=where
            )
            M = spla.LinearOperator(sub.shape, ilu.solve)
            try:
                y, info = spla.gmres(
                    sub,
                    rhs,
                    x0=guess,
                    M=M,
                    rtol=1e-13,
                    atol=0.0,
                    restart=60,
                    maxiter=40,
                    callback=small_enough,
                    callback_type="x",
                )
            except _Converged as stop:
                y, info = stop.y, 0
            if info == 0:
                found = f"GMRES + ILU(drop {drop:g})"
                break
            guess = y
        method = "GMRES + ILU (not converged: see the residual)" if found is None else found
        piperm = np.concatenate(([1.0], y))
        pi = np.empty(S)
        pi[order] = piperm
    pi = np.maximum(pi, 0.0)
    pi /= pi.sum()
    res = float(np.abs(Q.T @ pi).max()) / scale
    return pi, res, method


def _first_cap(d: int, lam: float, tol: float) -> int:
    """The least ``M`` with ``π(M) < tol`` (mean-field fixed point, docs/model.md §3)."""
    logt = math.log(tol)
    if d == 1:
        return max(1, math.floor(logt / math.log(lam)) + 1)
    lp = log_fixed_point(d, lam, 64)
    below = np.nonzero(lp < logt)[0]
    return int(below[0]) + 1 if below.size else 64


def _erlang_c(n: int, lam: float) -> float:
    """Erlang's C formula: the probability that an arrival waits in M/M/n at load λ
    (offered traffic ``a = nλ``) [classical]."""
    a = n * lam
    term, s = 1.0, 1.0  # a^k/k! for k = 0, and the sum over k < n
    for k in range(1, n):
        term *= a / k
        s += term
    top = term * a / n / (1.0 - lam)  # a^n/n! · 1/(1 − λ)
    return top / (s + top)


def _least_cap(n: int, lam: float, tol: float) -> int:
    """The least cap ``M`` that the search can end at (docs/model.md §11, [derived]): the total
    number of customers dominates that of M/M/n with the same arrivals (at most ``min(N, n)``
    servers are busy), and the maximum is at least ``⌈N/n⌉``, so ``P(max >= M) >=
    P(N_{M/M/n} >= n(M−1)+1) = C(n, nλ) λ^{n(M−2)+1}``; the mass at the cap falls below ``tol``
    only for ``M`` past this bound."""
    C = _erlang_c(n, lam) * (1.0 - lam)
    if C <= 0.0:
        return 1
    # C λ^{n(M−2)+1} < tol  <=>  n(M−2)+1 > log(tol/C)/log λ
    x = math.log(tol / C) / math.log(lam)
    return max(1, math.floor((x - 1.0) / n) + 3) if x > 1.0 else 2


#: Kept for callers: about where (at the least cap the search can end at) a solve starts to
#: take many seconds.  The CLI now decides from :func:`estimate_seconds` instead.
SLOW_STATES = 100_000


def least_states(n: int, d: int, lam: float | str, tol: float = DEFAULT_TOL) -> tuple[int, int]:
    """``(cap, states)``: the least cap the cap search of :func:`solve` can end at (the larger
    of the mean-field and the M/M/n bounds, docs/model.md §11) and its state count, computed
    without solving anything; a lower bound on the work of :func:`solve`.

    Parameters
    ----------
    n, d : int
        Servers and choices (as in :func:`solve`).
    lam : float
        Load in (0, 1).
    tol : float, default DEFAULT_TOL
        The search's tolerance on the mass at the cap.

    Returns
    -------
    (int, int)
        The least cap and ``C(n + cap, n)``.

    Raises
    ------
    TypeError, ValueError
        Bad parameters.

    Examples
    --------
    >>> least_states(1, 2, 0.5, 1e-6)[0] >= 19   # M/M/1: (1 − λ)λ^M < 1e-6 needs M >= 19
    True
    """
    params = Params(n, d, lam)
    tol = check_positive_float("tol", tol)
    M = max(START_CAP, _first_cap(params.d, params.lam, tol), _least_cap(params.n, params.lam, tol))
    return M, count_states(params.n, M)


def _check_size(n, cap, max_states, why=""):
    S = math.comb(n + cap, n)
    need = S * _nonzeros_per_state(n, cap) * BYTES_PER_NONZERO
    lim = _memory_limit()
    if S > max_states or need > lim:
        raise ValueError(
            f"too large: n={n} with queue lengths capped at {cap}{why} has {S:,} states (C(n+cap, n)), about "
            f"{need / 2**30:.3g} GiB to solve (limit: {max_states:,} states, {lim / 2**30:.3g} GiB); "
            "use a smaller n, a larger --tol, or a smaller --cap"
        )
    return S


def _fits(n, cap, max_states, max_seconds) -> bool:
    S = math.comb(n + cap, n)
    need = S * _nonzeros_per_state(n, cap) * BYTES_PER_NONZERO
    return S <= max_states and need <= _memory_limit() and estimate_seconds(n, cap) <= max_seconds


def _largest_fitting_n(n, d, lam, tol, max_states, max_seconds) -> int:
    """The largest ``m < n`` whose least cap (:func:`least_states`) fits the limits, 0 if none
    (the cost grows with ``m``: searched upward)."""
    best = 0
    for m in range(1, n):
        if not _fits(m, least_states(m, d, lam, tol)[0], max_states, max_seconds):
            break
        best = m
    return best


def _largest_fitting_cap(n, cap, max_states, max_seconds) -> int:
    lo, hi = 0, cap  # the cost grows with the cap: bisect for the largest that fits
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _fits(n, mid, max_states, max_seconds) else (lo, mid)
    return lo


def _check_seconds(n, d, lam, tol, cap, max_states, max_seconds, *, fixed: bool, spent: float = 0.0):
    """Refuse (``ValueError``, one line) a cap whose predicted cost (:func:`estimate_seconds`),
    after the predicted ``spent`` seconds of the caps already solved, exceeds ``max_seconds``;
    the message says what fits."""
    secs = estimate_seconds(n, cap)
    if spent + secs <= max_seconds:
        return
    from ..result import human_seconds

    S = math.comb(n + cap, n)
    head = f"too slow: n={n}, d={d}, λ={lam:g}, tol={tol:g}: "
    if fixed:
        c = _largest_fitting_cap(n, cap, max_states, max_seconds)
        what = f"the cap {cap}"
        fit = f"a --cap up to {c} fits" if c >= 1 else "no cap fits at this n"
    else:
        if spent:  # the least cap fitted, the search's next one does not
            what = f"after caps predicted to take {spent:.3g} s the cap search needs a cap of at least {cap}"
            fit = "a larger --max-seconds or --tol ends it"
        else:
            m = _largest_fitting_n(n, d, lam, tol, max_states, max_seconds)
            what = f"the cap search ends at a cap of at least {cap}"
            fit = (
                f"n <= {m} fits at its least cap at this d, λ and tol (the search often ends a few caps "
                "higher, at several times the cost), or a larger --tol"
                if m >= 1
                else "no n fits at this d, λ and tol: a larger --tol"
            )
    raise ValueError(
        f"{head}{what} ({S:,} states, {count_nonzeros(n, cap):,} non-zeros) is predicted to take "
        f"{human_seconds(secs)}{' more' if spent else ''} on one core "
        f"(limit max_seconds = {max_seconds:g} s, --max-seconds); {fit}; "
        "for larger systems use `supermarket perfect` (exact samples) or `supermarket simulate`"
    )


def _one(n, d, lam, replace, cap, keep, prev=None, policy=_pol.DEFAULT_POLICY, budget=None):
    if budget is None:
        budget = _Budget(None, "")
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
    pi, res, method = _stationary(Q, tot, x0, budget)
    u = (pi @ c) / n
    ud = pi @ P
    mq = np.bincount(mx, weights=pi, minlength=cap + 1)
    out = {"u": u, "ud": ud, "max": mq, "res": res, "S": Q.shape[0], "method": method, "pi": pi}
    if keep:
        out["c"] = c
    return out


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
    quantiles = _check_quantiles(quantiles)
    if cap is not None:
        cap = check_int("cap", cap, minimum=1, maximum=MAX_CAP)
    t0 = _time.perf_counter()
    budget = _Budget(max_seconds, f"n={n}, d={d}, λ={lamf:g}, policy {policy}", progress)
    prev = None
    if cap is not None:
        _check_size(n, cap, max_states)
        _check_seconds(n, d, lamf, tol, cap, max_states, max_seconds, fixed=True)
        sol = _one(n, d, lamf, params.replace, cap, profile_law, None, policy, budget)
        M = cap
    else:
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
            sol = _one(n, d, lamf, params.replace, M, profile_law, prev[1] if prev else None, policy, budget)
            mass = float(sol["max"][M])
            hist.append((M, mass))
            budget.reached = f"cap {M} solved ({sol['S']:,} states), P(some queue at the cap) = {mass:.3g}"
            if mass < tol:
                break
            prev = (M, sol)
            # the mass at the cap falls geometrically in M: extrapolate from the last two caps
            if len(hist) >= 2 and hist[-2][1] > mass > 0:
                (M1, m1), (M2, m2) = hist[-2], hist[-1]
                rate = (math.log(m2) - math.log(m1)) / (M2 - M1)
                step = math.ceil(math.log(tol / m2) / rate) + 1 if rate < 0 else M2
                M = M2 + max(1, min(step, 4 * M2))
            else:
                M = M + max(2, M // 2)
            if M > MAX_CAP:  # pragma: no cover - λ < 1 always gets there
                raise ValueError(f"the cap would exceed {MAX_CAP}; pass a larger tol")
    seconds = _time.perf_counter() - t0
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
    budget.reached = f"cap {M} solved ({sol['S']:,} states), P(some queue at the cap) = {float(mq[M]):.3g}"
    budget.stage("the response-time law")
    resp = _resp.from_tails(
        ud,
        quantiles=quantiles,
        source="exact stationary law",
        params={"n": n, "d": d, "load": lamf, "replace": params.replace},
    )
    budget.check("the response-time law")
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
