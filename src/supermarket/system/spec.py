"""The system a method is asked about, as one value: :class:`System` (docs/model.md §1, §2, §13–§15).

A system is the dispatch rule, its ``d``, whether the ``d`` queues are sampled with
replacement, the server classes, the service law, the load and the number of servers ``n``
(``None`` for the mean field, the limit ``n → ∞``).  It is validated once, when it is made,
with the messages of the checks each method made before (:class:`supermarket.model.Params`,
:func:`~supermarket.system.policies.check_policy`,
:func:`~supermarket.system.service.parse_service`,
:func:`~supermarket.system.service.parse_server_classes`), and written and read back by
:meth:`System.to_dict` and :meth:`System.from_dict`.  Which engine, exact solver and mean
field serve a system is :mod:`supermarket.system.methods`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from ..model import Params, check_load, check_positive_int
from . import policies as _pol
from .service import ServerClasses, ServiceLaw, parse_server_classes, parse_service, phase_type

__all__ = ["System", "LAW_FAMILIES"]

LAW_FAMILIES = ("exponential", "phase-type", "general")
"""The families of service laws, as the methods see them: exponential(1) (the papers' model),
phase-type other than exponential (a finite-state law exists: ``erlang``, ``hyperexp``, ``ph``),
general (no phase-type form: ``lognormal``, ``pareto``, ``deterministic``)."""


@dataclass(frozen=True, eq=False)
class System:
    """The (n, d, λ) system with its rule, sampling, service law and server classes.

    Parameters
    ----------
    n : int or None
        Servers; ``None`` for the mean field (n → ∞).
    d : int
        Choices of the rule (``jsq-d``); the other rules keep it and do not use it.
    load : float, int, str or Fraction
        λ, kept as given (a string or Fraction is the exact value, for ``k_{λ,d}`` and perfect
        sampling); :attr:`lam` is its float.  λ >= 1 is accepted here (a finite horizon); the
        methods that need an equilibrium refuse it.
    rule : str
        The dispatch rule (:data:`supermarket.system.policies.POLICIES`), stored canonical.
    replace : bool
        Sample the ``d`` queues with replacement (paper 000) or without (paper 002).
    service : str or ServiceLaw
        A service law of mean 1 (:func:`~supermarket.system.service.parse_service`), stored parsed.
    server_classes : str, ServerClasses or None
        ``FRACTION:SPEED,…`` (:func:`~supermarket.system.service.parse_server_classes`), stored
        parsed; at a given ``n`` every fraction times ``n`` must be a whole number of servers.

    Raises
    ------
    ValueError, TypeError
        Naming the parameter and its valid range.

    Examples
    --------
    >>> s = System(n=1000, d=2, load="0.9", rule="JSQ_D")
    >>> s.rule, s.lam, s.law_family, s.has_classes
    ('jsq-d', 0.9, 'exponential', False)
    >>> s.to_dict()
    {'n': 1000, 'd': 2, 'load': '0.9', 'rule': 'jsq-d', 'replace': True, 'service': 'exp', 'server_classes': None}
    >>> System.from_dict(s.to_dict()) == s
    True
    >>> System(n=3, d=2, load=0.5, server_classes="0.5:2,0.5:1")
    Traceback (most recent call last):
    ...
    ValueError: server_classes: fraction 0.5 of n = 3 servers is 1.5, not a whole number of servers; ...
    >>> System(n=None, d=2, load=0.9, service="lognormal:4").law_family
    'general'
    """

    n: int | None
    d: int
    load: float | int | str | Fraction
    rule: str = "jsq-d"
    replace: bool = True
    service: ServiceLaw = "exp"  # type: ignore[assignment]  # a string is parsed in __post_init__
    server_classes: ServerClasses | None = None

    if TYPE_CHECKING:  # the signature callers see: strings are accepted and parsed

        def __init__(
            self,
            n: int | None,
            d: int,
            load: float | int | str | Fraction,
            rule: str = "jsq-d",
            replace: bool = True,
            service: str | ServiceLaw = "exp",
            server_classes: str | ServerClasses | None = None,
        ) -> None: ...

    def __post_init__(self) -> None:
        rule = _pol.check_policy(self.rule)
        if self.n is None:
            d = check_positive_int("d", self.d)
            if not isinstance(self.replace, bool):
                raise TypeError(f"replace must be True or False; got {self.replace!r}")
            check_load(self.load, require_stable=False)
            n = None
        else:
            p = Params(self.n, self.d, self.load, replace=self.replace, stable=False)
            n, d = p.n, p.d
        law = parse_service(self.service)
        classes = None if self.server_classes is None else parse_server_classes(self.server_classes)
        if classes is not None and n is not None:
            classes.counts(n)
        for key, value in (("n", n), ("d", d), ("rule", rule), ("replace", bool(self.replace))):
            object.__setattr__(self, key, value)
        object.__setattr__(self, "service", law)
        object.__setattr__(self, "server_classes", classes)

    # ------------------------------------------------------------------ derived
    @property
    def lam(self) -> float:
        """λ as a float."""
        return check_load(self.load, require_stable=False)

    @property
    def mean_field(self) -> bool:
        """Whether the system is the mean-field limit (``n is None``)."""
        return self.n is None

    @property
    def has_classes(self) -> bool:
        """Whether the servers come in classes of speeds."""
        return self.server_classes is not None

    @property
    def law_family(self) -> str:
        """One of :data:`LAW_FAMILIES`: ``"exponential"``, ``"phase-type"`` or ``"general"``."""
        if self.service.is_exponential:
            return "exponential"
        return "general" if self.service.alpha is None else "phase-type"

    def describe(self) -> str:
        """The law and the classes in a few words (``service erlang:2, server classes 0.5:2,0.5:1``),
        for messages.

        >>> System(10, 2, 0.5, service="erlang:2", server_classes="0.5:2,0.5:1").describe()
        'service erlang:2, server classes 0.5:2,0.5:1'
        """
        text = f"service {self.service.spec}"
        if self.server_classes is not None:
            text += f", server classes {self.server_classes.spec}"
        return text

    def replace_fields(self, **changes: Any) -> System:
        """A copy with some fields changed (validated again)."""
        kw: dict[str, Any] = {
            "n": self.n,
            "d": self.d,
            "load": self.load,
            "rule": self.rule,
            "replace": self.replace,
            "service": self.service,
            "server_classes": self.server_classes,
        }
        kw.update(changes)
        return System(**kw)

    # ------------------------------------------------------------------ storage
    def to_dict(self) -> dict:
        """JSON-safe fields: the load as written (a string stays a string, a Fraction is written
        ``"p/q"``), the law by its spec (with ``alpha`` and ``T`` for a ``ph`` law, so that one
        made from arrays reads back), the classes by their spec."""
        load: Any = self.load
        if isinstance(load, Fraction):
            load = f"{load.numerator}/{load.denominator}"
        elif not isinstance(load, str):
            load = int(load) if isinstance(load, int) else float(load)
        law = self.service
        service: Any = law.spec
        if law.name == "ph" and law.alpha is not None and law.T is not None:
            service = {"spec": law.spec, "alpha": law.alpha.tolist(), "T": law.T.tolist()}
        sc = self.server_classes
        classes = None
        if sc is not None:
            classes = sc.spec or ",".join(f"{f!r}:{s!r}" for f, s in zip(sc.fractions, sc.speeds))
        return {
            "n": self.n,
            "d": self.d,
            "load": load,
            "rule": self.rule,
            "replace": self.replace,
            "service": service,
            "server_classes": classes,
        }

    @classmethod
    def from_dict(cls, data: dict) -> System:
        """The system :meth:`to_dict` wrote (unknown keys refused, naming them)."""
        if not isinstance(data, dict):
            raise TypeError(f"a system must be a dict of its fields; got {type(data).__name__}")
        known = {"n", "d", "load", "rule", "replace", "service", "server_classes"}
        extra = sorted(set(data) - known)
        if extra:
            raise ValueError(f"system: unknown field(s) {', '.join(extra)}; the fields are {', '.join(sorted(known))}")
        missing = sorted({"n", "d", "load"} - set(data))
        if missing:
            raise ValueError(f"system: missing field(s) {', '.join(missing)}")
        kw = dict(data)
        service = kw.get("service", "exp")
        if isinstance(service, dict):
            kw["service"] = phase_type(service["alpha"], service["T"], spec=service.get("spec", "ph"))
        load = kw["load"]
        if isinstance(load, str) and "/" in load:
            kw["load"] = Fraction(load)
        return cls(**kw)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, System):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple:
        """The fields as compared: the load by its exact value (0.9, "0.9" and 9/10 are one load)."""
        data = self.to_dict()
        data.pop("load")
        return json.dumps(data, sort_keys=True), _exact(self.load)


def _exact(load: object) -> Fraction | float:
    from ..model import exact_load

    try:
        return exact_load(load)
    except (TypeError, ValueError):  # pragma: no cover - validated when made
        return math.nan
