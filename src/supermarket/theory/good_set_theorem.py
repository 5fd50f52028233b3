"""The good set ``N^ε`` and the conditions of Theorem 1.2 of paper 000 (docs/model.md §5)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..model import MAX_THEORY_N, check_fraction, check_int, check_load, check_positive_int, exact_load
from ..result import Result, frame, text_table
from .equilibrium import MAX_K, k_lambda_d


def good_set_bounds(
    n: int, d: int, lam: float | str, eps: float = 0.1, k: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of clause (b) of ``N^ε`` in numbers of queues shorter than ``j = 1..k`` (docs/model.md §5).

    The target is ``n(1−λ)(λd)^{j−1}``, the band ``1 ± 5ε``; computed exactly on the λ and ε
    written, so an integer edge comes out exactly.

    Parameters
    ----------
    n, d, lam
        Servers, choices ``d >= 1`` and load λ in (0, 1) (float or str).
    eps : float
        ε in (0, 1/10].
    k : int, optional
        Defaults to ``k_{λ,d}``.

    Returns
    -------
    tuple of numpy.ndarray
        ``(lo, hi)``, each of length ``k``.

    Examples
    --------
    >>> lo, hi = good_set_bounds(10_000, 20, 0.99, eps=0.1)
    >>> lo.round(6).tolist(), hi.round(6).tolist()
    ([50.0, 990.0], [150.0, 2970.0])
    """
    n = check_positive_int("n", n, maximum=MAX_THEORY_N)
    d = check_positive_int("d", d)
    lam_in = lam
    lam = check_load(lam)
    eps_in = eps
    eps = check_fraction("eps", eps, low=0.0, high=0.1)
    k = k_lambda_d(d, lam_in) if k is None else check_positive_int("k", k, maximum=MAX_K)
    # exact on the numbers written: the edge 500 (n = 10^5, λ = 0.99, ε = 0.1) is 500.0, not 500.00000000000045
    x, e = exact_load(lam_in), exact_load(eps_in)
    lo_f, hi_f = 1 - 5 * e, 1 + 5 * e
    lo, hi = np.empty(k), np.empty(k)
    t = n * (1 - x)
    for j in range(k):
        lo[j], hi[j] = _fraction_to_float(lo_f * t), _fraction_to_float(hi_f * t)
        if math.isinf(hi[j]):  # past the float range: every later bound too
            lo[j + 1 :], hi[j + 1 :] = math.inf, math.inf
            break
        t *= x * d
    return lo, hi


def _fraction_to_float(q: Fraction) -> float:
    """``float(q)`` correctly rounded, ``inf`` past the float range."""
    try:
        return float(q)
    except OverflowError:
        return math.inf


@dataclass(frozen=True)
class Clause:
    name: str
    holds: bool
    detail: str


@dataclass(frozen=True)
class GoodSetReport(Result):
    """Membership of a state in ``N^ε`` by clauses (a) and (b) of docs/model.md §5; (d) reported, not required.

    Examples
    --------
    >>> g = good_set([0] * 100 + [1] * 1900 + [2] * 8000, d=20, lam=0.99)
    >>> g.member, g.to_frame()["clause"].tolist()
    (True, ['a', 'b'])
    """

    member: bool
    k: int
    eps: float
    clauses: tuple[Clause, ...]
    failing: str | None  # the first failing required clause

    _order = ("member", "k", "eps", "failing")

    def to_frame(self) -> Any:
        """One row per clause: ``clause``, ``holds``, ``required``, ``detail``."""
        return frame(
            [
                {"clause": c.name, "holds": c.holds, "required": c.name in ("a", "b"), "detail": c.detail}
                for c in self.clauses
            ]
        )

    def summary(self) -> str:
        """Verdict, then one line per clause."""
        verdict = "member" if self.member else f"not a member (clause ({self.failing}) fails)"
        lines = [f"good set N^ε (ε = {self.eps:g}, k = {self.k}, docs/model.md §5): {verdict}"]
        for c in self.clauses:
            extra = "" if c.name in ("a", "b") else " [not required]"
            lines.append(f"  ({c.name}) {'holds' if c.holds else 'fails'}: {c.detail}{extra}")
        return "\n".join(lines)


