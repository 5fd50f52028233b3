"""Reports of a sweep directory: one self-contained HTML file, or Markdown with PNGs.

:func:`build_report` reads ``results.parquet`` and ``sweep.json`` (written by
:mod:`supermarket.sweep`) and writes the sweep's tables and, for each measurement present,
the figures a reader of the papers expects:

- ``simulate``: the time-averaged profile ``E[u_i]`` against the mean-field fixed point
  ``π(i)`` (docs/model.md §3) and the linearised profile ``1 − q̃_i`` [derived] (docs/model.md §4);
  the equilibrium maximum queue length against ``k_{λ,d}`` over the grid (docs/model.md §4);
- ``mixing``: coalescence times against the paper-000 orders ``d^{k−1} n`` and
  ``k d^{k−1} n log n`` (docs/model.md §6, constants 1);
- ``fluctuations``: simulated stationary moments against the limit diffusion's (docs/model.md §8,
  limits derived);
- ``meanfield``: ``π(i)`` and the refined ``π(i) + V_i/n`` (docs/model.md §3).

Statistics over replications are the mean and its standard error across replications.
Figures are rendered with matplotlib's Agg backend; in HTML they are embedded as base64
PNG, so the file can be mailed or archived alone.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections import OrderedDict
from pathlib import Path

import numpy as np

from . import theory as th
from ._results import mean_stderr
from .sweep import RESULTS_FILE, read_results, read_sidecar, table_rows
from .sweep.storage import check_output_file, write_output
from .sweep.values import check_choice

__all__ = ["build_report", "Figure", "collect_figures"]

MAX_PROFILE_PANELS = 9
MAX_TABLE_ROWS = 200


class Figure:
    """A rendered figure: ``name`` (file stem), ``title``, ``caption`` and PNG bytes.

    Parameters
    ----------
    name, title, caption : str
    png : bytes

    Examples
    --------
    >>> Figure("mixing", "Mixing", "Coalescence times.", b"").name
    'mixing'
    """

    def __init__(self, name: str, title: str, caption: str, png: bytes):
        self.name, self.title, self.caption, self.png = name, title, caption, png


# =========================================================================== data helpers
def _json(v):
    if v is None:
        return None
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def _num(v):
    """A float from a cell (numbers, numeric strings); None for censored/missing."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v) if math.isfinite(float(v)) else None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _points(rows: list[dict]) -> "OrderedDict[int, list[dict]]":
    """Rows grouped by grid point (successful rows only), in grid order."""
    out: OrderedDict = OrderedDict()
    for r in sorted(rows, key=lambda r: r["task_index"]):
        if r.get("status") == "ok":
            out.setdefault(r["point"], []).append(r)
    return out


def _param_label(r: dict, keys=("n", "d", "load")) -> str:
    parts = []
    for k in keys:
        if r.get(k) is not None:
            v = r[k]
            parts.append(f"{'λ' if k == 'load' else k}={v:.6g}" if isinstance(v, float) else f"{k}={v}")
    return ", ".join(parts)


def _k(d, lam):
    try:
        return th.k_lambda_d(int(d), float(lam)) if d and int(d) >= 2 else None
    except (TypeError, ValueError):
        return None


# =========================================================================== figures
def _fig_to_png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return buf.getvalue()


