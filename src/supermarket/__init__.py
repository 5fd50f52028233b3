"""supermarket: exact, fast simulation and theory of the supermarket model (JSQ(d)).

The mathematics is restated, with sources, in docs/model.md; each module cites its sections.
Heavy modules (numba engines, Dask) load on first use: ``supermarket.simulate(...)`` works
without importing them up front.
"""

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version as _version

from . import theory
from .model import Params
from .theory import fixed_point, k_lambda_d
from .simulate import SimulationResult, simulate  # binds the function over the submodule name

try:
    __version__ = _version("supermarket")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

# public name -> (module, attribute); resolved lazily
_LAZY = {
    "meanfield": ("supermarket.meanfield", None),
    "mixing": ("supermarket.mixing", None),
    "fluctuations": ("supermarket.fluctuations", None),
    "sweep": ("supermarket.sweep", None),
}


def __getattr__(name):
    if name in _LAZY:
        mod, attr = _LAZY[name]
        module = import_module(mod)
        return module if attr is None else getattr(module, attr)
    raise AttributeError(f"module 'supermarket' has no attribute {name!r}")


__all__ = ["Params", "theory", "fixed_point", "k_lambda_d", "simulate", "SimulationResult", "__version__"]
