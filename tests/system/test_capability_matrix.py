"""The capability matrix (docs/capabilities.md, written by tools/capability_matrix.py from the one
method table, supermarket.system.methods): the committed page is the generator's output, and
sampled cells do what they say: the command runs, or refuses with the cell's reason, the same
from the library, the command line and the sweep.  The engines are stubbed where only the choice
is checked (as in tests/system/test_methods_table.py); a few tiny runs are real."""

from __future__ import annotations

import re
import warnings

import pytest
from click.testing import CliRunner

import supermarket as sm
from supermarket.cli import main
from supermarket.simulation import dispatch
from supermarket.sweep import SweepFileError, parse_sweep
from supermarket.system import methods
from supermarket.system.spec import System

N, D, LOAD = 10, 2, "0.5"
ENGINE_OF = {  # a system of each law engine: (service, server classes)
    "phase": ("erlang:2", None),
    "classes": ("exp", "0.5:2,0.5:1"),
    "events": ("lognormal:2", None),
}


class Ran(Exception):
    """Raised by the stubs in place of a run: ``args[0]`` is the engine that would have run."""


@pytest.fixture
def stubbed(monkeypatch):
    def stub(name):
        def f(*args, **kwargs):
            raise Ran(name)

        return f

    for attr, name in (
        ("simulate_phase_service", "phase"),
        ("simulate_classes", "classes"),
        ("simulate_classes_phase", "classes-phase"),
        ("simulate_general", "events"),
    ):
        monkeypatch.setattr(dispatch, attr, stub(name))


def _normal(text: str) -> str:
    """A message with the option spelled as the library spells it and the CLI's prefix removed."""
    text = re.sub(r"^supermarket: error: ", "", text.strip())
    text = re.sub(r"--([a-z-]+)", lambda m: m.group(1).replace("-", "_"), text)
    return text.replace("time=", "time")


def _library(service, classes, **kw) -> str:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sm.simulate(N, D, LOAD, service=service, server_classes=classes, seed=1, time=5.0, **kw)
    except Ran as ran:
        return f"runs {ran.args[0]}"
    except (ValueError, TypeError) as exc:
        return _normal(str(exc))
    raise AssertionError("neither ran nor refused")


def _cli(service, classes, **kw) -> str:
    args = ["simulate", "--n", str(N), "--d", str(D), "--load", LOAD, "--time", "5", "--service", service]
    args += ["--server-classes", classes] if classes else []
    for key, value in kw.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    r = CliRunner().invoke(main, args)
    if isinstance(r.exception, Ran):
        return f"runs {r.exception.args[0]}"
    assert r.exit_code == 2, (args, r.output, r.exception)
    return _normal(r.output.strip().splitlines()[-1])


def _sweep(service, classes, **kw) -> str:
    lines = ["[sweep]", "seed = 1", "[[run]]", 'measurement = "simulate"', f"n = {N}", f"d = {D}", f"load = {LOAD}"]
    lines += ["time = 5.0", f'service = "{service}"'] + ([f'server_classes = "{classes}"'] if classes else [])
    lines += [f"{key} = {value!r}".replace("'", '"') for key, value in kw.items()]
    try:
        s = parse_sweep("\n".join(lines) + "\n")
    except SweepFileError as exc:
        (found,) = exc.errors
        return _normal(re.sub(r"^line \d+: run\[1\]\.\w+: (grid point .*?: )?", "", found))
    (task,) = s.tasks
    return f"runs {task.params['engine']}"


DOORS = (_library, _cli, _sweep)


@pytest.mark.parametrize("engine", sorted(ENGINE_OF))
def test_eps_is_refused_not_ignored(stubbed, engine):
    """The law engines report no good set: ``eps`` is refused with the table's one reason, the same
    from every door (it was ignored)."""
    service, classes = ENGINE_OF[engine]
    system = System(N, D, 0.5, service=service, server_classes=classes)
    want = methods.refusal(system, engine, "eps")
    answers = {door.__name__: door(service, classes, eps=0.05) for door in DOORS}
    assert set(answers.values()) == {want}, answers


