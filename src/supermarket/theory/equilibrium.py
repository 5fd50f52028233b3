"""The mean-field fixed point ``π``, ``k_{λ,d}`` and the linearised profile [derived] (docs/model.md §3–§4)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..model import MAX_THEORY_N, check_int, check_load, check_positive_int, load_candidates
from ..result import Result

#: The most levels :func:`log_fixed_point` tabulates (an array of floats; 10^7 is 80 MB).
MAX_LEVELS = 10**7

MAX_FIXED_POINT_LEVELS = 64
MAX_K = 1000  # an explicit k (a level): k_{λ,d} <= 53·log2... is far below; A_k is k×k dense
TINY = 1e-300


# =========================================================================== §3
def _log_lambda(lam: float) -> float:
    """log λ accurate for λ near 1 (λ − 1 is exact in floating point for λ ∈ [1/2, 2])."""
    return math.log1p(lam - 1.0) if lam >= 0.5 else math.log(lam)


def log_fixed_point(d: int, lam: float | str, levels: int) -> np.ndarray:
    """``log π(i) = log(λ)·(d^i − 1)/(d − 1)`` for ``i = 1..levels`` (docs/model.md §3); ``-inf`` past overflow.

    Parameters
    ----------
    d, lam
        Choices ``d >= 1`` and load λ in (0, 1) (float or str).
    levels : int

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> log_fixed_point(2, 0.9, 3).round(6).tolist()
    [-0.105361, -0.316082, -0.737524]
    >>> log_fixed_point(10**18, 0.5, 19)[[1, -1]].tolist()  # S_19 ≈ d^18 overflows: π(19) = 0 exactly
    [-6.931471805599453e+17, -inf]
    """
    d = check_positive_int("d", d)
    lam = check_load(lam)
    levels = check_int("levels", levels, minimum=0, maximum=MAX_LEVELS)
    out, loglam, s, fd = np.empty(levels), _log_lambda(lam), 1.0, float(d)
    for i in range(levels):
        out[i] = loglam * s if math.isfinite(s) else -math.inf
        if math.isfinite(s):
            s = fd * s + 1.0 if d > 1 else s + 1.0
    return out


def fixed_point(
    d: int, lam: float | str, levels: int | None = None, *, tol: float = TINY, max_levels: int = MAX_FIXED_POINT_LEVELS
) -> np.ndarray:
    """Mean-field fixed point ``π(i) = λ^{(d^i−1)/(d−1)}``, ``i = 1, 2, …`` (docs/model.md §3).

    Parameters
    ----------
    d, lam
        Choices ``d >= 1`` and load λ in (0, 1) (float or str).
    levels : int, optional
        Exact number of levels; without it, up to the first value below ``tol``, at most
        ``max_levels`` values.
    tol, max_levels

    Returns
    -------
    numpy.ndarray
        ``π(1), π(2), …`` (underflow gives exact zeros).

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


