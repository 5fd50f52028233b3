"""Sweeps and reports over the axes of issue 21: dispatch rule, service law, server classes.

The numbers are checked against independent facts: random routing is n independent queues,
M/M/1 with exponential service (mean queue length λ/(1−λ)) and M/G/1 with Erlang-2 service
(Pollaczek–Khinchine: ρ + ρ²(1 + SCV)/(2(1 − ρ))), the mean field of random routing is the
M/M/1 law exactly.
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import pytest

from _paths import ROOT
from supermarket import report as rp
from supermarket import sweep as sw
from supermarket.report.document import TOO_SHORT, _summary_table
from supermarket.sweep.measurements import event_row
from supermarket.sweep.points import stored_identity

BASE = '[[run]]\nmeasurement = "simulate"\nn = 10\nd = 2\nload = 0.5\n'


def _errors(text: str) -> list[str]:
    with pytest.raises(sw.SweepFileError) as info:
        sw.parse_sweep(text)
    return info.value.errors


def test_axes_parsed_canonical_and_routed():
    s = sw.parse_sweep(
        BASE + 'time = 50.0\npolicy = ["JIQ", "random"]\nservice = ["exp", "Erlang:2"]\n'
        'server_classes = " 0.50:2, 0.5:1.0"\n'
    )
    got = {(t.params["policy"], t.params["service"]) for t in s.tasks}
    assert got == {("jiq", "exp"), ("jiq", "erlang:2"), ("random", "exp"), ("random", "erlang:2")}
    assert {t.params["server_classes"] for t in s.tasks} == {"0.5:2,0.5:1"}
    # the engine simulate() chooses, in its own time mode (docs/model.md §1.1): exponential classes on
    # the classes count engine (its uniformized chain: discrete), classes with another law on the
    # event engine (continuous); the stored identity spells both "continuous", as before
    got = {(t.params["service"], t.params["engine"], t.params["time_mode"]) for t in s.tasks}
    assert got == {("exp", "classes", "discrete"), ("erlang:2", "events", "continuous")}
    assert {stored_identity(t.params)["time_mode"] for t in s.tasks} == {"continuous"}
    s = sw.parse_sweep(BASE + 'steps = 1000\npolicy = ["jsq", "jsq-d"]\n')
    assert {(t.params["engine"], t.params["policy"]) for t in s.tasks} == {("profile", "jsq"), ("profile", "jsq-d")}


def test_queues_engine_takes_every_rule(tmp_path):
    """The per-queue reference engine runs every rule in a sweep, as simulate() does: each point
    is a ``queues`` run of its rule, and a stored row is that of the direct call with its seed."""
    from supermarket.simulation import simulate
    from sweep_runs import rows_of

    s = sw.parse_sweep(BASE + 'steps = 4000\nengine = "queues"\npolicy = ["random", "jsq", "jiq", "jbt"]\n')
    got = sorted((t.params["engine"], t.params["policy"]) for t in s.tasks)
    assert got == [("queues", p) for p in ("jbt", "jiq", "jsq", "random")]
    one = sw.parse_sweep("[sweep]\nseed = 5\n" + BASE + 'steps = 4000\nengine = "queues"\npolicy = "jbt"\n')
    assert sw.run_sweep(one, tmp_path / "o", workers=1).failed == 0
    ((t, row),) = zip(one.tasks, rows_of(tmp_path / "o"))
    seed = sw.task_seed(5, t.point_hash, t.replication)
    direct = simulate(10, 2, 0.5, steps=4000, engine="queues", policy="jbt", seed=seed, progress=False)
    assert row["engine"] == "queues" and row["mean_queue_length"] == direct.mean_queue_length


def test_old_sweeps_keep_their_hashes():
    """No default added for the new keys: a sweep without them has the grid points, hence the
    seeds, it had before (hashes computed with the code before this change)."""
    s = sw.parse_sweep(BASE + 'steps = 1000\n[[run]]\nmeasurement = "meanfield"\nd = 2\nload = 0.5\n')
    assert [t.point_hash[:16] for t in s.tasks] == ["06cc8fbb48065d0a", "c0f96ef61fc96173"]
    assert s.sweep_sha256[:16] == "99acbb652944f3ec"
    assert "policy" not in s.tasks[0].params and "service" not in s.tasks[0].params


@pytest.mark.parametrize(
    "extra, key, words",
    [
        ('steps = 1000\npolicy = "jsqq"\n', "policy", "must be one of jsq-d, random, jsq, jiq"),
        ('time = 9.0\nservice = "pareto:1"\n', "service", "ALPHA in (1,"),
        ("time = 9.0\nservice = 3\n", "service", "must be a string"),
        ('time = 9.0\nservice = "ph:no-such-file.json"\n', "service", "no such file"),
        ('time = 9.0\nserver_classes = "0.5:2,0.4:1"\n', "server_classes", "sum to 0.9"),
        ("time = 9.0\nserver_classes = 0.5\n", "server_classes", "must be a string"),
        ('steps = 1000\ntime = 5.0\nservice = "lognormal:4"\n', "run[1].time", "give exactly one of 'steps'"),
        ('time = 9.0\nservice = "erlang:2"\nengine = "buckets"\n', "run[1].engine", "phase-type count engine"),
        ('time = 9.0\nservice = "erlang:2"\nengine = "queues"\n', "run[1].engine", "(engine 'events')"),
        ('time = 9.0\nservice = "pareto:2"\nengine = "queues"\n', "run[1].engine", "event engine"),
        ('time = 9.0\nservice = "lognormal:2"\nengine = "phase"\n', "run[1].engine", "event engine"),
        ('time = 9.0\nserver_classes = "0.5:2,0.5:1"\nstart = "long:3"\n', "run[1].start", "classes (service exp"),
        ('time = 9.0\nservice = "erlang:2"\nstart = "long:3"\n', "run[1].start", "starts 'empty' or 'fixed-point'"),
        ('steps = 1000\nstart = "perfect"\npolicy = "jiq"\n', "run[1].start", "start 'perfect'"),
        # the cost check counts the engine's own events: Erlang-2 at λ = 1/2 makes 15 per unit time
        # with n = 10 (5 arrivals, 10 phase completions), 1.5e13 > 1e13 in 1e12 time units
        ('time = 1e12\nservice = "erlang:2"\nburn_in = 0\n', "run[1].time", "about 1.5e+13 events"),
    ],
)
def test_bad_values_refused_naming_the_key(extra, key, words):
    errs = _errors(BASE + extra)
    assert len(errs) == 1 and f"{key}" in errs[0] and words in errs[0], errs


@pytest.mark.parametrize("extra", ['server_classes = "0.5:2,0.5:1"\n', 'service = "erlang:2"\n'])
def test_a_rough_rule_starts_at_its_fluid_fixed_point_on_the_count_engines(extra):
    """JIQ with classes or a phase-type law: the fixed-point ("good") start is its fluid point (docs/model.md §2.1)."""
    (t,) = sw.parse_sweep(BASE + 'time = 9.0\nstart = "good"\npolicy = "jiq"\n' + extra).tasks
    assert t.params["policy"] == "jiq"


def test_meanfield_policy():
    s = sw.parse_sweep('[[run]]\nmeasurement = "meanfield"\nd = 2\nload = 0.5\npolicy = ["jsq", "jiq"]\n')
    assert len(s.tasks) == 2  # their fluid fixed point
    errs = _errors('[[run]]\nmeasurement = "meanfield"\nd = 2\nn = 100\nload = 0.5\npolicy = ["jsq", "jiq"]\n')
    assert len(errs) == 2 and all("mean-field drift is discontinuous" in e for e in errs)
    assert "must be one of" in _errors('[[run]]\nmeasurement = "meanfield"\nd = 2\nload = 0.5\npolicy = "x"\n')[0]


TINY = (
    "[sweep]\nseed = 7\nreplications = 4\n"
    '[[run]]\nmeasurement = "simulate"\nn = 10\nd = 2\nload = 0.5\ntime = 2000.0\nburn_in = 100\n'
    'policy = "random"\nservice = ["exp", "erlang:2"]\n'
    '[[run]]\nmeasurement = "simulate"\nn = 10\nd = 2\nload = 0.5\ntime = 2000.0\nburn_in = 100\n'
    'policy = "random"\nservice = "erlang:2"\nengine = "events"\n'
    '[[run]]\nmeasurement = "simulate"\nn = 10\nd = 2\nload = 0.5\ntime = 200.0\nreplications = 1\n'
    'server_classes = "0.5:2,0.5:1"\nservice = ["exp", "erlang:2"]\n'
    '[[run]]\nmeasurement = "meanfield"\nd = 2\nload = 0.5\npolicy = ["random", "jsq-d"]\n'
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, list[dict]]:
    out = tmp_path_factory.mktemp("pol") / "out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = sw.run_sweep(sw.parse_sweep(TINY), out, workers=1)
    assert res.failed == 0
    return out, sw.table_rows(sw.read_results(out))


def _mean_se(xs: list[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs))


def _groups(rows: list[dict]) -> dict[str, list[dict]]:
    sim = [r for r in rows if r["measurement"] == "simulate"]
    return {
        "exp": [r for r in sim if r.get("service") == "exp" and r.get("server_classes") is None],
        "phase": [r for r in sim if r.get("service") == "erlang:2" and r["engine"] == "phase"],
        "event": [r for r in sim if r.get("service") == "erlang:2" and r.get("server_classes") is None
                  and r["engine"] == "events"],
        "classes": [r for r in sim if r.get("server_classes") == "0.5:2,0.5:1" and r.get("service") == "exp"],
        "classes_event": [r for r in sim if r.get("server_classes") == "0.5:2,0.5:1" and r.get("service") != "exp"],
    }  # fmt: skip


def test_tiny_sweep_stored_and_read_back(tiny):
    _, rows = tiny
    g = _groups(rows)
    assert [len(g[k]) for k in ("exp", "phase", "event", "classes", "classes_event")] == [4, 4, 4, 1, 1]
    # each point on the engine simulate() would choose (engine = "events" forces the event engine)
    assert {(k, r["engine"]) for k, rs in g.items() for r in rs} == {
        ("exp", "profile"), ("phase", "phase"), ("event", "events"), ("classes", "classes"), ("classes_event", "events")
    }  # fmt: skip
    assert {r["policy"] for r in g["exp"] + g["phase"] + g["event"]} == {"random"}
    assert g["classes"][0]["policy"] == "jsq-d"
    # parameters and results agree (the count engines' burn-in in steps beside a burn-in in time: as before)
    assert {k for r in rows for k in r if k.startswith("result_")} <= {"result_burn_in"}
    for r in g["event"] + g["classes_event"]:  # one replication per task: the event engine's own error is not trusted
        assert r["mean_queue_length_reliable"] is False and math.isnan(r["mean_queue_length_stderr"])
        assert all(math.isnan(x) for x in r["u_stderr"]) and r["reliable"] is False
        assert isinstance(r["u_mean"], list) and r["sojourn_mean"] > r["waiting_mean"] > 0
        assert set(r["sojourn_quantiles"]) == {"0.5", "0.9", "0.99"} and r["sojourn_method"] == "customers"
    lam = 0.5
    for r in g["phase"]:  # the count engine's own blocking error, trusted; means by Little's law
        assert r["mean_queue_length_reliable"] is True and r["mean_queue_length_stderr"] > 0
        assert r["sojourn_method"] == "little"  # the means: no customer followed
        # the quantiles from the law of what each arrival joins: increasing in the level, the waiting
        # ones below the sojourn ones
        sq, wq = r["sojourn_quantiles"], r["waiting_quantiles"]
        assert set(sq) == set(wq) == {"0.5", "0.9", "0.99", "0.999"} and set(r["sojourn_stderr_quantiles"]) == set(sq)
        assert 0 < sq["0.5"] < sq["0.9"] < sq["0.99"] < sq["0.999"] and all(wq[q] < sq[q] for q in sq)
        assert r["sojourn_mean"] == pytest.approx(r["mean_queue_length"] / lam, rel=1e-12)  # W = L/λ
        assert r["waiting_mean"] == pytest.approx(r["sojourn_mean"] - 1.0, rel=1e-12)  # mean service 1
        assert r["control_variates"] is True and r["u_method"][0] in ("cv", "plain")
        vr = r["variance_reduction_u_mean"]
        assert all((x is None) == (m != "cv") for x, m in zip(vr, r["u_method"]) if math.isfinite(r["u_stderr"][0]))
    c = g["classes"][0]  # the classes count engine: its blocking error where trusted, NaN otherwise
    assert c["mean_queue_length_reliable"] is math.isfinite(c["mean_queue_length_stderr"])
    assert c["sojourn_method"] == "little" and c["sojourn_mean"] > c["waiting_mean"] > 0
    # Little's law over all customers: W = L/(λ s̄), s̄ = 0.5·2 + 0.5·1 = 1.5 (capacity-scaled load)
    assert c["sojourn_mean"] == pytest.approx(c["mean_queue_length"] / (lam * 1.5), rel=1e-12)
    assert (c["class1_fraction"], c["class1_speed"], c["class2_speed"]) == (0.5, 2.0, 1.0)
    assert c["class1_sojourn_mean"] < c["class2_sojourn_mean"]  # the fast class serves faster
    assert c["sojourn_quantiles"]["0.5"] < c["sojourn_quantiles"]["0.99"]  # the joined law's, as the phase rows
    ce = g["classes_event"][0]  # the event engine follows customers: L = Σ f_k L_k exactly
    assert ce["mean_queue_length"] == pytest.approx(
        0.5 * ce["class1_mean_queue_length"] + 0.5 * ce["class2_mean_queue_length"], rel=1e-9
    )
    # random routing: M/M/1 queues, L = ρ/(1 − ρ) = 1; M/G/1 with Erlang-2 (SCV 1/2):
    # L = ρ + ρ²(1 + 1/2)/(2(1 − ρ)) = 0.875 (Pollaczek–Khinchine), on both engines.  Four
    # independent replications: Student t, 3 dof (two-sided 0.999: 12.9; 0.99: 5.84); tolerance 6
    # standard errors of the check itself.
    for group, want in ((g["exp"], 1.0), (g["phase"], 0.875), (g["event"], 0.875)):
        m, se = _mean_se([r["mean_queue_length"] for r in group])
        assert abs(m - want) < 6 * se, (m, se, want)
        assert abs(m - want) < 0.15  # and the standard error itself is small enough to mean something
    # the phase rows' own errors (blocking, pooled √(Σ s_r²)/R over the replications): within 4 of them
    m = sum(r["mean_queue_length"] for r in g["phase"]) / 4
    se = math.sqrt(sum(r["mean_queue_length_stderr"] ** 2 for r in g["phase"])) / 4
    assert abs(m - 0.875) < 4 * se, (m, se)
    mf = {r["policy"]: r for r in rows if r["measurement"] == "meanfield"}
    assert mf["random"]["mean_queue_length"] == pytest.approx(1.0, rel=1e-9)  # λ/(1 − λ), exactly
    assert mf["jsq-d"]["mean_queue_length"] < 1.0


def test_row_is_simulate_with_the_same_arguments_and_seed(tiny):
    """A sweep row holds exactly the numbers of ``simulate`` called with the point's keys and the
    task's seed (``task_seed``), on each of the three engines."""
    from supermarket import simulate

    _, rows = tiny
    g = _groups(rows)
    for key in ("phase", "classes", "event"):
        r = g[key][0]
        kw = {k: r[k] for k in ("policy", "service", "server_classes", "burn_in") if r.get(k) is not None}
        if key == "event":
            kw["engine"] = "events"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            seed = sw.task_seed(7, r["point_hash"], r["replication"])
            res = simulate(r["n"], r["d"], r["load"], time=r["time"], seed=seed, replications=1, workers=1,
                           progress=False, **kw)  # fmt: skip
        kind = {"phase": "PhaseSimulationResult", "classes": "ClassesResult", "event": "GeneralResult"}[key]
        assert type(res).__name__ == kind
        assert r["u_mean"] == [float(x) for x in res.u_mean]
        assert r["mean_queue_length"] == res.mean_queue_length.mean
        soj = res.sojourn_little if key == "phase" else res.sojourn
        assert r["sojourn_mean"] == soj.mean


