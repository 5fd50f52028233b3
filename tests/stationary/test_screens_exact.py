"""Budgets and stability screens of the exact solvers (wall-clock budgets, unstable classes)."""

from __future__ import annotations

import pytest

from supermarket.stationary import profile as stationary
from supermarket.stationary import size as stationary_size
from supermarket.stationary.classes import solve_classes
from supermarket.stationary.classes_phase import solve_classes_phase
from supermarket.stationary.phase import solve_phase
from supermarket.stationary.profile import BudgetExceeded, solve

TINY = 1e-9  # seconds: spent before the first stage ends, whatever the machine


def test_solve_checks_the_clock_past_the_prediction(monkeypatch):
    # the prediction says it fits; the clock says otherwise: a budget error, not a long run
    monkeypatch.setattr(stationary, "estimate_seconds", lambda n, cap: 0.0)
    monkeypatch.setattr(stationary_size, "estimate_seconds", lambda n, cap: 0.0)
    with pytest.raises(BudgetExceeded, match=r"max_seconds = 1e-09 s .*ran out.*during"):
        solve(3, 2, 0.8, policy="random", max_seconds=TINY)


def test_solve_fixed_cap_checks_the_clock(monkeypatch):
    monkeypatch.setattr(stationary, "estimate_seconds", lambda n, cap: 0.0)
    monkeypatch.setattr(stationary_size, "estimate_seconds", lambda n, cap: 0.0)
    with pytest.raises(BudgetExceeded, match="reached: nothing solved yet"):
        solve(2, 2, 0.5, cap=10, max_seconds=TINY)


def test_classes_budget():
    with pytest.raises(BudgetExceeded, match=r"classes 0\.25:1,0\.25:2,0\.25:3,0\.25:4"):
        solve_classes(4, 2, 0.9, "0.25:1,0.25:2,0.25:3,0.25:4", max_seconds=TINY)


def test_classes_phase_budget():
    with pytest.raises(BudgetExceeded):
        solve_classes_phase(2, 1, 0.5, "0.5:2,0.5:1", "erlang:2", policy="jiq", max_seconds=TINY)


def test_phase_budget():
    with pytest.raises(BudgetExceeded):
        solve_phase(2, 2, 0.5, [1.0, 0.0], [[-2.0, 2.0], [0.0, -2.0]], cap=10, max_seconds=TINY)


def test_budget_is_a_value_error_and_progress_is_reported():
    seen: list[str] = []
    r = solve_classes(2, 1, 0.5, "0.5:2,0.5:1", policy="random", cap=10, max_seconds=600, progress=seen.append)
    assert r.states > 0 and any("building the generator" in s for s in seen)
    assert issubclass(BudgetExceeded, ValueError)


@pytest.mark.parametrize("service", [None, "erlang:2"])
def test_random_with_an_overloaded_class_is_refused(service):
    # slow class: λ s̄/s = 0.54 · 1.25/0.5 = 1.35 >= 1: no stationary law, never a finite number
    with pytest.raises(ValueError, match=r"random routing class speed 0.5 gets load .* = 1.35 >= 1"):
        if service is None:
            solve_classes(2, 1, 0.54, "0.5:2,0.5:0.5", policy="random")
        else:
            solve_classes_phase(2, 1, 0.54, "0.5:2,0.5:0.5", service, policy="random")


def test_random_with_stable_classes_still_solves():
    r = solve_classes(2, 1, 0.3, "0.5:2,0.5:0.5", policy="random", cap=80)  # slow class at 0.75
    assert r.mass_at_cap < 1e-6
    assert abs(float(r.mean_queue_length[1]) - 3.0) < 1e-6  # M/M/1 at 0.75: ρ/(1 − ρ)


def test_cli_instability_is_one_line():
    import subprocess
    import sys

    res = subprocess.run(
        [
            sys.executable,
            "-c",
            "from supermarket.cli import main; main()",
            "exact",
            "--n",
            "2",
            "--server-classes",
            "0.5:2,0.5:0.5",
            "--policy",
            "random",
            "--load",
            "0.54",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2
    assert res.stderr.startswith("supermarket: error: lam: under random routing") and "Traceback" not in res.stderr


def _many_classes(k: int) -> str:
    return ",".join(f"{1 / k:.12g}:{1 + i / k:.12g}" for i in range(k))


@pytest.mark.parametrize("policy", ["jsq-d", "random"])
def test_meanfield_with_many_classes_is_refused_before_work(policy):
    from supermarket.meanfield.classes import classes_fixed_point

    # 10^4 classes: a dense Newton solve of about 10^5 unknowns squared: refused with the size it needs
    with pytest.raises(ValueError, match=r"server_classes: 10,000 classes .* GiB .* at most [0-9,]+ classes fit"):
        classes_fixed_point(2, 0.5, _many_classes(10_000), policy=policy)


def test_dense_size_limit_is_from_memory():
    from supermarket.meanfield.classes import check_dense_size

    check_dense_size(10, 32, limit=16 * 320**2)  # exactly fits
    with pytest.raises(ValueError, match="at most 10 classes fit"):
        check_dense_size(11, 32, limit=16 * 320**2)


def test_cli_exact_prints_progress_on_a_plain_stderr(monkeypatch):
    from click.testing import CliRunner

    from supermarket.cli import _common, main

    monkeypatch.setattr(_common, "PLAIN_PROGRESS_EVERY", 0.001)  # a line at once, whatever the machine
    monkeypatch.setenv("SUPERMARKET_PROGRESS", "1")  # tests/conftest.py switches the lines off
    res = CliRunner().invoke(main, ["exact", "--n", "3", "--load", "0.7", "--cap", "30"])
    assert res.exit_code == 0, res.output
    err = getattr(res, "stderr", res.output)
    assert "exact: still working (" in err
