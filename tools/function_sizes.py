"""Print the library's functions over the size rule: more than 12 parameters or 120 lines.

    python tools/function_sizes.py [--params N] [--lines N] [ROOT]

CONTRIBUTING.md's rule: no function over about 120 lines or 12 parameters unless a numba kernel
needs them. A function's parameters are its positional and keyword ones (``*args`` and
``**kwargs`` not counted) less ``self`` and ``cls``; its lines are those of its code, from the
first statement after its docstring to its last line (as ``tests/docs/test_layout.py`` counts
them: the rule is of code, and a numpydoc docstring of many options is not). ``engines/`` (numba
kernels) and ``cli/`` (commands, whose options are parameters) are left out. One line per
violator, ``(params, lines) file::function``, most parameters first, marked ``(options)`` for a
public function whose parameters are the user's keyword options (:data:`OPTIONS`: only its
length counts against it); nothing is imported from the package, the files are only parsed.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "src" / "supermarket"
SKIP = ("engines", "cli")
MAX_PARAMS = 12
MAX_LINES = 120

#: Public functions whose parameters are the user's keyword options (the rule lets them keep more
#: than 12): listed when over, marked "options", so that only their length is to fix.
OPTIONS = {
    "simulation/run.py::simulate",
    "simulation/plan.py::build_plan",  # simulate's options, validated
    "simulation/general/run.py::simulate_general",
    "simulation/classes.py::simulate_classes",
    "simulation/classes_phase.py::simulate_classes_phase",
    "simulation/phase_run.py::simulate_phase_service",
    "simulation/phase.py::simulate_phase",
    "simulation/chain.py::Chain.__init__",
    "meanfield/ode.py::solve_meanfield",
    "fluctuations/diffusions.py::limit_sde",
    "fluctuations/comparison.py::compare",
    "mixing/tv.py::tv_curve",
    "mixing/coupling.py::coupled_run",
}


def _sizes(path: Path) -> Iterator[tuple[int, int, str]]:
    """(parameters, lines, qualified name) of every function defined in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

    def visit(node: ast.AST, prefix: str) -> Iterator[tuple[int, int, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = child.args
                names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
                n = len([x for x in names if x not in ("self", "cls")])
                body = child.body
                first = body[1] if ast.get_docstring(child) is not None and len(body) > 1 else body[0]
                lines = (child.end_lineno or child.lineno) - first.lineno + 1
                yield n, lines, prefix + child.name
                yield from visit(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                yield from visit(child, prefix + child.name + ".")
            else:
                yield from visit(child, prefix)

    yield from visit(tree, "")


def violators(
    root: Path = ROOT, max_params: int = MAX_PARAMS, max_lines: int = MAX_LINES
) -> list[tuple[int, int, str]]:
    """The functions under ``root`` with more than ``max_params`` parameters or ``max_lines`` lines."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts and rel.parts[0] in SKIP:
            continue
        for n, lines, name in _sizes(path):
            if n > max_params or lines > max_lines:
                out.append((n, lines, f"{rel.as_posix()}::{name}"))
    return sorted(out, key=lambda t: (-t[0], -t[1], t[2]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=ROOT, help="package folder (default: src/supermarket)")
    parser.add_argument("--params", type=int, default=MAX_PARAMS, help="most parameters allowed")
    parser.add_argument("--lines", type=int, default=MAX_LINES, help="most lines allowed")
    args = parser.parse_args(argv)
    rows = violators(args.root, args.params, args.lines)
    print("(params, lines) file::function")
    for n, lines, name in rows:
        kept = "  (options)" if name in OPTIONS else ""
        print(f"({n},{lines:>3}) {name}{kept}")
    print(f"{len(rows)} function(s) over {args.params} parameters or {args.lines} lines", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