def test_report_shows_axes_and_compares(tiny, tmp_path):
    out, rows = tiny
    md = tmp_path / "r.md"
    rp.build_report(out, md, fmt="md")
    text = md.read_text()
    header = next(line for line in text.splitlines() if line.startswith("| n | d | load"))
    for col in ("engine", "policy", "service", "server_classes"):
        assert f" {col} " in header, header
    assert "per-queue event engine" in text and (tmp_path / "r_compare.png").stat().st_size > 1000
    assert [f.name for f in rp.collect_figures(rows)][:2] == ["compare", "profiles"]


def test_report_error_bars_by_engine(tiny):
    """± only where the row has an error it trusts: count-engine rows (phase, classes) their own with
    one replication; event-engine rows the spread of replications, never per class."""
    from supermarket.report.document import COUNT_LAW_NOTE

    _, rows = tiny
    sim = [r for r in rows if r["measurement"] == "simulate"]
    header, body = _summary_table("simulate", sim, ["engine", "service", "server_classes"])
    assert "class1_sojourn_mean" in header and "class2_mean_queue_length" in header
    col = {h: j for j, h in enumerate(header)}
    by = {(line[0], line[1], line[2]): line for line in body}
    g = _groups(rows)
    c = g["classes"][0]
    line = by[("classes", "exp", "0.5:2,0.5:1")]
    for name in ("mean_queue_length", "class1_sojourn_mean", "class2_mean_queue_length"):
        assert ("±" in line[col[name]]) is bool(c[f"{name}_reliable"]), (name, line[col[name]])
    line = by[("events", "erlang:2", "0.5:2,0.5:1")]
    assert not any("±" in line[col[k]] for k in header if k.startswith("class"))  # no per-class error there
    assert line[col["class1_sojourn_mean"]] == f"{g['classes_event'][0]['class1_sojourn_mean']:.6g}"
    line = by[("phase", "erlang:2", "")]  # four replications: their spread, trusted by every run's flag
    assert "±" in line[col["mean_queue_length"]] and all(r["mean_queue_length_reliable"] for r in g["phase"])
    assert 'engine "phase"' in COUNT_LAW_NOTE