def _finish(fig, ax, *, xlabel, ylabel, title, name, heading, caption, which="major", legend_size=8) -> Figure:
    """Label, grid, legend and title one-axis figures the same way; render to a :class:`Figure`."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, which=which)
    ax.legend(fontsize=legend_size)
    ax.set_title(title, fontsize=10)
    return Figure(name, heading, caption, _fig_to_png(fig))


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _profile_figure(points) -> Figure | None:
    plt = _plt()
    items = []
    for rs in points.values():
        profiles = [_json(r.get("u_mean")) for r in rs]
        profiles = [np.asarray(p, dtype=float) for p in profiles if isinstance(p, list) and p]
        if not profiles:
            continue
        L = max(len(p) for p in profiles)
        mat = np.zeros((len(profiles), L))
        for j, p in enumerate(profiles):
            mat[j, :len(p)] = p
        mean, se = mean_stderr(mat)
        if se is None:
            ses = [_json(r.get("u_stderr")) for r in rs]
            if ses and isinstance(ses[0], list):
                se = np.zeros(L)
                se[:len(ses[0])] = np.asarray([x if x is not None else 0.0 for x in ses[0]], dtype=float)
        items.append((rs[0], mean, se))
    if not items:
        return None
    items = items[:MAX_PROFILE_PANELS]
    cols = min(3, len(items))
    rows_ = math.ceil(len(items) / cols)
    fig, axes = plt.subplots(rows_, cols, figsize=(4.2 * cols, 3.3 * rows_), squeeze=False)
    for ax in axes.flat[len(items):]:
        ax.set_visible(False)
    for ax, (r, mean, se) in zip(axes.flat, items):
        i = np.arange(1, len(mean) + 1)
        ax.errorbar(i, mean, yerr=None if se is None else 2 * se, fmt="o", ms=4, capsize=2,
                    label="simulated E[u_i] (±2 se)")
        lam = float(r["load"])
        pi = th.fixed_point(int(r["d"]), lam, len(mean))
        ax.plot(i, pi, "s--", ms=3, mfc="none", label="π(i) mean field")
        k = _k(r["d"], lam)
        if k is not None:
            q = th.linearised_q(int(r["d"]), lam, k)
            ax.plot(np.arange(1, k + 1), 1.0 - q, "x:", label="1 − q̃_i linearised (derived)")
        ax.set_title(_param_label(r, ("n", "d", "load", "time_mode")), fontsize=9)
        ax.set_xlabel("level i")
        ax.set_ylabel("u_i")
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=7)
    fig.suptitle("Time-averaged profile against π and the linearised profile", fontsize=11)
    fig.tight_layout()
    return Figure("profiles", "Profiles against π and the linearised prediction",
                  "Simulated time-averaged profile E[u_i] (mean over replications, error bars 2 standard "
                  "errors) against the mean-field fixed point π(i) = λ^((d^i−1)/(d−1)) (docs/model.md §3) and the "
                  "linearised profile 1 − q̃_i, q̃_i = (1−λ)((λd)^i−1)/(λd−1), derived (docs/model.md §4).",
                  _fig_to_png(fig))


def _max_summary(rs):
    """Most frequent and largest observed maximum queue length over a point's replications."""
    agg: dict[int, float] = {}
    for r in rs:
        dist = _json(r.get("max_queue_dist"))
        if isinstance(dist, dict):
            for length, frac in dist.items():
                try:
                    agg[int(length)] = agg.get(int(length), 0.0) + float(frac) / len(rs)
                except (TypeError, ValueError):
                    continue
    if not agg:
        return None
    lengths = sorted(agg)
    mode = max(lengths, key=lambda x: agg[x])
    seen = [x for x in lengths if agg[x] > 0]
    return mode, (min(seen) if seen else mode), (max(seen) if seen else mode), agg


def _max_queue_figure(points) -> Figure | None:
    plt = _plt()
    xs, modes, lo, hi, labels = [], [], [], [], []
    for rs in points.values():
        r = rs[0]
        k = _k(r["d"], r["load"])
        ms = _max_summary(rs)
        if k is None or ms is None:
            continue
        mode, mn, mx, _ = ms
        xs.append(k)
        modes.append(mode)
        lo.append(mode - mn)
        hi.append(mx - mode)
        labels.append(_param_label(r))
    if not xs:
        return None
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    jitter = (np.arange(len(xs)) % 5 - 2) * 0.04
    ax.errorbar(np.asarray(xs) + jitter, modes, yerr=[lo, hi], fmt="o", capsize=3,
                label="most frequent maximum (bars: range observed)")
    top = max(max(xs), max(m + h for m, h in zip(modes, hi))) + 1
    ax.plot([0, top], [0, top], "k--", lw=1, label="maximum = k")
    ax.plot([0, top], [1, top + 1], ":", color="grey", lw=1, label="maximum = k + 1")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top + 1)
    return _finish(fig, ax, xlabel="k_(λ,d) = ⌈log(1/(1−λ))/log d⌉", ylabel="maximum queue length",
                   title="Equilibrium maximum queue length against k_(λ,d)", name="max_queue",
                   heading="Maximum queue length against k_(λ,d)", caption=
                  "For each grid point, the most frequent time-averaged maximum queue length (bars: the "
                  "smallest and largest maxima seen) against k_(λ,d) (paper 000, docs/model.md §4). The paper "
                  "predicts k, or k or k+1 when 1/(1−λ) is a power of d.")


