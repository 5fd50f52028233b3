"""The ``start="fixed-point"`` states of the count engines with server classes (docs/model.md
§15.2, §15.5, §15.7): each class's counts from the mean field's fixed point, rounded.

As the phase engine's fixed-point start (:mod:`supermarket.simulation.phase_run`): the share of
class-``k`` servers with at least ``ℓ`` customers (and, with a phase-type law, of length ``ℓ`` in
phase ``φ``) times the class's ``n_k`` servers, rounded to the nearest count.  The mean field
with classes exists for the rules with a differentiable drift
(:data:`supermarket.system.policies.SMOOTH_POLICIES`) at load ``λ < 1``; for ``jsq``, ``jiq`` and
``jbt`` the start is their fluid fixed point (:func:`supermarket.meanfield.fluid.fluid_fixed_point`,
docs/model.md §2.1: no queue above 1, or above ``T = d`` for ``jbt``).
"""

from __future__ import annotations

import numpy as np

from ..system.service import ServerClasses, ServiceLaw

__all__ = ["classes_start", "classes_phase_start", "phase_start", "check_start", "START_CHOICES"]

START_CHOICES = ("empty", "fixed-point")
"""The starts of the count engines with classes."""


def check_start(start: object) -> str:
    """``start`` if it is one of :data:`START_CHOICES`, else a ValueError naming it.

    >>> check_start("fixed-point")
    'fixed-point'
    """
    if not isinstance(start, str) or start not in START_CHOICES:
        raise ValueError(f"start: the count engine with classes starts 'empty' or at the 'fixed-point', got {start!r}")
    return start


def classes_start(counts: np.ndarray, d: int, lam: float, sc: ServerClasses, policy: str) -> np.ndarray:
    """``c[k, i]``: the class-``k`` servers with at least ``i`` customers at the rounded fixed point
    of the mean field with classes (:func:`supermarket.meanfield.classes.classes_fixed_point`),
    ``c[k, 0] = n_k``.

    Parameters
    ----------
    counts : numpy.ndarray
        The servers of each class, ``n_k``.
    d, lam : int, float
        Choices and load (``λ < 1``).
    sc : ServerClasses
    policy : str
        A rule of a count engine (``jsq-d``, ``random``: the mean field; ``jsq``, ``jiq``, ``jbt``: the fluid point).

    Returns
    -------
    numpy.ndarray
        ``(classes, levels + 1)`` int64, non-increasing along each row.

    Examples
    --------
    >>> from supermarket.system.service import parse_server_classes
    >>> classes_start(np.array([1000]), 2, 0.5, parse_server_classes("1:1"), "jsq-d")[0, :4].tolist()
    [1000, 500, 125, 8]
    """
    from ..meanfield.classes import classes_fixed_point
    from ..meanfield.fluid import fluid_fixed_point
    from ..system import policies as _pol

    if _pol.RULES[policy].smooth:
        u = classes_fixed_point(d, lam, sc, policy=policy).u  # u[k, i-1] = u_{k,i}, non-increasing in i
    else:  # jsq, jiq: the fluid fixed point
        u = fluid_fixed_point(policy, d, lam, sc).u
    c = np.rint(u * np.asarray(counts, float)[:, None]).astype(np.int64)
    top = int(np.max(np.nonzero(c.any(axis=0))[0], initial=-1)) + 1
    out = np.zeros((counts.size, top + 1), np.int64)
    out[:, 0] = counts
    out[:, 1:] = c[:, :top]
    return out


def classes_phase_start(
    counts: np.ndarray, d: int, lam: float, sc: ServerClasses, law: ServiceLaw, policy: str
) -> np.ndarray:
    """``N[k, ℓ, φ]``: the class-``k`` servers of length ``ℓ >= 1`` in phase ``φ`` at the rounded
    fixed point of the phase-type mean field with classes
    (:func:`supermarket.meanfield.classes_phase.classes_phase_fixed_point`); row ``ℓ = 0`` is 0.

    Where rounding up puts more than ``n_k`` servers in a class, the largest counts lose one
    each until it fits (as the phase engine's start does).

    Parameters
    ----------
    counts : numpy.ndarray
        The servers of each class, ``n_k``.
    d, lam : int, float
        Choices and load (``λ < 1``).
    sc : ServerClasses
    law : ServiceLaw
        A phase-type law of mean 1.
    policy : str
        A rule of a count engine (``jsq-d``, ``random``: the mean field; ``jsq``, ``jiq``, ``jbt``: the fluid point).

    Returns
    -------
    numpy.ndarray
        ``(classes, levels + 1, phases)`` int64.

    Examples
    --------
    >>> from supermarket.system.service import parse_server_classes, parse_service
    >>> N = classes_phase_start(np.array([500, 500]), 2, 0.5, parse_server_classes("0.5:2,0.5:1"),
    ...                         parse_service("erlang:2"), "jsq-d")
    >>> N.shape[0], N.shape[2], bool(N[:, 0].sum() == 0), bool((N.sum(axis=(1, 2)) <= 500).all())
    (2, 2, True, True)
    """
    from ..meanfield.classes_phase import classes_phase_fixed_point
    from ..meanfield.fluid import fluid_fixed_point
    from ..system import policies as _pol

    if _pol.RULES[policy].smooth:
        x = classes_phase_fixed_point(d, lam, sc, law, policy=policy).x  # x[k, ℓ-1, φ]
    else:  # jsq, jiq: the fluid fixed point
        x = fluid_fixed_point(policy, d, lam, sc, law).x
    N = np.rint(x * np.asarray(counts, float)[:, None, None]).astype(np.int64)
    for k in range(counts.size):
        while N[k].sum() > counts[k]:  # rounding up may overfill a class by a few servers
            i, j = np.unravel_index(np.argmax(N[k]), N[k].shape)
            N[k, i, j] -= 1
    top = int(np.max(np.nonzero(N.any(axis=(0, 2)))[0], initial=-1)) + 1
    out = np.zeros((counts.size, top + 1, N.shape[2]), np.int64)
    out[:, 1:] = N[:, :top]
    return out


def phase_start(n: int, d: int, lam: float, alpha: np.ndarray, M: np.ndarray, policy: str) -> np.ndarray:
    """``N[ℓ, φ]``: the queues of length ``ℓ`` in phase ``φ`` at the rounded fixed point of the
    phase engine's rule with one class (the phase-type mean field for ``jsq-d`` and ``random``,
    :func:`supermarket.meanfield.phase.phase_fixed_point`; the fluid fixed point for ``jsq`` and
    ``jiq``); row ``ℓ = 0`` is 0, and where rounding up overfills, the largest counts lose one each.

    >>> phase_start(100, 1, 0.5, np.array([1.0, 0.0]), np.array([[-2.0, 2.0], [0.0, -2.0]]), "jsq").tolist()
    [[0, 0], [25, 25]]
    """
    from ..meanfield.fluid import fluid_shares
    from ..meanfield.phase import phase_fixed_point
    from ..system import policies as _pol

    if _pol.RULES[policy].smooth:
        x = phase_fixed_point(int(_pol.meanfield_d(policy, d)), lam, alpha, M).x
    else:
        x = fluid_shares(policy, d, lam, alpha, M)
    N0 = np.zeros((x.shape[0] + 1, alpha.size), np.int64)
    N0[1:] = np.rint(x * n).astype(np.int64)
    while N0.sum() > n:  # rounding up may overfill by a few queues
        ti, tj = np.unravel_index(np.argmax(N0), N0.shape)
        N0[ti, tj] -= 1
    return N0
