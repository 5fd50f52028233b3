"""The chain against the pre-limit diffusion with error bars from independent replications.

For regime ``b`` or ``c`` of the pre-limit study (docs/fluctuations.md: ``c = 1, ζ = 0.5,
d_n = ⌊√n⌋`` in (b)), runs ``R`` independent chain replications of ``T`` time units each
(child ``r`` of ``--seed``), takes the standard error of each moment from the spread of the
replication values (no autocorrelation estimate involved), and compares with the pre-limit
diffusion at the same ``n`` (256 paths × 100 time units, ``dt = 10^-3``).  It also prints the
single-run standard errors' root mean square against that spread.

    PYTHONPATH=src python benchmarks/calibration/prelimit_replications.py --n 4e4 --time 1000 --reps 12
    PYTHONPATH=src python benchmarks/calibration/prelimit_replications.py --n 4e4 --time 2000 --reps 6 --seed 1
"""

from __future__ import annotations

import argparse
import math
import warnings
from concurrent.futures import ProcessPoolExecutor
from functools import partial

import numpy as np

from supermarket import fluctuations as fl
from supermarket.experiments.paper002.study import _study_params
from supermarket.model import spawn_seeds

KEYS = ("mean_z1", "mean_z2", "var_z1", "var_z2", "cov_z1z2")


def one(p, T, ss) -> dict:
    warnings.simplefilter("ignore")
    m = fl.simulate_fluctuations(p, time=T, replications=1, seed=ss, batches=10).moments
    return {k: getattr(m, k) for k in KEYS} | {"se_" + k: m.stderr[k] for k in KEYS} | {"adequate": bool(m.adequate)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--regime", choices=("b", "c"), default="b")
    ap.add_argument("--n", type=float, default=4e4)
    ap.add_argument("--time", type=float, default=1000.0)
    ap.add_argument("--reps", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    p = _study_params(a.regime, int(a.n))
    with ProcessPoolExecutor(a.workers) as ex:
        rows = list(ex.map(partial(one, p, a.time), spawn_seeds(a.seed, a.reps)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pre = fl.prelimit_sde(p, paths=256, time=100.0, dt=1e-3, seed=a.seed + 10**6, record_paths=0).moments
    print(
        f"regime ({a.regime}), n = {p.n}, d_n = {p.d}, {a.reps} replications x {a.time:g} time units; "
        f"{sum(r['adequate'] for r in rows)} flagged adequate"
    )
    print(f"{'moment':9s} {'chain (rep. spread)':>22s} {'pre-limit':>18s} {'z':>6s} {'single-run se/spread':>21s}")
    for k in KEYS:
        v = np.array([r[k] for r in rows])
        m, sd = v.mean(), v.std(ddof=1)
        se = sd / math.sqrt(a.reps)
        pk, pse = getattr(pre, k), pre.stderr[k]
        ratio = math.sqrt(np.mean([r["se_" + k] ** 2 for r in rows])) / sd
        z = (m - pk) / math.hypot(se, pse)
        print(f"{k:9s} {m:12.4f} ± {se:.4f} {pk:10.4f} ± {pse:.4f} {z:+6.2f} {ratio:21.2f}")


if __name__ == "__main__":
    main()
