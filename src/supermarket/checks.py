"""The number checkers every public function validates its input with (re-exported by :mod:`supermarket.model`).

A bad value gets the parameter's name, what was given (shortened, with its type) and the valid
range: ``TypeError`` for the wrong kind of value, ``ValueError`` for the right kind out of range.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np

__all__ = [
    "check_choice",
    "check_vector",
    "check_int",
    "check_positive_int",
    "check_real",
    "check_positive_float",
    "check_fraction",
    "parse_count",
    "refuse_unused_keywords",
    "INT64_MAX",
]

INT64_MAX = 2**63 - 1
"""Largest integer any parameter may take: counts end up in 64-bit integers (NumPy, numba)."""


def _int_text(value: int) -> str:
    """An integer as text, in scientific form when long (``repr`` of a huge int can fail)."""
    if abs(value) <= INT64_MAX:
        return str(value)
    digits = int(value.bit_length() * 0.30103)
    return f"about 10^{digits}" if value > 0 else f"about -10^{digits}"


def _sci(value: int) -> str:
    """``10**100`` as ``1e100`` (exact powers of ten only; otherwise the digits)."""
    text = str(value)
    if text.startswith("1") and set(text[1:]) == {"0"}:
        return f"1e{len(text) - 1}"
    return text


def _describe(value: object) -> str:
    """A value for a message: shortened ``repr`` and type."""
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        return f"{_int_text(int(value))} ({type(value).__name__})"
    try:
        text = repr(value)
    except ValueError:  # e.g. a huge int inside a container
        text = f"<{type(value).__name__}>"
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def check_int(name: str, value: object, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as a Python ``int`` or raise a clear error.

    ``int`` and NumPy integers only (``bool``, ``3.0``, strings: ``TypeError``); within 64 bits, where
    counts end up, unless a larger ``maximum`` is given (closed forms in double precision).

    Parameters
    ----------
    name : str
        The parameter's name, for the message.
    value : int
    minimum, maximum : int, optional
        Inclusive bounds.

    Returns
    -------
    int

    Examples
    --------
    >>> check_int("n", np.int64(5), minimum=1)
    5
    >>> check_int("n", 0, minimum=1)
    Traceback (most recent call last):
    ValueError: n must be an integer >= 1; got 0
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        rng = _range_text(minimum, maximum)
        raise TypeError(f"{name} must be an integer{rng}; got {_describe(value)}")
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be an integer{_range_text(minimum, maximum)}; got {_int_text(value)}")
    if abs(value) > INT64_MAX and (maximum is None or maximum <= INT64_MAX or value < -INT64_MAX):
        hi = INT64_MAX if maximum is None else min(maximum, INT64_MAX)
        raise ValueError(
            f"{name} must be an integer{_range_text(minimum, hi)} (a 64-bit integer); got {_int_text(value)}"
        )
    return value


def check_positive_int(name: str, value: object, *, maximum: int | None = None) -> int:
    """An integer ``>= 1`` (as :func:`check_int`).

    Parameters
    ----------
    name : str
    value : int
    maximum : int, optional

    Returns
    -------
    int

    Examples
    --------
    >>> check_positive_int("d", 3)
    3
    >>> check_positive_int("d", 2.0)
    Traceback (most recent call last):
    TypeError: d must be an integer >= 1; got 2.0 (float)
    """
    return check_int(name, value, minimum=1, maximum=maximum)


def _range_text(minimum: float | None, maximum: float | None) -> str:
    if isinstance(maximum, int) and maximum > INT64_MAX:
        maximum = _sci(maximum)
    if minimum is not None and maximum is not None:
        return f" in [{minimum}, {maximum}]"
    if minimum is not None:
        return f" >= {minimum}"
    if maximum is not None:
        return f" <= {maximum}"
    return ""


def _as_real(name: str, value: object) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, str)):
        raise TypeError(f"{name} must be a real number; got {_describe(value)}")
    if isinstance(value, str):
        try:
            return float(Decimal(value.strip()))
        except (InvalidOperation, ValueError):
            raise TypeError(f"{name} must be a real number; got {_describe(value)}") from None
    try:
        return float(value)
    except OverflowError:  # an int or Fraction beyond the doubles (about 1.8e308)
        raise ValueError(
            f"{name} must be a finite real number (at most about 1.8e308 in magnitude); got {_describe(value)}"
        ) from None


def _shown(value: object) -> str:
    """A value as typed (strings and floats as ``repr``), shortened; other types via ``_describe``."""
    if isinstance(value, (str, float)):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return _describe(value)


def check_real(name: str, value: object) -> float:
    """Any real number (int, float, Fraction, Decimal, numeric string, read exactly) as a float.

    Parameters
    ----------
    name : str
    value : int, float, Fraction, Decimal or str

    Returns
    -------
    float

    Examples
    --------
    >>> check_real("t", "0.25")
    0.25
    """
    return _as_real(name, value)


def check_positive_float(name: str, value: object, *, allow_inf: bool = False) -> float:
    """A finite real number ``> 0`` (``inf`` only when ``allow_inf``).

    Parameters
    ----------
    name : str
    value : real number
    allow_inf : bool

    Returns
    -------
    float

    Examples
    --------
    >>> check_positive_float("T", 2)
    2.0
    >>> check_positive_float("T", float("inf"))
    Traceback (most recent call last):
    ValueError: T must be a positive finite number; got inf
    """
    x = _as_real(name, value)
    if math.isnan(x) or x <= 0 or (math.isinf(x) and not allow_inf):
        what = "a positive number" if allow_inf else "a positive finite number"
        raise ValueError(f"{name} must be {what}; got {value!r}")
    return x


def check_fraction(
    name: str, value: object, *, low: float = 0.0, high: float = 1.0, low_open: bool = True, high_open: bool = False
) -> float:
    """A real number between ``low`` and ``high`` (``(low, high]`` unless told which ends are open).

    Parameters
    ----------
    name : str
    value : real number
    low, high : float
    low_open, high_open : bool

    Returns
    -------
    float

    Examples
    --------
    >>> check_fraction("eps", 0.1, high=0.1)
    0.1
    >>> check_fraction("eps", 0, high=0.1)
    Traceback (most recent call last):
    ValueError: eps must lie in (0, 0.1]; got 0
    """
    x = _as_real(name, value)
    bad = math.isnan(x) or (x <= low if low_open else x < low) or (x >= high if high_open else x > high)
    if bad:
        lb, rb = ("(" if low_open else "["), (")" if high_open else "]")
        raise ValueError(f"{name} must lie in {lb}{low:g}, {high:g}{rb}; got {value!r}")
    return x


def parse_count(name: str, text: object, *, maximum: int = INT64_MAX, minimum: int = 1) -> int:
    """Read a count such as ``1e7`` or ``10000000`` (CLI) as an exact int in ``[minimum, maximum]``.

    The range is checked on the decimal first, so ``1e400`` never becomes a huge ``int``.

    Parameters
    ----------
    name : str
    text : str or int
    maximum, minimum : int

    Returns
    -------
    int

    Examples
    --------
    >>> parse_count("--n", "1e7")
    10000000
    >>> parse_count("--n", "2.5")
    Traceback (most recent call last):
    ValueError: --n must be an integer in [1, 9223372036854775807] such as 1000 or 1e7; got '2.5'
    """
    rng = f"in [{minimum}, {maximum if maximum <= INT64_MAX else _sci(maximum)}]"
    if isinstance(text, numbers.Integral) and not isinstance(text, bool):
        return check_int(name, text, minimum=minimum, maximum=maximum)
    shown = str(text)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    try:
        value = Decimal(str(text).strip().replace("_", ""))
    except (InvalidOperation, ValueError):
        raise TypeError(f"{name} must be an integer {rng} such as 1000 or 1e7; got {shown!r}") from None
    try:
        integral = value.is_finite() and value == value.to_integral_value()
    except InvalidOperation:  # an exponent too large for the decimal context: far out of range
        integral = True
    if not integral:
        raise ValueError(f"{name} must be an integer {rng} such as 1000 or 1e7; got {shown!r}")
    if value < minimum or value > maximum:
        raise ValueError(f"{name} must be an integer {rng}; got {shown!r}")
    return int(value)


def check_vector(name: str, value: object, *, of: str = "numbers", shape: str = "") -> np.ndarray:
    """A non-empty 1-d array of floats (``TypeError`` otherwise); values are the caller's to check.

    Parameters
    ----------
    name : str
    value : array_like
    of : str
        What its entries are, for the message.
    shape : str
        A hint appended to "non-empty 1-d array" in the message.

    Returns
    -------
    numpy.ndarray of float

    Examples
    --------
    >>> check_vector("p", [1, 0.5]).tolist()
    [1.0, 0.5]
    >>> check_vector("p", [[1.0]], of="probabilities")
    Traceback (most recent call last):
    TypeError: p must be a non-empty 1-d array; got shape (1, 1)
    """
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a 1-d array of {of}; got {type(value).__name__}") from None
    if arr.ndim != 1 or arr.size == 0:
        raise TypeError(f"{name} must be a non-empty 1-d array{shape}; got shape {arr.shape}")
    return arr


def check_choice(name: str, value: object, options: Iterable[str]) -> str:
    """``value`` (case and surrounding blanks ignored) if it is one of ``options`` (lower case).

    Parameters
    ----------
    name : str
    value : str
    options : iterable of str

    Returns
    -------
    str
        The stripped, lower-case value.

    Examples
    --------
    >>> check_choice("engine", " Profile", ("profile", "queues"))
    'profile'
    >>> check_choice("engine", "warp", ("profile", "queues"))
    Traceback (most recent call last):
    ValueError: engine must be one of profile, queues; got 'warp'
    """
    options = tuple(options)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {', '.join(options)}; got {value!r} ({type(value).__name__})")
    s = value.strip().lower()
    if s not in options:
        raise ValueError(f"{name} must be one of {', '.join(options)}; got {value!r}")
    return s


def check_bool(name: str, value: object) -> bool:
    """``value`` as a ``bool``, which it must already be (``0``/``1`` and strings are refused).

    Examples
    --------
    >>> check_bool("replace", True)
    True
    >>> check_bool("replace", 1)
    Traceback (most recent call last):
    TypeError: replace must be True or False; got 1
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False; got {value!r}")
    return bool(value)


def refuse_unused_keywords(
    others: Mapping[str, Any], defaults: Mapping[str, Any], ignored: Iterable[str], why: Callable[[str], str]
) -> None:
    """The keywords of ``simulate()`` that another engine has no use for: an unknown one raises
    TypeError (as Python would); a known one given anything but ``None`` or its default (in
    ``defaults``) raises ValueError with ``why(key)``; those in ``ignored`` pass.

    Examples
    --------
    >>> refuse_unused_keywords({"eps": 0.1, "start": "empty"}, {"start": "empty"}, ("eps",), str)
    >>> refuse_unused_keywords({"start": "fixed-point"}, {"start": "empty"}, (), lambda k: f"{k}: not here")
    Traceback (most recent call last):
    ...
    ValueError: start: not here
    """
    skip = set(ignored)
    for key, value in others.items():
        if key in skip:
            continue
        if key not in defaults:
            raise TypeError(f"simulate() got an unexpected keyword argument {key!r}")
        same = isinstance(value, str | int | float) and not isinstance(value, bool) and value == defaults[key]
        if value is not None and not same:
            raise ValueError(why(key))
