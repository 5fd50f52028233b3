"""`supermarket reproduce paper002` end to end on tiny sizes (monkeypatched); the real quick
mode takes about 20-40 s and is exercised by hand (`supermarket reproduce paper002 --quick`)."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from supermarket.cli import main
from supermarket.experiments import paper002 as p002


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(p002, "_config", lambda quick: (
        {"a": 400, "b": 400, "c": 400}, dict(time=60.0, replications=1),
        dict(sde_paths=32, sde_time=10.0, dt=1e-2), (100, 400), 30.0))


def test_run_writes_every_artefact(tiny, tmp_path):
    out = p002.run(tmp_path, quick=True, seed=3)
    for regime in "abc":
        for kind in ("paths", "hist"):
            png = tmp_path / f"regime_{regime}_{kind}.png"
            assert png.stat().st_size > 1000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader(open(tmp_path / "moments.csv")))
    assert {r["regime"] for r in rows} == {"a", "b", "c"}
    sources = {(r["regime"], r["source"]) for r in rows}
    assert {("a", "sim"), ("a", "limit_sde"), ("a", "limit_closed_form"), ("b", "sim"), ("c", "sim"),
            ("c", "limit_sde"), ("c", "limit_sde_bridge")} <= sources
    # regime (a)'s closed form (docs/model.md §8, derived) at κ = 1: Var Z1 = 2/3, Cov = 1/3, Var Z2 = 1/3
    cf = next(r for r in rows if r["regime"] == "a" and r["source"] == "limit_closed_form")
    assert float(cf["var_z1"]) == pytest.approx(2 / 3) and float(cf["cov_z1z2"]) == pytest.approx(1 / 3)
    assert float(cf["var_z2"]) == pytest.approx(1 / 3)
    meta = json.loads((tmp_path / "moments.json").read_text())
    assert set(meta["comparisons"]) == {"a", "b", "c"} and meta["seed"] == 3
    assert [r["n"] for r in meta["scaling"]] == [100, 400]
    summary = (tmp_path / "summary.md").read_text()
    assert "derived" in summary.lower()
    assert out["scaling"] and out["rows"]


def test_same_seed_same_tables(tiny, tmp_path):
    a = p002.run(tmp_path / "a", quick=True, seed=5)
    b = p002.run(tmp_path / "b", quick=True, seed=5)
    key = lambda rows: [{k: v for k, v in r.items()} for r in rows]  # noqa: E731
    assert key(a["rows"]) == key(b["rows"])


def test_reproduce_cli_runs_paper002(tiny, tmp_path):
    r = CliRunner().invoke(main, ["reproduce", "paper002", "--quick", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "summary.md").exists()
