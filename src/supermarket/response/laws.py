"""Response times in equilibrium: sojourn and waiting time of a customer (docs/model.md §10).

With FIFO service and exponential(1) service times, a customer who joins a queue holding
``j`` customers stays an Erlang(j+1, 1) time (its own service plus the ``j`` ahead; the one in
service has an exponential residual) and waits an Erlang(j, 1) time (0 when ``j = 0``).
Arrivals are Poisson, so they see the time-stationary state (PASTA): the law of the length
``J`` a customer joins is ``P(J = j) = E[P_j − P_{j+1}]``, where ``P_i`` is the probability
that all ``d`` sampled queues hold at least ``i`` customers (``u_i^d`` with replacement,
``C(c_i, d)/C(n, d)`` without) and the expectation is over the stationary law.  So every
response-time law here is an Erlang mixture, determined by the tails ``T_i = P(J >= i) = E[P_i]``.

Writing ``N_t`` for a Poisson(t) variable (the services that complete in ``t`` time units
while the server stays busy), the mixture has the closed forms (derived, docs/model.md §10)

- sojourn ``P(S > t) = Σ_{i>=0} T_i e^{−t} t^i / i!`` (``T_0 = 1``), ``E[S] = 1 + Σ_{i>=1} T_i``;
- waiting ``P(W > t) = Σ_{i>=0} T_{i+1} e^{−t} t^i / i!``, ``P(W = 0) = 1 − T_1``,
  ``E[W] = Σ_{i>=1} T_i``;

sums of positive terms, accurate far into the tail.  Quantiles are found by root finding
(:func:`scipy.optimize.brentq`) on these survival functions; their standard errors, when the
tails ``T`` come with a covariance (from a simulation), follow by the delta method:
``∂t_q/∂T_i = e^{−t} t^i/i! / f(t_q)`` (``f`` the density), ``∂E[S]/∂T_i = 1``.

Sources of the tails:

- :func:`from_join_probabilities` / :func:`from_tails`: given numbers (with optional covariance);
- :func:`from_simulation`: the time averages of ``P_i`` a :class:`~supermarket.simulation.SimulationResult`
  measured (``ud_mean``), with standard errors from whatever per-batch or per-replication data
  the result carries;
- :func:`from_meanfield`: the fixed point ``T_i = π(i)^d`` (mean field), or to first order in
  ``1/n`` (refined mean field, derived);
- :func:`supermarket.stationary.solve` (exact, small ``n``) uses :func:`from_tails`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import brentq
from scipy.special import gammaln

__all__ = [
    "DEFAULT_QUANTILES",
    "TimeLaw",
    "ResponseTimes",
    "from_join_probabilities",
    "from_tails",
    "from_simulation",
    "from_meanfield",
    "sojourn_survival",
    "waiting_survival",
    "check_quantile",
    "FifoSample",
    "simulate_fifo",
    "LatencyDesign",
    "least_d_for_latency",
    "max_load_for_latency",
    "verify_latency",
]

DEFAULT_QUANTILES = (0.5, 0.9, 0.99, 0.999)
_ATOL = 1e-9  # tolerance on probabilities given as input (sums, ranges)


# =========================================================================== validation
def check_quantile(q, name: str = "quantile") -> float:
    """A quantile level ``q`` in (0, 1) as a float; ``TypeError``/``ValueError`` otherwise.

    Parameters
    ----------
    q : float
        The level to check.
    name : str, default "quantile"
        The parameter's name, used in the error message.

    Returns
    -------
    float
        ``q`` as a Python float.

    Raises
    ------
    TypeError
        ``q`` is not a real number (booleans are refused).
    ValueError
        ``q`` is outside the open interval (0, 1).

    Examples
    --------
    >>> check_quantile(0.99)
    0.99
    >>> try:
    ...     check_quantile(1.0, "q")
    ... except ValueError as e:
    ...     print(e)
    q must lie in (0, 1); got 1.0
    """
    if isinstance(q, (bool, np.bool_)) or not isinstance(q, numbers.Real):
        raise TypeError(f"{name} must be a real number in (0, 1); got {q!r} ({type(q).__name__})")
    x = float(q)
    if not (0.0 < x < 1.0):
        raise ValueError(f"{name} must lie in (0, 1); got {q!r}")
    return x


def _check_quantiles(qs) -> tuple:
    if isinstance(qs, numbers.Real):
        qs = (qs,)
    try:
        out = tuple(check_quantile(q, "quantiles") for q in qs)
    except TypeError:
        raise
    if not out:
        raise ValueError("quantiles must hold at least one level in (0, 1)")
    return out


def _check_tails(T, name="tails") -> np.ndarray:
    try:
        arr = np.asarray(T, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a 1-d array of probabilities; got {type(T).__name__}") from None
    if arr.ndim != 1:
        raise TypeError(f"{name} must be a 1-d array; got shape {arr.shape}")
    bad = ~np.isfinite(arr) | (arr < -_ATOL) | (arr > 1 + _ATOL)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{name} must hold probabilities in [0, 1]; entry {i} is {arr[i]!r}")
    arr = np.clip(arr, 0.0, 1.0)
    up = np.diff(arr) > 1e-7
    if up.any():
        i = int(np.argmax(up)) + 1
        raise ValueError(f"{name} must be non-increasing (P(J >= i) falls with i); entry {i} ({arr[i]!r}) "
                         f"exceeds entry {i - 1} ({arr[i - 1]!r})")
    return np.minimum.accumulate(arr)


# =========================================================================== the mixture
def _poisson_pmf(t: float, m: int) -> np.ndarray:
    """``e^{−t} t^i / i!`` for ``i = 0..m−1`` (log space; exact 0 and 1 at ``t = 0``)."""
    i = np.arange(m, dtype=float)
    if t <= 0.0:
        out = np.zeros(m)
        if m:
            out[0] = 1.0
        return out
    return np.exp(i * math.log(t) - t - gammaln(i + 1.0))


def sojourn_survival(tails, t) -> np.ndarray:
    """``P(S > t)`` for the tails ``T_i = P(J >= i)``, ``i = 1, 2, …`` (docs/model.md §10).

    Parameters
    ----------
    tails : array_like
        ``P(J >= 1), P(J >= 2), …`` (``J``: length of the queue a customer joins).
    t : float or array_like
        Times ``>= 0``.

    Returns
    -------
    numpy.ndarray
        ``Σ_{i>=0} T_i e^{−t} t^i/i!`` with ``T_0 = 1``, one value per ``t``.

    Examples
    --------
    >>> import numpy as np
    >>> lam = 0.5; tails = lam ** np.arange(1, 80)       # d = 1: M/M/1
    >>> float(sojourn_survival(tails, 2.0)[0])           # exp(−(1−λ)t)
    0.36787944117144233
    """
    T = np.concatenate(([1.0], _check_tails(tails)))
    ts = np.atleast_1d(np.asarray(t, dtype=float))
    return np.array([float(_poisson_pmf(x, T.size) @ T) for x in ts])


def waiting_survival(tails, t) -> np.ndarray:
    """``P(W > t)`` for the tails ``T_i = P(J >= i)`` (docs/model.md §10); ``P(W > 0) = T_1``.

    Parameters
    ----------
    tails : array_like
        ``T_1, T_2, …``: non-increasing probabilities in [0, 1].
    t : float or array_like
        Times (non-negative).

    Returns
    -------
    numpy.ndarray
        ``P(W > t)`` at each time (1-d, one entry per time).

    Raises
    ------
    TypeError, ValueError
        ``tails`` is not a non-increasing 1-d array of probabilities.

    Examples
    --------
    >>> import numpy as np
    >>> tails = 0.5 ** np.arange(1, 80)
    >>> round(float(waiting_survival(tails, 0.0)[0]), 12)   # P(wait) = λ for M/M/1
    0.5
    """
    T = _check_tails(tails)
    ts = np.atleast_1d(np.asarray(t, dtype=float))
    return np.array([float(_poisson_pmf(x, T.size) @ T) for x in ts])


def _quantile(T_shift: np.ndarray, q: float, mean: float) -> tuple[float, float]:
    """Least ``t`` with ``S(t) <= 1 − q`` for ``S(t) = Σ_i T_shift[i] pmf_i(t)``; also the density
    ``f(t) = Σ_i (T_shift[i] − T_shift[i+1]) pmf_i(t)`` there (0 when the quantile is an atom)."""
    target = 1.0 - q
    m = T_shift.size

    def surv(x):
        return float(_poisson_pmf(x, m) @ T_shift)

    if surv(0.0) <= target:
        return 0.0, 0.0
    hi = max(1.0, mean)
    while surv(hi) > target:
        hi *= 2.0
        if hi > 1e12:  # pragma: no cover - a proper law has a finite quantile
            raise RuntimeError("quantile search did not end")
    lo = 0.0
    t = brentq(lambda x: surv(x) - target, lo, hi, xtol=1e-14 * max(1.0, hi), rtol=1e-15, maxiter=500)
    dens_coef = T_shift - np.concatenate((T_shift[1:], [0.0]))
    f = float(_poisson_pmf(t, m) @ dens_coef)
    return float(t), f


@dataclass(frozen=True)
class TimeLaw:
    """One response-time law (sojourn or waiting): mean, quantiles and their standard errors.

    ``quantiles`` maps the level ``q`` to the time ``t_q``; ``stderr`` is ``None`` (an exact or
    theoretical law) or ``{"mean": s, "quantiles": {q: s_q}}``; ``stderr_kind`` says how the
    errors were obtained (``"delta-method"`` from a covariance, ``"bound"`` from per-level
    standard errors when the correlations are unknown: ``Σ_i |∂/∂T_i| s_i``).

    Examples
    --------
    >>> import numpy as np
    >>> law = from_tails(0.5 ** np.arange(1, 200)).sojourn    # M/M/1 at λ = 0.5: Exp(1/2)
    >>> law.kind, round(law.mean, 9), round(law.quantiles[0.5], 6)   # median 2 log 2
    ('sojourn', 2.0, 1.386294)
    >>> law.stderr is None                                      # an exact law
    True
    """

    kind: str  # "sojourn" or "waiting"
    mean: float
    quantiles: dict
    stderr: dict | None = None
    stderr_kind: str | None = None
    atom_at_zero: float = 0.0

    def to_dict(self) -> dict:
        se = None
        if self.stderr is not None:
            se = {"mean": self.stderr["mean"],
                  "quantiles": {_qkey(q): v for q, v in self.stderr["quantiles"].items()},
                  "kind": self.stderr_kind}
        return {"mean": self.mean, "quantiles": {_qkey(q): v for q, v in self.quantiles.items()},
                "stderr": se, "atom_at_zero": self.atom_at_zero}


def _qkey(q: float) -> str:
    return repr(float(q)) if not float(q).is_integer() else str(q)


@dataclass(frozen=True)
class ResponseTimes:
    """Equilibrium sojourn and waiting time laws (Erlang mixtures, docs/model.md §10).

    ``tails``: ``T_i = P(J >= i)``, ``i = 1..L`` (``J``: length of the queue a customer joins);
    ``p_join``: ``P(J = j)``, ``j = 0..L``; ``source``: where the tails came from;
    ``notes``: caveats the numbers carry (e.g. a refined expansion clipped at small ``n``).

    Examples
    --------
    >>> import numpy as np
    >>> r = from_tails(0.5 ** np.arange(1, 200))              # M/M/1 at λ = 0.5
    >>> r.p_join[:3]
    array([0.5  , 0.25 , 0.125])
    >>> round(r.waiting.atom_at_zero, 9)                       # P(W = 0) = 1 − λ
    0.5
    """

    source: str
    tails: np.ndarray
    sojourn: TimeLaw
    waiting: TimeLaw
    params: dict = field(default_factory=dict)
    tails_cov: np.ndarray | None = field(default=None, repr=False)
    notes: tuple = ()

    @property
    def p_join(self) -> np.ndarray:
        T = np.concatenate(([1.0], self.tails, [0.0]))
        return T[:-1] - T[1:]

    # ----------------------------------------------------------------- laws on a grid
    def sojourn_cdf(self, t) -> np.ndarray:
        """``P(S <= t)`` on the times ``t``."""
        return 1.0 - sojourn_survival(self.tails, t)

    def waiting_cdf(self, t) -> np.ndarray:
        """``P(W <= t)`` on the times ``t`` (includes the atom ``P(W = 0)`` at ``t = 0``)."""
        return 1.0 - waiting_survival(self.tails, t)

    def cdf_frame(self, grid=None):
        """The two CDFs on a time grid (default: 0 to the sojourn p99.9, 200 points), tidy."""
        import pandas as pd
        if grid is None:
            top = max(self.sojourn.quantiles.values()) if self.sojourn.quantiles else 10.0
            grid = np.linspace(0.0, 1.1 * top, 200)
        grid = np.asarray(grid, dtype=float)
        rows = []
        for kind, f in (("sojourn", self.sojourn_cdf), ("waiting", self.waiting_cdf)):
            for t, c in zip(grid, f(grid)):
                rows.append({"kind": kind, "t": float(t), "cdf": float(c), "survival": float(1.0 - c)})
        return pd.DataFrame(rows)

    # ----------------------------------------------------------------- output
    def to_dict(self, *, cdf_grid=None) -> dict:
        out = {"source": self.source, "params": dict(self.params),
               "sojourn": self.sojourn.to_dict(), "waiting": self.waiting.to_dict(),
               "p_join": self.p_join.tolist(), "notes": list(self.notes)}
        if cdf_grid is not None:
            g = np.asarray(cdf_grid, dtype=float)
            out["cdf"] = {"t": g.tolist(), "sojourn": self.sojourn_cdf(g).tolist(),
                          "waiting": self.waiting_cdf(g).tolist()}
        return out

    def to_frame(self):
        """Tidy table: one row per (kind, statistic) with value and standard error."""
        import pandas as pd
        rows = []
        for law in (self.sojourn, self.waiting):
            se = law.stderr
            rows.append({"kind": law.kind, "statistic": "mean", "value": law.mean,
                         "stderr": None if se is None else se["mean"], "source": self.source})
            for q, v in law.quantiles.items():
                rows.append({"kind": law.kind, "statistic": f"p{100 * q:g}", "value": v,
                             "stderr": None if se is None else se["quantiles"][q], "source": self.source})
        return pd.DataFrame(rows)

    def summary(self) -> str:
        """The text the CLI prints: means and quantiles (± s.e. where there is one)."""
        lines = [f"Response times ({self.source}; FIFO, exponential(1) service, docs/model.md §10)"]
        for law in (self.sojourn, self.waiting):
            se = law.stderr

            def fmt(v, s):
                return f"{v:.6g}" if s is None else f"{v:.6g} ± {s:.2g}"
            parts = [f"mean {fmt(law.mean, None if se is None else se['mean'])}"]
            for q, v in law.quantiles.items():
                parts.append(f"p{100 * q:g} {fmt(v, None if se is None else se['quantiles'][q])}")
            extra = f"  (P(W = 0) = {law.atom_at_zero:.6g})" if law.kind == "waiting" else ""
            lines.append(f"  {law.kind:8s} " + ", ".join(parts) + extra)
        if self.sojourn.stderr is not None:
            lines.append(f"  (± one standard error, {self.sojourn.stderr_kind})")
        for note in self.notes:
            lines.append(f"  note: {note}")
        return "\n".join(lines)

    def plot(self, path=None, *, grid=None):
        """Survival functions ``P(S > t)`` and ``P(W > t)`` on a log scale (the tail), with the
        quantiles marked.  Returns the figure; saves it when ``path`` is given."""
        import matplotlib
        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
        if grid is None:
            top = max(self.sojourn.quantiles.values())
            grid = np.linspace(0.0, 1.2 * top, 300)
        grid = np.asarray(grid, dtype=float)
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        ax.semilogy(grid, np.maximum(1.0 - self.sojourn_cdf(grid), 1e-300), label="sojourn P(S > t)")
        ax.semilogy(grid, np.maximum(1.0 - self.waiting_cdf(grid), 1e-300), label="waiting P(W > t)")
        for q, v in self.sojourn.quantiles.items():
            ax.axvline(v, color="0.7", lw=0.8, ls=":")
            ax.text(v, 1.0 - q, f" p{100 * q:g}", fontsize=7, va="bottom")
        ax.set_ylim(max(1e-6, 0.1 * (1 - max(self.sojourn.quantiles))), 1.05)
        ax.set_xlabel("time (mean service times)")
        ax.set_ylabel("survival")
        ax.set_title(f"Response times ({self.source})", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=120)
        return fig


# =========================================================================== builders
def _law(kind, T, quantiles, cov=None, se=None, stderr_of=None):
    """Mean, quantiles and their standard errors of one law from the tails ``T``."""
    if kind == "sojourn":
        shift = np.concatenate(([1.0], T))  # coefficient of pmf_i is T_i, T_0 = 1
        mean = 1.0 + float(T.sum())
        offset = 1  # ∂S/∂T_i = pmf_i(t): T_i sits at index i of `shift`
        atom = 0.0
    else:
        shift = T.copy() if T.size else np.zeros(1)
        mean = float(T.sum())
        offset = 0  # P(W > t) = Σ_i T_{i+1} pmf_i(t): T_i sits at index i−1
        atom = 1.0 - (float(T[0]) if T.size else 0.0)
    qv = {}
    grads = {}
    for q in quantiles:
        t, f = _quantile(shift, q, mean)
        qv[q] = t
        if f > 0:
            g = _poisson_pmf(t, shift.size) / f
            grads[q] = g[offset:offset + T.size]
        else:
            grads[q] = None
    stderr = None
    kind_se = None
    if cov is not None or se is not None or stderr_of is not None:
        ones = np.ones(T.size)
        if stderr_of is not None:
            kind_se = "delta-method, autocorrelation-aware"

            def sd(g):
                return float(stderr_of(np.asarray(g, dtype=float)))
        elif cov is not None:
            kind_se = "delta-method"

            def sd(g):
                return math.sqrt(max(float(g @ cov @ g), 0.0))
        else:
            kind_se = "bound"

            def sd(g):
                return float(np.abs(g) @ se)
        stderr = {"mean": sd(ones),
                  "quantiles": {q: (sd(grads[q]) if grads[q] is not None else 0.0) for q in quantiles}}
    return TimeLaw(kind=kind, mean=mean, quantiles=qv, stderr=stderr, stderr_kind=kind_se, atom_at_zero=atom)


def from_tails(tails, *, cov=None, stderr=None, quantiles=DEFAULT_QUANTILES, source="given",
               params=None, notes=(), stderr_of=None) -> ResponseTimes:
    """Response times from the tails ``T_i = P(J >= i)``, ``i = 1..L`` (docs/model.md §10).

    Parameters
    ----------
    tails : array_like
        ``E[P_1], E[P_2], …``: probability that a customer joins a queue with at least ``i``
        customers; non-increasing, in [0, 1].  Levels beyond the array are 0.
    cov : array_like, optional
        ``L x L`` covariance of the estimate of ``tails`` (standard errors by the delta method).
    stderr : array_like, optional
        Per-level standard errors, when the correlations are unknown; the reported errors are
        then the upper bound ``Σ_i |∂/∂T_i| s_i`` (labelled ``"bound"``).
    quantiles : sequence of float
        Levels in (0, 1) (default 0.5, 0.9, 0.99, 0.999).
    source : str
        A label for where the tails came from.
    stderr_of : callable, optional
        ``g -> standard error of Σ_i g_i T̂_i``: the estimator's own error of a linear
        functional of the tails (a simulation computes it from its batch series, accounting
        for autocorrelation).  Takes precedence over ``cov`` and ``stderr``.

    Returns
    -------
    ResponseTimes

    Raises
    ------
    TypeError, ValueError
        Tails not a 1-d array of non-increasing probabilities; bad quantile levels; a
        covariance or stderr of the wrong shape.

    Examples
    --------
    >>> import numpy as np
    >>> r = from_tails(0.8 ** np.arange(1, 200))            # d = 1 at λ = 0.8: M/M/1
    >>> round(r.sojourn.mean, 10), round(r.sojourn.quantiles[0.5], 10)   # 1/(1−λ), log 2/(1−λ)
    (5.0, 3.4657359028)
    """
    T = _check_tails(tails)
    qs = _check_quantiles(quantiles)
    if cov is not None:
        cov = np.asarray(cov, dtype=float)
        if cov.shape != (T.size, T.size):
            raise ValueError(f"cov must have shape ({T.size}, {T.size}) to match the tails; got {cov.shape}")
    if stderr is not None:
        stderr = np.asarray(stderr, dtype=float)
        if stderr.shape != T.shape:
            raise ValueError(f"stderr must have shape {T.shape} to match the tails; got {stderr.shape}")
        stderr = np.nan_to_num(stderr, nan=0.0)
    soj = _law("sojourn", T, qs, cov, stderr, stderr_of)
    wai = _law("waiting", T, qs, cov, stderr, stderr_of)
    return ResponseTimes(source=str(source), tails=T, sojourn=soj, waiting=wai, params=dict(params or {}),
                         tails_cov=cov, notes=tuple(notes))


def from_join_probabilities(p_join, *, quantiles=DEFAULT_QUANTILES, source="given", params=None,
                            cov=None) -> ResponseTimes:
    """Response times from ``P(J = j)``, ``j = 0, 1, …``: the law of the queue length a customer
    joins (docs/model.md §10).

    Parameters
    ----------
    p_join : array_like
        Non-negative, summing to 1 (within 1e-9; the last entries may be 0).
    quantiles : sequence of float
        Levels in (0, 1).
    cov : array_like, optional
        Covariance of the estimate of ``p_join`` (delta method).

    Returns
    -------
    ResponseTimes

    Raises
    ------
    TypeError, ValueError
        ``p_join`` not a 1-d array of probabilities summing to 1.

    Examples
    --------
    >>> r = from_join_probabilities([1.0])                 # everyone finds an empty server
    >>> r.sojourn.mean, round(r.sojourn.quantiles[0.99], 12), r.waiting.quantiles[0.99]
    (1.0, 4.605170185988, 0.0)
    """
    try:
        p = np.asarray(p_join, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"p_join must be a 1-d array of probabilities; got {type(p_join).__name__}") from None
    if p.ndim != 1 or p.size == 0:
        raise TypeError(f"p_join must be a non-empty 1-d array; got shape {p.shape}")
    if (~np.isfinite(p)).any() or (p < -_ATOL).any():
        raise ValueError("p_join must hold finite non-negative probabilities")
    if abs(p.sum() - 1.0) > 1e-9:
        raise ValueError(f"p_join must sum to 1; got {p.sum()!r}")
    p = np.clip(p, 0.0, None)
    T = np.clip(1.0 - np.cumsum(p)[:-1], 0.0, 1.0)  # T_i = P(J >= i) = 1 − Σ_{j<i} p_j
    Tcov = None
    if cov is not None:
        cov = np.asarray(cov, dtype=float)
        if cov.shape != (p.size, p.size):
            raise ValueError(f"cov must have shape ({p.size}, {p.size}); got {cov.shape}")
        Jm = -np.tril(np.ones((p.size - 1, p.size)))  # T_i = −Σ_{j<i} p_j + const
        Tcov = Jm @ cov @ Jm.T
    return from_tails(T, cov=Tcov, quantiles=quantiles, source=source, params=params)


def _pad(a, L):
    out = np.zeros(L)
    a = np.asarray(a, dtype=float)
    out[:min(a.size, L)] = a[:L]
    return out


def from_simulation(result, *, quantiles=DEFAULT_QUANTILES) -> ResponseTimes:
    """Response times of a simulated system from its time-averaged ``P_i`` (docs/model.md §10).

    The law is exact given the measured ``E[P_i]`` (PASTA and FIFO); the only error is the
    Monte-Carlo error of those averages.  Standard errors, in order of preference:

    1. a covariance of the estimate (attribute ``ud_cov`` of the result), or per-batch
       averages (``ud_batches``: batches x levels, equal batch lengths): delta method;
    2. ``per_replication`` results (>= 2 replications): covariance across replications,
       delta method;
    3. otherwise the per-level ``ud_stderr``: the bound ``Σ_i |∂/∂T_i| s_i`` (correlations
       unknown; labelled ``"bound"``).

    Parameters
    ----------
    result : supermarket.simulation.SimulationResult
        Anything with ``ud_mean`` (time average of ``P_i``, level 1 first) and ``params``.
    quantiles : sequence of float

    Returns
    -------
    ResponseTimes

    Examples
    --------
    >>> import supermarket as sm
    >>> res = sm.simulate(4, 2, 0.7, steps=200_000, seed=1, progress=False)
    >>> r = from_simulation(res)
    >>> abs(r.sojourn.mean - res.mean_sojourn_time) < 0.1      # Little's law, up to noise
    True
    """
    if not hasattr(result, "ud_mean"):
        raise TypeError(f"result must be a SimulationResult (with ud_mean); got {type(result).__name__}")
    T = np.clip(np.asarray(result.ud_mean, dtype=float), 0.0, 1.0)
    T = np.minimum.accumulate(T) if T.size else T
    L = T.size
    cov = se = None
    how = None
    ud_cov = getattr(result, "ud_cov", None)
    ud_b = getattr(result, "ud_batches", None)
    per = getattr(result, "per_replication", ()) or ()
    if ud_cov is not None:
        c = np.asarray(ud_cov, dtype=float)
        cov = np.zeros((L, L))
        m = min(L, c.shape[0])
        cov[:m, :m] = c[:m, :m]
        how = "covariance of the estimate"
    elif ud_b is not None and len(ud_b) >= 2:
        B = np.array([_pad(b, L) for b in ud_b])
        cov = np.cov(B, rowvar=False, ddof=1).reshape(L, L) / B.shape[0]
        how = f"{B.shape[0]} batch means"
    elif len(per) >= 2:
        R = np.array([_pad(r.ud_mean, L) for r in per])
        cov = np.cov(R, rowvar=False, ddof=1).reshape(L, L) / R.shape[0]
        how = f"{R.shape[0]} replications"
    else:
        se = np.nan_to_num(_pad(getattr(result, "ud_stderr", np.full(L, np.nan)), L), nan=0.0)
        how = "per-level batch-means standard errors, combined as a bound"
    p = result.params
    params = {"n": p.n, "d": p.d, "load": p.lam, "replace": p.replace, "engine": getattr(result, "engine", None)}
    return from_tails(T, cov=cov, stderr=se, quantiles=quantiles, source=f"simulation ({how})", params=params)


def from_meanfield(d, lam, *, n=None, refined=False, replace=True, quantiles=DEFAULT_QUANTILES,
                   tol: float = 1e-13) -> ResponseTimes:
    """Response times of the mean field (``n = ∞``) or of the refined mean field (order ``1/n``).

    Mean field: ``T_i = π(i)^d = π(i+1)/λ`` (docs/model.md §3, §10).  Refined (derived,
    docs/model.md §10): a second-order expansion of ``E[u_i^d]`` around ``π``,
    ``T_i ≈ π_i^d + (d π_i^{d−1} V_i + ½ d(d−1) π_i^{d−2} W_ii)/n``, with ``V`` the refined
    mean field's ``1/n`` term and ``W`` the linear-noise covariance; it equals
    ``(π(i+1) + V_{i+1}/n)/λ``, the exact identity ``E[u_{i+1}] = λ E[P_i]`` to the same order.
    Without replacement (``replace=False``, needs ``n``) the plain mean field uses the centre
    ``x^n`` with the finite-n sampling law ``T_i = C(n x_i, d)/C(n, d)`` (docs/model.md §8).

    Parameters
    ----------
    d : int
        Choices, >= 1.
    lam : float
        Load in (0, 1).
    n : int, optional
        Servers; needed with ``refined=True`` or ``replace=False``.
    refined : bool
        Add the ``1/n`` term (sampling with replacement only).
    replace : bool
    quantiles : sequence of float
    tol : float
        Levels whose ``π`` falls below ``tol`` are dropped.

    Returns
    -------
    ResponseTimes

    Raises
    ------
    TypeError, ValueError
        Bad ``d``, ``lam``, ``n``; ``refined`` without ``n`` or without replacement.

    Examples
    --------
    >>> r = from_meanfield(1, 0.5)                           # M/M/1: S ~ Exp(1 − λ)
    >>> round(r.sojourn.mean, 9), round(r.sojourn.quantiles[0.99], 9)
    (2.0, 9.210340372)
    """
    from .. import meanfield as mf
    from ..model import check_load, check_positive_int
    from ..theory import log_fixed_point

    d = check_positive_int("d", d)
    lam = check_load(lam)
    qs = _check_quantiles(quantiles)
    if not isinstance(refined, (bool, np.bool_)):
        raise TypeError(f"refined must be True or False; got {refined!r}")
    if not isinstance(replace, (bool, np.bool_)):
        raise TypeError(f"replace must be True or False; got {replace!r}")
    if n is not None:
        n = check_positive_int("n", n)
    if refined and n is None:
        raise ValueError("refined=True needs the number of servers n (the correction is V/n)")
    if refined and not replace:
        raise ValueError("refined=True is available with sampling with replacement only (replace=True)")
    if not replace and n is None:
        raise ValueError("replace=False needs the number of servers n (the sampling law depends on n)")
    if not replace and d > n:
        raise ValueError(f"d must be <= n when sampling without replacement; got d={d}, n={n}")
    notes = []
    params = {"d": d, "load": lam, "n": n, "replace": bool(replace), "refined": bool(refined)}
    if not replace:
        x = mf.near_equilibrium_centre(n, d, lam, replace=False, tol=tol)
        T = mf.sample_prob(x, d, n=n, replace=False)
        return from_tails(np.minimum.accumulate(np.clip(T, 0, 1)), quantiles=qs,
                          source=f"mean field (centre x^n, sampling without replacement, n = {n})",
                          params=params)
    if not refined:
        L = mf.levels_needed(d, lam, tol)
        T = np.exp(float(d) * log_fixed_point(d, lam, L + 1))  # π_i^d, i = 1..L+1
        return from_tails(T, quantiles=qs, source="mean field", params=params)
    rmf = mf.refined_mean_field(d, lam, tol=tol)
    p1 = mf.sample_prob(rmf.pi, d, order=1)
    p2 = mf.sample_prob(rmf.pi, d, order=2)
    corr = p1 * rmf.V + 0.5 * p2 * np.diag(rmf.W)
    Tr = mf.sample_prob(rmf.pi, d) + corr / n
    if np.any(Tr < 0) or np.any(Tr > 1) or np.any(np.diff(Tr) > 0):
        notes.append(f"the 1/n expansion leaves [0, 1] or stops falling at n = {n}; clipped (n is too small "
                     "for the refined mean field to be trusted)")
    Tr = np.minimum.accumulate(np.clip(Tr, 0.0, 1.0))
    return from_tails(Tr, quantiles=qs, source=f"refined mean field, order 1/n (derived), n = {n}",
                      params=params, notes=notes)


# =========================================================================== a FIFO simulation
@dataclass(frozen=True)
class FifoSample:
    """Customers followed one by one by the FIFO engine (``engines/fifo.py``, docs/model.md §10).

    ``sojourn``, ``waiting``, ``joined`` (length of the queue joined): one entry per customer
    who arrived after the burn-in, in arrival order, cut into ``batches`` consecutive batches
    of equal size; ``tails``: time average of ``P_i`` over the same window (and per batch in
    ``tails_batches``), ``u_mean``: time average of ``u_i``.

    Examples
    --------
    >>> s = simulate_fifo(4, 2, 0.5, customers=2000, seed=1)
    >>> s.sojourn.shape, s.batches
    ((2000,), 32)
    >>> bool((s.sojourn >= s.waiting).all())                   # sojourn = waiting + service
    True
    """

    params: dict
    sojourn: np.ndarray = field(repr=False)
    waiting: np.ndarray = field(repr=False)
    joined: np.ndarray = field(repr=False)
    tails: np.ndarray
    tails_batches: np.ndarray = field(repr=False)
    u_mean: np.ndarray
    measured_time: float
    batches: int

    def _batched(self, x):
        return np.array_split(x, self.batches)

    def empirical(self, quantiles=DEFAULT_QUANTILES) -> dict:
        """Empirical means and quantiles of the recorded times, with batch-means standard
        errors: ``{"sojourn": {"mean", "mean_stderr", "quantiles": {q: (value, stderr)}}, "waiting": …}``."""
        qs = _check_quantiles(quantiles)
        out = {}
        for kind, x in (("sojourn", self.sojourn), ("waiting", self.waiting)):
            parts = self._batched(x)
            bm = np.array([p.mean() for p in parts])
            entry = {"mean": float(x.mean()), "mean_stderr": float(bm.std(ddof=1) / math.sqrt(len(parts))),
                     "quantiles": {}}
            for q in qs:
                bq = np.array([np.quantile(p, q) for p in parts])
                entry["quantiles"][q] = (float(np.quantile(x, q)), float(bq.std(ddof=1) / math.sqrt(len(parts))))
            out[kind] = entry
        return out

    def empirical_cdf(self, t, kind="sojourn") -> np.ndarray:
        """Fraction of recorded customers with sojourn (or waiting) time ``<= t``."""
        x = np.sort(self.sojourn if kind == "sojourn" else self.waiting)
        return np.searchsorted(x, np.asarray(t, dtype=float), side="right") / x.size

    def predicted(self, quantiles=DEFAULT_QUANTILES) -> ResponseTimes:
        """The Erlang mixture from this run's own time-averaged ``P_i`` (with batch-means
        covariance, delta method)."""
        B = self.tails_batches
        cov = np.cov(B, rowvar=False, ddof=1).reshape(B.shape[1], B.shape[1]) / B.shape[0]
        return from_tails(np.minimum.accumulate(np.clip(self.tails, 0, 1)), cov=cov, quantiles=quantiles,
                          source="FIFO simulation, its own time-averaged P_i", params=self.params)

    def to_dict(self) -> dict:
        emp = self.empirical()

        def law(e):
            return {"mean": e["mean"], "quantiles": {_qkey(q): v[0] for q, v in e["quantiles"].items()},
                    "stderr": {"mean": e["mean_stderr"],
                               "quantiles": {_qkey(q): v[1] for q, v in e["quantiles"].items()},
                               "kind": "batch means"}}
        return {"params": dict(self.params), "customers": int(self.sojourn.size),
                "measured_time": self.measured_time, "batches": self.batches,
                "sojourn": law(emp["sojourn"]), "waiting": law(emp["waiting"]),
                "tails": self.tails.tolist(), "u_mean": self.u_mean.tolist()}

    def to_frame(self):
        """Tidy table of the empirical statistics (kind, statistic, value, stderr)."""
        import pandas as pd
        rows = []
        for kind, e in self.empirical().items():
            rows.append({"kind": kind, "statistic": "mean", "value": e["mean"], "stderr": e["mean_stderr"]})
            for q, (v, s) in e["quantiles"].items():
                rows.append({"kind": kind, "statistic": f"p{100 * q:g}", "value": v, "stderr": s})
        return pd.DataFrame(rows)

    def summary(self) -> str:
        lines = [f"FIFO simulation: {self.sojourn.size} customers over {self.measured_time:.6g} time units "
                 f"({self.batches} batches)"]
        for kind, e in self.empirical().items():
            qs = ", ".join(f"p{100 * q:g} {v:.6g} ± {s:.2g}" for q, (v, s) in e["quantiles"].items())
            lines.append(f"  {kind:8s} mean {e['mean']:.6g} ± {e['mean_stderr']:.2g}, {qs}")
        return "\n".join(lines)


def simulate_fifo(n, d, lam, *, customers=200_000, burn_in=None, seed=None, replace=True,
                  batches: int = 32) -> FifoSample:
    """Follow every customer of the ``(n, d, λ)`` system with FIFO queues (docs/model.md §10).

    An independent check of the response-time laws: customers carry their own exponential(1)
    service times and leave by the Lindley recursion (``engines/fifo.py``); nothing is taken
    from the Erlang-mixture formulas.  For small ``n`` (the next departure is a scan over the
    queues).

    Parameters
    ----------
    n, d : int
        Servers (>= 1) and choices (>= 1; ``<= n`` without replacement).
    lam : float
        Load in (0, 1).
    customers : int
        Customers to record after the burn-in (>= 2 per batch).
    burn_in : float, optional
        Time units before recording starts (default ``20/(1 − √λ)²``, twenty M/M/1
        relaxation times, an upper bound for ``d >= 1``).
    seed : int or numpy.random.SeedSequence, optional
    replace : bool
    batches : int
        Consecutive batches for the standard errors (>= 2).

    Returns
    -------
    FifoSample

    Examples
    --------
    >>> s = simulate_fifo(1, 1, 0.5, customers=20_000, seed=1)     # M/M/1: E[S] = 2
    >>> e = s.empirical()["sojourn"]
    >>> abs(e["mean"] - 2.0) < 5 * e["mean_stderr"]
    True
    """
    from ..engines import fifo as _f
    from ..engines.rng import new_state
    from ..model import Params, as_seed_sequence, check_int, check_positive_float, seed_to_uint64

    p = Params(n, d, lam, replace=replace)
    customers = check_int("customers", customers, minimum=4, maximum=10**9)
    batches = check_int("batches", batches, minimum=2, maximum=customers // 2)
    if burn_in is None:
        burn = 20.0 / (1.0 - math.sqrt(p.lam)) ** 2
    else:
        burn = 0.0 if (isinstance(burn_in, numbers.Real) and not isinstance(burn_in, bool) and burn_in == 0) \
            else check_positive_float("burn_in", burn_in)
    ss = as_seed_sequence(seed)
    n, d = p.n, p.d
    cap = 64
    ring = np.zeros((n, cap))
    head = np.zeros(n, np.int64)
    qlen = np.zeros(n, np.int64)
    c = np.zeros(cap + 2, np.int64)
    c[0] = n
    area_P = np.zeros(cap + 2)
    area_c = np.zeros(cap + 2)
    cnt = np.arange(n + 1)
    if p.replace:
        tab = (cnt / n) ** d
    else:
        tab = np.array([math.comb(int(k), d) / math.comb(n, d) for k in cnt])
    s = new_state(seed_to_uint64(ss))
    perm = np.arange(n, dtype=np.int64)
    pint = np.array([n, d, int(p.replace)], np.int64)
    rate = n * p.lam
    sf = np.array([0.0, 0.0, burn, rate, 0.0])
    sf[_f.S_NEXT] = -math.log(1.0 - float(np.random.default_rng(ss.spawn(1)[0]).random())) / rate
    si = np.zeros(1, np.int64)
    soj = np.zeros(customers)
    wai = np.zeros(customers)
    jl = np.zeros(customers, np.int64)
    edges = [(customers * b) // batches for b in range(batches + 1)]
    tails_b = []
    u_b = []
    T_b = []
    for b in range(batches):
        lo, hi = edges[b], edges[b + 1]
        area_P[:] = 0.0
        area_c[:] = 0.0
        sf[_f.S_MEASURED] = 0.0
        si[0] = 0
        while True:
            st = _f.fifo_kernel(ring, head, qlen, c, area_P, area_c, tab, s, perm, pint, sf, si,
                                soj[lo:hi], wai[lo:hi], jl[lo:hi], 50_000_000)
            if st == _f.GROW:
                new = 2 * cap
                r2 = np.zeros((n, new))
                for q in range(n):
                    idx = (head[q] + np.arange(qlen[q])) % cap
                    r2[q, :qlen[q]] = ring[q, idx]
                ring, cap = r2, new
                head[:] = 0
                c = np.concatenate([c, np.zeros(new - c.size + 2, np.int64)])
                area_P = np.concatenate([area_P, np.zeros(new - area_P.size + 2)])
                area_c = np.concatenate([area_c, np.zeros(new - area_c.size + 2)])
            elif st == _f.DONE:
                break
        T = sf[_f.S_MEASURED]
        T_b.append(T)
        tails_b.append(area_P[1:].copy() / T)
        u_b.append(area_c[1:].copy() / (n * T))
        sf[_f.S_TMEAS] = sf[_f.S_NOW]  # later batches measure from where this one stopped
    top = max((int(np.nonzero(tb)[0][-1]) + 1 if np.any(tb) else 0) for tb in tails_b) + 1
    L = max(top, 1)
    TB = np.array([_pad(tb, L) for tb in tails_b])
    UB = np.array([_pad(ub, L) for ub in u_b])
    w = np.array(T_b) / sum(T_b)
    params = {"n": n, "d": d, "load": p.lam, "replace": p.replace, "customers": customers, "burn_in": burn}
    return FifoSample(params=params, sojourn=soj, waiting=wai, joined=jl, tails=w @ TB, tails_batches=TB,
                      u_mean=w @ UB, measured_time=float(sum(T_b)), batches=batches)


# =========================================================================== sizing by latency
@dataclass(frozen=True)
class LatencyDesign:
    """Answer of a latency-sizing question (docs/model.md §10), from the mean field.

    ``question``: ``"least d"`` (given the load) or ``"largest load"`` (given ``d``);
    ``answer``: that ``d`` or load; ``achieved``: the sojourn quantile there; ``neighbour``:
    the quantile at ``d − 1`` (least d) or just above the load (largest load), showing the
    answer is tight; ``checked``: the values used to check monotonicity; ``verify``: the
    simulation check at finite ``n`` (or None).

    Examples
    --------
    >>> r = max_load_for_latency(1, 0.99, 2 * 4.605170185988091)   # M/M/1: λ = 1 − (−log 0.01)/T
    >>> r.question, r.d, round(r.answer, 6), r.monotone
    ('largest load', 1, 0.5, True)
    """

    question: str
    quantile: float
    latency: float
    answer: float
    achieved: float
    neighbour: dict
    load: float | None
    d: int | None
    floor: float
    checked: tuple
    monotone: bool
    verify: dict | None = None

    def to_dict(self) -> dict:
        return {"question": self.question, "quantile": self.quantile, "latency": self.latency,
                "answer": self.answer, "achieved": self.achieved, "neighbour": dict(self.neighbour),
                "load": self.load, "d": self.d, "floor": self.floor, "monotone": self.monotone,
                "checked": [list(c) for c in self.checked], "verify": self.verify}

    def to_frame(self):
        import pandas as pd
        col = "d" if self.question == "least d" else "load"
        return pd.DataFrame([{col: a, "sojourn_quantile": v} for a, v in self.checked])

    def summary(self) -> str:
        qn = f"p{100 * self.quantile:g}"
        if self.question == "least d":
            nb = self.neighbour
            line = (f"At load λ = {self.load:g}, d = {int(self.answer)} choices give sojourn {qn} = "
                    f"{self.achieved:.6g} ≤ {self.latency:g} (mean field)"
                    + (f"; d = {nb['d']} would give {nb['value']:.6g}." if nb else "; d = 1 already meets it."))
        else:
            nb = self.neighbour
            line = (f"With d = {self.d}, the largest load with sojourn {qn} ≤ {self.latency:g} is λ = "
                    f"{self.answer:.8g} (mean field, {qn} = {self.achieved:.8g} there; "
                    f"{nb['value']:.10g} at λ = {nb['load']:.10g}).")
        lines = [line]
        if not self.monotone:
            lines.append("  warning: the quantile was not monotone on the points checked; the answer may not be unique")
        v = self.verify
        if v is not None:
            lines.append(f"  verify (simulation, n = {v['n']}): " + v["note"])
        return "\n".join(lines)


def _check_latency(quantile, latency):
    from ..model import check_positive_float
    q = check_quantile(quantile)
    T = check_positive_float("latency", latency)
    floor = -math.log1p(-q)
    return q, T, floor


def _mf_quantile(d, lam, q) -> float:
    if d == 1:
        return -math.log1p(-q) / (1.0 - lam)
    return from_meanfield(d, lam, quantiles=(q,)).sojourn.quantiles[q]


def least_d_for_latency(load, quantile, latency, *, d_max: int = 2**40) -> LatencyDesign:
    """The least ``d`` whose mean-field sojourn-time ``quantile`` is at most ``latency``.

    Parameters
    ----------
    load : float
        λ in (0, 1).
    quantile : float
        Level in (0, 1), e.g. 0.99.
    latency : float
        Target time, in mean service times (> 0).
    d_max : int
        Largest ``d`` searched.

    Returns
    -------
    LatencyDesign

    Raises
    ------
    ValueError
        The target cannot be met by any ``d``: with ``d = ∞`` every customer still needs its
        own service, so the quantile is at least ``−log(1 − q)``; or ``d_max`` is not enough.

    Examples
    --------
    >>> r = least_d_for_latency(0.9, 0.99, 8.0)
    >>> int(r.answer), r.achieved <= 8.0 < r.neighbour["value"]
    (3, True)
    """
    from ..model import check_load, check_positive_int
    lam = check_load(load)
    q, T, floor = _check_latency(quantile, latency)
    d_max = check_positive_int("d_max", d_max)
    if T <= floor:
        raise ValueError(
            f"no d meets sojourn p{100 * q:g} ≤ {T:g}: even with d = ∞ every customer still needs its own "
            f"exponential(1) service, whose p{100 * q:g} is −log(1−q) = {floor:.6g}")
    checked = []

    def f(d):
        v = _mf_quantile(d, lam, q)
        checked.append((d, v))
        return v

    d = 1
    while f(d) > T:
        if d >= d_max:
            raise ValueError(f"sojourn p{100 * q:g} ≤ {T:g} needs more than d_max = {d_max} choices at load {lam:g}")
        d = min(2 * d, d_max)
    lo, hi = d // 2, d  # f(lo) > T >= f(hi) (lo = 0 when d = 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if f(mid) <= T:
            hi = mid
        else:
            lo = mid
    vals = sorted(set(checked))
    monotone = all(b[1] <= a[1] + 1e-9 * max(1.0, a[1]) for a, b in zip(vals, vals[1:]))
    nb = {} if hi == 1 else {"d": hi - 1, "value": dict(vals)[hi - 1] if (hi - 1) in dict(vals) else f(hi - 1)}
    return LatencyDesign(question="least d", quantile=q, latency=T, answer=int(hi), achieved=dict(checked)[hi],
                         neighbour=nb, load=lam, d=None, floor=floor, checked=tuple(sorted(set(checked))),
                         monotone=monotone)


def max_load_for_latency(d, quantile, latency, *, rtol: float = 1e-9) -> LatencyDesign:
    """The largest load λ whose mean-field sojourn-time ``quantile`` is at most ``latency``
    with ``d`` choices (bisection; the quantile grows with λ, checked on a grid).

    Parameters
    ----------
    d : int
        Choices per arrival (at least 1).
    quantile : float
        Level ``q`` in (0, 1) of the sojourn-time quantile.
    latency : float
        Target ``T > 0`` for that quantile.
    rtol : float, default 1e-9
        Relative width at which the bisection on λ stops.

    Returns
    -------
    LatencyDesign
        ``answer`` is the largest load; ``neighbour`` the quantile just above it; ``monotone``
        whether the quantile was found non-decreasing in λ on the points checked.

    Raises
    ------
    TypeError, ValueError
        A parameter out of range, or ``latency`` at or below ``−log(1−q)`` (the quantile of
        the service time alone, which no load can beat).

    Examples
    --------
    >>> r = max_load_for_latency(1, 0.99, 2 * 4.605170185988091)     # M/M/1: λ = 1 − (−log 0.01)/T
    >>> round(r.answer, 6)
    0.5
    """
    from ..model import check_positive_int
    d = check_positive_int("d", d)
    q, T, floor = _check_latency(quantile, latency)
    if T <= floor:
        raise ValueError(
            f"no load meets sojourn p{100 * q:g} ≤ {T:g}: even at vanishing load every customer needs its own "
            f"exponential(1) service, whose p{100 * q:g} is −log(1−q) = {floor:.6g}")
    if d == 1:
        lam = 1.0 - floor / T
        return LatencyDesign(question="largest load", quantile=q, latency=T, answer=lam, achieved=T,
                             neighbour={"load": lam + (1 - lam) * 1e-3,
                                        "value": floor / ((1 - lam) * (1 - 1e-3))},
                             load=None, d=1, floor=floor, checked=((lam, T),), monotone=True)
    lo, hi = 0.0, 1.0
    checked = []
    while hi - lo > rtol * max(hi, 1e-3) and hi - lo > 1e-15:
        mid = 0.5 * (lo + hi)
        v = _mf_quantile(d, mid, q)
        checked.append((mid, v))
        if v <= T:
            lo = mid
        else:
            hi = mid
    if lo == 0.0:  # pragma: no cover - T > floor makes small loads feasible
        raise ValueError(f"no load found with sojourn p{100 * q:g} ≤ {T:g} at d = {d}")
    grid = [(x, _mf_quantile(d, x, q)) for x in np.linspace(lo / 16, lo, 16)]
    pts = sorted(set(checked + grid))
    monotone = all(b[1] >= a[1] - 1e-9 * max(1.0, a[1]) for a, b in zip(pts, pts[1:]))
    return LatencyDesign(question="largest load", quantile=q, latency=T, answer=lo, achieved=_mf_quantile(d, lo, q),
                         neighbour={"load": hi, "value": _mf_quantile(d, hi, q)}, load=None, d=d, floor=floor,
                         checked=tuple(pts), monotone=monotone)


def verify_latency(design: LatencyDesign, n, *, steps=2_000_000, replications=8, seed=0, z: float = 2.0,
                   workers=None, client=None) -> dict:
    """Check a mean-field latency answer by simulating ``n`` servers (docs/model.md §10).

    The quantile at finite ``n`` comes from the simulated time averages of ``P_i``
    (:func:`from_simulation`, standard errors across replications).  For "least d" the
    answer ``d`` and ``d − 1`` are simulated; for "largest load" the answer itself.  A
    quantile counts as meeting the target when it is below it by more than ``z`` standard
    errors, as failing when above by more than ``z``, and as undecided otherwise.

    Parameters
    ----------
    design : LatencyDesign
        The mean-field answer (:func:`least_d_for_latency` or :func:`max_load_for_latency`).
    n : int
        Servers to simulate (at least 1).
    steps : int, default 2_000_000
        Steps per replication (see :func:`supermarket.simulation.simulate`).
    replications : int, default 8
        Independent replications (their spread gives the standard errors).
    seed : int or SeedSequence, default 0
        Root seed.
    z : float, default 2.0
        Standard errors a quantile must clear to count as meeting or failing the target.
    workers : int, optional
        Local processes running the replications (default: all cores); the numbers do not
        depend on it.
    client : dask.distributed.Client, optional
        Run each replication as one task on this Dask cluster instead (replication ``r``
        keeps child ``r`` of ``seed``: the same numbers as locally); excludes ``workers``.

    Returns
    -------
    dict
        ``n``, ``points`` (each: ``d``, ``load``, ``value``, ``stderr``, ``verdict``),
        ``changes_answer`` (True / False / None when undecided) and a one-line ``note``.

    Raises
    ------
    TypeError, ValueError
        ``n`` or a simulation parameter out of range; ``workers`` with ``client``.

    Examples
    --------
    A deliberately tiny run (4 servers, short replications): the verdicts of such a run
    carry wide error bars; use the defaults for a real check.

    >>> design = max_load_for_latency(2, 0.9, 5.0)
    >>> v = verify_latency(design, 4, steps=20_000, replications=2, seed=1)
    >>> v["n"], len(v["points"]), v["points"][0]["verdict"] in ("meets", "fails", "undecided")
    (4, 1, True)
    """
    from ..model import check_positive_int
    from ..simulation import simulate
    n = check_positive_int("n", n)
    q, T = design.quantile, design.latency
    pts = []
    if design.question == "least d":
        cand = [int(design.answer)] + ([int(design.answer) - 1] if design.answer > 1 else [])
        runs = [(d, design.load) for d in cand]
    else:
        runs = [(design.d, design.answer)]
    for d, lam in runs:
        res = simulate(n, d, lam, steps=steps, replications=replications, seed=seed, start="fixed-point",
                       progress=False, workers=workers, client=client)
        r = from_simulation(res, quantiles=(q,))
        v, se = r.sojourn.quantiles[q], r.sojourn.stderr["quantiles"][q]
        verdict = "meets" if v + z * se < T else ("fails" if v - z * se > T else "undecided")
        pts.append({"d": d, "load": lam, "value": v, "stderr": se, "verdict": verdict})
    qn = f"p{100 * q:g}"
    if design.question == "least d":
        a = pts[0]
        b = pts[1] if len(pts) > 1 else None
        if a["verdict"] == "fails":
            change, note = True, (f"d = {a['d']} gives {qn} = {a['value']:.4g} ± {a['stderr']:.2g} > {T:g}: "
                                  f"finite n needs more choices than the mean field says")
        elif b is not None and b["verdict"] == "meets":
            change, note = True, (f"d = {b['d']} already gives {qn} = {b['value']:.4g} ± {b['stderr']:.2g} < {T:g}: "
                                  f"finite n needs fewer choices than the mean field says")
        elif a["verdict"] == "meets" and (b is None or b["verdict"] == "fails"):
            change, note = False, (f"confirmed: d = {a['d']} gives {qn} = {a['value']:.4g} ± {a['stderr']:.2g}"
                                   + (f", d = {b['d']} gives {b['value']:.4g} ± {b['stderr']:.2g}" if b else ""))
        else:
            change, note = None, (f"undecided within {z:g} standard errors: d = {a['d']} gives {a['value']:.4g} ± "
                                  f"{a['stderr']:.2g}" + (f", d = {b['d']} gives {b['value']:.4g} ± {b['stderr']:.2g}"
                                                          if b else "") + "; simulate longer (--steps)")
    else:
        a = pts[0]
        if a["verdict"] == "fails":
            change, note = True, (f"at λ = {a['load']:.6g}, {qn} = {a['value']:.4g} ± {a['stderr']:.2g} > {T:g}: "
                                  "finite n supports a smaller load than the mean field says")
        elif a["verdict"] == "meets":
            change, note = None, (f"at λ = {a['load']:.6g}, {qn} = {a['value']:.4g} ± {a['stderr']:.2g} < {T:g}: "
                                  "the load is met (finite n may allow somewhat more)")
        else:
            change, note = False, (f"at λ = {a['load']:.6g}, {qn} = {a['value']:.4g} ± {a['stderr']:.2g}: "
                                   f"consistent with the target {T:g} within {z:g} standard errors")
    return {"n": n, "steps": steps, "replications": replications, "points": pts, "changes_answer": change,
            "note": note}
