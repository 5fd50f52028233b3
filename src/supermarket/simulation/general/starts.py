"""The ``start="fixed-point"`` state of the event engine (docs/model.md §14): the count engine's
start of the same system, turned into per-server lengths and phases.

The counts are the very ones the count engines start from, rounded the same way (``n·π``
to the nearest integer): the profile engine's (:func:`supermarket.system.states.start_counts`
for ``jsq-d``, the rule's fluid fixed point for the others, as :mod:`supermarket.simulation.plan`
rounds it), the phase engine's (the phase mean field's ``x[ℓ, φ]`` times ``n``, the largest
count lowered while rounding up overfills ``n``, as :mod:`supermarket.simulation.phase_run`),
and the classes engines' (:mod:`supermarket.simulation.class_starts`).  The rules with a
discontinuous drift (``jsq``, ``jiq``, ``jbt``) start at their fluid fixed point
(:mod:`supermarket.meanfield.fluid`, docs/model.md §2.1), as the count engines do.

:func:`start_state` returns ``N[k, ℓ, φ]``: the class-``k`` servers of length ``ℓ`` whose
customer in service is in phase ``φ``; :func:`server_state` lays them out on the servers,
class 0 first (the kernel's numbering), in each class the longest first and, at one length,
phase 0 first.  Which systems have a fixed point is decided in one place,
:func:`supermarket.system.event_starts.fixed_point_refusal`.
"""

from __future__ import annotations

import numpy as np

from ...engines import events as _ev
from ...engines.event_start import place_departures, start_works
from ...system import policies as _pol
from ...system.phase_law import check_ph
from ...system.service import ServerClasses, ServiceLaw, phase_type
from ...system.states import start_counts
from ..class_starts import classes_phase_start, classes_start, phase_start
from ..plan import _FP_LEVELS

__all__ = ["start_state", "server_state", "residual_table", "draw_start", "load_start", "kernel_state"]


def _from_counts(c: np.ndarray) -> np.ndarray:
    """``N[ℓ, 0]`` (ℓ = 0..L) from ``c = (c_1, …, c_L)``, ``c_ℓ`` the servers of length ``>= ℓ``."""
    c = np.concatenate([np.asarray(c, np.int64), [0]])
    N = np.zeros((c.size, 1), np.int64)
    N[1:, 0] = c[:-1] - c[1:]
    return N


def _fit(N0: np.ndarray, n: int) -> np.ndarray:
    """The largest count lowered by one while the rounded counts overfill ``n`` servers (as the
    phase engine's start)."""
    while N0.sum() > n:
        i, j = np.unravel_index(np.argmax(N0), N0.shape)
        N0[i, j] -= 1
    return N0


def start_state(
    n: int, d: int, lam: float, policy: str, law: ServiceLaw, sc: ServerClasses | None, counts: np.ndarray
) -> np.ndarray:
    """``N[k, ℓ, φ]`` (int64; row ``ℓ = 0`` zero) of the fixed-point start (module docstring).

    Parameters
    ----------
    n, d : int
        Servers and choices.
    lam : float
        Load, ``λ < 1``.
    policy : str
        A rule with a fixed point (:func:`supermarket.system.event_starts.fixed_point_refusal`).
    law : ServiceLaw
        Exponential or phase-type, mean 1.
    sc : ServerClasses or None
        The server classes, None for one class (as the count engines tell them apart).
    counts : numpy.ndarray
        The servers of each class, ``n_k``.

    Returns
    -------
    numpy.ndarray
        Shape ``(classes, levels + 1, phases)``.

    Examples
    --------
    >>> from supermarket.system.service import parse_service
    >>> start_state(1000, 2, 0.9, "jsq-d", parse_service("exp"), None, np.array([1000]))[0, :, 0].tolist()
    [0, 171, 251, 272, 168, 37, 1]
    """
    exp = law.is_exponential
    if sc is not None:
        if exp:
            c = classes_start(counts, d, lam, sc, policy)
            return np.stack([_from_counts(row[1:])[:, 0] for row in c])[:, :, None]
        return classes_phase_start(counts, d, lam, sc, law, policy)
    if exp:
        if policy == _pol.DEFAULT_POLICY:
            c = start_counts(n, d, lam, "fixed-point")
        else:  # the rule's own fluid fixed point, as the profile engine rounds it (simulation.plan)
            c = np.rint(n * _pol.fluid_fixed_point(policy, lam, _FP_LEVELS, d=d)).astype(np.int64)
            c = c[c > 0]
        return _from_counts(c)[None]
    assert law.alpha is not None and law.T is not None, "a phase-type law (event_starts refuses the others)"
    a, M, _ = check_ph(law.alpha, law.T)
    return phase_start(n, d, lam, a, M, policy)[None]  # the phase engine's start, rounded as it rounds


