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
from . import control as _cv
from .results import Estimate, SimulationResult, Trajectory

SELF_CHECK_Z = 4.0
"""The tail of a failed self-check, in normal standard errors (:func:`self_check_threshold`)."""


def self_check_threshold(dof: float) -> float:
    """How many standard errors an identity may be off before its check fails: the ``t_dof``
    quantile with the tail of ``SELF_CHECK_Z`` normal standard errors (docs/model.md §9, self-checks).

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
    """``(batches to drop, forgotten)`` for one replication from the batch means ``q`` of the
    queue length (docs/model.md §9, start-up bias); nothing is dropped when the error is unknown."""
    est = _st.blocking(q)
    if not est.reliable or not est.stderr > 0:
        return 0, True
    sigma = est.stderr * math.sqrt(q.size)  # s.d. of one batch mean's contribution

    def disagree(x):
        a, b = x[: max(x.size // 10, 1)], x[x.size // 2 :]
        se = sigma * math.sqrt(1.0 / a.size + 1.0 / b.size)
        return abs(a.mean() - b.mean()) > START_UP_Z * se

    if not disagree(q):
        return 0, True
    m = _st.mser(q, group=int(max(5, est.block_size)))
    if not m.forgotten or disagree(q[m.truncate :]):
        return m.truncate, False
    return m.truncate, True


def _ratio_series(a, T):
    """Batch values of a time average ``Σa/ΣT`` as equally weighted terms (delta method):
    ``ā + (a_b − ā T_b)/T̄``; their mean is ``ā``, and for equal ``T_b`` they are ``a_b/T_b``."""
    abar = a.sum() / T.sum()
    return abar + (a - abar * T) / T.mean()


def relaxation_time(d: int, lam: float, n: int | None = None) -> float:
    """The slowest relaxation time of the equilibrium in time units, the shortest block of the
    batch means (docs/model.md §6 and §9, derived): ``1/μ_k`` of the slow mode for d >= 2, the
    M/M/1 value ``1/(1−√λ)²`` for d = 1; with ``n`` (d >= 2), at least the M/M/n floor ``1/(n(1−√λ)²)``.

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
    """The error of ``Σa/ΣT`` from ``parts``, a list of ``(a, T)`` (batch integrals and lengths)
    per replication: blocking; the blocking errors pooled; or, when one is not reliable, the
    spread between replications (docs/model.md §9)."""
    parts = [(a, T) for a, T in parts if T.size > 0 and T.sum() > 0]
    if not parts:
        return ErrorEstimate(math.nan, math.nan, math.nan, math.nan, math.nan, False, "none", 0, 1, "nothing measured")
    ests = [
        _st.blocking(_ratio_series(a, T), min_blocks=min_blocks, min_block_size=_min_block(T, relax))
        if T.size >= 2
        else ErrorEstimate(
            float(a.sum() / T.sum()),
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            False,
            "blocking",
            1,
            1,
            "too short to estimate: one batch",
        )
        for a, T in parts
    ]
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
        return _skewed(
            ErrorEstimate(mean, se, dof, n_eff, math.nan, True, "pooled", blocks, ests[0].block_size, ""), parts, relax
        )
    e = _st.replication_error(means, weights=w)
    est = ErrorEstimate(mean, e.stderr, e.dof, e.n_eff, e.tau_int, e.reliable, e.method, e.blocks, 1, e.note)
    return _spread_skewed(est, means, w)


def _spread_skewed(e: ErrorEstimate, means, w) -> ErrorEstimate:
    """``e`` (the spread of the replication means ``means``, weights ``w``) with the estimated
    skewness of the weighted mean, ``Σ w_r³ k_3/s.e.³`` (``k_3``, the unbiased third cumulant of
    the means), as the blocking estimates carry theirs (docs/model.md §9.1, "Skewed remainders";
    §9, "Heavy traffic at large n"); unchanged with fewer than 3 replications.

    Examples
    --------
    >>> e = _estimate([(np.array([x]), np.ones(1)) for x in (1.0, 1.0, 1.0, 4.0)])
    >>> e.method, round(e.skewness, 3)     # k_3 = 6.75, s.e. = 0.75: 6.75/(16·0.75³)
    ('replications', 1.0)
    """
    R = means.size
    if R < 3 or not e.reliable or not e.stderr > 0:
        return e
    ww = w / w.sum()
    c = means - means.mean()  # the unbiased k_3 of the means, as if identically distributed
    k3 = R / ((R - 1.0) * (R - 2.0)) * float(np.sum(c**3))
    g = float(np.sum(ww**3)) * k3 / e.stderr**3
    return dataclasses.replace(e, skewness=g) if math.isfinite(g) else e


def _summarize(plan, reps, wall, interrupted, precision_state=None) -> SimulationResult:
    """The result of a run: all replications together, with each one's own result when
    there are several."""
    res = _result(plan, reps, wall, interrupted, precision_state)
    if len(reps) == 1:
        return res
    return dataclasses.replace(res, per_replication=tuple(_result(plan, [rep], rep.wall, interrupted) for rep in reps))


