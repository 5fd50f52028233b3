"""Dispatch rules: which queue an arrival joins (docs/model.md §2, "Other dispatch rules").

Every rule here is *symmetric* (it treats the servers alike) and looks only at queue
lengths, so it is described by one function of the counts ``c_ℓ = #{queues with length
>= ℓ}`` and ``n``:

    P_ℓ(c) = probability that an arrival joins a queue of length >= ℓ   (P_0 = 1).

Then the counts are a Markov chain (the profile chain of docs/model.md §2 with this ``P``),
an arrival joins a queue of length exactly ``ℓ`` with probability ``P_ℓ − P_{ℓ+1}``, and
the flow-balance identity ``E[u_ℓ] = λ·E[P_{ℓ−1}]`` (docs/model.md §3) holds for every rule.

=========  ==========================================  ==================================
rule       ``P_ℓ(c)``, ``ℓ >= 1``                      mean field ``P_ℓ(u)``
=========  ==========================================  ==================================
``jsq-d``  ``(c_ℓ/n)^d``; ``C(c_ℓ,d)/C(n,d)`` without  ``u_ℓ^d`` [paper 000, (1.1)]
           replacement (today's rule, the default)
``random`` ``c_ℓ/n`` (one uniform queue: ``jsq-d``     ``u_ℓ``: ``n`` independent M/M/1
           with ``d = 1``)                             queues [classical]
``jsq``    ``1{c_ℓ = n}`` (a shortest of all ``n``)    discontinuous: none
``jiq``    ``1{c_1 = n}·c_ℓ/n`` (an idle queue if      discontinuous: none
           any, else a uniform one)
=========  ==========================================  ==================================

For ``jsq`` and ``jiq`` the limit of ``P_ℓ(u)`` jumps at ``u_1 = 1``: the fluid limit is a
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
engines may import nothing from here; ``tests/test_policies.py`` checks the two equal),
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

import numpy as np
from numpy.typing import ArrayLike

from ..engines.tables import JIQ, JSQ, JSQ_D, RANDOM

__all__ = [
    "POLICIES",
    "DEFAULT_POLICY",
    "SMOOTH_POLICIES",
    "check_policy",
    "policy_code",
    "p_levels",
    "p_meanfield",
    "meanfield_d",
    "fluid_fixed_point",
    "describe",
]

POLICIES = ("jsq-d", "random", "jsq", "jiq")
DEFAULT_POLICY = "jsq-d"
SMOOTH_POLICIES = ("jsq-d", "random")  # a differentiable mean-field drift
_CODES = {"jsq-d": JSQ_D, "random": RANDOM, "jsq": JSQ, "jiq": JIQ}
_TEXT = {
    "jsq-d": "JSQ(d): the shortest of d sampled queues",
    "random": "random: one uniformly random queue",
    "jsq": "JSQ: a shortest of all n queues",
    "jiq": "JIQ: an idle queue if there is one, else a uniformly random queue",
}


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
    if key not in _CODES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}; got {policy!r}")
    return key


def policy_code(policy: str) -> int:
    """The engines' integer code of a rule (:mod:`supermarket.engines.tables`); 0 is ``jsq-d``.

    Parameters
    ----------
    policy : str
        A rule of :data:`POLICIES`.

    Returns
    -------
    int
        The code the engines' ``Setup.policy`` holds.

    Examples
    --------
    >>> [policy_code(p) for p in POLICIES]
    [0, 1, 2, 3]
    """
    return _CODES[check_policy(policy)]


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
    return _TEXT[check_policy(policy)]


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
    code = policy_code(policy)
    c = np.asarray(counts, dtype=np.int64)
    if c.ndim == 0:
        raise ValueError("counts must have at least one axis (c_1, c_2, …)")
    n = int(n)
    if code == JSQ_D:
        if replace:
            return (c / n) ** int(d)
        tot = math.comb(n, int(d))
        table = np.array([math.comb(int(k), int(d)) / tot for k in range(n + 1)])
        return table[c]
    if code == JSQ:
        return (c == n).astype(float)
    p = c / n  # random; JIQ below
    if code == JIQ:
        p = p * (c[..., :1] == n)
    return p


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
    p = check_policy(policy)
    if p == "random":
        return 1
    if p == "jsq-d":
        return d
    raise ValueError(
        f"policy={p!r} has a discontinuous mean-field drift (P_ℓ(u) jumps at u_1 = 1): the "
        "mean-field ODE, the refined mean field and the linear-noise approximation need a "
        f"differentiable drift and are defined only for {' and '.join(SMOOTH_POLICIES)}; "
        "its fluid fixed point is u_1 = λ, u_ℓ = 0 for ℓ >= 2 (policies.fluid_fixed_point)"
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
    from ..theory import fixed_point

    p = check_policy(policy)
    if p in ("jsq", "jiq"):
        from ..model import check_int, check_load

        lamf = check_load(lam)
        out = np.zeros(check_int("levels", levels, minimum=1))
        out[0] = lamf
        return out
    return fixed_point(int(meanfield_d(p, d)), lam, levels)
