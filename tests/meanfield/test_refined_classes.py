"""The refined mean field and the linear noise with server classes (issue #28):
:func:`supermarket.meanfield.refined_classes.classes_refined_mean_field`, the generic expansion
of :mod:`supermarket.meanfield.expansion` on the jumps of :func:`classes_jumps`.

Each number is checked against an independent fact:

- the jumps' mean is the drift :func:`classes_phase_drift` (a second code path for the same law);
- one class written as classes: ``π``, ``V`` and ``W`` equal the one-class refined mean field and
  linear noise (:func:`refined_mean_field`, :func:`lna`: analytic derivatives, another state; and
  :func:`phase_refined_mean_field` for a phase-type law) to 1e-10;
- identical classes of unequal sizes: the pooled profile is the one-class system, so its ``V`` and
  ``W`` are the one-class ones (a missing ``1/f_k`` in the jumps would change them);
- random routing: ``n`` independent queues, so ``V = 0`` and ``W`` is per class the multinomial
  covariance of one queue's state divided by ``f_k`` (``n f_k`` servers), 0 across classes;
- work conservation: ``Σ_k f_k s_k E[u_{k,1}] = λ s̄`` at every ``n``, so ``Σ_k f_k s_k V_{k,1} = 0``;
- the exact stationary law of the finite system (:mod:`supermarket.stationary`) at ``n = 2, 4, 6``:
  ``n (E[u] − π)`` extrapolated to ``n = ∞`` is ``V``, and ``n Cov(u)`` extrapolated is ``W``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from supermarket.meanfield import lna, refined_mean_field
from supermarket.meanfield.classes_phase import classes_phase_drift
from supermarket.meanfield.refined_classes import classes_jumps, classes_refined_mean_field
from supermarket.meanfield.refined_phase import phase_refined_mean_field
from supermarket.system.service import parse_service

SC = "0.5:2,0.5:1"


@pytest.mark.parametrize("law", ["exp", "erlang:3", "hyperexp:4"])
@pytest.mark.parametrize(("d", "policy"), [(2, "jsq-d"), (3, "jsq-d"), (1, "random")])
def test_jumps_mean_is_the_drift(law, d, policy):
    law = parse_service(law)
    a = np.ones(1) if law.is_exponential else np.asarray(law.alpha, float)
    T = -np.ones((1, 1)) if law.is_exponential else np.asarray(law.T, float)
    t0 = -T.sum(axis=1)
    f, s = np.array([0.2, 0.5, 0.3]), np.array([3.0, 1.0, 0.5])
    x = np.random.default_rng(d).uniform(0.0, 0.05, size=(3, 6, a.size))
    r, J = classes_jumps(x, 0.8, f, s, a, T, t0, d, policy)
    assert np.all(r >= 0.0)
    vals = set(np.round(np.abs(J.data), 12))
    assert vals <= {round(1 / fk, 12) for fk in f}  # one class-k server of n f_k moves per event
    np.testing.assert_allclose(J.T @ r, classes_phase_drift(x, 0.8, f, s, a, T, t0, d, policy).ravel(), atol=1e-15)


@pytest.mark.parametrize(("d", "lam", "policy"), [(2, 0.9, "jsq-d"), (3, 0.7, "jsq-d"), (2, 0.6, "random")])
def test_one_class_is_the_one_class_refined_mean_field(d, lam, policy):
    r = classes_refined_mean_field(d, lam, "1:1", policy=policy)
    e = refined_mean_field(d, lam, policy=policy)
    c = lna(d, lam, policy=policy).covariance
    m = min(r.levels, e.levels)
    assert r.accurate and e.accurate and m >= 3
    np.testing.assert_allclose(r.pi[:m], e.pi[:m], rtol=0, atol=1e-10)
    np.testing.assert_allclose(r.V[:m], e.V[:m], rtol=0, atol=1e-10)
    np.testing.assert_allclose(r.W[:m, :m], e.W[:m, :m], rtol=0, atol=1e-10)
    np.testing.assert_allclose(r.W[:m, :m], c[:m, :m], rtol=0, atol=1e-10)
    np.testing.assert_allclose(r.V_u[0], r.V, rtol=0, atol=0)
    assert abs(e.V).max() > 0.1 or policy == "random"  # a check that can fail: V is not 0 under JSQ(d)


def test_one_class_with_a_phase_type_law_is_the_phase_refined_mean_field():
    r = classes_refined_mean_field(2, 0.8, "1:1", "erlang:2")
    e = phase_refined_mean_field(2, 0.8, "erlang:2")
    m = min(r.levels, e.levels)
    assert r.accurate and e.accurate and abs(e.V).max() > 0.05
    np.testing.assert_allclose(r.pi[:m], e.pi[:m], rtol=0, atol=1e-10)
    np.testing.assert_allclose(r.V[:m], e.V[:m], rtol=0, atol=1e-10)
    np.testing.assert_allclose(r.W[:m, :m], e.W[:m, :m], rtol=0, atol=1e-10)


@pytest.mark.parametrize("sc", ["0.5:1,0.5:1", "0.3:1,0.7:1"])
def test_identical_classes_pool_to_one_class(sc):
    """Servers of one speed split in two classes: the pooled profile is the one-class chain's, so
    its ``V`` and ``W`` are the one-class ones, and each class's ``V`` is the pooled one."""
    r = classes_refined_mean_field(2, 0.85, sc)
    e = refined_mean_field(2, 0.85)
    m = min(r.levels, e.levels)
    assert r.accurate
    np.testing.assert_allclose(r.V[:m], e.V[:m], rtol=0, atol=1e-9)
    np.testing.assert_allclose(r.W[:m, :m], e.W[:m, :m], rtol=0, atol=1e-9)
    for k in range(2):
        np.testing.assert_allclose(r.V_u[k, :m], e.V[:m], rtol=0, atol=1e-9)