def test_a_general_law_has_no_discrete_time_mode_from_any_door(stubbed):
    """Lognormal service: no jump chain exists (docs/model.md §1.1), the one refusal of principle."""
    system = System(N, D, 0.5, service="lognormal:2")
    want = methods.refusal(system, "events", "time_mode")
    assert "no discrete chain exists for service lognormal:2" in want
    answers = {door.__name__: door("lognormal:2", None, time_mode="discrete") for door in DOORS}
    assert set(answers.values()) == {want}, answers


@pytest.mark.parametrize(
    "service, classes, mode, engine",
    [
        ("erlang:2", None, "discrete", "phase"),  # the jump chain, holding times at their means
        ("erlang:2", None, "continuous", "phase"),  # exponential holding times
        ("exp", "0.5:2,0.5:1", "discrete", "classes"),  # the uniformized chain
        ("exp", "0.5:2,0.5:1", "continuous", "events"),  # the count engine with classes has no other mode
        ("erlang:2", "0.5:2,0.5:1", "discrete", "classes-phase"),  # the event engine has no discrete mode
        ("erlang:2", "0.5:2,0.5:1", "continuous", "events"),
        ("lognormal:2", None, "continuous", "events"),
    ],
)
def test_each_time_mode_runs_on_an_engine_that_has_it(stubbed, service, classes, mode, engine):
    """``time_mode`` is honoured, never ignored: the default request runs an engine of the system's
    row that has the mode (docs/model.md §1.1), the same from every door."""
    answers = [door(service, classes, time_mode=mode) for door in DOORS]
    assert answers == [f"runs {engine}"] * 3
    assert mode in methods.ENGINES[engine].time_modes


def test_an_engine_asked_for_by_name_refuses_a_mode_it_lacks():
    c = System(N, D, 0.5, server_classes="0.5:2,0.5:1")
    assert methods.simulation_engine(c, "phase", "continuous") == "classes-phase"
    with pytest.raises(methods.Refusal, match=r"runs in discrete time only .*the event engine, engine 'events'"):
        methods.check_options(c, "classes-phase", {"time_mode": "continuous"})
    e = System(N, D, 0.5, service="erlang:2")
    with pytest.raises(methods.Refusal, match=r"continuous time only .*the phase-type count engine, engine 'profile'"):
        methods.check_options(e, "events", {"time_mode": "discrete"})
    with pytest.raises(ValueError, match="time_mode must be 'discrete' or 'continuous'; got 'uniform'"):
        methods.check_options(e, "phase", {"time_mode": "uniform"})


@pytest.mark.parametrize("rule", ["jsq", "jiq"])
def test_the_mean_field_of_a_discontinuous_drift_is_said_the_same_way(rule):
    """JSQ and JIQ: the fluid fixed point (λ, 0, 0, …) exists (classical: in the limit every
    arrival finds an idle server), the refined mean field does not.  The command and the sweep
    give the fixed point, and refuse ``n`` with the table's one reason (the command printed
    ``refined: null`` with exit 0 while the sweep refused the same point)."""
    import json

    from supermarket.sweep.measurements import measure_meanfield

    r = CliRunner().invoke(main, ["meanfield", "--policy", rule, "--d", "2", "--load", "0.7", "--json"])
    assert r.exit_code == 0
    cli = json.loads(r.output)
    row = measure_meanfield({"d": 2, "load": 0.7, "policy": rule}, None)
    assert cli["fixed_point"] == [0.7] and list(row["fixed_point"]) == [0.7]
    assert cli["mean_queue_length"] == row["mean_queue_length"] == 0.7
    assert cli["note"] == row["note"] == methods.fluid_note(rule)
    assert methods.mean_field(System(None, 2, 0.7, rule=rule)) == "fluid"
    with pytest.raises(ValueError) as err:
        methods.smooth_mean_field(rule, "n")
    r = CliRunner().invoke(main, ["meanfield", "--policy", rule, "--d", "2", "--load", "0.7", "--n", "1000"])
    assert r.exit_code == 2 and _normal(r.output.strip().splitlines()[-1]) == str(err.value)
    with pytest.raises(SweepFileError) as bad:
        parse_sweep(f'[[run]]\nmeasurement = "meanfield"\nd = 2\nn = 1000\nload = 0.7\npolicy = "{rule}"\n')
    (found,) = bad.value.errors
    assert re.sub(r"^line \d+: run\[1\]\.n: grid point .*?: ", "", found) == str(err.value)


