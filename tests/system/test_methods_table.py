"""The one engine choice (supermarket.system.methods) walked cell by cell: for every rule, classes
or none, law family, ``engine`` asked for, horizon and start, the library (``simulate``), the
command line (``supermarket simulate``) and the sweep (a ``simulate`` grid point) give the same
answer: the same engine runs, or the same refusal, with the option spelled as each door spells it.

Nothing is simulated: the engines are replaced by a stub that reports which one was called."""

from __future__ import annotations

import itertools
import re
import warnings

import pytest
from click.testing import CliRunner

import supermarket as sm
from supermarket.simulation import dispatch, run
from supermarket.sweep import SweepFileError, parse_sweep
from supermarket.system import methods
from supermarket.system.spec import System

RULES = ("jsq-d", "jiq")
CLASSES = (None, "0.5:2,0.5:1")
LAWS = ("exp", "erlang:2", "lognormal:2")  # one law of each family
REQUESTS = ("profile", "queues", "buckets", "phase", "events")
HORIZONS = ("steps", "time")
STARTS = ("empty", "fixed-point")
N, D, LOAD = 10, 2, "0.5"


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
    monkeypatch.setattr(run, "_execute", lambda plan, **kw: (_ for _ in ()).throw(Ran(plan.engine)))


def _normal(text: str) -> str:
    """A refusal with the option's name as the library spells it (``--max-steps`` -> ``max_steps``,
    ``--time`` and ``time=`` -> ``time``), and the command line's prefix ``supermarket: error:`` removed."""
    text = re.sub(r"^supermarket: error: ", "", text.strip())
    text = re.sub(r"--([a-z-]+)", lambda m: m.group(1).replace("-", "_"), text)
    return text.replace("time=", "time")


def _library(system_kw: dict, request: str, horizon: dict, start: str) -> str:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the cautions of a short run, issued before it starts
            sm.simulate(N, D, LOAD, engine=request, start=start, seed=1, **system_kw, **horizon)
    except Ran as ran:
        return f"runs {ran.args[0]}"
    except (ValueError, TypeError) as exc:
        return _normal(str(exc))
    raise AssertionError("neither ran nor refused")


def _cli(system_kw: dict, request: str, horizon: dict, start: str) -> str:
    from supermarket.cli import main

    args = ["simulate", "--n", str(N), "--d", str(D), "--load", LOAD, "--engine", request, "--start", start]
    args += ["--policy", system_kw["policy"], "--service", system_kw["service"], "--json"]
    if system_kw["server_classes"]:
        args += ["--server-classes", system_kw["server_classes"]]
    ((key, value),) = horizon.items()
    args += [f"--{key}", str(value)]
    r = CliRunner().invoke(main, args)
    if isinstance(r.exception, Ran):
        return f"runs {r.exception.args[0]}"
    assert r.exit_code == 2, (args, r.output, r.exception)
    return _normal(r.output.strip().splitlines()[-1])


_ROW = {"phase": "phase", "classes": "classes", "classes-phase": "classes-phase", "events": "events"}


def _sweep(system_kw: dict, request: str, horizon: dict, start: str) -> str:
    lines = ["[sweep]", "seed = 1", "[[run]]", 'measurement = "simulate"', f"n = {N}", f"d = {D}", f"load = {LOAD}"]
    lines += [f'engine = "{request}"', f'start = "{start}"', f'policy = "{system_kw["policy"]}"']
    lines += [f'service = "{system_kw["service"]}"']
    if system_kw["server_classes"]:
        lines.append(f'server_classes = "{system_kw["server_classes"]}"')
    ((key, value),) = horizon.items()
    lines.append(f"{key} = {value!r}")
    try:
        s = parse_sweep("\n".join(lines) + "\n")
    except SweepFileError as exc:
        (found,) = exc.errors
        found = re.sub(r"^line \d+: run\[1\]\.\w+: (grid point .*?: )?", "", found)
        return _normal(found)
    (task,) = s.tasks
    engine = task.params["engine"]
    return f"runs {_ROW.get(engine, engine)}"


CELLS = list(itertools.product(RULES, CLASSES, LAWS, REQUESTS, HORIZONS, STARTS))


@pytest.mark.parametrize("rule, classes, law", list(itertools.product(RULES, CLASSES, LAWS)))
def test_every_door_gives_the_same_answer(stubbed, rule, classes, law):
    system_kw = {"policy": rule, "service": law, "server_classes": classes}
    seen = set()
    for request, horizon_key, start in itertools.product(REQUESTS, HORIZONS, STARTS):
        horizon = {"steps": 20_000} if horizon_key == "steps" else {"time": 5.0}
        answers = {
            door: f(system_kw, request, horizon, start)
            for door, f in (("library", _library), ("cli", _cli), ("sweep", _sweep))
        }
        assert len(set(answers.values())) == 1, (request, horizon, start, answers)
        seen.add(answers["library"])
    assert any(a.startswith("runs") for a in seen)