@pytest.mark.parametrize(("law", "sc"), [("exp", SC), ("erlang:2", SC), ("hyperexp:4", "0.25:1.6,0.75:0.8")])
def test_random_routing_is_independent_queues(law, sc):
    r = classes_refined_mean_field(3, 0.3, sc, law, policy="random")  # light load: few levels
    assert r.accurate
    assert np.abs(r.V_x).max() < 1e-12  # E[x] = π at every n
    Kc = r.f.size
    x = r.x.reshape(Kc, -1)
    N = x.shape[1]
    for k in range(Kc):
        for j in range(Kc):
            block = r.W_x[k * N : (k + 1) * N, j * N : (j + 1) * N]
            want = (np.diag(x[k]) - np.outer(x[k], x[k])) / r.f[k] if j == k else np.zeros((N, N))
            np.testing.assert_allclose(block, want, rtol=0, atol=1e-12)
    rho = 0.3 * float(r.f @ r.s) / r.s  # u_{k,1} = ρ_k, the load of one class-k queue
    np.testing.assert_allclose(r.u[:, 0], rho, rtol=0, atol=1e-12)


@pytest.mark.parametrize("law", ["exp", "erlang:2", "hyperexp:4"])
def test_work_conservation_has_no_1_over_n_term(law):
    r = classes_refined_mean_field(2, 0.8, SC, law)
    assert r.accurate
    assert abs(float(r.f @ (r.s * r.V_u[:, 0]))) < 1e-10
    assert abs(r.V_u[:, 0]).min() > 1e-3 and r.V_u[:, 1].max() > 0.05  # the 1/n terms are there


def _extrapolated(ns, ys):
    """``V`` from ``n (E_n − π) = V + c_1/n + … + c_{m−1}/n^{m−1}`` through ``m`` points."""
    A = np.array([[float(n) ** -j for j in range(len(ns))] for n in ns])
    return np.linalg.solve(A, np.stack([y.ravel() for y in ys]))[0].reshape(ys[0].shape)


