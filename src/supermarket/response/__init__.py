"""Response times in equilibrium: sojourn and waiting time of a customer (docs/model.md §10).

With FIFO service every response-time law is an Erlang mixture determined by the tails
``T_i = P(J >= i) = E[P_i]`` of the length ``J`` a customer joins; docs/model.md §10 gives
the closed forms of the survival functions and means (derived) and the delta-method
standard errors of the quantiles, which are found by root finding on those sums.

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
