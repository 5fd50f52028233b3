"""The diffusion limits of regimes (a), (b), (c) and the pre-limit diffusion (docs/model.md §8,
derived), by Euler–Maruyama over independent paths (engine :mod:`supermarket.engines.sde`);
paths run in chunks of :data:`SDE_CHUNK` (chunk ``j``: child ``j`` of the seed), each advanced
in kernel calls of :data:`CHUNK_STEPS` steps.
"""

from __future__ import annotations

import math
import time as _time
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import gammaln

from .. import parallel
from ..engines.rng import state_from_seed_sequence
from ..model import check_int, check_positive_float, spawn_seeds
from ..stats import mean_stderr
from .moments import Moments, _moments_from_blocks, autocorrelation
from .regimes import RegimeParams, _nonneg, _positive_zeta, _real
from .runs import SDE_STEPS_PER_SECOND, _check_grid, _check_work, _default_burn_in, _run_jobs, _ScaledRun, _workers

__all__ = [
    "LimitSDE",
    "REFLECTIONS",
    "SDE_CHUNK",
    "CHUNK_STEPS",
    "limit_sde",
    "prelimit_sde",
    "limit_for",
    "limit_closed_form",
    "limit_acf_a",
]

#: Kernel calls are cut into chunks of about this many Euler steps (a few hundredths of a
#: second), so Ctrl-C is honoured promptly; the numbers do not depend on the cut.
CHUNK_STEPS = 1 << 21


@dataclass(frozen=True, kw_only=True)
class LimitSDE(_ScaledRun):
    """Stationary statistics of a limit (or pre-limit) diffusion by Euler–Maruyama
    (docs/model.md §8, derived).

    ``regime``: ``"a"``, ``"b"``, ``"c"`` (the limits) or ``"pre-a"``, ``"pre-b"``, ``"pre-c"``
    (the pre-limit diffusion at finite ``n``, :func:`prelimit_sde`).  ``max_q``: the largest
    first coordinate on any path (regime (c): never above 0).  ``push_rate``,
    ``y_push_rate``: the stationary rates ``E[dU]/dt`` and ``E[Y dU]/dt`` of the pushing
    (regime (c); in the pre-limit, everything moved from level 1 to ``Y``), with standard
    errors over paths (``None`` where there is no pushing).  ``grid``: ``(recorded paths,
    G, 2)`` after burn-in at times ``t``.  Result protocol as :class:`FluctuationSim`.

    Examples
    --------
    >>> r = limit_sde("a", kappa=1.0, paths=4, time=2.0, burn_in=0.5, dt=0.01, record_paths=0)
    >>> r.to_frame()[["source", "moment"]].iloc[0].tolist()
    ['limit diffusion (a), 4 paths', 'mean_z1']
    """

    regime: str
    params: dict
    paths: int
    dt: float
    max_q: float
    push_rate: float | None = None
    push_rate_stderr: float | None = None
    y_push_rate: float | None = None
    y_push_rate_stderr: float | None = None

    def _label(self) -> str:
        kind = "pre-limit diffusion" if self.regime.startswith("pre") else "limit diffusion"
        return f"{kind} ({self.regime.removeprefix('pre-')}), {self.paths} paths"

    def _names(self) -> tuple[str, str]:
        return ("Z1", "Z2") if self.regime.endswith("a") else ("Q", "Y")

    def _header(self) -> str:
        out = f"{self.time:g} time units after burn-in {self.burn_in:g}, dt {self.dt:g}, {self.seconds:.2f} s"
        if self.push_rate is not None:
            out += f"; pushing rate {self.push_rate:.4g} ± {self.push_rate_stderr:.2g}"
        return out

    def to_dict(self) -> dict:
        if self.regime.startswith("pre"):
            method = "Euler–Maruyama, pre-limit diffusion (finite-n coefficients; stiff term implicit)"
        else:
            method = "Euler–Maruyama" + (
                f", reflection by {self.params.get('reflection')}" if self.regime == "c" else ""
            )
        out = {
            "regime": self.regime,
            "params": self.params,
            "paths": self.paths,
            "time": self.time,
            "burn_in": self.burn_in,
            "dt": self.dt,
            "seconds": self.seconds,
            "max_q": self.max_q,
            "method": method,
            **self.moments.to_dict(),
        }
        if self.push_rate is not None:
            out.update(
                push_rate=self.push_rate,
                push_rate_stderr=self.push_rate_stderr,
                y_push_rate=self.y_push_rate,
                y_push_rate_stderr=self.y_push_rate_stderr,
            )
        return out


