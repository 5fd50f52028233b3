"""The sizing searches under a service law (docs/model.md §13.1): the least ``d`` whose
mean-field sojourn ``q``-quantile meets a latency target (:func:`least_d_for_service_latency`)
and the largest load that meets it with ``d`` choices (:func:`max_load_for_service_latency`),
over the sojourn laws of :mod:`.sojourn` (the mean-field law for ``d >= 2``, the M/PH/1 law
for random routing, the fit for laws without a phase form).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import check_load, check_positive_float, check_positive_int
from ..response import check_quantile
from ..result import Result, frame
from ..system.service import ServiceLaw, parse_service
from .latency import DESIGN_KEYS, least_d_search
from .sojourn import _service_quantile, mph1_sojourn_quantile, mph1_sojourn_tail, phase_form, sojourn_law

__all__ = [
    "LOAD_MAX",
    "ServiceDesign",
    "ServiceLoadDesign",
    "least_d_for_service_latency",
    "max_load_for_service_latency",
]

LOAD_MAX = 1.0 - 1e-4
"""Highest load the bisection of :func:`max_load_for_service_latency` evaluates: the mean-field
fixed point needs ever more levels as λ → 1, and λ = 1 itself is out of range; a target met at
``LOAD_MAX`` is reported as met "up to" it."""


@dataclass(frozen=True)
class ServiceDesign(Result):
    """The least ``d`` whose mean-field sojourn ``quantile`` is at most ``latency`` under a
    service law (docs/model.md §13.1).

    ``answer``: that ``d``; ``achieved``: the quantile there; ``neighbour``: ``{"d", "value"}``
    at ``d − 1`` (empty when ``d = 1``); ``floor``: the quantile of one service of the law itself
    (``d = ∞``; exact, not of the fit);
    ``fit``: the note of the two-moment fit, empty when the law is phase type; ``checked``:
    ``(d, quantile)`` evaluated; ``verify``: the event-engine check, or None.

    Examples
    --------
    >>> r = least_d_for_service_latency(0.9, 0.99, 8.0, "exp")
    >>> int(r.answer), r.monotone, r.fit
    (3, True, '')
    """

    service: str
    load: float
    quantile: float
    latency: float
    answer: int
    achieved: float
    neighbour: dict
    floor: float
    fit: str
    checked: tuple
    monotone: bool
    verify: dict | None = None
    # the keys of every design --latency answer (supermarket.design.latency.LatencyDesign): JSQ(d),
    # one class, the phase-type mean field; ``note`` is the fit's note, also kept as ``fit``
    policy: str = "jsq-d"
    question: str = "least d"
    d: int | None = None
    holds: bool | None = None
    at_load: float | None = None
    server_classes: str | None = None
    method: str = "the mean field (supermarket.meanfield)"
    capped: bool = False

    _order = (*DESIGN_KEYS, "fit")
    _extra = ("note",)

    @property
    def note(self) -> str:
        """The two-moment fit's note (``fit``), as every design answer names it."""
        return self.fit

    def to_frame(self) -> Any:
        return frame([{"d": a, "sojourn_quantile": v} for a, v in self.checked])

    def summary(self) -> str:
        qn = f"p{100 * self.quantile:g}"
        d = int(self.answer)
        nb = self.neighbour
        line = (
            f"At load λ = {self.load:g} with {self.service} service, d = {d} choice{'' if d == 1 else 's'} "
            f"give{'s' if d == 1 else ''} sojourn {qn} = {self.achieved:.6g} ≤ {self.latency:g} (mean field)"
            + (f"; d = {nb['d']} would give {nb['value']:.6g}." if nb else " (random routing: M/PH/1 queues).")
        )
        lines = [line]
        if self.fit:
            lines.append(f"  {self.fit}")
        if not self.monotone:
            lines.append("  warning: the quantile was not monotone on the points checked; the answer may not be unique")
        if self.verify is not None:
            lines.append(f"  verify (event engine, n = {self.verify['n']}): " + self.verify["note"])
        return "\n".join(lines)


def _check_target(load, quantile, latency, service):
    lam = check_load(load)
    q = check_quantile(quantile)
    T = check_positive_float("latency", latency)
    law = parse_service(service)
    return lam, q, T, law


