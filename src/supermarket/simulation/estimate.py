"""From batch integrals to a :class:`~supermarket.simulation.SimulationResult`
(docs/model.md §9): the start-up diagnosis (MSER-5), the error of each time average
(blocking, pooled or across replications), the self-checks against exact identities, and
the response-time laws (docs/model.md §10).
"""

from __future__ import annotations

import math

import numpy as np

from .. import stats as _st
from ..stats import MIN_BLOCKS, ErrorEstimate
from .results import SimulationResult, Trajectory

SELF_CHECK_Z = 4.0
"""An exact identity fails when it is off by more than this many standard errors, read as a
tail probability: the Student-t quantile, on the standard error's own degrees of freedom,
with the two-sided tail of 4 normal standard errors (6.3e-5); see :func:`self_check_threshold`."""


def self_check_threshold(dof: float) -> float:
    """How many standard errors an identity may be off before its check fails.

    A standard error estimated from ``dof`` degrees of freedom is itself noisy, so ``|z| > 4``
    is far likelier than 6.3e-5 when ``dof`` is small (``P(|t_10| > 4) = 2.5e-3``): with
    dozens of checks per run that made honest runs fail.  The threshold is the ``t_dof``
    quantile with the same tail as ``SELF_CHECK_Z`` normal standard errors: 4.0 for
    ``dof = ∞``, 4.2 at 100, 5.0 at 20, 6.6 at 10.

    Examples
    --------
    >>> round(self_check_threshold(math.inf), 2), round(self_check_threshold(10), 1)
    (4.0, 6.6)
    """
    from scipy import stats as _ss

    if not dof > 0 or math.isinf(dof):
        return SELF_CHECK_Z
    return float(_ss.t.isf(_ss.norm.sf(SELF_CHECK_Z), dof))
START_UP_Z = 4.0  # first tenth against last half of the run, in standard errors