def test_the_table_is_the_answer():
    """The engine that runs is the table's entry; a request not in a row is refused naming those
    that are; every option an engine refuses is refused with the reason of :data:`methods.OPTIONS`."""
    for (family, has_classes), row in methods.SIMULATION.items():
        law = {"exponential": "exp", "phase-type": "erlang:2", "general": "lognormal:2"}[family]
        s = System(N, D, 0.5, service=law, server_classes="0.5:2,0.5:1" if has_classes else None)
        assert next(iter(row)) == "profile"  # the default request names the default engine
        for request in REQUESTS:
            if request in row:
                assert methods.simulation_engine(s, request) == row[request]
            else:
                with pytest.raises(ValueError, match="engine"):
                    methods.simulation_engine(s, request)
        engine = methods.simulation_engine(s)
        for option in sorted(set(methods.OPTIONS) - methods.ENGINES[engine].takes - {"start", "time_mode"}):
            with pytest.raises(methods.Refusal) as err:
                methods.check_options(s, engine, {option: 1})
            assert err.value.key == option and methods.ENGINES[engine].text in str(err.value)
        for mode in {"discrete", "continuous"} - set(methods.ENGINES[engine].time_modes):  # its modes, or why not
            with pytest.raises(methods.Refusal) as err:
                methods.check_options(s, engine, {"time_mode": mode})
            assert err.value.key == "time_mode" and f"runs in {methods.ENGINES[engine].time_modes[0]} time only" in str(
                err.value
            )


def test_the_table_defaults_are_the_engines():
    """The defaults the table states are those the engines apply."""
    from supermarket.simulation.general.run import DEFAULT_REPLICATIONS

    assert methods.ENGINES["events"].replications == DEFAULT_REPLICATIONS
    assert methods.default_replications(System(N, D, 0.5, service="lognormal:2")) == DEFAULT_REPLICATIONS
    r = sm.simulate(N, D, 0.5, service="erlang:2", steps=20_000, seed=1)
    assert (r.replications, r.batches) == (1, methods.ENGINES["phase"].batches)


def test_exact_and_mean_field_say_why_not():
    lognormal = System(3, 2, 0.5, service="lognormal:4")
    with pytest.raises(ValueError, match="an exact finite-state law does not exist for lognormal:4"):
        methods.exact_solver(lognormal)
    assert methods.mean_field(System(None, 2, 0.5, rule="jiq", service="erlang:2")) == "fluid"  # docs/model.md §2.1
    assert methods.exact_solver(System(3, 2, 0.5)) == "profile"
    assert methods.mean_field(System(None, 2, 0.5, server_classes="0.5:2,0.5:1")) == "classes"


@pytest.mark.parametrize(
    "argv, system",
    [
        (["exact", "--n", "2", "--service", "pareto:3"], System(2, 2, 0.5, service="pareto:3")),
        (
            ["exact", "--n", "2", "--server-classes", "0.5:2,0.5:1", "--service", "deterministic"],
            System(2, 2, 0.5, service="deterministic", server_classes="0.5:2,0.5:1"),
        ),
        (["meanfield", "--service", "lognormal:2"], System(None, 2, 0.5, service="lognormal:2")),
        (
            ["meanfield", "--service", "pareto:3", "--policy", "jiq"],
            System(None, 2, 0.5, rule="jiq", service="pareto:3"),
        ),
        (
            ["meanfield", "--server-classes", "0.5:2,0.5:1", "--service", "deterministic", "--policy", "jsq"],
            System(None, 2, 0.5, rule="jsq", service="deterministic", server_classes="0.5:2,0.5:1"),
        ),
    ],
)
def test_exact_and_meanfield_commands_refuse_by_the_table(argv, system):
    """``exact`` and ``meanfield`` choose their solver by the table, and refuse with its reason."""
    from supermarket.cli import main

    method = methods.exact_solver if argv[0] == "exact" else methods.mean_field
    with pytest.raises(ValueError) as err:
        method(system)
    r = CliRunner().invoke(main, [*argv, "--load", "0.5", "--d", "2"])
    assert r.exit_code == 2 and r.output.strip() == f"supermarket: error: {err.value}"


@pytest.mark.parametrize("classes, law", list(itertools.product(CLASSES, LAWS)))
def test_a_precision_target_is_taken_alike_by_the_library_and_the_command(stubbed, classes, law):
    """``precision``: the library and the command line agree, and every engine takes it (the law
    engines by reruns from the same seed, supermarket.simulation.law_precision)."""
    system_kw = {"policy": "jsq-d", "service": law, "server_classes": classes}
    horizon = {"time": 5.0}
    lib = _library(system_kw | {"precision": 0.01}, "profile", horizon, "empty")
    from supermarket.cli import main

    args = ["simulate", "--n", str(N), "--d", str(D), "--load", LOAD, "--service", law, "--time", "5", "--json"]
    args += ["--precision", "0.01"] + (["--server-classes", classes] if classes else [])
    r = CliRunner().invoke(main, args)
    cli = f"runs {r.exception.args[0]}" if isinstance(r.exception, Ran) else _normal(r.output.splitlines()[-1])
    assert lib == cli
    assert lib.startswith("runs")
