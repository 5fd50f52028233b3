"""Where the tails ``T_i = P(J >= i)`` come from: a simulation's time averages of ``P_i``
(:func:`from_simulation`, with its Monte-Carlo errors) or the mean field and the refined mean
field (:func:`from_meanfield`) (docs/model.md §10).  The exact law of a small system is in
:func:`supermarket.stationary.solve`."""

from __future__ import annotations

import numpy as np

from .laws import ResponseTimes, from_tails
from .mixture import DEFAULT_QUANTILES, _check_quantiles

__all__ = ["from_simulation", "from_meanfield"]


def _pad(a, L):
    out = np.zeros(L)
    a = np.asarray(a, dtype=float)
    out[:min(a.size, L)] = a[:L]
    return out


def from_simulation(result, *, quantiles=DEFAULT_QUANTILES) -> ResponseTimes:
    """Response times of a simulated system from its time-averaged ``P_i`` (docs/model.md §10).

    The law is exact given the measured ``E[P_i]`` (PASTA and FIFO); the only error is the
    Monte-Carlo error of those averages.  Standard errors, in order of preference:

    1. a covariance of the estimate (attribute ``ud_cov`` of the result), or per-batch
       averages (``ud_batches``: batches x levels, equal batch lengths): delta method;
    2. ``per_replication`` results (>= 2 replications): covariance across replications,
       delta method;
    3. otherwise the per-level ``ud_stderr``: the bound ``Σ_i |∂/∂T_i| s_i`` (correlations
       unknown; labelled ``"bound"``).

    Parameters
    ----------
    result : supermarket.simulation.SimulationResult
        Anything with ``ud_mean`` (time average of ``P_i``, level 1 first) and ``params``.
    quantiles : sequence of float

    Returns
    -------
    ResponseTimes
        The laws given the measured ``E[P_i]``, with standard errors obtained as listed above
        (``source`` names the way).

    Raises
    ------
    TypeError
        ``result`` has no ``ud_mean``.

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
    cov = se = None
    how = None
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


def from_meanfield(d, lam, *, n=None, refined=False, replace=True, quantiles=DEFAULT_QUANTILES,
                   tol: float = 1e-13) -> ResponseTimes:
    """Response times of the mean field (``n = ∞``) or of the refined mean field (order ``1/n``).

    Mean field: ``T_i = π(i)^d = π(i+1)/λ`` (docs/model.md §3, §10).  Refined (derived,
    docs/model.md §10): a second-order expansion of ``E[u_i^d]`` around ``π``,
    ``T_i ≈ π_i^d + (d π_i^{d−1} V_i + ½ d(d−1) π_i^{d−2} W_ii)/n``, with ``V`` the refined
    mean field's ``1/n`` term and ``W`` the linear-noise covariance; it equals
    ``(π(i+1) + V_{i+1}/n)/λ``, the exact identity ``E[u_{i+1}] = λ E[P_i]`` to the same order.
    Without replacement (``replace=False``, needs ``n``) the plain mean field uses the centre
    ``x^n`` with the finite-n sampling law ``T_i = C(n x_i, d)/C(n, d)`` (docs/model.md §8); the
    refined one adds the sampling law's own ``1/n`` term ``h(π_i)/n`` and uses the ``V`` without
    replacement (docs/model.md §3, §10).

    Parameters
    ----------
    d : int
        Choices, >= 1.
    lam : float
        Load in (0, 1).
    n : int, optional
        Servers; needed with ``refined=True`` or ``replace=False``.
    refined : bool
        Add the ``1/n`` term.
    replace : bool
    quantiles : sequence of float
    tol : float
        Levels whose ``π`` falls below ``tol`` are dropped.

    Returns
    -------
    ResponseTimes
        Exact laws of the (refined) mean-field tails, without standard errors (a limit, not an
        estimate); ``source`` says which approximation, ``notes`` flag a refined expansion
        clipped into [0, 1] (``n`` too small to trust it).

    Raises
    ------
    TypeError, ValueError
        Bad ``d``, ``lam``, ``n``; ``refined`` or ``replace=False`` without ``n``.

    Examples
    --------
    >>> r = from_meanfield(1, 0.5)                           # M/M/1: S ~ Exp(1 − λ)
    >>> round(r.sojourn.mean, 9), round(r.sojourn.quantiles[0.99], 9)
    (2.0, 9.210340372)
    """
    from .. import meanfield as mf
    from ..model import check_load, check_positive_int
    from ..theory import log_fixed_point

    d = check_positive_int("d", d)
    lam = check_load(lam)
    qs = _check_quantiles(quantiles)
    if not isinstance(refined, (bool, np.bool_)):
        raise TypeError(f"refined must be True or False; got {refined!r}")
    if not isinstance(replace, (bool, np.bool_)):
        raise TypeError(f"replace must be True or False; got {replace!r}")
    if n is not None:
        n = check_positive_int("n", n)
    if refined and n is None:
        raise ValueError("refined=True needs the number of servers n (the correction is V/n)")
    if not replace and n is None:
        raise ValueError("replace=False needs the number of servers n (the sampling law depends on n)")
    if not replace and d > n:
        raise ValueError(f"d must be <= n when sampling without replacement; got d={d}, n={n}")
    notes = []
    params = {"d": d, "load": lam, "n": n, "replace": bool(replace), "refined": bool(refined)}
    if not replace and not refined:
        x = mf.near_equilibrium_centre(n, d, lam, replace=False, tol=tol)
        T = mf.sample_prob(x, d, n=n, replace=False)
        return from_tails(np.minimum.accumulate(np.clip(T, 0, 1)), quantiles=qs,
                          source=f"mean field (centre x^n, sampling without replacement, n = {n})",
                          params=params)
    if not refined:
        L = mf.levels_needed(d, lam, tol)
        T = np.exp(float(d) * log_fixed_point(d, lam, L + 1))  # π_i^d, i = 1..L+1
        return from_tails(T, quantiles=qs, source="mean field", params=params)
    rmf = mf.refined_mean_field(d, lam, replace=bool(replace), tol=tol)
    p1 = mf.sample_prob(rmf.pi, d, order=1)
    p2 = mf.sample_prob(rmf.pi, d, order=2)
    corr = p1 * rmf.V + 0.5 * p2 * np.diag(rmf.W)
    if not replace:  # the sampling law's own 1/n term: C(nu, d)/C(n, d) = u^d + h(u)/n + O(1/n²)
        from ..meanfield.corrections import sampling_first_order

        corr = corr + sampling_first_order(rmf.pi, d)
    Tr = mf.sample_prob(rmf.pi, d) + corr / n
    if np.any(Tr < 0) or np.any(Tr > 1) or np.any(np.diff(Tr) > 0):
        notes.append(f"the 1/n expansion leaves [0, 1] or stops falling at n = {n}; clipped (n is too small "
                     "for the refined mean field to be trusted)")
    Tr = np.minimum.accumulate(np.clip(Tr, 0.0, 1.0))
    return from_tails(Tr, quantiles=qs, source=f"refined mean field, order 1/n (derived), n = {n}",
                      params=params, notes=notes)
