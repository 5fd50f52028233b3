"""Which analytic method serves a :class:`~supermarket.system.spec.System`, or why none does: the
exact solver (:mod:`supermarket.stationary`), the mean field (:mod:`supermarket.meanfield`) and
the parts a discontinuous drift lacks, the perfect sampler (docs/model.md §12) and the papers'
methods (``mixing``, ``fluctuations``).  Read through :mod:`supermarket.system.methods`, the one
method table, which re-exports every name here; like it, this module names methods and gives
reasons, and runs nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from . import policies as _pol
from .classes import check_random_stable
from .spec import System

__all__ = [
    "exact_solver",
    "mean_field",
    "smooth_mean_field",
    "refined_mean_field",
    "fluid_note",
    "perfect_sampler",
    "paper_method",
    "PAPER_METHODS",
    "SMOOTH_PARTS",
]


#: (law family, server classes?) -> (the exact solver's module of :mod:`supermarket.stationary`, the
#: mean field's of :mod:`supermarket.meanfield`) for a law with a phase-type form
_MODULES = {
    ("exponential", False): ("profile", "ode"),
    ("phase-type", False): ("phase", "phase"),
    ("exponential", True): ("classes", "classes"),
    ("phase-type", True): ("classes_phase", "classes_phase"),
}


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
    return _MODULES[(system.law_family, system.has_classes)][0]


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
    return _MODULES[(system.law_family, system.has_classes)][1]


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
