"""Coalescence of a copy from a start with a stationary copy: τ, ``t_mix(1/4) <= q75(τ)``
and the paper-000 orders (docs/model.md §2, §6; docs/mixing.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from .. import theory
from ..engines.rng import state_from_seed_sequence
from ..model import Params, as_seed_sequence, check_fraction, check_int, check_positive_int, spawn_seeds
from ..result import Result, frame, pyplot, save_figure, text_table
from ..result import fmt as _fmt
from ..stats import replication_error
from ..system.states import parse_start, start_counts
from .coupling import MAX_STEPS, _burned, _Chains, _check_steps, _check_work, _counts, _map, _start_label, _workers

__all__ = ["MixingResult", "coalescence", "order_statistic_ci", "start_bounds", "BURN_IN_FACTOR"]


def start_bounds(n: int, d: int, lam: float | str, start: str | ArrayLike) -> dict:
    """The paper-000 orders for a start (docs/model.md §6, constants taken as 1), in steps.

    Parameters
    ----------
    n, d, lam : int, int, float
    start : str or array_like
        A start spec (:mod:`supermarket.system.states`).

    Returns
    -------
    dict
        ``k``, ``upper``, ``lower`` and the start's own ``lower_start`` (docs/mixing.md); ``None``
        where undefined (``d = 1``).

    Examples
    --------
    >>> b = start_bounds(100, 2, 0.9, "good")
    >>> b["k"], b["lower"]
    (4, 800.0)
    """
    p = Params(n, d, lam)
    val: Any  # the start's integer value (parse_start), or None
    name, val = parse_start(start) if isinstance(start, str) else ("array", None)
    out: dict[str, Any] = {"k": None, "upper": None, "lower": None, "lower_start": None}
    if p.d >= 2:
        mb = theory.mixing_bounds(p.n, p.d, lam)
        out.update(k=mb.k, upper=mb.upper_steps, lower=mb.lower_steps, lower_start=mb.lower_steps)
    if name == "customers" and val:
        out["lower_start"] = theory.mixing_lower_customers(p.n, p.lam, val)
    elif name == "long":
        out["lower_start"] = theory.mixing_lower_long(p.n, val)
    return out


BURN_IN_FACTOR = 10


def _default_burn_in(p: Params) -> int:
    """Burn-in: 10 × the upper order (d >= 2), else 20 M/M/1 relaxation times (docs/model.md §6, §7)."""
    if p.d >= 2:
        up = theory.mixing_bounds(p.n, p.d, p.lam).upper_steps
        return int(min(max(BURN_IN_FACTOR * up, 20 * p.n), MAX_STEPS))
    relax = 1.0 / (1.0 - math.sqrt(p.lam)) ** 2
    return int(min(20 * relax * p.n * (1 + p.lam), MAX_STEPS))


def _default_budget(p: Params, start) -> int:
    """Default step budget: 20 × (burn-in + the start's own lower order × (1+λ))."""
    b = start_bounds(p.n, p.d, p.lam, start) if p.d >= 2 or isinstance(start, str) else {}
    extra = (b.get("lower_start") or 0.0) * (1 + p.lam)
    return int(min(20 * (_default_burn_in(p) + extra), MAX_STEPS))


# --------------------------------------------------------------------------- statistics
def order_statistic_ci(sample: ArrayLike, q: float, level: float = 0.95) -> tuple:
    """Distribution-free confidence interval for the ``q``-quantile from order statistics.

    Parameters
    ----------
    sample : array_like
        Observations (``inf`` for censored ones, larger than all others).
    q : float
        The quantile, in ``(0, 1)``.
    level : float, default 0.95

    Returns
    -------
    (estimate, low, high)
        ``inf`` where censored, ``None`` where a rank falls outside the sample.

    Examples
    --------
    >>> order_statistic_ci(range(1, 21), 0.5)
    (10.0, 6.0, 15.0)
    """
    x = np.sort(np.asarray(sample, dtype=float))
    R = x.size
    if R == 0:
        raise ValueError("empty sample")
    q = check_fraction("q", q, low=0.0, high=1.0, low_open=True, high_open=True)
    est = x[min(max(math.ceil(q * R), 1), R) - 1]
    a = (1 - level) / 2
    lo_rank = int(stats.binom.ppf(a, R, q))  # P(B <= lo_rank - 1) <= a
    hi_rank = int(stats.binom.ppf(1 - a, R, q)) + 1
    low = float(x[lo_rank - 1]) if lo_rank >= 1 else None
    high = float(x[hi_rank - 1]) if hi_rank <= R else None
    return float(est), low, high


CENSORED = "censored"
UNBOUNDED = "unbounded"


def _label(x, *, low=False):
    """A statistic for output: a float, ``"censored"``, or for a limit out of rank 0 / ``"unbounded"``."""
    if x is None:
        return 0.0 if low else UNBOUNDED
    if not math.isfinite(x):
        return CENSORED
    return float(x)


def _num(x):
    """A statistic as a float, or None when censored / unbounded."""
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


def _summary(taus: np.ndarray, budget: float, level=0.95) -> dict:
    """Mean with t-interval, median, q75, q90 with order-statistic intervals of τ (censored = inf)."""
    R = taus.size
    cens = ~np.isfinite(taus)
    nc = int(cens.sum())
    filled = np.where(cens, float(budget), taus)
    err = replication_error(filled)  # Student t on R − 1 degrees of freedom
    mean = err.mean
    half = err.half_width(level) if R > 1 else math.inf
    out = {
        "mean": mean,
        "mean_is_lower_bound": nc > 0,
        "ci": [max(mean - half, 0.0), CENSORED if nc else (mean + half if R > 1 else UNBOUNDED)],
    }
    for name, q in (("median", 0.5), ("q75", 0.75), ("q90", 0.9)):
        est, lo, hi = order_statistic_ci(taus, q, level)
        out[name] = _label(est)
        out[f"{name}_ci"] = [_label(lo, low=True), CENSORED if hi is None and nc else _label(hi)]
    out["censored"] = nc
    return out


def _coalescence_task(args):
    n, d, lam, replace, counts, burn_in, budget, ss = args
    p = Params(n, d, lam, replace=replace)
    rng = state_from_seed_sequence(ss)
    pair = _Chains(p, [_burned(p, start_counts(n, d, lam, "fixed-point"), burn_in, rng), counts])
    pair.run(budget, rng, stop_when_coalesced=True)
    t = int(pair.tau[1])
    return (t if t >= 0 else -1), pair.increases


def _ratio_num(x, bound):
    """``x / bound`` (None when either is missing, censored or zero)."""
    x = _num(x)
    if x is None or not bound:
        return None
    return float(x) / float(bound)


def _ratio(x, bound) -> str:
    r = _ratio_num(x, bound)
    return "—" if r is None else f"{r:.3g}"


# --------------------------------------------------------------------------- coalescence
@dataclass(frozen=True)
class MixingResult(Result):
    """Coalescence of a copy from ``start`` with a stationary copy (docs/model.md §2, §6).

    ``taus``: coalescence steps (``None``: censored); ``steps``, ``time``: their statistics
    (docs/mixing.md); ``bounds``: :func:`start_bounds`.

    Examples
    --------
    >>> r = coalescence(20, 2, 0.5, replications=10, seed=1, workers=1)
    >>> r.censored, len(r.to_frame())
    (0, 10)
    """

    params: Params
    start: str
    replications: int
    max_steps: int
    burn_in: int
    taus: tuple
    steps: dict
    time: dict
    bounds: dict
    increases: int
    seed_entropy: int

    @property
    def censored(self) -> int:
        return self.steps["censored"]

    @property
    def tmix_steps(self) -> int | None:
        """0.75-quantile of τ in steps, a bound on ``t_mix(1/4)`` (None when censored)."""
        return _num(self.steps["q75"])

    def to_dict(self) -> dict:
        p = self.params
        u = p.n * (1.0 + p.lam)
        b = self.bounds

        def t(x):
            return None if x is None else x / u

        keep = ("mean", "mean_is_lower_bound", "ci", "median", "median_ci", "q75", "q75_ci", "q90", "q90_ci")
        bound = {"upper": b["upper"], "lower": b["lower_start"], "lower_good": b["lower"]}
        return {
            "params": p.to_dict(),
            "start": self.start,
            "replications": self.replications,
            "max_steps": self.max_steps,
            "burn_in_steps": self.burn_in,
            "steps_per_time_unit": u,
            "k": b["k"],
            "censored": self.censored,
            "coalescence_steps": {key: self.steps[key] for key in keep},
            "coalescence_time": {key: self.time[key] for key in keep},
            "tmix_steps": self.steps["q75"],
            "tmix_ci_steps": self.steps["q75_ci"],
            "tmix_time": self.time["q75"],
            "tmix_ci_time": self.time["q75_ci"],
            **{f"tmix_over_bound_{k}": _ratio_num(self.steps["q75"], v) for k, v in bound.items()},
            **{f"bound_{k}_steps": v for k, v in bound.items()},
            **{f"bound_{k}_time": t(v) for k, v in bound.items()},
            "tmix_note": "t_mix(1/4) <= 0.75-quantile of the coalescence time, since d_TV(t) <= P(tau > t) "
            "(docs/model.md §2)",
            "bounds_note": "paper 000 orders (docs/model.md §6), constants taken as 1; the upper "
            "order holds from a good state",
            "coupling_increases": self.increases,
            "taus": [CENSORED if x is None else x for x in self.taus],
        }

    def to_frame(self) -> Any:
        """One row per replication (``tau_steps``, ``tau_time`` NaN when censored).

        Examples
        --------
        >>> r = coalescence(30, 2, 0.5, replications=3, seed=1, workers=1)
        >>> r.to_frame().shape
        (3, 4)
        """
        u = self.params.n * (1.0 + self.params.lam)
        steps = np.array([np.nan if t is None else float(t) for t in self.taus])
        return frame(
            {
                "replication": np.arange(self.replications),
                "tau_steps": steps,
                "tau_time": steps / u,
                "censored": np.isnan(steps),
            }
        )

    def summary(self) -> str:
        """The text ``supermarket mixing`` prints.

        Examples
        --------
        >>> r = coalescence(30, 2, 0.5, replications=3, seed=1, workers=1)
        >>> r.summary().splitlines()[0]
        'supermarket mixing  n=30  d=2  λ=0.5  from fixed-point  replications=3  k=1'
        """
        out = self.to_dict()
        p = self.params
        lines = [
            f"supermarket mixing  n={p.n}  d={p.d}  λ={p.lam:g}  from {self.start}  "
            f"replications={self.replications}  "
            + (f"k={out['k']}" if out["k"] is not None else "k: none (d = 1, no paper-000 orders)"),
            f"stationary copy: rounded fixed point after {self.burn_in} steps; budget {self.max_steps} "
            f"steps per pair; {out['steps_per_time_unit']:.6g} steps = 1 time unit",
            "",
        ]
        s, u = out["coalescence_steps"], out["coalescence_time"]

        def ci(pair):
            return f"[{_fmt(pair[0])}, {_fmt(pair[1])}]"

        mean = "mean (lower bound: censored)" if s["mean_is_lower_bound"] else "mean"
        stats_rows = ((mean, "mean", "ci"), ("median", "median", "median_ci"), ("q90", "q90", "q90_ci"))
        rows = [
            [label, _fmt(s[k]), ci(s[c]), _fmt(u[k]), ci(u[c])]
            for label, k, c in (*stats_rows, ("t_mix(1/4) ≤ q75", "q75", "q75_ci"))
        ]
        lines.append(
            text_table(
                ["", "steps", "95% CI (steps)", "time units", "95% CI (time)"],
                rows,
                title="Coalescence time τ (sorted coupling, docs/model.md §2)",
            )
        )
        if self.censored:
            lines.append(
                f"{self.censored} of {self.replications} pairs did not coalesce within "
                f"{self.max_steps} steps (censored)"
            )

        def ratio(bound):
            q, lo_hi = _num(out["tmix_steps"]), out["tmix_ci_steps"]
            if q is None or not bound:
                return "— (censored)" if q is None else "—"
            return f"{_ratio(q, bound)} [{_ratio(lo_hi[0], bound)}, {_ratio(lo_hi[1], bound)}]"

        names = [("upper k d^(k−1) n log n (from a good state)", "upper"), ("lower d^(k−1) n", "lower_good")]
        if out["bound_lower_steps"] != out["bound_lower_good_steps"]:
            names.append((f"lower from {self.start}", "lower"))
        b = [
            [name, _fmt(out[f"bound_{k}_steps"]), _fmt(out[f"bound_{k}_time"]), ratio(out[f"bound_{k}_steps"])]
            for name, k in names
        ]
        lines += [
            "",
            text_table(
                ["bound", "steps", "time units", "q75 / bound [95% CI]"],
                b,
                title="Paper 000 orders (docs/model.md §6, constants taken as 1)",
            ),
            "q75 / bound: the measured bound on t_mix(1/4) (q75 of τ) over the order; the orders' "
            "constants are 1, so only how the ratio changes with n, d, k is the paper's claim",
        ]
        return "\n".join(lines)

    def plot(self, path: Any = None) -> Any:
        """The empirical ``P(τ > t) >= d_TV(t)`` with the paper-000 orders; saved at ``path`` when given."""
        plt = pyplot()
        p = self.params
        u = p.n * (1.0 + p.lam)
        t = np.sort(np.array([np.inf if x is None else x / u for x in self.taus]))
        fig, ax = plt.subplots(figsize=(6, 4))
        finite = t[np.isfinite(t)]
        surv = 1.0 - np.arange(1, finite.size + 1) / t.size
        ax.step(
            np.concatenate([[0.0], finite]), np.concatenate([[1.0], surv]), where="post", label="P(τ > t) (empirical)"
        )
        ax.axhline(0.25, color="grey", lw=0.8, ls=":")
        for key, label in (("bound_upper_time", "upper order"), ("bound_lower_time", "lower order")):
            v = self.to_dict()[key]
            if v is not None:
                ax.axvline(v, ls="--", lw=0.8, label=label)
        ax.set(xlabel="time units", ylabel="P(τ > t) ≥ d_TV(t)")
        ax.set_title(f"coalescence from {self.start}: n={p.n}, d={p.d}, λ={p.lam:g}")
        ax.legend()
        plt.close(fig)
        return save_figure(fig, path)


def coalescence_plan(
    n: int,
    d: int,
    lam: float | str,
    start: Any,
    replications: int,
    max_steps: int | None,
    burn_in: int | None,
    replace: bool,
    workers: int | None,
) -> tuple:
    """Validate the arguments of :func:`coalescence` (ValueError/TypeError naming the parameter, the
    start's memory and the burn-in's work included) before any work; a sweep's ``--check`` calls
    it with a task's arguments.  Returns ``(params, replications, start label, counts, burn-in,
    step budget)``."""
    p = Params(n, d, lam, replace=replace)
    replications = check_positive_int("replications", replications, maximum=10**7)
    label = _start_label(start)
    counts = _counts(p, start)
    burn = _default_burn_in(p) if burn_in is None else _check_steps("burn_in", burn_in)
    budget = (
        _default_budget(p, start)
        if max_steps is None
        else check_int("max_steps", max_steps, minimum=1, maximum=MAX_STEPS)
    )
    option = (
        "pass a smaller --burn-in-steps (burn_in=) or fewer --replications"
        if burn_in is None
        else "lower burn_in, n or replications"
    )
    label_b = "the default burn-in of 10 × k d^(k−1) n log n" if burn_in is None else "burn_in"
    _check_work(
        float(replications) * burn,
        f"{label_b} = {burn:.3g} steps per stationary copy × {replications} replication(s)",
        option,
        _workers(workers, replications),
    )
    return p, replications, label, counts, burn, budget


def coalescence(
    n: int,
    d: int,
    lam: float | str,
    *,
    start: str | ArrayLike = "good",
    replications: int = 100,
    seed: Any = 0,
    max_steps: int | None = None,
    burn_in: int | None = None,
    replace: bool = True,
    workers: int | None = None,
    client: Any = None,
    progress: Any = None,
) -> MixingResult:
    """Coalescence time of a copy from ``start`` with a stationary copy (docs/mixing.md).

    Parameters
    ----------
    n, d, lam : int, int, float
        Servers, choices and load (docs/model.md §1).
    start : str or array_like, default "good"
        Start spec of the non-stationary copy (:mod:`supermarket.system.states`).
    replications : int, default 100
    seed : int or numpy.random.SeedSequence, default 0
        Replication ``r``: child ``r`` (results do not depend on ``workers``).
    max_steps, burn_in : int, optional
        Step budget per pair and burn-in of the stationary copy (defaults in docs/mixing.md).
    replace : bool, default True
    workers, client, progress
        Threads (default: all cores) or a Dask client; a callback as replications finish.

    Returns
    -------
    MixingResult

    Examples
    --------
    >>> r = coalescence(20, 2, 0.5, replications=10, seed=1, workers=1)
    >>> r.steps["mean"] > 0 and r.steps["censored"] == 0
    True
    """
    p, replications, label, counts, burn, budget = coalescence_plan(
        n, d, lam, start, replications, max_steps, burn_in, replace, workers
    )
    root = as_seed_sequence(seed)
    seeds = spawn_seeds(root, replications)
    tasks = [(p.n, p.d, p.lam, p.replace, counts, burn, budget, ss) for ss in seeds]
    out = _map(_coalescence_task, tasks, workers, client, progress)
    taus = np.array([t if t >= 0 else math.inf for t, _ in out], dtype=float)
    s = _summary(taus, budget)
    u = p.n * (1.0 + p.lam)
    tu = _summary(taus / u, budget / u)
    bounds = start_bounds(p.n, p.d, p.lam, start) if isinstance(start, str) else start_bounds(p.n, p.d, p.lam, "good")
    return MixingResult(
        params=p,
        start=label,
        replications=replications,
        max_steps=budget,
        burn_in=burn,
        taus=tuple(None if not math.isfinite(t) else int(t) for t in taus),
        steps=s,
        time=tu,
        bounds=bounds,
        increases=sum(i for _, i in out),
        seed_entropy=int(root.entropy) if isinstance(root.entropy, int) else 0,
    )
