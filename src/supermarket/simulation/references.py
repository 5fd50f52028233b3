"""What ``simulate``'s screen puts beside an estimate, each with its own standing: the flow-balance
identity measured on the run with its own error (:func:`identity_estimates`), and the refined
mean field ``π + V/n`` of docs/model.md §3 (:func:`refined_profile`), which carries the ``1/n``
term that separates a finite system from the mean field ``π``.

The identity column is a *check*, so it is the plain time average of ``λ·P_{i−1}`` with its own
standard error: the control variates are built from this very identity (docs/model.md §9.1), so
an identity estimated with them would agree with the adjusted ``E[u_i]`` by construction.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .results import SimulationResult

__all__ = ["RefinedProfile", "identity_estimates", "refined_profile"]


def identity_estimates(res: SimulationResult) -> dict:
    """The identity side ``λ·E[P_{i−1}]`` of ``E[u_i] = λ·E[P_{i−1}]`` (docs/model.md §3) per level,
    from the plain time averages of ``P_i`` and their own standard errors.

    Parameters
    ----------
    res : SimulationResult
        A run of :func:`~supermarket.simulation.simulate`.

    Returns
    -------
    dict
        ``value``, ``stderr`` and ``reliable`` (lists per level ``i = 1..len(u_mean)``): level 1 is
        ``λ·P_0 = λ`` exactly (s.e. 0); a stderr is NaN where the plain error of ``P_{i−1}`` is not
        reliable.

    Examples
    --------
    >>> from supermarket.simulation import simulate
    >>> r = simulate(100, 2, 0.9, steps=200_000, seed=1, start="fixed-point")
    >>> ide = identity_estimates(r)
    >>> ide["value"][0], ide["stderr"][0], ide["reliable"][0]
    (0.9, 0.0, True)
    >>> bool(ide["value"][1] == 0.9 * r.ud_mean_plain[0] and ide["stderr"][1] == 0.9 * r.ud_stderr_plain[0])
    True
    """
    lam = res.params.lam
    value, stderr, reliable = [lam], [0.0], [True]
    for t in res.tails[: len(res.levels) - 1]:
        ok = bool(t.plain_reliable) and math.isfinite(t.plain_stderr)
        value.append(lam * t.plain)
        stderr.append(lam * t.plain_stderr if ok else math.nan)
        reliable.append(ok)
    return {"value": value, "stderr": stderr, "reliable": reliable}


@dataclass(frozen=True)
class RefinedProfile:
    """The refined mean field ``π(i) + V_i/n`` on a run's levels (docs/model.md §3), or why there
    is none.

    Parameters
    ----------
    u : numpy.ndarray or None
        ``π(i) + V_i/n`` for ``i = 1..len(u_mean)``; None when not available.
    mean_queue_length : float
        ``Σπ + ΣV/n`` (NaN when not available).
    sum_V : float
        ``ΣV`` (NaN when not available); ``ΣV/n`` is the finite-``n`` term of the mean queue length.
    source : str
        ``"classical"`` (Gast and Van Houdt 2018, sampling with replacement), ``"derived"``
        (without replacement: the drift's own 1/n term, docs/model.md §3) or ``"exact"`` (the
        ``random`` rule: independent M/M/1 queues, ``V = 0`` and ``E[u_i] = λ^i`` at every ``n``);
        "" when not available.
    note : str
        Why it is not available ("" when it is).
    """

    u: np.ndarray | None
    mean_queue_length: float = math.nan
    sum_V: float = math.nan
    source: str = ""
    note: str = ""

    def to_dict(self) -> dict:
        """JSON-safe: ``u`` (list or None), ``mean_queue_length``, ``sum_V`` (None when NaN),
        ``source`` and ``note``."""

        def num(x):
            return float(x) if math.isfinite(x) else None

        return {
            "u": None if self.u is None else [float(x) for x in self.u],
            "mean_queue_length": num(self.mean_queue_length),
            "sum_V": num(self.sum_V),
            "source": self.source,
            "note": self.note,
        }


def refined_profile(res: SimulationResult) -> RefinedProfile:
    """The refined mean field ``π + V/n`` of the run's ``(n, d, λ)``, sampling and rule, on its
    levels (:func:`supermarket.meanfield.refined_mean_field`), or the reason it has none.

    Parameters
    ----------
    res : SimulationResult
        A run of :func:`~supermarket.simulation.simulate`.

    Returns
    -------
    RefinedProfile

    Examples
    --------
    >>> from supermarket.simulation import simulate
    >>> r = simulate(1000, 2, 0.9, steps=100_000, seed=1, start="fixed-point")
    >>> rp = refined_profile(r)
    >>> rp.source, round(rp.mean_queue_length, 6), round(rp.sum_V, 3)  # Σπ = 2.35265, ΣV = 3.986
    ('classical', 2.356638, 3.986)
    >>> refined_profile(simulate(100, 2, 0.9, steps=20_000, seed=1, policy="jsq")).note
    'none for jsq: its mean-field drift is discontinuous (docs/model.md §2)'
    """
    # the mean field's linear algebra loads scipy.linalg, which a simulation alone never needs
    from ..meanfield import MAX_LYAPUNOV_LEVELS, AccuracyWarning, levels_needed, refined_mean_field

    p, L = res.params, len(res.levels)
    if p.lam >= 1:
        return RefinedProfile(None, note="none: load >= 1 has no equilibrium")
    if res.policy in ("jsq", "jiq"):
        return RefinedProfile(
            None, note=f"none for {res.policy}: its mean-field drift is discontinuous (docs/model.md §2)"
        )
    if res.policy == "random" or p.d == 1:
        u = p.lam ** np.arange(1, L + 1, dtype=float)
        return RefinedProfile(u, p.lam / (1.0 - p.lam), 0.0, "exact")
    try:
        levels = max(L, levels_needed(p.d, p.lam))
    except ValueError:
        levels = MAX_LYAPUNOV_LEVELS + 1
    if levels > MAX_LYAPUNOV_LEVELS:
        return RefinedProfile(None, note=f"not computed: it would need {levels} levels (at most {MAX_LYAPUNOV_LEVELS})")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AccuracyWarning)
        rmf = refined_mean_field(p.d, p.lam, replace=p.replace, levels=levels)
    if not rmf.accurate:
        return RefinedProfile(
            None, note="not shown: its linear solves lost their accuracy (" + "; ".join(rmf.issues) + ")"
        )
    if not p.replace and p.n < p.d:
        return RefinedProfile(None, note=f"none: n = {p.n} < d = {p.d}")
    if not rmf.valid_for(p.n):
        return RefinedProfile(
            None,
            note=f"not shown: π + V/n is no profile at n = {p.n}, too small for the 1/n expansion "
            f"(from n = {rmf.min_n()})",
        )
    u = (rmf.pi + rmf.V / p.n)[:L]
    return RefinedProfile(u, rmf.mean_queue_length(p.n), float(rmf.V.sum()), "classical" if p.replace else "derived")
