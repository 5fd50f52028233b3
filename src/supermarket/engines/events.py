"""The per-queue event engine for general service laws and server classes (docs/model.md §14).

Continuous time.  Arrivals are Poisson at rate ``rate`` (the caller passes ``nλ·s̄``).  Each
arrival picks a queue by the dispatch rule (:data:`JSQ_D`: ``d`` uniform samples, with or
without replacement, the least length, ties uniform among the sampled shortest (over the
sampled slots); :data:`RANDOM`: one uniform queue; :data:`JSQ`: a uniform queue among the
shortest of all ``n``; :data:`JIQ`: a uniform idle queue if there is one, else a uniform
queue) and brings its own work ``S`` drawn from the service law (:func:`sample_service`).
Service is FIFO at the server's speed, so the customer leaves at
``max(arrival, departure of the customer ahead) + S/speed`` (Lindley), known on arrival.

Data structures, all plain arrays owned by the caller so that a run can be cut into chunks
(progress, Ctrl-C, growing arrays) without changing a number:

- ``x`` (queue lengths) and ``lastdep`` (the departure time of each queue's last customer:
  all a FIFO queue needs, since every departure time is fixed on arrival);
- every customer's departure ``(time, server)`` in a calendar queue (Brown 1988) with a
  heap for the far future.  Time is cut into buckets of width ``w`` (bucket ``⌊t/w⌋``,
  :func:`window`: about :data:`WINDOW_PER_BUCKET` departures each near the front); the
  ``nb`` buckets from the front ``cur`` on form the window, ``cal[b mod nb]`` heading an
  unsorted list of nodes (``qt``: rows of time and server as floats; ``qn``: the next node,
  ``-1`` at the end; free nodes make one more list, from ``it[I_FREE]``).  An arrival puts
  its departure at the head of its bucket's list, ``O(1)``, or, when it lies beyond the
  window (after ``(cur + nb) w``: the heavy tails of ``pareto`` and ``lognormal``), into a
  4-ary min-heap (``ht``: rows of time and server, children of a node in one cache line,
  the root leaving by Floyd's bottom-up deletion).  The next departure is the least time of
  bucket ``cur`` (a scan of its short list) or the heap's root when that falls in bucket
  ``cur``; an empty bucket moves the front on, but never past the bucket of the next
  arrival (whose departure may land there).  ``O(1)`` amortised per event (the buckets
  crossed are the time elapsed over ``w``, about one every ``WINDOW_PER_BUCKET`` departures).
  The order of departures is the order of their times, as with the heap of every customer
  this replaced, so the events are the same: exact ties between two servers' departures
  (probability zero for every law, ``deterministic`` included, since arrival times are
  continuous) would leave in another order; a departure tied with the next arrival
  still leaves after it.  Measured at ``n = 10^5``
  (JSQ(2), λ = 0.9, lognormal SCV 4, the kernel alone, interleaved chunks, median M events
  per CPU second on the loaded machine): the heap of every customer 2.96, this calendar 4.94;
- two prefetches, hints that change no value: a cursor walks the lists of the buckets a
  few departures ahead of the front and asks for their nodes' rows and their servers'
  lengths one departure before they are read (6.01); and under ``jsq-d`` with replacement
  the next arrival's samples, read ahead on a copy of the generator's state (departures
  draw nothing), have their lengths and last departures asked for one event early (7.59).
  Tried and dropped: the nodes as one 16-byte record (time, server, next), 7-9 % slower
  than two arrays; a window of 8 time units (29 % of the waiting departures in the heap,
  10 % slower).  With the prefetches (``bench_events_kernel.py``, medians of 10 chunks
  against this kernel): 2 and 4 departures per bucket 15 % slower, 16 and 32 alike, a window
  of 32 alike, a lead of 12 or 48 departures alike;
- the class of server ``j`` is the first ``k`` with ``j < bound[k]`` (servers are numbered
  class by class);
- for ``jsq`` and ``jiq`` only, the servers sorted by length (``order``, ``pos``, and
  ``bstart[ℓ]`` = the number of servers shorter than ``ℓ``): a length change is one swap
  and one boundary move, ``O(1)``;
- per class ``k`` and level ``ℓ``, the count ``c[k, ℓ] = #{servers of class k with length
  >= ℓ}`` and its time integral ``area[k, ℓ]``, brought up to date (``last[k, ℓ]``) only when
  the count changes: ``O(1)`` per event; :func:`close_areas` brings every level to a time.

Per customer arriving at or after ``fl[F_TMEAS]``: its sojourn and waiting times and the
class of the server it joined, into buffers the caller drains.

The kernel returns :data:`DONE` (the next event is after ``t_stop``: the clock is set to
``t_stop``), :data:`GROW` (the far heap is full, no node is free or a queue reached the top
level kept: grow the arrays with :func:`grow`; nothing drawn yet), :data:`FULL` (the customer
buffers are full: drain them) or :data:`EVENTS` (``max_events`` events done).  Every random
number comes from the xoshiro256** state ``s`` (:mod:`.rng`).

The pieces live beside this module: the service-law samplers in :mod:`.service`
(:func:`sample_service`), the calendar's window and the far heap in :mod:`.departures`
(:func:`window`), the prefetch hints in :mod:`.prefetch`; their public names are importable
from here too.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import ArrayLike

from .departures import (
    _H0,
    MAX_BUCKETS,
    WINDOW_PER_BUCKET,
    WINDOW_TIME,
    _free_chain,
    _heap_rows,
    _pop_bottom_up,
    _push,
    window,
)
from .prefetch import _prefetch, _prefetch_samples
from .rng import next_below
from .service import _exp1, sample_service
from .tables import BAD_RULE, JBT, JIQ, JSQ, JSQ_D, RANDOM

__all__ = [
    "events_kernel",
    "close_areas",
    "grow",
    "sample_service",
    "new_arrays",
    "new_counters",
    "window",
    "WINDOW_PER_BUCKET",
    "WINDOW_TIME",
    "MAX_BUCKETS",
    "pending_departures",
    "JSQ_D",
    "RANDOM",
    "JSQ",
    "JIQ",
    "JBT",
    "BAD_RULE",
    "DONE",
    "GROW",
    "FULL",
    "EVENTS",
    "F_NOW",
    "F_NEXT",
    "F_RATE",
    "F_TMEAS",
    "F_INVW",
    "I_HSIZE",
    "I_TOP",
    "I_NREC",
    "I_EVENTS",
    "I_CUR",
    "I_FREE",
    "N_FL",
    "N_IT",
]


DONE, GROW, FULL, EVENTS = 0, 1, 2, 3

F_NOW, F_NEXT, F_RATE, F_TMEAS, F_INVW = 0, 1, 2, 3, 4
I_HSIZE, I_TOP, I_NREC, I_EVENTS, I_CUR, I_FREE = 0, 1, 2, 3, 4, 5
N_FL, N_IT = 5, 6
"""Lengths of the kernel's ``fl`` and ``it`` arrays (:func:`new_counters`)."""