SDE_CHUNK = 32  # paths per kernel call (chunk j gets child j of the seed)
REFLECTIONS = ("bridge", "projection")


def _sde_task(args):
    """One chunk of paths of a diffusion (module level: threads, processes or Dask)."""
    from ..engines.sde import em_paths

    kind, par, dt, n_burn, n_steps, rec_every, ss, mine, nrec, G = args
    state = state_from_seed_sequence(ss)
    buf = np.zeros((nrec, G, 2))
    while True:
        parallel.check_stop()
        if em_paths(kind, par, dt, n_burn, n_steps, rec_every, state, mine, buf, CHUNK_STEPS):
            break
    return mine, buf


def _run_sde(
    kind,
    par,
    z0,
    *,
    paths,
    time,
    burn_in,
    dt,
    grid_dt,
    record_paths,
    seed,
    workers,
    max_lag,
    what,
    client=None,
    progress=None,
):
    """Shared driver of :func:`limit_sde` and :func:`prelimit_sde`: chunks of 32 paths
    (chunk ``j``: xoshiro state from child ``j`` of ``seed``), each advanced in calls of
    :data:`CHUNK_STEPS` steps.  Returns the pieces of a :class:`LimitSDE`."""
    from ..engines.sde import NS

    P = check_int("paths", paths, minimum=2)
    time = check_positive_float("time", time)
    dt = check_positive_float("dt", dt)
    grid_dt = check_positive_float("grid_dt", grid_dt)
    Rp = check_int("record_paths", record_paths, minimum=0, maximum=P)
    rec_every = max(1, int(round(grid_dt / dt)))
    grid_dt = rec_every * dt
    steps_f = time / dt
    _check_grid(
        Rp,
        steps_f / rec_every,
        f"{what}: time = {time:g} with grid_dt = {grid_dt:g} and {Rp} recorded path(s)",
        "lower the time or record fewer paths",
    )
    _check_work(
        P * (steps_f + burn_in / dt),
        SDE_STEPS_PER_SECOND,
        f"{what}: {P} paths × (burn-in {burn_in:g} + time {time:g}) / dt {dt:g} needs steps",
        "lower paths, time, burn_in or raise dt",
        _workers(workers, (P + SDE_CHUNK - 1) // SDE_CHUNK),
    )
    n_steps = int(round(steps_f))
    n_burn = int(round(burn_in / dt))
    if n_steps < 1:
        raise ValueError(f"dt must be below time = {time:g}; got {dt!r}")
    G = n_steps // rec_every
    chunks = [(j * SDE_CHUNK, min(SDE_CHUNK, P - j * SDE_CHUNK)) for j in range((P + SDE_CHUNK - 1) // SDE_CHUNK)]
    ps = np.zeros((P, NS))
    ps[:, 0], ps[:, 1], ps[:, 2] = z0[0], z0[1], z0[0]
    par = np.asarray(par, dtype=float)
    tasks = [
        (
            kind,
            par,
            dt,
            n_burn,
            n_steps,
            rec_every,
            ss,
            ps[lo : lo + size].copy(),
            max(0, min(lo + size, Rp) - min(lo, Rp)),
            G,
        )
        for (lo, size), ss in zip(chunks, spawn_seeds(seed, len(chunks)))
    ]
    t0 = _time.perf_counter()
    out = _run_jobs(_sde_task, tasks, workers, client, progress)
    secs = _time.perf_counter() - t0
    ps = np.concatenate([o[0] for o in out])
    rec = np.concatenate([o[1] for o in out]) if out else np.zeros((0, G, 2))
    T = n_steps * dt
    mom = _moments_from_blocks(ps[:, 3:8] * dt / T)
    push = ps[:, 8] / T
    ypush = ps[:, 9] / T
    if Rp > 0 and G >= 8:
        L = max(1, min(int(max_lag / grid_dt), G // 4))
        a1, s1 = autocorrelation(rec[:, :, 0], L)
        a2, s2 = autocorrelation(rec[:, :, 1], L)
    else:
        L = 0
        a1 = a2 = s1 = s2 = np.ones(1)
    return dict(
        paths=P,
        time=time,
        burn_in=burn_in,
        dt=dt,
        seconds=secs,
        moments=mom,
        max_q=float(ps[:, 2].max()),
        t=np.arange(G) * grid_dt,
        grid=rec,
        lags=np.arange(L + 1) * grid_dt,
        acf_z1=a1,
        acf_z2=a2,
        acf_z1_stderr=s1,
        acf_z2_stderr=s2,
        push=(*_mean_and_stderr(push), *_mean_and_stderr(ypush)),
    )


def _mean_and_stderr(per_path: np.ndarray) -> tuple[float, float]:
    """Mean over independent paths and its standard error (:func:`supermarket.stats.replication_error`,
    through :func:`supermarket.stats.mean_stderr`)."""
    m, se = mean_stderr(per_path)
    return m, se


def limit_sde(
    regime: str,
    *,
    kappa: float | None = None,
    c: float | None = None,
    zeta: float | None = None,
    paths: int = 256,
    time: float = 100.0,
    burn_in: float | None = None,
    dt: float = 1e-3,
    record_paths: int = 8,
    grid_dt: float = 0.05,
    max_lag: float = 10.0,
    seed: Any = 0,
    workers: int | None = None,
    reflection: str = "bridge",
    client: Any = None,
) -> LimitSDE:
    """Simulate the limit diffusion of ``regime`` (docs/model.md §8, derived) with many paths.

    Parameters
    ----------
    regime : {"a", "b", "c"}
        (a): ``kappa``; (b): ``c``, ``zeta``; (c): ``zeta`` (reflected at ``Q <= 0``).
    reflection : {"bridge", "projection"}
        Regime (c) only.  ``"bridge"`` (default) pushes by the maximum of the free path over
        each step, sampled from its Brownian bridge: no ``O(√dt)`` bias from excursions
        inside a step.  ``"projection"`` projects the end point onto ``Q <= 0`` and adds the
        projected amount to ``Y``; it misses those excursions (a bias of order ``√dt``).
    paths, time, burn_in, dt
        Each path runs ``burn_in`` (default 20, and at least ``5/ζ²`` in (c), whose
        relaxation slows down as ``ζ → 0``) then ``time`` with step ``dt``.
    seed, workers
        Chunk ``j`` of 32 paths uses a xoshiro256** state from child ``j`` of ``seed``:
        identical results for any ``workers`` (threads), any process, any machine.

    Returns
    -------
    LimitSDE
        Moments = averages of the per-path time averages, with standard errors from their
        spread over the independent paths; in (c) also the pushing rates ``E[dU]/dt`` and
        ``E[Y dU]/dt``.  The Euler–Maruyama bias is ``O(dt)``.

    Raises
    ------
    ValueError
        Bad parameters, or work / memory beyond the limits of :func:`simulate_fluctuations`.

    Examples
    --------
    >>> r = limit_sde("c", zeta=1.0, paths=32, time=5.0, burn_in=1.0, dt=1e-2)
    >>> r.max_q <= 0.0
    True
    """
    from ..engines.sde import KIND_A, KIND_B, KIND_C

    if regime == "a":
        kappa = check_positive_float("kappa", kappa)
        kind, par, z0 = KIND_A, [kappa], (0.0, 0.0)
        params: dict[str, float | str] = {"kappa": kappa}
    elif regime == "b":
        c = check_positive_float("c", c)
        zeta = _real("zeta", zeta)
        kind, par = KIND_B, [c, zeta]
        z0 = (-zeta, math.exp(-c * zeta) if -c * zeta < 50 else 1.0)
        params = {"c": c, "zeta": zeta}
    elif regime == "c":
        zeta = _positive_zeta(zeta)
        kind, par, z0 = KIND_C, [0.0, zeta, 0.0], (-zeta, 1.0 / zeta)
        params = {"zeta": zeta}
    else:
        raise ValueError(f"regime must be 'a', 'b' or 'c'; got {regime!r}")
    if reflection not in REFLECTIONS:
        raise ValueError(f"reflection must be 'bridge' or 'projection'; got {reflection!r}")
    if regime == "c":
        params["reflection"] = reflection
        par[2] = 1.0 if reflection == "bridge" else 0.0
    burn_in = _default_burn_in(regime, zeta, 20.0) if burn_in is None else _nonneg("burn_in", burn_in)
    out = _run_sde(
        kind,
        par,
        z0,
        paths=paths,
        time=time,
        burn_in=burn_in,
        dt=dt,
        grid_dt=grid_dt,
        record_paths=record_paths,
        seed=seed,
        workers=workers,
        max_lag=max_lag,
        client=client,
        what=f"the regime-({regime}) limit diffusion",
    )
    push = out.pop("push")
    extra = (
        dict(zip(("push_rate", "push_rate_stderr", "y_push_rate", "y_push_rate_stderr"), push)) if regime == "c" else {}
    )
    return LimitSDE(regime=regime, params=params, **out, **extra)


def prelimit_sde(
    p: RegimeParams,
    *,
    paths: int = 256,
    time: float = 100.0,
    burn_in: float | None = None,
    dt: float = 1e-3,
    record_paths: int = 8,
    grid_dt: float = 0.05,
    max_lag: float = 10.0,
    seed: Any = 0,
    workers: int | None = None,
    client: Any = None,
) -> LimitSDE:
    """The pre-limit diffusion at ``p`` (docs/model.md §8, derived): the diffusion
    approximation of the chain's levels 1 and 2 with the finite-``n`` coefficients.

    The SDE in ``Q = √n(G_1 − c_n)``, ``Y = √n G_2`` and its limits are in docs/model.md §8
    (in (a) the reported coordinates are shifted to ``p``'s centring).  The stiff term
    ``A(Q)`` is taken implicitly (stable for any ``dt``); the remaining bias is ``O(dt)``
    away from the wall.

    Parameters and results as :func:`limit_sde`; ``burn_in`` defaults as there, with
    ``ζ = ζ_n``.

    Parameters
    ----------
    p : RegimeParams
        The finite-``n`` point (:func:`regime_a`, :func:`regime_b`, :func:`regime_c`).
    paths, time, burn_in, dt
        Each path runs ``burn_in`` then ``time`` with step ``dt`` (as in :func:`limit_sde`).
    record_paths : int, default 8
        Paths whose trajectories are kept.
    grid_dt : float, default 0.05
        Spacing of the recorded grid.
    max_lag : float, default 10.0
        Largest autocorrelation lag (time units).
    seed, workers
        As in :func:`limit_sde`: identical results for any ``workers``.
    client : dask.distributed.Client, optional
        Run the chunks of paths on this Dask client instead of threads.

    Returns
    -------
    LimitSDE
        ``regime = "pre-" + p.regime``; moments in ``p``'s coordinates; ``params`` holds
        ``n, d_n, lambda_n, c_n, zeta_n, replace, q_max, effective_c``.

    Raises
    ------
    TypeError
        ``p`` is not a :class:`RegimeParams`.
    ValueError
        Bad parameters or work beyond the limits.

    Examples
    --------
    >>> from supermarket.fluctuations import regime_b
    >>> p = regime_b(10**4, 1.0, 0.5, warn=False)
    >>> r = prelimit_sde(p, paths=32, time=5.0, burn_in=1.0, dt=1e-2)
    >>> round(r.params["c_n"], 4)
    0.955
    """
    from ..engines.sde import KIND_PRE

    if not isinstance(p, RegimeParams):
        raise TypeError("p must be a RegimeParams (from regime_a, regime_b or regime_c)")
    n, d, lam, sq = p.n, p.d, p.lam, math.sqrt(p.n)
    c_n = p.c_n
    zeta_n = sq * (c_n - lam)
    lfall = 0.0 if p.replace else float(gammaln(n + 1) - gammaln(n - d + 1))
    qmax = sq * (1.0 - c_n)
    par = [sq, lam, c_n, zeta_n, float(d), float(n), 1.0 if p.replace else 0.0, lfall, qmax]
    # start at the centre x^n in these coordinates
    z0 = (sq * (p.x[0] - c_n), sq * (p.x[1] if len(p.x) > 1 else 0.0))
    zeta_eff = zeta_n if zeta_n > 0 else None
    burn_in = (
        _default_burn_in("c" if p.regime == "c" else p.regime, zeta_eff, 20.0)
        if burn_in is None
        else _nonneg("burn_in", burn_in)
    )
    out = _run_sde(
        KIND_PRE,
        par,
        z0,
        paths=paths,
        time=time,
        burn_in=burn_in,
        dt=dt,
        grid_dt=grid_dt,
        record_paths=record_paths,
        seed=seed,
        workers=workers,
        max_lag=max_lag,
        client=client,
        what=f"the pre-limit diffusion at n = {n}",
    )
    push = out.pop("push")
    # report in p's coordinates: z = √n(G − m) = (Q + √n(c_n − m_1), Y − √n m_2)
    s1, s2 = sq * (c_n - p.m[0]), -sq * p.m[1]
    m = out["moments"]
    out["moments"] = Moments(m.mean_z1 + s1, m.mean_z2 + s2, m.var_z1, m.var_z2, m.cov_z1z2, stderr=m.stderr)
    out["grid"] = out["grid"] + np.array([s1, s2])
    out["max_q"] = out["max_q"] + s1
    params = {
        "n": n,
        "d_n": d,
        "lambda_n": lam,
        "c_n": c_n,
        "zeta_n": zeta_n,
        "replace": p.replace,
        "q_max": qmax,
        "effective_c": d / (sq * c_n),
    }
    return LimitSDE(
        regime=f"pre-{p.regime}",
        params=params,
        push_rate=push[0],
        push_rate_stderr=push[1],
        y_push_rate=push[2],
        y_push_rate_stderr=push[3],
        **out,
    )


def limit_for(p: RegimeParams, **kw: Any) -> LimitSDE:
    """:func:`limit_sde` with the limit parameters matched at ``p`` (``p.limit``).

    Parameters
    ----------
    p : RegimeParams
    **kw
        Further arguments of :func:`limit_sde`.

    Returns
    -------
    LimitSDE

    Examples
    --------
    >>> from supermarket.fluctuations import regime_c
    >>> r = limit_for(regime_c(100, 1.0, warn=False), paths=4, time=1.0, burn_in=0.2, dt=0.01, record_paths=0)
    >>> r.regime, r.max_q <= 0
    ('c', True)
    """
    return limit_sde(p.regime, **p.limit, **kw)


def limit_closed_form(kappa: float) -> Moments:
    """Stationary moments of the regime-(a) limit (docs/model.md §8, derived):
    ``E Z = 0``, ``Var Z_1 = 2/(2+κ)``, ``Cov = κ/(2+κ)``, ``Var Z_2 = κ²/(2+κ)``.

    Parameters
    ----------
    kappa : float
        ``κ > 0``.

    Returns
    -------
    Moments
        Exact (``stderr=None``).

    Raises
    ------
    ValueError
        ``kappa`` not a positive number.

    Examples
    --------
    >>> limit_closed_form(2.0).var_z2
    1.0
    """
    k = check_positive_float("kappa", kappa)
    return Moments(
        mean_z1=0.0, mean_z2=0.0, var_z1=2 / (2 + k), var_z2=k * k / (2 + k), cov_z1z2=k / (2 + k), stderr=None
    )


def limit_acf_a(kappa: float, lags: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Autocorrelations of ``Z_1`` and ``Z_2`` in the stationary regime-(a) limit:
    ``Cov(Z(t+τ), Z(t)) = e^{Aτ} Σ`` with ``A = [[−(1+κ), 1], [κ, −1]]`` (derived).

    Parameters
    ----------
    kappa : float
    lags : array_like
        Time lags.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)

    Examples
    --------
    >>> a1, a2 = limit_acf_a(1.0, [0.0, 1.0])
    >>> a1.round(4).tolist(), a2.round(4).tolist()
    ([1.0, 0.3777], [1.0, 0.7866])
    """
    from scipy.linalg import expm

    k = check_positive_float("kappa", kappa)
    A = np.array([[-(1 + k), 1.0], [k, -1.0]])
    m = limit_closed_form(k)
    S = np.array([[m.var_z1, m.cov_z1z2], [m.cov_z1z2, m.var_z2]])
    lags = np.asarray(lags, dtype=float)
    c = np.array([expm(A * t) @ S for t in lags])
    return c[:, 0, 0] / S[0, 0], c[:, 1, 1] / S[1, 1]
