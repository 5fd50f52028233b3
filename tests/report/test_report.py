"""Reports of a sweep: one self-contained HTML file, Markdown with PNGs, figures only for the
measurements present, and every figure actually loading in a real browser (headless Chromium)."""

from __future__ import annotations

import base64
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _paths import ROOT
from supermarket import report as rp
from supermarket import sweep as sw

ALL = """
[sweep]
name = "report-test"
seed = 9
replications = 2

[[run]]
measurement = "theory"
n = 1000
d = [2, 10]
load = 0.9

[[run]]
measurement = "meanfield"
n = [20, 100]
d = 2
load = 0.9

[[run]]
measurement = "simulate"
n = 200
d = [2, 4]
load = 0.9
steps = 20000
burn_in = 2000

[[run]]
measurement = "mixing"
n = [20, 40]
d = 2
load = 0.8

[[run]]
measurement = "fluctuations"
regime = "a"
n = 1000
kappa = 1.0
d = 6
time = 5.0
burn_in = 2.0
replications = 1

[[run]]
measurement = "fluctuations"
regime = "b"
n = 400
c = 1.0
zeta = 0.5
time = 5.0
burn_in = 2.0
sde_paths = 32
sde_time = 5.0
dt = 0.01
replications = 1
"""

FIGURES_ALL = {"profiles", "max_queue", "mixing", "fluctuations", "meanfield"}


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    out = sw.run_sweep(sw.parse_sweep(ALL, path="all.toml"), d / "out", workers=1)
    assert out.failed == 0, out.failures
    return d / "out"


def _images(html_text: str) -> list[tuple[str, str]]:
    return re.findall(r"<img[^>]*data-figure='([a-z_]+)'[^>]*src='([^']*)'", html_text)


def _png_size(data: bytes) -> tuple[int, int]:
    import matplotlib.image as mpimg

    arr = mpimg.imread(io.BytesIO(data), format="png")
    return arr.shape[1], arr.shape[0]


