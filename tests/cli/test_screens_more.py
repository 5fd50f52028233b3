"""The screens' remaining items: a sweep's ``--check`` refuses what the run refuses, with the
run's own words; ``design --max-seconds``; Ctrl-C on ``exact``, ``design`` and ``mixing``;
no ± on overloaded classes' self-check; overloaded rows flagged in a sweep; the one-token
mutations of the estimators, the corrections, the latency verdict and the service fit."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import _paths
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


# --------------------------------------------------------------------------- budgets and stops
HANG_GUARD = 240.0  # seconds: only a hung process gets near it (no timing is asserted)
SRC = str(_paths.SRC)


def _cli(args: list[str], **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SRC)
    return subprocess.run(
        [sys.executable, "-m", "supermarket", *args], capture_output=True, text=True, env=env, timeout=HANG_GUARD, **kw
    )


def _one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_design_max_seconds_stops_a_long_search_with_one_line():
    # `design --d 3 --latency 8 --service erlang:4` searches for 15-30 s; design had no budget
    r = _cli(["design", "--d", "3", "--latency", "8", "--service", "erlang:4", "--max-seconds", "0.5"])
    line = _one_line(r.stderr)
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout)
    assert line.startswith("supermarket: error: budget: max_seconds = 0.5 s (--max-seconds) ran out after"), line
    assert "(design); a larger --max-seconds" in line, line


def test_design_max_seconds_is_in_the_help_with_exacts_default():
    from click.testing import CliRunner

    from supermarket.cli import main

    out = CliRunner().invoke(main, ["design", "--help"]).output
    flat = " ".join(out.split())
    assert "--max-seconds" in flat and "every stage" in flat and "[default: 60" in flat, out
    bad = CliRunner().invoke(main, ["design", "--load", "0.9", "--latency", "4", "--max-seconds", "-1"])
    assert bad.exit_code == 2 and "--max-seconds must be a positive number of seconds" in bad.output


def test_wall_budget_is_kept_through_code_that_catches_the_interrupt():
    # a run that catches the interrupt and goes on with its partial result, then a search that
    # counts a failed step as a miss (except Exception): the block still ends with the budget
    from supermarket.cli._budget import WallBudget

    partial = False
    budget = r"budget: max_seconds = 0.05 s \(--max-seconds\) ran out .* during step"
    with pytest.raises(ValueError, match=budget), WallBudget(0.05, "test") as b:
        b.stage("step")
        try:
            time.sleep(HANG_GUARD)
        except KeyboardInterrupt:
            partial = True  # a partial result: dropped all the same
        for _ in range(int(HANG_GUARD / 0.01)):
            with contextlib.suppress(Exception):  # the library's broad handlers do not take the alarm
                time.sleep(0.01)
    assert partial and b.fired
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # disarmed


def test_wall_budget_leaves_a_finished_block_alone():
    from supermarket.cli._budget import WallBudget

    with WallBudget(HANG_GUARD, "test") as b:
        x = sum(range(10))
    assert x == 45 and not b.fired and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


@pytest.mark.slow
def test_design_max_seconds_ends_verify_threads():
    # --verify's replications run on threads that only the interrupt path stops
    args = ["design", "--load", "0.9", "--latency", "6", "--n", "1000", "--verify", "--steps", "1e9"]
    r = _cli([*args, "--workers", "2", "--max-seconds", "3"])
    line = _one_line(r.stderr)
    assert r.returncode == 2 and "budget" in line and "during --verify's simulation" in line, line


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _interrupt(args: list[str], cpu: float = 2.5) -> tuple[int, str, str]:
    """Start ``supermarket ARGS``, send SIGINT once it spent ``cpu`` CPU seconds (past the
    imports: it is working), return (rc, stdout, stderr)."""
    env = dict(os.environ, PYTHONPATH=SRC)
    p = subprocess.Popen(
        [sys.executable, "-m", "supermarket", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        deadline = time.monotonic() + HANG_GUARD / 2
        while p.poll() is None and _cpu_seconds(p.pid) < cpu and time.monotonic() < deadline:
            time.sleep(0.05)
        assert p.poll() is None, "ended before the signal"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=HANG_GUARD)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    return p.returncode, out, err


@pytest.mark.skipif(sys.platform != "linux", reason="CPU time read from /proc")
@pytest.mark.parametrize(
    "args",
    [
        ["exact", "--n", "3", "--d", "2", "--load", "0.97", "--max-seconds", "600"],
        ["design", "--d", "3", "--latency", "8", "--service", "erlang:4"],
    ],
    ids=["exact", "design"],
)
def test_ctrl_c_on_exact_and_design_is_one_line_exit_130(args):
    rc, out, err = _interrupt(args)
    assert rc == 130, (rc, out, err)
    lines = [x for x in err.splitlines() if x.strip()]
    assert lines[-1] == "supermarket: interrupted" and "Traceback" not in err, err  # after exact's cost note
    assert out == "", out


def test_mixing_compiles_its_kernel_before_the_worker_threads():
    # a cold numba cache compiled the coupling kernel inside the worker threads, and Ctrl-C waited
    # for the compilation to end (up to 10 s on a busy machine); now the calling thread loads it
    code = (
        "from supermarket import parallel\n"
        "from supermarket.engines import coupling as k\n"
        "from supermarket.mixing import coalescence\n"
        "seen = []\n"
        "real = parallel.map_tasks\n"
        "def spy(*a, **kw):\n"
        "    seen.append(len(k.run_coupled.signatures))\n"
        "    return real(*a, **kw)\n"
        "parallel.map_tasks = spy\n"
        "coalescence(20, 2, 0.5, replications=4, seed=1, workers=2)\n"
        "print(seen)\n"
    )
    env = dict(os.environ, PYTHONPATH=SRC)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=HANG_GUARD)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[1]", r.stdout


# --------------------------------------------------------------------------- overloaded classes
def _overloaded(**kw):
    from supermarket.simulation.classes import simulate_classes

    # random routing: every server gets λ s̄ = 0.75; the 0.5:0.5 class is overloaded, the 0.5:2
    # class is an M/M/1 queue of load ρ = 0.375 (independent of the other class)
    return simulate_classes(
        100, 1, 0.6, server_classes="0.5:2,0.5:0.5", policy="random", time=1000, burn_in=50, seed=3, workers=1, **kw
    )


def test_overloaded_classes_self_check_has_no_error_bar():
    r = _overloaded()
    line = next(x for x in r.summary().splitlines() if x.startswith("self-check Σ f s E[u_1]/(λ s̄)"))
    assert "±" not in line and "no error bar" in line and "holds only in equilibrium" in line, line
    b = r.to_dict()["balance"]
    assert b["stderr"] is None and b["reliable"] is False, b


def test_overloaded_classes_leave_the_stable_class_its_mm1_law():
    # capacity balance was a control variate here, though it fails without equilibrium: it pulled
    # the stable class's E[u_1] to 0.5 ± 0 (the M/M/1 value is ρ = 0.375)
    r = _overloaded()
    rho = 0.6 * 1.25 / 2.0
    fast = r.classes[0]
    assert not r.control_variates and any("no control variate" in x for x in r.notes)
    assert math.isfinite(fast.u_stderr[0]) and fast.u_stderr[0] > 0
    assert abs(fast.u_mean[0] - rho) < 4 * fast.u_stderr[0], (fast.u_mean[0], fast.u_stderr[0])
    L = fast.mean_queue_length
    assert L.reliable and abs(L.mean - rho / (1 - rho)) < 4 * L.stderr, L


def test_sweep_row_of_overloaded_classes_says_it_has_no_stationary_value():
    # the row kept status ok with null errors, indistinguishable from a run too short to trust
    from supermarket.simulation.classes import simulate_classes
    from supermarket.simulation.general.result import GROWING, INFINITE
    from supermarket.sweep.measurements import classes_row, event_row

    row = classes_row(_overloaded().to_dict())
    assert row["no_stationary_value"] == GROWING and row["reliable"] is False
    assert math.isnan(row["mean_queue_length_stderr"])
    stable = simulate_classes(
        100, 2, 0.6, server_classes="0.5:2,0.5:0.5", time=100, burn_in=10, seed=3, workers=1
    ).to_dict()
    assert classes_row(stable)["no_stationary_value"] is None
    e = {"mean": 3.0, "stderr": None, "reliable": False, "note": INFINITE}  # a pareto:1.5 run's means
    system = {"policy": "jsq-d", "service": {"spec": "pareto:1.5"}}
    pareto = event_row({"system": system, "mean_queue_length": e, "sojourn": {"mean": e, "quantiles": {}}})
    assert pareto["no_stationary_value"] == INFINITE and pareto["reliable"] is False


# --------------------------------------------------------------------------- mutations the suite missed
@pytest.mark.parametrize("occupied,rare", [(25, True), (49, True), (50, False), (75, False), (100, False)])
def test_rare_tail_share_is_half_of_the_batches(occupied, rare):
    # the levels above the controls are rare when occupied in under half of the batches
    # (docs/model.md §9.1); the share test binds between 50 % and 100 %: with the share at 100 %
    # a tail seen in 75 of 100 batches counted as rare and the mean queue length lost its controls
    from types import SimpleNamespace

    from supermarket.simulation.controlled import _Controls

    T = np.ones(100)
    a = np.zeros(100)
    a[:occupied] = 1.0  # the tail's batch integrals: nonzero in `occupied` batches
    est = SimpleNamespace(stderr=1e-3)  # the adjusted error: far below the tail's own (variance test met)
    assert _Controls._rare_tail([(a, T)], est) is rare


# --------------------------------------------------------------------------- defaults stated
@pytest.mark.parametrize(
    "command,default,why",
    [
        ("exact", "0.9", "beyond the solver's limit"),
        ("meanfield", "0.9", "as in exact and perfect"),
        ("perfect", "0.9", "coalescence horizon"),
        ("mixing", "0.99", "meanfield, exact and perfect default to 0.9"),
        ("theory", "0.99", "meanfield, exact and perfect default to 0.9"),
    ],
)
def test_each_commands_help_says_why_its_default_load(command, default, why):
    # the defaults differ (0.99 against 0.9) and only perfect said why
    from click.testing import CliRunner

    from supermarket.cli import main

    flat = " ".join(CliRunner().invoke(main, [command, "--help"]).output.split())
    load = flat[flat.index("--load LOAD") : flat.index("--load LOAD") + 400]
    assert f"[default: {default}]" in load and why in load, load


def test_perfect_replications_are_samples_and_samples_still_works():
    from click.testing import CliRunner

    from supermarket.cli import main

    flat = " ".join(CliRunner().invoke(main, ["perfect", "--help"]).output.split())
    assert "one perfect sample is one independent replication" in flat and "--samples" in flat
    args = ["perfect", "--n", "10", "--load", "0.5", "--workers", "1", "--json"]
    a = CliRunner().invoke(main, [*args, "--replications", "2"])
    b = CliRunner().invoke(main, [*args, "--samples", "2"])
    assert a.exit_code == 0 and b.exit_code == 0, (a.output, b.output)
    import json

    ja, jb = json.loads(a.stdout), json.loads(b.stdout)
    ja.pop("seconds"), jb.pop("seconds")
    assert ja == jb and ja["replications_requested"] == 2 == len(ja["samples"])  # the same samples


def test_overloaded_classes_event_engine_keeps_the_stable_class_its_pollaczek_khinchine_law():
    # the event engine used the same capacity control, which pulled the stable class's mean queue
    # length to 0.79 where M/E_2/1 (Pollaczek–Khinchine) gives 0.544; its sojourn was right
    from supermarket.simulation.general import simulate_general

    r = simulate_general(
        100, 1, 0.6, policy="random", service="erlang:2", server_classes="0.5:2,0.5:0.5", time=500, seed=4, workers=1
    )
    rho, scv = 0.6 * 1.25 / 2.0, 0.5  # λ s̄ / s of the fast class; Erlang-2 service
    L = rho + rho**2 * (1 + scv) / (2 * (1 - rho))
    fast = r.classes[0].mean_queue_length
    assert not r.control_variates and any("no control variate" in x for x in r.notes)
    assert fast.reliable and abs(fast.mean - L) < 4 * fast.stderr, (fast.mean, fast.stderr, L)


def test_sweep_check_refuses_a_mixing_start_the_run_refuses_in_its_words():
    # --check passed `start = "long:3000000"`, which the coupling then refused for its arrays
    from supermarket.mixing import coalescence

    with pytest.raises(ValueError) as run:
        coalescence(100, 2, 0.9, start="long:3000000", replications=1, workers=1)
    text = (
        '[sweep]\nname = "m"\n\n[[run]]\nmeasurement = "mixing"\nn = 100\nd = 2\nload = 0.9\nstart = "long:3000000"\n'
    )
    with pytest.raises(sw.SweepFileError) as exc:
        sw.parse_sweep(text)
    (err,) = exc.value.errors
    assert str(run.value) in err and "run[1].start" in err, err
    ok = text.replace("long:3000000", "long:1000")
    assert len(sw.parse_sweep(ok).tasks) == 1
