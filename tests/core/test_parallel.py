"""The parallel layer: the same results in task order on every backend (this process, a
spawn pool, a real Dask scheduler and worker), errors, Ctrl-C, and a scheduler address that
is not a Dask scheduler."""

from __future__ import annotations

import contextlib
import doctest
import math
import os
import signal
import socket
import threading
import time

import pytest

from _ports import free_port
from supermarket import parallel
from supermarket.parallel import SchedulerError, map_tasks
from supermarket.sweep import TIMING_COLUMNS, parse_sweep, run_task

SIM = """
[sweep]
seed = 17
replications = 3

[[run]]
measurement = "simulate"
n = 100
d = [2, 3]
load = 0.9
steps = 5000
burn_in = 500
"""


def _specs():
    return [t.spec() for t in parse_sweep(SIM).tasks]


def _values(records):
    """The results without timings, as canonical JSON text: NaN (an unknown quantity, e.g. the
    effective sample size of a level never reached) then compares equal to NaN, which a plain
    ``==`` on floats only does for the very same object (not after a trip through a pool)."""
    import json

    return [
        json.dumps(
            {k: v for k, v in r["result"].items() if k not in TIMING_COLUMNS} | {"id": r["task_id"]},
            sort_keys=True,
            default=str,
        )
        for r in records
    ]


def test_doctests():
    res = doctest.testmod(parallel, optionflags=doctest.ELLIPSIS)
    assert res.attempted >= 8 and res.failed == 0


def test_order_on_result_and_progress_serial_and_pool():
    for workers in (1, 2):
        seen, prog = [], []
        out = map_tasks(
            sum,
            [(7, 2), (9, 4), (1, 1)],
            workers=workers,
            on_result=lambda i, v, e, seen=seen: seen.append((i, v, e)),
            progress=lambda *a, prog=prog: prog.append(a),
        )
        assert out == [9, 13, 2]
        assert sorted(seen) == [(0, 9, None), (1, 13, None), (2, 2, None)]
        assert prog[0][0] == 0 and prog[-1] == (3, 0, 3) and [p[0] for p in prog] == sorted(p[0] for p in prog)


def test_errors_raised_or_returned():
    with pytest.raises(ValueError, match="invalid literal"):
        map_tasks(int, ["1", "x", "3"])
    for workers in (1, 2):
        out = map_tasks(int, ["1", "x", "3"], workers=workers, return_errors=True)
        assert out[0] == 1 and out[2] == 3 and isinstance(out[1], ValueError)
    with pytest.raises(ValueError, match="workers"):
        map_tasks(abs, [1], workers=0)
    assert map_tasks(abs, [-1], collect=False) is None


def test_same_results_serial_and_pool():
    specs = _specs()
    a = map_tasks(run_task, specs, workers=1)
    b = map_tasks(run_task, specs, workers=2)
    assert all(r["status"] == "ok" for r in a)
    assert _values(a) == _values(b)
    # the replications differ from each other (the seeds are really used)
    assert a[0]["result"]["u_mean"] != a[1]["result"]["u_mean"]


def test_same_results_on_a_real_dask_cluster(dask_cluster):
    specs = _specs()
    client = parallel.connect(dask_cluster, timeout=30)
    try:
        seen = []
        c = map_tasks(run_task, specs, client=client, on_result=lambda i, v, e: seen.append(i))
    finally:
        client.close()
    assert sorted(seen) == list(range(len(specs)))
    assert _values(c) == _values(map_tasks(run_task, specs, workers=1))


def test_serial_interruption_swallowed_by_the_task_is_not_delivered():
    """A task that catches Ctrl-C and returns a partial value (as simulate does) must not be
    delivered: the map raises KeyboardInterrupt after the tasks finished before it."""
    delivered = []

    def task(x):
        if x == 2:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)
            except KeyboardInterrupt:
                return "partial"
        return x

    with pytest.raises(KeyboardInterrupt):
        map_tasks(task, [0, 1, 2, 3], on_result=lambda i, v, e: delivered.append(v))
    assert delivered == [0, 1]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_pool_interruption_stops_quickly_and_terminates_workers():
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    delivered = []
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            map_tasks(time.sleep, [0.0, 30.0, 30.0], workers=2, on_result=lambda i, v, e: delivered.append(i))
    finally:
        timer.cancel()
    # Returning at all is the point: the two 30 s sleeps were not waited for (the pytest
    # timeout is the hang guard); delivered shows no long task finished.
    assert delivered in ([], [0])


