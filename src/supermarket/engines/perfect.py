"""Numba kernels of the dominated coupling-from-the-past sampler (docs/model.md §12).

Three copies of the chain live in the *sorted representation* of docs/model.md §2: a
queue-lengths vector ``x`` sorted longest first (0-based positions ``0..n-1``) together
with its counts ``c[m] = #{queues with length >= m}`` for ``m = 0..cap-1`` (``c[0] = n``).
Both are kept so that every move is O(1):

- arrival at position ``p``: ``v = x[p]``; the leftmost queue of length ``v`` (position
  ``c[v+1]``) grows; ``c[v+1] += 1``;
- service at position ``p``: if ``v = x[p] > 0``, the rightmost queue of length ``v``
  (position ``c[v]-1``) shrinks; ``c[v] -= 1``.

The dominating process ``D`` (random routing, ``n`` independent M/M/1 queues in sorted
form) is *generated backwards in time*: it is reversible, so running it forwards from a
stationary draw gives its path into the past.  For every generated step the kernel also
draws, from its conditional law given ``D``'s move, the innovation that drives the JSQ(d)
copies over the same step of forward time, and stores it as one integer code:

- ``code = p + 1 > 0``: an arrival at (0-based) position ``p = max(J_1, …, J_d)``;
- ``code = -(p + 1) < 0``: a (potential) departure at position ``p``.

``buf[start + i]`` is the innovation of the forward step from time ``-(t0 + i + 1)`` to
``-(t0 + i)``, where ``t0`` is how far back generation stood when the call began; applying
a stretch of the buffer *in reverse order* runs the JSQ(d) copies forwards in time.

Nothing here allocates per step, parses arguments or prints.  All state lives in arrays
owned by the caller, so runs may be cut into chunks (Ctrl-C, growing arrays) without
changing a single number.  Random numbers: xoshiro256** (``engines/rng.py``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .layout import I64
from .rng import next_below, next_double

__all__ = [
    "geometric_fill",
    "generate_past",
    "apply_codes",
    "conditional_max",
    "fill_lengths",
    "G_TOP",
    "G_PATHMAX",
    "A_TOTL",
    "A_TOTU",
    "A_MET",
    "A_STEP",
    "A_STATUS",
    "A_METSTEP",
    "STATUS_OK",
    "STATUS_CAPACITY",
    "EXPLICIT_MAX_D",
]

# generate_past: gs (int64) layout
G_TOP = 0  # current maximum queue length of D
G_PATHMAX = 1  # largest maximum of D seen on the whole generated path
# apply_codes: st (int64) layout
A_TOTL = 0  # customers in the lower copy L
A_TOTU = 1  # customers in the upper copy U
A_MET = 2  # 1 once L and U have coalesced (then only L is moved)
A_STEP = 3  # forward steps applied so far in this round
A_STATUS = 4
A_METSTEP = 5  # the step (of this round) at which L and U met
STATUS_OK = 0
STATUS_CAPACITY = 1  # a level array is too short: a bug in the caller (never a truncation)

#: With replacement, the maximum of ``d − 1`` uniform positions is drawn one by one up to
#: this many choices, and by inversion (exact up to double rounding) above.
EXPLICIT_MAX_D = 64


@njit(cache=True, nogil=True)
def geometric_fill(out: np.ndarray, log_lam: float, s: np.ndarray) -> None:
    """Fill ``out`` with i.i.d. geometric lengths, ``P(length >= m) = λ^m``.

    Inversion ``floor(log U / log λ)`` with ``U`` uniform on ``(0, 1]`` (exact up to double
    rounding): the stationary law of one M/M/1 queue of load λ.
    """
    for i in range(out.shape[0]):
        u = 1.0 - next_double(s)  # in (0, 1]
        out[i] = np.int64(math.floor(math.log(u) / log_lam))


@njit(cache=True, nogil=True)
def conditional_max(j1: I64, n: int, d: int, replace: bool, s: np.ndarray, mark: np.ndarray, picks: np.ndarray) -> I64:
    """``M = max(J_1, J_2, …, J_d)`` given ``J_1 = j1`` (0-based positions, docs/model.md §12).

    With replacement ``J_2..J_d`` are i.i.d. uniform on ``0..n-1``; without, they are a
    uniform ordered sample of distinct positions other than ``j1``.  ``mark`` (int8, length
    ``n``, all zero on entry and exit) and ``picks`` (int64, length ``>= d``) are scratch.
    Only the maximum matters to the chain, so it is drawn directly where that is cheaper:
    by inversion (with replacement, ``d − 1 > EXPLICIT_MAX_D``; exact up to double
    rounding) or top-down (without replacement, ``(d−1)^2 > n−1``; exact).
    """
    k = d - 1
    if k <= 0:
        return j1
    m = j1
    if replace:
        if k <= EXPLICIT_MAX_D:
            for _ in range(k):
                r = next_below(s, n)
                if r > m:
                    m = r
            return m
        # the max of k i.i.d. uniforms on 0..n-1: P(K <= r) = ((r+1)/n)^k
        u = 1.0 - next_double(s)
        r = np.int64(math.ceil(n * math.exp(math.log(u) / k))) - 1
        if r < 0:
            r = 0
        if r > n - 1:
            r = n - 1
        return r if r > m else m
    N = n - 1  # the other positions, indexed 0..N-1 (index q stands for q + (q >= j1))
    if k * k > N:
        # top-down: the largest of the remaining `top` others is in a uniform k-subset of
        # them w.p. k/top; if not, the subset is a uniform k-subset of the rest
        top = N
        while next_below(s, top) >= k:
            top -= 1
        q: I64 = top - 1
        r = q + 1 if q >= j1 else q
        return r if r > m else m
    # k distinct positions other than j1 by rejection (k <= sqrt(n-1): few rejections)
    mark[j1] = 1
    got = 0
    while got < k:
        q = next_below(s, n)
        if mark[q] == 0:
            mark[q] = 1
            picks[got] = q
            got += 1
            if q > m:
                m = q
    mark[j1] = 0
    for i in range(k):
        mark[picks[i]] = 0
    return m


@njit(cache=True, nogil=True)
def generate_past(
    x: np.ndarray,
    c: np.ndarray,
    gs: np.ndarray,
    s: np.ndarray,
    buf: np.ndarray,
    start: int,
    nsteps: int,
    n: int,
    d: int,
    replace: bool,
    p_arr: float,
    mark: np.ndarray,
    picks: np.ndarray,
) -> int:
    """Generate ``nsteps`` further steps of ``D`` into the past, and their innovations.

    ``x, c``: ``D`` in sorted form (updated in place); ``gs``: ``[top, pathmax]``; ``s``:
    the xoshiro state of the block; ``buf[start + i]`` receives the code of step ``i``.
    Stops early (returning the number of steps done) when ``c`` has fewer than ``top + 3``
    entries, so that the caller can grow it and call again; no random number is drawn
    for a step that is not done.
    """
    cap = c.shape[0]
    top = gs[G_TOP]
    pathmax = gs[G_PATHMAX]
    for i in range(nsteps):
        if top + 2 >= cap:
            gs[G_TOP] = top
            gs[G_PATHMAX] = pathmax
            return i
        if next_double(s) < p_arr:
            # generated arrival: a queue of length v becomes v+1 (going back in time);
            # forwards in time this is a departure from a queue of length v+1.
            p = next_below(s, n)
            v = x[p]
            a = c[v + 1]
            x[a] = v + 1
            c[v + 1] += 1
            if v + 1 > top:
                top = v + 1
                if top > pathmax:
                    pathmax = top
            lo = c[v + 2]
            j = lo + next_below(s, c[v + 1] - lo)
            buf[start + i] = -(j + 1)
        else:
            p = next_below(s, n)
            v = x[p]
            if v > 0:
                # generated departure v -> v-1; forwards an arrival to a queue of length w = v-1,
                # whose first choice J_1 lies among the positions of length w after the move
                b = c[v] - 1
                x[b] = v - 1
                c[v] -= 1
                if v == top and c[v] == 0:
                    top = v - 1
                w = v - 1
                lo = c[w + 1]
                j1 = lo + next_below(s, c[w] - lo)
                buf[start + i] = conditional_max(j1, n, d, replace, s, mark, picks) + 1
            else:
                # no move of D: forwards a service at an empty position of D
                lo = c[1]
                j = lo + next_below(s, n - lo)
                buf[start + i] = -(j + 1)
    gs[G_TOP] = top
    gs[G_PATHMAX] = pathmax
    return nsteps


@njit(cache=True, nogil=True)
def _arrive(x, c, p):
    v = x[p]
    a = c[v + 1]
    x[a] = v + 1
    c[v + 1] += 1


@njit(cache=True, nogil=True)
def _serve(x, c, p):
    v = x[p]
    if v > 0:
        b = c[v] - 1
        x[b] = v - 1
        c[v] -= 1
        return 1
    return 0


@njit(cache=True, nogil=True)
def apply_codes(
    buf: np.ndarray, lo: int, hi: int, xl: np.ndarray, cl: np.ndarray, xu: np.ndarray, cu: np.ndarray, st: np.ndarray
) -> int:
    """Run the lower copy ``L`` and the upper copy ``U`` forwards through ``buf[hi-1]``,
    ``buf[hi-2]``, …, ``buf[lo]`` (reverse order of generation = forward time).

    ``st``: ``[total L, total U, met, steps, status, step at which they met]``.  ``L <= U`` componentwise holds
    throughout (docs/model.md §12), so the copies are equal as soon as their totals are;
    from then on only ``L`` is moved (``met = 1``) and the caller copies it into ``U``.
    A level array too short for a move sets ``status = STATUS_CAPACITY`` and stops (the
    caller sizes the arrays from ``D``'s path maximum, so this signals a bug).
    """
    capl = cl.shape[0]
    capu = cu.shape[0]
    totl = st[A_TOTL]
    totu = st[A_TOTU]
    met = st[A_MET]
    steps = st[A_STEP]
    for i in range(hi - 1, lo - 1, -1):
        code = buf[i]
        if code > 0:
            p = code - 1
            if xl[p] + 2 >= capl:
                st[A_STATUS] = STATUS_CAPACITY
                break
            _arrive(xl, cl, p)
            totl += 1
            if met == 0:
                if xu[p] + 2 >= capu:
                    st[A_STATUS] = STATUS_CAPACITY
                    break
                _arrive(xu, cu, p)
                totu += 1
        else:
            p = -code - 1
            totl -= _serve(xl, cl, p)
            if met == 0:
                totu -= _serve(xu, cu, p)
        steps += 1
        if met == 0 and totl == totu:
            met = 1
            st[A_METSTEP] = steps
    st[A_TOTL] = totl
    st[A_TOTU] = totu
    st[A_MET] = met
    st[A_STEP] = steps
    return st[A_STATUS]


@njit(cache=True, nogil=True)
def fill_lengths(c: np.ndarray, x: np.ndarray) -> None:
    """Write the sorted queue-lengths vector (longest first) with counts ``c`` into ``x``.

    ``c[0] = n`` and ``c`` is zero from some level on; positions ``c[m+1]..c[m]-1`` hold ``m``.
    """
    n = x.shape[0]
    m = 0
    while m + 1 < c.shape[0] and c[m + 1] > 0:
        m += 1
    hi = n
    for v in range(m + 1):
        lo = c[v + 1] if v + 1 < c.shape[0] else 0
        for p in range(lo, hi):
            x[p] = v
        hi = lo
