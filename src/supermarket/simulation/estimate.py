"""From batch integrals to a :class:`~supermarket.simulation.SimulationResult`
(docs/model.md §9): the start-up diagnosis (MSER-5), the error of each time average
(blocking, pooled or across replications), the self-checks against exact identities, and
the response-time laws (docs/model.md §10).
"""

from __future__ import annotations

import dataclasses
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


def relaxation_time(d: int, lam: float, n: int | None = None) -> float:
    """The slowest relaxation time of the equilibrium, in time units (docs/model.md §6,
    derived): ``1/μ_k`` of the slow mode for d >= 2, the M/M/1 value ``1/(1−√λ)²`` for d = 1.
    Every time average's autocorrelation decays no slower than this (its modes are those of
    the linearised drift), so batch means need blocks at least this long.

    With ``n``, at least the relaxation time ``1/(n(1−√λ)²)`` of the M/M/n queue at the same
    load (derived, a heuristic floor: JSQ(n) balances best, and the total number in an
    n-server system relaxes no faster than M/M/n's heavy-traffic M/M/1 at rate n).  It matters
    only for tiny systems, where the mean-field slow mode misses the slow excursions of the
    total: at ``n = 3, d = 2, λ = 0.9`` it is 127 time units against the slow mode's 20.

    Examples
    --------
    >>> round(relaxation_time(1, 0.25), 6)          # M/M/1: 1/(1 − 1/2)²
    4.0
    >>> relaxation_time(2, 0.9, n=3) > 6 * relaxation_time(2, 0.9)
    True
    >>> relaxation_time(2, 0.9, n=10**4) == relaxation_time(2, 0.9)
    True
    """
    from .. import theory as _th

    t = _th.slow_mode(d, lam).relaxation_time if d >= 2 else 1.0 / (1.0 - math.sqrt(lam)) ** 2
    if n is not None and d >= 2:
        t = max(t, 1.0 / (n * (1.0 - math.sqrt(lam)) ** 2))
    return t


def _min_block(T, relax) -> int:
    """Batches per block needed to span ``relax`` (in the units of the batch lengths ``T``)."""
    if not relax or not relax > 0 or T.size == 0 or not T.mean() > 0:
        return 1
    return max(1, min(int(math.ceil(relax / float(T.mean()))), T.size))