def _mixing_figure(points) -> Figure | None:
    plt = _plt()
    xs, ys, yerr, ups, los, cens = [], [], [], [], [], []
    for rs in points.values():
        r = rs[0]
        lower = _num(r.get("bound_lower_good_steps")) or _num(r.get("bound_lower_steps"))
        upper = _num(r.get("bound_upper_steps"))
        taus = []
        censored = 0
        for x in rs:
            t = _json(x.get("taus"))
            t = t[0] if isinstance(t, list) and t else x.get("coalescence_steps_mean")
            v = _num(t)
            if v is None:
                censored += 1
            else:
                taus.append(v)
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
    fig, ax = plt.subplots(figsize=(5.8, 4.4))
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
    ax.set_xscale("log")
    ax.set_yscale("log")
    return _finish(fig, ax, xlabel="d^(k−1) n  (steps)", ylabel="coalescence time (steps)", which="both",
                   title="Mixing: coalescence time against the paper-000 orders", name="mixing",
                   heading="Mixing times against the bounds", caption=
                  "Coalescence time of the sorted coupling with a stationary copy (docs/model.md §2), mean over "
                  "replications, against the orders of paper 000 (docs/model.md §6, constants taken as 1): "
                  "Ω(d^(k−1) n) and O(k d^(k−1) n log n) steps from a good state. Censored replications "
                  "(no coalescence within the budget) are left out of the mean and counted.")


FLUCT_MOMENTS = ("mean_z1", "mean_z2", "var_z1", "var_z2", "cov_z1z2")


def _fluct_value(r: dict, group: str, m: str):
    for key in (f"{group}_{m}", f"{group}_{m}_value", f"{group}.{m}"):
        if key in r:
            return _num(r[key])
    return None


def _fluct_figure(points) -> Figure | None:
    plt = _plt()
    sims, lims, errs, names, lna_x, lna_y, lna_e = [], [], [], [], [], [], []
    for rs in points.values():
        r = rs[0]
        for m in FLUCT_MOMENTS:
            lna = _fluct_value(r, "lna", m)
            lim = _fluct_value(r, "limit", m)
            vals = [_fluct_value(x, "sim", m) for x in rs]
            mean, se = mean_stderr(vals)
            if se is None and len(rs) == 1:
                se = _num(r.get(f"sim_stderr_{m}")) or _num(r.get(f"sim_{m}_stderr"))
            if lna is not None and mean is not None:
                lna_x.append(lna)
                lna_y.append(mean)
                lna_e.append(0.0 if se is None else 2 * se)
            if lim is None or mean is None:
                continue
            sims.append(mean)
            lims.append(lim)
            errs.append(0.0 if se is None else 2 * se)
            names.append(f"({r.get('regime')}) {m}")
    if not sims:
        return None
    fig, ax = plt.subplots(figsize=(5.5, 4.4))
    ax.errorbar(lims, sims, yerr=errs, fmt="o", capsize=3, label="simulated (±2 se) against limit (derived)")
    if lna_x:
        ax.errorbar(lna_x, lna_y, yerr=lna_e, fmt="s", mfc="none", capsize=2, alpha=0.7,
                    label="simulated against finite-n LNA at x^n")
    lo = min(min(lims + lna_x), min(s - e for s, e in zip(sims, errs)))
    hi = max(max(lims + lna_x), max(s + e for s, e in zip(sims, errs)))
    pad = 0.1 * (hi - lo or 1.0)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], "k--", lw=1, label="simulated = limit")
    for x, y, nm in zip(lims, sims, names):
        ax.annotate(nm, (x, y), fontsize=6, xytext=(3, -8), textcoords="offset points")
    return _finish(fig, ax, xlabel="limit diffusion (derived) / linear noise approximation",
                   ylabel="simulated, scaled √n (G − x^n)", title="Fluctuation moments against the limits",
                   name="fluctuations", heading="Fluctuation moments against the limits", caption=
                  "Stationary means, variances and covariance of the scaled centred process (paper 002, "
                  "docs/model.md §8) against those of the limit diffusion of its regime (limits derived; closed "
                  "forms in regime (a), simulated SDE in (b), (c)), and against the finite-n linear noise "
                  "approximation at the centre x^n (open squares).")


