"""The repository stands alone: nothing tracked, and nothing the command line prints, points
to a file outside it (the project's reference notes and paper texts live outside the
repository while it is developed; the specification inside it is docs/model.md).

Checked:

- every tracked text file (``git ls-files``; without git, every file under the repository
  except build outputs and virtual environments) for a parent-directory path to the shared
  notes, the notes' folder as a path, an absolute path of the development machine, and the
  file names of the notes (MODEL, ERRORS and PERFECT in upper case with the Markdown suffix;
  the repository's own ``docs/model.md`` is lower-case and allowed);
- the ``--help`` text of ``supermarket`` and of every registered command, and the output
  (tables and ``--json``) of ``theory``, ``design`` and ``meanfield``.

The patterns are assembled from pieces so that this file does not match itself.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from _paths import ROOT
from supermarket.cli import COMMANDS, main

_SHARED = "sha" + "red"
FORBIDDEN = re.compile(
    "|".join(
        [
            re.escape("../" + _SHARED),  # a relative path out of the repository
            r"(?<![\w.-])" + re.escape(_SHARED + "/"),  # the folder of the notes and papers
            re.escape("/" + "work/"),  # an absolute path of the development machine
            r"\b(?:MODEL|ERRORS|PERFECT)\.md\b",  # the notes' file names (case-sensitive)
        ]
    )
)

SKIP_DIRS = {
    ".git",
    ".venv",
    "venv",
    "build",
    "dist",
    "site",
    "__pycache__",
    ".pytest_cache",
    ".hypothesis",
    "node_modules",
}


def _tracked_files() -> list[Path]:
    if shutil.which("git") and (ROOT / ".git").exists():
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        return [ROOT / p for p in out.stdout.decode().split("\0") if p]
    return [
        p
        for p in ROOT.rglob("*")
        if p.is_file() and not SKIP_DIRS.intersection(p.relative_to(ROOT).parts) and not p.name.endswith(".egg-info")
    ]


def _offences(text: str) -> list[str]:
    return sorted({m.group(0) for m in FORBIDDEN.finditer(text)})


def test_pattern_catches_what_it_must_and_spares_docs_model():
    bad = [
        "see ../" + _SHARED + "/spec/x",
        _SHARED + "/seeds/000.txt",
        "/" + "work/main/src",
        "MODEL" + ".md §3",
        "(PERFECT" + ".md)",
    ]
    for text in bad:
        assert _offences(text), text
    for text in ["docs/model.md §3", "[model.md](model.md)", "shared memory", "unshared/x", "model.md"]:
        assert not _offences(text), text


def test_no_tracked_file_points_outside_the_repository():
    files = _tracked_files()
    assert len(files) > 20, "could not list the repository's files"
    found = {}
    for path in files:
        if not path.is_file():
            continue  # deleted in the working tree but still in the index
        data = path.read_bytes()
        if b"\0" in data[:4096]:
            continue  # binary
        hits = _offences(data.decode("utf-8", errors="replace"))
        if hits:
            found[path.relative_to(ROOT).as_posix()] = hits
    assert not found, f"files that mention paths outside the repository: {found}"


def _run(args: list[str]) -> str:
    result = CliRunner().invoke(main, args, prog_name="supermarket")
    assert result.exit_code == 0, f"supermarket {' '.join(args)} failed ({result.exit_code}): {result.output}"
    assert result.output.strip(), f"supermarket {' '.join(args)} printed nothing"
    return result.output


@pytest.mark.parametrize("args", [["--help"]] + [[name, "--help"] for name in COMMANDS])
def test_help_texts_stand_alone(args):
    assert not _offences(_run(args))


@pytest.mark.parametrize(
    "args",
    [
        ["theory", "--n", "1e4", "--d", "20", "--load", "0.99"],
        ["theory", "--n", "1e4", "--d", "20", "--load", "0.99", "--json"],
        ["design", "--load", "0.999", "--max-queue", "2"],
        ["design", "--load", "0.999", "--max-queue", "2", "--json"],
        ["meanfield", "--d", "2", "--load", "0.9", "--n", "100"],
        ["meanfield", "--d", "2", "--load", "0.9", "--n", "100", "--json"],
    ],
)
def test_quick_command_outputs_stand_alone(args):
    assert not _offences(_run(args))


# --------------------------------------------------------------------------- the package itself
def _fresh_python(code: str) -> str:
    import os
    import sys

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_import_is_light():
    # `import supermarket` and `supermarket --help` must not pay for numba, SciPy (or NumPy)
    out = _fresh_python(
        "import sys, supermarket\nprint(sorted(m for m in ('numba', 'scipy', 'numpy', 'pandas') if m in sys.modules))"
    )
    assert out == "[]", f"import supermarket loaded {out}"


def test_help_through_the_console_script_path_is_light():
    # the installed `supermarket` script imports supermarket.cli and calls main() (no runpy,
    # which would have imported importlib.util for us); --help must work and stay light
    out = _fresh_python(
        "import sys\n"
        "from supermarket.cli import main\n"
        "try:\n"
        "    main(['--help'], prog_name='supermarket')\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "print('RC', code, sorted(m for m in ('numba', 'scipy', 'numpy') if m in sys.modules))"
    )
    assert "Commands:" in out and "simulate" in out
    assert out.splitlines()[-1] == "RC 0 []", out.splitlines()[-1]


def test_no_public_function_shadows_a_module():
    """``supermarket.simulate`` is the function and ``supermarket.simulation`` its module, and
    so on: no public name of the package is both a callable and the name of a submodule."""
    out = _fresh_python(
        "import pkgutil, supermarket as sm, supermarket.simulation, supermarket.sweep\n"
        "from supermarket.simulation import simulate\n"
        "mods = {m.name for m in pkgutil.iter_modules(sm.__path__)}\n"
        "bad = [n for n in sm.__all__ if n in mods and not isinstance(getattr(sm, n), type(sm))]\n"
        "print(callable(sm.simulate), sm.simulate is simulate, bad)"
    )
    assert out == "True True []"


def test_public_names_resolve_and_are_listed():
    import supermarket

    assert set(supermarket.__all__) <= set(dir(supermarket))
    for name in supermarket.__all__:
        assert getattr(supermarket, name) is not None, name
    with pytest.raises(AttributeError):
        supermarket.no_such_name  # noqa: B018


def test_version_option():
    import supermarket

    out = _run(["--version"])
    assert out.strip() == f"supermarket, version {supermarket.__version__}"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", supermarket.__version__)
