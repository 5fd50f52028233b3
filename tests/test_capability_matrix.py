"""The capability matrix (docs/capabilities.md, written by tools/capability_matrix.py from the one
method table, supermarket.system.methods): the committed page is the generator's output, and
sampled cells do what they say: the command runs, or refuses with the cell's reason, the same
from the library, the command line and the sweep.  The engines are stubbed where only the choice
is checked (as in tests/test_methods_table.py); a few tiny runs are real."""

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
@pytest.mark.parametrize("option, value", [("time_mode", "discrete"), ("eps", 0.05)])
def test_time_mode_and_eps_are_refused_not_ignored(stubbed, engine, option, value):
    """The law engines run in continuous time and report no good set: ``time_mode="discrete"`` and
    ``eps`` are refused with the table's one reason, the same from every door (they were ignored)."""
    service, classes = ENGINE_OF[engine]
    system = System(N, D, 0.5, service=service, server_classes=classes)
    want = methods.refusal(system, engine, option)
    answers = {door.__name__: door(service, classes, **{option: value}) for door in DOORS}
    assert set(answers.values()) == {want}, answers


@pytest.mark.parametrize("engine", sorted(ENGINE_OF))
def test_continuous_time_mode_still_runs_on_the_law_engines(stubbed, engine):
    service, classes = ENGINE_OF[engine]
    row = {"events": "event"}.get(engine, engine)
    answers = [door(service, classes, time_mode="continuous") for door in DOORS]
    assert answers == [f"runs {engine}", f"runs {engine}", f"runs {row}"]


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
