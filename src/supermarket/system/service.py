"""Service-time laws with mean 1 (docs/model.md §14): one registry entry per family.

A **service law** is the law of a customer's work requirement ``S``, always with mean
``E[S] = 1`` so that the load ``λ`` keeps its meaning (an arrival rate of ``nλ`` against a
capacity of ``n``).  The laws, by the strings the command line takes (:func:`parse_service`):

============== ============================================== ================ =========
string          law                                            SCV              phase-type
============== ============================================== ================ =========
``exp``         exponential(1) (the papers' model; default)    1                yes, 1 phase
``erlang:K``    Erlang, K phases of rate K                     1/K              yes, K phases
``hyperexp:C``  two-phase hyperexponential, balanced means     C (> 1)          yes, 2 phases
``ph:FILE``     phase-type ``(α, T)`` read from a JSON file    from (α, T)      yes
``lognormal:C`` lognormal, ``σ² = log(1+C)``, ``μ = −σ²/2``    C (> 0)          no
``pareto:A``    Pareto, shape A > 1, scale ``(A−1)/A``         ``1/(A(A−2))``   no
                                                               (∞ when A ≤ 2)
``determ…``     ``S = 1``                                      0                no
============== ============================================== ================ =========

The balanced-means H2 with squared coefficient of variation ``C`` starts in phase 1 with
probability ``p = (1 + √((C−1)/(C+1)))/2`` and in phase 2 with ``1 − p``, with rates
``2p`` and ``2(1−p)`` (each phase carries half the mean) [classical].  ``ph:FILE.json``
holds ``{"alpha": [...], "T": [[...], ...]}``; its mean ``α(−T)^{-1}1`` must be 1 (to
rescale a law of mean ``m``, multiply ``T`` by ``m``), which :func:`phase_type` checks.

Each :class:`ServiceLaw` carries what the engines need to sample it in compiled code: an
integer ``code`` and a float vector ``params`` (and, for ``ph``, a table), see
:func:`supermarket.engines.events.sample_service`.  :func:`fit_phase_type` gives the
classical two-moment phase-type fit of a mean and an SCV (a mixture of two Erlangs of
adjacent orders below SCV 1, exponential at 1, balanced-means H2 above; Tijms, *A First
Course in Stochastic Models*, 2003, §2.3).

Server classes (:func:`parse_server_classes`, ``FRACTION:SPEED,…``) are in :mod:`.classes`
(re-exported here).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from .classes import CLASSES_FORM, MAX_SPEED_RATIO, ServerClasses, parse_server_classes

__all__ = [
    "ServiceLaw",
    "ServerClasses",
    "parse_service",
    "parse_server_classes",
    "phase_type",
    "fit_phase_type",
    "SERVICE_FORMS",
    "Family",
    "FAMILIES",
    "CLASSES_FORM",
    "MAX_SPEED_RATIO",
    "EXP",
    "ERLANG",
    "HYPEREXP",
    "PH",
    "LOGNORMAL",
    "PARETO",
    "DETERMINISTIC",
]

# codes of the laws in compiled code (engines/events.py: sample_service)
EXP, ERLANG, HYPEREXP, PH, LOGNORMAL, PARETO, DETERMINISTIC = range(7)

#: Largest SCV accepted for hyperexp and lognormal.  The balanced-means hyperexponential
#: has a slow rate of about 1/SCV computed as 2(1 − p) with p → 1: beyond 1e6 the
#: subtraction loses most of its digits (and underflows to 0 near 1e16), so the law would
#: not be the one asked for.
MAX_SCV = 1e6
#: Largest Pareto shape accepted: beyond it the law is a point mass to within 1e-6.
MAX_PARETO_ALPHA = 1e6


_MEAN_TOL = 1e-9


def _frozen(a) -> np.ndarray:
    a = np.array(a, dtype=np.float64)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class ServiceLaw:
    """A service-time law with mean 1.

    Attributes
    ----------
    name : str
        ``"exp"``, ``"erlang"``, ``"hyperexp"``, ``"ph"``, ``"lognormal"``, ``"pareto"`` or
        ``"deterministic"``.
    spec : str
        The string it was parsed from (canonical form, e.g. ``"erlang:4"``).
    scv : float
        Squared coefficient of variation ``Var S/(E S)²`` (``inf`` for Pareto with α <= 2).
    code : int
        The law's code in compiled code (:data:`EXP` … :data:`DETERMINISTIC`).
    params : numpy.ndarray
        Its float parameters for sampling (see :func:`supermarket.engines.events.sample_service`).
    alpha, T : numpy.ndarray or None
        The phase-type representation ``(α, T)`` where one exists, else None.
    note : str
        What to know about the law (e.g. an infinite variance).

    Examples
    --------
    >>> law = parse_service("hyperexp:4")
    >>> law.mean, law.scv, law.alpha.shape, law.T.shape
    (1.0, 4.0, (2,), (2, 2))
    """

    name: str
    spec: str
    scv: float
    code: int
    params: np.ndarray
    alpha: np.ndarray | None = None
    T: np.ndarray | None = None
    note: str = ""
    mean: float = field(default=1.0)

    @property
    def is_exponential(self) -> bool:
        """Whether the law is exponential(1) (the papers' model, run by the count engines)."""
        return self.name == "exp"

    @property
    def second_moment(self) -> float:
        """``E[S²] = 1 + SCV`` (mean 1)."""
        return 1.0 + self.scv

    def ph_table(self) -> np.ndarray:
        """The phase-type law as the sampling table of compiled code: row 0 holds the
        cumulative initial law ``α``; row ``i`` (phase ``i`` = 1..m) holds the rate ``−T_ii``
        in column 0 and, in columns 1..m, the cumulative probabilities of jumping to phases
        1..m (the rest of the unit interval is absorption).  A 1 x 1 dummy for other laws."""
        if self.name != "ph":
            return np.zeros((1, 1))
        assert self.alpha is not None and self.T is not None
        return _ph_table(self.alpha, self.T)

    def sample(self, size: int, seed: int | np.random.SeedSequence = 0) -> np.ndarray:
        """``size`` independent samples with NumPy's generator (written from the definition
        of each law, independently of the compiled sampler, for tests and examples)."""
        rng = np.random.default_rng(seed)
        p = self.params
        if self.name == "exp":
            return rng.exponential(1.0, size)
        if self.name == "erlang":
            return rng.gamma(int(p[0]), 1.0 / p[0], size)
        if self.name == "hyperexp":
            first = rng.random(size) < p[0]
            return np.where(first, rng.exponential(1.0 / p[1], size), rng.exponential(1.0 / p[2], size))
        if self.name == "lognormal":
            return rng.lognormal(p[0], p[1], size)
        if self.name == "pareto":
            return p[1] * (1.0 + rng.pareto(p[0], size))  # numpy's is Lomax: shift by 1
        if self.name == "deterministic":
            return np.ones(size)
        # phase type: absorption time of the chain
        assert self.alpha is not None and self.T is not None
        m = self.alpha.size
        rates = -np.diag(self.T)
        jump = np.hstack([self.T / rates[:, None] + np.eye(m), (-self.T.sum(axis=1) / rates)[:, None]])
        out = np.empty(size)
        for i in range(size):
            ph, t = rng.choice(m, p=self.alpha), 0.0
            while ph < m:
                t += rng.exponential(1.0 / rates[ph])
                ph = rng.choice(m + 1, p=np.clip(jump[ph], 0.0, None))
            out[i] = t
        return out

    def to_dict(self) -> dict:
        """JSON-safe description: name, spec, mean, SCV (``"inf"`` when infinite), phases."""
        out = {
            "name": self.name,
            "spec": self.spec,
            "mean": self.mean,
            "scv": self.scv if math.isfinite(self.scv) else "inf",
            "phases": None if self.alpha is None else int(self.alpha.size),
        }
        if self.note:
            out["note"] = self.note
        return out

    def __repr__(self) -> str:
        return f"ServiceLaw({self.spec!r}, scv={self.scv:g})"


def _ph_moments(alpha: np.ndarray, T: np.ndarray) -> tuple[float, float]:
    """``E[S] = α(−T)^{-1}1`` and ``E[S²] = 2α(−T)^{-2}1`` [classical]."""
    one = np.ones(T.shape[0])
    x = np.linalg.solve(-T, one)
    m1 = float(alpha @ x)
    m2 = 2.0 * float(alpha @ np.linalg.solve(-T, x))
    return m1, m2


def _ph_table(alpha: np.ndarray, T: np.ndarray) -> np.ndarray:
    m = alpha.size
    tab = np.zeros((m + 1, m + 1))
    tab[0, :m] = np.cumsum(alpha)
    tab[0, m - 1] = max(tab[0, m - 1], 1.0)  # rounding: the initial law has no atom at 0
    for i in range(m):
        rate = -T[i, i]
        probs = np.where(np.arange(m) == i, 0.0, T[i] / rate)
        tab[i + 1, 0] = rate
        tab[i + 1, 1:] = np.cumsum(probs)
    return tab


def phase_type(alpha: ArrayLike, T: ArrayLike, *, spec: str = "ph") -> ServiceLaw:
    """A phase-type law ``PH(α, T)`` with mean 1, validated.

    Parameters
    ----------
    alpha : array_like, shape (m,)
        Initial law over the transient phases (non-negative, summing to 1: no atom at 0).
    T : array_like, shape (m, m)
        Sub-generator: negative diagonal, non-negative off-diagonal, row sums <= 0,
        every phase eventually absorbed.

    Raises
    ------
    ValueError
        Naming ``alpha`` or ``T`` and what is wrong; in particular a mean other than 1
        (multiply ``T`` by the mean ``m`` to rescale a law of mean ``m`` to mean 1).

    Examples
    --------
    >>> law = phase_type([1.0, 0.0], [[-2.0, 2.0], [0.0, -2.0]])   # Erlang-2
    >>> round(law.scv, 12)
    0.5
    >>> phase_type([1.0], [[-2.0]])
    Traceback (most recent call last):
    ...
    ValueError: service: the phase-type law has mean 0.5, not 1; multiply T by 0.5 to rescale it to mean 1
    """
    try:
        a = np.asarray(alpha, dtype=np.float64)
        t = np.asarray(T, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"service: alpha and T must be numbers (a vector and a square matrix): {exc}") from None
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"service: alpha must be a non-empty vector, got shape {a.shape}")
    m = a.size
    if t.shape != (m, m):
        raise ValueError(f"service: T must be a {m} x {m} matrix to match alpha, got shape {t.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(t))):
        raise ValueError("service: alpha and T must be finite")
    if np.any(a < 0) or abs(a.sum() - 1.0) > 1e-9:
        raise ValueError(f"service: alpha must be non-negative and sum to 1 (no atom at 0), got sum {a.sum():.12g}")
    off = t - np.diag(np.diag(t))
    if np.any(np.diag(t) >= 0) or np.any(off < 0):
        raise ValueError("service: T must have a negative diagonal and a non-negative off-diagonal")
    if np.any(t.sum(axis=1) > 1e-12 * np.abs(np.diag(t))):
        raise ValueError("service: the rows of T must sum to <= 0 (the exit rates -T·1 are non-negative)")
    try:
        m1, m2 = _ph_moments(a, t)
    except np.linalg.LinAlgError:
        m1 = m2 = math.inf
    if not (math.isfinite(m1) and m1 > 0 and math.isfinite(m2)):
        raise ValueError("service: T is not a sub-generator whose phases are all absorbed (-T is singular)")
    if abs(m1 - 1.0) > _MEAN_TOL:
        raise ValueError(
            f"service: the phase-type law has mean {m1:.12g}, not 1; multiply T by {m1:.12g} to rescale it to mean 1"
        )
    return ServiceLaw("ph", spec, m2 - 1.0, PH, np.zeros(1), _frozen(a), _frozen(t))


def _erlang(k: int) -> ServiceLaw:
    T = np.diag(np.full(k, -float(k))) + np.diag(np.full(k - 1, float(k)), 1)
    alpha = np.zeros(k)
    alpha[0] = 1.0
    return ServiceLaw("erlang", f"erlang:{k}", 1.0 / k, ERLANG, _frozen([float(k)]), _frozen(alpha), _frozen(T))


def _hyperexp(c2: float) -> ServiceLaw:
    p = (1.0 + math.sqrt((c2 - 1.0) / (c2 + 1.0))) / 2.0
    r1, r2 = 2.0 * p, 2.0 * (1.0 - p)
    return ServiceLaw(
        "hyperexp",
        f"hyperexp:{c2:g}",
        c2,
        HYPEREXP,
        _frozen([p, r1, r2]),
        _frozen([p, 1.0 - p]),
        _frozen(np.diag([-r1, -r2])),
    )


def _lognormal(c2: float) -> ServiceLaw:
    s2 = math.log1p(c2)
    return ServiceLaw("lognormal", f"lognormal:{c2:g}", c2, LOGNORMAL, _frozen([-s2 / 2.0, math.sqrt(s2)]))


def _pareto(a: float) -> ServiceLaw:
    c2 = 1.0 / (a * (a - 2.0)) if a > 2.0 else math.inf
    note = (
        ""
        if a > 2.0
        else (
            f"pareto:{a:g} has infinite variance (alpha <= 2): mean waiting and queue "
            "lengths are infinite in equilibrium, and time averages do not settle"
        )
    )
    return ServiceLaw("pareto", f"pareto:{a:g}", c2, PARETO, _frozen([a, (a - 1.0) / a]), note=note)


@dataclass(frozen=True)
class Family:
    """One family of service laws (docs/model.md §14): everything the package knows of it, in
    one entry of :data:`FAMILIES`.

    Attributes
    ----------
    name : str
        Its name (``ServiceLaw.name``; the string before ``:``).
    code : int
        The compiled sampler's code (:func:`supermarket.engines.events.sample_service`).
    form : str
        Its string form (``erlang:K``), for help texts and messages.
    need : str
        The parameter's valid range in words (empty: no parameter), as the messages say it.
    accepts : callable or None
        Whether a parameter value is in range (None: no numeric parameter).
    build : callable
        The law of a parameter value in range (of nothing, without a parameter).
    phase_type : bool
        Whether the law has an exact phase-type form ``(α, T)`` (count engines, exact solvers, mean field).
    tail : str
        Its tail ``P(S > t)`` in words.
    text : str
        What it is, in one line.
    bounds : str
        The range in symbols, for the list of forms (:data:`SERVICE_FORMS`).
    aliases : tuple of str
        Other names accepted.

    Examples
    --------
    >>> f = FAMILIES["erlang"]
    >>> f.form, f.phase_type, f.accepts(4.0), f.accepts(0.5)
    ('erlang:K', True, True, False)
    """

    name: str
    code: int
    form: str
    need: str
    accepts: Callable[[float], bool] | None
    build: Callable[..., ServiceLaw]
    phase_type: bool
    tail: str
    text: str
    bounds: str = ""
    aliases: tuple[str, ...] = ()


def _exp() -> ServiceLaw:
    return ServiceLaw("exp", "exp", 1.0, EXP, _frozen([1.0]), _frozen([1.0]), _frozen([[-1.0]]))


def _deterministic() -> ServiceLaw:
    return ServiceLaw("deterministic", "deterministic", 0.0, DETERMINISTIC, _frozen([1.0]))


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("exp", EXP, "exp", "", None, _exp, True, "exponential, e^−t", "exponential(1), the papers' model",
               aliases=("exponential", "m")),
        Family("erlang", ERLANG, "erlang:K", "an integer K in 1..10^6", lambda v: v == int(v) and 1 <= v <= 10**6,
               lambda v: _erlang(int(v)), True, "exponential (rate K)", "Erlang, K phases of rate K: SCV 1/K",
               "integer K in 1..10^6"),
        Family("hyperexp", HYPEREXP, "hyperexp:SCV", f"SCV in (1, {MAX_SCV:g}]", lambda v: 1.0 < v <= MAX_SCV,
               _hyperexp, True, "exponential (the slow phase's rate)", "two-phase hyperexponential, balanced means",
               "1 < SCV <= 1e6"),
        Family("ph", PH, "ph:FILE.json", "", None, lambda path, raw: _read_ph(path, raw), True,
               "exponential (the slowest phase)", "phase type (α, T) from a JSON file, mean 1"),
        Family("lognormal", LOGNORMAL, "lognormal:SCV", f"SCV in (0, {MAX_SCV:g}]", lambda v: 0.0 < v <= MAX_SCV,
               _lognormal, False, "subexponential, e^−(log t)²/(2σ²)", "lognormal with σ² = log(1 + SCV)",
               "0 < SCV <= 1e6"),
        Family("pareto", PARETO, "pareto:ALPHA", f"ALPHA in (1, {MAX_PARETO_ALPHA:g}] (> 1 for a finite mean)",
               lambda v: 1.0 < v <= MAX_PARETO_ALPHA, _pareto, False, "power law, t^−ALPHA",
               "Pareto, shape ALPHA, scale (ALPHA−1)/ALPHA", "1 < ALPHA <= 1e6"),
        Family("deterministic", DETERMINISTIC, "deterministic", "", None, _deterministic, False, "none: S = 1",
               "S = 1", aliases=("det", "d")),
    )
}  # fmt: skip
"""The service-law families, by name, in the order of their codes: every form, range, message and
help text of a law is read from here."""

