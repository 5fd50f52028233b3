"""From batch integrals to a :class:`~supermarket.simulation.SimulationResult`
(docs/model.md §9): the start-up diagnosis (MSER-5), the error of each time average
(:mod:`.batch_errors`: blocking, pooled or across replications) and its control-variate
adjustment (:mod:`.controlled`), the self-checks against exact identities, the reliability
rule, and the response-time laws (docs/model.md §10).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .. import stats as _st
from ..stats import MIN_BLOCKS
from . import control as _cv
from .batch_errors import _estimate, _ratio_series, relaxation_time
from .controlled import _controlled, _second_order_batches
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
    # random routing: the M/M/1 value of d = 1 (exactly); jsq and jiq: control.rule_relaxation_time;
    # jbt: control.jbt_relaxation_time (threshold T = d)
    d = p.d if plan.policy == "jsq-d" else 1
    try:
        if not plan.stable:
            return None
        if plan.policy in _cv.BALANCING_RULES:
            t = _cv.rule_relaxation_time(plan.policy, p.lam, p.n)
        elif plan.policy == "jbt":
            t = _cv.jbt_relaxation_time(p.lam, p.n, p.d)
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
        dof=e.dof,
        method=e.method,
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


ATOM_Z = 4.0
"""A waiting-time quantile ``p_q = 0`` on the atom ``P(W = 0)`` is exact when the atom exceeds ``q``
by at least this many of its standard errors (:func:`_on_atom`)."""


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
