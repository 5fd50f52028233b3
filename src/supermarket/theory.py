"""Closed forms and calculators of the papers (docs/model.md §3–6 and §8).

Everything here is exact or closed-form and fast; nothing is simulated.  Each function
names the docs/model.md section it implements.  Items that docs/model.md marks **[derived]** (the
linearised profile, the slow mode, the paper-002 limits) are worked out for this project;
user-facing text says "derived" for them, never "Theorem".

Conventions: a *profile* array ``u`` is indexed from level 1, ``u[0] = u_1``; likewise
``pi[0] = π(1)``.  ``n`` servers, ``d`` choices, load ``lam`` (λ).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from fractions import Fraction

import numpy as np

from .model import (
    MAX_THEORY_N,
    check_fraction,
    check_int,
    check_load,
    check_positive_float,
    check_positive_int,
    exact_load,
    load_candidates,
)


def _frame(rows):
    import pandas as pd

    return pd.DataFrame(rows)


class _Result:
    """The result protocol shared by the small results of this module: ``to_dict()`` (JSON-safe),
    ``to_frame()`` (tidy: one row per quantity, unless a result overrides it) and ``summary()``
    (the plain text the command line prints)."""

    def to_dict(self) -> dict:
        from .jsonable import to_jsonable

        return to_jsonable(asdict(self))

    def to_frame(self):
        """Tidy table: one row per scalar quantity (``quantity``, ``value``)."""
        return _frame([{"quantity": k, "value": v} for k, v in self.to_dict().items()
                       if not isinstance(v, (list, dict))])

    def summary(self) -> str:  # pragma: no cover - every result overrides it
        return "\n".join(f"{k} = {v}" for k, v in self.to_dict().items())


__all__ = [
    "log_fixed_point",
    "fixed_point",
    "mean_queue_length",
    "mean_sojourn_time",
    "k_lambda_d",
    "KReport",
    "k_report",
    "k_hypothesis",
    "linearised_q",
    "predicted_counts",
    "linearisation_valid",
    "LINEARISATION_NOTE",
    "good_set_bounds",
    "GoodSetReport",
    "good_set",
    "Condition",
    "TheoremReport",
    "theorem_1_2",
    "MixingBounds",
    "mixing_bounds",
    "slow_mode_matrix",
    "SlowMode",
    "slow_mode",
    "Regime002",
    "regime_002",
    "design",
    "TheoryReport",
    "theory_report",
    "DesignReport",
]

MAX_FIXED_POINT_LEVELS = 64
MAX_K = 1000  # an explicit k (a level): k_{λ,d} <= 53·log2... is far below; A_k is k×k dense
TINY = 1e-300


# =========================================================================== §3
def _log_lambda(lam: float) -> float:
    """log λ accurate for λ near 1 (λ − 1 is exact in floating point for λ ∈ [1/2, 2])."""
    return math.log1p(lam - 1.0) if lam >= 0.5 else math.log(lam)


def log_fixed_point(d, lam, levels) -> np.ndarray:
    """``log π(i)`` for ``i = 1..levels`` (docs/model.md §3).

    ``log π(i) = log(λ)·(d^i − 1)/(d − 1)``, and ``i·log λ`` when ``d = 1``.  The geometric
    sum is built by ``S_{i+1} = d·S_i + 1``; when it overflows the value is ``-inf``, i.e.
    ``π(i) = 0`` exactly in double precision, never NaN.

    Parameters
    ----------
    d : int
        Number of choices, ``d >= 1``.
    lam : float or str
        Load λ in (0, 1).
    levels : int
        Number of levels, ``>= 0``.

    Returns
    -------
    numpy.ndarray
        ``log π(1), …, log π(levels)`` (``-inf`` where ``π`` underflows).

    Raises
    ------
    ValueError, TypeError
        If a parameter is outside its range or of the wrong type.

    Examples
    --------
    >>> log_fixed_point(2, 0.9, 3).round(6).tolist()
    [-0.105361, -0.316082, -0.737524]
    >>> log_fixed_point(10**18, 0.5, 19)[[1, -1]].tolist()  # S_19 ≈ d^18 overflows: π(19) = 0 exactly
    [-6.931471805599453e+17, -inf]
    """
    d = check_positive_int("d", d)
    lam = check_load(lam)
    levels = check_int("levels", levels, minimum=0)
    out = np.empty(levels)
    loglam = _log_lambda(lam)
    s = 1.0
    fd = float(d)
    for i in range(levels):
        out[i] = loglam * s if math.isfinite(s) else -math.inf
        if math.isfinite(s):
            s = fd * s + 1.0 if d > 1 else s + 1.0
    return out


def fixed_point(d, lam, levels: int | None = None, *, tol: float = TINY,
                max_levels: int = MAX_FIXED_POINT_LEVELS) -> np.ndarray:
    """Mean-field fixed point ``π(i) = λ^{(d^i−1)/(d−1)}`` for ``i = 1, 2, …`` (docs/model.md §3).

    With ``levels`` given, exactly that many values.  Otherwise values up to and including
    the first one below ``tol`` (default 1e-300), at most ``max_levels`` of them.
    Underflow gives exact zeros, never NaN or inf.

    Parameters
    ----------
    d : int
        Number of choices, ``d >= 1`` (``π(i) = λ^i`` when ``d = 1``).
    lam : float or str
        Load λ in (0, 1).
    levels : int, optional
        Exact number of levels to return.
    tol : float, optional
        Without ``levels``: stop after the first value below ``tol``.
    max_levels : int, optional
        Without ``levels``: at most this many values (default 64).

    Returns
    -------
    numpy.ndarray
        ``π(1), π(2), …`` (index 0 is level 1).

    Examples
    --------
    >>> fixed_point(2, 0.9, levels=3).round(6).tolist()
    [0.9, 0.729, 0.478297]
    >>> fixed_point(1, 0.5, levels=3).round(12).tolist()
    [0.5, 0.25, 0.125]
    >>> fixed_point(10**9, 0.5, levels=3).tolist()  # underflow: exact zeros
    [0.5, 0.0, 0.0]
    """
    if levels is None:
        max_levels = check_positive_int("max_levels", max_levels)
        logs = log_fixed_point(d, lam, max_levels)
        below = np.nonzero(logs < math.log(tol))[0]
        if below.size:
            logs = logs[: below[0] + 1]
    else:
        logs = log_fixed_point(d, lam, levels)
    return np.exp(logs)


def mean_queue_length(d, lam) -> float:
    """Mean-field mean queue length ``Σ_{i≥1} π(i)`` (docs/model.md §3).

    ``λ/(1−λ)`` when ``d = 1`` (M/M/1); otherwise the sum, carried on until the terms no
    longer change it.

    Parameters
    ----------
    d : int
        Number of choices, ``d >= 1``.
    lam : float or str
        Load λ in (0, 1).

    Returns
    -------
    float
        The mean number of customers per server under the fixed point.

    Examples
    --------
    >>> round(mean_queue_length(2, 0.9), 5)
    2.35265
    >>> mean_queue_length(1, 0.5)
    1.0
    """
    d = check_positive_int("d", d)
    lam = check_load(lam)
    if d == 1:
        return lam / (1.0 - lam)
    total = 0.0
    loglam = _log_lambda(lam)
    s = 1.0
    while True:
        term = math.exp(loglam * s) if math.isfinite(s) else 0.0
        total += term
        if term <= 1e-18 * total or term == 0.0:
            return total
        s = d * s + 1.0


def mean_sojourn_time(d, lam) -> float:
    """Mean-field mean sojourn time ``Σ π(i)/λ`` (Little's law, docs/model.md §3).

    Parameters
    ----------
    d : int
        Number of choices, ``d >= 1``.
    lam : float or str
        Load λ in (0, 1).

    Returns
    -------
    float
        :func:`mean_queue_length` divided by λ.

    Examples
    --------
    >>> mean_sojourn_time(1, 0.5)  # M/M/1: 1/(1 − λ)
    2.0
    """
    return mean_queue_length(d, lam) / check_load(lam)


# =========================================================================== §4
def _k_exact(d: int, x: Fraction) -> int:
    """Least ``k >= 1`` with ``d^k (1 − x) >= 1``, for exact rational ``x`` in (0, 1)."""
    one_minus = 1 - x
    num, den = one_minus.numerator, one_minus.denominator  # 1/(1-x) = den/num
    # d^k * num >= den  <=>  1/(1-x) <= d^k
    est = max(1, int(math.ceil(math.log(den / num if num else math.inf) / math.log(d))) if num else 1)
    k = max(1, est - 1)
    while d ** k * num < den:
        k += 1
    while k > 1 and d ** (k - 1) * num >= den:
        k -= 1
    return k


def _log_inv_one_minus(lam) -> float:
    """``log(1/(1−λ))`` from the exact value of λ (finite even where float(λ) rounds to 1)."""
    one_minus = 1 - load_candidates(lam)[0]
    return math.log(one_minus.denominator) - math.log(one_minus.numerator)


def k_lambda_d(d, lam) -> int:
    """``k_{λ,d} = ⌈log(1/(1−λ))/log d⌉``: the least ``k`` with ``1/(1−λ) <= d^k`` (docs/model.md §4).

    Decided in exact integer arithmetic on the number the user wrote, so the boundary
    ``1/(1−λ) = d^k`` is handled exactly: ``λ = 0.9, d = 10`` gives 1, ``λ = 0.9000001``
    gives 2.  A float stands for both its shortest decimal (``0.9``) and its exact binary
    value; on a boundary that only one of them meets, the boundary (the smaller ``k``) is
    taken.

    Parameters
    ----------
    d : int
        Number of choices, ``d >= 2``.
    lam : float or str
        Load λ in (0, 1); a string such as ``"0.999"`` is read exactly.

    Returns
    -------
    int
        ``k_{λ,d} >= 1``.

    Raises
    ------
    ValueError
        If ``d < 2`` or λ is not in (0, 1).

    Examples
    --------
    >>> k_lambda_d(100, 0.999)
    2
    >>> k_lambda_d(10, 0.9), k_lambda_d(10, "0.9000001")
    (1, 2)
    """
    d = check_int("d", d, minimum=2)
    check_load(lam, exact=True)  # exact arithmetic: 1 − 10^-30 is fine here
    return min(_k_exact(d, c) for c in load_candidates(lam))


@dataclass(frozen=True)
class KReport(_Result):
    """``k_{λ,d}`` with its position between the boundaries ``d^{k−1} < 1/(1−λ) <= d^k``.

    Examples
    --------
    >>> k_report(10, 0.9).on_boundary
    True
    """

    k: int
    log_ratio: float  # log(1/(1−λ)) / log d, in (k−1, k]
    on_boundary: bool  # 1/(1−λ) = d^k exactly
    near_boundary: bool  # within 0.05 of an integer on the log_d scale
    possible_max: tuple[int, ...]  # maximum queue lengths the paper allows in equilibrium
    note: str

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        """``k_{λ,d}`` and the note on its boundaries, as ``supermarket theory`` prints them."""
        return (f"k_(λ,d) = ⌈log(1/(1−λ))/log d⌉ = {self.k}   (log_d(1/(1−λ)) = {self.log_ratio:.6g})  "
                f"(paper 000, docs/model.md §4)\n  {self.note}")


def k_report(d, lam, *, margin: float = 0.05) -> KReport:
    """``k_{λ,d}`` and what paper 000 says of the maximum near a boundary (docs/model.md §4).

    When ``1/(1−λ)`` is (close to) ``d^k`` — ``α/β`` an integer in the ``λ = 1 − n^{−α}``,
    ``d = n^β`` family — the equilibrium maximum is ``k`` or ``k + 1``.

    Parameters
    ----------
    d : int
        Number of choices, ``d >= 2``.
    lam : float or str
        Load λ in (0, 1).
    margin : float, optional
        "Near a boundary" means ``log(1/(1−λ))/log d`` within ``margin`` of an integer
        (default 0.05, a convention of this tool).

    Returns
    -------
    KReport
        ``k``, the ratio ``log(1/(1−λ))/log d``, the boundary flags, the maxima the paper
        allows and a one-line note.

    Examples
    --------
    >>> r = k_report(10, 0.9)
    >>> r.k, r.on_boundary, r.possible_max
    (1, True, (1, 2))
    >>> k_report(100, 0.999).possible_max
    (2,)
    """
    k = k_lambda_d(d, lam)
    ratio = _log_inv_one_minus(lam) / math.log(d)
    on_boundary = any(d ** k * (1 - c) == 1 for c in load_candidates(lam))
    frac = ratio - math.floor(ratio)
    near = on_boundary or min(frac, 1 - frac) < margin
    if on_boundary or (near and abs(ratio - k) < margin):
        possible = (k, k + 1)
        note = (f"1/(1-λ) is {'exactly' if on_boundary else 'close to'} d^{k}: paper 000 says the "
                f"equilibrium maximum is {k} or {k + 1}")
    elif near:
        possible = (k - 1, k) if k > 1 else (k,)
        note = (f"1/(1-λ) is just above d^{k - 1}: the maximum is {k}, with few queues at length {k}"
                if k > 1 else "")
    else:
        possible = (k,)
        note = f"away from a boundary: the equilibrium maximum is {k}"
    return KReport(k=k, log_ratio=ratio, on_boundary=on_boundary, near_boundary=near,
                   possible_max=possible, note=note)


def k_hypothesis(n, d, lam) -> int:
    """The general hypothesis of paper 000 (docs/model.md §4, formula reconstructed): the
    largest ``k`` with ``n·π(k) >= 1`` (0 if ``n·π(1) < 1``).  The equilibrium maximum is
    conjectured to be within 1 of it.

    Parameters
    ----------
    n : int
        Number of servers, ``n >= 1``.
    d : int
        Number of choices, ``d >= 1``.
    lam : float or str
        Load λ in (0, 1).

    Returns
    -------
    int
        The largest ``k >= 0`` with ``(d^k − 1)/(d − 1) <= log n / log(1/λ)``.

    Examples
    --------
    >>> k_hypothesis(10_000, 20, 0.99)  # n·π(3) ≈ 145 >= 1, n·π(4) < 1
    3
    """
    n = check_positive_int("n", n, maximum=MAX_THEORY_N)
    d = check_positive_int("d", d)
    lam = check_load(lam)
    bound = math.log(n) / -_log_lambda(lam)  # need S_k <= bound, S_k = (d^k-1)/(d-1)
    if d == 1:
        return int(math.floor(bound * (1 + 1e-15)))
    k, s = 0, 1.0
    while s <= bound * (1 + 1e-15):
        k += 1
        s = d * s + 1.0
    return k


def linearised_q(d, lam, k=None) -> np.ndarray:
    """Linearised profile [derived] (docs/model.md §4): ``q̃_i = (1−λ)((λd)^i − 1)/(λd − 1)`` for
    ``i = 1..k``, the predicted fraction of queues shorter than ``i``.

    Parameters
    ----------
    d : int
        Number of choices, ``d >= 1``.
    lam : float or str
        Load λ in (0, 1).
    k : int, optional
        Number of levels; defaults to ``k_{λ,d}``.

    Returns
    -------
    numpy.ndarray
        ``q̃_1, …, q̃_k``.

    Examples
    --------
    >>> linearised_q(20, 0.99).round(6).tolist()  # (1−λ)·[1, 1 + λd]
    [0.01, 0.208]
    """
    d = check_positive_int("d", d)
    lam = check_load(lam)
    k = k_lambda_d(d, lam) if k is None else check_positive_int("k", k, maximum=MAX_K)
    a = lam * d
    i = np.arange(1, k + 1, dtype=float)
    if abs(a - 1.0) < 1e-12:
        return (1 - lam) * i
    # (a^i - 1)/(a - 1) = sum_{j<i} a^j, accumulated to avoid cancellation
    geo = np.cumsum(a ** (i - 1))
    return (1 - lam) * geo


def predicted_counts(n, d, lam, k=None) -> np.ndarray:
    """Predicted number of queues of each length ``0..k`` from the linearised profile
    [derived]: ``n(q̃_{j+1} − q̃_j) = n(1−λ)(λd)^j`` of length ``j < k`` and ``n(1 − q̃_k)`` of
    length ``k`` (docs/model.md §4–5).  The last entry can be negative when the linearisation
    breaks down (``q̃_k > 1``).

    Parameters
    ----------
    n : int
        Number of servers, ``n >= 1``.
    d : int
        Number of choices, ``d >= 1``.
    lam : float or str
        Load λ in (0, 1).
    k : int, optional
        Longest length; defaults to ``k_{λ,d}``.

    Returns
    -------
    numpy.ndarray
        ``k + 1`` numbers of queues, for lengths ``0, 1, …, k``; they sum to ``n``.

    Examples
    --------
    >>> predicted_counts(10_000, 20, 0.99).round(6).tolist()
    [100.0, 1980.0, 7920.0]
    """
    n = check_positive_int("n", n, maximum=MAX_THEORY_N)
    q = linearised_q(d, lam, k)
    q0 = np.concatenate([[0.0], q])
    shorter = np.diff(q0)  # length exactly j, j = 0..k-1
    return n * np.concatenate([shorter, [1.0 - q[-1]]])


LINEARISATION_NOTE = ("the linearised profile (derived) is a first-order expansion valid only in its regime, "
                      "where every predicted fraction q̃_i lies in [0, 1] (heavy traffic with λd large); "
                      "here q̃_k = {qk:.6g} > 1, so it would predict a negative number of queues of length k; "
                      "predictions outside their range are not shown")


def linearisation_valid(d, lam, k=None) -> bool:
    """Whether the linearised profile [derived] is inside its regime: ``q̃_k <= 1``
    (docs/model.md §4).  ``q̃`` increases with ``i``, so then every predicted fraction
    ``q̃_i`` lies in [0, 1] and every predicted count of :func:`predicted_counts` is >= 0;
    otherwise the count of queues of length ``k`` would be negative.

    Parameters
    ----------
    d, lam, k
        As in :func:`linearised_q`.

    Returns
    -------
    bool

    Examples
    --------
    >>> linearisation_valid(20, 0.99), linearisation_valid(2, 0.9)
    (True, False)
    """
    q = linearised_q(d, lam, k)
    return bool(q[-1] <= 1.0)


# =========================================================================== §5
def good_set_bounds(n, d, lam, eps=0.1, k=None) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of clause (b) of ``N^ε`` (docs/model.md §5), in numbers of queues: for ``j = 1..k``
    the count of queues shorter than ``j`` must lie in ``[lo[j−1], hi[j−1]]`` where the
    target is ``n(1−λ)(λd)^{j−1}`` and the band is ``1 ± 5ε``.

    Parameters
    ----------
    n : int
        Number of servers, ``n >= 1``.
    d : int
        Number of choices, ``d >= 1``.
    lam : float or str
        Load λ in (0, 1).
    eps : float, optional
        ε in (0, 1/10] (default 0.1).
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
    # exact rational arithmetic on the numbers the user wrote (λ = 0.99 is 99/100), so that an
    # edge that is an integer (500 for n = 10^5, λ = 0.99, ε = 0.1) comes out exactly 500.0, not
    # 500.00000000000045, and a state on the edge is not wrongly excluded; each bound is then
    # rounded once to the nearest float
    x, e = exact_load(lam_in), exact_load(eps_in)
    lo_f, hi_f = 1 - 5 * e, 1 + 5 * e
    lo, hi = np.empty(k), np.empty(k)
    t = n * (1 - x)
    for j in range(k):
        lo[j], hi[j] = _fraction_to_float(lo_f * t), _fraction_to_float(hi_f * t)
        if math.isinf(hi[j]):  # past the float range: every later bound too
            lo[j + 1:], hi[j + 1:] = math.inf, math.inf
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
class GoodSetReport(_Result):
    """Membership of a state in the good set ``N^ε`` as stated by its consequences (a), (b)
    of docs/model.md §5; clause (d) is reported but not required.

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

    def to_dict(self) -> dict:
        return {"member": self.member, "k": self.k, "eps": self.eps, "failing": self.failing,
                "clauses": [asdict(c) for c in self.clauses]}

    def to_frame(self):
        """One row per clause: ``clause``, ``holds``, ``required``, ``detail``."""
        return _frame([{"clause": c.name, "holds": c.holds, "required": c.name in ("a", "b"),
                        "detail": c.detail} for c in self.clauses])

    def summary(self) -> str:
        """Verdict, then one line per clause."""
        head = (f"good set N^ε (ε = {self.eps:g}, k = {self.k}, docs/model.md §5): "
                + ("member" if self.member else f"not a member (clause ({self.failing}) fails)"))
        return "\n".join([head] + [f"  ({c.name}) {'holds' if c.holds else 'fails'}: {c.detail}"
                                    + ("" if c.name in ("a", "b") else " [not required]")
                                    for c in self.clauses])


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


def good_set(lengths=None, *, counts=None, profile=None, n=None, d, lam, eps=0.1, k=None) -> GoodSetReport:
    """Is the state in ``N^ε(n, d, λ, k)``? (docs/model.md §5, membership as (a) and (b)).

    Give the state as ``lengths`` (queue-lengths vector), ``counts`` (``c_i = n·u_i``,
    indexed from level 1) or ``profile`` (``u_i``, from level 1) with ``n``.

    Parameters
    ----------
    lengths : array_like of int, optional
        Queue-lengths vector ``x(1), …, x(n)``.
    counts : array_like, optional
        ``c_1, c_2, …`` (non-increasing, in ``[0, n]``); needs ``n``.
    profile : array_like, optional
        ``u_1, u_2, …`` (non-increasing, in ``[0, 1]``); needs ``n``.
    n : int, optional
        Number of servers (required with ``counts`` or ``profile``).
    d : int
        Number of choices, ``d >= 1``.
    lam : float or str
        Load λ in (0, 1).
    eps : float, optional
        ε in (0, 1/10] (default 0.1).
    k : int, optional
        Defaults to ``k_{λ,d}``.

    Returns
    -------
    GoodSetReport
        ``member`` and each clause with its verdict and detail; clause (d) is reported
        only when ``ελd >= 2`` and is never required.

    Raises
    ------
    TypeError
        If not exactly one of ``lengths``, ``counts``, ``profile`` is given.
    ValueError
        If the state or a parameter is invalid.

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
    clauses.append(Clause("b", not bad_b, "; ".join(bad_b) if bad_b else
                          f"counts of shorter queues within (1±5ε)·n(1−λ)(λd)^(j−1) for j=1..{k}"))
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
    """One checked condition (of a theorem here, of a paper-002 regime in
    :mod:`supermarket.fluctuations`): its ``name``, the ``value`` tested, whether it
    ``holds``, and a ``detail`` saying why it matters.

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
class TheoremReport(_Result):
    """The conditions of Theorem 1.2 of paper 000, each checked; ``applies`` when all hold.

    Examples
    --------
    >>> theorem_1_2(10_000, 20, 0.99).applies
    False
    """

    conditions: tuple[Condition, ...]
    applies: bool
    k: int

    def to_dict(self) -> dict:
        return {"conditions": [asdict(c) for c in self.conditions], "applies": self.applies, "k": self.k}

    def to_frame(self):
        """One row per condition: ``condition``, ``value``, ``holds``, ``detail``."""
        return _frame([{"condition": c.name, "value": c.value, "holds": c.holds, "detail": c.detail}
                       for c in self.conditions])

    def summary(self) -> str:
        """The conditions as a table, then the verdict."""
        from ._results import text_table

        t = text_table(["condition", "value", "holds", "detail"],
                       [[c.name, f"{c.value:.6g}", "yes" if c.holds else "no", c.detail] for c in self.conditions],
                       title="Theorem 1.2 of paper 000: conditions")
        return t + "\nTheorem 1.2 " + ("applies" if self.applies else "does not apply (some condition fails)")


SMALL_HEAVY_TRAFFIC = 0.1  # our reading of "(1−λ)^{−1}/√(nd) small"


def theorem_1_2(n, d, lam, eps=0.1) -> TheoremReport:
    """The conditions of Theorem 1.2 of paper 000 (docs/model.md §5), each with its value and
    verdict.  ``applies`` is true only when every condition holds.

    "(1−λ)^{−1}/√(nd) small" is read as ``<= 0.1`` (a convention of this tool, stated in
    the condition's detail).

    Parameters
    ----------
    n : int
        Number of servers, ``n >= 1``.
    d : int
        Number of choices, ``d >= 2``.
    lam : float or str
        Load λ in (0, 1).
    eps : float, optional
        ε (default 0.1); values above 1/10 are accepted and fail the first condition.

    Returns
    -------
    TheoremReport
        Each condition with its value and verdict, ``k`` and ``applies``.

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
    conds = [
        Condition("eps <= 1/10", eps_f, eps_f <= 0.1, "ε must be at most 1/10"),
        Condition("d^k (1-λ) >= 2 log^2 n", dk * one, dk * one >= 2 * logn ** 2,
                  f"2 log^2 n = {2 * logn ** 2:.6g}"),
        Condition("100 k (1-λ) d^(k-1) <= ε", 100 * k * one * dk / d, 100 * k * one * dk / d <= eps_f,
                  f"ε = {eps_f:g}"),
        Condition("d >= 200 k log^2 n / ε (implied)", float(d), d >= 200 * k * logn ** 2 / eps_f,
                  f"200 k log^2 n / ε = {200 * k * logn ** 2 / eps_f:.6g}"),
        Condition("n >= 1e15 (implied)", float(n), n >= 10 ** 15, "forced by the two conditions above"),
        Condition("(1-λ)^(-1)/sqrt(n d) small", 1.0 / (one * math.sqrt(n * float(d))),
                  1.0 / (one * math.sqrt(n * float(d))) <= SMALL_HEAVY_TRAFFIC,
                  f"read as <= {SMALL_HEAVY_TRAFFIC} (a convention of this tool)"),
    ]
    return TheoremReport(conditions=tuple(conds), applies=all(c.holds for c in conds), k=k)


# =========================================================================== §6
@dataclass(frozen=True)
class MixingBounds(_Result):
    """Orders of the mixing time (docs/model.md §6, constants taken as 1).

    Examples
    --------
    >>> mixing_bounds(10_000, 20, 0.99).to_frame()["bound"].tolist()
    ['upper', 'lower']
    """

    k: int
    upper_steps: float  # k d^{k-1} n log n, from a good state
    lower_steps: float  # d^{k-1} n
    upper_time: float  # steps / (n(1+λ))
    lower_time: float

    def to_dict(self) -> dict:
        return asdict(self)

    def to_frame(self):
        """Two rows (``bound`` = upper, lower) with ``steps`` and ``time``."""
        return _frame([{"bound": "upper", "k": self.k, "steps": self.upper_steps, "time": self.upper_time},
                       {"bound": "lower", "k": self.k, "steps": self.lower_steps, "time": self.lower_time}])

    def summary(self) -> str:
        return (f"mixing from a good state (paper 000, docs/model.md §6, constants 1): "
                f"upper k d^(k−1) n log n = {self.upper_steps:.4g} steps ({self.upper_time:.4g} time units), "
                f"lower d^(k−1) n = {self.lower_steps:.4g} steps ({self.lower_time:.4g} time units)")


def steps_to_time(steps, n, lam) -> float:
    """Discrete steps to continuous time: the chain is uniformized at rate ``n(1+λ)``
    (docs/model.md §1).

    Parameters
    ----------
    steps : float
        Number of steps of the discrete chain.
    n : int
        Number of servers.
    lam : float
        Load λ.

    Returns
    -------
    float
        ``steps / (n(1+λ))``.

    Examples
    --------
    >>> steps_to_time(1900, 100, 0.9)
    10.0
    """
    return float(steps) / (n * (1.0 + lam))


def mixing_bounds(n, d, lam) -> MixingBounds:
    """From a good state: mixing in ``O(k d^{k−1} n log n)`` steps, at least ``Ω(d^{k−1} n)``
    (docs/model.md §6, paper 000; constants not given, taken as 1).

    Parameters
    ----------
    n : int
        Number of servers, ``n >= 1``.
    d : int
        Number of choices, ``d >= 2``.
    lam : float or str
        Load λ in (0, 1).

    Returns
    -------
    MixingBounds
        ``k``, both orders in steps and in continuous time.

    Examples
    --------
    >>> b = mixing_bounds(1000, 10, 0.99)
    >>> b.k, b.lower_steps, round(b.upper_steps)  # 2·10·1000·log(1000)
    (2, 10000.0, 138155)
    """
    n = check_positive_int("n", n, maximum=MAX_THEORY_N)
    d = check_int("d", d, minimum=2)
    lam = check_load(lam)
    k = k_lambda_d(d, lam)
    dk1 = float(d) ** (k - 1)
    up = k * dk1 * n * math.log(max(n, 2))
    lo = dk1 * n
    return MixingBounds(k=k, upper_steps=up, lower_steps=lo,
                        upper_time=steps_to_time(up, n, lam), lower_time=steps_to_time(lo, n, lam))


def mixing_lower_customers(n, lam, g) -> float:
    """From ``‖x‖₁ = g n`` with ``g ≫ k``: ``Ω((1−λ)^{−1} g n)`` steps (docs/model.md §6).

    Parameters
    ----------
    n : int
        Number of servers.
    lam : float or str
        Load λ in (0, 1).
    g : float
        Customers per server at the start, ``g > 0``.

    Returns
    -------
    float
        ``g n / (1 − λ)`` (constant taken as 1).

    Examples
    --------
    >>> round(mixing_lower_customers(100, 0.9, 3))
    3000
    """
    n = check_positive_int("n", n, maximum=MAX_THEORY_N)
    lam = check_load(lam)
    g = check_positive_float("g", g)
    return g * n / (1.0 - lam)


def mixing_lower_long(n, ell) -> float:
    """From one long queue ``‖x‖∞ = ℓ ≫ k``: ``Ω(ℓ n)`` steps (docs/model.md §6).

    Parameters
    ----------
    n : int
        Number of servers.
    ell : int
        Length of the long queue, ``ℓ >= 1``.

    Returns
    -------
    float
        ``ℓ n`` (constant taken as 1).

    Examples
    --------
    >>> mixing_lower_long(100, 50)
    5000.0
    """
    return float(check_positive_int("n", n, maximum=MAX_THEORY_N)) * check_positive_int("ell", ell)


def slow_mode_matrix(d, lam, k=None) -> np.ndarray:
    """``A_k`` [derived] (docs/model.md §6): ``k×k`` tridiagonal, sub-diagonal ``λd``,
    super-diagonal 1, diagonal ``−(1+λd)`` except ``−1`` in the last row.

    Parameters
    ----------
    d : int
        Number of choices, ``d >= 1``.
    lam : float or str
        Load λ in (0, 1).
    k : int, optional
        Size; defaults to ``k_{λ,d}``.

    Returns
    -------
    numpy.ndarray
        The ``k×k`` matrix of the linearised profile dynamics ``dq/dt = A_k q + (1−λ)e_k``.

    Examples
    --------
    >>> slow_mode_matrix(10, 0.9, k=3).tolist()
    [[-10.0, 1.0, 0.0], [9.0, -10.0, 1.0], [0.0, 9.0, -1.0]]
    """
    d = check_positive_int("d", d)
    lam = check_load(lam)
    k = k_lambda_d(d, lam) if k is None else check_positive_int("k", k, maximum=MAX_K)
    a = lam * d
    A = np.diag(np.full(k, -(1.0 + a)))
    A[-1, -1] = -1.0
    idx = np.arange(k - 1)
    A[idx + 1, idx] = a
    A[idx, idx + 1] = 1.0
    return A


@dataclass(frozen=True)
class SlowMode(_Result):
    """The slow mode of the linearised profile [derived] (docs/model.md §6).

    Examples
    --------
    >>> s = slow_mode(20, 0.99)
    >>> bool(abs(s.relaxation_time * s.mu - 1) < 1e-12)
    True
    """

    k: int
    mu: float  # −(eigenvalue of A_k with largest real part), per unit time
    mu_approx: float  # (λd−1)/((λd)^k − 1)
    relaxation_time: float  # 1/μ
    relaxation_steps_per_server: float  # (1+λ)/μ: steps are n(1+λ) per unit time

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        return (f"slow mode (derived): μ_k = {self.mu:.6g} per unit time (approx. {self.mu_approx:.6g}), "
                f"relaxation time {self.relaxation_time:.6g}")


def _slow_mu(a: float, k: int) -> float:
    """Smallest ``μ > 0`` with ``A_k q = −μ q``.

    Writing the eigenvector as ``q_1 = 1``, ``D_i = q_{i+1} − q_i`` with ``D_0 = 1`` and
    ``D_i = a D_{i−1} − μ q_i``, the rows of ``A_k`` reduce to the scalar equation
    ``μ Σ_{i=1}^k q_i(μ) = 1`` (no cancellation for small ``μ``, unlike a dense
    eigen-solver whose absolute error ``~1e-16·λd`` swamps ``μ ≈ d^{−(k−1)}``).
    Below the smallest eigenvalue all ``q_i > 0`` (Sturm), so the first root is bracketed
    by increasing ``μ`` from 0.
    """
    def g(mu):
        q, D, s = 1.0, 1.0, 0.0
        for i in range(k):
            s += q
            if q <= 0:
                return math.inf  # passed an eigenvalue: treat as beyond the root
            D = a * D - mu * q
            q = q + D
        return mu * s - 1.0

    if k == 1:
        return 1.0
    if a == 1:
        hi = 1.0 / k
    else:
        # 1/Σ_{j<k} a^j, in logs: a^j overflows a double for large k or a
        log_sum = (k * math.log(a) + math.log1p(-a ** -k) - math.log(a - 1.0)) if a > 1 else \
            (math.log1p(-a ** k) - math.log1p(-a))
        hi = math.exp(-log_sum) if -log_sum > -745 else 5e-324
    while g(hi) < 0:
        hi *= 2.0
    lo = 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if g(mid) < 0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return 0.5 * (lo + hi)


def slow_mode(d, lam, k=None) -> SlowMode:
    """Slowest relaxation rate ``μ_k`` of the linearised profile [derived] (docs/model.md §6).

    ``dq/dt = A_k q + (1−λ)e_k``; its eigenvalue of largest real part is ``−μ_k`` with
    ``μ_k ≈ (λd−1)/((λd)^k − 1) ≈ d^{−(k−1)}``.  Found from the scalar equation
    ``μ Σ_i q_i(μ) = 1`` of docs/model.md §6 by bisection, not by a dense eigen-solver.

    Parameters
    ----------
    d : int
        Number of choices, ``d >= 1``.
    lam : float or str
        Load λ in (0, 1).
    k : int, optional
        Defaults to ``k_{λ,d}``.

    Returns
    -------
    SlowMode
        ``mu``, its approximation ``mu_approx``, the relaxation time ``1/μ`` and
        ``(1+λ)/μ`` steps per server.

    Examples
    --------
    >>> import numpy as np
    >>> sm = slow_mode(20, 0.99)
    >>> round(sm.mu, 6), round(sm.mu_approx, 6)
    (0.045968, 0.048077)
    >>> bool(np.isclose(-sm.mu, np.linalg.eigvals(slow_mode_matrix(20, 0.99)).real.max()))
    True
    """
    d = check_positive_int("d", d)
    lam = check_load(lam)
    k = k_lambda_d(d, lam) if k is None else check_positive_int("k", k, maximum=MAX_K)
    a = lam * d
    mu = _slow_mu(a, k)
    if a == 1.0:
        approx = 1.0 / k
    elif a > 1.0 and k * math.log(a) > 700:  # a^k overflows: (a−1)/(a^k−1) ≈ (a−1) a^{−k}
        approx = math.exp(math.log(a - 1.0) - k * math.log(a)) if a > 1.0 else 0.0
    else:
        approx = (a - 1.0) / (a ** k - 1.0)
    # μ below the smallest double (an explicit large k) is 0: the relaxation time is infinite
    return SlowMode(k=k, mu=mu, mu_approx=approx, relaxation_time=1.0 / mu if mu > 0 else math.inf,
                    relaxation_steps_per_server=(1.0 + lam) / mu if mu > 0 else math.inf)


# =========================================================================== §8
@dataclass(frozen=True)
class Regime002(_Result):
    """Where ``(n, d, λ)`` sits among the three limits of paper 002 (docs/model.md §8, derived).

    Examples
    --------
    >>> regime_002(10_000, 20, 0.99).regime
    'b'
    """

    d_over_sqrt_n: float
    kappa: float  # κ_n = d λ^d
    c_n: float  # n^{−1/(2d)}
    zeta: float  # √n (c_n − λ)
    d_one_minus_lambda: float  # d(1−λ): must be large for a single Brownian motion
    regime: str  # "a", "b" or "c"
    note: str

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        return (f"paper 002 (derived limits): d/√n = {self.d_over_sqrt_n:.4g}, κ = dλ^d = {self.kappa:.4g}, "
                f"c_n = {self.c_n:.6g}, ζ_n = {self.zeta:.4g}, d(1−λ) = {self.d_one_minus_lambda:.4g} "
                f"→ resembles regime ({self.regime}): {self.note}")


REGIME_A_BELOW = 0.2  # d/√n below this resembles (a)
REGIME_C_ABOVE = 5.0  # d/√n above this resembles (c)


def regime_002(n, d, lam) -> Regime002:
    """The paper-002 quantities of ``(n, d, λ)`` and the regime it resembles (docs/model.md §8).

    The regimes are limits (``d/√n → 0, c, ∞``); for one finite ``n`` we say (a) when
    ``d/√n < 0.2``, (c) when ``d/√n > 5``, (b) in between (a convention of this tool).

    Parameters
    ----------
    n : int
        Number of servers, ``n >= 1``.
    d : int
        Number of choices, ``d >= 1``.
    lam : float or str
        Load λ in (0, 1).

    Returns
    -------
    Regime002
        ``d/√n``, ``κ = dλ^d``, ``c_n = n^{−1/(2d)}``, ``ζ = √n(c_n − λ)``, ``d(1−λ)``, the
        regime letter and a note (with a warning when ``d(1−λ)`` is not large).

    Examples
    --------
    >>> regime_002(10_000, 10, 0.99).regime
    'a'
    """
    n = check_positive_int("n", n, maximum=MAX_THEORY_N)
    d = check_positive_int("d", d)
    lam = check_load(lam)
    b = d / math.sqrt(n)
    kappa = d * math.exp(d * _log_lambda(lam))
    c_n = math.exp(-math.log(n) / (2.0 * d))
    zeta = math.sqrt(n) * (c_n - lam)
    d1 = d * (1.0 - lam)
    regime = "a" if b < REGIME_A_BELOW else ("c" if b > REGIME_C_ABOVE else "b")
    notes = {"a": "d/√n → 0: linear two-dimensional diffusion (derived)",
             "b": "d/√n → c: diffusion with exponential drift e^{cQ} (derived)",
             "c": "d/√n → ∞: reflected diffusion, Q <= 0 (derived)"}
    note = notes[regime]
    if d1 < 10:
        note += f"; warning: d(1−λ) = {d1:.3g} is not large, paper 002 needs d_n(1−λ_n) → ∞"
    return Regime002(d_over_sqrt_n=b, kappa=kappa, c_n=c_n, zeta=zeta, d_one_minus_lambda=d1,
                     regime=regime, note=note)


# =========================================================================== design
@dataclass(frozen=True)
class DesignReport(_Result):
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
    n: int | None = field(default=None, compare=False)  # servers, for predicted counts (not in to_dict)
    k_one_less: int | None = field(default=None, compare=False)  # k_{λ,d−1} (None for d = 2)

    def to_dict(self) -> dict:
        """JSON-safe: a share outside the linearisation's regime (NaN) is ``None``."""
        from .jsonable import to_jsonable

        out = asdict(self)
        del out["n"], out["k_one_less"]
        return to_jsonable(out)

    def to_frame(self):
        """One row per queue length: ``length``, ``share`` (NaN outside the linearisation's regime),
        and ``queues`` (``n × share``) when ``n`` was given."""
        return _frame([{"length": j, "share": s, **({"queues": self.n * s} if self.n is not None else {})}
                       for j, s in enumerate(self.share_by_length)])

    def summary(self) -> str:
        """The answer and the predicted shares by length, as ``supermarket design`` prints them."""
        from ._results import text_table

        other = "—" if self.k_one_less is None else str(self.k_one_less)
        head = (f"At load λ = {self.load}, d = {self.d} choices give k_(λ,d) = {self.k} ≤ {self.max_queue} "
                f"(d = {self.d - 1} would give {other}).")
        rows = []
        for j, s in enumerate(self.share_by_length):
            ok = s == s  # NaN: outside the linearisation's regime
            rows.append([str(j), f"{s:.6g}" if ok else "—"]
                        + ([f"{self.n * s:.6g}" if ok else "—"] if self.n is not None else []))
        t = text_table(["length", "share"] + (["queues (of n)"] if self.n is not None else []), rows,
                       title="Predicted share of queues by length (linearised profile, derived)")
        out = head + "\n" + t
        if not self.linearisation_valid:
            out += f"\nnote: {self.note} (—)."
        return out


def design(lam, max_queue, n=None) -> DesignReport:
    """The least ``d >= 2`` with ``k_{λ,d} <= K``, i.e. ``d^K >= 1/(1−λ)`` (docs/model.md §4),
    and the predicted share of queues at each length for that ``d``.

    Parameters
    ----------
    lam : float or str
        Load λ in (0, 1).
    max_queue : int
        ``K >= 1``, the longest queue length to allow.
    n : int, optional
        Number of servers (validated only; the answer does not depend on it).

    Returns
    -------
    DesignReport
        ``d``, ``k = k_{λ,d}``, the linearised share of queues at each length ``0..k``
        [derived] and ``π(1..k+1)``.

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
    # k_{λ,d} does not increase with d: bisect for the least d with k <= K.  (A walk of one
    # d at a time from an estimate never ended where the two readings of a float load,
    # 1/(1−λ) = 10^16 or 2^53, lie 10^15 apart.)
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
    return DesignReport(d=d, k=k, max_queue=K, load=lam_f, share_by_length=share,
                        fixed_point=tuple(float(v) for v in fixed_point(d, lam_f, k + 1)),
                        linearisation_valid=valid, note="" if valid else LINEARISATION_NOTE.format(qk=q[-1]),
                        n=None if n is None else check_positive_int("n", n, maximum=MAX_THEORY_N),
                        k_one_less=k_lambda_d(d - 1, lam) if d > 2 else None)


# =========================================================================== summary
def summary(n, d, lam, eps=0.1) -> dict:
    """Everything the papers let us say about ``(n, d, λ)`` without simulating: the report
    behind ``supermarket theory`` (docs/model.md §3–6, §8).  ``d = 1`` has no finite ``k``:
    the k-dependent entries are then ``None``.

    Parameters
    ----------
    n : int
        Number of servers, ``n >= 1``.
    d : int
        Number of choices, ``d >= 1``.
    lam : float or str
        Load λ in (0, 1).
    eps : float, optional
        ε of the good set, in (0, 1/10] (default 0.1).

    Returns
    -------
    dict
        Keys ``params``, ``fixed_point``, ``mean_queue_length``, ``mean_sojourn_time``,
        ``k_hypothesis``, ``regime_002``, ``k``, ``k_report``, ``linearised_q``,
        ``predicted_counts``, ``theorem_1_2``, ``mixing_steps``, ``mixing_time``,
        ``slow_rate``, ``slow_mode``.

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
        out.update(k=None, k_report=None, linearised_q=None, predicted_counts=None,
                   theorem_1_2=None, mixing_steps=None, mixing_time=None, slow_rate=None,
                   slow_mode=None)
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
        linearisation={"valid": valid, "q_k": float(q[-1]),
                       "note": "" if valid else LINEARISATION_NOTE.format(qk=q[-1])},
        theorem_1_2=theorem_1_2(n, d, lam_f, eps).to_dict(),
        mixing_steps={"upper": mb.upper_steps, "lower": mb.lower_steps},
        mixing_time={"upper": mb.upper_time, "lower": mb.lower_time},
        slow_rate=sm.mu,
        slow_mode=sm.to_dict(),
    )
    return out


