"""The rule registry (:data:`supermarket.system.policies.RULES`) against independent facts.

- The kernels' integer codes (:mod:`supermarket.engines.tables`) are the registry's, and no
  kernel runs an unknown code as another rule.
- Each rule's ``P_ℓ(c)`` equals the join law written from its definition on labelled queues
  (every tuple of lengths, every sample), and the count kernels' table (:func:`p_rule_counts`).
- Each rule's fluid fixed point is a zero of its fluid drift
  ``λ(P_{ℓ−1} − P_ℓ) − (u_ℓ − u_{ℓ+1})`` (docs/model.md §2-3).
- The rule added through the registry, JBT(T = d): JIQ at ``T = 1`` (bit for bit on the event
  engine, exactly in the solver), its exact law against a generator built on labelled queues,
  and its fixed point against the closed form at ``T = 2`` and (slow) a long simulation.
- Help texts, the CLI's choices and the docs' rule list are the registry's.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re

import numpy as np
import pytest

from _paths import ROOT
from supermarket.engines import events as ev
from supermarket.engines import service as ev_service  # the samplers' law codes
from supermarket.engines import tables
from supermarket.system import policies as pol


def test_kernel_codes_are_the_registry_codes():
    codes = [r.code for r in pol.RULES.values()]
    assert tuple(codes) == tables.POLICY_CODES
    assert len(set(codes)) == len(codes) and len(set(pol.POLICIES)) == len(pol.POLICIES)
    assert pol.DEFAULT_POLICY == "jsq-d" and pol.RULES["jsq-d"].code == 0
    named = {"jsq-d": "JSQ_D", "random": "RANDOM", "jsq": "JSQ", "jiq": "JIQ", "jbt": "JBT"}
    assert set(named) == set(pol.POLICIES)
    for name, const in named.items():
        assert getattr(tables, const) == getattr(ev, const) == pol.RULES[name].code
    for r in pol.RULES.values():
        assert set(r.engines) <= set(pol.ENGINES), r.name
        assert r.smooth == (r.mf_d is not None) and r.smooth == (r.rough == "")


def test_count_kernel_codes_are_the_registry_rules_on_the_profile_engines():
    # counts_rule knows exactly the codes of the rules that name the profile kernel; p_rule and
    # p_rule_counts give NaN, never another rule's P, for JBT (no one-count table) and unknown codes
    runs = {r.code for r in pol.RULES.values() if "profile" in r.engines}
    assert runs == set(tables.POLICY_CODES)
    for code in (*tables.POLICY_CODES, 5, 7, tables.BAD_RULE):
        assert tables.counts_rule(code) == (code in runs), code
    for code in (tables.JBT, 5, 7):
        assert math.isnan(tables.p_rule(code, 2, 4, 2, True)), code
    assert np.isnan(tables.p_rule_counts(7, np.array([[4, 2, 0]]), 4, 2, True)).all()
    # JBT's P from the counts is the registry's P_ℓ(c) (written from the definition below)
    c = np.array([[4, 2, 1, 0], [4, 4, 3, 1], [3, 1, 0, 0]])
    for d in (1, 2, 3):
        got = tables.p_rule_counts(tables.JBT, c, 4, d, True)
        np.testing.assert_array_equal(got, pol.RULES["jbt"].p_counts(c, 4, d, True))


def _join_by_definition(policy: str, lengths: tuple[int, ...], d: int, replace: bool) -> np.ndarray:
    """The probability that each labelled queue is joined, from the rule's definition."""
    n = len(lengths)
    if policy == "jsq-d":
        w = np.zeros(n)
        tuples = list(itertools.product(range(n), repeat=d) if replace else itertools.permutations(range(n), d))
        for tup in tuples:
            m = min(lengths[q] for q in tup)
            best = sorted({q for q in tup if lengths[q] == m})
            for q in best:  # ties uniform
                w[q] += 1.0 / len(best)
        return w / len(tuples)
    if policy == "random":
        sel = [True] * n
    elif policy == "jsq":
        sel = [x == min(lengths) for x in lengths]
    elif policy == "jiq":
        sel = [x == 0 for x in lengths]
    elif policy == "jbt":
        sel = [x < d for x in lengths]
    else:
        raise AssertionError(policy)
    if not any(sel):
        sel = [True] * n
    w = np.array(sel, float)
    return w / w.sum()


