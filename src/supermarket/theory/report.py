"""The report behind ``supermarket theory``: what papers 000 and 002 say about ``(n, d, λ)``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..jsonable import to_jsonable
from ..model import MAX_THEORY_N, check_fraction, check_load, check_positive_int
from ..result import Result, frame, pyplot, save_figure, text_table
from .equilibrium import (
    LINEARISATION_NOTE,
    fixed_point,
    k_hypothesis,
    k_report,
    linearised_q,
    mean_queue_length,
    mean_sojourn_time,
    predicted_counts,
)
from .good_set_theorem import Condition, TheoremReport, theorem_1_2
from .mixing_time import MixingBounds, SlowMode, mixing_bounds, slow_mode
from .paper002 import Regime002, regime_002


def summary(n: int, d: int, lam: float | str, eps: float = 0.1) -> dict:
    """Everything the papers say about ``(n, d, λ)`` without simulating (docs/model.md §3–6, §8).

    Parameters
    ----------
    n, d, lam
        Servers, choices ``d >= 1`` and load λ in (0, 1) (float or str).
    eps : float
        ε of the good set, in (0, 1/10].

    Returns
    -------
    dict
        ``params``, ``fixed_point``, ``mean_queue_length``, ``mean_sojourn_time``,
        ``k_hypothesis``, ``regime_002``, ``k``, ``k_report``, ``linearised_q``,
        ``predicted_counts``, ``theorem_1_2``, ``mixing_steps``, ``mixing_time``, ``slow_rate``,
        ``slow_mode`` (the k-dependent ones ``None`` for ``d = 1``).

    Examples
    --------
    >>> s = summary(10_000, 20, 0.99)
    >>> s["k"], s["k_hypothesis"]
    (2, 3)
    """
    n = check_positive_int("n", n, maximum=MAX_THEORY_N)
    d = check_positive_int("d", d)
    lam_f = check_load(lam)
    eps = check_fraction("eps", eps, low=0.0, high=0.1)
    pi = fixed_point(d, lam_f)
    out: dict = {
        "params": {"n": n, "d": d, "load": lam_f, "eps": eps},
        "fixed_point": pi.tolist(),
        "mean_queue_length": mean_queue_length(d, lam_f),
        "mean_sojourn_time": mean_sojourn_time(d, lam_f),
        "k_hypothesis": k_hypothesis(n, d, lam_f),
        "regime_002": regime_002(n, d, lam_f).to_dict(),
    }
    if d == 1:
        keys = "k k_report linearised_q predicted_counts theorem_1_2 mixing_steps mixing_time slow_rate slow_mode"
        out.update(dict.fromkeys(keys.split()))
        return out
    kr = k_report(d, lam)
    k = kr.k
    mb = mixing_bounds(n, d, lam_f)
    sm = slow_mode(d, lam_f, k)
    q = linearised_q(d, lam_f, k)
    cnt = predicted_counts(n, d, lam_f, k)
    valid = bool(q[-1] <= 1.0)
    out.update(
        k=k,
        k_report=kr.to_dict(),
        # predictions outside their range (q̃_i > 1, a negative count) are None, not numbers
        linearised_q=[float(v) if v <= 1.0 else None for v in q],
        predicted_counts=[float(v) if v >= 0.0 else None for v in cnt],
        linearisation={
            "valid": valid,
            "q_k": float(q[-1]),
            "note": "" if valid else LINEARISATION_NOTE.format(qk=q[-1]),
        },
        theorem_1_2=theorem_1_2(n, d, lam_f, eps).to_dict(),
        mixing_steps={"upper": mb.upper_steps, "lower": mb.lower_steps},
        mixing_time={"upper": mb.upper_time, "lower": mb.lower_time},
        slow_rate=sm.mu,
        slow_mode=sm.to_dict(),
    )
    return out


@dataclass(frozen=True)
class TheoryReport(Result):
    """The dict of :func:`summary` as a result; ``plot`` draws π(i) against the linearised profile.

    Examples
    --------
    >>> rep = theory_report(10_000, 20, 0.99)
    >>> rep.to_dict()["k"], "Theorem 1.2" in rep.summary()
    (2, True)
    >>> rep.to_frame().columns.tolist()
    ['level', 'pi', 'one_minus_pi', 'q_tilde', 'predicted_queues_of_length_i_minus_1']
    """

    data: dict

    def to_dict(self) -> dict:
        return to_jsonable(self.data)

    def _rows(self):
        r = self.data
        lin, cnt = r["linearised_q"] or [], r["predicted_counts"] or []
        shown = min(len(r["fixed_point"]), max(len(lin) + 2, 6))
        lin_p, cnt_p = lin + [None] * shown, cnt + [None] * shown  # None past the end
        for i, pi in enumerate(r["fixed_point"][:shown], start=1):
            yield i, pi, 1 - pi, lin_p[i - 1], cnt_p[i - 1], i - 1 < len(lin)

    def to_frame(self) -> Any:
        """One row per level shown: ``pi``, ``one_minus_pi``, ``q_tilde``, predicted queues of length ``i − 1``."""
        return frame(
            [
                {"level": i, "pi": pi, "one_minus_pi": om, "q_tilde": q, "predicted_queues_of_length_i_minus_1": c}
                for i, pi, om, q, c, _ in self._rows()
            ]
        )

    def summary(self) -> str:
        """The text ``supermarket theory`` prints."""

        r, p = self.data, self.data["params"]
        lines = [f"supermarket theory  n={p['n']}  d={p['d']}  λ={p['load']!r}  ε={p['eps']}"]
        if r["k"] is not None:
            kr = r["k_report"]
            lines.append(
                f"k_(λ,d) = ⌈log(1/(1−λ))/log d⌉ = {r['k']}   (log_d(1/(1−λ)) = {kr['log_ratio']:.6g})  "
                "(paper 000, docs/model.md §4)"
            )
            if kr["note"]:
                lines.append(f"  {kr['note']}")
        else:
            lines.append("k_(λ,d): none for d = 1 (independent M/M/1 queues, no bounded maximum)")
        lines.append(
            f"hypothesis maximum (largest k with n·π(k) ≥ 1) = {r['k_hypothesis']}   (docs/model.md §4, reconstructed)"
        )
        lines.append(
            f"mean-field mean queue length Σπ(i) = {r['mean_queue_length']:.10g}, "
            f"sojourn time = {r['mean_sojourn_time']:.10g}   (docs/model.md §3)"
        )

        def pred(v, inside):
            return "" if not inside else ("—" if v is None else f"{v:.6g}")

        n_counts = len(r["predicted_counts"] or [])  # lengths 0..k: one row more than q̃_1..q̃_k
        rows = [
            [str(i), f"{pi:.6g}", f"{om:.6g}", pred(q, ins), pred(c, i <= n_counts)]
            for i, pi, om, q, c, ins in self._rows()
        ]
        lines.append(
            text_table(
                ["i", "π(i)", "1−π(i)", "q̃_i (derived)", "predicted queues of length i−1"],
                rows,
                title="Fixed point π(i) and linearised profile (derived)",
            )
        )
        lz = r.get("linearisation")
        if lz and not lz["valid"]:
            lines.append(f"note: {lz['note']} (—).")
        if r["theorem_1_2"] is not None:
            th12 = r["theorem_1_2"]
            conds = tuple(Condition(**c) for c in th12["conditions"])
            lines.append(TheoremReport(conds, th12["applies"], th12["k"]).summary())
            ms, mt = r["mixing_steps"], r["mixing_time"]
            lines.append(MixingBounds(r["k"], ms["upper"], ms["lower"], mt["upper"], mt["lower"]).summary())
            lines.append(SlowMode(**r["slow_mode"]).summary())
        lines.append(Regime002(**r["regime_002"]).summary())
        return "\n".join(lines)

    def plot(self, path: Any = None) -> Any:
        """π(i) and ``1 − q̃_i`` against the level, log scale; saved when ``path`` is given."""
        plt = pyplot(path is not None, force=False)

        pi = np.asarray(self.data["fixed_point"], dtype=float)
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        lv = np.arange(1, pi.size + 1)
        ax.semilogy(lv, np.where(pi > 0, pi, np.nan), "o-", label="π(i) (mean field)")
        lin = self.data["linearised_q"]
        if lin:
            q = np.array([np.nan if v is None else 1.0 - v for v in lin])
            ax.semilogy(
                np.arange(1, q.size + 1), np.where(q > 0, q, np.nan), "s--", label="1 − q̃_i (linearised, derived)"
            )
        ax.set_xlabel("level i")
        ax.set_ylabel("fraction of queues with ≥ i customers")
        p = self.data["params"]
        ax.set_title(f"n={p['n']}, d={p['d']}, λ={p['load']}", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        return save_figure(fig, path)


def theory_report(n: int, d: int, lam: float | str, eps: float = 0.1) -> TheoryReport:
    """:func:`summary` as a :class:`TheoryReport`.

    Parameters
    ----------
    n, d, lam, eps
        As in :func:`summary`.

    Returns
    -------
    TheoryReport

    Examples
    --------
    >>> theory_report(100, 1, 0.5).to_dict()["k"] is None
    True
    """
    return TheoryReport(summary(n, d, lam, eps))
