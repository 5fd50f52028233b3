"""``P_i`` (docs/model.md §2) and its look-up tables, shared by the engines' kernels.

``P(c)`` is looked up, never recomputed per event: a full table ``P(0..n)`` when ``n`` is
small, otherwise for each of the first ``LW`` levels a window of ``WIN`` consecutive values
of ``c`` around the current count (:class:`.layout.Tables`), rebuilt (``WIN``
evaluations) when ``c`` leaves it.  Levels above ``LW`` evaluate ``P`` directly.
Probabilities are exact up to double rounding (``~2^-52``).

Dispatch rules (docs/model.md §2, "Other dispatch rules"): the tables hold the rule's
``P`` as a function of one level's count, :func:`p_rule`, by rule code (:data:`JSQ_D`,
:data:`RANDOM`, :data:`JSQ`, :data:`JIQ`; :mod:`supermarket.system.policies` names them).  For
``JIQ`` the table holds ``c/n`` and the kernels multiply by ``1{c_1 = n}``.  :data:`JBT`'s
``P_ℓ = (c_ℓ − c_T)/(n − c_T)`` (``c_T < n``) is no function of one count: it has no table
(:func:`p_rule` is NaN for it) and the kernels evaluate :func:`jbt_p` on the whole profile.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .layout import Setup, Tables

__all__ = [
    "HALF_WIN",
    "WIN",
    "LW",
    "FULL_TABLE_MAX_N",
    "log_p_all_at_least",
    "p_all_at_least",
    "p_table",
    "get_p",
    "rebuild_window",
    "refresh_windows",
    "window_edge",
    "flat_tables",
    "JSQ_D",
    "RANDOM",
    "JSQ",
    "JIQ",
    "JBT",
    "POLICY_CODES",
    "BAD_RULE",
    "counts_rule",
    "p_rule",
    "p_rule_counts",
    "p_levels",
    "jbt_p",
]

HALF_WIN = 1024
WIN = 2 * HALF_WIN
LW = 32  # levels with a window table
FULL_TABLE_MAX_N = 1 << 15

# dispatch-rule codes (supermarket.system.policies.RULES maps the names to them; tests/system/test_registry.py
# checks the two agree); 0 is today's JSQ(d)
JSQ_D, RANDOM, JSQ, JIQ, JBT = 0, 1, 2, 3, 4
POLICY_CODES = (JSQ_D, RANDOM, JSQ, JIQ, JBT)
BAD_RULE = 99
"""The status a kernel returns, before any event, for a rule code it does not know (the driver
raises): no code falls through to another rule."""


@njit(cache=True)
def _lgamma_ratio(x, a):
    """``lgamma(x + a) − lgamma(x)`` for ``x > 0, a >= 0`` without cancellation.

    For ``x >= 30`` by Stirling's series written as ``(x−½)·log1p(a/x) + a·log(x+a) − a +
    s(x+a) − s(x)``: relative accuracy ~1e-16 even when ``x`` is 10^12.
    """
    if a == 0.0:
        return 0.0
    if x < 30.0:
        return math.lgamma(x + a) - math.lgamma(x)
    y = x + a

    def s(z):
        z2 = 1.0 / (z * z)
        return (1.0 / z) * (1.0 / 12.0 - z2 * (1.0 / 360.0 - z2 * (1.0 / 1260.0 - z2 / 1680.0)))

    return (x - 0.5) * math.log1p(a / x) + a * math.log(y) - a + (s(y) - s(x))


@njit(cache=True)
def log_p_all_at_least(c: int, n: int, d: int, replace: bool) -> float:
    """``log P_i`` for a level with ``c`` queues of length ``>= i`` (docs/model.md §2).

    With replacement ``d·log(c/n)``; without, ``log C(c,d) − log C(n,d)`` written through
    whichever of ``d`` and ``m = n − c`` is smaller (absolute error ~1e-16·min(d,m)·log n).
    """
    if c >= n:
        return 0.0
    if c <= 0:
        return -np.inf
    fn = float(n)
    fc = float(c)
    fd = float(d)
    if replace:
        return fd * math.log1p(-(fn - fc) / fn)
    if c < d:
        return -np.inf
    m = fn - fc
    if fd <= m:
        # log C(c,d) − log C(n,d) = [lgamma(c+1) − lgamma(c+1−d)] − [lgamma(n+1) − lgamma(n+1−d)]
        return _lgamma_ratio(fc + 1.0 - fd, fd) - _lgamma_ratio(fn + 1.0 - fd, fd)
    # = [lgamma(n−d+1) − lgamma(c−d+1)] − [lgamma(n+1) − lgamma(c+1)]
    return _lgamma_ratio(fc - fd + 1.0, m) - _lgamma_ratio(fc + 1.0, m)


@njit(cache=True)
def p_all_at_least(c: int, n: int, d: int, replace: bool) -> float:
    """``P_i``: probability that all d sampled queues have length >= i (docs/model.md §2)."""
    if c >= n:
        return 1.0
    return math.exp(log_p_all_at_least(c, n, d, replace))


@njit(cache=True)
def p_rule(policy: int, c: int, n: int, d: int, replace: bool) -> float:
    """The table value of rule ``policy`` at a level holding count ``c`` (docs/model.md §2):
    ``P_i`` for JSQ(d) (:func:`p_all_at_least`), ``c/n`` for random (one uniform queue),
    ``1{c = n}`` for JSQ (the shortest of all ``n``), and ``c/n`` for JIQ, whose
    ``P_i = 1{c_1 = n}·c_i/n`` the kernels complete with the factor ``1{c_1 = n}``.  NaN for
    JBT, whose ``P_i`` reads ``c_T`` too (:func:`jbt_p`), and for an unknown code."""
    if policy == JSQ_D:
        return p_all_at_least(c, n, d, replace)
    if policy != RANDOM and policy != JSQ and policy != JIQ:
        return math.nan  # an unknown code: NaN, never another rule's value (the drivers refuse it first)
    if c >= n:
        return 1.0
    if policy == JSQ or c <= 0:
        return 0.0
    return float(c) / float(n)


@njit(cache=True)
def counts_rule(policy: int) -> bool:
    """Whether the count kernels (profile, buckets, phase, classes) know rule code ``policy``."""
    return policy in (JSQ_D, RANDOM, JSQ, JIQ, JBT)


@njit(cache=True)
def jbt_p(c: np.ndarray, j: int, n: int, d: int) -> float:
    """JBT(T = d)'s ``P`` at level index ``j`` (level ``j + 1``) of the profile ``c`` (docs/model.md
    §2): while a queue is shorter than ``T`` (``c_T < n``) the arrival joins a uniform one of
    the ``n − c_T`` below ``T``, so ``P = (c_{j+1} − c_T)/(n − c_T)`` for ``j + 1 <= T`` (0 at
    ``j + 1 = T``) and 0 above; else a uniform queue, ``P = c_{j+1}/n``.  ``c_T`` is
    ``c[d − 1]``, 0 past the array."""
    ct = c[d - 1] if d - 1 < c.shape[0] else 0
    if ct < n:
        if j >= d - 1:
            return 0.0
        return float(c[j] - ct) / float(n - ct)
    return float(c[j]) / float(n)


@njit(cache=True)
def p_rule_counts(policy: int, c: np.ndarray, n: int, d: int, replace: bool) -> np.ndarray:
    """``P_i`` of rule ``policy`` for every row of counts ``c`` (samples × levels, column 0 is
    level 1): :func:`p_rule`, with JIQ's factor ``1{c_1 = n}``, or JBT's :func:`jbt_p`, which
    reads ``c_T`` (``T = d``): a level past the columns counts as 0, so the caller passes the
    levels :func:`p_levels` names (docs/model.md §2)."""
    out = np.empty(c.shape)
    for s in range(c.shape[0]):
        idle_none = c[s, 0] >= n
        for j in range(c.shape[1]):
            if policy == JBT:
                v = jbt_p(c[s], j, n, d)
            else:
                v = p_rule(policy, c[s, j], n, d, replace)
                if policy == JIQ and not idle_none:
                    v = 0.0
            out[s, j] = v
    return out


def p_levels(policy: int, d: int, levels: int) -> int:
    """How many leading levels :func:`p_rule_counts` reads to give ``P`` at the first ``levels``:
    ``levels``, or at least ``d`` for JBT (``P_ℓ`` reads ``c_T``, ``T = d``)."""
    return max(levels, d) if policy == JBT else levels


@njit(cache=True)
def p_table(n: int, d: int, replace: bool, policy: int = JSQ_D) -> np.ndarray:
    """``P(c)`` for ``c = 0..n`` (only for small ``n``) of rule ``policy`` (:func:`p_rule`)."""
    out = np.empty(n + 1)
    for c in range(n + 1):
        out[c] = p_rule(policy, c, n, d, replace)
    return out


@njit(cache=True)
def rebuild_window(tables: Tables, setup: Setup, j: int, cj: int) -> int:
    """Refill the window of level index ``j`` around count ``cj``; returns ``cj``'s offset."""
    base = cj - HALF_WIN
    if base < 0:
        base = 0
    tables.winbase[j] = base
    win = tables.win
    for t in range(WIN):
        win[j, t] = p_rule(setup.policy, base + t, setup.n, setup.d, setup.replace)
    return cj - base


