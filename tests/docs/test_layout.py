"""The layout CONTRIBUTING describes, kept: at most a dozen modules at the package's top level,
no module over 600 lines, and no private name (a leading ``_``) imported from another package
of ``supermarket`` (a package's private names are its own; what others need is public).
No function is over 120 lines of code (its docstring aside; the numba kernels are one loop each).
The tests folders mirror the packages (CONTRIBUTING, "Where the tests live")."""

from __future__ import annotations

import ast
import sys

from _paths import ROOT

PKG = ROOT / "src" / "supermarket"
MAX_LINES = 600
MAX_TOP_MODULES = 12


def _package_of(parts: list[str]) -> str:
    """The package (the first folder below ``supermarket``) a dotted module path lies in, or
    ``"<top>"`` for the top-level modules."""
    if len(parts) >= 2 and (PKG / parts[1]).is_dir():
        return parts[1]
    return "<top>"


def _private_imports() -> list[str]:
    found = []
    for f in sorted(PKG.rglob("*.py")):
        parts = list(f.relative_to(PKG.parent).with_suffix("").parts)
        here = parts[:-1] if f.name == "__init__.py" else parts
        package = here if f.name == "__init__.py" else here[:-1]
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = base + (node.module.split(".") if node.module else [])
            else:
                target = (node.module or "").split(".")
            if target[0] != "supermarket" or _package_of(target) == _package_of(here):
                continue
            found += [
                f"{'.'.join(here)}: from {'.'.join(target)} import {a.name}"
                for a in node.names
                if a.name.startswith("_") and not a.name.startswith("__")
            ]
    return found


def test_no_private_name_is_imported_across_packages():
    assert _private_imports() == []


def test_the_check_sees_a_private_import(tmp_path, monkeypatch):
    """The scan itself: a module of one package importing another's private name is found."""
    pkg = tmp_path / "supermarket"
    (pkg / "a").mkdir(parents=True)
    (pkg / "b").mkdir()
    (pkg / "a" / "x.py").write_text("from ..b.y import _hidden, shown\nfrom .z import _own\n")
    (pkg / "b" / "y.py").write_text("_hidden = shown = 1\n")
    monkeypatch.setattr(sys.modules[__name__], "PKG", pkg)
    assert _private_imports() == ["supermarket.a.x: from supermarket.b.y import _hidden"]


def test_no_module_is_over_600_lines():
    long = {str(f.relative_to(PKG)): n for f in PKG.rglob("*.py") if (n := len(f.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_the_top_level_holds_at_most_a_dozen_modules():
    top = sorted(f.name for f in PKG.glob("*.py") if f.name not in ("__init__.py", "__main__.py"))
    assert len(top) <= MAX_TOP_MODULES, top


def test_the_test_folders_are_packages_of_the_source():
    """Every folder of tests/ but docs/ and core/ (the top-level modules) names a package."""
    folders = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    packages = {p.name for p in PKG.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert folders - packages <= {"docs", "core"}, folders - packages


MAX_BODY = 120


def _long_functions(pkg=None) -> dict[str, int]:
    """``{module:function: lines}`` of the functions whose code (the body less its docstring) is
    over :data:`MAX_BODY` lines; the numba kernels of ``engines/`` are exempt (a hot loop is
    one function so that the compiler keeps its state in registers, CONTRIBUTING)."""
    pkg = pkg or PKG
    out = {}
    for f in sorted(pkg.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if f.parent.name == "engines" and any("jit" in ast.unparse(d) for d in node.decorator_list):
                continue
            first = node.body[1] if ast.get_docstring(node) is not None and len(node.body) > 1 else node.body[0]
            lines = node.end_lineno - first.lineno + 1
            if lines > MAX_BODY:
                out[f"{f.relative_to(pkg)}:{node.name}"] = lines
    return out


def test_no_function_body_is_over_120_lines():
    assert _long_functions() == {}


def test_the_check_sees_a_long_function_and_spares_a_kernel(tmp_path):
    pkg = tmp_path / "supermarket"
    (pkg / "engines").mkdir(parents=True)
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_BODY + 1))
    doc = '    """' + "doc\n" * 50 + '    """\n'
    (pkg / "a.py").write_text(f"def long():\n{body}\ndef short():\n{doc}    return 1\n")
    (pkg / "engines" / "k.py").write_text(f"@njit(cache=True)\ndef kernel():\n{body}")
    assert _long_functions(pkg) == {"a.py:long": MAX_BODY + 1}
