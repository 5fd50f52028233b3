"""Where the width of the adjusted 95 % intervals comes from (docs/control-variates.md,
"Calibration", the paragraph under the table): for one case of ``tests/calibration.py``,
``M`` runs (seed 2024, the calibration's chains), each run's control-variate half-width split
into its Student quantile at the capped degrees of freedom (one per
``control.DOF_RELAXATION_TIMES`` relaxation times, docs/model.md §9.1), at the uncapped ones
(blocking's less the ``m`` controls), and the skew factor ``skew_quantile(z, g)/z``; then the
coverage the same runs would have with each part left out.

The runs are simulated once with the cap lifted (the estimates, their errors and the choice
between adjusted and plain do not depend on it); the capped quantile is recomputed from the
same ``T/(DOF_RELAXATION_TIMES/μ)``.  It reads the degrees of freedom through a wrapper of a
private function of ``supermarket.simulation.estimate`` (a study, not an interface).  Usage::

    PYTHONPATH=src python benchmarks/cv_width_split.py "heavy traffic, 8e6 steps, mean queue" 200 --true 1.6264649
    PYTHONPATH=src python benchmarks/cv_width_split.py "n=1000 d=2 λ=0.9, 2e6 steps, E[u_2]" 200 --true pool

``--true``: the true value (default: the calibration's reference, which for the large cases
is a long run); ``pool``: the pooled control-variate estimate of the ``M`` runs themselves
(its error is one run's over ``√M``).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import calibration as cal
from supermarket import stats as st
from supermarket.simulation import control as cv
from supermarket.simulation import estimate as es

_REC: dict = {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", help="a word of the case's name in tests/calibration.py")
    ap.add_argument("M", type=int)
    ap.add_argument("--true", default=None)
    a = ap.parse_args()
    case = next(c for c in cal.cases() if a.case in c.name)
    cap_times = cv.DOF_RELAXATION_TIMES
    cv.DOF_RELAXATION_TIMES = 1e-300  # lifted: the capped quantile is recomputed below
    orig = es._cv_estimate

    def wrapped(parts, controls, plain, relax, *args, **kw):
        out = orig(parts, controls, plain, relax, *args, **kw)
        if out.est is not None and relax:
            Ttot = sum(float(T.sum()) for _, T in parts)
            _REC[float(out.est.stderr)] = (out.est.dof, Ttot / (cap_times * relax), out.est.skewness)
        return out

    es._cv_estimate = wrapped
    res = cal._run(case, a.M, 2024, "cv")
    if a.true is None:
        true = cal.reference(case)[0]
    elif a.true == "pool":
        true = cal._value(res, case.level)[0]
    else:
        true = float(a.true)
    key = "mean_queue_length" if case.level == 0 else "u_mean"
    z1 = st.t_quantile(math.inf)
    zs, parts = [], []  # z of every reliable run; (t_cap, t_unc, f) of the adjusted ones, None for plain
    for r in res.per_replication:
        m, se, hw, rel = cal._value(r, case.level)
        if not rel:
            continue
        vr = (r.variance_reduction or {}).get(key)
        v = vr if case.level == 0 else (vr[case.level - 1] if vr is not None and len(vr) >= case.level else None)
        zs.append((m - true) / se)
        if v is None or not np.isfinite(v):
            parts.append(hw / se)  # plain estimate kept: the cap does not apply
            continue
        dof, cap, g = _REC[float(se)]
        f = st.skew_quantile(z1, g) / z1 if math.isfinite(g) else 1.0
        parts.append((st.t_quantile(max(min(dof, cap), 1.0)), st.t_quantile(dof), f, dof, cap))
    z = np.array(zs)
    adj = [p for p in parts if isinstance(p, tuple)]
    print(f"{case.name}, M = {a.M}, true {true:.7g}: reliable {z.size}, adjusted {len(adj)}, sd(z) {z.std(ddof=1):.2f}")
    if adj:
        tc, tu, f, dof, cap = (np.array(x) for x in zip(*adj))
        print(
            f"  adjusted runs: dof uncapped median {np.median(dof):.1f}, cap {np.median(cap):.1f}; "
            f"t at the capped dof median {np.median(tc):.2f}, uncapped {np.median(tu):.2f}; skew factor median "
            f"{np.median(f):.3f} (10-90 %: {np.percentile(f, 10):.3f}-{np.percentile(f, 90):.3f})"
        )
    variants = {
        "as stated (t capped × skew)": lambda p: p[0] * p[2],
        "no cap (t uncapped × skew)": lambda p: p[1] * p[2],
        "no skew (t capped)": lambda p: p[0],
        "neither (t uncapped)": lambda p: p[1],
        "cap 1/20 relax. times × skew": None,
        "cap 1/15 relax. times × skew": None,
    }
    for name, fn in variants.items():
        if fn is None:
            c = float(name.split("/")[1].split()[0])

            def fn(p, c=c):
                return st.t_quantile(max(min(p[3], p[4] * cap_times / c), 1.0)) * p[2]

        k = np.array([fn(p) if isinstance(p, tuple) else p for p in parts])
        print(
            f"    {name:30s} covers {int(np.sum(np.abs(z) <= k))}/{z.size} "
            f"(low misses {int(np.sum(z < -k))}, high {int(np.sum(z > k))})"
        )


if __name__ == "__main__":
    main()