# --------------------------------------------------------------------------- the page
def _generator():
    import importlib.util

    from _paths import TOOLS

    path = TOOLS / "capability_matrix.py"
    spec = importlib.util.spec_from_file_location("capability_matrix", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = _generator()
SYSTEMS = [(rule, classes, family) for classes in (False, True) for family in GEN.LAWS for rule in GEN.POLICIES]


def test_the_committed_page_is_the_generators_output():
    assert GEN.PAGE.read_text(encoding="utf-8") == GEN.page(), "run: python tools/capability_matrix.py"


def test_every_cell_is_yes_or_a_reason():
    for system in SYSTEMS:
        for row, cell in GEN.cells(*system).items():
            assert cell == "yes" or cell.startswith(("yes: ", "no: ")), (system, row, cell)
            assert not cell.startswith("no: ") or len(cell) > 20, (system, row, cell)


@pytest.fixture
def all_stubbed(stubbed, monkeypatch):
    from supermarket.simulation import run

    monkeypatch.setattr(run, "_execute", lambda plan, **kw: (_ for _ in ()).throw(Ran(plan.engine)))


def _simulate_argv(rule, classes, family, row):
    argv = ["simulate", "--n", str(GEN.N), "--d", str(GEN.D), "--policy", rule, "--service", GEN.LAWS[family]]
    argv += ["--server-classes", GEN.CLASSES] if classes else []
    extra = row.split()[1:]  # "simulate --engine phase" -> ["--engine", "phase"]
    argv += extra + ([] if "--load" in extra else ["--load", GEN.LOAD])
    argv += [] if "--steps" in extra or "--time" in extra else ["--time", "5"]
    return argv


def _check_cli(argv, cell, ran_ok=True):
    r = CliRunner().invoke(main, argv)
    if cell.startswith("no: "):
        assert r.exit_code == 2 and r.output.strip().splitlines()[-1] == f"supermarket: error: {cell[4:]}", (
            argv,
            r.output,
        )
    elif ran_ok and isinstance(r.exception, Ran):
        pass
    else:
        assert r.exit_code == 0, (argv, r.output, r.exception)
    return r


def test_sampled_simulate_cells_do_what_they_say(all_stubbed):
    """Four ``simulate`` rows of every system (rotating through the rows), on the command line
    with the engines stubbed: a "yes" cell reaches its engine, a "no" cell is refused with its
    text, word for word."""
    seen = set()
    for i, system in enumerate(SYSTEMS):
        column = GEN.cells(*system)
        rows = [row for row in column if row.startswith("simulate")]
        for j in range(4):
            row = rows[(5 * i + j) % len(rows)]
            cell = column[row]
            seen.add(cell.split(":")[0])
            r = _check_cli(_simulate_argv(*system, row), cell)
            if cell.startswith("yes: ") and row.split()[:2] != ["simulate", "--start"]:
                engine = r.exception.args[0]
                assert methods.ENGINES[engine].text == cell[5:], (system, row, engine)
    assert seen == {"yes", "no"}


@pytest.mark.parametrize(
    "system",
    [("jsq-d", False, "exponential"), ("jiq", False, "exponential"), ("random", False, "phase-type"),
     ("jsq", True, "exponential"), ("jsq-d", True, "phase-type"), ("jiq", False, "phase-type"),
     ("jsq-d", False, "general"), ("random", True, "general")],
)  # fmt: skip
def test_exact_and_meanfield_cells_do_what_they_say(system):
    """Real tiny runs of ``exact`` (n = 2) and ``meanfield``: a "yes" cell exits 0, a "no" cell is
    refused with its text."""
    rule, classes, family = system
    column = GEN.cells(*system)
    law = ["--policy", rule, "--service", GEN.LAWS[family], "--d", "2", "--load", GEN.LOAD]
    law += ["--server-classes", GEN.CLASSES] if classes else []
    _check_cli(["exact", "--n", "2", *law], column["exact"], ran_ok=False)
    _check_cli(["meanfield", *law], column["meanfield"], ran_ok=False)
    _check_cli(["meanfield", "--n", "1000", *law], column["meanfield --n 1000"], ran_ok=False)


def test_perfect_mixing_and_fluctuations_cells_do_what_they_say():
    """Every system's ``perfect``, ``mixing`` and ``fluctuations`` cells on the command line: a
    "no" cell is refused before any work with its text, word for word; a "yes" cell of
    ``perfect`` and ``mixing`` runs (tiny real runs; the one "yes" of ``fluctuations``, JSQ(d) with
    exponential service, is run by tests/fluctuations/test_fluctuations.py)."""
    for rule, classes, family in SYSTEMS:
        column = GEN.cells(rule, classes, family)
        law = ["--policy", rule, "--service", GEN.LAWS[family]] + (["--server-classes", GEN.CLASSES] if classes else [])
        tiny = ["--n", "10", "--d", "2", "--load", "0.5", "--replications", "2", *law]
        _check_cli(["perfect", *tiny], column["perfect"])
        _check_cli(["mixing", *tiny], column["mixing"])
        if column["fluctuations"].startswith("no: "):
            _check_cli(["fluctuations", "--regime", "a", "--n", "400", *law], column["fluctuations"])


@pytest.mark.parametrize("system", SYSTEMS, ids=lambda s: f"{s[0]}-{'classes' if s[1] else 'one'}-{s[2]}")
def test_every_simulate_cell_does_what_it_says(all_stubbed, system):
    """Every ``simulate`` row of every system, not a sample: on the command line with the engines
    stubbed, a "yes" cell reaches the engine it names and a "no" cell is refused with its text,
    word for word, exit 2."""
    column = GEN.cells(*system)
    rows = [row for row in column if row.startswith("simulate")]
    assert len(rows) >= 10
    for row in rows:
        cell = column[row]
        r = _check_cli(_simulate_argv(*system, row), cell)
        if cell.startswith("yes: ") and row.split()[:2] != ["simulate", "--start"]:
            engine = r.exception.args[0]
            assert methods.ENGINES[engine].text == cell[5:], (system, row, engine)


@pytest.mark.parametrize("system", SYSTEMS, ids=lambda s: f"{s[0]}-{'classes' if s[1] else 'one'}-{s[2]}")
def test_every_exact_meanfield_and_design_cell_does_what_it_says(system):
    """Every ``exact`` (n = 2), ``meanfield``, ``meanfield --n`` and ``design --latency`` cell, real
    tiny runs on the command line: a "yes" cell exits 0, a "no" cell is refused with its text."""
    rule, classes, family = system
    column = GEN.cells(*system)
    law = ["--policy", rule, "--service", GEN.LAWS[family]] + (["--server-classes", GEN.CLASSES] if classes else [])
    load = ["--d", "2", "--load", GEN.LOAD]
    _check_cli(["exact", "--n", "2", *law, *load], column["exact"], ran_ok=False)
    _check_cli(["meanfield", *law, *load], column["meanfield"], ran_ok=False)
    _check_cli(["meanfield", "--n", "1000", *law, *load], column["meanfield --n 1000"], ran_ok=False)
    (design,) = (row for row in column if row.startswith("design"))
    _check_cli(["design", *design.split()[1:], *law], column[design], ran_ok=False)