def test_exact_law_converges_to_the_1_over_n_term():
    """JSQ(2), classes 0.5:2,0.5:1, λ = 0.3: the exact ``E[u_k]`` at ``n = 2, 4, 6``, ``n (E − π)``
    fitted by ``V + c/n + e/n²``.  The fit's error, ``O(1/n³)``, is 3e-6 at the first two levels
    (V_{k,2} = 0.054, 0.134), so 2e-5 there; a doubled or negated ``V`` is off by 0.05."""
    from supermarket.stationary.classes import solve_classes

    lam = 0.3
    r = classes_refined_mean_field(2, lam, SC)
    ys = []
    for n, cap in ((2, 10), (4, 9), (6, 8)):
        e = solve_classes(n, 2, lam, SC, cap=cap, max_states=40_000)
        assert e.mass_at_cap < 1e-6
        ys.append(n * (e.u_mean[:, :2] - r.u[:, :2]))
    np.testing.assert_allclose(_extrapolated((2, 4, 6), ys), r.V_u[:, :2], rtol=0, atol=2e-5)
    assert abs(r.V_u[:, 1]).min() > 0.05


def test_exact_covariance_converges_to_the_linear_noise():
    """The same system: ``n Cov(u_{k,ℓ}, u_{j,m})`` under the exact law at ``n = 2, 4, 6``, fitted by
    ``W + c/n + e/n²``, is the linear-noise ``W_u`` (across classes too).  The fit's error is 1e-4 at
    the first level and 2.4e-3 at the second (variances 0.41, 0.56 and 0.04, 0.14), so 5e-4 and
    4e-3; a move of ``±1`` in place of ``±1/f_k`` would halve ``W``."""
    from supermarket.stationary.classes import _build
    from supermarket.stationary.solver import stationary_vector

    lam = 0.3
    r = classes_refined_mean_field(2, lam, SC)
    ys = []
    for n, cap in ((2, 10), (4, 9), (6, 8)):
        counts = np.array([n // 2, n // 2])
        Q, c, tot, _ = _build(counts, r.s, 2, lam, True, "jsq-d", cap)
        pi, _, _ = stationary_vector(Q, tot)
        u = (c[:, :, 1:3] / counts[None, :, None]).reshape(pi.size, -1)  # u_{k,1}, u_{k,2} per state
        dev = u - pi @ u
        ys.append(n * (dev.T @ (dev * pi[:, None])))
    W = _extrapolated((2, 4, 6), ys)
    L = r.levels
    idx = [0, 1, L, L + 1]  # (k, ℓ) = (1, 1), (1, 2), (2, 1), (2, 2)
    want = r.W_u[np.ix_(idx, idx)]
    np.testing.assert_allclose(W, want, rtol=0, atol=4e-3)
    np.testing.assert_allclose(W[np.ix_([0, 2], [0, 2])], want[np.ix_([0, 2], [0, 2])], rtol=0, atol=5e-4)


def test_exact_law_with_a_phase_type_law_converges_to_the_1_over_n_term():
    """Erlang-2 service, the same classes at λ = 0.3: ``n = 2, 4`` (the (length, phase) chain grows
    fast), fitted by ``V + c/n``: its ``O(1/n²)`` error is 3e-4 at the second level (V = 0.042, 0.110),
    so 1e-3 there and 1e-4 at the first."""
    from supermarket.stationary.classes_phase import solve_classes_phase

    lam = 0.3
    r = classes_refined_mean_field(2, lam, SC, "erlang:2")
    ys = []
    for n, cap in ((2, 8), (4, 6)):
        e = solve_classes_phase(n, 2, lam, SC, "erlang:2", cap=cap, max_states=40_000)
        assert e.mass_at_cap < 1e-5
        ys.append(n * (e.u_mean[:, :2] - r.u[:, :2]))
    V = _extrapolated((2, 4), ys)
    np.testing.assert_allclose(V[:, 0], r.V_u[:, 0], rtol=0, atol=1e-4)
    np.testing.assert_allclose(V[:, 1], r.V_u[:, 1], rtol=0, atol=1e-3)
    assert abs(r.V_u[:, 1]).min() > 0.04


def test_refusals_come_from_the_method_table():
    with pytest.raises(ValueError, match=r"^replace: .*server classes with replacement only"):
        classes_refined_mean_field(2, 0.9, SC, replace=False)
    with pytest.raises(ValueError, match="discontinuous"):
        classes_refined_mean_field(2, 0.9, SC, policy="jsq")
    with pytest.raises(ValueError, match="no phase-type form"):
        classes_refined_mean_field(2, 0.9, SC, "lognormal:2")
    with pytest.raises(ValueError, match="load"):
        classes_refined_mean_field(2, 1.2, SC)
    with pytest.raises(ValueError, match="unknowns"):
        classes_refined_mean_field(2, 0.9, SC, "erlang:4", levels=200)
    with pytest.raises(ValueError, match=r"^levels: .* 1328 levels"):  # before any work: the M/PH/1 tail's levels
        classes_refined_mean_field(2, 0.6, SC, "hyperexp:8", policy="random")
    with pytest.raises(ValueError, match=r"^levels: .*8 classes x 24 levels x 8 phases"):
        classes_refined_mean_field(2, 0.6, ",".join(["0.125:1"] * 8), "erlang:8")


def _cli(args):
    from click.testing import CliRunner

    from supermarket.cli import main

    return CliRunner().invoke(main, ["meanfield", *args])


@pytest.mark.parametrize("law", ["exp", "erlang:2"])
def test_cli_is_the_library(law):
    out = _cli(["--n", "1000", "--load", "0.9", "--server-classes", SC, "--service", law, "--json"])
    assert out.exit_code == 0, out.output
    rep = json.loads(out.output)
    r = classes_refined_mean_field(2, 0.9, SC, law)
    ref = rep["refined"]
    assert rep["n"] == 1000 and ref["trusted"] and ref["valid_for_n"]
    np.testing.assert_array_equal(ref["V"], r.V)
    np.testing.assert_array_equal(rep["covariance"], r.W)
    for k in range(2):
        np.testing.assert_array_equal(ref["classes"][k]["V"], r.V_u[k])
        np.testing.assert_array_equal(ref["classes"][k]["covariance"], r.class_covariance(k))
        assert ref["classes"][k]["mean_queue_length"] == pytest.approx(
            rep["classes"][k]["mean_queue_length"] + r.V_u[k].sum() / 1000, rel=1e-14
        )
    assert ref["mean_queue_length"] == pytest.approx(rep["mean_queue_length"] + r.V.sum() / 1000, rel=1e-14)
    text = _cli(["--n", "1000", "--load", "0.9", "--server-classes", SC, "--service", law])
    assert text.exit_code == 0 and "refined mean field at n=1000" in text.output


def test_cli_one_class_is_the_one_class_command():
    a = json.loads(_cli(["--n", "50", "--load", "0.9", "--server-classes", "1:1", "--json"]).output)
    b = json.loads(_cli(["--n", "50", "--load", "0.9", "--json"]).output)
    m = min(len(a["refined"]["V"]), len(b["refined"]["V"]))
    np.testing.assert_allclose(a["refined"]["V"][:m], b["refined"]["V"][:m], rtol=0, atol=1e-10)
    np.testing.assert_allclose(np.array(a["covariance"])[:m, :m], np.array(b["covariance"])[:m, :m], atol=1e-10)


def test_cli_refuses_without_replacement_in_the_tables_words():
    out = _cli(["--n", "10", "--server-classes", SC, "--no-replace"])
    assert out.exit_code == 2
    assert "server classes with replacement only" in out.output and "Traceback" not in out.output


def test_sweep_point_is_the_library():
    from supermarket.sweep.measurements import measure_meanfield
    from supermarket.sweep.points import _check_meanfield_point

    p = {"n": 100, "d": 2, "load": 0.5, "server_classes": SC, "service": "erlang:2"}
    _check_meanfield_point(p)  # no longer refused
    row = measure_meanfield(p, np.random.SeedSequence(1))
    r = classes_refined_mean_field(2, 0.5, SC, "erlang:2")
    np.testing.assert_array_equal(row["refined_V"], r.V)
    np.testing.assert_array_equal(row["refined_class_V"], r.V_u)
    np.testing.assert_array_equal(row["refined_u"], r.pi + r.V / 100)
    np.testing.assert_array_equal(row["lna_covariance"], r.W)