def _relax(plan, rate):
    """The slowest relaxation time in the units of the batch lengths (None: λ >= 1)."""
    p = plan.params
    # random routing: the M/M/1 value of d = 1 (exactly); jsq and jiq: control.rule_relaxation_time
    d = p.d if plan.policy == "jsq-d" else 1
    try:
        if not plan.stable:
            return None
        if plan.policy in _cv.BALANCING_RULES:
            t = _cv.rule_relaxation_time(plan.policy, p.lam, p.n)
        else:
            t = relaxation_time(d, p.lam, p.n)
        return t * (1.0 if plan.continuous else rate)
    except (ValueError, ArithmeticError):  # no slow mode to be had (e.g. λ below double range)
        return None


def _kept(plan, reps, arrs, rate, interrupted):
    """The start-up diagnosis (MSER-5 on the queue length's batch means) per replication and
    the batches kept: ``(start_up records, [(arrays, kept indices)], measured time)``."""
    startup, used = [], []
    for rep, A in zip(reps, arrs):
        comp = np.nonzero(A["complete"] & (A["T"] > 0))[0]
        trunc, forgotten = 0, True
        if plan.stable and comp.size >= 20:
            trunc, forgotten = _start_up(_ratio_series(A["c"][comp].sum(axis=1) / plan.params.n, A["T"][comp]))
        used.append((A, comp[trunc:] if forgotten else comp))
        startup.append(
            {
                "replication": rep.r,
                "batches": int(comp.size),
                "truncated_batches": int(trunc),
                "truncated_time": float(A["T"][comp[:trunc]].sum() / (1.0 if plan.continuous else rate)),
                "forgotten": bool(forgotten),
            }
        )
    Ttot = sum(float(A["T"][idx].sum()) for A, idx in used)
    if Ttot <= 0:  # nothing complete: fall back to every batch measured
        used = [(A, np.nonzero(A["T"] > 0)[0]) for A in arrs]
        Ttot = sum(float(A["T"][idx].sum()) for A, idx in used)
    if Ttot <= 0:
        if interrupted:
            raise KeyboardInterrupt("interrupted during burn-in: nothing was measured yet")
        raise RuntimeError("nothing was measured")  # pragma: no cover - horizons are positive
    return startup, used, Ttot


def _self_checks(used, L, n, lam, relax, seen) -> list[dict]:
    """The exact identities ``E[u_1] = λ``, ``E[u_i] = λ E[P_{i−1}]`` on the plain batch
    integrals (docs/model.md §9), with a verdict against :func:`self_check_threshold`."""
    checks = []
    for i in range(L):
        prev = [A["T"][idx] if i == 0 else A["P"][idx, i - 1] for A, idx in used]
        e = _estimate([(A["c"][idx, i] / n - lam * p, A["T"][idx]) for (A, idx), p in zip(used, prev)], relax=relax)
        z = e.mean / e.stderr if e.stderr > 0 else math.nan
        limit = self_check_threshold(e.dof)
        verdict = (
            "inconclusive" if not (e.reliable and seen[i] >= MIN_BLOCKS) else "pass" if abs(z) <= limit else "fail"
        )
        checks.append(
            {
                "identity": "E[u_1] = λ" if i == 0 else f"E[u_{i + 1}] = λ·E[P_{i}]",
                "level": i + 1,
                "difference": e.mean,
                "stderr": e.stderr,
                "z": z,
                "threshold": limit,
                "result": verdict,
            }
        )
    return checks


def _record(c, plain_value, Ttot, rel, plain_rel, note="") -> Estimate:
    """An :class:`Estimate` from a quantity's ``_CV`` and its reliability verdicts: the
    standard error and half-width are NaN where not reliable (one rule everywhere)."""
    e, p = c.est, c.plain
    return Estimate(
        value=c.mean(plain_value, Ttot),
        stderr=e.stderr if rel else math.nan,
        half_width=e.half_width() if rel and math.isfinite(e.stderr) else math.nan,
        reliable=rel,
        n_eff=e.n_eff,
        note=note,
        plain=plain_value,
        plain_stderr=p.stderr if plain_rel else math.nan,
        plain_reliable=plain_rel,
        variance_reduction=c.ratio,
    )


