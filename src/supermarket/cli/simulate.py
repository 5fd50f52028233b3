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
from ..simulate import DEFAULT_STEPS, ENGINES, TIME_MODES, simulate as _simulate
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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def simulate(n, d, load, steps, time_, burn_in, engine, no_replace, time_mode, start, seed, replications,
             workers, eps, plot, out, as_json):
    """Simulate the (n, d, λ)-supermarket process exactly and compare with the theory.

    With no options: n = 10000, d = 20, λ = 0.99 (k = 2), a run of a few seconds.  Prints
    the time-averaged profile E[u_i] ± standard error (batch means) against the mean-field
    fixed point π(i) and the linearised profile (derived), the distribution of the maximum
    queue length against k_(λ,d), the fraction of time in the good set N^ε and the speed.
    Ctrl-C stops early and reports what was measured, marked partial.
    """
    burn = _number("--burn-in", burn_in)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = _simulate(n, d, load, steps=steps, time=time_, burn_in=burn, engine=engine, replace=not no_replace,
                        start=start, seed=seed, replications=replications, workers=workers, time_mode=time_mode,
                        eps=eps)
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
    t.add_column("mean field π(i)", justify="right")
    t.add_column("linearised 1 − q̃_i (derived)", justify="right")
    t.add_column(escape("λ·E[u_(i−1)^d] (identity, derived)" if p.replace else "λ·E[P_(i−1)] (identity, derived)"),
                 justify="right")
    for i in range(1, len(res.u_mean) + 1):
        row = [str(i), f"{res.u_mean[i - 1]:.6g} ± {_fmt(res.u_stderr[i - 1], 2)}",
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
                  f"{res.good_set_fraction:.6g} ± {_fmt(res.good_set_fraction_stderr, 2)}")
        above = sum(f for m, f in res.max_queue_dist.items() if m > k)
        if above > 0:
            con.print(f"  a queue longer than k = {k} existed {above:.3g} of the time, and clause (a) fails then")
    mf = th.mean_queue_length(p.d, p.lam) if p.lam < 1 else None
    con.print(f"mean queue length {res.mean_queue_length:.6g} ± {_fmt(res.mean_queue_length_stderr, 2)}"
              + (f"  (mean field Σπ(i) = {mf:.6g})" if mf is not None else "")
              + f";  mean sojourn time (Little) {res.mean_sojourn_time:.6g}")
    con.print(f"{res.events_per_second / 1e6:.1f} million events per second per core; wall time {res.wall_time:.2f} s")
