"""Parameter validation (issue 2): every bad input raises the documented error."""

import math

import numpy as np
import pytest

from supermarket import theory as th
from supermarket.model import Params, as_seed_sequence, check_load, exact_load, parse_count, spawn_seeds
from supermarket.system.states import start_counts


@pytest.mark.parametrize("bad", [2.5, True, "3", None, 3.0, [3]])
def test_non_integers_are_type_errors(bad):
    with pytest.raises(TypeError, match="n must be an integer"):
        Params(bad, 2, 0.5)
    with pytest.raises(TypeError, match="d must be an integer"):
        Params(10, bad, 0.5)


@pytest.mark.parametrize("bad", [0, -1, -(10**12)])
def test_zero_and_negative_counts_are_value_errors(bad):
    with pytest.raises(ValueError, match=r"n must be an integer >= 1"):
        Params(bad, 2, 0.5)
    with pytest.raises(ValueError, match=r"d must be an integer >= 1"):
        Params(10, bad, 0.5)


@pytest.mark.parametrize("bad", [0, -0.5, math.nan, math.inf, -math.inf, "nan", "inf"])
def test_bad_loads(bad):
    with pytest.raises(ValueError, match="load"):
        Params(10, 2, bad)


@pytest.mark.parametrize("bad", [True, None, "abc", [0.5]])
def test_load_type_errors(bad):
    with pytest.raises(TypeError, match="load"):
        check_load(bad)


@pytest.mark.parametrize("lam", [1, 1.0, "1", 1.5])
def test_equilibrium_needs_load_below_one(lam):
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        Params(10, 2, lam)
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        th.fixed_point(2, lam)
    assert Params(10, 2, lam, stable=False).lam == float(lam)


def test_d_greater_than_n_without_replacement():
    with pytest.raises(ValueError, match="d must be <= n"):
        Params(5, 6, 0.5, replace=False)
    assert Params(5, 6, 0.5, replace=True).d == 6  # paper 000 allows d > n with replacement


def test_replace_must_be_bool():
    with pytest.raises(TypeError, match="replace"):
        Params(5, 2, 0.5, replace="no")


@pytest.mark.parametrize(
    "fn,args",
    [
        (th.fixed_point, (2.5, 0.9)),
        (th.fixed_point, (0, 0.9)),
        (th.k_lambda_d, (True, 0.9)),
        (th.k_hypothesis, ("3", 2, 0.9)),
        (th.mixing_bounds, (100, 2, math.nan)),
        (th.regime_002, (0, 2, 0.5)),
        (th.design, (0.9, 0)),
        (th.design, (1.0, 2)),
        (th.linearised_q, (2, -0.1)),
    ],
)
def test_theory_functions_validate(fn, args):
    with pytest.raises((TypeError, ValueError)):
        fn(*args)


def test_exact_load_reads_what_was_written():
    from fractions import Fraction

    assert exact_load("0.9") == Fraction(9, 10)
    assert exact_load(0.9) == Fraction(9, 10)
    assert exact_load("0.999999523162841796875") == 1 - Fraction(1, 2**21)


def test_parse_count():
    assert parse_count("steps", "1e7") == 10_000_000
    assert parse_count("steps", "12") == 12
    with pytest.raises(ValueError):
        parse_count("steps", "1.5")
    with pytest.raises(ValueError):
        parse_count("steps", "0")
    with pytest.raises(TypeError):
        parse_count("steps", "ten")


def test_seeds_child_r_independent_of_count():
    a = spawn_seeds(7, 3)
    b = spawn_seeds(7, 10)
    for r in range(3):
        assert a[r].generate_state(4).tolist() == b[r].generate_state(4).tolist()
    root = np.random.SeedSequence(7).spawn(3)
    assert a[2].generate_state(4).tolist() == root[2].generate_state(4).tolist()
    with pytest.raises(ValueError):
        as_seed_sequence(-1)
    with pytest.raises(TypeError):
        as_seed_sequence(1.5)


def test_a_generator_is_consumed_as_numpy_consumes_one():
    # a Generator passed as seed advances: the same generator twice gives two different
    # runs; a generator in the same state, an int or a SeedSequence give the same run again
    from supermarket import simulate

    def run(seed):
        return simulate(30, 2, 0.8, steps=20_000, seed=seed, progress=False).u_mean.tolist()

    g = np.random.default_rng(3)
    first, second = run(g), run(g)
    assert first != second
    assert run(np.random.default_rng(3)) == first
    h = np.random.default_rng(3)
    run(h)
    assert h.random() != np.random.default_rng(3).random()  # the generator was drawn from
    assert run(5) == run(5)
    ss = np.random.SeedSequence(5)
    assert run(ss) == run(ss) == run(5)


