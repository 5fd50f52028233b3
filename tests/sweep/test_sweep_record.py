"""A sweep's ``simulate`` point takes the measurement options of ``supermarket simulate`` that
write into the result (issue 28): ``record_every``, ``record_levels`` (the trajectory of
replication 0) and ``cdf`` (the response-time CDFs), on every engine.

Each row's trajectory and CDF are checked against an independent run: ``simulate`` called
directly with the point's keys and the task's seed (``task_seed``) must give the same values,
bit for bit; refusals are the library's, naming the key; and a sweep without these keys keeps
the hashes (hence the seeds) it had before them.
"""

from __future__ import annotations

import shutil
import warnings

import pyarrow.parquet as pq
import pytest

from supermarket import simulate
from supermarket import sweep as sw
from sweep_runs import comparable, equal, rows_of, same

HEAD = '[sweep]\nseed = 5\n[[run]]\nmeasurement = "simulate"\nn = 10\nd = 2\nload = 0.5\n'

#: one point per engine: profile, buckets (continuous time: a grid in time), phase, classes, classes-phase
#: (a grid in events), events (a grid in time)
POINTS = {
    "profile": "steps = 3000\nrecord_every = 500\nrecord_levels = 3\ncdf = 4\n",
    "buckets": 'steps = 3000\nrecord_every = 2.5\ncdf = 3\nengine = "buckets"\ntime_mode = "continuous"\n',
    "phase": 'steps = 3000\nrecord_every = 400\nrecord_levels = 3\ncdf = 4\nservice = "erlang:2"\n',
    "classes": 'steps = 3000\nrecord_every = 250\ncdf = 3\nserver_classes = "0.5:2,0.5:1"\n',
    "classes-phase": 'steps = 3000\nrecord_every = 600\nservice = "erlang:2"\nserver_classes = "0.5:2,0.5:1"\n'
    'engine = "phase"\n',
    "events": 'time = 150.0\nrecord_every = 25\ncdf = 3\nservice = "lognormal:2"\n',
}


def _errors(text: str) -> list[str]:
    with pytest.raises(sw.SweepFileError) as info:
        sw.parse_sweep(text)
    return info.value.errors


