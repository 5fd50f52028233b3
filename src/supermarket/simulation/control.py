"""Control variates from the model's own identities (docs/model.md §9.1, "The identities as
control variates"): pure NumPy regression on batch means, with split-sample cross-fitting.

In equilibrium every ``Z_i = u_i − λ P_{i−1}`` (``P_0 = 1``) has mean exactly zero, in both
time modes and with or without replacement.  A time average ``ȳ`` of any quantity can
therefore be replaced by ``ȳ − β·Z̄`` for any fixed ``β`` without changing its mean, and the
``β`` that best predicts the batch means of ``y`` from those of the ``Z_i`` removes most of its
variance.  This module does the regression only:

- :func:`ratio_series`: batch values of a time average as equally weighted terms;
- :func:`select_controls`: which candidate controls to use (in priority order, dropping
  those with no variation or nearly explained by the ones already kept);
- :func:`crossfit`: ``β`` fitted on one half of the batches and applied to the other half,
  and vice versa, so that the fit never sees the batches it adjusts.

The error analysis of the adjusted series (blocking, pooling, the "too short" rule) and
the choice between the adjusted and the plain estimate are made by the caller
(:mod:`.estimate`).

References: S. S. Lavenberg and P. D. Welch, Management Science 27, 322 (1981); B. L.
Nelson, Operations Research 38, 974 (1990); S. G. Henderson and P. W. Glynn, Mathematics
of Operations Research 27, 253 (2002).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "CONDITION_TOL",
    "EXACT_R2",
    "DOF_RELAXATION_TIMES",
    "MAX_CONTROLS",
    "MIN_FIT_ROWS_PER_CONTROL",
    "MIN_GAIN",
    "RULE_RELAXATION_FACTOR",
    "SECOND_ORDER_EVERY",
    "SECOND_ORDER_LEVELS",
    "CrossFit",
    "crossfit",
    "BALANCING_RULES",
    "mean_skewness",
    "ratio_series",
    "jbt_fluid_relaxation_time",
    "jbt_relaxation_time",
    "rule_relaxation_time",
    "second_order_pairs",
    "second_order_terms",
    "select_controls",
]

MAX_CONTROLS = 8
"""At most this many controls (the lowest levels with mass carry nearly all the gain; each
control costs a degree of freedom)."""

CONDITION_TOL = 1e-4
"""A candidate control is dropped when the part of its standardized series not explained by
the controls already kept has a relative norm below this (the regression would be
ill-conditioned: condition number above about ``1/CONDITION_TOL``)."""

EXACT_R2 = 1e-12
"""When the residual variance of a fit is below this fraction of the variance of ``y``, the
controls determine ``y`` exactly (``u_1 = Z_1 + λ``; every level when d = 1): the
regression then only reproduces the identity and says nothing about the run."""

MIN_FIT_ROWS_PER_CONTROL = 16
"""Each half of the batches must hold at least this many rows per control."""

DOF_RELAXATION_TIMES = 10.0
"""The adjusted standard error has at most one degree of freedom per this many slow-mode
relaxation times of the run (docs/model.md §9.1, "How far the adjusted error bars hold" and
"The cap, revised"; derived, calibrated).  Once the linear part is removed, the residual is
a skewed remainder driven by the slow mode: a run that misses its rare excursions states a
small error *and* a small skewness, so the skew factor of its interval
(``stats.skew_quantile``) comes out small where it is needed, and it misses low.  With
blocking's degrees of freedom alone the heavy-traffic mean queue length covered 183 of 200
on one seed, all 17 misses low; with 25 (the value before the skew factor existed, together
with the ``m`` controls subtracted) most adjusted cases covered 198-199 of 200.  10 was
chosen on two seeds of the calibration's cases as the round value that keeps every case
inside 186-196 of 200, and checked on a third (``benchmarks/calibration/cv_dof_rules.py``)."""

MIN_GAIN = 2.0
"""The adjusted estimate replaces the plain one only when its estimated variance is at least
this many times smaller: the two errors are estimated on few degrees of freedom, and
choosing the smaller when they are close picks the one that came out low by chance, and
its few degrees of freedom (above) then make its interval needlessly wide (measured:
``E[u_1]`` in heavy traffic, gain 1, the adjusted intervals covered 99 of 100)."""


SECOND_ORDER_LEVELS = 3
"""The second-order controls ``A(u_i u_j)`` use the pairs ``1 <= i <= j <=`` this many levels
(six controls; docs/control-variates.md, "Second-order controls", measured with these)."""

SECOND_ORDER_EVERY = 0.1
"""The state is sampled for the second-order controls every this many time units (in the
discrete chain, every ``n(1+λ)/10`` steps, at least 1): a few percent of the run's cost."""


