"""Parameters of the (n, d, λ)-supermarket process and their validation (docs/model.md §1).

Every public function validates its input here (the number checkers live in
:mod:`supermarket.checks` and are re-exported): ``TypeError`` for a wrong kind of value,
``ValueError`` for one out of range, naming the parameter and the range.  The load is kept
as a float and as the exact rational written (:func:`exact_load`), for decisions on a
boundary such as ``k_{λ,d}`` when ``1/(1−λ)`` is a power of ``d``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, SupportsFloat, cast

import numpy as np

from .checks import (
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
"""Largest number of servers the closed forms accept (Theorem 1.2 of paper 000 needs n >= 1e15)."""

MAX_N = 2**53
"""Largest number of servers the engines accept: up to 2^53 every count ``c_i <= n`` and ``c_i/n`` are exact in
double precision, and ``n`` times a queue length of 1024 fits the 64-bit total of customers."""

MAX_LOAD = 1e6
"""Largest load accepted where no equilibrium is needed (beyond it the run is all arrivals)."""

MAX_REPLICATIONS = 10**6
"""Largest number of replications a command accepts (one seed and one result each)."""

MAX_SEEDS = 10**7 + 1
"""Largest number of child seeds :func:`spawn_seeds` makes at once (10^7 SeedSequences are about 1 GB)."""

MAX_CDF_POINTS = 10**5
"""Most points of a tabulated response-time CDF (``--cdf N``): more would only allocate."""


def check_load(lam: object, *, require_stable: bool = True, name: str = "load", exact: bool = False) -> float:
    """Validate the load λ (per-server arrival rate) and return it as a float.

    λ must be finite, > 0 in double precision and, with ``require_stable``, < 1 also after
    rounding to a double (``1 − 1e-20`` rounds to 1); without it, at most :data:`MAX_LOAD`.
    Strings are read exactly.

    Parameters
    ----------
    lam : real number or str
    require_stable : bool
        Require λ < 1 (anything that needs an equilibrium).
    name : str
        The parameter's name, for the message.
    exact : bool
        Accept an exact λ < 1 whose double rounds to 1 (for exact arithmetic such as ``k_{λ,d}``).

    Returns
    -------
    float
        λ as a double (with ``exact=True`` possibly 1.0).

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
    """The load as the exact rational the user wrote (a float as its shortest decimal: ``0.9`` is 9/10).

    Parameters
    ----------
    lam : float, int, str, Decimal or Fraction

    Returns
    -------
    fractions.Fraction

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
    """Exact rationals the input may stand for: for a float, its shortest decimal and its binary value.

    Parameters
    ----------
    lam : float, int, str, Decimal or Fraction

    Returns
    -------
    tuple of fractions.Fraction
        One reading, or two (decimal first) for a float whose readings differ.

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


@dataclass(frozen=True)
class Params:
    """Validated parameters of the (n, d, λ)-supermarket process (docs/model.md §1).

    ``n >= 1`` servers (at most 2^53), ``d >= 1`` choices (``<= n`` without replacement), load
    ``lam`` (< 1 when ``stable``); ``replace``: sample with replacement (paper 000) or without
    (paper 002).

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
        for key, value in (("n", n), ("d", d), ("lam", lam), ("replace", bool(self.replace))):
            object.__setattr__(self, key, value)
        if self.lam_exact is None:
            object.__setattr__(self, "lam_exact", exact_load(lam_in))

    def to_dict(self) -> dict:
        return {"n": self.n, "d": self.d, "load": self.lam, "replace": self.replace}


def as_seed_sequence(seed: SeedLike) -> np.random.SeedSequence:
    """Turn ``seed`` into a SeedSequence.

    Parameters
    ----------
    seed : None, int >= 0, numpy.random.SeedSequence or numpy.random.Generator
        ``None``: fresh entropy.  A ``Generator`` is consumed (128 bits drawn), so two calls with
        it give different streams; an int or SeedSequence gives the same stream every time.

    Returns
    -------
    numpy.random.SeedSequence

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
    """Child ``r`` of the root seed for replication ``r``, whatever the number of children or workers.

    Parameters
    ----------
    seed : None, int >= 0, SeedSequence or Generator
        The root (:func:`as_seed_sequence`).
    count : int
        Number of children, in ``[0, MAX_SEEDS]``.

    Returns
    -------
    list of numpy.random.SeedSequence

    Examples
    --------
    >>> a, b = spawn_seeds(1, 2)
    >>> bool(spawn_seeds(1, 5)[1].generate_state(1)[0] == b.generate_state(1)[0])  # child 1 of any count
    True
    """
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

    Examples
    --------
    >>> 0 <= seed_to_uint64(as_seed_sequence(3)) < 2**63
    True
    """
    return int(ss.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))
