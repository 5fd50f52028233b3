"""Perfect sampling by dominated coupling from the past (docs/model.md §12).

Three kinds of checks, each against something other than the sampler's own code:

1. the mathematics, exhaustively on small state spaces, with a pure-Python reference of
   the moves written from the definitions (Lemmas A, B, C of §12, the conditional
   innovation law with exact rational arithmetic, the reversibility of the dominating
   process);
2. the kernels against that reference (moves, the backward generation of the dominating
   process and the innovations it emits, bit-identical regeneration of the past);
3. the output law against the exact stationary law of tiny systems (``exact_small``), by
   chi-square tests whose power against plausible wrong answers is computed and asserted.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from exact_small import profile_law
from supermarket import perfect
from supermarket.engines import perfect as K
from supermarket.model import Params, spawn_seeds
from supermarket.perfect import past as perfect_past  # the private _Past lives there


# =========================================================================== reference
# Sorted vectors are tuples, longest first; positions are 1-based as in docs/model.md §12.
def arrive(x, p):
    """The leftmost queue of length x_p grows."""
    v = x[p - 1]
    a = x.index(v)  # 0-based leftmost position holding v
    y = list(x)
    y[a] += 1
    return tuple(y)


def serve(x, p):
    """If x_p > 0, the rightmost queue of length x_p shrinks."""
    v = x[p - 1]
    if v == 0:
        return x
    b = len(x) - 1 - x[::-1].index(v)
    y = list(x)
    y[b] -= 1
    return tuple(y)


def partial_sums(x):
    return list(itertools.accumulate(x))


def wsub(x, y):
    """x ≺_w y: every sum of the k largest entries of x is at most that of y."""
    return all(a <= b for a, b in zip(partial_sums(x), partial_sums(y)))


def leq(x, y):
    return all(a <= b for a, b in zip(x, y))


def sorted_states(n, top):
    return [tuple(sorted(s, reverse=True)) for s in itertools.combinations_with_replacement(range(top + 1), n)]


# =========================================================================== 1. lemmas
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_lemmas_exhaustive(n):
    """Lemma A (monotone in ≺_w), Lemma B (dominated, J ≤ M) and Lemma C (componentwise
    monotone) of docs/model.md §12 on all sorted vectors with lengths ≤ 4, all ordered pairs
    and all positions.  (4 is one below the largest length so that every move stays in range
    of the enumeration, which is irrelevant to the statements but keeps the loops simple.)"""
    states = sorted_states(n, 4)
    pairs_w = pairs_c = 0
    for x in states:
        for y in states:
            if wsub(x, y):
                pairs_w += 1
                for p in range(1, n + 1):
                    assert wsub(arrive(x, p), arrive(y, p)), (x, y, p)
                    assert wsub(serve(x, p), serve(y, p)), (x, y, p)
                for J in range(1, n + 1):
                    for M in range(J, n + 1):
                        assert wsub(arrive(x, M), arrive(y, J)), (x, y, J, M)
            if leq(x, y):
                pairs_c += 1
                for p in range(1, n + 1):
                    assert leq(arrive(x, p), arrive(y, p)), (x, y, p)
                    assert leq(serve(x, p), serve(y, p)), (x, y, p)
    # the enumeration really covered many pairs (not vacuous)
    assert pairs_w >= {1: 15, 2: 100, 3: 500, 4: 2000}[n]
    assert pairs_c >= {1: 15, 2: 50, 3: 100, 4: 200}[n]


def test_hypotheses_are_needed():
    """The statements fail without their hypotheses, so the exhaustive test can fail:
    componentwise domination of JSQ(2) by JSQ(1) is false (x = y = (1, 0): J = 1, M = 2),
    and Lemma B fails when J > M."""
    x = (1, 0)
    assert not leq(arrive(x, 2), arrive(x, 1))  # (1,1) vs (2,0): componentwise fails
    assert wsub(arrive(x, 2), arrive(x, 1))  # … but ≺_w holds, as Lemma B says
    assert not wsub(arrive(x, 1), arrive(x, 2))  # J = 2 > M = 1: Lemma B's conclusion fails


def _innovation_laws(n, d, replace, lam):
    """μ(ξ) for ξ = (kind, J_1, J', j): the JSQ(d) innovation (exact fractions)."""
    pa = lam / (1 + lam)
    pd = 1 / (1 + lam)
    pos = range(1, n + 1)
    mu = {}
    if replace:
        tuples = list(itertools.product(pos, repeat=d))
    else:
        tuples = list(itertools.permutations(pos, d))
    for t in tuples:
        mu[("a", t)] = pa / len(tuples)
    for j in pos:
        mu[("s", j)] = pd / n
    return mu, pa, pd, tuples


@pytest.mark.parametrize(
    "n,d,replace",
    [(1, 1, True), (2, 2, True), (3, 2, True), (3, 3, True), (4, 2, True), (3, 2, False), (3, 3, False), (4, 3, False)],
)
def test_conditional_innovation_law_exact(n, d, replace):
    """For every state y of D (lengths ≤ 3) and every innovation ξ:
    K_D(y, y') · q(ξ | y, y') = μ(ξ) · 1{φ_1(y, ξ) = y'} with y' = φ_1(y, ξ), where q is the
    conditional law the sampler draws from (docs/model.md §12: J_1 uniform among the
    positions of the length D grew from, J_2..J_d as in the model given J_1; a service
    position uniform among the positions of the length D lost from, or among D's empty
    positions).  Summed over y' this is: ξ is independent of D_t with law μ.  Exact
    rational arithmetic, so any error is caught, not estimated."""
    lam = Fraction(7, 10)
    mu, pa, pd, _tuples = _innovation_laws(n, d, replace, lam)
    for y in sorted_states(n, 3):
        # the forward kernel of D from y, grouped by the move's kind and length
        moves = {}
        for w in set(y):
            cnt = y.count(w)
            moves[("a", w)] = pa * Fraction(cnt, n)
            if w > 0:
                moves[("s", w)] = pd * Fraction(cnt, n)
        if 0 in y:
            moves[("s", 0)] = pd * Fraction(y.count(0), n)
        assert sum(moves.values()) == 1
        # q(ξ | move) as the sampler draws it
        joint = Counter()
        for (kind, w), kp in moves.items():
            holders = [p for p in range(1, n + 1) if y[p - 1] == w]
            if kind == "a":
                for j1 in holders:
                    if replace:
                        rest = list(itertools.product(range(1, n + 1), repeat=d - 1))
                    else:
                        others = [q for q in range(1, n + 1) if q != j1]
                        rest = list(itertools.permutations(others, d - 1))
                    for r in rest:
                        joint[("a", (j1,) + tuple(r))] += kp * Fraction(1, len(holders)) / len(rest)
            else:
                for j in holders:
                    joint[("s", j)] += kp * Fraction(1, len(holders))
        assert dict(joint) == mu, y
        # and each ξ drawn under a move drives D (first choice J_1, or service at j) to the
        # state of that move: one queue of length w becomes w+1 (w-1; unchanged if w = 0)
        for kind, w in moves:
            for j in [p for p in range(1, n + 1) if y[p - 1] == w]:
                i = y.index(w)
                if kind == "a":
                    want = tuple(sorted(y[:i] + (w + 1,) + y[i + 1 :], reverse=True))
                    assert arrive(y, j) == want
                else:
                    want = y if w == 0 else tuple(sorted(y[:i] + (w - 1,) + y[i + 1 :], reverse=True))
                    assert serve(y, j) == want


def test_d1_output_is_sorted_iid_geometric():
    """d = 1 (random routing): the sampled law against its closed form, sorted i.i.d.
    geometric (docs/model.md §12.3), chi-square at 1e-3; power >= 0.99 against d = 2."""
    n, lam, N = 2, 0.6, 2000
    M = 30
    exact = {_counts_key(np.array(y), M): float(_pi_dominating(y, Fraction(lam))) for y in sorted_states(n, M)}
    keys = _chi2_bins(exact, N)
    alt, _ = _exact_state_probs(n, 2, lam, True, N=N)
    alt = {k + (0,) * (M - len(k)): v for k, v in alt.items()}
    assert _power(exact, alt, keys, N, ALPHA) >= 0.99
    res = perfect.sample(n, 1, lam, samples=N, seed=12)
    obs = Counter(_counts_key(x, M) for x in res.samples)
    chi2, df = _chi2(obs, exact, keys, N)
    assert stats.chi2.sf(chi2, df) > ALPHA, (chi2, df)


def _pi_dominating(y, lam):
    """Stationary law of sorted i.i.d. geometric lengths: multinomial · ∏ (1−λ) λ^{y_i}."""
    n = len(y)
    coef = math.factorial(n)
    for v in set(y):
        coef //= math.factorial(y.count(v))
    out = Fraction(coef)
    for v in y:
        out *= (1 - lam) * lam**v
    return out


def test_dominating_process_reversible_exact():
    """Detailed balance of the sorted random-routing chain w.r.t. sorted i.i.d. geometric
    (the fact that lets the sampler generate D's past by running D forwards)."""
    lam = Fraction(3, 5)
    pa = lam / (1 + lam)
    pd = 1 / (1 + lam)
    for n in (1, 2, 3, 4):
        for y in sorted_states(n, 4):
            for p in range(1, n + 1):
                z = arrive(y, p)
                # K(y, z) = pa·#{positions of y with length y_p}/n; K(z, y) = pd·#{z's positions of y_p+1}/n
                kyz = pa * Fraction(y.count(y[p - 1]), n)
                kzy = pd * Fraction(z.count(y[p - 1] + 1), n)
                assert _pi_dominating(y, lam) * kyz == _pi_dominating(z, lam) * kzy


# =========================================================================== 2. kernels
def _arrays(x, cap):
    """Sorted vector (tuple, longest first) -> (x, c) arrays as the kernels hold them."""
    n = len(x)
    xa = np.array(x, dtype=np.int64)
    c = np.zeros(cap, dtype=np.int64)
    for m in range(cap):
        c[m] = sum(1 for v in x if v >= m)
    assert c[0] == n
    return xa, c


def test_apply_codes_matches_reference():
    """The kernel's moves (two copies, one buffer applied in reverse order) equal the
    reference moves of the definitions, on random states and code sequences; the copies
    merge when their totals meet and L is then carried alone."""
    rng = np.random.default_rng(5)
    for _trial in range(300):
        n = int(rng.integers(1, 6))
        xs = sorted(rng.integers(0, 4, n).tolist(), reverse=True)
        ys = [v + int(rng.integers(0, 3)) for v in xs]
        ys = sorted(ys, reverse=True)
        xl, cl = _arrays(tuple(xs), 40)
        xu, cu = _arrays(tuple(ys), 40)
        L = 12
        codes = np.array(
            [int(rng.integers(1, n + 1)) * (1 if rng.random() < 0.45 else -1) for _ in range(L)], dtype=np.int64
        )
        st = np.zeros(6, dtype=np.int64)
        st[0], st[1] = sum(xs), sum(ys)
        st[2] = int(st[0] == st[1])
        K.apply_codes(codes, 0, L, xl, cl, xu, cu, st)
        a, b = tuple(xs), tuple(ys)
        met = a == b
        for code in codes[::-1]:
            a = arrive(a, code) if code > 0 else serve(a, -code)
            if not met:
                b = arrive(b, code) if code > 0 else serve(b, -code)
                met = sum(a) == sum(b)
        assert tuple(xl) == a
        assert [int((xl >= m).sum()) for m in range(40)] == cl.tolist()
        assert bool(st[2]) == met
        if not met:
            assert tuple(xu) == b


def _generate_with_states(n, d, replace, lam, steps, seed):
    """Run generate_past one step at a time; return D after each step (= D_t in forward
    time, the state the step's innovation is drawn against) and the codes."""
    s = np.random.SeedSequence(seed).generate_state(4, dtype=np.uint64)
    g = np.empty(n, dtype=np.int64)
    K.geometric_fill(g, math.log(lam), s)
    x = np.sort(g)[::-1].copy()
    c = np.zeros(200, dtype=np.int64)
    for m in range(200):
        c[m] = (x >= m).sum()
    gs = np.array([x.max(), x.max()], dtype=np.int64)
    buf = np.zeros(steps, dtype=np.int64)
    mark = np.zeros(n, dtype=np.int8)
    picks = np.zeros(d, dtype=np.int64)
    before, after = [], []
    for i in range(steps):
        before.append(tuple(x.tolist()))
        assert K.generate_past(x, c, gs, s, buf, i, 1, n, d, replace, lam / (1 + lam), mark, picks) == 1
        after.append(tuple(x.tolist()))
    return before, after, buf


@pytest.mark.parametrize("n,d,replace,lam", [(3, 2, True, 0.6), (3, 2, False, 0.6), (4, 3, True, 0.5)])
def test_generated_innovations_law_and_consistency(n, d, replace, lam):
    """The backward generation of D and the innovations it emits.

    (a) Consistency: with D_{t+1} the state before a generated step and D_t the state after
    it, the code must be compatible with D's forward move D_t -> D_{t+1}: an arrival at
    position M of the JSQ(d) copies requires x^D_t(M) <= w where D grew a queue of length w
    (M >= J_1); a service at j requires x^D_t(j) = the length D lost from (0 for no move).
    (b) Law: given D_t, the code has the JSQ(d) innovation law μ (independent of D_t):
    chi-square over (D_t, code) cells against μ, fixed seed, rejection at 1e-4."""
    steps = 40000
    before, after, buf = _generate_with_states(n, d, replace, lam, steps, 11)
    cells = Counter()
    for i in range(steps):
        Dt, Dt1, code = after[i], before[i], int(buf[i])
        diff = [b - a for a, b in zip(Dt, Dt1)]
        if sum(diff) == 1:  # forward arrival to a queue of length w
            w = Dt[diff.index(1)]
            assert code > 0 and Dt[code - 1] <= w
        elif sum(diff) == -1:
            w = Dt[diff.index(-1)]
            assert code < 0 and Dt[-code - 1] == w
        else:
            assert code < 0 and Dt[-code - 1] == 0
        cells[(Dt, code)] += 1
    # μ on codes: arrival at M = m w.p. pa·P(max = m); service at j w.p. pd/n
    pa, pd = lam / (1 + lam), 1 / (1 + lam)
    mu = {}
    for m in range(1, n + 1):
        if replace:
            pm = (m / n) ** d - ((m - 1) / n) ** d
        else:
            pm = math.comb(m - 1, d - 1) / math.comb(n, d)
        mu[m] = pa * pm
        mu[-m] = pd / n
    assert abs(sum(mu.values()) - 1) < 1e-12
    by_state = Counter()
    for (Dt, _), k in cells.items():
        by_state[Dt] += k
    chi2 = 0.0
    df = 0
    for Dt, tot in by_state.items():
        if tot < 400:
            continue
        for code, pr in mu.items():
            o = cells.get((Dt, code), 0)
            if pr == 0:  # e.g. M = 1 is impossible without replacement
                assert o == 0, (Dt, code)
                continue
            e = tot * pr
            chi2 += (o - e) ** 2 / e
            df += 1
        df -= 1
    assert df >= 20
    assert stats.chi2.sf(chi2, df) > 1e-4, (chi2, df)


def test_past_is_regenerated_bit_identically():
    """Extending the past reuses exactly the same innovations, and a block regenerated
    from its checkpoint and seed equals the block as first generated."""
    p = Params(50, 2, 0.8)
    ss = spawn_seeds(4, 1)[0]
    past = perfect_past._Past(p, ss, 64, None)
    first = []
    for k in range(6):  # blocks of 64, 64, 128, 256, 512, 1024 steps
        past.extend(past.horizon + 1)
        first.append(past.buf[: past._block_len(k)].copy())
    all_first = np.concatenate(first)
    assert all_first.size == 2048
    assert np.array_equal(past.innovations(2048), all_first)  # regenerated from checkpoints
    short = perfect_past._Past(p, ss, 64, None).innovations(256)
    assert np.array_equal(short, all_first[:256])  # a shorter past is a prefix of a longer one
    other = perfect_past._Past(p, spawn_seeds(5, 1)[0], 64, None).innovations(256)
    assert not np.array_equal(other, short)


def _reference_run(x0, codes):
    x = tuple(x0)
    for code in codes[::-1]:
        x = arrive(x, int(code)) if code > 0 else serve(x, int(-code))
    return x


def test_coalesced_output_does_not_depend_on_the_start_below_D():
    """The sandwich at work: once the copies from -T coalesce, every JSQ(d) copy started at
    -T from any state x ≺_w D_{-T} (here: random ones, with the reference moves) ends at
    the same state, and so does the run from every longer horizon."""
    rng = np.random.default_rng(2)
    p = Params(4, 2, 0.7)
    checked = 0
    for r in range(40):
        ss = spawn_seeds(100, 40)[r]
        past = perfect_past._Past(p, ss, 64, None)
        T = 64
        while True:
            past.extend(T)
            met, x, _ = past.run_from(T, None)
            if met:
                break
            T *= 2
        kb = past.bounds.index(T)
        cD = past.dc if kb == len(past.checkpoints) else past.checkpoints[kb]
        D = np.empty(4, dtype=np.int64)
        K.fill_lengths(np.concatenate([cD, [0, 0]]), D)
        codes = past.innovations(T)
        starts = [tuple(D.tolist()), (0, 0, 0, 0)]
        for _ in range(20):
            z = tuple(sorted(rng.integers(0, D.max() + 1, 4).tolist(), reverse=True))
            if wsub(z, tuple(D.tolist())):
                starts.append(z)
        for z in starts:
            assert _reference_run(z, codes) == tuple(x.tolist())
            checked += 1
        past.extend(4 * T)
        met4, x4, _ = past.run_from(4 * T, None)
        assert met4 and np.array_equal(x4, x)
    assert checked > 100


def test_kernel_max_choice_with_replacement_both_paths():
    """conditional_max with replacement, explicit (d−1 <= 64) and inversion (d−1 > 64):
    P(M <= m | J_1) = ((m+1)/n)^(d−1) for m >= J_1 (0-based), chi-square."""
    for n, d, j1 in [(30, 3, 4), (300, 100, 10), (50, 200, 49)]:
        s = np.random.SeedSequence(n + d).generate_state(4, dtype=np.uint64)
        mark = np.zeros(n, dtype=np.int8)
        picks = np.zeros(d, dtype=np.int64)
        draws = np.array([K.conditional_max(j1, n, d, True, s, mark, picks) for _ in range(20000)])
        cdf = np.array([((m + 1) / n) ** (d - 1) if m >= j1 else 0.0 for m in range(n)])
        probs = np.diff(np.concatenate([[0.0], cdf]))
        obs = np.bincount(draws, minlength=n)
        assert obs[probs == 0].sum() == 0
        keep = probs * draws.size >= 5
        e = probs[keep] * draws.size
        rest_e = draws.size - e.sum()
        o = obs[keep]
        chi2 = float(((o - e) ** 2 / e).sum()) + ((draws.size - o.sum() - rest_e) ** 2 / rest_e if rest_e > 1 else 0)
        assert stats.chi2.sf(chi2, max(1, keep.sum())) > 1e-4, (n, d, chi2)


def test_kernel_max_choice_without_replacement_all_paths():
    """conditional_max without replacement, both strategies (rejection for small d,
    top-down when (d-1)^2 > n-1): the law of M given J_1 against the exact law
    P(M <= m | J_1) = C(m-1, d-1)/C(n-1, d-1) for m >= J_1 (1-based), chi-square."""
    for n, d, j1 in [(40, 3, 5), (40, 12, 5), (6, 6, 2), (30, 2, 29)]:
        s = np.random.SeedSequence(n * 100 + d).generate_state(4, dtype=np.uint64)
        mark = np.zeros(n, dtype=np.int8)
        picks = np.zeros(d, dtype=np.int64)
        draws = np.array([K.conditional_max(j1, n, d, False, s, mark, picks) for _ in range(20000)])
        assert not mark.any()
        # exact law of the 0-based max given J_1 = j1 (0-based)
        others = n - 1
        k = d - 1
        cdf = {}
        for m in range(n):
            cnt = m + 1 - (1 if j1 <= m else 0)
            cdf[m] = (math.comb(cnt, k) / math.comb(others, k)) if m >= j1 else 0.0
        probs = np.array([cdf[m] - (cdf[m - 1] if m > 0 else 0.0) for m in range(n)])
        assert abs(probs.sum() - 1) < 1e-12
        obs = np.bincount(draws, minlength=n)
        keep = probs * draws.size >= 5
        e = probs[keep] * draws.size
        o = obs[keep]
        chi2 = float(((o - e) ** 2 / e).sum())
        assert stats.chi2.sf(chi2, max(1, keep.sum() - 1)) > 1e-4, (n, d, chi2)


# =========================================================================== 3. output law
def _exact_state_probs(n, d, lam, replace, M=None, N=10**5):
    """Exact stationary law of the counts, truncated at queue length M, with M raised until
    the truncated mass is below 0.05/N (invisible to a test with N samples)."""
    if M is None:
        M = {2: 24, 3: 18, 4: 14}.get(n, 12)
    while True:
        law = profile_law(n, d, lam, replace=replace, M=M)
        if law.tail * N < 0.05:
            break
        assert M < 80, (law.tail, M)
        M += 4
    return {tuple(int(v) for v in row): float(pr) for row, pr in zip(law.states, law.prob)}, M


def _counts_key(x, M):
    return tuple(int((x >= i).sum()) for i in range(1, M + 1))


def _law_after_steps_from_empty(n, d, lam, replace, steps, M):
    """Exact law of the sorted chain after `steps` steps from empty (reference moves, exact
    enumeration of the innovation): the answer of a sampler that stops too early."""
    pa, pd = lam / (1 + lam), 1 / (1 + lam)
    if replace:
        pM = {m: (m / n) ** d - ((m - 1) / n) ** d for m in range(1, n + 1)}
    else:
        pM = {m: math.comb(m - 1, d - 1) / math.comb(n, d) for m in range(1, n + 1)}
    dist = {tuple([0] * n): 1.0}
    for _ in range(steps):
        new = Counter()
        for x, pr in dist.items():
            for m, q in pM.items():
                if q > 0:
                    new[arrive(x, m)] += pr * pa * q
            for j in range(1, n + 1):
                new[serve(x, j)] += pr * pd / n
        dist = new
    return {_counts_key(np.array(x), M): pr for x, pr in dist.items()}


def _chi2_bins(exact, N):
    keys = sorted(k for k, v in exact.items() if v * N >= 5)
    return keys


def _chi2(obs_counter, exact, keys, N):
    p0 = np.array([exact[k] for k in keys])
    p0 = np.append(p0, 1 - p0.sum())
    o = np.array([obs_counter.get(k, 0) for k in keys])
    o = np.append(o, N - o.sum())
    e = N * p0
    return float(((o - e) ** 2 / e).sum()), len(p0) - 1


def _power(exact, alt, keys, N, alpha):
    """Power of the chi-square test at level alpha against the alternative law `alt`:
    noncentral chi-square with noncentrality N Σ (p_alt - p0)^2 / p0 over the bins."""
    p0 = np.array([exact[k] for k in keys])
    p1 = np.array([alt.get(k, 0.0) for k in keys])
    p0 = np.append(p0, 1 - p0.sum())
    p1 = np.append(p1, 1 - p1.sum())
    nc = N * float(((p1 - p0) ** 2 / p0).sum())
    df = len(p0) - 1
    crit = stats.chi2.isf(alpha, df)
    return float(stats.ncx2.sf(crit, df, nc))


ALPHA = 1e-3
CONFIGS = [
    # (n, d, lam, replace, samples, seed, steps from empty of the "stopped too early" alternative)
    (3, 2, 0.7, True, 20000, 1, 80),
    (4, 3, 0.6, True, 10000, 2, 40),
    (3, 2, 0.6, False, 6000, 3, 20),
]


@pytest.mark.parametrize("n,d,lam,replace,N,seed,burn", CONFIGS)
def test_output_law_matches_exact_stationary_law(n, d, lam, replace, N, seed, burn):
    """Chi-square of the sampled states (counts vectors) against the exact stationary law
    of the profile chain (exact_small.profile_law), bins with expected count >= 5 plus one
    bin for the rest, rejection at level 1e-3, fixed seed.

    Power (noncentral chi-square, computed here and asserted >= 0.99) against two wrong
    answers: the law after `burn` steps from empty (a sampler that stopped too early) and
    the d = 1 stationary law (a sampler that returns the dominating process).  When this
    was written: (3, 2, 0.7), N = 20000, 80 steps (16 time units, TV distance 0.027 from
    the stationary law): power 0.99999; (4, 3, 0.6), N = 10000, 40 steps (TV 0.046): power
    1 − 2e-10; (3, 2, 0.6) without replacement, N = 6000, 20 steps (TV 0.095): power 1.0;
    against d = 1: 1.0 in all three."""
    exact, M = _exact_state_probs(n, d, lam, replace, N=N)
    keys = _chi2_bins(exact, N)
    alt_burn = _law_after_steps_from_empty(n, d, lam, replace, burn, M)
    alt_d1 = {_counts_key(np.array(y), M): float(_pi_dominating(y, Fraction(lam))) for y in sorted_states(n, M)}
    assert _power(exact, alt_burn, keys, N, ALPHA) >= 0.99
    assert _power(exact, alt_d1, keys, N, ALPHA) >= 0.99
    res = perfect.sample(n, d, lam, samples=N, seed=seed, replace=replace)
    obs = Counter(_counts_key(x, M) for x in res.samples)
    chi2, df = _chi2(obs, exact, keys, N)
    assert stats.chi2.sf(chi2, df) > ALPHA, (chi2, df)
    # u_1 = busy fraction has mean exactly λ in equilibrium (rate balance): a 5-sigma check
    mean, se = res.mean_profile()
    assert abs(mean[0] - lam) < 5 * se[0]


@pytest.mark.slow
@pytest.mark.parametrize(
    "n,d,lam,replace,N,seed",
    [
        (3, 2, 0.8, True, 200000, 7),
        (4, 2, 0.5, False, 100000, 8),
        (5, 3, 0.7, True, 60000, 9),
        (3, 3, 0.7, False, 100000, 10),
        (2, 2, 0.8, True, 200000, 11),
    ],
)
def test_output_law_matches_exact_stationary_law_slow(n, d, lam, replace, N, seed):
    """As above with larger samples, without replacement, d = 3 at n = 5."""
    exact, M = _exact_state_probs(n, d, lam, replace, N=N)
    keys = _chi2_bins(exact, N)
    res = perfect.sample(n, d, lam, samples=N, seed=seed, replace=replace)
    obs = Counter(_counts_key(x, M) for x in res.samples)
    chi2, df = _chi2(obs, exact, keys, N)
    assert stats.chi2.sf(chi2, df) > ALPHA, (chi2, df)


def _flux_balance_check(res, d, lam, replace, levels, sigmas=5.0):
    """Exact identity for every n (docs/model.md §12.8): in equilibrium the
    flux into level i equals the flux out, λ E[P_i] = E[u_{i+1}] summed over the levels above,
    i.e. E[u_i] = λ E[P_{i−1}] with P_0 = 1, P_j = u_j^d (with replacement) or
    C(c_j, d)/C(n, d) (without).  Checked per sample as the mean of u_i − λ P_{i−1}, within
    `sigmas` standard errors."""
    n = res.params.n
    c = res.counts
    c = np.concatenate([np.full((c.shape[0], 1), n), c, np.zeros((c.shape[0], levels + 1), dtype=np.int64)], axis=1)
    out = []
    for i in range(1, levels + 1):
        prev = c[:, i - 1]
        P = (prev / n) ** d if replace else np.array([math.comb(int(v), d) / math.comb(n, d) for v in prev])
        diff = c[:, i] / n - lam * P
        se = diff.std(ddof=1) / math.sqrt(diff.size)
        assert abs(diff.mean()) <= sigmas * se + 1e-12, (i, diff.mean(), se)
        out.append((diff.mean(), se))
    return out


def test_flux_balance_at_moderate_n():
    """At n = 100 (far beyond the exact solvers) the exact flux identity holds within 5 s.e.;
    the d = 1 law would miss it at level 2 by λ² − λ E[u_1²] ≈ 0.13, hundreds of s.e."""
    lam = 0.8
    res = perfect.sample(100, 2, lam, samples=60, seed=21)
    checks = _flux_balance_check(res, 2, lam, True, 4)
    assert max(se for _, se in checks) < 0.01
    res = perfect.sample(60, 3, lam, samples=40, seed=22, replace=False)
    _flux_balance_check(res, 3, lam, False, 3)


@pytest.mark.slow
@pytest.mark.parametrize("n,d,lam,S", [(1000, 2, 0.9, 60), (1000, 5, 0.95, 40), (300, 100, 0.9, 60)])
def test_flux_balance_large_slow(n, d, lam, S):
    """The flux identity at n = 1000 (and d = 100 > 65, the inversion path for the maximum)."""
    res = perfect.sample(n, d, lam, samples=S, seed=23)
    _flux_balance_check(res, d, lam, True, 4)


# =========================================================================== API and CLI
def test_api_results_and_determinism():
    res = perfect.sample(20, 2, 0.8, samples=6, seed=9)
    assert res.samples.shape == (6, 20)
    assert (np.diff(res.samples, axis=1) <= 0).all()
    assert np.array_equal(res.samples, perfect.sample(20, 2, 0.8, samples=6, seed=9, workers=3).samples)
    # sample s is child s: the first 3 of 6 equal the 3 of a 3-sample call
    assert np.array_equal(res.samples[:3], perfect.sample(20, 2, 0.8, samples=3, seed=9).samples)
    assert not np.array_equal(res.samples, perfect.sample(20, 2, 0.8, samples=6, seed=10).samples)
    assert np.allclose(res.coalescence_time, res.coalescence_steps / (20 * 1.8))
    d = json.loads(json.dumps(res.to_dict(), allow_nan=False))
    assert d["samples"] == res.samples.tolist() and len(d["coalescence_time"]) == 6
    assert d["seconds"] >= 0
    fr = res.to_frame()
    assert set(fr.columns) >= {"sample", "level", "u", "coalescence_time"}
    assert len(fr) == 6 * res.samples.max()
    text = res.summary()
    assert "mean u_i" in text and "coalescence horizon" in text
    # counts representation of states.py
    from supermarket.system.states import counts_from_lengths

    c = perfect.sample_counts(20, 2, 0.8, seed=9)
    assert np.array_equal(c, counts_from_lengths(res.samples[0]))


@pytest.mark.parametrize(
    "kwargs,exc,word",
    [
        (dict(n=0, d=2, lam=0.5), ValueError, "n"),
        (dict(n=5, d=0, lam=0.5), ValueError, "d"),
        (dict(n=5, d=2, lam=1.0), ValueError, "load"),
        (dict(n=5, d=2, lam=0.5, samples=0), ValueError, "samples"),
        (dict(n=3, d=4, lam=0.5, replace=False), ValueError, "d must be <= n"),
        (dict(n=5, d=2, lam=0.5, max_time=0), ValueError, "max_time"),
        (dict(n=5, d=2, lam=0.5, max_memory=-1), ValueError, "max_memory"),
        (dict(n=5.0, d=2, lam=0.5), TypeError, "n"),
    ],
)
def test_bad_input(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        perfect.sample(**kwargs)


def test_budgets_refuse_rather_than_truncate():
    with pytest.raises(perfect.BudgetExceeded, match="max_memory"):
        perfect.sample(2000, 2, 0.95, max_memory=200_000)  # refused when the blocks grow
    with pytest.raises(perfect.BudgetExceeded, match="at least"):
        perfect.sample(10**6, 2, 0.5, max_memory=10**6)  # refused before any work
    with pytest.raises(perfect.BudgetExceeded, match="max_time") as info:
        perfect.sample(3000, 2, 0.97, samples=2, max_time=0.05)
    assert info.value.completed is None or info.value.completed.samples.shape[0] < 2


def _cli(*args):
    from click.testing import CliRunner

    from supermarket.cli import main

    return CliRunner().invoke(main, ["perfect", *args], catch_exceptions=False)


def test_cli():
    r = _cli("--n", "4", "--d", "2", "--load", "0.7", "--replications", "50", "--seed", "3")
    assert r.exit_code == 0, r.output
    assert "mean u_i" in r.stdout
    r = _cli("--n", "4", "--d", "2", "--load", "0.7", "--replications", "5", "--json")
    assert r.exit_code == 0
    out = json.loads(r.stdout)
    assert len(out["samples"]) == 5 and len(out["samples"][0]) == 4
    assert out["samples"] == perfect.sample(4, 2, 0.7, samples=5, seed=0).samples.tolist()
    for bad in (
        ["--load", "1.5"],
        ["--replications", "0"],
        ["--max-seconds", "0.05", "--n", "3000", "--load", "0.97"],
        ["--max-memory-mb", "0.1", "--n", "3000", "--load", "0.97"],
    ):
        r = _cli("--d", "2", *bad)
        assert r.exit_code == 2, (bad, r.output)
        assert r.stderr.startswith("supermarket: error:") and r.stderr.count("\n") == 1, r.stderr


def test_cli_keeps_completed_samples_and_speaks_cli_words(monkeypatch):
    """Issue 19: --max-seconds threw away the samples it had completed and named the Python
    parameter max_time.  The completed samples are printed (each exact), the rest named in CLI
    words, and the JSON says it is partial."""
    done = perfect.sample(4, 2, 0.7, samples=3, seed=0)

    def out_of_time(*a, **k):
        raise perfect.BudgetExceeded(
            "sample 3 did not coalesce within max_time=30 s (…); no approximate sample "
            "is returned (3 of 10 samples completed)",
            done,
        )

    monkeypatch.setattr(perfect, "sample", out_of_time)
    r = _cli("--n", "4", "--d", "2", "--load", "0.7", "--max-seconds", "30")
    assert r.exit_code == 0 and "mean u_i" in r.stdout
    assert "3 of 10 samples finished and are kept" in r.stderr and "--max-seconds 30" in r.stderr
    assert "max_time" not in r.stderr
    out = json.loads(_cli("--n", "4", "--d", "2", "--load", "0.7", "--max-seconds", "30", "--json").stdout)
    assert out["partial"] is True and out["replications_requested"] == 10 and len(out["samples"]) == 3
    assert out["samples"] == done.samples.tolist()


def test_cli_samples_is_a_deprecated_alias_and_workers_do_not_change_samples():
    args = ("--n", "5", "--d", "2", "--load", "0.7", "--seed", "4", "--json")
    new = _cli(*args, "--replications", "6")
    old = _cli(*args, "--samples", "6")
    one = _cli(*args, "--replications", "6", "--workers", "1")
    assert json.loads(new.stdout)["samples"] == json.loads(old.stdout)["samples"] == json.loads(one.stdout)["samples"]
    assert new.stderr == "" and old.stderr.strip() == (
        "supermarket: warning: --samples is deprecated; use "
        "--replications (one name for independent repetitions in "
        "every command)"
    )
    both = _cli(*args, "--samples", "2", "--replications", "3")
    assert both.exit_code == 2 and "give --replications only" in both.stderr


def test_interruption_is_checked_between_chunks():
    """The stop flag (set on Ctrl-C in the threaded path) is honoured between kernel chunks."""
    import threading

    stop = threading.Event()
    past = perfect_past._Past(Params(50, 2, 0.8), spawn_seeds(0, 1)[0], 64, stop)
    past.extend(256)
    stop.set()
    with pytest.raises(KeyboardInterrupt):
        past.extend(1024)
    with pytest.raises(KeyboardInterrupt):
        past.run_from(256, None)


def test_simulate_start_perfect_needs_no_burn_in():
    """``simulate(start="perfect")``: every replication starts from its own exact stationary
    sample, the default burn-in is 0, the result says so, and E[u_1] = λ holds from the very
    first step (an exact identity, docs/model.md §3)."""
    import supermarket as sm

    r = sm.simulate(50, 2, 0.8, steps=400_000, start="perfect", replications=2, seed=4, progress=False)
    assert r.burn_in == 0 and "exact stationary sample" in r.start_note
    assert abs(r.u_mean[0] - 0.8) <= 4.5 * r.u_stderr[0]
    again = sm.simulate(50, 2, 0.8, steps=400_000, start="perfect", replications=2, seed=4, workers=1, progress=False)
    assert np.array_equal(r.u_mean, again.u_mean)  # the same samples whatever the workers
    with pytest.raises(ValueError, match="perfect"):
        sm.simulate(50, 2, 1.1, steps=1000, start="perfect", progress=False)


def test_json_names_u_mean_u_stderr_as_simulate_and_exact():
    # issue 19 item 7: perfect wrote mean_u/se_u where simulate and exact write u_mean/u_stderr
    from click.testing import CliRunner

    from supermarket.cli import main

    r = CliRunner().invoke(
        main, ["perfect", "--n", "2", "--d", "2", "--load", "0.5", "--replications", "3", "--json", "--workers", "1"]
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["u_mean"] == out["mean_u"] and out["u_stderr"] == out["se_u"]
    assert len(out["u_mean"]) == len(out["u_stderr"]) >= 1 and out["replications_requested"] == 3
