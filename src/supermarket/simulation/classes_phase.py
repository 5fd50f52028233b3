"""Server classes with a phase-type law on the count engine (:mod:`supermarket.engines.classes_phase`,
docs/model.md §15.7).

:func:`simulate_classes_phase` runs the per-class (length, phase) count chain for every
dispatch rule and returns a :class:`supermarket.simulation.classes.ClassesResult` (its ``service``
names the law): per-class tail fractions, queue lengths and sojourn times (Little's law), and
the totals, with the error bars of §15.3 (time batches, blocking per replication, pooled)
and the capacity-balance control variate ``Σ_k f_k s_k E[u_{k,1}] = λ s̄``, which holds for
every law of mean 1 (each customer brings one unit of work on average, and a class-``k``
server does ``s_k`` units per unit of busy time).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ..engines import classes_phase as _cp
from ..engines.rng import state_from_seed_sequence
from ..system import policies as _pol
from ..system.service import ServerClasses, ServiceLaw, parse_phase_type, parse_server_classes
from . import records as _rec
from .class_starts import check_start, classes_phase_start
from .classes import CHUNK, ClassesResult, _check, _horizon, _replicate, _summarize

__all__ = ["simulate_classes_phase"]

LEVELS0 = 64


def _law_tables(law: ServiceLaw, speeds: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """``alpha_cum``, ``move_cum[k, φ, :]`` (moves then completion, at the class's speed) and ``μ̂``."""
    a = np.asarray(law.alpha, float)
    T = np.asarray(law.T, float)
    K = a.size
    t0 = -T.sum(axis=1)
    alpha_cum = np.cumsum(a)
    alpha_cum[-1] = 1.0
    base = np.zeros((K, K + 1))
    for ph in range(K):
        acc = 0.0
        for to in range(K):
            if to != ph:
                acc += T[ph, to]
            base[ph, to] = acc
        base[ph, K] = acc + t0[ph]
    move_cum = speeds[:, None, None] * base[None, :, :]
    return alpha_cum, move_cum, float(np.max(-np.diag(T)))


def _start(counts: np.ndarray, K: int, N0: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``(N, c, C, top)`` of an empty system, or of one with the counts ``N0[k, ℓ, φ]`` (``ℓ >= 1``)."""
    Kc = counts.size
    L = LEVELS0 if N0 is None else max(LEVELS0, N0.shape[1] + 2)
    N = np.zeros((Kc, L, K), np.int64)
    c = np.zeros((Kc, L + 1), np.int64)
    top = 0
    if N0 is not None:
        N[:, 1 : N0.shape[1]] = N0[:, 1:]
        by_level = N.sum(axis=2)  # servers of length exactly ℓ, per class
        c[:, :L] = np.cumsum(by_level[:, ::-1], axis=1)[:, ::-1]  # at least ℓ
        top = int(np.max(np.nonzero(by_level.any(axis=0))[0], initial=0))
    c[:, 0] = counts
    return N, c, c.sum(axis=0), top


def _run_one(counts, speeds, law_tab, cfg, p_arr, burn_ev, batch_ev, batches, ss, tick, stop, N0=None, rec=None):
    """One replication: the per-batch sums ``area[b, k, i]`` (levels 1..), the events, whether it
    was interrupted and the per-batch joined counts ``joined[b][k, ℓ, φ]`` (docs/model.md §15.9);
    from empty, or from the counts ``N0[k, ℓ, φ]`` (the fixed-point start); with ``rec``, the
    trajectory after the burn-in (:mod:`.records`: chunks that end on its grid of events)."""
    alpha_cum, move_cum, mu_hat = law_tab
    Kc, K = counts.size, alpha_cum.size
    N, c, C, top = _start(counts, K, N0)
    area = np.zeros_like(c)
    stamp = np.zeros_like(c)
    joined = np.zeros_like(N)  # arrivals by the (class, length, phase) they join
    s = state_from_seed_sequence(ss)
    sp = np.asarray(speeds, float)
    caps = np.cumsum(counts * sp)
    st = np.array([top, 0], np.int64)
    out: list[np.ndarray] = []
    arrs = [N, c, C, area, stamp, joined]

    def grow():
        N0, c0, C0, a0, s0, j0 = arrs
        L0 = N0.shape[1]
        N1 = np.zeros((Kc, 2 * L0, K), np.int64)
        N1[:, :L0] = N0
        j1 = np.zeros_like(N1)
        j1[:, :L0] = j0
        c1 = np.zeros((Kc, 2 * L0 + 1), np.int64)
        c1[:, : L0 + 1] = c0
        C1 = np.zeros(2 * L0 + 1, np.int64)
        C1[: L0 + 1] = C0
        a1 = np.zeros_like(c1)
        a1[:, : L0 + 1] = a0
        s1 = np.full_like(c1, int(st[1]))
        s1[:, : L0 + 1] = s0
        arrs[:] = [N1, c1, C1, a1, s1, j1]

    def run(m):
        target = st[1] + m
        while st[1] < target:
            N_, c_, C_, a_, s_, j_ = arrs
            ev0 = int(st[1])
            r = _cp.classes_phase_kernel(
                N_, c_, C_, a_, s_, j_, s, cfg, caps, sp, alpha_cum, move_cum, p_arr, mu_hat, st,
                _rec.cap(rec, int(min(CHUNK, target - st[1]))),
            )  # fmt: skip
            _rec.count(rec, int(st[1]) - ev0, int(st[1]), c_)
            if r == _cp.BAD_RULE:
                raise ValueError(f"policy code {cfg[3]} is unknown to the classes kernel")
            if r == _cp.GROW:
                grow()
            if stop.is_set():
                raise KeyboardInterrupt
            tick(int(st[1]))

    per_batch: list[np.ndarray] = []
    interrupted = False
    try:
        run(burn_ev)
        _rec.start(rec, int(st[1]), arrs[1])
        _cp.close_areas(arrs[1], arrs[3], arrs[4], int(st[1]))
        arrs[3][:] = 0
        arrs[5][:] = 0
        for _ in range(batches):
            run(batch_ev)
            _cp.close_areas(arrs[1], arrs[3], arrs[4], int(st[1]))
            out.append(arrs[3][:, 1:].copy())
            per_batch.append(arrs[5].copy())
            arrs[3][:] = 0
            arrs[5][:] = 0
    except KeyboardInterrupt:
        interrupted = True
    return out, int(st[1]), interrupted, per_batch


def simulate_classes_phase(
    n: int,
    d: int,
    lam: float | str,
    *,
    server_classes: str | ServerClasses,
    service: str | ServiceLaw,
    policy: str = "jsq-d",
    replace: bool = True,
    time: float | None = None,
    events: int | float | None = None,
    burn_in: float | None = None,
    seed: int | np.random.SeedSequence = 0,
    replications: int = 1,
    batches: int = 256,
    control_variates: bool = True,
    progress: Callable[[float], object] | None = None,
    workers: int | None = None,
    start: str = "empty",
    record_every: int | None = None,
    record_levels: int | None = None,
) -> ClassesResult:
    """Simulate ``n`` servers in classes with a phase-type law on the count engine (§15.7).

    Parameters are those of :func:`supermarket.simulation.classes.simulate_classes`, and
    ``service``: a law with a phase-type form, mean 1 (``erlang:K``, ``hyperexp:SCV``,
    ``ph:FILE.json``, ``exp``), and ``start``: ``"empty"`` or ``"fixed-point"``, each class's
    counts by length and phase at the mean field's fixed point, rounded
    (:func:`supermarket.simulation.class_starts.classes_phase_start`: the mean field for ``jsq-d``
    and ``random``, the fluid fixed point for ``jsq``, ``jiq`` and ``jbt``; ``λ < 1``), and
    ``record_every``, ``record_levels``: the trajectory of replication 0 every so many events
    (:mod:`.records`).  Time: events over ``Λ = n s̄ (λ + μ̂)``, ``μ̂`` the largest phase rate of
    the law.  At ``λ >= 1`` (no equilibrium) the run measures its finite horizon, with no control
    variate and no capacity-balance self-check.

    Returns
    -------
    ClassesResult
        With ``service`` set to the law.

    Examples
    --------
    >>> r = simulate_classes_phase(100, 2, 0.5, server_classes="0.5:2,0.5:1", service="erlang:2",
    ...                            events=10**6, seed=1)
    >>> round(r.balance.mean, 2), r.to_dict()["system"]["service"]["spec"]
    (1.0, 'erlang:2')
    """
    n, d, lam_f, replications, batches = _check(n, d, lam, policy, replace, replications, batches, "classes-phase")
    sc = parse_server_classes(server_classes)
    law = parse_phase_type(service, "the count engine", "runs")
    counts = sc.counts(n)
    speeds = np.asarray(sc.speeds, float)
    law_tab = _law_tables(law, speeds)
    R_ev = n * sc.mean_speed * (lam_f + law_tab[2])  # events per unit of time
    time, burn_in, batch_ev, burn_ev = _horizon(control_variates, time, events, burn_in, batches, R_ev, sc)
    cfg = np.array([n, d, int(bool(replace) or d == 1), _pol.policy_code(policy, "classes-phase")], np.int64)
    N0 = None if check_start(start) == "empty" else classes_phase_start(counts, d, lam_f, sc, law, policy)
    run = functools.partial(_run_one, counts, speeds, law_tab, cfg, lam_f / (lam_f + law_tab[2]), N0=N0)
    rec = _rec.recorder(record_every, record_levels, batch_ev * batches, d, lam_f, counts, R_ev)
    results, wall = _replicate(run, seed, replications, workers, burn_ev, batch_ev, batches, progress, rec)
    return _rec.with_trajectory(
        _summarize(
            n, d, lam_f, policy, replace, sc, counts, time, burn_in, replications, batches, batch_ev,
            control_variates, results, wall, law,
        ),
        rec,
    )  # fmt: skip
