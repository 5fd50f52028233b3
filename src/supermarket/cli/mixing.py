"""``supermarket mixing``: coalescence and mixing times from a chosen start (docs/model.md §2, §6)."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from ._common import COUNT, LOAD, N_COUNT, REPLICATIONS, print_json, stderr_is_tty


@click.command()
@click.option("--n", "n", type=N_COUNT, default=1000, show_default=True, help="Number of servers (1e4 accepted).")
@click.option("--d", "d", type=COUNT, default=10, show_default=True, help="Number of choices d.")
@click.option("--load", "load", type=LOAD, default="0.99", show_default=True, help="Load λ in (0, 1).")
@click.option("--from", "start", default="good", show_default=True,
              help="Start: good (rounded fixed point), empty, customers:G (every queue at G, ‖x‖₁ = Gn) "
                   "or long:L (fixed point with one queue of length L).")
@click.option("--replications", "replications", type=REPLICATIONS, default=100, show_default=True,
              help="Independent coupled pairs (replication r uses child r of --seed).")
@click.option("--max-steps", "max_steps", type=COUNT, default=None,
              help="Step budget per pair; pairs not coalesced are reported as censored "
                   "(default: 20 × (burn-in + the start's own lower order × (1+λ))).")
@click.option("--burn-in", "burn_in", type=COUNT, default=None,
              help="Steps of the stationary copy alone (default: 10 × k d^(k−1) n log n).")
@click.option("--seed", type=int, default=0, show_default=True, help="Root seed (integer >= 0).")
@click.option("--workers", type=int, default=None, help="Worker processes (default: all cores).")
@click.option("--no-replace", "no_replace", is_flag=True, help="Sample the d queues without replacement (paper 002).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def mixing(n, d, load, start, replications, max_steps, burn_in, seed, workers, no_replace, as_json):
    """Coalescence time of a copy started at --from with a stationary copy under the sorted
    coupling (docs/model.md §2), its mean, median and 90% quantile with 95% confidence intervals,
    the bound t_mix(1/4) ≤ 0.75-quantile of τ, and the paper-000 orders (docs/model.md §6).

    Steps are steps of the uniformized chain; n(1+λ) steps are one unit of time."""
    from .. import mixing as mx

    if stderr_is_tty() and not as_json:
        click.echo(f"coupling {replications} pairs (n={n}, d={d}, λ={load}, from {start}) …", err=True)
    res = mx.coalescence(n, d, load, start=start, replications=replications, seed=seed,
                         max_steps=max_steps, burn_in=burn_in, replace=not no_replace,
                         workers=workers)
    out = res.to_dict()
    if as_json:
        print_json(out)
        return
    _print(out)


def _fmt(x) -> str:
    if isinstance(x, str):
        return x
    if x is None:
        return "—"
    return f"{x:.4g}"


def _print(out: dict) -> None:
    con = Console()
    p = out["params"]
    con.print(f"[bold]supermarket mixing[/]  n={p['n']}  d={p['d']}  λ={p['load']!r}  from {out['start']}  "
              f"replications={out['replications']}  k={out['k']}")
    con.print(f"stationary copy: rounded fixed point after {out['burn_in_steps']} steps; "
              f"budget {out['max_steps']} steps per pair; {out['steps_per_time_unit']:.6g} steps = 1 time unit")
    t = Table(title="Coalescence time τ (sorted coupling, docs/model.md §2)")
    for col in ("", "steps", "95% CI (steps)", "time units", "95% CI (time)"):
        t.add_column(col, justify="right")
    s, u = out["coalescence_steps"], out["coalescence_time"]
    mean_label = "mean (lower bound: censored)" if s["mean_is_lower_bound"] else "mean"
    t.add_row(mean_label, _fmt(s["mean"]), f"[{_fmt(s['ci'][0])}, {_fmt(s['ci'][1])}]",
              _fmt(u["mean"]), f"[{_fmt(u['ci'][0])}, {_fmt(u['ci'][1])}]")
    for key in ("median", "q90"):
        t.add_row(key, _fmt(s[key]), f"[{_fmt(s[key + '_ci'][0])}, {_fmt(s[key + '_ci'][1])}]",
                  _fmt(u[key]), f"[{_fmt(u[key + '_ci'][0])}, {_fmt(u[key + '_ci'][1])}]")
    t.add_row("t_mix(1/4) ≤ q75", _fmt(out["tmix_steps"]),
              f"[{_fmt(out['tmix_ci_steps'][0])}, {_fmt(out['tmix_ci_steps'][1])}]",
              _fmt(out["tmix_time"]), f"[{_fmt(out['tmix_ci_time'][0])}, {_fmt(out['tmix_ci_time'][1])}]")
    con.print(t)
    if out["censored"]:
        con.print(f"[yellow]{out['censored']} of {out['replications']} pairs did not coalesce within "
                  f"{out['max_steps']} steps (censored)[/]")
    b = Table(title="Paper 000 orders (docs/model.md §6, constants taken as 1)")
    for col in ("bound", "steps", "time units"):
        b.add_column(col, justify="right")
    b.add_row("upper k d^(k−1) n log n (from a good state)", _fmt(out["bound_upper_steps"]), _fmt(out["bound_upper_time"]))
    b.add_row("lower d^(k−1) n", _fmt(out["bound_lower_good_steps"]), _fmt(out["bound_lower_good_time"]))
    if out["bound_lower_steps"] != out["bound_lower_good_steps"]:
        b.add_row(f"lower from {out['start']}", _fmt(out["bound_lower_steps"]), _fmt(out["bound_lower_time"]))
    con.print(b)
