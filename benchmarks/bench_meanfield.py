"""Benchmark of the mean-field module (issue 4) against rmftool (Gast et al.).

Run: ``.venv/bin/python benchmarks/bench_meanfield.py`` (rmftool and sympy come with the
``bench`` extra: ``.venv/bin/pip install rmftool sympy``; without them only our timings are
printed).  Prints a Markdown table; ``--json`` prints one JSON object.

1. Refined mean field at λ = 0.9, d = 2, 20 levels: π and V from
   :func:`supermarket.meanfield.refined_mean_field` and from rmftool's
   ``DDPP.meanFieldExpansionSteadyState(order=1)`` (symbolic derivatives with sympy, fixed
   point by integrating the ODE to t = 10000), the largest differences and the time of each.
2. Transient solve of the ODE (1.1) at d = 10^4, λ = 1 − 1e-6, T = 100 (not reachable by
   rmftool: u^d with d = 10^4 by sympy, and odeint without a Jacobian).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

from supermarket import meanfield as mf
from supermarket import theory as th


def best_time(fn, repeat=5, number=None):
    """Best wall time of ``fn()`` over ``repeat`` rounds of ``number`` calls (auto-sized)."""
    if number is None:
        t0 = time.perf_counter()
        fn()
        one = time.perf_counter() - t0
        number = max(1, int(0.2 / max(one, 1e-9)))
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def rmftool_refined(d, lam, L):
    import rmftool as rmf

    ddpp = rmf.DDPP()
    for i in range(L):
        e = np.zeros(L)
        e[i] = 1
        if i == 0:
            ddpp.add_transition(e, lambda x: lam * (1 - x[0] ** d))
        else:
            ddpp.add_transition(e, lambda x, i=i: lam * (x[i - 1] ** d - x[i] ** d))
        ddpp.add_transition(-e, (lambda x, i=i: x[i] - x[i + 1]) if i < L - 1 else (lambda x, i=i: x[i]))
    ddpp.set_initial_state(np.zeros(L))
    pi, V, _ = ddpp.meanFieldExpansionSteadyState(order=1)
    return np.asarray(pi), np.asarray(V)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    d, lam, L = 2, 0.9, 20
    out = {"refined": {"d": d, "load": lam, "levels": L}}
    ours = mf.refined_mean_field(d, lam, levels=L)
    t_ours = best_time(lambda: mf.refined_mean_field(d, lam, levels=L), args.repeat)
    closed = th.fixed_point(d, lam, L)
    r = out["refined"]
    r.update(
        {
            "ours_seconds": t_ours,
            "sum_pi": float(ours.pi.sum()),
            "sum_V": float(ours.V.sum()),
            "ours_pi_vs_closed_form": float(np.max(np.abs(ours.pi - closed))),
        }
    )
    try:
        import rmftool  # noqa: F401

        have_rmf = True
    except ImportError:
        have_rmf = False
    if have_rmf:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pi_r, V_r = rmftool_refined(d, lam, L)
            t_r = best_time(lambda: rmftool_refined(d, lam, L), max(1, args.repeat // 2), number=1)
        r.update(
            {
                "rmftool_seconds": t_r,
                "speedup": t_r / t_ours,
                "max_abs_diff_pi": float(np.max(np.abs(ours.pi - pi_r))),
                "rmftool_pi_vs_closed_form": float(np.max(np.abs(pi_r - closed))),
                "max_abs_diff_V": float(np.max(np.abs(ours.V - V_r))),
                "rmftool_sum_V": float(np.sum(V_r)),
            }
        )
    # transient solve at extreme parameters
    dT, lamT, T = 10**4, 1 - 1e-6, 100.0
    sol = mf.solve_meanfield(dT, lamT, T=T)
    t_tr = best_time(lambda: mf.solve_meanfield(dT, lamT, T=T), max(1, args.repeat // 2), number=1)
    out["transient"] = {
        "d": dT,
        "load": lamT,
        "T": T,
        "levels": sol.levels,
        "seconds": t_tr,
        "nfev": sol.nfev,
        "njev": sol.njev,
        "u_T": sol.final.tolist(),
        "pi": th.fixed_point(dT, lamT, sol.levels).tolist(),
    }
    # the fixed point and the refined expansion at the extremes of issue 4
    for dd, ll in ((10**6, 1 - 1e-9), (10**4, 1 - 1e-6)):
        key = f"refined_d{dd}_lam1m{1 - ll:.0e}"
        t_x = best_time(lambda dd=dd, ll=ll: mf.refined_mean_field(dd, ll), args.repeat)
        rx = mf.refined_mean_field(dd, ll)
        out[key] = {"seconds": t_x, "levels": rx.levels, "sum_pi": float(rx.pi.sum()), "sum_V": float(rx.V.sum())}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print("| task | ours | rmftool | notes |")
    print("|---|---|---|---|")
    if have_rmf:
        print(
            f"| refined mean field, λ=0.9, d=2, 20 levels | {t_ours * 1e3:.2f} ms | "
            f"{r['rmftool_seconds'] * 1e3:.0f} ms | "
            f"{r['speedup']:.0f}x faster; max|Δπ| = {r['max_abs_diff_pi']:.1e} (rmftool's π vs closed form "
            f"{r['rmftool_pi_vs_closed_form']:.1e}, ours {r['ours_pi_vs_closed_form']:.1e}); "
            f"max|ΔV| = {r['max_abs_diff_V']:.1e}; ΣV = {r['sum_V']:.6f} |"
        )
    else:
        print(
            f"| refined mean field, λ=0.9, d=2, 20 levels | {t_ours * 1e3:.2f} ms | (not installed) | "
            f"ΣV = {r['sum_V']:.6f} |"
        )
    tr = out["transient"]
    print(
        f"| ODE (1.1) from empty, d=1e4, λ=1−1e-6, T=100 | {tr['seconds'] * 1e3:.0f} ms | — | "
        f"{tr['levels']} levels, {tr['nfev']} drift / {tr['njev']} Jacobian evaluations |"
    )
    for key, v in out.items():
        if key.startswith("refined_d"):
            print(
                f"| refined mean field, {key[8:]} | {v['seconds'] * 1e3:.2f} ms | — | {v['levels']} levels, "
                f"ΣV = {v['sum_V']:.6g} |"
            )


if __name__ == "__main__":
    main()
