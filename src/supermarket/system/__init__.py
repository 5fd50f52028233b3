"""The system a method is asked about: the dispatch rule, the service law, the server classes and
the start state (docs/model.md §1, §12–§15).

- :mod:`.spec`: the system as one value, :class:`~.spec.System` (rule, ``d``, sampling, server
  classes, service law, load, ``n`` or the mean field), validated once;
- :mod:`.methods`: which engine, exact solver and mean field serve a system, and the one refusal
  of what an engine does not take;
- :mod:`.policies`: the dispatch rules (JSQ(d), random, JSQ, JIQ, JBT), one entry each of its
  registry ``RULES``, with what each method needs of them;
- :mod:`.service`: the service laws (exponential, phase-type, general), one entry per family of
  its registry ``FAMILIES``, parsed from their command-line spelling;
- :mod:`.classes`: the server classes (re-exported by :mod:`.service`);
- :mod:`.phase_law`: the checks of a phase-type representation ``(α, T)``;
- :mod:`.states`: the start states of a run (empty, the fixed point, a given profile, …).
"""
