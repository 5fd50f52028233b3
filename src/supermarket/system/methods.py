"""Which method serves a :class:`~supermarket.system.spec.System`: the one engine choice (as SciPy's
``solve_ivp`` keeps its ``METHODS``), written once and read by :func:`supermarket.simulate`, the
command line and the sweep (docs/model.md §13–§15).

- :data:`ENGINES`: every simulation engine, what it is in the model's terms, which options it
  takes beyond the system, the seed and the horizon in ``time``, and its defaults.
- :data:`SIMULATION`: for a law family and server classes (yes or no), the engines an
  ``engine=`` request may name, and the one each runs (the first is the default);
  :data:`RULE_DEFAULT`: the default of a rule the default's kernel does not dispatch by or of
  :data:`EVENTS_BY_DEFAULT` (``jbt``: the event engine), :func:`engine_note` the note saying so.
- :func:`simulation_engine`, :func:`check_options`: the engine for a system and a request, and
  the refusal of an option that engine does not take; the message is :func:`refusal`'s, the
  same whichever door (library, command line, sweep) the request came through, with the option
  spelled as that door spells it.
- :func:`exact_solver`, :func:`mean_field` (written in :mod:`.analytic`, re-exported here): the
  exact solver (:mod:`supermarket.stationary`) and the mean field (:mod:`supermarket.meanfield`)
  of a system, or the reason there is none;
  :func:`smooth_mean_field`: the reason the mean-field ODE, the refined mean field and the
  linear noise do not exist for a rule whose drift is discontinuous (its fluid fixed point,
  :func:`fluid_note`, does).

This module names methods and gives reasons; it runs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..model import exact_load
from . import policies as _pol
from .analytic import (
    PAPER_METHODS,
    SMOOTH_PARTS,
    exact_solver,
    fluid_note,
    mean_field,
    paper_method,
    perfect_sampler,
    refined_mean_field,
    smooth_mean_field,
)
from .event_starts import fixed_point_refusal
from .spec import System

__all__ = [
    "Engine",
    "Refusal",
    "ENGINES",
    "SIMULATION",
    "OPTIONS",
    "RULE_DEFAULT",
    "EVENTS_BY_DEFAULT",
    "simulation_engine",
    "engine_note",
    "check_options",
    "refusal",
    "time_mode_reason",
    "good_set_refusal",
    "check_time_mode",
    "TIME_MODES",
    "exact_solver",
    "mean_field",
    "smooth_mean_field",
    "refined_mean_field",
    "fluid_note",
    "no_equilibrium",
    "default_replications",
    "perfect_sampler",
    "paper_method",
    "PAPER_METHODS",
    "SMOOTH_PARTS",
]


@dataclass(frozen=True)
class Engine:
    """A simulation engine as the table knows it.

    Attributes
    ----------
    name : str
        Its name (``"profile"``, …, ``"events"``).
    text : str
        What it is, in the model's terms, for messages.
    takes : frozenset of str
        The options of :data:`OPTIONS` it takes.
    starts : tuple of str or None
        The start states it takes (None: every start of :mod:`supermarket.system.states`).
    replications : int
        Its default number of replications.
    batches : int or None
        Its default number of batch means (None: the profile engines' own rule).
    section : str
        Where docs/model.md specifies it.
    time_modes : tuple of str
        The time modes it runs (docs/model.md §1.1), its default first: ``"discrete"`` (its jump
        chain, each step held for its mean holding time) and/or ``"continuous"`` (exponential
        holding times, or exact event times).
    """

    name: str
    text: str
    takes: frozenset[str]
    starts: tuple[str, ...] | None
    replications: int
    batches: int | None
    section: str
    time_modes: tuple[str, ...] = ("discrete", "continuous")


#: The options an engine may or may not take, with the reason an engine that does not take one
#: gives, in the model's terms.  ``steps``: a horizon in events; ``start``: a start other than
#: ``"empty"``; ``record``: a trajectory (``record_every``, ``record_levels``); ``precision``: a
#: precision target (``precision``, ``max_steps``); ``client``: a Dask cluster (``--scheduler``);
#: ``cdf``: the response-time CDFs; ``plot``: the figure; ``time_mode``: a time mode other than the
#: engine's own (:attr:`Engine.time_modes`; the reason is :data:`TIME_MODES`'); ``eps``: the ε of paper
#: 000's good set N^ε; ``load``: a load λ >= 1 (a load below 1 is taken by every engine).
OPTIONS: dict[str, str] = {
    "steps": "runs for a time (it counts no uniformized events); give {time} instead",
    "start": "starts {starts}",
    "record": "records no trajectory",
    "precision": "has no precision target (its horizon is fixed in advance)",
    "client": "runs on local threads (not on a cluster)",
    "cdf": "gives no response-time CDF",
    "plot": "draws no figure",
    "time_mode": "runs in {modes} time only ({why})",
    "eps": "reports no good set N^ε (paper 000's good set is of exponential service and one server class)",
    "load": "runs load < 1 only: its error analysis and control variates are made for an equilibrium, which "
    "exists only then; the profile engines and the event engine (engine 'events') run a finite horizon at load >= 1",
}
_ALL = frozenset(OPTIONS)
_COUNT = frozenset({"steps", "start"})
# the count engines of laws and classes (cdf: the joined law, §13.2; record: every record_every events)
_LAW = _COUNT | {"precision", "load", "cdf", "record", "plot"}
# its fixed point: system.event_starts; record: every record_every units of time (its horizon's unit)
_EVENTS = frozenset({"steps", "start", "load", "cdf", "precision", "record", "plot"})
#: Why an engine runs in one time mode only (docs/model.md §1.1), by engine.
TIME_MODES: dict[str, str] = {
    "classes": "its chain uniformized at the constant rate n s̄ (1 + λ), each step held for its mean; "
    "exponential holding times: the event engine, engine 'events'",
    "classes-phase": "its chain uniformized at the constant rate Λ of docs/model.md §15.7, each step held for "
    "its mean; exponential holding times: the event engine, engine 'events'",
    "events": "exact event times, one service time drawn per customer",
}

ENGINES: dict[str, Engine] = {
    e.name: e
    for e in (
        Engine("profile", "the profile engine", _ALL, None, 1, None, "§1"),
        Engine("queues", "the per-queue reference engine", _ALL, None, 1, None, "§1"),
        Engine("buckets", "the per-queue bucket engine", _ALL, None, 1, None, "§1"),
        Engine("phase", "the phase-type count engine", _LAW, ("empty", "fixed-point"), 1, 256, "§13"),
        Engine(
            "classes", "the count engine with classes", _LAW, ("empty", "fixed-point"), 1, 256, "§15", ("discrete",)
        ),
        Engine(
            "classes-phase",
            "the count engine with classes and a phase-type law",
            _LAW,
            ("empty", "fixed-point"),
            1,
            256,
            "§15.7",
            ("discrete",),
        ),
        Engine(
            "events",
            "the event engine (one queue per server)",
            _EVENTS,
            ("empty", "fixed-point"),
            4,
            256,
            "§14",
            ("continuous",),
        ),
    )
}

#: (law family, server classes?) -> {engine requested: engine run}; the first entry is the default
#: (``engine=None``, the default of :func:`supermarket.simulate`, and ``"profile"`` ask for it).
SIMULATION: dict[tuple[str, bool], dict[str, str]] = {
    ("exponential", False): {
        "profile": "profile",
        "queues": "queues",
        "buckets": "buckets",
        "phase": "phase",  # exp is the one-phase law: a second engine of the same chain
        "events": "events",
    },
    ("phase-type", False): {"profile": "phase", "phase": "phase", "events": "events"},
    ("general", False): {"profile": "events", "events": "events"},
    ("exponential", True): {"profile": "classes", "phase": "classes-phase", "events": "events"},
    ("phase-type", True): {"profile": "events", "phase": "classes-phase", "events": "events"},
    ("general", True): {"profile": "events", "events": "events"},
}

#: The engine that runs a rule no count engine of its row runs (:attr:`Rule.engines
#: <supermarket.system.policies.Rule.engines>`), when the default (``engine=None`` or ``"profile"``) is
#: asked for: the event engine, which runs every rule, law and server classes.
RULE_DEFAULT = "events"
#: The rules whose default (``engine=None``) is :data:`RULE_DEFAULT` though a count engine runs them on
#: request (``jbt``: ``engine="profile"`` or ``"buckets"``, and ``"phase"``; its default keeps the numbers it
#: printed, and so does ``"profile"`` where it stands for another engine, with a phase-type law).
EVENTS_BY_DEFAULT = ("jbt",)

#: The kernel of the rule registry (:data:`supermarket.system.policies.ENGINES`) an engine runs.
_KERNEL = {"buckets": "profile"}


class Refusal(ValueError):
    """A ValueError refusing one option (``key``, as the caller spelled it) of a system."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


def _choices(row: Mapping[str, str]) -> str:
    runs: dict[str, list[str]] = {}
    for req, run in row.items():
        runs.setdefault(run, []).append(repr(req))
    parts = []
    for i, (run, reqs) in enumerate(runs.items()):
        named = reqs[0] + (", the default" if i == 0 else "") + "".join(f", or {r}" for r in reqs[1:])
        parts.append(f"{ENGINES[run].text} (engine {named})")
    return " or ".join(parts)


def simulation_engine(system: System, engine: str | None = None, time_mode: str | None = None) -> str:
    """The engine of :data:`ENGINES` that runs ``system`` when ``engine`` is asked for (None: the default)
    in ``time_mode`` (None: the engine's own).  When the default is asked for (``engine`` None or
    ``"profile"``) and it does not run ``time_mode``, the first engine of the system's row that runs the
    rule in that mode (:attr:`Engine.time_modes`); when none does, the default, whose refusal
    (:func:`check_options`) says why.

    Raises
    ------
    ValueError
        Naming ``engine``: an engine this system does not run on, with those it does, or a rule
        the engine does not run (a count engine named for ``jbt`` says which rules it dispatches by).

    Examples
    --------
    >>> simulation_engine(System(10, 2, 0.5, service="erlang:2"))
    'phase'
    >>> simulation_engine(System(10, 2, 0.5, service="erlang:2", server_classes="0.5:2,0.5:1"), "phase")
    'classes-phase'
    >>> simulation_engine(System(10, 2, 0.5, rule="jbt")), simulation_engine(System(10, 2, 0.5, rule="jbt"), "profile")
    ('events', 'profile')
    >>> simulation_engine(System(10, 2, 0.5, service="lognormal:2"), "queues")
    Traceback (most recent call last):
    ...
    supermarket.system.methods.Refusal: engine: service lognormal:2 runs on the event engine ...; not 'queues'
    >>> c = System(10, 2, 0.5, server_classes="0.5:2,0.5:1")
    >>> simulation_engine(c), simulation_engine(c, time_mode="continuous"), simulation_engine(c, "phase", "continuous")
    ('classes', 'events', 'classes-phase')
    """
    run = _requested_engine(system, engine)
    if time_mode is None or (isinstance(engine, str) and engine.strip().lower() != "profile"):
        return run
    mode = check_time_mode(time_mode)
    if mode in ENGINES[run].time_modes:
        return run
    for request in SIMULATION[(system.law_family, system.has_classes)]:
        try:
            other = _requested_engine(system, request)
        except Refusal:
            continue
        if mode in ENGINES[other].time_modes:
            return other
    return run


def _requested_engine(system: System, engine: str | None) -> str:
    """:func:`simulation_engine` for the system's own time mode."""
    row = SIMULATION[(system.law_family, system.has_classes)]
    if engine is None:  # the default: the row's first engine, or the event engine's for such a rule
        engine = RULE_DEFAULT if system.rule in EVENTS_BY_DEFAULT else next(iter(row))
    if not isinstance(engine, str):
        raise TypeError(f"engine must be None or a string, one of {', '.join(sorted(ENGINES))}; got {engine!r}")
    engine = engine.strip().lower()
    if engine not in row:
        known = ("profile", "queues", "buckets", "phase", "events")
        if engine not in known:
            raise Refusal("engine", f"engine must be one of {', '.join(known)}; got {engine!r}")
        raise Refusal("engine", f"engine: {system.describe()} runs on {_choices(row)}; not {engine!r}")
    run = row[engine]
    if engine == "profile" and run != "profile" and system.rule in EVENTS_BY_DEFAULT:
        return RULE_DEFAULT  # "profile" stands for the row's default here, and such a rule's is the event engine
    if _KERNEL.get(run, run) in _pol.RULES[system.rule].engines:
        return run
    if engine == "profile" and RULE_DEFAULT in _pol.RULES[system.rule].engines:  # the default of such a rule
        return RULE_DEFAULT
    raise Refusal("policy", _no_kernel(system, run))


def _count_rules(run: str) -> list[str]:
    kernel = _KERNEL.get(run, run)
    return [r.name for r in _pol.RULES.values() if kernel in r.engines]


def _no_kernel(system: System, run: str) -> str:
    """Why ``run`` (an engine of the system's row) does not run the system's rule, and what does."""
    return (
        f"policy {system.rule!r}: {ENGINES[run].text} dispatches by {', '.join(_count_rules(run))} only; "
        f"{system.rule} runs on {ENGINES[RULE_DEFAULT].text} (engine 'events', its default) or exactly "
        "(exact, a small n)"
    )


def engine_note(system: System, engine: str) -> str | None:
    """Why ``engine`` (the one :func:`simulation_engine` chose) runs ``system`` when it is not
    its row's own default, for the result's notes; None otherwise.

    >>> engine_note(System(10, 2, 0.5, rule="jbt"), "events")[:50]
    'engine events: policy jbt runs on the event engine'
    >>> engine_note(System(10, 2, 0.5, service="lognormal:2"), "events") is None
    True
    """
    row = SIMULATION[(system.law_family, system.has_classes)]
    default = next(iter(row.values()))
    runs = _KERNEL.get(default, default) in _pol.RULES[system.rule].engines
    if engine != RULE_DEFAULT or default == RULE_DEFAULT or (runs and system.rule not in EVENTS_BY_DEFAULT):
        return None
    why = "" if runs else f"{ENGINES[default].text} dispatches by {', '.join(_count_rules(default))} only, so "
    asks = []  # the requests of this row that run a count chain of the rule
    for req in row:
        try:
            if _requested_engine(system, req) != RULE_DEFAULT:
                asks.append(req)
        except Refusal:
            continue
    return (
        f"engine events: {why}policy {system.rule} runs on {ENGINES[RULE_DEFAULT].text} by default, exact in law for "
        "every service law and server classes (docs/model.md §14)"
        + (f"; engine {', '.join(repr(a) for a in asks)} runs it on request" if asks else "")
    )


def refusal(system: System, engine: str, option: str, spelled: str | None = None, time: str = "time=") -> str:
    """The one message refusing ``option`` (a key of :data:`OPTIONS`) on ``engine`` for ``system``,
    the option ``spelled`` as the door the user came through spells it (``precision``,
    ``--precision``), ``time`` the spelling of the horizon in time (``time=``, ``--time``).

    >>> refusal(System(10, 2, 0.5, service="erlang:2"), "phase", "eps")
    "eps: the phase-type count engine (service erlang:2) reports no good set N^ε (paper 000's good set ...)"
    """
    e = ENGINES[engine]
    modes = " or ".join(e.time_modes)
    starts = " or ".join(repr(s) for s in e.starts or ())
    why = OPTIONS[option].format(time=time, starts=starts, modes=modes, why=time_mode_reason(system, engine))
    return f"{spelled or option}: {e.text} ({system.describe()}) {why}"


def time_mode_reason(system: System, engine: str) -> str:
    """Why ``engine`` runs ``system`` in its one time mode (docs/model.md §1.1); for the event engine
    with a general law, the reason of principle: no discrete chain exists.

    >>> time_mode_reason(System(10, 2, 0.5, service="lognormal:2"), "events")[:60]
    'exact event times; no discrete chain exists for service logn'
    """
    if engine != "events":
        return TIME_MODES.get(engine, "")
    if system.law_family == "general":
        return (
            f"exact event times; no discrete chain exists for service {system.service.spec}: the elapsed service "
            "times are part of the state, which is then no chain of countably many states with bounded rates, so "
            "there is no jump chain to hold for its mean (docs/model.md §1.1)"
        )
    for request in SIMULATION[(system.law_family, system.has_classes)]:
        try:
            other = _requested_engine(system, request)
        except Refusal:
            continue
        if "discrete" in ENGINES[other].time_modes:
            chain = f"the discrete jump chain of this Markov system: {ENGINES[other].text}, engine {request!r}"
            return f"{TIME_MODES['events']}; {chain}"
    return f"{TIME_MODES['events']}; no count engine dispatches by {system.rule} for {system.describe()}"


def check_time_mode(value: object) -> str:
    """``value`` as a time mode, ``"discrete"`` or ``"continuous"`` (ValueError naming ``time_mode``).

    >>> check_time_mode(" Discrete ")
    'discrete'
    """
    mode = value.strip().lower() if isinstance(value, str) else value
    if mode not in ("discrete", "continuous"):
        raise ValueError(f"time_mode must be 'discrete' or 'continuous'; got {value!r}")
    assert isinstance(mode, str)
    return mode


def check_options(
    system: System,
    engine: str,
    given: Mapping[str, object],
    spell: Callable[[str], str] | None = None,
    time: str = "time=",
) -> None:
    """Refuse (ValueError, :func:`refusal`'s message) the first option of ``given`` that is set
    (not None; a start other than ``"empty"``; a ``time_mode`` not among the engine's
    :attr:`~Engine.time_modes`) and that ``engine`` does not take.  ``given`` maps the keys of
    :data:`OPTIONS` (or ``record_every``, ``record_levels``, ``max_steps``, of ``record`` and
    ``precision``) to their values; ``spell`` names a key as the door spells it.

    >>> s = System(10, 2, 0.5, server_classes="0.5:2,0.5:1")
    >>> check_options(s, "classes", {"steps": 10, "start": "empty"})
    >>> check_options(s, "classes", {"start": "perfect"}, spell=lambda k: "--" + k)
    Traceback (most recent call last):
    ...
    supermarket.system.methods.Refusal: start 'perfect': server_classes: the perfect sampler couples the chains ...
    >>> check_options(s, "classes", {"time_mode": "discrete", "load": "0.9"})
    >>> check_options(s, "classes", {"time_mode": "continuous"})
    Traceback (most recent call last):
    ...
    supermarket.system.methods.Refusal: time_mode: the count engine with classes (...) runs in discrete time only ...
    """
    e = ENGINES[engine]
    group = {"record_every": "record", "record_levels": "record", "max_steps": "precision"}
    for key, value in given.items():
        option = group.get(key, key)
        if value is None or (option == "start" and isinstance(value, str) and value == "empty"):
            continue
        if option == "eps" and (no := good_set_refusal(system)):  # whichever engine: the system has none
            raise Refusal(key, f"{spell(key) if spell else key}: {no}")
        if option == "time_mode":  # the engine's modes (Engine.time_modes), whatever it takes
            if check_time_mode(value) in e.time_modes:
                continue
            raise Refusal(key, refusal(system, engine, option, spell(key) if spell else key, time))
        if option == "load" and exact_load(value) < 1:
            continue
        if option == "start" and isinstance(value, str) and value == "perfect" and not _takes_perfect(e):
            try:  # the perfect sampler's own reason where it has one (a law, classes, a rule that is no JSQ(d))
                perfect_sampler(system)
            except ValueError as exc:
                raise Refusal(key, f"start 'perfect': {exc}") from None
            raise Refusal(
                key,
                f"{spell(key) if spell else key}: {e.text} ({system.describe()}) starts "
                f"{' or '.join(repr(s) for s in e.starts or ())}; the perfect sampler's exact stationary start runs "
                "on the profile engines (engine 'profile', the default)",
            )
        if option == "start" and e.starts is not None and "start" in e.takes:
            if isinstance(value, str) and value in e.starts:
                if value == "fixed-point" and engine == "events" and (no := fixed_point_refusal(system)):
                    raise Refusal(key, f"{spell(key) if spell else key}: {no}")
                if value == "fixed-point" and exact_load(system.load) >= 1:  # no mean-field point
                    why = "load λ < 1: at λ >= 1 the mean field has no fixed point (the queues grow without bound)"
                    raise Refusal(key, f"{spell(key) if spell else key}: 'fixed-point' needs {why}")
                continue
        elif option in e.takes:
            if option == "start" and isinstance(value, str) and value == "perfect":
                try:  # the rules that are JSQ(d) chains: the perfect sampler's own refusal for the others
                    perfect_sampler(system)
                except ValueError as exc:
                    raise Refusal(key, f"start 'perfect': {exc}") from None
            continue
        raise Refusal(key, refusal(system, engine, option, spell(key) if spell else key, time))


def good_set_refusal(system: System) -> str | None:
    """Why ``system`` has no good set ``N^ε`` to measure (docs/model.md §5), or None: it is paper 000's
    set of JSQ(d) with ``d >= 2`` in equilibrium, with ``k = ⌈log(1/(1−λ))/log d⌉``.

    >>> good_set_refusal(System(10, 2, 0.5, rule="jsq"))[:40]
    'the good set N^ε (paper 000, docs/model.'
    >>> good_set_refusal(System(10, 2, 0.5)) is None
    True
    """
    why = (
        "the good set N^ε (paper 000, docs/model.md §5) is a statement about JSQ(d) with d >= 2 in equilibrium, "
        "around k = ⌈log(1/(1−λ))/log d⌉; "
    )
    if system.rule != _pol.DEFAULT_POLICY:
        return why + f"policy {system.rule} has none"
    if system.d < 2:
        return why + "d = 1 has no k (log d = 0)"
    if exact_load(system.load) >= 1:
        return why + f"load {system.load} >= 1 has no equilibrium"
    return None


def _takes_perfect(e: Engine) -> bool:
    """Whether ``e`` takes ``start="perfect"`` (the profile engines: every start)."""
    return "start" in e.takes and (e.starts is None or "perfect" in e.starts)


def no_equilibrium(lam: object) -> str:
    """What a run at load ``lam`` >= 1 measures, for its warning (the profile engines' words).

    >>> no_equilibrium("1.2")
    'load λ = 1.2 >= 1: the chain has no equilibrium; the time averages describe this finite horizon only'
    """
    return f"load λ = {lam} >= 1: the chain has no equilibrium; the time averages describe this finite horizon only"


def default_replications(system: System, engine: str | None = None) -> int:
    """The default number of replications of the engine that runs ``system``: 1 on the count
    engines, 4 on the event engine (its error bars come from replications, docs/model.md §14).

    >>> default_replications(System(10, 2, 0.5, service="lognormal:2"))
    4
    """
    return ENGINES[simulation_engine(system, engine)].replications
