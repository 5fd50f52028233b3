"""tools/function_sizes.py, the list of the functions over the size rule (CONTRIBUTING: about
120 lines or 12 parameters): it runs on the tree, and it finds what it should on a made-up
package (not that the tree has no violator)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from _paths import ROOT

TOOL = ROOT / "tools" / "function_sizes.py"


def _tool():
    spec = importlib.util.spec_from_file_location("function_sizes", TOOL)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_it_runs_on_the_tree():
    proc = subprocess.run([sys.executable, str(TOOL)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "(params, lines) file::function"
    assert all(line.startswith("(") and "::" in line for line in lines[1:]), lines
    assert "function(s) over 12 parameters or 120 lines" in proc.stderr


def test_it_counts_parameters_and_lines(tmp_path):
    pkg = tmp_path / "supermarket"
    (pkg / "engines").mkdir(parents=True)
    (pkg / "cli").mkdir()
    (pkg / "sub").mkdir()
    many = ", ".join(f"a{i}" for i in range(12))
    body = "".join(f"    x{i} = {i}\n" for i in range(120))  # 120 lines of code: not over
    doc = '    """' + "doc\n" * 50 + '    """\n'  # a docstring does not count
    (pkg / "sub" / "m.py").write_text(
        f"def twelve({many}, *args, **kw):\n    pass\n\n"  # 12 (varargs not counted): not over
        f"def thirteen({many}, *, b=1):\n    pass\n\n"
        f"def long_ok():\n{doc}{body}\n"
        f"def too_long():\n{body}    y = 1\n\n"
        f"class C:\n    def method(self, {many}):\n        pass\n\n"  # self not counted
        f"    def wide(self, {many}, c):\n        def inner({many}, e, f):\n            pass\n"
    )
    (pkg / "engines" / "k.py").write_text(f"def kernel({many}, z):\n    pass\n")
    (pkg / "cli" / "c.py").write_text(f"def command({many}, z):\n    pass\n")
    found = _tool().violators(pkg)
    assert found == [  # most parameters first, then the longest
        (14, 1, "sub/m.py::C.wide.inner"),
        (13, 2, "sub/m.py::C.wide"),
        (13, 1, "sub/m.py::thirteen"),
        (0, 121, "sub/m.py::too_long"),
    ]
    assert _tool().violators(pkg, max_params=13, max_lines=121) == [(14, 1, "sub/m.py::C.wide.inner")]
