"""Run a broad set of commands with ``--json`` and fixed seeds, or compare two such runs field
by field: the check that a refactor leaves every number bit-identical for the same seed.

    python tools/compare_outputs.py run SRC OUTDIR      # SRC: a checkout's src/ folder
    python tools/compare_outputs.py compare BEFORE AFTER

Timings are masked; every other field must be equal, and the comparison lists those that are
not (a new field counts as a difference), split into values changed, fields new and fields
removed. ``run`` exits 1 if a command exits non-zero; ``tests/docs/test_screens_docs2.py``
checks that every command's options parse.

JSON written before the one shape of the simulate results (issue #28, item 4; CHANGELOG "what
moved") is read through :data:`MOVED`: its keys are renamed to where they are now before the
values are compared, and the fields that shape added (:data:`ADDED`) are listed, not counted.
"""

from __future__ import annotations

import json
import os
import re
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
    "exact --n 4 --d 2 --load 0.6 --server-classes 0.5:2,0.5:1",
    "meanfield --d 2 --load 0.6 --server-classes 0.5:2,0.5:1 --service erlang:2",
    "simulate --n 100 --d 2 --load 0.8 --time 200 --seed 1 --policy jbt",
    "simulate --n 100 --d 2 --load 0.8 --steps 1e6 --seed 1 --policy jbt --engine profile",
    "simulate --n 100 --d 2 --load 0.8 --steps 1e6 --seed 2 --server-classes 0.5:2,0.5:1 --policy jiq",
    "simulate --n 100 --d 2 --load 0.8 --steps 1e6 --seed 2 --service erlang:2 --policy jsq",
    "simulate --n 50 --d 2 --load 0.8 --steps 1e6 --seed 3 --engine queues --no-replace",
    "simulate --n 100 --d 2 --load 0.8 --time 200 --seed 1 --server-classes 0.5:2,0.5:1 --service erlang:2",
    "simulate --n 100 --d 2 --load 0.8 --steps 1e6 --seed 1 --service erlang:2 --time-mode continuous",
    "exact --n 3 --d 2 --load 0.7 --policy jbt",
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


_SYSTEM = [(r"^\.lam$", ".system.load"), (r"^\.(n|d|policy|replace|load_text)$", r".system.\1")]
_SYSTEM += [(r"^\.(service|server_classes)\.", r".system.\1.")]


def _law(name: str) -> list:
    """The profile's sojourn or waiting law: the mean and the quantiles with their errors inside."""
    q = rf"^\.{name}\."
    return [
        (q + r"mean$", f".{name}.mean.mean"),
        (q + r"stderr\.mean$", f".{name}.mean.stderr"),
        (q + r"stderr\.quantiles\.(.+)$", rf".{name}.quantiles.\1.stderr"),
        (q + r"stderr\.kind$", f".{name}.stderr_kind"),
        (q + r"quantiles\.(.+)$", rf".{name}.quantiles.\1.mean"),
    ]


#: Old key -> new key (regular expressions on the flat paths), per engine, in the order tried.
MOVED = {
    "profile": [
        (r"^\.params\.", ".system."),
        (r"^\.policy$", ".system.policy"),
        (r"^\.steps$", ".events"),
        (r"^\.sim_time$", ".time"),
        (r"^\.mean_queue_length$", ".mean_queue_length.mean"),
        (r"^\.mean_queue_length_(stderr|reliable|half_width|n_eff)$", r".mean_queue_length.\1"),
        *_law("sojourn"),
        *_law("waiting"),
    ],
    "events": [
        *_SYSTEM,
        (r"^\.(sojourn|waiting)\.([a-z_]+)$", r".\1.mean.\2"),
        (r"^\.(sojourn|waiting)_quantiles\.", r".\1.quantiles."),
    ],
    "phase": [*_SYSTEM, (r"^\.(sojourn|waiting)_little\.", r".\1.mean.")],
    "classes": [*_SYSTEM, (r"^\.(sojourn|waiting)\.([a-z_]+)$", r".\1.mean.\2")],
}
#: Fields the one shape added (the shared keys an engine had not written, the new entries of an
#: estimate dict): listed by ``compare``, not counted as differences.
ADDED = re.compile(
    r"(^|\])\.(engine|system\.[a-z_.]+|events|time|burn_in|burn_in_unit|replications|batches|u_mean\[\d+\]"
    r"|u_stderr\[\d+\]|variance_reduction_note|classes\[\d+\]\.waiting|(sojourn|waiting)\.source"
    r"|[a-z_.\d\[\]]*\.(half_width|dof|n_eff|method|note|reliable|blocks))$"
)


def _old_engine(data: dict) -> str | None:
    """Which engine wrote JSON of the old shape (None: the JSON is not of a simulate result in it)."""
    if "params" in data and "steps" in data:
        return "profile"
    if "sojourn_quantiles" in data:
        return "events"
    if "sojourn_little" in data:
        return "phase"
    if "balance" in data and "lam" in data:
        return "classes"
    return None


def moved(data: dict) -> dict:
    """The flat fields of ``data`` (JSON of the old shape) under their new keys; other JSON as it is."""
    engine = _old_engine(data)
    flat = dict(_flat(data))
    if engine is None:  # mean field and exact laws: the load was "lam" or "lam_f" in some
        return {re.sub(r"^\.lam(_f)?$", ".load", k): v for k, v in flat.items()}
    rules = MOVED[engine]
    out = {}
    for key, value in flat.items():
        prefix, rest = "", key
        if engine == "profile" and (m := re.match(r"^(\.per_replication\[\d+\])(\..*)$", key)):
            prefix, rest = m.groups()
        if rest == ".variance_reduction" and value is None:
            continue  # controls off: None then, {} with a note now
        for pattern, repl in rules:
            new, k = re.subn(pattern, repl, rest)
            if k:
                rest = new
                break
        out[prefix + rest] = value
    return out


def compare(before: str, after: str) -> int:
    bad = 0
    for i, cmd in enumerate(COMMANDS, 1):
        try:
            a = moved(json.loads((Path(before) / f"{i}.json").read_text()))
            b = dict(_flat(json.loads((Path(after) / f"{i}.json").read_text())))
        except (OSError, ValueError) as exc:
            print(f"{cmd}: no JSON to compare ({exc})")
            bad += 1
            continue
        added = sorted(k for k in b.keys() - a.keys() if ADDED.search(k))
        diff = sorted(k for k in a.keys() | b.keys() if k not in added and a.get(k, "<absent>") != b.get(k, "<absent>"))
        bad += bool(diff)
        changed = [k for k in diff if k in a and k in b]  # a value that moved: the check's real finding
        new = [k for k in diff if k not in a]
        gone = [k for k in diff if k not in b]
        print(
            f"{cmd}: {len(a)} fields, {len(diff)} differ ({len(changed)} changed {changed[:8]}, {len(new)} new "
            f"{new[:4]}, {len(gone)} removed {gone[:4]}); {len(added)} added by the shared shape"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("run", "compare"):
        sys.exit(__doc__)
    sys.exit(run(sys.argv[2], sys.argv[3]) if sys.argv[1] == "run" else compare(sys.argv[2], sys.argv[3]))