def least_d_for_service_latency(
    load: float | str, quantile: float, latency: float, service: str | ServiceLaw, *, d_max: int = 2**20
) -> ServiceDesign:
    """The least ``d`` whose mean-field FIFO sojourn ``quantile`` is at most ``latency`` under
    ``service`` (doubling, then bisection on ``d``; monotonicity checked on the points seen).

    Parameters
    ----------
    load : float
        λ in (0, 1).
    quantile : float
        Level in (0, 1).
    latency : float
        Target, in mean service times (> 0).
    service : str or ServiceLaw
        A law of :func:`supermarket.system.service.parse_service` (laws without a phase form are
        replaced by their two-moment fit: :func:`phase_form`).
    d_max : int
        Largest ``d`` searched.

    Returns
    -------
    ServiceDesign

    Raises
    ------
    ValueError
        A parameter out of range; or no ``d`` meets the target: with ``d = ∞`` a customer still
        needs its own service, whose ``q``-quantile (of the law itself, exact, even when the
        sojourn law uses the fit) is the floor.

    Examples
    --------
    >>> r = least_d_for_service_latency(0.9, 0.99, 14.0, "hyperexp:4")   # one service's p99 is 10.75
    >>> int(r.answer), r.achieved <= 14.0 < r.neighbour["value"]
    (11, True)
    """
    lam, q, T, law = _check_target(load, quantile, latency, service)
    d_max = check_positive_int("d_max", d_max)
    fit_law, note = phase_form(law)
    assert fit_law.alpha is not None and fit_law.T is not None
    floor = _service_quantile(law, q)  # of the law itself, not of its fit: no d beats it
    if T <= floor:
        raise ValueError(
            f"no d meets sojourn p{100 * q:g} ≤ {T:g} with {law.spec} service: even with d = ∞ every customer "
            f"still needs its own service, whose p{100 * q:g} is {floor:.6g}"
        )
    if note:
        fit_floor = _service_quantile(fit_law, q)
        if T <= fit_floor:
            raise ValueError(
                f"no d meets sojourn p{100 * q:g} ≤ {T:g} with {law.spec} service in the mean field: it uses the "
                f"two-moment phase-type fit, whose own service p{100 * q:g} is {fit_floor:.6g} (the law's is "
                f"{floor:.6g}); the fit's tail, not the number of choices, is the limit (simulate the law itself "
                "with the event engine)"
            )
    checked: dict[int, float] = {}

    def f(d: int) -> float:
        if d not in checked:
            # d = 1 is the M/PH/1 queue: its classical law is exact and avoids the fixed point's
            # many levels (the geometric tail of M/PH/1 at high load)
            checked[d] = (
                mph1_sojourn_quantile(lam, fit_law, q) if d == 1 else sojourn_law(d, lam, fit_law)[0].quantile(q)
            )
        return checked[d]

    too_many = f"sojourn p{100 * q:g} ≤ {T:g} needs more than d_max = {d_max} choices at load {lam:g}"
    hi = least_d_search(f, T, d_max, too_many)
    vals = sorted(checked.items())
    monotone = all(b[1] <= a[1] + 1e-9 * max(1.0, a[1]) for a, b in itertools.pairwise(vals))
    nb = {} if hi == 1 else {"d": hi - 1, "value": f(hi - 1)}
    return ServiceDesign(
        service=law.spec,
        load=lam,
        quantile=q,
        latency=T,
        answer=int(hi),
        achieved=checked[hi],
        neighbour=nb,
        floor=floor,
        fit=note,
        checked=tuple(sorted(checked.items())),
        monotone=monotone,
    )


@dataclass(frozen=True)
class ServiceLoadDesign(Result):
    """The largest load whose mean-field sojourn ``quantile`` is at most ``latency`` with ``d``
    choices under a service law (docs/model.md §13.1).

    ``answer``: that load; ``achieved``: the quantile there; ``neighbour``: ``{"load",
    "value"}`` just above it; ``checked``: ``(load, P(sojourn > latency))`` evaluated by the
    bisection, ``monotone`` whether that tail grew with the load on them; ``floor`` and ``fit``
    as in :class:`ServiceDesign`.

    Examples
    --------
    >>> r = max_load_for_service_latency(1, 0.99, 2 * 4.605170185988091, "exp")   # M/M/1: λ = 1 − log(100)/T
    >>> round(r.answer, 5)
    0.5
    """

    service: str
    d: int
    quantile: float
    latency: float
    answer: float
    achieved: float
    neighbour: dict
    floor: float
    fit: str
    checked: tuple
    monotone: bool
    capped: bool = False
    # the keys of every design --latency answer, as in :class:`ServiceDesign`
    verify: dict | None = None
    policy: str = "jsq-d"
    question: str = "largest load"
    load: float | None = None
    holds: bool | None = None
    at_load: float | None = None
    server_classes: str | None = None
    method: str = "the mean field (supermarket.meanfield)"

    _order = (*DESIGN_KEYS, "fit")
    _extra = ("note",)

    @property
    def note(self) -> str:
        """The two-moment fit's note (``fit``), as every design answer names it."""
        return self.fit

    def to_frame(self) -> Any:
        return frame([{"load": a, "tail_at_latency": v} for a, v in self.checked])

    def summary(self) -> str:
        qn = f"p{100 * self.quantile:g}"
        nb = self.neighbour
        if self.capped:
            first = (
                f"With d = {self.d} and {self.service} service, sojourn {qn} ≤ {self.latency:g} holds at every "
                f"load searched, up to λ = {self.answer:.6g} (mean field, {qn} = {self.achieved:.6g} there); "
                "higher loads are not evaluated (λ → 1 is outside the mean field's reach here)."
            )
        else:
            first = (
                f"With d = {self.d} and {self.service} service, the largest load with sojourn {qn} ≤ "
                f"{self.latency:g} is λ = {self.answer:.6g} (mean field, {qn} = {self.achieved:.6g} there; "
                f"{nb['value']:.6g} at λ = {nb['load']:.6g})."
            )
        lines = [first]
        if self.fit:
            lines.append(f"  {self.fit}")
        if not self.monotone:
            lines.append("  warning: the quantile was not monotone on the points checked; the answer may not be unique")
        return "\n".join(lines)


