"""Response times in equilibrium: sojourn and waiting time of a customer (docs/model.md §10).

With FIFO service each law is an Erlang mixture set by the tails ``T_i = P(J >= i)`` of the
length ``J`` a customer joins.  :mod:`.mixture`: the survival functions and quantiles;
:mod:`.laws`: :class:`TimeLaw`, :class:`ResponseTimes`, :func:`from_tails`,
:func:`from_join_probabilities`; :mod:`.sources`: :func:`from_simulation`; :mod:`.fifo`:
:func:`simulate_fifo`, an independent check.  A low layer (CONTRIBUTING.md): sizing by a
latency target lives in :mod:`supermarket.design.latency`.
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
