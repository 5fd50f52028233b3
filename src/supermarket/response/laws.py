"""Response-time laws as results (:class:`TimeLaw`, :class:`ResponseTimes`) and their builders from given
numbers, with delta-method standard errors (docs/model.md §10).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..model import check_vector
from ..result import Result, frame, pyplot
from .mixture import (
    _ATOL,
    DEFAULT_QUANTILES,
    _check_tails,
    _poisson_pmf,
    _quantile,
    check_quantiles,
    sojourn_survival,
    waiting_survival,
)

__all__ = ["TimeLaw", "ResponseTimes", "from_tails", "from_join_probabilities"]


@dataclass(frozen=True)
class TimeLaw(Result):
    """One response-time law: mean, ``quantiles`` (level → time) and their errors.

    ``stderr``: ``None`` (an exact law) or ``{"mean": s, "quantiles": {q: s_q}}``;
    ``stderr_kind``: ``"delta-method"`` from a covariance, ``"bound"`` (``Σ_i |∂/∂T_i| s_i``) when
    correlations are unknown.

    Examples
    --------
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
            se = {
                "mean": self.stderr["mean"],
                "quantiles": {_qkey(q): v for q, v in self.stderr["quantiles"].items()},
                "kind": self.stderr_kind,
            }
        return {
            "mean": self.mean,
            "quantiles": {_qkey(q): v for q, v in self.quantiles.items()},
            "stderr": se,
            "atom_at_zero": self.atom_at_zero,
        }


def _qkey(q: float) -> str:
    return repr(float(q)) if not float(q).is_integer() else str(q)


