"""One entry point for the calibration studies (``benchmarks/calibration/``): each measures how
often the tool's stated 95 % intervals cover an independent truth (an exact law, a closed
form, a run a hundred times longer), for one engine or error method.  Their figures are in
the docs sections each study names; the studies are kept so that a figure can be measured
again on later code, not run by the test suite (the slow tests replay short versions).

    python benchmarks/calibrate.py --list              # the studies, a line each
    python benchmarks/calibrate.py STUDY [ARGS ...]    # run one with its own arguments
    python benchmarks/calibrate.py STUDY --help        # its arguments

Run from the repository root with ``PYTHONPATH=src`` (or an installed checkout).
"""

from __future__ import annotations

import ast
import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent / "calibration"


def studies() -> dict[str, str]:
    """``{name: first line of its docstring}`` for every study in ``benchmarks/calibration/``."""
    out = {}
    for path in sorted(HERE.glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        line = " ".join(doc.split("\n\n")[0].split())
        out[path.stem] = line if len(line) <= 100 else line[:99].rstrip() + "…"
    return out


def main(argv: list[str]) -> int:
    known = studies()
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if argv[0] == "--list":
        width = max(map(len, known))
        for name, line in known.items():
            print(f"{name:<{width}}  {line}")
        return 0
    name = argv[0].removesuffix(".py")
    if name not in known:
        print(f"calibrate: unknown study {argv[0]!r}; the studies: {', '.join(known)}", file=sys.stderr)
        return 2
    sys.argv = [str(HERE / f"{name}.py"), *argv[1:]]
    sys.path.insert(0, str(HERE))
    runpy.run_path(sys.argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