# --------------------------------------------------------------------------- scheduler addresses
class _Server:
    """A TCP server on loopback that, per connection, sends ``greeting`` (or nothing) and holds."""

    def __init__(self, greeting: bytes | None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.greeting = greeting
        self.conns = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            if self.greeting:
                with contextlib.suppress(OSError):
                    c.sendall(self.greeting)

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.mark.parametrize("greeting", [None, b"SSH-2.0-OpenSSH_9.2\r\n", b"\xff" * 64, b"HTTP/1.1 400 Bad\r\n\r\n"])
def test_not_a_dask_scheduler_fails_within_the_timeout(greeting):
    srv = _Server(greeting)
    try:
        with pytest.raises(SchedulerError, match="not a Dask scheduler") as ei:
            parallel.connect(f"tcp://127.0.0.1:{srv.port}", timeout=1.0)
        assert "\n" not in str(ei.value)
    finally:
        srv.close()


def test_nothing_listening_and_bad_addresses():
    with pytest.raises(SchedulerError, match="cannot reach the Dask scheduler"):
        parallel.connect(f"tcp://127.0.0.1:{free_port()}", timeout=1.0)
    for bad in ("127.0.0.1:8786", "tcp://", "tcp://a b:1", 8786):
        with pytest.raises(SchedulerError, match="tcp://HOST:PORT"):
            parallel.connect(bad)
    with pytest.raises(ValueError, match="timeout"):
        parallel.connect("tcp://127.0.0.1:1", timeout=math.nan)


# --------------------------------------------------------------------------- one layer, same numbers
def _small_runs(**kw):
    """A tiny coalescence, chain and limit-SDE run through the given backend."""
    import warnings

    from supermarket import fluctuations as fl
    from supermarket import mixing as mx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fl.RegimeWarning)
        p = fl.regime_a(400, 1.0)
    co = mx.coalescence(40, 2, 0.7, replications=4, seed=5, **kw)
    sim = fl.simulate_fluctuations(p, time=4.0, burn_in=1.0, replications=3, seed=6, grid_dt=0.1, **kw)
    sde = fl.limit_sde("a", kappa=1.0, paths=70, time=2.0, burn_in=0.5, dt=1e-2, seed=7, **kw)
    return co.taus, sim.grid, sim.moments.to_dict(), sde.grid, sde.moments.to_dict()


def _same(a, b):
    import numpy as np

    assert a[0] == b[0]
    assert np.array_equal(a[1], b[1]) and a[2] == b[2]
    assert np.array_equal(a[3], b[3]) and a[4] == b[4]


def test_mixing_and_fluctuations_identical_on_threads_and_in_process():
    """Replication r gets child r of the seed whatever the number of workers."""
    _same(_small_runs(workers=1), _small_runs(workers=2))


def test_mixing_and_fluctuations_identical_on_a_dask_cluster(dask_cluster):
    """The same numbers from a real scheduler and worker as from this process."""
    from supermarket.parallel import connect

    local = _small_runs(workers=1)
    client = connect(dask_cluster, timeout=30)
    try:
        remote = _small_runs(client=client)
    finally:
        client.close()
    _same(local, remote)


def test_cli_mixing_scheduler_gives_the_local_numbers(dask_cluster):
    import json

    from click.testing import CliRunner

    from supermarket.cli import main

    args = ["mixing", "--n", "40", "--d", "2", "--load", "0.7", "--replications", "4", "--seed", "5", "--json"]
    a = CliRunner().invoke(main, [*args, "--workers", "1"])
    b = CliRunner().invoke(main, [*args, "--scheduler", dask_cluster, "--timeout", "30"])
    assert a.exit_code == 0 and b.exit_code == 0, (a.output, b.output)
    assert json.loads(a.stdout)["taus"] == json.loads(b.stdout)["taus"]