def _run_notes(plan, startup, failed, levels, seen, q_rel, precision_state) -> tuple:
    """The warnings of a run, in words: a start not forgotten, a failed self-check, error bars
    without a blocking plateau, a precision target not reached."""
    notes = []
    bad = [s["replication"] for s in startup if not s["forgotten"]]
    if bad:
        notes.append(
            f"the start was not forgotten (replication(s) {bad}): MSER-5 would drop more than half of "
            "the run as start-up transient; give a longer burn-in or run, or start from the fixed point; "
            "no error bar is marked reliable"
        )
    if failed:
        c = failed[0]
        notes.append(
            f"self-check failed: {c['identity']} is off by {abs(c['z']):.1f} standard errors, beyond "
            f"{c['threshold']:.1f} (as rare as {SELF_CHECK_Z:g} for an exact error bar; {len(failed)} "
            "identity check(s) failed): the error bars (or the burn-in) are too small; no error bar is "
            "marked reliable"
        )
    too_short = "" if bad or failed else _too_short_note(levels, seen, q_rel)
    if too_short:
        notes.append(too_short)
    if precision_state is not None and precision_state.get("cap_hit"):
        notes.append(
            f"precision {precision_state['target']:g} not reached: stopped at max_steps = "
            f"{plan.max_steps:,} steps per replication (worst relative half-width "
            f"{precision_state.get('achieved', math.nan):.3g}); raise max_steps/--max-steps"
        )
    return tuple(notes)


def _too_short_note(levels, seen, q_rel) -> str:
    """The note for a run whose error bars lack a blocking plateau ("" when none lacks one)."""
    unrel = [i + 1 for i, e in enumerate(levels) if not e.reliable and e.value > 0 and seen[i] >= MIN_BLOCKS]
    if not unrel and q_rel:
        return ""
    names = [f"E[u_{i}]" for i in unrel]
    if len(names) > 4:
        names = names[:3] + [f"… E[u_{unrel[-1]}] ({len(unrel)} levels)"]
    what = ", ".join(names + ([] if q_rel else ["the mean queue length"]))
    return (
        f"run too short to estimate the error of {what}: no blocking plateau with at least {MIN_BLOCKS} blocks "
        "(batches shorter than the correlation time); run longer, or use precision=/--precision"
    )


def _result(plan, reps, wall, interrupted, precision_state=None) -> SimulationResult:
    """One :class:`SimulationResult` from the batch integrals of ``reps`` (docs/model.md §9)."""
    params, stable = plan.params, plan.stable
    n, lam = params.n, params.lam
    rate = n * (1.0 + lam)
    relax = _relax(plan, rate)
    Lall = max(rep.top_level() for rep in reps) + 1
    startup, used, Ttot = _kept(plan, reps, [rep.arrays(Lall) for rep in reps], rate, interrupted)
    forgotten_all = all(s["forgotten"] for s in startup)
    # the plain time averages of the levels, the queue length, the good set, the maximum
    mx = sum(A["max"][idx].sum(axis=0) for A, idx in used)
    L = int(np.nonzero(mx > 0)[0][-1]) + 1 if np.any(mx > 0) else 1
    u_plain = sum(A["c"][idx, :L].sum(axis=0) for A, idx in used) / (n * Ttot)
    ud_plain = sum(A["P"][idx, :L].sum(axis=0) for A, idx in used) / Ttot
    mq_plain = {int(m): float(mx[m] / Ttot) for m in range(L + 1) if mx[m] > 0}
    k = plan.k or None
    good_plain = (sum(float(A["good"][idx].sum()) for A, idx in used) / Ttot) if k else None
    seen = [sum(int(np.count_nonzero(A["c"][idx, i] > 0)) for A, idx in used) for i in range(L)]
    seen_mx = {m: sum(int(np.count_nonzero(A["max"][idx, m] > 0)) for A, idx in used) for m in mq_plain}
    quad = [_second_order_batches(plan, rep, A) for rep, (A, _) in zip(reps, used)] if plan.second_order else None
    cvs, cu, cP, cq, cg, cm, parts_P = _controlled(plan, used, L, seen, forgotten_all, relax, mq_plain, quad)
    checks = _self_checks(used, L, n, lam, relax, seen) if stable else []
    failed = [c for c in checks if c["result"] == "fail"]
    # what the run trusts (docs/model.md §9, reliability rule)
    ok_all = forgotten_all and not failed
    gate = dict(seen=seen, forgotten_all=forgotten_all, failed=bool(failed), stable=stable)
    u_rel, u_note = _gate([c.est for c in cu], cq.est, **gate)
    P_rel, _ = _gate([c.est for c in cP], cq.est, **gate)
    u0_rel, _ = _gate([c.plain for c in cu], cq.plain, **gate)
    P0_rel, _ = _gate([c.plain for c in cP], cq.plain, **gate)
    q_rel, q0_rel = bool(cq.est.reliable and ok_all), bool(cq.plain.reliable and ok_all)
    levels = tuple(_record(c, u_plain[i], Ttot, u_rel[i], u0_rel[i], u_note[i]) for i, c in enumerate(cu))
    tails = tuple(_record(c, ud_plain[i], Ttot, P_rel[i], P0_rel[i]) for i, c in enumerate(cP))
    queue = _record(cq, float(u_plain.sum()), Ttot, q_rel, q0_rel)
    good = None
    if cg is not None:
        good = _record(cg, good_plain, Ttot, bool(cg.est.reliable and ok_all), bool(cg.plain.reliable and ok_all))
    # the maximum's law: trusted as the levels are (its own plateau, seen often enough, the run's checks)
    mq_ok = ok_all and (q_rel or not stable)
    max_queue = {
        m: _record(c, mq_plain[m], Ttot, bool(c.est.reliable and seen_mx[m] >= MIN_BLOCKS and mq_ok), False)
        for m, c in cm.items()
    }
    # response times, from the estimates in use and from the plain ones
    response = response_plain = None
    if stable:
        Pcv = cvs.adjusted_matrix(cP, parts_P)
        response = _response_times(plan, np.array([e.value for e in tails]), Pcv, L, relax, ok_all and q_rel)
        response_plain = response
        if cvs.on:
            P0 = [(A["P"][idx, :L], A["T"][idx]) for A, idx in used]
            response_plain = _response_times(plan, ud_plain, P0, L, relax, ok_all and q0_rel)
    return SimulationResult(
        params=params,
        engine=plan.engine,
        time_mode="continuous" if plan.continuous else "discrete",
        sim_time=float(Ttot if plan.continuous else Ttot / rate),
        levels=levels,
        tails=tails,
        queue_length=queue,
        good_set=good,
        max_queue=max_queue,
        k=k,
        eps=float(plan.eps),
        wall_time=float(wall),
        error_method=cq.est.method,
        self_checks=tuple(checks),
        start_up=tuple(startup),
        notes=_run_notes(plan, startup, failed, levels, seen, q_rel, precision_state),
        precision=precision_state,
        response=response,
        response_plain=response_plain,
        control_variates=plan.control_variates,
        controls=tuple(cvs.levels),
        control_notes=cvs.notes(cu, cP, cq, cg, cm),
        policy=plan.policy,
        **_run_facts(plan, reps, interrupted),
    )


