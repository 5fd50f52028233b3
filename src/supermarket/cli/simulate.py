"""``supermarket simulate``: run the chain and compare it with the theory (the main job)."""

from __future__ import annotations

import json
import math
import warnings
from decimal import Decimal, InvalidOperation

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .. import theory as th
from ..simulation import DEFAULT_STEPS, ENGINES, TIME_MODES, simulate as _simulate
from ._common import COUNT, FLOAT, LOAD_ANY, N_COUNT, OUTPUT_FIGURE, OUTPUT_FILE, REPLICATIONS, print_json, save_figure, to_jsonable


def _number(name: str, text):
    """``1e7`` -> 10000000 (int when integral), ``2.5`` -> 2.5."""
    if text is None:
        return None
    try:
        v = Decimal(str(text).strip())
    except (InvalidOperation, ValueError):
        raise click.BadParameter(f"{name} must be a number such as 1000, 1e7 or 2.5; got {text!r}") from None
    if not v.is_finite():
        raise click.BadParameter(f"{name} must be finite; got {text!r}")
    if v < 0:
        raise click.BadParameter(f"{name} must be >= 0; got {text!r}")
    return int(v) if v == v.to_integral_value() and v.adjusted() <= 18 else float(v)  # 1e400: float inf, refused


@click.command()
@click.option("--n", "n", type=N_COUNT, default=10_000, show_default=True, help="Number of servers (1e6 accepted).")
@click.option("--d", "d", type=COUNT, default=20, show_default=True, help="Number of choices d.")
@click.option("--load", "load", type=LOAD_ANY, default="0.99", show_default=True,
              help="Load λ (arrival rate per server). λ >= 1 runs a finite horizon with a warning.")
@click.option("--steps", "steps", type=COUNT, default=None,
              help=f"Events after burn-in (1e7 accepted). Default {DEFAULT_STEPS:.0e} unless --time is given.")
@click.option("--time", "time_", type=FLOAT, default=None,
              help="Horizon in continuous-time units after burn-in (instead of --steps).")
@click.option("--burn-in", "burn_in", type=str, default=None,
              help="Burn-in, in the unit of the horizon (steps, or time with --time). Default: a tenth of it.")
@click.option("--engine", "engine", type=click.Choice(ENGINES), default="profile", show_default=True,
              help="profile: counts chain, O(1) per event, any n; queues: per-queue reference (O(d) per "
                   "arrival); buckets: per-queue, O(1) per event.")
@click.option("--no-replace", "no_replace", is_flag=True,
              help="Sample the d queues without replacement (paper 002); default with replacement (paper 000).")
@click.option("--time-mode", "time_mode", type=click.Choice(TIME_MODES), default="discrete", show_default=True,
              help="discrete: the chain of paper 000; continuous: exact exponential event times.")
@click.option("--start", "start", type=str, default="empty", show_default=True,
              help="Start state: empty, fixed-point, customers:G (every queue at G), long:L (one queue of L).")
@click.option("--seed", "seed", type=click.IntRange(min=0), default=0, show_default=True, help="Random seed.")
@click.option("--replications", "replications", type=REPLICATIONS, default=1, show_default=True,
              help="Independent replications (seeds spawned from --seed).")
@click.option("--workers", "workers", type=COUNT, default=None, help="Threads for replications (default: cores).")
@click.option("--eps", "eps", type=FLOAT, default=0.1, show_default=True, help="ε of the good set N^ε, in (0, 1/10].")
@click.option("--plot", "plot", type=OUTPUT_FIGURE, default=None,
              help="Save a figure (profile vs π and the linearised prediction; maximum vs k) to this file.")
@click.option("--out", "out", type=OUTPUT_FILE, default=None,
              help="Write the full result as JSON to this file.")
@click.option("--precision", "precision", type=float, default=None,
              help="Run until the 95% intervals of the mean queue length and of every E[u_i] >= 0.1 have a "
                   "relative half-width at most this (e.g. 1e-3); the run doubles until then, up to --max-steps.")
@click.option("--max-steps", "max_steps", type=COUNT, default=None,
              help="Cap on measured steps per replication with --precision (default 2e9).")
