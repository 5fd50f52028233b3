"""MkDocs hook: the command-line reference is generated from the commands themselves.

``docs/reference/cli.md`` holds the marker ``<!-- supermarket-cli-help -->``; at build time it
is replaced by the ``--help`` text of ``supermarket`` and of every registered command, so
the page cannot drift from the code.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

MARKER = "<!-- supermarket-cli-help -->"

#: a Sphinx role as rendered by Markdown (``:func:<code>x</code>``) or left raw inside a
#: code span (``<code>:meth:`x`</code>``, a docstring line that numpydoc read as a type)
_ROLES = r":(?:py:)?(?:func|meth|class|mod|data|attr|exc|obj|const|ref|term|doc|any):"
SPHINX_ROLE_RENDERED = re.compile(_ROLES + r"<code>([^<]*)</code>")
SPHINX_ROLE_RAW = re.compile(r":(?:py:)?(?:func|meth|class|mod|data|attr|exc|obj|const|ref|term|doc|any):`([^`<]*)`")


def strip_sphinx_roles(html: str) -> str:
    """``html`` without Sphinx role markers; the names stay in code font."""
    # a role's "~a.b.c" shows only the last name, "c"
    html = SPHINX_ROLE_RENDERED.sub(lambda m: "<code>" + _name(m.group(1)) + "</code>", html)
    return SPHINX_ROLE_RAW.sub(lambda m: _name(m.group(1)), html)


def _name(target: str) -> str:
    return target[1:].rsplit(".", 1)[-1] if target.startswith("~") else target


def _help(command: click.Command, name: str, parent: click.Context) -> str:
    return click.Context(command, info_name=name, parent=parent).get_help()


def cli_reference() -> str:
    from supermarket.cli import COMMANDS, main

    settings = {**main.context_settings, "terminal_width": 100, "max_content_width": 100}
    top = click.Context(main, info_name="supermarket", **settings)
    parts = ["## supermarket", "", "```text", top.get_help(), "```", ""]
    for name in COMMANDS:
        command = main.get_command(top, name)
        if command is None:  # a command whose module is not on this branch
            continue
        parts += [f"## supermarket {name}", "", "```text", _help(command, name, top), "```", ""]
    return "\n".join(parts)


def on_config(config):
    """Document this checkout's package: its ``src`` goes first on ``sys.path``."""
    src = str(Path(config.config_file_path).resolve().parent / "src")
    if src not in sys.path:
        sys.path.insert(0, src)
    return config


def on_page_markdown(markdown: str, page, config, files):  # MkDocs hook signature
    if MARKER in markdown:
        return markdown.replace(MARKER, cli_reference())
    return markdown


def on_page_content(html: str, page, config, files):  # MkDocs hook signature
    return strip_sphinx_roles(html)
