"""Response times on the count engines from what the arrivals join (docs/model.md §13.2, §15.9).

The count kernels (:mod:`supermarket.engines.phase`, :mod:`~supermarket.engines.classes`,
:mod:`~supermarket.engines.classes_phase`) count, per time batch, the arrivals by the class
``k``, length ``ℓ`` and phase ``φ`` (of the customer in service; at an idle server the phase
its own service starts in) of the server they join: ``H_b[k, ℓ, φ]``.  By PASTA the pooled
counts estimate the law ``p[k, ℓ, φ]`` an arrival joins, and under FIFO the customer's sojourn
given ``(k, ℓ, φ)`` is the phase-type time of ``(ℓ + 1, φ)`` in
:func:`supermarket.response.phase_sojourn.phase_chain`'s chain at speed ``s_k``: the service left
from ``φ`` and ``ℓ`` whole services; its wait is that of ``(ℓ, φ)`` (none at ``ℓ = 0``).  So the
sojourn and waiting laws are the mixtures ``P(S > t) = Σ p[k, ℓ, φ] G_{k,ℓ,φ}(t)``, a
:class:`~supermarket.response.phase_sojourn.PhaseSojourn` each.

Errors (delta method through the batch series): ``P(S > t)`` is the ratio ``Σ_b a_b/Σ_b n_b``,
``a_b = Σ G(t)·H_b`` and ``n_b`` the batch's arrivals; its batch series ``r + (a_b − r n_b)/n̄``
goes through the blocking estimator per replication, pooled (:mod:`.classes_errors`), so the
error accounts for autocorrelation; a quantile ``t_q`` gets ``se(P(S > t_q))/f(t_q)``, ``f`` the
law's density there, and the mean the same series with ``G`` the mean from each state.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..response import DEFAULT_QUANTILES
from ..response.phase_sojourn import PhaseSojourn, classes_chain
from ..stats import ErrorEstimate
from .classes_errors import _pooled, _ratio_series

__all__ = [
    "JoinedResponse",
    "joined_response",
    "response_blocks",
    "quantile_lines",
    "cdf_lines",
    "law_cdf",
    "CDF_TOP_QUANTILE",
    "ATOM_NOTE",
    "NO_LAW",
]

CDF_TOP_QUANTILE = 0.999
"""The CDF grid runs from 0 to 1.1 × this quantile of the sojourn time."""

ATOM_NOTE = "no wait: P(W = 0) >= q, an atom at 0"
NO_LAW = (
    "gives no response-time CDF at load >= 1: there is no equilibrium, so no law of what an arrival joins "
    "(cdf_points needs load < 1)"
)


def _err(e: ErrorEstimate) -> float | None:
    """A trusted, non-zero standard error, or None (a spread of 0 is no error bar)."""
    return float(e.stderr) if e.reliable and math.isfinite(e.stderr) and e.stderr > 0 else None


@dataclass(frozen=True, eq=False)
class JoinedResponse:
    """Sojourn and waiting laws of a count engine's run from its joined counts.

    Attributes
    ----------
    sojourn_law, waiting_law : PhaseSojourn
        The laws of the pooled counts (``waiting_law``'s ``β`` sums to ``P(W > 0)``).
    batches : list of numpy.ndarray
        Per replication, the per-batch counts ``(batches, classes·levels·phases)`` of the
        sojourn's start states, and :attr:`wait_batches` those of the wait's.
    sojourn_quantiles, waiting_quantiles : dict
        ``{q: ErrorEstimate}``, the error by the delta method (module docstring).
    sojourn_mean, waiting_mean : ErrorEstimate
        The laws' means (equal to Little's law's within the error: an identity).
    settles : bool
        False where a class is overloaded (random routing): the law has no stationary value, and
        the CDF's errors are None.
    """

    sojourn_law: PhaseSojourn
    waiting_law: PhaseSojourn
    batches: list
    wait_batches: list
    sojourn_quantiles: dict
    waiting_quantiles: dict
    sojourn_mean: ErrorEstimate
    waiting_mean: ErrorEstimate
    settles: bool = True

    def _series(self, weights: np.ndarray, kind: str) -> ErrorEstimate:
        """``Σ w·p`` over the start states of ``kind`` with its pooled batch error."""
        H = self.batches if kind == "sojourn" else self.wait_batches
        A = [h @ weights for h in H]
        B = [h.sum(axis=1) for h in self.batches]  # every arrival (the wait's atom included)
        r, ser = _ratio_series(A, B)
        e = _pooled(ser)
        return dataclasses.replace(e, mean=r)

    def cdf(self, points: int) -> dict:
        """The sojourn and waiting CDFs on ``points`` times from 0 to 1.1 × the sojourn p99.9.

        Parameters
        ----------
        points : int
            Number of grid points, from 2 to :data:`supermarket.model.MAX_CDF_POINTS`
            (ValueError naming ``cdf_points`` otherwise).

        Returns
        -------
        dict
            ``t``, ``sojourn`` (``P(S ≤ t)``), ``waiting`` (``P(W ≤ t)``; at 0 the atom
            ``P(W = 0)``), and ``sojourn_stderr``, ``waiting_stderr``: their delta-method errors,
            None where none is trusted or the batches show no spread (``P(S ≤ 0) = 0``).
        """
        from ..checks import check_int
        from ..model import MAX_CDF_POINTS

        points = check_int("cdf_points", points, minimum=2, maximum=MAX_CDF_POINTS)
        top = self.sojourn_law.quantile(CDF_TOP_QUANTILE)
        grid = np.linspace(0.0, 1.1 * top, points)
        out: dict = {"t": grid.tolist()}
        for kind, law in (("sojourn", self.sojourn_law), ("waiting", self.waiting_law)):
            values, errors = [], []
            for t in grid:
                e = self._series(law.state_tail(float(t)), kind)
                values.append(float(1.0 - e.mean))
                errors.append(_err(e) if self.settles else None)
            out[kind] = values
            out[f"{kind}_stderr"] = errors
        return out


def joined_response(
    runs: Sequence[Sequence[np.ndarray]],
    alpha: np.ndarray,
    T: np.ndarray,
    speeds: np.ndarray,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
) -> JoinedResponse | None:
    """The :class:`JoinedResponse` of per-replication, per-batch joined counts.

    Parameters
    ----------
    runs : sequence of sequences of numpy.ndarray
        ``runs[r][b]``: replication ``r``'s batch ``b``, int counts of shape (classes, levels,
        phases) (levels may differ between batches: the shorter are padded).
    alpha, T : numpy.ndarray
        The service law ``PH(α, T)``, mean 1 (exponential: ``[1]``, ``[[-1]]``).
    speeds : numpy.ndarray
        The classes' speeds (one class: ``[1]``).
    quantiles : sequence of float
        The levels reported.

    Returns
    -------
    JoinedResponse or None
        None when no arrival was counted.
    """
    runs = [list(r) for r in runs if len(r) > 0]
    if not runs:
        return None
    Kc, _, K = runs[0][0].shape
    L = max(h.shape[1] for r in runs for h in r)
    stacked = []
    for r in runs:
        H = np.zeros((len(r), Kc, L, K))
        for b, h in enumerate(r):
            H[b, :, : h.shape[1]] = h
        stacked.append(H)
    occupied = np.nonzero(sum(H.sum(axis=(0, 1, 3)) for H in stacked))[0]
    if occupied.size == 0:
        return None
    L = int(occupied[-1]) + 2  # levels 0..ℓ_max joined; one more row: the sojourn chain's top level is ℓ_max + 1
    stacked = [H[:, :, :L] for H in stacked]
    wait = []
    for H in stacked:
        W = np.zeros_like(H)
        W[:, :, :-1] = H[:, :, 1:]  # joining length ℓ >= 1: the wait of ℓ services left (ℓ = 0: none)
        wait.append(W)
    total = sum(H.sum() for H in stacked)
    p = sum(H.sum(axis=0) for H in stacked) / total
    pw = sum(W.sum(axis=0) for W in wait) / total
    a, M, s = np.asarray(alpha, float), np.asarray(T, float), np.asarray(speeds, float)
    soj = classes_chain(p, a, M, s)
    wai = PhaseSojourn(pw.ravel(), soj.Q)
    flat = [H.reshape(H.shape[0], -1) for H in stacked]
    wflat = [W.reshape(W.shape[0], -1) for W in wait]
    res = JoinedResponse(soj, wai, flat, wflat, {}, {}, _NONE, _NONE)
    m = soj.state_mean()
    sq: dict = {}
    wq: dict = {}
    for q in quantiles:
        for kind, law, into in (("sojourn", soj, sq), ("waiting", wai, wq)):
            tq = law.quantile(float(q))
            if tq == 0.0:
                into[q] = ErrorEstimate(0.0, math.nan, 0.0, 0.0, math.nan, False, "none", 0, 1, ATOM_NOTE)
                continue
            e = res._series(law.state_tail(tq), kind)
            f = float(law.beta @ law.state_density(tq))
            se = e.stderr / f if f > 0 else math.nan
            into[q] = dataclasses.replace(
                e, mean=tq, stderr=se, reliable=bool(e.reliable and math.isfinite(se)), method="delta-method"
            )
    return dataclasses.replace(
        res,
        sojourn_quantiles=sq,
        waiting_quantiles=wq,
        sojourn_mean=dataclasses.replace(res._series(m, "sojourn"), method="delta-method"),
        waiting_mean=dataclasses.replace(res._series(m, "waiting"), method="delta-method"),
    )


def response_blocks(
    resp: JoinedResponse | None, sojourn: dict, waiting: dict, est: Callable[[ErrorEstimate], dict]
) -> tuple[dict, dict]:
    """The ``sojourn`` and ``waiting`` blocks of a count engine's result (:mod:`.shape`): the mean
    by Little's law (``source`` ``"little"``, as before), the quantiles of the joined law
    (``quantile_source`` ``"joined"``; ``{}`` and None without a law, at load >= 1) and
    ``law_mean``, the joined law's mean (the identity's other side), each made by ``est``.

    Returns
    -------
    (dict, dict)
    """
    from . import shape as _shape

    out = []
    for kind, mean in (("sojourn", sojourn), ("waiting", waiting)):
        if resp is None:
            out.append(_shape.response_block(mean, {}, "little", quantile_source=None, law_mean=None))
            continue
        qs = resp.sojourn_quantiles if kind == "sojourn" else resp.waiting_quantiles
        lm = resp.sojourn_mean if kind == "sojourn" else resp.waiting_mean
        out.append(
            _shape.response_block(
                mean, {q: est(e) for q, e in qs.items()}, "little", quantile_source="joined", law_mean=est(lm)
            )
        )
    return out[0], out[1]


def quantile_lines(resp: JoinedResponse | None, pm: Callable[[ErrorEstimate], str]) -> list[str]:
    """The summary's lines of the sojourn and waiting quantiles (``pm`` renders an estimate)."""
    if resp is None:
        return ["no response-time quantiles at load >= 1 (no equilibrium: no law of what an arrival joins)"]
    lines = [
        "response times from the (length, phase, class) each arrival joins (FIFO, PASTA; docs/model.md §13.2, "
        f"§15.9): law mean sojourn {pm(resp.sojourn_mean)}, waiting {pm(resp.waiting_mean)}"
    ]
    for q, e in resp.sojourn_quantiles.items():
        w = resp.waiting_quantiles[q]
        lines.append(
            f"sojourn q{q:g}: {pm(e)}; waiting q{q:g}: {'0 (' + w.note + ')' if w.note == ATOM_NOTE else pm(w)}"
        )
    return lines