@click.option("--batches", "batches", type=COUNT, default=None,
              help="Batch means per replication for the error analysis (default 1024; at most --steps).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def simulate(n, d, load, steps, time_, burn_in, engine, no_replace, time_mode, start, seed, replications,
             workers, eps, precision, max_steps, batches, plot, out, as_json):
    """Simulate the (n, d, λ)-supermarket process exactly and compare with the theory.

    With no options: n = 10000, d = 20, λ = 0.99 (k = 2), a run of a few seconds.  Prints
    the time-averaged profile E[u_i] ± standard error against the mean-field fixed point
    π(i) and the linearised profile (derived), the distribution of the maximum queue length
    against k_(λ,d), the fraction of time in the good set N^ε and the speed.

    \b
    Error bars (docs/model.md §9): blocking analysis of 1024 batch means per replication;
    "too short to estimate" where the run is shorter than its correlation time allows;
    n_eff = effective number of independent batches; self-checks E[u_1] = λ and
    E[u_i] = λ·E[P_(i−1)] (exact identities); a start-up transient found by MSER-5 is
    dropped, or reported when the start was not forgotten.  --precision runs until a
    target is met.  Ctrl-C stops early and reports what was measured, marked partial.
    """
    burn = _number("--burn-in", burn_in)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = _simulate(n, d, load, steps=steps, time=time_, burn_in=burn, engine=engine, replace=not no_replace,
                        start=start, seed=seed, replications=replications, workers=workers, time_mode=time_mode,
                        eps=eps, precision=precision, max_steps=max_steps, batches=batches)
    for w in caught:
        click.echo(f"supermarket: warning: {w.message}", err=True)
    data = res.to_dict()
    data["params"]["load"] = float(load)
    data["params"]["load_text"] = load
    if out:
        with open(out, "w") as fh:
            json.dump(to_jsonable(data), fh, indent=2, allow_nan=False)
    if plot:
        import matplotlib
        matplotlib.use("Agg")
        save_figure(res.plot(), plot, dpi=120)  # a write error (disk full) is one line, exit 1
    if as_json:
        print_json(data)
        return
    _print_result(res, load)
    if out:
        click.echo(f"wrote {out}")
    if plot:
        click.echo(f"wrote {plot}")


def _fmt(x, digits=6):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}g}"


def _print_result(res, load: str) -> None:
    con = Console()
    p = res.params
    title = (f"[bold]supermarket simulate[/]  n={p.n}  d={p.d}  λ={load}  "
             f"{'with' if p.replace else 'without'} replacement  engine={res.engine}  time={res.time_mode}")
    con.print(title)
    part = "  [red]PARTIAL (interrupted)[/]" if res.partial else ""
    con.print(f"{res.steps:,} events measured after {res.burn_in:,} of burn-in "
              f"({res.sim_time:.6g} time units), {res.replications} replication(s), {res.batches} batches{part}")
    k = res.k
    fp = res.fixed_point()
    lin = th.linearised_q(p.d, load, k) if k else None
    t = Table(title="Time-averaged profile (docs/model.md §1–3)")
    t.add_column("i", justify="right")
    t.add_column(escape("simulated E[u_i] ± s.e."), justify="right")
    t.add_column("n_eff", justify="right")
    t.add_column("mean field π(i)", justify="right")
    t.add_column("linearised 1 − q̃_i (derived)", justify="right")
    t.add_column(escape("λ·E[u_(i−1)^d] (identity, derived)" if p.replace else "λ·E[P_(i−1)] (identity, derived)"),
                 justify="right")
    for i in range(1, len(res.u_mean) + 1):
        row = [str(i), _pm(res.u_mean[i - 1], res.u_stderr[i - 1], bool(res.u_reliable[i - 1]), res.u_note[i - 1]),
               _fmt(res.u_n_eff[i - 1], 3) if res.u_reliable[i - 1] else "",
               _fmt(fp[i - 1]) if fp is not None else "—"]
        if lin is not None and i <= k:
            row.append(_fmt(1 - lin[i - 1]))
        elif lin is not None and i == k + 1:
            row.append("0")
        else:
            row.append("")
        prev = 1.0 if i == 1 else res.ud_mean[i - 2]
        row.append(_fmt(p.lam * prev))
        t.add_row(*row)
    con.print(t)

    mt = Table(title="Maximum queue length: fraction of time")
    mt.add_column("max length", justify="right")
    mt.add_column("fraction", justify="right")
    mt.add_column("", justify="left")
    kr = th.k_report(p.d, load) if k else None
    for m in sorted(res.max_queue_dist):
        mark = ""
        if k is not None and m == k:
            mark = "= k_(λ,d)"
        elif kr is not None and m in kr.possible_max:
            mark = "allowed near the boundary"
        mt.add_row(str(m), f"{res.max_queue_dist[m]:.6g}", mark)
    con.print(mt)
    if k is not None:
        con.print(f"k_(λ,d) = {k}  ({kr.note}; paper 000's regime needs n ≥ 1e15)")
        con.print(f"general hypothesis (docs/model.md §4, reconstructed): the maximum is within 1 of the largest k with "
                  f"n·π(k) ≥ 1, here {th.k_hypothesis(p.n, p.d, p.lam)}")
        con.print(f"time in the good set N^ε (ε = {res.eps:g}, clauses (a),(b) of docs/model.md §5): "
                  + escape(_pm(res.good_set_fraction, res.good_set_fraction_stderr, bool(res.good_set_fraction_reliable))))
        above = sum(f for m, f in res.max_queue_dist.items() if m > k)
        if above > 0:
            con.print(f"  a queue longer than k = {k} existed {above:.3g} of the time, and clause (a) fails then")
    mf = th.mean_queue_length(p.d, p.lam) if p.lam < 1 else None
    con.print("mean queue length "
              + escape(_pm(res.mean_queue_length, res.mean_queue_length_stderr, res.mean_queue_length_reliable))
              + (f"  (mean field Σπ(i) = {mf:.6g})" if mf is not None else "")
              + f";  mean sojourn time (Little) {res.mean_sojourn_time:.6g}")
    _print_errors(con, res)
    con.print(f"{res.events_per_second / 1e6:.1f} million events per second per core; wall time {res.wall_time:.2f} s")


