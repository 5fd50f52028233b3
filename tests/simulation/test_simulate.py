"""simulate(): reproducibility, replications and workers, trajectories, results, bad input,
and the `supermarket simulate` command."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from supermarket.cli import main
from supermarket.cli._common import to_jsonable
from supermarket.simulation import SimulationResult, simulate


def test_same_seed_same_numbers_and_different_seed_differs():
    a = simulate(100, 2, 0.9, steps=200_000, seed=12)
    b = simulate(100, 2, 0.9, steps=200_000, seed=12)
    c = simulate(100, 2, 0.9, steps=200_000, seed=13)
    assert np.array_equal(a.u_mean, b.u_mean) and a.max_queue_dist == b.max_queue_dist
    assert not np.array_equal(a.u_mean, c.u_mean)
    g = simulate(100, 2, 0.9, steps=200_000, seed=np.random.SeedSequence(12))
    assert np.array_equal(a.u_mean, g.u_mean)


@pytest.mark.parametrize("engine", ["profile", "queues"])
def test_workers_do_not_change_results(engine):
    a = simulate(100, 3, 0.9, steps=100_000, replications=3, workers=1, engine=engine, seed=4)
    b = simulate(100, 3, 0.9, steps=100_000, replications=3, workers=2, engine=engine, seed=4)
    assert np.array_equal(a.u_mean, b.u_mean) and np.array_equal(a.u_stderr, b.u_stderr, equal_nan=True)
    assert len(a.per_replication) == 3
    # replication r uses child r of the root seed, whatever the number of replications
    c = simulate(100, 3, 0.9, steps=100_000, replications=2, engine=engine, seed=4)
    assert np.array_equal(c.per_replication[1].u_mean, a.per_replication[1].u_mean)


def test_result_fields_and_json():
    res = simulate(200, 2, 0.9, steps=300_000, seed=1)
    assert isinstance(res, SimulationResult)
    assert res.steps == 300_000 and res.burn_in == 30_000
    assert res.u_mean[-1] == 0.0 and res.u_mean[-2] > 0
    assert len(res.u_mean) == max(res.max_queue_dist) + 1
    assert math.isclose(sum(res.max_queue_dist.values()), 1.0, rel_tol=1e-9)
    assert 0.0 <= res.good_set_fraction <= 1.0 and res.k == 4
    assert math.isclose(res.mean_sojourn_time, res.mean_queue_length / 0.9)
    d = res.to_dict()
    text = json.dumps(to_jsonable(d), allow_nan=False)
    for key in (
        "system",
        "engine",
        "events",
        "u_mean",
        "u_stderr",
        "max_queue_dist",
        "mean_queue_length",
        "good_set_fraction",
        "events_per_second",
    ):
        assert key in d
    assert set(d["system"]) >= {"n", "d", "load", "replace", "policy"}
    mql = d["mean_queue_length"]
    assert mql["mean"] == res.mean_queue_length and mql["n_eff"] == res.mean_queue_length_n_eff
    assert all(isinstance(k, str) for k in d["max_queue_dist"])
    assert json.loads(text)["events"] == 300_000


def test_trajectory_discrete_and_continuous():
    res = simulate(100, 2, 0.9, steps=10_000, burn_in=1000, record_every=100, record_levels=3, seed=1)
    tr = res.trajectory
    assert tr["u"].shape == (100, 3) and np.array_equal(tr["t"], np.arange(0, 10_000, 100))
    assert np.all(tr["u"] >= 0) and np.all(tr["u"] <= 1)
    assert np.all(np.diff(tr["u"], axis=1) <= 0)
    assert np.all(tr["total"] >= 100 * tr["u"][:, 0])
    res = simulate(
        1000,
        5,
        0.95,
        time=20.0,
        burn_in=2.0,
        time_mode="continuous",
        replace=False,
        record_every=0.05,
        record_levels=2,
        seed=3,
        start="fixed-point",
    )
    tr = res.trajectory
    assert len(tr) == 400 and np.allclose(np.diff(tr.t), 0.05)
    assert abs(res.sim_time - 20.0) < 1e-9
    assert tr.u.shape == (400, 2)


def test_plot_writes_a_file(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    res = simulate(200, 2, 0.9, steps=100_000, seed=1)
    path = tmp_path / "p.png"
    res.plot(path)
    assert path.stat().st_size > 1000


def test_load_at_least_one_warns():
    with pytest.warns(RuntimeWarning, match="no equilibrium"):
        res = simulate(100, 2, 1.05, steps=100_000, seed=1)
    assert res.good_set_fraction is None and res.k is None and res.fixed_point() is None
    assert res.mean_queue_length > 0


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        (dict(engine="fast"), ValueError, "profile, queues, buckets"),
        (dict(steps=0), ValueError, "steps"),
        (dict(steps=-5), ValueError, "steps"),
        (dict(steps=math.inf), ValueError, "steps"),
        (dict(steps=1.5), ValueError, "steps"),
        (dict(steps="10"), TypeError, "steps"),
        (dict(time=math.nan), ValueError, "time"),
        (dict(time=-1.0), ValueError, "time"),
        (dict(steps=10, time=1.0), ValueError, "either"),
        (dict(time_mode="weird"), ValueError, "time_mode"),
        (dict(eps=0.5), ValueError, "eps"),
        (dict(replications=0), ValueError, "replications"),
        (dict(workers=0), ValueError, "workers"),
        (dict(record_every=-1), ValueError, "record_every"),
        (dict(start="bogus"), ValueError, "start"),
        (dict(seed=-1), ValueError, "seed"),
    ],
)
def test_bad_input(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        simulate(100, 2, 0.9, **{"steps": 1000, **kwargs} if "time" not in kwargs else kwargs)


def test_bad_parameters():
    with pytest.raises(ValueError, match="n"):
        simulate(0, 2, 0.9, steps=10)
    with pytest.raises(ValueError, match="load"):
        simulate(10, 2, -0.5, steps=10)
    with pytest.raises(ValueError, match="replace"):
        simulate(10, 20, 0.9, steps=10, replace=False)
    with pytest.raises(ValueError, match="profile"):
        simulate(10**12, 2, 0.9, steps=10, engine="queues")
    with pytest.raises(ValueError, match="GiB"):
        simulate(3 * 10**9, 2, 0.9, steps=10, engine="buckets")


# ----------------------------------------------------------------- CLI
def test_cli_json_keys():
    r = CliRunner().invoke(main, ["simulate", "--n", "200", "--d", "2", "--load", "0.9", "--steps", "1e5", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)  # warnings go to stderr
    assert d["system"]["n"] == 200 and d["system"]["load"] == 0.9 and d["system"]["replace"] is True
    assert d["system"]["load_text"] == "0.9" and d["events"] == 100_000
    for key in (
        "engine",
        "u_mean",
        "u_stderr",
        "max_queue_dist",
        "mean_queue_length",
        "good_set_fraction",
        "events_per_second",
    ):
        assert key in d


def test_cli_table_plot_and_out(tmp_path):
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    r = CliRunner().invoke(
        main,
        [
            "simulate",
            "--n",
            "300",
            "--d",
            "3",
            "--load",
            "0.95",
            "--steps",
            "2e5",
            "--engine",
            "buckets",
            "--no-replace",
            "--time-mode",
            "continuous",
            "--start",
            "fixed-point",
            "--replications",
            "2",
            "--workers",
            "2",
            "--save",
            str(out),
            "--plot",
            str(png),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "π(i)" in r.output and "k_(λ,d)" in r.output and "events per second" in r.output
    assert json.loads(out.read_text())["engine"] == "buckets"
    assert png.stat().st_size > 1000


@pytest.mark.parametrize(
    "args",
    [
        ["--engine", "fast"],
        ["--steps", "0"],
        ["--steps", "abc"],
        ["--n", "0"],
        ["--load", "-1"],
        ["--time", "-2"],
        ["--eps", "3"],
        ["--start", "nope"],
        ["--burn-in", "x"],
        ["--burn-in-steps", "x"],
        ["--burn-in-time", "5"],
        ["--time", "5", "--burn-in-steps", "10"],
        ["--burn-in-steps", "1", "--burn-in", "1"],
        ["--d", "50", "--n", "10", "--no-replace"],
    ],
)
def test_cli_bad_input_exit_2(args):
    r = CliRunner().invoke(
        main, ["simulate", "--steps", "1000", *args] if "--steps" not in args else ["simulate", *args]
    )
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output


def test_cli_burn_in_units_and_deprecated_names(tmp_path):
    """--burn-in-steps / --burn-in-time give the same run as the old --burn-in in the unit of the
    horizon; the old names (--burn-in, --out) still work with one warning line."""
    base = ["simulate", "--n", "50", "--d", "2", "--load", "0.5", "--seed", "3", "--json"]
    a = CliRunner().invoke(main, [*base, "--steps", "20000", "--burn-in-steps", "500"])
    b = CliRunner().invoke(main, [*base, "--steps", "20000", "--burn-in", "500", "--out", str(tmp_path / "o.json")])
    assert a.exit_code == b.exit_code == 0, (a.output, b.output)
    assert json.loads(a.stdout)["u_mean"] == json.loads(b.stdout)["u_mean"]
    assert json.loads((tmp_path / "o.json").read_text())["u_mean"] == json.loads(a.stdout)["u_mean"]
    warn = [x for x in b.stderr.splitlines() if "deprecated" in x]
    assert len(warn) == 2 and all(x.startswith("supermarket: warning:") for x in warn), b.stderr
    c = CliRunner().invoke(main, [*base, "--time", "200", "--burn-in-time", "5"])
    d = CliRunner().invoke(main, [*base, "--time", "200", "--burn-in", "5"])
    assert c.exit_code == d.exit_code == 0 and json.loads(c.stdout)["u_mean"] == json.loads(d.stdout)["u_mean"]


def test_ctrl_c_returns_partial_result():
    import signal
    import subprocess
    import sys
    import time

    # The child imports and compiles first, then says READY on stderr: the interrupt must
    # land in the measurement, not in the import (which under CPU load can take seconds).
    code = (
        "import sys; from supermarket.cli import main; from supermarket.simulation import simulate; "
        "simulate(1000, 2, 0.9, steps=10_000, burn_in=100, start='fixed-point'); "
        "sys.stderr.write('READY\\n'); sys.stderr.flush(); "
        "main(['simulate', '--n', '1000', '--d', '2', '--load', '0.9', "
        "'--steps', '1e12', '--burn-in', '1e5', '--json'])"
    )
    p = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    t0 = time.monotonic()
    line = b""
    while b"READY" not in line:
        line = p.stderr.readline()
        assert line or p.poll() is None, "child ended before READY"
        assert time.monotonic() - t0 < 300, "child never became ready"
    # the burn-in (1e5 events) takes milliseconds; 1.5 s later the run is measuring
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    # the partial result is printed, and the exit code still says the run was interrupted
    assert p.returncode == 130, err.decode()
    assert "supermarket: interrupted" in err.decode()
    d = json.loads(out)
    assert d["partial"] is True and 0 < d["events"] < 10**12
    assert abs(d["u_mean"][0] - 0.9) < 0.05


def test_time_horizon_and_burn_in_units():
    # with `time`, the burn-in is in time units too; discrete mode converts at n(1+λ) steps per unit
    r = simulate(100, 2, 0.9, time=100.0, burn_in=10.0, seed=1)
    assert r.steps == 19_000 and r.burn_in == 1_900 and math.isclose(r.sim_time, 100.0)
    r = simulate(100, 2, 0.9, time=100.0, burn_in=10.0, time_mode="continuous", seed=1)
    assert math.isclose(r.sim_time, 100.0)


def test_short_default_burn_in_from_empty_warns():
    # 1/μ_k ≈ 102 time units at n=1e6, d=100, λ=0.999 (slow mode, derived); default burn-in 0.05 time units
    with pytest.warns(RuntimeWarning, match="relaxation times"):
        simulate(10**6, 100, 0.999, steps=10**5, seed=0)
    import warnings as _w

    with _w.catch_warnings():
        # only the burn-in warning is an error here: these runs are far too short, and the
        # error analysis rightly says so (docs/model.md §9)
        _w.filterwarnings("error", message=".*relaxation times")
        simulate(10**6, 100, 0.999, steps=10**5, seed=0, start="fixed-point")
        simulate(10**6, 100, 0.999, steps=10**5, seed=0, burn_in=10**5)


# ----------------------------------------------------------------- error bars (docs/model.md §9)
def test_short_runs_end_and_bad_batch_counts_are_refused():
    # fewer steps than the default batch count: ends (it used to spin forever), batches shrink
    r = simulate(100, 2, 0.9, steps=10, seed=1, start="fixed-point")
    assert r.steps == 10 and r.batches <= 10 and not r.mean_queue_length_reliable
    r = simulate(100, 2, 0.9, steps=10, seed=1, time_mode="continuous", start="fixed-point")
    assert r.steps == 10
    with pytest.raises(ValueError, match="batches"):
        simulate(100, 2, 0.9, steps=100, batches=200)
    with pytest.raises(ValueError, match="record"):
        simulate(100, 2, 0.9, steps=10_000, record_every=1e-9, time_mode="continuous")
    with pytest.raises(ValueError, match="precision"):
        simulate(100, 2, 0.9, steps=10_000, precision=2.0)
    with pytest.raises(ValueError, match="max_steps"):
        simulate(100, 2, 0.9, steps=10_000, max_steps=10**6)


def test_cli_short_run_ends():
    r = CliRunner().invoke(main, ["simulate", "--steps", "10", "--n", "100", "--d", "2", "--load", "0.9"])
    assert r.exit_code == 0, r.output
    assert "too short to estimate" in r.output


def test_reliable_flags_and_json_fields():
    res = simulate(100, 2, 0.9, steps=400_000, seed=3, start="fixed-point")
    assert res.u_reliable[0] and res.mean_queue_length_reliable and res.reliable
    assert res.error_method == "blocking" and res.batches == 1024
    assert np.all(res.u_half_width[res.u_reliable] > 1.9 * res.u_stderr[res.u_reliable])
    assert res.u_n_eff[0] > 10
    assert [c["result"] for c in res.self_checks[:3]] == ["pass"] * 3
    d = json.loads(json.dumps(to_jsonable(res.to_dict()), allow_nan=False))
    for key in (
        "u_reliable",
        "u_half_width",
        "u_n_eff",
        "self_checks",
        "start_up",
        "notes",
        "reliable",
        "error_method",
    ):
        assert key in d
    assert d["u_reliable"][0] is True and d["mean_queue_length"]["reliable"] is True
    # a run far shorter than the correlation time says so instead of giving a number
    with pytest.warns(RuntimeWarning, match="too short to estimate"):
        short = simulate(10_000, 20, 0.99, steps=20_000, seed=3, start="fixed-point")
    assert not short.mean_queue_length_reliable and not short.reliable
    r = CliRunner().invoke(
        main,
        [
            "simulate",
            "--n",
            "10000",
            "--d",
            "20",
            "--load",
            "0.99",
            "--steps",
            "2e4",
            "--start",
            "fixed-point",
            "--json",
        ],
    )
    assert r.exit_code == 0 and json.loads(r.stdout)["mean_queue_length"]["reliable"] is False


def test_self_check_catches_start_up_bias():
    # from empty with no burn-in at n=1000, d=2, λ=0.99 (1/μ ≈ 233 time units) over 10^5
    # steps (50 time units): the queue length is still climbing; the run must not claim
    # reliable error bars (start not forgotten, a failed identity, or too short)
    with pytest.warns(RuntimeWarning):
        res = simulate(1000, 2, 0.99, steps=100_000, burn_in=0, seed=2)
    assert not res.reliable and res.notes


def test_replications_pool_or_use_the_spread():
    res = simulate(100, 2, 0.9, steps=200_000, seed=4, replications=3, start="fixed-point")
    assert res.error_method in ("pooled", "replications")
    means = np.array([r.u_mean[0] for r in res.per_replication])
    if res.error_method == "replications":
        assert math.isclose(res.u_stderr[0], means.std(ddof=1) / math.sqrt(3), rel_tol=1e-9)
    else:
        se = np.array([r.u_stderr[0] for r in res.per_replication])
        assert math.isclose(res.u_stderr[0], math.sqrt(np.sum(se**2)) / 3, rel_tol=0.05)


def test_precision_is_met_or_the_cap_is_reported():
    res = simulate(100, 2, 0.9, steps=100_000, seed=5, start="fixed-point", precision=0.01)
    pr = res.precision
    assert pr["met"] and pr["achieved"] <= 0.01 and res.mean_queue_length_reliable
    assert res.mean_queue_length_half_width / res.mean_queue_length <= 0.01
    assert res.steps >= 100_000
    with pytest.warns(RuntimeWarning, match="max_steps"):
        capped = simulate(100, 2, 0.9, steps=100_000, seed=5, start="fixed-point", precision=1e-5, max_steps=400_000)
    assert capped.precision["cap_hit"] and not capped.precision["met"] and capped.steps <= 400_000
    r = CliRunner().invoke(
        main,
        [
            "simulate",
            "--n",
            "100",
            "--d",
            "2",
            "--load",
            "0.9",
            "--steps",
            "1e5",
            "--start",
            "fixed-point",
            "--precision",
            "1e-5",
            "--max-steps",
            "4e5",
        ],
    )
    assert r.exit_code == 0 and "max steps reached" in r.output and "max_steps" in r.output


# ----------------------------------------------------------------- one result protocol
_FAST = dict(steps=40_000, seed=2, start="fixed-point")


def _same_but_speed(a: dict, b: dict):
    """Two result dicts agree on every number except the speed and wall time."""
    skip = {"wall_s", "events_per_second"}
    for key in set(a) | set(b):
        if key in skip:
            continue
        if key == "per_replication":
            assert len(a[key]) == len(b[key])
            for x, y in zip(a[key], b[key]):
                _same_but_speed(x, y)
            continue
        assert json.dumps(to_jsonable(a[key]), sort_keys=True) == json.dumps(to_jsonable(b[key]), sort_keys=True), key


def test_summary_is_what_the_cli_prints_and_has_the_response_times():
    res = simulate(60, 2, 0.7, **_FAST)
    r = CliRunner().invoke(
        main,
        [
            "simulate",
            "--n",
            "60",
            "--d",
            "2",
            "--load",
            "0.7",
            "--steps",
            "40000",
            "--seed",
            "2",
            "--start",
            "fixed-point",
        ],
    )
    assert r.exit_code == 0, r.output
    cli_lines = r.stdout.rstrip("\n").splitlines()
    lib_lines = res.summary().splitlines()
    # identical but for the last line (speed and wall time of this run)
    assert cli_lines[:-1] == lib_lines[:-1] and "events per second" in cli_lines[-1]
    text = r.stdout
    so, wa = res.response.sojourn, res.response.waiting
    assert "sojourn" in text and "waiting" in text
    for law in (so, wa):
        assert f"mean {law.mean:.6g} ± {law.stderr['mean']:.2g}" in text
        assert f"p99.9 {law.quantiles[0.999]:.6g} ± {law.stderr['quantiles'][0.999]:.2g}" in text
    # PASTA + FIFO: E[W] = E[J] = Σ_i P(J >= i), the tails being the time averages of P_i
    # (an exact identity of docs/model.md §10), and E[S] = E[W] + 1 (one exponential(1) service)
    assert math.isclose(wa.mean, float(np.sum(res.ud_mean)), rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(so.mean, wa.mean + 1.0, rel_tol=1e-12)
    # Little's law (an independent route: the queue length over λ) agrees within the errors
    assert abs(so.mean - res.mean_sojourn_time) < 5 * math.hypot(so.stderr["mean"], res.mean_sojourn_time_stderr)
    assert "start:" not in text  # no start note for a plain start


def test_summary_says_what_a_perfect_start_means():
    res = simulate(40, 2, 0.6, steps=20_000, seed=1, start="perfect")
    assert res.start_note and res.burn_in == 0
    assert f"start: {res.start_note}" in res.summary()


def test_to_frame_one_row_per_level():
    from supermarket import theory as th

    res = simulate(60, 3, 0.8, **_FAST)
    f = res.to_frame()
    L = len(res.u_mean)
    assert list(f["level"]) == list(range(1, L + 1))
    assert np.array_equal(f["u_mean"].to_numpy(), res.u_mean)
    assert np.array_equal(f["u_stderr"].to_numpy(), res.u_stderr, equal_nan=True)
    assert np.array_equal(f["u_half_width"].to_numpy(), res.u_half_width, equal_nan=True)
    assert list(f["u_reliable"]) == [bool(x) for x in res.u_reliable]
    # π(i) = λ^((d^i − 1)/(d − 1)) in closed form, not through the code under test
    assert np.allclose(f["fixed_point"], [0.8 ** ((3**i - 1) / 2) for i in range(1, L + 1)], rtol=1e-12, atol=0)
    # the identity column is λ·E[P_(i−1)] with P_0 = 1, of the plain estimates (a check, not the CV fit)
    assert f["identity"].iloc[0] == 0.8 and math.isclose(f["identity"].iloc[2], 0.8 * res.ud_mean_plain[1])
    k = res.k
    lin = 1 - np.asarray(th.linearised_q(3, "0.8", k))
    assert np.allclose(f["linearised"].iloc[:k], lin) and f["linearised"].iloc[k] == 0
    assert f["linearised"].iloc[k + 1 :].isna().all()
    assert set(f["n"]) == {60} and set(f["engine"]) == {"profile"} and set(f["replace"]) == {True}


def test_plot_has_a_response_time_panel(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = simulate(60, 2, 0.7, **_FAST)
    fig = res.plot(tmp_path / "p.png")
    assert len(fig.axes) == 3 and "response" in fig.axes[2].get_title()
    x, y = fig.axes[2].get_lines()[0].get_data()  # the sojourn survival P(S > t)
    assert np.allclose(y, 1 - res.response.sojourn_cdf(x))
    plt.close(fig)
    with pytest.warns(RuntimeWarning):
        over = simulate(30, 2, 1.1, steps=10_000, seed=1)
    fig = over.plot()
    assert len(fig.axes) == 2  # no equilibrium, no response times
    plt.close(fig)


def test_cli_cdf_json_and_text():
    n_points = 7
    r = CliRunner().invoke(
        main,
        [
            "simulate",
            "--n",
            "60",
            "--d",
            "2",
            "--load",
            "0.7",
            "--steps",
            "40000",
            "--seed",
            "2",
            "--start",
            "fixed-point",
            "--cdf",
            str(n_points),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    cdf = d["cdf"]
    t, s, w = (np.array(cdf[k]) for k in ("t", "sojourn", "waiting"))
    assert len(t) == len(s) == len(w) == n_points and t[0] == 0 and np.all(np.diff(t) > 0)
    assert math.isclose(
        t[-1],
        1.1 * d["sojourn"]["quantiles"]["0.999"]["mean"]
        if "0.999" in d["sojourn"]["quantiles"]
        else 1.1 * max(q["mean"] for q in d["sojourn"]["quantiles"].values()),
    )
    # laws: nondecreasing in [0, 1]; S = W + service, so P(S <= t) <= P(W <= t); S > 0 a.s.;
    # the waiting time's atom at 0 is P(J = 0) = 1 − E[P_1] (PASTA)
    for c in (s, w):
        assert np.all(np.diff(c) >= -1e-12) and np.all((c >= 0) & (c <= 1))
    assert np.all(s <= w + 1e-12) and s[0] == 0
    assert math.isclose(w[0], 1 - d["ud_mean"][0], rel_tol=1e-9)
    assert s[-1] > 0.999  # the grid ends beyond the p99.9
    # the text prints the same table
    r2 = CliRunner().invoke(
        main,
        [
            "simulate",
            "--n",
            "60",
            "--d",
            "2",
            "--load",
            "0.7",
            "--steps",
            "40000",
            "--seed",
            "2",
            "--start",
            "fixed-point",
            "--cdf",
            str(n_points),
        ],
    )
    assert r2.exit_code == 0, r2.output
    assert f"Response-time CDF on {n_points} points" in r2.stdout
    rows = [line.split() for line in r2.stdout.splitlines()]
    for i in range(n_points):
        assert [f"{t[i]:.6g}", f"{s[i]:.6g}", f"{w[i]:.6g}"] in rows, i


def test_cli_no_replace_and_replace_pair():
    base = [
        "simulate",
        "--n",
        "30",
        "--d",
        "3",
        "--load",
        "0.8",
        "--steps",
        "20000",
        "--seed",
        "1",
        "--start",
        "fixed-point",
        "--json",
    ]
    r_no = CliRunner().invoke(main, [*base, "--no-replace"])
    r_yes = CliRunner().invoke(main, [*base, "--replace"])
    r_def = CliRunner().invoke(main, base)
    for r in (r_no, r_yes, r_def):
        assert r.exit_code == 0, r.output
    no, yes, dflt = (json.loads(r.stdout) for r in (r_no, r_yes, r_def))
    assert no["system"]["replace"] is False and yes["system"]["replace"] is True and dflt["system"]["replace"] is True
    assert yes["u_mean"] == dflt["u_mean"] and no["u_mean"] != yes["u_mean"]
    lib = simulate(30, 3, 0.8, steps=20_000, seed=1, start="fixed-point", replace=False)
    assert no["u_mean"] == lib.u_mean.tolist()


@pytest.mark.parametrize(
    "args",
    [
        ["--cdf", "1"],
        ["--cdf", "4", "--load", "1.5"],
        ["--seed", "-1"],
        ["--replications", "0"],
        ["--workers", "0"],
        ["--replace", "--d", "0"],
        ["--scheduler", "not-an-address"],
        ["--scheduler", "tcp://127.0.0.1:1", "--workers", "2"],
        ["--scheduler", "tcp://127.0.0.1:1", "--precision", "0.01"],
        ["--timeout", "0"],
    ],
)
def test_cli_bad_input_is_one_line(args):
    r = CliRunner().invoke(main, ["simulate", "--n", "30", "--d", "2", "--steps", "1000", *args])
    assert r.exit_code == 2, (args, r.output)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("supermarket: error:"), (args, r.stderr)
    assert "Traceback" not in r.output


def test_client_refusals_are_clear():
    class NotAClient:
        pass

    with pytest.raises(TypeError, match="client"):
        simulate(30, 2, 0.5, steps=1000, client=NotAClient())

    class Fake:  # refused before it is used
        def submit(self, *a, **k):  # pragma: no cover - never called
            raise AssertionError("used")

    with pytest.raises(ValueError, match="precision"):
        simulate(30, 2, 0.5, steps=1000, precision=0.01, client=Fake())
    with pytest.raises(ValueError, match="workers"):
        simulate(30, 2, 0.5, steps=1000, workers=2, client=Fake())


def test_dask_cluster_gives_the_local_numbers(dask_cluster):
    """Each replication runs whole as one task on a real scheduler + worker: the result equals
    the local run's number for number (replication r = child r of the seed), through the
    library and through the CLI."""
    from supermarket.parallel import connect

    kw = dict(steps=30_000, seed=9, replications=3, start="perfect")
    local = simulate(40, 2, 0.8, workers=2, **kw)
    client = connect(dask_cluster, timeout=30)
    try:
        remote = simulate(40, 2, 0.8, client=client, **kw)
        queues = simulate(40, 2, 0.8, client=client, engine="queues", **kw)
    finally:
        client.close()
    _same_but_speed(local.to_dict(), remote.to_dict())
    assert (
        np.array_equal(local.u_mean, remote.u_mean)
        and local.response.sojourn.quantiles == remote.response.sojourn.quantiles
    )
    assert np.array_equal(simulate(40, 2, 0.8, engine="queues", workers=1, **kw).final_lengths, queues.final_lengths)
    args = [
        "simulate",
        "--n",
        "40",
        "--d",
        "3",
        "--load",
        "0.7",
        "--steps",
        "20000",
        "--seed",
        "4",
        "--replications",
        "2",
        "--start",
        "fixed-point",
        "--cdf",
        "5",
        "--json",
    ]
    a = CliRunner().invoke(main, args)
    b = CliRunner().invoke(main, [*args, "--scheduler", dask_cluster, "--timeout", "30"])
    assert a.exit_code == 0 and b.exit_code == 0, (a.output, b.output)
    da, db = json.loads(a.stdout), json.loads(b.stdout)
    _same_but_speed(da, db)
    assert da["cdf"] == db["cdf"] and da["u_mean"] == db["u_mean"]


def test_ctrl_c_on_a_cluster_keeps_the_finished_replications(monkeypatch):
    """Ctrl-C during a cluster run: the replications that finished whole make a partial
    result (their numbers are the local ones); none finished: KeyboardInterrupt."""
    from supermarket import parallel
    from supermarket import simulation as sim

    def one_then_interrupt(fn, tasks, *, on_result=None, **kw):
        on_result(1, fn(tasks[1]), None)  # replication 1 finished, then Ctrl-C
        raise KeyboardInterrupt

    class Fake:
        def submit(self, *a, **k):  # pragma: no cover - map_tasks is replaced
            raise AssertionError

    monkeypatch.setattr(parallel, "map_tasks", one_then_interrupt)
    kw = dict(steps=20_000, seed=5, replications=3, start="fixed-point")
    res = sim.simulate(40, 2, 0.6, client=Fake(), **kw)
    assert res.partial and res.replications == 1
    local = sim.simulate(40, 2, 0.6, workers=1, **kw)
    assert np.array_equal(res.u_mean, local.per_replication[1].u_mean)

    def interrupt_at_once(fn, tasks, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(parallel, "map_tasks", interrupt_at_once)
    with pytest.raises(KeyboardInterrupt):
        sim.simulate(40, 2, 0.6, client=Fake(), **kw)


def test_linearised_profile_not_shown_outside_its_regime():
    """At n = 1000, d = 2, λ = 0.9 the linearised profile has q̃_k > 1 (it would predict a
    negative 1 − q̃_4 = −0.187): the table shows no number there and says why; where it is
    valid (d = 20, λ = 0.99) the column holds 1 − q̃_i."""
    from supermarket import theory

    bad = simulate(1000, 2, 0.9, steps=20_000, seed=1, start="fixed-point", progress=False)
    assert not theory.linearisation_valid(2, 0.9)
    text = bad.summary()
    assert "-0.187" not in text and "linearised profile not shown" in text
    good = simulate(1000, 20, 0.99, steps=20_000, seed=1, start="fixed-point", progress=False)
    q = theory.linearised_q(20, 0.99)
    assert np.allclose(good._linearised(len(good.u_mean))[: len(q)], 1 - q)


def test_trajectory_to_frame_is_tidy():
    """One row per (record, level); the u column reproduces the recorded array."""
    r = simulate(50, 2, 0.8, steps=20_000, record_every=1000, seed=1, progress=False)
    tr = r.trajectory
    f = tr.to_frame()
    assert len(f) == tr.u.size and set(f.columns) == {"t", "level", "u", "max", "total"}
    assert np.array_equal(f["u"].to_numpy().reshape(tr.u.shape), tr.u)
    assert f"{len(tr.t)} records" in tr.summary()


# --------------------------------------------------------------------------- error-bar rules (docs/model.md §9)
def test_blocks_must_span_the_slow_mode_in_both_time_modes():
    """Heavy traffic n = 1000, d = 50, λ = 0.99 (1/μ = 51 time units): 2e6 steps span about
    20 relaxation times, too short whatever the plateau tests see on shorter blocks (they
    called half such runs reliable, with errors 16 % small); 8e6 steps are enough.  The
    minimum block is in the units of the batches: steps in discrete time, time otherwise."""
    import supermarket.simulation.estimate as es
    from supermarket import theory

    relax = es.relaxation_time(50, 0.99)
    assert abs(relax - 1 / theory.slow_mode(50, 0.99).mu) < 1e-12
    assert abs(es.relaxation_time(1, 0.81) - 1 / (1 - 0.9) ** 2) < 1e-9  # M/M/1: 1/(1 − √λ)²
    for mode in ("discrete", "continuous"):
        short = simulate(1000, 50, 0.99, steps=2_000_000, start="fixed-point", seed=3, time_mode=mode, progress=False)
        assert not short.u_reliable[0] and "known correlation time" in short.u_note[0], (mode, short.u_note)
        # 1024 batches of 1953 steps (0.98 time units): blocks of ⌈51.5/0.98⌉ = 53 batches at least
        assert "of at least 53 measurements" in short.u_note[0], short.u_note[0]
        # its response-time errors are unknown too (NaN), not a confident number
        assert math.isnan(short.sojourn.stderr["mean"]) and math.isnan(short.sojourn.stderr["quantiles"][0.99])
        long = simulate(1000, 50, 0.99, steps=8_000_000, start="fixed-point", seed=3, time_mode=mode, progress=False)
        assert long.u_reliable[0] and long.mean_queue_length_reliable, (mode, long.u_note)
        assert abs(long.u_mean[0] - 0.99) <= long.u_half_width[0] * 1.5  # E[u_1] = λ
        assert long.sojourn.stderr["mean"] > 0


def test_self_checks_use_the_t_threshold(monkeypatch):
    """A failed identity unmarks every error bar; the verdict compares |z| with
    self_check_threshold(dof) (4.0 for dof = ∞, 6.6 for 10: see its doctest)."""
    import supermarket.simulation.estimate as es

    kw = dict(steps=400_000, start="fixed-point", seed=1, progress=False)
    ok = simulate(100, 2, 0.9, **kw)
    assert ok.u_reliable[0] and all(c["threshold"] >= 4.0 for c in ok.self_checks)
    monkeypatch.setattr(es, "self_check_threshold", lambda dof: 0.0)  # every conclusive check fails
    bad = simulate(100, 2, 0.9, **kw)
    assert any(c["result"] == "fail" for c in bad.self_checks) and not bad.u_reliable.any()
