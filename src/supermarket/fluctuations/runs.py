"""What the chain and the diffusions share: the work and grid-memory limits checked before a
run, the job runner, the burn-in rule and the result base ``_ScaledRun``."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import parallel
from ..mixing.coupling import task_workers
from ..result import Result, frame, human_seconds, pyplot, save_figure
from .moments import Moments

__all__ = ["WorkWarning", "EVENTS_PER_SECOND", "SDE_STEPS_PER_SECOND", "REFUSE_EVENTS", "WARN_EVENTS", "MAX_GRID_BYTES"]


#: Rough speeds for the up-front estimates (one core).
EVENTS_PER_SECOND = 5.0e6
SDE_STEPS_PER_SECOND = 8.0e6
#: Refuse work above this many events (about a day; SDE steps scaled by the speed ratio);
#: warn above WARN_EVENTS (about two minutes).
REFUSE_EVENTS = 5 * 10**11
WARN_EVENTS = 6 * 10**8
#: Refuse recorded grids (``(replications or paths, points, 2)`` float64) above this size.
MAX_GRID_BYTES = 2 << 30


class WorkWarning(UserWarning):
    """A fluctuation run estimated, before it starts, to take long (above :data:`WARN_EVENTS`
    events; above :data:`REFUSE_EVENTS` a ``ValueError`` refuses it).

    Examples
    --------
    >>> import warnings
    >>> from supermarket.fluctuations import regime_a, simulate_fluctuations
    >>> p = regime_a(10**6, 1.0, warn=False)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", WorkWarning)
    ...     try:
    ...         simulate_fluctuations(p, time=1000.0, workers=1)
    ...     except WorkWarning as w:
    ...         print(str(w).split(": about")[0])
    the chain at n = 1e+06 for 1 × (burn-in 100 + time 1000) time units needs events (≈ 2nλ per time unit)
    """


def _human_bytes(b: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if b < 1024:
            return f"{b:.3g} {unit}"
        b /= 1024.0
    return f"{b:.3g} EiB"


def _check_grid(rows: int, points: float, what: str, option: str) -> None:
    need = float(rows) * float(points) * 2 * 8
    if need > MAX_GRID_BYTES:
        raise ValueError(
            f"{what} would record {float(rows) * float(points):.3g} grid points "
            f"({_human_bytes(need)}, more than {_human_bytes(MAX_GRID_BYTES)}); {option}"
        )


def check_work(units: float, speed: float, what: str, option: str, cores: int) -> None:
    secs = units / (speed * max(cores, 1))
    msg = f"{what}: about {units:.3g} in all, {human_seconds(secs)} at {speed:.2g}/s per core on {cores} core(s)"
    if units > REFUSE_EVENTS * (speed / EVENTS_PER_SECOND):
        raise ValueError(f"{msg}; refused: {option}")
    if units > WARN_EVENTS * (speed / EVENTS_PER_SECOND):
        warnings.warn(f"{msg}; {option} to shorten it", WorkWarning, stacklevel=3)


_workers = task_workers  # threads for the jobs: at most one per job (mixing's own rule)


def _run_jobs(fn, tasks, workers, client=None, progress=None) -> list:
    """``fn`` over ``tasks`` in order, on ``client`` (Dask) or ``workers`` threads; each task has its own seed."""
    out = parallel.map_tasks(
        fn, tasks, workers=_workers(workers, len(tasks)), client=client, backend="threads", progress=progress
    )
    assert out is not None  # collect=True (the default): the list of results
    return out


def _first_30(t: np.ndarray) -> int:
    """Points of the grid ``t`` in its first 30 time units (at least 2), the stretch a path plot shows."""
    return min(t.size, max(2, int(30 / (t[1] - t[0]))))


@dataclass(frozen=True, kw_only=True)
class _ScaledRun(Result):
    """The base of :class:`FluctuationSim` and :class:`LimitSDE`: moments, a recorded grid
    ``(rows, G, 2)`` at times ``t``, autocorrelations at ``lags`` (time units)."""

    time: float
    burn_in: float
    seconds: float
    moments: Moments
    t: np.ndarray = field(repr=False)
    grid: np.ndarray = field(repr=False)
    lags: np.ndarray = field(repr=False)
    acf_z1: np.ndarray = field(repr=False)
    acf_z2: np.ndarray = field(repr=False)
    acf_z1_stderr: np.ndarray = field(repr=False)
    acf_z2_stderr: np.ndarray = field(repr=False)

    def _label(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def _names(self) -> tuple[str, str]:  # pragma: no cover - overridden
        raise NotImplementedError

    def _header(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def to_frame(self) -> Any:
        """One row per moment (``source``, ``moment``, ``value``, ``stderr``)."""
        df = self.moments.to_frame()
        df.insert(0, "source", self._label())
        return df

    def acf_frame(self) -> Any:
        """One row per (coordinate, lag): ``acf``, ``stderr``."""
        acfs = (("z1", self.acf_z1, self.acf_z1_stderr), ("z2", self.acf_z2, self.acf_z2_stderr))
        return frame(
            [
                {"coordinate": name, "lag": float(lag), "acf": float(v), "stderr": float(e)}
                for name, a, se in acfs
                for lag, v, e in zip(self.lags, a, se)
            ]
        )

    def summary(self) -> str:
        """What was run, then the moments table."""
        return f"{self._label()}: {self._header()}\n{self.moments.summary()}"

    def plot(self, path: Any = None) -> Any:
        """A recorded path, histograms and autocorrelations; saved at ``path`` when given."""
        plt = pyplot()
        names = self._names()
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
        if self.grid.size and self.t.size > 1:
            k = _first_30(self.t)
            axes[0].plot(self.t[:k], self.grid[0, :k, 0], lw=0.7, label=names[0])
            axes[0].plot(self.t[:k], self.grid[0, :k, 1], lw=0.7, label=names[1])
            for j in (0, 1):
                axes[1].hist(self.grid[:, :, j].ravel(), bins=50, density=True, alpha=0.5, label=names[j])
        for a, se, nm in ((self.acf_z1, self.acf_z1_stderr, names[0]), (self.acf_z2, self.acf_z2_stderr, names[1])):
            if self.lags.size > 1:
                axes[2].errorbar(self.lags, a, yerr=se, lw=1, label=nm)
        for ax, xlabel in zip(axes, ("time", "value", "lag")):
            ax.set_xlabel(xlabel)
            ax.legend(fontsize=7)
        axes[2].set_ylabel("autocorrelation")
        fig.suptitle(self._label(), fontsize=9)
        fig.tight_layout()
        plt.close(fig)
        return save_figure(fig, path)


def _default_burn_in(regime, zeta, base: float) -> float:
    """Burn-in: ``base``, and in (c) at least ``5/ζ²`` (relaxation grows like ``ζ^{-2}``)."""
    if regime == "c" and zeta:
        return max(base, 5.0 / zeta**2)
    return base