@pytest.mark.parametrize("policy", pol.POLICIES)
def test_p_levels_is_the_join_law_of_the_definition(policy):
    n, m = 4, 4
    for d, replace in ((1, True), (2, True), (3, False), (5, True)):
        if not replace and d > n:
            continue
        for lengths in itertools.combinations_with_replacement(range(m + 1), n):
            c = np.array([[sum(x >= ell for x in lengths) for ell in range(1, m + 1)]])
            w = _join_by_definition(policy, lengths, d, replace)
            want = [sum(w[q] for q in range(n) if lengths[q] >= ell) for ell in range(1, m + 1)]
            got = pol.p_levels(policy, c, n, d, replace)[0]
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15, err_msg=f"{lengths} d={d}")
            if {"profile", "phase", "classes"} & set(pol.RULES[policy].engines):  # the count kernels' table
                k = tables.p_rule_counts(pol.policy_code(policy), c, n, d, replace)[0]
                np.testing.assert_allclose(k, want, rtol=1e-12, atol=1e-15, err_msg=f"{lengths} d={d}")


def test_p_rule_gives_no_other_rules_value_for_an_unknown_code():
    assert math.isnan(tables.p_rule(7, 2, 4, 2, True))
    assert math.isnan(tables.p_rule(pol.RULES["jbt"].code, 2, 4, 2, True))  # not a count-kernel rule


@pytest.mark.parametrize("policy", pol.POLICIES)
@pytest.mark.parametrize("lam", [0.5, 0.9])
@pytest.mark.parametrize("d", [1, 2, 3])
def test_fixed_point_is_a_zero_of_the_fluid_drift(policy, lam, d):
    r = pol.RULES[policy]
    u = pol.fluid_fixed_point(policy, lam, 400, d=d)
    assert u[0] == pytest.approx(lam, abs=1e-15)  # capacity balance
    P = np.concatenate([[1.0], r.p_fluid(u, d)])  # P_0 .. P_L
    drift = lam * (P[:-2] - P[1:-1]) - (u[:-1] - u[1:])  # levels 1 .. L-1
    assert np.abs(drift).max() < 1e-12


def test_jbt_fixed_point_closed_form_at_t2():
    for lam in (0.3, 0.9, 0.99):
        x = ((1 + lam) - math.sqrt((1 + lam) ** 2 - 4 * lam**2)) / 2
        u = pol.fluid_fixed_point("jbt", lam, 3, d=2)
        assert u.tolist() == pytest.approx([lam, x, 0.0], rel=1e-13, abs=1e-15)


def _labelled_generator_law(n, T, lam, cap):
    """``E[u_ℓ]`` of JBT(T) from the generator on labelled queue lengths (truncated at ``cap``),
    written from the rule's definition (independent of ``P_ℓ(c)``)."""
    states = list(itertools.product(range(cap + 1), repeat=n))
    index = {s: i for i, s in enumerate(states)}
    Q = np.zeros((len(states), len(states)))
    for s in states:
        i = index[s]
        below = [q for q in range(n) if s[q] < T] or list(range(n))
        for q in below:
            if s[q] < cap:
                t = list(s)
                t[q] += 1
                Q[i, index[tuple(t)]] += n * lam / len(below)
        for q in range(n):
            if s[q] > 0:
                t = list(s)
                t[q] -= 1
                Q[i, index[tuple(t)]] += 1.0
        Q[i, i] = -Q[i].sum()
    A = Q.T.copy()
    A[0] = 1.0  # one balance equation replaced by the normalisation
    pi = np.linalg.solve(A, np.eye(len(states))[0])
    lengths = np.array(states)
    return np.array([(pi[:, None] * (lengths >= ell)).sum() / n for ell in range(1, cap + 1)])


@pytest.mark.parametrize("n,T", [(2, 2), (3, 2), (3, 3)])
def test_jbt_exact_law_against_the_labelled_chain(n, T):
    from supermarket.stationary.profile import solve

    lam, cap = 0.7, 8
    want = _labelled_generator_law(n, T, lam, cap)
    got = solve(n, T, lam, policy="jbt", cap=cap).u_mean[:cap]
    np.testing.assert_allclose(got, want, atol=1e-10)


def test_jbt_with_threshold_one_is_jiq():
    from supermarket.simulation.general import simulate_general
    from supermarket.stationary.profile import solve

    a, b = solve(3, 1, 0.6, policy="jbt", tol=1e-8), solve(3, 1, 0.6, policy="jiq", tol=1e-8)
    assert a.u_mean.tolist() == b.u_mean.tolist()
    kw = dict(service="lognormal:2", time=50, seed=3, replications=2)
    x, y = (simulate_general(20, 1, 0.8, policy=p, **kw).to_dict() for p in ("jbt", "jiq"))
    for k in ("u_mean", "u_stderr", "mean_queue_length", "sojourn"):
        assert x[k] == y[k], k


