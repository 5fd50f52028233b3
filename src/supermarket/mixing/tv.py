"""Total-variation distance to equilibrium over time of ``‖X_t‖₁`` beside the coupling bound
``P(τ > t)`` (docs/model.md §2, §6; docs/mixing.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from ..engines.rng import state_from_seed_sequence
from ..model import Params, check_int, spawn_seeds
from ..result import Result, pyplot, save_figure, text_table
from ..result import fmt as _fmt
from ..system.states import start_counts
from .coalescence_time import _default_burn_in, start_bounds
from .coupling import MAX_STEPS, _burned, _Chains, _check_steps, _check_work, _counts, _map, _start_label, _workers

__all__ = ["TVCurve", "tv_curve"]


def _tv_task(args):
    n, d, lam, replace, counts, burn_in, steps, every, ss = args
    p = Params(n, d, lam, replace=replace)
    rng = state_from_seed_sequence(ss)
    T = steps // every
    # coupled pair (stationary copy, copy from x): the coupling bound P(τ > t)
    stat = _burned(p, start_counts(n, d, lam, "fixed-point"), burn_in, rng)
    pair = _Chains(p, [stat, counts], record_every=every, records=T)
    pair.run(steps, rng)
    # an independent stationary copy: the reference law of the total number of customers
    ref = _burned(p, start_counts(n, d, lam, "fixed-point"), burn_in, rng)
    ref2 = _Chains(p, [ref], record_every=every, records=T)
    ref2.run(steps, rng)
    return pair.rec_total[1].copy(), pair.rec_dist[1].copy(), ref2.rec_total[0].copy()


def _binned_tv(a: np.ndarray, b: np.ndarray, edges: np.ndarray) -> float:
    ha = np.histogram(a, bins=edges)[0] / a.size
    hb = np.histogram(b, bins=edges)[0] / b.size
    return 0.5 * float(np.abs(ha - hb).sum())


@dataclass(frozen=True)
class TVCurve(Result):
    """TV distance to equilibrium of ``‖X_t‖₁`` (binned: a lower estimate) at ``steps``, the
    coupling bound ``P(τ > t)`` (an upper one) and the noise floor (mean over 200 resamples of
    the reference) (docs/mixing.md).

    Examples
    --------
    >>> c = tv_curve(20, 2, 0.5, replications=10, points=5, seed=1, workers=1)
    >>> c.tv.shape, bool(((c.tv >= 0) & (c.tv <= 1)).all()), c.to_frame().shape
    ((5,), True, (5, 5))
    """

    params: Params
    start: str
    replications: int
    steps: np.ndarray
    time: np.ndarray
    tv: np.ndarray
    noise_floor: float
    coupling_bound: np.ndarray
    mean_total: np.ndarray
    stationary_mean_total: float
    bins: int

    def first_below_floor(self) -> int | None:
        """First recorded step at which the TV estimate is at or below twice the noise floor."""
        idx = np.nonzero(self.tv <= 2 * self.noise_floor)[0]
        return int(self.steps[idx[0]]) if idx.size else None

    _extra: ClassVar[dict[str, str]] = {"first_below_2x_floor_steps": "first_below_floor"}
    _order = ("params", "start", "replications", "bins")
    _columns: ClassVar[dict[str, str]] = {
        "step": "steps",
        "time": "time",
        "tv": "tv",
        "coupling_bound": "coupling_bound",
        "mean_total": "mean_total",
    }

    def summary(self) -> str:
        """The curve as a text table.

        Examples
        --------
        >>> r = tv_curve(20, 2, 0.5, replications=10, steps=200, points=4, burn_in=100, workers=1)
        >>> r.summary().splitlines()[0]
        'TV distance to equilibrium of ‖X_t‖₁ from empty: n=20 d=2 λ=0.5, 10 replications, 4 bins'
        """
        p = self.params
        head = (
            f"TV distance to equilibrium of ‖X_t‖₁ from {self.start}: n={p.n} d={p.d} λ={p.lam:g}, "
            f"{self.replications} replications, {self.bins} bins"
        )
        rows = [
            [str(int(st)), _fmt(t), f"{tv:.3f}", f"{cb:.3f}", _fmt(m)]
            for st, t, tv, cb, m in zip(self.steps, self.time, self.tv, self.coupling_bound, self.mean_total)
        ]
        first = self.first_below_floor()
        tail = (
            f"noise floor {self.noise_floor:.3f}; stationary mean of ‖X‖₁ {self.stationary_mean_total:.4g}; "
            f"first step at or below 2 × floor: {first if first is not None else 'none'}"
        )
        return "\n".join([head, text_table(["step", "time", "TV (binned)", "P(τ > t)", "mean ‖X‖₁"], rows), tail])

    def plot(self, path: Any = None) -> Any:
        """TV estimate and coupling bound against time; saved at ``path`` when given."""
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(self.time, self.tv, marker="o", ms=3, label="TV of ‖X_t‖₁ (binned, lower estimate)")
        ax.plot(self.time, self.coupling_bound, label="P(τ > t) (coupling, upper bound)")
        ax.axhline(self.noise_floor, color="grey", ls=":", label="noise floor")
        ax.set(xlabel="time units", ylabel="distance to equilibrium")
        ax.legend()
        plt.close(fig)
        return save_figure(fig, path)


def tv_curve(
    n: int,
    d: int,
    lam: float | str,
    *,
    start: str | ArrayLike = "empty",
    replications: int = 200,
    steps: int | None = None,
    points: int = 40,
    seed: Any = 0,
    burn_in: int | None = None,
    bins: int | None = None,
    replace: bool = True,
    workers: int | None = None,
    client: Any = None,
    progress: Any = None,
) -> TVCurve:
    """TV distance to equilibrium over time of ``‖X_t‖₁``, with the coupling bound from the same
    replications (:class:`TVCurve`).

    Parameters
    ----------
    n, d, lam : int, int, float
    start : str or array_like, default "empty"
    replications : int, default 200
        At least 10.
    steps : int, optional
        Horizon; default 3 × the larger of the start's own order (× (1+λ)) and the upper order.
    points : int, default 40
        Recorded times.
    seed : int or numpy.random.SeedSequence, default 0
    burn_in : int, optional
        As for :func:`coalescence`.
    bins : int, optional
        Quantile bins of the stationary law (default ``⌈√replications⌉``, at most 30).
    replace : bool, default True
    workers, client, progress
        As for :func:`coalescence`.

    Returns
    -------
    TVCurve

    Examples
    --------
    >>> c = tv_curve(20, 2, 0.5, replications=10, points=5, seed=1, workers=1)
    >>> bool(c.coupling_bound[-1] <= c.coupling_bound[0])
    True
    """
    p = Params(n, d, lam, replace=replace)
    replications = check_int("replications", replications, minimum=10, maximum=10**6)
    points = check_int("points", points, minimum=2, maximum=10_000)
    label = _start_label(start)
    counts = _counts(p, start)
    burn = _default_burn_in(p) if burn_in is None else _check_steps("burn_in", burn_in)
    if steps is None:
        b = start_bounds(p.n, p.d, p.lam, start) if isinstance(start, str) else {}
        base = max((b.get("lower_start") or 0.0) * (1 + p.lam), b.get("upper") or 0.0)
        steps = int(3 * base) if base else burn
    steps = check_int("steps", steps, minimum=points, maximum=MAX_STEPS)
    every = steps // points
    bins = (
        min(30, math.ceil(math.sqrt(replications)))
        if bins is None
        else check_int("bins", bins, minimum=2, maximum=1000)
    )
    _check_work(
        float(replications) * (2 * burn + 2 * every * points),
        f"tv_curve: 2 × (burn-in {burn:.3g} + horizon {every * points:.3g}) steps × {replications} replication(s)",
        "lower burn_in, steps or replications",
        _workers(workers, replications),
    )
    seeds = spawn_seeds(seed, replications)
    tasks = [(p.n, p.d, p.lam, p.replace, counts, burn, every * points, every, ss) for ss in seeds]
    out = _map(_tv_task, tasks, workers, client, progress)
    X = np.stack([o[0] for o in out])  # (R, T)
    D = np.stack([o[1] for o in out])
    S = np.stack([o[2] for o in out])
    ref = S.ravel()
    qs = np.quantile(ref, np.linspace(0, 1, bins + 1))
    edges = np.unique(qs)
    edges[0], edges[-1] = -np.inf, np.inf
    tv = np.array([_binned_tv(X[:, j], ref, edges) for j in range(X.shape[1])])
    rng = np.random.default_rng(spawn_seeds(seed, replications + 1)[replications])
    floor = float(np.mean([_binned_tv(rng.choice(ref, replications), ref, edges) for _ in range(200)]))
    grid = every * np.arange(1, X.shape[1] + 1)
    return TVCurve(
        params=p,
        start=label,
        replications=replications,
        steps=grid,
        time=grid / (p.n * (1 + p.lam)),
        tv=tv,
        noise_floor=floor,
        coupling_bound=(D > 0).mean(axis=0),
        mean_total=X.mean(axis=0),
        stationary_mean_total=float(ref.mean()),
        bins=len(edges) - 1,
    )
