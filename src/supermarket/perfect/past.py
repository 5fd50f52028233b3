"""The past of one perfect sample, kept in blocks, and its lower and upper copies (docs/model.md
§12.4–12.6; kernels in ``engines/perfect.py``)."""

from __future__ import annotations

import math
import threading
import time

import numpy as np

from ..engines import perfect as _k
from ..model import Params

#: Steps per kernel call (bounded chunks keep Ctrl-C and the time budget responsive).
CHUNK = 1 << 20
#: Longest block (steps): the innovation buffer holds one block of int64 codes.
BLOCK_MAX = 1 << 20


def _xoshiro_state(ss: np.random.SeedSequence) -> np.ndarray:
    st = ss.generate_state(4, dtype=np.uint64)
    if not st.any():  # the all-zero state is the one forbidden xoshiro state
        st[0] = 1
    return st


class _Past:
    """The past of one sample: block ``k`` covers the steps ``−b[k+1] → −b[k]``, generated backwards
    from checkpoint ``k`` (``D_{−b[k]}``) with stream ``k + 1`` of the sample's seed (docs/model.md §12.6)."""

    def __init__(
        self,
        p: Params,
        ss: np.random.SeedSequence,
        t0: int,
        stop: threading.Event | None,
        deadline: float | None = None,
    ):
        self.p, self.n, self.ss, self.t0, self.stop, self.deadline = p, p.n, ss, t0, stop, deadline
        self.p_arr = p.lam / (1.0 + p.lam)
        self.block_max = max(BLOCK_MAX, t0)
        self.bounds = [0]  # b[k]
        self.checkpoints: list[np.ndarray] = []  # counts of D at -b[k] (int64, levels 0..top+1)
        self.buf = np.zeros(min(t0, self.block_max), dtype=np.int64)
        self.buf_block = -1
        self.mark = np.zeros(self.n, dtype=np.int8)
        self.picks = np.zeros(max(p.d, 1), dtype=np.int64)
        # D at the current far end of the past
        g = np.empty(self.n, dtype=np.int64)
        _k.geometric_fill(g, math.log(p.lam), _xoshiro_state(self._child(0)))
        top = int(g.max())
        self.dx = np.sort(g)[::-1].copy()
        self.dc = np.zeros(top + 64, dtype=np.int64)
        hist = np.bincount(g, minlength=top + 1)
        self.dc[: top + 1] = np.cumsum(hist[::-1])[::-1]
        self.gs = np.array([top, top], dtype=np.int64)
        self.checkpoint_bytes = self.steps_generated = 0

    def _child(self, k: int) -> np.random.SeedSequence:
        return np.random.SeedSequence(
            self.ss.entropy, spawn_key=tuple(self.ss.spawn_key) + (k,), pool_size=self.ss.pool_size
        )

    @property
    def horizon(self) -> int:
        return self.bounds[-1]

    @property
    def pathmax(self) -> int:
        return int(self.gs[_k.G_PATHMAX])

    def _block_len(self, k: int) -> int:
        return self.bounds[k + 1] - self.bounds[k]

    def _next_len(self) -> int:
        b = self.bounds[-1]
        return self.t0 if b == 0 else min(b, self.block_max)

    def _run_block(self, k: int, x: np.ndarray, c: np.ndarray, gs: np.ndarray, length: int) -> np.ndarray:
        """Generate block ``k`` from ``(x, c)`` into the buffer; returns ``c`` (maybe grown)."""
        if self.buf.shape[0] < length:
            self.buf = np.zeros(length, dtype=np.int64)
        s = _xoshiro_state(self._child(k + 1))
        done = 0
        while done < length:
            if self.stop is not None and self.stop.is_set():
                raise KeyboardInterrupt
            if self.deadline is not None and time.perf_counter() > self.deadline:
                raise _OutOfTime(self.horizon)
            want = min(CHUNK, length - done)
            got = _k.generate_past(
                x, c, gs, s, self.buf, done, want, self.n, self.p.d, self.p.replace, self.p_arr, self.mark, self.picks
            )
            done += got
            if got < want:  # D reached the top of its level array: grow it and go on
                c = np.concatenate([c, np.zeros(c.shape[0], dtype=np.int64)])
        self.buf_block = k
        return c

    def extend(self, horizon: int) -> None:
        """Generate new blocks until the past reaches ``horizon`` steps."""
        while self.bounds[-1] < horizon:
            k = len(self.bounds) - 1
            length = self._next_len()
            top = int(self.gs[_k.G_TOP])
            cp = self.dc[: top + 2].copy()
            self.checkpoints.append(cp)
            self.checkpoint_bytes += cp.nbytes
            self.dc = self._run_block(k, self.dx, self.dc, self.gs, length)
            self.bounds.append(self.bounds[-1] + length)
            self.steps_generated += length

    def regenerate(self, k: int) -> None:
        """Regenerate block ``k``'s innovations into the buffer."""
        if self.buf_block == k:
            return
        cp = self.checkpoints[k]
        c = np.zeros(cp.shape[0] + 2, dtype=np.int64)
        c[: cp.shape[0]] = cp
        x = np.empty(self.n, dtype=np.int64)
        _k.fill_lengths(c, x)
        top = int(np.count_nonzero(c[1:]))  # the counts are non-increasing
        gs = np.array([top, top], dtype=np.int64)
        self._run_block(k, x, c, gs, self._block_len(k))
        self.steps_generated += self._block_len(k)

    def innovations(self, horizon: int) -> np.ndarray:
        """All codes of the forward steps ``−horizon → 0``, in generation order (tests only)."""
        self.extend(horizon)
        out = []
        for k in range(len(self.bounds) - 1):
            if self.bounds[k] >= horizon:
                break
            self.regenerate(k)
            out.append(self.buf[: self._block_len(k)].copy())
        return np.concatenate(out)[:horizon]

    def memory_bytes(self) -> int:
        return int(self.buf.nbytes + self.checkpoint_bytes + 4 * self.n * 8 + self.dc.nbytes + self.picks.nbytes)

    def run_from(self, horizon: int, deadline: float | None):
        """Run ``L`` (empty) and ``U`` (``D_{−horizon}``, a block boundary) to time 0; returns
        ``(met, x_L, copy_steps)``, ``copy_steps`` counting both copies' moves (one after they met)."""
        kb = self.bounds.index(horizon)
        n = self.n
        cap = self.pathmax + 4
        cl = np.zeros(cap, dtype=np.int64)
        cl[0] = n
        xl = np.zeros(n, dtype=np.int64)
        cu = np.zeros(cap, dtype=np.int64)
        d_start = self.dc if kb == len(self.checkpoints) else self.checkpoints[kb]
        m = min(d_start.shape[0], cap)
        cu[:m] = d_start[:m]
        xu = np.empty(n, dtype=np.int64)
        _k.fill_lengths(cu, xu)
        st = np.zeros(6, dtype=np.int64)
        st[_k.A_TOTU] = int(xu.sum())
        st[_k.A_MET] = 1 if st[_k.A_TOTU] == 0 else 0
        for k in range(kb - 1, -1, -1):
            self.regenerate(k)
            hi = self._block_len(k)
            while hi > 0:
                if self.stop is not None and self.stop.is_set():
                    raise KeyboardInterrupt
                if deadline is not None and time.perf_counter() > deadline:
                    raise _OutOfTime(horizon)
                lo = max(0, hi - CHUNK)
                status = _k.apply_codes(self.buf, lo, hi, xl, cl, xu, cu, st)
                if status != _k.STATUS_OK:
                    raise RuntimeError(
                        "perfect sampler: a level array overflowed; this is a bug "
                        "(the copies must stay below the dominating process)"
                    )
                hi = lo
        met = bool(st[_k.A_MET])
        total = int(st[_k.A_STEP])
        copy_steps = 2 * int(st[_k.A_METSTEP]) + (total - int(st[_k.A_METSTEP])) if met else 2 * total
        # L <= U componentwise (docs/model.md §12): check it, as a guard against bugs
        if not met and (cl[:cap] > cu[:cap]).any():
            raise RuntimeError("perfect sampler: L <= U violated; this is a bug")
        return met, xl, copy_steps


class _OutOfTime(Exception):
    def __init__(self, horizon, predicted=False):
        self.horizon = horizon
        self.predicted = predicted