def _meanfield_figure(points) -> Figure | None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.8, 4.2))
    any_ = False
    for j, rs in enumerate(list(points.values())[:8]):
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
            ax.semilogy(np.arange(1, len(ref) + 1), np.where(ref > 0, ref, np.nan), "x--",
                        color=line.get_color(), ms=4, label="π + V/n (refined)")
        any_ = True
    if not any_:
        plt.close(fig)
        return None
    ax.set_ylim(1e-12, 2)
    return _finish(fig, ax, xlabel="level i", ylabel="u_i", which="both", legend_size=7,
                   title="Mean-field fixed point and refined mean field", name="meanfield",
                   heading="Mean field and refined mean field", caption=
                  "Fixed point π(i) (docs/model.md §3) and, where n is given, the refined mean field π(i) + V_i/n "
                  "(Gast–Van Houdt 2018, docs/model.md §3).")


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
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "out"; _ = run_sweep(parse_sweep('[[run]]\\nmeasurement = "meanfield"\\nn = 50\\nd = 2\\nload = 0.9\\n'), out, workers=1)
    >>> from supermarket.sweep import read_results, table_rows
    >>> [f.name for f in collect_figures(table_rows(read_results(out)))]
    ['meanfield']
    >>> import shutil; shutil.rmtree(out.parent)
    """
    figs: list[Figure] = []
    by_meas: dict[str, list[dict]] = {}
    for r in rows:
        by_meas.setdefault(r["measurement"], []).append(r)
    makers = {"simulate": (_profile_figure, _max_queue_figure), "mixing": (_mixing_figure,),
              "fluctuations": (_fluct_figure,), "meanfield": (_meanfield_figure,)}
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


# =========================================================================== tables
SUMMARY_COLUMNS = {
    "simulate": ("u_mean", "mean_queue_length", "good_set_fraction", "events_per_second"),
    "mixing": ("coalescence_steps_mean", "censored", "bound_lower_steps", "bound_upper_steps", "tmix_steps"),
    "fluctuations": tuple(f"sim_{m}" for m in FLUCT_MOMENTS) + tuple(f"limit_{m}" for m in FLUCT_MOMENTS),
    "meanfield": ("mean_queue_length", "refined_sum_V", "refined_mean_queue_length", "levels"),
    "theory": ("k", "k_hypothesis", "mean_queue_length", "mixing_steps_upper", "mixing_steps_lower",
               "slow_rate", "theorem_1_2_applies"),
}


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.6g}"
    parsed = _json(v)
    if isinstance(parsed, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in parsed):
        s = ", ".join(f"{x:.4g}" for x in parsed[:8]) + (", …" if len(parsed) > 8 else "")
        return f"[{s}]"
    s = str(v)
    return s if len(s) <= 80 else s[:77] + "…"


def _numeric_lists(vals) -> bool:
    parsed = [_json(v) for v in vals]
    return bool(parsed) and all(isinstance(p, list) and p and all(isinstance(x, (int, float)) for x in p)
                                for p in parsed)


def _summary_table(meas: str, rows: list[dict], params: list[str]) -> tuple[list[str], list[list[str]]]:
    """One line per grid point: its parameters, replications, and mean ± se of the main values."""
    cols = [c for c in SUMMARY_COLUMNS.get(meas, ()) if any(c in r for r in rows)]
    header = params + ["replications ok"] + [f"{c} (mean)" if c == "u_mean" else c for c in cols]
    body = []
    for rs in _points(rows).values():
        r = rs[0]
        line = [_fmt(r.get(p)) for p in params] + [str(len(rs))]
        for c in cols:
            vals = [x.get(c) for x in rs]
            nums = [_num(v) for v in vals]
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals if v is not None) \
                    and any(n is not None for n in nums) and len(rs) > 1:
                m, se = mean_stderr(nums)
                same = len({n for n in nums if n is not None}) == 1
                line.append(f"{m:.6g} ± {se:.2g}" if se is not None and not same else f"{m:.6g}")
            elif _numeric_lists(vals):
                lists = [np.asarray(_json(v), dtype=float) for v in vals]
                mat = np.zeros((len(lists), max(len(x) for x in lists)))
                for j, x in enumerate(lists):
                    mat[j, :len(x)] = x
                line.append(_fmt(mat.mean(axis=0).tolist()))
            else:
                line.append(_fmt(vals[0]))
        body.append(line)
    return header, body


def _param_columns(rows: list[dict], meas: str, sidecar: dict) -> list[str]:
    keys: list[str] = []
    for p in sidecar.get("points", []):
        if p.get("measurement") == meas:
            keys += [k for k in p.get("params", {}) if k not in keys]
    if not keys:
        keys = [k for k in ("n", "d", "load") if any(k in r for r in rows)]
    return keys


def _split_params(rows: list[dict], keys: list[str]) -> tuple[list[str], dict]:
    """Parameters that vary over the measurement's rows (shown as columns; n, d, λ always)
    and those that are the same everywhere (shown once above the table)."""
    varying, fixed = [], {}
    for k in keys:
        vals = {json.dumps(r.get(k)) for r in rows}
        if k in ("n", "d", "load", "regime") or len(vals) > 1:
            varying.append(k)
        elif rows and rows[0].get(k) is not None:
            fixed[k] = rows[0].get(k)
    return varying, fixed


# =========================================================================== writers
def _html_table(header, body) -> str:
    h = "".join(f"<th>{html.escape(c)}</th>" for c in header)
    b = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in line) + "</tr>" for line in body[:MAX_TABLE_ROWS])
    more = f"<p>… {len(body) - MAX_TABLE_ROWS} more rows in results.parquet</p>" if len(body) > MAX_TABLE_ROWS else ""
    return f"<table><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table>{more}"


def _md_table(header, body) -> str:
    def esc(s):
        return s.replace("|", "\\|")
    lines = ["| " + " | ".join(esc(c) for c in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(esc(c) for c in line) + " |" for line in body[:MAX_TABLE_ROWS]]
    return "\n".join(lines)


CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:12px;margin:1em 0}th,td{border:1px solid #ccc;padding:3px 6px;
text-align:right}th{background:#f3f3f3}figure{margin:1.5em 0}figcaption{font-size:13px;color:#444;max-width:800px}
img{max-width:100%;border:1px solid #eee}pre{background:#f7f7f7;padding:.7em;font-size:12px;overflow:auto}
.failed{color:#a00}"""