@njit(cache=True)
def get_p(tables: Tables, setup: Setup, j: int, cj: int) -> float:
    """``P`` at level index ``j`` holding count ``cj`` (table look-up, window rebuilt if needed)."""
    if setup.full_table:
        return tables.tab[cj]
    if j < LW:
        off = cj - tables.winbase[j]
        if off < 0 or off >= WIN:
            off = rebuild_window(tables, setup, j, cj)
        return tables.win[j, off]
    return p_rule(setup.policy, cj, setup.n, setup.d, setup.replace)


@njit(cache=True, inline="always")
def window_edge(x: int, base: int, n: int) -> bool:
    """Whether count ``x`` sits on the edge of a window of ``WIN`` values starting at
    ``base`` (a step of one could leave it) where the window could still move."""
    off = x - base
    return (off < 1 and base > 0) or (off > WIN - 2 and base + WIN - 1 < n)


@njit(cache=True)
def refresh_windows(tables: Tables, setup: Setup, c: np.ndarray, top: int) -> None:
    """Make the window of every level index ``<= top`` (below ``LW``) hold its count with
    room to move by one (before a fast loop, which only looks windows up)."""
    m = top + 1 if top + 1 < LW else LW
    for j in range(m):
        x = c[j]
        base = tables.winbase[j]
        off = x - base
        if off < 0 or off >= WIN or window_edge(x, base, setup.n):
            rebuild_window(tables, setup, j, x)


@njit(cache=True)
def flat_tables(tables: Tables, setup: Setup, levels: int) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """``(tabf, tbase, tstride, windowed)`` for the fast loops: ``P`` at level index ``j``
    and count ``x`` is ``tabf[j*tstride + x − tbase[j]]`` (the full table with ``tstride =
    0``, or the windows); ``levels`` = length of the level arrays."""
    if setup.full_table:
        return tables.tab, np.zeros(levels, np.int64), 0, False
    return tables.win.reshape(-1), tables.winbase, WIN, True
