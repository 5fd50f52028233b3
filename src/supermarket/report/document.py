"""The sweep report (:func:`build_report`): per-measurement summary tables (mean ± standard error
over replications), the run's metadata, written as one HTML file or Markdown with PNGs beside it."""

from __future__ import annotations

import base64
import html
import json
import math
import re
from collections import OrderedDict
from pathlib import Path

import numpy as np

from ..simulation.render import RARE, no_error_bar_reason
from ..stats import mean_stderr
from ..sweep import RESULTS_FILE, read_results, read_sidecar, table_rows
from ..sweep.storage import check_not_sweep_file, check_output_file, write_output
from ..sweep.values import check_choice
from .cells import _json, _num, _padded, _points
from .figures import FLUCT_MOMENTS, collect_figures

__all__ = ["build_report"]

MAX_TABLE_ROWS = 200


SUMMARY_COLUMNS = {
    # the variance reductions of the control variates (docs/model.md §9.1): per level and for the
    # mean queue length, the median over the grid point's replications (_ratio_cell)
    "simulate": (
        "u_mean",
        "mean_queue_length",
        "mean_sojourn_time",
        "good_set_fraction",
        "events_per_second",
        "variance_reduction_u_mean",
        "variance_reduction_mean_queue_length",
    ),
    # a sweep task couples one pair: its "tmix_steps" (the 0.75-quantile of τ over the task's
    # pairs) is that pair's τ again, not a bound on t_mix, so it is not shown
    "mixing": ("coalescence_steps_mean", "censored", "bound_lower_steps", "bound_upper_steps"),
    "fluctuations": tuple(f"sim_{m}" for m in FLUCT_MOMENTS) + tuple(f"limit_{m}" for m in FLUCT_MOMENTS),
    "meanfield": ("mean_queue_length", "refined_sum_V", "refined_mean_queue_length", "levels"),
    "theory": (
        "k",
        "k_hypothesis",
        "mean_queue_length",
        "mixing_steps_upper",
        "mixing_steps_lower",
        "slow_rate",
        "theorem_1_2_applies",
    ),
}


# column headers that say what a value is where the stored name does not
HEADERS = {
    "mixing": {"coalescence_steps_mean": "coalescence steps (mean over the pairs, one per task)"},
    "simulate": {
        "variance_reduction_u_mean": "variance reduction E[u_i] (median)",
        "variance_reduction_mean_queue_length": "variance reduction, mean queue length (median)",
    },
}

# columns of ratios (a variance reduction per replication): summarized by their median, not mean ± se
RATIO_PREFIX = "variance_reduction_"
NO_RATIO = "—"

# what a table shows instead of "mean ± se" when a row's own run distrusts the value
TOO_SHORT = "too short to know"

# (column prefix or name, flag): the row's flag that says the run could not know the column's error
DISTRUST_FLAGS = {
    "simulate": (
        ("mean_queue_length", "mean_queue_length_reliable"),
        ("mean_sojourn_time", "mean_queue_length_reliable"),  # the same run's error, by Little's law
        ("good_set_fraction", "good_set_fraction_reliable"),
    ),
    "fluctuations": (("sim_", "sim_error_bars_adequate"),),
}

NOTES = {
    "mixing": (
        "Each sweep task couples one pair from the start with a stationary copy: the column is the "
        "mean coalescence time of the task's pairs, not t_mix(1/4). The bound t_mix(1/4) ≤ the "
        "0.75-quantile of the coalescence time needs many pairs: supermarket mixing --replications 100."
    ),
}


# per-class columns of a simulate row (server classes, docs/sweep.md): shown after the whole system's
CLASS_COLUMN = re.compile(r"class(\d+)_(mean_queue_length|sojourn_mean)")
# the engines of a service law or server classes whose rows hold a trusted error of their own
COUNT_LAW_ENGINES = ("phase", "classes")
# the event engine's name in rows ("event" in the stores of earlier versions)
EVENT_ENGINES = ("events", "event")


