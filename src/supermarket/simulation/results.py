"""The records of :func:`~supermarket.simulation.simulate`: :class:`SimulationResult`, of
:class:`Estimate` and :class:`Trajectory` (:mod:`.result_parts`, importable from here); the
numbers are made in :mod:`.estimate`, the text and the figure in :mod:`.render`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import theory as _th
from ..jsonable import to_jsonable
from ..model import Params, check_int
from ..system import policies as _pol
from . import references as _ref
from . import render as _render
from . import shape as _shape
from .result_parts import Estimate, Trajectory

__all__ = ["Estimate", "SimulationResult", "Trajectory"]


#: The keys of ``SimulationResult.to_dict`` after the shared block (:meth:`SimulationResult.shared`),
#: in order (attributes of the result).
_JSON_KEYS = tuple(
    """
    time_mode ud_mean ud_stderr max_queue_dist max_queue_dist_stderr good_set_fraction
    good_set_fraction_stderr k eps mean_sojourn_time mean_sojourn_time_stderr partial final_counts
    reliable u_reliable u_half_width u_n_eff u_note good_set_fraction_reliable error_method
    self_checks start_up notes precision control_variates controls control_notes
    """.split()  # noqa: SIM905 (a literal list, formatted, is one key a line)
)
#: The keys of its ``plain`` entry (attributes ``<key>_plain``), before ``sojourn`` and ``waiting``.
_PLAIN_KEYS = tuple(
    """
    u_mean u_stderr u_reliable ud_mean ud_stderr mean_queue_length mean_queue_length_stderr
    mean_queue_length_reliable mean_sojourn_time mean_sojourn_time_stderr good_set_fraction
    good_set_fraction_stderr good_set_fraction_reliable max_queue_dist
    """.split()  # noqa: SIM905 (a literal list, formatted, is one key a line)
)


def _jsonable(x):
    """Arrays as lists, dict keys as strings, tuples as lists (of plain dicts)."""
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, dict):
        return {str(k): v for k, v in x.items()}
    if isinstance(x, tuple):
        return [dict(c) if isinstance(c, dict) else c for c in x]
    return x


def _view(name: str, attr: str, doc: str) -> property:
    """A read-only attribute of :class:`SimulationResult`: ``attr`` of the estimate(s) in
    field ``name`` (an array per level, a dict per maximum, a number, or None)."""

    def get(self):
        x = getattr(self, name)
        if x is None:
            return None
        if isinstance(x, Estimate):
            return getattr(x, attr)
        if isinstance(x, dict):
            return {m: getattr(e, attr) for m, e in x.items()}
        if attr == "note":
            return tuple(e.note for e in x)
        return np.array([getattr(e, attr) for e in x], dtype=bool if "reliable" in attr else float)

    return property(get, doc=doc)


def _response_ratios(cv_law, plain_law):
    """Variance reduction of a response-time law's mean and quantiles: (plain s.e. / CV s.e.)²,
    NaN where either error is unknown."""

    def r(a, b):
        return (
            (b / a) ** 2
            if a is not None and b is not None and a > 0 and math.isfinite(a) and math.isfinite(b)
            else math.nan
        )

    if cv_law.stderr is None or plain_law.stderr is None:
        return None
    out = {"mean": r(cv_law.stderr["mean"], plain_law.stderr["mean"])}
    for q in cv_law.stderr["quantiles"]:
        out[f"{q:g}"] = r(cv_law.stderr["quantiles"][q], plain_law.stderr["quantiles"].get(q))
    return out


@dataclass(frozen=True)
class SimulationResult:
    """What :func:`simulate` measured (frozen; built by :func:`simulate`, not by hand).

    Each quantity is an :class:`Estimate`; the flat names (``u_mean``, ``u_stderr``,
    ``mean_queue_length_reliable``, ``u_mean_plain``, …) and the keys of :meth:`to_dict` are
    read-only views of them.  :meth:`to_dict` starts with :meth:`shared`, the keys and shapes
    every simulate result shares (:mod:`supermarket.simulation.shape`).  Every standard error is
    NaN where its ``reliable`` flag is False, with the reason in ``u_note`` or ``notes``
    (docs/model.md §9).

    Parameters
    ----------
    params : supermarket.model.Params
        n, d, λ and the sampling (with or without replacement).
    engine, time_mode : str
        The engine and clock that ran.
    steps, burn_in : int
        Events measured after burn-in, and of burn-in, all replications together.
    sim_time : float
        Measured time (continuous-time units), all replications together.
    levels, tails : tuple of Estimate
        ``E[u_i]`` and the time average of ``P_i``, levels 1 to one past the highest occupied.
    queue_length : Estimate
        ``Σ E[u_i]``; :attr:`sojourn_time` is it divided by λ (Little).
    good_set : Estimate or None
        Fraction of time in ``N^ε`` (docs/model.md §5); None when λ >= 1 or d = 1.
    max_queue : dict of int to Estimate
        Maximum queue length -> fraction of time.
    k : int or None
        ``k_{λ,d}`` (None when λ >= 1 or d = 1).
    eps : float
        ε of the good set.
    events_per_second, wall_time : float
        Speed of the kernels (per core) and wall time of the call.
    partial : bool
        True after Ctrl-C: what was measured until then.
    replications, batches : int
        Replications and batch means (all replications together).
    final_counts, final_lengths : numpy.ndarray or None
        ``c_1, c_2, …`` and (per-queue engines) the queue lengths at the end of replication 0.
    trajectory : Trajectory or None
        With ``record_every``.
    per_replication : tuple of SimulationResult
        Each replication's own result (when there are several).
    error_method : str
        ``"blocking"``, ``"pooled"`` (blocking over replications) or ``"replications"``.
    self_checks, start_up : tuple of dict
        The exact identities checked on the data; per replication, the MSER-5 truncation.
    notes : tuple of str
        The warnings of the run, in words.
    precision : dict or None
        With ``precision=``: target (the relative half-width), targets (the names), met,
        cap_hit, rounds, achieved (the worst relative half-width), quantities (per target:
        value, half_width, relative, note), expected_events and expected_after_events (the
        need stated once every target had an error bar), events (used), max_events, exact
        (the quantities known exactly, with their self-check; :mod:`.precision`).
    response, response_plain : supermarket.response.ResponseTimes or None
        Sojourn and waiting time laws (docs/model.md §10), from the estimates in use and from
        the plain ones; None when λ >= 1.
    start_note : str
        What the start means for the measurement (``start="perfect"``), else "".
    control_variates, controls, control_notes : bool, tuple of int, tuple of str
        Whether control variates were asked for (docs/model.md §9.1), the levels ``i`` of the
        controls ``Z_i = u_i − λ P_{i−1}`` used, and in words which quantities kept their plain
        estimate and why.

    Examples
    --------
    >>> from supermarket.simulation import simulate
    >>> r = simulate(50, 2, 0.5, steps=20_000, seed=1, start="fixed-point")
    >>> r.steps, r.replications, r.partial
    (20000, 1, False)
    >>> bool(abs(r.u_mean[0] - 0.5) < 5 * r.u_stderr[0])  # E[u_1] = λ exactly
    True
    >>> bool(abs(r.sojourn.mean - r.mean_sojourn_time) < 5 * r.mean_sojourn_time_stderr)  # Little
    True
    >>> r.reliable, sorted(r.sojourn.quantiles), bool(0 < r.waiting.atom_at_zero < 1)
    (True, [0.5, 0.9, 0.99, 0.999], True)
    >>> [round(float(x), 12) for x in r.fixed_point()[:3]]  # π(i) = λ^(2^i − 1)
    [0.5, 0.125, 0.0078125]
    >>> d = r.to_dict(cdf_points=4)
    >>> len(d["cdf"]["t"]), d["sojourn"]["mean"]["mean"] == r.response.sojourn.mean, float(r.cdf_grid(3)[0])
    (4, True, 0.0)
    >>> f = r.to_frame()
    >>> list(f["level"][:2]), bool(f["u_mean"].iloc[0] == r.u_mean[0])
    ([1, 2], True)
    >>> "E[u_i]" in r.summary() and "waiting" in r.summary()
    True
    >>> import matplotlib.pyplot as plt; fig = r.plot(); len(fig.axes)
    3
    >>> plt.close(fig)
    """

    params: Params
    engine: str
    time_mode: str
    steps: int
    burn_in: int
    sim_time: float
    levels: tuple[Estimate, ...]
    tails: tuple[Estimate, ...]
    queue_length: Estimate
    good_set: Estimate | None
    max_queue: dict[int, Estimate]
    k: int | None
    eps: float
    events_per_second: float
    wall_time: float
    partial: bool
    replications: int
    batches: int
    final_counts: np.ndarray
    trajectory: Trajectory | None = None
    per_replication: tuple = field(default=(), repr=False)
    final_lengths: np.ndarray | None = field(default=None, repr=False)
    error_method: str = ""
    self_checks: tuple = ()
    start_up: tuple = ()
    notes: tuple = ()
    precision: dict | None = None
    response: Any = field(default=None, repr=False)
    response_plain: Any = field(default=None, repr=False)
    start_note: str = ""
    policy: str = "jsq-d"
    control_variates: bool = False
    controls: tuple = ()
    control_notes: tuple = ()

    u_mean = _view("levels", "value", "E[u_i] per level (array).")
    u_stderr = _view("levels", "stderr", "Standard error of E[u_i] (NaN where not reliable).")
    u_reliable = _view("levels", "reliable", "Whether each level's error bar is reliable.")
    u_half_width = _view("levels", "half_width", "95 % half-width of E[u_i] (Student t).")
    u_n_eff = _view("levels", "n_eff", "Effective number of independent batches per level.")
    u_note = _view("levels", "note", "Per level: why the error bar is not reliable.")
    u_mean_plain = _view("levels", "plain", "The plain E[u_i] (no control variates).")
    u_stderr_plain = _view("levels", "plain_stderr", "Standard error of the plain E[u_i].")
    u_reliable_plain = _view("levels", "plain_reliable", "Whether the plain error bars are reliable.")
    ud_mean = _view("tails", "value", "Time average of P_i per level.")
    ud_stderr = _view("tails", "stderr", "Standard error of the time average of P_i.")
    ud_mean_plain = _view("tails", "plain", "The plain time average of P_i.")
    ud_stderr_plain = _view("tails", "plain_stderr", "Standard error of the plain time average of P_i.")
    mean_queue_length = _view("queue_length", "value", "Mean queue length Σ E[u_i].")
    mean_queue_length_stderr = _view("queue_length", "stderr", "Its standard error.")
    mean_queue_length_reliable = _view("queue_length", "reliable", "Whether its error bar is reliable.")
    mean_queue_length_half_width = _view("queue_length", "half_width", "Its 95 % half-width.")
    mean_queue_length_n_eff = _view("queue_length", "n_eff", "Its effective number of batches.")
    mean_queue_length_plain = _view("queue_length", "plain", "The plain mean queue length.")
    mean_queue_length_stderr_plain = _view("queue_length", "plain_stderr", "Its standard error.")
    mean_queue_length_reliable_plain = _view("queue_length", "plain_reliable", "Whether that error is reliable.")
    mean_sojourn_time = _view("sojourn_time", "value", "Mean sojourn time (Little).")
    mean_sojourn_time_stderr = _view("sojourn_time", "stderr", "Its standard error.")
    mean_sojourn_time_plain = _view("sojourn_time", "plain", "The plain mean sojourn time.")
    mean_sojourn_time_stderr_plain = _view("sojourn_time", "plain_stderr", "Its standard error.")
    good_set_fraction = _view("good_set", "value", "Fraction of time in the good set (None: no good set).")
    good_set_fraction_stderr = _view("good_set", "stderr", "Its standard error.")
    good_set_fraction_reliable = _view("good_set", "reliable", "Whether its error bar is reliable.")
    good_set_fraction_plain = _view("good_set", "plain", "The plain fraction of time in the good set.")
    good_set_fraction_stderr_plain = _view("good_set", "plain_stderr", "Its standard error.")
    good_set_fraction_reliable_plain = _view("good_set", "plain_reliable", "Whether that error is reliable.")
    max_queue_dist = _view("max_queue", "value", "Maximum queue length -> fraction of time.")
    max_queue_dist_stderr = _view("max_queue", "stderr", "Maximum queue length -> standard error.")
    max_queue_dist_plain = _view("max_queue", "plain", "Maximum queue length -> plain fraction of time.")

    @property
    def sojourn_time(self) -> Estimate:
        """The mean sojourn time, by Little's law the mean queue length divided by λ."""
        q, lam = self.queue_length, self.params.lam
        return Estimate(
            q.value / lam,
            q.stderr / lam,
            plain=q.plain / lam,
            plain_stderr=q.plain_stderr / lam,
            variance_reduction=q.variance_reduction,
        )

    @property
    def variance_reduction(self) -> dict | None:
        """``(plain s.e. / control-variate s.e.)²`` per quantity: ``"u_mean"``, ``"ud_mean"``
        (lists per level), ``"mean_queue_length"``, ``"mean_sojourn_time"``,
        ``"good_set_fraction"``, ``"max_queue_dist"``, ``"sojourn"`` and ``"waiting"``; NaN
        where the plain estimate is used; None with ``control_variates=False``."""
        if not self.control_variates:
            return None
        vr = {
            "u_mean": [e.variance_reduction for e in self.levels],
            "ud_mean": [e.variance_reduction for e in self.tails],
            "mean_queue_length": self.queue_length.variance_reduction,
            "mean_sojourn_time": self.queue_length.variance_reduction,
            "good_set_fraction": None if self.good_set is None else self.good_set.variance_reduction,
            "max_queue_dist": {m: e.variance_reduction for m, e in self.max_queue.items()},
        }
        if self.response is not None:
            vr["sojourn"] = _response_ratios(self.response.sojourn, self.response_plain.sojourn)
            vr["waiting"] = _response_ratios(self.response.waiting, self.response_plain.waiting)
        return vr

    @property
    def sojourn(self) -> Any:
        """Sojourn-time law (``response.TimeLaw``: mean, quantiles, standard errors), or None
        when λ >= 1 (no equilibrium)."""
        return None if self.response is None else self.response.sojourn

    @property
    def waiting(self) -> Any:
        """Waiting-time law (``response.TimeLaw``), or None when λ >= 1."""
        return None if self.response is None else self.response.waiting

    @property
    def reliable(self) -> bool:
        """Whether every error bar that matters (levels seen often enough, the mean queue
        length) is reliable and every self-check passed or was inconclusive."""
        lv = [i for i, x in enumerate(self.u_note) if not x.startswith("rare level")]
        return bool(self.mean_queue_length_reliable and all(self.u_reliable[i] for i in lv))

    # ------------------------------------------------------------------ output
    def fixed_point(self) -> np.ndarray | None:
        """Mean-field π(i) on the levels of ``u_mean`` (None when λ >= 1).

        Returns
        -------
        numpy.ndarray or None
            ``π(i) = λ^((d^i − 1)/(d − 1))`` (docs/model.md §3; ``λ^i`` when d = 1),
            ``i = 1..len(u_mean)``; for another dispatch rule its fluid fixed point
            (:func:`supermarket.system.policies.fluid_fixed_point`: ``λ^i`` for ``random``,
            ``(λ, 0, 0, …)`` for ``jsq`` and ``jiq``).
        """
        if self.params.lam >= 1:
            return None
        if self.policy != "jsq-d":
            return _pol.fluid_fixed_point(self.policy, self.params.lam, len(self.u_mean), d=self.params.d)
        return _th.fixed_point(self.params.d, self.params.lam, len(self.u_mean))

    def identity(self) -> dict:
        """``λ·E[P_{i−1}]`` per level from the plain estimates, with its own error: the check beside
        ``E[u_i]`` (:func:`.references.identity_estimates`)."""
        return _ref.identity_estimates(self)

    def refined_mean_field(self) -> _ref.RefinedProfile:
        """The refined mean field ``π + V/n`` on the run's levels, or why there is none
        (:func:`.references.refined_profile`, docs/model.md §3)."""
        return _ref.refined_profile(self)

    def to_dict(self, *, per_replication: bool = True, cdf_points: int | None = None) -> dict:
        """Everything, JSON-safe (lists, numbers, strings, None).

        Parameters
        ----------
        per_replication : bool, default True
            Include ``per_replication`` (each replication's own result) when there are several.
        cdf_points : int, optional
            Add ``cdf``: ``{"t", "sojourn", "waiting"}``, the two CDFs on :meth:`cdf_grid` (which
            raises ValueError).

        Returns
        -------
        dict
            :meth:`shared` (the keys every simulate result starts with: ``system``, ``events``,
            ``mean_queue_length`` as an estimate dict, ``sojourn`` and ``waiting`` with their
            quantiles inside, None when λ >= 1, …), then the fields of the result, with
            ``reliable``, ``fixed_point``, ``start_note``, ``identity`` (:meth:`identity`) and
            ``refined_mean_field`` (:meth:`refined_mean_field`).

        """
        out: dict[str, Any] = self.shared()
        out.update((key, _jsonable(getattr(self, key))) for key in _JSON_KEYS)
        out["plain"] = {key: _jsonable(getattr(self, f"{key}_plain")) for key in _PLAIN_KEYS}
        for law in ("sojourn", "waiting"):
            out["plain"][law] = None if self.response_plain is None else getattr(self.response_plain, law).to_dict()
        fp = self.fixed_point()
        out["fixed_point"] = None if fp is None else fp.tolist()
        out["start_note"] = self.start_note
        out["identity"] = self.identity()
        out["refined_mean_field"] = self.refined_mean_field().to_dict()
        if cdf_points is not None:
            out["cdf"] = self._cdf(cdf_points)
        if self.trajectory is not None:
            out["trajectory"] = self.trajectory.to_dict()
        if per_replication and self.per_replication:
            out["per_replication"] = [r.to_dict(per_replication=False) for r in self.per_replication]
        return out

    def shared(self) -> dict:
        """The keys every simulate result shares, in the one shape of :mod:`.shape` (the start of
        :meth:`to_dict`): ``engine``, ``system``, the horizon (``events`` measured, ``time``
        measured, ``burn_in`` in events, all replications together), ``u_mean``,
        ``mean_queue_length`` as an estimate dict, ``sojourn`` and ``waiting`` with their
        quantiles inside (None when λ >= 1), ``variance_reduction`` (``{}`` with the controls off).

        Returns
        -------
        dict
        """
        p, r = self.params, self.response
        return _shape.shared_block(
            engine=self.engine,
            time_mode=self.time_mode,
            system=_shape.system_block(p.n, p.d, p.lam, self.policy, p.replace, None, None),
            horizon=dict(
                events=self.steps,
                time=self.sim_time,
                burn_in=self.burn_in,
                wall_s=self.wall_time,
                events_per_second=self.events_per_second,
                replications=self.replications,
                batches=self.batches,
            ),
            u_mean=self.u_mean,
            u_stderr=self.u_stderr,
            mean_queue_length=_shape.estimate_dict(self.queue_length),
            sojourn=None if r is None else _shape.law_block(r.sojourn),
            waiting=None if r is None else _shape.law_block(r.waiting),
            variance_reduction=to_jsonable(self.variance_reduction, null_nonfinite=True),  # NaN: null
            variance_reduction_note="" if self.control_variates else "control variates off (plain time averages)",
        )

    # ------------------------------------------------------------------ response-time CDF
    def cdf_grid(self, points: int) -> np.ndarray:
        """``points`` equally spaced times from 0 to 1.1 × the largest sojourn quantile: the grid
        of :meth:`summary` and :meth:`to_dict` with ``cdf_points``.

        Parameters
        ----------
        points : int
            Number of grid points, >= 2 (ValueError otherwise, or when λ >= 1).

        Returns
        -------
        numpy.ndarray
            The times, in mean service times.
        """
        from ..model import MAX_CDF_POINTS

        points = check_int("cdf_points", points, minimum=2, maximum=MAX_CDF_POINTS)
        if self.response is None:
            raise ValueError("no response-time CDF: load >= 1 has no equilibrium (cdf_points needs load < 1)")
        top = max(self.response.sojourn.quantiles.values()) if self.response.sojourn.quantiles else 10.0
        return np.linspace(0.0, 1.1 * top, points)

    def _cdf(self, points):
        g = self.cdf_grid(points)
        return self.response.to_dict(cdf_grid=g)["cdf"]

    # ------------------------------------------------------------------ tidy table and text
    def to_frame(self) -> Any:
        """Tidy table: one row per level ``i`` of the profile.

        Returns
        -------
        pandas.DataFrame
            Columns ``level``, ``u_mean``, ``u_stderr``, ``u_half_width`` (95 %),
            ``u_n_eff``, ``u_reliable``, ``u_note``, ``u_mean_plain`` and ``u_stderr_plain``
            (without control variates), ``variance_reduction`` (``(plain s.e./s.e.)²``, NaN
            where not used), ``ud_mean`` and ``ud_stderr`` (time average of ``P_i``),
            ``identity`` (``λ·E[P_{i−1}]`` of the plain estimates, equal to ``E[u_i]`` in
            equilibrium, derived), ``fixed_point`` (mean-field π(i), NaN when λ >= 1),
            ``linearised`` (``1 − q̃_i``, derived, NaN beyond ``k + 1``), the run's
            ``n``, ``d``, ``load``, ``replace``, ``engine``, ``time_mode``, then
            ``identity_stderr`` (the identity's own standard error) and ``refined``
            (``π(i) + V_i/n``, NaN where there is none: :meth:`refined_mean_field`).
        """
        import pandas as pd

        p = self.params
        L = len(self.u_mean)
        fp = self.fixed_point()
        lin = self._linearised(L)
        nan = np.full(L, np.nan)
        prev = np.concatenate(([1.0], self.ud_mean_plain[:-1]))  # the identity is a check: plain
        return pd.DataFrame(
            {
                "level": np.arange(1, L + 1),
                "u_mean": self.u_mean,
                "u_stderr": self.u_stderr,
                "u_half_width": self.u_half_width,
                "u_n_eff": self.u_n_eff,
                "u_reliable": self.u_reliable,
                "u_note": list(self.u_note),
                "u_mean_plain": self.u_mean_plain,
                "u_stderr_plain": self.u_stderr_plain,
                "variance_reduction": (
                    np.array([e.variance_reduction for e in self.levels], dtype=float) if self.control_variates else nan
                ),
                "ud_mean": self.ud_mean,
                "ud_stderr": self.ud_stderr,
                "identity": p.lam * prev,
                "fixed_point": fp if fp is not None else nan,
                "linearised": lin,
                "n": p.n,
                "d": p.d,
                "load": p.lam,
                "replace": p.replace,
                "engine": self.engine,
                "time_mode": self.time_mode,
                "identity_stderr": _ref.identity_estimates(self)["stderr"],
                "refined": nan if (rp := self.refined_mean_field()).u is None else rp.u,
            }
        )

    def _linearised(self, L):
        """``1 − q̃_i`` (derived) for ``i = 1..k``, 0 at ``k + 1``, NaN elsewhere."""
        out = np.full(L, np.nan)
        if self.k is None or not _th.linearisation_valid(self.params.d, self.params.lam_exact, self.k):
            return out  # outside its regime (q̃_k > 1) the linearised profile predicts nothing
        q = _th.linearised_q(self.params.d, self.params.lam_exact, self.k)
        m = min(self.k, L)
        out[:m] = 1.0 - np.asarray(q, float)[:m]
        if self.k < L:
            out[self.k] = 0.0
        return out

    def summary(self, *, cdf_points: int | None = None) -> str:
        """The text ``supermarket simulate`` prints (plain text, no markup).

        Parameters
        ----------
        cdf_points : int, optional
            Also tabulate the sojourn and waiting CDFs on :meth:`cdf_grid` (which raises ValueError).

        Returns
        -------
        str
            The run, the profile against π(i), the linearised profile and the identity, the
            maximum against ``k_{λ,d}``, the good set, the mean queue length, the response
            times, the error analysis, the self-checks, the precision target and the speed.
        """
        return _render.summary_text(self, cdf_points)

    def plot(self, path: str | os.PathLike | None = None) -> Any:
        """Simulated profile with error bars against π and the linearised prediction
        (derived); maximum-queue distribution against ``k_{λ,d}``; and, when there are
        response times (λ < 1), the sojourn and waiting survival ``P(S > t)``, ``P(W > t)``
        with the sojourn quantiles ± 2 s.e.

        Parameters
        ----------
        path : str or path-like, optional
            Save the figure there (any format matplotlib knows, by the suffix).

        Returns
        -------
        matplotlib.figure.Figure
        """
        return _render.plot(self, path)
