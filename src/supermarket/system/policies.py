"""Dispatch rules: which queue an arrival joins (docs/model.md §2, "Other dispatch rules").

Every rule here is *symmetric* (it treats the servers alike) and looks only at queue
lengths, so it is described by one function of the counts ``c_ℓ = #{queues with length
>= ℓ}`` and ``n``:

    P_ℓ(c) = probability that an arrival joins a queue of length >= ℓ   (P_0 = 1).

Then the counts are a Markov chain (the profile chain of docs/model.md §2 with this ``P``),
an arrival joins a queue of length exactly ``ℓ`` with probability ``P_ℓ − P_{ℓ+1}``, and
the flow-balance identity ``E[u_ℓ] = λ·E[P_{ℓ−1}]`` (docs/model.md §3) holds for every rule.

Each rule is one entry of :data:`RULES` (:class:`Rule`): its name, engine code, help text,
flags, ``P_ℓ(c)``, fluid ``P_ℓ(u)`` and fixed point, and the kernels that run it; the list of
rules with their ``P_ℓ`` is in docs/model.md §2 (``tests/system/test_registry.py`` checks the two
agree).

For ``jsq`` and ``jiq`` the limit of ``P_ℓ(u)`` jumps at ``u_1 = 1`` (``jbt``'s at ``u_T = 1``): the fluid limit is a
differential inclusion, not an ODE, and the refined mean field and the linear-noise
approximation (which need a differentiable drift) do not exist; :func:`meanfield_d` refuses
them.  Their fluid fixed point for ``λ < 1`` is known [classical: Stolyar 2015 for JIQ;
Mukherjee, Borst, van Leeuwaarden and Whiting 2018 for JSQ]: ``u_1 = λ`` and ``u_ℓ = 0``
for ``ℓ >= 2`` (in the limit no queue holds two customers), :func:`fluid_fixed_point`.

In the engines' sorted representation (queues named by position ``1..n``, longest first;
docs/model.md §2) ``jsq-d`` joins the largest of ``d`` uniform positions, ``random`` one
uniform position, ``jsq`` position ``n``, and ``jiq`` position ``n`` if ``c_1 < n`` and a
uniform position otherwise.  The kernels draw the joined length from the table of
:func:`supermarket.engines.tables.p_rule` (the same ``P`` in the kernels' own layer: the
engines may import nothing from here; ``tests/system/test_policies.py`` checks the two equal),
and ``jiq`` multiplies it by ``1{c_1 = n}``.

Examples
--------
>>> p_levels("random", [3, 1], n=4).tolist()
[0.75, 0.25]
>>> p_levels("jiq", [3, 1], n=4).tolist(), p_levels("jiq", [4, 1], n=4).tolist()
([0.0, 0.0], [1.0, 0.25])
>>> fluid_fixed_point("jsq", 0.9, levels=3).tolist()
[0.9, 0.0, 0.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ..engines import tables as _tab

__all__ = [
    "Rule",
    "RULES",
    "rule",
    "POLICIES",
    "DEFAULT_POLICY",
    "SMOOTH_POLICIES",
    "ROUGH_POLICIES",
    "check_smooth",
    "smooth_message",
    "ENGINES",
    "check_policy",
    "policy_code",
    "p_levels",
    "p_meanfield",
    "meanfield_d",
    "fluid_fixed_point",
    "describe",
]

ENGINES = ("profile", "queues", "phase", "classes", "classes-phase", "events", "exact", "exact-phase", "exact-classes")
"""The kernels and exact solvers a rule can name in :attr:`Rule.engines`: ``profile`` (the profile and
buckets engines), ``queues``, ``phase``, ``classes``, ``classes-phase``, ``events`` (general laws),
``exact`` (the profile chain), ``exact-phase`` (phase-type, with or without classes), ``exact-classes``."""


@dataclass(frozen=True)
class Rule:
    """One dispatch rule (docs/model.md §2, "Other dispatch rules"): everything the package
    knows of it, in one entry of :data:`RULES`.

    Attributes
    ----------
    name : str
        Its name (``--policy NAME``, ``policy=NAME``).
    code : int
        The engines' integer code (:mod:`supermarket.engines.tables`; a test checks the two agree).
    title : str
        What it does, in one line (help texts, screens).
    uses_d : bool
        Whether ``d`` is the rule's parameter (``--d``); otherwise ``d`` is ignored.
    smooth : bool
        Whether its mean-field drift is differentiable, so that the mean-field ODE, the
        refined mean field and the linear-noise approximation exist.
    rough : str
        Why not, when ``smooth`` is false (in the model's terms, after "policy=NAME"); empty
        otherwise.
    engines : tuple of str
        The kernels and solvers of :data:`ENGINES` that run it.
    p_counts : callable
        ``P_ℓ(c)`` for the exact solvers: ``p_counts(c, n, d, replace)`` for counts ``c_1..c_m``
        on the last axis (:func:`p_levels`).
    p_fluid : callable
        The mean-field ``P_ℓ(u)`` off the rule's discontinuities: ``p_fluid(u, d)`` for a profile
        ``u_1..u_m`` (``u`` with ``u_1 < 1`` where the rule is rough).
    fixed_point : callable
        Its fluid fixed point ``fixed_point(lam, levels, d)`` for ``λ < 1``, ``levels`` levels.
    mf_d : callable or None
        For a smooth rule, the ``d`` of the JSQ(d) drift ``u^d`` that stands for it (the
        mean-field code solves that drift); ``None`` for a rough rule.
    fluid_text : str
        The fluid fixed point in words, for a rough rule's refusals.
    as_jsq_d : callable or None
        The JSQ(d) that is this rule, ``as_jsq_d(n, d, replace) -> (d, replace)`` (``random`` is
        JSQ(1); ``jsq`` JSQ(n) without replacement), for the samplers built on JSQ(d)'s coupling
        (perfect sampling, docs/model.md §12); ``None`` for a rule that is no JSQ(d).

    Examples
    --------
    >>> r = RULES["jbt"]
    >>> r.code, r.uses_d, r.smooth, r.engines[:5]
    (4, True, False, ('profile', 'queues', 'phase', 'classes', 'classes-phase'))
    """

    name: str
    code: int
    title: str
    uses_d: bool
    smooth: bool
    rough: str
    engines: tuple[str, ...]
    p_counts: Callable[[np.ndarray, int, int, bool], np.ndarray]
    p_fluid: Callable[[np.ndarray, int], np.ndarray]
    fixed_point: Callable[[float | str, int, int], np.ndarray]
    mf_d: Callable[[int | float], int | float] | None = None
    fluid_text: str = ""
    as_jsq_d: Callable[[int, int, bool], tuple[int, bool]] | None = None


def _jsqd_counts(c: np.ndarray, n: int, d: int, replace: bool) -> np.ndarray:
    if replace:
        return (c / n) ** int(d)
    tot = math.comb(n, int(d))
    table = np.array([math.comb(int(k), int(d)) / tot for k in range(n + 1)])
    return table[c]


def _random_counts(c: np.ndarray, n: int, d: int, replace: bool) -> np.ndarray:
    return c / n


def _jsq_counts(c: np.ndarray, n: int, d: int, replace: bool) -> np.ndarray:
    return (c == n).astype(float)


def _jiq_counts(c: np.ndarray, n: int, d: int, replace: bool) -> np.ndarray:
    return c / n * (c[..., :1] == n)


def _power_fixed_point(lam: float | str, levels: int, d: int) -> np.ndarray:
    """``π(i) = λ^{(d^i−1)/(d−1)}`` (docs/model.md §3; ``λ^i`` for ``d = 1``)."""
    from ..theory import fixed_point

    return fixed_point(int(d), lam, levels)


def _one_level(lam: float | str, levels: int, d: int) -> np.ndarray:
    """``u_1 = λ``, ``u_ℓ = 0`` above: the fluid fixed point of JSQ and JIQ [classical:
    Stolyar 2015 for JIQ; Mukherjee, Borst, van Leeuwaarden and Whiting 2018 for JSQ]."""
    from ..model import check_int, check_load

    out = np.zeros(check_int("levels", levels, minimum=1))
    out[0] = check_load(lam)
    return out


_ROUGH = "has a discontinuous mean-field drift (P_ℓ(u) jumps at u_1 = 1)"
_ONE_LEVEL = "u_1 = λ, u_ℓ = 0 for ℓ >= 2"
_ALL = ENGINES  # every rule runs on every kernel and exact solver (tests/system/test_registry.py)


def _jbt_counts(c: np.ndarray, n: int, d: int, replace: bool) -> np.ndarray:
    """JBT(T = d): ``P_ℓ = (c_ℓ − c_T)⁺/(n − c_T)`` while a queue is shorter than ``T`` (``c_T < n``),
    else ``c_ℓ/n`` [derived, from the definition: a uniform queue among the ``n − c_T`` below ``T``]."""
    cT = c[..., d - 1 : d] if d <= c.shape[-1] else np.zeros_like(c[..., :1])
    below = n - cT
    return np.where(below > 0, np.maximum(c - cT, 0) / np.maximum(below, 1), c / n)


def _jbt_fluid(u: np.ndarray, d: int) -> np.ndarray:
    uT = u[..., d - 1 : d] if d <= u.shape[-1] else np.zeros_like(u[..., :1])
    return np.maximum(u - uT, 0.0) / (1.0 - uT)


def _jbt_fixed_point(lam: float | str, levels: int, d: int) -> np.ndarray:
    """JBT(T)'s fluid fixed point [derived]: no arrival joins a queue of length ``>= T`` while
    ``u_T < 1``, so ``u_ℓ = 0`` above ``T``, and the flow balance ``u_ℓ = λ·P_{ℓ−1}`` gives
    ``u_ℓ = λ(u_{ℓ−1} − x)/(1 − x)`` for ``ℓ = 1..T`` (``u_0 = 1``) with ``u_T = x``, a root in
    ``[0, λ]`` (for ``T = 2``: ``x = ((1+λ) − √((1+λ)² − 4λ²))/2``)."""
    from scipy.optimize import brentq

    from ..model import check_int, check_load

    lamf, levels, T = check_load(lam), check_int("levels", levels, minimum=1), int(d)

    def walk(x: float) -> np.ndarray:
        u, prev = np.zeros(T), 1.0
        for i in range(T):
            prev = u[i] = lamf * (prev - x) / (1.0 - x)
        return u

    x = lamf if T == 1 else brentq(lambda x: walk(x)[-1] - x, 0.0, lamf, xtol=1e-15, rtol=1e-15)
    out = np.zeros(levels)
    m = min(T, levels)
    out[:m] = walk(x)[:m]
    return out


RULES: dict[str, Rule] = {
    r.name: r
    for r in (
        Rule(
            "jsq-d",
            _tab.JSQ_D,
            "JSQ(d): the shortest of d sampled queues",
            uses_d=True,
            smooth=True,
            rough="",
            engines=_ALL,
            p_counts=_jsqd_counts,
            p_fluid=lambda u, d: u ** int(d),
            fixed_point=_power_fixed_point,
            mf_d=lambda d: d,
            as_jsq_d=lambda n, d, replace: (d, replace),
        ),
        Rule(
            "random",
            _tab.RANDOM,
            "random: one uniformly random queue",
            uses_d=False,
            smooth=True,
            rough="",
            engines=_ALL,
            p_counts=_random_counts,
            p_fluid=lambda u, d: u.copy(),
            fixed_point=lambda lam, levels, d: _power_fixed_point(lam, levels, 1),
            mf_d=lambda d: 1,
            as_jsq_d=lambda n, d, replace: (1, True),
        ),
        Rule(
            "jsq",
            _tab.JSQ,
            "JSQ: a shortest of all n queues",
            uses_d=False,
            smooth=False,
            rough=_ROUGH,
            engines=_ALL,
            p_counts=_jsq_counts,
            p_fluid=lambda u, d: np.zeros_like(u),
            fixed_point=_one_level,
            fluid_text=_ONE_LEVEL,
            as_jsq_d=lambda n, d, replace: (n, False),
        ),
        Rule(
            "jiq",
            _tab.JIQ,
            "JIQ: an idle queue if there is one, else a uniformly random queue",
            uses_d=False,
            smooth=False,
            rough=_ROUGH,
            engines=_ALL,
            p_counts=_jiq_counts,
            p_fluid=lambda u, d: np.zeros_like(u),
            fixed_point=_one_level,
            fluid_text=_ONE_LEVEL,
        ),
        Rule(
            "jbt",
            _tab.JBT,
            "JBT(T = d): a uniformly random queue shorter than d if there is one, else a uniformly random queue",
            uses_d=True,
            smooth=False,
            rough="has a discontinuous mean-field drift (P_ℓ(u) jumps where u_T reaches 1, T = d)",
            engines=_ALL,
            p_counts=_jbt_counts,
            p_fluid=_jbt_fluid,
            fixed_point=_jbt_fixed_point,
            fluid_text="u_ℓ = λ(u_(ℓ−1) − u_T)/(1 − u_T) for ℓ <= T, 0 above",
        ),
    )
}
"""The dispatch rules, by name, the default first: every name, code, help text, flag and
law of a rule is read from here."""

POLICIES = tuple(RULES)
DEFAULT_POLICY = POLICIES[0]
SMOOTH_POLICIES = tuple(r.name for r in RULES.values() if r.smooth)  # a differentiable mean-field drift
ROUGH_POLICIES = tuple(r.name for r in RULES.values() if not r.smooth)  # no mean-field ODE


def _and(names: tuple[str, ...]) -> str:
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)


def check_smooth(policy: object, where: str) -> str:
    """The rule's name, refused unless its mean-field drift is differentiable.

    Parameters
    ----------
    policy : str
        A rule's name (:func:`check_policy`).
    where : str
        What needs the drift, for the message.

    Returns
    -------
    str
        Its canonical name; a ValueError for a rule without a differentiable drift (:func:`smooth_message`).

    Examples
    --------
    >>> check_smooth("random", "the mean field")
    'random'
    >>> check_smooth("jsq", "the mean field")
    Traceback (most recent call last):
    ...
    ValueError: policy must be one of jsq-d, random for the mean field (jsq, jiq and jbt have a discontinuous ...
    """
    name = check_policy(policy)
    if not RULES[name].smooth:
        raise ValueError(smooth_message(policy, where))
    return name


def smooth_message(policy: object, where: str) -> str:
    """The refusal of a rule without a differentiable drift (:func:`check_smooth`).

    Parameters
    ----------
    policy : object
        The rule as given.
    where : str
        What needs the drift.

    Returns
    -------
    str

    Examples
    --------
    >>> smooth_message("jiq", "the sweep")[:45]
    'policy must be one of jsq-d, random for the s'
    """
    return (
        f"policy must be one of {', '.join(SMOOTH_POLICIES)} for {where} "
        f"({_and(ROUGH_POLICIES)} have a discontinuous drift); got {policy!r}"
    )


def rule(policy: object, engine: str | None = None) -> Rule:
    """The registry entry of a rule (:func:`check_policy`), refused if ``engine`` does not run it.

    Parameters
    ----------
    policy : str
        A rule's name.
    engine : str, optional
        One of :data:`ENGINES`: refuse the rule if that kernel or solver does not run it.

    Returns
    -------
    Rule

    Raises
    ------
    TypeError, ValueError
        If ``policy`` names no rule, or ``engine`` does not run it (the message says which do).

    Examples
    --------
    >>> rule("JIQ").code, rule("jsq-d").uses_d
    (3, True)
    >>> try:
    ...     rule("jbt", "perfect")
    ... except ValueError as e:
    ...     print(str(e)[:51])
    policy 'jbt' does not run on the perfect engine (it
    """
    r = RULES[check_policy(policy)]
    if engine is not None and engine not in r.engines:
        raise ValueError(f"policy {r.name!r} does not run on the {engine} engine (it runs on {', '.join(r.engines)})")
    return r


def check_policy(policy: object) -> str:
    """The rule's name, checked: one of :data:`POLICIES` (case and ``_`` for ``-`` forgiven).

    Parameters
    ----------
    policy : str
        A rule's name.

    Returns
    -------
    str
        Its canonical name.

    Raises
    ------
    TypeError, ValueError
        If ``policy`` is not a string naming a rule.

    Examples
    --------
    >>> check_policy("JSQ_D"), check_policy("jiq")
    ('jsq-d', 'jiq')
    """
    if not isinstance(policy, str):
        raise TypeError(f"policy must be a string, one of {', '.join(POLICIES)}; got {policy!r}")
    key = policy.strip().lower().replace("_", "-")
    if key not in RULES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}; got {policy!r}")
    return key


def policy_code(policy: str, engine: str | None = None) -> int:
    """The engines' integer code of a rule (:mod:`supermarket.engines.tables`); 0 is ``jsq-d``.

    Parameters
    ----------
    policy : str
        A rule of :data:`POLICIES`.
    engine : str, optional
        The kernel that will run it (:data:`ENGINES`): refused if it does not (:func:`rule`).

    Returns
    -------
    int
        The code the engines' ``Setup.policy`` holds.

    Examples
    --------
    >>> [policy_code(p) for p in POLICIES]
    [0, 1, 2, 3, 4]
    """
    return rule(policy, engine).code


def describe(policy: str) -> str:
    """One line saying what the rule does.

    Parameters
    ----------
    policy : str
        A rule of :data:`POLICIES`.

    Returns
    -------
    str

    Examples
    --------
    >>> describe("jiq")
    'JIQ: an idle queue if there is one, else a uniformly random queue'
    """
    return rule(policy).title


def p_levels(policy: str, counts: ArrayLike, n: int, d: int = 1, replace: bool = True) -> np.ndarray:
    """``P_ℓ(c)`` for ``ℓ = 1..m`` (docs/model.md §2): the probability that an arrival joins
    a queue of length ``>= ℓ``, given the counts ``c_1..c_m`` on the last axis of ``counts``.

    Parameters
    ----------
    policy : str
        A rule of :data:`POLICIES`.
    counts : array of int, shape (..., m)
        ``c_ℓ`` (queues with at least ``ℓ`` customers), non-increasing along the last axis,
        in ``0..n``; any leading axes (for example one row per state) are kept.
    n : int
        Servers.
    d, replace
        JSQ(d)'s choices and sampling (ignored by the other rules).

    Returns
    -------
    numpy.ndarray of float, the shape of ``counts``
        Exact up to one rounding: JSQ(d) is ``(c/n)^d`` or ``C(c,d)/C(n,d)`` (integers, then
        one division), the others are ``c/n`` or 0/1.

    Examples
    --------
    >>> p_levels("jsq-d", [2, 1], n=4, d=2).tolist()
    [0.25, 0.0625]
    >>> p_levels("jsq-d", [3, 2], n=4, d=2, replace=False).tolist()   # C(3,2)/C(4,2), C(2,2)/C(4,2)
    [0.5, 0.16666666666666666]
    >>> p_levels("jsq", [[4, 2], [3, 0]], n=4).tolist()
    [[1.0, 0.0], [0.0, 0.0]]
    """
    r = rule(policy)
    c = np.asarray(counts, dtype=np.int64)
    if c.ndim == 0:
        raise ValueError("counts must have at least one axis (c_1, c_2, …)")
    return r.p_counts(c, int(n), int(d), bool(replace))


def meanfield_d(policy: str, d: int | float = 1) -> int | float:
    """The ``d`` of the mean-field drift that stands for a rule: ``d`` for ``jsq-d``, 1 for
    ``random`` (``P_ℓ(u) = u_ℓ``); ``jsq`` and ``jiq`` are refused.

    Parameters
    ----------
    policy : str
        A rule of :data:`POLICIES`.
    d : int, default 1
        JSQ(d)'s choices.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        For ``jsq`` and ``jiq``: their mean-field ``P_ℓ(u)`` is discontinuous at ``u_1 = 1``,
        so there is no mean-field ODE, refined mean field or linear-noise approximation
        (use :func:`fluid_fixed_point`).

    Examples
    --------
    >>> meanfield_d("jsq-d", 3), meanfield_d("random", 3)
    (3, 1)
    """
    r = rule(policy)
    if r.mf_d is not None:
        return r.mf_d(d)
    raise ValueError(
        f"policy={r.name!r} {r.rough}: the mean-field ODE, the refined mean field and the "
        "linear-noise approximation need a differentiable drift and are defined only for "
        f"{' and '.join(SMOOTH_POLICIES)}; its fluid fixed point is {r.fluid_text} (policies.fluid_fixed_point)"
    )


def p_meanfield(policy: str, u: ArrayLike, d: int = 1) -> np.ndarray:
    """The mean-field ``P_ℓ(u)`` of a rule with a differentiable drift: ``u^d`` (``jsq-d``,
    with replacement) or ``u`` (``random``); ``ValueError`` for ``jsq`` and ``jiq``
    (:func:`meanfield_d`).

    Parameters
    ----------
    policy : str
        ``jsq-d`` or ``random``.
    u : array_like
        A profile ``u_ℓ``.
    d : int, default 1
        JSQ(d)'s choices.

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> p_meanfield("random", [0.5, 0.25], d=2).tolist()
    [0.5, 0.25]
    """
    return np.power(np.asarray(u, dtype=float), meanfield_d(policy, d))


def fluid_fixed_point(policy: str, lam: float | str, levels: int, d: int = 1) -> np.ndarray:
    """The fluid (mean-field) fixed point ``π(1..levels)`` of a rule, ``λ < 1``.

    ``jsq-d``: ``π(i) = λ^{(d^i−1)/(d−1)}`` (docs/model.md §3); ``random``: ``λ^i`` (M/M/1);
    ``jsq`` and ``jiq``: ``π(1) = λ``, ``π(i) = 0`` for ``i >= 2`` [classical; the limit of
    a discontinuous drift, not the zero of an ODE: see the module docstring].

    Parameters
    ----------
    policy : str
        A rule of :data:`POLICIES`.
    lam : float or str
        The load, in (0, 1).
    levels : int
        Levels ``1..levels``.
    d : int, default 1
        JSQ(d)'s choices.

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> fluid_fixed_point("random", 0.5, 3).round(15).tolist()
    [0.5, 0.25, 0.125]
    """
    return rule(policy).fixed_point(lam, levels, d)
