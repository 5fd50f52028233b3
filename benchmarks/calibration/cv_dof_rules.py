"""How many degrees of freedom the adjusted 95 % intervals should have (docs/model.md §9.1,
"How far the adjusted error bars hold"; docs/control-variates.md, "Choosing the cap"): for
one case of ``tests/calibration.py``, ``M`` runs with control variates, each adjusted run's
interval recomputed under several rules for the Student degrees of freedom, the skew factor
``skew_quantile(z, g)/z`` kept: blocking's own (the split sample takes none for the fit),
at most one per ``c`` slow-mode relaxation times for several ``c`` (the library uses
``control.DOF_RELAXATION_TIMES``), and the rule before 2026-12-02 (blocking's less the ``m``
controls, at most one per 25).  Runs that keep the plain estimate keep their interval.
Prints, per rule, the runs covered and the misses on the low side.  Usage::

    PYTHONPATH=src python benchmarks/calibration/cv_dof_rules.py "heavy traffic, 8e6 steps, mean queue" 200 --seed 7
    PYTHONPATH=src python benchmarks/calibration/cv_dof_rules.py "n=100 d=2 λ=0.9, 2e5 steps, E[u_2]" 200 \\
        --true 0.7303022

The runs are simulated once with the cap lifted (the estimates, their errors and the choice
between adjusted and plain do not depend on it).  It reads each adjusted estimate through a
wrapper of a private function of ``supermarket.simulation.controlled`` (a study, not an
interface).  ``--true``: the true value (default: the calibration's, which for the large
cases is a long reference run).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

import calibration as cal
from supermarket import stats as st
from supermarket.simulation import control as cv
from supermarket.simulation import controlled as ctl

CAPS = (10.0, 12.0, 15.0, 20.0, 25.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", help="a word of the case's name in tests/calibration.py")
    ap.add_argument("M", type=int)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--true", type=float, default=None)
    a = ap.parse_args()
    case = next(c for c in cal.cases() if a.case in c.name)
    cv.DOF_RELAXATION_TIMES = 1e-300  # lifted: every rule is recomputed below
    orig = ctl._cv_estimate
    rec: dict[float, tuple[float, int, float, float]] = {}

    def wrapped(parts, controls, plain, relax, *args, **kw):
        out = orig(parts, controls, plain, relax, *args, **kw)
        if out.used and relax and len(parts) == 1:
            relaxations = float(parts[0][1].sum()) / relax
            rec[float(out.est.stderr)] = (out.est.dof, out.m, relaxations, out.est.skewness)
        return out

    ctl._cv_estimate = wrapped
    res = cal._run(case, a.M, a.seed, "cv")
    true = cal.reference(case)[0] if a.true is None else a.true
    key = "mean_queue_length" if case.level == 0 else "u_mean"
    z1 = st.t_quantile(math.inf)
    rows = []  # (z, plain half-width in s.e. or None, (dof, m, relaxation times, skew factor))
    for r in res.per_replication:
        m, se, hw, rel = cal._value(r, case.level)
        if not rel:
            continue
        vr = (r.variance_reduction or {}).get(key)
        v = vr if case.level == 0 else (vr[case.level - 1] if vr is not None and len(vr) >= case.level else None)
        z = (m - true) / se
        if v is None or not np.isfinite(v):
            rows.append((z, hw / se, None))
            continue
        dof, k, relaxations, g = rec[float(se)]
        f = st.skew_quantile(z1, g) / z1 if math.isfinite(g) else 1.0
        rows.append((z, None, (dof, k, relaxations, f)))
    adj = [p for _, _, p in rows if p is not None]
    zs = np.array([z for z, _, _ in rows])
    print(f"{case.name}, seed {a.seed}, M = {a.M}, true {true:.7g}: reliable {zs.size}, adjusted {len(adj)}")
    if adj:
        dof, k, rt, f = (np.array(x) for x in zip(*adj))
        print(
            f"  adjusted runs (medians): blocking dof {np.median(dof):.1f}, controls {np.median(k):.0f}, "
            f"relaxation times {np.median(rt):.0f}, skew factor {np.median(f):.3f}"
        )
    rules = {"blocking's alone": lambda d, k, t: d}
    for c in CAPS:
        rules[f"at most one per {c:g} relaxation times"] = lambda d, k, t, c=c: min(d, t / c)
    rules["before: blocking's less m, one per 25"] = lambda d, k, t: min(d - k, t / 25.0)
    for name, rule in rules.items():
        half = np.array(
            [hw if p is None else st.t_quantile(max(rule(*p[:3]), 1.0)) * p[3] for _, hw, p in rows], dtype=float
        )
        print(
            f"    {name:40s} covers {int(np.sum(np.abs(zs) <= half))}/{zs.size} "
            f"(low misses {int(np.sum(zs < -half))}, high {int(np.sum(zs > half))})"
        )


if __name__ == "__main__":
    main()
