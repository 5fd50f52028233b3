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
- :func:`exact_solver`, :func:`mean_field`: the exact solver (:mod:`supermarket.stationary`)
  and the mean field (:mod:`supermarket.meanfield`) of a system, or the reason there is none;
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
from .classes import check_random_stable
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
    """

    name: str
    text: str
    takes: frozenset[str]
    starts: tuple[str, ...] | None
    replications: int
    batches: int | None
    section: str


#: The options an engine may or may not take, with the reason an engine that does not take one
#: gives, in the model's terms.  ``steps``: a horizon in events; ``start``: a start other than
#: ``"empty"``; ``record``: a trajectory (``record_every``, ``record_levels``); ``precision``: a
#: precision target (``precision``, ``max_steps``); ``client``: a Dask cluster (``--scheduler``);
#: ``cdf``: the response-time CDFs; ``plot``: the figure; ``time_mode``: the discrete chain of paper
#: 000 (``"continuous"`` is what every engine runs, so only ``"discrete"`` is refused); ``eps``: the
#: ε of paper 000's good set N^ε; ``load``: a load λ >= 1 (a load below 1 is taken by every engine).
OPTIONS: dict[str, str] = {
    "steps": "runs for a time (it counts no uniformized events); give {time} instead",
    "start": "starts {starts}",
    "record": "records no trajectory",
    "precision": "has no precision target (its horizon is fixed in advance)",
    "client": "runs on local threads (not on a cluster)",
    "cdf": "gives no response-time CDF",
    "plot": "draws no figure",
    "time_mode": "runs in continuous time only (exact event times; it has no uniformized discrete chain)",
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
#: The options whose value ``"continuous"`` is what an engine that does not take them runs anyway.
_TAKEN_ANYWAY = {"time_mode": "continuous"}

ENGINES: dict[str, Engine] = {
    e.name: e
    for e in (
        Engine("profile", "the profile engine", _ALL, None, 1, None, "§1"),
        Engine("queues", "the per-queue reference engine", _ALL, None, 1, None, "§1"),
        Engine("buckets", "the per-queue bucket engine", _ALL, None, 1, None, "§1"),
        Engine("phase", "the phase-type count engine", _LAW, ("empty", "fixed-point"), 1, 256, "§13"),
        Engine("classes", "the count engine with classes", _LAW, ("empty", "fixed-point"), 1, 256, "§15"),
        Engine(
            "classes-phase",
            "the count engine with classes and a phase-type law",
            _LAW,
            ("empty", "fixed-point"),
            1,
            256,
            "§15.7",
        ),
        Engine("events", "the event engine (one queue per server)", _EVENTS, ("empty", "fixed-point"), 4, 256, "§14"),
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
#: request (``jbt``: ``engine="profile"`` or ``"buckets"``; its default keeps the numbers it printed).
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


def simulation_engine(system: System, engine: str | None = None) -> str:
    """The engine of :data:`ENGINES` that runs ``system`` when ``engine`` is asked for (None: the default).

    Raises
    ------
    ValueError
        Naming ``engine``: an engine this system does not run on, with those it does, or a rule
        the engine does not run (``queues`` samples the ``d`` queues: ``jsq-d`` only; a count
        engine named for ``jbt`` says which rules it dispatches by).

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
    """
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
    if run == "queues" and system.rule != _pol.DEFAULT_POLICY:
        raise Refusal(
            "engine",
            f"engine 'queues' runs policy 'jsq-d' only (it samples the d queues); got policy={system.rule!r}: "
            "use engine 'profile' or 'buckets'",  # every rule runs there (tests/system/test_registry.py)
        )
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
    default = next(iter(SIMULATION[(system.law_family, system.has_classes)].values()))
    runs = _KERNEL.get(default, default) in _pol.RULES[system.rule].engines
    if engine != RULE_DEFAULT or default == RULE_DEFAULT or (runs and system.rule not in EVENTS_BY_DEFAULT):
        return None
    why = "" if runs else f"{ENGINES[default].text} dispatches by {', '.join(_count_rules(default))} only, so "
    return (
        f"engine events: {why}policy {system.rule} runs on {ENGINES[RULE_DEFAULT].text} by default, exact in law for "
        "every service law and server classes (docs/model.md §14)"
        + ("; engine 'profile' or 'buckets' runs its count chain on request" if runs else "")
    )


def refusal(system: System, engine: str, option: str, spelled: str | None = None, time: str = "time=") -> str:
    """The one message refusing ``option`` (a key of :data:`OPTIONS`) on ``engine`` for ``system``,
    the option ``spelled`` as the door the user came through spells it (``precision``,
    ``--precision``), ``time`` the spelling of the horizon in time (``time=``, ``--time``).

    >>> refusal(System(10, 2, 0.5, service="erlang:2"), "phase", "eps")
    "eps: the phase-type count engine (service erlang:2) reports no good set N^ε (paper 000's good set ...)"
    """
    e = ENGINES[engine]
    why = OPTIONS[option].format(time=time, starts=" or ".join(repr(s) for s in e.starts or ()))
    return f"{spelled or option}: {e.text} ({system.describe()}) {why}"


def check_options(
    system: System,
    engine: str,
    given: Mapping[str, object],
    spell: Callable[[str], str] | None = None,
    time: str = "time=",
) -> None:
    """Refuse (ValueError, :func:`refusal`'s message) the first option of ``given`` that is set
    (not None; a start other than ``"empty"``; a ``time_mode`` other than ``"continuous"``) and that
    ``engine`` does not take.  ``given`` maps the keys of :data:`OPTIONS` (or ``record_every``,
    ``record_levels``, ``max_steps``, of ``record`` and ``precision``) to their values; ``spell``
    names a key as the door spells it.

    >>> s = System(10, 2, 0.5, server_classes="0.5:2,0.5:1")
    >>> check_options(s, "classes", {"steps": 10, "start": "empty"})
    >>> check_options(s, "classes", {"start": "perfect"}, spell=lambda k: "--" + k)
    Traceback (most recent call last):
    ...
    supermarket.system.methods.Refusal: start 'perfect': server_classes: the perfect sampler couples the chains ...
    >>> check_options(s, "classes", {"time_mode": "continuous", "load": "0.9"})
    >>> check_options(s, "classes", {"time_mode": "discrete"})
    Traceback (most recent call last):
    ...
    supermarket.system.methods.Refusal: time_mode: the count engine with classes (...) runs in continuous time only ...
    """
    e = ENGINES[engine]
    group = {"record_every": "record", "record_levels": "record", "max_steps": "precision"}
    for key, value in given.items():
        option = group.get(key, key)
        if value is None or (option == "start" and isinstance(value, str) and value == "empty"):
            continue
        if isinstance(value, str) and _TAKEN_ANYWAY.get(option) == value.strip().lower():
            continue
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


def exact_solver(system: System) -> str:
    """The module of :mod:`supermarket.stationary` that gives the exact stationary law of
    ``system`` (a finite ``n``), or a ValueError saying why there is none.

    >>> exact_solver(System(3, 2, 0.5, service="erlang:2", server_classes="1:1"))
    'classes_phase'
    >>> exact_solver(System(3, 2, 0.5, service="lognormal:4"))
    Traceback (most recent call last):
    ...
    ValueError: service: an exact finite-state law does not exist for lognormal:4 service (it has no phase-type ...
    """
    if system.law_family == "general":
        raise ValueError(
            f"service: an exact finite-state law does not exist for {system.service.spec} service (it has no "
            "phase-type form); the exact solvers take exp, erlang:K, hyperexp:SCV or ph:FILE.json (the event "
            "engine simulates the others)"
        )
    _check_classes_stable(system)  # an overloaded class under random routing: no stationary law
    return {
        ("exponential", False): "profile",
        ("phase-type", False): "phase",
        ("exponential", True): "classes",
        ("phase-type", True): "classes_phase",
    }[(system.law_family, system.has_classes)]


def _check_classes_stable(system: System) -> None:
    """An overloaded class under random routing (or JSQ(1)): refused with the reason."""
    if system.server_classes is not None:
        d = system.d if system.rule == "jsq-d" else None  # JSQ(1) is random routing; d means nothing to the others
        check_random_stable(system.rule, system.lam, system.server_classes, d)


def mean_field(system: System) -> str:
    """The module of :mod:`supermarket.meanfield` that gives the fixed point of ``system``
    (``ode`` for exponential service and one class; ``phase``, ``classes``, ``classes_phase``;
    ``fluid``, the fluid fixed point, for a rule whose drift is discontinuous, whatever its law
    and classes: :func:`smooth_mean_field` says what it lacks), or a ValueError saying why there
    is none.

    >>> mean_field(System(None, 2, 0.5, service="hyperexp:4"))
    'phase'
    >>> mean_field(System(None, 2, 0.5, rule="jiq")), mean_field(System(None, 3, 0.5, rule="jbt", service="erlang:2"))
    ('fluid', 'fluid')
    >>> mean_field(System(None, 2, 0.5, service="lognormal:2"))
    Traceback (most recent call last):
    ...
    ValueError: service: lognormal:2 has no phase-type form, so no mean field of finitely many phases; ...
    """
    if system.law_family == "general":
        raise ValueError(
            f"service: {system.service.spec} has no phase-type form, so no mean field of finitely many "
            "phases; the mean field takes exp, erlang:K, hyperexp:SCV or ph:FILE.json (the event engine "
            "simulates the others)"
        )
    _check_classes_stable(system)  # an overloaded class under random routing: no fixed point
    if system.rule not in _pol.SMOOTH_POLICIES:
        return "fluid"  # the fluid fixed point (docs/model.md §2.1): every class an M/PH/1/T queue
    return {
        ("exponential", False): "ode",
        ("phase-type", False): "phase",
        ("exponential", True): "classes",
        ("phase-type", True): "classes_phase",
    }[(system.law_family, system.has_classes)]


def perfect_sampler(system: System, spell: Callable[[str], str] | None = None) -> tuple[int, bool]:
    """The JSQ(d) chain, ``(d, replace)``, whose dominated coupling from the past (docs/model.md
    §12) samples the stationary law of ``system`` exactly, or a ValueError saying why there is
    none (``spell`` names a key, ``policy``, ``service`` or ``server_classes``, as the door spells it).

    The sampler couples the chains in the sorted representation, dominated by ``n`` independent
    M/M/1 queues: it needs exponential service, one server class and a rule that is a JSQ(d)
    (``random`` is JSQ(1), ``jsq`` JSQ(n) without replacement; the registry's ``as_jsq_d``).

    >>> perfect_sampler(System(10, 2, 0.5, rule="jsq"))
    (10, False)
    >>> perfect_sampler(System(10, 3, 0.5, rule="random"))
    (1, True)
    >>> perfect_sampler(System(10, 2, 0.5, rule="jiq"))
    Traceback (most recent call last):
    ...
    ValueError: policy: jiq is no JSQ(d): the perfect sampler couples JSQ(d) chains (...
    """
    name = spell or (lambda key: key)
    if system.law_family != "exponential":
        raise ValueError(
            f"{name('service')}: the perfect sampler is dominated by n independent M/M/1 queues and couples the "
            f"chains by queue lengths alone (docs/model.md §12): it needs exponential service, not "
            f"{system.service.spec}; simulate it from another start with a burn-in"
        )
    if system.has_classes:
        raise ValueError(
            f"{name('server_classes')}: the perfect sampler couples the chains by sorted queue lengths alone "
            "(docs/model.md §12): with server classes a queue's speed matters too, so there is no such coupling; "
            "simulate it from another start with a burn-in"
        )
    rule = _pol.RULES[system.rule]
    if rule.as_jsq_d is None:
        jsq_d = [r.name for r in _pol.RULES.values() if r.as_jsq_d is not None]
        raise ValueError(
            f"{name('policy')}: {system.rule} is no JSQ(d): the perfect sampler couples JSQ(d) chains "
            f"(docs/model.md §12; {', '.join(jsq_d)} are JSQ(d) chains), and no monotone coupling of "
            f"{system.rule} is established; simulate it from another start with a burn-in, or solve it exactly "
            "for a small n"
        )
    n = system.n if system.n is not None else 1
    return rule.as_jsq_d(n, system.d, system.replace)


#: The methods that measure a statement of one paper about JSQ(d) with exponential service and
#: identical servers, by command: what they measure, in the model's terms (their refusals say it).
PAPER_METHODS = {
    "mixing": "measures the coalescence of JSQ(d) from paper 000's good set N^ε against its orders "
    "k d^(k−1) n log n (docs/mixing.md), which are statements about JSQ(d) with exponential service and "
    "identical servers",
    "fluctuations": "measures paper 002's diffusion limits (docs/fluctuations.md), which are theorems about "
    "JSQ(d_n) with exponential service and identical servers (d_n = n is JSQ: regime c with --d n)",
}


def paper_method(system: System, method: str, spell: Callable[[str], str] | None = None) -> None:
    """Refuse (ValueError) a system that ``method`` (a key of :data:`PAPER_METHODS`) does not
    measure: a rule other than JSQ(d), a service law other than exp, server classes; the reason
    says what the method measures (``spell`` names the key as the door spells it).

    >>> paper_method(System(100, 2, 0.9), "mixing")
    >>> paper_method(System(100, 2, 0.9, rule="jiq"), "fluctuations")
    Traceback (most recent call last):
    ...
    ValueError: policy: fluctuations measures paper 002's diffusion limits (...), which are theorems about ...
    """
    name = spell or (lambda key: key)
    for key, off in (
        ("policy", system.rule != _pol.DEFAULT_POLICY),
        ("service", system.law_family != "exponential"),
        ("server_classes", system.has_classes),
    ):
        if off:
            got = {"policy": system.rule, "service": system.service.spec}.get(key, "server classes")
            raise ValueError(f"{name(key)}: {method} {PAPER_METHODS[method]}; not {got}")


#: What a mean field needs a differentiable drift for, by the option that asks for it.
SMOOTH_PARTS = {
    "time": "mean-field ODE",
    "n": "refined mean field (the 1/n correction) and the linear-noise covariance",
}


def smooth_mean_field(rule: str, part: str, spelled: str | None = None) -> None:
    """Refuse (ValueError) ``part`` (a key of :data:`SMOOTH_PARTS`: ``"time"``, the ODE; ``"n"``,
    the refined mean field and the linear noise) for a rule whose mean-field drift is
    discontinuous; ``spelled``: the option as the door spells it (``--n``, ``n``).

    >>> smooth_mean_field("jsq-d", "n")
    >>> smooth_mean_field("jiq", "n", "--n")
    Traceback (most recent call last):
    ...
    ValueError: --n: the refined mean field (the 1/n correction) and ... do not exist for jiq: its mean-field ...
    """
    rule = _pol.check_policy(rule)
    if rule in _pol.SMOOTH_POLICIES:
        return
    verb = "do" if part == "n" else "does"
    raise ValueError(
        f"{spelled or part}: the {SMOOTH_PARTS[part]} {verb} not exist for {rule}: its mean-field drift is "
        f"discontinuous (P_ℓ(u) jumps {'where u_T reaches 1' if _pol.RULES[rule].uses_d else 'at u_1 = 1'}; "
        f"{' and '.join(_pol.SMOOTH_POLICIES)} have a differentiable "
        f"one); its fluid fixed point does: {_pol.RULES[rule].fluid_text}"
    )


def refined_mean_field(system: System, spelled: str = "n") -> str:
    """The module of :mod:`supermarket.meanfield` with the refined mean field (the ``1/n`` term) and
    linear noise of ``system`` (``ode``: exp, one class; ``refined_phase``: phase-type, one class;
    ``refined_classes``: server classes; a smooth drift, with replacement but for ``ode``), or a
    ValueError saying why none (``spelled``: the option).

    >>> refined_mean_field(System(None, 2, 0.5, replace=False, server_classes="1:1"), "--n")
    Traceback (most recent call last):
    ...
    ValueError: --n: the refined mean field (the 1/n correction) and the linear noise are computed for ...
    """
    field = mean_field(system)
    if field == "fluid":
        smooth_mean_field(system.rule, "n", spelled)
    if field != "ode" and not system.replace:
        why, one = ("a phase-type law", "") if field == "phase" else ("server classes", " and one class")
        raise ValueError(
            f"{spelled}: the refined mean field (the 1/n correction) and the linear noise are computed for {why} "
            f"with replacement only (without, the drift's own 1/n term is known for exp{one} only); "
            f"for {system.describe()} the fixed point only"
        )
    return {"phase": "refined_phase", "ode": "ode"}.get(field, "refined_classes")


def fluid_note(rule: str, system: System | None = None) -> str:
    """What the mean field of a rule with a discontinuous drift is, for reports: its fluid fixed
    point (of ``system``, with its law and classes, when given).

    >>> fluid_note("jiq")[:32]
    'JIQ: an idle queue if there is o'
    >>> fluid_note("jbt")[-60:]
    'ODE, refined mean field or linear-noise covariance [derived]'
    >>> fluid_note("jsq", System(None, 1, 0.5, server_classes="0.5:2,0.5:1"))[33:119]
    'fluid fixed point with service exp, server classes 0.5:2,0.5:1 (T = 1: every class an '
    """
    r = _pol.RULES[_pol.check_policy(rule)]
    plain = system is None or (system.law_family == "exponential" and not system.has_classes)
    if not r.uses_d and plain:  # jsq, jiq: (λ, 0, 0, …), classical
        return (
            f"{r.title}: fluid fixed point (λ, 0, 0, ...) [classical, docs/model.md §2]; "
            "its mean-field drift is discontinuous at u_1 = 1, so there is no mean-field ODE, refined "
            "mean field or linear-noise covariance"
        )
    where = "" if plain or system is None else f" with {system.describe()}"
    what = r.fluid_text if plain else "every class an M/PH/1/T queue fed at rate λ s̄/F, F the share below T"
    T = "d" if r.uses_d else "1"
    return (
        f"{r.title}: fluid fixed point{where} (T = {T}: {what}; docs/model.md §2.1); its mean-field drift "
        "is discontinuous, so there is no mean-field ODE, refined mean field or linear-noise covariance [derived]"
    )