def mean_queue_length(d: int, lam: float | str) -> float:
    """Mean-field mean queue length ``Σ_{i≥1} π(i)`` (docs/model.md §3; ``λ/(1−λ)`` for ``d = 1``).

    Parameters
    ----------
    d, lam
        As in :func:`fixed_point`.

    Returns
    -------
    float

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
    total, loglam, s = 0.0, _log_lambda(lam), 1.0
    while True:
        term = math.exp(loglam * s) if math.isfinite(s) else 0.0
        total += term
        if term <= 1e-18 * total or term == 0.0:
            return total
        s = d * s + 1.0


def mean_sojourn_time(d: int, lam: float | str) -> float:
    """Mean-field mean sojourn time ``Σ π(i)/λ`` (Little's law, docs/model.md §3).

    Parameters
    ----------
    d, lam
        As in :func:`fixed_point`.

    Returns
    -------
    float

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
    # d^k num >= den <=> 1/(1-x) <= d^k; log(den/num) from logs of integers (den/num may overflow: 1 − 10^-400)
    est = max(1, int(math.ceil((math.log(den) - math.log(num)) / math.log(d)))) if num else 1
    k = max(1, est - 1)
    while d**k * num < den:
        k += 1
    while k > 1 and d ** (k - 1) * num >= den:
        k -= 1
    return k


def _log_inv_one_minus(lam) -> float:
    """``log(1/(1−λ))`` from the exact value of λ (finite even where float(λ) rounds to 1)."""
    one_minus = 1 - load_candidates(lam)[0]
    return math.log(one_minus.denominator) - math.log(one_minus.numerator)


def k_lambda_d(d: int, lam: float | str | Fraction) -> int:
    """``k_{λ,d} = ⌈log(1/(1−λ))/log d⌉``, decided exactly on the number written (docs/model.md §4).

    Parameters
    ----------
    d, lam
        Choices ``d >= 2`` and load λ in (0, 1) (float or str).

    Returns
    -------
    int

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
class KReport(Result):
    """``k_{λ,d}`` with its position between the boundaries ``d^{k−1} < 1/(1−λ) <= d^k``.

    Examples
    --------
    >>> k_report(10, 0.9).on_boundary
    True
    """

    _plain = True  # to_dict() is the fields as they are: Cls(**r.to_dict()) rebuilds it

    k: int
    log_ratio: float  # log(1/(1−λ)) / log d, in (k−1, k]
    on_boundary: bool  # 1/(1−λ) = d^k exactly
    near_boundary: bool  # within 0.05 of an integer on the log_d scale
    possible_max: tuple[int, ...]  # maximum queue lengths the paper allows in equilibrium
    note: str

    def summary(self) -> str:
        """``k_{λ,d}`` and the note on its boundaries, as ``supermarket theory`` prints them."""
        return (
            f"k_(λ,d) = ⌈log(1/(1−λ))/log d⌉ = {self.k}   (log_d(1/(1−λ)) = {self.log_ratio:.6g})  "
            f"(paper 000, docs/model.md §4)\n  {self.note}"
        )


def k_report(d: int, lam: float | str | Fraction, *, margin: float = 0.05) -> KReport:
    """``k_{λ,d}`` and what paper 000 says of the maximum near a boundary (docs/model.md §4).

    Parameters
    ----------
    d, lam
        As in :func:`k_lambda_d`.
    margin : float
        "Near a boundary": ``log(1/(1−λ))/log d`` within ``margin`` of an integer (a convention).

    Returns
    -------
    KReport

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
    on_boundary = any(d**k * (1 - c) == 1 for c in load_candidates(lam))
    frac = ratio - math.floor(ratio)
    near = on_boundary or min(frac, 1 - frac) < margin
    if on_boundary or (near and abs(ratio - k) < margin):
        possible: tuple[int, ...] = (k, k + 1)
        note = (
            f"1/(1-λ) is {'exactly' if on_boundary else 'close to'} d^{k}: paper 000 says the "
            f"equilibrium maximum is {k} or {k + 1}"
        )
    elif near:
        possible = (k - 1, k) if k > 1 else (k,)
        note = f"1/(1-λ) is just above d^{k - 1}" if k > 1 else "1/(1-λ) is just above 1 (a light load)"
        note += f": the maximum is {k}, with few queues at length {k}"
    else:
        possible = (k,)
        note = f"away from a boundary: the equilibrium maximum is {k}"
    return KReport(k=k, log_ratio=ratio, on_boundary=on_boundary, near_boundary=near, possible_max=possible, note=note)


def k_hypothesis(n: int, d: int, lam: float | str) -> int:
    """The largest ``k`` with ``n·π(k) >= 1`` (0 if none): paper 000's hypothesis (docs/model.md §4, reconstructed).

    Parameters
    ----------
    n, d, lam
        Servers, choices ``d >= 1`` and load λ in (0, 1).

    Returns
    -------
    int

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


def linearised_q(d: int, lam: float | str | Fraction, k: int | None = None) -> np.ndarray:
    """Linearised profile [derived] ``q̃_i = (1−λ)((λd)^i − 1)/(λd − 1)``, ``i = 1..k`` (docs/model.md §4).

    Parameters
    ----------
    d, lam
        Choices ``d >= 1`` and load λ in (0, 1).
    k : int, optional
        Number of levels (``k_{λ,d}``).

    Returns
    -------
    numpy.ndarray

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


def predicted_counts(n: int, d: int, lam: float | str, k: int | None = None) -> np.ndarray:
    """Queues of each length ``0..k`` by the linearised profile [derived] (docs/model.md §4–5).

    Parameters
    ----------
    n, d, lam, k
        Servers (the counts sum to ``n``), then as in :func:`linearised_q`.

    Returns
    -------
    numpy.ndarray
        ``k + 1`` counts; the last is negative when ``q̃_k > 1`` (:func:`linearisation_valid`).

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


LINEARISATION_NOTE = (
    "the linearised profile (derived) is a first-order expansion valid only in its regime, "
    "where every predicted fraction q̃_i lies in [0, 1] (heavy traffic with λd large); "
    "here q̃_k = {qk:.6g} > 1, so it would predict a negative number of queues of length k; "
    "predictions outside their range are not shown"
)


def linearisation_valid(d: int, lam: float | str | Fraction, k: int | None = None) -> bool:
    """Whether ``q̃_k <= 1``, so that every linearised prediction is in range (docs/model.md §4).

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
