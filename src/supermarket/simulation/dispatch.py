"""The engines of :func:`supermarket.simulate` beyond the profile engines: a
:class:`~supermarket.system.spec.System` and the engine :func:`supermarket.system.methods.simulation_engine`
chose, run with ``simulate``'s keywords (docs/model.md §13–§15).

The options an engine does not take are refused first, by the one refusal of
:func:`supermarket.system.methods.check_options`; what is left is each engine's own reading of
the shared keywords: a burn-in given with ``steps`` is in events and the count engines with
classes take it in time, the table's batch means by default, a progress callback where the engine has one.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..model import as_seed_sequence, check_load, exact_load
from ..system import methods as _methods
from ..system.spec import System
from . import law_precision as _lp
from .classes import ClassesResult, simulate_classes
from .classes_phase import simulate_classes_phase
from .general import GeneralResult, simulate_general
from .phase_run import PhaseSimulationResult, simulate_phase_service
from .plan import PRECISION_FIRST_STEPS
from .precision import check_equilibrium

__all__ = ["run_engine", "events_rate"]


def events_rate(system: System) -> float:
    """Events (arrivals and departures) per unit of time of the event engine in equilibrium:
    ``2 n λ s̄`` (arrivals at rate ``nλs̄``, and as many departures; docs/model.md §14, §15); at
    load ``λ >= 1``, once every server is busy, ``n s̄ (λ + 1)`` (the departures at full capacity).

    >>> events_rate(System(100, 2, 0.5, service="lognormal:2", server_classes="0.5:2,0.5:1"))
    150.0
    """
    assert system.n is not None, "a simulation has a finite n"
    sbar = 1.0 if system.server_classes is None else system.server_classes.mean_speed
    return system.n * sbar * (system.lam + min(system.lam, 1.0))


def run_engine(
    engine: str,
    system: System,
    *,
    steps: int | float | None = None,
    time: float | None = None,
    burn_in: float | None = None,
    start: Any = "empty",
    seed: Any = 0,
    replications: int | None = None,
    workers: int | None = None,
    batches: int | None = None,
    control_variates: bool = True,
    progress: object = None,
    options: dict[str, object] | None = None,
    target: Any = None,
) -> PhaseSimulationResult | ClassesResult | GeneralResult:
    """Run ``system`` on ``engine`` (``"phase"``, ``"classes"``, ``"classes-phase"`` or
    ``"events"``); ``options`` are the other keywords of ``simulate`` the engine may refuse
    (``record_every``, ``precision``, ``client``, …), refused when set.  With ``precision``
    (and ``max_steps``, ``target``), the run is repeated from the same seed with a longer
    horizon until the target is met (:func:`supermarket.simulation.law_precision.run_law_precision`);
    the result's ``precision`` says how it went.

    Examples
    --------
    >>> run_engine("events", System(4, 2, 0.5, service="erlang:2"), time=10.0, options={"eps": 0.05})
    Traceback (most recent call last):
    ...
    supermarket.system.methods.Refusal: eps: the event engine (...) (service erlang:2) reports no good set N^ε ...
    """
    _methods.check_options(system, engine, {"steps": steps, "start": start, **(options or {}), "load": system.load})
    stable = exact_load(system.load) < 1
    if not stable:  # the engines that take it (the table): a finite horizon, as the profile engines say
        warnings.warn(_methods.no_equilibrium(system.load), RuntimeWarning, stacklevel=3)
    opts = dict(options or {})
    if opts.get("precision") is not None:
        check_equilibrium(opts["precision"], float(exact_load(system.load)))
        targets = _lp.law_targets(target, _methods.ENGINES[engine].text)
        base = as_seed_sequence(seed)
        rest = {k: v for k, v in opts.items() if k not in ("precision", "max_steps")}
        if steps is None and time is None:  # the first round, as the profile engines' first stretch
            steps = PRECISION_FIRST_STEPS
        rate = events_rate(system)  # events per unit of time (λ < 1 here: check_equilibrium above)

        def again(steps_: int | float | None, time_: float | None) -> Any:
            fresh = np.random.SeedSequence(
                base.entropy,
                spawn_key=base.spawn_key,
                pool_size=base.pool_size,
                n_children_spawned=base.n_children_spawned,
            )  # the same seed every round (a SeedSequence that spawned would not be)
            return run_engine(
                engine, system, steps=steps_, time=time_, burn_in=burn_in, start=start, seed=fresh,
                replications=replications, workers=workers, batches=batches, control_variates=control_variates,
                progress=progress, options=rest,
            )  # fmt: skip

        res, block = _lp.run_law_precision(
            again, steps=steps, time=time, precision=opts["precision"], max_steps=opts.get("max_steps"),
            targets=targets, first_events=steps if steps is not None else None if time is None else time * rate,
        )  # fmt: skip
        object.__setattr__(res, "precision", block)  # the result is frozen; it gains how the rounds went
        return res
    if target is not None:
        raise ValueError("target names the quantities of a precision= run; give precision too")
    n, d = system.n, system.d
    lam: Any = system.load  # as given: a string or Fraction is the exact value
    assert n is not None, "a simulation has a finite n"
    default = _methods.ENGINES[engine].batches
    assert default is not None, "the law engines state their batches"
    batches = default if batches is None else batches  # the table's default
    call: Callable[[float], object] | None = progress if callable(progress) else None
    common: dict[str, Any] = dict(policy=system.rule, replace=system.replace, time=time, seed=seed, workers=workers)
    common |= {key: opts.get(key) for key in ("record_every", "record_levels")}  # events; time on "events"
    if engine == "phase":
        return _noted(
            simulate_phase_service(
                n, d, lam, system.service, steps=steps, burn_in=burn_in, batches=batches,
                replications=1 if replications is None else replications, start=start,
                control_variates=control_variates, time_mode=str(opts.get("time_mode") or "discrete"), **common,
            ),
            system,
        )  # fmt: skip
    if engine == "events":
        notes = [] if stable else [_methods.no_equilibrium(system.load)]
        why = _methods.engine_note(system, engine)  # a rule no count engine runs: why this engine ran
        notes += [] if why is None else [why]
        if steps is not None and time is not None:
            raise ValueError("time: give time or steps, not both")
        if steps is not None:  # events: the time in which the equilibrium makes them on average
            rate = events_rate(system)
            common["time"] = float(steps) / rate
            burn_in = None if burn_in is None else float(burn_in) / rate
            notes.append(
                f"steps={float(steps):.6g}: the event engine ran for time {common['time']:.6g}, the mean time of that "
                f"many events (arrivals and departures, 2nλs̄ = {rate:.6g} per unit of time in equilibrium)"
            )
        res = simulate_general(
            n, d, lam, service=system.service, server_classes=system.server_classes, burn_in=burn_in,
            replications=replications, batches=batches, progress=call, control_variates=control_variates,
            start=start, **common,
        )  # fmt: skip
        if notes:  # the result is frozen; its notes gain what ran and what the horizon was
            object.__setattr__(res, "notes", (*notes, *res.notes))
        return res
    sc = system.server_classes
    assert sc is not None, "the count engines with classes need classes"
    phase = engine == "classes-phase"
    if steps is not None and burn_in is not None:  # in the unit of the horizon: events
        T = system.service.T
        per = float(np.max(-np.diag(np.asarray(T, float)))) if phase and T is not None else 1.0
        burn_in = float(burn_in) / (n * sc.mean_speed * (per + check_load(lam, name="lam")))
    kw: dict[str, Any] = dict(
        server_classes=sc, events=steps, burn_in=burn_in, replications=1 if replications is None else replications,
        batches=batches, control_variates=control_variates, progress=call, start=start, **common,
    )  # fmt: skip
    if phase:
        return _noted(simulate_classes_phase(n, d, lam, service=system.service, **kw), system)
    return _noted(simulate_classes(n, d, lam, **kw), system)


def _noted(res: Any, system: System) -> Any:
    """``res`` of a count engine, its notes led by the warning's words at load ``λ >= 1`` (as the
    event engine's are): the run measured a finite horizon."""
    if exact_load(system.load) >= 1:  # the result is frozen; its notes gain what the horizon was
        object.__setattr__(res, "notes", (_methods.no_equilibrium(system.load), *res.notes))
    return res