def test_every_kernel_runs_every_rule():
    """No simulation kernel refuses a rule any more (the queues engine and the count engines of
    laws and classes gained random, jsq, jiq and jbt): the registry says so for each."""
    from supermarket import simulate

    kernels = {"queues", "profile", "phase", "classes", "classes-phase", "events"}
    assert all(kernels <= set(r.engines) for r in pol.RULES.values()), {r.name: r.engines for r in pol.RULES.values()}
    assert simulate(20, 2, 0.8, policy="jbt", engine="queues", steps=1000, seed=1).engine == "queues"


@pytest.mark.parametrize("which", ["events", "classes", "classes-phase"])
def test_an_unknown_code_is_refused_by_the_kernel(monkeypatch, which):
    """A code no kernel branch knows raises, instead of running as JIQ (the old ``else``)."""
    monkeypatch.setitem(pol.RULES, "jiq", dataclasses.replace(pol.RULES["jiq"], code=7))
    with pytest.raises(ValueError, match="policy code 7 is unknown"):
        if which == "events":
            from supermarket.simulation.general import simulate_general

            simulate_general(10, 1, 0.8, policy="jiq", service="lognormal:2", time=5, seed=1, replications=1)
        elif which == "classes":
            from supermarket.simulation.classes import simulate_classes

            simulate_classes(
                10, 1, 0.8, server_classes="0.5:2,0.5:1", policy="jiq", events=2000, seed=1, replications=1
            )
        else:
            from supermarket.simulation.classes_phase import simulate_classes_phase

            simulate_classes_phase(
                10, 1, 0.8, server_classes="0.5:2,0.5:1", service="erlang:2", policy="jiq", events=2000, seed=1
            )


@pytest.mark.parametrize(
    "engine,name", [("profile", "jiq"), ("buckets", "random"), ("queues", "jsq-d"), ("queues", "jbt")]
)
def test_an_unknown_code_is_refused_by_the_count_kernels(monkeypatch, engine, name):
    """The profile, buckets and queues kernels refuse a code they do not know before any event."""
    from supermarket.model import Params
    from supermarket.simulation import Chain

    monkeypatch.setitem(pol.RULES, name, dataclasses.replace(pol.RULES[name], code=7))
    ch = Chain(Params(20, 2, 0.8), engine, [10, 2], 1, policy=name)
    with pytest.raises(ValueError, match=f"policy code 7 is unknown to the {engine} kernel"):
        ch.advance(max_events=100)
    assert ch.events == 0


def test_help_and_choices_come_from_the_registry():
    from click.testing import CliRunner

    from supermarket.cli import main

    for cmd in ("simulate", "exact", "meanfield"):
        out = CliRunner().invoke(main, [cmd, "--help"], terminal_width=400).output
        flat = " ".join(out.split())
        assert "[" + "|".join(pol.POLICIES) + "]" in flat.replace(" ", "").replace("\n", "") or all(
            p in flat for p in pol.POLICIES
        ), cmd
        for r in pol.RULES.values():
            assert r.title.split(": ", 1)[-1] in flat, (cmd, r.name)


def test_the_docs_rule_list_is_the_registry():
    text = (ROOT / "docs" / "model.md").read_text()
    block = text.split("The rules implemented:", 1)[1].split("\n\n", 2)[1]
    names = [m.group(1) for line in block.splitlines() if (m := re.match(r"\s+(\S+)\s+P_ℓ", line))]
    assert names == list(pol.POLICIES)


@pytest.mark.slow
def test_jbt_fixed_point_against_a_long_simulation():
    """The mean field of JBT(2) at λ = 0.9 against the event engine at n = 10^4 (exponential service):
    agreement within 4 standard errors plus the O(1/n) finite-n gap, bounded here by 10/n."""
    from supermarket.simulation.general import simulate_general

    n, lam = 10_000, 0.9
    res = simulate_general(n, 2, lam, policy="jbt", service="exp", time=400, burn_in=100, seed=11)
    levels = len(res.u_mean)  # the levels some queue reached (the mean field has none above T = 2)
    fp = pol.fluid_fixed_point("jbt", lam, max(levels, 3), d=2)
    assert levels >= 2
    for i in range(levels):
        m, se = float(res.u_mean[i]), float(res.u_stderr[i])
        assert abs(m - fp[i]) < 4 * se + 10 / n, (i, m, se, fp[i])


