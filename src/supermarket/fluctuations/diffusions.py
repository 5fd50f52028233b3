"""The limit diffusions of regimes (a), (b), (c) and the pre-limit diffusion (docs/model.md §8,
derived), by Euler–Maruyama over independent paths (engine :mod:`supermarket.engines.sde`)."""

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
from .moments import Moments, _grid_fields, _moments_from_blocks
from .regimes import RegimeParams, _nonneg, _positive_zeta, _real
from .runs import SDE_STEPS_PER_SECOND, _check_grid, _default_burn_in, _run_jobs, _ScaledRun, _workers, check_work

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

#: Euler steps per kernel call (Ctrl-C is honoured between calls; the numbers do not depend on it).
CHUNK_STEPS = 1 << 21


_PUSH = ("push_rate", "push_rate_stderr", "y_push_rate", "y_push_rate_stderr")


@dataclass(frozen=True, kw_only=True)
class LimitSDE(_ScaledRun):
    """Stationary statistics of a limit (``regime`` "a", "b", "c") or pre-limit ("pre-a", …)
    diffusion by Euler–Maruyama (docs/model.md §8, derived).

    ``max_q``: the largest first coordinate on any path; ``push_rate``, ``y_push_rate``:
    ``E[dU]/dt`` and ``E[Y dU]/dt`` of the pushing (``None`` without one), with standard errors.

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
        out = {k: getattr(self, k) for k in ("regime", "params", "paths", "time", "burn_in", "dt", "seconds", "max_q")}
        out.update(method=method, **self.moments.to_dict())
        if self.push_rate is not None:
            out.update({k: getattr(self, k) for k in _PUSH})
        return out


SDE_CHUNK = 32  # paths per kernel call (chunk j: child j of the seed)
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


@dataclass(frozen=True)
class _Diffusion:
    """A diffusion of the SDE engine: its kind (``supermarket.engines.sde.KIND_*``), the
    coefficients ``par``, the start ``z0`` of every path and ``what`` it is, in words."""

    kind: int
    par: list
    z0: tuple
    what: str


@dataclass(frozen=True)
class _PathsRun:
    """How the paths of a diffusion are run, as the user gave it (checked by :func:`_run_sde`):
    ``paths`` paths, each ``burn_in`` then ``time`` by steps of ``dt``, the first
    ``record_paths`` kept on a grid of spacing ``grid_dt`` up to the lag ``max_lag``; chunk
    ``j`` from child ``j`` of ``seed``, on ``workers`` or a Dask ``client``."""

    paths: Any
    time: Any
    burn_in: float
    dt: Any
    grid_dt: Any
    record_paths: Any
    max_lag: Any
    seed: Any
    workers: Any
    client: Any


def _run_sde(diffusion: _Diffusion, run: _PathsRun) -> dict:
    """The driver of :func:`limit_sde` and :func:`prelimit_sde`: the fields of a :class:`LimitSDE`."""
    from ..engines.sde import NS

    kind, z0, what = diffusion.kind, diffusion.z0, diffusion.what
    burn_in, seed, workers, max_lag, client = run.burn_in, run.seed, run.workers, run.max_lag, run.client
    P = check_int("paths", run.paths, minimum=2)
    time = check_positive_float("time", run.time)
    dt = check_positive_float("dt", run.dt)
    grid_dt = check_positive_float("grid_dt", run.grid_dt)
    Rp = check_int("record_paths", run.record_paths, minimum=0, maximum=P)
    rec_every = max(1, int(round(grid_dt / dt)))
    grid_dt = rec_every * dt
    steps_f = time / dt
    _check_grid(
        Rp,
        steps_f / rec_every,
        f"{what}: time = {time:g} with grid_dt = {grid_dt:g} and {Rp} recorded path(s)",
        "lower the time or record fewer paths",
    )
    check_work(
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
    par = np.asarray(diffusion.par, dtype=float)
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
    done = _run_jobs(_sde_task, tasks, workers, client)
    secs = _time.perf_counter() - t0
    ps = np.concatenate([o[0] for o in done])
    rec = np.concatenate([o[1] for o in done]) if done else np.zeros((0, G, 2))
    T = n_steps * dt
    mom = _moments_from_blocks(ps[:, 3:8] * dt / T)
    push = dict(zip(_PUSH, (*mean_stderr(ps[:, 8] / T), *mean_stderr(ps[:, 9] / T))))
    out = dict(paths=P, time=time, burn_in=burn_in, dt=dt, seconds=secs, moments=mom, max_q=float(ps[:, 2].max()))
    return dict(**out, **_grid_fields(rec, G, grid_dt, max_lag, Rp > 0 and G >= 8), push=push)


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
    """The limit diffusion of ``regime`` (docs/model.md §8, derived) over many independent paths.

    Parameters
    ----------
    regime : {"a", "b", "c"}
        (a): ``kappa``; (b): ``c``, ``zeta``; (c): ``zeta`` (reflected at ``Q <= 0``).
    reflection : {"bridge", "projection"}
        Regime (c)'s reflection scheme (docs/model.md §8, "Numerical schemes").
    paths, time, burn_in, dt
        Each path runs ``burn_in`` (default 20, at least ``5/ζ²`` in (c)) then ``time``.
    record_paths, grid_dt, max_lag
        Paths kept on a grid of spacing ``grid_dt``; largest autocorrelation lag.
    seed, workers, client
        Chunk ``j`` of 32 paths: child ``j`` of ``seed`` (results do not depend on ``workers``).

    Returns
    -------
    LimitSDE
        Moments with standard errors over the independent paths.

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
    what = f"the regime-({regime}) limit diffusion"
    run = _PathsRun(paths, time, burn_in, dt, grid_dt, record_paths, max_lag, seed, workers, client)
    out = _run_sde(_Diffusion(kind, par, z0, what), run)
    push = out.pop("push")
    return LimitSDE(regime=regime, params=params, **out, **(push if regime == "c" else {}))


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
    """The pre-limit diffusion at ``p``: levels 1 and 2 with the finite-``n`` coefficients
    (docs/model.md §8, derived).

    Parameters
    ----------
    p : RegimeParams
    paths, time, burn_in, dt, record_paths, grid_dt, max_lag, seed, workers, client
        As in :func:`limit_sde` (``burn_in``'s default with ``ζ = ζ_n``).

    Returns
    -------
    LimitSDE
        ``regime = "pre-" + p.regime``, moments in ``p``'s coordinates.

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
    what = f"the pre-limit diffusion at n = {n}"
    run = _PathsRun(paths, time, burn_in, dt, grid_dt, record_paths, max_lag, seed, workers, client)
    out = _run_sde(_Diffusion(KIND_PRE, par, z0, what), run)
    push = out.pop("push")
    # report in p's coordinates: z = √n(G − m) = (Q + √n(c_n − m_1), Y − √n m_2)
    s1, s2 = sq * (c_n - p.m[0]), -sq * p.m[1]
    m = out["moments"]
    out["moments"] = Moments(m.mean_z1 + s1, m.mean_z2 + s2, m.var_z1, m.var_z2, m.cov_z1z2, stderr=m.stderr)
    out["grid"] = out["grid"] + np.array([s1, s2])
    out["max_q"] = out["max_q"] + s1
    params = dict(n=n, d_n=d, lambda_n=lam, c_n=c_n, zeta_n=zeta_n, replace=p.replace, q_max=qmax)
    params["effective_c"] = d / (sq * c_n)
    return LimitSDE(regime=f"pre-{p.regime}", params=params, **push, **out)


def limit_for(p: RegimeParams, **kw: Any) -> LimitSDE:
    """:func:`limit_sde` with the limit parameters matched at ``p`` (``p.limit``).

    Parameters
    ----------
    p : RegimeParams
    **kw
        Arguments of :func:`limit_sde`.

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
    """Stationary moments of the regime-(a) limit, exact (docs/model.md §8, derived).

    Parameters
    ----------
    kappa : float
        ``κ > 0``.

    Returns
    -------
    Moments

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
    """Autocorrelations of ``Z_1``, ``Z_2`` in the stationary regime-(a) limit: ``e^{Aτ} Σ`` (derived).

    Parameters
    ----------
    kappa : float
    lags : array_like

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
