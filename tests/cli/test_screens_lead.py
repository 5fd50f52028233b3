"""Screens fixed while merging: what the user gave is what the screen says."""

from __future__ import annotations

from click.testing import CliRunner

from supermarket.cli import main


def test_phase_exact_budget_names_the_users_budget():
    # each cap of the phase-type search gets what is left of the budget; the refusal must name the
    # user's --max-seconds, not the remainder handed to the last cap's solve
    r = CliRunner().invoke(
        main, ["exact", "--n", "2", "--d", "2", "--load", "0.9", "--service", "hyperexp:4", "--max-seconds", "0.003"]
    )
    assert r.exit_code == 2, r.output
    assert "max_seconds = 0.003 s (--max-seconds) ran out after" in r.output


def test_a_queue_above_k_all_the_time_is_said_in_words():
    import warnings

    from supermarket.simulation import simulate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # too short to know its errors: the screen says so, not the point here
        res = simulate(33000, 3300, "0.99939393939393939", steps=1_500_000, start="fixed-point", seed=1)
    assert min(res.max_queue_dist) > 1  # k = 1: a queue longer than k in every state the run saw
    text = res.summary()
    assert "a queue longer than k = 1 existed all of the time" in text
    assert "existed 1 of the time" not in text
