"""``supermarket fluctuations``: the scaled process of paper 002 against its limit and the LNA."""

from __future__ import annotations

import warnings

import click
from rich.console import Console
from rich.table import Table

from ._common import COUNT, FLOAT, N_COUNT, OUTPUT_FIGURE, REPLICATIONS, print_json, stderr_is_tty


@click.command()
@click.option("--regime", type=click.Choice(["a", "b", "c"]), required=True,
              help="a: d_n/√n → 0 (from --kappa); b: d_n/√n → c (from --c, --zeta); "
                   "c: d_n/√n → ∞ (from --zeta, --d; d = n is JSQ).")
@click.option("--n", "n", type=N_COUNT, default=10_000, show_default=True, help="Number of servers (1e6 accepted).")
@click.option("--kappa", type=FLOAT, default=None, help="(a) κ = d_n λ_n^{d_n}; λ_n = (κ/d_n)^{1/d_n}. Default 1.")
@click.option("--theta", type=FLOAT, default=0.25, show_default=True, help="(a) d_n = ⌊n^θ⌋, 0 < θ < 1/2, unless --d.")
@click.option("--c", "c", type=FLOAT, default=None, help="(b) d_n = ⌊c√n⌋. Default 1.")
@click.option("--zeta", type=FLOAT, default=None,
              help="(b), (c) ζ: λ_n = c_n − ζ/√n with c_n = n^(−1/(2d_n)). Default 0 in (b), 1 in (c).")
@click.option("--d", "d", type=COUNT, default=None, help="(a) d_n instead of ⌊n^θ⌋; (c) d_n (default n).")
@click.option("--centring", type=click.Choice(["c_n", "one"]), default="c_n", show_default=True,
              help="(c) Q = √n(G1 − c_n) (docs/model.md §8) or √n(G1 − 1) with λ_n = 1 − ζ/√n (JSQ reading).")
@click.option("--time", "time_", type=FLOAT, default=200.0, show_default=True, help="Simulated time per replication after burn-in.")
@click.option("--burn-in", "burn_in", type=FLOAT, default=None, help="Burn-in time (default max(20, time/10)).")
@click.option("--replications", type=REPLICATIONS, default=2, show_default=True, help="Independent replications (child r of --seed).")
@click.option("--seed", type=int, default=0, show_default=True, help="Root seed.")
@click.option("--replace", is_flag=True, help="Sample the d_n queues with replacement (default: without, as in paper 002).")
@click.option("--workers", type=COUNT, default=None, help="Threads (default: all cores); results do not depend on it.")
@click.option("--sde-paths", "sde_paths", type=COUNT, default=256, show_default=True, help="Paths of the limit SDE.")
@click.option("--sde-time", "sde_time", type=FLOAT, default=100.0, show_default=True, help="Time per SDE path after burn-in.")
@click.option("--dt", type=FLOAT, default=1e-3, show_default=True, help="Euler–Maruyama step.")
@click.option("--reflection", type=click.Choice(["projection", "bridge"]), default="projection", show_default=True,
              help="(c) reflection by projection (docs/model.md §8) or by the Brownian-bridge maximum (smaller bias).")
@click.option("--plot", "plot", type=OUTPUT_FIGURE, default=None, help="Write a PNG: paths, histograms, autocorrelation.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def fluctuations(regime, n, kappa, theta, c, zeta, d, centring, time_, burn_in, replications, seed, replace,
                 workers, sde_paths, sde_time, dt, reflection, plot, as_json):
    """Fluctuations of order n^(−1/2) about the near-equilibrium centre in the three regimes
    of paper 002 (docs/model.md §8; the limit diffusions are derived): the exact chain's stationary
    moments of the scaled process (z1, z2) = (Z1, Z2) in (a), (Q, Y) in (b), (c), with
    standard errors, beside the limit diffusion (Euler–Maruyama) and the finite-n linear
    noise approximation at x^n.  Conditions of the regime that fail are warned about."""
    from .. import fluctuations as fl

    if regime != "c" and centring != "c_n":
        raise click.UsageError("--centring applies to --regime c only")
    if regime != "c" and reflection != "projection":
        raise click.UsageError("--reflection applies to --regime c only")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", fl.RegimeWarning)
        kw = dict(kappa=kappa, c=c, zeta=zeta, d=d, replace=replace)
        if regime == "a":
            kw["theta"] = theta
        if regime == "c":
            kw["centring"] = centring
        p = fl.regime_params(regime, n, **kw)
    for w in caught:
        click.echo(f"supermarket: warning: {w.message}", err=True)
    con = Console(stderr=True)
    status = con.status("simulating the chain and the limit diffusion…") if stderr_is_tty() else None
    if status:
        status.start()
    try:
        cmp = fl.compare(p, time=time_, burn_in=burn_in, replications=replications, seed=seed, workers=workers,
                         sde_paths=sde_paths, sde_time=sde_time, dt=dt, reflection=reflection)
    finally:
        if status:
            status.stop()
    if plot:
        from ..experiments.paper002 import plot_comparison

        plot_comparison(cmp, plot)
    out = cmp.to_dict()
    if plot:
        out["plot"] = plot
    if as_json:
        print_json(out)
        return
    _print(cmp, plot)


def _print(cmp, plot) -> None:
    from .. import fluctuations as fl

    con = Console()
    p = cmp.params
    con.print(f"[bold]supermarket fluctuations[/]  regime ({p.regime})  n={p.n}  d_n={p.d}  λ_n={p.lam:.10g}  "
              f"{'with' if p.replace else 'without'} replacement")
    con.print(f"d_n/√n = {p.b_n:.4g}, d_n(1−λ_n) = {p.d_one_minus_lambda:.4g}, κ_n = d_nλ_n^d_n = {p.kappa_n:.4g}, "
              f"c_n = {p.c_n:.8g}, ζ_n = √n(c_n − λ_n) = {p.zeta_n:.4g}")
    con.print(f"coordinates: {p.coordinates}")
    con.print(f"[italic]{fl.DERIVED_NOTE}[/]")
    t = Table(title="Stationary moments (± standard error)")
    t.add_column("source")
    for k in fl.KEYS:
        t.add_column(k, justify="right")
    rows = [("chain (simulated)", cmp.sim.moments), (f"limit diffusion (EM, {cmp.limit.paths} paths)", cmp.limit.moments)]
    if cmp.limit_exact is not None:
        rows.append(("limit, closed form (derived)", cmp.limit_exact))
    rows.append(("finite-n LNA at x^n", cmp.lna))
    for name, m in rows:
        if m is None:
            t.add_row(name, *(["—"] * 5))
            continue
        t.add_row(name, *[f"{getattr(m, k):.4f}" + (f" ± {m.stderr[k]:.4f}" if m.stderr else "") for k in fl.KEYS])
    con.print(t)
    for ref, row in cmp.z_scores().items():
        con.print(f"z-scores vs {ref}: " + ", ".join(f"{k} {v:+.2f}" for k, v in row.items()))
    s = cmp.sim
    con.print(f"chain: {s.events:.3g} events in {s.seconds:.2f} s ({s.events / max(s.seconds, 1e-9):.3g}/s), "
              f"{s.replications} × {s.time:g} time units after burn-in {s.burn_in:g}")
    if p.regime == "c":
        con.print(f"reflected limit: largest Q on any path = {cmp.limit.max_q:.3g}")
    if p.warnings:
        con.print(f"[yellow]{len(p.warnings)} condition(s) of the regime fail at this n (warned on stderr)[/]")
    if plot:
        con.print(f"plot written to {plot}")