def _skewed(e: ErrorEstimate, parts, relax) -> ErrorEstimate:
    """``e`` with the estimated skewness of its mean (the interval then reaches further on the
    side of the skew: docs/model.md §9.1, "Skewed remainders"), when its error is known."""
    if not e.reliable:
        return e
    from .control import mean_skewness

    g = mean_skewness(parts, e.stderr, [_min_block(T, relax) for _, T in parts])
    return dataclasses.replace(e, skewness=g) if math.isfinite(g) else e


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
        return _skewed(ests[0], parts, relax)
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
        return _skewed(ErrorEstimate(mean, se, dof, n_eff, math.nan, True, "pooled", blocks, ests[0].block_size, ""),
                       parts, relax)
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
        relax = relaxation_time(params.d, lamf, n) * (1.0 if continuous else rate) if stable else None
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
    u_plain = area_c / (n * Ttot)
    ud_plain = area_P / Ttot
    mq = {int(m): float(mx[m] / Ttot) for m in range(L + 1) if mx[m] > 0}
    est_u0 = [_estimate(p, relax=relax) for p in parts_c]
    est_P0 = [_estimate(p, relax=relax) for p in parts_P]
    parts_q = [(A["c"][idx, :L].sum(axis=1) / n, A["T"][idx]) for A, idx in used]
    est_q0 = _estimate(parts_q, relax=relax)
    k = spec["k"] or None
    good_plain = (sum(float(A["good"][idx].sum()) for A, idx in used) / Ttot) if k else None
    parts_g = [(A["good"][idx], A["T"][idx]) for A, idx in used] if k else None
    est_g0 = _estimate(parts_g, relax=relax) if k else None
    # rare levels: too few batches ever saw them for an error estimate
    seen = [sum(int(np.count_nonzero(A["c"][idx, i] > 0)) for A, idx in used) for i in range(L)]
    # ---- control variates: the identities Z_i = u_i − λP_{i−1} (docs/model.md §9.1)
    cvs = _Controls(spec, used, L, n, lamf, seen, stable, forgotten_all, relax)
    cu = [cvs.apply(p, est, own=i + 1, bounds=(0.0, 1.0), seen=seen[i])
          for i, (p, est) in enumerate(zip(parts_c, est_u0))]
    cP = [cvs.apply(p, est, own=i + 2, bounds=(0.0, 1.0), seen=seen[i])
          for i, (p, est) in enumerate(zip(parts_P, est_P0))]
    cq = cvs.apply(parts_q, est_q0, bounds=(0.0, math.inf),
                   tail=lambda top: [(A["c"][idx, top:L].sum(axis=1) / n, A["T"][idx]) for A, idx in used])
    cg = cvs.apply(parts_g, est_g0, bounds=(0.0, 1.0)) if k else None
    est_u = [c.est for c in cu]
    est_P = [c.est for c in cP]
    est_q = cq.est
    est_g = cg.est if k else None
    u_mean = np.array([c.mean(u_plain[i], Ttot) for i, c in enumerate(cu)]) if L else u_plain
    ud_mean = np.array([c.mean(ud_plain[i], Ttot) for i, c in enumerate(cP)]) if L else ud_plain
    mql = cq.mean(float(u_plain.sum()), Ttot)
    good = cg.mean(good_plain, Ttot) if k else None
    # the law of the maximum: the fraction of time at each maximum, the same regression
    parts_mx = {m: [(A["max"][idx, m], A["T"][idx]) for A, idx in used] for m in mq}
    seen_mx = {m: sum(int(np.count_nonzero(A["max"][idx, m] > 0)) for A, idx in used) for m in mq}
    cm = cvs.apply_law({m: (parts_mx[m], _estimate(parts_mx[m], relax=relax)) for m in mq})
    mq_plain = mq
    mq = {m: cm[m].mean(mq_plain[m], Ttot) for m in mq_plain}
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
    ok_all = forgotten_all and not failed
    u_rel, u_note = _gate(est_u, est_q, seen, forgotten_all, bool(failed), stable)
    P_rel, _ = _gate(est_P, est_q, seen, forgotten_all, bool(failed), stable)
    q_rel = bool(est_q.reliable and ok_all)
    g_rel = bool(est_g.reliable and ok_all) if est_g is not None else None
    u0_rel, _ = _gate(est_u0, est_q0, seen, forgotten_all, bool(failed), stable)
    P0_rel, _ = _gate(est_P0, est_q0, seen, forgotten_all, bool(failed), stable)
    q0_rel = bool(est_q0.reliable and ok_all)
    # the maximum's law: trusted as the levels are (its own plateau, seen often enough, the run's checks)
    mx_rel = {m: bool(c.est.reliable and seen_mx[m] >= MIN_BLOCKS and ok_all and (q_rel or not stable))
              for m, c in cm.items()}
    g0_rel = bool(est_g0.reliable and ok_all) if est_g0 is not None else None
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
    nan = math.nan

    def hw(e, ok):  # 95 % half-width; NaN when the error bar is not trusted (one rule everywhere)
        return e.half_width() if ok and math.isfinite(e.stderr) else nan

    def se(e, ok):
        return e.stderr if ok else nan

    P_adj = cvs.adjusted_matrix(cP, parts_P)
    trust = ok_all and q_rel
    response = _response_times(ud_mean, P_adj, L, params, spec["engine"], relax, trust) if stable else None
    response_plain = response
    if cvs.on and stable:
        response_plain = _response_times(ud_plain, [(A["P"][idx, :L], A["T"][idx]) for A, idx in used], L,
                                         params, spec["engine"], relax, ok_all and q0_rel)
    vr = None
    if cvs.on:
        vr = {"u_mean": [c.ratio for c in cu], "ud_mean": [c.ratio for c in cP],
              "mean_queue_length": cq.ratio, "mean_sojourn_time": cq.ratio,
              "good_set_fraction": cg.ratio if k else None,
              "max_queue_dist": {m: c.ratio for m, c in cm.items()}}
        if response is not None:
            vr["sojourn"] = _response_ratios(response.sojourn, response_plain.sojourn)
            vr["waiting"] = _response_ratios(response.waiting, response_plain.waiting)
    plain = {"u_mean": u_plain, "u_stderr": np.array([se(e, ok) for e, ok in zip(est_u0, u0_rel)]),
             "u_reliable": u0_rel, "ud_mean": ud_plain,
             "ud_stderr": np.array([se(e, ok) for e, ok in zip(est_P0, P0_rel)]),
             "mean_queue_length": float(u_plain.sum()), "mean_queue_length_stderr": se(est_q0, q0_rel),
             "mean_queue_length_reliable": q0_rel,
             "mean_sojourn_time": float(u_plain.sum()) / lamx, "mean_sojourn_time_stderr": se(est_q0, q0_rel) / lamx,
             "good_set_fraction": good_plain,
             "good_set_fraction_stderr": se(est_g0, g0_rel) if k else None,
             "good_set_fraction_reliable": g0_rel}
    return SimulationResult(
        params=params, engine=spec["engine"], time_mode="continuous" if continuous else "discrete",
        steps=int(events), burn_in=int(burn_events), sim_time=float(sim_time),
        u_mean=u_mean, u_stderr=np.array([se(e, ok) for e, ok in zip(est_u, u_rel)]), ud_mean=ud_mean,
        ud_stderr=np.array([se(e, ok) for e, ok in zip(est_P, P_rel)]), max_queue_dist=mq,
        max_queue_dist_stderr={m: se(c.est, mx_rel[m]) for m, c in cm.items()}, max_queue_dist_plain=mq_plain,
        good_set_fraction=good, good_set_fraction_stderr=(se(est_g, g_rel) if k else None), k=k,
        eps=float(spec["eps"]), mean_queue_length=float(mql), mean_queue_length_stderr=se(est_q, q_rel),
        mean_sojourn_time=float(mql) / lamx, mean_sojourn_time_stderr=se(est_q, q_rel) / lamx,
        events_per_second=(total_events / kernel_wall if kernel_wall > 0 else math.nan),
        wall_time=float(wall), partial=bool(interrupted or any(rep.partial for rep in reps)),
        replications=len(reps), batches=int(sum(len(rep.rows["T"]) for rep in reps)),
        final_counts=counts0, trajectory=traj, per_replication=per, final_lengths=lengths0,
        u_reliable=u_rel, u_half_width=np.array([hw(e, ok) for e, ok in zip(est_u, u_rel)]),
        u_n_eff=np.array([e.n_eff for e in est_u]), u_note=tuple(u_note),
        mean_queue_length_reliable=q_rel, mean_queue_length_half_width=hw(est_q, q_rel),
        mean_queue_length_n_eff=est_q.n_eff,
        good_set_fraction_reliable=g_rel, error_method=est_q.method,
        self_checks=tuple(checks), start_up=tuple(startup), notes=tuple(notes), precision=precision_state,
        response=response,
        start_note=("the start is an exact stationary sample (perfect sampling, docs/model.md §12): no burn-in "
                    "was needed" + ("" if burn_events == 0 else f"; {int(burn_events):,} burn-in events were run anyway")
                    if spec.get("perfect") else ""),
        control_variates=bool(spec.get("control_variates", True)), controls=tuple(cvs.levels),
        control_notes=cvs.notes(cu, cP, cq, cg, cm), variance_reduction=vr,
        u_mean_plain=plain["u_mean"], u_stderr_plain=plain["u_stderr"], u_reliable_plain=plain["u_reliable"],
        ud_mean_plain=plain["ud_mean"], ud_stderr_plain=plain["ud_stderr"],
        mean_queue_length_plain=plain["mean_queue_length"],
        mean_queue_length_stderr_plain=plain["mean_queue_length_stderr"],
        mean_queue_length_reliable_plain=plain["mean_queue_length_reliable"],
        mean_sojourn_time_plain=plain["mean_sojourn_time"],
        mean_sojourn_time_stderr_plain=plain["mean_sojourn_time_stderr"],
        good_set_fraction_plain=plain["good_set_fraction"],
        good_set_fraction_stderr_plain=plain["good_set_fraction_stderr"],
        good_set_fraction_reliable_plain=plain["good_set_fraction_reliable"],
        response_plain=response_plain,
    )