def max_load_for_service_latency(
    d: int,
    quantile: float,
    latency: float,
    service: str | ServiceLaw,
    *,
    rtol: float = 1e-5,
    progress: Callable[[str], None] | None = None,
) -> ServiceLoadDesign:
    """The largest load λ whose mean-field FIFO sojourn ``quantile`` is at most ``latency`` with
    ``d`` choices under ``service`` (bisection on λ; monotonicity checked on the points seen).

    Parameters
    ----------
    d : int
        Choices (>= 1).
    quantile, latency, service
        As :func:`least_d_for_service_latency`.
    rtol : float
        Width of the final bracket, relative to the answer.
    progress : callable, optional
        Called with a short text (the load being evaluated) before each evaluation.

    Returns
    -------
    ServiceLoadDesign
        When the target is still met at :data:`LOAD_MAX` (the highest load evaluated; λ = 1 is
        out of range), ``answer`` is ``LOAD_MAX``, ``capped`` is True and ``neighbour`` is empty.
        The bisection takes at most ``log2(1/(rtol·1e-3)) + 2`` evaluations.

    Raises
    ------
    ValueError
        A parameter out of range, or ``latency`` at or below the service's own quantile.

    Examples
    --------
    >>> r = max_load_for_service_latency(2, 0.99, 14.0, "hyperexp:4")
    >>> round(r.answer, 3), r.achieved <= 14.0 < r.neighbour["value"], r.fit
    (0.445, True, '')
    """
    d = check_positive_int("d", d)
    q = check_quantile(quantile)
    T = check_positive_float("latency", latency)
    rtol = check_positive_float("rtol", rtol)
    law = parse_service(service)
    fit_law, note = phase_form(law)
    floor = _service_quantile(law, q)
    if T <= floor:
        raise ValueError(
            f"no load meets sojourn p{100 * q:g} ≤ {T:g} with {law.spec} service: even at vanishing load every "
            f"customer needs its own service, whose p{100 * q:g} is {floor:.6g}"
        )
    assert fit_law.alpha is not None and fit_law.T is not None
    a, M = np.asarray(fit_law.alpha), np.asarray(fit_law.T)
    checked: dict[float, float] = {}  # λ -> P(S > T): the bisection needs the tail at T only

    def tail(lam: float) -> float:
        if lam not in checked:
            if progress is not None:
                progress(f"λ = {lam:.8g}, {len(checked)} loads evaluated")
            checked[lam] = mph1_sojourn_tail(lam, a, M, T) if d == 1 else sojourn_law(d, lam, fit_law)[0].tail(T)
        return checked[lam]

    def f(lam: float) -> float:
        return mph1_sojourn_quantile(lam, fit_law, q) if d == 1 else sojourn_law(d, lam, fit_law)[0].quantile(q)

    lo, hi = 0.0, 1.0
    capped = False
    # every evaluated load lies in (0, LOAD_MAX]; the bracket halves each step (LOAD_MAX
    # replaces a midpoint above it once), so at most log2(1 / (rtol · 1e-3)) + 2 steps
    for _ in range(int(math.ceil(math.log2(1.0 / (rtol * 1e-3)))) + 2):
        if hi - lo <= rtol * max(lo, 1e-3):
            break
        mid = 0.5 * (lo + hi)
        if mid > LOAD_MAX:  # only when every load so far met the target
            if tail(LOAD_MAX) <= 1.0 - q:
                lo, capped = LOAD_MAX, True
                break
            hi = LOAD_MAX
            continue
        if tail(mid) <= 1.0 - q:
            lo = mid
        else:
            hi = mid
    if lo == 0.0:
        raise ValueError(
            f"no load meets sojourn p{100 * q:g} ≤ {T:g} at d = {d} with {law.spec} service"
            + (" (the fit's tail is heavier there than the law's floor)" if note else "")
        )
    pts = sorted(checked.items())
    monotone = all(b[1] >= a[1] - 1e-9 * max(1.0, a[1]) for a, b in itertools.pairwise(pts))
    return ServiceLoadDesign(
        service=law.spec,
        d=d,
        quantile=q,
        latency=T,
        answer=lo,
        achieved=f(lo),
        neighbour={} if capped else {"load": hi, "value": f(hi)},
        floor=floor,
        fit=note,
        checked=tuple(pts),
        monotone=monotone,
        capped=capped,
    )
