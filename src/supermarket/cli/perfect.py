"""``supermarket perfect``: exact stationary samples by dominated coupling from the past
(docs/model.md §12)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from ._args import takes_args
from ._common import COUNT, FLOAT, LOAD, TaskProgress, print_json, stderr_is_tty
from .options import (
    dask_session,
    deprecated_alias,
    json_option,
    policy_option,
    replace_option,
    replications_option,
    scheduler_option,
    seed_option,
    server_classes_option,
    service_option,
    timeout_option,
    workers_option,
)

# the library's parameter names in a budget message, in the words of this command
_CLI_WORDS = (
    ("max_time=", "--max-seconds "),
    ("max_memory=", "--max-memory-mb "),
    ("max_time", "--max-seconds"),
    ("max_memory", "--max-memory-mb"),
)


@dataclass(frozen=True)
class PerfectArgs:
    """The options of ``supermarket perfect``, one field per option (click's names)."""

    n: int
    d: int
    load: str
    replications: int
    seed: int
    max_seconds: float | None
    max_memory_mb: float | None
    workers: int | None
    scheduler: str | None
    connect_timeout: float
    replace: bool
    policy: str
    service: str
    server_classes: str | None
    as_json: bool


def _cli_words(message: str) -> str:
    for py, cli in _CLI_WORDS:
        message = message.replace(py, cli)
    return message


@click.command()
@click.option("--n", "n", type=COUNT, default=100, show_default=True, help="Number of servers (1e4 accepted).")
@click.option("--d", "d", type=COUNT, default=2, show_default=True, help="Number of choices d.")
@click.option(
    "--load",
    "load",
    type=LOAD,
    default="0.9",
    show_default=True,
    help="Load λ in (0, 1). The default is 0.9, not the 0.99 of simulate and theory: the "
    "coalescence horizon of the dominating random-routing process grows steeply as λ → 1, "
    "so an exact sample at 0.99 costs far more.",
)
@replications_option(
    10,
    "Independent exact stationary samples: one perfect sample is one independent replication "
    "(sample s uses child s of --seed). --samples, its old name, is still accepted.",
)
@seed_option("Root seed (integer >= 0); sample s uses child s.")
@click.option(
    "--max-seconds",
    type=FLOAT,
    help="Wall-clock budget: the samples finished within it are kept (JSON partial: true); if none "
    "finished, exit 2. No approximate sample is ever returned.",
)
@click.option("--max-memory-mb", type=FLOAT, help="Memory budget of one sample in MiB (default 1024).")
@workers_option(
    "Threads running samples in parallel (default: all cores, at most one per sample; "
    "results do not depend on it; memory: --max-memory-mb per running sample)."
)
@scheduler_option(
    "Run each sample as one task on an existing Dask cluster (`dask scheduler` and "
    "`dask worker`); sample s still uses child s of --seed, so the samples are the same "
    "as locally. --max-seconds is then timed on the workers' clocks."
)
@timeout_option()
@replace_option(True)
@policy_option(
    "The sampler couples JSQ(d) chains: random (JSQ(1)) and jsq (JSQ(n) without replacement) are sampled "
    "the same way; the other rules are refused with the reason."
)
@service_option("The sampler is dominated by M/M/1 queues: exp only; the others are refused with the reason.")
@server_classes_option("Server classes: refused with the reason (the coupling is by queue lengths alone).")
@json_option("Print one JSON object (samples as sorted queue-lengths vectors, coalescence times).")
@deprecated_alias(
    "--samples",
    "--replications",
    "replications",
    type=COUNT,
    why="one name for independent repetitions in every command",
)
@takes_args(PerfectArgs)
def perfect(args: PerfectArgs) -> None:
    """Exact samples from the stationary law of the (n, d, λ) chain: no burn-in, no
    truncation (dominated coupling from the past, random routing as the dominating
    process, docs/model.md §12).  Prints the mean of u_i over samples with standard errors
    and the coalescence horizons (time units of the continuous-time chain)."""
    from ..system.methods import perfect_sampler
    from ..system.spec import System

    a = args
    # the method table refuses, before any work, a system the sampler has no coupling for
    perfect_sampler(
        System(a.n, a.d, a.load, rule=a.policy, replace=a.replace, service=a.service, server_classes=a.server_classes),
        lambda key: "--" + key.replace("_", "-"),
    )
    max_memory = _max_memory(a.max_memory_mb)
    res, partial = _sample(a, max_memory)
    samples = a.replications  # the library's word
    done = res.samples.shape[0]
    if a.as_json:
        out = res.to_dict()
        out["replications_requested"] = samples
        if partial:
            out.update(partial=True, partial_note=partial)
        print_json(out)
    else:
        click.echo(res.summary())
    if partial:
        click.echo(
            f"supermarket: warning: {done} of {samples} samples finished and are kept above (each one "
            f"exact); the rest did not: {partial}",
            err=True,
        )


def _max_memory(max_memory_mb: float | None) -> int | None:
    """``--max-memory-mb`` in bytes (None: the sampler's default); a bad value is one line, exit 2."""
    from . import UserError

    if max_memory_mb is None:
        return None
    if not 0 < max_memory_mb <= 2**43:
        raise UserError(
            f"--max-memory-mb must be a positive number of MiB, at most 2^43 (8 EiB); got {max_memory_mb!r}"
        )
    return max(1, int(max_memory_mb * 2**20))


def _sample(a: PerfectArgs, max_memory: int | None) -> tuple[Any, str | None]:
    """The samples (:func:`supermarket.perfect.sample`) and, when the budget stopped them, the
    reason (the samples finished within it are kept); none finished is one line, exit 2."""
    from .. import perfect as pf
    from . import UserError

    samples = a.replications  # the library's word
    threads = 1 if a.scheduler is not None else _threads(a.workers, samples, max_memory)
    with dask_session(a.scheduler, a.connect_timeout, a.workers) as client:
        partial = None
        with TaskProgress("exact samples", plain=a.as_json or not stderr_is_tty()) as bar:
            try:
                res = pf.sample(
                    a.n,
                    a.d,
                    a.load,
                    samples=samples,
                    seed=a.seed,
                    replace=a.replace,
                    policy=a.policy,
                    max_time=a.max_seconds,
                    max_memory=max_memory,
                    workers=threads,
                    client=client,
                    progress=bar,
                )
            except pf.BudgetExceeded as exc:
                if exc.completed is None:
                    raise UserError(
                        f"none of the {samples} samples finished within the budget: {_cli_words(str(exc))}; "
                        "raise the budget (--max-seconds, --max-memory-mb) or lower --n or --load"
                    ) from None
                res, partial = exc.completed, _cli_words(str(exc))
    return res, partial


def _threads(workers: int | None, samples: int, max_memory: int | None) -> int:
    """``--workers``, or all cores, at most one per sample and as many as half the memory holds."""
    import os

    from ..perfect.sampler import DEFAULT_MAX_MEMORY

    if workers is not None:
        return min(workers, samples)
    try:
        half = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        half = 8 * 2**30
    fit = max(1, half // (max_memory or DEFAULT_MAX_MEMORY))
    return max(1, min(os.cpu_count() or 1, samples, fit))
