"""One randomness policy for the fluct, SDE and coupling kernels: each takes a xoshiro256**
state derived from a SeedSequence, never a global generator, so the numbers are the same
serially, on many threads at once, and on a Dask worker; kernels run in chunks that do
not change the numbers; long runs are refused or warned about up front; Ctrl-C works."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from supermarket import fluctuations as fl
from supermarket import mixing as mx
from supermarket.mixing import coupling as mx_coupling


def quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fl.RegimeWarning)
        return fn(*a, **k)


P_B = quiet(fl.regime_b, 400, 1.0, 0.5)


def job(kind: str, seed: int):
    """A small run of one kind, reduced to plain numbers."""
    if kind == "chain":
        r = fl.simulate_fluctuations(P_B, time=20.0, burn_in=2.0, seed=seed, workers=1)
        return r.events, r.moments.to_dict(), r.grid.tobytes()
    if kind == "limit":
        r = fl.limit_sde("c", zeta=1.0, paths=40, time=3.0, burn_in=0.5, dt=1e-2, seed=seed, workers=1, record_paths=3)
        return r.moments.to_dict(), r.push_rate, r.grid.tobytes()
    if kind == "prelimit":
        r = fl.prelimit_sde(P_B, paths=40, time=3.0, burn_in=0.5, dt=1e-2, seed=seed, workers=1, record_paths=3)
        return r.moments.to_dict(), r.grid.tobytes()
    r = mx.coalescence(200, 3, 0.8, start="empty", replications=6, seed=seed, workers=1, burn_in=20_000)
    return r.taus


KINDS = ("chain", "limit", "prelimit", "coupling")


def test_threads_give_the_serial_numbers():
    tasks = [(k, s) for k in KINDS for s in (1, 2)] * 2  # every task twice, run concurrently
    serial = [job(k, s) for k, s in tasks]
    with ThreadPoolExecutor(max_workers=4) as ex:
        threaded = list(ex.map(lambda t: job(*t), tasks))
    assert threaded == serial
    # and different seeds give different numbers (the test can fail)
    assert serial[0] != serial[1]


def test_workers_do_not_change_the_numbers():
    a = fl.simulate_fluctuations(P_B, time=20.0, replications=3, seed=11, workers=1)
    b = fl.simulate_fluctuations(P_B, time=20.0, replications=3, seed=11, workers=3)
    assert a.moments == b.moments and np.array_equal(a.grid, b.grid)
    c = fl.prelimit_sde(P_B, paths=70, time=2.0, burn_in=0.5, dt=1e-2, seed=3, workers=1)
    d = fl.prelimit_sde(P_B, paths=70, time=2.0, burn_in=0.5, dt=1e-2, seed=3, workers=3)
    assert c.moments == d.moments
    e = mx.coalescence(200, 3, 0.8, start="empty", replications=5, seed=4, workers=1, burn_in=10_000)
    f = mx.coalescence(200, 3, 0.8, start="empty", replications=5, seed=4, workers=3, burn_in=10_000)
    assert e.taus == f.taus


def test_chunking_does_not_change_the_numbers(monkeypatch):
    a = job("chain", 5)
    b = job("limit", 5)
    c = job("coupling", 5)
    # patched where the kernels' drivers look them up (the packages only re-export them)
    monkeypatch.setattr(fl.chain, "CHUNK_EVENTS", 97)
    monkeypatch.setattr(fl.diffusions, "CHUNK_STEPS", 101)
    monkeypatch.setattr(mx_coupling, "CHUNK_STEPS", 89)
    assert job("chain", 5) == a and job("limit", 5) == b and job("coupling", 5) == c


def test_dask_threaded_worker_gives_the_local_numbers(dask_cluster):
    from dask.distributed import Client

    # library functions only: the worker imports supermarket, not this test module
    calls = [
        (fl.simulate_fluctuations, (P_B,), dict(time=20.0, burn_in=2.0, replications=2, seed=7, workers=2)),
        (fl.limit_sde, ("c",), dict(zeta=1.0, paths=40, time=3.0, burn_in=0.5, dt=1e-2, seed=7, workers=2)),
        (fl.prelimit_sde, (P_B,), dict(paths=40, time=3.0, burn_in=0.5, dt=1e-2, seed=7, workers=2)),
        (mx.coalescence, (200, 3, 0.8), dict(start="empty", replications=6, seed=7, workers=2, burn_in=20_000)),
    ]
    with Client(dask_cluster, timeout="30s") as client:
        # functools.partial: submit's own ``workers`` keyword must not swallow ours
        remote = client.gather([client.submit(functools.partial(f, *a, **k), pure=False) for f, a, k in calls])
    local = [f(*a, **{**k, "workers": 1}) for f, a, k in calls]
    for r, l in zip(remote, local):
        if hasattr(l, "taus"):
            assert r.taus == l.taus
        else:
            assert r.moments == l.moments and np.array_equal(r.grid, l.grid)


# ----------------------------------------------------------------- refusals, Ctrl-C
def test_refusals_and_warnings_up_front():
    with pytest.raises(ValueError, match=r"TiB.*--time"):
        fl.simulate_fluctuations(P_B, time=1e12)
    p = quiet(fl.regime_c, 10**12, 1.0)
    with pytest.raises(ValueError, match=r"about .* in all.*refused"):
        fl.simulate_fluctuations(p)  # refused from the predicted size; a run would never end
    with pytest.warns(fl.WorkWarning, match="about"), pytest.raises(KeyboardInterrupt):
        # warned before any work; the interrupt (simulated) then stops it
        def boom(*a, **k):
            raise KeyboardInterrupt

        import supermarket.engines.fluct as ef

        old = ef.fluct_ctmc
        ef.fluct_ctmc = boom
        try:
            fl.simulate_fluctuations(P_B, time=2e6, grid_dt=100.0)
        finally:
            ef.fluct_ctmc = old
    with pytest.raises(ValueError, match=r"burn-in.*refused.*--burn-in"):
        mx.coalescence(1000, 10, 0.999999)
    with pytest.raises(ValueError, match="refused"):
        fl.limit_sde("b", c=1.0, zeta=0.5, paths=10**6, time=1e4)


def _cli(*args):
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([p for p in sys.path if p.endswith("src")] + [os.environ.get("PYTHONPATH", "")]),
    )
    return subprocess.Popen(
        [sys.executable, "-m", "supermarket", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def test_cli_refuses_in_one_line():
    from click.testing import CliRunner

    from supermarket.cli import main

    for args in (
        ["fluctuations", "--regime", "b", "--time", "1e12"],
        ["fluctuations", "--regime", "c", "--n", "1e12"],
        ["mixing", "--load", "0.999999"],
        ["mixing", "--n", "1e9"],
    ):
        r = CliRunner().invoke(main, args)
        err = r.stderr if hasattr(r, "stderr") else r.output
        lines = [ln for ln in err.splitlines() if ln.startswith("supermarket: error:")]
        assert r.exit_code == 2 and len(lines) == 1 and "Traceback" not in err, (args, err)
        assert "about" in lines[0] or "TiB" in lines[0] or "PiB" in lines[0]  # sizes scale with the defaults


@pytest.mark.parametrize(
    "args",
    [
        ["mixing", "--n", "1e6", "--load", "0.99", "--replications", "2", "--burn-in-steps", "1e11", "--workers", "2"],
        pytest.param(
            ["fluctuations", "--regime", "b", "--n", "1e5", "--time", "1e5", "--replications", "2", "--no-prelimit"],
            marks=pytest.mark.slow,
        ),
    ],
)
def test_ctrl_c_stops_within_a_second(args):
    proc = _cli(*args)
    try:
        # wait until the run has started (the warning with the estimate comes first)
        line = proc.stderr.readline()
        while line and "about" not in line:
            line = proc.stderr.readline()
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)  # hang guard only: the uninterrupted run takes hours
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