_PF_LEAD = 24
"""Departures the prefetch cursor runs ahead of the front of the window (in buckets: this
over :data:`WINDOW_PER_BUCKET`)."""


@njit(cache=True, inline="always")
def _index(v):
    """A server number stored as a float, as an integer (unannotated: typed as the callers' ``j``)."""
    return int(v)


@njit(cache=True, inline="always")
def _level_up(c, area, last, ctot, k, ell, now):
    area[k, ell] += c[k, ell] * (now - last[k, ell])
    last[k, ell] = now
    c[k, ell] += 1
    ctot[ell] += 1


@njit(cache=True, inline="always")
def _level_down(c, area, last, ctot, k, ell, now):
    area[k, ell] += c[k, ell] * (now - last[k, ell])
    last[k, ell] = now
    c[k, ell] -= 1
    ctot[ell] -= 1


@njit(cache=True)
def close_areas(c: np.ndarray, area: np.ndarray, last: np.ndarray, now: float) -> None:
    """Bring every level's integral up to time ``now``."""
    K, L = c.shape
    for k in range(K):
        for ell in range(L):
            area[k, ell] += c[k, ell] * (now - last[k, ell])
            last[k, ell] = now


@njit(cache=True, nogil=True)
def events_kernel(
    x: np.ndarray,
    lastdep: np.ndarray,
    bound: np.ndarray,
    speed: np.ndarray,
    ht: np.ndarray,
    cal: np.ndarray,
    qt: np.ndarray,
    qn: np.ndarray,
    order: np.ndarray,
    pos: np.ndarray,
    bstart: np.ndarray,
    c: np.ndarray,
    area: np.ndarray,
    last: np.ndarray,
    ctot: np.ndarray,
    s: np.ndarray,
    cfg: np.ndarray,
    svc_par: np.ndarray,
    svc_tab: np.ndarray,
    fl: np.ndarray,
    it: np.ndarray,
    so: np.ndarray,
    wa: np.ndarray,
    rc: np.ndarray,
    t_stop: float,
    max_events: int,
) -> int:
    """Run events until ``t_stop``, ``max_events``, a full buffer, far heap, node pool or
    level array (see the module docstring).  ``cfg = [n, d, replace, policy, service code,
    keep sorted]``; ``fl = [now, next arrival, rate, t_meas, 1/bucket width]``; ``it = [far
    heap size, top level, records, events, front bucket, first free node]``
    (:func:`new_counters`)."""
    n = cfg[0]
    d = cfg[1]
    rep = cfg[2] != 0
    pol = cfg[3]
    code = cfg[4]
    srt = cfg[5] != 0
    cap = c.shape[1] - 1
    h = ht  # the far-future departures: a heap of rows (time, server)
    hcap = h.shape[0] - _H0
    nb = cal.shape[0]  # buckets in the window (a power of two)
    mask = nb - 1
    invw = fl[F_INVW]  # 1 / bucket width
    K = bound.shape[0]
    out_cap = so.shape[0]
    rate = fl[F_RATE]
    t_meas = fl[F_TMEAS]
    hsize = it[I_HSIZE]
    top = it[I_TOP]
    nrec = it[I_NREC]
    cur = it[I_CUR]
    free = it[I_FREE]
    events = 0
    status = EVENTS
    # the next departure, once found: its time, node (-2: the heap's root) and the node
    # before it in its bucket's list (-1: the bucket's head); bn == -1: not known
    bt = math.inf
    bn = -1
    bp = -1
    # the prefetch cursor: a node in bucket pfb (ahead of cur), walked one node a departure;
    # it only asks for cache lines and changes no value
    pfb = cur
    pfn = -1
    pfl = max(1, int(_PF_LEAD / WINDOW_PER_BUCKET))
    while events < max_events:
        if top >= cap - 1 or hsize >= hcap or free < 0:
            status = GROW
            break
        if nrec >= out_cap:
            status = FULL
            break
        ta = fl[F_NEXT]
        if bn == -1:
            # the least departure in bucket ``cur``, moving ``cur`` on over empty buckets but
            # never past the bucket of the next arrival (whose departure may land there)
            lim = ta * invw
            while True:
                node = cal[cur & mask]
                if node >= 0:
                    bt = qt[node, 0]
                    bn = node
                    bp = -1
                    prv = node
                    node = qn[node]
                    while node >= 0:
                        tn = qt[node, 0]
                        if tn < bt:
                            bt = tn
                            bn = node
                            bp = prv
                        prv = node
                        node = qn[node]
                    break
                if hsize > 0 and h[_H0, 0] * invw < cur + 1:
                    break
                if cur + 1 > lim:
                    break
                cur += 1
            if hsize > 0 and h[_H0, 0] < bt and h[_H0, 0] * invw < cur + 1:
                bt = h[_H0, 0]
                bn = -2
        if bn != -1 and bt < ta:
            now = bt
            if now > t_stop:
                fl[F_NOW] = t_stop
                status = DONE
                break
            # departure from server j
            if bn == -2:  # the heap's root leaves
                j = _index(h[_H0, 1])
                hsize -= 1
                if hsize > 0:
                    _pop_bottom_up(h, hsize)
            else:  # node bn leaves its bucket's list and joins the free list
                j = _index(qt[bn, 1])
                nx = qn[bn]
                if bp < 0:
                    cal[cur & mask] = nx
                else:
                    qn[bp] = nx
                qn[bn] = free
                free = bn
            bn = -1
            bt = math.inf
            # prefetch: the server of the cursor's node (its row asked for one departure
            # ago), then the next node (or the head of the next bucket)
            if pfb <= cur:
                pfb = cur + pfl
                pfn = -1
            if pfn >= 0:
                _prefetch(x, _index(qt[pfn, 1]))
                pfn = qn[pfn]
            while pfn < 0 and pfb < cur + 2 * pfl:
                pfb += 1
                pfn = cal[pfb & mask]
            if pfn >= 0:
                _prefetch(qt, pfn)
                _prefetch(qn, pfn)
            ell = x[j]
            k = 0
            while k < K - 1 and j >= bound[k]:
                k += 1
            _level_down(c, area, last, ctot, k, ell, now)
            if ell == top and ctot[ell] == 0:
                top -= 1
            x[j] = ell - 1
            if srt:  # j moves from bucket ell to ell - 1: swap with the first of its bucket
                p = bstart[ell]
                pj = pos[j]
                o = order[p]
                order[p] = j
                order[pj] = o
                pos[j] = p
                pos[o] = pj
                bstart[ell] = p + 1
        else:
            now = ta
            if now > t_stop:
                fl[F_NOW] = t_stop
                status = DONE
                break
            fl[F_NEXT] = now + _exp1(s) / rate
            # choose the server
            if pol == JSQ_D:
                j = -1
                best = 0
                ties = 0
                if rep or d == 1:
                    for _ in range(d):
                        q = next_below(s, n)
                        xq = x[q]
                        if j < 0 or xq < best:
                            j = q
                            best = xq
                            ties = 1
                        elif xq == best:
                            ties += 1
                            if next_below(s, ties) == 0:
                                j = q
                else:
                    # Floyd's algorithm: a uniform d-subset; order[] is scratch (not sorted mode)
                    for r in range(n - d, n):
                        q = next_below(s, r + 1)
                        for i in range(r - (n - d)):
                            if order[i] == q:
                                q = r
                                break
                        order[r - (n - d)] = q
                        xq = x[q]
                        if j < 0 or xq < best:
                            j = q
                            best = xq
                            ties = 1
                        elif xq == best:
                            ties += 1
                            if next_below(s, ties) == 0:
                                j = q
            elif pol == RANDOM:
                j = next_below(s, n)
            elif pol == JSQ:
                m = x[order[0]]
                j = order[next_below(s, bstart[m + 1])]
            elif pol == JIQ:
                if bstart[1] > 0:
                    j = order[next_below(s, bstart[1])]
                else:
                    j = next_below(s, n)
            elif pol == JBT:  # a uniform server shorter than T = d if any (JIQ is T = 1), else a uniform one
                b = bstart[d] if d < bstart.shape[0] else n
                j = order[next_below(s, b)] if b > 0 else next_below(s, n)
            else:  # an unknown code: refused, never run as another rule
                status = BAD_RULE
                break
            ell = x[j]
            k = 0
            while k < K - 1 and j >= bound[k]:
                k += 1
            work = sample_service(s, code, svc_par, svc_tab) / speed[k]
            if ell == 0:
                start = now
            else:
                start = lastdep[j]
            dep = start + work
            lastdep[j] = dep
            x[j] = ell + 1
            _level_up(c, area, last, ctot, k, ell + 1, now)
            if ell + 1 > top:
                top = ell + 1
            qd = dep * invw
            if qd < cur + nb:  # in the window: a node at the head of its bucket's list
                b = int(qd)
                node = free
                free = qn[node]
                qt[node, 0] = dep
                qt[node, 1] = j
                qn[node] = cal[b & mask]
                cal[b & mask] = node
                if b == cur:  # the bucket being emptied: its least may have changed
                    bn = -1
                    bt = math.inf
            else:  # far future: the heap (never earlier than a departure in the window)
                _push(h, hsize, dep, float(j))
                hsize += 1
            if srt:  # j moves from bucket ell to ell + 1: swap with the last of its bucket
                p = bstart[ell + 1] - 1
                pj = pos[j]
                o = order[p]
                order[p] = j
                order[pj] = o
                pos[j] = p
                pos[o] = pj
                bstart[ell + 1] = p
            if pol == JSQ_D and (rep or d == 1):
                _prefetch_samples(s, n, d, x, lastdep)
            if now >= t_meas:
                so[nrec] = dep - now
                wa[nrec] = start - now
                rc[nrec] = k
                nrec += 1
        fl[F_NOW] = now
        events += 1
    it[I_HSIZE] = hsize
    it[I_TOP] = top
    it[I_NREC] = nrec
    it[I_CUR] = cur
    it[I_FREE] = free
    it[I_EVENTS] += events
    return status


