"""The documentation site builds with ``mkdocs build --strict`` (no broken link, no missing
page, no docstring the API reference cannot render), and every public module has its page.

Skipped, with the reason, only when MkDocs or mkdocstrings is not installed (they come with
``pip install -e ".[test]"`` and ``".[docs]"``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from _paths import ROOT

CONFIG = ROOT / "mkdocs.yml"


def _missing_tools() -> list[str]:
    """Import names of the documentation tools that are not installed."""
    names = ("mkdocs", "mkdocstrings", "mkdocstrings_handlers", "material")
    return [m for m in names if importlib.util.find_spec(m) is None]


@pytest.mark.integration
def test_site_builds_strict(tmp_path):
    missing = _missing_tools()
    if missing:
        pytest.skip(f"documentation tools not installed ({', '.join(missing)}): pip install -e '.[docs]'")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    site = tmp_path / "site"
    # no -q: with it MkDocs drops warnings before --strict counts them
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(CONFIG), "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    # the pages exist and carry what they promise
    api = (site / "reference" / "theory" / "index.html").read_text(encoding="utf-8")
    assert 'id="supermarket.theory.k_lambda_d"' in api  # mkdocstrings rendered the module
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "supermarket design" in cli and "--max-queue" in cli  # the hook inserted --help
    model = (site / "model" / "index.html").read_text(encoding="utf-8")
    assert "k_{λ,d}" in model
    # no Sphinx role shows on any page (mkdocstrings renders numpy docstrings as Markdown,
    # which knows no roles; tools/mkdocs_hooks.py drops them and keeps the name)
    role = re.compile(r":(?:py:)?(?:func|meth|class|mod|data|attr|exc|obj|const|ref|term|doc|any):(?:<code>|`)")
    shown = {
        p.relative_to(site).as_posix(): role.findall(p.read_text(encoding="utf-8"))[:3] for p in site.rglob("*.html")
    }
    shown = {page: found for page, found in shown.items() if found}
    assert not shown, f"raw Sphinx roles on {len(shown)} page(s): {shown}"
    assert "<code>simulate</code>" in (site / "reference" / "simulation" / "index.html").read_text(encoding="utf-8")


def test_sphinx_roles_are_dropped_and_names_kept():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from mkdocs_hooks import strip_sphinx_roles
    finally:
        sys.path.remove(str(ROOT / "tools"))
    assert (
        strip_sphinx_roles("see :func:<code>simulate</code> and :py:meth:<code>x.y</code>")
        == "see <code>simulate</code> and <code>x.y</code>"
    )
    assert strip_sphinx_roles("<code>:meth:`to_dict`, :class:`A`.</code>") == "<code>to_dict, A.</code>"
    assert strip_sphinx_roles("a ratio 1:2:<b>3</b> and time 10:30") == "a ratio 1:2:<b>3</b> and time 10:30"


def _nav_pages() -> set[str]:
    return set(re.findall(r":\s*([\w./-]+\.md)\s*$", CONFIG.read_text(encoding="utf-8"), flags=re.M))


def test_every_public_module_has_an_api_page():
    nav = _nav_pages()
    src = ROOT / "src" / "supermarket"
    modules = sorted(
        {p.stem for p in src.glob("*.py") if not p.stem.startswith("_")}
        | {p.parent.name for p in src.glob("*/__init__.py") if not p.parent.name.startswith("_")}
        - {"engines", "cli", "experiments"}
    )  # kernels, the CLI and experiments have their own pages
    assert modules, "no modules found"
    for name in modules:
        page = f"reference/{name}.md"
        assert page in nav, f"supermarket.{name} has no API page in mkdocs.yml's nav ({page})"
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        assert f"::: supermarket.{name}" in text, f"{page} does not render supermarket.{name}"


def test_every_docs_page_is_in_the_nav():
    nav = _nav_pages()
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages - nav == set(), f"pages not reachable from the site's navigation: {sorted(pages - nav)}"
    assert nav - pages == set(), f"nav entries without a page: {sorted(nav - pages)}"
