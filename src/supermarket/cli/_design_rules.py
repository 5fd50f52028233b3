"""``design --latency`` under a rule other than ``jsq-d`` or with ``--server-classes``
(docs/model.md §10, §15): the command calls :func:`design_rule_cli`, so that its own body changes
by a few lines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from .theory import DesignArgs

__all__ = ["design_rule_cli"]


def design_rule_cli(a: DesignArgs, budget: Any) -> Any:
    """Check the question (refused in one line before any work), answer it
    (:func:`supermarket.design.rule_latency.design_rule_latency`) and, with ``--verify``, check the
    answer with the event engine; returns the :class:`~supermarket.design.rule_latency.RuleLatencyDesign`.
    ``a.policy`` is in lower case; ``a.latency`` is given."""
    from ..design import rule_latency as rl
    from ..system import policies as pol
    from ..system.spec import System
    from .options import run_once

    n, load, d, policy, verify, scheduler = a.n, a.load, a.d, a.policy, a.verify, a.scheduler
    service, server_classes = a.service or "exp", a.server_classes
    assert a.latency is not None  # the command comes here with --latency only
    name = pol.check_policy(policy)
    rule = pol.RULES[name]
    reads_d = ", ".join(r.name for r in pol.RULES.values() if r.uses_d)
    if policy == "best":  # pragma: no cover - the command sends best elsewhere
        raise click.UsageError("--policy best compares the rules without --server-classes")
    if rule.uses_d and (load is None) == (d is None):
        raise click.UsageError(
            f"--latency with --policy {name} needs exactly one of --load (answer: least d) or --d "
            "(answer: largest load)"
        )
    if not rule.uses_d and d is not None:
        raise click.UsageError(
            f"--policy {name} reads no d (only {reads_d} do): give --load, and the answer is whether the target holds "
            "there and the largest load that meets it"
        )
    if not rule.uses_d and load is None:
        raise click.UsageError(
            f"--policy {name} reads no d: give --load (the answer: whether the target holds there and the largest load)"
        )
    if verify and n is None:
        raise click.UsageError("--verify needs --n (the number of servers to simulate)")
    if verify and scheduler is not None:
        raise click.UsageError(
            "--verify with --policy or --server-classes runs the event engine locally; drop --scheduler"
        )
    # the system, checked before any work (classes, law, the method table's refusal)
    dd = d if d is not None else (2 if rule.uses_d else 1)
    system = System(None, dd, load or "0.01", rule=name, service=service, server_classes=server_classes)
    rl.latency_method(system)
    if verify:
        System(n, dd, load or "0.01", rule=name, service=service, server_classes=server_classes)  # n whole per class
    budget.stage("the mean-field search")
    rep = run_once(
        scheduler, a.connect_timeout, rl.design_rule_latency, name, a.quantile, a.latency,
        load=load, d=d, service=service, server_classes=server_classes,
    )  # fmt: skip
    if verify:
        assert n is not None
        budget.stage("--verify's simulation (the event engine)")
        lam = rep.load if rep.load is not None else rep.answer
        sbar = system.server_classes.mean_speed if system.server_classes is not None else 1.0
        time = a.steps / (2.0 * n * lam * sbar)  # an arrival and a departure per customer
        v = rl.verify_rule_latency(rep, n, time=time, seed=a.seed, workers=a.workers)
        rep = rl.RuleLatencyDesign(**{**rep.__dict__, "verify": v})
    return rep