@dataclass(frozen=True)
class ResponseTimes(Result):
    """Equilibrium sojourn and waiting laws (Erlang mixtures, docs/model.md §10).

    ``tails``: ``T_i = P(J >= i)``, ``i = 1..L``; ``p_join``: ``P(J = j)``, ``j = 0..L``;
    ``source``: where the tails came from; ``notes``: caveats the numbers carry.

    Examples
    --------
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
    def sojourn_cdf(self, t: ArrayLike) -> np.ndarray:
        """``P(S <= t)`` on the times ``t``."""
        return 1.0 - sojourn_survival(self.tails, t)

    def waiting_cdf(self, t: ArrayLike) -> np.ndarray:
        """``P(W <= t)`` on the times ``t`` (includes the atom ``P(W = 0)`` at ``t = 0``)."""
        return 1.0 - waiting_survival(self.tails, t)

    def cdf_frame(self, grid: ArrayLike | None = None) -> Any:
        """The two CDFs on a time grid (default: 0 to the sojourn p99.9, 200 points), tidy."""
        if grid is None:
            top = max(self.sojourn.quantiles.values()) if self.sojourn.quantiles else 10.0
            grid = np.linspace(0.0, 1.1 * top, 200)
        grid = np.asarray(grid, dtype=float)
        rows = []
        for kind, f in (("sojourn", self.sojourn_cdf), ("waiting", self.waiting_cdf)):
            for t, c in zip(grid, f(grid)):
                rows.append({"kind": kind, "t": float(t), "cdf": float(c), "survival": float(1.0 - c)})
        return frame(rows)

    # ----------------------------------------------------------------- output
    def to_dict(self, *, cdf_grid: ArrayLike | None = None) -> dict:
        out = {
            "source": self.source,
            "params": dict(self.params),
            "sojourn": self.sojourn.to_dict(),
            "waiting": self.waiting.to_dict(),
            "p_join": self.p_join.tolist(),
            "notes": list(self.notes),
        }
        if cdf_grid is not None:
            g = np.asarray(cdf_grid, dtype=float)
            out["cdf"] = {
                "t": g.tolist(),
                "sojourn": self.sojourn_cdf(g).tolist(),
                "waiting": self.waiting_cdf(g).tolist(),
            }
        return out

    def to_frame(self) -> Any:
        """Tidy table: one row per (kind, statistic) with value and standard error."""
        rows = []
        for law in (self.sojourn, self.waiting):
            se = law.stderr or {"mean": None, "quantiles": dict.fromkeys(law.quantiles)}
            stats = [("mean", law.mean, se["mean"])]
            stats += [(f"p{100 * q:g}", v, se["quantiles"][q]) for q, v in law.quantiles.items()]
            rows += [
                {"kind": law.kind, "statistic": k, "value": v, "stderr": s, "source": self.source} for k, v, s in stats
            ]
        return frame(rows)

    def summary(self) -> str:
        """The text the CLI prints: means and quantiles (± s.e. where there is one)."""
        lines = [f"Response times ({self.source}; FIFO, exponential(1) service, docs/model.md §10)"]
        unknown = []  # values whose error the run was too short to know (NaN standard error)
        for law in (self.sojourn, self.waiting):
            se = law.stderr

            def fmt(v, s, waiting=law.kind == "waiting"):
                if s is not None and math.isnan(s):
                    unknown.append(v)
                if s == 0 and v == 0 and waiting:  # a quantile on the atom W = 0: see the notes
                    return f"{v:.6g} (on the atom)"
                return f"{v:.6g}" if s is None or math.isnan(s) else f"{v:.6g} ± {s:.2g}"

            parts = [f"mean {fmt(law.mean, None if se is None else se['mean'])}"]
            for q, v in law.quantiles.items():
                parts.append(f"p{100 * q:g} {fmt(v, None if se is None else se['quantiles'][q])}")
            extra = f"  (P(W = 0) = {law.atom_at_zero:.6g})" if law.kind == "waiting" else ""
            lines.append(f"  {law.kind:8s} " + ", ".join(parts) + extra)
        if self.sojourn.stderr is not None:
            why = "; values without ± : the run is too short to know their error, docs/model.md §9"
            lines.append(f"  (± one standard error, {self.sojourn.stderr_kind}{why if unknown else ''})")
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)

    def plot(self, path: Any = None, *, grid: ArrayLike | None = None) -> Any:
        """Survival functions of both laws, log scale, quantiles marked; saved when ``path`` is given."""
        plt = pyplot(path is not None, force=False)
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
            from ..files import save_figure_atomic

            save_figure_atomic(fig, path, dpi=120)  # whole or not at all
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
    qv, grads = {}, {}
    for q in quantiles:
        t, f = _quantile(shift, q, mean)
        qv[q] = t
        if f > 0:
            g = _poisson_pmf(t, shift.size) / f
            grads[q] = g[offset : offset + T.size]
        else:
            grads[q] = None
    stderr = kind_se = None
    if cov is not None or se is not None or stderr_of is not None:
        kind_se = "delta-method" if cov is not None else "bound"
        if stderr_of is not None:
            kind_se = "delta-method, autocorrelation-aware"

        def sd(g):  # standard error of Σ_i g_i T̂_i
            if stderr_of is not None:
                return float(stderr_of(np.asarray(g, dtype=float)))
            if cov is not None:
                return math.sqrt(max(float(g @ cov @ g), 0.0))
            return float(np.abs(g) @ se)

        stderr = {
            "mean": sd(np.ones(T.size)),
            "quantiles": {q: (sd(grads[q]) if grads[q] is not None else 0.0) for q in quantiles},
        }
    return TimeLaw(kind=kind, mean=mean, quantiles=qv, stderr=stderr, stderr_kind=kind_se, atom_at_zero=atom)


def from_tails(
    tails: ArrayLike,
    *,
    cov: ArrayLike | None = None,
    stderr: ArrayLike | None = None,
    quantiles: Any = DEFAULT_QUANTILES,
    source: str = "given",
    params: dict | None = None,
    notes: tuple = (),
    stderr_of: Any = None,
) -> ResponseTimes:
    """Response times from the tails ``T_i = P(J >= i)``, ``i = 1..L`` (docs/model.md §10).

    Parameters
    ----------
    tails : array_like
        ``E[P_1], E[P_2], …``, non-increasing in [0, 1]; later levels are 0.
    cov : array_like, optional
        ``L x L`` covariance of the tails (delta method).
    stderr : array_like, optional
        Per-level standard errors when correlations are unknown (errors labelled ``"bound"``).
    quantiles : sequence of float
    source, params, notes
        Where the tails came from, the parameters, caveats: carried into the result.
    stderr_of : callable, optional
        ``g ->`` the estimator's own standard error of ``Σ_i g_i T̂_i``; takes precedence.

    Returns
    -------
    ResponseTimes
        Without ``stderr_of``, ``cov`` or ``stderr``, an exact law (no errors).

    Examples
    --------
    >>> r = from_tails(0.8 ** np.arange(1, 200))            # d = 1 at λ = 0.8: M/M/1
    >>> round(r.sojourn.mean, 10), round(r.sojourn.quantiles[0.5], 10)   # 1/(1−λ), log 2/(1−λ)
    (5.0, 3.4657359028)
    """
    T = _check_tails(tails)
    qs = check_quantiles(quantiles)
    if cov is not None:
        cov = np.asarray(cov, dtype=float)
        if cov.shape != (T.size, T.size):
            raise ValueError(f"cov must have shape ({T.size}, {T.size}) to match the tails; got {cov.shape}")
    if stderr is not None:
        stderr = np.asarray(stderr, dtype=float)
        if stderr.shape != T.shape:
            raise ValueError(f"stderr must have shape {T.shape} to match the tails; got {stderr.shape}")
        stderr = np.nan_to_num(stderr, nan=0.0)
    soj, wai = (_law(kind, T, qs, cov, stderr, stderr_of) for kind in ("sojourn", "waiting"))
    return ResponseTimes(str(source), T, soj, wai, params=dict(params or {}), tails_cov=cov, notes=tuple(notes))


def from_join_probabilities(
    p_join: ArrayLike,
    *,
    quantiles: Any = DEFAULT_QUANTILES,
    source: str = "given",
    params: dict | None = None,
    cov: ArrayLike | None = None,
) -> ResponseTimes:
    """Response times from ``P(J = j)``, ``j = 0, 1, …`` (docs/model.md §10), via :func:`from_tails`.

    Parameters
    ----------
    p_join : array_like
        Non-negative, summing to 1 (within 1e-9).
    quantiles, source, params
        As in :func:`from_tails`.
    cov : array_like, optional
        Covariance of ``p_join``, mapped linearly onto the tails.

    Returns
    -------
    ResponseTimes

    Examples
    --------
    >>> r = from_join_probabilities([1.0])                 # everyone finds an empty server
    >>> r.sojourn.mean, round(r.sojourn.quantiles[0.99], 12), r.waiting.quantiles[0.99]
    (1.0, 4.605170185988, 0.0)
    """
    p = check_vector("p_join", p_join, of="probabilities")
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
