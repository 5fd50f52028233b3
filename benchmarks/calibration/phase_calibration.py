"""Are the phase engine's error bars honest?  z-scores of ``simulate(service=...)`` against
Pollaczek–Khinchine (random routing = n independent M/PH/1 queues, docs/model.md §13) over
independent seeds: their spread should be about 1.

    PYTHONPATH=src python benchmarks/calibration/phase_calibration.py            # 40 seeds, n = 100, ρ = 0.7, time 4000
    PYTHONPATH=src python benchmarks/calibration/phase_calibration.py --seeds 100 --time 2000
"""

from __future__ import annotations

import argparse

import numpy as np

import supermarket as sm
from supermarket.system.service import parse_service


def pk(rho: float, scv: float) -> float:
    """Pollaczek–Khinchine [classical]: the mean number in an M/G/1 queue."""
    return rho + rho * rho * (1 + scv) / (2 * (1 - rho))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--time", type=float, default=4000.0)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--load", type=float, default=0.7)
    a = ap.parse_args()
    print("| law | runs with a trusted error | cv z: mean, sd, #abs>2 | plain z: mean, sd, #abs>2 | E[u_1] = ρ: z sd |")
    print("|---|---|---|---|---|")
    for service in ("erlang:4", "hyperexp:4"):
        exact = pk(a.load, parse_service(service).scv)
        zc, zp, zu = [], [], []
        for seed in range(a.seeds):
            r = sm.simulate(a.n, 2, a.load, service=service, policy="random", time=a.time, seed=100 + seed)
            q, p = r.mean_queue_length, r.mean_queue_length_plain
            if q.reliable and p.reliable:
                zc.append((q.mean - exact) / q.stderr)
                zp.append((p.mean - exact) / p.stderr)
            zu.append((r.u_plain[0] - a.load) / r.u_plain_stderr[0])
        c, p, u = np.array(zc), np.array(zp), np.array(zu)
        print(
            f"| {service} | {c.size}/{a.seeds} | {c.mean():.2f}, {c.std():.2f}, {(abs(c) > 2).sum()} | "
            f"{p.mean():.2f}, {p.std():.2f}, {(abs(p) > 2).sum()} | {np.nanstd(u):.2f} |"
        )


if __name__ == "__main__":
    main()
