"""Classes of servers with speeds (docs/model.md §14).

**Server classes** (:func:`parse_server_classes`, ``FRACTION:SPEED,…``): a fraction
``f_k`` of the ``n`` servers works at speed ``s_k`` (a customer of work ``S`` is served in
time ``S/s_k``).  The load is per unit of total capacity: the arrival rate is
``nλ·s̄`` with ``s̄ = Σ f_k s_k``.  Each ``f_k n`` must be a whole number of servers (within
1e-9): the classes are refused at an ``n`` where they are not, rather than rounded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["ServerClasses", "parse_server_classes", "check_random_stable", "CLASSES_FORM", "MAX_SPEED_RATIO"]

CLASSES_FORM = "FRACTION:SPEED,… (for example 0.5:2,0.5:1; fractions > 0 summing to 1, speeds > 0)"

#: Largest ratio of the fastest to the slowest server speed.  The count engines
#: uniformise at the fastest speed, so their work per unit of model time grows with this
#: ratio while the slow servers' events do not; beyond it a run spends almost all its
#: steps on virtual events.
MAX_SPEED_RATIO = 1e3


@dataclass(frozen=True, eq=False)
class ServerClasses:
    """Classes of servers: a fraction ``f_k`` of the servers works at speed ``s_k``.

    Examples
    --------
    >>> sc = parse_server_classes("0.5:2,0.5:1")
    >>> sc.mean_speed, sc.counts(10).tolist()
    (1.5, [5, 5])
    >>> sc.counts(3)
    Traceback (most recent call last):
    ...
    ValueError: server_classes: fraction 0.5 of n = 3 servers is 1.5, not a whole number of servers; ...
    """

    fractions: tuple[float, ...]
    speeds: tuple[float, ...]
    spec: str = ""

    @property
    def mean_speed(self) -> float:
        """``s̄ = Σ f_k s_k``, the capacity per server."""
        return float(sum(f * s for f, s in zip(self.fractions, self.speeds)))

    def counts(self, n: int) -> np.ndarray:
        """Servers per class at ``n`` servers, ``f_k n`` (refused unless whole within 1e-9)."""
        out = []
        for f in self.fractions:
            x = f * n
            r = round(x)
            if abs(x - r) > 1e-9 * max(1.0, x) or r < 1:
                raise ValueError(
                    f"server_classes: fraction {f:g} of n = {n} servers is {x:g}, not a whole number "
                    "of servers; choose n so that every fraction times n is whole"
                )
            out.append(int(r))
        if sum(out) != n:
            raise ValueError(f"server_classes: the classes hold {sum(out)} servers at n = {n}, not n")
        return np.array(out, dtype=np.int64)

    def to_dict(self) -> dict:
        return {"fractions": list(self.fractions), "speeds": list(self.speeds), "mean_speed": self.mean_speed}


def parse_server_classes(text: str | ServerClasses | None) -> ServerClasses:
    """Server classes from ``FRACTION:SPEED,…`` (a :class:`ServerClasses` passes through;
    None gives one class of speed 1).

    Raises
    ------
    ValueError
        Naming ``server_classes`` and the valid form: fractions > 0 summing to 1 within
        1e-9, speeds finite and > 0.

    Examples
    --------
    >>> parse_server_classes("0.25:4, 0.75:1").mean_speed
    1.75
    >>> parse_server_classes("0.5:2,0.4:1")
    Traceback (most recent call last):
    ...
    ValueError: server_classes must be FRACTION:SPEED,… (...); the fractions of '0.5:2,0.4:1' sum to 0.9
    """
    if text is None:
        return ServerClasses((1.0,), (1.0,), "1:1")
    if isinstance(text, ServerClasses):
        return text
    if not isinstance(text, str):
        raise TypeError(f"server_classes must be a string {CLASSES_FORM}, got {type(text).__name__}")
    fr, sp = [], []
    parts = [p.strip() for p in text.split(",")]
    for part in parts:
        f, sep, s = part.partition(":")
        try:
            fv, sv = float(f), float(s)
        except ValueError:
            fv = sv = math.nan
        if not sep or not (math.isfinite(fv) and math.isfinite(sv)):
            raise ValueError(f"server_classes must be {CLASSES_FORM}; {part!r} of {text!r} is not FRACTION:SPEED")
        if not (0.0 < fv <= 1.0) or not sv > 0.0:
            raise ValueError(
                f"server_classes must be {CLASSES_FORM}; {part!r} of {text!r} has a fraction outside "
                "(0, 1] or a speed <= 0"
            )
        fr.append(fv)
        sp.append(sv)
    if max(sp) / min(sp) > MAX_SPEED_RATIO:
        raise ValueError(
            f"server_classes: the speeds of {text!r} span a ratio of {max(sp) / min(sp):.3g}; the fastest "
            f"may be at most {MAX_SPEED_RATIO:g} times the slowest (the engines step at the fastest "
            "speed, so the work per event grows with the ratio)"
        )
    if abs(sum(fr) - 1.0) > 1e-9:
        raise ValueError(f"server_classes must be {CLASSES_FORM}; the fractions of {text!r} sum to {sum(fr):.12g}")
    return ServerClasses(tuple(fr), tuple(sp), text)


def check_random_stable(policy: str, lam: float, sc: ServerClasses, d: int | None = None) -> None:
    """Refuse ``random`` routing (or JSQ(1), the same rule: ``d = 1``) when a class's own load
    ``λ s̄/s_k`` is 1 or more: each queue of that class is then an M/G/1 queue at load ``>= 1``
    (arrivals at rate ``λ s̄``, service at speed ``s_k``, mean work 1), which grows without bound
    whatever ``n``: there is no stationary law and no mean-field fixed point (docs/model.md §15).

    >>> check_random_stable("random", 0.8, parse_server_classes("0.5:2,0.5:1"))
    Traceback (most recent call last):
    ...
    ValueError: lam: under random routing class speed 1 gets load λ s̄/s = 1.2 >= 1: its queues grow without ...
    >>> check_random_stable("jsq-d", 0.8, parse_server_classes("0.5:2,0.5:1"))
    """
    if policy != "random" and d != 1:
        return
    s_min = min(float(x) for x in sc.speeds)
    rho = float(lam) * sc.mean_speed / s_min
    if rho >= 1.0:
        raise ValueError(
            f"lam: under random routing class speed {s_min:g} gets load λ s̄/s = {rho:g} >= 1: its queues grow "
            "without bound: there is no stationary law and no mean-field fixed point (a truncated solve would only "
            f"describe its cap); use a load below {s_min / sc.mean_speed:g} or another rule"
        )
