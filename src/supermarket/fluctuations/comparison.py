"""The chain beside its references (limit and pre-limit diffusions, finite-n LNA) and the
``n^{-1/2}`` order (docs/model.md §3, §8)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from ..checks import check_bool
from ..model import spawn_seeds
from ..result import Result, fmt, frame, pyplot, save_figure, text_table
from .chain import FluctuationSim, simulate_fluctuations
from .diffusions import REFLECTIONS, LimitSDE, limit_closed_form, limit_for, prelimit_sde
from .moments import BATCH_TAU_FACTOR, KEYS, Moments
from .regimes import DERIVED_NOTE, RegimeParams, regime_a
from .runs import _first_30

__all__ = [
    "lna_moments",
    "lna_acf",
    "lna_does_not_apply",
    "Comparison",
    "compare",
    "ScalingRow",
    "ScalingResult",
    "scaling",
]


def lna_moments(p: RegimeParams) -> Moments:
    """The finite-n linear noise approximation at ``x^n`` (``meanfield.lna(at="centre")``,
    docs/model.md §3, §8) in ``p``'s coordinates; ``ValueError`` beyond its dense solve.

    Parameters
    ----------
    p : RegimeParams

    Returns
    -------
    Moments

    Examples
    --------
    >>> round(lna_moments(regime_a(10**4, 1.0, warn=False)).var_z1, 3)
    0.503
    """
    from .. import meanfield

    res = meanfield.lna(p.d, p.lam, n=p.n, at="centre", replace=p.replace)
    W = np.asarray(res.covariance)
    x = np.asarray(res.centre)
    sq = math.sqrt(p.n)
    x2 = x[1] if x.size > 1 else 0.0
    w22, w12 = (W[1, 1], W[0, 1]) if W.shape[0] > 1 else (0.0, 0.0)
    return Moments(sq * (x[0] - p.m[0]), sq * (x2 - p.m[1]), float(W[0, 0]), float(w22), float(w12), stderr=None)


def lna_does_not_apply(m: Moments | None) -> str:
    """Why the finite-n LNA is no reference for the chain's moments (empty when it is one):
    a second coordinate identically 0 (regime (c) with ``d_n`` of order ``n``) predicts nothing.

    Examples
    --------
    >>> lna_does_not_apply(Moments(0.0, 0.0, 1.0, 0.0, 0.0, stderr=None))[:14]
    'does not apply'
    >>> lna_does_not_apply(Moments(0.0, 0.1, 1.0, 0.2, 0.05, stderr=None))
    ''
    """
    if m is None:
        return ""
    if m.mean_z2 == 0.0 and m.var_z2 == 0.0 and m.cov_z1z2 == 0.0:
        return (
            "does not apply: its second coordinate is identically 0 (x^n_2 and its noise vanish at the "
            "levels kept), so it predicts nothing about z2, and a Gaussian linearisation cannot follow the "
            "reflection at the boundary that produces it; not scored"
        )
    return ""


def lna_acf(p: RegimeParams, lags: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Autocorrelations of ``z1``, ``z2`` in the finite-n LNA at ``x^n``: ``e^{Jτ} W`` (docs/model.md §3, §8).

    Parameters
    ----------
    p : RegimeParams
    lags : array_like

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)

    Examples
    --------
    >>> a1, a2 = lna_acf(regime_a(10**4, 1.0, warn=False), [0.0, 1.0])
    >>> a1.round(4).tolist()
    [1.0, 0.3992]
    """
    from scipy.linalg import expm

    from .. import meanfield

    res = meanfield.lna(p.d, p.lam, n=p.n, at="centre", replace=p.replace)
    J = np.asarray(res.jacobian)
    W = np.asarray(res.covariance)
    c = np.array([expm(J * t) @ W for t in np.asarray(lags, dtype=float)])
    a2 = c[:, 1, 1] / W[1, 1] if W.shape[0] > 1 and W[1, 1] > 0 else np.full(len(c), np.nan)
    return c[:, 0, 0] / W[0, 0], a2


