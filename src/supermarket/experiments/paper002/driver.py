"""``reproduce paper002``'s run: the three regimes' comparisons, their files and the summary."""

from __future__ import annotations

import functools
import json
import os
import time as _time
import warnings
from typing import Any

from ... import fluctuations as fl
from ...files import atomic_write
from ...jsonable import to_jsonable
from ...model import SeedLike, spawn_seeds
from .. import paper002_claims as claims
from ..paper000.output import _progress as _progress000
from ..paper000.output import _write_csv
from .figures import plot_hist, plot_paths
from .summary import AGREE_SIGMA, _sources, _summary

# (label, regime, keyword arguments of fluctuations.regime_params)
CASES: dict[str, dict[str, Any]] = {
    "a": dict(regime="a", kappa=1.0, d=None),
    "b": dict(regime="b", c=1.0, zeta=0.5),
    "c": dict(regime="c", zeta=1.0, centring="one"),  # d_n = n: JSQ
}


def _config(quick: bool):
    """Sizes of the experiment: ``(n per regime, simulation kwargs, SDE kwargs, n of the
    n^{-1/2} scaling run, its time)``."""
    if quick:
        return (
            {"a": 10**4, "b": 10**4, "c": 10**4},
            dict(time=2500.0, replications=2),
            dict(sde_paths=256, sde_time=100.0, dt=1e-3),
            (10**3, 10**4, 10**5),
            500.0,
        )
    # the scaling runs: 10 batches of 60 time units, over 10 autocorrelation times (about 4.4)
    # each, so that their error bars can be trusted (at 300 none could)
    return (
        {"a": 10**5, "b": 10**5, "c": 10**5},
        dict(time=2000.0, replications=4),
        dict(sde_paths=512, sde_time=200.0, dt=5e-4),
        (10**3, 10**4, 10**5, 10**6),
        600.0,
    )


_progress = functools.partial(_progress000, tag="paper002")


def run(
    out_dir: str | os.PathLike[str],
    quick: bool = False,
    seed: SeedLike = 0,
    workers: int | None = None,
    client: Any = None,
) -> dict:
    """Run the paper-002 experiment into ``out_dir`` (created); return the moments table."""
    os.makedirs(out_dir, exist_ok=True)
    t0 = _time.perf_counter()
    seeds = spawn_seeds(seed, len(CASES) + 1)
    n_of, sim_kw, sde_kw, scale_ns, scale_time = _config(quick)
    rows, comparisons, warn_lines, bridges = [], {}, [], {}
    for i, (label, case) in enumerate(CASES.items()):
        kw = dict(case)
        regime = kw.pop("regime")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", fl.RegimeWarning)
            p = fl.regime_params(regime, n_of[label], **kw)
        warn_lines += [str(w.message) for w in caught]
        _progress(
            f"regime ({label}), n = {p.n}, d_n = {p.d}: the chain ({sim_kw['replications']} × "
            f"{sim_kw['time']:g} time units) and the diffusions ({sde_kw['sde_paths']} paths) "
            f"[{i + 1} of {len(CASES) + 1}, {_time.perf_counter() - t0:.0f} s so far]"
        )
        par = dict(seed=seeds[i], workers=workers, client=client)
        cmp = comparisons[label] = fl.compare(p, **par, **sim_kw, **sde_kw)
        if label == "c":  # the biased projection scheme beside the default bridge reflection
            sde = dict(paths=sde_kw["sde_paths"], time=sde_kw["sde_time"], dt=sde_kw["dt"])
            bridges[label] = fl.limit_for(p, **sde, **par, record_paths=0, reflection="projection").moments
        plot_paths(cmp, os.path.join(out_dir, f"regime_{label}_paths.png"))
        plot_hist(cmp, os.path.join(out_dir, f"regime_{label}_hist.png"))
        for source, _, m in _sources(cmp, bridges, label):
            if m is not None:
                row = dict(regime=label, n=p.n, d_n=p.d, lambda_n=p.lam, source=source, coordinates=p.coordinates)
                for k in fl.KEYS:
                    row[k], row[k + "_se"] = getattr(m, k), (m.stderr or {}).get(k, 0.0)
                rows.append(row)
    _progress(
        f"the n^(-1/2) order: n = {', '.join(str(n) for n in scale_ns)} (2 × {scale_time:g} time units each) "
        f"[{len(CASES) + 1} of {len(CASES) + 1}, {_time.perf_counter() - t0:.0f} s so far]"
    )
    scale = fl.scaling(scale_ns, time=scale_time, replications=2, seed=seeds[-1], workers=workers, client=client)
    _write_csv(os.path.join(out_dir, "moments.csv"), rows)
    _write_csv(os.path.join(out_dir, "scaling.csv"), [r.to_dict() for r in scale])
    doc = {
        "derived": fl.DERIVED_NOTE,
        "quick": quick,
        "seed": seed,
        "comparisons": {k: c.to_dict() for k, c in comparisons.items()},
        "scaling": [r.to_dict() for r in scale],
    }
    atomic_write(os.path.join(out_dir, "moments.json"), json.dumps(to_jsonable(doc), indent=2))
    secs = _time.perf_counter() - t0
    facts = {
        "regimes": [claims.regime_facts(k, c, AGREE_SIGMA) for k, c in comparisons.items()],
        "scaling": claims.scaling_facts(scale),
    }  # what the Claims table is computed from
    _summary(out_dir, comparisons, scale, warn_lines, quick, seed, secs, bridges, facts)
    return {
        "rows": rows,
        "scaling": [r.to_dict() for r in scale],
        "seconds": secs,
        "claims_facts": facts,
        "claims": claims.claims_rows(facts["regimes"], facts["scaling"]),
    }
