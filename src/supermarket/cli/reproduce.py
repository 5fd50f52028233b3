"""``supermarket reproduce paper000|paper002``: the papers' experiments end to end."""

from __future__ import annotations

import importlib

import click

from ._common import OUTPUT_DIR

EXPERIMENTS = {
    "paper000": "supermarket.experiments.paper000",
    "paper002": "supermarket.experiments.paper002",
}


@click.command()
@click.argument("paper", type=click.Choice(sorted(EXPERIMENTS)))
@click.option("--quick", is_flag=True, help="Small sizes: under 3 minutes on 2 cores, every claim still shown.")
@click.option("--out", "out", type=OUTPUT_DIR, required=True, help="Output directory.")
@click.option("--seed", type=int, default=0, show_default=True, help="Root seed.")
@click.option("--workers", type=int, default=None, help="Worker processes (default: all cores).")
def reproduce(paper, quick, out, seed, workers):
    """Reproduce the claims of paper 000 (equilibrium at k, good set, mixing) or paper 002
    (the three diffusion regimes): tables (CSV, JSON), figures (PNG) and a Markdown summary
    in --out."""
    module = importlib.import_module(EXPERIMENTS[paper])
    module.run(out_dir=out, quick=quick, seed=seed, workers=workers)
