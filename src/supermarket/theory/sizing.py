"""Sizing (:func:`design`): the least ``d`` with ``k_{λ,d}`` at most a queue length (docs/model.md §4)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..model import MAX_THEORY_N, check_load, check_positive_int
from ..result import Result, frame, text_table
from .equilibrium import (
    LINEARISATION_NOTE,
    _log_inv_one_minus,
    fixed_point,
    k_hypothesis,
    k_lambda_d,
    k_report,
    linearised_q,
    predicted_counts,
)


@dataclass(frozen=True)
class DesignReport(Result):
    """Least number of choices that keeps ``k_{λ,d} <= max_queue`` (docs/model.md §4).

    Examples
    --------
    >>> print(design(0.999, 2).summary().splitlines()[0])
    At load λ = 0.999, d = 32 choices give k_(λ,d) = 2 ≤ 2 (d = 31 would give 3).
    """

    d: int
    k: int
    max_queue: int
    load: float
    share_by_length: tuple[float, ...]  # linearised prediction [derived], lengths 0..k (NaN: outside its regime)
    fixed_point: tuple[float, ...]  # π(1..k+1) at this d
    linearisation_valid: bool = True  # False when q̃_k > 1: the shares outside [0, 1] are NaN
    note: str = ""
    # π(K+1) at this d: the mean field's (n → ∞ at fixed d) share of queues longer than K
    share_above_max_queue: float = 0.0
    k_note: str = ""  # what paper 000 says of the maximum near a boundary (k_report)
    hypothesis_max: int | None = None  # largest k with n·π(k) >= 1 at the given n (None without n)
    n: int | None = field(default=None, compare=False)  # servers, for predicted counts (not in to_dict)
    k_one_less: int | None = field(default=None, compare=False)  # k_{λ,d−1} (None for d = 2)

    _omit = ("n", "k_one_less")

    def to_frame(self) -> Any:
        """One row per length: ``share`` (NaN outside the linearisation's regime), ``queues`` with ``n``."""
        return frame(
            [
                {"length": j, "share": s, **({"queues": self.n * s} if self.n is not None else {})}
                for j, s in enumerate(self.share_by_length)
            ]
        )

    def summary(self) -> str:
        """The answer and the predicted shares by length, as ``supermarket design`` prints them."""

        K, n, share = self.max_queue, self.n, self.share_above_max_queue
        other = f"d = {self.d - 1} would give {self.k_one_less}" if self.k_one_less else "d = 1 has no bounded maximum"

        def cell(v):  # NaN: outside the linearisation's regime
            return f"{v:.6g}" if v == v else "—"

        rows = [
            [str(j), cell(s)] + ([cell(n * s)] if n is not None else []) for j, s in enumerate(self.share_by_length)
        ]
        t = text_table(
            ["length", "share"] + (["queues (of n)"] if n is not None else []),
            rows,
            title="Paper 000's heavy-traffic prediction of the share by length (linearised profile, derived)",
        )
        out = f"At load λ = {self.load}, d = {self.d} choices give k_(λ,d) = {self.k} ≤ {K} ({other}).\n{t}"
        if not self.linearisation_valid:
            out += f"\nnote: {self.note} (—)."
        out += (
            f"\nmean field at d = {self.d} (n → ∞, docs/model.md §3): a share π({K + 1}) = "
            f"{share:.6g} of queues hold more than {K} customer{'s' if K > 1 else ''}"
        )
        if n is not None:
            out += (
                f" (about {n * share:.6g} of n = {n}); hypothesis maximum at this n (largest k with n·π(k) ≥ 1, "
                f"docs/model.md §4, reconstructed): {self.hypothesis_max}"
            )
        if share > 1e-3:
            # the two statements answer different limits; say which one a reader can rely on at this d
            out += (
                f"\ncaveat: k_(λ,d) ≤ {K} and the share 0 above {K} are heavy-traffic asymptotics, not a bound at "
                f"d = {self.d}: the mean field at this d puts a share {share:.3g} of queues above {K}"
            )
        k_note = f"; {self.k_note}" if self.k_note else ""
        return f"{out}\nk_(λ,d) is paper 000's heavy-traffic statement (λ → 1 with d growing){k_note}."


def design(lam: float | str, max_queue: int, n: int | None = None) -> DesignReport:
    """The least ``d >= 2`` with ``k_{λ,d} <= K`` (``d^K >= 1/(1−λ)``; docs/model.md §4) and its shares by length.

    Parameters
    ----------
    lam : float or str
        Load λ in (0, 1).
    max_queue : int
        ``K >= 1``.
    n : int, optional
        Servers: adds expected queue counts and the hypothesis maximum (``d`` does not depend on it).

    Returns
    -------
    DesignReport

    Examples
    --------
    >>> rep = design(0.999, 2)
    >>> rep.d, rep.k, k_lambda_d(31, 0.999)
    (32, 2, 3)
    """
    lam_f = check_load(lam)
    K = check_positive_int("max_queue", max_queue)
    if n is not None:
        check_positive_int("n", n, maximum=MAX_THEORY_N)
    x = _log_inv_one_minus(lam)
    # k_{λ,d} does not increase with d: bisect for the least d with k <= K
    hi = max(3, int(math.ceil(math.exp(min(x / K, 700.0)))) + 2)
    while k_lambda_d(hi, lam) > K:
        hi *= 2
    lo = 2
    if k_lambda_d(lo, lam) <= K:
        hi = lo
    while hi - lo > 1:  # invariant: k(lo) > K >= k(hi)
        mid = (lo + hi) // 2
        if k_lambda_d(mid, lam) <= K:
            hi = mid
        else:
            lo = mid
    d = hi
    k = k_lambda_d(d, lam)
    counts = predicted_counts(1, d, lam_f, k)
    q = linearised_q(d, lam_f, k)
    valid = bool(q[-1] <= 1.0)
    share = tuple(float(v) if 0.0 <= v <= 1.0 else math.nan for v in counts)
    n = None if n is None else check_positive_int("n", n, maximum=MAX_THEORY_N)
    return DesignReport(
        d=d,
        k=k,
        max_queue=K,
        load=lam_f,
        share_by_length=share,
        fixed_point=tuple(float(v) for v in fixed_point(d, lam_f, k + 1)),
        linearisation_valid=valid,
        note="" if valid else LINEARISATION_NOTE.format(qk=q[-1]),
        # π(k+1+j) <= exp(−d^j): zero in floating point for j >= 64
        share_above_max_queue=float(fixed_point(d, lam_f, K + 1)[K]) if K - k <= 64 else 0.0,
        k_note=k_report(d, lam).note,
        hypothesis_max=None if n is None else k_hypothesis(n, d, lam),
        n=n,
        k_one_less=k_lambda_d(d - 1, lam) if d > 2 else None,
    )