def _response_ratios(cv_law, plain_law):
    """Variance reduction of a response-time law's mean and quantiles: (plain s.e. / CV s.e.)²,
    NaN where either error is unknown."""
    def r(a, b):
        return (b / a) ** 2 if a is not None and b is not None and a > 0 and math.isfinite(a) and math.isfinite(b) \
            else math.nan
    if cv_law.stderr is None or plain_law.stderr is None:
        return None
    out = {"mean": r(cv_law.stderr["mean"], plain_law.stderr["mean"])}
    for q in cv_law.stderr["quantiles"]:
        out[f"{q:g}"] = r(cv_law.stderr["quantiles"][q], plain_law.stderr["quantiles"].get(q))
    return out


def _gate(ests, est_q, seen, forgotten_all, failed, stable):
    """Per level: whether the error bar of ``ests[i]`` can be trusted, and why not
    (docs/model.md §9, reliability rule): a rare level, a start not forgotten, a failed
    self-check, or a mean queue length (the slowest mode) whose error is unknown."""
    L = len(ests)
    rel = np.array([e.reliable and seen[i] >= MIN_BLOCKS and forgotten_all for i, e in enumerate(ests)], dtype=bool)
    note = []
    for i, e in enumerate(ests):
        if not forgotten_all:
            note.append("start not forgotten")
        elif seen[i] < MIN_BLOCKS:
            note.append(f"rare level: seen in only {seen[i]} batches")
        else:
            note.append(e.note)
    if failed:
        rel[:] = False
        note = [((x + "; ") if x else "") + "a self-check failed" for x in note]
    elif stable and not est_q.reliable and forgotten_all:
        # the queue length carries the slowest mode (docs/model.md §6): when its error cannot
        # be estimated, a level whose own series looks settled may still drift with it
        for i in range(L):
            if rel[i]:
                rel[i] = False
                note[i] = "too short to estimate: the mean queue length (slowest mode) is not settled"
    return rel, note


