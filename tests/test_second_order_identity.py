"""The second-order identities of docs/control-variates.md ([derived]) against exact laws:
``E[A(u_i u_j)] = 0`` in equilibrium, with ``A(u_i u_j)`` as computed by
benchmarks/second_order_controls.py, summed over the exact stationary law of n = 3 built
from the per-queue definition (tests/exact_small.py, ``queue_law``), with and without
replacement.  A sign or a factor of n wrong in the δ_ij term, or the departures' sign, gives
a mean of order 0.01 to 0.1 here, far above the truncation error."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from exact_small import queue_law

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "second_order_controls.py"


def _module():
    spec = importlib.util.spec_from_file_location("second_order_controls", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("replace", [True, False])
def test_quadratic_identities_hold_under_the_exact_law(replace):
    n, d, lam = 3, 2, 0.5
    law = queue_law(n, d, lam, replace=replace, M=16)
    assert law.tail < 1e-9  # the truncation (arrivals beyond M dropped) moves each mean by about this
    u = law.states / n
    Z, Y = _module().controls(u, n, d, lam, replace, m=4, q=3)
    EZ = law.prob @ Z
    EY = law.prob @ Y
    assert np.all(np.abs(EZ) < 1e-8), EZ  # the first-order identities, as a check of the setup
    assert np.all(np.abs(EY) < 1e-8), EY
    # and they are not trivially zero: each control varies under the law
    assert np.all(law.prob @ Y**2 > 1e-4)
