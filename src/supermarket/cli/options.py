"""One CLI vocabulary: the options shared by several commands, defined once.

Each function returns a click option decorator with one spelling and one type for one
concept, so that every command says ``--seed``, ``--workers``, ``--replace/--no-replace``…
the same way (``tests/cli/test_cli_options.py`` walks every command and fails on a second
spelling or a second type).  A command keeps its own default and help text where they
differ (e.g. ``--replace`` defaults to off in ``fluctuations``, which follows paper 002,
and on in ``mixing``).

Also :func:`dask_client`: ``--scheduler``/``--timeout`` to a Dask client (or ``None``), with
the one-line error (exit code 2) of the CLI when the address is bad, nothing answers or
the ``dask`` extra is missing; and :func:`one_task_options` / :func:`run_once` for the
commands whose work is one deterministic computation (``exact``, ``theory``, ``meanfield``,
``design``): with ``--scheduler`` it runs as one task on the cluster, same result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from ._common import COUNT, OUTPUT_DIR, REPLICATIONS

if TYPE_CHECKING:
    from distributed import Client

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]
"""What the functions here return: a decorator that adds options to a click command."""

#: A non-negative integer seed (the root of the SeedSequence tree).
SEED = click.IntRange(min=0)
#: Seconds to wait for a Dask scheduler (at most ``parallel.MAX_TIMEOUT``, 10^6 s: beyond about
#: 9e9 s the socket layer overflows).
TIMEOUT = click.FloatRange(min=0.1, max=1e6)


def start_option(default: str, help: str) -> Decorator:
    """``--start SPEC``: the initial state (see :mod:`supermarket.system.states`)."""
    return click.option("--start", "start", default=default, show_default=True, help=help)


def replace_option(default: bool, help: str | None = None) -> Decorator:
    """``--replace/--no-replace``: sample the d queues with or without replacement."""
    return click.option(
        "--replace/--no-replace",
        "replace",
        default=default,
        show_default=True,
        help=help or "Sample the d queues with replacement (--no-replace: without, as in paper 002).",
    )


def workers_option(help: str = "Local workers (default: all cores); results do not depend on it.") -> Decorator:
    """``--workers N``: a COUNT (integer >= 1, ``1e3`` accepted); default: all cores."""
    return click.option("--workers", "workers", type=COUNT, default=None, help=help)


def seed_option(help: str = "Root seed (integer >= 0); replication r uses child r.") -> Decorator:
    """``--seed S``: a non-negative integer, default 0."""
    return click.option("--seed", "seed", type=SEED, default=0, show_default=True, help=help)


def replications_option(
    default: int | None, help: str = "Independent replications (replication r uses child r of --seed)."
) -> Decorator:
    """``--replications R``: a count in ``[1, MAX_REPLICATIONS]`` (``1e3`` accepted); a default
    of None leaves the choice to the command (its help says what it is)."""
    return click.option(
        "--replications",
        "replications",
        type=REPLICATIONS,
        default=default,
        show_default=default is not None,
        help=help,
    )


def out_option(required: bool = False, help: str = "Output directory.") -> Decorator:
    """``--out DIR``: a directory the command fills (one meaning in every command: a directory).

    ``required``: the command refuses to run without it (click >= 8.3 treats an explicit
    ``default=None`` as a value, so the default is left unset here)."""
    if required:
        return click.option("--out", "out", type=OUTPUT_DIR, required=True, help=help)
    return click.option("--out", "out", type=OUTPUT_DIR, default=None, help=help)


def deprecated_alias(old: str, new: str, dest: str, type: click.ParamType | None = None, why: str = "") -> Decorator:
    """Keep ``old`` as a hidden, deprecated spelling of the option ``new`` (parameter ``dest``).

    Given on the command line, ``old`` prints one line ``supermarket: warning: OLD is
    deprecated; use NEW`` on stderr and its value (converted by ``type``, the new option's
    type) is passed as ``dest``; giving both is refused (exit 2).  Apply it *below* the
    ``click.command`` decorator and the new option, like any option."""
    import functools

    from click.core import ParameterSource

    hidden = "deprecated_" + old.lstrip("-").replace("-", "_")

    def deco(f: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            value = kwargs.pop(hidden, None)
            if value is not None:
                ctx = click.get_current_context()
                if ctx.get_parameter_source(dest) is ParameterSource.COMMANDLINE:
                    raise click.UsageError(f"give {new} only ({old} is its deprecated name)")
                click.echo(
                    f"supermarket: warning: {old} is deprecated; use {new}" + (f" ({why})" if why else ""), err=True
                )
                kwargs[dest] = value
            return f(*args, **kwargs)

        return click.option(old, hidden, type=type, default=None, hidden=True)(wrapper)

    return deco


def json_option(help: str = "Print one JSON object.") -> Decorator:
    """``--json``: print JSON instead of tables."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def scheduler_option(
    help: str = "Run on an existing Dask cluster (`dask scheduler` and `dask worker`); "
    "the numbers are the same as locally.",
) -> Decorator:
    """``--scheduler tcp://HOST:PORT``."""
    return click.option("--scheduler", "scheduler", default=None, metavar="tcp://HOST:PORT", help=help)