class _CV:
    """One quantity's plain and control-variate estimates and which one is used."""

    def __init__(self, plain, est=None, adjusted=None, ratio=math.nan, reason="", m=0):
        self.plain = plain
        self.est = plain if est is None else est
        self.adjusted = adjusted  # adjusted batch integrals per replication, when the CV estimate is used
        self.ratio = ratio  # (plain s.e. / CV s.e.)², NaN when not measurable or not used
        self.reason = reason  # why the plain estimate was kept ("" when the CV one is used)
        self.m = m
        self.exact = False  # the controls determine the quantity exactly

    @property
    def used(self) -> bool:
        return self.adjusted is not None

    def mean(self, plain_mean, Ttot):
        """The estimate: the plain one (exactly as computed before) or Σ adjusted / ΣT."""
        if not self.used:
            return plain_mean
        return float(sum(float(a.sum()) for a in self.adjusted) / Ttot)


def _cv_estimate(parts, controls, plain, relax, bounds=(-math.inf, math.inf), force=False) -> _CV:
    """One quantity with the controls ``controls`` (per replication, batches x m): the
    split-sample adjusted integrals (:func:`.control.crossfit`) through the same error
    analysis as the plain ones (:func:`_estimate`), with ``m`` fewer degrees of freedom and at
    most one per ``DOF_RELAXATION_TIMES`` relaxation times of the run; the adjusted estimate is
    used when its estimated variance is at least ``MIN_GAIN`` times smaller (see docs/model.md
    §9.1), else the plain estimate ``plain`` with the reason (``force``: the adjusted one
    whenever it exists and lies in ``bounds``)."""
    from . import control as _cv

    fit = _cv.crossfit(parts, controls)
    if fit is None:
        return _CV(plain, reason="too few batches for the regression, or the quantity does not vary")
    if fit.exact:
        c = _CV(plain, reason="determined exactly by the identities: the plain estimate is kept as a check")
        c.exact = True
        return c
    m = fit.controls
    T_parts = [T for _, T in parts]
    e = _estimate(list(zip(fit.adjusted, T_parts)), relax=relax)
    Ttot = sum(float(T.sum()) for T in T_parts)
    if math.isfinite(e.dof):
        dof = e.dof - m  # m coefficients estimated
        if e.method in ("blocking", "pooled") and relax and relax > 0:
            # the residual's error is carried by the slow mode's rare excursions: at most one
            # degree of freedom per DOF_RELAXATION_TIMES relaxation times (docs/model.md §9.1)
            dof = min(dof, Ttot / (_cv.DOF_RELAXATION_TIMES * relax))
        e = dataclasses.replace(e, dof=max(dof, 1.0))
    value = sum(float(a.sum()) for a in fit.adjusted) / Ttot
    if not bounds[0] <= value <= bounds[1]:
        return _CV(plain, reason=f"the adjusted estimate {value:.3g} lies outside its range")
    ratio = (plain.stderr / e.stderr) ** 2 if (e.stderr > 0 and plain.reliable and e.reliable) else math.nan
    if force:
        return _CV(plain, est=e, adjusted=fit.adjusted, ratio=ratio, m=m)
    if e.reliable and plain.reliable:
        if not e.stderr < plain.stderr:
            return _CV(plain, reason="the controls did not reduce the error")
        if not plain.stderr**2 >= _cv.MIN_GAIN * e.stderr**2:
            return _CV(plain, reason=f"the controls did not reduce the variance {_cv.MIN_GAIN:g}-fold (a smaller "
                       "gain is within the noise of the two estimated errors)")
    elif plain.reliable:
        return _CV(plain, reason="the error of the adjusted series cannot be estimated")
    elif not e.reliable and not (e.stderr < plain.stderr):
        return _CV(plain, reason="the controls did not reduce the error")
    return _CV(plain, est=e, adjusted=fit.adjusted, ratio=ratio, m=m)


