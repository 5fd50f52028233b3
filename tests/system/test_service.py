"""Service laws and server classes (supermarket.system.service): each law against its textbook
moments and distribution function, the compiled sampler against scipy's distributions,
the two-moment phase-type fit against its targets, and bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from numba import njit
from scipy import stats as sst

from supermarket.engines.events import sample_service
from supermarket.engines.rng import new_state
from supermarket.system.service import fit_phase_type, parse_server_classes, parse_service, phase_type


@njit(cache=True)
def _draw(seed_state, code, par, tab, size):
    out = np.empty(size)
    for i in range(size):
        out[i] = sample_service(seed_state, code, par, tab)
    return out


def compiled_samples(spec, size=40_000, seed=7):
    law = parse_service(spec)
    return _draw(new_state(seed), law.code, np.asarray(law.params), law.ph_table(), size)


def ph_moments(alpha, T):
    """E[S] and E[S²] of PH(α, T): ``k! α(−T)^{-k} 1`` [classical]."""
    x = np.linalg.solve(-np.asarray(T), np.ones(len(alpha)))
    return float(alpha @ x), 2.0 * float(alpha @ np.linalg.solve(-np.asarray(T), x))


# ------------------------------------------------------------------- laws: closed forms
def test_hyperexp_is_balanced_means_with_the_asked_scv():
    for c2 in (1.5, 4.0, 10.0):
        law = parse_service(f"hyperexp:{c2}")
        p, r1, r2 = law.params
        assert p / r1 == pytest.approx(0.5) and (1 - p) / r2 == pytest.approx(0.5)  # each phase half the mean
        m2 = 2 * (p / r1**2 + (1 - p) / r2**2)  # E[S²] of a mixture of exponentials
        assert m2 - 1 == pytest.approx(c2, rel=1e-12)
        assert law.scv == c2


@pytest.mark.parametrize("spec,scv", [("exp", 1.0), ("erlang:3", 1 / 3), ("hyperexp:4", 4.0)])
def test_phase_type_representation_has_mean_1_and_the_scv(spec, scv):
    law = parse_service(spec)
    m1, m2 = ph_moments(law.alpha, law.T)
    assert m1 == pytest.approx(1.0, abs=1e-6)
    assert m2 - 1 == pytest.approx(scv, abs=1e-5)


def test_lognormal_and_pareto_parameters():
    ln = parse_service("lognormal:3")
    mu, sigma = ln.params
    assert math.exp(mu + sigma**2 / 2) == pytest.approx(1.0)  # E[S]
    assert math.exp(sigma**2) - 1 == pytest.approx(3.0)  # SCV of a lognormal
    pa = parse_service("pareto:3")
    a, xm = pa.params
    assert a * xm / (a - 1) == pytest.approx(1.0)  # mean of Pareto(α, x_m)
    assert pa.scv == pytest.approx(1 / 3)  # Var = x_m² α/((α−1)²(α−2)) = 1/(α(α−2))
    assert parse_service("pareto:2").scv == math.inf and "infinite variance" in parse_service("pareto:2").note
    assert parse_service("deterministic").scv == 0.0


# ------------------------------------------------------------- the compiled sampler
@pytest.mark.parametrize(
    "spec,dist",
    [
        ("exp", sst.expon()),
        ("erlang:4", sst.gamma(4, scale=0.25)),
        ("lognormal:2", sst.lognorm(math.sqrt(math.log(3.0)), scale=math.exp(-math.log(3.0) / 2))),
        ("pareto:2.5", sst.pareto(2.5, scale=0.6)),
    ],
)
def test_compiled_sampler_has_the_law(spec, dist):
    x = compiled_samples(spec)
    # KS at 40,000 samples: the 0.1 % critical value is 1.95/√N ≈ 0.0098; a wrong scale of 1 % already fails
    assert sst.kstest(x, dist.cdf).pvalue > 1e-3


@pytest.mark.parametrize("spec", ["hyperexp:4", "hyperexp:1.5"])
def test_compiled_hyperexp_has_the_mixture_law(spec):
    law = parse_service(spec)
    p, r1, r2 = law.params

    def cdf(x):
        return p * (1 - np.exp(-r1 * x)) + (1 - p) * (1 - np.exp(-r2 * x))

    assert sst.kstest(compiled_samples(spec), cdf).pvalue > 1e-3


def test_compiled_ph_sampler_matches_the_erlang_and_the_h2(tmp_path):
    # Erlang-3 written as a general PH file, and an H2: the PH walk against the closed-form laws
    f = tmp_path / "e3.json"
    f.write_text(json.dumps({"alpha": [1, 0, 0], "T": [[-3, 3, 0], [0, -3, 3], [0, 0, -3]]}))
    assert sst.kstest(compiled_samples(f"ph:{f}"), sst.gamma(3, scale=1 / 3).cdf).pvalue > 1e-3
    g = tmp_path / "h2.json"
    g.write_text(json.dumps({"alpha": [0.25, 0.75], "T": [[-0.5, 0], [0, -1.5]]}))
    law = parse_service(f"ph:{g}")
    assert law.scv == pytest.approx(2 * (0.25 / 0.25 + 0.75 / 2.25) - 1)

    def cdf(x):
        return 0.25 * (1 - np.exp(-0.5 * x)) + 0.75 * (1 - np.exp(-1.5 * x))

    assert sst.kstest(compiled_samples(f"ph:{g}"), cdf).pvalue > 1e-3


def test_deterministic_is_one():
    assert np.all(compiled_samples("deterministic", 100) == 1.0)


def test_numpy_sampler_agrees_with_scipy():
    # the reference sampler of ServiceLaw.sample (used by examples) has the same laws
    assert sst.kstest(parse_service("pareto:2.5").sample(20_000, 3), sst.pareto(2.5, scale=0.6).cdf).pvalue > 1e-3
    assert sst.kstest(parse_service("erlang:4").sample(20_000, 3), sst.gamma(4, scale=0.25).cdf).pvalue > 1e-3


# ------------------------------------------------------------------------ the fit
@pytest.mark.parametrize("c2", [0.2, 0.3, 0.5, 0.7, 1.0, 2.0, 5.0])
def test_two_moment_fit_hits_mean_and_scv(c2):
    alpha, T = fit_phase_type(c2, mean=2.0)
    m1, m2 = ph_moments(alpha, T)
    assert m1 == pytest.approx(2.0, rel=1e-6)
    assert m2 / m1**2 - 1 == pytest.approx(c2, rel=1e-5)
    assert phase_type(*fit_phase_type(c2)).scv == pytest.approx(c2, rel=1e-12)


# ------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "bad",
    [
        "",
        "gamma:2",
        "erlang",
        "erlang:0",
        "erlang:2.5",
        "hyperexp:1",
        "hyperexp:x",
        "lognormal:0",
        "lognormal:-1",
        "pareto:1",
        "pareto:nan",
        "exp:2",
        "ph:",
        "ph:/nonexistent.json",
        "deterministic:1",
    ],
)
def test_bad_service_strings(bad):
    with pytest.raises(ValueError, match=r"service must be one of exp, erlang:K .*pareto:ALPHA"):
        parse_service(bad)
    with pytest.raises(TypeError, match="service"):
        parse_service(3)


def test_ph_refuses_a_mean_other_than_1_and_bad_generators(tmp_path):
    with pytest.raises(ValueError, match=r"mean 2, not 1; multiply T by 2"):
        phase_type([1.0], [[-0.5]])
    with pytest.raises(ValueError, match="sum to 1"):
        phase_type([0.5, 0.4], [[-1, 0], [0, -1]])
    with pytest.raises(ValueError, match="negative diagonal"):
        phase_type([1.0, 0.0], [[-1, -1], [0, -1]])
    with pytest.raises(ValueError, match="2 x 2"):
        phase_type([1.0, 0.0], [[-1]])
    f = tmp_path / "bad.json"
    f.write_text("[1, 2]")
    with pytest.raises(ValueError, match="must hold an object"):
        parse_service(f"ph:{f}")


def test_server_classes():
    sc = parse_server_classes("0.5:2,0.5:1")
    assert sc.mean_speed == 1.5 and sc.counts(4).tolist() == [2, 2]
    assert parse_server_classes(None).mean_speed == 1.0
    with pytest.raises(ValueError, match="not a whole number"):
        parse_server_classes("0.3:1,0.7:2").counts(5)
    for bad in ("0.5:2,0.4:1", "0.5:0,0.5:1", "1", "a:b", "0.5:2;0.5:1", "1.5:1,-0.5:1", "0.5:inf,0.5:1"):
        with pytest.raises(ValueError, match="server_classes must be FRACTION:SPEED"):
            parse_server_classes(bad)
