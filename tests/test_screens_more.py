"""The screens' remaining items: a sweep's ``--check`` refuses what the run refuses, with the
run's own words; ``design --max-seconds``; Ctrl-C on ``exact``, ``design`` and ``mixing``;
no ± on overloaded classes' self-check; overloaded rows flagged in a sweep; the one-token
mutations of the estimators, the corrections, the latency verdict and the service fit."""

from __future__ import annotations

import pytest

from supermarket import sweep as sw

_SIM = '[sweep]\nname = "s"\n\n[[run]]\nmeasurement = "simulate"\nn = 100\nd = 2\nload = 0.9\nsteps = {steps}\n'


def _run_refusal(**kw) -> str:
    from supermarket.simulation import simulate

    with pytest.raises(ValueError) as exc:
        simulate(100, 2, 0.9, replications=1, workers=1, progress=False, **kw)
    return str(exc.value)


@pytest.mark.parametrize("start", ["long:100000", "long:40000"])
def test_sweep_check_refuses_a_start_the_run_refuses_in_its_words(start):
    # --check passed `start = "long:100000"`, which the run then refused for its per-level memory
    msg = _run_refusal(steps=10_000, start=start)
    text = _SIM.format(steps=10_000) + f'start = "{start}"\n'
    with pytest.raises(sw.SweepFileError) as exc:
        sw.parse_sweep(text)
    (err,) = exc.value.errors
    assert msg in err and "per-level statistics" in msg, (msg, err)
    assert "run[1].start" in err and err.startswith("line 10:"), err  # the line of the start key


def test_sweep_check_accepts_a_start_the_run_accepts():
    text = _SIM.format(steps=10_000) + 'start = "long:1000"\n'
    assert len(sw.parse_sweep(text).tasks) == 1


def test_sweep_check_refuses_a_horizon_in_the_runs_words():
    msg = _run_refusal(steps=1e13)  # the run's cost refusal
    with pytest.raises(sw.SweepFileError) as exc:
        sw.parse_sweep(_SIM.format(steps="1e13"))
    (err,) = exc.value.errors
    assert msg in err and "run[1].steps" in err, (msg, err)