_BY_NAME = {alias: f for f in FAMILIES.values() for alias in (f.name, *f.aliases)}


SERVICE_FORMS = ", ".join(f.form + (f" ({f.bounds})" if f.bounds else "") for f in FAMILIES.values())
"""The valid forms of a service string, as the error messages list them (from :data:`FAMILIES`)."""


def _bad(text, why: str = "") -> ValueError:
    extra = f" ({why})" if why else ""
    return ValueError(f"service must be one of {SERVICE_FORMS}; got {text!r}{extra}")


def _number(text: str, raw: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise _bad(raw, f"{text!r} is not a number") from None
    if not math.isfinite(v):
        raise _bad(raw, "the parameter must be finite")
    return v


def parse_service(text: str | ServiceLaw) -> ServiceLaw:
    """The service law of a string (see the module's table); a :class:`ServiceLaw` passes through.

    Raises
    ------
    ValueError
        Naming ``service``, the valid forms and what is wrong.

    Examples
    --------
    >>> parse_service("erlang:4").scv
    0.25
    >>> round(float(parse_service("lognormal:4").params[1]) ** 2, 9)   # σ² = log(1 + SCV) = log 5
    1.609437912
    >>> parse_service("pareto:1.5").scv
    inf
    >>> parse_service("hyperexp:0.5")
    Traceback (most recent call last):
    ...
    ValueError: service must be one of exp, ...; got 'hyperexp:0.5' (hyperexp needs SCV in (1, 1e+06], got 0.5)
    """
    if isinstance(text, ServiceLaw):
        return text
    if not isinstance(text, str):
        raise TypeError(f"service must be a string ({SERVICE_FORMS}) or a ServiceLaw, got {type(text).__name__}")
    raw = text
    s = text.strip()
    name, sep, arg = s.partition(":")
    name = name.strip().lower()
    arg = arg.strip()
    fam = _BY_NAME.get(name)
    if fam is None:
        raise _bad(raw)
    if fam.name == "ph":
        if not arg:
            raise _bad(raw, "ph needs a JSON file: ph:FILE.json")
        return fam.build(arg, raw)
    if fam.accepts is None:
        if sep:
            raise _bad(raw, f"{fam.name} takes no parameter")
        return fam.build()
    if not arg:
        raise _bad(raw, f"{fam.name} needs a parameter")
    v = _number(arg, raw)
    if not fam.accepts(v):
        raise _bad(raw, f"{fam.name} needs {fam.need}, got {arg}")
    return fam.build(v)


def _read_ph(path: str, raw: str) -> ServiceLaw:
    if not os.path.isfile(path):
        raise _bad(raw, f"no such file: {path}")
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, json.JSONDecodeError) as exc:
        raise _bad(raw, f"cannot read {path} as JSON: {exc}") from None
    if not isinstance(data, dict) or "alpha" not in data or "T" not in data:
        raise _bad(raw, f'{path} must hold an object {{"alpha": [...], "T": [[...], ...]}}')
    return phase_type(data["alpha"], data["T"], spec=f"ph:{path}")


