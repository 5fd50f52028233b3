"""Sizing a system: the least ``d`` (or the largest load) that meets a target (docs/model.md §11).

- :mod:`.latency`: response-time quantile targets with exponential service, by the mean field
  and checked by simulation;
- :mod:`.service`: the same for phase-type and general service laws, with the check of an
  answer by the event engine; its parts: :mod:`.sojourn` (the sojourn laws and the phase-type
  fit), :mod:`.service_search` (the searches on ``d`` and on the load) and :mod:`.rules` (the
  dispatch rules compared);
- :mod:`.rule_latency`: the same under every dispatch rule and with server classes, from the
  rule's fluid fixed point or the mean field with classes (its sojourn laws in
  :mod:`.rule_sojourn`), checked by the event engine.
"""
