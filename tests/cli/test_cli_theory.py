"""CLI of the calculators: JSON keys, exit codes, one-line errors (issue 2)."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from supermarket.cli import main


def run(args):
    return CliRunner().invoke(main, args, catch_exceptions=False)


def test_theory_json_done_when():
    r = run(["theory", "--n", "1000000", "--d", "100", "--load", "0.999", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["k"] == 2 and isinstance(out["k"], int)
    for key in [
        "k_hypothesis",
        "fixed_point",
        "mean_queue_length",
        "linearised_q",
        "theorem_1_2",
        "mixing_steps",
        "slow_rate",
        "regime_002",
    ]:
        assert key in out
    assert isinstance(out["k_hypothesis"], int)
    assert len(out["linearised_q"]) == 2
    assert set(out["mixing_steps"]) >= {"upper", "lower"}
    assert set(out["regime_002"]) >= {"d_over_sqrt_n", "kappa", "c_n", "zeta", "regime"}
    t = out["theorem_1_2"]
    assert isinstance(t["applies"], bool) and t["applies"] is False
    assert all(set(c) >= {"name", "value", "holds"} for c in t["conditions"])
    fp = out["fixed_point"]
    assert fp[0] == 0.999 and fp[-1] < 1e-300 and all(v >= 1e-300 for v in fp[:-1]) and len(fp) <= 64


@pytest.mark.parametrize("load,k", [("0.9", 1), ("0.9000001", 2)])
def test_theory_k_as_written(load, k):
    r = run(["theory", "--d", "10", "--load", load, "--json"])
    assert json.loads(r.stdout)["k"] == k


def test_theory_default_human_report():
    r = run(["theory"])
    assert r.exit_code == 0
    assert "k_(λ,d)" in r.stdout and "Theorem 1.2" in r.stdout and "derived" in r.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["theory", "--n", "2.5"],
        ["theory", "--n", "0"],
        ["theory", "--d", "-3"],
        ["theory", "--load", "1"],
        ["theory", "--load", "0"],
        ["theory", "--load", "nan"],
        ["theory", "--load", "inf"],
        ["theory", "--load", "abc"],
        ["theory", "--eps", "0.5"],
        ["theory", "--bogus"],
        ["design", "--load", "0.9"],
        ["design", "--load", "0.9", "--max-queue", "0"],
        ["nosuchcommand"],
    ],
)
def test_bad_input_one_line_exit_2(args):
    proc = subprocess.run([sys.executable, "-m", "supermarket", *args], capture_output=True, text=True)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("supermarket: error:"), proc.stderr
    assert "Traceback" not in proc.stderr


def test_design_json():
    r = run(["design", "--n", "1000", "--load", "0.999", "--max-queue", "2", "--json"])
    out = json.loads(r.stdout)
    assert out["d"] == 32 and out["k"] == 2
    assert len(out["share_by_length"]) == 3
    r = run(["design", "--load", "0.9", "--max-queue", "1", "--json"])
    assert json.loads(r.stdout)["d"] == 10


def test_help_lists_commands():
    r = run(["--help"])
    assert r.exit_code == 0 and "theory" in r.stdout and "design" in r.stdout


# --------------------------------------------------------------------------- hardening
def test_theory_does_not_print_negative_predicted_counts():
    r = run(["theory", "--n", "1000", "--d", "2", "--load", "0.9"])
    assert r.exit_code == 0, r.output
    assert "-187" not in r.stdout and "−187" not in r.stdout
    assert "valid only in its regime" in " ".join(r.stdout.split())
    out = json.loads(run(["theory", "--n", "1000", "--d", "2", "--load", "0.9", "--json"]).stdout)
    assert out["predicted_counts"][-1] is None and out["linearisation"]["valid"] is False


def test_design_does_not_print_a_negative_share():
    r = run(["design", "--load", "0.9", "--max-queue", "3", "--n", "100"])
    assert r.exit_code == 0, r.output
    assert "-0.0" not in r.stdout and "-9.9" not in r.stdout
    assert "valid only in its regime" in " ".join(r.stdout.split())
    out = json.loads(run(["design", "--load", "0.9", "--max-queue", "3", "--n", "100", "--json"]).stdout)
    assert out["share_by_length"][-1] is None and out["predicted_counts"][-1] is None


@pytest.mark.parametrize(
    "args, msg",
    [
        (["theory", "--n", "1e400"], "--n must be an integer in [1, 1e100]"),
        (["theory", "--d", "1e400"], "--d must be an integer in [1, 9223372036854775807]"),
        (["theory", "--load", "1e300"], "must be in (0, 1)"),
        (["theory", "--load", "0.99999999999999999999"], "rounds to 1"),
        (["theory", "--eps", "nan"], "--eps must be a finite number"),
        (["design", "--load", "0.9", "--max-queue", "1e400"], "--max-queue must be an integer"),
        (["theory", "--lod", "0.9"], "Did you mean"),
        (["theroy"], "Did you mean 'theory'"),
    ],
)
def test_hostile_values_are_one_line_errors(args, msg):
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and msg in lines[0], r.stderr


def test_theory_at_huge_n_is_a_number_not_a_crash():
    out = json.loads(run(["theory", "--n", "1e20", "--d", "2", "--load", "0.9", "--json"]).stdout)
    assert out["params"]["n"] == 10**20


def test_interrupt_gives_130_without_traceback(monkeypatch):
    from supermarket.theory import report as th_report  # where theory_report looks summary up

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(th_report, "summary", boom)
    r = CliRunner().invoke(main, ["theory"])
    assert r.exit_code == 130
    assert r.stderr.strip() == "supermarket: interrupted" and "Traceback" not in r.output


def test_new_user_round_theory():
    # issue 19 item 7: the --eps error names the option; a light load has a note, not a blank
    # line; an upper mixing order below the lower one (k log n < 1, here 1·log 2) is said so
    r = run(["theory", "--eps", "0.2"])
    assert r.exit_code == 2 and "'--eps'" in r.output and "(0, 0.1]" in r.output
    lines = run(["theory", "--load", "1e-6"]).stdout.splitlines()
    assert all(line.strip() for line in lines)
    assert "just above 1" in lines[2]
    out = run(["theory", "--n", "2", "--d", "2", "--load", "0.5"]).stdout
    assert "the upper order is below the lower one here" in out
    assert "below the lower" not in run(["theory"]).stdout


def test_theory_table_shows_the_count_at_length_k():
    # docs/tutorial.md: "about 100 empty queues, 1980 of length 1 and 7920 of length 2"; the
    # row of length k = 2 (level 3) was left blank. n(1 − q̃_2) = 10^4 (1 − 0.01(1 + 19.8)) = 7920
    rows = {line.split()[0]: line.split() for line in run(["theory"]).stdout.splitlines() if line[:1].isdigit()}
    assert rows["1"][-1] == "100" and rows["2"][-1] == "1980" and rows["3"][-1] == "7920"
    assert len(rows["4"]) == 3  # past length k: no prediction


@pytest.mark.parametrize(
    "args,named",
    [
        (["design", "--load", "0.9", "--max-queue", "2", "--d", "3"], "--d applies to --latency"),
        (
            ["design", "--load", "0.9", "--max-queue", "2", "--quantile", "0.9", "--seed", "1"],
            "--quantile, --seed apply",
        ),
        (["fluctuations", "--regime", "c", "--theta", "0.3"], "--theta applies to --regime a only"),
    ],
)
def test_options_that_would_do_nothing_are_refused(args, named):
    # issue 19: `design --d 3 --max-queue 2` answered d = 4 and ignored --d in silence;
    # `fluctuations --regime c --theta 0.3` ran with the theta unused
    r = run(args)
    assert r.exit_code == 2 and named in r.output, r.output