RARE_TAIL_SHARE = 0.5
"""The levels above the controls count as rare when occupied in fewer than this share of the
batches (:meth:`_Controls._rare_tail`)."""
TAIL_VARIANCE_SHARE = 0.25
"""... and their error dominates the adjusted one when their variance (as if independent
batches) is at least this share of the adjusted variance."""


class _Controls:
    """The controls of a run (docs/model.md §9.1): ``Z_i = u_i − λ P_{i−1}`` per batch, the
    levels chosen from the data, and the split-sample estimate of any quantity."""

    def __init__(self, spec, used, L, n, lam, seen, stable, forgotten_all, relax):
        from . import control as _cv

        self.relax = relax
        self.levels = []
        self.reason = ""
        self.Z = None
        self.on = bool(spec.get("control_variates", True))
        if not self.on:
            return
        if not stable:
            self.reason = "no equilibrium (λ >= 1): the identities do not hold"
        elif not forgotten_all:
            self.reason = "the start was not forgotten: the controls have mean 0 only in equilibrium"
        if self.reason:
            return
        # candidate levels: seen in enough batches for both halves of the fit
        cand = [i for i in range(L) if seen[i] >= 2 * MIN_BLOCKS][: 4 * _cv.MAX_CONTROLS]
        Zs = []
        for A, idx in used:
            T = A["T"][idx]
            prev = np.column_stack([T] + [A["P"][idx, i - 1] for i in range(1, L)]) if L else np.zeros((T.size, 0))
            Zs.append(A["c"][idx, :L] / n - lam * prev)
        rows = min((Zr.shape[0] // 2 for Zr in Zs), default=0) * len(Zs)
        cap = min(_cv.MAX_CONTROLS, rows // _cv.MIN_FIT_ROWS_PER_CONTROL)
        if not cand or cap < 1:
            self.reason = "no level qualifies as a control (too few batches, or no level seen often enough)"
            return
        stack = np.concatenate([_cv.ratio_series(Zr[:, cand], A["T"][idx]) for Zr, (A, idx) in zip(Zs, used)])
        keep = _cv.select_controls(stack, max_controls=cap)
        self.levels = [cand[j] + 1 for j in keep]
        if not self.levels:
            self.reason = "no level qualifies as a control (none varies independently of the others)"
            return
        self.Z = Zs

    def _controls(self, levels):
        cols = [lv - 1 for lv in levels]
        return [Zr[:, cols] for Zr in self.Z]

    def apply(self, parts, plain, *, own=None, bounds=(-math.inf, math.inf), seen=None, tail=None) -> _CV:
        """The estimate of the quantity with batch integrals ``parts`` (per replication):
        the control-variate one when it has the smaller error, else the plain one with a
        reason.  ``own``: the level of the control that is the quantity's own identity (for
        ``u_i``, ``Z_i``), left out when the controls would determine the quantity exactly;
        ``seen``: batches in which the quantity was nonzero (a rare one keeps its plain estimate);
        ``tail``: for a sum over levels (the mean queue length), a function of the highest
        control level giving the batch integrals of the levels above it (see :meth:`_rare_tail`)."""
        if not self.on or parts is None:
            return _CV(plain)
        if not self.levels:
            return _CV(plain, reason=self.reason)
        if seen is not None and seen < MIN_BLOCKS:
            return _CV(plain, reason=f"rare (seen in fewer than {MIN_BLOCKS} batches)")
        levels = list(self.levels)
        c = _cv_estimate(parts, self._controls(levels), plain, self.relax, bounds)
        if c.exact and own in levels:
            levels.remove(own)  # u_1 = Z_1 + λ: estimate it from the other identities
            c = _cv_estimate(parts, self._controls(levels), plain, self.relax, bounds) if levels else _CV(
                plain, reason="determined exactly by the identities: the plain estimate is kept as a check")
        if tail is not None and c.used and self._rare_tail(tail(max(levels)), c.est):
            return _CV(plain, reason=f"what the controls leave is mostly the rarely occupied levels above "
                       f"{max(levels)} (occupied in under {RARE_TAIL_SHARE:.0%} of the batches), whose error a run "
                       "this short cannot know")
        return c

    @staticmethod
    def _rare_tail(tail_parts, est) -> bool:
        """Whether the error left by the controls is mostly that of the levels above them, and
        those levels are occupied in under ``RARE_TAIL_SHARE`` of the batches (docs/model.md
        §9.1).  The controls determine the levels they cover, so the adjusted sum is the sum of
        the uncontrolled levels plus a small curvature term; a remainder made of rare bursts has
        skewed batch means, and its blocking error is erratic from run to run (measured: at
        ``n = 20, d = 1, λ = 0.5``, 2·10^5 steps, sd(z) = 1.4 and coverage 0.85).  The tail's
        variance is taken as if its batches were independent (a lower bound for a positively
        correlated series), against ``TAIL_VARIANCE_SHARE`` of the adjusted variance."""
        rows = sum(T.size for _, T in tail_parts)
        if rows == 0 or not (est.stderr > 0):
            return False
        occupied = sum(int(np.count_nonzero(a > 0)) for a, _ in tail_parts)
        if occupied == 0 or occupied >= RARE_TAIL_SHARE * rows:
            return False
        r = np.concatenate([_ratio_series(a, T) for a, T in tail_parts if T.size])
        var_iid = float(r.var(ddof=1)) / r.size if r.size > 1 else 0.0
        return var_iid >= TAIL_VARIANCE_SHARE * est.stderr ** 2

    def apply_law(self, quantities) -> dict:
        """A probability law (``{value: (parts, plain estimate)}``, fractions of time that sum
        to 1): all values with the controls, or all plain, so that the law still sums to 1
        (least squares is linear in y, and the sum of the indicators is constant).  The
        controls are used when every value has an adjusted estimate in [0, 1] and the summed
        variance of the values whose errors are reliable both ways is the smaller."""
        if not self.on or not quantities:
            return {m: _CV(p) for m, (_, p) in quantities.items()}
        if not self.levels:
            return {m: _CV(p, reason=self.reason) for m, (_, p) in quantities.items()}
        ctrl = self._controls(self.levels)
        out = {m: _cv_estimate(parts, ctrl, p, self.relax, (0.0, 1.0), force=True)
               for m, (parts, p) in quantities.items()}
        bad = [m for m, c in out.items() if not c.used and 0 < c.plain.mean < 1]
        both = [c for c in out.values() if c.used and c.est.reliable and c.plain.reliable]
        v_cv = sum(c.est.stderr ** 2 for c in both)
        v_plain = sum(c.plain.stderr ** 2 for c in both)
        if bad or not both or not v_cv < v_plain:
            why = (out[bad[0]].reason if bad else "the controls did not reduce the error of the law")
            return {m: _CV(c.plain, reason=why) for m, c in out.items()}
        return out

    def adjusted_matrix(self, cP, parts_P):
        """Per replication, ``(P integrals (batches x levels), T)`` with each level's adjusted
        integrals where its control-variate estimate is used (a linear functional of these is
        the control-variate estimate of the functional: least squares is linear in y)."""
        R = len(parts_P[0]) if parts_P else 0
        out = []
        for r in range(R):
            cols = [(c.adjusted[r] if c.used else parts_P[i][r][0]) for i, c in enumerate(cP)]
            T = parts_P[0][r][1]
            out.append((np.column_stack(cols) if cols else np.zeros((T.size, 0)), T))
        return out

    def notes(self, cu, cP, cq, cg, cm) -> tuple:
        """In words: the controls used, and each quantity that kept its plain estimate."""
        if not self.on:
            return ()
        if not self.levels:
            return (f"control variates not used: {self.reason}",)
        lv = self.levels
        out = [(f"controls Z_i = u_i − λ·P_(i−1) for i = {', '.join(map(str, lv))} ({len(lv)}; exact mean 0 in "
                "equilibrium), split-sample regression on batch means (docs/model.md §9.1)")]
        groups = {}
        for i, c in enumerate(cu):
            if not c.used and c.reason and c.plain.mean > 0:
                groups.setdefault(c.reason, []).append(f"E[u_{i + 1}]")
        for m, c in cm.items():
            if not c.used and c.reason and 0 < c.plain.mean < 1:
                groups.setdefault(c.reason, []).append(f"P(max = {m})")
        for name, c in (("the mean queue length", cq), ("the time in the good set", cg)):
            if c is not None and not c.used and c.reason and c.plain.mean > 0:
                groups.setdefault(c.reason, []).append(name)
        for reason, names in groups.items():
            if len(names) > 4:
                names = names[:3] + [f"… ({len(names)} quantities)"]
            out.append(f"plain estimate kept for {', '.join(names)}: {reason}")
        return tuple(out)


def _response_times(ud_mean, Pparts, L, params, engine, relax=None, trust=True):
    """Sojourn and waiting time laws (docs/model.md §10) from the time averages of ``P_i``:
    exact given them (PASTA, FIFO).  The standard error of each quantile is the error of a
    linear functional of the ``P_i`` (delta method), estimated on the batch series itself with
    the same blocking analysis as every other time average (docs/model.md §9); where that
    analysis cannot trust its own error (too short a run), or the run trusts none of its error
    bars (``trust=False``: start not forgotten, a self-check failed, the slowest mode not
    settled), the error is NaN, not a number.  ``Pparts`` holds, per replication, the batch
    integrals of ``P_1..P_L`` (control-variate adjusted where those estimates are used) and
    the batch lengths."""
    from .. import response as _rs

    def stderr_of(g):  # NaN (no error bar) when the run is too short to know it
        if not trust:
            return math.nan
        m = min(g.size, L)
        e = _estimate([(P[:, :m] @ g[:m], T) for P, T in Pparts], relax=relax)
        return e.stderr if e.reliable else math.nan

    T = np.minimum.accumulate(np.clip(np.asarray(ud_mean, dtype=float), 0.0, 1.0))
    p = params
    return _rs.from_tails(T, stderr_of=stderr_of, source="simulation",
                          params={"n": p.n, "d": p.d, "load": p.lam, "replace": p.replace, "engine": engine})