def _class_columns(rows: list[dict]) -> list[str]:
    """The per-class columns present, class by class.

    >>> _class_columns([{"class2_sojourn_mean": 1.0, "class1_mean_queue_length": 1.0, "class1_sojourn_mean": 2.0}])
    ['class1_mean_queue_length', 'class1_sojourn_mean', 'class2_sojourn_mean']
    """
    found = {k: CLASS_COLUMN.fullmatch(k) for r in rows for k in r}
    return sorted((k for k, m in found.items() if m), key=lambda k: (int(found[k].group(1)), k))  # type: ignore[union-attr]


def _own_error(column: str, r: dict) -> float | None:
    """The row's own standard error of a column where its engine trusts it (phase and classes count
    engines: NaN is stored where it does not), else None."""
    if r.get("engine") not in COUNT_LAW_ENGINES:
        return None
    se = _num(r.get(f"{column}_stderr"))
    return se if se is not None and math.isfinite(se) and se > 0 else None


def _no_error(column: str, rows: list[dict]) -> bool:
    """Per-class columns of an event-engine point: that engine gives no per-class error, so the
    replications' mean is shown without one."""
    return bool(CLASS_COLUMN.fullmatch(column)) and any(r.get("engine") in EVENT_ENGINES for r in rows)


def _distrusted(meas: str, column: str, rows: list[dict]) -> bool:
    """Whether any replication of a grid point is too short to know the column's error (then no ±)."""
    if CLASS_COLUMN.fullmatch(column):  # the class's own flag (count engines)
        return any(r.get("engine") not in EVENT_ENGINES and r.get(f"{column}_reliable") is False for r in rows)
    for prefix, flag in DISTRUST_FLAGS.get(meas, ()):
        if column == prefix or (prefix.endswith("_") and column.startswith(prefix)):
            # the per-queue event engine's *_reliable flags are False for every one-replication run
            # (its batch-means error over one run is not trusted: docs/model.md §14); the table's ± is
            # the spread of independent replications, distrusted where a run had no blocking plateau
            return any(
                r.get(EVENT_FLAGS.get(column, flag) if r.get("engine") in EVENT_ENGINES else flag) is False
                for r in rows
            )
    return False


# the flag of an event-engine row that says its run was too short to know a column's error
EVENT_FLAGS = {"mean_queue_length": "mean_queue_length_long_enough", "mean_sojourn_time": "sojourn_long_enough_mean"}


EVENT_NOTE = (
    'Points run on the per-queue event engine (engine "events": lognormal, pareto or deterministic '
    'service, server classes with a law other than exp, policy jbt, or engine = "events"; docs/model.md §14) store '
    "no error of their own (one replication per task, whose "
    "batch-means error that engine does not trust): their ± is the standard error over the sweep's "
    'independent replications, with one replication no ± is shown, and "too short to know" where a run '
    "found no blocking plateau (mean_queue_length_long_enough, sojourn_long_enough_mean false). Their "
    "per-class columns show the replications' mean without an error bar (no per-class error on that engine)."
)

COUNT_LAW_NOTE = (
    'Points with a phase-type service law (engine "phase", docs/model.md §13) or exponential server '
    'classes (engine "classes", §15) run on count engines with control variates (flow balance; capacity '
    "balance): with one replication the ± is the task's own blocking error, shown only where the run "
    "trusts it; their mean response times come from Little's law (derived, sojourn_method = little: "
    "these engines follow no customer, so there are no response-time quantiles). Their variance "
    "reductions count every level where the control lowered a trusted error, gains below 2 included."
)


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
    return bool(parsed) and all(
        isinstance(p, list) and p and all(isinstance(x, (int, float)) for x in p) for p in parsed
    )


