"""Perfect sampling of the rules that are JSQ(d) chains (docs/model.md §12): ``random`` is JSQ(1)
and ``jsq`` is JSQ(n) without replacement, so the same dominated coupling from the past samples
their stationary laws exactly; the other rules, other service laws and server classes are refused
with the reason, before any work.

Independent facts: under random routing the queues are independent M/M/1 queues, so in
equilibrium ``E[u_m] = P(length >= m) = λ^m``; JSQ at ``n = 3`` is checked against the exact
stationary law of the profile chain (a linear solve, :mod:`supermarket.stationary`).  The
tolerances are four standard errors of the sample mean over independent samples.
"""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from supermarket import perfect as pf
from supermarket.cli import main
from supermarket.stationary import solve


def _u(samples: np.ndarray, levels: int) -> tuple[np.ndarray, np.ndarray]:
    n = samples.shape[1]
    u = np.stack([(samples >= m).sum(axis=1) / n for m in range(1, levels + 1)], axis=1)
    return u.mean(axis=0), u.std(axis=0, ddof=1) / np.sqrt(u.shape[0])


def test_random_routing_samples_independent_mm1_queues():
    lam = 0.7
    res = pf.sample(40, 3, lam, samples=300, seed=11, policy="random")
    assert res.policy == "random" and res.to_dict()["policy"] == "random"
    mean, se = _u(res.samples, 4)
    want = lam ** np.arange(1, 5)
    assert np.all(np.abs(mean - want) < 4 * se), (mean, want, se)


def test_jsq_matches_the_exact_law_of_three_servers():
    lam = 0.8
    res = pf.sample(3, 2, lam, samples=1500, seed=5, policy="jsq")
    mean, se = _u(res.samples, 3)
    exact = np.asarray(solve(3, 2, lam, policy="jsq").u_mean[:3])
    assert np.all(np.abs(mean - exact) < 4 * se), (mean, exact, se)
    # JSQ is not JSQ(2): the law differs from the default rule's by many standard errors
    jsq2 = np.asarray(solve(3, 2, lam).u_mean[:3])
    assert np.abs(mean[1] - jsq2[1]) > 6 * se[1]


def test_jsq_d_is_unchanged_by_the_policy_argument():
    a = pf.sample(5, 2, 0.6, samples=3, seed=2)
    b = pf.sample(5, 2, 0.6, samples=3, seed=2, policy="jsq-d")
    assert a.samples.tolist() == b.samples.tolist() and a.policy == "jsq-d"


@pytest.mark.parametrize(
    "kw, key, words",
    [
        ({"policy": "jiq"}, "policy", "jiq is no JSQ(d)"),
        ({"policy": "jbt"}, "policy", "jbt is no JSQ(d)"),
    ],
)
def test_rules_that_are_no_jsq_d_are_refused_before_work(monkeypatch, kw, key, words):
    from supermarket.perfect import sampler

    monkeypatch.setattr(sampler, "_job", lambda *a, **k: pytest.fail("the sampler ran"))
    with pytest.raises(ValueError, match=rf"^{key}: {words.replace('(', '[(]').replace(')', '[)]')}"):
        pf.sample(10, 2, 0.5, **kw)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--policy", "jiq"], "--policy: jiq is no JSQ(d)"),
        (["--service", "erlang:2"], "--service: the perfect sampler is dominated by n independent M/M/1 queues"),
        (["--service", "lognormal:2"], "it needs exponential service, not lognormal:2"),
        (["--server-classes", "0.5:2,0.5:1"], "--server-classes: the perfect sampler couples the chains by sorted"),
    ],
)
def test_the_command_refuses_with_the_reason(args, words):
    out = CliRunner().invoke(main, ["perfect", "--n", "10", "--d", "2", "--load", "0.5", *args])
    assert out.exit_code == 2, out.output
    assert words in " ".join(out.output.split())


def test_the_command_samples_jsq_and_random():
    for rule in ("jsq", "random"):
        out = CliRunner().invoke(
            main, ["perfect", "--n", "8", "--d", "2", "--load", "0.6", "--replications", "3", "--policy", rule]
        )
        assert out.exit_code == 0, out.output
        assert f"policy {rule}" in out.output


@pytest.mark.parametrize("rule", ["random", "jsq"])
def test_simulate_starts_random_and_jsq_from_an_exact_sample(rule, monkeypatch):
    """``simulate(start="perfect")`` draws each replication's start from the rule's own stationary
    law (the sampler is called with the rule) and needs no burn-in."""
    from supermarket.perfect import sampler
    from supermarket.simulation import simulate

    seen = []
    real = sampler.sample

    def spy(*args, **kw):
        seen.append(kw.get("policy"))
        return real(*args, **kw)

    monkeypatch.setattr(sampler, "sample", spy)
    res = simulate(20, 2, 0.6, policy=rule, start="perfect", steps=20_000, seed=3, replications=2, workers=1)
    assert seen == [rule, rule] and res.burn_in == 0
    assert "exact stationary sample" in res.summary()