# ------------------------------------------------------------------ every command on a cluster
# (command line for this process, command line with --scheduler, the task names the cluster
# must have run: the key of a map_tasks task is "supermarket-<function>-<token>-<index>")
CLUSTER_CASES = {
    "perfect": (
        ["perfect", "--n", "5", "--d", "2", "--load", "0.7", "--replications", "4", "--seed", "3", "--json"],
        ["--workers", "2"],
        {"_cluster_task": 4},
    ),
    "exact": (["exact", "--n", "3", "--d", "2", "--load", "0.7", "--json"], [], {"_apply": 1}),
    "theory": (["theory", "--n", "1000", "--d", "5", "--load", "0.9", "--json"], [], {"_apply": 1}),
    "meanfield": (["meanfield", "--d", "2", "--load", "0.9", "--n", "100", "--json"], [], {"_apply": 1}),
    "design-max-queue": (["design", "--max-queue", "3", "--load", "0.95", "--n", "1000", "--json"], [], {"_apply": 1}),
    "design-latency": (["design", "--latency", "5", "--quantile", "0.9", "--d", "2", "--json"], [], {"_apply": 1}),
    # least d: d and d - 1 are simulated, 8 replications each
    "design-verify": (
        [
            "design",
            "--latency",
            "5",
            "--quantile",
            "0.9",
            "--load",
            "0.8",
            "--n",
            "4",
            "--verify",
            "--steps",
            "5000",
            "--seed",
            "1",
            "--json",
        ],
        ["--workers", "1"],
        {"_apply": 1, "_replication_task": 16},
    ),
}
_WALL_CLOCK = {"seconds", "wall_s"}  # elapsed times: the only fields that may differ


def _no_clock(obj):
    if isinstance(obj, dict):
        return {k: _no_clock(v) for k, v in obj.items() if k not in _WALL_CLOCK}
    if isinstance(obj, list):
        return [_no_clock(v) for v in obj]
    return obj


@pytest.mark.parametrize("case", list(CLUSTER_CASES))
def test_cli_commands_give_the_local_json_on_a_dask_cluster(dask_cluster, case):
    """perfect, exact, theory, meanfield and design: --scheduler gives exactly the local JSON,
    and the work did run on the cluster (its task stream shows the tasks)."""
    import json
    from collections import Counter

    from click.testing import CliRunner
    from dask.distributed import Client, get_task_stream

    from supermarket.cli import main

    args, local_extra, expected = CLUSTER_CASES[case]
    a = CliRunner().invoke(main, [*args, *local_extra])
    assert a.exit_code == 0, a.output
    with Client(dask_cluster, timeout="30s") as watcher, get_task_stream(watcher) as ts:
        b = CliRunner().invoke(main, [*args, "--scheduler", dask_cluster, "--timeout", "30"])
        assert b.exit_code == 0, b.output
    ran = Counter(rec["key"].split("-")[1] for rec in ts.data if str(rec["key"]).startswith("supermarket-"))
    assert dict(ran) == expected
    ja, jb = json.loads(a.stdout), json.loads(b.stdout)
    assert _no_clock(ja) == _no_clock(jb)
    if case == "design-verify":
        assert [p["verdict"] for p in jb["verify"]["points"]]  # the check really ran


def test_perfect_on_a_cluster_keeps_its_budget_and_refuses_workers(dask_cluster):
    """perfect.sample(client=): a sample out of time on a worker is BudgetExceeded here (never
    an approximate sample); workers > 1 with a client is refused before any work."""
    from supermarket import perfect

    client = parallel.connect(dask_cluster, timeout=30)
    try:
        with pytest.raises(perfect.BudgetExceeded, match="max_time"):
            perfect.sample(50, 2, 0.95, samples=2, max_time=1e-4, client=client)
        with pytest.raises(ValueError, match="workers and client"):
            perfect.sample(5, 2, 0.7, samples=2, workers=2, client=client)
        with pytest.raises(TypeError, match="client"):
            perfect.sample(5, 2, 0.7, samples=2, client="tcp://127.0.0.1:1")
    finally:
        client.close()
