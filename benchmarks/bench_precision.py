"""Steps and time to a relative precision of 1e-4, control variates against plain (issue 18).

For each configuration one seeded run (from the rounded fixed point) gives, for ``E[u_2]`` and
the mean queue length, the plain and the control-variate standard errors of the same chain
(``SimulationResult.u_stderr`` against ``u_stderr_plain``, docs/model.md §9).  The variance
per step ``S·s.e.²`` gives the steps a run needs for a 95 % half-width of ``1e-4`` relative to
the estimate (``1.96·s.e. <= 1e-4·|mean|``), but never fewer than the shortest run that can
trust its error bars at all (64 slow-mode relaxation times, docs/model.md §9); the first
run's events per CPU second (one worker thread, the summary included; CPU rather than wall
time, which a loaded machine inflates) give the time.
Where that run length is at most ``--measure-cap`` steps it is then *run* (a fresh seed,
same estimator) and the achieved relative half-width and the wall time are reported as
"measured"; beyond the cap the figure is "extrapolated" from the variance per step.
It also prints the measured variance-reduction factor of every quantity of the first run.

    PYTHONPATH=src python benchmarks/bench_precision.py                   # all three
    PYTHONPATH=src python benchmarks/bench_precision.py --config 1000:2:0.9:4e7
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings

import numpy as np

from supermarket.simulation import simulate
from supermarket.simulation.estimate import relaxation_time

TARGET = 1e-4
Z95 = 1.96
# (n, d, λ, steps of the first run): at least 32 blocks of one slow-mode relaxation time
# (1/μ = 20, 22 and 102 time units) so that both estimators can trust their error bars
CONFIGS = ((1000, 2, 0.9, 40_000_000), (10_000, 20, 0.99, 200_000_000), (1_000_000, 100, 0.999, 8_000_000_000))


def _quantities(r, plain: bool):
    if plain:
        return {
            "E[u_2]": (float(r.u_mean_plain[1]), float(r.u_stderr_plain[1]), bool(r.u_reliable_plain[1])),
            "mean queue length": (
                r.mean_queue_length_plain,
                r.mean_queue_length_stderr_plain,
                bool(r.mean_queue_length_reliable_plain),
            ),
        }
    return {
        "E[u_2]": (float(r.u_mean[1]), float(r.u_stderr[1]), bool(r.u_reliable[1])),
        "mean queue length": (r.mean_queue_length, r.mean_queue_length_stderr, bool(r.mean_queue_length_reliable)),
    }


def _run(n, d, lam, steps, seed, cv=True):
    """One run; returns it with its CPU seconds (all threads: robust to a loaded machine)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.process_time()
        r = simulate(
            n, d, lam, steps=int(steps), start="fixed-point", seed=seed, progress=False, control_variates=cv, workers=1
        )
        return r, time.process_time() - t


def floor_steps(n, d, lam) -> int:
    """The shortest run whose error bars can be trusted at all: the blocking plateau needs 32
    blocks of at least one slow-mode relaxation time (docs/model.md §9), 64 of them to be sure
    with blocks in powers of two."""
    return math.ceil(64 * relaxation_time(d, lam) * n * (1 + lam))