def _summary_table(meas: str, rows: list[dict], params: list[str]) -> tuple[list[str], list[list[str]]]:
    """One line per grid point: its parameters, replications, and mean ± se of the main values."""
    cols = [c for c in SUMMARY_COLUMNS.get(meas, ()) if any(c in r for r in rows)]
    if meas == "simulate":  # per-class columns after the whole system's
        anchor = next((c for c in ("mean_sojourn_time", "mean_queue_length") if c in cols), None)
        at = cols.index(anchor) + 1 if anchor else len(cols)
        cols[at:at] = _class_columns(rows)
    names = HEADERS.get(meas, {})
    header = params + ["replications ok"] + [f"{c} (mean)" if c == "u_mean" else names.get(c, c) for c in cols]
    body = []
    for rs in _points(rows).values():
        r = rs[0]
        line = [_fmt(r.get(p)) for p in params] + [str(len(rs))]
        for c in cols:
            vals = [x.get(c) for x in rs]
            if c.startswith(RATIO_PREFIX):
                line.append(_ratio_cell(vals))
                continue
            nums = [_num(v) for v in vals]
            plain = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals if v is not None)
            if plain and any(n is not None for n in nums) and len(rs) > 1:
                m, se = mean_stderr(nums)
                same = len({n for n in nums if n is not None}) == 1
                cell = f"{m:.6g} ± {se:.2g}" if se is not None and not same and not _no_error(c, rs) else f"{m:.6g}"
                line.append(f"{m:.6g} ({_reason(m)})" if _distrusted(meas, c, rs) else cell)
            elif plain and len(rs) == 1 and nums[0] is not None and (own := _own_error(c, r)) is not None:
                line.append(f"{nums[0]:.6g} ± {own:.2g}")  # one replication: the run's own trusted error
            elif _numeric_lists(vals):
                line.append(_fmt(_padded([np.asarray(_json(v), dtype=float) for v in vals]).mean(axis=0).tolist()))
            else:
                line.append(_fmt(vals[0]))
        body.append(line)
    return header, body


def _reason(mean: float) -> str:
    """Why a distrusted cell has no ±: the words of ``simulate`` for a quantity never seen (rare),
    else "too short to know" (the run was too short to estimate its own error).

    >>> _reason(0.0), _reason(0.5)
    ('rare: no error bar', 'too short to know')
    """
    reason = no_error_bar_reason(mean)
    return reason if reason == RARE else TOO_SHORT


def _ratio_cell(vals) -> str:
    """Median over replications of a variance-reduction column (a number, or one per level), over
    the finite values; ``NO_RATIO`` where there are none.

    >>> _ratio_cell([4.0, None, 16.0]), _ratio_cell([None, None])
    ('10', '—')
    >>> _ratio_cell([[None, 100.0, 9.0], [None, 300.0]])
    '[—, 200, 9]'
    """

    def med(xs):
        xs = [float(x) for x in xs if isinstance(x, (int, float)) and not isinstance(x, bool) and np.isfinite(x)]
        return f"{float(np.median(xs)):.3g}" if xs else NO_RATIO

    parsed = [_json(v) for v in vals]
    if any(isinstance(p, list) for p in parsed):
        lists = [p for p in parsed if isinstance(p, list)]
        width = max(len(p) for p in lists)
        cells = [med([p[i] for p in lists if i < len(p)]) for i in range(width)]
        return "[" + ", ".join(cells[:8]) + (", …" if width > 8 else "") + "]"
    return med(parsed)


RATIO_NOTE = (
    "variance reduction: (plain s.e. / control-variate s.e.)² of each replication, the median over the "
    "grid point's replications (docs/model.md §9.1); " + NO_RATIO + " where every replication kept the "
    "plain estimate (a rare level, a gain below 2, controls off: control_variates = false)."
)


RARE_NOTE = (
    f'"{RARE}": the quantity was never observed in the grid point\'s runs (a fraction of time 0), '
    "so there is nothing to estimate an error from; simulate says the same."
)


def _too_short_note(meas: str) -> str:
    flags = ", ".join(dict.fromkeys(f for _, f in DISTRUST_FLAGS.get(meas, ())))
    return (
        f'"{TOO_SHORT}": a replication of the grid point says its run was too short to estimate its own '
        f"error ({flags} false), so no ± is shown; run longer (docs/model.md §9)."
    )


