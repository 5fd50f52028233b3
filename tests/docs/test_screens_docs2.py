"""Checks of the documentation's helpers: the commands of ``tools/compare_outputs.py``."""

from __future__ import annotations

import shlex
import sys

import click
import pytest

from _paths import ROOT

sys.path.insert(0, str(ROOT / "tools"))

import compare_outputs


@pytest.mark.parametrize("command", compare_outputs.COMMANDS, ids=lambda c: c.split()[0])
def test_compare_outputs_commands_parse(command):
    """Every command of the refactor check parses (options and values), as ``run`` passes it;
    parsing does no work, so this costs milliseconds."""
    from supermarket.cli import main

    words = [*shlex.split(command), "--json"]
    ctx = click.Context(main, info_name="supermarket")
    cmd = main.get_command(ctx, words[0])
    assert cmd is not None, words[0]
    cmd.make_context(words[0], words[1:], parent=ctx)  # raises click.UsageError on a bad option


def test_moved_maps_the_old_simulate_json_onto_the_new_keys():
    """JSON of the shape before issue #28 (item 4) is compared under the keys it has now: the
    profile's flat errors into the estimate dict, the law's quantiles and their errors inside,
    the event engine's system keys and quantiles, the mean field's ``lam_f``."""
    old = {
        "params": {"n": 10, "d": 2, "load": 0.5, "replace": True},
        "steps": 100,
        "policy": "jsq-d",
        "mean_queue_length": 1.5,
        "mean_queue_length_stderr": 0.1,
        "sojourn": {"mean": 3.0, "quantiles": {"0.99": 9.0}, "stderr": {"mean": 0.2, "quantiles": {"0.99": 0.5}}},
    }
    got = compare_outputs.moved(old)
    assert got == {
        ".system.n": 10,
        ".system.d": 2,
        ".system.load": 0.5,
        ".system.replace": True,
        ".events": 100,
        ".system.policy": "jsq-d",
        ".mean_queue_length.mean": 1.5,
        ".mean_queue_length.stderr": 0.1,
        ".sojourn.mean.mean": 3.0,
        ".sojourn.quantiles.0.99.mean": 9.0,
        ".sojourn.mean.stderr": 0.2,
        ".sojourn.quantiles.0.99.stderr": 0.5,
    }
    ev = {"lam": 0.5, "service": {"spec": "x"}, "sojourn": {"mean": 2.0}, "sojourn_quantiles": {"0.5": {"mean": 1.0}}}
    assert compare_outputs.moved(ev) == {
        ".system.load": 0.5,
        ".system.service.spec": "x",
        ".sojourn.mean.mean": 2.0,
        ".sojourn.quantiles.0.5.mean": 1.0,
    }
    assert compare_outputs.moved({"lam_f": 0.5, "d": 2}) == {".load": 0.5, ".d": 2}


def test_mean_field_and_exact_json_name_the_load_load():
    """One name for the load across the law engines' JSON (issue #28, item 4)."""
    import json

    from click.testing import CliRunner

    from supermarket.cli import main

    for args in (
        ["exact", "--n", "2", "--d", "2", "--load", "0.5", "--server-classes", "0.5:2,0.5:1"],
        ["exact", "--n", "2", "--d", "2", "--load", "0.5", "--service", "erlang:2"],
        ["meanfield", "--d", "2", "--load", "0.5", "--server-classes", "0.5:2,0.5:1"],
        ["meanfield", "--d", "2", "--load", "0.5", "--service", "erlang:2"],
    ):
        r = CliRunner().invoke(main, [*args, "--json"])
        assert r.exit_code == 0, r.output
        d = json.loads(r.stdout)
        assert d["load"] == 0.5 and "lam" not in d and "lam_f" not in d, args