def bench(n, d, lam, steps, measure_cap, seed=1) -> dict:
    r, cpu = _run(n, d, lam, steps, seed)
    eps = (r.steps + r.burn_in) / cpu  # events per CPU second, the summary included
    floor = floor_steps(n, d, lam)
    out = {
        "n": n,
        "d": d,
        "lam": lam,
        "steps": r.steps,
        "cpu_s": cpu,
        "events_per_s": eps,
        "floor_steps": floor,
        "variance_reduction": r.variance_reduction,
        "controls": list(r.controls),
        "rows": [],
    }
    for est in ("control variates", "plain"):
        for q, (mean, se, rel) in _quantities(r, est == "plain").items():
            row = {"estimator": est, "quantity": q, "mean": mean, "stderr": se, "reliable": rel}
            if rel and se > 0:
                var_need = r.steps * (Z95 * se / (TARGET * abs(mean))) ** 2
                need = max(var_need, floor)
                row.update(
                    steps_for_variance=var_need, steps_needed=need, seconds_needed=need * 1.1 / eps, how="extrapolated"
                )
                if need <= measure_cap:
                    run_steps = math.ceil(need * 1.2)
                    r2, w2 = _run(n, d, lam, run_steps, seed + 1000, cv=est != "plain")
                    m2, se2, rel2 = _quantities(r2, est == "plain")[q]
                    row.update(
                        how="measured",
                        run_steps=r2.steps,
                        run_wall_s=w2,
                        achieved=(Z95 * se2 / abs(m2)) if rel2 else math.nan,
                        run_reliable=rel2,
                    )
            else:
                row.update(steps_needed=math.nan, seconds_needed=math.nan, how="error bar not reliable")
            out["rows"].append(row)
    return out


def _h(x):
    if not math.isfinite(x):
        return "—"
    if x >= 3600:
        return f"{x / 3600:.3g} h"
    if x >= 60:
        return f"{x / 60:.3g} min"
    return f"{x:.3g} s"


def report(res: dict) -> str:
    head = (
        f"n = {res['n']:,}, d = {res['d']}, λ = {res['lam']}: first run {res['steps']:.3g} steps, "
        f"{res['cpu_s']:.1f} CPU s, {res['events_per_s'] / 1e6:.1f} million events per CPU second; "
        f"controls {res['controls']}; shortest run with trusted error bars {res['floor_steps']:.3g} steps"
    )
    cols = (
        "| quantity | estimator | s.e. at first run | steps for the variance | steps to 1e-4 | CPU time to 1e-4 | how |"
    )
    lines = [head, "", cols, "|---|---|---|---|---|---|---|"]
    for row in res["rows"]:
        how = row["how"]
        if how == "measured":
            how = (
                f"measured: {row['run_steps']:.3g} steps in {row['run_wall_s']:.1f} CPU s reached {row['achieved']:.2g}"
            )
        lines.append(
            f"| {row['quantity']} | {row['estimator']} | {row['stderr']:.3g} | "
            f"{row.get('steps_for_variance', math.nan):.3g} | {row['steps_needed']:.3g} | "
            f"{_h(row['seconds_needed'])} | {how} |"
        )
    vr = res["variance_reduction"] or {}
    u = list(vr.get("u_mean", []))
    lines += [
        "",
        "variance reduction (plain s.e. / CV s.e.)², this run: "
        + ", ".join(f"E[u_{i + 1}] {x:.3g}" for i, x in enumerate(u) if x is not None and np.isfinite(x))
        + "; "
        + ", ".join(f"{k} {v:.3g}" for k, v in vr.items() if isinstance(v, float) and np.isfinite(v)),
    ]
    for k in ("sojourn", "waiting"):
        if isinstance(vr.get(k), dict):
            lines.append(
                f"  {k}: "
                + ", ".join(f"{kk} {vv:.3g}" for kk, vv in vr[k].items() if vv is not None and np.isfinite(vv))
            )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", action="append", help="n:d:λ:steps (repeatable); default: the three of issue 18")
    ap.add_argument(
        "--measure-cap", type=float, default=4e8, help="run the target when it needs at most this many steps"
    )
    ap.add_argument("--json", help="also write the results to this file")
    a = ap.parse_args()
    cfgs = (
        [(int(float(n)), int(d), float(lam), int(float(s))) for n, d, lam, s in (c.split(":") for c in a.config)]
        if a.config
        else CONFIGS
    )
    out = []
    for n, d, lam, s in cfgs:
        res = bench(n, d, lam, s, a.measure_cap)
        out.append(res)
        print(report(res), "\n", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, default=float)


if __name__ == "__main__":
    main()
