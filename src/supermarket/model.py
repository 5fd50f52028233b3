"""Parameters of the (n, d, λ)-supermarket process and their validation (docs/model.md §1).

Every public function of the package validates its input through this module, so that a
bad value always produces the same clear message: the parameter's name, what was given,
and the valid range.  Library errors are ``TypeError`` (wrong kind of value) or
``ValueError`` (right kind, outside the valid range); the CLI turns both into one line on
stderr and exit code 2.

The load λ is kept twice: as a float for computation and as an exact rational
(:func:`exact_load`) for the decisions that sit on a boundary, such as
``k_{λ,d} = ⌈log(1/(1−λ))/log d⌉`` when ``1/(1−λ)`` is a power of ``d``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction

import numpy as np

__all__ = [
    "Params",
    "check_int",
    "check_positive_int",
    "check_load",
    "check_positive_float",
    "check_real",
    "check_fraction",
    "check_choice",
    "exact_load",
    "load_candidates",
    "as_seed_sequence",
    "spawn_seeds",
    "parse_count",
    "INT64_MAX",
    "MAX_N",
    "MAX_THEORY_N",
    "MAX_LOAD",
    "MAX_REPLICATIONS",
]

INT64_MAX = 2**63 - 1
"""Largest integer any parameter may take: counts end up in 64-bit integers (NumPy, numba)."""

MAX_THEORY_N = 10**100
"""Largest number of servers the closed forms accept (they compute in double precision;
paper 000's Theorem 1.2 needs n >= 1e15, and n = 1e20 is a fair question)."""

MAX_N = 2**53
"""Largest number of servers the simulation engines accept (about 9.0e15).  Up to 2^53 the
integer ``n`` and every count ``c_i <= n`` are exact in double precision, on which the
engines compute the sampling probabilities ``c_i/n``; and ``n`` times a queue length of up
to 1024 still fits the 64-bit total of customers."""

MAX_LOAD = 1e6
"""Largest load accepted where no equilibrium is needed (a finite horizon with λ >= 1):
beyond it a service is rarer than one event in 10^6 and the run is all arrivals."""

MAX_REPLICATIONS = 10**6
"""Largest number of replications a command accepts (one seed and one result each)."""

MAX_SEEDS = 10**7 + 1
"""Largest number of child seeds :func:`spawn_seeds` makes at once (a list of SeedSequences)."""


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


def _describe(value) -> str:
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        return f"{_int_text(int(value))} ({type(value).__name__})"
    try:
        text = repr(value)
    except ValueError:  # e.g. a huge int inside a container
        text = f"<{type(value).__name__}>"
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def check_int(name: str, value, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as a Python ``int`` or raise a clear error.

    Accepts ``int`` and NumPy integers; rejects ``bool``, floats (even integral ones such
    as ``3.0``: write ``3`` or ``10**6``), strings and everything else with ``TypeError``.
    Values outside ``[minimum, maximum]`` raise ``ValueError``.  Unless ``maximum`` says
    otherwise (a larger explicit ``maximum``, for closed forms computed in double
    precision), the value must fit a signed 64-bit integer (``|value| <= 2^63 − 1``): counts
    end up in NumPy or numba integers, and a Python ``int`` such as ``10**400`` is not a
    number any computation here can use.

    Parameters
    ----------
    name : str
        The parameter's name, used in the message.
    value : int
        The value to check.
    minimum, maximum : int, optional
        Inclusive bounds.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        If ``value`` is not an integer (``bool`` and floats included).
    ValueError
        If it lies outside ``[minimum, maximum]`` or outside the 64-bit range.

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
        raise ValueError(f"{name} must be an integer{_range_text(minimum, hi)} (a 64-bit integer); "
                         f"got {_int_text(value)}")
    return value


def check_positive_int(name: str, value, *, maximum: int | None = None) -> int:
    """An integer ``>= 1``.

    Parameters
    ----------
    name : str
        The parameter's name, used in the message.
    value : int
    maximum : int, optional
        Inclusive upper bound (default: 2^63 − 1).

    Returns
    -------
    int

    Raises
    ------
    TypeError, ValueError
        As :func:`check_int`.

    Examples
    --------
    >>> check_positive_int("d", 3)
    3
    >>> check_positive_int("d", 2.0)
    Traceback (most recent call last):
    TypeError: d must be an integer >= 1; got 2.0 (float)
    """
    return check_int(name, value, minimum=1, maximum=maximum)


def _range_text(minimum, maximum) -> str:
    if isinstance(maximum, int) and maximum > INT64_MAX:
        maximum = _sci(maximum)
    if minimum is not None and maximum is not None:
        return f" in [{minimum}, {maximum}]"
    if minimum is not None:
        return f" >= {minimum}"
    if maximum is not None:
        return f" <= {maximum}"
    return ""


def _as_real(name: str, value) -> float:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a real number; got {_describe(value)}")
    if isinstance(value, str):
        try:
            return float(Decimal(value.strip()))
        except (InvalidOperation, ValueError):
            raise TypeError(f"{name} must be a real number; got {_describe(value)}") from None
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {_describe(value)}")
    try:
        return float(value)
    except OverflowError:  # an int or Fraction beyond the doubles (about 1.8e308)
        raise ValueError(f"{name} must be a finite real number (at most about 1.8e308 in magnitude); "
                         f"got {_describe(value)}") from None


def _shown(value) -> str:
    """A value as typed (strings and floats as ``repr``), shortened; other types via ``_describe``."""
    if isinstance(value, (str, float)):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return _describe(value)


def check_real(name: str, value) -> float:
    """Any real number (int, float, Fraction, Decimal, numeric string) as a float; rejects
    ``bool`` and non-numbers with ``TypeError``.  Range checks are the caller's.

    Parameters
    ----------
    name : str
        The parameter's name, used in the message.
    value : int, float, Fraction, Decimal or str

    Returns
    -------
    float

    Raises
    ------
    TypeError
        If ``value`` is not a real number.
    ValueError
        If it is beyond the double range.

    Examples
    --------
    >>> check_real("t", "0.25")
    0.25
    """
    return _as_real(name, value)


def check_positive_float(name: str, value, *, allow_inf: bool = False) -> float:
    """A finite real number ``> 0`` (``inf`` only when ``allow_inf``).

    Parameters
    ----------
    name : str
        The parameter's name, used in the message.
    value : real number
    allow_inf : bool, default False

    Returns
    -------
    float

    Raises
    ------
    TypeError
        If ``value`` is not a real number.
    ValueError
        If it is NaN, ``<= 0``, or infinite without ``allow_inf``.

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


def check_fraction(name: str, value, *, low: float = 0.0, high: float = 1.0,
                   low_open: bool = True, high_open: bool = False) -> float:
    """A real number in the interval between ``low`` and ``high``.

    Parameters
    ----------
    name : str
        The parameter's name, used in the message.
    value : real number
    low, high : float
        The ends of the interval.
    low_open, high_open : bool
        Whether each end is excluded (default: ``(low, high]``).

    Returns
    -------
    float

    Raises
    ------
    TypeError
        If ``value`` is not a real number.
    ValueError
        If it is NaN or outside the interval.

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
        lb = "(" if low_open else "["
        rb = ")" if high_open else "]"
        raise ValueError(f"{name} must lie in {lb}{low:g}, {high:g}{rb}; got {value!r}")
    return x


def check_choice(name: str, value, options) -> str:
    """``value`` (case and surrounding blanks ignored) if it is one of ``options``.

    Parameters
    ----------
    name : str
        The parameter's name, used in the message.
    value : str
    options : iterable of str
        The valid values, lower case.

    Returns
    -------
    str
        The canonical (stripped, lower-case) value.

    Raises
    ------
    TypeError
        ``value`` is not a string.
    ValueError
        ``value`` is none of ``options`` (the message lists them).

    Examples
    --------
    >>> check_choice("engine", " Profile", ("profile", "queues"))
    'profile'
    >>> check_choice("engine", "warp", ("profile", "queues"))
    Traceback (most recent call last):
    ...
    ValueError: engine must be one of profile, queues; got 'warp'
    """
    options = tuple(options)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {', '.join(options)}; got {value!r} ({type(value).__name__})")
    s = value.strip().lower()
    if s not in options:
        raise ValueError(f"{name} must be one of {', '.join(options)}; got {value!r}")
    return s


# --------------------------------------------------------------------------- load λ
def check_load(lam, *, require_stable: bool = True, name: str = "load", exact: bool = False) -> float:
    """Validate the load λ (per-server arrival rate) and return it as a float.

    λ must be a finite real number > 0 whose double is > 0 (``1e-400`` is refused: it is 0
    in double precision).  With ``require_stable`` (anything that needs an equilibrium)
    also λ < 1, and its double must be < 1 too: ``1 − 1e-20`` is below 1 but rounds to 1,
    where ``1/(1−λ)`` and every equilibrium quantity are infinite; the largest load that
    is accepted is ``1 − 2^-53 = 0.99999999999999989``.  Without ``require_stable`` (a
    finite horizon), λ <= :data:`MAX_LOAD`.  Strings such as ``"0.999"`` are read exactly.
    ``exact=True`` (for calculations done in exact arithmetic on the number as written, such
    as ``k_{λ,d}``) accepts an exact λ < 1 whose double rounds to 1.

    Parameters
    ----------
    lam : real number or str
        The load λ.
    require_stable : bool, default True
        Require λ < 1.
    name : str, default "load"
        The parameter's name, used in the message.
    exact : bool, default False
        Accept an exact λ < 1 whose double rounds to 1.

    Returns
    -------
    float

    Raises
    ------
    TypeError
        If ``lam`` is not a real number.
    ValueError
        If it is outside the range above.

    Examples
    --------
    >>> check_load("0.9")
    0.9
    >>> check_load(1.5, require_stable=False)
    1.5
    >>> check_load(1)
    Traceback (most recent call last):
    ValueError: load (λ) must be in (0, 1) for an equilibrium to exist; got 1 (int)
    """
    x = _as_real(name, lam)
    shown = _shown(lam)
    if math.isnan(x) or math.isinf(x) or x <= 0:
        raise ValueError(f"{name} (λ) must be a finite number > 0; got {shown}")
    if require_stable:
        if exact_load(lam) >= 1:
            raise ValueError(
                f"{name} (λ) must be in (0, 1) for an equilibrium to exist; got {shown}")
        if x >= 1.0 and not exact:
            raise ValueError(
                f"{name} (λ) must be in (0, 1) for an equilibrium to exist, and below 1 in double precision "
                f"(at most 1 − 2^-53 = 0.99999999999999989); got {shown}, which rounds to 1")
    elif x > MAX_LOAD:
        raise ValueError(f"{name} (λ) must be in (0, {MAX_LOAD:g}] (a finite horizon at a higher load is "
                         f"all arrivals); got {shown}")
    return x


def exact_load(lam) -> Fraction:
    """The load as the exact rational number the user wrote.

    A string or ``Decimal`` is read exactly (``"0.9"`` is 9/10).  A float is read as its
    shortest decimal representation (``0.9`` is 9/10 too), the number a person typed.

    Parameters
    ----------
    lam : float, int, str, Decimal or Fraction

    Returns
    -------
    fractions.Fraction

    Raises
    ------
    decimal.InvalidOperation, ValueError
        If a string is not a number (validate with :func:`check_load` first).

    Examples
    --------
    >>> exact_load(0.9), exact_load("0.999")
    (Fraction(9, 10), Fraction(999, 1000))
    """
    if isinstance(lam, Fraction):
        return lam
    if isinstance(lam, (str, Decimal)):
        return Fraction(Decimal(str(lam).strip()))
    if isinstance(lam, numbers.Integral):
        return Fraction(int(lam))
    return Fraction(Decimal(repr(float(lam))))


def load_candidates(lam) -> tuple[Fraction, ...]:
    """Exact rationals the input may stand for.

    For a float, both its shortest decimal (what a person typed, e.g. ``0.9``) and its exact
    binary value (what a program computed, e.g. ``1 - 2**-21``); both round to the same
    double, so both are legitimate readings.  Strings, Decimals and Fractions are exact.

    Parameters
    ----------
    lam : float, int, str, Decimal or Fraction

    Returns
    -------
    tuple of fractions.Fraction
        One reading, or two (decimal first) for a float whose two readings differ.

    Examples
    --------
    >>> load_candidates(0.5)
    (Fraction(1, 2),)
    >>> [str(x) for x in load_candidates(0.1)]
    ['1/10', '3602879701896397/36028797018963968']
    """
    if isinstance(lam, float) or isinstance(lam, np.floating):
        dec = exact_load(float(lam))
        binary = Fraction(float(lam))
        return (dec,) if dec == binary else (dec, binary)
    return (exact_load(lam),)


# --------------------------------------------------------------------------- parameters
@dataclass(frozen=True)
class Params:
    """Validated parameters of the (n, d, λ)-supermarket process (docs/model.md §1).

    ``n``: number of servers (>= 1).  ``d``: number of choices (>= 1; with
    ``replace=False`` also ``d <= n``).  ``lam``: load λ > 0 (< 1 when ``stable``).
    ``replace``: sample the d queues with replacement (paper 000, default) or without
    (paper 002).

    Raises
    ------
    TypeError, ValueError
        A parameter of the wrong type or outside its range (``n`` at most 2^53).

    Examples
    --------
    >>> p = Params(1000, 2, "0.9")
    >>> p.lam, p.lam_exact, p.to_dict()["replace"]
    (0.9, Fraction(9, 10), True)
    """

    n: int
    d: int
    lam: float
    replace: bool = True
    stable: bool = True
    lam_exact: Fraction = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        n = check_positive_int("n", self.n)
        if n > MAX_N:
            raise ValueError(f"n must be an integer in [1, 2^53 = {MAX_N}] for the simulation engines (they "
                             f"compute c_i/n in double precision, exact up to 2^53); got {_int_text(n)}")
        d = check_positive_int("d", self.d)
        if not isinstance(self.replace, (bool, np.bool_)):
            raise TypeError(f"replace must be True or False; got {_describe(self.replace)}")
        lam_in = self.lam
        lam = check_load(lam_in, require_stable=self.stable)
        if not self.replace and d > n:
            raise ValueError(
                f"d must be <= n when sampling without replacement (replace=False); got d={d}, n={n}")
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "d", d)
        object.__setattr__(self, "lam", lam)
        object.__setattr__(self, "replace", bool(self.replace))
        if self.lam_exact is None:
            object.__setattr__(self, "lam_exact", exact_load(lam_in))

    def to_dict(self) -> dict:
        return {"n": self.n, "d": self.d, "load": self.lam, "replace": self.replace}


# --------------------------------------------------------------------------- seeds
def as_seed_sequence(seed) -> np.random.SeedSequence:
    """Turn ``seed`` (None, int >= 0, SeedSequence or Generator) into a SeedSequence.

    Parameters
    ----------
    seed : None, int >= 0, numpy.random.SeedSequence or numpy.random.Generator
        ``None`` draws fresh entropy from the operating system.

    Returns
    -------
    numpy.random.SeedSequence

    Raises
    ------
    TypeError
        If ``seed`` is of another type.
    ValueError
        If it is a negative integer.

    Examples
    --------
    >>> as_seed_sequence(7).entropy
    7
    """
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return seed.bit_generator.seed_seq  # type: ignore[return-value]
    if seed is None:
        return np.random.SeedSequence()
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an integer >= 0, a SeedSequence or a Generator; got {_describe(seed)}")
    if seed < 0:
        raise ValueError(f"seed must be an integer >= 0; got {seed}")
    return np.random.SeedSequence(int(seed))


def spawn_seeds(seed, count: int) -> list[np.random.SeedSequence]:
    """Child ``r`` of the root seed for replication ``r`` (identical for any worker count).

    Uses ``SeedSequence(entropy, spawn_key=(r,))`` rather than ``.spawn`` so that the
    r-th child does not depend on how many children were spawned before.

    Parameters
    ----------
    seed : None, int >= 0, SeedSequence or Generator
        The root (see :func:`as_seed_sequence`).
    count : int
        Number of children, in ``[0, MAX_SEEDS]``.

    Returns
    -------
    list of numpy.random.SeedSequence

    Raises
    ------
    TypeError, ValueError
        A bad ``seed`` or ``count``.

    Examples
    --------
    >>> a, b = spawn_seeds(1, 2)
    >>> bool(spawn_seeds(1, 5)[1].generate_state(1)[0] == b.generate_state(1)[0])  # child 1 of any count
    True
    """
    # a list of 10^7 seeds is about a gigabyte; 10^400 replications would never end
    count = check_int("number of replications (seeds)", count, minimum=0, maximum=MAX_SEEDS)
    root = as_seed_sequence(seed)
    return [np.random.SeedSequence(root.entropy, spawn_key=tuple(root.spawn_key) + (r,),
                                   pool_size=root.pool_size) for r in range(count)]


def seed_to_uint64(ss: np.random.SeedSequence) -> int:
    """A 63-bit integer seed for a numba kernel, derived from a SeedSequence.

    Parameters
    ----------
    ss : numpy.random.SeedSequence

    Returns
    -------
    int
        In ``[0, 2^63)``.

    Examples
    --------
    >>> 0 <= seed_to_uint64(as_seed_sequence(3)) < 2**63
    True
    """
    return int(ss.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


# --------------------------------------------------------------------------- CLI helpers
def parse_count(name: str, text, *, maximum: int = INT64_MAX, minimum: int = 1) -> int:
    """Read a count such as ``1e7`` or ``10000000`` (CLI convenience) as an exact int.

    The value must lie in ``[minimum, maximum]`` (``maximum`` at most 2^63 − 1); the range
    is checked on the decimal before any integer is built, so ``1e400`` or
    ``1e999999999999`` is refused at once instead of becoming a huge Python ``int``.

    Parameters
    ----------
    name : str
        The parameter's name, used in the message.
    text : str or int
    maximum, minimum : int
        Inclusive bounds.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        If ``text`` is not a number.
    ValueError
        If it is not an integer or is out of range.

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
