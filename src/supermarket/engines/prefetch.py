"""Prefetch hints for the event kernel (:mod:`.events`): ``llvm.prefetch`` as a numba intrinsic
(:func:`_prefetch`: load the cache line of ``arr[idx]``) and the prefetch of the queues the next
``jsq-d`` arrival will sample (:func:`_prefetch_samples`).  Hints only: no value changes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir  # type: ignore[import-untyped]
from llvmlite.binding import llvm_version_info  # type: ignore[import-untyped]
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .rng import _step

__all__: list[str] = []


# the intrinsic's name carries its pointer type: opaque from LLVM 17 on (llvmlite >= 0.45),
# ``i8*`` before
_PREFETCH = "llvm.prefetch.p0" if llvm_version_info >= (17,) else "llvm.prefetch.p0i8"


@intrinsic
def _prefetch_intrinsic(typingctx, arr, idx):
    """A hint to load the cache line of ``arr[idx]`` (of row ``idx`` of a 2-d array) for
    reading; no effect on any value (LLVM's ``llvm.prefetch``)."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        zero = context.get_constant(types.intp, 0)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]] + [zero] * (aryty.ndim - 1))
        i8p = ir.PointerType(ir.IntType(8))
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, _PREFETCH)
        # read, high locality, data cache
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


_prefetch: Any = _prefetch_intrinsic  # called as _prefetch(arr, idx) in compiled code


@njit(cache=True, inline="always")
def _prefetch_samples(s, n, d, x, lastdep):
    """Prefetch the lengths and last departures of the queues the next arrival will sample
    under ``jsq-d`` with replacement: its draws, read ahead on a copy of the state (the
    first is its inter-arrival time; with ties among the first samples, or a rejection in
    ``next_below``, later guesses miss: a hint only)."""
    s0 = s[0]
    s1 = s[1]
    s2 = s[2]
    s3 = s[3]
    r, s0, s1, s2, s3 = _step(s0, s1, s2, s3)
    nn = np.uint64(n)
    for _ in range(min(d, 4)):
        r, s0, s1, s2, s3 = _step(s0, s1, s2, s3)
        qq = np.int64(((r >> np.uint64(32)) * nn) >> np.uint64(32))
        _prefetch(x, qq)
        _prefetch(lastdep, qq)