def _counts_from_input(lengths, counts, profile, n):
    given = sum(x is not None for x in (lengths, counts, profile))
    if given != 1:
        raise TypeError("give exactly one of lengths (queue-lengths vector), counts (c_i, i>=1) or profile (u_i, i>=1)")
    if lengths is not None:
        x = np.asarray(lengths)
        if x.ndim != 1 or x.size == 0 or not np.issubdtype(x.dtype, np.integer):
            raise TypeError("lengths must be a non-empty 1-d array of integers (one queue length per server)")
        if (x < 0).any():
            raise ValueError(f"lengths must be >= 0; queue {int(np.argmax(x < 0))} has length {int(x.min())}")
        if n is not None and x.size != n:
            raise ValueError(f"lengths has {x.size} entries but n={n}")
        n = x.size
        top = int(x.max())
        c = np.bincount(x, minlength=top + 1)[::-1].cumsum()[::-1][1:]  # c_i = #{x >= i}
        return n, c.astype(float)
    if n is None:
        raise TypeError("n is required with counts or profile")
    n = check_positive_int("n", n, maximum=MAX_THEORY_N)
    try:
        arr = np.asarray(counts if counts is not None else profile, dtype=float)
    except OverflowError:
        raise ValueError("counts/profile values must be finite numbers (counts in [0, n])") from None
    except (TypeError, ValueError):
        raise TypeError("counts/profile must be a 1-d array of numbers indexed from level 1") from None
    if arr.ndim != 1:
        raise TypeError("counts/profile must be a 1-d array indexed from level 1")
    c = arr if counts is not None else arr * n
    if np.any(~np.isfinite(c)) or np.any(c < -1e-9) or np.any(c > n + 1e-9):
        raise ValueError("profile values must lie in [0, 1] (counts in [0, n])")
    if np.any(np.diff(c) > 1e-9):
        i = int(np.argmax(np.diff(c) > 1e-9)) + 2
        raise ValueError(f"profile must be non-increasing; level {i} exceeds level {i - 1}")
    return n, c


def good_set(
    lengths: Any = None,
    *,
    counts: Any = None,
    profile: Any = None,
    n: int | None = None,
    d: int,
    lam: float | str,
    eps: float = 0.1,
    k: int | None = None,
) -> GoodSetReport:
    """Is the state in ``N^ε(n, d, λ, k)``? (docs/model.md §5, membership as (a) and (b)).

    Parameters
    ----------
    lengths : array_like of int, optional
        Queue-lengths vector (give exactly one of ``lengths``, ``counts``, ``profile``).
    counts, profile : array_like, optional
        ``c_i`` or ``u_i`` from level 1 (non-increasing), with ``n``.
    n : int, optional
    d, lam, eps, k
        As in :func:`good_set_bounds`.

    Returns
    -------
    GoodSetReport
        Clause (d) only when ``ελd >= 2``.

    Examples
    --------
    >>> x = [0] * 100 + [1] * 1900 + [2] * 8000
    >>> good_set(x, d=20, lam=0.99).member
    True
    >>> good_set([3] + x[1:], d=20, lam=0.99).failing  # a queue of length k + 1 = 3
    'a'
    """
    n, c = _counts_from_input(lengths, counts, profile, n)
    d = check_positive_int("d", d)
    lam = check_load(lam)
    eps = check_fraction("eps", eps, low=0.0, high=0.1)
    k = k_lambda_d(d, lam) if k is None else check_positive_int("k", k, maximum=MAX_K)

    def c_at(i):  # c_i for i >= 1, 0 past the end
        return float(c[i - 1]) if i - 1 < len(c) else 0.0

    clauses = []
    ck1 = c_at(k + 1)
    clauses.append(Clause("a", ck1 == 0, f"queues of length >= k+1={k + 1}: {ck1:g} (must be 0)"))
    lo, hi = good_set_bounds(n, d, lam, eps, k)
    bad_b = []
    for j in range(1, k + 1):
        shorter = n - c_at(j)
        if not (lo[j - 1] <= shorter <= hi[j - 1]):
            bad_b.append(f"j={j}: {shorter:g} queues shorter than {j}, outside [{lo[j - 1]:.6g}, {hi[j - 1]:.6g}]")
    ok_b = f"counts of shorter queues within (1±5ε)·n(1−λ)(λd)^(j−1) for j=1..{k}"
    clauses.append(Clause("b", not bad_b, "; ".join(bad_b) if bad_b else ok_b))
    if eps * lam * d >= 2:
        bad_d = []
        for j in range(1, k):
            exact = c_at(j) - c_at(j + 1)
            target = n * (1 - lam) * (lam * d) ** j
            if not ((1 - 6 * eps) * target <= exact <= (1 + 6 * eps) * target):
                bad_d.append(f"j={j}: {exact:g} queues of length {j}, target {target:.6g}·(1±6ε)")
        clauses.append(Clause("d", not bad_d, "; ".join(bad_d) if bad_d else "holds (reported, not required)"))
    failing = next((cl.name for cl in clauses[:2] if not cl.holds), None)
    return GoodSetReport(member=failing is None, k=k, eps=eps, clauses=tuple(clauses), failing=failing)