def new_arrays(
    class_counts: ArrayLike,
    levels: int = 16,
    heap: int | None = None,
    buffer: int = 1 << 16,
    sorted_mode: bool = False,
    buckets: int = 64,
    nodes: int | None = None,
) -> dict[str, np.ndarray]:
    """Fresh arrays for an empty system: a dict of the kernel's array arguments (servers of
    class 0 first, then class 1, …: ``bound[k]`` is the first server after class ``k``).
    ``buckets`` (a power of two, :func:`window`), ``nodes`` and ``heap``: the window's
    buckets and the first sizes of the node pool and of the far-future heap."""
    counts = np.asarray(class_counts, dtype=np.int64)
    n = int(counts.sum())
    K = counts.size
    L = int(levels) + 1
    nb = int(buckets)
    if nb < 1 or nb & (nb - 1):
        raise ValueError(f"buckets must be a power of two, got {buckets!r}")
    h = int(heap) if heap is not None else n // 16 + 64
    m = int(nodes) if nodes is not None else 4 * n + 64
    a: dict[str, np.ndarray] = {
        "x": np.zeros(n, np.int32),
        "lastdep": np.zeros(n),
        "bound": np.cumsum(counts).astype(np.int64),
        "ht": _heap_rows(h),
        "cal": np.full(nb, -1, np.int32),
        "qt": np.zeros((m, 2)),
        "qn": _free_chain(0, m),
        "order": np.arange(n, dtype=np.int32) if sorted_mode else np.zeros(n, np.int32),
        "pos": np.arange(n, dtype=np.int32),
        "bstart": np.full(L + 1, n, np.int64),
        "c": np.zeros((K, L), np.int64),
        "area": np.zeros((K, L)),
        "last": np.zeros((K, L)),
        "ctot": np.zeros(L, np.int64),
        "so": np.zeros(buffer),
        "wa": np.zeros(buffer),
        "rc": np.zeros(buffer, np.int32),
    }
    a["bstart"][0] = 0
    a["c"][:, 0] = counts
    a["ctot"][0] = n
    return a


