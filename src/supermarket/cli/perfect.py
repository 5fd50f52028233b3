"""``supermarket perfect``: exact stationary samples by dominated coupling from the past
(docs/model.md §12)."""

from __future__ import annotations

import click

from ._common import COUNT, FLOAT, LOAD, print_json, stderr_is_tty
from .options import (dask_session, json_option, replace_option, scheduler_option, seed_option, timeout_option,
                      workers_option)


@click.command()
@click.option("--n", "n", type=COUNT, default=100, show_default=True, help="Number of servers (1e4 accepted).")
@click.option("--d", "d", type=COUNT, default=2, show_default=True, help="Number of choices d.")
@click.option("--load", "load", type=LOAD, default="0.9", show_default=True, help="Load λ in (0, 1).")
@click.option("--samples", "samples", type=COUNT, default=10, show_default=True,
              help="Independent exact samples (sample s uses child s of --seed).")
@seed_option("Root seed (integer >= 0); sample s uses child s.")
@click.option("--max-seconds", "max_seconds", type=FLOAT, default=None,
              help="Wall-clock budget; if a sample cannot finish within it, exit 2 (no approximate sample).")
@click.option("--max-memory-mb", "max_memory_mb", type=FLOAT, default=None,
              help="Memory budget of one sample in MiB (default 1024).")
@workers_option("Threads running samples in parallel (default 1; results do not depend on it).")
@scheduler_option("Run each sample as one task on an existing Dask cluster (`dask scheduler` and "
                  "`dask worker`); sample s still uses child s of --seed, so the samples are the same "
                  "as locally. --max-seconds is then timed on the workers' clocks.")
@timeout_option()
@replace_option(True)
@json_option("Print one JSON object (samples as sorted queue-lengths vectors, coalescence times).")
def perfect(n, d, load, samples, seed, max_seconds, max_memory_mb, workers, scheduler, connect_timeout, replace,
            as_json):
    """Exact samples from the stationary law of the (n, d, λ) chain: no burn-in, no
    truncation (dominated coupling from the past, random routing as the dominating
    process, docs/model.md §12).  Prints the mean of u_i over samples with standard errors
    and the coalescence horizons (time units of the continuous-time chain)."""
    from .. import perfect as pf
    from . import UserError

    max_memory = None
    if max_memory_mb is not None:
        if not 0 < max_memory_mb <= 2**43:
            raise UserError(f"--max-memory-mb must be a positive number of MiB, at most 2^43 (8 EiB); "
                            f"got {max_memory_mb!r}")
        max_memory = max(1, int(max_memory_mb * 2**20))
    with dask_session(scheduler, connect_timeout, workers) as client:
        if stderr_is_tty() and not as_json:
            click.echo(f"perfect sampling {samples} state(s) of (n={n}, d={d}, λ={load}) …", err=True)
        try:
            res = pf.sample(n, d, load, samples=samples, seed=seed, replace=replace,
                            max_time=max_seconds, max_memory=max_memory, workers=workers or 1, client=client)
        except pf.BudgetExceeded as exc:
            raise UserError(str(exc)) from None
    if as_json:
        print_json(res.to_dict())
        return
    click.echo(res.summary())