def test_report_no_plus_minus_where_a_run_is_too_short():
    def row(i: int, mql: float, long_enough: bool) -> dict:
        return {
            "task_index": i,
            "point": 0,
            "status": "ok",
            "engine": "event",
            "policy": "random",
            "mean_queue_length": mql,
            "mean_queue_length_reliable": False,
            "mean_queue_length_long_enough": long_enough,
        }

    _, body = _summary_table("simulate", [row(0, 1.0, True), row(1, 1.2, True)], ["policy"])
    assert "±" in body[0][2]
    _, body = _summary_table("simulate", [row(0, 1.0, True), row(1, 1.2, False)], ["policy"])
    assert "±" not in body[0][2] and TOO_SHORT in body[0][2]


def test_event_row_never_stores_a_distrusted_error():
    one = {"mean": 2.0, "stderr": 0.1, "reliable": False, "note": "x"}
    ok = {"mean": 2.0, "stderr": 0.1, "reliable": True}
    base = {
        "system": {"policy": "jsq-d", "service": {"spec": "lognormal:4"}},
        "u_mean": [0.5, 0.1],
        "u_stderr": [0.01, 0.02],
        "time": 10.0,
        "burn_in": 1.0,
    }
    sojourn = {"mean": ok, "quantiles": {"0.99": one}}
    r = event_row(base | {"mean_queue_length": one, "sojourn": sojourn, "waiting": {"mean": ok}})
    assert math.isnan(r["mean_queue_length_stderr"]) and all(math.isnan(x) for x in r["u_stderr"])
    assert r["sojourn_stderr_mean"] == 0.1 and math.isnan(r["sojourn_stderr_quantiles"]["0.99"])
    assert r["reliable"] is False and r["mean_queue_length_long_enough"] is False
    r = event_row(base | {"mean_queue_length": ok, "sojourn": sojourn, "waiting": {"mean": ok}})
    assert r["u_stderr"] == [0.01, 0.02] and r["u_reliable"] == [True, True] and r["mean_queue_length_stderr"] == 0.1


