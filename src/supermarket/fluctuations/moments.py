"""Stationary moments of the scaled process and their error bars (docs/model.md §8, §9):
batch means checked against the integrated autocorrelation time (docs/fluctuations.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..result import Result, frame, text_table
from ..stats import mean_stderr

__all__ = ["KEYS", "BATCH_TAU_FACTOR", "Moments", "integrated_autocorrelation_time", "autocorrelation"]

#: The five stationary moments of ``(z1, z2)``, in the order every table uses.
KEYS = ("mean_z1", "mean_z2", "var_z1", "var_z2", "cov_z1z2")


@dataclass(frozen=True)
class Moments(Result):
    """Stationary mean, variance and covariance of ``(z1, z2)``, with standard errors (``None``: exact).

    ``tau_int``: the slowest functional's integrated autocorrelation time (chain only);
    ``adequate``: batches at least :data:`BATCH_TAU_FACTOR` of them long (``False``: too short
    to know the error bars, ``note`` says why; ``None``: does not apply).

    Examples
    --------
    >>> from supermarket.fluctuations import limit_closed_form
    >>> m = limit_closed_form(1.0)
    >>> round(m.var_z1, 4), m.stderr is None
    (0.6667, True)
    """

    mean_z1: float
    mean_z2: float
    var_z1: float
    var_z2: float
    cov_z1z2: float
    stderr: dict[str, float] | None = None
    tau_int: float | None = None
    adequate: bool | None = None
    note: str = ""
    time_needed: float | None = None  # not adequate: the time per replication advised (with margin)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: float(getattr(self, k)) for k in KEYS}
        # a run too short to know its own error keeps no error bar: null, the reason in error_bars_note
        out["stderr"] = (
            None
            if self.stderr is None
            else {k: None if self.adequate is False else float(self.stderr[k]) for k in KEYS}
        )
        if self.tau_int is not None:
            out["tau_int"] = float(self.tau_int) if math.isfinite(self.tau_int) else None
        if self.adequate is not None:
            out["error_bars_adequate"] = bool(self.adequate)
        if self.note:
            out["error_bars_note"] = self.note
        if self.time_needed is not None:
            out["time_needed"] = float(self.time_needed)
        return out

    def to_frame(self) -> Any:
        """One row per moment (``moment``, ``value``, ``stderr``; NaN for exact values).

        Examples
        --------
        >>> from supermarket.fluctuations import limit_closed_form
        >>> limit_closed_form(1.0).to_frame()["value"].round(4).tolist()
        [0.0, 0.0, 0.6667, 0.3333, 0.3333]
        """
        return frame(
            [
                {
                    "moment": k,
                    "value": float(getattr(self, k)),
                    "stderr": float(self.stderr[k]) if self.stderr else np.nan,
                }
                for k in KEYS
            ]
        )

    def summary(self) -> str:
        """The five moments as a text table (± standard error where there is one).

        Examples
        --------
        >>> from supermarket.fluctuations import limit_closed_form
        >>> print(limit_closed_form(2.0).summary())
        moment    value
        --------  -----
        mean_z1       0
        mean_z2       0
        var_z1      0.5
        var_z2        1
        cov_z1z2    0.5
        """
        rows = [[k, f"{getattr(self, k):.6g}" + (f" ± {self.stderr[k]:.2g}" if self.stderr else "")] for k in KEYS]
        out = text_table(["moment", "value"], rows)
        if self.note:
            out += f"\nerror bars: {self.note}"
        return out


def _moments_from_blocks(avg: np.ndarray) -> Moments:
    """Moments from block time-averages ``avg[b] = (Z1, Z2, Z1², Z2², Z1Z2)``, batch-means errors
    on linearised pseudo-values (docs/fluctuations.md, "Error bars must outlast the correlation")."""
    avg = np.asarray(avg, dtype=float)
    B = avg.shape[0]
    mu = avg.mean(axis=0)
    m1, m2 = mu[0], mu[1]
    vals: dict[str, Any] = {
        "mean_z1": float(m1),
        "mean_z2": float(m2),
        "var_z1": float(mu[2] - m1 * m1),
        "var_z2": float(mu[3] - m2 * m2),
        "cov_z1z2": float(mu[4] - m1 * m2),
    }
    pseudo = {
        "mean_z1": avg[:, 0],
        "mean_z2": avg[:, 1],
        "var_z1": avg[:, 2] - 2 * m1 * avg[:, 0],
        "var_z2": avg[:, 3] - 2 * m2 * avg[:, 1],
        "cov_z1z2": avg[:, 4] - m2 * avg[:, 0] - m1 * avg[:, 1],
    }
    se = {k: (mean_stderr(v)[1] if B > 1 else float("nan")) for k, v in pseudo.items()}
    return Moments(**vals, stderr=se)


#: Integrated autocorrelation times a batch must last (the lag-one correlation of batch means
#: is then below ~1/(2·this)).
BATCH_TAU_FACTOR = 10.0


def integrated_autocorrelation_time(series: ArrayLike, dt: float, c: float = 5.0) -> float:
    """``τ = dt·(1 + 2 Σ_k ρ_k)`` with Sokal's window (the least ``W >= c·τ(W)``), pooled over
    independent runs; ``inf`` when no window fits in a quarter of a run (docs/fluctuations.md).

    Parameters
    ----------
    series : array_like
        ``(R, G)`` (``R`` independent runs) or ``(G,)``.
    dt : float
        Grid spacing (time units).
    c : float, default 5.0
        Sokal's window constant.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> integrated_autocorrelation_time(np.random.default_rng(0).normal(size=(4, 1000)), 0.1)
    0.1
    """
    s = np.atleast_2d(np.asarray(series, dtype=float))
    R, G = s.shape
    x = s - s.mean()
    var = float((x * x).mean())
    if var <= 0 or G < 8:
        return 0.0 if var <= 0 else math.inf
    f = np.fft.rfft(x, 2 * G, axis=1)
    ac = np.fft.irfft(f * np.conj(f), axis=1)[:, :G].sum(axis=0) / (R * (G - np.arange(G)))
    rho = ac / ac[0]
    tau = 1.0 + 2.0 * np.cumsum(rho[1:])  # tau(W) in steps, W = 1..G-1
    W = np.arange(1, G)
    ok = np.nonzero(W >= c * tau)[0]
    if ok.size == 0 or W[ok[0]] > G // 4:
        return math.inf
    return float(max(tau[ok[0]], 1.0) * dt)


ADVICE_MARGIN = 3.0  # the advised time: this × what the estimated τ needs (a short run's τ is noisy) ...
ADVICE_FLOOR = 4.0  # ... and at least this × the run's own time


def _round_up(x: float) -> str:
    """``x`` rounded up to two significant digits, as text (``217.3`` → ``"220"``)."""
    if not math.isfinite(x) or x <= 0:
        return f"{x:g}"
    e = 10 ** (math.floor(math.log10(x)) - 1)
    return f"{math.ceil(x / e) * e:g}"


def _with_adequacy(m: Moments, grid: np.ndarray, grid_dt: float, batch_time: float, batches: int = 10) -> Moments:
    """``m`` with ``tau_int`` of the slowest functional and whether the batches outlast it."""
    z1, z2 = grid[:, :, 0], grid[:, :, 1]
    series = (z1, z2, (z1 - z1.mean()) ** 2, (z2 - z2.mean()) ** 2, (z1 - z1.mean()) * (z2 - z2.mean()))
    taus = [integrated_autocorrelation_time(s, grid_dt) for s in series]
    tau = max(taus) if taus else math.inf
    ok = math.isfinite(tau) and batch_time >= BATCH_TAU_FACTOR * tau
    need = None
    if ok:
        note = ""
    elif not math.isfinite(tau):
        need = float(_round_up(10 * batch_time * batches))
        note = (
            "too short to know: the run is too short to estimate its autocorrelation time, "
            f"so the batch-means error bars cannot be trusted; run longer: time at least {need:g} per "
            "replication (10 × this run)"
        )
    else:
        # a short run underestimates τ (Sokal's window sees only the fast part of the decay), so
        # the advice is never less than ADVICE_FLOOR × this run
        need = float(_round_up(max(ADVICE_MARGIN * BATCH_TAU_FACTOR * tau, ADVICE_FLOOR * batch_time) * batches))
        note = (
            f"too short to know: batches of {batch_time:.3g} time units are under "
            f"{BATCH_TAU_FACTOR:g} autocorrelation times ({tau:.3g} each), so the error bars "
            f"may be too small; run longer: time at least {need:g} per replication "
            f"({batches} batches of {BATCH_TAU_FACTOR:g} autocorrelation times, with "
            f"{ADVICE_MARGIN:g} × margin, and at least {ADVICE_FLOOR:g} × this run: a short run "
            "underestimates its autocorrelation time)"
        )
    return replace(m, tau_int=tau, adequate=ok, note=note, time_needed=need)


def _grid_fields(grid: np.ndarray, G: int, grid_dt: float, max_lag: float, acf: bool = True) -> dict:
    """The grid fields of a ``_ScaledRun``: times, the grid, lags and autocorrelations (with ``acf``)."""
    L, (a1, s1), (a2, s2) = 0, (np.ones(1), np.ones(1)), (np.ones(1), np.ones(1))
    if acf:
        L = max(1, min(int(max_lag / grid_dt), G // 4))
        (a1, s1), (a2, s2) = autocorrelation(grid[:, :, 0], L), autocorrelation(grid[:, :, 1], L)
    t, lags = np.arange(G) * grid_dt, np.arange(L + 1) * grid_dt
    return dict(t=t, grid=grid, lags=lags, acf_z1=a1, acf_z2=a2, acf_z1_stderr=s1, acf_z2_stderr=s2)


def autocorrelation(series: ArrayLike, max_lag: int, segments: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Autocorrelation at lags ``0..max_lag`` of a stationary series, averaged over pieces of each
    run, with the spread over pieces as standard error.

    Parameters
    ----------
    series : array_like
        ``(R, G)``: ``R`` independent runs.
    max_lag : int
        In grid steps.
    segments : int, default 10
        Pieces per run.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)

    Examples
    --------
    >>> import numpy as np
    >>> acf, se = autocorrelation(np.random.default_rng(0).normal(size=(2, 1000)), 3)
    >>> float(acf[0]), bool(abs(acf[1]) < 5 * se[1])
    (1.0, True)
    """
    s = np.atleast_2d(np.asarray(series, dtype=float))
    mean = s.mean()
    var = s.var()
    if var <= 0:
        return np.ones(max_lag + 1), np.zeros(max_lag + 1)
    R, G = s.shape
    seg = max(G // segments, max_lag + 2)
    pieces = []
    for r in range(R):
        for k in range(G // seg):
            x = s[r, k * seg : (k + 1) * seg] - mean
            m = x.size
            f = np.fft.rfft(x, 2 * m)
            ac = np.fft.irfft(f * np.conj(f))[: max_lag + 1]
            pieces.append(ac / (m - np.arange(max_lag + 1)) / var)
    if not pieces:
        return np.full(max_lag + 1, np.nan), np.full(max_lag + 1, np.nan)
    mean_acf, se = mean_stderr(np.array(pieces), axis=0)
    return mean_acf, (np.full(max_lag + 1, np.nan) if se is None else se)
