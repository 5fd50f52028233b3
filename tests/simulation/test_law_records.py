"""Trajectories (``record_every=``) and figures (``--plot``) on the engines of service laws and
server classes (supermarket.simulation.records, law_figure): recording changes no number (the
same seed with and without), the records' time average is the reported plain mean (exactly on
the count engines with a record at every event, within a bound on the event engine's time
grid), and the figure is written."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from supermarket.cli import main
from supermarket.simulation.classes import simulate_classes
from supermarket.simulation.classes_phase import simulate_classes_phase
from supermarket.simulation.general import simulate_general
from supermarket.simulation.phase_run import simulate_phase_service

CLASSES = "0.5:2,0.5:1"
DROP = ("wall_s", "events_per_second", "trajectory")  # the clock, and the records themselves


def _numbers(res) -> str:
    return json.dumps({k: v for k, v in res.to_dict().items() if k not in DROP}, sort_keys=True)


RUNS = {
    "phase": lambda **kw: simulate_phase_service(12, 2, 0.7, "hyperexp:4", steps=6_000, seed=5, **kw),
    "classes": lambda **kw: simulate_classes(10, 2, 0.7, server_classes=CLASSES, events=6_400, seed=5, **kw),
    "classes-phase": lambda **kw: simulate_classes_phase(
        10, 2, 0.7, server_classes=CLASSES, service="erlang:3", events=6_400, seed=5, **kw
    ),
    "events": lambda **kw: simulate_general(
        6, 2, 0.7, service="lognormal:2", server_classes=CLASSES, time=100.0, seed=5, batches=64, **kw
    ),
}


@pytest.mark.parametrize("engine", sorted(RUNS))
def test_recording_changes_no_number(engine):
    """With two replications on two threads: the JSON of a run with records, the records left out,
    is the JSON of the run without, character for character (the kernels run in other chunks)."""
    every = 0.37 if engine == "events" else 7
    plain = RUNS[engine](replications=2, workers=2)
    rec = RUNS[engine](replications=2, workers=2, record_every=every, record_levels=5)
    assert plain.trajectory is None and rec.trajectory is not None
    assert _numbers(rec) == _numbers(plain)
    tr = rec.trajectory
    assert tr.t[0] == 0.0 and np.all(np.diff(tr.t) > 0) and tr.u.shape == (len(tr), 5)
    assert "trajectory" in rec.to_dict() and "trajectory" not in plain.to_dict()


def _count_engine(engine, **kw):
    return RUNS[engine](record_every=1, record_levels=40, control_variates=False, **kw)


def test_phase_records_at_every_event_integrate_to_the_plain_mean():
    """A record after every event: u is constant between them, so Σ u(t_k)(t_(k+1) − t_k) over the
    measured time T is ∫u dt, and over T the reported plain time average u_plain (exactly, up to
    rounding); one record per event, the first at the end of the burn-in."""
    r = _count_engine("phase")
    tr = r.trajectory
    assert len(tr) == r.events + 1
    w = np.diff(np.append(tr.t, r.time))
    assert np.all(w >= 0)
    avg = (tr.u * w[:, None]).sum(axis=0) / r.time
    top = r.u_plain.size
    np.testing.assert_allclose(avg[:top], r.u_plain, rtol=1e-12, atol=1e-15)
    assert np.all(avg[top:] == 0)
    # the records' own identities: max the top level, total the sum of the counts (levels enough)
    c = np.rint(tr.u * r.n).astype(int)
    assert np.array_equal(tr.total, c.sum(axis=1))
    assert np.array_equal(tr.max, (c > 0).sum(axis=1))


@pytest.mark.parametrize("engine", ["classes", "classes-phase"])
def test_classes_records_at_every_event_average_to_the_plain_mean(engine):
    """The classes engines' time is the event count (uniformized): their level sums add the state
    after every event, so the mean of the records after the first is the plain E[u_i] of all
    servers and of each class, exactly; the grid in time is 1/R per event."""
    r = _count_engine(engine)
    tr = r.trajectory
    events = round(r.time * (len(tr) - 1) / tr.t[-1])
    assert len(tr) - 1 == events
    top = r.u_mean.size
    np.testing.assert_allclose(tr.u[1:].mean(axis=0)[:top], r.u_mean, rtol=1e-12, atol=1e-15)
    assert tr.u_class.shape == (len(tr), 2, 40)
    for k, cls in enumerate(r.classes):
        np.testing.assert_allclose(tr.u_class[1:, k].mean(axis=0)[: cls.u_mean.size], cls.u_mean, rtol=1e-12)
    np.testing.assert_allclose(np.diff(tr.t), r.time / events, rtol=1e-9)
    # u is the servers' share: the classes' shares weighted by their fractions
    np.testing.assert_allclose(tr.u, 0.5 * tr.u_class[:, 0] + 0.5 * tr.u_class[:, 1], rtol=0, atol=1e-15)


def test_events_time_grid_average_is_within_its_bound_of_the_mean():
    """The event engine records on a grid of h units of time.  Between two records u_(k,i) moves by
    at most 1/n_k per event, so |h Σ_k u(kh) − ∫u| <= h E/n_k over the E events, and the grid's
    average (records before T) is within h E/(n_k T) of the plain time average; E counts every
    event (burn-in included: a larger, still valid bound)."""
    h = 0.004
    r = simulate_general(
        6, 2, 0.7, service="lognormal:2", server_classes=CLASSES, time=40.0, seed=5, replications=1,
        control_variates=False, record_every=h, record_levels=40,
    )  # fmt: skip
    tr = r.trajectory
    on = tr.t < r.time - h / 2
    assert on.sum() == round(r.time / h)
    np.testing.assert_allclose(tr.t[on], h * np.arange(on.sum()), rtol=1e-12, atol=1e-9)
    bound = h * r.events / r.time
    top = r.u_mean.size
    assert np.all(np.abs(tr.u[on].mean(axis=0)[:top] - r.u_mean) <= bound / r.n)
    for k, cls in enumerate(r.classes):
        err = np.abs(tr.u_class[on, k].mean(axis=0)[: cls.u_mean.size] - cls.u_mean)
        assert np.all(err <= bound / cls.servers)
    assert bound / r.n < 0.01  # the bound says something: levels differ by more than this


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(record_every=2.5), "record_every: the count engine records every record_every events"),
        (dict(record_every=0), "record_every"),
        (dict(record_levels=3), "record_levels: goes with record_every"),
        (dict(record_every=1, record_levels=0), "record_levels must be in 1..10000"),
        (dict(record_every=1, steps=1e11), "would record 1e[+]11 states per replication; at most MAX_RECORDS"),
    ],
)
def test_bad_records_are_refused_by_name(kw, match):
    with pytest.raises(ValueError, match=match):
        simulate_phase_service(10, 2, 0.5, "erlang:2", **({"steps": 1000} | kw))


ARGS = {
    "phase": ["--service", "erlang:2", "--steps", "20000"],
    "classes": ["--server-classes", CLASSES, "--steps", "20000"],
    "classes-phase": ["--server-classes", CLASSES, "--service", "erlang:2", "--engine", "phase", "--steps", "20000"],
    "events": ["--service", "lognormal:2", "--time", "200", "--replications", "2"],
}


@pytest.mark.parametrize("engine", sorted(ARGS))
def test_cli_records_and_plots(tmp_path, engine):
    """``--record-every`` puts the trajectory under the profile engines' key of the JSON, and
    ``--plot`` writes a PNG (with records and without)."""
    base = ["simulate", "--n", "10", "--d", "2", "--load", "0.6", "--seed", "2", *ARGS[engine]]
    every = "0.5" if engine == "events" else "100"
    fig = tmp_path / "rec.png"
    r = CliRunner().invoke(main, [*base, "--record-every", every, "--record-levels", "3", "--json", "--plot", str(fig)])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["engine"] == engine
    traj = data["trajectory"]
    assert len(traj["u"][0]) == 3 and len(traj["t"]) == len(traj["max"]) == len(traj["total"]) > 10
    assert ("u_class" in traj) == ("--server-classes" in ARGS[engine])
    assert fig.stat().st_size > 0 and fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_plot_without_records_draws_the_profile(tmp_path):
    """``--plot`` alone: the figure is written (its trajectory panels say how to record one)."""
    bare = tmp_path / "bare.png"
    args = ["simulate", "--n", "10", "--d", "2", "--load", "0.6", *ARGS["phase"], "--plot", str(bare)]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0 and r.output.strip().endswith(f"wrote {bare}"), r.output
    assert bare.stat().st_size > 0


def test_cli_bad_record_is_one_line_exit_2():
    r = CliRunner().invoke(
        main, ["simulate", "--n", "10", "--d", "2", "--load", "0.6", "--service", "erlang:2", "--record-every", "2.5"]
    )
    assert r.exit_code == 2
    assert r.output.strip().splitlines()[-1].startswith("supermarket: error: record_every: the count engine records")


def test_a_precision_run_carries_the_records_of_its_last_round():
    """``precision=`` reruns from the same seed: the result is the last round's, records included,
    with the numbers of the same run without records."""
    import warnings

    import supermarket as sm

    kw = dict(service="erlang:2", precision=0.05, steps=20_000, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = sm.simulate(20, 2, 0.5, **kw)
        rec = sm.simulate(20, 2, 0.5, record_every=100, **kw)
    assert plain.trajectory is None and _numbers(rec) == _numbers(plain)
    assert len(rec.trajectory) == rec.events // 100 + 1


@pytest.mark.parametrize("engine", ["profile", "queues", "buckets"])
def test_record_levels_alone_is_refused_on_the_profile_engines_too(engine):
    """record_levels without record_every was ignored by the profile engines (the law engines
    refused it): one meaning on every engine, refused before any work."""
    from supermarket.simulation import simulate

    with pytest.raises(ValueError, match="record_levels: goes with record_every"):
        simulate(20, 2, 0.5, steps=1000, engine=engine, record_levels=3)