def _run_facts(plan, reps, interrupted) -> dict:
    """The fields of the result that count the run rather than estimate: events, speed, the
    final state and records of replication 0, the start."""
    burn_events = sum(rep.burn_events for rep in reps)
    kernel_wall = sum(rep.wall for rep in reps)
    r0 = reps[0]
    counts0, lengths0, records0 = r0.result_state()
    traj = None
    if records0 is not None and not plan.records_internal:
        t, cc, mxr, tot = records0
        traj = Trajectory(t=t - r0.t_meas0, u=cc / plan.params.n, max=mxr, total=tot)
    start_note = plan.plan_note
    if plan.perfect:
        start_note = ((start_note + "; ") if start_note else "") + (
            "the start is an exact stationary sample (perfect sampling, docs/model.md §12): no burn-in "
            "was needed" + ("" if burn_events == 0 else f"; {int(burn_events):,} burn-in events were run anyway")
        )
    return dict(
        steps=int(sum(rep.measured_events() for rep in reps)),
        burn_in=int(burn_events),
        events_per_second=(sum(rep.events() for rep in reps) / kernel_wall if kernel_wall > 0 else math.nan),
        partial=bool(interrupted or any(rep.partial for rep in reps)),
        replications=len(reps),
        batches=int(sum(len(rep.rows["T"]) for rep in reps)),
        final_counts=counts0,
        trajectory=traj,
        final_lengths=lengths0,
        start_note=start_note,
    )


def _second_order_batches(plan, rep, A):
    """Per batch of one replication (all its batches, in order): ``(columns, samples)``, the
    second-order controls ``A(u_i u_j)`` (``control.second_order_terms``) averaged over the
    states sampled in the batch, times its length (so that they enter the regression as the
    batch integrals do), and the number of states sampled in each batch."""
    from ..engines.tables import p_rule_counts
    from ..system.policies import policy_code

    p = plan.params
    pairs = _cv.second_order_pairs(_cv.SECOND_ORDER_LEVELS)
    B = A["T"].size
    cols, counts = np.zeros((B, len(pairs))), np.zeros(B, dtype=np.int64)
    records = rep.result_state()[2]
    if records is None or B == 0:
        return cols, counts
    t, c = records[0], np.ascontiguousarray(records[1][:, : _cv.SECOND_ORDER_LEVELS + 1], dtype=np.int64)
    edges = rep.t_meas0 + np.concatenate([[0.0], np.cumsum(A["T"])])
    b = np.searchsorted(edges, t, side="right") - 1
    ok = (b >= 0) & (b < B)
    b, c = b[ok], c[ok]
    if b.size == 0:
        return cols, counts
    P = p_rule_counts(policy_code(plan.policy), c, p.n, p.d, p.replace)
    terms = _cv.second_order_terms(c / p.n, P, p.lam, p.n, pairs)
    np.add.at(cols, b, terms)
    counts = np.bincount(b, minlength=B)
    has = counts > 0
    cols[has] *= (A["T"][has] / counts[has])[:, None]
    return cols, counts


