"""Why short runs' control-variate error bars were too narrow (docs/model.md §9.1, "How far
the adjusted error bars hold"): M independent runs, their batch integrals re-analysed.

For E[u_2] and the mean queue length it prints, over the runs that use the controls:

- ``nu_eff``: how many degrees of freedom the stated s.e.² behaves as having across runs,
  ``2 E[s²]²/Var(s²)``, for the plain estimate, the adjusted one as estimated (split-sample
  β), with an exact β (fitted once on all runs pooled: no fitting error) and with the first
  2 controls only; beside it the degrees of freedom blocking claims;
- the coverage of 95 % t intervals at blocking's degrees of freedom less m (before) and at
  the library's (after: at most one per ``DOF_RELAXATION_TIMES`` relaxation times), against
  reference values given with ``--ref`` (E[u_2], mean queue length), and the correlation and
  skewness of the adjusted errors.

It reads the batch integrals through a subclass of a private class of
``supermarket.simulation.controlled`` (a study, not an interface).  Usage::

    PYTHONPATH=src python benchmarks/calibration/cv_dof_study.py 100 2 0.9 2e5 100 --ref 0.7303022,2.393307
    PYTHONPATH=src python benchmarks/calibration/cv_dof_study.py 1000 50 0.99 8e6 100 --seed 6 --ref 0.6301899,1.6264649
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np
from scipy import stats as ss

from supermarket.simulation import batch_errors as be
from supermarket.simulation import control as cv
from supermarket.simulation import controlled as ctl
from supermarket.simulation import simulate

_REC: dict = {}


class _Capture(ctl._Controls):
    def __init__(self, spec, used, L, n, lam, seen, stable, forgotten_all, relax):
        super().__init__(spec, used, L, n, lam, seen, stable, forgotten_all, relax)
        ((A, idx),) = used  # one replication
        T = A["T"][idx]
        prev = np.column_stack([T] + [A["P"][idx, i - 1] for i in range(1, L)])
        _REC.update(
            Z=A["c"][idx, :L] / n - lam * prev, T=T, c=A["c"][idx, :L] / n, levels=list(self.levels), relax=relax
        )


def _nu(se2):
    se2 = se2[np.isfinite(se2)]
    return 2 * se2.mean() ** 2 / se2.var(ddof=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, typ in (("n", int), ("d", int), ("load", float), ("steps", float), ("M", int)):
        ap.add_argument(name, type=typ)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--ref", required=True, help="E[u_2],mean queue length")
    a = ap.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    ref = [float(x) for x in a.ref.split(",")]
    ctl._Controls = _Capture
    runs = []
    for s in np.random.SeedSequence(a.seed).spawn(a.M):
        _REC.clear()
        simulate(a.n, a.d, a.load, steps=int(a.steps), seed=s, start="fixed-point")
        runs.append(dict(_REC))
    relax = runs[0]["relax"]
    print(
        f"n={a.n} d={a.d} λ={a.load} steps={a.steps:g} M={a.M}: {runs[0]['T'].sum() / relax:.0f} relaxation "
        f"times per run, controls {runs[0]['levels']}"
    )
    for qname, r0 in (("E[u_2]", ref[0]), ("mean queue length", ref[1])):
        ys = [r["c"][:, 1] if qname == "E[u_2]" else r["c"].sum(axis=1) for r in runs]
        cols = [lv - 1 for lv in runs[0]["levels"]]
        # exact β: one least-squares fit on all runs pooled (centred per run)
        X = np.concatenate([(x := cv.ratio_series(r["Z"][:, cols], r["T"])) - x.mean(0) for r in runs])
        Y = np.concatenate([(y := cv.ratio_series(yy, r["T"])) - y.mean() for yy, r in zip(ys, runs)])
        bstar = np.linalg.lstsq(X, Y, rcond=None)[0]
        out = {k: [] for k in ("plain", "split", "exact", "m=2", "dof", "after", "err")}
        for yy, r in zip(ys, runs):
            T = r["T"]
            plain = be._estimate([(yy, T)], relax=relax)
            out["plain"].append(plain.stderr**2 if plain.reliable else np.nan)
            for key, adj in (
                ("split", cv.crossfit([(yy, T)], [r["Z"][:, cols]]).adjusted[0]),
                ("exact", yy - r["Z"][:, cols] @ bstar),
                ("m=2", cv.crossfit([(yy, T)], [r["Z"][:, cols[:2]]]).adjusted[0]),
            ):
                e = be._estimate([(adj, T)], relax=relax)
                out[key].append(e.stderr**2 if e.reliable else np.nan)
                if key == "split":
                    out["dof"].append(e.dof)
                    out["err"].append(adj.sum() / T.sum() - r0)
            c = ctl._cv_estimate([(yy, T)], [r["Z"][:, cols]], plain, relax)
            out["after"].append(c.est.dof if c.used else np.nan)
        dof, err, se = np.array(out["dof"]), np.array(out["err"]), np.sqrt(np.array(out["split"]))
        before = np.maximum(dof - len(cols), 1.0)
        after = np.array(out["after"])
        ok = np.isfinite(se) & np.isfinite(after)
        z = np.abs(err[ok]) / se[ok]
        cov_b = np.mean(z <= ss.t.ppf(0.975, before[ok]))
        cov_a = np.mean(z <= ss.t.ppf(0.975, after[ok]))
        print(
            f"{qname}: nu_eff of s.e.² across runs: plain {_nu(np.array(out['plain'])):.1f}, adjusted "
            f"{_nu(np.array(out['split'])):.1f}, exact β {_nu(np.array(out['exact'])):.1f}, 2 controls "
            f"{_nu(np.array(out['m=2'])):.1f}; blocking claims {np.mean(dof):.1f} (less m = {len(cols)}); "
            f"the library now states {np.nanmean(after):.1f}"
        )
        print(
            f"   coverage of 95 % intervals ({ok.sum()} runs): before {cov_b:.3f}, after {cov_a:.3f};  rms s.e./rms "
            f"error {math.sqrt(np.mean(se[ok] ** 2) / np.mean(err[ok] ** 2)):.3f};  adjusted errors: skewness "
            f"{ss.skew(err[ok]):.2f}, correlation with their s.e. {np.corrcoef(err[ok], se[ok])[0, 1]:.2f}, "
            f"mean z {np.mean(err[ok] / se[ok]):+.2f}"
        )


if __name__ == "__main__":
    main()