def _pm(mean, se, reliable, note=""):
    """``mean ± s.e.`` when the error bar is reliable; otherwise say why there is none."""
    if reliable:
        return f"{mean:.6g} ± {_fmt(se, 2)}"
    if note.startswith("rare level") or mean == 0:
        return f"{mean:.6g} (rare: no error bar)"
    if "start not forgotten" in note:
        return f"{mean:.6g} (start not forgotten)"
    if "self-check" in note:
        return f"{mean:.6g} (error bars failed a self-check)"
    return f"{mean:.6g} (too short to estimate)"


def _print_errors(con, res) -> None:
    """How the error bars were made, the self-checks and the start-up diagnosis."""
    how = {"blocking": "blocking analysis of batch means (automatic plateau)",
           "pooled": f"blocking analysis of batch means, pooled over {res.replications} replications",
           "replications": f"spread of {res.replications} replications (Student t)"}.get(res.error_method,
                                                                                       res.error_method)
    con.print(f"error bars: 1 s.e., {how}; 95% intervals use Student t (docs/model.md §9)")
    if res.self_checks:
        done = [c for c in res.self_checks if c["result"] != "inconclusive"]
        fails = [c for c in done if c["result"] == "fail"]
        inc = len(res.self_checks) - len(done)
        text = "self-checks (exact identities E[u_1] = λ, E[u_i] = λ·E[P_(i−1)]): "
        if done:
            w = max(done, key=lambda c: abs(c["z"]))
            text += f"{len(done) - len(fails)} pass, {len(fails)} FAIL; largest |z| = {abs(w['z']):.1f} s.e. (i = {w['level']})"
        else:
            text += "none conclusive"
        if inc:
            text += f"; {inc} inconclusive (rare levels or unknown error)"
        con.print(escape(text))
    trunc = [s for s in res.start_up if s["truncated_batches"] > 0 and s["forgotten"]]
    if trunc:
        tt = sum(s["truncated_time"] for s in trunc)
        con.print(f"start-up transient detected: burn-in extended by {tt:.4g} time units in all "
                  f"(MSER-5, {len(trunc)} replication(s))")
    if res.precision is not None:
        pr = res.precision
        state = "met" if pr["met"] else ("NOT met: max steps reached" if pr["cap_hit"] else "not met (interrupted)")
        con.print(f"precision target {pr['target']:g} (relative 95% half-width): {state}; worst "
                  f"{pr.get('achieved', float('nan')):.3g} after {pr['rounds']} stretch(es)")
