"""``precision=`` targets what is unknown: ``target=``/``--target`` names the quantities, ``E[u_1] = λ``
(exact for every rule) is a self-check and never the binding target, and the run says how many
events it expects to need before it extends (docs/simulate.md, "--precision")."""

from __future__ import annotations

import json
import math
import warnings

import pytest
from click.testing import CliRunner

from supermarket import sweep as sw
from supermarket.cli import main
from supermarket.simulation import simulate
from supermarket.simulation.precision import DEFAULT_TARGET, parse_target
from supermarket.simulation.run import PrecisionPlanWarning

# a run of 4e5 steps at (100, 2, 0.9) from the fixed point, seed 1: the mean queue length has a
# relative 95 % half-width of 5.3e-3, E[u_1] one of 8.0e-3 (measured: the tests below read them
# from a plain run of the same first stretch, never from the precision run)
FIRST = dict(steps=400_000, seed=1, start="fixed-point")


def _quiet(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return simulate(100, 2, 0.9, **kw)


# ----------------------------------------------------------------- names
def test_target_names_are_canonical_and_checked():
    assert parse_target("mean-queue-length, P99 ,u2,p99") == ("mean-queue-length", "sojourn-p99", "u2")
    assert parse_target(["waiting-p99.9", "levels"]) == ("waiting-p99.9", "levels")
    assert DEFAULT_TARGET == ("mean-queue-length",)
    for bad in ("p98", "u0", "u02", "mql", "sojourn-p95", ""):
        with pytest.raises(ValueError, match="valid targets: mean-queue-length, levels, u2"):
            parse_target(bad)
    with pytest.raises(ValueError, match=r"E\[u_1\] = λ exactly .*self-check"):
        parse_target("mean-queue-length,u1")
    with pytest.raises(ValueError, match="no response-time law"):
        parse_target("p99", stable=False)
    assert parse_target("u3", stable=False) == ("u3",)
    with pytest.raises(TypeError, match="target must be"):
        parse_target(3)


def test_library_refuses_a_bad_target_before_any_work():
    with pytest.raises(ValueError, match="give precision too"):
        simulate(100, 2, 0.9, steps=1000, target="p99")
    with pytest.raises(ValueError, match="unknown quantity 'p42'"):
        simulate(100, 2, 0.9, steps=1000, precision=0.01, target="p42")
    with pytest.raises(ValueError, match="no equilibrium"):  # no target at all at load >= 1
        simulate(100, 2, 1.1, steps=1000, precision=0.01, target="sojourn-mean")


# ----------------------------------------------------------------- what binds
def test_exact_e_u1_does_not_bind_the_default_target():
    """E[u_1]'s half-width (8e-3) is above the target, the mean queue length's (5.3e-3) below:
    the run stops after its first stretch (before, it waited on E[u_1] and grew)."""
    plain = _quiet(**FIRST)
    r_q = plain.mean_queue_length_half_width / plain.mean_queue_length
    r_u1 = plain.u_half_width[0] / plain.u_mean[0]
    precision = 6e-3
    assert r_q < precision < r_u1  # the premise, from the plain run of the same first stretch
    res = _quiet(precision=precision, **FIRST)
    pr = res.precision
    assert pr["met"] and pr["rounds"] == 1 and res.steps == FIRST["steps"]
    assert pr["targets"] == ["mean-queue-length"] and [q["quantity"] for q in pr["quantities"]] == ["mean queue length"]
    assert pr["achieved"] == pytest.approx(r_q, rel=1e-12)
    assert any("E[u_1] = λ = 0.9 exactly" in x for x in pr["exact"])
    assert "E[u_1] = λ = 0.9 exactly" in res.summary()


def test_named_targets_each_bind():
    plain = _quiet(**FIRST)
    law = plain.sojourn
    r_p99 = 1.959963984540054 * law.stderr["quantiles"][0.99] / law.quantiles[0.99]
    r_u2 = plain.u_half_width[1] / plain.u_mean[1]
    res = _quiet(precision=6e-3, target="p99,u2", **FIRST)
    rows = {q["target"]: q for q in res.precision["quantities"]}
    assert rows["sojourn-p99"]["relative"] == pytest.approx(r_p99, rel=1e-9)
    assert rows["u2"]["relative"] == pytest.approx(r_u2, rel=1e-12)
    assert res.precision["met"] == (max(r_p99, r_u2) <= 6e-3)
    lv = _quiet(precision=6e-3, target="levels", **FIRST).precision["quantities"]
    assert [q["quantity"] for q in lv] == [
        f"E[u_{i + 1}]" for i in range(1, len(plain.u_mean)) if plain.u_mean[i] >= 0.1
    ]


# ----------------------------------------------------------------- the plan: expected against used
def test_the_run_states_the_events_it_expects_before_it_extends():
    plain = _quiet(**FIRST)
    r_q = plain.mean_queue_length_half_width / plain.mean_queue_length
    precision = 2.5e-3
    with pytest.warns(PrecisionPlanWarning, match=r"expecting about .* events in all"):
        res = simulate(100, 2, 0.9, precision=precision, **FIRST)
    pr = res.precision
    # errors shrink as events^(-1/2): the first stretch's error says how many events in all
    assert pr["expected_after_events"] == FIRST["steps"]
    assert pr["expected_events"] == pytest.approx(FIRST["steps"] * (r_q / precision) ** 2, rel=1e-9)
    assert pr["met"] and pr["events"] == res.steps >= pr["expected_events"]
    text = res.summary()
    assert f"{pr['expected_events']:.3g} expected after 4e+05" in text and f"{res.steps:.3g} used" in text


def test_a_target_without_an_error_bar_is_reported_plainly():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = simulate(100, 2, 0.9, precision=0.01, target="u30", max_steps=800_000, **FIRST)
    pr = res.precision
    assert pr["cap_hit"] and not pr["met"] and pr["expected_events"] is None and math.isinf(pr["achieved"])
    assert pr["quantities"][0]["note"] == "level 30 was never occupied in the run"
    assert any("has no error bar yet" in str(w.message) for w in caught if w.category is PrecisionPlanWarning)
    assert "E[u_30]: 0, level 30 was never occupied in the run: cannot be checked" in res.summary()


# ----------------------------------------------------------------- the CLI
def _cli(*args):
    return CliRunner().invoke(main, ["simulate", "--n", "100", "--d", "2", "--load", "0.9", *args])


def test_cli_target_errors_are_one_line():
    for args, msg in (
        (["--target", "p99"], "--target names the quantities of a --precision run"),
        (["--precision", "0.01", "--target", "p98"], "unknown quantity 'p98'; valid targets: mean-queue-length"),
        (["--precision", "0.01", "--target", "u1"], "E[u_1] = λ exactly"),
    ):
        r = _cli(*args)
        assert r.exit_code == 2, r.output
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and msg in lines[0] and "Traceback" not in r.output


def test_cli_help_states_the_default_target():
    r = CliRunner().invoke(main, ["simulate", "--help"])
    assert "default mean-queue-length" in " ".join(r.output.split())


def test_cli_json_has_expected_and_used_events():
    r = _cli(
        "--steps", "4e5", "--seed", "1", "--start", "fixed-point", "--precision", "6e-3", "--target", "u2", "--json"
    )
    assert r.exit_code == 0, r.output
    pr = json.loads(r.stdout)["precision"]
    assert pr["targets"] == ["u2"] and pr["met"] and pr["events"] == 400_000 and pr["expected_events"] == 400_000


# ----------------------------------------------------------------- the sweep
_POINT = '[[run]]\nmeasurement = "simulate"\nn = 100\nd = 2\nload = {load}\nsteps = 400000\nstart = "fixed-point"\n'


def test_sweep_takes_precision_and_target():
    s = sw.parse_sweep(_POINT.format(load=0.9) + 'seed = 1\nprecision = 6e-3\ntarget = "p99,mean-queue-length"\n')
    (task,) = s.tasks
    assert task.params["precision"] == 6e-3 and task.params["target"] == "sojourn-p99,mean-queue-length"
    # a point without the new keys keeps its parameters, hence its hash and seed
    plain = sw.parse_sweep(_POINT.format(load=0.9)).tasks[0]
    assert "precision" not in plain.params and "target" not in plain.params


@pytest.mark.parametrize(
    ("extra", "msg"),
    [
        ('target = "p99"\n', "'target' goes with 'precision'"),
        ("max_steps = 1e6\n", "'max_steps' goes with 'precision'"),
        ('precision = 0.01\ntarget = "p98"\n', "unknown quantity 'p98'"),
        ("precision = 2\n", "precision must lie in (0, 1)"),
        ('precision = 0.01\nservice = "erlang:2"\ntarget = "p99"\n', "not the response times"),
    ],
)
def test_sweep_refuses_bad_precision_keys(extra, msg):
    with pytest.raises(sw.SweepFileError) as ei:
        sw.parse_sweep(_POINT.format(load=0.9) + extra)
    assert msg in str(ei.value)


def test_sweep_row_carries_the_precision_state():
    from supermarket.sweep.measurements import measure_simulate

    s = sw.parse_sweep(_POINT.format(load=0.9) + 'precision = 6e-3\ntarget = "u2"\n')
    (task,) = s.tasks
    import numpy as np

    row = measure_simulate(task.params, np.random.SeedSequence(1))
    assert row["precision"]["targets"] == ["u2"] and row["precision"]["events"] >= 400_000


@pytest.mark.slow
def test_done_when_precision_1e_4_at_1000_2_09_needs_at_most_2e8_events():
    """The issue's bar: --precision 1e-4 at (1000, 2, 0.9) (default target) in at most 2·10^8 events."""
    res = simulate(1000, 2, 0.9, precision=1e-4, seed=0, progress=False)
    assert res.precision["met"] and res.steps <= 2 * 10**8
    assert res.mean_queue_length_half_width / res.mean_queue_length <= 1e-4


@pytest.mark.parametrize("extra", ['service = "erlang:2"\n', 'server_classes = "0.5:2,0.5:1"\n'])
def test_a_count_engine_point_runs_the_precision_loop_as_simulate_does(extra):
    """On the count engines of a law or of classes a sweep point runs ``simulate(precision=…)``'s
    loop on its one replication: the row is that run's, with its ``precision`` block."""
    import numpy as np

    from supermarket.sweep.measurements import measure_simulate

    s = sw.parse_sweep(
        _POINT.format(load=0.7).replace("steps = 400000\n", "steps = 20000\n") + "precision = 0.02\n" + extra
    )
    (task,) = s.tasks
    row = measure_simulate(task.params, np.random.SeedSequence(4))
    kw = {"service": "erlang:2"} if "erlang" in extra else {"server_classes": "0.5:2,0.5:1"}
    ref = simulate(100, 2, 0.7, steps=20000, start="fixed-point", precision=0.02, seed=np.random.SeedSequence(4),
                   replications=1, workers=1, progress=False, **kw)  # fmt: skip
    assert row["precision"]["met"] and row["precision"] == ref.to_dict()["precision"]
    assert row["mean_queue_length"] == ref.mean_queue_length.mean


def test_the_event_engine_point_refuses_precision_with_the_reason():
    point = '[[run]]\nmeasurement = "simulate"\nn = 50\nd = 2\nload = 0.7\nsteps = 40000\nservice = "lognormal:2"\n'
    with pytest.raises(sw.SweepFileError, match="its error bars come from the spread of independent replications"):
        sw.parse_sweep(point + "precision = 0.01\n")