def test_html_is_self_contained_with_one_figure_per_expected_plot(sweep_dir, tmp_path):
    path = Path(rp.build_report(sweep_dir, tmp_path / "r.html"))
    text = path.read_text()
    imgs = _images(text)
    assert {name for name, _ in imgs} == FIGURES_ALL
    assert text.count("<img") == len(imgs) == len(FIGURES_ALL)
    for _, src in imgs:
        assert src.startswith("data:image/png;base64,")
        w, h = _png_size(base64.b64decode(src.split(",", 1)[1]))
        assert w > 100 and h > 100
    # nothing is loaded from elsewhere
    assert not re.search(r"(src|href)=['\"](?!data:)", text)
    # the tables: k_(0.9, 2) = ⌈log 10 / log 2⌉ = 4 and k_(0.9, 10) = 1 (10 = 10^1 exactly)
    theory = text.split("<h2>theory</h2>", 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", theory)[1:]
    cells = [re.findall(r"<td>(.*?)</td>", r) for r in rows]
    assert [(c[1], c[4]) for c in cells] == [("2", "4"), ("10", "1")]
    assert "Sweep file" in text and "report-test" in text


def test_figures_only_for_measurements_present(tmp_path):
    text = """
[[run]]
measurement = "meanfield"
n = 50
d = [2, 3]
load = 0.9
"""
    sw.run_sweep(sw.parse_sweep(text, path="mf.toml"), tmp_path / "mf", workers=1)
    html_text = Path(rp.build_report(tmp_path / "mf", tmp_path / "mf.html")).read_text()
    assert [n for n, _ in _images(html_text)] == ["meanfield"]
    theory_only = '[[run]]\nmeasurement = "theory"\nn = 100\nd = 2\nload = 0.9\n'
    sw.run_sweep(sw.parse_sweep(theory_only, path="t.toml"), tmp_path / "t", workers=1)
    assert _images(Path(rp.build_report(tmp_path / "t", tmp_path / "t.html")).read_text()) == []


def test_markdown_with_pngs_beside_it(sweep_dir, tmp_path):
    (tmp_path / "rep").mkdir()  # the directory must exist (a missing one is refused before any work)
    r = subprocess.run(
        [sys.executable, "-m", "supermarket", "report", str(sweep_dir), "--md", str(tmp_path / "rep" / "report.md")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "rep" / "report.md").read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert {Path(x).stem.split("_", 1)[1] for x in links} == FIGURES_ALL
    for link in links:
        data = (tmp_path / "rep" / link).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and min(_png_size(data)) > 100
    assert "| n | d | load |" in md


def test_report_cli_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    r = subprocess.run(
        [sys.executable, "-m", "supermarket", "report", str(tmp_path / "empty"), "--html", str(tmp_path / "x.html")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert r.returncode == 2
    assert "not a sweep directory" in r.stderr and "Traceback" not in r.stderr


CHECK_SCRIPT = """<script>
window.addEventListener('load', function () {
  for (const img of document.images) {
    img.setAttribute('data-loaded', (img.complete && img.naturalWidth > 0) ? 'yes' : 'no');
  }
  document.body.setAttribute('data-checked', 'done');
});
</script>"""


def _browser_check(chromium: str, html_path: Path) -> tuple[str, list[str]]:
    """Open the page in headless Chromium; return (checked marker, loaded flag of each img)."""
    page = html_path.with_name(html_path.stem + "-check.html")
    page.write_text(html_path.read_text().replace("</body>", CHECK_SCRIPT + "</body>"))
    res = subprocess.run(
        [
            chromium,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--virtual-time-budget=10000",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    dom = res.stdout
    checked = re.search(r'data-checked="(\w+)"', dom)
    flags = re.findall(r"<img[^>]*data-loaded=\"(\w+)\"", dom)
    return (checked.group(1) if checked else ""), flags


def test_every_figure_loads_in_headless_chromium(sweep_dir, tmp_path, chromium):
    path = Path(rp.build_report(sweep_dir, tmp_path / "r.html"))
    checked, flags = _browser_check(chromium, path)
    assert checked == "done"
    assert flags == ["yes"] * len(FIGURES_ALL)
    # the check can fail: a damaged figure is reported as not loaded
    broken = tmp_path / "broken.html"
    text = path.read_text()
    broken.write_text(text.replace("src='data:image/png;base64,iVBOR", "src='data:image/png;base64,AAAA", 1))
    checked, flags = _browser_check(chromium, broken)
    assert checked == "done" and flags.count("no") == 1 and flags.count("yes") == len(FIGURES_ALL) - 1


def test_no_plus_minus_where_a_run_distrusts_its_error():
    """Issue 19: the quick sweep's report printed "-1.48168 ± 0.04" on fluctuation rows whose runs
    said sim_error_bars_adequate = False.  The rule of every command holds in the report too."""
    from supermarket.report import document as doc

    def rows(adequate):
        return [
            {
                "n": 400,
                "regime": "c",
                "task_index": j,
                "point": 0,
                "status": "ok",
                "sim_mean_z1": v,
                "sim_error_bars_adequate": adequate,
                "limit_mean_z1": -1.0 + 0.01 * j,
            }
            for j, v in enumerate((-1.5, -1.4))
        ]

    _, body = doc._summary_table("fluctuations", rows(False), ["n", "regime"])
    (line,) = body
    assert "-1.45 (too short to know)" in line and not any("±" in c for c in line[3:4])
    assert any("±" in c for c in line[4:])  # the limit's own error bar stays: its run knows it
    _, body = doc._summary_table("fluctuations", rows(True), ["n", "regime"])
    assert "-1.45 ± 0.05" in body[0]
    sim = [
        {
            "n": 10,
            "task_index": j,
            "point": 0,
            "status": "ok",
            "mean_queue_length": 1.0 + j,
            "mean_queue_length_reliable": j == 0,
        }
        for j in range(2)
    ]
    assert doc._summary_table("simulate", sim, ["n"])[1][0][-1] == "1.5 (too short to know)"


def test_mixing_table_names_what_it_shows(sweep_dir, tmp_path):
    md = Path(rp.build_report(sweep_dir, tmp_path / "r.md", fmt="md")).read_text()
    section = md.split("## mixing", 1)[1].split("\n## ", 1)[0]
    assert "tmix_steps" not in section and "coalescence steps (mean over the pairs, one per task)" in section
    assert "not t_mix(1/4)" in section
    fl = md.split("## fluctuations", 1)[1].split("\n## ", 1)[0]
    for line in fl.splitlines():
        if line.startswith("| ") and "too short to know" in line:  # no ± beside a distrusted value
            assert not re.search(r"\(too short to know\) ±|± [^|]*\(too short", line)


def test_report_out_is_deprecated_for_html_or_md(sweep_dir, tmp_path):
    from click.testing import CliRunner

    from supermarket.cli import main

    r = CliRunner().invoke(main, ["report", str(sweep_dir), "--out", str(tmp_path / "r.md")])
    assert r.exit_code == 0 and (tmp_path / "r.md").exists()
    assert r.stderr.startswith("supermarket: warning: report --out FILE is deprecated; use --html FILE or --md FILE")


VR_SWEEP = """
[sweep]
name = "vr-test"
seed = 4
replications = 2

[[run]]
measurement = "simulate"
n = 100
d = 2
load = 0.9
steps = 400000
start = "fixed-point"
control_variates = [true, false]
"""


def test_variance_reduction_stored_per_quantity_and_shown(tmp_path):
    # issue 18: sweeps store and reports show what the control variates gained, per level and
    # for the mean queue length; without them the same columns exist and are null
    out = sw.run_sweep(sw.parse_sweep(VR_SWEEP, path="vr.toml"), tmp_path / "out", workers=1)
    assert out.failed == 0, out.failures
    rows = sw.table_rows(sw.read_results(tmp_path / "out"))
    cv = [r for r in rows if r["control_variates"]]
    plain = [r for r in rows if not r["control_variates"]]
    assert len(cv) == len(plain) == 2
    for r in cv:
        # the definition: (plain s.e. / control-variate s.e.)², from the row's own two errors
        q = r["variance_reduction_mean_queue_length"]
        assert q == pytest.approx((r["plain_mean_queue_length_stderr"] / r["mean_queue_length_stderr"]) ** 2, rel=1e-9)
        assert q > 2  # the fallback rule: a gain below 2 keeps the plain estimate (and no ratio)
        u = r["variance_reduction_u_mean"]
        assert len(u) == len(r["u_mean"]) and u[1] > 100  # E[u_2] at n = 100: thousands (docs/model.md §9.1)
    for r in plain:
        assert r["variance_reduction_mean_queue_length"] is None and r["variance_reduction_u_mean"] is None
    md = Path(rp.build_report(tmp_path / "out", tmp_path / "r.md", fmt="md")).read_text()
    section = md.split("## simulate", 1)[1]
    assert "variance reduction E[u_i] (median)" in section
    assert "variance reduction, mean queue length (median)" in section
    assert "plain s.e. / control-variate s.e.)²" in section
    table = [ln for ln in section.splitlines() if ln.startswith("| ") and "variance" not in ln]
    assert len(table) == 2 and sum(ln.rstrip(" |").endswith("—") for ln in table) == 1, table