BALANCING_RULES = ("jsq", "jiq")
"""The dispatch rules that send an arrival to an idle server whenever there is one: their
relaxation time is :func:`rule_relaxation_time`, not the slow mode of JSQ(d)."""

RULE_RELAXATION_FACTOR = 2.0
""":func:`rule_relaxation_time` takes this many times the larger of the M/M/∞ and M/M/n times
(docs/model.md §9, "The slowest time scale"; derived, a heuristic checked against the exact
relaxation time of the tiny chains, which it exceeds by 1.5-2.9 times at n = 2..8)."""


def rule_relaxation_time(policy: str, lam: float, n: int) -> float:
    """A relaxation time (time units) for the rules of :data:`BALANCING_RULES` [derived, a
    heuristic]: ``RULE_RELAXATION_FACTOR·max(1, 1/(n(1 − √λ)²))``, at most the M/M/1 value
    ``1/(1 − √λ)²`` of random routing.

    While some server is idle every arrival goes to one, so the number of busy servers moves
    as an M/M/∞ queue (relaxation time 1, the mean service time) [classical]; with every server
    busy the number waiting moves as the M/M/n queue, heavy-traffic time ``1/(n(1 − √λ)²)``
    (docs/model.md §9); the exact relaxation times of the tiny chains (JIQ above the M/M/n value
    by up to a third at n = 4..6, λ = 0.5) are covered by the factor.  Random routing, which
    balances least, is the upper bound.

    Examples
    --------
    >>> rule_relaxation_time("jsq", 0.9, 1000)       # large n: twice the M/M/∞ time
    2.0
    >>> round(rule_relaxation_time("jiq", 0.9, 2), 1)  # tiny n: the M/M/1 bound, 1/(1 − √0.9)²
    379.7
    """
    if policy not in BALANCING_RULES:
        raise ValueError(f"rule_relaxation_time is for the rules {BALANCING_RULES}; got policy={policy!r}")
    gap = (1.0 - math.sqrt(lam)) ** 2
    return min(1.0 / gap, RULE_RELAXATION_FACTOR * max(1.0, 1.0 / (n * gap)))


def _jbt_fixed_point(lam: float, T: int) -> np.ndarray:
    """The fluid fixed point ``u_1..u_T`` of jbt (docs/model.md §2): ``u_ℓ = λ(u_{ℓ−1} − u_T)/(1 − u_T)``,
    ``u_0 = 1``, solved for ``u_T`` by bisection (``u_T(s) − s`` is positive at ``s = 0``, negative
    as ``s → λ``)."""

    def levels(s: float) -> list[float]:
        u = [1.0]
        for _ in range(T):
            u.append(lam * (u[-1] - s) / (1.0 - s))
        return u[1:]

    lo, hi = 0.0, lam
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if levels(mid)[-1] > mid else (lo, mid)
    return np.array(levels(0.5 * (lo + hi)))


