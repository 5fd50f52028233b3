"""``supermarket theory`` and ``supermarket design``: the papers' calculators."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from .. import theory as th
from ..model import MAX_THEORY_N
from ._common import COUNT, FLOAT, LOAD, CountType, print_json
from .options import seed_option

THEORY_N = CountType(maximum=MAX_THEORY_N)  # closed forms: n up to 1e100 (Theorem 1.2 needs n >= 1e15)


@click.command()
@click.option("--n", "n", type=THEORY_N, default=10_000, show_default=True, help="Number of servers (1e6 accepted; up to 1e100).")
@click.option("--d", "d", type=COUNT, default=20, show_default=True, help="Number of choices d.")
@click.option("--load", "load", type=LOAD, default="0.99", show_default=True, help="Load λ in (0, 1), read exactly as written.")
@click.option("--eps", "eps", type=FLOAT, default=0.1, show_default=True, help="ε of the good set N^ε, in (0, 1/10].")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def theory(n, d, load, eps, as_json):
    """Closed forms for (n, d, λ): k_{λ,d}, the fixed point π, the linearised profile
    (derived), the good set, the conditions of Theorem 1.2, mixing bounds, the slow mode
    (derived) and the paper-002 regime (derived)."""
    rep = th.summary(n, d, load, eps)
    if as_json:
        print_json(rep)
        return
    _print_theory(rep)


def _print_theory(rep: dict) -> None:
    con = Console()
    p = rep["params"]
    con.print(f"[bold]supermarket theory[/]  n={p['n']}  d={p['d']}  λ={p['load']!r}  ε={p['eps']}")
    if rep["k"] is not None:
        kr = rep["k_report"]
        con.print(f"k_(λ,d) = ⌈log(1/(1−λ))/log d⌉ = [bold]{rep['k']}[/]   (log_d(1/(1−λ)) = {kr['log_ratio']:.6g})  (paper 000, docs/model.md §4)")
        con.print(f"  {kr['note']}")
    else:
        con.print("k_(λ,d): none for d = 1 (independent M/M/1 queues, no bounded maximum)")
    con.print(f"hypothesis maximum (largest k with n·π(k) ≥ 1) = {rep['k_hypothesis']}   (docs/model.md §4, reconstructed)")
    con.print(f"mean-field mean queue length Σπ(i) = {rep['mean_queue_length']:.10g}, "
              f"sojourn time = {rep['mean_sojourn_time']:.10g}   (docs/model.md §3)")

    t = Table(title="Fixed point π(i) and linearised profile (derived)")
    t.add_column("i", justify="right")
    t.add_column("π(i)", justify="right")
    t.add_column("1−π(i)", justify="right")
    t.add_column("q̃_i (derived)", justify="right")
    t.add_column("predicted queues of length i−1", justify="right")
    lin = rep["linearised_q"] or []
    cnt = rep["predicted_counts"] or []
    shown = min(len(rep["fixed_point"]), max(len(lin) + 2, 6))
    for i in range(1, shown + 1):
        pi = rep["fixed_point"][i - 1]
        t.add_row(str(i), f"{pi:.6g}", f"{1 - pi:.6g}",
                  _pred(lin, i - 1), _pred(cnt, i - 1))
    con.print(t)
    lz = rep.get("linearisation")
    if lz and not lz["valid"]:
        con.print(f"[yellow]note:[/] {lz['note']} (—).")
    if rep["theorem_1_2"] is not None:
        tt = Table(title="Theorem 1.2 of paper 000: conditions")
        for col in ("condition", "value", "holds", "detail"):
            tt.add_column(col)
        for c in rep["theorem_1_2"]["conditions"]:
            tt.add_row(c["name"], f"{c['value']:.6g}", "yes" if c["holds"] else "[red]no[/]", c["detail"])
        con.print(tt)
        con.print("Theorem 1.2 " + ("[green]applies[/]" if rep["theorem_1_2"]["applies"] else
                                    "[red]does not apply[/] (some condition fails)"))
        ms, mt = rep["mixing_steps"], rep["mixing_time"]
        con.print(f"mixing from a good state (paper 000, docs/model.md §6, constants 1): "
                  f"upper k d^(k−1) n log n = {ms['upper']:.4g} steps ({mt['upper']:.4g} time units), "
                  f"lower d^(k−1) n = {ms['lower']:.4g} steps ({mt['lower']:.4g} time units)")
        sm = rep["slow_mode"]
        con.print(f"slow mode (derived): μ_k = {sm['mu']:.6g} per unit time (approx. {sm['mu_approx']:.6g}), "
                  f"relaxation time {sm['relaxation_time']:.6g}")
    r = rep["regime_002"]
    con.print(f"paper 002 (derived limits): d/√n = {r['d_over_sqrt_n']:.4g}, κ = dλ^d = {r['kappa']:.4g}, "
              f"c_n = {r['c_n']:.6g}, ζ_n = {r['zeta']:.4g}, d(1−λ) = {r['d_one_minus_lambda']:.4g} "
              f"→ resembles regime ({r['regime']}): {r['note']}")


def _pred(values, j) -> str:
    """A prediction as text: empty past the end, "—" where it is outside its range (None)."""
    if j >= len(values):
        return ""
    return "—" if values[j] is None else f"{values[j]:.6g}"


@click.command()
@click.option("--n", "n", type=THEORY_N, default=None, help="Number of servers (predicted counts; with --verify, the simulated n).")
@click.option("--load", "load", type=LOAD, default=None, help="Load λ in (0, 1).")
@click.option("--max-queue", "max_queue", type=COUNT, default=None, help="Largest acceptable queue length K.")
@click.option("--latency", "latency", type=FLOAT, default=None,
              help="Target sojourn-time quantile, in mean service times (with --load: least d; with --d: largest load).")
@click.option("--quantile", "quantile", type=FLOAT, default=0.99, show_default=True, help="Quantile level of --latency.")
@click.option("--d", "d", type=COUNT, default=None, help="Number of choices (with --latency: the largest load that meets it).")
@click.option("--verify", "verify", is_flag=True, help="With --latency and --n: check the answer by simulating n servers.")
@click.option("--steps", "steps", type=COUNT, default=2_000_000, show_default=True, help="Events per replication for --verify.")
@seed_option("Root seed (integer >= 0) for --verify.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def design(n, load, max_queue, latency, quantile, d, verify, steps, seed, as_json):
    """Size a load balancer.  --max-queue K: the least d with k_(λ,d) ≤ K (docs/model.md §4).
    --latency T: the least d (given --load) or the largest load (given --d) whose mean-field
    sojourn-time --quantile is at most T (docs/model.md §10); --n N --verify checks it by simulation."""
    if max_queue is not None and latency is not None:
        raise click.UsageError("give either --max-queue or --latency, not both")
    if latency is not None:
        return _design_latency(n, load, latency, quantile, d, verify, steps, seed, as_json)
    if max_queue is None:
        raise click.UsageError("give --max-queue K (with --load) or --latency T (with --load or --d)")
    if load is None:
        raise click.UsageError("--max-queue needs --load")
    _design_max_queue(n, load, max_queue, as_json)


def _design_latency(n, load, latency, quantile, d, verify, steps, seed, as_json):
    from .. import response as rs
    if (load is None) == (d is None):
        raise click.UsageError("--latency needs exactly one of --load (answer: least d) or --d (answer: largest load)")
    if verify and n is None:
        raise click.UsageError("--verify needs --n (the number of servers to simulate)")
    if load is not None:
        rep = rs.least_d_for_latency(load, quantile, latency)
    else:
        rep = rs.max_load_for_latency(d, quantile, latency)
    if verify:
        v = rs.verify_latency(rep, n, steps=steps, seed=seed)
        rep = rs.LatencyDesign(**{**rep.__dict__, "verify": v})
    if as_json:
        print_json(rep.to_dict())
        return
    click.echo(rep.summary())


def _design_max_queue(n, load, max_queue, as_json):
    rep = th.design(load, max_queue, n)
    out = rep.to_dict()
    if n is not None:
        out["predicted_counts"] = [n * s for s in rep.share_by_length]  # NaN (outside the regime) -> null
    if as_json:
        print_json(out)
        return
    con = Console()
    con.print(f"At load λ = {load}, d = [bold]{rep.d}[/] choices give k_(λ,d) = {rep.k} ≤ {max_queue} "
              f"(d = {rep.d - 1} would give {th.k_lambda_d(rep.d - 1, load) if rep.d > 2 else '—'}).")
    t = Table(title="Predicted share of queues by length (linearised profile, derived)")
    t.add_column("length", justify="right")
    t.add_column("share", justify="right")
    if n is not None:
        t.add_column("queues (of n)", justify="right")
    for j, s in enumerate(rep.share_by_length):
        if s != s:  # NaN: outside the linearisation's regime
            row = [str(j), "—"] + (["—"] if n is not None else [])
        else:
            row = [str(j), f"{s:.6g}"] + ([f"{n * s:.6g}"] if n is not None else [])
        t.add_row(*row)
    con.print(t)
    if not rep.linearisation_valid:
        con.print(f"[yellow]note:[/] {rep.note} (—).")