def _controlled(plan, used, L, seen, forgotten_all, relax, mq_plain, quad=None):
    """Every quantity's plain and control-variate estimates (docs/model.md §9.1): ``(controls,
    levels, tails, queue length, good set or None, law of the maximum, P integrals)``;
    ``quad``: per replication, the second-order controls of :func:`_second_order_batches`."""
    n, k = plan.params.n, plan.k
    cvs = _Controls(plan, used, L, n, plan.params.lam, seen, plan.stable, forgotten_all, relax, quad)

    def apply(p, **kw):
        return cvs.apply(p, _estimate(p, relax=relax), **kw)

    def tail(top):  # the levels above the controls, for the mean queue length
        return [(A["c"][idx, top:L].sum(axis=1) / n, A["T"][idx]) for A, idx in used]

    parts_c = [[(A["c"][idx, i] / n, A["T"][idx]) for A, idx in used] for i in range(L)]
    parts_P = [[(A["P"][idx, i], A["T"][idx]) for A, idx in used] for i in range(L)]
    parts_q = [(A["c"][idx, :L].sum(axis=1) / n, A["T"][idx]) for A, idx in used]
    cu = [apply(p, own=i + 1, bounds=(0.0, 1.0), seen=seen[i]) for i, p in enumerate(parts_c)]
    cP = [apply(p, own=i + 2, bounds=(0.0, 1.0), seen=seen[i]) for i, p in enumerate(parts_P)]
    cq = apply(parts_q, bounds=(0.0, math.inf), tail=tail)
    cg = apply([(A["good"][idx], A["T"][idx]) for A, idx in used], bounds=(0.0, 1.0)) if k else None
    law = {m: [(A["max"][idx, m], A["T"][idx]) for A, idx in used] for m in mq_plain}
    cm = cvs.apply_law({m: (p, _estimate(p, relax=relax)) for m, p in law.items()})
    return cvs, cu, cP, cq, cg, cm, parts_P


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

    def __init__(self, plain, est=None, adjusted=None, ratio=math.nan, reason="", m=0, exact=False, borrowed=False):
        self.plain = plain
        self.est = plain if est is None else est
        self.adjusted = adjusted  # adjusted batch integrals per replication, when the CV estimate is used
        self.ratio = ratio  # (plain s.e. / CV s.e.)², NaN when not measurable or not used
        self.reason = reason  # why the plain estimate was kept ("" when the CV one is used)
        self.m = m  # the number of controls used
        self.exact = exact  # the controls determine the quantity exactly
        self.borrowed = borrowed  # the adjusted error from the plain series' plateau blocks (§9.1)

    @property
    def used(self) -> bool:
        return self.adjusted is not None

    def mean(self, plain_mean, Ttot):
        """The estimate: the plain one (exactly as computed before) or Σ adjusted / ΣT."""
        if not self.used:
            return plain_mean
        return float(sum(float(a.sum()) for a in self.adjusted) / Ttot)


def _cv_estimate(parts, controls, plain, relax, bounds=(-math.inf, math.inf), force=False) -> _CV:
    """One quantity with the controls ``controls`` (per replication, batches x m): the adjusted
    estimate where it wins (docs/model.md §9.1), else ``plain`` with the reason (``force``: the
    adjusted one whenever it exists and lies in ``bounds``)."""
    fit = _cv.crossfit(parts, controls)
    if fit is None:
        return _CV(plain, reason="too few batches for the regression, or the quantity does not vary")
    if fit.exact:
        return _CV(
            plain, reason="determined exactly by the identities: the plain estimate is kept as a check", exact=True
        )
    m = fit.controls
    T_parts = [T for _, T in parts]
    e = _estimate(list(zip(fit.adjusted, T_parts)), relax=relax)
    borrowed = False
    if not e.reliable and plain.reliable and plain.method == "blocking" and len(parts) == 1:
        # no plateau of its own: the blocks of the plain series' plateau, which are long enough
        # for the same chain, with the adjusted series' own lag-1 correction (§9.1, "Short runs")
        alt = _at_block(_ratio_series(fit.adjusted[0], T_parts[0]), plain.block_size)
        if alt.reliable:
            e, borrowed = _skewed(alt, list(zip(fit.adjusted, T_parts)), relax), True
    Ttot = sum(float(T.sum()) for T in T_parts)
    if math.isfinite(e.dof):
        if e.method in ("blocking", "pooled") and relax and relax > 0:
            # residuals not shrunk by a β fitted elsewhere (split sample): blocking's degrees of
            # freedom, at most one per DOF_RELAXATION_TIMES relaxation times of the run (§9.1)
            dof = min(e.dof, Ttot / (_cv.DOF_RELAXATION_TIMES * relax))
        else:  # the spread between replications, blind to the error of their common β
            dof = e.dof - m
        e = dataclasses.replace(e, dof=max(dof, 1.0))
    value = sum(float(a.sum()) for a in fit.adjusted) / Ttot
    if not bounds[0] <= value <= bounds[1]:
        return _CV(plain, reason=f"the adjusted estimate {value:.3g} lies outside its range")
    ratio = (plain.stderr / e.stderr) ** 2 if (e.stderr > 0 and plain.reliable and e.reliable) else math.nan
    if force:
        return _CV(plain, est=e, adjusted=fit.adjusted, ratio=ratio, m=m, borrowed=borrowed)
    if e.reliable and plain.reliable:
        if not e.stderr < plain.stderr:
            return _CV(plain, reason="the controls did not reduce the error")
        if not plain.stderr**2 >= _cv.MIN_GAIN * e.stderr**2:
            return _CV(
                plain,
                reason=f"the controls did not reduce the variance {_cv.MIN_GAIN:g}-fold (a smaller "
                "gain is within the noise of the two estimated errors)",
            )
    elif plain.reliable:
        return _CV(plain, reason="the error of the adjusted series cannot be estimated")
    elif not e.reliable and not (e.stderr < plain.stderr):
        return _CV(plain, reason="the controls did not reduce the error")
    return _CV(plain, est=e, adjusted=fit.adjusted, ratio=ratio, m=m, borrowed=borrowed)


