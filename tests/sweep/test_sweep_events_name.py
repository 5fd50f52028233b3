"""The event engine is named "events" in sweep rows, as everywhere else; stores of earlier versions,
whose rows and point identities say "event", are still read and resumed with the same seeds."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

import supermarket.sweep as sw
from supermarket.sweep.points import current_names, law_engine, stored_identity
from supermarket.sweep.seeds import canonical_hash

TEXT = (
    "[sweep]\nseed = 5\n"
    '[[run]]\nmeasurement = "simulate"\nn = 10\nd = 2\nload = 0.5\ntime = 5.0\nservice = "lognormal:2"\n'
)


def test_rows_and_points_name_the_event_engine_events():
    t = sw.parse_sweep(TEXT).tasks[0]
    assert t.params["engine"] == "events" and law_engine(dict(t.params)) == "events"
    # the point's identity is the one earlier versions hashed (engine "event"): same seed, same numbers
    assert t.point_hash == canonical_hash({"measurement": "simulate", **(dict(t.params) | {"engine": "event"})})
    assert stored_identity(dict(t.params))["engine"] == "event"
    # forcing the engine is the same point
    assert sw.parse_sweep(TEXT + 'engine = "events"\n').tasks[0].point_hash == t.point_hash
    assert current_names({"engine": "phase"}) == {"engine": "phase"}


def test_a_stored_row_named_event_is_still_read_and_resumed(tmp_path):
    sweep = sw.parse_sweep(TEXT)
    out = tmp_path / "out"
    sw.run_sweep(sweep, out, workers=1)
    before = sw.table_rows(sw.read_results(out))
    assert [r["engine"] for r in before] == ["events"]
    # the part as an earlier version wrote it: its engine column says "event"
    (part,) = (out / "parts").iterdir()
    table = pq.read_table(part)
    i = table.schema.get_field_index("engine")
    pq.write_table(table.set_column(i, "engine", pa.array(["event"] * table.num_rows)), part)
    res = sw.run_sweep(sw.parse_sweep(TEXT), out, workers=1)
    assert (res.skipped, res.ran, res.discarded) == (1, 0, 0)  # read as this point's result, not run again
    after = sw.table_rows(sw.read_results(out))
    assert [r["engine"] for r in after] == ["events"]
    assert after[0]["u_mean"] == before[0]["u_mean"] and after[0]["seed"] == before[0]["seed"]


def test_exp_points_take_the_event_engine_and_jbt_runs_there_by_default():
    base = '[[run]]\nmeasurement = "simulate"\nn = 10\nd = 2\nload = 0.5\ntime = 5.0\n'
    (t,) = sw.parse_sweep(base + 'engine = "events"\n').tasks
    assert t.params["engine"] == "events" and "service" not in t.params
    (t,) = sw.parse_sweep(base + 'policy = "jbt"\n').tasks
    assert t.params["engine"] == "events"
    (t,) = sw.parse_sweep(base + 'policy = "jsq"\n').tasks
    assert t.params["engine"] == "profile"  # the other rules keep their engine