@dataclass(frozen=True)
class Comparison(Result):
    """The chain beside the limit and pre-limit diffusions, the finite-n LNA and, in (a), the
    limit's closed form, at one ``n`` (docs/model.md §8, derived).

    Examples
    --------
    >>> cmp = compare(regime_a(400, 1.0, d=2, warn=False), time=10.0, burn_in=1.0, grid_dt=0.5,
    ...               sde_paths=4, sde_time=1.0, sde_burn_in=0.2, dt=0.01, workers=1, prelimit=False)
    >>> sorted(set(cmp.to_frame()["source"]))[:2]
    ['chain (simulated)', 'finite-n LNA at x^n']
    """

    params: RegimeParams
    sim: FluctuationSim
    limit: LimitSDE
    lna: Moments | None
    lna_note: str
    limit_exact: Moments | None  # regime (a): closed form
    prelimit: LimitSDE | None = None

    def to_dict(self) -> dict:
        p = self.params
        out = {
            "regime": p.regime,
            "n": p.n,
            "d_n": p.d,
            "lambda_n": p.lam,
            "replace": p.replace,
            "coordinates": p.coordinates,
            "params": p.to_dict(),
            "derived": DERIVED_NOTE,
            "sim": self.sim.to_dict(),
            "limit": self.limit.to_dict(),
            "prelimit": None if self.prelimit is None else self.prelimit.to_dict(),
            "lna": None if self.lna is None else self.lna.to_dict(),
            "lna_note": self.lna_note,
            "warnings": list(p.warnings),
        }
        if self.limit_exact is not None:
            out["limit_exact"] = self.limit_exact.to_dict()
        out["lna_applies"] = not self.lna_not_applicable
        if self.lna_not_applicable:
            out["lna_note"] = self.lna_not_applicable
        if self.sim.moments.adequate is False:  # a z-score needs an error bar the chain can trust
            out["z_scores"] = None
            out["z_scores_note"] = "not computed: " + self.sim.moments.note
        else:
            out["z_scores"] = self.z_scores()
        return out

    @property
    def lna_not_applicable(self) -> str:
        """:func:`lna_does_not_apply` of the LNA's moments."""
        return lna_does_not_apply(self.lna)

    def _rows(self):
        rows = [
            ("chain (simulated)", self.sim.moments),
            (f"limit diffusion (EM, {self.limit.paths} paths)", self.limit.moments),
        ]
        if self.prelimit is not None:
            rows.append((f"pre-limit diffusion at n (EM, {self.prelimit.paths} paths)", self.prelimit.moments))
        if self.limit_exact is not None:
            rows.append(("limit, closed form (derived)", self.limit_exact))
        rows.append(("finite-n LNA at x^n", self.lna))
        return rows

    def to_frame(self) -> Any:
        """One row per (source, moment): ``value``, ``stderr`` (NaN for exact values)."""
        return frame(
            [
                {
                    "source": name,
                    "moment": k,
                    "value": np.nan if m is None else float(getattr(m, k)),
                    "stderr": np.nan if m is None or not m.stderr else float(m.stderr[k]),
                }
                for name, m in self._rows()
                for k in KEYS
            ]
        )

    def summary(self) -> str:
        """The text ``supermarket fluctuations`` prints."""
        p = self.params
        lines = ["supermarket fluctuations  " + "\n".join(p.summary().splitlines()[:3]), DERIVED_NOTE, ""]
        rows = []
        short = self.sim.moments.adequate is False  # the chain cannot know its own error: no ±, no z
        for name, m in self._rows():
            if m is None:
                rows.append([name, *(["—"] * len(KEYS))])
            elif m is self.lna and self.lna_not_applicable:
                rows.append([name, *(["does not apply"] * len(KEYS))])
            else:
                own = m.stderr and not (short and m is self.sim.moments)
                rows.append([name, *[f"{getattr(m, k):.4f}" + (f" ± {m.stderr[k]:.4f}" if own else "") for k in KEYS]])
        title = "Stationary moments (± standard error" + ("; the chain's: too short to know" if short else "") + ")"
        lines.append(text_table(["source", *KEYS], rows, title=title))
        if self.lna_not_applicable:
            lines.append(f"finite-n LNA at x^n: {self.lna_not_applicable}")
        if short:
            lines.append("z-scores: not computed, the chain's error bars are too short to know (below)")
        else:
            for ref, row in self.z_scores().items():
                lines.append(f"z-scores vs {ref}: " + ", ".join(f"{k} {v:+.2f}" for k, v in row.items()))
        s = self.sim
        if s.moments.note:
            lines.append(f"chain error bars: {s.moments.note}")
        else:
            lines.append(
                f"chain error bars: batches of {s.time / s.batches:g} time units, ≥ {BATCH_TAU_FACTOR:g} × "
                f"the integrated autocorrelation time {s.moments.tau_int:.3g}"
            )
        lines.append(
            f"chain: {s.events:.3g} events in {s.seconds:.2f} s ({s.events / max(s.seconds, 1e-9):.3g}/s), "
            f"{s.replications} × {s.time:g} time units after burn-in {s.burn_in:g}"
        )
        if p.regime == "c":
            lines.append(
                f"reflected limit ({self.limit.params.get('reflection')} reflection): largest Q on any "
                f"path = {self.limit.max_q:.3g}; pushing rate E[dU]/dt = {self.limit.push_rate:.4f} ± "
                f"{self.limit.push_rate_stderr:.4f} (equals E Y in the limit)"
            )
        if p.warnings:
            lines.append(f"{len(p.warnings)} condition(s) of the regime fail at this n: " + "; ".join(p.warnings))
        return "\n".join(lines)

    def plot(self, path: Any = None) -> Any:
        """Paths of the chain and the limit, histograms, the first autocorrelation; saved at ``path``."""
        plt = pyplot()
        p, sim, lim = self.params, self.sim, self.limit
        names = sim._names()
        fig, axes = plt.subplots(2, 2, figsize=(11, 7))
        k = _first_30(sim.t)
        axes[0, 0].plot(sim.t[:k], sim.grid[0, :k, 0], lw=0.7, label="chain")
        if lim.t.size > 1:
            kl = _first_30(lim.t)
            axes[0, 0].plot(lim.t[:kl], lim.grid[0, :kl, 0], lw=0.7, label="limit (derived)")
        axes[0, 0].set(xlabel="time", ylabel=names[0])
        axes[0, 0].legend(fontsize=7)
        for j, ax in ((0, axes[0, 1]), (1, axes[1, 0])):
            s = sim.grid[:, :, j].ravel()
            l = lim.grid[:, :, j].ravel() if lim.grid.size else s
            lo, hi = np.percentile(np.concatenate([s, l]), [0.1, 99.9])
            bins = np.linspace(lo, hi if hi > lo else lo + 1, 50)
            ax.hist(s, bins=bins, density=True, alpha=0.5, label="chain")
            if lim.grid.size:
                ax.hist(l, bins=bins, density=True, histtype="step", lw=1.5, label="limit (EM)")
            ax.set_xlabel(names[j])
            ax.legend(fontsize=7)
        ax = axes[1, 1]
        ax.errorbar(sim.lags, sim.acf_z1, yerr=sim.acf_z1_stderr, lw=1, label=f"chain {names[0]}")
        if lim.lags.size > 1:
            ax.plot(lim.lags, lim.acf_z1, lw=1, label=f"limit {names[0]}")
        ax.set(xlabel="lag", ylabel="autocorrelation")
        ax.legend(fontsize=7)
        fig.suptitle(f"Regime ({p.regime}) n={p.n} d_n={p.d} λ_n={p.lam:.5g}: {p.coordinates}", fontsize=9)
        fig.tight_layout()
        plt.close(fig)
        return save_figure(fig, path)

    def references(self) -> list[tuple[str, Moments]]:
        """``(name, moments)`` of every reference present that applies."""
        out = [("limit", self.limit.moments)]
        if self.prelimit is not None:
            out.append(("prelimit", self.prelimit.moments))
        if self.lna is not None and not self.lna_not_applicable:
            out.append(("lna", self.lna))
        return out

    def z_scores(self) -> dict:
        """``(sim − other)/stderr`` for each key against each reference; NaN when the chain's run
        is too short to know its own error."""
        out = {}
        s = self.sim.moments
        assert s.stderr is not None  # the chain's moments always carry batch-means errors
        short = s.adequate is False
        for name, other in self.references():
            row = {}
            for k in KEYS:
                se2 = s.stderr[k] ** 2 + (other.stderr[k] ** 2 if other.stderr else 0.0)
                row[k] = (getattr(s, k) - getattr(other, k)) / math.sqrt(se2) if se2 > 0 and not short else float("nan")
            out[name] = row
        return out