def _at_block(x, size: int) -> ErrorEstimate:
    """Blocking's error of the mean of ``x`` at blocks of ``size`` measurements, with its correction
    for the correlation left between blocks (docs/model.md §9) but without the plateau tests:
    for a block length another series of the same chain has shown long enough (§9.1, "Short runs").
    Not reliable when that level holds fewer than ``MIN_BLOCKS`` blocks.

    Examples
    --------
    Independent values (exact s.e. 1/64; the estimate from 64 blocks is within about 9 % of it):

    >>> e = _at_block(np.random.default_rng(1).normal(size=4096), 64)
    >>> e.reliable, e.blocks, round(e.stderr * 64, 2)
    (True, 64, 1.17)
    """
    from ..stats import _blocking_dof, _levels, _variance_factor

    x = np.asarray(x, dtype=float)
    mean = float(x.mean()) if x.size else math.nan
    y = next((y for s, y in _levels(x) if s == size), None)
    if y is None or y.size < MIN_BLOCKS:
        return ErrorEstimate(mean, math.nan, math.nan, math.nan, math.nan, False, "blocking", 0, size, "too few blocks")
    m = y.size
    yc = y - y.mean()
    v0 = float(np.dot(yc, yc)) / m
    if not v0 > 0:
        return ErrorEstimate(mean, math.nan, math.nan, math.nan, math.nan, False, "blocking", m, size, "no variation")
    rho = float(np.dot(yc[:-1], yc[1:])) / m / v0
    r = min(max(rho + (1.0 + 4.0 * rho) / m, -0.45), 0.95)
    se = math.sqrt(v0 / (m - 1.0) * _variance_factor(r, m))
    n_eff = float(np.var(x, ddof=1)) / se**2
    return ErrorEstimate(mean, se, _blocking_dof(m), n_eff, x.size / (2.0 * n_eff), True, "blocking", m, size, "")


RARE_TAIL_SHARE = 0.5
"""The levels above the controls count as rare when occupied in fewer than this share of the
batches (:meth:`_Controls._rare_tail`)."""
TAIL_VARIANCE_SHARE = 0.25
"""... and their error dominates the adjusted one when their variance (as if independent
batches) is at least this share of the adjusted variance."""