# ----------------------------------------------------------------- service laws
def test_service_families_are_the_laws_and_codes():
    from supermarket.system import service as sv

    fams = list(sv.FAMILIES.values())
    assert [f.code for f in fams] == list(range(len(fams)))  # the compiled sampler's codes, in order
    kernel = {"exp": "_EXP", "erlang": "_ERLANG", "hyperexp": "_HYPEREXP", "ph": "_PH", "lognormal": "_LOGNORMAL",
              "pareto": "_PARETO", "deterministic": "_DETERMINISTIC"}  # fmt: skip
    assert {f.name: f.code for f in fams} == {k: getattr(ev_service, v) for k, v in kernel.items()}
    assert [f.name for f in fams] == ["exp", "erlang", "hyperexp", "ph", "lognormal", "pareto", "deterministic"]
    example = {"erlang": "erlang:3", "hyperexp": "hyperexp:4", "lognormal": "lognormal:2", "pareto": "pareto:3"}
    for f in fams:
        if f.name == "ph":
            continue
        law = sv.parse_service(example.get(f.name, f.name))
        assert law.name == f.name and law.code == f.code
        assert (law.alpha is not None) == f.phase_type, f.name  # the phase-type form exists where it says
        for alias in f.aliases:
            assert sv.parse_service(alias).name == f.name
        assert f.form in sv.SERVICE_FORMS and f.bounds in sv.SERVICE_FORMS


@pytest.mark.parametrize(
    "text,family", [("erlang:0.5", "erlang"), ("hyperexp:1", "hyperexp"), ("lognormal:0", "lognormal"),
                    ("pareto:1", "pareto"), ("erlang:2000000", "erlang"), ("hyperexp:2e6", "hyperexp")]
)  # fmt: skip
def test_service_range_refusals_say_the_registry_range(text, family):
    from supermarket.system import service as sv

    with pytest.raises(ValueError) as e:
        sv.parse_service(text)
    assert f"{family} needs {sv.FAMILIES[family].need}, got" in str(e.value)
    assert str(e.value).startswith(f"service must be one of {sv.SERVICE_FORMS}; got {text!r}")
    f = sv.FAMILIES[family]
    assert f.accepts is not None and not f.accepts(float(text.split(":")[1]))


def test_service_help_comes_from_the_registry():
    from click.testing import CliRunner

    from supermarket.cli import main
    from supermarket.system import service as sv

    for cmd, only_ph in (("simulate", False), ("exact", True), ("meanfield", True)):
        flat = " ".join(CliRunner().invoke(main, [cmd, "--help"], terminal_width=400).output.split())
        listed = flat.split("Service law of mean 1: ", 1)[1].split(". ", 1)[0].split(", ")
        want = [f.form + (f" ({f.bounds})" if f.bounds else "") for f in sv.FAMILIES.values()]
        assert listed == [w for w, f in zip(want, sv.FAMILIES.values()) if f.phase_type or not only_ph], cmd


def test_jbt_through_the_cli_runs_or_refuses_in_one_line():
    from click.testing import CliRunner

    from supermarket.cli import main

    run = CliRunner().invoke
    r = run(main, ["meanfield", "--d", "2", "--load", "0.8", "--policy", "jbt"])  # its fluid fixed point
    assert r.exit_code == 0 and "Traceback" not in r.output
    r = run(main, ["meanfield", "--d", "2", "--load", "0.8", "--policy", "jbt", "--n", "100"])
    assert r.exit_code == 2 and "mean-field drift is discontinuous" in r.output and "Traceback" not in r.output
    r = run(main, ["simulate", "--n", "50", "--d", "2", "--load", "0.8", "--policy", "jbt", "--steps", "1e4"])
    assert r.exit_code == 0 and "engine events: policy jbt runs on the event engine" in r.output
    for engine in ("profile", "buckets"):  # on request, its count chain
        args = ["simulate", "--n", "50", "--load", "0.8", "--policy", "jbt", "--steps", "1e4", "--engine", engine]
        r = run(main, [*args, "--json"])
        assert r.exit_code == 0 and f'"engine": "{engine}"' in r.output, r.output[-300:]
    r = run(main, ["simulate", "--n", "50", "--load", "0.8", "--policy", "jbt", "--steps", "1e4", "--engine", "queues"])
    assert r.exit_code == 0 and "engine=queues" in r.output and "Traceback" not in r.output  # the reference engine
    r = run(main, ["exact", "--n", "2", "--d", "2", "--load", "0.5", "--policy", "jbt"])
    assert r.exit_code == 0 and "JBT(T = d)" in r.output and "(replacement unused)" in r.output
