"""The figures of a sweep report (:func:`collect_figures`), one maker per measurement, as PNG
bytes (:class:`Figure`, :mod:`.render`): the ``simulate`` figures in :mod:`.simulate_figures`,
those of ``mixing`` (coalescence times against the paper-000 orders, docs/model.md §6),
``fluctuations`` (moments against the limit diffusions, §8) and ``meanfield`` (π(i) and the
refined ``π(i) + V_i/n``, §3) here; the helpers that read a results table's cells are in
:mod:`.cells`.  Every public name of those modules is importable from here too."""

from __future__ import annotations

import numpy as np

from ..result import pyplot as _plt
from ..stats import mean_stderr
from .cells import LAW_KEYS, _json, _num, _param_label, _points, law_label
from .render import Figure, _finish
from .simulate_figures import MAX_PROFILE_PANELS, _compare_figure, _max_queue_figure, _profile_figure

__all__ = ["Figure", "collect_figures", "LAW_KEYS", "law_label", "MAX_PROFILE_PANELS", "FLUCT_MOMENTS"]


def _mixing_figure(points) -> Figure | None:
    xs, ys, yerr, ups, los, cens = [], [], [], [], [], []
    for rs in points.values():
        r = rs[0]
        lower = _num(r.get("bound_lower_good_steps")) or _num(r.get("bound_lower_steps"))
        upper = _num(r.get("bound_upper_steps"))
        vals = [
            _num(t[0] if isinstance(t := _json(x.get("taus")), list) and t else x.get("coalescence_steps_mean"))
            for x in rs
        ]
        taus = [v for v in vals if v is not None]
        censored = len(vals) - len(taus)
        if lower is None or not taus:
            continue
        m, se = mean_stderr(taus)
        xs.append(lower)
        ys.append(m)
        yerr.append(0.0 if se is None else 2 * se)
        ups.append(upper)
        los.append(_num(r.get("bound_lower_steps")) or lower)
        cens.append(censored)
    if not xs:
        return None
    fig, ax = _plt().subplots(figsize=(5.8, 4.4))
    ys_a, err_a = np.asarray(ys), np.asarray(yerr)
    low = np.minimum(err_a, ys_a * 0.999)  # log axis: bars stop above 0
    ax.errorbar(xs, ys, yerr=[low, err_a], fmt="o", capsize=3, label="mean coalescence time (±2 se)")
    order = np.argsort(xs)
    xa = np.asarray(xs)[order]
    ax.plot(xa, np.asarray(los, dtype=float)[order], "k--", lw=1, label="lower order (start's own, constant 1)")
    if all(u is not None for u in ups):
        ax.plot(xa, np.asarray(ups, dtype=float)[order], "r:", lw=1.2, label="upper order k d^(k−1) n log n")
    for x, y, c in zip(xs, ys, cens):
        if c:
            ax.annotate(f"{c} censored", (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set(xscale="log", yscale="log")
    return _finish(
        fig,
        ax,
        xlabel="d^(k−1) n  (steps)",
        ylabel="coalescence time (steps)",
        which="both",
        title="Mixing: coalescence time against the paper-000 orders",
        name="mixing",
        heading="Mixing times against the bounds",
        caption="Coalescence time of the sorted coupling with a stationary copy (docs/model.md §2), mean over "
        "replications, against the orders of paper 000 (docs/model.md §6, constants taken as 1): "
        "Ω(d^(k−1) n) and O(k d^(k−1) n log n) steps from a good state. Censored replications "
        "(no coalescence within the budget) are left out of the mean and counted.",
    )


FLUCT_MOMENTS = ("mean_z1", "mean_z2", "var_z1", "var_z2", "cov_z1z2")


def _fluct_value(r: dict, group: str, m: str):
    for key in (f"{group}_{m}", f"{group}_{m}_value", f"{group}.{m}"):
        if key in r:
            return _num(r[key])
    return None


def _fluct_figure(points) -> Figure | None:
    sims, lims, errs, names, lna_x, lna_y, lna_e = [], [], [], [], [], [], []
    short = 0
    for rs in points.values():
        r = rs[0]
        for m in FLUCT_MOMENTS:
            lna = _fluct_value(r, "lna", m)
            lim = _fluct_value(r, "limit", m)
            vals = [_fluct_value(x, "sim", m) for x in rs]
            mean, se = mean_stderr(vals)
            if se is None and len(rs) == 1:
                se = _num(r.get(f"sim_stderr_{m}")) or _num(r.get(f"sim_{m}_stderr"))
            if any(x.get("sim_error_bars_adequate") is False for x in rs):
                se = None  # the run is too short to know its error: no error bar (drawn as ×)
                short += 1
            if lna is not None and mean is not None:
                lna_x.append(lna)
                lna_y.append(mean)
                lna_e.append(0.0 if se is None else 2 * se)
            if lim is None or mean is None:
                continue
            sims.append(mean)
            lims.append(lim)
            errs.append(0.0 if se is None else 2 * se)
            names.append(f"({r.get('regime')}) {m}" + (" (too short to know)" if se is None else ""))
    if not sims:
        return None
    # the points are numbered on the plot and named in a key beside it: names written at the
    # points overlapped wherever two moments had nearly the same values
    fig, (ax, key) = _plt().subplots(
        1, 2, figsize=(8.3, max(4.4, 0.6 + 0.14 * len(names))), gridspec_kw={"width_ratios": [5.5, 2.8]}
    )
    ax.errorbar(lims, sims, yerr=errs, fmt="o", capsize=3, label="simulated (±2 se) against limit (derived)")
    if lna_x:
        lab = "simulated against finite-n LNA at x^n"
        ax.errorbar(lna_x, lna_y, yerr=lna_e, fmt="s", mfc="none", capsize=2, alpha=0.7, label=lab)
    lo = min(min(lims + lna_x), min(s - e for s, e in zip(sims, errs)))
    hi = max(max(lims + lna_x), max(s + e for s, e in zip(sims, errs)))
    pad = 0.1 * (hi - lo or 1.0)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], "k--", lw=1, label="simulated = limit")
    ax.set(xlim=(lo - 2 * pad, hi + 2 * pad), ylim=(lo - 2 * pad, hi + 2 * pad))
    _place_numbers(fig, ax, lims, sims)
    key.axis("off")
    lines = [
        f"{j + 1}  {nm}" + (" †" if err == 0.0 and "too short" in nm else "")
        for j, (nm, err) in enumerate(zip(names, errs))
    ]
    lines = [ln.replace(" (too short to know)", "") for ln in lines]
    if short:
        lines += ["", "† too short to know:", "   no error bar"]
    key.text(0.0, 1.0, "\n".join(lines), va="top", ha="left", fontsize=7, family="monospace", transform=key.transAxes)
    fig.tight_layout()
    return _finish(
        fig,
        ax,
        xlabel="limit diffusion (derived) / linear noise approximation",
        ylabel="simulated, scaled √n (G − x^n)",
        title="Fluctuation moments against the limits",
        name="fluctuations",
        heading="Fluctuation moments against the limits",
        caption="Stationary means, variances and covariance of the scaled centred process (paper 002, "
        "docs/model.md §8) against those of the limit diffusion of its regime (limits derived; closed "
        "forms in regime (a), simulated SDE in (b), (c)), and against the finite-n linear noise "
        "approximation at the centre x^n (open squares)."
        + " The points are numbered; the key beside the plot names each one's regime and moment."
        + (
            ' Points marked † in the key ("too short to know") come from runs too short to estimate '
            "their own error: they have no error bar."
            if short
            else ""
        ),
    )