def compare(
    p: RegimeParams,
    *,
    time: float = 200.0,
    burn_in: float | None = None,
    replications: int = 1,
    seed: Any = 0,
    workers: int | None = None,
    sde_paths: int = 256,
    sde_time: float = 100.0,
    sde_burn_in: float | None = None,
    dt: float = 1e-3,
    grid_dt: float = 0.05,
    reflection: str = "bridge",
    prelimit: bool = True,
    client: Any = None,
) -> Comparison:
    """The chain's stationary moments at ``p`` beside the limit, the pre-limit diffusion and
    the finite-n LNA (docs/model.md §8, derived); seeds: children 0, 1, 2 of ``seed``.

    Parameters
    ----------
    p : RegimeParams
    time, burn_in, replications, seed, workers, grid_dt, client
        The chain's, as :func:`simulate_fluctuations`.
    sde_paths, sde_time, sde_burn_in, dt
        The diffusions', as ``paths``, ``time``, ``burn_in``, ``dt`` of :func:`limit_sde`.
    reflection : {"bridge", "projection"}
        Regime (c)'s reflection scheme.
    prelimit : bool, default True
        Run the pre-limit diffusion too.

    Returns
    -------
    Comparison

    Examples
    --------
    >>> cmp = compare(regime_a(400, 1.0, d=2, warn=False), time=10.0, burn_in=1.0, grid_dt=0.5,
    ...               sde_paths=4, sde_time=1.0, sde_burn_in=0.2, dt=0.01, workers=1)
    >>> sorted(cmp.z_scores())
    ['limit', 'lna', 'prelimit']
    """
    if reflection not in REFLECTIONS:
        raise ValueError(f"reflection must be 'bridge' or 'projection'; got {reflection!r}")
    check_bool("prelimit", prelimit)
    ss = spawn_seeds(seed, 3)
    sim = simulate_fluctuations(
        p,
        time=time,
        burn_in=burn_in,
        replications=replications,
        seed=ss[0],
        workers=workers,
        grid_dt=grid_dt,
        client=client,
    )
    extra = {"reflection": reflection} if p.regime == "c" else {}
    sde: dict[str, Any] = dict(
        paths=sde_paths, time=sde_time, burn_in=sde_burn_in, dt=dt, record_paths=min(32, sde_paths)
    )
    sde.update(workers=workers, grid_dt=grid_dt, client=client)
    lim = limit_for(p, seed=ss[1], **sde, **extra)
    pre = prelimit_sde(p, seed=ss[2], **sde) if prelimit else None
    try:
        lna = lna_moments(p)
        note = "meanfield.lna(at='centre'): covariance of √n(G − x^n), mean √n(x^n − m)"
    except (ImportError, AttributeError, ValueError, np.linalg.LinAlgError) as exc:
        lna, note = None, f"not available: {exc}"
    exact = limit_closed_form(p.limit["kappa"]) if p.regime == "a" else None
    return Comparison(params=p, sim=sim, limit=lim, lna=lna, lna_note=note, limit_exact=exact, prelimit=pre)