def test_start_states():
    n, d, lam = 100, 3, 0.9
    assert start_counts(n, d, lam, "empty").size == 0
    assert start_counts(n, d, lam, "customers:3").tolist() == [100, 100, 100]
    fp = start_counts(n, d, lam, "fixed-point")
    assert fp[0] == 90
    lc = start_counts(n, d, lam, "long:50")
    assert len(lc) == 50 and lc[-1] == 1
    x = np.array([0, 1, 2, 2] + [0] * 96)
    assert start_counts(n, d, lam, x).tolist() == [3, 2]
    for bad in ["nope", "long:-1", "customers:x", "long:1000000000000"]:
        with pytest.raises(ValueError):
            start_counts(n, d, lam, bad)
    with pytest.raises(ValueError, match="non-increasing"):
        start_counts(n, d, lam, np.array([0.2, 0.5]))
    with pytest.raises(ValueError, match="entries"):
        start_counts(n, d, lam, np.array([1, 2, 3]))


# --------------------------------------------------------------------------- machine limits
from supermarket.model import INT64_MAX, MAX_LOAD, MAX_N


@pytest.mark.parametrize("text", ["1e400", "1e999999999999", "9223372036854775808", "1e19"])
def test_parse_count_refuses_beyond_int64_without_building_the_int(text):
    with pytest.raises(ValueError, match=r"--n must be an integer in \[1, 9223372036854775807\]"):
        parse_count("--n", text)


def test_parse_count_bounds_are_exact():
    assert parse_count("--n", "9223372036854775807") == INT64_MAX
    assert parse_count("--n", "1e18") == 10**18
    assert parse_count("--r", "1000000", maximum=10**6) == 10**6
    with pytest.raises(ValueError, match=r"in \[1, 1000000\]"):
        parse_count("--r", "1000001", maximum=10**6)
    for bad in ["1.5", "nan", "inf", "-3", "0", "1e-999999999999"]:
        with pytest.raises(ValueError):
            parse_count("--n", bad)
    for bad in ["", "abc", "1e", "--"]:
        with pytest.raises(TypeError):
            parse_count("--n", bad)


def test_python_api_raises_value_error_not_overflow_for_huge_ints():
    for big in [10**19, 10**400, -(10**400)]:
        with pytest.raises(ValueError, match="n must be an integer"):
            Params(big, 2, 0.5)
        with pytest.raises(ValueError, match="d must be an integer"):
            th.fixed_point(big, 0.5)
    with pytest.raises(ValueError, match=r"about 10\^400"):
        th.theorem_1_2(10**400, 10, 0.9)


def test_engine_limit_on_n_and_theory_limit():
    assert Params(MAX_N, 2, 0.5).n == MAX_N
    with pytest.raises(ValueError, match=r"2\^53"):
        Params(MAX_N + 1, 2, 0.5)
    # the closed forms work in double precision well beyond the engines (Theorem 1.2 needs n >= 1e15)
    assert th.k_hypothesis(10**20, 2, 0.9) >= 1
    with pytest.raises(ValueError, match=r"in \[1, 1e100\]"):
        th.k_hypothesis(10**101, 2, 0.9)


def test_load_that_rounds_to_one_is_refused_except_in_exact_arithmetic():
    lam = "0.99999999999999999999"  # < 1 exactly, 1.0 as a double
    with pytest.raises(ValueError, match="rounds to 1"):
        check_load(lam)
    with pytest.raises(ValueError, match="rounds to 1"):
        th.mean_queue_length(1, lam)  # was ZeroDivisionError
    assert th.k_lambda_d(10, lam) == 20  # exact: 1/(1−λ) = 10^20
    assert check_load(0.99999999999999989) < 1  # 1 − 2^-53 is the largest accepted


def test_unstable_load_has_a_ceiling():
    assert check_load(MAX_LOAD, require_stable=False) == MAX_LOAD
    for bad in [MAX_LOAD * 1.0001, "1e300", 1e308]:
        with pytest.raises(ValueError, match="finite horizon"):
            check_load(bad, require_stable=False)
    with pytest.raises(ValueError, match="finite number > 0"):
        check_load("1e-400")  # 0 in double precision
