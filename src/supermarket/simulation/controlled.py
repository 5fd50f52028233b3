"""The control-variate estimates of a run (docs/model.md §9.1): the controls
``Z_i = u_i − λ P_{i−1}`` per batch (and the second-order ones ``A(u_i u_j)`` from sampled
states), the levels chosen from the data, and for every quantity the split-sample adjusted
estimate where it has the smaller error, else the plain one with the reason.  The regression
itself is :mod:`.control`'s, the errors :mod:`.batch_errors`'; :mod:`.estimate` reads the
results of :func:`_controlled`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..stats import MIN_BLOCKS
from . import control as _cv
from .batch_errors import _at_block, _estimate, _ratio_series, _skewed


def _second_order_batches(plan, rep, A):
    """Per batch of one replication (all its batches, in order): ``(columns, samples)``, the
    second-order controls ``A(u_i u_j)`` (``control.second_order_terms``) averaged over the
    states sampled in the batch, times its length (so that they enter the regression as the
    batch integrals do), and the number of states sampled in each batch."""
    from ..engines.tables import p_levels, p_rule_counts
    from ..system.policies import policy_code

    p = plan.params
    pairs = _cv.second_order_pairs(_cv.SECOND_ORDER_LEVELS)
    B = A["T"].size
    cols, counts = np.zeros((B, len(pairs))), np.zeros(B, dtype=np.int64)
    records = rep.result_state()[2]
    if records is None or B == 0:
        return cols, counts
    code = policy_code(plan.policy)
    levels = p_levels(code, p.d, _cv.SECOND_ORDER_LEVELS + 1)  # b_q needs u_(q+1); jbt's P_ℓ reads c_T (T = d)
    t, c = records[0], np.ascontiguousarray(records[1][:, :levels], dtype=np.int64)
    edges = rep.t_meas0 + np.concatenate([[0.0], np.cumsum(A["T"])])
    b = np.searchsorted(edges, t, side="right") - 1
    ok = (b >= 0) & (b < B)
    b, c = b[ok], c[ok]
    if b.size == 0:
        return cols, counts
    P = p_rule_counts(code, c, p.n, p.d, p.replace)
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


def _names(names: list[str]) -> list[str]:
    """At most four names, the rest counted."""
    return names if len(names) <= 4 else names[:3] + [f"… ({len(names)} quantities)"]