class _Controls:
    """The controls of a run (docs/model.md §9.1): ``Z_i = u_i − λ P_{i−1}`` per batch, the
    levels chosen from the data, and the split-sample estimate of any quantity."""

    def __init__(self, plan, used, L, n, lam, seen, stable, forgotten_all, relax, quad=None):
        self.relax = relax
        self.levels = []
        self.pairs = []  # the second-order controls in use, (i, j)
        self.quad_note = ""
        self.Q = None
        every = plan.record_every
        self.sampled = f"every {every:g} time units" if plan.continuous else f"every {int(every):,} steps"
        self.reason = ""
        self.Z = None
        self.on = plan.control_variates
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
        if quad is not None:
            self._second_order(used, quad, seen, rows)

    def _second_order(self, used, quad, seen, rows):
        """Add the second-order controls (docs/model.md §9.1): the pairs of levels that are
        each seen in enough batches, when every kept batch holds a sampled state, taken after
        the first-order ones and kept as :func:`control.select_controls` keeps those."""
        pairs = _cv.second_order_pairs(_cv.SECOND_ORDER_LEVELS)
        ok = [k for k, (_, j) in enumerate(pairs) if j <= len(seen) and seen[j - 1] >= 2 * MIN_BLOCKS]
        if not ok:
            self.quad_note = "second-order controls not used: levels 1 to 3 are not seen in enough batches"
            return
        if any(idx.size and int(cnt[idx].min()) < 1 for (_, cnt), (_, idx) in zip(quad, used)):
            self.quad_note = "second-order controls not used: some batch holds no sampled state (batches too short)"
            return
        Qs = [cols[idx][:, ok] for (cols, _), (_, idx) in zip(quad, used)]
        cap = min(len(self.levels) + len(ok), rows // _cv.MIN_FIT_ROWS_PER_CONTROL)
        lin = [lv - 1 for lv in self.levels]
        stack = np.concatenate(
            [
                _cv.ratio_series(np.column_stack([Zr[:, lin], Qr]), A["T"][idx])
                for Zr, Qr, (A, idx) in zip(self.Z, Qs, used)
            ]
        )
        keep = _cv.select_controls(stack, max_controls=cap)
        m = len(self.levels)
        if keep[:m] != list(range(m)):  # the first-order controls were kept as independent: they stay
            keep = list(range(m)) + [k for k in keep if k >= m]
        chosen = [k - m for k in keep if k >= m]
        if not chosen:
            self.quad_note = "second-order controls not used: none varies independently of the first-order ones"
            return
        self.pairs = [pairs[ok[k]] for k in chosen]
        self.Q = [Qr[:, chosen] for Qr in Qs]

    def _controls(self, levels):
        cols = [lv - 1 for lv in levels]
        if self.Q is None:
            return [Zr[:, cols] for Zr in self.Z]
        return [np.column_stack([Zr[:, cols], Qr]) for Zr, Qr in zip(self.Z, self.Q)]

    def apply(self, parts, plain, *, own=None, bounds=(-math.inf, math.inf), seen=None, tail=None) -> _CV:
        """The control-variate estimate of the quantity with batch integrals ``parts`` when it has
        the smaller error, else ``plain`` with a reason.  ``own``: the level of the quantity's own
        identity, left out when the controls determine it exactly; ``seen``: batches where it was
        nonzero; ``tail``: the batch integrals of the levels above a given one (:meth:`_rare_tail`)."""
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
            c = (
                _cv_estimate(parts, self._controls(levels), plain, self.relax, bounds)
                if levels
                else _CV(plain, reason="determined exactly by the identities: the plain estimate is kept as a check")
            )
        if tail is not None and c.used and self._rare_tail(tail(max(levels)), c.est):
            return _CV(
                plain,
                reason=f"what the controls leave is mostly the rarely occupied levels above "
                f"{max(levels)} (occupied in under {RARE_TAIL_SHARE:.0%} of the batches), whose error a run "
                "this short cannot know",
            )
        return c

    @staticmethod
    def _rare_tail(tail_parts, est) -> bool:
        """Whether the error left by the controls is mostly that of the levels above them, occupied
        in under ``RARE_TAIL_SHARE`` of the batches (docs/model.md §9.1)."""
        rows = sum(T.size for _, T in tail_parts)
        if rows == 0 or not (est.stderr > 0):
            return False
        occupied = sum(int(np.count_nonzero(a > 0)) for a, _ in tail_parts)
        if occupied == 0 or occupied >= RARE_TAIL_SHARE * rows:
            return False
        r = np.concatenate([_ratio_series(a, T) for a, T in tail_parts if T.size])
        var_iid = float(r.var(ddof=1)) / r.size if r.size > 1 else 0.0
        return var_iid >= TAIL_VARIANCE_SHARE * est.stderr**2

    def apply_law(self, quantities) -> dict:
        """A probability law (``{value: (parts, plain estimate)}``): all values with the controls
        or all plain, so that it still sums to 1 (docs/model.md §9.1)."""
        if not self.on or not quantities:
            return {m: _CV(p) for m, (_, p) in quantities.items()}
        if not self.levels:
            return {m: _CV(p, reason=self.reason) for m, (_, p) in quantities.items()}
        ctrl = self._controls(self.levels)
        out = {
            m: _cv_estimate(parts, ctrl, p, self.relax, (0.0, 1.0), force=True) for m, (parts, p) in quantities.items()
        }
        bad = [m for m, c in out.items() if not c.used and 0 < c.plain.mean < 1]
        both = [c for c in out.values() if c.used and c.est.reliable and c.plain.reliable]
        v_cv = sum(c.est.stderr**2 for c in both)
        v_plain = sum(c.plain.stderr**2 for c in both)
        if bad or not both or not v_cv < v_plain:
            why = out[bad[0]].reason if bad else "the controls did not reduce the error of the law"
            return {m: _CV(c.plain, reason=why) for m, c in out.items()}
        return out

    def adjusted_matrix(self, cP, parts_P):
        """Per replication, ``(P integrals (batches x levels), T)``, adjusted where a level's
        control-variate estimate is used."""
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
        out = [
            (
                f"controls Z_i = u_i − λ·P_(i−1) for i = {', '.join(map(str, lv))} ({len(lv)}; exact mean 0 in "
                "equilibrium), split-sample regression on batch means (docs/model.md §9.1)"
            )
        ]
        if self.pairs:
            out.append(
                "second-order controls A(u_i·u_j) for (i, j) = "
                f"{', '.join(f'({i}, {j})' for i, j in self.pairs)} ({len(self.pairs)}; exact mean 0 in "
                f"equilibrium), on the state sampled {self.sampled} (docs/model.md §9.1)"
            )
        elif self.quad_note:
            out.append(self.quad_note)
        groups: dict[str, list[str]] = {}
        for i, c in enumerate(cu):
            if not c.used and c.reason and c.plain.mean > 0:
                groups.setdefault(c.reason, []).append(f"E[u_{i + 1}]")
        for m, c in cm.items():
            if not c.used and c.reason and 0 < c.plain.mean < 1:
                groups.setdefault(c.reason, []).append(f"P(max = {m})")
        for name, c in (("the mean queue length", cq), ("the time in the good set", cg)):
            if c is not None and not c.used and c.reason and c.plain.mean > 0:
                groups.setdefault(c.reason, []).append(name)
        short = _names([f"E[u_{i + 1}]" for i, c in enumerate(cu) if c.used and c.borrowed])
        short += _names(
            [
                nm
                for nm, c in (("the mean queue length", cq), ("the time in the good set", cg))
                if c is not None and c.used and c.borrowed
            ]
        )
        if short:
            sizes = sorted({c.est.blocks for c in [*cu, cq] if c.used and c.borrowed})
            out.append(
                f"adjusted error of {', '.join(short)} from the blocks of the plain estimate's plateau "
                f"({'/'.join(map(str, sizes))} blocks), with their own lag-1 correction: the adjusted "
                "series' own blocking found no plateau (docs/model.md §9.1, short runs)"
            )
        for reason, names in groups.items():
            if len(names) > 4:
                names = names[:3] + [f"… ({len(names)} quantities)"]
            out.append(f"plain estimate kept for {', '.join(names)}: {reason}")
        return tuple(out)


ATOM_Z = 4.0
"""A waiting-time quantile ``p_q = 0`` on the atom ``P(W = 0)`` is exact when the atom exceeds ``q``
by at least this many of its standard errors (:func:`_on_atom`)."""


def _names(names: list[str]) -> list[str]:
    """At most four names, the rest counted."""
    return names if len(names) <= 4 else names[:3] + [f"… ({len(names)} quantities)"]


def _response_times(plan, ud_mean, Pparts, L, relax, trust):
    """Sojourn and waiting time laws (docs/model.md §10) from the time averages ``ud_mean`` of
    ``P_i``, with each quantile's error that of a linear functional of the batch integrals
    ``Pparts`` (per replication: ``P_1..P_L`` and the batch lengths), NaN where the blocking
    analysis or the run (``trust``) cannot trust it; waiting quantiles on the atom ``W = 0``:
    :func:`_on_atom`."""
    from .. import response as _rs

    def stderr_of(g):  # NaN (no error bar) when the run is too short to know it
        if not trust:
            return math.nan
        m = min(g.size, L)
        e = _estimate([(P[:, :m] @ g[:m], T) for P, T in Pparts], relax=relax)
        return e.stderr if e.reliable else math.nan

    T = np.minimum.accumulate(np.clip(np.asarray(ud_mean, dtype=float), 0.0, 1.0))
    p = {"n": plan.params.n, "d": plan.params.d, "load": plan.params.lam, "replace": plan.params.replace}
    res = _rs.from_tails(T, stderr_of=stderr_of, source="simulation", params={**p, "engine": plan.engine})
    return _on_atom(res, stderr_of(np.ones(1)) if T.size else math.nan)


def _on_atom(res, se_atom):
    """``res`` with the errors of its waiting quantiles that lie on the atom ``P(W = 0) = 1 − E[P_1]``
    (docs/model.md §10): such a quantile ``p_q = 0`` has no sampling error while the true atom exceeds
    ``q``, so its error is 0 when the estimated atom exceeds ``q`` by at least ``ATOM_Z`` of its
    standard errors ``se_atom`` (printed ``0 (on the atom)``), and unknown (NaN, with a note) otherwise."""
    w = res.waiting
    if w.stderr is None:
        return res
    on = [q for q, v in w.quantiles.items() if v == 0.0 and w.atom_at_zero >= q]
    if not on:
        return res
    exact = [q for q in on if se_atom > 0 and w.atom_at_zero - q >= ATOM_Z * se_atom]  # 0: never seen, unknown
    qse = {q: (0.0 if q in exact else math.nan) if q in on else s for q, s in w.stderr["quantiles"].items()}
    waiting = dataclasses.replace(w, stderr={**w.stderr, "quantiles": qse})
    notes = list(res.notes)  # the exact ones print as '0 (on the atom)' beside the atom: no note (JSON unchanged)
    rest = [q for q in on if q not in exact]
    if rest:
        notes.append(
            f"waiting {', '.join(f'p{100 * q:g}' for q in rest)} = 0 on the atom P(W = 0) = {w.atom_at_zero:.6g}, "
            f"which the run cannot place above the level by {ATOM_Z:g} standard errors: no error bar"
        )
    return dataclasses.replace(res, waiting=waiting, notes=tuple(notes))
