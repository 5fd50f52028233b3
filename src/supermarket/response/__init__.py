"""Response times in equilibrium (docs/model.md §10): see :mod:`supermarket.response.laws`.

(This package is being split along its seams; for now everything lives in ``laws.py``.)
"""

from __future__ import annotations

from .laws import *  # noqa: F401,F403 - the public names, listed in laws.__all__
from .laws import __all__  # noqa: F401
