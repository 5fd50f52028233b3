"""Time to 3 and 4 significant digits on the mean queue length, the sojourn p99 and ``E[u_2]``,
plain time averages against the default error method, in the regimes of the papers.

Configurations: JSQ(d) at ``(n, d, λ) = (10^3, 2, 0.9)``, ``(10^4, 20, 0.99)``,
``(10^6, 100, 0.999)``, and JSQ and JIQ at ``(10^3, 0.9)``.  Methods: ``plain``
(``control_variates=False``) and ``defaults`` (``simulate``'s defaults as the checkout has them;
``--label`` names the column, e.g. ``today`` before a change and ``new`` after it), both as
doubling sequences of single runs; and ``precision``: ``simulate(precision=p, target=...)``,
the plan's own loop (in heavy traffic at large ``n`` its 16 independent replications,
docs/model.md §9), one run per number of digits.

**k significant digits** of an estimate ``x``: its 95 % half-width is at most half a unit of
the k-th significant digit, ``h <= 0.5·10^(⌊log10|x|⌋ − k + 1)``, and its error bar is marked
reliable.  The half-width is ``SimulationResult``'s Student-t half-width for the mean queue length
and ``E[u_2]``, and ``1.96 × s.e.`` for p99 (the response-time law gives a standard error only).

Each cell is the first of a doubling sequence of fresh, seeded runs (``steps = 2^20, 2^21, …``,
the default burn-in of a tenth, from the rounded fixed point, one worker) that meets the target:
the figure is that run's CPU seconds (``time.process_time``: a loaded machine inflates wall time,
not CPU time) and its events, burn-in included: what a run of the right length costs, not the
search.  Doubling stops before a run that would pass ``--cap`` CPU seconds (twice the last
run's); a cell never met is written ``> cap``.  A short run first compiles the kernels (not
counted).

    PYTHONPATH=src python benchmarks/bench_precision_regimes.py --cap 60 --json today.json
    PYTHONPATH=src python benchmarks/bench_precision_regimes.py --methods defaults --label new \\
        --json new.json --merge today.json --markdown table.md    # after a change: one more column
    PYTHONPATH=src python benchmarks/bench_precision_regimes.py --methods precision \\
        --json prec.json --merge new.json --markdown table.md     # the --precision column

**The precision method.** For a quantity and ``k`` digits not yet met by an earlier run, one
``precision=`` run with that quantity as ``target=`` and the relative half-width ``k`` digits
need, judged from the mean-field value (``Σπ(i)``, ``π(2)``; the others from a short first
run), from the fixed point, capped at ``--max-steps`` events per replication.  A cell is the
CPU seconds (every thread: ``time.process_time``) and the events (burn-in and every
replication included) of the cheapest of these runs whose own result meets it with a reliable
error bar (a run aimed at one cell often meets others).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
import warnings
from datetime import UTC, datetime

from supermarket.simulation import simulate
from supermarket.theory import fixed_point

CONFIGS = {
    "JSQ(2) n=10^3 λ=0.9": dict(n=1000, d=2, lam=0.9),
    "JSQ(20) n=10^4 λ=0.99": dict(n=10_000, d=20, lam=0.99),
    "JSQ(100) n=10^6 λ=0.999": dict(n=1_000_000, d=100, lam=0.999),
    "JSQ n=10^3 λ=0.9": dict(n=1000, d=1, lam=0.9, policy="jsq"),
    "JIQ n=10^3 λ=0.9": dict(n=1000, d=1, lam=0.9, policy="jiq"),
}
QUANTITIES = ("mean queue length", "p99 sojourn", "E[u_2]")
DIGITS = (3, 4)
FIRST_STEPS = 2**20
SEED = 20261202
Z95 = 1.96
#: The ``target=`` name of each quantity (``supermarket.simulation.precision``).
TARGETS = {"mean queue length": "mean-queue-length", "p99 sojourn": "p99", "E[u_2]": "u2"}


def _measured(r) -> dict:
    """(value, 95 % half-width) per quantity; the half-width is inf where not reliable."""
    inf = math.inf
    out = {
        "mean queue length": (
            r.mean_queue_length,
            r.mean_queue_length_half_width if r.mean_queue_length_reliable else inf,
        )
    }
    ok2 = len(r.u_mean) > 1 and bool(r.u_reliable[1])
    out["E[u_2]"] = (float(r.u_mean[1]) if len(r.u_mean) > 1 else 0.0, float(r.u_half_width[1]) if ok2 else inf)
    s = r.sojourn
    se = None if s is None or s.stderr is None else s.stderr["quantiles"].get(0.99)
    v = math.nan if s is None else s.quantiles[0.99]
    out["p99 sojourn"] = (v, Z95 * se if se is not None and math.isfinite(se) and se > 0 else inf)
    return {k: (float(a), float(b)) for k, (a, b) in out.items()}


def digits_met(value: float, half_width: float, k: int) -> bool:
    """Whether ``half_width`` is at most half a unit of the k-th significant digit of ``value``.

    >>> digits_met(2.35674, 0.0004, 4), digits_met(2.35674, 0.0006, 4), digits_met(0.7291, 4e-5, 4)
    (True, False, True)
    """
    if not (math.isfinite(value) and math.isfinite(half_width)) or value == 0:
        return False
    return half_width <= 0.5 * 10.0 ** (math.floor(math.log10(abs(value))) - k + 1)


def run_cell(config: dict, method: str, cap: float, log) -> dict:
    """The doubling sequence of one configuration and method: per quantity and digits, the CPU
    seconds and events of the first run that met it (None: not met under the cap)."""
    found: dict[str, dict | None] = {f"{q}|{k}": None for q in QUANTITIES for k in DIGITS}
    with warnings.catch_warnings():  # compile the kernels first: numba's compile is no part of a run
        warnings.simplefilter("ignore")
        simulate(**dict(config, steps=10_000, seed=1, start="fixed-point", workers=1))
    steps, last_cpu = FIRST_STEPS, 0.0
    while any(v is None for v in found.values()) and 2.0 * last_cpu <= cap:
        kw = dict(config, steps=steps, seed=SEED, start="fixed-point", workers=1)
        if method == "plain":
            kw["control_variates"] = False
        t0 = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = simulate(**kw)
        last_cpu = time.process_time() - t0
        m = _measured(r)
        for q in QUANTITIES:
            for k in DIGITS:
                if found[f"{q}|{k}"] is None and digits_met(*m[q], k):
                    found[f"{q}|{k}"] = {"cpu_s": last_cpu, "events": r.steps + r.burn_in, "value": m[q][0]}
        log(f"  {method}: {steps:.3g} steps, {last_cpu:.1f} s CPU; " + ", ".join(f"{q} ± {m[q][1]:.2g}" for q in m))
        steps *= 2
    return found


def _needed(value: float, k: int) -> float:
    """The relative half-width that ``k`` significant digits of ``value`` need."""
    return 0.5 * 10.0 ** (math.floor(math.log10(abs(value))) - k + 1) / abs(value)


def run_precision(config: dict, max_steps: float, log) -> dict:
    """One ``precision=`` run per number of digits (the plan's own loop; see the module's text)."""
    found: dict[str, dict | None] = {f"{q}|{k}": None for q in QUANTITIES for k in DIGITS}
    d = 1 if config.get("policy") in ("jsq", "jiq") else config["d"]
    pi = fixed_point(d, config["lam"], 40) if config.get("policy") is None else None
    guess = {"mean queue length": float(pi.sum()), "E[u_2]": float(pi[1])} if pi is not None else {}
    with warnings.catch_warnings():  # compile first (not counted)
        warnings.simplefilter("ignore")
        first = simulate(**dict(config, steps=10_000, seed=1, start="fixed-point", workers=1))
    for q in QUANTITIES:
        guess.setdefault(q, _measured(first)[q][0])
    for k in DIGITS:
        for q in QUANTITIES:
            if found[f"{q}|{k}"] is not None:  # an earlier run met it already
                continue
            if not (math.isfinite(guess[q]) and guess[q] > 0):  # never seen: no target to aim at
                log(f"  {q}: value 0 in every run so far, no {k}-digit target")
                continue
            p = _needed(guess[q], k)
            kw = dict(config, precision=p, target=TARGETS[q], seed=SEED, start="fixed-point", max_steps=max_steps)
            t0 = time.process_time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = simulate(**kw)
            cpu = time.process_time() - t0
            m = _measured(r)
            events = r.steps + r.burn_in  # all replications together
            guess.update({x: v for x, (v, _) in m.items() if x not in ("mean queue length", "E[u_2]") or pi is None})
            for qq in QUANTITIES:
                for kk in DIGITS:
                    old = found[f"{qq}|{kk}"]
                    if digits_met(*m[qq], kk) and (old is None or old["cpu_s"] > cpu):
                        found[f"{qq}|{kk}"] = {"cpu_s": cpu, "events": events, "value": m[qq][0]}
            log(
                f"  precision {p:.2g} on {q} ({k} digits): {r.replications} replication(s), {events:.3g} events, "
                f"{cpu:.1f} s CPU; " + ", ".join(f"{x} {m[x][0]:.6g} ± {m[x][1]:.2g}" for x in m)
            )
    return found


def markdown(results: dict, cap: float) -> str:
    """The table: a row per configuration, quantity and digits, a column per method."""
    methods = list(results["methods"])
    head = "| configuration | quantity | digits | " + " | ".join(methods) + " |"
    lines = [head, "|" + "---|" * (3 + len(methods))]
    for c in CONFIGS:
        for q in QUANTITIES:
            for k in DIGITS:
                cells = []
                for meth in methods:
                    cell = results["methods"][meth].get(c, {}).get(f"{q}|{k}", "missing")
                    if cell == "missing":
                        cells.append("not run")
                    elif cell is None:
                        cap = results["caps"][meth]
                        cells.append(f"> cap ({cap:g} s)" if isinstance(cap, (int, float)) else f"not met ({cap})")
                    else:
                        cells.append(f"{cell['cpu_s']:.2g} s ({cell['events']:.2g} events)")
                lines.append(f"| {c} | {q} | {k} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="plain,defaults", help="comma-separated: plain, defaults, precision")
    ap.add_argument("--label", default="today", help="the column name of the defaults")
    ap.add_argument("--cap", type=float, default=60.0, help="CPU seconds a single run may take")
    ap.add_argument("--config", action="append", choices=list(CONFIGS), help="only these (repeatable)")
    ap.add_argument("--max-steps", type=float, default=2e9, help="the precision method's cap per replication")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--merge", action="append", default=[], help="earlier --json output to add as columns")
    ap.add_argument("--markdown", help="write the table here (else print it)")
    a = ap.parse_args()
    results: dict = {"methods": {}, "caps": {}, "machine": f"{platform.node()} {platform.processor()}"}
    for path in a.merge:
        with open(path) as f:
            old = json.load(f)
        results["methods"].update(old["methods"])
        results["caps"].update(old["caps"])
    results["date"] = datetime.now(UTC).strftime("%Y-%m-%d")
    for meth in a.methods.split(","):
        name = {"plain": "plain", "precision": "precision"}.get(meth, a.label)
        results["methods"][name] = {}
        results["caps"][name] = a.cap if meth != "precision" else f"cap {a.max_steps:g} steps per replication"
        for c in a.config or CONFIGS:
            print(f"{c}, {name}", flush=True)
            log = lambda s: print(s, flush=True)  # noqa: E731
            if meth == "precision":
                results["methods"][name][c] = run_precision(CONFIGS[c], a.max_steps, log)
            else:
                results["methods"][name][c] = run_cell(CONFIGS[c], meth, a.cap, log)
            if a.json:
                with open(a.json, "w") as f:
                    json.dump(results, f, indent=1)
    table = markdown(results, a.cap)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
