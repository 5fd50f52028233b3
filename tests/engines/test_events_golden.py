"""The per-queue event engine gives the same numbers for the same seed as the kernel before
the heap's row layout (commit 6bf0ace): every rule, law and two server classes, hashed.

The digest was computed with that kernel; a change of the kernel that changes the events
(or their order) changes it.  A deliberate change of results updates it, with the reason in
the commit.
"""

from __future__ import annotations

import hashlib

import numpy as np

from supermarket.simulation.general import simulate_general

CASES = [
    {"n": 50, "d": 2, "lam": 0.8, "service": "lognormal:4"},
    {"n": 40, "d": 3, "lam": 0.9, "service": "hyperexp:4", "replace": False},
    {"n": 30, "d": 1, "lam": 0.7, "policy": "jsq", "service": "erlang:3"},
    {"n": 30, "d": 1, "lam": 0.7, "policy": "jiq", "service": "deterministic"},
    {"n": 20, "d": 2, "lam": 0.85, "service": "exp", "server_classes": "0.5:2,0.5:1"},
    {"n": 64, "d": 2, "lam": 0.95, "policy": "random", "service": "pareto:3"},
]
DIGEST = "f108c18c4f03ac6a4abdd83ead7f163939d89463c89886fbab931f39d43e9338"


def test_same_numbers_for_the_same_seed():
    h = hashlib.sha256()
    for c in CASES:
        kw = dict(c)
        n, d, lam = kw.pop("n"), kw.pop("d"), kw.pop("lam")
        r = simulate_general(
            n, d, lam, time=300.0, seed=7, batches=64, workers=1, replications=1, control_variates=False, **kw
        )
        vals = [r.events, r.customers, *r.u_mean.tolist(), r.sojourn.mean, r.waiting.mean]
        vals += [r.sojourn_quantiles[q].mean for q in sorted(r.sojourn_quantiles)]
        h.update(np.asarray(vals, dtype=np.float64).tobytes())
    assert h.hexdigest() == DIGEST
