"""Parameters of the (n, d, λ)-supermarket process and their validation (docs/model.md §1).

Every public function of the package validates its input through this module (the
number checkers themselves live in :mod:`supermarket._checks` and are re-exported here), so
that a bad value always produces the same clear message: the parameter's name, what was
given, and the valid range.  Library errors are ``TypeError`` (wrong kind of value) or
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
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, SupportsFloat, cast

import numpy as np

from ._checks import (
    INT64_MAX,
    _as_real,
    _describe,
    _int_text,
    _shown,
    check_choice,
    check_fraction,
    check_int,
    check_positive_float,
    check_positive_int,
    check_real,
    check_vector,
    parse_count,
)

__all__ = [
    "Params",
    "check_int",
    "check_positive_int",
    "check_load",
    "check_positive_float",
    "check_real",
    "check_fraction",
    "check_vector",
    "check_choice",
    "exact_load",
    "load_candidates",
    "as_seed_sequence",
    "spawn_seeds",
    "SeedLike",
    "parse_count",
    "INT64_MAX",
    "MAX_N",
    "MAX_THEORY_N",
    "MAX_LOAD",
    "MAX_REPLICATIONS",
]

SeedLike = int | np.random.SeedSequence | np.random.Generator | None
"""What a ``seed=`` parameter accepts (:func:`as_seed_sequence`)."""

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
#: Most points of a tabulated response-time CDF (``--cdf N``, ``cdf_points``): 10^5 rows is
#: already far past any figure or table; more would only allocate (10^12 points: 7 TiB).
MAX_CDF_POINTS = 10**5
"""Largest number of child seeds :func:`spawn_seeds` makes at once (a list of SeedSequences)."""


# --------------------------------------------------------------------------- load λ
def check_load(lam: object, *, require_stable: bool = True, name: str = "load", exact: bool = False) -> float:
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
        λ as a double (with ``exact=True`` possibly 1.0: keep the exact value yourself).

    Raises
    ------
    TypeError
        ``lam`` is neither a real number nor a string holding one.
    ValueError
        ``lam`` is outside the range above (the message gives the range).

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
            raise ValueError(f"{name} (λ) must be in (0, 1) for an equilibrium to exist; got {shown}")
        if x >= 1.0 and not exact:
            raise ValueError(
                f"{name} (λ) must be in (0, 1) for an equilibrium to exist, and below 1 in double precision "
                f"(at most 1 − 2^-53 = 0.99999999999999989); got {shown}, which rounds to 1"
            )
    elif x > MAX_LOAD:
        raise ValueError(
            f"{name} (λ) must be in (0, {MAX_LOAD:g}] (a finite horizon at a higher load is all arrivals); got {shown}"
        )
    return x


def exact_load(lam: object) -> Fraction:
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
    return Fraction(Decimal(repr(float(cast(SupportsFloat, lam)))))  # a real number by now (or float() raises)


def load_candidates(lam: object) -> tuple[Fraction, ...]:
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
    if isinstance(lam, (float, np.floating)):
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
    # None (the default) means "from lam": __post_init__ always sets a Fraction
    lam_exact: Fraction = field(default=None, compare=False, repr=False)  # type: ignore[assignment]

    if TYPE_CHECKING:  # the load may be given exactly (a string or Fraction); it is stored as a float

        def __init__(
            self,
            n: int,
            d: int,
            lam: float | str | Fraction,
            replace: bool = True,
            stable: bool = True,
            lam_exact: Fraction | None = None,
        ) -> None: ...

    def __post_init__(self) -> None:
        n = check_positive_int("n", self.n)
        if n > MAX_N:
            raise ValueError(
                f"n must be an integer in [1, 2^53 = {MAX_N}] for the simulation engines (they "
                f"compute c_i/n in double precision, exact up to 2^53); got {_int_text(n)}"
            )
        d = check_positive_int("d", self.d)
        if not isinstance(self.replace, (bool, np.bool_)):
            raise TypeError(f"replace must be True or False; got {_describe(self.replace)}")
        lam_in = self.lam
        lam = check_load(lam_in, require_stable=self.stable)
        if not self.replace and d > n:
            raise ValueError(f"d must be <= n when sampling without replacement (replace=False); got d={d}, n={n}")
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "d", d)
        object.__setattr__(self, "lam", lam)
        object.__setattr__(self, "replace", bool(self.replace))
        if self.lam_exact is None:
            object.__setattr__(self, "lam_exact", exact_load(lam_in))

    def to_dict(self) -> dict:
        return {"n": self.n, "d": self.d, "load": self.lam, "replace": self.replace}


# --------------------------------------------------------------------------- seeds
def as_seed_sequence(seed: SeedLike) -> np.random.SeedSequence:
    """Turn ``seed`` (None, int >= 0, SeedSequence or Generator) into a SeedSequence.

    Parameters
    ----------
    seed : None, int >= 0, numpy.random.SeedSequence or numpy.random.Generator
        ``None`` draws fresh entropy from the operating system.  A ``Generator`` is used as
        NumPy uses one: it is consumed, 128 bits drawn from it are the entropy of the
        returned SeedSequence, so the generator advances and two calls with the same
        generator give different streams (a generator in the same state gives the same
        one).  An int or a SeedSequence gives the same stream every time.

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
    >>> g = np.random.default_rng(7)
    >>> as_seed_sequence(g).entropy == as_seed_sequence(g).entropy  # the generator advanced
    False
    """
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence(seed.integers(0, 2**64, size=2, dtype=np.uint64).tolist())
    if seed is None:
        return np.random.SeedSequence()
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an integer >= 0, a SeedSequence or a Generator; got {_describe(seed)}")
    if seed < 0:
        raise ValueError(f"seed must be an integer >= 0; got {seed}")
    return np.random.SeedSequence(int(seed))


def spawn_seeds(seed: SeedLike, count: int) -> list[np.random.SeedSequence]:
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
    return [
        np.random.SeedSequence(root.entropy, spawn_key=tuple(root.spawn_key) + (r,), pool_size=root.pool_size)
        for r in range(count)
    ]


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
