"""Parameter validation (issue 2): every bad input raises the documented error."""

import math

import numpy as np
import pytest

from supermarket import theory as th
from supermarket.model import Params, as_seed_sequence, check_load, exact_load, parse_count, spawn_seeds
from supermarket.states import start_counts


@pytest.mark.parametrize("bad", [2.5, True, "3", None, 3.0, [3]])
def test_non_integers_are_type_errors(bad):
    with pytest.raises(TypeError, match="n must be an integer"):
        Params(bad, 2, 0.5)
    with pytest.raises(TypeError, match="d must be an integer"):
        Params(10, bad, 0.5)


@pytest.mark.parametrize("bad", [0, -1, -10**12])
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


@pytest.mark.parametrize("fn,args", [
    (th.fixed_point, (2.5, 0.9)), (th.fixed_point, (0, 0.9)), (th.k_lambda_d, (True, 0.9)),
    (th.k_hypothesis, ("3", 2, 0.9)), (th.mixing_bounds, (100, 2, math.nan)), (th.regime_002, (0, 2, 0.5)),
    (th.design, (0.9, 0)), (th.design, (1.0, 2)), (th.linearised_q, (2, -0.1)),
])
def test_theory_functions_validate(fn, args):
    with pytest.raises((TypeError, ValueError)):
        fn(*args)


def test_exact_load_reads_what_was_written():
    from fractions import Fraction
    assert exact_load("0.9") == Fraction(9, 10)
    assert exact_load(0.9) == Fraction(9, 10)
    assert exact_load("0.999999523162841796875") == 1 - Fraction(1, 2 ** 21)


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