def jbt_fluid_relaxation_time(lam: float, T: int) -> float:
    """One over the slowest decay rate of the fluid drift of jbt linearised at its fixed point
    (time units; docs/model.md §9, "The slowest time scale") [derived].

    Below ``u_T = 1`` the drift of ``u_1..u_T`` is ``λ(u_{ℓ−1} − u_ℓ)/(1 − u_T) − (u_ℓ − u_{ℓ+1})``
    (``u_0 = 1``, ``u_{T+1} = 0``; levels above ``T`` get no arrivals and decay at rate 1), so its
    Jacobian has ``∂/∂u_T`` the extra term ``λ(u_{ℓ−1} − u_ℓ)/(1 − u_T)²``.

    >>> round(jbt_fluid_relaxation_time(0.9, 1), 6)  # T = 1 is jiq: u_1 decays at rate 1
    1.0
    """
    u = _jbt_fixed_point(lam, T)
    x = np.concatenate([[1.0], u, [0.0]])
    a = lam / (1.0 - u[-1])
    J = np.zeros((T, T))
    for ell in range(1, T + 1):
        i = ell - 1
        J[i, i] -= a + 1.0
        if ell >= 2:
            J[i, i - 1] += a
        if ell < T:
            J[i, i + 1] += 1.0
        J[i, T - 1] += a * (x[ell - 1] - x[ell]) / (1.0 - u[-1])
    return float(1.0 / min(-np.linalg.eigvals(J).real))


def jbt_relaxation_time(lam: float, n: int, d: int) -> float:
    """A relaxation time (time units) for ``jbt`` (threshold ``T = d``) [derived, a heuristic]:
    ``RULE_RELAXATION_FACTOR·max(τ_T, 1/(n(1 − √λ)²))``, at most random routing's ``1/(1 − √λ)²``,
    where ``τ_T`` is :func:`jbt_fluid_relaxation_time`.

    Below the threshold every arrival joins one of the queues shorter than ``T``, so the levels
    ``u_1..u_T`` move by the fluid drift and relax at its slowest rate ``1/τ_T`` (about 3.6 time
    units at ``T = 2, λ = 0.95``; 6.3 at ``T = 3``); above it, only reached when every queue
    holds ``T`` or more, arrivals are routed at random but every server is busy, so the number
    waiting moves as the M/M/n queue, heavy-traffic time ``1/(n(1 − √λ)²)`` (docs/model.md §9).
    The factor is that of :func:`rule_relaxation_time`, checked against the exact relaxation
    times of the tiny chains (tests/simulation/test_jbt_relaxation.py).

    Examples
    --------
    >>> round(jbt_relaxation_time(0.95, 1000, 3), 2)  # large n: twice the fluid time
    12.61
    >>> round(jbt_relaxation_time(0.9, 2, 2), 1)  # tiny n: the M/M/1 bound, 1/(1 − √0.9)²
    379.7
    """
    if not 0.0 < lam < 1.0:
        raise ValueError(f"jbt_relaxation_time needs 0 < lam < 1; got lam={lam!r}")
    if n < 1 or d < 1:
        raise ValueError(f"jbt_relaxation_time needs n >= 1 and d >= 1; got n={n!r}, d={d!r}")
    gap = (1.0 - math.sqrt(lam)) ** 2
    return min(1.0 / gap, RULE_RELAXATION_FACTOR * max(jbt_fluid_relaxation_time(lam, d), 1.0 / (n * gap)))


def second_order_pairs(q: int) -> list[tuple[int, int]]:
    """The pairs ``(i, j)``, ``1 <= i <= j <= q``, in the order of the controls.

    >>> second_order_pairs(2)
    [(1, 1), (1, 2), (2, 2)]
    """
    return [(i, j) for i in range(1, q + 1) for j in range(i, q + 1)]


