"""The quantities a ``precision=`` run targets (``target=``, ``--target``), how far each is from
its target, and the number of events the run expects to need (docs/simulate.md, "--precision").

A target is a quantity the run does not know in advance: ``E[u_1] = λ`` holds exactly for every
dispatch rule (docs/model.md §9, self-checks), so it is reported as an exact value and a
self-check, never as what the run waits for.

Examples
--------
>>> parse_target("mean-queue-length,p99,u2")
('mean-queue-length', 'sojourn-p99', 'u2')
>>> parse_target(None) == DEFAULT_TARGET
True
>>> parse_target("u1")
Traceback (most recent call last):
...
ValueError: target 'u1': E[u_1] = λ exactly (every dispatch rule): it is reported as a self-check, ...
>>> expected_events(1e7, [2e-4], 1e-4)  # errors shrink as events^(-1/2): four times the events
40000000.0
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "check_equilibrium",
    "DEFAULT_TARGET",
    "PRECISION_LEVEL_MIN",
    "QUANTILES",
    "Z95_NORMAL",
    "expected_events",
    "prior_events",
    "parse_target",
    "target_names",
    "target_rows",
]

#: The default target: the mean queue length (and so the mean sojourn time, Little's law).
DEFAULT_TARGET = ("mean-queue-length",)
#: ``levels`` covers every ``E[u_i]``, ``i >= 2``, with ``E[u_i]`` at least this.
PRECISION_LEVEL_MIN = 0.1
#: The response-time quantiles a target may name (those the result carries).
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p99.9": 0.999}
#: The response-time laws carry a standard error without degrees of freedom: normal 95 %.
Z95_NORMAL = 1.959963984540054
#: Growth asked of a run where a target has no error bar yet.
NO_ERROR_GROWTH = 4.0
#: Margin on the growth computed from an estimated error (the error itself is estimated).
GROWTH_MARGIN = 1.2

_LAWS = ("sojourn", "waiting")
_FIXED = ("mean-queue-length", "levels") + tuple(f"{w}-{q}" for w in _LAWS for q in ("mean", *QUANTILES))
_LEVEL = re.compile(r"u(\d+)")


def check_equilibrium(precision: object, lam: float, spelled: str = "precision") -> None:
    """Refuse a precision target at load ``lam >= 1`` (ValueError naming ``spelled``): there is
    no equilibrium, the time averages grow with the horizon, so no horizon makes them settle on
    a value a relative half-width could be met for (and the run would grow to its cap).

    >>> check_equilibrium(0.01, 0.9)
    >>> check_equilibrium(0.01, 1.2)
    Traceback (most recent call last):
    ...
    ValueError: precision: at load λ = 1.2 >= 1 the chain has no equilibrium: ...
    """
    if precision is not None and lam >= 1:
        raise ValueError(
            f"{spelled}: at load λ = {lam:g} >= 1 the chain has no equilibrium: its time averages grow with the "
            "horizon and settle on no value that a precision target could be met for; give a finite horizon "
            "(steps or time) instead"
        )


def target_names() -> str:
    """The valid target names, in words (for the errors and ``--help``)."""
    laws = ", ".join(f"{w}-{q}" for w in _LAWS for q in ("mean", *QUANTILES))
    return (
        f"mean-queue-length, levels, u2, u3, … (E[u_i], i >= 2), {laws} ({', '.join(QUANTILES)}: the sojourn quantiles)"
    )


def _one(name: str) -> str:
    key = name.strip().lower()
    if key in QUANTILES:
        return f"sojourn-{key}"
    if key in _FIXED:
        return key
    m = _LEVEL.fullmatch(key)
    if m and int(m.group(1)) >= 2 and not m.group(1).startswith("0"):
        return key
    if m and int(m.group(1)) == 1:
        raise ValueError(
            "target 'u1': E[u_1] = λ exactly (every dispatch rule): it is reported as a self-check, "
            f"not a precision target; valid targets: {target_names()}"
        )
    raise ValueError(f"target: unknown quantity {name.strip()!r}; valid targets: {target_names()}")


def parse_target(target: str | Iterable[str] | None, *, stable: bool = True) -> tuple[str, ...]:
    """The canonical target names of ``target`` (a comma-separated string or a list of names;
    None: :data:`DEFAULT_TARGET`), in order, without repeats.  ValueError names an unknown or
    exact quantity with the valid ones, and a response-time target when the load is >= 1 (no
    equilibrium, no response-time law: ``stable=False``)."""
    if target is None:
        return DEFAULT_TARGET
    if isinstance(target, str):
        parts = target.split(",")
    elif isinstance(target, Iterable):
        parts = list(target)
        if not all(isinstance(p, str) for p in parts):
            raise TypeError(
                f"target must be a string such as 'mean-queue-length,p99' or a list of names; got {target!r}"
            )
    else:
        raise TypeError(f"target must be a string such as 'mean-queue-length,p99' or a list of names; got {target!r}")
    if not parts or any(not p.strip() for p in parts):
        raise ValueError(f"target: an empty name in {target!r}; valid targets: {target_names()}")
    out: list[str] = []
    for p in parts:
        key = _one(p)
        if not stable and key.startswith(_LAWS):
            raise ValueError(
                f"target {key!r}: load >= 1 has no equilibrium and no response-time law; "
                "target the mean queue length or the levels"
            )
        if key not in out:
            out.append(key)
    return tuple(out)


def _row(target: str, quantity: str, value: float, hw: float, note: str = "") -> dict:
    """One target's state: its value, 95 % half-width and relative half-width (inf: no error bar)."""
    ok = math.isfinite(hw) and hw > 0 and value != 0 and math.isfinite(value)
    rel = abs(hw / value) if ok else math.inf
    if not ok and not note:
        note = "no error bar" if value != 0 else "the estimate is 0: no relative error"
    return {"target": target, "quantity": quantity, "value": value, "half_width": hw if ok else None,
            "relative": rel if ok else None, "note": note}  # fmt: skip


