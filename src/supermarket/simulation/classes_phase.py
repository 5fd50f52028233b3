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


def _run_one(counts, speeds, law_tab, cfg, p_arr, burn_ev, batch_ev, batches, ss, tick, stop):
    """One replication: the per-batch sums ``area[b, k, i]`` (levels 1..) and the events."""
    alpha_cum, move_cum, mu_hat = law_tab
    Kc, K = counts.size, alpha_cum.size
    L = LEVELS0
    N = np.zeros((Kc, L, K), np.int64)
    c = np.zeros((Kc, L + 1), np.int64)
    c[:, 0] = counts
    C = np.zeros(L + 1, np.int64)
    C[0] = counts.sum()
    area = np.zeros((Kc, L + 1), np.int64)
    stamp = np.zeros((Kc, L + 1), np.int64)
    s = state_from_seed_sequence(ss)
    sp = np.asarray(speeds, float)
    caps = np.cumsum(counts * sp)
    st = np.zeros(2, np.int64)
    out: list[np.ndarray] = []
    arrs = [N, c, C, area, stamp]

    def grow():
        N0, c0, C0, a0, s0 = arrs
        L0 = N0.shape[1]
        N1 = np.zeros((Kc, 2 * L0, K), np.int64)
        N1[:, :L0] = N0
        c1 = np.zeros((Kc, 2 * L0 + 1), np.int64)
        c1[:, : L0 + 1] = c0
        C1 = np.zeros(2 * L0 + 1, np.int64)
        C1[: L0 + 1] = C0
        a1 = np.zeros_like(c1)
        a1[:, : L0 + 1] = a0
        s1 = np.full_like(c1, int(st[1]))
        s1[:, : L0 + 1] = s0
        arrs[:] = [N1, c1, C1, a1, s1]

    def run(m):
        target = st[1] + m
        while st[1] < target:
            N_, c_, C_, a_, s_ = arrs
            r = _cp.classes_phase_kernel(
                N_, c_, C_, a_, s_, s, cfg, caps, sp, alpha_cum, move_cum, p_arr, mu_hat, st,
                int(min(CHUNK, target - st[1])),
            )  # fmt: skip
            if r == _cp.BAD_RULE:
                raise ValueError(f"policy code {cfg[3]} is unknown to the classes kernel")
            if r == _cp.GROW:
                grow()
            if stop.is_set():
                raise KeyboardInterrupt
            tick(int(st[1]))

    interrupted = False
    try:
        run(burn_ev)
        _cp.close_areas(arrs[1], arrs[3], arrs[4], int(st[1]))
        arrs[3][:] = 0
        for _ in range(batches):
            run(batch_ev)
            _cp.close_areas(arrs[1], arrs[3], arrs[4], int(st[1]))
            out.append(arrs[3][:, 1:].copy())
            arrs[3][:] = 0
    except KeyboardInterrupt:
        interrupted = True
    return out, int(st[1]), interrupted


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
) -> ClassesResult:
    """Simulate ``n`` servers in classes with a phase-type law on the count engine (§15.7).

    Parameters are those of :func:`supermarket.simulation.classes.simulate_classes`, and
    ``service``: a law with a phase-type form, mean 1 (``erlang:K``, ``hyperexp:SCV``,
    ``ph:FILE.json``, ``exp``).  Time: events over ``Λ = n s̄ (λ + μ̂)``, ``μ̂`` the largest
    phase rate of the law.

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
    run = functools.partial(_run_one, counts, speeds, law_tab, cfg, lam_f / (lam_f + law_tab[2]))
    results, wall = _replicate(run, seed, replications, workers, burn_ev, batch_ev, batches, progress)
    return _summarize(
        n, d, lam_f, policy, replace, sc, counts, time, burn_in, replications, batches, batch_ev, control_variates,
        results, wall, law,
    )  # fmt: skip