def second_order_terms(
    u: ArrayLike, P: ArrayLike, lam: float, n: float, pairs: Sequence[tuple[int, int]]
) -> np.ndarray:
    """The generator of the profile chain applied to ``h(u) = u_i u_j``, per sampled state
    (docs/model.md §9.1, "Second-order controls" [derived]):

        A(u_i u_j) = u_j b_i + u_i b_j + δ_ij (λ(P_{i−1} − P_i) + u_i − u_{i+1}) / n,
        b_i = λ(P_{i−1} − P_i) − (u_i − u_{i+1}),   P_0 = 1,

    per unit time and divided by ``n`` like the drift ``b``.  Its mean is exactly 0 in
    equilibrium, for every ``n``, rule, sampling and time mode.

    Parameters
    ----------
    u, P : array_like, shape (samples, L)
        ``u_1..u_L`` and ``P_1..P_L`` of each state; ``L`` must exceed the largest ``j``
        (``b_j`` needs ``u_{j+1}``).
    lam, n : float
    pairs : sequence of (int, int)

    Examples
    --------
    A state with every queue of length 1 at n = 2, d = 2 (``P_1 = 1``, ``P_2 = 0``), λ = 1/2:
    ``b_1 = ½(1 − 1) − (1 − 0) = −1`` and ``A(u_1²) = 2·u_1·b_1 + (0 + 1)/2 = −1.5``.

    >>> second_order_terms([[1.0, 0.0]], [[1.0, 0.0]], 0.5, 2, [(1, 1)]).tolist()
    [[-1.5]]
    """
    u = np.atleast_2d(np.asarray(u, dtype=float))
    P = np.atleast_2d(np.asarray(P, dtype=float))
    N, L = u.shape
    if pairs and max(j for _, j in pairs) >= L:
        raise ValueError(f"second_order_terms needs more than {max(j for _, j in pairs)} levels; got {L}")
    P0 = np.column_stack([np.ones(N), P])  # P_0 .. P_L
    ue = np.column_stack([u, np.zeros(N)])  # u_1 .. u_{L+1}
    arr = lam * (P0[:, :L] - P0[:, 1 : L + 1])  # λ(P_{i−1} − P_i): arrivals to level i, over n
    dep = ue[:, :L] - ue[:, 1 : L + 1]  # u_i − u_{i+1}: departures from level i, over n
    b = arr - dep
    out = np.empty((N, len(pairs)))
    for k, (i, j) in enumerate(pairs):
        y = u[:, j - 1] * b[:, i - 1] + u[:, i - 1] * b[:, j - 1]
        if i == j:
            y = y + (arr[:, i - 1] + dep[:, i - 1]) / n
        out[:, k] = y
    return out


def mean_skewness(
    parts: Sequence[tuple[ArrayLike, ArrayLike]], stderr: float, min_block_size: Sequence[int] | None = None
) -> float:
    """Estimated skewness of the sampling distribution of the time average ``Σa/ΣT`` of
    several parts (replications), each a ``(a, T)`` of batch integrals and lengths, given
    its standard error ``stderr``.

    Per part, the ratio series (:func:`ratio_series`) is blocked at the plateau of
    :func:`supermarket.stats.blocking` (blocks long enough to be nearly independent), and the
    third cumulant of its mean is ``k_3/N_B²`` (``k_3``, the unbiased third cumulant of the
    ``N_B`` block means).  Parts combine as independent terms weighted by their lengths,
    ``κ_3 = Σ w_r³ κ_{3,r}``, and the result is ``κ_3/stderr³``.  NaN when it cannot be
    estimated (a part with fewer than 3 blocks, or ``stderr`` not positive).

    Parameters
    ----------
    parts : list of (numpy.ndarray, numpy.ndarray)
        Per part, batch integrals ``a`` and batch lengths ``T``.
    stderr : float
        The standard error of the combined mean.
    min_block_size : list of int, optional
        Per part, the shortest block (in batches) blocking may use (the known correlation
        time; see :func:`supermarket.stats.blocking`).

    Examples
    --------
    Independent exponential batches (skewness 2): the mean of ``N`` has skewness ``2/√N``.

    >>> rng = np.random.default_rng(3)
    >>> x = rng.exponential(size=4096)
    >>> round(mean_skewness([(x, np.ones(x.size))], float(x.std(ddof=1)) / 64), 2)   # 2/64 = 0.031
    0.03
    >>> mean_skewness([(-x, np.ones(x.size))], float(x.std(ddof=1)) / 64) < 0
    True
    """
    from .. import stats as _st

    if not stderr > 0 or not parts:
        return math.nan
    Ttot = float(sum(float(np.sum(T)) for _, T in parts))
    k3 = 0.0
    for j, (a, T) in enumerate(parts):
        T = np.asarray(T, dtype=float)
        if T.size < 3:
            return math.nan
        x = ratio_series(a, T)
        mb = 1 if min_block_size is None else max(1, min(int(min_block_size[j]), T.size))
        e = _st.blocking(x, min_block_size=mb)
        B = max(int(e.block_size), 1)
        nb = x.size // B
        if nb < 3:
            return math.nan
        xb = x[: nb * B].reshape(nb, B).mean(axis=1)
        c = xb - xb.mean()
        k3_blocks = nb * float(np.sum(c**3)) / ((nb - 1.0) * (nb - 2.0))
        w = float(T.sum()) / Ttot
        k3 += w**3 * k3_blocks / nb**2
    s3 = stderr**3
    if not s3 > 0:  # an error at rounding level (say 1e-110) whose cube underflows: no skewness to speak of
        return math.nan
    return k3 / s3