def _meta_lines(side: dict, rows: list[dict]) -> list[tuple[str, str]]:
    runs = side.get("runs", [])
    ok = sum(1 for r in rows if r.get("status") == "ok")
    return [
        ("sweep", str(side.get("sweep_name"))),
        ("sweep file", str(side.get("sweep_file"))),
        ("sweep hash (canonical)", str(side.get("sweep_sha256"))),
        ("seed", str(side.get("seed"))),
        ("tasks", f"{len(rows)} of {side.get('tasks_total', '?')} ({ok} ok, {len(rows) - ok} failed)"),
        ("status", str(side.get("status"))),
        ("package version", str(side.get("package_version"))),
        ("git commit", str(side.get("git_commit"))),
        ("runs", "; ".join(f"{r.get('started')} {r.get('backend')} ran {r.get('to_run')} "
                           f"({r.get('wall_seconds', float('nan')):.1f} s)" for r in runs)),
    ]


def build_report(out_dir, path, *, fmt: str = "html") -> str:
    """Write the report of the sweep in ``out_dir`` to ``path`` (``fmt``: "html" or "md").

    HTML: one self-contained file, figures embedded as base64 PNG.  Markdown: the ``.md``
    file with the PNG figures beside it (``<stem>_<figure>.png``).  Returns the path.

    Parameters
    ----------
    out_dir : str or path-like
        A sweep directory (finished, or partial: the finished tasks are reported).
    path : str or path-like
        The report file; its directory must exist.
    fmt : {"html", "md"}, default "html"

    Returns
    -------
    str
        ``path``.

    Raises
    ------
    ValueError
        A bad ``fmt``.
    OutputError, SweepDirError
        ``path`` cannot be written (checked before any work), or ``out_dir`` is not a sweep
        directory.

    Examples
    --------
    >>> import tempfile, pathlib; from supermarket.sweep import parse_sweep, run_sweep
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "out"; _ = run_sweep(parse_sweep('[[run]]\\nmeasurement = "theory"\\nn = 100\\nd = 2\\nload = 0.9\\n'), out, workers=1)
    >>> p = build_report(out, out.parent / "r.md", fmt="md")
    >>> "## theory" in pathlib.Path(p).read_text()  # theory rows: a table, no figure
    True
    >>> import shutil; shutil.rmtree(out.parent)
    """
    fmt = check_choice("fmt", fmt, ("html", "md"))
    path = check_output_file(path, f"--{fmt}")  # before any work: a missing or unwritable place fails now
    out_dir = Path(out_dir)
    side = read_sidecar(out_dir)
    rows = table_rows(read_results(out_dir, partial=True))
    partial = not (out_dir / RESULTS_FILE).exists()
    figs = collect_figures(rows)
    measurements = list(OrderedDict.fromkeys(r["measurement"] for r in rows))
    failed = [r for r in rows if r.get("status") != "ok"]
    title = f"Sweep report: {side.get('sweep_name')}" + (" (partial: sweep not finished)" if partial else "")
    if fmt == "html":
        parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
                 f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>"]
        parts.append(_html_table(["", ""], [[k, v] for k, v in _meta_lines(side, rows)]))
        for meas in measurements:
            mrows = [r for r in rows if r["measurement"] == meas]
            parts.append(f"<h2>{html.escape(meas)}</h2>")
            cols, fixed = _split_params(mrows, _param_columns(mrows, meas, side))
            if fixed:
                parts.append("<p>Same for every task: " + html.escape(", ".join(
                    f"{k} = {_fmt(v)}" for k, v in fixed.items())) + "</p>")
            header, body = _summary_table(meas, mrows, cols)
            parts.append(_html_table(header, body))
            for f in figs:
                if getattr(f, "measurement", None) == meas:
                    b64 = base64.b64encode(f.png).decode("ascii")
                    parts.append(f"<figure><img alt='{html.escape(f.title)}' data-figure='{f.name}' "
                                 f"src='data:image/png;base64,{b64}'><figcaption><b>{html.escape(f.title)}.</b> "
                                 f"{html.escape(f.caption)}</figcaption></figure>")
        if failed:
            parts.append("<h2 class='failed'>Failed tasks</h2>")
            parts.append(_html_table(["task", "measurement", "error"],
                                     [[r["task_id"], r["measurement"], str(r.get("error"))] for r in failed]))
        parts.append("<h2>Sweep file</h2><pre>" + html.escape(side.get("sweep_text", "")) + "</pre>")
        parts.append("</body></html>")
        return write_output(path, "\n".join(parts), "--html")
    # Markdown with PNGs beside it
    md = [f"# {title}", ""]
    md += [f"- **{k}**: {v}" for k, v in _meta_lines(side, rows)]
    for meas in measurements:
        mrows = [r for r in rows if r["measurement"] == meas]
        cols, fixed = _split_params(mrows, _param_columns(mrows, meas, side))
        header, body = _summary_table(meas, mrows, cols)
        md += ["", f"## {meas}", ""]
        if fixed:
            md += ["Same for every task: " + ", ".join(f"{k} = {_fmt(v)}" for k, v in fixed.items()), ""]
        md += [_md_table(header, body), ""]
        for f in figs:
            if getattr(f, "measurement", None) == meas:
                png = path.with_name(f"{path.stem}_{f.name}.png")
                write_output(png, f.png, "--md")
                md += [f"![{f.title}]({png.name})", "", f"*{f.title}.* {f.caption}", ""]
    if failed:
        md += ["", "## Failed tasks", "", _md_table(["task", "measurement", "error"],
                                                   [[r["task_id"], r["measurement"], str(r.get("error"))]
                                                    for r in failed])]
    md += ["", "## Sweep file", "", "```toml", side.get("sweep_text", "").rstrip(), "```", ""]
    return write_output(path, "\n".join(md), "--md")