def new_counters(rate: float, t_meas: float, first_arrival: float, inv_width: float) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's ``fl`` (clock, next arrival, rate, t_meas, 1/bucket width) and ``it``
    (heap size, top level, records, events, current bucket, free node) for an empty system."""
    fl = np.zeros(N_FL)
    fl[F_NOW], fl[F_NEXT], fl[F_RATE], fl[F_TMEAS], fl[F_INVW] = 0.0, first_arrival, rate, t_meas, inv_width
    it = np.zeros(N_IT, np.int64)
    it[I_FREE] = 0
    return fl, it


def pending_departures(a: dict, it: np.ndarray) -> np.ndarray:
    """Every waiting departure ``(time, server)``, sorted by time (for checks; not fast)."""
    rows = [a["ht"][_H0 : _H0 + int(it[I_HSIZE])]]
    for head in a["cal"]:
        node = int(head)
        while node >= 0:
            rows.append(a["qt"][node : node + 1])
            node = int(a["qn"][node])
    out = np.concatenate(rows)
    return out[np.argsort(out[:, 0], kind="stable")]


def grow(a: dict, now: float, it: np.ndarray) -> None:
    """Grow, in place, whichever of the levels (a queue at the top level), the node pool
    (no free node) and the far-future heap (full) stopped the kernel: doubled, the new
    levels empty with their clocks at ``now``, the new nodes free."""
    if a["ctot"][-2:].any():  # levels
        K, L = a["c"].shape
        a["c"] = np.hstack([a["c"], np.zeros((K, L), np.int64)])
        a["area"] = np.hstack([a["area"], np.zeros((K, L))])
        a["last"] = np.hstack([a["last"], np.full((K, L), now)])
        a["ctot"] = np.concatenate([a["ctot"], np.zeros(L, np.int64)])
        a["bstart"] = np.concatenate([a["bstart"], np.full(L, a["x"].size, np.int64)])
    elif it[I_FREE] < 0:  # nodes: the new ones make the free list
        m = a["qt"].shape[0]
        a["qt"] = np.concatenate([a["qt"], np.zeros((m, 2))])
        a["qn"] = np.concatenate([a["qn"], _free_chain(m, 2 * m)])
        it[I_FREE] = m
    else:
        old = a["ht"]
        new = _heap_rows(2 * (old.shape[0] - _H0))
        new[: old.shape[0]] = old
        a["ht"] = new