def _place_numbers(fig, ax, xs, ys) -> None:
    """Number the points 1, 2, … beside them, each label where it overlaps no label placed before
    (tried at growing distances around its point)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    taken: list = []
    offsets = [
        (dx * r, dy * r)
        for r in (4, 9, 14, 20)
        for dx, dy in ((1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (0, 1), (-1, 0), (0, -1))
    ]
    for j, (x, y) in enumerate(zip(xs, ys)):
        label = None
        for dx, dy in offsets:
            if label is not None:
                label.remove()
            ha = "left" if dx >= 0 else "right"
            va = "bottom" if dy >= 0 else "top"
            label = ax.annotate(
                str(j + 1), (x, y), fontsize=7, xytext=(dx, dy), textcoords="offset points", ha=ha, va=va
            )
            box = label.get_window_extent(renderer)
            if not any(box.overlaps(b) for b in taken):
                break
        if label is not None:
            taken.append(label.get_window_extent(renderer))


def _meanfield_figure(points) -> Figure | None:
    fig, ax = _plt().subplots(figsize=(5.8, 4.2))
    any_ = False
    for rs in list(points.values())[:8]:
        r = rs[0]
        pi = _json(r.get("fixed_point"))
        if not isinstance(pi, list) or not pi:
            continue
        pi = np.asarray(pi, dtype=float)
        i = np.arange(1, len(pi) + 1)
        (line,) = ax.semilogy(i, np.where(pi > 0, pi, np.nan), "o-", ms=3, label=f"π: {_param_label(r)}")
        ref = _json(r.get("refined_u"))
        if isinstance(ref, list) and ref:
            ref = np.asarray(ref, dtype=float)
            ax.semilogy(
                np.arange(1, len(ref) + 1),
                np.where(ref > 0, ref, np.nan),
                "x--",
                color=line.get_color(),
                ms=4,
                label="π + V/n (refined)",
            )
        any_ = True
    if not any_:
        _plt().close(fig)
        return None
    ax.set_ylim(1e-12, 2)
    return _finish(
        fig,
        ax,
        xlabel="level i",
        ylabel="u_i",
        which="both",
        legend_size=7,
        title="Mean-field fixed point and refined mean field",
        name="meanfield",
        heading="Mean field and refined mean field",
        caption="Fixed point π(i) (docs/model.md §3) and, where n is given, the refined mean field π(i) + V_i/n "
        "(Gast–Van Houdt 2018, docs/model.md §3).",
    )


def collect_figures(rows: list[dict]) -> list[Figure]:
    """The figures for the measurements present in ``rows`` (none for absent ones).

    Parameters
    ----------
    rows : list of dict
        Rows of a results table (:func:`supermarket.sweep.table_rows`).

    Returns
    -------
    list of Figure
        Each with a ``measurement`` attribute; ``theory`` rows give none.

    Examples
    --------
    >>> import tempfile, pathlib; from supermarket.sweep import parse_sweep, run_sweep
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "out"
    >>> toml = '[[run]]\\nmeasurement = "meanfield"\\nn = 50\\nd = 2\\nload = 0.9\\n'
    >>> _ = run_sweep(parse_sweep(toml), out, workers=1)
    >>> from supermarket.sweep import read_results, table_rows
    >>> [f.name for f in collect_figures(table_rows(read_results(out)))]
    ['meanfield']
    >>> import shutil; shutil.rmtree(out.parent)
    """
    figs: list[Figure] = []
    by_meas: dict[str, list[dict]] = {}
    for r in rows:
        by_meas.setdefault(r["measurement"], []).append(r)
    makers = {
        "simulate": (_compare_figure, _profile_figure, _max_queue_figure),
        "mixing": (_mixing_figure,),
        "fluctuations": (_fluct_figure,),
        "meanfield": (_meanfield_figure,),
    }
    for meas, fns in makers.items():
        if meas not in by_meas:
            continue
        pts = _points(by_meas[meas])
        for fn in fns:
            fig = fn(pts)
            if fig is not None:
                fig.measurement = meas  # type: ignore[attr-defined]
                figs.append(fig)
    return figs