def _param_columns(rows: list[dict], meas: str, sidecar: dict) -> list[str]:
    keys: list[str] = []
    for p in sidecar.get("points", []):
        if p.get("measurement") == meas:
            keys += [k for k in p.get("params", {}) if k not in keys]
    if not keys:
        keys = [k for k in ("n", "d", "load") if any(k in r for r in rows)]
    return keys


def _split_params(rows: list[dict], keys: list[str]) -> tuple[list[str], dict]:
    """Parameters that vary (columns; n, d, λ always) and those the same everywhere (shown once)."""
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
    b = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in line) + "</tr>" for line in body[:MAX_TABLE_ROWS]
    )
    more = f"<p>… {len(body) - MAX_TABLE_ROWS} more rows in results.parquet</p>" if len(body) > MAX_TABLE_ROWS else ""
    # the box scrolls sideways where the table is wider than the page (never the page itself)
    return f"<div class='table-box'><table><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table></div>{more}"


def _md_table(header, body) -> str:
    def esc(s):
        return s.replace("|", "\\|")

    lines = ["| " + " | ".join(esc(c) for c in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(esc(c) for c in line) + " |" for line in body[:MAX_TABLE_ROWS]]
    return "\n".join(lines)


# a page at most 1,100 px wide; a table wider than the page scrolls in its own box (.table-box),
# its headers wrap between words and its cells wrap only at spaces
CSS = """*,*::before,*::after{box-sizing:border-box}
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;
overflow-wrap:anywhere}
.table-box{max-width:100%;overflow-x:auto;margin:1em 0}
table{border-collapse:collapse;font-size:12px}th,td{border:1px solid #ccc;padding:3px 6px;
text-align:right;overflow-wrap:normal}th{background:#f3f3f3;min-width:5em;vertical-align:bottom}
figure{margin:1.5em 0}figcaption{font-size:13px;color:#444;max-width:800px}
img{max-width:100%;border:1px solid #eee}pre{background:#f7f7f7;padding:.7em;font-size:12px;overflow:auto}
.failed{color:#a00}"""


def _meta_lines(side: dict, rows: list[dict]) -> list[tuple[str, str]]:
    ok = sum(1 for r in rows if r.get("status") == "ok")
    runs = "; ".join(
        f"{r.get('started')} {r.get('backend')} ran {r.get('to_run')} ({r.get('wall_seconds', float('nan')):.1f} s)"
        for r in side.get("runs", [])
    )
    return [
        ("sweep", str(side.get("sweep_name"))),
        ("sweep file", str(side.get("sweep_file"))),
        ("sweep hash (canonical)", str(side.get("sweep_sha256"))),
        ("seed", str(side.get("seed"))),
        ("tasks", f"{len(rows)} of {side.get('tasks_total', '?')} ({ok} ok, {len(rows) - ok} failed)"),
        ("status", str(side.get("status"))),
        ("package version", str(side.get("package_version"))),
        ("git commit", str(side.get("git_commit"))),
        ("runs", runs),
    ]


def build_report(out_dir: str | Path, path: str | Path, *, fmt: str = "html") -> str:
    """Write the report of the sweep in ``out_dir`` to ``path``: one self-contained HTML file
    (figures as base64 PNG), or Markdown with ``<stem>_<figure>.png`` beside it.

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
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "out"
    >>> toml = '[[run]]\\nmeasurement = "theory"\\nn = 100\\nd = 2\\nload = 0.9\\n'
    >>> _ = run_sweep(parse_sweep(toml), out, workers=1)
    >>> p = build_report(out, out.parent / "r.md", fmt="md")
    >>> "## theory" in pathlib.Path(p).read_text()  # theory rows: a table, no figure
    True
    >>> import shutil; shutil.rmtree(out.parent)
    """
    fmt = check_choice("fmt", fmt, ("html", "md"))
    path = check_output_file(path, f"--{fmt}")  # before any work: a missing or unwritable place fails now
    check_not_sweep_file(out_dir, path, f"--{fmt}")  # never over the data it reports
    out_dir = Path(out_dir)
    side = read_sidecar(out_dir)
    rows = table_rows(read_results(out_dir, partial=True))
    partial = not (out_dir / RESULTS_FILE).exists()
    figs = collect_figures(rows)
    failed = [r for r in rows if r.get("status") != "ok"]
    title = f"Sweep report: {side.get('sweep_name')}" + (" (partial: sweep not finished)" if partial else "")
    sections = []  # per measurement: name, fixed parameters, table, notes, figures
    for meas in OrderedDict.fromkeys(r["measurement"] for r in rows):
        mrows = [r for r in rows if r["measurement"] == meas]
        cols, fixed = _split_params(mrows, _param_columns(mrows, meas, side))
        header, body = _summary_table(meas, mrows, cols)
        notes = [NOTES[meas]] if meas in NOTES else []
        if any(h.startswith("variance reduction") for h in header):
            notes.append(RATIO_NOTE)
        if any("(" + TOO_SHORT + ")" in c for line in body for c in line):
            notes.append(_too_short_note(meas))
        if any("(" + RARE + ")" in c for line in body for c in line):
            notes.append(RARE_NOTE)
        if any(r.get("engine") in EVENT_ENGINES for r in mrows):
            notes.append(EVENT_NOTE)
        if any(r.get("engine") in COUNT_LAW_ENGINES for r in mrows):
            notes.append(COUNT_LAW_NOTE)
        same = ", ".join(f"{k} = {_fmt(v)}" for k, v in fixed.items())
        sections.append((meas, same, header, body, notes, [f for f in figs if getattr(f, "measurement", None) == meas]))
    failed_table = (
        ["task", "measurement", "error"],
        [[r["task_id"], r["measurement"], str(r.get("error"))] for r in failed],
    )
    if fmt == "html":
        esc = html.escape
        parts = [
            f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{esc(title)}</h1>",
            _html_table(["", ""], [[k, v] for k, v in _meta_lines(side, rows)]),
        ]
        for meas, same, header, body, notes, mfigs in sections:
            parts.append(f"<h2>{esc(meas)}</h2>")
            if same:
                parts.append("<p>Same for every task: " + esc(same) + "</p>")
            parts += [_html_table(header, body)] + [f"<p>{esc(note)}</p>" for note in notes]
            for f in mfigs:
                b64 = base64.b64encode(f.png).decode("ascii")
                parts.append(
                    f"<figure><img alt='{esc(f.title)}' data-figure='{f.name}' "
                    f"src='data:image/png;base64,{b64}'><figcaption><b>{esc(f.title)}.</b> "
                    f"{esc(f.caption)}</figcaption></figure>"
                )
        if failed:
            parts += ["<h2 class='failed'>Failed tasks</h2>", _html_table(*failed_table)]
        parts += ["<h2>Sweep file</h2><pre>" + esc(side.get("sweep_text", "")) + "</pre>", "</body></html>"]
        return write_output(path, "\n".join(parts), "--html")
    md = [f"# {title}", ""] + [f"- **{k}**: {v}" for k, v in _meta_lines(side, rows)]
    for meas, same, header, body, notes, mfigs in sections:
        md += ["", f"## {meas}", ""] + (["Same for every task: " + same, ""] if same else [])
        md += [_md_table(header, body), ""] + [x for note in notes for x in (note, "")]
        for f in mfigs:  # the PNGs beside the Markdown file
            png = path.with_name(f"{path.stem}_{f.name}.png")
            write_output(png, f.png, "--md")
            md += [f"![{f.title}]({png.name})", "", f"*{f.title}.* {f.caption}", ""]
    if failed:
        md += ["", "## Failed tasks", "", _md_table(*failed_table)]
    md += ["", "## Sweep file", "", "```toml", side.get("sweep_text", "").rstrip(), "```", ""]
    return write_output(path, "\n".join(md), "--md")