@dataclass(frozen=True)
class ScalingRow(Result):
    """One ``n`` of :func:`scaling`: ``sd(G_1)``, ``√n·sd(G_1)`` (± delta-method standard
    errors) and the finite-n LNA's ``√n·sd(G_1)`` (``None`` where it refuses the size).

    Examples
    --------
    >>> ScalingRow(100, 3, 0.9, 0.06, 0.01, 0.6, 0.1, None).summary()
    'n=100 d_n=3: sd(G1) = 0.06 ± 0.01, √n sd(G1) = 0.6 ± 0.1 (LNA —)'
    """

    n: int
    d: int
    lam: float
    sd_g1: float
    sd_g1_stderr: float
    sqrt_n_sd_g1: float
    sqrt_n_sd_g1_stderr: float
    lna_sqrt_n_sd_g1: float | None
    error_bars_adequate: bool | None = None  # the chain's batches long against its autocorrelation
    note: str = ""  # why the error bars are not adequate ("too short to know …")

    _plain = True

    def to_frame(self) -> Any:
        """This row as a one-row DataFrame."""
        return frame([self.to_dict()])

    def summary(self) -> str:
        """One line: ``n``, ``d_n``, ``sd(G_1)`` and ``√n·sd(G_1)`` with standard errors."""
        lna = fmt(self.lna_sqrt_n_sd_g1)
        short = self.error_bars_adequate is False  # no confident ± on a run too short to know its error
        e1, e2 = ("", "") if short else (f" ± {self.sd_g1_stderr:.2g}", f" ± {self.sqrt_n_sd_g1_stderr:.2g}")
        return (
            f"n={self.n} d_n={self.d}: sd(G1) = {self.sd_g1:.4g}{e1}, √n sd(G1) = {self.sqrt_n_sd_g1:.4g}{e2}"
            + (" (too short to know its error)" if short else "")
            + f" (LNA {lna})"
        )