def fit_phase_type(scv: float, mean: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The classical two-moment phase-type fit ``(α, T)`` of a mean and an SCV [classical].

    SCV < 1: with ``K = ⌈1/SCV⌉``, Erlang ``K−1`` with probability ``p`` and Erlang ``K``
    with ``1 − p``, common rate ``μ = (K − p)/mean``, ``p = (K·SCV − √(K(1+SCV) − K²SCV))/(1+SCV)``;
    SCV = 1: exponential; SCV > 1: the balanced-means H2 above (Tijms 2003, §2.3).
    ``phase_type(*fit_phase_type(c2))`` is a :class:`ServiceLaw` with mean 1 and SCV ``c2``.

    Examples
    --------
    >>> law = phase_type(*fit_phase_type(0.3))
    >>> round(law.scv, 12), law.alpha.size
    (0.3, 4)
    >>> a, T = fit_phase_type(4.0, mean=2.5)
    >>> round(float(a @ np.linalg.solve(-T, np.ones(2))), 12)
    2.5
    """
    c2 = float(scv)
    m = float(mean)
    if not (math.isfinite(c2) and c2 > 0):
        raise ValueError(f"scv must be a finite number > 0 (a phase-type law has SCV > 0), got {scv!r}")
    if not (math.isfinite(m) and m > 0):
        raise ValueError(f"mean must be a finite number > 0, got {mean!r}")
    if c2 > 1.0:
        p = (1.0 + math.sqrt((c2 - 1.0) / (c2 + 1.0))) / 2.0
        return np.array([p, 1.0 - p]), np.diag([-2.0 * p / m, -2.0 * (1.0 - p) / m])
    if c2 == 1.0:
        return np.array([1.0]), np.array([[-1.0 / m]])
    K = math.ceil(1.0 / c2 - 1e-12)
    if K > 10**4:
        raise ValueError(f"scv must be >= 1e-4 for a fit with at most 10^4 phases, got {scv!r}")
    p = (K * c2 - math.sqrt(max(K * (1.0 + c2) - K * K * c2, 0.0))) / (1.0 + c2)
    mu = (K - p) / m
    T = np.diag(np.full(K, -mu)) + np.diag(np.full(K - 1, mu), 1)
    alpha = np.zeros(K)
    alpha[0] = 1.0 - p  # through all K phases
    if K > 1:
        alpha[1] += p  # through the last K − 1
    return alpha, T


def parse_phase_type(service: str | ServiceLaw, taker: str, others: str = "simulates") -> ServiceLaw:
    """:func:`parse_service`, refused (a ValueError naming ``service``) where the law has no
    phase-type form: ``taker`` (``"the exact solver"``) takes the phase-type laws, and the event
    engine ``others`` (runs, simulates) the others.

    Examples
    --------
    >>> parse_phase_type("erlang:2", "the mean field").spec
    'erlang:2'
    >>> parse_phase_type("lognormal:2", "the mean field")
    Traceback (most recent call last):
    ...
    ValueError: service: lognormal:2 has no phase-type form; the mean field takes exp, ... simulates the others)
    """
    law = parse_service(service)
    if law.alpha is None or law.T is None:
        raise ValueError(
            f"service: {law.spec} has no phase-type form; {taker} takes exp, erlang:K, hyperexp:SCV or "
            f"ph:FILE.json (the event engine {others} the others)"
        )
    return law