def _direct(task: sw.Task):
    """``simulate`` called with the point's keys and the task's seed, as a user would."""
    p = dict(task.params)
    keys = ("steps", "time", "burn_in", "service", "server_classes", "record_every", "record_levels", "start")
    keys += ("time_mode",)
    kw = {k: p[k] for k in keys if k in p}
    if p["engine"] in ("events", "classes-phase", "buckets"):  # the others are the default engines of their points
        kw["engine"] = {"classes-phase": "phase"}.get(p["engine"], p["engine"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return simulate(
            p["n"], p["d"], p["load"], seed=sw.task_seed(5, task.point_hash, task.replication), replications=1,
            workers=1, progress=False, **kw,
        )  # fmt: skip


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """The six points run as one sweep (about a second)."""
    text = HEAD + '\n[[run]]\nmeasurement = "simulate"\nn = 10\nd = 2\nload = 0.5\n'.join(POINTS.values())
    s = sw.parse_sweep(text)
    out = tmp_path_factory.mktemp("rec") / "o"
    assert sw.run_sweep(s, out, workers=1).failed == 0
    return s, out, rows_of(out)


def test_each_engine_runs_its_point(ran):
    s, _, rows = ran
    assert [t.params["engine"] for t in s.tasks] == list(POINTS)
    assert all(r["status"] == "ok" for r in rows)


@pytest.mark.parametrize("i", range(len(POINTS)))
def test_row_trajectory_and_cdf_are_the_librarys_for_the_task_seed(ran, i):
    """The row holds ``trajectory_t``, ``trajectory_u`` (records × levels), ``trajectory_max``,
    ``trajectory_total`` (and ``trajectory_u_class`` with classes) and ``cdf_t``, ``cdf_sojourn``,
    … exactly as the direct call's ``to_dict(cdf_points=…)`` gives them."""
    s, _, rows = ran
    task, row = s.tasks[i], rows[i]
    res = _direct(task)
    got = res.to_dict(cdf_points=task.params.get("cdf"))
    tr = got["trajectory"]
    assert set(tr) >= {"t", "u", "max", "total"} and len(tr["t"]) >= 5
    for k, x in tr.items():
        assert equal(row[f"trajectory_{k}"], x), k
    levels = task.params.get("record_levels")
    if levels is not None:
        assert {len(u) for u in row["trajectory_u"]} == {levels}
    assert ("u_class" in tr) == ("server_classes" in task.params)
    if "cdf" in task.params:
        assert len(row["cdf_t"]) == task.params["cdf"]
        for k, x in got["cdf"].items():
            assert equal(row[f"cdf_{k}"], x), k
    else:
        assert row.get("cdf_t") is None
    # the records' grid is the engine's unit: events on the count engines, time on the event engine
    step = row["trajectory_t"][1] - row["trajectory_t"][0]
    if task.params["engine"] == "events" or task.params["time_mode"] == "continuous":
        assert step == pytest.approx(task.params["record_every"])
    # and recording changes none of the run's numbers (the library's promise, checked on the row)
    assert equal(row["u_mean"], [float(x) for x in res.u_mean])


def test_the_part_file_holds_the_whole_trajectory_and_resume_keeps_it(ran, tmp_path):
    """Each task's part file (written atomically) has the trajectory and CDF columns; a sweep
    resumed after losing a part and the final table gives the rows of the uninterrupted run."""
    s, out, rows = ran
    part = sw.table_rows(pq.read_table(out / sw.PARTS_DIR / f"{s.tasks[0].task_id}.parquet"))
    assert len(part) == 1 and equal(part[0]["trajectory_u"], rows[0]["trajectory_u"])
    assert equal(part[0]["cdf_sojourn"], rows[0]["cdf_sojourn"])
    copy = tmp_path / "o"
    shutil.copytree(out, copy)
    (copy / sw.RESULTS_FILE).unlink()
    (copy / sw.PARTS_DIR / f"{s.tasks[1].task_id}.parquet").unlink()
    assert sw.run_sweep(s, copy, workers=1).failed == 0
    assert same(comparable(rows_of(copy)), comparable(rows))


def test_report_reads_the_rows_back(ran, tmp_path):
    from supermarket import report as rp

    _, out, _ = ran
    md = tmp_path / "r.md"
    rp.build_report(out, md, fmt="md")
    assert "record_every" in md.read_text()


def test_a_grid_axis_of_record_every(tmp_path):
    s = sw.parse_sweep(HEAD + "steps = 2000\nrecord_every = [250, 1000]\n")
    assert [t.params["record_every"] for t in s.tasks] == [250.0, 1000.0]
    assert sw.run_sweep(s, tmp_path / "o", workers=1).failed == 0
    rows = rows_of(tmp_path / "o")
    assert [len(r["trajectory_t"]) for r in rows] == [len(_direct(t).trajectory.t) for t in s.tasks]


@pytest.mark.parametrize("extra", ["", 'service = "erlang:2"\n', 'service = "lognormal:2"\n'])
def test_a_burn_in_time_that_is_no_whole_number(extra, tmp_path):
    """``burn_in`` with ``time`` is a time, as ``simulate --burn-in-time 2.5``: the row is the
    library's run with ``burn_in=2.5``; a whole number stays an int (the hashes of earlier sweeps)."""
    s = sw.parse_sweep(HEAD + "time = 60.0\nburn_in = [2.5, 3]\n" + extra)
    assert [t.params["burn_in"] for t in s.tasks] == [2.5, 3] and isinstance(s.tasks[1].params["burn_in"], int)
    assert sw.run_sweep(s, tmp_path / "o", workers=1).failed == 0
    for task, row in zip(s.tasks, rows_of(tmp_path / "o")):
        assert row["mean_queue_length"] == _direct(task).to_dict()["mean_queue_length"]["mean"]


@pytest.mark.parametrize(
    "extra, key, words",
    [
        # the count engines' grid is in events: a whole number (simulation.records.check_record)
        ('steps = 2000\nrecord_every = 2.5\nservice = "erlang:2"\n', "record_every", "a whole number >= 1"),
        ('steps = 2000\nrecord_every = 2.5\nserver_classes = "0.5:2,0.5:1"\n', "record_every", "a whole number"),
        ("steps = 2000\nrecord_every = 0\n", "record_every", "must be a positive finite number"),
        ("steps = 2000\nrecord_levels = 3\n", "record_levels", "goes with record_every"),
        ("steps = 2000\nrecord_every = 100\nrecord_levels = 20000\n", "record_levels", "10000"),
        ('steps = 2000\nrecord_every = 100\nrecord_levels = 20000\nservice = "erlang:2"\n', "record_levels", "10000"),
        # more than MAX_RECORDS records over the horizon, on the profile, count and event engines
        ("steps = 1e9\nrecord_every = 1\n", "record_every", "at most MAX_RECORDS"),
        ('steps = 1e9\nrecord_every = 1\nservice = "erlang:2"\n', "record_every", "at most MAX_RECORDS"),
        ('time = 1e8\nrecord_every = 1\nservice = "lognormal:2"\n', "record_every", "at most MAX_RECORDS"),
        ("steps = 2000\ncdf = 1\n", "cdf", "cdf must be an integer in [2, 100000]; got 1"),
        ("steps = 2000\ncdf = 1e6\n", "cdf", "cdf must be an integer in [2, 100000]; got 1000000"),
        ("steps = 2000\ncdf = 2.5\n", "cdf", "positive integer"),
        ("steps = 2000\nburn_in = 2.5\n", "burn_in", "a burn-in time goes with time"),
        # load >= 1: a finite horizon, without what needs an equilibrium (as simulate refuses it)
        ("steps = 2000\ncdf = 4\n", "cdf", "needs load < 1"),
        ("steps = 2000\nprecision = 0.01\n", "precision", "no equilibrium"),
        ('steps = 2000\nstart = "good"\n', "start", "needs load < 1"),
        ("time = 20.0\nburn_in = -1.5\n", "burn_in", "positive integer"),
    ],
)
def test_bad_record_and_cdf_values_are_refused_naming_the_key(extra, key, words):
    head = HEAD.replace("load = 0.5", "load = 1.2") if words in ("needs load < 1", "no equilibrium") else HEAD
    errs = _errors(head + extra)
    assert len(errs) == 1 and f"run[1].{key}" in errs[0] and words in errs[0], errs


def test_the_refusal_is_the_librarys_own():
    """The file's message is the one ``simulate(...)`` raises for the same arguments."""
    from supermarket.simulation.records import check_record

    (err,) = _errors(HEAD + 'steps = 2000\nrecord_every = 2.5\nservice = "erlang:2"\n')
    with pytest.raises(ValueError) as info:
        check_record(2.5, None, unit="events", span=2000.0, d=2, lam=0.5)
    assert str(info.value) in err
    with pytest.raises(ValueError) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        simulate(10, 2, 0.5, steps=2000, service="erlang:2", record_every=2.5, seed=1, progress=False)
    assert str(info.value) in err


def test_sweeps_without_the_new_keys_keep_their_hashes():
    """Hashes computed with the code before ``record_every``, ``record_levels``, ``cdf`` existed:
    no default was added, so a point without them keeps its identity, seeds and stored parts."""
    base = HEAD.replace("seed = 5", "seed = 3") + "steps = 2000\n"
    s = sw.parse_sweep(base + 'service = ["exp", "erlang:2", "lognormal:2"]\nserver_classes = ["0.5:2,0.5:1"]\n')
    assert [t.point_hash[:16] for t in s.tasks] == ["f46ab6438238ee1d", "c7afb9ef5ef5fe02", "8185fa90dc9c4439"]
    assert s.sweep_sha256[:16] == "6af9c0e290d01145"
    s = sw.parse_sweep(base + 'service = ["exp", "erlang:2", "lognormal:2"]\n')
    assert [t.point_hash[:16] for t in s.tasks] == ["2db4bf0d1d1cbbf1", "2c540d88546e2e72", "c5a0c123250bfd42"]
    assert s.sweep_sha256[:16] == "5a8b58e88375ca1a"
    assert not {"record_every", "record_levels", "cdf"} & set(s.tasks[0].params)


def test_capability_row_says_what_the_command_says():
    """``tools/capability_matrix.py``'s row ``sweep: simulate point with record_every`` is the
    command's ``simulate --record-every 100`` cell for every system: taken wherever simulate takes it."""
    import importlib.util

    from _paths import ROOT

    spec = importlib.util.spec_from_file_location("capability_matrix", ROOT / "tools" / "capability_matrix.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for classes in (False, True):
        for family in gen.LAWS:
            for rule in gen.POLICIES:
                c = gen.cells(rule, classes, family)
                assert c["sweep: simulate point with record_every"] == c["simulate --record-every 100"] == "yes"


@pytest.mark.parametrize("extra", ["steps = 2000\n", 'time = 40.0\nservice = "erlang:2"\n',
                                   'time = 40.0\nservice = "lognormal:2"\n',
                                   'steps = 2000\nserver_classes = "0.5:2,0.5:1"\n'])  # fmt: skip
def test_a_load_of_one_or_more_runs_a_finite_horizon(extra, tmp_path):
    """``simulate --load 1.2`` runs a finite horizon on every engine; so does a sweep point, and
    its row is the library's run with the task's seed.  The other measurements need an
    equilibrium and still refuse it; the report of such a sweep draws no mean field for it."""
    from supermarket import report as rp

    s = sw.parse_sweep(HEAD.replace("load = 0.5", 'load = [1.2, "1"]') + extra)
    assert [t.params["load"] for t in s.tasks] == [1.2, "1"]
    assert sw.run_sweep(s, tmp_path / "o", workers=1).failed == 0
    for task, row in zip(s.tasks, rows_of(tmp_path / "o")):
        assert row["mean_queue_length"] == _direct(task).to_dict()["mean_queue_length"]["mean"]
        assert "the chain has no equilibrium" in row["notes"][0]  # what simulate warns, on every engine
    rp.build_report(tmp_path / "o", tmp_path / "r.md", fmt="md")
    for measurement in ("theory", "meanfield", "mixing"):
        (err,) = _errors(f'[[run]]\nmeasurement = "{measurement}"\nn = 10\nd = 2\nload = 1.2\n')
        assert "run[1].load" in err and "must be in (0, 1)" in err