@dataclass(frozen=True)
class ScalingResult(Result):
    """The rows of :func:`scaling`, one :class:`ScalingRow` per ``n`` (a read-only sequence).

    Examples
    --------
    >>> r = ScalingResult((ScalingRow(100, 3, 0.9, 0.06, 0.01, 0.6, 0.1, 0.62),))
    >>> len(r), r[0].n, r.to_frame()["sqrt_n_sd_g1"].tolist()
    (1, 100, [0.6])
    """

    rows: tuple[ScalingRow, ...]

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> ScalingRow:
        return self.rows[i]

    derived: ClassVar[str] = DERIVED_NOTE
    _extra = ("derived",)

    def to_frame(self) -> Any:
        """One row per ``n`` (the fields of :class:`ScalingRow`)."""
        return frame([r.to_dict() for r in self.rows])

    def summary(self) -> str:
        """A table of ``sd(G_1)`` and ``√n·sd(G_1)`` (± standard error) against ``n``."""
        rows = [
            [
                str(r.n),
                str(r.d),
                f"{r.sd_g1:.4g} ± {r.sd_g1_stderr:.2g}",
                f"{r.sqrt_n_sd_g1:.4g} ± {r.sqrt_n_sd_g1_stderr:.2g}",
                fmt(r.lna_sqrt_n_sd_g1),
            ]
            for r in self.rows
        ]
        return text_table(
            ["n", "d_n", "sd(G1)", "√n sd(G1)", "LNA √n sd(G1)"], rows, title="The n^(-1/2) order in regime (a)"
        )

    def plot(self, path: Any = None) -> Any:
        """``sd(G_1)`` against ``n`` (±2 standard errors) with an ``n^{-1/2}`` guide; saved at ``path``."""
        plt = pyplot()
        ns = np.array([r.n for r in self.rows], dtype=float)
        sd = np.array([r.sd_g1 for r in self.rows])
        se = np.array([r.sd_g1_stderr for r in self.rows])
        fig, ax = plt.subplots(figsize=(5, 4))
        ax.errorbar(ns, sd, yerr=2 * se, fmt="o", capsize=3, label="simulated sd(G1) (±2 se)")
        if ns.size:
            ax.plot(ns, sd[0] * np.sqrt(ns[0] / ns), "k--", lw=1, label="n^(-1/2)")
        ax.set(xscale="log", yscale="log", xlabel="n", ylabel="sd(G1)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        plt.close(fig)
        return save_figure(fig, path)


def scaling(
    ns: Any = (10**3, 10**4, 10**5, 10**6),
    *,
    kappa: float = 1.0,
    theta: float = 0.25,
    time: float = 100.0,
    replications: int = 1,
    seed: Any = 0,
    workers: int | None = None,
    client: Any = None,
) -> ScalingResult:
    """The ``n^{-1/2}`` order in regime (a): ``sd(G_1)`` against ``n`` (docs/model.md §8).

    Parameters
    ----------
    ns : sequence of int
    kappa, theta
        As :func:`regime_a`.
    time, replications, seed, workers, client
        As :func:`simulate_fluctuations` (entry ``i`` of ``ns``: child ``i`` of ``seed``).

    Returns
    -------
    ScalingResult

    Examples
    --------
    >>> r = scaling((100, 400), time=5.0, workers=1)
    >>> r.to_frame()["n"].tolist()
    [100, 400]
    """
    rows = []
    for n, ss in zip(ns, spawn_seeds(seed, len(ns))):
        p = regime_a(n, kappa, theta=theta, warn=False)
        sim = simulate_fluctuations(p, time=time, replications=replications, seed=ss, workers=workers, client=client)
        m = sim.moments
        assert m.stderr is not None  # the chain's moments always carry batch-means errors
        sd = math.sqrt(max(m.var_z1, 0.0))
        sd_se = m.stderr["var_z1"] / (2 * sd) if sd > 0 else float("nan")
        try:
            lna_sd = math.sqrt(lna_moments(p).var_z1)
        except ValueError:  # the LNA refuses sizes beyond its dense Lyapunov solve
            lna_sd = None
        sq = math.sqrt(p.n)
        rows.append(ScalingRow(p.n, p.d, p.lam, sd / sq, sd_se / sq, sd, sd_se, lna_sd, m.adequate, m.note or ""))
    return ScalingResult(tuple(rows))
