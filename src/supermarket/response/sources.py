"""Tails ``T_i = P(J >= i)`` from a simulation's time averages of ``P_i`` (docs/model.md §10)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .laws import ResponseTimes, from_tails
from .mixture import DEFAULT_QUANTILES

__all__ = ["from_simulation"]


def _pad(a, L):
    out = np.zeros(L)
    a = np.asarray(a, dtype=float)
    out[: min(a.size, L)] = a[:L]
    return out


def from_simulation(result: Any, *, quantiles: Any = DEFAULT_QUANTILES) -> ResponseTimes:
    """Response times of a simulated system from its time-averaged ``P_i`` (docs/model.md §10).

    Exact given those averages; the standard errors come, in this order, from the result's
    ``ud_cov`` or ``ud_batches`` (delta method), from >= 2 ``per_replication`` results, or from
    ``ud_stderr`` as the bound ``Σ_i |∂/∂T_i| s_i``; ``source`` names which.

    Parameters
    ----------
    result : supermarket.simulation.SimulationResult
        Anything with ``ud_mean`` and ``params``.
    quantiles : sequence of float

    Returns
    -------
    ResponseTimes

    Examples
    --------
    >>> import supermarket as sm
    >>> res = sm.simulate(4, 2, 0.7, steps=200_000, seed=1, progress=False)
    >>> r = from_simulation(res)
    >>> abs(r.sojourn.mean - res.mean_sojourn_time) < 0.1      # Little's law, up to noise
    True
    """
    if not hasattr(result, "ud_mean"):
        raise TypeError(f"result must be a SimulationResult (with ud_mean); got {type(result).__name__}")
    T = np.clip(np.asarray(result.ud_mean, dtype=float), 0.0, 1.0)
    T = np.minimum.accumulate(T) if T.size else T
    L = T.size
    cov = se = how = None
    ud_cov = getattr(result, "ud_cov", None)
    ud_b = getattr(result, "ud_batches", None)
    per = getattr(result, "per_replication", ()) or ()
    if ud_cov is not None:
        c = np.asarray(ud_cov, dtype=float)
        cov = np.zeros((L, L))
        m = min(L, c.shape[0])
        cov[:m, :m] = c[:m, :m]
        how = "covariance of the estimate"
    elif ud_b is not None and len(ud_b) >= 2:
        B = np.array([_pad(b, L) for b in ud_b])
        cov = np.cov(B, rowvar=False, ddof=1).reshape(L, L) / B.shape[0]
        how = f"{B.shape[0]} batch means"
    elif len(per) >= 2:
        R = np.array([_pad(r.ud_mean, L) for r in per])
        cov = np.cov(R, rowvar=False, ddof=1).reshape(L, L) / R.shape[0]
        how = f"{R.shape[0]} replications"
    else:
        se = np.nan_to_num(_pad(getattr(result, "ud_stderr", np.full(L, np.nan)), L), nan=0.0)
        how = "per-level batch-means standard errors, combined as a bound"
    p = result.params
    params = {"n": p.n, "d": p.d, "load": p.lam, "replace": p.replace, "engine": getattr(result, "engine", None)}
    return from_tails(T, cov=cov, stderr=se, quantiles=quantiles, source=f"simulation ({how})", params=params)
