"""Value checkers of the sweep file: ``(key, value) -> canonical value``, or :class:`ValueError` /
:class:`TypeError` naming the key; enumerations are the library's own."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable
from decimal import Decimal, InvalidOperation
from typing import Any

from ..model import check_choice, check_load, parse_count  # check_choice: shared with simulate()

Checker = Callable[[str, Any], Any]
"""A value checker: ``(key, value) -> canonical value``."""


def choice(options: Iterable[str]) -> Checker:
    """A checker accepting one of ``options`` (see :func:`check_choice`)."""
    options = tuple(options)

    def check(key: str, v: object) -> str:
        return check_choice(key, v, options)

    check.options = options  # type: ignore[attr-defined]
    return check


def count(key: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (numbers.Real, str)):
        raise TypeError(f"{key} must be a positive integer such as 1000 or 1e5; got {v!r} ({type(v).__name__})")
    if isinstance(v, float) and (not math.isfinite(v) or v != int(v)):
        raise ValueError(f"{key} must be a positive integer such as 1000 or 1e5; got {v!r}")
    return parse_count(key, v if not isinstance(v, float) else int(v))


def count0(key: str, v: Any) -> int:
    if not isinstance(v, bool) and isinstance(v, (numbers.Integral, float)) and v == 0:
        return 0
    return count(key, v)


def burn_in(key: str, v: Any) -> int | float:
    """A simulate point's burn-in, in the unit of its horizon: a whole number as :func:`count0` (an
    int, so that the points of earlier versions keep their hashes), or a time > 0 that is no whole
    number (``simulate --burn-in-time 2.5``; with ``steps`` the point refuses it).

    >>> burn_in("burn_in", 1000), burn_in("burn_in", "1e3"), burn_in("burn_in", 2.5), burn_in("burn_in", "2.5")
    (1000, 1000, 2.5, 2.5)
    """
    try:
        return count0(key, v)
    except (TypeError, ValueError):
        x = None
        if isinstance(v, (float, str)) and not isinstance(v, bool):
            try:
                x = float(Decimal(v.strip())) if isinstance(v, str) else float(v)
            except (InvalidOperation, ValueError):
                x = None
        if x is None or not math.isfinite(x) or x <= 0:
            raise
        return x


def load(key: str, v: Any) -> str | float:
    if isinstance(v, bool) or not isinstance(v, (numbers.Real, str)):
        raise TypeError(
            f'{key} must be a number in (0, 1) (a float or a string such as "0.999"); got {v!r} ({type(v).__name__})'
        )
    check_load(v if not isinstance(v, str) else v.strip(), name=key)
    return v.strip() if isinstance(v, str) else float(v)


def load_any(key: str, v: Any) -> str | float:
    """A simulate point's load: any λ > 0 (``simulate --load``: λ >= 1 runs a finite horizon)."""
    if isinstance(v, bool) or not isinstance(v, (numbers.Real, str)):
        raise TypeError(
            f'{key} must be a number > 0 (a float or a string such as "1.2"); got {v!r} ({type(v).__name__})'
        )
    check_load(v if not isinstance(v, str) else v.strip(), require_stable=False, name=key)
    return v.strip() if isinstance(v, str) else float(v)


def real(
    key: str, v: Any, *, positive: bool = False, minimum: float | None = None, maximum: float | None = None
) -> float:
    if isinstance(v, bool) or not isinstance(v, (numbers.Real, str)):
        raise TypeError(f"{key} must be a number; got {v!r} ({type(v).__name__})")
    try:
        x = float(Decimal(v.strip())) if isinstance(v, str) else float(v)
    except (InvalidOperation, ValueError):
        raise TypeError(f"{key} must be a number; got {v!r}") from None
    if (
        not math.isfinite(x)
        or (positive and x <= 0)
        or (minimum is not None and x < minimum)
        or (maximum is not None and x > maximum)
    ):
        rng = "a positive finite number" if positive else "a finite number"
        if minimum is not None or maximum is not None:
            rng += f" in [{minimum if minimum is not None else '-inf'}, {maximum if maximum is not None else 'inf'}]"
        raise ValueError(f"{key} must be {rng}; got {v!r}")
    return x


def bounded(*, positive: bool = False, minimum: float | None = None, maximum: float | None = None) -> Checker:
    """A checker of a real number in a range (see :func:`real`)."""
    return lambda key, v: real(key, v, positive=positive, minimum=minimum, maximum=maximum)


positive = bounded(positive=True)
nonneg = bounded(minimum=0.0)


def boolean(key: str, v: object) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"{key} must be true or false; got {v!r} ({type(v).__name__})")
    return v


def start(key: str, v: object) -> str:
    from ..system.states import parse_start

    if not isinstance(v, str):
        raise TypeError(f'{key} must be a start such as "empty", "good", "customers:3" or "long:20"; got {v!r}')
    parse_start(v)
    return v.strip()


def text(key: str, v: object) -> str:
    if not isinstance(v, str):
        raise TypeError(f"{key} must be a string; got {v!r} ({type(v).__name__})")
    return v


def seed(key: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{key} must be an integer >= 0; got {v!r} ({type(v).__name__})")
    if v < 0:
        raise ValueError(f"{key} must be an integer >= 0; got {v}")
    return int(v)


def precision(key: str, v: Any) -> float:
    """A relative half-width in (0, 1), as ``simulate(precision=)`` takes it."""
    x = real(key, v, positive=True)
    if not x < 1:
        raise ValueError(f"{key} must lie in (0, 1) (a relative half-width such as 1e-3); got {v!r}")
    return x


def target(key: str, v: object) -> str:
    """The quantities of a precision run, canonical and comma-separated (``"p99"`` is
    ``"sojourn-p99"``), checked by the library's own parser (same message)."""
    from ..simulation.precision import parse_target

    if not isinstance(v, (str, list)):
        raise TypeError(f'{key} must be a string such as "mean-queue-length,p99" or a list of names; got {v!r}')
    return ",".join(parse_target(v))


def cdf_points(key: str, v: Any) -> int:
    """Points of the response-time CDFs (``simulate --cdf N``): an integer in 2..``MAX_CDF_POINTS``."""
    from ..checks import check_int
    from ..model import MAX_CDF_POINTS

    return check_int(key, count(key, v), minimum=2, maximum=MAX_CDF_POINTS)