def _level_row(res: Any, i: int, target: str) -> dict:
    """``E[u_i]`` (``i`` counted from 1)."""
    if i > len(res.u_mean):
        return _row(target, f"E[u_{i}]", 0.0, math.nan, f"level {i} was never occupied in the run")
    e = res.levels[i - 1]
    hw = e.half_width if e.reliable else math.nan
    return _row(target, f"E[u_{i}]", float(e.value), float(hw), "" if e.reliable else f"no error bar: {e.note}")


def _law_row(res: Any, target: str) -> dict:
    kind, what = target.split("-", 1)
    law = getattr(res, kind)
    name = f"{kind} {'mean' if what == 'mean' else what}"
    if law is None:
        return _row(target, name, math.nan, math.nan, "no response-time law (load >= 1)")
    if what == "mean":
        value, se = law.mean, None if law.stderr is None else law.stderr.get("mean")
    else:
        q = QUANTILES[what]
        value = law.quantiles.get(q, math.nan)
        se = None if law.stderr is None else law.stderr.get("quantiles", {}).get(q)
    se = math.nan if se is None else float(se)
    note = "" if math.isfinite(se) and se > 0 else "no error bar: the run cannot estimate this one's error yet"
    return _row(target, name, float(value), Z95_NORMAL * se, note)


def target_rows(res: Any, targets: Sequence[str]) -> list[dict]:
    """One row per quantity the targets cover in ``res`` (a SimulationResult): ``levels``
    expands to every ``E[u_i]``, ``i >= 2``, with ``E[u_i] >= PRECISION_LEVEL_MIN``."""
    rows: list[dict] = []
    for t in targets:
        if t == "mean-queue-length":
            q = res.queue_length
            hw = q.half_width if q.reliable else math.nan
            rows.append(_row(t, "mean queue length", float(q.value), float(hw), "" if q.reliable else "no error bar"))
        elif t == "levels":
            rows += [_level_row(res, i + 1, t) for i, u in enumerate(res.u_mean) if i >= 1 and u >= PRECISION_LEVEL_MIN]
        elif t.startswith(_LAWS):
            rows.append(_law_row(res, t))
        else:
            rows.append(_level_row(res, int(t[1:]), t))
    return rows


def need(rows: Sequence[dict], precision: float) -> tuple[float, float]:
    """``(worst relative half-width, factor by which the run should grow)``: a target without
    an error bar asks for :data:`NO_ERROR_GROWTH`, one short of it for ``1.2 (r/precision)²``."""
    worst, factor = 0.0, 1.0
    for row in rows:
        r = row["relative"]
        if r is None:
            worst, factor = math.inf, max(factor, NO_ERROR_GROWTH)
            continue
        worst = max(worst, r)
        if r > precision:
            factor = max(factor, GROWTH_MARGIN * (r / precision) ** 2)
    return worst, factor


def expected_events(done: float, relative: Sequence[float], precision: float) -> float:
    """Events a run expects to need in all: ``done × max(r/precision)²``, from the relative
    half-widths ``r`` after ``done`` events (an error shrinks as the square root of the run,
    docs/model.md §9; at least ``done``); inf when one has no error bar (None or inf)."""
    if any(r is None or not math.isfinite(r) for r in relative):
        return math.inf
    worst = max(relative, default=0.0)
    return float(done) * max(1.0, (worst / precision) ** 2)


