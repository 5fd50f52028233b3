"""The modules split by concept keep every public name where it was: the old module re-exports
each name (in its namespace and its ``__all__``) as the very object of the module that now
defines it, so that ``from OLD import NAME`` and patching by the defining module agree."""

from __future__ import annotations

import importlib

import pytest

# old module -> {public name: the module that defines it now}
MOVED = {
    "supermarket.design.service": {
        "MAX_FIT_PHASES": "supermarket.design.sojourn",
        "PhaseSojourn": "supermarket.response.phase_sojourn",
        "phase_form": "supermarket.design.sojourn",
        "sojourn_law": "supermarket.design.sojourn",
        "mph1_sojourn_tail": "supermarket.design.sojourn",
        "mph1_sojourn_quantile": "supermarket.design.sojourn",
        "service_tail": "supermarket.design.sojourn",
        "LOAD_MAX": "supermarket.design.service_search",
        "ServiceDesign": "supermarket.design.service_search",
        "ServiceLoadDesign": "supermarket.design.service_search",
        "least_d_for_service_latency": "supermarket.design.service_search",
        "max_load_for_service_latency": "supermarket.design.service_search",
        "RuleComparison": "supermarket.design.rules",
        "compare_rules": "supermarket.design.rules",
        "verify_service_design": "supermarket.design.service",
    },
    "supermarket.meanfield.corrections": {
        "RefinedMeanField": "supermarket.meanfield.corrections",
        "refined_mean_field": "supermarket.meanfield.corrections",
        "sampling_first_order": "supermarket.meanfield.corrections",
        "drift_first_order": "supermarket.meanfield.corrections",
        "LNAResult": "supermarket.meanfield.linear_noise",
        "lna": "supermarket.meanfield.linear_noise",
        "AccuracyWarning": "supermarket.meanfield.lyapunov",
        "ACCURACY_TOL": "supermarket.meanfield.lyapunov",
        "MAX_LYAPUNOV_LEVELS": "supermarket.meanfield.lyapunov",
    },
    "supermarket.report.figures": {
        "Figure": "supermarket.report.render",
        "LAW_KEYS": "supermarket.report.cells",
        "law_label": "supermarket.report.cells",
        "MAX_PROFILE_PANELS": "supermarket.report.simulate_figures",
        "FLUCT_MOMENTS": "supermarket.report.figures",
        "collect_figures": "supermarket.report.figures",
    },
    "supermarket.engines.events": {
        "sample_service": "supermarket.engines.service",
        "window": "supermarket.engines.departures",
        "WINDOW_PER_BUCKET": "supermarket.engines.departures",
        "WINDOW_TIME": "supermarket.engines.departures",
        "MAX_BUCKETS": "supermarket.engines.departures",
        "JSQ_D": "supermarket.engines.tables",
        "RANDOM": "supermarket.engines.tables",
        "JSQ": "supermarket.engines.tables",
        "JIQ": "supermarket.engines.tables",
        "JBT": "supermarket.engines.tables",
        "BAD_RULE": "supermarket.engines.tables",
        "events_kernel": "supermarket.engines.events",
        "close_areas": "supermarket.engines.events",
        "grow": "supermarket.engines.events",
        "new_arrays": "supermarket.engines.events",
        "new_counters": "supermarket.engines.events",
        "pending_departures": "supermarket.engines.events",
        "DONE": "supermarket.engines.events",
        "GROW": "supermarket.engines.events",
        "FULL": "supermarket.engines.events",
        "EVENTS": "supermarket.engines.events",
        "F_NOW": "supermarket.engines.events",
        "F_NEXT": "supermarket.engines.events",
        "F_RATE": "supermarket.engines.events",
        "F_TMEAS": "supermarket.engines.events",
        "F_INVW": "supermarket.engines.events",
        "I_HSIZE": "supermarket.engines.events",
        "I_TOP": "supermarket.engines.events",
        "I_NREC": "supermarket.engines.events",
        "I_EVENTS": "supermarket.engines.events",
        "I_CUR": "supermarket.engines.events",
        "I_FREE": "supermarket.engines.events",
        "N_FL": "supermarket.engines.events",
        "N_IT": "supermarket.engines.events",
    },
}

CASES = [(old, name, home) for old, names in MOVED.items() for name, home in names.items()]


@pytest.mark.parametrize(("old", "name", "home"), CASES)
def test_public_name_stays_importable_from_the_old_module(old, name, home):
    o = importlib.import_module(old)
    h = importlib.import_module(home)
    assert getattr(o, name) is getattr(h, name)
    assert name in o.__all__
    if old != home:
        assert name in h.__all__  # the defining module lists it too
    obj = getattr(h, name)
    if callable(obj):
        assert obj.__module__ == home  # defined there, not re-exported there from elsewhere


def test_every_old_public_name_is_listed():
    # nothing of the old __all__ went missing: the lists above are the modules' whole __all__
    for old, names in MOVED.items():
        assert set(importlib.import_module(old).__all__) == set(names), old