def test_resume_never_mixes_rows_of_another_engine(tmp_path, monkeypatch):
    """A directory whose phase-type point ran on the event engine (as before this version) is resumed
    with the count engine: the engine is part of the point (hash, task id, seed), the old part is
    discarded and listed, and the table holds only rows of the engine that runs the point now."""
    import json

    from supermarket.sweep import points as ms

    text = (
        "[sweep]\nseed = 3\n"
        '[[run]]\nmeasurement = "simulate"\nn = 10\nd = 2\nload = 0.5\ntime = 50.0\nservice = "erlang:2"\n'
    )
    out = tmp_path / "out"
    with monkeypatch.context() as m:
        m.setattr(ms, "law_engine", lambda p: "events")  # the routing of the earlier version
        old = sw.parse_sweep(text)
        assert old.tasks[0].params["engine"] == "events"
        sw.run_sweep(old, out, workers=1)
    assert sw.table_rows(sw.read_results(out))[0]["engine"] == "events"
    new = sw.parse_sweep(text)
    assert new.sweep_sha256 == old.sweep_sha256 and new.tasks[0].task_id != old.tasks[0].task_id
    res = sw.run_sweep(new, out, workers=1)
    assert (res.skipped, res.ran, res.discarded) == (0, 1, 1)
    rows = sw.table_rows(sw.read_results(out))
    assert [r["engine"] for r in rows] == ["phase"] and rows[0]["task_id"] == new.tasks[0].task_id
    assert sorted(p.stem for p in (out / "parts").iterdir()) == [new.tasks[0].task_id]
    side = json.loads((out / "sweep.json").read_text())
    assert side["runs"][-1]["discarded_parts"] == [old.tasks[0].task_id]
    # and forcing the event engine is the earlier point again: same identity, same seed
    forced = sw.parse_sweep(text + 'engine = "events"\n')
    assert forced.tasks[0].point_hash == old.tasks[0].point_hash


