"""What every result of :func:`supermarket.simulate` has, whichever engine ran it:
:class:`SimulateResult`, the protocol of :class:`~supermarket.simulation.results.SimulationResult`
(the profile engines), :class:`~supermarket.simulation.phase_run.PhaseSimulationResult` (the
phase-type count engine), :class:`~supermarket.simulation.classes.ClassesResult` (the count engines
with classes) and :class:`~supermarket.simulation.general.GeneralResult` (the event engine).

The JSON of each (``to_dict()``) starts with the same keys in the same shapes
(:mod:`supermarket.simulation.shape`; ``shared()`` is that block); the protocol names the
attributes they share.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["SimulateResult"]


@runtime_checkable
class SimulateResult(Protocol):
    """The attributes the four result types of :func:`supermarket.simulate` share.

    Attributes
    ----------
    engine : str
        The engine that ran (:data:`supermarket.system.methods.ENGINES`; ``"classes"`` for both
        count engines with classes).
    policy : str
        The dispatch rule.
    replications, batches : int
        Independent replications, and batch means per replication.
    burn_in : float
        Burn-in per replication, in the unit of the engine's horizon (events on the profile
        engines, time on the others).
    control_variates : bool
        Whether control variates were asked for.
    notes : tuple of str
        What to know about the run.
    u_mean, u_stderr : numpy.ndarray
        ``E[u_i]`` per level and its standard errors (NaN where not trusted).
    events_per_second : float
        The speed of the run.

    Methods
    -------
    shared()
        The keys every simulate result's JSON starts with (:func:`supermarket.simulation.shape.shared_block`).

    Examples
    --------
    >>> import supermarket as sm
    >>> r = sm.simulate(20, 2, 0.5, service="lognormal:2", time=20.0, seed=1)
    >>> isinstance(r, SimulateResult), r.engine, r.policy
    (True, 'events', 'jsq-d')
    """

    @property
    def engine(self) -> str: ...

    @property
    def policy(self) -> str: ...

    @property
    def replications(self) -> int: ...

    @property
    def batches(self) -> int: ...

    @property
    def burn_in(self) -> float: ...

    @property
    def control_variates(self) -> bool: ...

    @property
    def notes(self) -> tuple: ...

    @property
    def u_mean(self) -> np.ndarray: ...

    @property
    def u_stderr(self) -> np.ndarray: ...

    @property
    def events_per_second(self) -> float: ...

    def to_dict(self, *, cdf_points: int | None = None) -> dict: ...

    def shared(self) -> dict: ...

    def summary(self, *, cdf_points: int | None = None) -> str: ...