@dataclass(frozen=True)
class Condition:
    """One checked condition (of a theorem, or of a paper-002 regime): ``name``, ``value``, ``holds``, ``detail``.

    Examples
    --------
    >>> Condition("eps <= 1/10", 0.05, True).holds
    True
    """

    name: str
    value: float
    holds: bool
    detail: str = ""


@dataclass(frozen=True)
class TheoremReport(Result):
    """The conditions of Theorem 1.2 of paper 000, each checked; ``applies`` when all hold.

    Examples
    --------
    >>> theorem_1_2(10_000, 20, 0.99).applies
    False
    """

    conditions: tuple[Condition, ...]
    applies: bool
    k: int

    def to_frame(self) -> Any:
        """One row per condition: ``condition``, ``value``, ``holds``, ``detail``."""
        return frame(
            [{"condition": c.name, "value": c.value, "holds": c.holds, "detail": c.detail} for c in self.conditions]
        )

    def summary(self) -> str:
        """The conditions as a table, then the verdict."""

        t = text_table(
            ["condition", "value", "holds", "detail"],
            [[c.name, f"{c.value:.6g}", "yes" if c.holds else "no", c.detail] for c in self.conditions],
            title="Theorem 1.2 of paper 000: conditions",
        )
        return t + "\nTheorem 1.2 " + ("applies" if self.applies else "does not apply (some condition fails)")


SMALL_HEAVY_TRAFFIC = 0.1  # our reading of "(1−λ)^{−1}/√(nd) small"


def theorem_1_2(n: int, d: int, lam: float | str, eps: float = 0.1) -> TheoremReport:
    """The conditions of Theorem 1.2 of paper 000 (docs/model.md §5), each with value and verdict.

    Parameters
    ----------
    n, d, lam
        Servers, choices ``d >= 2`` and load λ in (0, 1).
    eps : float
        ε; above 1/10 fails the first condition.

    Returns
    -------
    TheoremReport
        ``applies`` when every condition holds ("small" is read as ``<= 0.1``, a convention).

    Examples
    --------
    >>> rep = theorem_1_2(10**6, 100, 0.999)
    >>> rep.applies, rep.conditions[1].name, rep.conditions[1].holds
    (False, 'd^k (1-λ) >= 2 log^2 n', False)
    """
    n = check_positive_int("n", n, maximum=MAX_THEORY_N)
    d = check_int("d", d, minimum=2)
    lam = check_load(lam)
    eps_f = check_fraction("eps", eps, low=0.0, high=1.0)
    k = k_lambda_d(d, lam)
    logn = math.log(n)
    one = 1.0 - lam
    dk = float(d) ** k
    c3, d_min, small = 100 * k * one * dk / d, 200 * k * logn**2 / eps_f, 1.0 / (one * math.sqrt(n * float(d)))
    conv = f"read as <= {SMALL_HEAVY_TRAFFIC} (a convention of this tool)"
    conds = [
        Condition("eps <= 1/10", eps_f, eps_f <= 0.1, "ε must be at most 1/10"),
        Condition("d^k (1-λ) >= 2 log^2 n", dk * one, dk * one >= 2 * logn**2, f"2 log^2 n = {2 * logn**2:.6g}"),
        Condition("100 k (1-λ) d^(k-1) <= ε", c3, c3 <= eps_f, f"ε = {eps_f:g}"),
        Condition("d >= 200 k log^2 n / ε (implied)", float(d), d >= d_min, f"200 k log^2 n / ε = {d_min:.6g}"),
        Condition("n >= 1e15 (implied)", float(n), n >= 10**15, "forced by the two conditions above"),
        Condition("(1-λ)^(-1)/sqrt(n d) small", small, small <= SMALL_HEAVY_TRAFFIC, conv),
    ]
    return TheoremReport(conditions=tuple(conds), applies=all(c.holds for c in conds), k=k)