EXAMPLE = ROOT / "examples" / "sweep-service.toml"


def _cli(*args):
    from click.testing import CliRunner

    from supermarket.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


def _example_through_cli(toml: Path, out: Path, *extra: str) -> list[dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = _cli("sweep", toml, "--out", out, *extra)
        assert r.exit_code == 0, r.output
        r = _cli("report", out, "--html", out / "report.html")
        assert r.exit_code == 0, r.output
    return sw.table_rows(sw.read_results(out))


def test_example_service_sweep_small(tmp_path):
    """examples/sweep-service.toml through ``supermarket sweep`` and ``supermarket report``, at a
    fraction of its size (n = 10, one load, one rule, one replication, short runs): every engine."""
    r = _cli("sweep", EXAMPLE, "--check")
    assert r.exit_code == 0 and "32 grid points, 64 tasks" in r.output, r.output
    engines = {(t.params.get("service"), "server_classes" in t.params, t.params["engine"])
               for t in sw.load_sweep(EXAMPLE).tasks}  # fmt: skip
    assert engines == {
        ("exp", False, "profile"), ("erlang:4", False, "phase"), ("hyperexp:4", False, "phase"),
        ("lognormal:4", False, "events"), ("exp", True, "classes"), ("hyperexp:4", True, "events"),
    }  # fmt: skip
    small = tmp_path / "small.toml"
    text = EXAMPLE.read_text().replace("\nn = 100\n", "\nn = 10\n").replace("load = [0.7, 0.9]", "load = 0.7")
    text = re.sub(r"policy = \[[^]]*\]", 'policy = "jsq-d"', text).replace("replications = 2", "replications = 1")
    small.write_text(text.replace("time = 1000.0", "time = 20.0").replace("burn_in = 100", "burn_in = 5"))
    rows = _example_through_cli(small, tmp_path / "out", "--workers", "1")
    assert len(rows) == 6 and all(r["status"] == "ok" for r in rows)
    assert {r["engine"] for r in rows} == {"profile", "phase", "events", "classes"}
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<th>engine</th>" in html and "<th>class1_sojourn_mean</th>" in html
    assert "engine &quot;phase&quot;" in html and "data-figure='compare'" in html


@pytest.mark.slow
def test_example_service_sweep_full(tmp_path):
    """The whole example (64 tasks, about 10 s on 2 cores): random routing is n independent M/G/1
    queues, so its phase-type rows agree with Pollaczek–Khinchine, L = ρ + ρ²(1 + SCV)/(2(1 − ρ)),
    within their own error bars (two replications, each a pooled blocking error: 4 s.e.)."""
    rows = _example_through_cli(EXAMPLE, tmp_path / "out", "--workers", "2")
    assert len(rows) == 64 and all(r["status"] == "ok" for r in rows)
    scv = {"erlang:4": 0.25, "hyperexp:4": 4.0}
    checked = 0
    for law, s2 in scv.items():
        for lam in (0.7, 0.9):
            rs = [r for r in rows if r["policy"] == "random" and r.get("service") == law and r["load"] == lam]
            assert len(rs) == 2 and {r["engine"] for r in rs} == {"phase"}
            if not all(r["mean_queue_length_reliable"] for r in rs):
                continue  # too short to know its error: nothing to check (the report says so)
            want = lam + lam**2 * (1 + s2) / (2 * (1 - lam))
            m = sum(r["mean_queue_length"] for r in rs) / 2
            se = math.sqrt(sum(r["mean_queue_length_stderr"] ** 2 for r in rs)) / 2
            assert abs(m - want) < 4 * se, (law, lam, m, se, want)
            checked += 1
    assert checked >= 1


def test_phase_row_keeps_no_distrusted_error():
    """A level the phase engine does not trust (or estimates as rare) stores a NaN error and no
    variance reduction; a level kept plain stores no variance reduction either."""
    from supermarket.sweep.measurements import phase_row

    e = {"mean": 1.0, "stderr": 0.1, "reliable": True}
    d = {
        "system": {"policy": "random", "service": {"spec": "erlang:2"}},
        "u_mean": [0.5, 0.2, 0.01],
        "u_stderr": [0.01, 0.02, 0.003],
        "u_reliable": [True, False, True],
        "u_method": ["cv", "cv", "plain"],
        "u_plain_stderr": [0.03, 0.04, 0.003],
        "mean_queue_length": e,
        "mean_queue_length_plain": e,  # the plain estimate kept: no gain
        "sojourn": {"mean": e, "quantiles": {}},
        "waiting": {"mean": e, "quantiles": {}},
        "control_variates": True,
    }
    r = phase_row(d)
    assert r["policy"] == "random" and r["service"] == "erlang:2" and r["sojourn_mean"] == e["mean"]
    assert r["u_stderr"][0] == 0.01 and math.isnan(r["u_stderr"][1]) and r["u_reliable"] == [True, False, True]
    assert r["variance_reduction"]["u_mean"] == [pytest.approx(9.0), None, None]
    assert r["variance_reduction"]["mean_queue_length"] is None
    r = phase_row(d | {"control_variates": False})
    assert all(x is None for x in r["variance_reduction"].values())


def test_report_class_columns_distrusted_per_class():
    """Two replications of a classes point: the spread is shown for a class whose runs trust their
    error, "too short to know" for one whose run does not."""

    def row(i: int, ok2: bool) -> dict:
        return {
            "task_index": i,
            "point": 0,
            "status": "ok",
            "engine": "classes",
            "mean_queue_length": 1.0 + i / 10,
            "mean_queue_length_reliable": True,
            "class1_mean_queue_length": 0.5 + i / 10,
            "class1_mean_queue_length_reliable": True,
            "class2_mean_queue_length": 1.5 + i / 10,
            "class2_mean_queue_length_reliable": ok2,
        }

    header, body = _summary_table("simulate", [row(0, True), row(1, False)], ["engine"])
    cells = dict(zip(header, body[0]))
    assert "±" in cells["class1_mean_queue_length"] and TOO_SHORT in cells["class2_mean_queue_length"]


def test_steps_on_the_event_engine_run_the_mean_time_of_that_many_events(tmp_path):
    """``steps`` on an event-engine point is taken as ``simulate`` takes it: the mean time of that
    many events, ``steps / (2nλs̄)``."""
    text = BASE + 'steps = 20000\nservice = "lognormal:2"\n'
    (task,) = sw.parse_sweep(text).tasks
    assert task.params["engine"] == "events" and task.params["steps"] == 20000
    sw.run_sweep(sw.parse_sweep(text), tmp_path / "out", workers=1)
    (row,) = sw.table_rows(sw.read_results(tmp_path / "out"))
    assert row["sim_time"] == 20000 / (2 * 10 * 0.5)


@pytest.mark.parametrize("extra", ["", 'service = "erlang:2"\n', 'server_classes = "0.5:2,0.5:1"\n'])
def test_batches_key_is_simulates_batches(extra):
    """``batches`` on a grid point is ``simulate(batches=...)``'s, on the profile and the law engines:
    the row equals the one-replication run it names."""
    import numpy as np

    from supermarket.simulation import simulate
    from supermarket.sweep.measurements import measure_simulate

    text = '[[run]]\nmeasurement = "simulate"\nseed = 5\nn = 40\nd = 2\nload = 0.7\n'
    s = sw.parse_sweep(text + "steps = 20000\nbatches = 64\n" + extra)
    (task,) = s.tasks
    row = measure_simulate(task.params, np.random.SeedSequence(9))
    kw = {"service": "erlang:2"} if "erlang" in extra else {"server_classes": "0.5:2,0.5:1"} if extra else {}
    ref = simulate(40, 2, 0.7, steps=20000, batches=64, seed=np.random.SeedSequence(9), replications=1, workers=1,
                   progress=False, **kw).to_dict()  # fmt: skip
    assert row["batches"] == ref["batches"] == 64
    for key in ("u_mean", "u_stderr"):  # a row stores a missing error as NaN, to_dict as None
        a, b = (np.array([np.nan if x is None else x for x in v], dtype=float) for v in (row[key], ref[key]))
        assert np.array_equal(a, b, equal_nan=True), key


def test_batches_above_the_steps_refused_when_read():
    text = '[[run]]\nmeasurement = "simulate"\nseed = 5\nn = 40\nd = 2\nload = 0.7\n'
    with pytest.raises(sw.SweepFileError) as ei:
        sw.parse_sweep(text + "steps = 100\nbatches = 1000\n")
    assert "batches" in str(ei.value)


def test_a_law_point_runs_the_time_mode_it_names():
    """``time_mode`` on a law point is honoured (the row says what ran) or refused, as ``simulate``
    does: exponential holding times on the phase-type count engine get their own identity (another
    stream than the default's), classes in continuous time run the event engine, a general law has
    no discrete chain (docs/model.md §1.1)."""
    s = sw.parse_sweep(BASE + 'time = 5.0\nservice = "erlang:2"\ntime_mode = ["discrete", "continuous"]\n')
    ids = {t.params["time_mode"]: stored_identity(t.params)["time_mode"] for t in s.tasks}
    assert ids == {"discrete": "continuous", "continuous": "continuous-exponential"}
    s = sw.parse_sweep(BASE + 'time = 5.0\nserver_classes = "0.5:2,0.5:1"\ntime_mode = "continuous"\n')
    assert [t.params["engine"] for t in s.tasks] == ["events"]
    (err,) = _errors(BASE + 'time = 5.0\nservice = "lognormal:2"\ntime_mode = "discrete"\n')
    assert "no discrete chain exists for service lognormal:2" in err


def test_a_law_row_says_the_time_mode_that_ran():
    import numpy as np

    from supermarket.sweep.measurements import measure_simulate

    s = sw.parse_sweep(BASE + 'time = 5.0\nservice = "erlang:2"\ntime_mode = ["discrete", "continuous"]\n')
    s2 = sw.parse_sweep(BASE + 'time = 5.0\nserver_classes = "0.5:2,0.5:1"\n')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = {t.params["time_mode"]: measure_simulate(t.params, np.random.SeedSequence(1)) for t in s.tasks}
        (classes,) = (measure_simulate(t.params, np.random.SeedSequence(1)) for t in s2.tasks)
    assert {k: r["time_mode"] for k, r in rows.items()} == {"discrete": "discrete", "continuous": "continuous"}
    assert rows["discrete"]["mean_queue_length"] != rows["continuous"]["mean_queue_length"]  # honoured: another stream
    assert classes["time_mode"] == "discrete"


def test_eps_on_a_rule_without_a_good_set_is_refused_as_simulate_refuses_it():
    from supermarket.system.methods import good_set_refusal
    from supermarket.system.spec import System

    (err,) = _errors(BASE + 'steps = 1000\npolicy = "jsq"\neps = 0.05\n')
    assert good_set_refusal(System(10, 2, 0.5, rule="jsq")) in err
    sw.parse_sweep(BASE + "steps = 1000\neps = 0.05\n")  # jsq-d, d = 2, λ < 1: its good set