def timeout_option() -> Decorator:
    """``--timeout SECONDS``: how long to wait for the Dask scheduler."""
    return click.option(
        "--timeout",
        "connect_timeout",
        type=TIMEOUT,
        default=5.0,
        show_default=True,
        help="Seconds to wait for the Dask scheduler before giving up.",
    )


def parallel_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--workers``, ``--scheduler`` and ``--timeout`` together."""
    for deco in (timeout_option(), scheduler_option(), workers_option()):
        f = deco(f)
    return f


def dask_client(scheduler: str | None, timeout: float, workers: int | None = None) -> Client | None:
    """A :class:`dask.distributed.Client` for ``--scheduler`` (``None`` without one).

    Raises :class:`~supermarket.cli.UserError` (one line, exit code 2) when ``--workers`` is
    also given, the address is malformed, nothing answers, or the ``dask`` extra is missing.
    """
    from . import UserError

    if scheduler is None:
        return None
    if workers is not None:
        raise click.UsageError("--workers and --scheduler exclude each other (the cluster has its own workers)")
    from ..parallel import SchedulerError, connect, dask_available

    if not dask_available():
        raise UserError("--scheduler needs the 'dask' extra: pip install 'supermarket[dask]'")
    try:
        return connect(scheduler, timeout)
    except SchedulerError as exc:
        raise UserError(str(exc)) from None


ONE_TASK_HELP = (
    "Run the computation as one task on an existing Dask cluster (`dask scheduler` and "
    "`dask worker`), e.g. on a machine with more memory or cores. It is deterministic: "
    "the result is identical to a local run."
)


def one_task_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--scheduler`` (help: :data:`ONE_TASK_HELP`) and ``--timeout``, for a command whose work
    is one deterministic computation, run with :func:`run_once`."""
    for deco in (timeout_option(), scheduler_option(ONE_TASK_HELP)):
        f = deco(f)
    return f


@contextmanager
def dask_session(scheduler: str | None, timeout: float, workers: int | None = None) -> Iterator[Client | None]:
    """:func:`dask_client` as a context: the client (or ``None``), closed on the way out."""
    client = dask_client(scheduler, timeout, workers)
    try:
        yield client
    finally:
        if client is not None:
            client.close()


def run_once(scheduler: str | None, timeout: float, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` here, or with ``--scheduler`` as one task on the cluster.

    The connection is made (or refused in one line, exit code 2, within ``timeout``) before
    any work, and closed afterwards.  ``fn`` must be a module-level function.
    """
    from ..parallel import call

    with dask_session(scheduler, timeout) as client:
        return call(fn, *args, client=client, **kwargs)


def service_option(note: str, phase_type_only: bool = False) -> Decorator:
    """``--service LAW``: the service law of mean 1 (:mod:`supermarket.system.service`), default
    ``exp``; its forms from the registry (:data:`~supermarket.system.service.FAMILIES`: only those
    with a phase-type form where ``phase_type_only``), then the command's ``note``."""
    from ..system.service import FAMILIES

    forms = [f for f in FAMILIES.values() if f.phase_type or not phase_type_only]
    text = ", ".join(f.form + (f" ({f.bounds})" if f.bounds else "") for f in forms)
    return click.option("--service", default="exp", show_default=True, help=f"Service law of mean 1: {text}. {note}")


def server_classes_option(help: str) -> Decorator:
    """``--server-classes FRACTION:SPEED,…``: classes of servers with speeds
    (:mod:`supermarket.system.classes`), default none; the command's ``help`` says what it does
    with them."""
    return click.option("--server-classes", "server_classes", default=None, help=help)


def policy_option(note: str | None = None) -> Decorator:
    """``--policy RULE``: the dispatch rule (:mod:`supermarket.system.policies`), default ``jsq-d``;
    the choices and their help from the registry (:data:`~supermarket.system.policies.RULES`),
    then the command's ``note``."""
    from ..system.policies import DEFAULT_POLICY, POLICIES, RULES

    rules = ", ".join(f"{r.name} ({r.title.split(': ', 1)[-1]})" for r in RULES.values())
    uses_d = ", ".join(r.name for r in RULES.values() if r.uses_d)
    return click.option(
        "--policy",
        "policy",
        type=click.Choice(POLICIES, case_sensitive=False),
        default=DEFAULT_POLICY,
        show_default=True,
        help=f"Dispatch rule: {rules}; --d is read by {uses_d} only; docs/model.md §2." + (f" {note}" if note else ""),
    )
