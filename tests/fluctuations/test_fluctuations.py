"""Tests of the paper-002 fluctuations (docs/model.md §8; the limits are derived).

Independent facts checked: the regime-(a) closed form solves the Lyapunov equation of the
linear SDE; the d = 1 chain is n independent M/M/1 queues (exact Bernoulli moments); the
flow-balance identity E G_1 = λ (so E Z_1 = 0 in (a) and E Q = −ζ in (b), (c)); the
finite-n LNA of the mean-field module; the fixed point π(i) = λ^{(d^i−1)/(d−1)}.
Statistical checks use fixed seeds and 4.5 standard errors.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import warnings

import numpy as np
import pytest
from scipy.linalg import solve_continuous_lyapunov

from supermarket import fluctuations as fl
from supermarket.theory import fixed_point

TOL = 4.5


def quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fl.RegimeWarning)
        return fn(*a, **k)


def assert_close(est: fl.Moments, ref: fl.Moments, keys=fl.KEYS, tol=TOL):
    for k in keys:
        se2 = est.stderr[k] ** 2 + ((ref.stderr or {}).get(k, 0.0) ** 2)
        diff = getattr(est, k) - getattr(ref, k)
        assert abs(diff) <= tol * math.sqrt(se2), (k, getattr(est, k), getattr(ref, k), math.sqrt(se2))


# ----------------------------------------------------------------- closed forms, centre
@pytest.mark.parametrize("kappa", [0.1, 1.0, 3.0, 25.0])
def test_closed_form_a_solves_lyapunov(kappa):
    A = np.array([[-(1 + kappa), 1.0], [kappa, -1.0]])
    S = solve_continuous_lyapunov(A, -np.diag([2.0, 0.0]))
    m = fl.limit_closed_form(kappa)
    np.testing.assert_allclose(S, [[m.var_z1, m.cov_z1z2], [m.cov_z1z2, m.var_z2]], rtol=1e-12)


def test_centre_with_replacement_is_the_fixed_point():
    x = fl.centre(10**6, 3, 0.9, replace=True, levels=5)
    np.testing.assert_allclose(x, fixed_point(3, 0.9, 5), rtol=1e-12)


def test_centre_without_replacement_matches_meanfield():
    from supermarket.meanfield import near_equilibrium_centre

    x = fl.centre(1000, 7, 0.8, replace=False, levels=4)
    np.testing.assert_allclose(x, near_equilibrium_centre(1000, 7, 0.8, replace=False, levels=4), rtol=1e-9)
    # without replacement the sampled queues are distinct: P_n(x) < x^d
    assert x[1] < 0.8**8


def test_parametrisations():
    p = quiet(fl.regime_a, 10**4, 2.0, d=10)
    assert p.d == 10 and math.isclose(p.d * p.lam**p.d, 2.0, rel_tol=1e-12)
    assert quiet(fl.regime_a, 10**8, 1.0, theta=0.25).d == 100
    b = quiet(fl.regime_b, 10**4, 1.5, 0.7)
    assert b.d == 150 and math.isclose(math.sqrt(b.n) * b.c_n**b.d, 1.0, rel_tol=1e-12)
    assert math.isclose(b.zeta_n, 0.7, rel_tol=1e-9)
    c = quiet(fl.regime_c, 10**4, 2.0, centring="one")
    assert c.d == 10**4 and math.isclose(c.lam, 0.98) and c.m == (1.0, 0.0)
    z1, z2 = fl.scaled(c, 0.97, 0.01)
    assert math.isclose(z1, -3.0) and math.isclose(z2, 1.0)


# ----------------------------------------------------------------- bad input
def test_bad_input_raises_naming_parameter():
    with pytest.raises(ValueError, match="kappa"):
        fl.regime_a(10**4, 10.0, d=10)  # κ >= d gives λ >= 1
    with pytest.raises(ValueError, match="kappa"):
        fl.regime_a(10**4, -1.0)
    with pytest.raises(ValueError, match="theta"):
        fl.regime_a(10**4, 1.0, theta=0.5)
    with pytest.raises(ValueError, match="zeta"):
        fl.regime_b(10**4, 1.0, 200.0)
    with pytest.raises(ValueError, match="c must"):
        fl.regime_b(100, 0.01, 0.0)
    with pytest.raises(ValueError, match="zeta must be > 0"):
        fl.regime_c(10**4, 0.0)
    with pytest.raises(ValueError, match="zeta must be > 0"):
        fl.limit_sde("c", zeta=-1.0)
    with pytest.raises(ValueError, match="d must"):
        fl.regime_c(100, 1.0, d=101)
    with pytest.raises(TypeError, match="n must be an integer"):
        fl.regime_a(1e4, 1.0)
    with pytest.raises(ValueError, match="regime"):
        fl.regime_params("d", 100)
    with pytest.raises(ValueError, match="regime \\(a\\) takes kappa"):
        fl.regime_params("a", 100, zeta=1.0)
    with pytest.raises(ValueError, match="reflection"):
        fl.limit_sde("c", zeta=1.0, reflection="mirror")


def test_small_d_one_minus_lambda_warns_and_names_condition():
    with pytest.warns(fl.RegimeWarning, match=r"d_n\(1−λ_n\) large"):
        p = fl.regime_a(10**4, 1.0, d=10)
    assert any("d_n(1−λ_n)" in w for w in p.warnings)
    with pytest.warns(fl.RegimeWarning) as rec:
        fl.regime_c(10**4, 1.0, d=200)  # d/√n = 2 and d(1−λ) = 6.6: both conditions fail
    msgs = [str(w.message) for w in rec]
    assert any("d_n/√n large" in m for m in msgs) and any("d_n(1−λ_n) large" in m for m in msgs)
    # deep in regime (a) with d(1−λ) large: only the conditions that fail are reported
    p = quiet(fl.regime_a, 10**12, 1.0, d=10**5)
    assert p.d_one_minus_lambda > 10 and not any("d_n(1−λ_n)" in w for w in p.warnings)


# ----------------------------------------------------------------- the exact chain
@pytest.mark.parametrize("replace", [False, True])
def test_d1_chain_is_independent_mm1(replace):
    # d = 1: n independent M/M/1 queues, so 1{x >= 1}, 1{x >= 2} are Bernoulli(λ), (λ²):
    # Var Z1 = λ(1−λ), Var Z2 = λ²(1−λ²), Cov = λ²(1−λ); here Q = √n(G1 − 1), Y = √n G2.
    p = quiet(fl.regime_c, 100, 5.0, d=1, centring="one", replace=replace)
    lam = p.lam
    assert lam == 0.5
    sim = fl.simulate_fluctuations(p, time=3000.0, burn_in=20.0, replications=2, seed=7, batches=20)
    ref = fl.Moments(
        mean_z1=-5.0,
        mean_z2=10 * lam**2,
        var_z1=lam * (1 - lam),
        var_z2=lam**2 * (1 - lam**2),
        cov_z1z2=lam**2 * (1 - lam),
    )
    assert_close(sim.moments, ref)


def test_kernel_agrees_with_simulate_profile_engine():
    # another implementation of the same chain: simulate(engine="profile", continuous time)
    from supermarket.simulation import simulate

    p = quiet(fl.regime_b, 400, 1.0, 0.5)  # d = 20, without replacement
    r = simulate(
        p.n,
        p.d,
        p.lam,
        time=3000.0,
        burn_in=50.0,
        engine="profile",
        replace=False,
        time_mode="continuous",
        record_every=0.05,
        record_levels=2,
        seed=5,
    )
    z1, z2 = fl.scaled(p, r.trajectory.u[:, 0], r.trajectory.u[:, 1])
    blocks = np.array(
        [
            [a.mean(), b.mean(), a.var(), b.var(), np.mean((a - a.mean()) * (b - b.mean()))]
            for a, b in zip(np.array_split(z1, 20), np.array_split(z2, 20))
        ]
    )
    other = fl.Moments(*blocks.mean(axis=0), stderr=dict(zip(fl.KEYS, blocks.std(axis=0, ddof=1) / math.sqrt(20))))
    sim = fl.simulate_fluctuations(p, time=3000.0, replications=2, seed=1)
    assert_close(sim.moments, other)


@pytest.mark.parametrize("replace", [False, True])
def test_computed_log_p_equals_table(replace, monkeypatch):
    # large n computes log P on the fly instead of tabulating it: same chain, same numbers
    p = quiet(fl.regime_b, 900, 1.0, 0.5, replace=replace)
    a = fl.simulate_fluctuations(p, time=10.0, burn_in=1.0, seed=3)
    monkeypatch.setattr(fl.chain, "TABLE_MAX_N", 10)  # where simulate_fluctuations reads it
    b = fl.simulate_fluctuations(p, time=10.0, burn_in=1.0, seed=3)
    assert a.events == b.events
    np.testing.assert_allclose(b.grid, a.grid, rtol=0, atol=1e-12)


def test_results_do_not_depend_on_workers():
    p = quiet(fl.regime_b, 400, 1.0, 0.5)
    a = fl.simulate_fluctuations(p, time=20.0, replications=3, seed=11, workers=1)
    b = fl.simulate_fluctuations(p, time=20.0, replications=3, seed=11, workers=3)
    assert a.moments == b.moments and np.array_equal(a.grid, b.grid)
    s1 = fl.limit_sde("b", c=1.0, zeta=0.5, paths=70, time=5.0, burn_in=1.0, seed=3, workers=1)
    s2 = fl.limit_sde("b", c=1.0, zeta=0.5, paths=70, time=5.0, burn_in=1.0, seed=3, workers=2)
    assert s1.moments == s2.moments


def test_regime_a_matches_finite_n_lna():
    # the case: κ = 1, n = 10^4, d = 10 (d(1−λ) ≈ 2: warns; the LNA keeps level-2 noise)
    p = quiet(fl.regime_a, 10**4, 1.0, d=10)
    sim = fl.simulate_fluctuations(p, time=400.0, replications=4, seed=2)
    lna = fl.lna_moments(p)
    assert_close(sim.moments, lna, keys=("var_z1", "var_z2", "cov_z1z2"))
    # E G1 = λ exactly (docs/model.md §7), so E Z1 = 0 exactly
    assert abs(sim.moments.mean_z1) <= TOL * sim.moments.stderr["mean_z1"]
    # the autocorrelation of Z1 follows the LNA's e^{Jτ}W
    lags = sim.lags[[10, 20, 40]]
    ref1, _ = fl.lna_acf(p, lags)
    got = sim.acf_z1[[10, 20, 40]]
    se = sim.acf_z1_stderr[[10, 20, 40]]
    assert np.all(np.abs(got - ref1) <= TOL * se), (got, ref1, se)


def test_flow_balance_mean_q_regime_b_sim_and_sde():
    p = quiet(fl.regime_b, 10**4, 1.0, 0.5)
    sim = fl.simulate_fluctuations(p, time=400.0, replications=2, seed=4)
    assert abs(sim.moments.mean_z1 + 0.5) <= TOL * sim.moments.stderr["mean_z1"]
    sde = fl.limit_for(p, paths=128, time=50.0, burn_in=10.0, dt=2e-3, seed=5)
    assert abs(sde.moments.mean_z1 + 0.5) <= TOL * sde.moments.stderr["mean_z1"]


@pytest.mark.parametrize("reflection", ["projection", "bridge"])
def test_reflected_sde_stays_below_zero_and_balances_flow(reflection):
    for zeta in (0.3, 1.0):  # small ζ pushes hard against the boundary
        sde = fl.limit_sde("c", zeta=zeta, paths=64, time=60.0, dt=2e-3, seed=1, reflection=reflection)
        assert sde.max_q <= 0.0
        assert np.all(sde.grid[:, :, 0] <= 0.0)
        assert abs(sde.moments.mean_z1 + zeta) <= TOL * sde.moments.stderr["mean_z1"]


def test_flow_balance_mean_q_regime_c_sim():
    p = quiet(fl.regime_c, 2500, 1.0)  # d = n, Q = √n(G1 − c_n)
    sim = fl.simulate_fluctuations(p, time=600.0, replications=2, seed=6)
    assert abs(sim.moments.mean_z1 + 1.0) <= TOL * sim.moments.stderr["mean_z1"]


def test_sde_a_matches_closed_form_and_acf():
    sde = fl.limit_sde("a", kappa=1.0, paths=256, time=60.0, burn_in=10.0, dt=1e-3, seed=8, record_paths=32)
    assert_close(sde.moments, fl.limit_closed_form(1.0))
    idx = [10, 20, 40]
    r1, r2 = fl.limit_acf_a(1.0, sde.lags[idx])
    assert np.all(np.abs(sde.acf_z1[idx] - r1) <= TOL * sde.acf_z1_stderr[idx])
    assert np.all(np.abs(sde.acf_z2[idx] - r2) <= TOL * sde.acf_z2_stderr[idx])


# ----------------------------------------------------------------- CLI
def test_cli_json_and_errors():
    from click.testing import CliRunner

    from supermarket.cli import main

    r = CliRunner().invoke(
        main,
        [
            "fluctuations",
            "--regime",
            "a",
            "--n",
            "1e3",
            "--kappa",
            "1",
            "--time",
            "20",
            "--sde-paths",
            "32",
            "--sde-time",
            "5",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout if hasattr(r, "stdout") else r.output)
    for part in ("sim", "limit", "lna"):
        for k in fl.KEYS:
            assert k in out[part] and k in out[part]["stderr"] if out[part]["stderr"] else k in out[part]
    assert out["d_n"] == 5 and "derived" in out["derived"].lower()
    assert any("d_n(1−λ_n)" in w for w in out["warnings"])
    bad = CliRunner().invoke(main, ["fluctuations", "--regime", "a", "--n", "1e4", "--kappa", "50", "--d", "10"])
    assert bad.exit_code == 2
    bad = CliRunner().invoke(main, ["fluctuations", "--regime", "b", "--n", "1e4", "--kappa", "1"])
    assert bad.exit_code == 2


def test_regime_c_lna_is_marked_does_not_apply_and_not_scored():
    """Issue 19: regime (c) scored the chain against a linear-noise row whose second coordinate
    is identically 0 (x^n_2 = 0 at d_n = n: one level kept).  It is marked, not scored."""
    from click.testing import CliRunner

    from supermarket.cli import main

    p = quiet(fl.regime_c, 400, 1.0)
    lna = fl.lna_moments(p)
    assert lna.mean_z2 == lna.var_z2 == lna.cov_z1z2 == 0.0  # the fact the rule rests on
    assert fl.comparison.lna_does_not_apply(lna).startswith("does not apply")
    assert fl.comparison.lna_does_not_apply(fl.lna_moments(quiet(fl.regime_a, 10**3, 1.0))) == ""
    args = [
        "fluctuations",
        "--regime",
        "c",
        "--n",
        "400",
        "--time",
        "300",
        "--replications",
        "2",
        "--sde-paths",
        "16",
        "--sde-time",
        "5",
        "--dt",
        "0.01",
        "--no-prelimit",
        "--seed",
        "3",
    ]
    out = json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout)
    assert out["lna_applies"] is False and out["lna_note"].startswith("does not apply")
    assert out["z_scores"] is None or "lna" not in out["z_scores"]
    text = CliRunner().invoke(main, args).output
    assert "does not apply" in text and "z-scores vs lna" not in text
    # regime (a): the LNA applies and is scored
    r = CliRunner().invoke(
        main,
        [
            "fluctuations",
            "--regime",
            "a",
            "--n",
            "1e3",
            "--time",
            "400",
            "--replications",
            "2",
            "--sde-paths",
            "16",
            "--sde-time",
            "5",
            "--dt",
            "0.01",
            "--no-prelimit",
            "--json",
        ],
    )
    out = json.loads(r.stdout)
    assert out["lna_applies"] is True


def test_too_short_run_shows_no_plus_minus_and_advice_names_real_options():
    """Issue 19: a run too short to know its error printed ± and z-scores, and its advice named a
    --batches option the command does not have.  Now: no ± on the chain's row, no z-scores, and
    the advice names --time with a value that has margin over what the estimated τ needs."""
    from click.testing import CliRunner

    from supermarket.cli import main
    from supermarket.fluctuations.moments import ADVICE_MARGIN, BATCH_TAU_FACTOR

    args = [
        "fluctuations",
        "--regime",
        "a",
        "--n",
        "1e3",
        "--time",
        "10",
        "--replications",
        "2",
        "--sde-paths",
        "16",
        "--sde-time",
        "5",
        "--dt",
        "0.01",
        "--no-prelimit",
    ]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    chain = next(x for x in r.output.splitlines() if x.startswith("chain (simulated)"))
    assert "±" not in chain and "z-scores vs" not in r.output and "--batches" not in r.output
    advice = next(x for x in r.output.splitlines() if x.startswith("advice:"))
    opts = {o for prm in main.get_command(None, "fluctuations").params for o in prm.opts + prm.secondary_opts}
    named = set(re.findall(r"--[a-z][a-z-]*", advice))
    assert named and named <= opts, (named, advice)
    out = json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout)
    m = out["sim"]
    assert m["error_bars_adequate"] is False and out["z_scores"] is None
    need = float(re.search(r"--time ([0-9.e+]+)", advice).group(1))
    assert need == m["time_needed"]
    if m["tau_int"] is not None:
        assert need >= max(ADVICE_MARGIN * BATCH_TAU_FACTOR * m["tau_int"] * 10, 4 * 10)
    else:
        assert need == 100


# ----------------------------------------------------------------- slow
@pytest.mark.slow
@pytest.mark.parametrize("regime", ["a", "b", "c"])
def test_default_options_answer_with_error_bars(regime):
    """Issue 19: with its default options every regime ends with error bars the chain trusts
    (--time 2000, 4 replications: batches of 200 time units against 10 τ ≈ 55–70), in about a
    minute on 2 shared cores."""
    from click.testing import CliRunner

    from supermarket.cli import main

    out = json.loads(CliRunner().invoke(main, ["fluctuations", "--regime", regime, "--json"]).stdout)
    assert out["sim"]["error_bars_adequate"] is True, out["sim"].get("error_bars_note")
    assert out["z_scores"] is not None


@pytest.mark.slow
def test_following_the_advice_gives_error_bars():
    from click.testing import CliRunner

    from supermarket.cli import main

    args = [
        "fluctuations",
        "--regime",
        "c",
        "--n",
        "400",
        "--replications",
        "2",
        "--sde-paths",
        "16",
        "--sde-time",
        "5",
        "--dt",
        "0.01",
        "--no-prelimit",
        "--json",
    ]
    first = json.loads(CliRunner().invoke(main, [*args, "--time", "170"]).stdout)["sim"]
    assert first["error_bars_adequate"] is False
    again = json.loads(CliRunner().invoke(main, [*args, "--time", f"{first['time_needed']:g}"]).stdout)["sim"]
    assert again["error_bars_adequate"] is True, again.get("error_bars_note")


def test_lna_tends_to_limit_closed_form():
    # the finite-n LNA (another method) tends to the derived limit 2/(2+κ) as d_n grows
    vals = [fl.lna_moments(quiet(fl.regime_a, n, 1.0, d=d)) for n, d in ((10**4, 10), (10**8, 100), (10**16, 10**4))]
    gaps = [abs(m.var_z1 - 2 / 3) for m in vals]
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 0.02


@pytest.mark.slow
def test_regime_a_sim_approaches_limit_as_n_grows():
    limit = fl.limit_closed_form(1.0).var_z1
    rows = []
    for n, seed in ((10**3, 1), (10**5, 2)):
        p = quiet(fl.regime_a, n, 1.0)  # d = ⌊n^{1/4}⌋ = 5, 17
        sim = fl.simulate_fluctuations(p, time=2000.0, replications=2, seed=seed)
        assert_close(sim.moments, fl.lna_moments(p), keys=("var_z1", "var_z2", "cov_z1z2"))
        rows.append((sim.moments.var_z1, sim.moments.stderr["var_z1"]))
    (v1, s1), (v2, s2) = rows
    assert v1 + TOL * math.hypot(s1, s2) < v2 < limit + TOL * s2  # closer to 2/(2+κ), from below


@pytest.mark.slow
def test_jsq_matches_reflected_diffusion():
    beta = 1.0
    p = quiet(fl.regime_c, 10**4, beta, centring="one")  # d = n: JSQ; √n(1−λ) = β
    sim = fl.simulate_fluctuations(p, time=4000.0, replications=4, seed=9, batches=10)
    sde = fl.limit_sde("c", zeta=beta, paths=256, time=200.0, burn_in=30.0, dt=5e-4, seed=10, reflection="bridge")
    assert_close(sim.moments, sde.moments)


@pytest.mark.slow
def test_scaling_n_to_the_minus_half():
    """sd(G_1) falls like n^{-1/2} while √n·sd(G_1) matches the finite-n LNA, on runs long
    enough (batches >= 10 autocorrelation times) for their error bars to be trusted.  At
    time = 150 the same rows are flagged "too short to know" (their stated errors were up to
    5.7 times too small), which the short run below checks."""
    short = fl.scaling((10**3, 10**4), time=150.0, seed=3)
    assert all(r.error_bars_adequate is False and "too short" in r.summary() for r in short)
    rows = fl.scaling((10**3, 10**4, 10**5), time=800.0, seed=3)
    assert all(r.error_bars_adequate for r in rows), [r.note for r in rows]
    sds = [r.sd_g1 for r in rows]
    assert all(a > 2.5 * b for a, b in itertools.pairwise(sds))  # falls like n^{-1/2} (factor √10)
    for r in rows:  # while √n sd(G1) stays at the LNA's order-one value
        assert abs(r.sqrt_n_sd_g1 - r.lna_sqrt_n_sd_g1) <= TOL * r.sqrt_n_sd_g1_stderr


# ----------------------------------------------------------------- result protocol
def test_result_protocol_of_every_fluctuation_result(tmp_path):
    """to_dict (strict JSON), to_frame (tidy, the same numbers), summary (the numbers), plot."""
    from supermarket.jsonable import to_jsonable

    p = quiet(fl.regime_a, 400, 1.0, d=2)
    sim = fl.simulate_fluctuations(p, time=20.0, burn_in=2.0, grid_dt=0.5, max_lag=2.0, workers=1, seed=4)
    lim = fl.limit_sde("c", zeta=1.0, paths=4, time=2.0, burn_in=0.5, dt=0.01, record_paths=2, grid_dt=0.1)
    pre = fl.prelimit_sde(p, paths=4, time=2.0, burn_in=0.5, dt=0.01, record_paths=0)
    scale = fl.ScalingResult(
        (
            fl.ScalingRow(100, 3, 0.9, 0.06, 0.01, 0.6, 0.1, None),
            fl.ScalingRow(400, 4, 0.9, 0.03, 0.005, 0.6, 0.1, 0.62),
        )
    )
    for res in (p, sim, lim, pre, sim.moments, fl.limit_closed_form(2.0), scale, scale[0]):
        json.dumps(to_jsonable(res.to_dict()), allow_nan=False)
        assert len(res.to_frame()) >= 1
        assert isinstance(res.summary(), str) and res.summary()
    for res in (sim, lim):
        df = res.to_frame()
        for k in fl.KEYS:  # the frame carries the result's own numbers and standard errors
            row = df[df["moment"] == k].iloc[0]
            assert row["value"] == getattr(res.moments, k)
            assert row["stderr"] == res.moments.stderr[k]
        assert f"{res.moments.var_z1:.6g}" in res.summary()
        acf = res.acf_frame()
        assert set(acf["coordinate"]) == {"z1", "z2"} and len(acf) == 2 * res.lags.size
        fig = res.plot(tmp_path / f"{type(res).__name__}.png")
        assert fig.axes and (tmp_path / f"{type(res).__name__}.png").stat().st_size > 0
    assert "limit diffusion (c)" in lim.summary() and "pushing rate" in lim.summary()
    assert "pre-limit diffusion (a)" in pre.summary()
    # regime conditions: one row each, and the summary says which fail
    df = p.to_frame()
    assert list(df["condition"]) == [c.name for c in p.conditions]
    assert list(df["holds"]) == [c.holds for c in p.conditions]
    assert p.summary().count("FAILS") == sum(not c.holds for c in p.conditions)
    # the scaling table is the rows' numbers; a sequence as before
    assert scale.to_frame()["n"].tolist() == [100, 400] and [r.n for r in scale] == [100, 400]
    assert "—" in scale.summary() and "0.62" in scale.summary()
    assert scale.plot(tmp_path / "s.png").axes


def test_standard_errors_are_the_replication_estimator_of_stats():
    """The moments' batch-means errors, the pushing-rate errors and mixing's t-interval are
    supermarket.stats.replication_error on the same numbers: equal to s/√B (ddof=1) and
    t_{B−1} up to rounding (the numbers published before the move), and NaN-free."""
    from scipy import stats as st

    from supermarket.mixing import coalescence_time as mixing_coalescence
    from supermarket.stats import mean_stderr, replication_error

    rng = np.random.default_rng(7)
    avg = rng.normal(size=(12, 5)) + np.array([0.0, 1.0, 2.0, 3.0, 0.5])
    m = fl.moments._moments_from_blocks(avg)
    mu = avg.mean(axis=0)
    pseudo_var1 = avg[:, 2] - 2 * mu[0] * avg[:, 0]
    assert m.stderr["var_z1"] == pytest.approx(np.std(pseudo_var1, ddof=1) / math.sqrt(12), rel=1e-12)
    assert m.stderr["mean_z2"] == replication_error(avg[:, 1]).stderr
    # 2-d (column-wise) and 1-d forms of mean_stderr agree with replication_error
    mm, se = mean_stderr(avg, axis=0)
    for j in range(5):
        e = replication_error(avg[:, j])
        assert mm[j] == pytest.approx(e.mean, rel=1e-14) and se[j] == pytest.approx(e.stderr, rel=1e-12)
    assert mean_stderr([1.0, math.nan])[0] != mean_stderr([1.0, math.nan])[0]  # NaN propagates, no raise
    # mixing: mean and t-interval as before (t_{R-1} · s/√R)
    taus = rng.integers(10, 1000, size=9).astype(float)
    out = mixing_coalescence._summary(taus, budget=10**6)
    half = st.t.ppf(0.975, 8) * taus.std(ddof=1) / 3.0
    assert out["mean"] == taus.mean()
    assert out["ci"][1] == pytest.approx(taus.mean() + half, rel=1e-12)


def test_cli_n_below_4_names_the_option():
    # issue 19 item 7: "--n 1" was refused with the Python name ("n must be …"); the CLI's
    # bound is the library's
    from click.testing import CliRunner

    from supermarket.cli import fluctuations as cli_fl
    from supermarket.cli import main
    from supermarket.fluctuations.regimes import MAX_REGIME_N

    assert cli_fl.MAX_REGIME_N == MAX_REGIME_N
    r = CliRunner().invoke(main, ["fluctuations", "--regime", "a", "--n", "1"])
    assert r.exit_code == 2 and "Invalid value for '--n': --n must be an integer in [4," in r.output


def test_too_short_run_has_no_error_bar_in_python_or_json():
    """Issue 19 item 7 (one rule everywhere): docs/fluctuations.md's `compare(p, time=400)`
    returned numbers from `z_scores()` and `to_dict()["sim"]["stderr"]` although the run says
    it is too short to know them; now NaN (Python) and null (JSON), the reason beside them."""
    p = fl.regime_a(1000, kappa=1.0, warn=False)
    cmp = fl.compare(p, time=10, replications=2, sde_paths=16, sde_time=5, dt=0.01, prelimit=False, workers=1)
    assert cmp.sim.moments.adequate is False
    assert all(math.isnan(v) for row in cmp.z_scores().values() for v in row.values())
    sim = cmp.to_dict()["sim"]
    assert set(sim["stderr"]) == set(fl.KEYS) and all(v is None for v in sim["stderr"].values())
    assert "too short to know" in sim["error_bars_note"]
    # the raw numbers stay on the object for who wants to look (moments.stderr), with the flag
    assert all(math.isfinite(v) for v in cmp.sim.moments.stderr.values())