def ratio_series(a: ArrayLike, T: ArrayLike) -> np.ndarray:
    """Batch values of the time average ``Σa/ΣT`` as equally weighted terms (delta method):
    ``ā + (a_b − ā T_b)/T̄`` with ``ā = Σa/ΣT``; their mean is ``ā``, and for equal ``T_b``
    they are ``a_b/T_b``.  Columns of a 2-d ``a`` are treated one by one.

    Examples
    --------
    >>> ratio_series(np.array([1.0, 3.0]), np.array([1.0, 1.0])).tolist()
    [1.0, 3.0]
    >>> float(ratio_series(np.array([1.0, 3.0]), np.array([1.0, 3.0])).mean())  # Σa/ΣT
    1.0
    """
    a = np.asarray(a, dtype=float)
    T = np.asarray(T, dtype=float)
    abar = a.sum(axis=0) / T.sum()
    if a.ndim == 1:
        return abar + (a - abar * T) / T.mean()
    return abar + (a - abar * T[:, None]) / T.mean()


def select_controls(Z: ArrayLike, *, max_controls: int = MAX_CONTROLS, tol: float = CONDITION_TOL) -> list[int]:
    """Columns of ``Z`` to use as controls, taken in order (the caller's priority).

    A column is kept when it varies and the part of its centred, standardized series not
    explained by the columns already kept (Gram–Schmidt, a rank-revealing QR in the given
    order) has a relative norm above ``tol``; at most ``max_controls`` are kept.

    Parameters
    ----------
    Z : array_like
        ``N x K`` candidate control series (rows: batches).
    max_controls : int
        Cap on the number kept.
    tol : float
        Relative norm below which a column counts as explained by the others.

    Returns
    -------
    list of int
        Indices of the kept columns, increasing.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(100, 2))
    >>> Z = np.column_stack([x[:, 0], 2 * x[:, 0] + 1, np.zeros(100), x[:, 1]])
    >>> select_controls(Z)        # a copy of column 0 and a constant are dropped
    [0, 3]
    >>> select_controls(Z, max_controls=1)
    [0]
    """
    Z = np.asarray(Z, dtype=float)
    if Z.ndim != 2:
        raise ValueError(f"Z must be an N x K array; got shape {Z.shape}")
    kept: list[int] = []
    basis: list[np.ndarray] = []
    for j in range(Z.shape[1]):
        if len(kept) >= max_controls:
            break
        z = Z[:, j] - Z[:, j].mean()
        s = float(np.linalg.norm(z))
        if not s > 0 or not math.isfinite(s):
            continue
        r = z / s
        for q in basis:  # twice for numerical orthogonality
            r = r - q * float(q @ r)
        for q in basis:
            r = r - q * float(q @ r)
        rn = float(np.linalg.norm(r))
        if rn > tol:
            kept.append(j)
            basis.append(r / rn)
    return kept


@dataclass(frozen=True)
class CrossFit:
    """The result of :func:`crossfit`.

    Attributes
    ----------
    adjusted : list of numpy.ndarray
        Per part, the adjusted batch integrals ``a_b − β·Z_b`` (``β`` of the other half).
    beta : tuple of numpy.ndarray
        ``(β fitted on the first halves, β fitted on the second halves)``.
    residual_fraction : float
        The larger over the two halves of (residual variance)/(variance of ``y``) of the fit;
        below ``EXACT_R2`` the controls determine ``y`` exactly.
    controls : int
        Number of controls ``m``.
    """

    adjusted: list
    beta: tuple
    residual_fraction: float
    controls: int

    @property
    def exact(self) -> bool:
        """Whether the controls determine ``y`` exactly (nothing is learned from the run)."""
        return self.residual_fraction < EXACT_R2


def _split(N: int) -> int:
    return N // 2


