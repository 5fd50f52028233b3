"""The size and cost of an exact solve before it runs (docs/model.md §11): state and non-zero
counts of the truncated profile chain, the predicted seconds and bytes, the least cap the cap
search can end at, and the refusals that say what fits."""

from __future__ import annotations

import math

import numpy as np

from ..model import Params, check_positive_float, check_positive_int
from ..theory import log_fixed_point
from .solver import memory_limit

__all__ = [
    "count_states",
    "count_nonzeros",
    "estimate_bytes",
    "estimate_seconds",
    "least_states",
    "DEFAULT_TOL",
    "MAX_STATES",
    "MAX_SECONDS",
    "SLOW_STATES",
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
    lim = memory_limit()
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
    return S <= max_states and need <= memory_limit() and estimate_seconds(n, cap) <= max_seconds


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
