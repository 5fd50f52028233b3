"""supermarket: exact, fast simulation and theory of the supermarket model (JSQ(d)).

See MODEL.md (the project's mathematical reference) and the README for the quick start.
"""

from importlib.metadata import PackageNotFoundError, version as _version

from .model import Params
from . import theory
from .theory import fixed_point, k_lambda_d

try:
    __version__ = _version("supermarket")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

__all__ = ["Params", "theory", "fixed_point", "k_lambda_d", "__version__"]
