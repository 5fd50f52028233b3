"""xoshiro256** random numbers for the numba kernels.

The state is a ``uint64`` array of 4 words, owned by the caller, so a run can be split into
chunks (for a progress bar, Ctrl-C, growing buffers) without changing a single number:
the same seed gives the same stream however the run is cut.  Seeding goes through
SplitMix64 from one 63-bit integer (``model.seed_to_uint64`` of a ``SeedSequence``).

Reference: D. Blackman and S. Vigna, "Scrambled linear pseudorandom number generators",
ACM TOMS 47 (2021); the algorithm is the public-domain ``xoshiro256starstar.c``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .layout import I64

__all__ = [
    "new_state",
    "next_u64",
    "next_double",
    "next_below",
    "step_double",
    "next_normal",
    "state_from_seed_sequence",
]

_M64 = 0xFFFFFFFFFFFFFFFF
TWO_M53 = 1.0 / 9007199254740992.0  # 2**-53


def new_state(seed: int) -> np.ndarray:
    """A fresh xoshiro256** state (4 uint64 words) from an integer seed, via SplitMix64."""
    x = int(seed) & _M64
    out = np.empty(4, dtype=np.uint64)
    for i in range(4):
        x = (x + 0x9E3779B97F4A7C15) & _M64
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        out[i] = z ^ (z >> 31)
    if not out.any():  # the all-zero state is the one forbidden state
        out[0] = 1
    return out


@njit(cache=True)
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@njit(cache=True, inline="always")
def _step(s0, s1, s2, s3):
    """One xoshiro256** step on the four words: ``(64-bit output, s0, s1, s2, s3)``."""
    result = _rotl(s1 * np.uint64(5), 7) * np.uint64(9)
    t = s1 << np.uint64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    return result, s0, s1, s2, s3


@njit(cache=True)
def next_u64(s: np.ndarray) -> np.uint64:
    """Next 64-bit output; advances the state array ``s`` in place."""
    result, s0, s1, s2, s3 = _step(s[0], s[1], s[2], s[3])
    s[0] = s0
    s[1] = s1
    s[2] = s2
    s[3] = s3
    return result


@njit(cache=True)
def next_double(s: np.ndarray) -> float:
    """Uniform on ``{0, 2^-53, …, 1 − 2^-53}`` (53 random bits)."""
    return np.float64(next_u64(s) >> np.uint64(11)) * TWO_M53


@njit(cache=True)
def next_below(s: np.ndarray, n: int) -> I64:
    """Exactly uniform integer in ``0..n-1`` for ``1 <= n < 2^32`` (Lemire's method)."""
    nn = np.uint64(n)
    x = next_u64(s) >> np.uint64(32)
    m = x * nn
    low = m & np.uint64(0xFFFFFFFF)
    if low < nn:
        thresh = (np.uint64(0x100000000) - nn) % nn
        while low < thresh:
            x = next_u64(s) >> np.uint64(32)
            m = x * nn
            low = m & np.uint64(0xFFFFFFFF)
    return np.int64(m >> np.uint64(32))


@njit(cache=True)
def step_double(
    s0: np.uint64, s1: np.uint64, s2: np.uint64, s3: np.uint64
) -> tuple[float, np.uint64, np.uint64, np.uint64, np.uint64]:
    """``next_double`` on a state held in four local variables (for hot loops that keep
    the state in registers): returns ``(u, s0, s1, s2, s3)``; write the words back to the
    state array when the loop ends.  Shares the step :func:`_step` with :func:`next_u64`
    (inlined in both: no speed lost, measured with ``benchmarks/bench_engines.py``)."""
    result, s0, s1, s2, s3 = _step(s0, s1, s2, s3)
    return np.float64(result >> np.uint64(11)) * TWO_M53, s0, s1, s2, s3


# --------------------------------------------------------------------------- additions
def state_from_seed_sequence(ss: np.random.SeedSequence) -> np.ndarray:
    """A xoshiro256** state from a ``numpy.random.SeedSequence``: four words drawn from it
    directly (``generate_state``), so that every child of a root seed gets its own state;
    the all-zero state is replaced as in :func:`new_state`."""
    out = np.asarray(ss.generate_state(4, dtype=np.uint64), dtype=np.uint64).copy()
    if not out.any():
        out[0] = 1
    return out


@njit(cache=True)
def next_normal(s: np.ndarray) -> float:
    """A standard normal from two uniforms (Box–Muller, cosine branch; the sine branch is
    not kept, so the state holds nothing but the four words)."""
    u1 = 1.0 - next_double(s)  # in (0, 1]
    u2 = next_double(s)
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(6.283185307179586 * u2)
