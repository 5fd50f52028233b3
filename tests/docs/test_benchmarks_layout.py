"""The benchmarks folder: speed benchmarks and bit-identity hashes at the top, the one-off
calibration studies under ``benchmarks/calibration/`` behind one entry point
(``benchmarks/calibrate.py``), each named in ``benchmarks/README.md``."""

from __future__ import annotations

import subprocess
import sys

from _paths import ROOT

BENCH = ROOT / "benchmarks"


def test_the_top_level_holds_benchmarks_hashes_and_the_entry_point_only():
    names = sorted(p.name for p in BENCH.glob("*.py"))
    odd = [n for n in names if not (n.startswith(("bench_", "hash_")) or n == "calibrate.py")]
    assert not odd, f"one-off studies belong in benchmarks/calibration/: {odd}"


def test_every_study_is_listed_with_its_first_line_and_named_in_the_readme():
    out = subprocess.run(
        [sys.executable, str(BENCH / "calibrate.py"), "--list"], capture_output=True, text=True, check=True
    ).stdout
    listed = {line.split()[0] for line in out.splitlines() if line.strip()}
    files = {p.stem for p in (BENCH / "calibration").glob("*.py")}
    assert listed == files and files
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    assert all(f"calibration/{f}.py" in readme for f in files), sorted(
        f for f in files if f"calibration/{f}.py" not in readme
    )
    assert all(len(line) <= 140 for line in out.splitlines())


def test_an_unknown_study_is_one_line_and_exit_2():
    r = subprocess.run([sys.executable, str(BENCH / "calibrate.py"), "nope"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    assert "unknown study 'nope'" in r.stderr
