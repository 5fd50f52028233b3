"""supermarket: exact, fast simulation and theory of the supermarket model (JSQ(d)).

``n`` servers, arrivals at rate ``nλ``, each arrival samples ``d`` queues and joins a
shortest one, service is exponential(1).  The mathematics is restated, with sources, in
docs/model.md; each module cites its sections.

``import supermarket`` is cheap: it loads neither NumPy, SciPy nor numba.  Every public
name below is resolved on first use (PEP 562), so ``supermarket.simulate(...)`` pays for
the numba engines only when it is called, and ``supermarket.theory`` costs NumPy only.

The public names, each loaded on first use:

- ``simulate``, ``SimulationResult``: [`supermarket.simulate.simulate`][supermarket.simulate.simulate],
  the main job, and its result type.  The name ``supermarket.simulate`` is the *function*,
  also after ``import supermarket.simulate``; the module is
  ``sys.modules["supermarket.simulate"]``.
- ``Params``: validated ``(n, d, λ)`` parameters
  ([`supermarket.model.Params`][supermarket.model.Params]).
- ``fixed_point``, ``k_lambda_d``: the closed forms
  [`supermarket.theory.fixed_point`][supermarket.theory.fixed_point] and
  [`supermarket.theory.k_lambda_d`][supermarket.theory.k_lambda_d].
- ``to_jsonable``: [`supermarket.jsonable.to_jsonable`][supermarket.jsonable.to_jsonable].
- ``theory``, ``model``, ``states``, ``meanfield``, ``mixing``, ``fluctuations``, ``sweep``,
  ``report``, ``jsonable``: the submodules.
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
import sys
import types

# public name -> (module, attribute or None for the module itself); resolved lazily
_LAZY: dict[str, tuple[str, str | None]] = {
    "simulate": ("supermarket.simulate", "simulate"),
    "SimulationResult": ("supermarket.simulate", "SimulationResult"),
    "Params": ("supermarket.model", "Params"),
    "fixed_point": ("supermarket.theory", "fixed_point"),
    "k_lambda_d": ("supermarket.theory", "k_lambda_d"),
    "to_jsonable": ("supermarket.jsonable", "to_jsonable"),
    "theory": ("supermarket.theory", None),
    "model": ("supermarket.model", None),
    "states": ("supermarket.states", None),
    "meanfield": ("supermarket.meanfield", None),
    "mixing": ("supermarket.mixing", None),
    "fluctuations": ("supermarket.fluctuations", None),
    "sweep": ("supermarket.sweep", None),
    "report": ("supermarket.report", None),
    "jsonable": ("supermarket.jsonable", None),
}

__all__ = ["simulate", "SimulationResult", "Params", "fixed_point", "k_lambda_d", "to_jsonable",
           "theory", "model", "states", "meanfield", "mixing", "fluctuations", "sweep", "report",
           "jsonable", "__version__"]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("supermarket")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0.0.0+unknown"


def __getattr__(name: str):
    """Resolve a public name on first use and cache it in the module's namespace."""
    if name == "__version__":
        value = _version()
    elif name in _LAZY:
        mod, attr = _LAZY[name]
        module = importlib.import_module(mod)
        value = module if attr is None else getattr(module, attr)
    else:
        raise AttributeError(f"module 'supermarket' has no attribute {name!r}")
    if name != "simulate":  # 'simulate' is served by the property of _Package
        globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """The package's module type: keeps ``supermarket.simulate`` bound to the function.

    Importing the submodule ``supermarket.simulate`` makes the import system set the
    package attribute ``simulate`` to the module; this property ignores that assignment,
    so the name means the function whatever was imported first.
    """

    @property
    def simulate(self):
        from .simulate import simulate as function

        return function

    @simulate.setter
    def simulate(self, value):  # the import system binding the submodule: keep the function
        if not isinstance(value, types.ModuleType):
            raise AttributeError("supermarket.simulate is the simulate() function and cannot be rebound")


sys.modules[__name__].__class__ = _Package
