"""Response times in equilibrium: sojourn and waiting time of a customer (docs/model.md §10).

With FIFO service and exponential(1) service times, a customer who joins a queue holding
``j`` customers stays an Erlang(j+1, 1) time (its own service plus the ``j`` ahead; the one in
service has an exponential residual) and waits an Erlang(j, 1) time (0 when ``j = 0``).
Arrivals are Poisson, so they see the time-stationary state (PASTA): the law of the length
``J`` a customer joins is ``P(J = j) = E[P_j − P_{j+1}]``, where ``P_i`` is the probability
that all ``d`` sampled queues hold at least ``i`` customers (``u_i^d`` with replacement,
``C(c_i, d)/C(n, d)`` without) and the expectation is over the stationary law.  So every
response-time law here is an Erlang mixture, determined by the tails ``T_i = P(J >= i) = E[P_i]``.

Writing ``N_t`` for a Poisson(t) variable (the services that complete in ``t`` time units
while the server stays busy), the mixture has the closed forms (derived, docs/model.md §10)

- sojourn ``P(S > t) = Σ_{i>=0} T_i e^{−t} t^i / i!`` (``T_0 = 1``), ``E[S] = 1 + Σ_{i>=1} T_i``;
- waiting ``P(W > t) = Σ_{i>=0} T_{i+1} e^{−t} t^i / i!``, ``P(W = 0) = 1 − T_1``,
  ``E[W] = Σ_{i>=1} T_i``;

sums of positive terms, accurate far into the tail.  Quantiles are found by root finding
(:func:`scipy.optimize.brentq`) on these survival functions; their standard errors, when the
tails ``T`` come with a covariance (from a simulation), follow by the delta method:
``∂t_q/∂T_i = e^{−t} t^i/i! / f(t_q)`` (``f`` the density), ``∂E[S]/∂T_i = 1``.

Sources of the tails:

- :func:`from_join_probabilities` / :func:`from_tails`: given numbers (with optional covariance);
- :func:`from_simulation`: the time averages of ``P_i`` a :class:`~supermarket.simulation.SimulationResult`
  measured (``ud_mean``), with standard errors from whatever per-batch or per-replication data
  the result carries;
- :func:`supermarket.meanfield.response_times`: the fixed point ``T_i = π(i)^d`` (mean
  field), or to first order in ``1/n`` (refined mean field, derived);
- :func:`supermarket.stationary.solve` (exact, small ``n``) uses :func:`from_tails`.

Where each part lives:

- :mod:`supermarket.response.mixture`: the Erlang-mixture survival functions
  (:func:`sojourn_survival`, :func:`waiting_survival`), their quantiles, and the checks of
  quantile levels (:func:`check_quantile`) and tails;
- :mod:`supermarket.response.laws`: the results :class:`TimeLaw` and :class:`ResponseTimes`
  and the builders from given numbers, :func:`from_tails` and :func:`from_join_probabilities`
  (delta-method standard errors);
- :mod:`supermarket.response.sources`: :func:`from_simulation`;
- :mod:`supermarket.response.fifo`: the FIFO simulation that follows every customer,
  :func:`simulate_fifo` (→ :class:`FifoSample`), an independent check of the laws.

This package is a low layer (CONTRIBUTING.md): it imports only :mod:`supermarket.model`
and the engines, so that :mod:`supermarket.meanfield`, :mod:`supermarket.simulation` and
:mod:`supermarket.stationary` can all build on it.  Sizing by a latency target, which
needs the mean field and runs simulations, is :mod:`supermarket.latency`.
"""

from __future__ import annotations

from .fifo import FifoSample, simulate_fifo
from .laws import ResponseTimes, TimeLaw, from_join_probabilities, from_tails
from .mixture import DEFAULT_QUANTILES, check_quantile, sojourn_survival, waiting_survival
from .sources import from_simulation

__all__ = [
    "DEFAULT_QUANTILES",
    "TimeLaw",
    "ResponseTimes",
    "from_join_probabilities",
    "from_tails",
    "from_simulation",
    "sojourn_survival",
    "waiting_survival",
    "check_quantile",
    "FifoSample",
    "simulate_fifo",
]
