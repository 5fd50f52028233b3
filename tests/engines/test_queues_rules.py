"""The per-queue reference engine (``engine="queues"``) under every dispatch rule but JSQ(d):
random, JSQ, JIQ and JBT(T = d) (docs/model.md §2, "Other dispatch rules").

Three independent facts:

- a plain-Python per-queue chain written from each rule's definition (the set of queues the
  rule may join: all, the shortest, the idle ones, those shorter than ``T``; a uniform one of
  them in index order, all of them when the set is empty), on the plain-Python generator of
  :mod:`naive`, state for state; its ``∫ P_ℓ dt`` uses ``P_ℓ`` = the probability, summed over
  the queues of length ``>= ℓ``, that the rule picks each (no formula of the counts);
- the tie law by symmetry: the queues are exchangeable, so among the queues a rule may join the
  one joined must be uniform (its rank in index order, chi-square) and never one outside the set;
- the exact stationary law of tiny systems (``supermarket.stationary.profile.solve``, n = 3, 4)
  and the profile engine at a larger n (tests/engines/test_exact_small.py has JSQ(d)).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from naive import Xoshiro
from supermarket.engines.queues import REJECT_MIN
from supermarket.model import Params
from supermarket.simulation import Chain, simulate
from supermarket.stationary.profile import solve

RULES = ("random", "jsq", "jiq", "jbt")


def allowed(policy: str, x: list[int], d: int) -> list[int]:
    """The queues (index order) the rule may join from lengths ``x``, by its definition; an empty
    set means every queue (random routing, or JIQ/JBT with no queue below the threshold)."""
    if policy == "jsq":
        return [q for q, v in enumerate(x) if v == min(x)]
    if policy == "jiq":
        return [q for q, v in enumerate(x) if v == 0]
    if policy == "jbt":
        return [q for q, v in enumerate(x) if v < d]
    assert policy == "random"
    return []


class NaiveRuleQueues:
    """The per-queue chain (docs/model.md §1) of a rule other than JSQ(d), in plain Python: one
    53-bit uniform per step (an arrival when ``< λ/(1+λ)``); an arrival then draws ``below(m)``
    for the ``m`` queues it may join (``below(n)`` when that set is empty); a departure draws its
    queue with ``below(n)`` (with ``m >= REJECT_MIN`` allowed queues, ``below(n)`` until an allowed
    one: the same law); continuous time adds a holding time per step (and one before the
    first).  Integrals are accumulated step by step from the lengths alone."""

    def __init__(self, policy, n, d, lam, counts, seed, continuous):
        self.policy, self.n, self.d = policy, n, d
        self.p = lam / (1.0 + lam)
        self.rate = n * (1.0 + lam)
        self.rng = Xoshiro.from_seed(seed)
        self.continuous = continuous
        self.x = [sum(1 for ci in counts if ci > q) for q in range(n)]
        self.now = 0.0
        self.area_c: list[float] = []
        self.area_P: list[float] = []
        self.maxtime: list[float] = []
        self.t_next = self._holding() if continuous else 1.0

    def _holding(self):
        return -math.log(1.0 - self.rng.double()) / self.rate

    def counts(self):
        top = max(self.x)
        return [sum(1 for v in self.x if v >= i) for i in range(1, top + 1)]

    def join_law(self):
        """``P(join queue q)`` for every ``q``, from :func:`allowed`."""
        a = allowed(self.policy, self.x, self.d) or list(range(self.n))
        return [1.0 / len(a) if q in a else 0.0 for q in range(self.n)]

    def _integrate(self, t):
        dt = t - self.now
        top = max(self.x)
        law = self.join_law()
        for acc in (self.area_c, self.area_P):
            acc.extend([0.0] * (top - len(acc)))
        for i in range(1, top + 1):
            self.area_c[i - 1] += sum(1 for v in self.x if v >= i) * dt
            self.area_P[i - 1] += sum(w for v, w in zip(self.x, law) if v >= i) * dt
        self.maxtime.extend([0.0] * (top + 1 - len(self.maxtime)))
        self.maxtime[top] += dt
        self.now = t

    def step(self):
        self._integrate(self.t_next)
        if self.rng.double() < self.p:
            a = allowed(self.policy, self.x, self.d)
            if len(a) >= REJECT_MIN:  # rejection: uniform queues until an allowed one
                q = self.rng.below(self.n)
                while q not in a:
                    q = self.rng.below(self.n)
            else:
                q = a[self.rng.below(len(a))] if a else self.rng.below(self.n)
            self.x[q] += 1
        else:
            K = self.rng.below(self.n)
            if self.x[K] > 0:
                self.x[K] -= 1
        self.t_next = self.now + (self._holding() if self.continuous else 1.0)


# (policy, n, d, λ, continuous, start counts, steps)
CASES = {
    "random-disc": ("random", 7, 2, 0.9, False, [5, 2], 3000),
    "jsq-cont": ("jsq", 6, 2, 0.95, True, [6, 3], 3000),
    "jiq-disc": ("jiq", 6, 2, 0.9, False, [], 3000),
    "jiq-cont": ("jiq", 5, 3, 0.95, True, [5, 5, 2], 3000),
    "jbt2-disc": ("jbt", 6, 2, 0.9, False, [6, 4, 1], 3000),
    "jbt3-cont": ("jbt", 5, 3, 0.95, True, [], 3000),
    # n = 40: 16 allowed queues or more (rejection) and fewer (the scan) both visited
    "jsq-reject": ("jsq", 40, 2, 0.6, False, [], 2000),
    "jiq-reject": ("jiq", 40, 2, 0.55, True, [40, 30, 5], 2000),
    "jbt-reject": ("jbt", 40, 3, 0.9, True, [40, 30, 5], 2000),
}


@pytest.mark.parametrize("case", CASES)
def test_rule_matches_the_naive_per_queue_chain_step_for_step(case):
    policy, n, d, lam, cont, counts, steps = CASES[case]
    seed = 700 + len(case)
    params = Params(n, d, lam)
    ch = Chain(params, "queues", counts, seed, continuous=cont, policy=policy)
    nv = NaiveRuleQueues(policy, n, d, lam, counts, seed, cont)
    assert ch.lengths().tolist() == nv.x
    for step in range(1, steps + 1):
        assert ch.advance(max_events=1) == 1
        nv.step()
        assert ch.lengths().tolist() == nv.x, f"lengths differ at step {step}"
        assert ch.counts().tolist() == nv.counts(), f"counts differ at step {step}"
        assert math.isclose(ch.now, nv.now, rel_tol=1e-12), f"time differs at step {step}"
    bulk = Chain(params, "queues", counts, seed, continuous=cont, policy=policy)
    assert bulk.advance(max_events=steps) == steps
    assert bulk.lengths().tolist() == nv.x
    m = bulk.measures()
    L = len(nv.area_c)
    np.testing.assert_allclose(m["area_c"][:L], nv.area_c, rtol=1e-9)
    np.testing.assert_allclose(m["area_P"][:L], nv.area_P, rtol=1e-9, atol=1e-12 * nv.now)
    np.testing.assert_allclose(m["maxtime"][: len(nv.maxtime)], nv.maxtime, rtol=1e-9, atol=1e-12 * nv.now)
    assert not m["area_c"][L:].any() and not m["area_P"][L:].any()
    assert 0 < nv.area_P[0] < nv.now  # P_1 is neither 0 nor 1 all the time


@pytest.mark.parametrize(
    "policy,n,d,lam", [("jsq", 5, 2, 0.9), ("jiq", 5, 2, 0.9), ("jbt", 5, 2, 0.9), ("jbt", 5, 3, 0.9)]
)
def test_the_joined_queue_is_uniform_among_those_the_rule_allows(policy, n, d, lam):
    """Symmetry: the queues are exchangeable, so the rank (index order) of the joined queue among
    the ``m`` the rule allows is uniform on ``0..m−1``, and no other queue is joined."""
    ch = Chain(Params(n, d, lam), "queues", [], 41, continuous=True, policy=policy)
    ranks: dict[int, list[int]] = {}
    for _ in range(12_000):
        before = ch.lengths().tolist()
        ch.advance(max_events=1)
        after = ch.lengths().tolist()
        grew = [q for q in range(n) if after[q] == before[q] + 1]
        if not grew:
            continue
        (q,) = grew
        a = allowed(policy, before, d)
        if not a:  # JIQ/JBT with no queue below the threshold: any queue
            continue
        assert q in a, f"{policy} joined queue {q} of {before}, not one of {a}"
        ranks.setdefault(len(a), []).append(a.index(q))
    tested = 0
    for m, rs in ranks.items():
        if m >= 2 and len(rs) >= 50 * m:
            counts = np.bincount(rs, minlength=m)
            assert stats.chisquare(counts).pvalue > 1e-4, (policy, m, counts)
            tested += 1
    assert tested >= 2, {m: len(rs) for m, rs in ranks.items()}


N_EXACT_STEPS = 500_000
EXACT = {3: 0.7, 4: 0.6}  # n: λ (n = 4 at a lower load: its exact law's truncation stays small)
L = 8


def _pad(a, L, fill=0.0):
    """``a`` (levels 1, 2, …) as length ``L``, ``fill`` past its end."""
    out = np.full(L, fill)
    a = np.asarray(a, dtype=float)[:L]
    out[: len(a)] = a
    return out


@pytest.fixture(scope="module")
def exact_laws():
    """``(E[u_ℓ], E[P_ℓ], mean queue length, truncation error)`` per (rule, n): random routing is
    n independent M/M/1 queues (``E[u_ℓ] = E[P_ℓ] = λ^ℓ``, mean ``λ/(1−λ)``, exactly); the others
    the exact solver of the counts chain."""
    out = {}
    for n, lam in EXACT.items():
        geo = lam ** np.arange(1, L + 1)
        out[("random", n)] = (geo, geo, lam / (1 - lam), 1e-12)
        for p in RULES[1:]:
            law = solve(n, 2, lam, policy=p, tol=1e-8 if n == 3 else 1e-7)
            tail = 10 * law.truncation["mass_at_cap"] + 1e-12
            out[(p, n)] = (_pad(law.u_mean, L), _pad(law.ud_mean, L), law.mean_queue_length, tail)
    return out


def _far(res, law) -> list[str]:
    """The quantities of ``res`` farther from ``law`` than 4.5 standard errors plus its truncation."""
    u, P, mql, tail = law
    out = []
    for name, got, se, exact in (("u", res.u_mean, res.u_stderr, u), ("P", res.ud_mean, res.ud_stderr, P)):
        g, s = _pad(got, L), _pad(se, L, np.nan)  # NaN: a level too rare for a batch-means error
        seen = (exact >= 2e-3) & np.isfinite(s)  # rarer levels: too few visits for their errors
        assert seen.sum() >= 3
        out += [
            f"{name}_{i + 1}: {g[i]} vs {exact[i]} ± {s[i]}"
            for i in np.flatnonzero((np.abs(g - exact) > 4.5 * s + tail) & seen)
        ]
    if abs(res.mean_queue_length - mql) > 4.5 * res.mean_queue_length_stderr + tail:
        out.append(f"mean queue length {res.mean_queue_length} vs {mql} ± {res.mean_queue_length_stderr}")
    return out


@pytest.mark.parametrize("n", sorted(EXACT))
@pytest.mark.parametrize("policy", RULES)
def test_queues_engine_matches_the_exact_law(exact_laws, policy, n):
    """``E[u_ℓ]``, ``E[P_ℓ]`` and the mean queue length against the exact stationary law within
    4.5 standard errors (batch means) plus the law's truncation; and not against any other rule's
    law (the check tells the rules apart, so a rule run as another fails it)."""
    mode = "continuous" if n == 4 else "discrete"
    kw = dict(steps=N_EXACT_STEPS, burn_in=10_000, time_mode=mode, seed=9)
    res = simulate(n, 2, EXACT[n], policy=policy, engine="queues", **kw)
    assert res.engine == "queues"
    assert not (far := _far(res, exact_laws[(policy, n)])), f"{policy} n={n}: {far}"
    for other in RULES:
        if other != policy:
            assert _far(res, exact_laws[(other, n)]), f"{policy} n={n} cannot be told from {other}"


@pytest.mark.parametrize("policy", RULES)
def test_queues_engine_agrees_with_the_profile_engine_at_larger_n(policy):
    """n = 30, λ = 0.9: the per-queue chain and the counts chain (docs/model.md §2) have the same
    law; their means agree within 4.5 combined standard errors (independent seeds)."""
    kw = dict(n=30, d=2, lam=0.9, policy=policy, steps=1_000_000, burn_in=30_000)
    a = simulate(**kw, engine="queues", seed=1)
    b = simulate(**kw, engine="profile", seed=2)
    L = min(len(a.u_mean), len(b.u_mean), 6)
    se = np.hypot(a.u_stderr[:L], b.u_stderr[:L])
    ok = np.isfinite(se)
    assert ok.sum() >= 2
    assert np.all(np.abs(a.u_mean[:L] - b.u_mean[:L])[ok] <= 4.5 * se[ok]), (a.u_mean[:L], b.u_mean[:L], se)
    se_m = math.hypot(a.mean_queue_length_stderr, b.mean_queue_length_stderr)
    assert abs(a.mean_queue_length - b.mean_queue_length) <= 4.5 * se_m
