"""Sizing a system: the least ``d`` (or the largest load) that meets a target (docs/model.md §11).

- :mod:`.latency`: response-time quantile targets with exponential service, by the mean field
  and checked by simulation;
- :mod:`.service`: the same for phase-type and general service laws.
"""
