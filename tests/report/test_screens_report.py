"""Screens of the sweep report: the HTML page fits a 1,100 px window whatever its tables hold,
the fluctuation figure's labels do not overlap, captions say only what their data show, and a
distrusted value is worded as the command line words it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from supermarket import report as rp
from supermarket import sweep as sw

# every measurement kind, with the wide tables: a service law and server classes on simulate
# (per-class columns), all five fluctuation moments twice (simulated and limit)
WIDE = """
[sweep]
name = "screens"
seed = 5
replications = 2

[[run]]
measurement = "theory"
n = 1000
d = 2
load = 0.9

[[run]]
measurement = "meanfield"
n = 50
d = 2
load = 0.9

[[run]]
measurement = "simulate"
n = 60
d = 2
load = 0.9
steps = 20000
burn_in = 2000

[[run]]
measurement = "simulate"
n = 60
d = 2
load = 0.9
time = 200.0
burn_in = 20.0
service = ["exp", "erlang:2"]
server_classes = "0.5:2,0.5:1"

[[run]]
measurement = "mixing"
n = 20
d = 2
load = 0.8

[[run]]
measurement = "fluctuations"
regime = "a"
n = 400
kappa = 1.0
d = 6
time = 3.0
burn_in = 1.0
replications = 1
"""


@pytest.fixture(scope="module")
def wide_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("screens")
    out = sw.run_sweep(sw.parse_sweep(WIDE, path="screens.toml"), d / "out", workers=1)
    assert out.failed == 0, out.failures
    return d / "out"


LAYOUT_SCRIPT = """<script>
window.addEventListener('load', function () {
  const vw = document.documentElement.clientWidth;
  const page = document.documentElement.scrollWidth;
  const bad = [];
  for (const t of document.querySelectorAll('table')) {
    const box = t.parentElement;
    const cut = getComputedStyle(box).overflowX;
    const right = box.getBoundingClientRect().right;
    // a table wider than its box must sit in a box that scrolls, and the box must fit the window
    if (right > vw + 1 || (t.scrollWidth > box.clientWidth + 1 && !['auto', 'scroll'].includes(cut))) {
      bad.push(t.querySelector('th, td') ? t.querySelector('th, td').textContent.slice(0, 20) : '?');
    }
  }
  document.body.setAttribute('data-page-width', String(page));
  document.body.setAttribute('data-view-width', String(vw));
  document.body.setAttribute('data-bad', bad.length ? bad.join('|') : 'none');
});
</script>"""


def _layout(chromium: str, html_path: Path) -> dict[str, str]:
    page = html_path.with_name(html_path.stem + "-layout.html")
    page.write_text(html_path.read_text().replace("</body>", LAYOUT_SCRIPT + "</body>"))
    res = subprocess.run(
        [
            chromium,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--hide-scrollbars",
            "--window-size=1100,900",
            "--virtual-time-budget=10000",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", res.stdout)
    assert body is not None
    return dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body.group(1)))


def test_every_table_fits_a_1100px_window(wide_dir, tmp_path, chromium):
    path = Path(rp.build_report(wide_dir, tmp_path / "r.html"))
    text = path.read_text()
    for meas in ("simulate", "fluctuations", "mixing", "meanfield", "theory"):
        assert f"<h2>{meas}</h2>" in text
    got = _layout(chromium, path)
    assert got["view-width"] and int(got["view-width"]) <= 1100
    # the page itself never scrolls sideways: a wide table scrolls inside its own box
    assert int(got["page-width"]) <= int(got["view-width"]), got
    assert got["bad"] == "none", got


def _fluct_rows():
    """Two regimes whose five moments nearly coincide: every label at the same few places."""
    from supermarket.report.figures import FLUCT_MOMENTS

    rows = []
    for j, regime in enumerate(("a", "b")):
        r = {"regime": regime, "n": 400, "task_index": j, "point": j, "status": "ok"}
        r["sim_error_bars_adequate"] = regime == "a"
        for i, m in enumerate(FLUCT_MOMENTS):
            r[f"sim_{m}"] = 0.1 + 0.001 * i
            r[f"limit_{m}"] = 0.1 + 0.001 * j
            r[f"sim_stderr_{m}"] = 0.01
        rows.append(r)
    return rows


def test_fluctuation_labels_do_not_overlap(monkeypatch):
    from supermarket.report import cells, render
    from supermarket.report import figures as fg

    seen = []
    real = render._fig_to_png  # patched where _finish reads it

    def keep(fig):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        seen.append([t.get_window_extent(renderer) for t in ax.texts])
        return real(fig)

    monkeypatch.setattr(render, "_fig_to_png", keep)
    fig = fg._fluct_figure(cells._points(_fluct_rows()))
    assert fig is not None and fig.png[:4] == b"\x89PNG"
    (boxes,) = seen
    assert len(boxes) == 10
    overlaps = [(i, j) for i in range(len(boxes)) for j in range(i) if boxes[i].overlaps(boxes[j])]
    assert overlaps == []
    assert "†" in fig.caption  # the key marks the points without an error bar


def test_max_queue_caption_counts_what_the_points_show():
    """A caption said "k or k+1" over points at k + 2: it now counts the points' own offsets."""
    from supermarket.report import cells
    from supermarket.report import simulate_figures as fg

    rows = [
        {"n": 100, "d": 2, "load": 0.9, "task_index": j, "point": j, "status": "ok", "max_queue_dist": dist}
        for j, dist in enumerate(({"4": 0.9, "5": 0.1}, {"6": 0.8, "5": 0.2}))
    ]  # k_(0.9, 2) = 4: one point at k, one at k + 2
    fig = fg._max_queue_figure(cells._points(rows))
    assert fig is not None
    assert "most frequent maximum is k at 1 of 2 grid points, k + 2 at 1." in fig.caption


def test_profile_caption_names_only_the_references_drawn():
    from supermarket.report import cells
    from supermarket.report import simulate_figures as fg

    rows = [
        {"n": 100, "d": 2, "load": 0.5, "policy": "random", "task_index": 0, "point": 0, "status": "ok"}
        | {"u_mean": [0.5, 0.25, 0.12]}
    ]
    fig = fg._profile_figure(cells._points(rows))
    assert fig is not None
    assert "λ^i" in fig.caption and "π(i) = λ^((d^i" not in fig.caption and "linearised" not in fig.caption


def test_good_set_fraction_never_seen_is_worded_as_simulate_words_it():
    """simulate's table says "rare: no error bar" for a good-set fraction of 0; the report said
    "too short to know" for the same run.  Both now take the words from one function."""
    from supermarket.report import document as doc
    from supermarket.simulation.render import _pm

    sim = [
        {
            "n": 10,
            "task_index": j,
            "point": 0,
            "status": "ok",
            "good_set_fraction": 0.0,
            "good_set_fraction_reliable": False,
        }
        for j in range(2)
    ]
    cell = doc._summary_table("simulate", sim, ["n"])[1][0][-1]
    assert cell == _pm(0.0, float("nan"), False) == "0 (rare: no error bar)"
    sim[1]["good_set_fraction"] = 0.5  # seen: a run too short, as before
    assert doc._summary_table("simulate", sim, ["n"])[1][0][-1] == "0.25 (too short to know)"
