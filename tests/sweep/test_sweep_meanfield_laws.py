"""A sweep's ``meanfield`` point with a service law or server classes: the fixed point the
command prints, checked against closed forms, and the command's refusals, given when the file is
read (docs/sweep.md, "Measurements").

Independent facts: under random routing every queue is on its own, so the mean field is the
single-queue law exactly: M/G/1 with Erlang-K or hyperexponential service (Pollaczek–Khinchine,
``ρ + ρ²(1 + SCV)/(2(1 − ρ))``), and with server classes each class an M/M/1 queue at load
``λ s̄/s_k``.  With one class of speed 1 the classes mean field is the exponential one,
``π_i = λ^((d^i − 1)/(d − 1))`` (docs/model.md §3).
"""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from supermarket import sweep as sw
from supermarket.cli import main


def _rows(text: str, tmp_path) -> list[dict]:
    res = sw.run_sweep(sw.parse_sweep(text), tmp_path / "out", workers=1)
    assert not res.failed, res.failures
    return sw.read_results(tmp_path / "out").to_pylist()


def _pk(lam: float, scv: float) -> float:
    return lam + lam**2 * (1.0 + scv) / (2.0 * (1.0 - lam))


def test_random_with_a_phase_type_law_is_the_pollaczek_khinchine_queue(tmp_path):
    rows = _rows(
        '[[run]]\nmeasurement = "meanfield"\nd = 2\nload = [0.5, 0.9]\npolicy = "random"\n'
        'service = ["erlang:4", "hyperexp:4"]\n',
        tmp_path,
    )
    assert len(rows) == 4
    for r in rows:
        scv = {"erlang:4": 0.25, "hyperexp:4": 4.0}[r["service"]]
        assert r["mean_queue_length"] == pytest.approx(_pk(r["load"], scv), rel=1e-9), r["service"]
        assert r["busy_fraction"] == pytest.approx(r["load"], abs=1e-12)


def test_random_with_server_classes_is_one_mm1_queue_per_class(tmp_path):
    (r,) = _rows(
        '[[run]]\nmeasurement = "meanfield"\nd = 2\nload = 0.5\npolicy = "random"\nserver_classes = "0.5:2,0.5:1"\n',
        tmp_path,
    )
    sbar = 0.5 * 2 + 0.5 * 1
    want = sum(0.5 * (rho / (1 - rho)) for rho in (0.5 * sbar / 2, 0.5 * sbar / 1))
    assert r["mean_queue_length"] == pytest.approx(want, rel=1e-9)  # 0.5·0.6 + 0.5·3 = 1.8


def test_one_class_of_speed_one_is_the_exponential_fixed_point(tmp_path):
    rows = _rows(
        '[[run]]\nmeasurement = "meanfield"\nd = 3\nload = 0.8\nserver_classes = "1:1"\n'
        'service = ["exp", "erlang:1"]\n',
        tmp_path,
    )
    want = sum(0.8 ** ((3**i - 1) / 2) for i in range(1, 40))
    for r in rows:
        assert r["mean_queue_length"] == pytest.approx(want, rel=1e-9), r["service"]


def test_a_row_is_what_the_command_prints(tmp_path):
    """The row and ``meanfield --json`` read the same library function: field for field."""
    (r,) = _rows('[[run]]\nmeasurement = "meanfield"\nd = 2\nload = 0.9\nservice = "erlang:4"\n', tmp_path)
    out = CliRunner().invoke(main, ["meanfield", "--d", "2", "--load", "0.9", "--service", "erlang:4", "--json"])
    assert out.exit_code == 0, out.output
    cli = json.loads(out.output)
    for key in ("mean_queue_length", "busy_fraction", "residual", "levels", "engine"):
        assert r[key] == cli[key], key
    assert r["u"] == cli["u"]


@pytest.mark.parametrize(
    "extra, key, words, flags",
    [
        ('service = "lognormal:2"\n', "service", "has no phase-type form", ["--service", "lognormal:2"]),
        ('service = "erlang:2"\npolicy = "jiq"\nn = 100\n', "n", "do not exist for jiq",
         ["--service", "erlang:2", "--policy", "jiq", "--n", "100"]),
        ('server_classes = "0.5:2,0.5:1"\npolicy = "jbt"\nn = 100\n', "n", "do not exist for jbt",
         ["--server-classes", "0.5:2,0.5:1", "--policy", "jbt", "--n", "100"]),
        ('server_classes = "0.5:2,0.5:1"\npolicy = "random"\nload = 0.8\n', "load", "grow without bound",
         ["--server-classes", "0.5:2,0.5:1", "--policy", "random"]),
    ],
)  # fmt: skip
def test_refused_when_the_file_is_read_as_the_command_refuses(extra, key, words, flags):
    base = '[[run]]\nmeasurement = "meanfield"\nd = 2\n' + ("" if "load =" in extra else "load = 0.5\n")
    with pytest.raises(sw.SweepFileError) as info:
        sw.parse_sweep(base + extra)
    (err,) = info.value.errors
    assert f".{key}:" in err and words in err, err
    load = "0.8" if "load = 0.8" in extra else "0.5"
    out = CliRunner().invoke(main, ["meanfield", "--d", "2", "--load", load, *flags])
    assert out.exit_code == 2
    # the same reason through both doors, word for word after the option's name (``--n`` / ``n``)
    reason = out.output.split("error: ", 1)[1].strip().split(": ", 1)[1]
    assert words in reason and reason in err, (reason, err)


