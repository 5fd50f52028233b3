"""What a perfect sampler returns (docs/model.md §12): :class:`PerfectResult`, :class:`BudgetExceeded`
and :func:`steps_per_time_unit`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import Params
from ..result import Result, frame

__all__ = ["PerfectResult", "BudgetExceeded", "steps_per_time_unit"]


class BudgetExceeded(RuntimeError):
    """A sample would exceed its time, memory or horizon budget (never truncated into an approximate
    one); ``completed`` holds the samples finished before (a :class:`PerfectResult`, or ``None``).

    Examples
    --------
    >>> from supermarket.perfect import sample
    >>> try:
    ...     sample(50, 2, 0.95, samples=1, max_time=1e-4)   # far too little time
    ... except BudgetExceeded as e:
    ...     print(e.completed)
    None
    """

    def __init__(self, message: str, completed: PerfectResult | None = None):
        super().__init__(message)
        self.completed = completed


def steps_per_time_unit(n: int, lam: float) -> float:
    """``n(1+λ)`` steps of the uniformized chain are one unit of continuous time (docs/model.md §1).

    Parameters
    ----------
    n : int
    lam : float

    Returns
    -------
    float

    Examples
    --------
    >>> steps_per_time_unit(10, 0.5)
    15.0
    """
    return n * (1.0 + lam)


@dataclass(frozen=True)
class PerfectResult(Result):
    """Exact stationary samples of the (n, d, λ) chain (docs/model.md §12).

    Attributes
    ----------
    params : Params
        The chain's parameters.
    samples : numpy.ndarray
        ``(samples, n)`` int64: one queue-lengths vector per sample, sorted longest first.
    coalescence_steps : numpy.ndarray
        The horizon ``T`` (steps) at which the copies from ``−T`` coalesced by time 0 (a
        power-of-two multiple of ``t0``; the least coalescing horizon lies in ``(T/2, T]``).
    coalescence_time : numpy.ndarray
        The same horizon in units of continuous time (``T / (n(1+λ))``).
    rounds : numpy.ndarray
        Doublings of the horizon needed per sample.
    work_steps : numpy.ndarray
        Steps actually simulated per sample (generation, regeneration and both copies).
    peak_memory : numpy.ndarray
        Bytes held by the sampler for each sample at its largest.
    seconds : float
        Wall-clock time of the call.
    seed : int or None
        The root seed's entropy (sample ``s`` used child ``s``).
    policy : str
        The dispatch rule (sampled as the JSQ(d) chain it is, docs/model.md §12).

    Examples
    --------
    >>> from supermarket.perfect import sample
    >>> r = sample(2, 2, 0.5, samples=3, seed=1)
    >>> r.samples.shape
    (3, 2)
    >>> bool((r.samples[:, 0] >= r.samples[:, 1]).all())    # sorted longest first
    True
    """

    params: Params
    samples: np.ndarray
    coalescence_steps: np.ndarray
    coalescence_time: np.ndarray
    rounds: np.ndarray
    work_steps: np.ndarray
    peak_memory: np.ndarray
    seconds: float
    seed: object = None
    t0: int = 0
    policy: str = "jsq-d"

    @property
    def counts(self) -> np.ndarray:
        """``(samples, max+1)`` counts: column ``i-1`` is ``c_i = #{queues with length >= i}``."""
        top = int(self.samples.max()) if self.samples.size else 0
        out = np.zeros((self.samples.shape[0], max(top, 1)), dtype=np.int64)
        for i in range(1, top + 1):
            out[:, i - 1] = (self.samples >= i).sum(axis=1)
        return out

    def mean_profile(self) -> tuple[np.ndarray, np.ndarray]:
        """``(mean, se)`` of ``u_i = c_i / n`` over samples, ``i = 1..max`` (s.e. = sd/√samples)."""
        u = self.counts / self.params.n
        S = u.shape[0]
        mean = u.mean(axis=0)
        se = u.std(axis=0, ddof=1) / math.sqrt(S) if S > 1 else np.full_like(mean, np.nan)
        return mean, se

    def to_dict(self) -> dict:
        """JSON-safe dictionary (``samples``: sorted queue-lengths vectors; times in time units)."""
        mean, se = self.mean_profile()
        return {
            "method": "dominated coupling from the past (docs/model.md §12)",
            "params": self.params.to_dict(),
            "policy": self.policy,
            "samples": [row.tolist() for row in self.samples],
            "coalescence_time": self.coalescence_time.tolist(),
            "coalescence_steps": self.coalescence_steps.tolist(),
            "steps_per_time_unit": steps_per_time_unit(self.params.n, self.params.lam),
            "rounds": self.rounds.tolist(),
            "work_steps": self.work_steps.tolist(),
            "peak_memory_bytes": self.peak_memory.tolist(),
            # u_mean, u_stderr: the names simulate and exact use; mean_u, se_u: the same, older names
            "u_mean": mean.tolist(),
            "u_stderr": [None if not math.isfinite(v) else float(v) for v in se],
            "mean_u": mean.tolist(),
            "se_u": [None if not math.isfinite(v) else float(v) for v in se],
            "seconds": float(self.seconds),
            "seed": self.seed,
            "t0_steps": int(self.t0),
        }

    def to_frame(self) -> Any:
        """One row per (sample, level): ``u = c_level / n`` and the sample's coalescence time."""
        c = self.counts
        S, L = c.shape
        return frame(
            {
                "sample": np.repeat(np.arange(S), L),
                "level": np.tile(np.arange(1, L + 1), S),
                "u": (c / self.params.n).ravel(),
                "coalescence_time": np.repeat(self.coalescence_time, L),
            }
        )

    def summary(self) -> str:
        """The text ``supermarket perfect`` prints."""
        p = self.params
        S = self.samples.shape[0]
        mean, se = self.mean_profile()
        rule = "" if self.policy == "jsq-d" else f", policy {self.policy}"
        lines = [
            f"perfect samples of the (n={p.n}, d={p.d}, λ={p.lam:g}) supermarket chain "
            f"({'with' if p.replace else 'without'} replacement{rule}): {S} sample(s), "
            f"dominated coupling from the past (docs/model.md §12)",
            "  i    mean u_i     s.e.",
        ]
        for i, (m, s) in enumerate(zip(mean, se), start=1):
            if i > 12 and m < 1e-3:
                break
            lines.append(f"{i:3d}  {m:10.6f}  {s:9.2e}" if math.isfinite(s) else f"{i:3d}  {m:10.6f}        —")
        t = self.coalescence_time
        lines.append(
            f"coalescence horizon (time units): mean {t.mean():.4g}, median {np.median(t):.4g}, "
            f"max {t.max():.4g}  ({steps_per_time_unit(p.n, p.lam):.6g} steps per time unit)"
        )
        lines.append(
            f"mean rounds {self.rounds.mean():.3g}; steps simulated per sample {self.work_steps.mean():.4g}; "
            f"peak memory {self.peak_memory.max() / 2**20:.3g} MiB; {self.seconds:.3g} s"
        )
        return "\n".join(lines)


def _result(p, rows, seconds, root, t0, policy="jsq-d") -> PerfectResult:
    """The result of ``rows`` ``(x, horizon, rounds, work, peak memory)``, one per sample."""
    xs = np.array([r[0] for r in rows], dtype=np.int64).reshape(len(rows), p.n)
    T, rounds, work, peak = (np.array([r[k] for r in rows], dtype=np.int64) for k in range(1, 5))
    entropy = root.entropy if isinstance(root.entropy, int) else None
    time = T / steps_per_time_unit(p.n, p.lam)
    return PerfectResult(p, xs, T, time, rounds, work, peak, float(seconds), seed=entropy, t0=t0, policy=policy)