def server_state(N: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each server's length and the phase of its customer in service (0 when idle) from
    ``N[k, ℓ, φ]``: class 0 first, in a class the longest first, at one length phase 0 first.

    Examples
    --------
    >>> N = np.zeros((2, 3, 2), np.int64); N[0, 2, 1] = 1; N[0, 1, 0] = 1; N[1, 1, 1] = 2
    >>> x, ph = server_state(N, np.array([3, 2]))
    >>> x.tolist(), ph.tolist()
    ([2, 1, 0, 1, 1], [1, 0, 0, 1, 1])
    """
    x, ph = [], []
    for k, nk in enumerate(np.asarray(counts, np.int64)):
        L, m = N[k].shape
        lengths = np.repeat(np.repeat(np.arange(L)[::-1], m), N[k][::-1].ravel())
        phases = np.repeat(np.tile(np.arange(m), L), N[k][::-1].ravel())
        idle = int(nk) - lengths.size
        if idle < 0:
            raise ValueError(f"start: class {k} holds {lengths.size} busy servers at the fixed point but has {nk}")
        x.append(np.concatenate([lengths, np.zeros(idle, np.int64)]))
        ph.append(np.concatenate([phases, np.zeros(idle, np.int64)]))
    return np.concatenate(x).astype(np.int32), np.concatenate(ph).astype(np.int32)


def residual_table(law: ServiceLaw) -> np.ndarray:
    """The sampling table of ``PH(α, T)`` (:meth:`~supermarket.system.service.ServiceLaw.ph_table`)
    from which :func:`supermarket.engines.event_start.residual_work` draws ``PH(e_φ, T)``; a
    dummy for the exponential law (its remaining work is a fresh exponential)."""
    if law.is_exponential or law.alpha is None or law.T is None:
        return np.zeros((1, 1))
    return phase_type(law.alpha, law.T, spec=law.spec).ph_table()


def draw_start(
    x0: np.ndarray, ph0: np.ndarray, counts: np.ndarray, speeds: np.ndarray, s: np.ndarray, law: ServiceLaw
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The departures ``(times, servers)`` of the start's customers and each server's last
    departure, drawn from the replication's stream ``s`` (:func:`supermarket.engines.event_start.start_works`)."""
    total = int(x0.sum(dtype=np.int64))
    dep_t, dep_j, lastdep = np.empty(total), np.empty(total), np.zeros(x0.size)
    bound = np.cumsum(np.asarray(counts, np.int64))
    par = np.asarray(law.params, np.float64)
    res = residual_table(law)
    m = start_works(x0, ph0, bound, speeds, s, law.code, par, law.ph_table(), res, lastdep, dep_t, dep_j)
    if m != total:  # one departure per customer, or the kernel's structures would hold garbage
        raise RuntimeError(f"the start drew {m} departures for {total} customers")
    return dep_t, dep_j, lastdep


def load_start(a: dict, fl: np.ndarray, it: np.ndarray, x0: np.ndarray, deps: tuple, sorted_mode: bool) -> None:
    """Put the start into the kernel's fresh arrays ``a`` (:func:`supermarket.engines.events.new_arrays`,
    sized for its levels, nodes and far departures): the lengths, the last departures, the
    counts per class and level, the servers sorted by length (``jsq``, ``jiq``, ``jbt``), the top
    level and the departures (:func:`supermarket.engines.event_start.place_departures`)."""
    dep_t, dep_j, lastdep = deps
    n = x0.size
    a["x"][:] = x0
    a["lastdep"][:] = lastdep
    K, L = a["c"].shape
    cls = np.minimum(np.searchsorted(a["bound"], np.arange(n), side="right"), K - 1)
    for k in range(K):
        hist = np.bincount(x0[cls == k], minlength=L)[:L]
        a["c"][k] = np.cumsum(hist[::-1])[::-1]
    a["ctot"][:] = a["c"].sum(axis=0)
    if sorted_mode:
        order = np.argsort(x0, kind="stable").astype(np.int32)
        a["order"][:] = order
        a["pos"][order] = np.arange(n, dtype=np.int32)
        a["bstart"][:] = np.searchsorted(x0[order], np.arange(a["bstart"].size), side="left")
    it[_ev.I_TOP] = int(x0.max(initial=0))
    place_departures(dep_t, dep_j, dep_t.size, a["ht"], a["cal"], a["qt"], a["qn"], fl, it)


def kernel_state(
    init: tuple[np.ndarray, np.ndarray] | None,
    counts: np.ndarray,
    speeds: np.ndarray,
    law: ServiceLaw,
    rate: float,
    t_meas: float,
    first_arrival: float,
    s: np.ndarray,
    sorted_mode: bool,
    buffer: int,
) -> tuple[np.ndarray, np.ndarray, dict]:
    """The event kernel's ``fl``, ``it`` and arrays (:mod:`supermarket.engines.events`) at time 0:
    empty (``init`` None), or the start ``init`` (:func:`server_state`: lengths and phases) with
    its departures drawn from ``s`` (after the first arrival, which the caller drew) and placed
    (:func:`draw_start`, :func:`load_start`)."""
    nb, inv_width = _ev.window(rate, min(speeds))
    if init is None:
        a = _ev.new_arrays(counts, buffer=buffer, sorted_mode=sorted_mode, buckets=nb)
        fl, it = _ev.new_counters(rate, t_meas, first_arrival, inv_width)
        return fl, it, a
    n = init[0].size
    deps = draw_start(init[0], init[1], counts, speeds, s, law)
    far = int(np.count_nonzero(deps[0] * inv_width >= nb))  # beyond the window: the far heap
    top = int(init[0].max(initial=0))
    a = _ev.new_arrays(
        counts, levels=max(16, top + 2), heap=n // 16 + 64 + far, buffer=buffer, sorted_mode=sorted_mode,
        buckets=nb, nodes=4 * n + 64 + deps[0].size - far,
    )  # fmt: skip
    fl, it = _ev.new_counters(rate, t_meas, first_arrival, inv_width)
    load_start(a, fl, it, init[0], deps, sorted_mode)
    return fl, it, a
