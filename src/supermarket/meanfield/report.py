"""The response times of the mean field and of the refined mean field
(:func:`response_times`, docs/model.md §10) and :class:`MeanFieldReport`, what
``supermarket meanfield`` reports."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..checks import check_bool
from ..jsonable import to_jsonable
from ..model import check_load, check_positive_int
from ..response import DEFAULT_QUANTILES, ResponseTimes, from_tails
from ..response.mixture import check_quantiles
from ..result import Result, frame, pyplot, save_figure, text_table
from ..theory import log_fixed_point
from .corrections import refined_mean_field, sampling_first_order
from .dynamics import levels_needed, near_equilibrium_centre, sample_prob


# =========================================================================== response times
def response_times(
    d: int,
    lam: float | str,
    *,
    n: int | None = None,
    refined: bool = False,
    replace: bool = True,
    quantiles: Any = DEFAULT_QUANTILES,
    tol: float = 1e-13,
) -> ResponseTimes:
    """Response times of the mean field (``n = ∞``) or of the refined mean field (order ``1/n``).

    Erlang mixtures over the law of the joined queue length with the tails
    ``T_i = P(J >= i)`` of the mean field, ``π(i)^d``, or of its ``1/n`` refinement, and
    without replacement (``replace=False``, needs ``n``) of the centre ``x^n``: the formulas
    are in docs/model.md §10 (refined: derived).

    Parameters
    ----------
    d : int
        Choices, >= 1.
    lam : float or str
        Load in (0, 1).
    n : int, optional
        Servers; needed with ``refined=True`` or ``replace=False``.
    refined : bool, default False
        Add the ``1/n`` term (derived).
    replace : bool, default True
        Sampling with replacement (``False``: without, needs ``n``).
    quantiles : sequence of float
        The levels, in (0, 1), of the quantiles reported.
    tol : float
        Levels whose ``π`` falls below ``tol`` are dropped.

    Returns
    -------
    supermarket.response.ResponseTimes
        Exact laws of the (refined) mean-field tails, without standard errors (a limit, not an
        estimate); ``source`` says which approximation, ``notes`` flag a refined expansion
        clipped into [0, 1] (``n`` too small to trust it).

    Raises
    ------
    TypeError, ValueError
        Bad ``d``, ``lam``, ``n``; ``refined`` or ``replace=False`` without ``n``.

    Examples
    --------
    >>> r = response_times(1, 0.5)                           # M/M/1: S ~ Exp(1 − λ)
    >>> round(r.sojourn.mean, 9), round(r.sojourn.quantiles[0.99], 9)
    (2.0, 9.210340372)
    >>> from supermarket.theory import fixed_point
    >>> r = response_times(2, 0.9)
    >>> bool(abs(r.sojourn.mean - fixed_point(2, 0.9).sum() / 0.9) < 1e-12)     # Little's law
    True
    """
    d = check_positive_int("d", d)
    lam = check_load(lam)
    qs = check_quantiles(quantiles)
    check_bool("refined", refined)
    check_bool("replace", replace)
    if n is not None:
        n = check_positive_int("n", n)
    if refined and n is None:
        raise ValueError("refined=True needs the number of servers n (the correction is V/n)")
    if not replace:
        if n is None:
            raise ValueError("replace=False needs the number of servers n (the sampling law depends on n)")
        if d > n:
            raise ValueError(f"d must be <= n when sampling without replacement; got d={d}, n={n}")
    notes = []
    params = {"d": d, "load": lam, "n": n, "replace": bool(replace), "refined": bool(refined)}
    if not replace and not refined:
        assert n is not None  # refused above without n
        x = near_equilibrium_centre(n, d, lam, replace=False, tol=tol)
        T = sample_prob(x, d, n=n, replace=False)
        return from_tails(
            np.minimum.accumulate(np.clip(T, 0, 1)),
            quantiles=qs,
            source=f"mean field (centre x^n, sampling without replacement, n = {n})",
            params=params,
        )
    if not refined:
        L = levels_needed(d, lam, tol)
        T = np.exp(float(d) * log_fixed_point(d, lam, L + 1))  # π_i^d, i = 1..L+1
        return from_tails(T, quantiles=qs, source="mean field", params=params)
    rmf = refined_mean_field(d, lam, replace=bool(replace), tol=tol)
    p1 = sample_prob(rmf.pi, d, order=1)
    p2 = sample_prob(rmf.pi, d, order=2)
    corr = p1 * rmf.V + 0.5 * p2 * np.diag(rmf.W)
    if not replace:  # the sampling law's own 1/n term: C(nu, d)/C(n, d) = u^d + h(u)/n + O(1/n²)
        corr = corr + sampling_first_order(rmf.pi, d)
    Tr = sample_prob(rmf.pi, d) + corr / n
    if np.any(Tr < 0) or np.any(Tr > 1) or np.any(np.diff(Tr) > 0):
        notes.append(
            f"the 1/n expansion leaves [0, 1] or stops falling at n = {n}; clipped (n is too small "
            "for the refined mean field to be trusted)"
        )
    Tr = np.minimum.accumulate(np.clip(Tr, 0.0, 1.0))
    return from_tails(
        Tr, quantiles=qs, source=f"refined mean field, order 1/n (derived), n = {n}", params=params, notes=tuple(notes)
    )


# =========================================================================== the command's report
def _response_lines(title: str, soj: dict, wai: dict) -> list:
    out = [f"response times ({title}; FIFO, exponential(1) service, docs/model.md §10)"]
    for kind, law in (("sojourn", soj), ("waiting", wai)):
        parts = [f"mean {law['mean']:.6g}"] + [f"p{100 * float(q):g} {v:.6g}" for q, v in law["quantiles"].items()]
        extra = f"  (P(W = 0) = {law['atom_at_zero']:.6g})" if kind == "waiting" else ""
        out.append(f"  {kind:8s} " + ", ".join(parts) + extra)
    return out


@dataclass(frozen=True)
class MeanFieldReport(Result):
    """What ``supermarket meanfield`` reports for one ``(d, λ[, n])``, as a result.

    ``data`` is the JSON object of ``supermarket meanfield --json`` (keys ``params``,
    ``fixed_point``, ``mean_queue_length``, ``levels``, ``sojourn``, ``waiting``,
    ``response_source``, and with ``n``: ``refined``, ``centre``, ``covariance``; with a time
    horizon: ``trajectory``; see docs/meanfield.md).  ``summary()`` is the text the command
    prints, ``to_frame()`` the fixed point by level, ``plot()`` the trajectory or π against
    π + V/n.

    Examples
    --------
    >>> rep = MeanFieldReport({"params": {"d": 1, "load": 0.5, "n": None, "replace": True,
    ...                                   "time": None, "start": "empty"},
    ...                        "fixed_point": [0.5, 0.25], "mean_queue_length": 1.0, "levels": 2})
    >>> print(rep.summary().splitlines()[1])
    mean-field mean queue length Σπ(i) = 1   (docs/model.md §3)
    >>> rep.to_frame()["pi"].tolist()
    [0.5, 0.25]
    """

    data: dict

    def to_dict(self) -> dict:
        """The JSON object (strict JSON values)."""
        return to_jsonable(self.data)

    def to_frame(self) -> Any:
        """Tidy table by level: ``level``, ``pi`` and, where shown, ``V``, ``refined`` (π + V/n)
        and ``sd_lna`` (standard deviation of √n u_i)."""
        r = self.data
        pi = r["fixed_point"]
        out = {"level": list(range(1, len(pi) + 1)), "pi": pi}
        ref = r.get("refined")
        if ref and ref.get("trusted"):
            out["V"] = ref["V"]
            out["refined"] = ref["mean"]
        cov = r.get("covariance")
        if cov is not None:
            out["sd_lna"] = [math.sqrt(max(cov[i][i], 0.0)) if i < len(cov) else 0.0 for i in range(len(pi))]
        return frame(out)

    def summary(self) -> str:
        """The text ``supermarket meanfield`` prints."""

        r, p = self.data, self.data["params"]
        n = p.get("n")
        rule = p.get("policy", "jsq-d")
        head = f"d={p['d']}" if rule == "jsq-d" else f"policy={rule}"
        lines = [
            f"supermarket meanfield  {head}  λ={p['load']!r}"
            + (f"  n={n}" if n is not None else "")
            + ("" if p["replace"] else "  (without replacement)")
        ]
        lines.append(f"mean-field mean queue length Σπ(i) = {r['mean_queue_length']:.10g}   (docs/model.md §3)")
        if "note" in r:
            lines.append(r["note"])
        ref: dict = r.get("refined") or {}  # {} for None: every use below tests its truth
        shown = bool(ref and ref.get("trusted"))
        cov = r.get("covariance")
        header = (
            ["i", "π(i)"]
            + (["V_i", "π(i)+V_i/n"] if shown else [])
            + (["sd of √n u_i (LNA)"] if cov is not None else [])
        )
        rows = []
        # a V_i below 1e-12 of the largest is zero up to the solve's rounding (V_1 = 0 exactly,
        # since E[u_1] = λ at every n): shown as 0, its last bits differ between CPUs
        v_floor = 1e-12 * max((abs(v) for v in ref.get("V", []) if v is not None), default=0.0)
        for i, pi in enumerate(r["fixed_point"]):
            row = [str(i + 1), f"{pi:.8g}"]
            if shown:
                mi, vi = ref["mean"][i], ref["V"][i]
                if vi is not None and abs(vi) <= v_floor:
                    row += ["0", "—" if mi is None else f"{pi:.8g}"]
                else:
                    row += [f"{vi:.6g}", "—" if mi is None else f"{mi:.8g}"]
            if cov is not None:
                row.append(f"{math.sqrt(max(cov[i][i], 0.0)):.6g}" if i < len(cov) else "0")
            rows.append(row)
        lines.append(
            text_table(
                header, rows, title=f"Fixed point π(i) ({r['levels']} levels)" + (" and 1/n corrections" if ref else "")
            )
        )
        if ref and not ref.get("trusted"):
            lines.append(
                "refined mean field π + V/n: not shown — the linear solves lost their accuracy here "
                f"({ref['reason']}; estimated relative error {ref['error_estimate']:.3g}). Only the mean "
                "field π(i) above can be trusted."
            )
        elif shown:
            if ref["mean_queue_length"] is not None:
                lines.append(
                    f"refined mean queue length Σπ + ΣV/n = {ref['mean_queue_length']:.10g}  (ΣV = {ref['sum_V']:.6g})"
                )
            else:
                lines.append(
                    f"refined mean queue length: not shown — {ref['note']} (— in the table); ΣV = {ref['sum_V']:.6g}"
                )
        if r.get("covariance_note"):
            lines.append(f"linear-noise covariance: not shown — {r['covariance_note']}.")
        if "sojourn" in r:
            lines += _response_lines(r["response_source"], r["sojourn"], r["waiting"])
            lines += [f"  note: {x}" for x in r.get("response_notes", ())]
        if ref and ref.get("sojourn"):
            lines += _response_lines(ref["response_source"], ref["sojourn"], ref["waiting"])
        elif ref and ref.get("response_note"):
            lines.append(f"refined response times (1/n, derived): not shown — {ref['response_note']}.")
        if r.get("cdf"):
            c = r["cdf"]
            lines.append(
                f"CDFs of the sojourn and waiting times on {len(c['t'])} points from t = 0 to "
                f"{c['t'][-1]:.6g} (in --json: cdf{', refined.cdf' if ref and ref.get('cdf') else ''})"
            )
        tr = r.get("trajectory")
        if tr:
            k = min(4, len(tr["u"][0]))
            idx = np.unique(np.linspace(0, len(tr["t"]) - 1, min(11, len(tr["t"]))).astype(int))
            body = [
                [f"{tr['t'][j]:.6g}", *[f"{tr['u'][j][i]:.8g}" for i in range(k)], f"{tr['mean_queue_length'][j]:.8g}"]
                for j in idx
            ]
            lines.append(
                text_table(
                    ["t", *[f"u_{i + 1}" for i in range(k)], "Σ u_i"],
                    body,
                    title=f"ODE trajectory from {p['start']} ({tr['levels']} levels)",
                )
            )
        if r.get("plot"):
            lines.append(f"plot written to {r['plot']}")
        return "\n".join(lines)

    def plot(self, path: Any = None) -> Any:
        """The trajectory ``u_i(t)`` when there is one, else π(i) against π(i) + V_i/n (log
        scale).  Returns the figure; saves it when ``path`` is given."""
        plt = pyplot(path is not None, force=False)

        r, p = self.data, self.data["params"]
        fig, ax = plt.subplots(figsize=(7, 4.5))
        tr = r.get("trajectory")
        if tr:
            u = np.asarray(tr["u"])
            for i in range(min(8, u.shape[1])):
                if u[:, i].max() > 1e-12:
                    ax.plot(tr["t"], u[:, i], label=f"u_{i + 1}")
            ax.set_xlabel("time t")
            ax.set_ylabel("u_i(t)")
            ax.set_title(f"mean-field ODE, d={p['d']}, λ={p['load']}")
        else:
            pi = np.asarray(r["fixed_point"])
            lv = np.arange(1, pi.size + 1)
            ax.semilogy(lv, np.where(pi > 0, pi, np.nan), "o-", label="π(i) (mean field)")
            if r.get("refined") and r["refined"].get("trusted"):
                m = np.asarray([np.nan if v is None else v for v in r["refined"]["mean"]], dtype=float)
                ax.semilogy(lv, np.where(m > 0, m, np.nan), "s--", label=f"π(i) + V_i/n, n={p['n']}")
            ax.set_xlabel("level i")
            ax.set_ylabel("fraction of queues with ≥ i customers")
            ax.set_title(f"fixed point, d={p['d']}, λ={p['load']}")
        ax.legend()
        fig.tight_layout()
        return save_figure(fig, path)
