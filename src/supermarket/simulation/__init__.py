"""Exact simulation of the (n, d, λ)-supermarket process (docs/model.md §1, §2, §5, §7).

One call, :func:`simulate`, runs the chain with one of three engines (all exact in law)
and returns a :class:`SimulationResult`: the time-averaged profile ``E[u_i]`` with
standard errors, the time average of ``P_i`` (``u_i^d`` with replacement) for the identity
``E[u_i] = λ E[u_{i−1}^d]`` (docs/model.md §3, derived), the distribution of the maximum queue
length, the fraction of time in the good set ``N^ε`` (docs/model.md §5), the mean queue length
and sojourn time (Little), and optionally a trajectory.

Engines (``engine=``):

- ``"profile"``: the counts chain of docs/model.md §2; cost per event independent of ``n`` and
  ``d``; ``n`` up to 10^12 and beyond;
- ``"queues"``: per-queue lengths exactly as paper 000 defines the chain (d-tuple, ties to
  the first minimal entry); ``O(d)`` per arrival, 4 bytes per server (measured peak, with
  the final lengths in the result: 4.5 bytes at n = 4·10^6); the reference;
- ``"buckets"``: per-queue identities sorted by length, ``O(1)`` per event; 4 bytes per
  server while running, 8 at the end while the final lengths are built (measured peak 8.5).

Standard errors (docs/model.md §9): each replication's measured horizon is cut into
``BATCHES`` (1024) equal batches, at no cost per event; :mod:`supermarket.stats` does a
blocking analysis of the batch means with an automatic plateau, says "too short to
estimate" instead of a number when there is none, drops a start-up transient found by
MSER-5, and checks exact identities (``E[u_1] = λ``, ``E[u_i] = λ E[P_{i−1}]``).
Replication ``r`` uses ``spawn_seeds(seed, R)[r]``, so results do not depend on ``workers``,
nor on running the replications on a Dask cluster (``client=``, one task per replication).

Output (one protocol): :meth:`SimulationResult.summary` (the text ``supermarket simulate``
prints), :meth:`~SimulationResult.to_dict` (JSON-safe), :meth:`~SimulationResult.to_frame`
(tidy, one row per level), :meth:`~SimulationResult.plot`; response times (sojourn and
waiting laws with standard errors, docs/model.md §10) in ``result.response``.

Low-level drivers, for code that needs its own loop around a kernel:
:class:`Chain` (allocates the arrays of one replication and advances it with
:meth:`Chain.advance`), and the kernels ``engines.profile.profile_kernel``,
``engines.queues.queues_kernel``, ``engines.buckets.buckets_kernel``.

Where each part lives (one job per module; import from the package, not from these):

- :mod:`.run`: :func:`simulate` itself: validation of every argument before any work, the
  replications on threads or a Dask cluster, the precision loop; ``ENGINES``,
  ``TIME_MODES``, ``BATCHES``, ``DEFAULT_STEPS``, ``MAX_RECORDS``, ``PRECISION_LEVEL_MIN``;
- :mod:`.chain`: :class:`Chain` (one chain's arrays and kernel) and the batched replication
  built on it;
- :mod:`.estimate`: from batch integrals to a :class:`SimulationResult`: start-up (MSER-5),
  error bars, self-checks (``SELF_CHECK_Z``), response times;
- :mod:`.results`: the result types :class:`SimulationResult`, :class:`Estimate` (one
  reported quantity) and :class:`Trajectory`;
- :mod:`.render`: the text of ``SimulationResult.summary`` and the figure of ``plot``.
"""

from __future__ import annotations

from .chain import Chain
from .estimate import SELF_CHECK_Z
from .results import Estimate, SimulationResult, Trajectory
from .run import BATCHES, DEFAULT_STEPS, ENGINES, MAX_RECORDS, PRECISION_LEVEL_MIN, TIME_MODES, simulate

__all__ = ["simulate", "SimulationResult", "Estimate", "Trajectory", "Chain", "ENGINES", "TIME_MODES", "BATCHES",
           "DEFAULT_STEPS", "MAX_RECORDS", "PRECISION_LEVEL_MIN", "SELF_CHECK_Z"]