def prior_events(
    d: int,
    lam: float,
    precision: float,
    targets: Sequence[str],
    *,
    policy: str = "jsq-d",
    n: int | None = None,
    replace: bool = True,
) -> tuple[float | None, str]:
    """Events the *plain* time averages would need to meet ``precision`` on ``targets``, known
    before any run from the linear-noise approximation (docs/model.md §9, "Before the run"
    [derived]), and a note; ``(None, why)`` where it does not exist.

    With ``√n (u − π)`` an Ornstein–Uhlenbeck process of drift Jacobian ``A`` and stationary
    covariance ``Σ`` (:func:`supermarket.meanfield.lna`), the time average of ``w·u`` over a
    time ``T`` has variance ``2 wᵀ(−A)⁻¹Σ w / (nT)``; a run of ``E`` events lasts
    ``T = E / (n(1 + λ))``, so ``n`` cancels and ``E = (z/p)² · 2(1 + λ) wᵀ(−A)⁻¹Σ w / v²`` for a
    quantity of value ``v`` (``w`` = all ones for the mean queue length, ``e_i`` for ``E[u_i]``).
    The control variates cancel exactly this first-order noise (§9.1), so a run with them needs
    fewer events; the count it states after its first stretch replaces this one.  Response-time
    quantiles have no such formula (they are not linear in ``u``): they are left out.

    Examples
    --------
    >>> e, note = prior_events(2, 0.9, 1e-3, ["mean-queue-length"])
    >>> f"{e:.2g}"
    '3.6e+08'
    >>> prior_events(2, 0.9, 1e-3, ["mean-queue-length"], policy="jiq")[0] is None
    True
    """
    from ..meanfield import lna
    from ..system.policies import SMOOTH_POLICIES

    if policy not in SMOOTH_POLICIES:
        return None, f"no linear-noise approximation for {policy} (its mean-field drift is discontinuous)"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = lna(d, lam, n=None if replace else n, replace=replace, policy=policy)
    except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
        return None, f"the linear-noise approximation failed ({exc})"
    if not r.accurate:
        return None, "the linear-noise covariance is not accurate here"
    A, S, pi = r.jacobian, r.covariance, r.centre
    ones = np.ones(r.levels)
    quantities: list[tuple[str, np.ndarray, float]] = []
    for t in targets:
        if t in ("mean-queue-length", "sojourn-mean"):
            quantities.append((t, ones, float(pi.sum())))
        elif t == "waiting-mean":
            quantities.append((t, ones, float(pi.sum()) - lam))
        elif t == "levels" or _LEVEL.fullmatch(t):
            levels = range(2, r.levels + 1) if t == "levels" else [int(t[1:])]
            for i in levels:
                if i <= r.levels and (t != "levels" or pi[i - 1] >= PRECISION_LEVEL_MIN):
                    quantities.append((f"u{i}", np.eye(r.levels)[i - 1], float(pi[i - 1])))
    if not quantities:
        return None, "no target is a linear function of the profile (quantiles have no linear-noise formula)"
    need, name = 0.0, ""
    for q, w, v in quantities:
        var = 2.0 * (1.0 + lam) * float(w @ np.linalg.solve(-A, S @ w))
        e = (Z95_NORMAL / precision) ** 2 * var / v**2 if v > 0 else math.inf
        if e > need:
            need, name = e, q
    words = {"mean-queue-length": "the mean queue length", "sojourn-mean": "the mean sojourn time"}
    said = words.get(name, "the mean waiting time" if name == "waiting-mean" else f"E[u_{name[1:]}]")
    return need, f"the plain time average of {said} (linear noise at the fixed point, [derived])"


def exact_lines(res: Any) -> list[str]:
    """The quantities known exactly, reported as such with their self-check (not targets)."""
    lam = res.params.lam
    check = next((c for c in res.self_checks if c.get("level") == 1), None)
    verdict = "" if check is None else f"; self-check: {check['result']}"
    if check is not None and math.isfinite(check.get("z", math.nan)):
        verdict += f" (z = {check['z']:.2g})"
    return [f"E[u_1] = λ = {lam:g} exactly (every dispatch rule): a self-check, not a target{verdict}"]


def summary_lines(pr: dict) -> list[str]:
    """The text of a precision run's state (``SimulationResult.precision``): met or not, each
    target against it, the events expected and used, the exact quantities."""
    state = "met" if pr["met"] else ("NOT met: max steps reached" if pr["cap_hit"] else "not met (interrupted)")
    worst = pr.get("achieved", math.nan)
    out = [
        f"precision target {pr['target']:g} (relative 95% half-width): {state}; worst "
        f"{worst:.3g} after {pr['rounds']} stretch(es)"
    ]
    if "targets" not in pr:  # a state from before targets were named
        return out
    for r in pr.get("quantities", ()):
        if r["relative"] is None:
            out.append(f"  {r['quantity']}: {r['value']:.6g}, {r['note']}: cannot be checked against the target")
        else:
            mark = "met" if r["relative"] <= pr["target"] else "not met"
            out.append(
                f"  {r['quantity']}: {r['value']:.6g}, 95% half-width {r['half_width']:.2g} "
                f"(relative {r['relative']:.2g}, {mark})"
            )
    exp = pr.get("expected_events")
    used = pr.get("events")
    if exp is None:
        out.append(
            f"  events: {used:.3g} used; no expectation was stated (no stretch before the last had an error "
            "bar on every target)"
        )
    else:
        out.append(
            f"  events: about {exp:.3g} expected after {pr['expected_after_events']:.3g} (errors shrink as "
            f"events^(-1/2)), {used:.3g} used (doubling stretches), at most {pr['max_events']:.3g}"
        )
    if pr.get("prior_events") is not None:
        out.append(f"  before the run: {pr['prior_source']} needs about {pr['prior_events']:.3g} events")
    out += [f"  {x}" for x in pr.get("exact", ())]
    return out
