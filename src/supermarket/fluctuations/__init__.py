"""Fluctuations near equilibrium with growing choices (paper 002): being split into submodules.

This intermediate step only moves the former single module to :mod:`.regimes` (so that its
history follows the move); the next commit cuts it into its parts.
"""

from .regimes import *  # noqa: F401,F403
from .regimes import (BATCH_TAU_FACTOR, DERIVED_NOTE, KEYS, REFLECTIONS, __all__,  # noqa: F401
                      _moments_from_blocks)
