"""Write docs/capabilities.md, the capability matrix, from the method table and the registries.

    PYTHONPATH=src python tools/capability_matrix.py [--check]

Every cell is what :mod:`supermarket.system.methods` says of one system (a rule of
:data:`supermarket.system.policies.POLICIES`, server classes or none, a law of each family of
:data:`supermarket.system.spec.LAW_FAMILIES`) and one command or option: "yes" (with the engine,
solver or mean field that serves it), or "no: " and the table's refusal, word for word as the
command line prints it.  Nothing is run.  ``--check`` writes nothing and exits 1 if the page is
not the output (tests/system/test_capability_matrix.py checks the same and samples cells against the
command line).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from supermarket.sweep import SweepFileError, parse_sweep
from supermarket.system import methods
from supermarket.system import policies as _pol
from supermarket.system.policies import POLICIES
from supermarket.system.spec import LAW_FAMILIES, System

PAGE = Path(__file__).resolve().parent.parent / "docs" / "capabilities.md"

#: The system each cell is about: n, d, load, and a law of each family, the classes if any.
N, D, LOAD = 10, 2, "0.5"
LAWS = {"exponential": "exp", "phase-type": "erlang:2", "general": "lognormal:2"}
CLASSES = "0.5:2,0.5:1"

#: The ``--engine`` requests of ``simulate``.
REQUESTS = ("profile", "queues", "buckets", "phase", "events")

#: Options of ``simulate`` on the engine it runs by default: (row label, table key, value).
OPTIONS = (
    ("--steps 20000", "steps", 20_000),
    ("--time-mode discrete", "time_mode", "discrete"),
    ("--time-mode continuous", "time_mode", "continuous"),
    ("--eps 0.05", "eps", 0.05),
    ("--cdf 10", "cdf", 10),
    ("--start fixed-point", "start", "fixed-point"),
    ("--start perfect", "start", "perfect"),
    ("--precision 0.01", "precision", 0.01),
    ("--load 1", "load", 1),
    ("--record-every 100", "record_every", 100),
    ("--plot F", "plot", "F"),
)

#: How the command line spells the keys of the table's options.
FLAGS = {"time_mode": "--time-mode", "max_steps": "--max-steps", "client": "--scheduler"}


def _flag(key: str) -> str:
    return FLAGS.get(key, "--" + key.replace("_", "-"))


def _cell(f: Callable[[], str | None]) -> str:
    """ "yes" (with what serves it) or "no: " and the refusal."""
    try:
        what = f()
    except ValueError as exc:
        return f"no: {exc}"
    return "yes" if what is None else f"yes: {what}"


def _system(rule: str, classes: bool, family: str, n: int | None = N) -> System:
    return System(n, D, LOAD, rule=rule, service=LAWS[family], server_classes=CLASSES if classes else None)


def cells(rule: str, classes: bool, family: str) -> dict[str, str]:
    """The matrix's column of one system: row label -> cell."""
    s = _system(rule, classes, family)
    try:
        engine: str | None = methods.simulation_engine(s)
    except ValueError as exc:  # the default engine does not run this rule (the rule registry says which do)
        engine, refused = None, f"no: {exc}"
    out: dict[str, str] = {"simulate": refused if engine is None else _cell(lambda: methods.ENGINES[engine].text)}
    for request in REQUESTS:
        out[f"simulate --engine {request}"] = _cell(
            lambda r=request: methods.ENGINES[methods.simulation_engine(s, r)].text
        )
    out["simulate --time 5"] = "yes" if engine is not None else refused  # every engine runs for a time
    for label, key, value in OPTIONS:
        given = {key: value}
        out[f"simulate {label}"] = (
            refused
            if engine is None
            else _time_mode_cell(s, engine, str(value))
            if key == "time_mode"
            else _cell(lambda g=given: methods.check_options(s, engine, g, spell=_flag, time="--time"))
        )
    mf = _system(rule, classes, family, n=None)
    out["exact"] = _cell(lambda: f"supermarket.stationary.{methods.exact_solver(s)}")
    out["meanfield"] = _cell(lambda: _mean_field_text(mf))
    out["meanfield --n 1000"] = _cell(lambda: _refined_text(mf))
    out["perfect"] = _cell(lambda: _perfect_text(s))
    out["mixing"] = _cell(lambda: methods.paper_method(s, "mixing", _flag))
    out["fluctuations"] = _cell(lambda: methods.paper_method(s, "fluctuations", _flag))
    out.update(_design_rows(rule, classes, family))
    out["sweep: simulate point"] = _sweep_cell("simulate", s, out["simulate"])
    record = out["simulate --record-every 100"]
    out["sweep: simulate point with record_every"] = _sweep_cell("simulate", s, record, ["record_every = 100"])
    out["sweep: meanfield point"] = _sweep_cell("meanfield", s, out["meanfield"])
    out["sweep: mixing point"] = _sweep_cell("mixing", s, out["mixing"])
    out["sweep: fluctuations point"] = _sweep_cell("fluctuations", s, out["fluctuations"])
    return out


