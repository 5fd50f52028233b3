"""Every public function and class of the library carries a numpydoc docstring.

The rule (the project's charter): an ``Examples`` section (run as doctests) for every public
function and class; a ``Parameters`` section for every function that takes parameters; a
``Returns`` section for every function that returns something other than ``None``.
"Public" means listed in the module's ``__all__`` (or, without one, not starting with ``_``)
and defined inside :mod:`supermarket`.
"""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

MODULES = [
    "simulation",
    "meanfield",
    "theory",
    "mixing",
    "fluctuations",
    "stationary",
    "perfect",
    "response",
    "stats",
    "model",
    "system.states",
    "parallel",
    "report",
    "jsonable",
    "sweep",
    "system.policies",
]


def _has_section(doc: str, name: str) -> bool:
    """A numpydoc section header: the name on its own line, underlined with dashes."""
    return re.search(rf"^\s*{name}\s*\n\s*-{{3,}}\s*$", doc, flags=re.MULTILINE) is not None


def _returns_none(fn) -> bool:
    ann = inspect.signature(fn).return_annotation
    return ann is None or ann == "None"


def missing_sections(obj) -> list[str]:
    """The numpydoc sections ``obj``'s docstring lacks under the rule above."""
    doc = inspect.getdoc(obj) or ""
    need = ["Examples"]
    if inspect.isfunction(obj):
        if inspect.signature(obj).parameters:
            need.insert(0, "Parameters")
        if not _returns_none(obj):
            need.insert(-1, "Returns")
    return [k for k in need if not _has_section(doc, k)]


def public_objects():
    for m in MODULES:
        mod = importlib.import_module("supermarket." + m)
        names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
        for n in names:
            o = getattr(mod, n, None)
            if (inspect.isfunction(o) or inspect.isclass(o)) and getattr(o, "__module__", "").startswith("supermarket"):
                yield f"{m}.{n}", o


def test_audit_finds_something():
    """The audit is not vacuous: it sees many public objects and flags a bare docstring."""
    assert len(list(public_objects())) > 50

    def bare(x):
        """One line."""
        return x

    def quiet() -> None:
        """One line.

        Examples
        --------
        >>> quiet()
        """

    class Bare:
        """One line."""

    assert missing_sections(bare) == ["Parameters", "Returns", "Examples"]
    assert missing_sections(quiet) == []
    assert missing_sections(Bare) == ["Examples"]

    # a word in the prose is not a section
    def prose(x):
        """Parameters and Returns and Examples are mentioned but not given."""
        return x

    assert missing_sections(prose) == ["Parameters", "Returns", "Examples"]


def test_every_public_object_has_numpydoc_sections():
    gaps = [f"{name}: {lack}" for name, o in public_objects() if (lack := missing_sections(o))]
    if gaps:
        pytest.fail(f"{len(gaps)} public objects lack numpydoc sections:\n  " + "\n  ".join(gaps))
