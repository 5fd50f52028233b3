"""CLI `supermarket meanfield`: JSON keys and values, plots, exit codes, one-line errors (issue 4)."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from supermarket.cli import main


def run(args):
    return CliRunner().invoke(main, args, catch_exceptions=False)


def test_json_fixed_point_refined_covariance():
    r = run(["meanfield", "--d", "2", "--load", "0.9", "--n", "100", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    fp = out["fixed_point"]
    L = len(fp)
    assert fp[0] == 0.9 and fp[1] == pytest.approx(0.9**3, rel=1e-14)
    assert out["mean_queue_length"] == pytest.approx(2.35265, abs=5e-6)
    ref = out["refined"]
    assert len(ref["V"]) == L
    assert sum(ref["V"]) == pytest.approx(3.986, abs=1e-3)
    assert ref["mean_queue_length"] == pytest.approx(sum(fp) + sum(ref["V"]) / 100, rel=1e-14)
    cov = np.array(out["covariance"])
    assert cov.shape == (L, L)
    assert np.allclose(cov, cov.T)
    assert "trajectory" not in out


def test_json_trajectory():
    r = run(
        ["meanfield", "--d", "3", "--load", "0.8", "--time", "5", "--points", "11", "--start", "customers:2", "--json"]
    )
    assert r.exit_code == 0, r.output
    tr = json.loads(r.stdout)["trajectory"]
    assert len(tr["t"]) == 11 and tr["t"][0] == 0.0 and tr["t"][-1] == 5.0
    u = np.array(tr["u"])
    assert u.shape[0] == 11
    assert np.all(u[0, :2] == 1.0) and np.all(u[0, 2:] == 0.0)


def test_d1_covariance_is_mm1():
    r = run(["meanfield", "--d", "1", "--load", "0.5", "--n", "10", "--json"])
    out = json.loads(r.stdout)
    cov = np.array(out["covariance"])
    i = np.arange(1, cov.shape[0] + 1)
    exact = 0.5 ** np.maximum.outer(i, i) - 0.5 ** np.add.outer(i, i)
    assert np.max(np.abs(cov - exact)) < 1e-11


def test_dinf():
    r = run(
        [
            "meanfield",
            "--d",
            "inf",
            "--load",
            "0.9",
            "--time",
            "9",
            "--points",
            "10",
            "--start",
            "customers:3",
            "--json",
        ]
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["fixed_point"] == [0.9] and out["mean_queue_length"] == 0.9
    u = np.array(out["trajectory"]["u"])
    t = np.array(out["trajectory"]["t"])
    assert np.allclose(u[:, 2], 1 - 0.1 * t, atol=1e-12)


def test_extreme_parameters():
    r = run(
        ["meanfield", "--d", "1e6", "--load", "0.999999999", "--n", "1e7", "--time", "10", "--points", "3", "--json"]
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert all(np.isfinite(out["refined"]["V"]))
    assert np.all(np.isfinite(np.array(out["trajectory"]["u"])))


def test_without_replacement_centre():
    r = run(["meanfield", "--d", "5", "--load", "0.9", "--n", "20", "--no-replace", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    c = out["centre"]
    assert c[0] == 0.9
    # x_2 = λ C(20·0.9, 5)/C(20, 5) = 0.9 · C(18,5)/C(20,5)
    assert c[1] == pytest.approx(0.9 * 8568 / 15504, rel=1e-12)
    assert np.array(out["covariance"]).shape == (len(c), len(c))


def test_human_output_and_plots(tmp_path):
    r = run(
        [
            "meanfield",
            "--d",
            "2",
            "--load",
            "0.9",
            "--n",
            "50",
            "--time",
            "3",
            "--points",
            "4",
            "--plot",
            str(tmp_path / "traj.png"),
        ]
    )
    assert r.exit_code == 0, r.output
    assert "Σπ(i)" in r.output and "ΣV" in r.output and "trajectory" in r.output
    assert (tmp_path / "traj.png").read_bytes()[:4] == b"\x89PNG"
    r = run(["meanfield", "--d", "2", "--n", "50", "--plot", str(tmp_path / "fp.png")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "fp.png").stat().st_size > 1000


@pytest.mark.parametrize(
    "args, word",
    [
        (["--time", "-1"], "--time"),
        (["--time", "0"], "--time"),
        (["--time", "inf"], "--time"),
        (["--time", "nan"], "--time"),
        (["--d", "0"], "--d"),
        (["--d", "2.5"], "--d"),
        (["--load", "1"], "--load"),
        (["--n", "0"], "--n"),
        (["--start", "bogus", "--time", "1"], "start"),
        (["--no-replace"], "--n"),
        (["--tol", "2"], "--tol"),
        (["--d", "1", "--load", "0.999", "--n", "10"], "tol"),
        (["--d", "30", "--n", "10", "--no-replace"], "d"),
    ],
)
def test_bad_input_one_line_exit_2(args, word):
    r = run(["meanfield"] + args)
    assert r.exit_code == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and word in lines[0], r.stderr


def test_start_profile_on_the_command_line():
    r = run(["meanfield", "--time", "1", "--points", "2", "--start", "1,0.8,0.3", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["trajectory"]["u"][0][:4] == [1.0, 0.8, 0.3, 0.0]
    r = run(["meanfield", "--time", "1", "--start", "1,0.8,0.9"])
    assert r.exit_code == 2
    assert "level 3 (0.9) exceeds level 2 (0.8)" in r.stderr
    r = run(["meanfield", "--time", "1", "--start", "0.5,1.5"])
    assert r.exit_code == 2 and "level 2 is 1.5" in r.stderr


def test_d1_mean_queue_length_is_the_whole_series():
    r = run(["meanfield", "--d", "1", "--load", "0.9", "--n", "10", "--tol", "1e-3", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["mean_queue_length"] == pytest.approx(9.0, rel=1e-12)  # λ/(1−λ)
    assert len(out["fixed_point"]) < 80


# --------------------------------------------------------------------------- hardening
def test_near_one_refined_is_explained_not_printed():
    r = run(["meanfield", "--d", "2", "--load", "0.99999999999999989", "--n", "1000"])
    assert r.exit_code == 0, r.output
    assert "refined mean field π + V/n: not shown" in r.stdout
    assert "Only the mean field" in r.stdout
    assert "e+11" not in r.stdout and "e+14" not in r.stdout  # no −2.7·10^11 anywhere
    assert "linear-noise covariance: not shown" in r.stdout
    r = run(["meanfield", "--d", "2", "--load", "0.99999999999999989", "--n", "1000", "--json"])
    out = json.loads(r.stdout)
    assert out["refined"]["trusted"] is False and "V" not in out["refined"]
    assert out["covariance"] is None and "not accurate" in out["covariance_note"]
    assert out["fixed_point"][0] == 0.99999999999999989


def test_refined_outside_unit_interval_at_small_n_is_explained():
    r = run(["meanfield", "--d", "2", "--load", "0.999999", "--n", "1000", "--json"])
    out = json.loads(r.stdout)
    ref = out["refined"]
    assert ref["trusted"] is True and ref["valid_for_n"] is False
    assert ref["mean_queue_length"] is None and None in ref["mean"]
    assert all(m is None or 0 <= m <= 1 for m in ref["mean"])
    r = run(["meanfield", "--d", "2", "--load", "0.999999", "--n", "1000"])
    assert "refined mean queue length: not shown" in r.stdout and "too small" in r.stdout


@pytest.mark.parametrize(
    "args, msg",
    [
        (["--d", "1e400"], "--d must be an integer in [1, 9223372036854775807]"),
        (["--n", "1e400"], "--n must be an integer"),
        (["--time", "1e400"], "--time must be a finite number"),
        (["--levels", "1e6"], "--levels must be an integer in [1, 5000]"),
        (["--points", "1e9", "--time", "1"], "--points must be an integer in [1, 100000]"),
        (["--plot", "/proc/missing-dir/x.png"], "does not exist"),
        (["--plot", "x.unknownformat"], "unknown figure format"),
    ],
)
def test_hostile_values_are_one_line_errors(args, msg):
    r = CliRunner().invoke(main, ["meanfield", *args])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and msg in lines[0], r.stderr


def test_plot_to_a_full_device_is_an_io_error_not_written():
    import os

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    r = CliRunner().invoke(main, ["meanfield", "--plot", "/dev/full"])
    assert r.exit_code == 1
    assert r.stderr.strip() == "supermarket: error: could not write '/dev/full': No space left on device"
    assert "written" not in r.stdout


# --------------------------------------------------------------------------- response times
Q = ("0.5", "0.9", "0.99", "0.999")


def test_response_times_d1_closed_form():
    """d = 1 is M/M/1: sojourn ~ Exp(1 − λ) (quantile −log(1−q)/(1−λ)), W = 0 w.p. 1 − λ."""
    lam = 0.7
    r = run(["meanfield", "--d", "1", "--load", str(lam), "--cdf", "7", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    soj, wai = out["sojourn"], out["waiting"]
    assert set(soj) >= {"mean", "quantiles", "stderr"} and set(soj["quantiles"]) == set(Q)
    assert soj["stderr"] is None  # a theoretical law: no sampling error
    assert soj["mean"] == pytest.approx(1 / (1 - lam), rel=1e-10)
    assert wai["mean"] == pytest.approx(lam / (1 - lam), rel=1e-10)
    for q in Q:
        assert soj["quantiles"][q] == pytest.approx(-np.log(1 - float(q)) / (1 - lam), rel=1e-9)
        # P(W > t) = λ e^{−(1−λ)t}: quantile log(λ/(1−q))/(1−λ) when 1 − q < λ
        assert wai["quantiles"][q] == pytest.approx(
            max(0.0, np.log(lam / (1 - float(q)))) / (1 - lam), rel=1e-9, abs=1e-12
        )
    t = np.array(out["cdf"]["t"])
    assert len(t) == 7 and t[0] == 0.0
    assert np.allclose(out["cdf"]["sojourn"], 1 - np.exp(-(1 - lam) * t), atol=1e-12)
    assert np.allclose(out["cdf"]["waiting"], 1 - lam * np.exp(-(1 - lam) * t), atol=1e-12)
    assert "refined" not in out  # no --n


def test_refined_response_times_little():
    """Refined (1/n, derived) mean sojourn = (Σπ + ΣV/n)/λ (Little's law), to 1e-10."""
    lam, n = 0.9, 100
    r = run(["meanfield", "--d", "2", "--load", str(lam), "--n", str(n), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    ref = out["refined"]
    assert set(ref["sojourn"]["quantiles"]) == set(Q) and set(ref["waiting"]) >= {"mean", "quantiles", "stderr"}
    little = (sum(out["fixed_point"]) + sum(ref["V"]) / n) / lam
    assert abs(ref["sojourn"]["mean"] - little) < 1e-10
    assert abs(ref["waiting"]["mean"] - (little - 1)) < 1e-10
    assert abs(out["sojourn"]["mean"] - out["mean_queue_length"] / lam) < 1e-10
    assert "derived" in ref["response_source"]
    text = run(["meanfield", "--d", "2", "--load", str(lam), "--n", str(n)]).output
    assert "response times (mean field" in text and "response times (refined" in text and "derived" in text


def test_refined_response_times_withheld_when_not_trusted():
    r = run(["meanfield", "--d", "2", "--load", "0.99999999999999989", "--n", "1000", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["refined"]["trusted"] is False and out["refined"]["sojourn"] is None
    assert out["refined"]["response_note"]
    assert out["sojourn"]["mean"] > 0
    text = run(["meanfield", "--d", "2", "--load", "0.99999999999999989", "--n", "1000"]).output
    assert "refined response times (1/n, derived): not shown" in text and "response times (refined" not in text


def test_no_replace_refined_mean_field_and_response_times():
    """Issue 19: without replacement the refined numbers were those with replacement (2.0307)
    and the refined response times were refused.  Now V includes the drift's 1/n term
    (docs/model.md §3): Σπ + ΣV/n = 1.97487 (a simulation gives 1.9952 ± 0.0016: the same
    O(1/n²) above it as with replacement), and the refined sojourn mean obeys Little's law."""
    args = ["meanfield", "--d", "3", "--load", "0.9", "--n", "20"]
    r = run([*args, "--no-replace", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    with_r = json.loads(run([*args, "--json"]).stdout)
    assert "without replacement" in out["response_source"]
    ref = out["refined"]
    assert "without replacement" in ref["sampling"] and "with replacement" not in out["covariance_of"]
    assert with_r["refined"]["mean_queue_length"] == pytest.approx(2.0307, abs=1e-4)
    assert ref["mean_queue_length"] == pytest.approx(1.97487, abs=1e-5)
    assert ref["V"] != with_r["refined"]["V"]
    assert ref["sojourn"]["mean"] == pytest.approx(ref["mean_queue_length"] / 0.9, rel=1e-9)  # Little
    assert "with replacement only" not in run([*args, "--no-replace"]).output


def test_text_is_the_report_summary(tmp_path):
    """The command prints MeanFieldReport(data).summary() of the data its --json prints."""
    from supermarket.meanfield import MeanFieldReport

    args = ["meanfield", "--d", "3", "--load", "0.8", "--n", "40", "--time", "2", "--points", "3"]
    text = run(args).stdout
    data = json.loads(run([*args, "--json"]).stdout)
    rep = MeanFieldReport(data)
    assert text.rstrip("\n") == rep.summary()
    f = rep.to_frame()
    assert f["pi"].tolist() == data["fixed_point"] and f["refined"].tolist() == data["refined"]["mean"]
    rep.plot(tmp_path / "t.png")
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"


def test_refined_note_gives_the_least_n_not_a_tail_ratio():
    # issue 19 item 7: at n = 1 the note said "n much larger than max_i |V_i|/π(i) = 4.66e+11",
    # a ratio set by the 9th level (π = 4e-24); π + V/n is a profile from n = 4
    out = json.loads(run(["meanfield", "--d", "2", "--load", "0.9", "--n", "1", "--json"]).stdout)
    ref = out["refined"]
    assert ref["valid_for_n"] is False and ref["mean_queue_length"] is None and ref["min_n"] == 4
    assert "from n = 4" in ref["note"] and "e+11" not in ref["note"]
    # without replacement at n = 2 the refined profile increases with i: no refined mean queue
    # length either (the refined response times were already refused)
    out = json.loads(run(["meanfield", "--d", "2", "--load", "0.9", "--n", "2", "--no-replace", "--json"]).stdout)
    assert out["refined"]["valid_for_n"] is False and out["refined"]["mean_queue_length"] is None
    assert out["refined"]["sojourn"] is None
    ok = json.loads(run(["meanfield", "--d", "2", "--load", "0.9", "--n", "4", "--json"]).stdout)["refined"]
    assert ok["valid_for_n"] is True and "min_n" not in ok


def test_points_without_time_is_refused():
    # issue 19 item 7: --points (output times of the ODE) without --time did nothing, in silence
    r = run(["meanfield", "--points", "5"])
    assert r.exit_code == 2 and "--points" in r.output and "--time" in r.output
    assert run(["meanfield", "--points", "3", "--time", "1", "--json"]).exit_code == 0
