"""Coverage of simulate()'s 95 % intervals in heavy traffic from independent replications
(docs/model.md §9, "Heavy traffic at large n"), and of the control-adjusted error in short runs.

``heavy``: ``K`` independent runs (seeds ``seed + k``), each of ``R`` replications started
from the fixed point with a burn-in of a few slow-mode relaxation times, each replication
shorter than the 32 blocks of a relaxation time that blocking needs (so every error bar
comes from the spread between replications, Student t on R − 1 degrees of freedom). The
truth: ``E[u_1] = λ`` (exact), and for ``E[u_2]`` and the mean queue length one long run
(a seed no run uses) with its own error, which must be small beside one run's.

``short``: ``K`` runs at ``(1000, 2, 0.9)`` of ``--steps`` steps from the default (empty)
start, the truth of ``E[u_2]``, ``E[u_3]`` and the mean queue length from one long run; the
coverage of all runs, then of those whose adjusted error came from the plain plateau's blocks.

Coverage is reported with its binomial standard error ``√(c(1 − c)/K)``.

    PYTHONPATH=src python benchmarks/calibration/heavy_calibration.py heavy --runs 400
    PYTHONPATH=src python benchmarks/calibration/heavy_calibration.py short --runs 1500
    PYTHONPATH=src python benchmarks/calibration/heavy_calibration.py short --runs 400 --force-borrowed
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
from supermarket.simulation.run import HEAVY_BURN_RELAXATION_TIMES


def _quantities(r):
    """(name, value, half-width, reliable, s.e.) of the checked quantities of one result."""
    out = [
        (f"E[u_{i + 1}]", float(r.u_mean[i]), float(r.u_half_width[i]), bool(r.u_reliable[i]), float(r.u_stderr[i]))
        for i in range(3)
    ]
    q = r.queue_length
    out.append(("mean queue length", q.value, q.half_width, bool(q.reliable), q.stderr))
    return out


def _reference(n, d, lam, steps, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = simulate(n, d, lam, steps=steps, start="fixed-point", seed=seed, progress=False)
    ref = {}
    for name, v, _hw, rel, se in _quantities(r):
        ref[name] = (v, se if rel else math.nan)
    ref["E[u_1]"] = (lam, 0.0)
    return ref


def _tally(rows, ref, only_borrowed=False):
    print(
        f"{'quantity':18s} {'reliable':>8s} {'covered':>8s} {'coverage':>9s} {'± s.e.':>7s} {'z sd':>6s}  ref/rms s.e."
    )
    for name in ref:
        sel = [q for q in rows if q[name][2] and (q[name][4] or not only_borrowed)]
        k = len(sel)
        true, true_se = ref[name]
        cov = sum(abs(q[name][0] - true) <= q[name][1] for q in sel)
        c = cov / k if k else math.nan
        se = math.sqrt(c * (1 - c) / k) if k else math.nan
        z = np.array([(q[name][0] - true) / q[name][3] for q in sel]) if k else np.zeros(0)
        rms = np.sqrt(np.mean([q[name][3] ** 2 for q in sel])) if k else math.nan
        zsd = float(z.std(ddof=1)) if z.size > 1 else math.nan
        print(f"{name:18s} {k:8d} {cov:8d} {c:9.3f} {se:7.3f} {zsd:6.2f}  {true_se / rms:.3f}")


def _pooled_only() -> None:
    """Skip each replication's own result (``per_replication``): the calibration reads only the
    pooled one, and the 16 extra analyses per run would cost more than the simulation."""
    from supermarket.simulation import estimate, run

    run._summarize = lambda plan, reps, wall, interrupted, precision_state=None: estimate._result(
        plan, reps, wall, interrupted, precision_state
    )


def _force_borrowed() -> None:
    """Study mode (``--force-borrowed``): every adjusted series is treated as if its own blocking
    had found no plateau, so that its error comes from the plain plateau's blocks in every run
    whose plain error is known: the calibration of that estimator itself, not only of the few
    runs that need it."""
    import dataclasses

    from supermarket.simulation import controlled

    orig_cv, orig_est = controlled._cv_estimate, controlled._estimate

    def unreliable(*args, **kw):
        return dataclasses.replace(orig_est(*args, **kw), reliable=False)

    def forced(*args, **kw):
        controlled._estimate = unreliable
        try:
            return orig_cv(*args, **kw)
        finally:
            controlled._estimate = orig_est

    controlled._cv_estimate = forced


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("heavy", "short"))
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--d", type=int, default=None)
    ap.add_argument("--load", type=float, default=None)
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--reps", type=int, default=16, help="replications per run (heavy)")
    ap.add_argument("--relax", type=float, default=10.0, help="measured relaxation times per replication (heavy)")
    ap.add_argument("--steps", type=float, default=2e6, help="steps per run (short)")
    ap.add_argument("--ref-steps", type=float, default=2e9)
    ap.add_argument("--seed", type=int, default=1000)
    ap.add_argument("--out", default=None, help="append the per-run values as JSON lines")
    ap.add_argument("--ref", default=None, help="the reference as JSON ({quantity: [value, s.e.]}) instead of its run")
    ap.add_argument("--start", default=None, help="start of the runs (heavy: fixed-point; short: empty, the default)")
    ap.add_argument("--force-borrowed", action="store_true", help="short: see _force_borrowed")
    a = ap.parse_args()
    _pooled_only()
    if a.force_borrowed:
        _force_borrowed()
    heavy = a.mode == "heavy"
    n = a.n or 1000
    d = a.d or (10 if heavy else 2)
    lam = a.load or (0.99 if heavy else 0.9)
    rate = n * (1 + lam)
    t0 = time.process_time()
    ref = json.loads(a.ref) if a.ref else _reference(n, d, lam, int(a.ref_steps), seed=777_000)
    print(f"reference: {int(a.ref_steps):,} steps, {time.process_time() - t0:.1f} s CPU: {ref}")
    tau = relaxation_time(d, lam, n)
    if heavy:
        # the plan's choice (simulation.run: HEAVY_BURN_RELAXATION_TIMES), at a fixed length
        burn = int(HEAVY_BURN_RELAXATION_TIMES * tau * rate)
        kw = dict(steps=int(a.relax * tau * rate), burn_in=burn, replications=a.reps, workers=1)
    else:
        kw = dict(steps=int(a.steps))
    start = a.start or ("fixed-point" if heavy else "empty")
    rows, methods = [], {}
    t0 = time.process_time()
    for k in range(a.runs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = simulate(n, d, lam, start=start, seed=a.seed + k, progress=False, **kw)
        borrowed = " ".join(x for x in r.control_notes if "plain estimate's plateau" in x)
        q = {
            name: (
                v,
                hw,
                rel and math.isfinite(hw),
                se,
                name.replace("mean queue length", "the mean queue") in borrowed,
            )
            for name, v, hw, rel, se in _quantities(r)
        }
        rows.append(q)
        for note in r.control_notes:
            methods[note.split(":")[0][:80]] = methods.get(note.split(":")[0][:80], 0) + 1
        if a.out:
            with open(a.out, "a") as f:
                f.write(json.dumps({"seed": a.seed + k, **{nm: list(v) for nm, v in q.items()}}) + "\n")
    print(
        f"({n}, {d}, {lam}), start {start}, {kw}, relaxation time {tau:.4g}; "
        f"{a.runs} runs, {time.process_time() - t0:.1f} s CPU"
    )
    _tally(rows, ref)
    if not heavy:
        print("the runs whose adjusted error came from the plain estimate's plateau blocks:")
        _tally(rows, ref, only_borrowed=True)
    for m, c in sorted(methods.items(), key=lambda x: -x[1])[:8]:
        print(f"  {c:4d}x {m}")


if __name__ == "__main__":
    main()
