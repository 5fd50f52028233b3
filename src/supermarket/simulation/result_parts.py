"""The parts of a :class:`~supermarket.simulation.results.SimulationResult`: :class:`Estimate`,
one reported quantity with its error and its plain time average, and :class:`Trajectory`, the
recorded states of replication 0 (``simulate(..., record_every=...)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Estimate", "Trajectory"]


@dataclass(frozen=True)
class Trajectory:
    """A recorded trajectory of replication 0 (``simulate(..., record_every=...)``).

    Also readable as a mapping (``traj["u"]``, ``traj.keys()``); ``len(traj)`` is the number
    of records.

    Parameters
    ----------
    t : numpy.ndarray
        Record times: steps in discrete time, time units in continuous time, counted from
        the end of burn-in.
    u : numpy.ndarray
        Records × levels: ``u_1, u_2, …, u_m`` (``m = record_levels``).
    max : numpy.ndarray
        Maximum queue length at each record.
    total : numpy.ndarray
        Customers in the system at each record.
    u_class : numpy.ndarray or None
        Records × classes × levels: ``u_{k,1..m}``, the shares of each class's servers (the
        count engines and the event engine with server classes; None otherwise).

    Examples
    --------
    >>> from supermarket.simulation import simulate
    >>> r = simulate(100, 2, 0.9, steps=10_000, seed=1, start="fixed-point", record_every=1000)
    >>> traj = r.trajectory
    >>> len(traj), traj["u"].shape[0], [float(x) for x in traj.t[:3]]
    (10, 10, [0.0, 1000.0, 2000.0])
    >>> bool(((traj.u >= 0) & (traj.u <= 1)).all())
    True
    """

    t: np.ndarray
    u: np.ndarray
    max: np.ndarray
    total: np.ndarray
    u_class: np.ndarray | None = None

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self.keys():
            raise KeyError(key)
        return getattr(self, key)

    def keys(self) -> tuple[str, ...]:
        return ("t", "u", "max", "total") + (() if self.u_class is None else ("u_class",))

    def __len__(self) -> int:
        return len(self.t)

    def to_frame(self) -> Any:
        """Tidy table: one row per record and level (``t``, ``level``, ``u``), with the
        record's ``max`` and ``total`` repeated on each of its rows.

        Returns
        -------
        pandas.DataFrame
        """
        import pandas as pd

        u = np.asarray(self.u, dtype=float).reshape(len(self.t), -1)
        R, L = u.shape
        return pd.DataFrame(
            {
                "t": np.repeat(np.asarray(self.t, dtype=float), L),
                "level": np.tile(np.arange(1, L + 1), R),
                "u": u.ravel(),
                "max": np.repeat(np.asarray(self.max), L),
                "total": np.repeat(np.asarray(self.total), L),
            }
        )

    def summary(self) -> str:
        """One line: how many records, over which span, the range of the maximum."""
        if len(self.t) == 0:
            return "trajectory: no records"
        return (
            f"trajectory: {len(self.t)} records from t = {float(self.t[0]):.6g} to {float(self.t[-1]):.6g}; "
            f"maximum queue length {int(np.min(self.max))}–{int(np.max(self.max))}; "
            f"customers {int(np.min(self.total))}–{int(np.max(self.total))}"
        )

    def to_dict(self) -> dict:
        """The four arrays as lists (JSON-safe).

        Returns
        -------
        dict
            Keys ``t``, ``u``, ``max``, ``total`` (and ``u_class`` with server classes).
        """
        return {key: getattr(self, key).tolist() for key in self.keys()}


@dataclass(frozen=True)
class Estimate:
    """One reported quantity: the estimate in use, its error, and the plain time average.

    Parameters
    ----------
    value : float
        The estimate (control-variate adjusted where that reduces the error).
    stderr, half_width : float
        Standard error and 95 % half-width (Student t); NaN where not ``reliable``.
    reliable : bool
        Whether the error bar can be trusted (docs/model.md §9).
    n_eff : float
        Effective number of independent batches.
    note : str
        Why the error bar is not reliable ("" when it is).
    plain, plain_stderr, plain_reliable : float, float, bool
        The plain time average (no control variates) and its error.
    variance_reduction : float
        ``(plain s.e. / s.e.)²``; NaN where the plain estimate is used or either error is
        not reliable.
    dof : float
        Degrees of freedom of the Student t behind ``half_width``.
    method : str
        How the error was made (``"blocking"``, ``"replications"``, …: :class:`~supermarket.stats.ErrorEstimate`).

    Examples
    --------
    >>> from supermarket.simulation import simulate
    >>> r = simulate(50, 2, 0.5, steps=20_000, seed=1, start="fixed-point")
    >>> e = r.levels[0]  # E[u_1]
    >>> bool(e.value == r.u_mean[0] and e.stderr == r.u_stderr[0] and e.plain == r.u_mean_plain[0])
    True
    """

    value: float
    stderr: float = math.nan
    half_width: float = math.nan
    reliable: bool = False
    n_eff: float = math.nan
    note: str = ""
    plain: float = math.nan
    plain_stderr: float = math.nan
    plain_reliable: bool = False
    variance_reduction: float = math.nan
    dof: float = math.nan
    method: str = ""