def test_exponential_service_and_no_classes_keep_their_rows():
    """``service = "exp"`` without classes runs the exponential mean field, as before."""
    s = sw.parse_sweep('[[run]]\nmeasurement = "meanfield"\nd = 2\nload = 0.5\nservice = "exp"\n')
    (t,) = s.tasks
    row = sw.MEASUREMENTS["meanfield"](t.params, None)
    assert "refined_V" in row and math.isclose(row["mean_queue_length"], sum(0.5 ** (2**i - 1) for i in range(1, 30)))


@pytest.mark.parametrize("args", [["--policy", "random"], ["--d", "1"]])
@pytest.mark.parametrize("command", ["meanfield", "exact"])
def test_an_overloaded_class_under_random_routing_is_refused_the_same_way(command, args):
    """Class speed 1 of ``0.5:2,0.5:1`` at λ = 0.8 gets load λ s̄/s = 1.2: its queues grow without
    bound under random routing, and JSQ(1) is random routing; JSQ(2) is stable there."""
    base = [command, "--load", "0.8", "--server-classes", "0.5:2,0.5:1"] + (["--n", "2"] if command == "exact" else [])
    argv = base + (["--d", "2"] if "--d" not in args else []) + args
    out = CliRunner().invoke(main, argv)
    assert out.exit_code == 2 and "λ s̄/s = 1.2 >= 1: its queues grow without bound" in out.output, out.output
    ok = CliRunner().invoke(main, base + ["--d", "2"])
    assert ok.exit_code == 0, ok.output


def test_a_phase_type_point_with_n_is_what_the_command_prints(tmp_path):
    """The refined mean field with a phase-type law (docs/model.md §13): the sweep's row and
    ``meanfield --service erlang:2 --n 50 --json`` give the same numbers."""
    (r,) = _rows('[[run]]\nmeasurement = "meanfield"\nd = 2\nload = 0.9\nservice = "erlang:2"\nn = 50\n', tmp_path)
    out = CliRunner().invoke(
        main, ["meanfield", "--d", "2", "--load", "0.9", "--service", "erlang:2", "--n", "50", "--json"]
    )
    assert out.exit_code == 0, out.output
    rep = json.loads(out.output)
    assert r["refined_V"] == rep["refined"]["V"] and r["refined_u"] == rep["refined"]["mean"]
    assert r["refined_mean_queue_length"] == rep["refined"]["mean_queue_length"]
    assert r["lna_covariance"] == rep["covariance"] and r["refined_V"][1] > 0.2


@pytest.mark.parametrize("extra", ["", 'server_classes = "0.5:2,0.5:1"\n'])
def test_jbt_threshold_beyond_the_largest_is_refused_by_both_doors(extra):
    """JBT(T = d) holds T levels in its fluid point: ``d`` above ``MAX_THRESHOLD`` is refused when
    the file is read, as the command refuses ``--d`` (the sweep ran the one-class point, the command
    refused it); the largest ``d`` runs through both."""
    from supermarket.meanfield.fluid import MAX_THRESHOLD

    big = MAX_THRESHOLD + 1
    with pytest.raises(sw.SweepFileError) as info:
        sw.parse_sweep(f'[[run]]\nmeasurement = "meanfield"\nd = {big}\nload = 0.5\npolicy = "jbt"\n{extra}')
    (err,) = info.value.errors
    flags = ["--server-classes", "0.5:2,0.5:1"] if extra else []
    out = CliRunner().invoke(main, ["meanfield", "--policy", "jbt", "--d", str(big), "--load", "0.5", *flags])
    assert out.exit_code == 2 and f"[1, {MAX_THRESHOLD}]" in out.output and f"[1, {MAX_THRESHOLD}]" in err
    assert ".d:" in err
    if not extra:
        s = sw.parse_sweep(f'[[run]]\nmeasurement = "meanfield"\nd = {MAX_THRESHOLD}\nload = 0.5\npolicy = "jbt"\n')
        (t,) = s.tasks
        row = sw.MEASUREMENTS["meanfield"](t.params, None)
        out = CliRunner().invoke(main, ["meanfield", "--policy", "jbt", "--d", str(MAX_THRESHOLD), "--load", "0.5"])
        assert out.exit_code == 0 and row["levels"] == MAX_THRESHOLD