def _start_up(q):
    """Start-up bias of one replication from the batch means ``q`` of the queue length:
    ``(batches to drop, forgotten)``.  Detection: the first tenth of the run against its
    last half, in standard errors scaled from the whole run's blocking estimate (``|z| >
    START_UP_Z``).  If they disagree, MSER-5 (grouped at least as coarsely as the blocking
    plateau, so that the groups are nearly uncorrelated) chooses the truncation, and the
    test is repeated on what is left; if MSER wants more than half, or the rest still
    disagrees, the start was not forgotten.  When the error itself is unknown, nothing is
    dropped (the quantities are flagged unreliable anyway)."""
    est = _st.blocking(q)
    if not est.reliable or not est.stderr > 0:
        return 0, True
    sigma = est.stderr * math.sqrt(q.size)  # s.d. of one batch mean's contribution

    def disagree(x):
        a, b = x[: max(x.size // 10, 1)], x[x.size // 2:]
        se = sigma * math.sqrt(1.0 / a.size + 1.0 / b.size)
        return abs(a.mean() - b.mean()) > START_UP_Z * se

    if not disagree(q):
        return 0, True
    m = _st.mser(q, group=int(max(5, est.block_size)))
    if not m.forgotten or disagree(q[m.truncate:]):
        return m.truncate, False
    return m.truncate, True


def _ratio_series(a, T):
    """Batch values of a time average ``Σa/ΣT`` as equally weighted terms (delta method):
    ``ā + (a_b − ā T_b)/T̄``; their mean is ``ā``, and for equal ``T_b`` they are ``a_b/T_b``."""
    abar = a.sum() / T.sum()
    return abar + (a - abar * T) / T.mean()


def relaxation_time(d: int, lam: float) -> float:
    """The slowest relaxation time of the equilibrium, in time units (docs/model.md §6,
    derived): ``1/μ_k`` of the slow mode for d >= 2, the M/M/1 value ``1/(1−√λ)²`` for d = 1.
    Every time average's autocorrelation decays no slower than this (its modes are those of
    the linearised drift), so batch means need blocks at least this long."""
    from .. import theory as _th

    return _th.slow_mode(d, lam).relaxation_time if d >= 2 else 1.0 / (1.0 - math.sqrt(lam)) ** 2


def _min_block(T, relax) -> int:
    """Batches per block needed to span ``relax`` (in the units of the batch lengths ``T``)."""
    if not relax or not relax > 0 or T.size == 0 or not T.mean() > 0:
        return 1
    return max(1, min(int(math.ceil(relax / float(T.mean()))), T.size))


def _estimate(parts, min_blocks=MIN_BLOCKS, relax=None) -> ErrorEstimate:
    """Combine replications: ``parts`` is a list of ``(a, T)`` (batch integrals and batch
    lengths of the batches kept for the error analysis).  One replication: blocking.
    Several: the blocking errors pooled when every one is reliable; otherwise the spread
    between replications (Student t, R − 1 degrees of freedom)."""
    parts = [(a, T) for a, T in parts if T.size > 0 and T.sum() > 0]
    if not parts:
        return ErrorEstimate(math.nan, math.nan, math.nan, math.nan, math.nan, False, "none", 0, 1,
                             "nothing measured")
    ests = [_st.blocking(_ratio_series(a, T), min_blocks=min_blocks, min_block_size=_min_block(T, relax))
            if T.size >= 2 else
            ErrorEstimate(float(a.sum() / T.sum()), math.nan, math.nan, math.nan, math.nan, False, "blocking", 1, 1,
                          "too short to estimate: one batch")
            for a, T in parts]
    if len(parts) == 1:
        return ests[0]
    w = np.array([T.sum() for _, T in parts])
    means = np.array([a.sum() / T.sum() for a, T in parts])
    mean = float(np.dot(w, means) / w.sum())
    if all(e.reliable for e in ests):
        ww = w / w.sum()
        terms = np.array([(wi * e.stderr) ** 2 for wi, e in zip(ww, ests)])
        var = float(terms.sum())
        se = math.sqrt(var)
        dof = var**2 / float(np.sum(terms**2 / np.array([e.dof for e in ests]))) if var > 0 else math.inf
        n_eff = float(sum(e.n_eff for e in ests))
        blocks = int(sum(e.blocks for e in ests))
        return ErrorEstimate(mean, se, dof, n_eff, math.nan, True, "pooled", blocks, ests[0].block_size, "")
    e = _st.replication_error(means, weights=w)
    return ErrorEstimate(mean, e.stderr, e.dof, e.n_eff, e.tau_int, e.reliable, e.method, e.blocks, 1, e.note)


def _summarize(spec, reps, wall, interrupted, single=False, precision_state=None) -> SimulationResult:
    params = spec["params"]
    n, lamf = params.n, params.lam
    rate = n * (1.0 + lamf)
    continuous = spec["continuous"]
    stable = spec["stable"]
    # blocks must span the slowest relaxation time (in the units of the batch lengths)
    try:
        relax = relaxation_time(params.d, lamf) * (1.0 if continuous else rate) if stable else None
    except (ValueError, ArithmeticError):  # no slow mode to be had (e.g. λ below double range)
        relax = None
    Lall = max(rep.top_level() for rep in reps) + 1
    arrs = [rep.arrays(Lall) for rep in reps]
    notes = []
    # ---- start-up bias: MSER-5 on the batch means of the queue length, per replication
    startup = []
    keep = []
    for rep, A in zip(reps, arrs):
        comp = np.nonzero(A["complete"] & (A["T"] > 0))[0]
        trunc, forgotten = 0, True
        if stable and comp.size >= 20:
            q = _ratio_series(A["c"][comp].sum(axis=1) / n, A["T"][comp])
            trunc, forgotten = _start_up(q)
        idx = comp[trunc:] if forgotten else comp
        keep.append(idx)
        startup.append({"replication": rep.r, "batches": int(comp.size), "truncated_batches": int(trunc),
                        "truncated_time": float(A["T"][comp[:trunc]].sum() / (1.0 if continuous else rate)),
                        "forgotten": bool(forgotten)})
    forgotten_all = all(s["forgotten"] for s in startup)
    if not forgotten_all:
        bad = [s["replication"] for s in startup if not s["forgotten"]]
        notes.append(f"the start was not forgotten (replication(s) {bad}): MSER-5 would drop more than half of "
                     "the run as start-up transient; give a longer burn-in or run, or start from the fixed point; "
                     "no error bar is marked reliable")
    # ---- the batches kept: levels and time averages
    used = [(A, idx) for A, idx in zip(arrs, keep)]
    Ttot = sum(float(A["T"][idx].sum()) for A, idx in used)
    if Ttot <= 0:  # nothing complete: fall back to every batch measured
        used = [(A, np.nonzero(A["T"] > 0)[0]) for A in arrs]
        Ttot = sum(float(A["T"][idx].sum()) for A, idx in used)
    if Ttot <= 0:
        if interrupted:
            raise KeyboardInterrupt("interrupted during burn-in: nothing was measured yet")
        raise RuntimeError("nothing was measured")  # pragma: no cover - horizons are positive
    mx = sum(A["max"][idx].sum(axis=0) for A, idx in used)
    top = int(np.nonzero(mx > 0)[0][-1]) if np.any(mx > 0) else 0
    L = top + 1
    parts_c = [[(A["c"][idx, i] / n, A["T"][idx]) for A, idx in used] for i in range(L)]
    parts_P = [[(A["P"][idx, i], A["T"][idx]) for A, idx in used] for i in range(L)]
    area_c = sum(A["c"][idx, :L].sum(axis=0) for A, idx in used)
    area_P = sum(A["P"][idx, :L].sum(axis=0) for A, idx in used)
    u_mean = area_c / (n * Ttot)
    ud_mean = area_P / Ttot
    mq = {int(m): float(mx[m] / Ttot) for m in range(L + 1) if mx[m] > 0}
    est_u = [_estimate(p, relax=relax) for p in parts_c]
    est_P = [_estimate(p, relax=relax) for p in parts_P]
    est_q = _estimate([(A["c"][idx, :L].sum(axis=1) / n, A["T"][idx]) for A, idx in used], relax=relax)
    k = spec["k"] or None
    good = (sum(float(A["good"][idx].sum()) for A, idx in used) / Ttot) if k else None
    est_g = _estimate([(A["good"][idx], A["T"][idx]) for A, idx in used], relax=relax) if k else None
    # rare levels: too few batches ever saw them for an error estimate
    seen = [sum(int(np.count_nonzero(A["c"][idx, i] > 0)) for A, idx in used) for i in range(L)]
    u_rel = np.array([e.reliable and seen[i] >= MIN_BLOCKS and forgotten_all for i, e in enumerate(est_u)])
    u_note = []
    for i, e in enumerate(est_u):
        if not forgotten_all:
            u_note.append("start not forgotten")
        elif seen[i] < MIN_BLOCKS:
            u_note.append(f"rare level: seen in only {seen[i]} batches")
        else:
            u_note.append(e.note)
    # ---- self-checks from exact identities (docs/model.md §9)
    checks = []
    if stable:
        for i in range(L):
            if i == 0:
                parts = [(A["c"][idx, 0] / n - lamf * A["T"][idx], A["T"][idx]) for A, idx in used]
                name = "E[u_1] = λ"
            else:
                parts = [(A["c"][idx, i] / n - lamf * A["P"][idx, i - 1], A["T"][idx]) for A, idx in used]
                name = f"E[u_{i + 1}] = λ·E[P_{i}]"
            e = _estimate(parts, relax=relax)
            z = e.mean / e.stderr if e.stderr > 0 else math.nan
            limit = self_check_threshold(e.dof)
            if not (e.reliable and seen[i] >= MIN_BLOCKS):
                verdict = "inconclusive"
            else:
                verdict = "pass" if abs(z) <= limit else "fail"
            checks.append({"identity": name, "level": i + 1, "difference": e.mean, "stderr": e.stderr, "z": z,
                           "threshold": limit, "result": verdict})
    failed = [c for c in checks if c["result"] == "fail"]
    if failed:
        c = failed[0]
        notes.append(f"self-check failed: {c['identity']} is off by {abs(c['z']):.1f} standard errors, beyond "
                     f"{c['threshold']:.1f} (as rare as {SELF_CHECK_Z:g} for an exact error bar; {len(failed)} identity "
                     "check(s) failed): the error bars (or the burn-in) are too small; no error bar is marked reliable")
        u_rel[:] = False
        u_note = [((x + "; ") if x else "") + "a self-check failed" for x in u_note]
    ok_all = forgotten_all and not failed
    q_rel = bool(est_q.reliable and ok_all)
    if stable and not est_q.reliable and ok_all:
        # the queue length carries the slowest mode (docs/model.md §6): when its error cannot
        # be estimated, a level whose own series looks settled may still drift with it
        for i in range(L):
            if u_rel[i]:
                u_rel[i] = False
                u_note[i] = "too short to estimate: the mean queue length (slowest mode) is not settled"
    g_rel = bool(est_g.reliable and ok_all) if est_g is not None else None
    unrel = [i + 1 for i in range(L) if not u_rel[i] and u_mean[i] > 0 and seen[i] >= MIN_BLOCKS]
    if ok_all and (unrel or not q_rel):
        names = [f"E[u_{i}]" for i in unrel]
        if len(names) > 4:
            names = names[:3] + [f"… E[u_{unrel[-1]}] ({len(unrel)} levels)"]
        what = ", ".join(names + ([] if q_rel else ["the mean queue length"]))
        notes.append(f"run too short to estimate the error of {what}: no blocking plateau with at least "
                     f"{MIN_BLOCKS} blocks (batches shorter than the correlation time); run longer, or use "
                     "precision=/--precision")
    if precision_state is not None and precision_state.get("cap_hit"):
        notes.append(f"precision {precision_state['target']:g} not reached: stopped at max_steps = "
                     f"{spec['max_steps']:,} steps per replication (worst relative half-width "
                     f"{precision_state.get('achieved', math.nan):.3g}); raise max_steps/--max-steps")
    # ---- the rest
    events = sum(rep.measured_events() for rep in reps)
    burn_events = sum(rep.burn_events for rep in reps)
    total_events = sum(rep.events() for rep in reps)
    kernel_wall = sum(rep.wall for rep in reps)
    sim_time = Ttot if continuous else Ttot / rate
    traj = None
    r0 = reps[0]
    counts0, lengths0, records0 = r0.result_state()
    if records0 is not None:
        t, cc, mxr, tot = records0
        traj = Trajectory(t=t - r0.t_meas0, u=cc / n, max=mxr, total=tot)
    per = ()
    if not single and len(reps) > 1:
        per = tuple(_summarize(spec, [rep], rep.wall, interrupted, single=True) for rep in reps)
    lamx = lamf
    hw = lambda e: e.half_width() if math.isfinite(e.stderr) else math.nan  # noqa: E731
    response = _response_times(ud_mean, used, L, params, spec["engine"], relax) if stable else None
    return SimulationResult(
        params=params, engine=spec["engine"], time_mode="continuous" if continuous else "discrete",
        steps=int(events), burn_in=int(burn_events), sim_time=float(sim_time),
        u_mean=u_mean, u_stderr=np.array([e.stderr for e in est_u]), ud_mean=ud_mean,
        ud_stderr=np.array([e.stderr for e in est_P]), max_queue_dist=mq,
        good_set_fraction=good, good_set_fraction_stderr=(est_g.stderr if k else None), k=k,
        eps=float(spec["eps"]), mean_queue_length=float(u_mean.sum()), mean_queue_length_stderr=est_q.stderr,
        mean_sojourn_time=float(u_mean.sum()) / lamx, mean_sojourn_time_stderr=est_q.stderr / lamx,
        events_per_second=(total_events / kernel_wall if kernel_wall > 0 else math.nan),
        wall_time=float(wall), partial=bool(interrupted or any(rep.partial for rep in reps)),
        replications=len(reps), batches=int(sum(len(rep.rows["T"]) for rep in reps)),
        final_counts=counts0, trajectory=traj, per_replication=per, final_lengths=lengths0,
        u_reliable=u_rel, u_half_width=np.array([hw(e) for e in est_u]),
        u_n_eff=np.array([e.n_eff for e in est_u]), u_note=tuple(u_note),
        mean_queue_length_reliable=q_rel, mean_queue_length_half_width=hw(est_q),
        mean_queue_length_n_eff=est_q.n_eff,
        good_set_fraction_reliable=g_rel, error_method=est_q.method,
        self_checks=tuple(checks), start_up=tuple(startup), notes=tuple(notes), precision=precision_state,
        response=response,
        start_note=("the start is an exact stationary sample (perfect sampling, docs/model.md §12): no burn-in "
                    "was needed" + ("" if burn_events == 0 else f"; {int(burn_events):,} burn-in events were run anyway")
                    if spec.get("perfect") else ""),
    )


def _response_times(ud_mean, used, L, params, engine, relax=None):
    """Sojourn and waiting time laws (docs/model.md §10) from the time averages of ``P_i``:
    exact given them (PASTA, FIFO).  The standard error of each quantile is the error of a
    linear functional of the ``P_i`` (delta method), estimated on the batch series itself with
    the same blocking analysis as every other time average (docs/model.md §9); where that
    analysis cannot trust its own error (too short a run), the error is NaN, not a number."""
    from .. import response as _rs

    def stderr_of(g):  # NaN (no error bar) when the run is too short to know it
        m = min(g.size, L)
        e = _estimate([(A["P"][idx, :m] @ g[:m], A["T"][idx]) for A, idx in used], relax=relax)
        return e.stderr if e.reliable else math.nan

    T = np.minimum.accumulate(np.clip(np.asarray(ud_mean, dtype=float), 0.0, 1.0))
    p = params
    return _rs.from_tails(T, stderr_of=stderr_of, source="simulation",
                          params={"n": p.n, "d": p.d, "load": p.lam, "replace": p.replace, "engine": engine})
