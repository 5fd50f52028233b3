"""Exact stationary samples by dominated coupling from the past (docs/model.md §12): see
:mod:`supermarket.perfect.sampler`.

(This package is being split along its seams; for now everything lives in ``sampler.py``.)
"""

from __future__ import annotations

from .sampler import *  # noqa: F401,F403 - the public names, listed in sampler.__all__
from .sampler import __all__  # noqa: F401
