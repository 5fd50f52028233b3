"""One result shape per method: ``design --latency`` answers with the same keys, in the same order,
for JSQ(d) (the mean field of supermarket.design.latency) and for every other rule, law and classes
(supermarket.design.rule_latency)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from supermarket.cli import main


def _keys(*extra: str) -> list[str]:
    r = CliRunner().invoke(main, ["design", "--latency", "8", "--load", "0.5", "--json", *extra])
    assert r.exit_code == 0, r.output
    return list(json.loads(r.output))


OTHERS = [("--policy", "random"), ("--policy", "jsq"), ("--server-classes", "0.5:2,0.5:1"), ("--service", "erlang:2")]


@pytest.mark.parametrize("extra", OTHERS)
def test_every_latency_design_has_the_keys_of_jsq_d(extra):
    """The same keys, in the same order (a law's answer keeps its ``fit`` too, after them)."""
    want = _keys()
    got = _keys(*extra)
    assert [k for k in got if k != "fit"] == want


def test_the_largest_load_answers_have_the_same_keys():
    r = CliRunner().invoke(main, ["design", "--latency", "8", "--d", "2", "--json", "--service", "erlang:2"])
    got = [k for k in json.loads(r.output) if k != "fit"]
    r = CliRunner().invoke(main, ["design", "--latency", "8", "--d", "2", "--json"])
    assert got == list(json.loads(r.output)) == _keys()


def test_jsq_d_says_what_it_is():
    r = CliRunner().invoke(main, ["design", "--latency", "8", "--load", "0.5", "--json"])
    j = json.loads(r.output)
    assert (j["policy"], j["service"], j["server_classes"], j["holds"]) == ("jsq-d", "exp", None, None)