def law_cdf(response: JoinedResponse | None, points: int, engine: str) -> dict:
    """The sojourn and waiting CDFs of a count engine's joined law (:meth:`JoinedResponse.cdf`).

    Raises
    ------
    ValueError
        At load >= 1 (``response`` None: no equilibrium), naming ``cdf_points`` and ``engine``.
    """
    if response is None:
        raise ValueError(f"cdf_points: {engine} {NO_LAW}")
    return response.cdf(points)


def cdf_lines(cdf: dict, source: str = "the law of what the arrivals join; docs/model.md §13.2, §15.9") -> list[str]:
    """The lines of a response-time CDF (:meth:`JoinedResponse.cdf`, or the event engine's
    :meth:`~supermarket.simulation.general.GeneralResult.cdf` with its ``source``): ``t``,
    ``P(S ≤ t)`` and ``P(W ≤ t)``, each ``± one standard error`` where it has a trusted one."""

    def cell(v: float, e: float | None) -> str:
        return f"{v:.6g}" if e is None else f"{v:.6g} ± {e:.2g}"

    rows = [
        (f"{t:.6g}", cell(a, ea), cell(b, eb))
        for t, a, ea, b, eb in zip(
            cdf["t"], cdf["sojourn"], cdf["sojourn_stderr"], cdf["waiting"], cdf["waiting_stderr"]
        )
    ]
    head = ("t", "P(S ≤ t)", "P(W ≤ t)")
    w = [max(len(r[j]) for r in [head, *rows]) for j in range(3)]
    return [
        "",
        f"Response-time CDF on {len(rows)} points ({source})",
        *("  ".join(c.rjust(w[j]) for j, c in enumerate(r)).rstrip() for r in [head, tuple("-" * x for x in w), *rows]),
    ]


_NONE = ErrorEstimate(math.nan, math.nan, 0.0, 0.0, math.nan, False, "none", 0, 1, "not computed")
