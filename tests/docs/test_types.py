"""Type hints: mypy passes on the package ([tool.mypy] in pyproject.toml), and every public
signature of the package is annotated.

What counts as public (the rule of :func:`missing_annotations`):

- a module of ``src/supermarket`` none of whose dotted names starts with ``_``
  (``supermarket.checks``, ``supermarket.cli._common``, ``supermarket.__main__`` are
  private; a package's ``__init__.py`` is the package itself);
- in it, a function defined at module level, or a method of a class defined at module level,
  whose name does not start with ``_``, plus ``__init__`` and ``__call__`` of such a class
  (the signature a caller writes); classes whose name starts with ``_`` are private, and so
  are functions nested in functions;
- every parameter needs an annotation (``self`` and ``cls``, the first parameter of a method
  that is not a ``staticmethod``, excepted; ``*args`` and ``**kwargs`` included), and the
  return too (``__init__`` excepted: it returns None by definition).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _paths import ROOT

PACKAGE = ROOT / "src" / "supermarket"


def _is_public_module(path: Path) -> bool:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return not any(part.startswith("_") for part in parts)


def _is_staticmethod(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)


def missing_annotations(source: str) -> list[tuple[int, str, list[str]]]:
    """``(line, qualified name, what is missing)`` for each public signature of ``source``
    (a module's text) that lacks an annotation, by the rule of this module's docstring."""
    found: list[tuple[int, str, list[str]]] = []

    def visit(body: list[ast.stmt], cls: str | None) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef) and cls is None and not node.name.startswith("_"):
                visit(node.body, node.name)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if node.name.startswith("_") and not (cls is not None and node.name in ("__init__", "__call__")):
                    continue
                args = node.args
                params = [*args.posonlyargs, *args.args]
                if cls is not None and params and not _is_staticmethod(node):
                    params = params[1:]  # self or cls
                params += args.kwonlyargs
                missing = [p.arg for p in params if p.annotation is None]
                missing += ["*" + v.arg for v in (args.vararg,) if v is not None and v.annotation is None]
                missing += ["**" + v.arg for v in (args.kwarg,) if v is not None and v.annotation is None]
                if node.returns is None and node.name != "__init__":
                    missing.append("return")
                if missing:
                    found.append((node.lineno, node.name if cls is None else f"{cls}.{node.name}", missing))

    visit(ast.parse(source).body, None)
    return found


def _missing_in_package() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if not _is_public_module(path):
            continue
        for line, name, what in missing_annotations(path.read_text(encoding="utf-8")):
            out.append(f"{path.relative_to(ROOT)}:{line}: {name}: {', '.join(what)}")
    return out


def test_the_rule_on_a_small_module():
    source = """
def f(a: int, b, *args, c: int = 1, **kw) -> int: ...
def g(a: int) -> None: ...
def h(a: int): ...
def _private(a, b): ...
class A:
    def __init__(self, x): ...
    def __call__(self, x: int): ...
    def __repr__(self): ...
    def m(self, y: int) -> int:
        def inner(z): ...
    @classmethod
    def k(cls, y) -> A: ...
    @staticmethod
    def s(y) -> int: ...
    def _hidden(self, y): ...
class _B:
    def m(self, y): ...
"""
    assert missing_annotations(source) == [
        (2, "f", ["b", "*args", "**kw"]),
        (4, "h", ["return"]),
        (7, "A.__init__", ["x"]),
        (8, "A.__call__", ["return"]),
        (13, "A.k", ["y"]),
        (15, "A.s", ["y"]),
    ]
    assert _is_public_module(PACKAGE / "sweep" / "__init__.py")
    assert _is_public_module(PACKAGE / "sweep" / "spec.py")
    assert not _is_public_module(PACKAGE / "cli" / "_phase.py")
    assert not _is_public_module(PACKAGE / "cli" / "_common.py")
    assert not _is_public_module(PACKAGE / "__main__.py")


def test_mypy_passes():
    pytest.importorskip("mypy", reason="mypy is in the test extra")
    env = {k: v for k, v in os.environ.items() if k != "MYPYPATH"}
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_public_signature_is_annotated():
    missing = _missing_in_package()
    assert not missing, f"{len(missing)} public signatures lack annotations:\n" + "\n".join(missing)
