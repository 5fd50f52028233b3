"""The counts chain of the supermarket model with phase-type service (docs/model.md §13).

Service times are phase-type ``PH(α, T)`` with ``K`` phases and mean 1: a customer starts
service in phase ``φ`` with probability ``α_φ``, moves from ``φ`` to ``ψ ≠ φ`` at rate
``T[φ, ψ]`` and completes at rate ``t0_φ = −(T·1)_φ``.  The state is the count

    ``N[ℓ, φ]`` = number of queues of length ``ℓ >= 1`` whose customer in service is in phase ``φ``

(array row ``ℓ``; row 0 is unused and stays 0), with the derived profile ``c_ℓ = #{length >=
ℓ} = Σ_{i>=ℓ} Σ_φ N[i, φ]`` (``c[ℓ]``, ``c[0] = n``) and the busy counts ``B_φ = Σ_ℓ N[ℓ, φ]``,
all kept up to date.  Queues of equal length and phase are exchangeable, so this is a
Markov chain whenever the dispatch rule looks only at queue lengths.

Events (continuous time):

- arrival, rate ``nλ``: the joined length ``ℓ = #{i >= 1 : U < P_i}`` with ``U`` uniform and
  ``P_i = P(c_i)`` the probability that the rule joins a queue of length ``>= i``; JSQ(d):
  ``P_i = (c_i/n)^d`` with replacement, ``C(c_i, d)/C(n, d)`` without (docs/model.md §2,
  :func:`.tables.p_all_at_least`).  The joined queue is uniform among the queues of length
  ``ℓ`` (the rule sees lengths only), so its phase is ``φ`` with probability ``N[ℓ, φ]/(c_ℓ −
  c_{ℓ+1})``: ``N[ℓ, φ] −= 1, N[ℓ+1, φ] += 1``; at an idle queue (``ℓ = 0``) the customer
  starts in phase ``φ ~ α``: ``N[1, φ] += 1``;
- a phase event in phase ``φ``, rate ``μ_φ B_φ`` (``μ_φ = −T[φ, φ]``): the queue is uniform
  among those in phase ``φ``, so its length is ``ℓ`` with probability ``N[ℓ, φ]/B_φ``; it
  moves to ``ψ`` with probability ``T[φ, ψ]/μ_φ`` (``N[ℓ, φ] −= 1, N[ℓ, ψ] += 1``) or
  completes with probability ``t0_φ/μ_φ``: ``N[ℓ, φ] −= 1`` and, if ``ℓ >= 2``, the next
  customer starts in phase ``ψ ~ α`` (``N[ℓ−1, ψ] += 1``).

Time: the jump chain of the continuous-time process (Gillespie), *not* uniformized.  The
total rate ``R = nλ + Σ_φ μ_φ B_φ`` changes with the state, and uniformizing at its maximum
``n(λ + max μ)`` would spend events on idle and slow-phase servers (H2 with SCV 4 at
λ = 0.9: phases of rate 1.77 and 0.23, each holding 0.45n busy servers in equilibrium, so
the real rate is 1.8n of a uniformized 2.68n: a third of the events would do nothing; with
unequal rates far apart, most); the jump chain wastes none, and ``R`` is ``K`` multiply-adds.  The holding time
in a state is either an exponential draw of rate ``R`` (``holding_exp = True``: the path is
the process in law) or its conditional mean ``1/R`` (``False``, the default of the Python
layer: time averages are then ratio estimators with the same limit, an event costs one
logarithm less, and the time axis is a function of the path; the conditioning removes the
holding times' own noise, but measured on n = 3, H2 the seed-to-seed spread of the mean queue
length was the same in both modes within its noise, 0.029 and 0.025 over 30 seeds).

Cost per event: one or two uniforms, a scan of the ``K`` phases and of the occupied levels
(the joined length, or the level of a phase event), O(1) table look-ups.  Nothing depends
on ``n`` (the ``P`` table is indexed by count; above ``FULL_MAX_N`` it is evaluated
directly, one ``exp``/``log`` per changed level).

Dispatch rules: ``policy`` is a code of :mod:`.tables` (``POLICY_JSQD = JSQ_D = 0`` is
JSQ(d); ``RANDOM``, ``JSQ``, ``JIQ``, ``JBT``), and ``P_i`` is :func:`.tables.p_rule` of ``c_i``
through :func:`p_of`.  Join-idle-queue's ``P_i = 1{c_1 = n}·c_i/n`` also depends on
``c_1``: its ``P`` is multiplied by that gate, and every level is refreshed
(:func:`refresh_p`) when ``c_1`` reaches or leaves ``n``.  Join-below-threshold (``T = d``),
``P_i = (c_i − c_T)/(n − c_T)`` for ``i <= T`` (0 above) while ``c_T < n`` and ``c_i/n``
once ``c_T = n`` (:func:`.tables.jbt_p`), has no table: ``P_i`` is evaluated from the
profile, and a change of ``c_T`` refreshes the levels that read it (:func:`refresh_jbt`):
``1..T`` always, every occupied level when ``c_T`` reaches or leaves ``n``.  An unknown code
stops the kernel before any event (:data:`.tables.BAD_RULE`).  The other rules' paths are
unchanged (bit-identical runs for the same seed).

Measurements, lazily updated per cell (docs/model.md §13): ``areaN[ℓ, φ] = ∫ N[ℓ, φ] dt``
and ``areaP[ℓ] = ∫ P_ℓ dt`` (``stampN``, ``stampP``: the time up to which each is closed);
``∫ c_ℓ dt`` is a sum of ``areaN``.  These give the flow-balance identities of §13 (checked
by the Python layer, used as control variates).

Joined counts (docs/model.md §13.2): ``joined[ℓ, φ] += 1`` at each arrival that joins a
queue of length ``ℓ >= 1`` whose customer in service is in phase ``φ``, or an idle queue
(``ℓ = 0``) where it starts in phase ``φ``; a FIFO customer's sojourn given ``(ℓ, φ)`` is the
service left from phase ``φ`` and ``ℓ`` whole services.  Counting draws no random number and
changes no other array (the path is that of a run without it).  By PASTA the arrivals of the
jump chain see the time-stationary law: ``(ℓ, φ)`` is an arrival's with probability
``nλ/R(x)`` in a state ``x`` the jump chain visits in proportion to ``π(x) R(x)``.

Generator: xoshiro256** (:mod:`.rng`), state ``s`` owned by the caller; the next event time
is part of the state (``clock[1]``), so a run cut into chunks (by events or by time) gives
exactly the numbers of an uncut run.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from .rng import next_double, step_double
from .tables import BAD_RULE, JBT, JIQ, RANDOM, counts_rule, jbt_p, p_all_at_least, p_rule

__all__ = [
    "POLICY_JSQD",
    "FULL_MAX_N",
    "p_of",
    "phase_tables",
    "phase_kernel",
    "close_all",
    "refresh_p",
    "refresh_jbt",
    "p_jbt",
    "BAD_RULE",
    "STATUS_DONE",
    "STATUS_EVENTS",
    "STATUS_GROW",
]

POLICY_JSQD = 0
FULL_MAX_N = 1 << 22  # P table of n + 1 doubles (32 MiB) up to here, direct evaluation above

STATUS_DONE = 0  # reached t_stop
STATUS_EVENTS = 1  # did max_events
STATUS_GROW = 2  # needs more level capacity (grow N, c, P, areaN, stampN, areaP, stampP)


@njit(cache=True)
def p_of(policy: int, cl: int, n: int, d: int, rep: bool, tab: np.ndarray) -> float:
    """``P_ℓ`` for a level holding ``cl`` queues of length ``>= ℓ``, under rule ``policy``
    (``tab``: the table ``P(0..n)``, or a length-0 array to evaluate directly)."""
    if policy == POLICY_JSQD:
        if tab.shape[0] > 0:
            return tab[cl]
        return p_all_at_least(cl, n, d, rep)
    if RANDOM <= policy <= JIQ:  # codes 1, 2, 3 (.tables)
        if tab.shape[0] > 0:
            return tab[cl]
        return p_rule(policy, cl, n, d, rep)  # JIQ: c/n, gated by 1{c_1 = n} in the kernel
    return math.nan  # unknown code: NaN poisons every comparison, caught by the Python layer


@njit(cache=True)
def p_jbt(c: np.ndarray, j: int, n: int, d: int) -> float:
    """JBT(T = d)'s ``P_j`` at level ``j >= 1`` of this module's profile (``c[ℓ] = c_ℓ``,
    ``c[0] = n``): :func:`.tables.jbt_p`, whose profile starts at level 1 (``c_T = c[d]``,
    0 past the array)."""
    return jbt_p(c[1:], j - 1, n, d)


@njit(cache=True, inline="always")
def _p_level(policy, c, j, n, d, rep, tab):
    """``P_j`` of level ``j >= 1`` from the profile ``c``: :func:`p_of`, times ``1{c_1 = n}``
    for join-idle-queue (an arrival joins a busy queue only when none is idle); JBT's
    :func:`p_jbt`."""
    if policy == JBT:
        return p_jbt(c, j, n, d)
    if policy == JIQ and c[1] < n:
        return 0.0
    return p_of(policy, c[j], n, d, rep, tab)


@njit(cache=True)
def refresh_p(
    policy: int,
    c: np.ndarray,
    P: np.ndarray,
    areaP: np.ndarray,
    stampP: np.ndarray,
    top: int,
    n: int,
    d: int,
    rep: bool,
    tab: np.ndarray,
    now: float,
) -> None:
    """Recompute ``P_2..P_top`` (closing their integrals at ``now``): join-idle-queue's
    ``P_ℓ`` changes at every level when ``c_1`` reaches or leaves ``n``."""
    for j in range(2, top + 1):
        areaP[j] += P[j] * (now - stampP[j])
        stampP[j] = now
        P[j] = _p_level(policy, c, j, n, d, rep, tab)


@njit(cache=True)
def refresh_jbt(
    c: np.ndarray,
    P: np.ndarray,
    areaP: np.ndarray,
    stampP: np.ndarray,
    top: int,
    n: int,
    d: int,
    crossed: bool,
    now: float,
) -> None:
    """JBT(T = d): ``c_T`` has just changed at time ``now``; recompute (closing their integrals
    first) the ``P_ℓ`` that read it: levels ``1..T`` (``P_T`` is 0 while ``c_T < n``), and every
    level up to ``top`` when ``c_T`` reached or left ``n`` (``crossed``: above ``T`` the rule
    goes from 0 to ``c_ℓ/n``, or back)."""
    hi = top if crossed or top < d else d
    for j in range(1, hi + 1):
        areaP[j] += P[j] * (now - stampP[j])
        stampP[j] = now
        P[j] = p_jbt(c, j, n, d)


@njit(cache=True)
def phase_tables(policy: int, n: int, d: int, rep: bool) -> np.ndarray:
    """The table ``P(0..n)`` when ``n <= FULL_MAX_N``, else an empty array."""
    if n > FULL_MAX_N or policy == JBT:  # JBT: no function of one count (p_jbt)
        return np.zeros(0)
    out = np.empty(n + 1)
    for x in range(n + 1):
        out[x] = p_of(policy, x, n, d, rep, out[:0])
    return out


@njit(cache=True)
def close_all(
    N: np.ndarray,
    P: np.ndarray,
    areaN: np.ndarray,
    stampN: np.ndarray,
    areaP: np.ndarray,
    stampP: np.ndarray,
    now: float,
) -> None:
    """Close every lazy integral up to time ``now`` (before reading ``areaN``, ``areaP``)."""
    L, K = N.shape
    for ell in range(L):
        for ph in range(K):
            areaN[ell, ph] += N[ell, ph] * (now - stampN[ell, ph])
            stampN[ell, ph] = now
        areaP[ell] += P[ell] * (now - stampP[ell])
        stampP[ell] = now


@njit(cache=True, inline="always")
def _bump(N, areaN, stampN, ell, ph, delta, now):
    """``N[ell, ph] += delta`` at time ``now``, closing its integral first."""
    areaN[ell, ph] += N[ell, ph] * (now - stampN[ell, ph])
    stampN[ell, ph] = now
    N[ell, ph] += delta


@njit(cache=True, inline="always")
def _pick(cum, x):
    """Index of the first entry of the cumulative array ``cum`` above ``x`` (the last if none)."""
    m = cum.shape[0] - 1
    i = 0
    while i < m and cum[i] <= x:
        i += 1
    return i


@njit(cache=True, nogil=True)
def phase_kernel(
    state: tuple[np.ndarray, ...],
    meas: tuple[np.ndarray, ...],
    law: tuple[np.ndarray, ...],
    setup: tuple[Any, ...],
    tab: np.ndarray,
    s: np.ndarray,
    clock: np.ndarray,
    t_stop: float,
    max_events: int,
) -> tuple[int, int]:
    """Run the phase-type counts chain until time ``t_stop`` or ``max_events`` events.

    Arguments (all updated in place; see the module docstring):

    - ``state = (N, B, c, P, ints)``: ``N`` int64 (L, K), ``B`` int64 (K,), ``c`` int64 (L,)
      with ``c[0] = n``, ``P`` float64 (L,) with ``P[0] = 1`` (``P[ℓ] = P(c[ℓ])``), ``ints``
      int64 (2,) = ``(top, total)``: the maximum queue length and the number of customers;
    - ``meas = (areaN, stampN, areaP, stampP, joined)``: ``joined`` int64 (L, K) counts the
      arrivals by what they join (module docstring, "Joined counts");
    - ``law = (alpha_cum, mu, move_cum)``: cumulative ``α`` (K,), ``μ_φ = −T[φ, φ]`` (K,), and
      per phase the cumulative rates of its moves, phases ``0..K−1`` (0 for itself) then
      completion: ``move_cum`` (K, K + 1), last column ``μ_φ``;
    - ``setup = (n, lam, d, rep, policy, holding_exp)``;
    - ``tab``: :func:`phase_tables`; ``s``: the generator; ``clock`` float64 (2,) = ``(now,
      t_next)``, ``t_next < 0`` meaning "not drawn yet".

    Returns ``(events, status)`` (:data:`STATUS_DONE`, :data:`STATUS_EVENTS`, :data:`STATUS_GROW`;
    ``(0, BAD_RULE)`` for an unknown rule code, before any event or draw).
    """
    if not counts_rule(setup[4]):  # an unknown code: refused, never run as another rule
        return 0, BAD_RULE
    N, B, c, P, ints = state
    areaN, stampN, areaP, stampP, joined = meas
    alpha_cum, mu, move_cum = law
    n, lam, d, rep, policy, holding_exp = setup
    L, K = N.shape
    top = ints[0]
    total = ints[1]
    now = clock[0]
    t_next = clock[1]
    nlam = n * lam
    R = nlam
    for ph in range(K):
        R += mu[ph] * B[ph]
    if t_next < 0.0:
        if holding_exp:
            t_next = now - math.log(1.0 - next_double(s)) / R
        else:
            t_next = now + 1.0 / R
    r0, r1, r2, r3 = s[0], s[1], s[2], s[3]  # the generator in registers (written back at the end)
    events = 0
    status = STATUS_EVENTS
    while events < max_events:
        if top + 2 > L:
            status = STATUS_GROW
            break
        if t_next > t_stop:
            now = t_stop
            status = STATUS_DONE
            break
        now = t_next
        x, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
        x *= R
        if x < nlam:
            # arrival: joined length ℓ = #{i >= 1 : U < P_i} (P non-increasing)
            U = x / nlam
            ell = 0
            while ell < top and P[ell + 1] > U:
                ell += 1
            v, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
            if ell == 0:
                ph = _pick(alpha_cum, v)
                B[ph] += 1
            else:
                y = v * (c[ell] - c[ell + 1])
                ph = 0
                acc = N[ell, 0]
                while ph < K - 1 and acc <= y:
                    ph += 1
                    acc += N[ell, ph]
                _bump(N, areaN, stampN, ell, ph, -1, now)
            joined[ell, ph] += 1  # what this arrival joins (no draw: its sojourn's law, §13.2)
            _bump(N, areaN, stampN, ell + 1, ph, 1, now)
            j = ell + 1  # c_{ℓ+1} += 1
            if j > top:
                top = j
            areaP[j] += P[j] * (now - stampP[j])
            stampP[j] = now
            c[j] += 1
            if policy == JIQ:
                P[j] = _p_level(policy, c, j, n, d, rep, tab)
                if j == 1 and c[1] == n:  # no idle queue left: the busy levels open
                    refresh_p(policy, c, P, areaP, stampP, top, n, d, rep, tab, now)
            elif policy == JBT:
                if j == d:  # c_T changed: every P_ℓ that reads it
                    refresh_jbt(c, P, areaP, stampP, top, n, d, c[j] == n, now)
                else:
                    P[j] = p_jbt(c, j, n, d)
            else:
                P[j] = p_of(policy, c[j], n, d, rep, tab)
            total += 1
        else:
            # a phase event: phase φ with probability μ_φ B_φ / (R − nλ) ...
            x -= nlam
            ph = 0
            w = mu[0] * B[0]
            while ph < K - 1 and x >= w:
                x -= w
                ph += 1
                w = mu[ph] * B[ph]
            # ... at a queue of length ℓ with probability N[ℓ, φ]/B_φ
            y = x / mu[ph]
            if y >= B[ph]:
                y = B[ph] - 0.5  # rounding at the top of the interval
            ell = 1
            acc = N[1, ph]
            while ell < top and acc <= y:
                ell += 1
                acc += N[ell, ph]
            v, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
            v *= mu[ph]
            to = 0
            while to < K and move_cum[ph, to] <= v:
                to += 1
            _bump(N, areaN, stampN, ell, ph, -1, now)
            B[ph] -= 1
            if to < K:
                # phase move φ → ψ
                _bump(N, areaN, stampN, ell, to, 1, now)
                B[to] += 1
            else:
                # completion: c_ℓ −= 1, the next customer (if any) starts in phase ~ α
                if ell >= 2:
                    v, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
                    nph = _pick(alpha_cum, v)
                    _bump(N, areaN, stampN, ell - 1, nph, 1, now)
                    B[nph] += 1
                areaP[ell] += P[ell] * (now - stampP[ell])
                stampP[ell] = now
                c[ell] -= 1
                if policy == JIQ:
                    P[ell] = _p_level(policy, c, ell, n, d, rep, tab)
                    if ell == 1 and c[1] == n - 1:  # a queue fell idle: the busy levels close
                        refresh_p(policy, c, P, areaP, stampP, top, n, d, rep, tab, now)
                elif policy == JBT:
                    if ell == d:  # c_T changed: every P_ℓ that reads it
                        refresh_jbt(c, P, areaP, stampP, top, n, d, c[ell] == n - 1, now)
                    else:
                        P[ell] = p_jbt(c, ell, n, d)
                else:
                    P[ell] = p_of(policy, c[ell], n, d, rep, tab)
                if c[ell] == 0:
                    top = ell - 1
                total -= 1
        # the total rate from the integer counts (no drift, the same however a run is cut)
        R = nlam
        for q in range(K):
            R += mu[q] * B[q]
        if holding_exp:
            v, r0, r1, r2, r3 = step_double(r0, r1, r2, r3)
            t_next = now - math.log(1.0 - v) / R
        else:
            t_next = now + 1.0 / R
        events += 1
    s[0], s[1], s[2], s[3] = r0, r1, r2, r3
    ints[0] = top
    ints[1] = total
    clock[0] = now
    clock[1] = t_next
    return events, status
