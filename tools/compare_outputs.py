"""Run a broad set of commands with ``--json`` and fixed seeds, or compare two such runs field
by field: the check that a refactor leaves every number bit-identical for the same seed.

    python tools/compare_outputs.py run SRC OUTDIR      # SRC: a checkout's src/ folder
    python tools/compare_outputs.py compare BEFORE AFTER

Timings are masked; every other field must be equal, and the comparison lists those that are
not (a new field counts as a difference). ``run`` exits 1 if a command exits non-zero;
``tests/docs/test_screens_docs2.py`` checks that every command's options parse.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

COMMANDS = [
    "simulate --n 1000 --d 2 --load 0.9 --steps 2e6 --seed 1",
    "simulate --n 1000 --d 2 --load 0.9 --steps 2e6 --seed 1 --no-control-variates",
    "simulate --n 200 --d 3 --load 0.95 --steps 1e6 --seed 3 --engine queues --start fixed-point",
    "simulate --n 200 --d 3 --load 0.95 --steps 1e6 --seed 3 --engine buckets --time-mode continuous",
    "simulate --n 500 --d 2 --load 0.9 --steps 1e6 --seed 2 --policy jsq",
    "simulate --n 500 --d 2 --load 0.9 --steps 1e6 --seed 2 --policy jiq",
    "simulate --n 500 --d 2 --load 0.9 --steps 1e6 --seed 2 --policy random",
    "simulate --n 300 --d 2 --load 0.8 --steps 1e6 --seed 4 --service erlang:4",
    "simulate --n 300 --d 2 --load 0.8 --steps 1e6 --seed 4 --service hyperexp:2",
    "simulate --n 300 --d 2 --load 0.8 --time 200 --seed 4 --service lognormal:4",
    "simulate --n 300 --d 2 --load 0.8 --steps 1e6 --seed 5 --server-classes 0.5:2,0.5:1",
    "simulate --n 300 --d 2 --load 0.8 --steps 1e6 --seed 5 --server-classes 0.5:2,0.5:1"
    " --service erlang:2 --engine phase",
    "simulate --n 1000 --d 20 --load 0.99 --steps 2e6 --seed 1 --cdf 5",
    "simulate --n 100 --d 2 --load 0.8 --time 200 --seed 1",
    "simulate --n 100 --d 2 --load 0.8 --time 200 --seed 1 --service lognormal:2",
    "simulate --n 100 --d 2 --load 0.8 --time 200 --seed 1 --service erlang:2",
    "simulate --n 100 --d 2 --load 0.8 --time 200 --seed 1 --server-classes 0.5:2,0.5:1",
    "simulate --n 100 --d 2 --load 0.8 --time 200 --seed 1 --service lognormal:2 --server-classes 0.5:2,0.5:1",
    "simulate --n 100 --d 2 --load 0.8 --time 200 --seed 1 --policy jiq",
    "simulate --n 100 --d 2 --load 0.8 --time 200 --seed 1 --replications 2",
    "simulate --n 100 --d 2 --load 0.8 --time 200 --seed 1 --replications 2 --service lognormal:2",
    "simulate --n 100 --d 2 --load 0.8 --time 200 --seed 1 --replications 2 --service erlang:2",
    "simulate --n 100 --d 2 --load 0.8 --time 200 --seed 1 --replications 2 --server-classes 0.5:2,0.5:1",
    "simulate --n 100 --d 2 --load 0.8 --seed 1 --precision 1e-2",
    "simulate --n 100 --d 2 --load 0.8 --time 200 --seed 1 --cdf 5",
    "theory --n 1000000 --d 100 --load 0.999",
    "meanfield --d 2 --load 0.9 --n 1000",
    "meanfield --d 2 --load 0.9 --service erlang:4",
    "meanfield --d 2 --load 0.8 --server-classes 0.5:2,0.5:1",
    "meanfield --d 2 --load 0.9",
    "exact --n 3 --d 2 --load 0.9",
    "exact --n 3 --d 2 --load 0.8",
    "exact --n 3 --d 2 --load 0.8 --policy jsq",
    "exact --n 3 --d 2 --load 0.7 --service erlang:2",
    "perfect --n 200 --d 2 --load 0.9 --seed 1",
    "mixing --n 100 --d 2 --load 0.9 --replications 10 --seed 0",
    "fluctuations --regime a --n 400 --d 2 --time 50 --replications 2 --sde-paths 32 --sde-time 20 --seed 1",
    "design --load 0.999 --max-queue 2",
    "design --load 0.9 --quantile 0.99 --latency 6",
]
TIMINGS = {"seconds", "events_per_second", "wall_seconds", "wall_time", "wall_s", "elapsed"}


def run(src: str, out: str) -> int:
    """Run every command with ``--json`` under ``src``; 1 if one of them exits non-zero."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()), SUPERMARKET_PROGRESS="0")
    failed = 0
    for i, cmd in enumerate(COMMANDS, 1):
        p = subprocess.run(
            [sys.executable, "-m", "supermarket", *cmd.split(), "--json"], env=env, capture_output=True, text=True
        )
        (folder / f"{i}.json").write_text(p.stdout)
        (folder / f"{i}.cmd").write_text(f"{p.returncode} {cmd}\n")
        print(f"{p.returncode} {cmd}")
        failed += p.returncode != 0
    if failed:
        print(f"{failed} command(s) exited non-zero: their JSON is missing or partial", file=sys.stderr)
    return 1 if failed else 0


def _flat(x, path=""):
    if isinstance(x, dict):
        for k, v in x.items():
            if k not in TIMINGS:
                yield from _flat(v, f"{path}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _flat(v, f"{path}[{i}]")
    else:
        yield path, x


def compare(before: str, after: str) -> int:
    bad = 0
    for i, cmd in enumerate(COMMANDS, 1):
        try:
            a = dict(_flat(json.loads((Path(before) / f"{i}.json").read_text())))
            b = dict(_flat(json.loads((Path(after) / f"{i}.json").read_text())))
        except (OSError, ValueError) as exc:
            print(f"{cmd}: no JSON to compare ({exc})")
            bad += 1
            continue
        diff = sorted(k for k in a.keys() | b.keys() if a.get(k, "<absent>") != b.get(k, "<absent>"))
        bad += bool(diff)
        print(f"{cmd}: {len(a)} fields, {len(diff)} differ {diff[:8]}")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("run", "compare"):
        sys.exit(__doc__)
    sys.exit(run(sys.argv[2], sys.argv[3]) if sys.argv[1] == "run" else compare(sys.argv[2], sys.argv[3]))