def _time_mode_cell(s: System, default: str, mode: str) -> str:
    """``simulate --time-mode MODE``: the engine the default request runs in that mode (named when it
    is not the default's), or the refusal."""

    def run() -> str | None:
        engine = methods.simulation_engine(s, None, mode)
        methods.check_options(s, engine, {"time_mode": mode}, spell=_flag, time="--time")
        return None if engine == default else methods.ENGINES[engine].text

    return _cell(run)


def _design_rows(rule: str, classes: bool, family: str) -> dict[str, str]:
    """The rows of ``design --latency`` (supermarket.design.rule_latency.latency_method: the
    mean field that gives the sojourn law, or the method table's refusal)."""
    from supermarket.design.rule_latency import latency_method

    system = _system(rule, classes, family, n=None)
    return {f"design --latency 8 --load {LOAD}": _cell(lambda: latency_method(system))}


def _perfect_text(system: System) -> str:
    d, replace = methods.perfect_sampler(system, _flag)
    chain = f"JSQ({'n' if d == system.n and system.d != d else d})" + ("" if replace else " without replacement")
    return f"dominated coupling from the past, as {chain}"


def _mean_field_text(system: System) -> str:
    field = methods.mean_field(system)
    if field != "fluid":
        return f"supermarket.meanfield.{field}"
    if system.law_family == "exponential" and not system.has_classes and not _pol.RULES[system.rule].uses_d:
        return "the fluid fixed point (λ, 0, 0, …)"
    return "the fluid fixed point (supermarket.meanfield.fluid)"


def _refined_text(system: System) -> str:
    return f"supermarket.meanfield.{methods.refined_mean_field(system, '--n')} (refined mean field, linear noise)"


def _sweep_cell(measurement: str, system: System, command: str, extra: list[str] | None = None) -> str:
    """The sweep's answer, as its parser gives it (the registry of measurements and the same table;
    nothing runs), with the file's ``extra`` lines: the command's cell when the point is taken, else
    "no: " and the file's error."""
    lines = ["[[run]]", f'measurement = "{measurement}"', f'policy = "{system.rule}"']
    if measurement == "fluctuations":
        lines += ["n = 400", 'regime = "a"', "kappa = 1.0"]
    else:
        lines += [f"d = {D}", f"load = {LOAD}"]
    if measurement in ("simulate", "mixing"):
        lines += [f"n = {N}"] + (["time = 5.0"] if measurement == "simulate" else [])
    if system.law_family != "exponential":
        lines.append(f'service = "{system.service.spec}"')
    if system.has_classes:
        lines.append(f'server_classes = "{CLASSES}"')
    lines += extra or []
    try:
        parse_sweep("\n".join(lines) + "\n")
    except SweepFileError as exc:
        errors = [re.sub(r"^line \d+: run\[1\]\.\w+: (grid point .*?: )?", "", e) for e in exc.errors]
        return "no: " + "; ".join(errors)
    return command


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("*", "\\*").replace("_", "\\_")


def page() -> str:
    lines = [
        "# Capabilities: what runs for which system",
        "",
        "<!-- written by tools/capability_matrix.py from supermarket.system.methods; do not edit -->",
        "",
        "Each table is one service-law family and server classes or none; each column a dispatch",
        "rule; each row a command, or an option of `supermarket simulate` on the engine it runs",
        "by default.  A cell is **yes** (with the engine, solver or mean field that serves the",
        "system) or **no** with the reason, word for word as the command line prints it.  The",
        f"systems are `--n {N} --d {D} --load {LOAD}` with the law "
        + ", ".join(f"`{law}` ({family})" for family, law in LAWS.items())
        + f" and, with classes, `--server-classes {CLASSES}`; the library and the sweep refuse",
        "with the same text, the option spelled as they spell it (docs/model.md §13–§15).",
        "",
        "The cells come from the one method table (`supermarket.system.methods`) and the",
        "registries of rules and sweep measurements; `python tools/capability_matrix.py` writes",
        "this page, and the tests check that it is the generator's output and that sampled cells",
        "do what they say.",
        "",
    ]
    for classes in (False, True):
        for family in LAW_FAMILIES:
            title = f"{family} service ({LAWS[family]})" + (f", server classes {CLASSES}" if classes else ", one class")
            lines += [f"## {title[0].upper()}{title[1:]}", ""]
            columns = {rule: cells(rule, classes, family) for rule in POLICIES}
            lines.append("| command or option | " + " | ".join(f"`{r}`" for r in POLICIES) + " |")
            lines.append("|---" * (len(POLICIES) + 1) + "|")
            for row in columns[POLICIES[0]]:
                lines.append(f"| `{row}` | " + " | ".join(_escape(columns[r][row]) for r in POLICIES) + " |")
            lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if the page is not the output")
    args = ap.parse_args(argv)
    text = page()
    if args.check:
        same = PAGE.exists() and PAGE.read_text(encoding="utf-8") == text
        print(f"{PAGE.name}: {'up to date' if same else 'differs from the generator; run tools/capability_matrix.py'}")
        return 0 if same else 1
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