def crossfit(parts: Sequence[tuple[np.ndarray, np.ndarray]], controls: Sequence[np.ndarray]) -> CrossFit | None:
    """Split-sample control-variate adjustment of batch integrals.

    Each part (one replication) is cut into its first and second half of batches.  On each
    half, the ratio series (:func:`ratio_series`) of ``y`` and of the controls, centred
    within every part's half, give ``β`` by least squares; the integrals of the *other*
    half are adjusted with it, ``a_b − β·Z_b``.  The fit of ``β`` never sees the batches it
    adjusts, so the ``O(m/B)`` bias of a regression fitted on its own data does not enter,
    and the adjusted series has the same mean as ``a`` whenever the controls have mean 0.

    Parameters
    ----------
    parts : list of (numpy.ndarray, numpy.ndarray)
        Per part, ``(a, T)``: batch integrals of ``y`` and batch lengths.
    controls : list of numpy.ndarray
        Per part, the ``N x m`` batch integrals of the controls (mean zero per unit time).

    Returns
    -------
    CrossFit or None
        None when there are no controls, or a half too small for the fit (fewer than
        ``MIN_FIT_ROWS_PER_CONTROL·m`` rows), or ``y`` does not vary (constant within each
        part's halves; on a half where it is constant, ``β = 0``).

    Examples
    --------
    ``y = 3 + 2 z + noise`` with ``E z = 0``: the adjusted integrals keep the mean 3 and lose
    the variance of ``2z``.

    >>> rng = np.random.default_rng(2)
    >>> z = rng.normal(size=400)
    >>> y = 3 + 2 * z + 0.01 * rng.normal(size=400)
    >>> f = crossfit([(y, np.ones(400))], [z[:, None]])
    >>> [round(float(b[0]), 2) for b in f.beta]
    [2.0, 2.0]
    >>> round(float(f.adjusted[0].mean()), 2), bool(f.adjusted[0].std() < 0.02)
    (3.0, True)
    >>> f.exact, crossfit([(3 + 2 * z, np.ones(400))], [z[:, None]]).exact   # y fixed by z
    (False, True)
    """
    if not parts or not controls or len(parts) != len(controls):
        return None
    m = int(np.asarray(controls[0]).shape[1]) if np.asarray(controls[0]).ndim == 2 else 0
    if m == 0:
        return None
    X: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
    Y: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
    for (a, T), Zc in zip(parts, controls):
        N = T.size
        if N < 4:
            continue
        ry = ratio_series(a, T)
        rz = ratio_series(Zc, T)
        h = _split(N)
        for f, sl in ((0, slice(0, h)), (1, slice(h, N))):
            X[f].append(rz[sl] - rz[sl].mean(axis=0))
            Y[f].append(ry[sl] - ry[sl].mean())
    if not X[0] or not X[1]:
        return None
    Xs = [np.concatenate(x) for x in X]
    Ys = [np.concatenate(y) for y in Y]
    if min(x.shape[0] for x in Xs) < MIN_FIT_ROWS_PER_CONTROL * m:
        return None
    betas = []
    frac = 0.0
    if not any(float(y @ y) > 0 for y in Ys):
        return None  # y does not vary
    for x, y in zip(Xs, Ys):
        sst = float(y @ y)
        if not sst > 0:  # constant on this half: nothing to predict, β = 0
            betas.append(np.zeros(m))
            continue
        b, *_ = np.linalg.lstsq(x, y, rcond=None)
        r = y - x @ b
        frac = max(frac, float(r @ r) / sst)
        betas.append(b)
    adjusted = []
    for (a, T), Zc in zip(parts, controls):
        N = T.size
        h = _split(N)
        adj = np.array(a, dtype=float, copy=True)
        if N >= 4:
            adj[:h] -= Zc[:h] @ betas[1]  # first half: β of the second halves
            adj[h:] -= Zc[h:] @ betas[0]  # second half: β of the first halves
        else:  # too short to split: no adjustment (its own mean is unchanged)
            pass
        adjusted.append(adj)
    return CrossFit(adjusted=adjusted, beta=(betas[0], betas[1]), residual_fraction=frac, controls=m)