@dataclass(frozen=True)
class TheoryReport(_Result):
    """The report behind ``supermarket theory``: the dict of :func:`summary` as a result.

    ``data`` has the keys listed in :func:`summary`.  ``to_dict()`` returns it (JSON-safe),
    ``to_frame()`` the fixed point with the linearised profile by level, ``summary()`` the
    text the command line prints, ``plot(path)`` π(i) against the linearised profile.

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
        from .jsonable import to_jsonable

        return to_jsonable(self.data)

    def _rows(self):
        r = self.data
        lin = r["linearised_q"] or []
        cnt = r["predicted_counts"] or []
        shown = min(len(r["fixed_point"]), max(len(lin) + 2, 6))
        for i in range(1, shown + 1):
            pi = r["fixed_point"][i - 1]
            yield (i, pi, 1 - pi, lin[i - 1] if i - 1 < len(lin) else None,
                   cnt[i - 1] if i - 1 < len(cnt) else None, i - 1 < len(lin))

    def to_frame(self):
        """One row per level ``i`` (the levels the text shows): ``pi``, ``one_minus_pi``,
        ``q_tilde`` and the predicted number of queues of length ``i − 1`` (derived; None
        past ``k`` or outside the linearisation's regime)."""
        return _frame([{"level": i, "pi": pi, "one_minus_pi": om, "q_tilde": q,
                        "predicted_queues_of_length_i_minus_1": c} for i, pi, om, q, c, _ in self._rows()])

    def summary(self) -> str:
        """The text ``supermarket theory`` prints."""
        from ._results import text_table

        r, p = self.data, self.data["params"]
        lines = [f"supermarket theory  n={p['n']}  d={p['d']}  λ={p['load']!r}  ε={p['eps']}"]
        if r["k"] is not None:
            kr = r["k_report"]
            lines.append(f"k_(λ,d) = ⌈log(1/(1−λ))/log d⌉ = {r['k']}   (log_d(1/(1−λ)) = {kr['log_ratio']:.6g})  "
                         "(paper 000, docs/model.md §4)")
            lines.append(f"  {kr['note']}")
        else:
            lines.append("k_(λ,d): none for d = 1 (independent M/M/1 queues, no bounded maximum)")
        lines.append(f"hypothesis maximum (largest k with n·π(k) ≥ 1) = {r['k_hypothesis']}   "
                     "(docs/model.md §4, reconstructed)")
        lines.append(f"mean-field mean queue length Σπ(i) = {r['mean_queue_length']:.10g}, "
                     f"sojourn time = {r['mean_sojourn_time']:.10g}   (docs/model.md §3)")

        def pred(v, inside):
            return "" if not inside else ("—" if v is None else f"{v:.6g}")

        rows = [[str(i), f"{pi:.6g}", f"{om:.6g}", pred(q, ins), pred(c, ins)]
                for i, pi, om, q, c, ins in self._rows()]
        lines.append(text_table(["i", "π(i)", "1−π(i)", "q̃_i (derived)", "predicted queues of length i−1"],
                                rows, title="Fixed point π(i) and linearised profile (derived)"))
        lz = r.get("linearisation")
        if lz and not lz["valid"]:
            lines.append(f"note: {lz['note']} (—).")
        if r["theorem_1_2"] is not None:
            th12 = r["theorem_1_2"]
            conds = tuple(Condition(**c) for c in th12["conditions"])
            lines.append(TheoremReport(conds, th12["applies"], th12["k"]).summary())
            lines.append(MixingBounds(r["k"], r["mixing_steps"]["upper"], r["mixing_steps"]["lower"],
                                      r["mixing_time"]["upper"], r["mixing_time"]["lower"]).summary())
            lines.append(SlowMode(**r["slow_mode"]).summary())
        lines.append(Regime002(**r["regime_002"]).summary())
        return "\n".join(lines)

    def plot(self, path=None):
        """π(i) (mean field) and ``1 − q̃_i`` (the linearised profile, derived) against the level,
        on a log scale.  Returns the figure; saves it when ``path`` is given."""
        import matplotlib

        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        from ._results import save_figure

        pi = np.asarray(self.data["fixed_point"], dtype=float)
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        lv = np.arange(1, pi.size + 1)
        ax.semilogy(lv, np.where(pi > 0, pi, np.nan), "o-", label="π(i) (mean field)")
        lin = self.data["linearised_q"]
        if lin:
            q = np.array([np.nan if v is None else 1.0 - v for v in lin])
            ax.semilogy(np.arange(1, q.size + 1), np.where(q > 0, q, np.nan), "s--",
                        label="1 − q̃_i (linearised, derived)")
        ax.set_xlabel("level i")
        ax.set_ylabel("fraction of queues with ≥ i customers")
        p = self.data["params"]
        ax.set_title(f"n={p['n']}, d={p['d']}, λ={p['load']}", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        return save_figure(fig, path)


def theory_report(n, d, lam, eps=0.1) -> TheoryReport:
    """:func:`summary` as a :class:`TheoryReport` (``to_dict``, ``to_frame``, ``summary``, ``plot``).

    Parameters
    ----------
    n, d, lam, eps
        As in :func:`summary`.

    Returns
    -------
    TheoryReport

    Raises
    ------
    ValueError
        As :func:`summary`.

    Examples
    --------
    >>> theory_report(100, 1, 0.5).to_dict()["k"] is None
    True
    """
    return TheoryReport(summary(n, d, lam, eps))
