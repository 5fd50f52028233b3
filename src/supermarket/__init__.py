"""supermarket: exact, fast simulation and theory of the supermarket model (JSQ(d)).

``n`` servers, arrivals at rate ``nλ``, each arrival samples ``d`` queues and joins a
shortest one, service is exponential(1).  The mathematics is restated, with sources, in
docs/model.md; each module cites its sections.

``import supermarket`` is cheap: it loads neither NumPy, SciPy nor numba.  Every public
name below is resolved on first use (PEP 562), so ``supermarket.simulate(...)`` pays for
the numba engines only when it is called, and ``supermarket.theory`` costs NumPy only.

The public names, each loaded on first use:

- ``simulate``, ``SimulationResult``: [`supermarket.simulation.simulate`][supermarket.simulation.simulate],
  the main job, and its result type (module ``supermarket.simulation``: no function shares
  its name with a module).
- ``exact``: [`supermarket.stationary.profile.solve`][supermarket.stationary.profile.solve], the exact
  stationary law of a small system; ``perfect_sample``:
  [`supermarket.perfect.sample`][supermarket.perfect.sample], exact stationary samples.
- ``Params``: validated ``(n, d, λ)`` parameters
  ([`supermarket.model.Params`][supermarket.model.Params]).
- ``fixed_point``, ``k_lambda_d``: the closed forms
  [`supermarket.theory.fixed_point`][supermarket.theory.fixed_point] and
  [`supermarket.theory.k_lambda_d`][supermarket.theory.k_lambda_d].
- ``to_jsonable``: [`supermarket.jsonable.to_jsonable`][supermarket.jsonable.to_jsonable].
- ``theory``, ``model``, ``states``, ``simulation``, ``meanfield``, ``mixing``,
  ``fluctuations``, ``stationary``, ``perfect``, ``response``, ``latency``, ``stats``, ``parallel``,
  ``sweep``, ``report``, ``jsonable``: the submodules.
- ``__version__``: the installed version (``"0.0.0+unknown"`` when running from a source
  tree that is not installed).

Examples
--------
>>> import supermarket as sm
>>> sm.k_lambda_d(100, 0.999)
2
>>> [round(float(p), 6) for p in sm.fixed_point(2, 0.9, levels=3)]
[0.9, 0.729, 0.478297]
>>> "simulate" in dir(sm)
True
"""

from __future__ import annotations

import importlib

# public name -> (module, attribute or None for the module itself); resolved lazily
_LAZY: dict[str, tuple[str, str | None]] = {
    "simulate": ("supermarket.simulation", "simulate"),
    "SimulationResult": ("supermarket.simulation", "SimulationResult"),
    "Params": ("supermarket.model", "Params"),
    "fixed_point": ("supermarket.theory", "fixed_point"),
    "k_lambda_d": ("supermarket.theory", "k_lambda_d"),
    "to_jsonable": ("supermarket.jsonable", "to_jsonable"),
    "exact": ("supermarket.stationary", "solve"),
    "perfect_sample": ("supermarket.perfect", "sample"),
    "simulation": ("supermarket.simulation", None),
    "stationary": ("supermarket.stationary", None),
    "perfect": ("supermarket.perfect", None),
    "response": ("supermarket.response", None),
    "latency": ("supermarket.design.latency", None),
    "stats": ("supermarket.stats", None),
    "parallel": ("supermarket.parallel", None),
    "theory": ("supermarket.theory", None),
    "model": ("supermarket.model", None),
    "states": ("supermarket.system.states", None),
    "meanfield": ("supermarket.meanfield", None),
    "mixing": ("supermarket.mixing", None),
    "fluctuations": ("supermarket.fluctuations", None),
    "sweep": ("supermarket.sweep", None),
    "report": ("supermarket.report", None),
    "jsonable": ("supermarket.jsonable", None),
}

__all__ = [
    "simulate",
    "SimulationResult",
    "Params",
    "fixed_point",
    "k_lambda_d",
    "to_jsonable",
    "exact",
    "perfect_sample",
    "theory",
    "model",
    "states",
    "simulation",
    "meanfield",
    "mixing",
    "fluctuations",
    "stationary",
    "perfect",
    "response",
    "latency",
    "stats",
    "parallel",
    "sweep",
    "report",
    "jsonable",
    "__version__",
]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("supermarket")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0.0.0+unknown"


def __getattr__(name: str):
    """Resolve a public name on first use and cache it in the module's namespace."""
    value: object
    if name == "__version__":
        value = _version()
    elif name in _LAZY:
        mod, attr = _LAZY[name]
        module = importlib.import_module(mod)
        value = module if attr is None else getattr(module, attr)
    else:
        raise AttributeError(f"module 'supermarket' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
