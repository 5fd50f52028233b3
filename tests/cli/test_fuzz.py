"""Fuzzing every command and the main Python entry points with hostile values.

The contract under test (docs/index.md, the CLI's rules for user mistakes):

- CLI: exit code 0, or 2 with exactly one line ``supermarket: error: ...`` on stderr (1 only
  where documented: a write that fails after the computation, failed sweep tasks); 130
  for Ctrl-C; never a traceback; small inputs finish within a per-case time limit.
- Python API: a result, or ``ValueError``/``TypeError`` with a message; never another
  exception (``OverflowError``, ``ZeroDivisionError``, ``MemoryError``, ...), never a hang.

Values are drawn with Hypothesis from a fixed seed (``derandomize`` in conftest.py), so a
CI run sees the same cases every time.  Options that size the work (steps, time,
replications, ...) are drawn as either hostile-invalid or small, so that every case is
short; the others (n, d, load, ε, paths, start states, ...) take anything.  The default
suite runs a few dozen cases per command (about 30 s); ``pytest -m slow
tests/cli/test_fuzz.py`` runs many more (see ``SLOW_EXAMPLES``).

Failures found in code owned elsewhere are recorded below as ``xfail(strict=True)``
tests naming the area, so that the fix flips them to a failure to be removed.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from contextlib import contextmanager
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _paths import SRC
from supermarket.cli import main

FAST_EXAMPLES = 12  # per command in the default suite
SLOW_EXAMPLES = 1000  # per command with -m slow
CASE_SECONDS = 60  # a case that runs longer is a hang (numba compiles once, first case pays)

# --------------------------------------------------------------------------- hostile values
HOSTILE = [
    "0",
    "-1",
    "-0",
    "1e400",
    "-1e400",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e-400",
    "",
    " ",
    "abc",
    "٣",
    "1e19",
    "1e20",
    "9223372036854775808",
    "9223372036854775807",
    "1.5",
    "0x10",
    "1_000",
    "1e999999999999",
    "1e-999999999999",
    "🙂",
    "-5e3",
    "0.5",
    "1",
    "2",
    "1e300",
    "5e-324",
    "0.99999999999999989",
    "0.99999999999999999999",
    "1e6",
    "1e-300",
    "1e15",
    "9007199254740993",
    "2.0",
    "1e2",
    "+3",
    "٣.٥",
    "1/2",
    "None",
    "true",
]
INVALID_OR_BAD = [
    "0",
    "-1",
    "1e400",
    "nan",
    "inf",
    "-inf",
    "",
    "abc",
    "1.5",
    "1e999999999999",
    "🙂",
    "-5e3",
    "1e-400",
    "0x10",
    "1/2",
]
START = [
    "empty",
    "fixed-point",
    "good",
    "customers:0",
    "customers:3",
    "customers:-1",
    "customers:1e9",
    "customers:",
    "long:5",
    "long:0",
    "long:1e400",
    "long:99999999999999999999",
    "uniform:2",
    "1,0.5",
    "0.5,1",
    "1,nan",
    "2,1",
    "abc",
    "",
    ":",
    "fixed-point:3",
    "🙂",
    "0.3",
]
# Paths are relative (the cases run in a scratch directory) or places that nobody, root
# included, can create: a case must never leave files outside its scratch directory.
PATHS = [
    "missing-dir/x.png",
    "/proc/x.png",
    "/proc/missing/x.png",
    "/",
    ".",
    "",
    " ",
    "/dev/null/x.png",
    "x.unknownfmt",
    "a\u00e9\u4e2d.png",
    "x" * 300 + ".png",
]


def _hostile():
    return st.one_of(
        st.sampled_from(HOSTILE),
        st.integers(-(10**25), 10**25).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.text(max_size=6).filter(lambda s: "\x00" not in s),
    )


def _valid_or_hostile(*valid):
    """Half the draws a plausible valid value, half hostile: both paths get exercised."""
    return st.one_of(st.sampled_from([str(v) for v in valid]), _hostile())


COUNTS = ("1", "2", "3", "10", "1e3", "1e15", "9223372036854775807")
LOADS = ("0.5", "0.9", "0.99", "0.999999", "0.99999999999999989", "1e-300", "0.1")


def _small_or_bad(*small):
    return st.one_of(st.sampled_from(INVALID_OR_BAD), st.sampled_from([str(s) for s in small]))


# --------------------------------------------------------------------------- running a case
class CaseTimeout(BaseException):
    """Raised by the alarm inside a case that runs too long (a BaseException, so that no
    ``except Exception`` of the code under test swallows it)."""


@contextmanager
def time_limit(seconds):
    def handler(signum, frame):
        raise CaseTimeout(f"case ran longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def invoke(args, seconds=CASE_SECONDS):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with time_limit(seconds):
            return CliRunner().invoke(main, args)


def check_cli(args, result, allowed=(0, 2)):
    """The CLI contract for one case."""
    where = f"supermarket {' '.join(repr(a) for a in args)}"
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        import traceback

        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        raise AssertionError(f"{where}: crashed with {type(exc).__name__}: {exc}\n{tb}")
    assert result.exit_code in allowed, f"{where}: exit code {result.exit_code}\n{result.output}"
    assert "Traceback" not in result.output, f"{where}: traceback\n{result.output}"
    if result.exit_code == 2:
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("supermarket: error:")]
        assert len(errors) == 1 and lines[-1] == errors[0], f"{where}: stderr not one error line:\n{result.stderr}"
        assert not any(not ln.startswith("supermarket: ") for ln in lines), f"{where}: stray stderr\n{result.stderr}"


def _opts(draw, spec, k_max=3):
    """Draw up to ``k_max`` options of ``spec`` (name -> strategy or None for a flag)."""
    names = draw(st.lists(st.sampled_from(sorted(spec)), min_size=1, max_size=k_max, unique=True))
    args = []
    for name in names:
        if spec[name] is None:
            args.append(name)
        else:
            args += [name, draw(spec[name])]
    return args


def _fuzz(examples):
    return settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)


# --------------------------------------------------------------------------- command specs
def _theory_spec():
    return {
        "--n": _valid_or_hostile(*COUNTS, "1e20", "1e100"),
        "--d": _valid_or_hostile(*COUNTS),
        "--load": _valid_or_hostile(*LOADS),
        "--eps": _valid_or_hostile("0.1", "0.05", "1e-300"),
        "--json": None,
    }


def _design_spec():
    return {
        "--n": _valid_or_hostile(*COUNTS),
        "--load": _valid_or_hostile(*LOADS),
        "--max-queue": _valid_or_hostile(*COUNTS),
        "--json": None,
    }


def _meanfield_spec():
    return {
        "--d": _valid_or_hostile("inf", "1", "2", "3", "20", "1e6", "9223372036854775807"),
        "--load": _valid_or_hostile(*LOADS),
        "--n": _valid_or_hostile(*COUNTS),
        "--time": _small_or_bad(0.5, 3, 10),
        "--start": st.sampled_from(START),
        "--no-replace": None,
        "--levels": _small_or_bad(1, 3, 20),
        "--tol": _hostile(),
        "--points": _small_or_bad(1, 2, 11),
        "--json": None,
        "--plot": st.sampled_from(PATHS),
    }


def _simulate_spec():
    return {
        "--n": st.one_of(
            st.sampled_from(INVALID_OR_BAD + ["1", "2", "20", "1e15", "9007199254740992", "9007199254740993", "1e19"])
        ),
        "--d": _valid_or_hostile(*COUNTS),
        "--load": _valid_or_hostile(*LOADS, "1", "2.5", "1e6"),
        "--steps": _small_or_bad(100, 400),
        "--burn-in": _small_or_bad(0, 50),
        "--engine": st.sampled_from(["profile", "queues", "buckets", "x", ""]),
        "--no-replace": None,
        "--time-mode": st.sampled_from(["discrete", "continuous", "x"]),
        "--start": st.sampled_from(START),
        "--seed": _hostile(),
        "--replications": _small_or_bad(1, 2),
        "--workers": _hostile(),
        "--eps": _hostile(),
        "--plot": st.sampled_from(PATHS),
        "--out": st.sampled_from(PATHS),
    }


def _mixing_spec():
    return {
        "--n": _small_or_bad(1, 2, 20),
        "--d": _valid_or_hostile(*COUNTS),
        "--load": _valid_or_hostile(*LOADS),
        "--from": st.sampled_from(START),
        "--replications": _small_or_bad(1, 3),
        "--max-steps": _small_or_bad(10, 500),
        "--burn-in-steps": _small_or_bad(1, 100),
        "--seed": _hostile(),
        "--workers": _small_or_bad(1),
        "--no-replace": None,
    }


def _fluct_spec():
    return {
        "--regime": st.sampled_from(["a", "b", "c", "d", ""]),
        "--n": _small_or_bad(4, 100),
        "--kappa": _valid_or_hostile("0.5", "1", "3"),
        "--theta": _valid_or_hostile("0.1", "0.25", "0.49"),
        "--c": _valid_or_hostile("0.5", "1", "2"),
        "--zeta": _valid_or_hostile("-1", "0", "1", "3"),
        "--d": _small_or_bad(2, 3, 10),
        "--centring": st.sampled_from(["c_n", "one", "x"]),
        "--time": _small_or_bad(1, 2),
        "--burn-in-time": _small_or_bad(0.5, 1),
        "--replications": _small_or_bad(1),
        "--seed": _hostile(),
        "--replace": None,
        "--sde-paths": _small_or_bad(2, 4),
        "--sde-time": _small_or_bad(1, 2),
        "--dt": _small_or_bad(0.01, 0.1),
        "--reflection": st.sampled_from(["projection", "bridge", "x"]),
        "--plot": st.sampled_from(PATHS),
    }


BASE = {
    "theory": [],
    "design": ["--load", "0.9", "--max-queue", "2"],
    "meanfield": ["--d", "2", "--load", "0.9"],
    "simulate": ["--n", "20", "--d", "2", "--load", "0.9", "--steps", "400", "--burn-in-steps", "0", "--json"],
    "mixing": [
        "--n",
        "20",
        "--d",
        "2",
        "--load",
        "0.5",
        "--replications",
        "3",
        "--max-steps",
        "2000",
        "--burn-in-steps",
        "100",
        "--workers",
        "1",
        "--json",
    ],
    "fluctuations": [
        "--regime",
        "a",
        "--n",
        "100",
        "--time",
        "2",
        "--burn-in-time",
        "1",
        "--replications",
        "1",
        "--sde-paths",
        "4",
        "--sde-time",
        "2",
        "--dt",
        "0.01",
        "--workers",
        "1",
        "--json",
    ],
}
SPECS = {
    "theory": _theory_spec,
    "design": _design_spec,
    "meanfield": _meanfield_spec,
    "simulate": _simulate_spec,
    "mixing": _mixing_spec,
    "fluctuations": _fluct_spec,
}


@st.composite
def command_case(draw, name):
    return [name, *BASE[name], *_opts(draw, SPECS[name]())]


_KNOWN_HANGS = {"simulate": lambda args: _simulate_steps_below_batches(args)}


def _simulate_steps_below_batches(args):
    """simulate with fewer steps than batches never ends (recorded as an xfail below)."""
    steps = None
    for i, a in enumerate(args[:-1]):
        if a == "--steps":
            steps = args[i + 1]
    try:
        return steps is not None and 0 < float(steps) < 32 and float(steps) == int(float(steps))
    except ValueError:
        return False


def _run_command_fuzz(name, examples):
    counter = {"cases": 0, "exit": {}}

    @_fuzz(examples)
    @given(command_case(name))
    def inner(args):
        skip = _KNOWN_HANGS.get(name)
        if skip and skip(args):
            return
        with tempfile.TemporaryDirectory() as tmp:
            args = [os.path.join(tmp, a) if isinstance(a, str) and a.startswith("x.") else a for a in args]
            cwd = os.getcwd()
            os.chdir(tmp)  # relative paths (".", "x.png") land in a scratch directory
            try:
                r = invoke(args)
            finally:
                os.chdir(cwd)
        check_cli(args, r)
        counter["cases"] += 1
        counter["exit"][r.exit_code] = counter["exit"].get(r.exit_code, 0) + 1

    inner()
    return counter


COMMANDS = ["theory", "design", "meanfield", "simulate", "mixing", "fluctuations"]


@pytest.mark.parametrize("name", COMMANDS)
def test_fuzz_command(name):
    c = _run_command_fuzz(name, FAST_EXAMPLES)
    assert c["cases"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", COMMANDS)
def test_fuzz_command_long(name, capsys):
    t0 = time.perf_counter()
    c = _run_command_fuzz(name, SLOW_EXAMPLES)
    with capsys.disabled():
        print(f"\nfuzz {name}: {c['cases']} cases, exit codes {c['exit']}, {time.perf_counter() - t0:.0f} s")


# --------------------------------------------------------------------------- sweep, report, reproduce
SWEEP_TOML = {
    "valid": '[sweep]\nname = "t"\n[[run]]\nmeasurement = "theory"\nn = 100\nd = 2\nload = 0.9\n',
    "garbage": "this is [not toml",
    "hostile": '[[run]]\nmeasurement = "simulate"\nn = 1e400\nd = -1\nload = "nan"\nsteps = 1e999\n',
    "huge": '[[run]]\nmeasurement = "theory"\nn = 9223372036854775807\nd = 9223372036854775807\nload = 0.5\n',
    "empty": "",
    "unicode": '[sweep]\nname = "🙂"\n[[run]]\nmeasurement = "🙂"\n',
}


@st.composite
def sweep_case(draw, tmp):
    kind = draw(st.sampled_from(sorted(SWEEP_TOML) + ["missing", "dir"]))
    if kind == "missing":
        f = os.path.join(tmp, "missing.toml")
    elif kind == "dir":
        f = tmp
    else:
        f = os.path.join(tmp, f"{kind}.toml")
        with open(f, "w", encoding="utf-8") as fh:
            fh.write(SWEEP_TOML[kind])
    spec = {
        "--out": st.sampled_from(PATHS + [os.path.join(tmp, "out")]),
        "--workers": _hostile(),
        "--max-tasks": _hostile(),
        "--timeout": _hostile(),
        "--check": None,
        "--json": None,
    }
    args = ["sweep", f, *_opts(draw, spec)]
    if "--out" in args and "--check" not in args and draw(st.booleans()):
        args.append("--check")
    if "--workers" not in args:
        args += ["--workers", "1"]
    return args


@st.composite
def report_case(draw, tmp):
    d = draw(st.sampled_from([tmp, os.path.join(tmp, "missing"), "/", os.path.join(tmp, "f.txt")]))
    spec = {
        "--html": st.sampled_from(PATHS + [os.path.join(tmp, "r.html")]),
        "--md": st.sampled_from(PATHS + [os.path.join(tmp, "r.md")]),
        "--out": st.sampled_from(PATHS + [os.path.join(tmp, "r.html")]),
        "--format": st.sampled_from(["html", "md", "pdf", ""]),
    }
    return ["report", d, *_opts(draw, spec)]


@st.composite
def reproduce_case(draw):
    # --out is always one that cannot be written, so that no valid case starts an experiment
    out = draw(st.sampled_from(["/proc/x", "/proc/sub/x", "/dev/null/x", "", " "]))
    spec = {"--seed": _hostile(), "--workers": _hostile(), "--quick": None}
    paper = draw(st.sampled_from(["paper000", "paper002", "paper001", "", "🙂"]))
    return ["reproduce", paper, "--out", out, *_opts(draw, spec)]


def _run_file_fuzz(builder, examples, allowed=(0, 1, 2)):
    counter = {"cases": 0, "exit": {}}
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "f.txt"), "w") as fh:
            fh.write("x")

        @_fuzz(examples)
        @given(builder(tmp) if builder is not reproduce_case else builder())
        def inner(args):
            cwd = os.getcwd()
            os.chdir(tmp)
            try:
                r = invoke(args)
            finally:
                os.chdir(cwd)
            check_cli(args, r, allowed)
            counter["cases"] += 1
            counter["exit"][r.exit_code] = counter["exit"].get(r.exit_code, 0) + 1

        inner()
    return counter


def test_fuzz_sweep_report_reproduce():
    # sweep exits 1 when a task failed (documented); report/reproduce only 0 or 2
    assert _run_file_fuzz(sweep_case, FAST_EXAMPLES)["cases"] > 0
    assert _run_file_fuzz(report_case, FAST_EXAMPLES, allowed=(0, 2))["cases"] > 0
    c = _run_file_fuzz(reproduce_case, FAST_EXAMPLES, allowed=(2,))
    assert c["cases"] > 0


@pytest.mark.slow
def test_fuzz_sweep_report_reproduce_long(capsys):
    for name, builder, allowed in [
        ("sweep", sweep_case, (0, 1, 2)),
        ("report", report_case, (0, 2)),
        ("reproduce", reproduce_case, (2,)),
    ]:
        c = _run_file_fuzz(builder, SLOW_EXAMPLES, allowed)
        with capsys.disabled():
            print(f"\nfuzz {name}: {c['cases']} cases, exit codes {c['exit']}")


# --------------------------------------------------------------------------- misspelled options
def _options_of(cmd_name):
    cmd = main.get_command(None, cmd_name)
    return [o for p in cmd.params for o in getattr(p, "opts", []) if o.startswith("--") and len(o) >= 6]


@pytest.mark.parametrize("name", COMMANDS + ["sweep", "report", "reproduce"])
def test_misspelled_options_are_suggested(name):
    for opt in _options_of(name):
        typo = opt[:-1]  # drop the last letter: "--replications" -> "--replication"
        if any(o.startswith(typo) for o in _options_of(name) if o != opt):
            continue  # a prefix of another option: click may accept neither, tested elsewhere
        r = invoke([name, typo, "1"])
        assert r.exit_code == 2, (name, typo, r.output)
        assert "Did you mean" in r.stderr and opt in r.stderr, (name, typo, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1


def test_misspelled_commands_are_suggested():
    for name in COMMANDS + ["sweep", "report", "reproduce"]:
        r = invoke([name[:-1] + ("x" if name[-1] != "x" else "y")])
        assert r.exit_code == 2 and f"Did you mean '{name}'" in r.stderr, (name, r.stderr)


# --------------------------------------------------------------------------- Python API
API_VALUES = st.one_of(
    st.sampled_from(
        [
            0,
            -1,
            1,
            2,
            3,
            10,
            10**6,
            2**53,
            2**53 + 1,
            2**63 - 1,
            2**63,
            10**19,
            10**400,
            -(10**400),
            0.0,
            0.5,
            0.9,
            0.99999999999999989,
            1.0,
            1.5,
            1e300,
            5e-324,
            math.nan,
            math.inf,
            -math.inf,
            "0.9",
            "0.99999999999999999999",
            "1e400",
            "abc",
            "",
            None,
            True,
            False,
            [0.5],
            (2,),
            Fraction(9, 10),
            Decimal("0.9"),
            np.int64(5),
            np.float32(0.5),
            np.uint64(2**64 - 1),
            np.nan,
            complex(0.5, 0),
        ]
    ),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=True, allow_infinity=True),
)


def _api_calls():
    from supermarket import fluctuations as fl
    from supermarket import meanfield as mf
    from supermarket import theory as th

    return {
        "fixed_point": lambda n, d, lam: th.fixed_point(d, lam),
        "mean_queue_length": lambda n, d, lam: th.mean_queue_length(d, lam),
        "k_lambda_d": lambda n, d, lam: th.k_lambda_d(d, lam),
        "k_report": lambda n, d, lam: th.k_report(d, lam),
        "k_hypothesis": lambda n, d, lam: th.k_hypothesis(n, d, lam),
        "predicted_counts": lambda n, d, lam: th.predicted_counts(n, d, lam),
        "theorem_1_2": lambda n, d, lam: th.theorem_1_2(n, d, lam),
        "mixing_bounds": lambda n, d, lam: th.mixing_bounds(n, d, lam),
        "slow_mode": lambda n, d, lam: th.slow_mode(d, lam),
        "regime_002": lambda n, d, lam: th.regime_002(n, d, lam),
        "design": lambda n, d, lam: th.design(lam, d, n),
        "summary": lambda n, d, lam: th.summary(n, d, lam),
        "refined_mean_field": lambda n, d, lam: mf.refined_mean_field(d, lam, max_levels=300),
        "lna": lambda n, d, lam: mf.lna(d, lam, n=n, at="centre", max_levels=300),
        "solve_meanfield": lambda n, d, lam: mf.solve_meanfield(d, lam, T=1.0, t_eval=[0.0, 1.0], max_levels=300),
        "near_equilibrium_centre": lambda n, d, lam: mf.near_equilibrium_centre(n, d, lam, max_levels=300),
        "regime_a": lambda n, d, lam: fl.regime_a(n, lam, warn=False),
        "regime_b": lambda n, d, lam: fl.regime_b(n, lam, d, warn=False),
        "regime_c": lambda n, d, lam: fl.regime_c(n, lam, d=d, warn=False),
    }


def _check_api(name, fn, n, d, lam):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with time_limit(CASE_SECONDS):
                out = fn(n, d, lam)
    except (ValueError, TypeError) as exc:
        assert str(exc), f"{name}{(n, d, lam)!r}: empty message"
        return "error"
    except CaseTimeout:
        raise AssertionError(f"{name}(n={n!r}, d={d!r}, lam={lam!r}) ran longer than {CASE_SECONDS} s") from None
    except Exception as exc:  # the point of the test
        raise AssertionError(f"{name}(n={n!r}, d={d!r}, lam={lam!r}) raised {type(exc).__name__}: {exc}") from exc
    _check_result(name, out)
    return "ok"


def _check_result(name, out):
    """No silent wrong number: the invariants a result must satisfy whatever its input."""
    if name == "fixed_point":
        assert np.all((out >= 0) & (out <= 1)) and np.all(np.diff(out) <= 0)
    elif name == "mean_queue_length":
        assert math.isfinite(out) and out > 0
    elif name == "predicted_counts":
        assert np.all(np.isfinite(out))
    elif name in ("refined_mean_field", "lna"):
        if out.accurate:
            cov = out.W if name == "refined_mean_field" else out.covariance
            assert np.all(np.isfinite(cov)) and np.all(np.diag(cov) >= -1e-9 * max(1.0, np.abs(cov).max()))
    elif name == "summary":
        assert all(c is None or c >= 0 for c in (out["predicted_counts"] or []))
    elif name == "design":
        assert all(s != s or 0 <= s <= 1 for s in out.share_by_length)


def _known_api_failure(name, n, d, lam):
    """Cases recorded as strict xfails below (owned elsewhere), skipped by the fuzz so that it
    can look for others."""
    big_n = isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n > 2**53
    return name.startswith("regime_") and big_n


def _run_api_fuzz(examples):
    calls = _api_calls()
    counter = {"cases": 0, "ok": 0}

    # half the draws plausible (n, d, λ), half hostile, so that both paths get exercised
    ns = st.one_of(st.sampled_from([1, 10, 1000, 10**6, 10**15, 2**63 - 1]), API_VALUES)
    ds = st.one_of(st.sampled_from([1, 2, 3, 20, 10**6, 2**63 - 1]), API_VALUES)
    lams = st.one_of(st.sampled_from([0.5, 0.9, 0.99, "0.999", 1 - 2.0**-53, 1e-300, 1.5]), API_VALUES)

    @_fuzz(examples)
    @given(st.sampled_from(sorted(calls)), ns, ds, lams)
    def inner(name, n, d, lam):
        if _known_api_failure(name, n, d, lam):
            return
        res = _check_api(name, calls[name], n, d, lam)
        counter["cases"] += 1
        counter["ok"] += res == "ok"

    inner()
    return counter


def test_fuzz_python_api():
    assert _run_api_fuzz(150)["cases"] > 0


@pytest.mark.slow
def test_fuzz_python_api_long(capsys):
    c = _run_api_fuzz(1500)
    with capsys.disabled():
        print(f"\nfuzz python API: {c['cases']} cases, {c['ok']} returned a result")


def test_fuzz_simulate_and_coalescence_api():
    """The two simulation entry points on small sizes with hostile n, d, λ."""
    from supermarket.mixing import coalescence
    from supermarket.simulation import simulate

    calls = {
        "simulate": lambda n, d, lam: simulate(n, d, lam, steps=200, burn_in=0, workers=1),
        "coalescence": lambda n, d, lam: coalescence(n, d, lam, replications=2, max_steps=500, burn_in=50, workers=1),
    }
    small = st.one_of(
        st.sampled_from([0, -1, 1, 2, 5, 10**400, 2**53 + 1, 1.5, math.nan, "3", None, True]), st.integers(1, 30)
    )

    @_fuzz(FAST_EXAMPLES * 2)
    @given(st.sampled_from(sorted(calls)), small, API_VALUES, API_VALUES)
    def inner(name, n, d, lam):
        _check_api(name, calls[name], n, d, lam)

    inner()


# --------------------------------------------------------------------------- interrupts, pipes, full disks
def _subprocess(args, **kw):
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    )
    return subprocess.Popen(
        [sys.executable, "-m", "supermarket", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
        **kw,
    )


def _interrupt(args, after, wait=60):
    p = _subprocess(args)
    time.sleep(after)
    os.killpg(p.pid, signal.SIGINT)
    try:
        out, err = p.communicate(timeout=wait)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise AssertionError(f"supermarket {' '.join(args)}: still running {wait} s after Ctrl-C") from None
    return p.returncode, out.decode(), err.decode()


INTERRUPT_POINTS = [
    (["theory"], "supermarket.theory.report", "summary"),  # where theory_report looks it up
    (["design", "--load", "0.9", "--max-queue", "2"], "supermarket.theory", "design"),
    (["meanfield"], "supermarket.meanfield", "refined_mean_field"),
    (["simulate", "--n", "20", "--steps", "100"], "supermarket.cli.simulate", "_simulate"),
    (["mixing", "--n", "20"], "supermarket.mixing", "coalescence"),
    (["fluctuations", "--regime", "a"], "supermarket.fluctuations", "compare"),
    (["sweep", "x.toml", "--check"], "supermarket.sweep", "load_sweep"),
    (["reproduce", "paper000", "--out", "out"], "supermarket.experiments.paper000", "run"),
]


@pytest.mark.parametrize("args, module, attr", INTERRUPT_POINTS, ids=[a[0][0] for a in INTERRUPT_POINTS])
def test_ctrl_c_in_every_command_exits_130_without_traceback(args, module, attr, monkeypatch, tmp_path):
    import importlib

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib.import_module(module), attr, interrupted)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.toml").write_text("")
    r = invoke(args)
    assert r.exit_code == 130, (args, r.output)
    assert r.stderr.strip().splitlines()[-1] == "supermarket: interrupted" and "Traceback" not in r.output


@pytest.mark.slow
def test_ctrl_c_in_mixing_worker_processes():
    rc, _out, err = _interrupt(
        ["mixing", "--n", "1000", "--d", "10", "--replications", "1000", "--workers", "2"], after=6
    )
    assert rc == 130 and "Traceback" not in err, err
    # the up-front duration warning may come first; click ends the ^C line with an empty one
    lines = [x for x in err.strip().splitlines() if x.strip()]
    assert lines[-1] == "supermarket: interrupted" and all(x.startswith("supermarket: ") for x in lines), err


def test_full_disk_and_closed_pipe_are_one_line():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        p = subprocess.run(
            [sys.executable, "-m", "supermarket", "theory", "--json"],
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=60,
            env=dict(os.environ, PYTHONPATH=str(SRC)),
        )
    assert p.returncode == 1
    assert p.stderr.decode().strip() == "supermarket: error: I/O error: No space left on device"
    # a reader that goes away: quiet exit, no traceback
    p = subprocess.Popen(
        [sys.executable, "-m", "supermarket", "theory"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(SRC)),
    )
    p.stdout.read(10)
    p.stdout.close()
    err = p.stderr.read().decode()
    p.wait(timeout=60)
    assert "Traceback" not in err


# --------------------------------------------------------------------------- known failures elsewhere
def test_simulate_few_steps_ends():
    """`simulate --steps 10` (fewer steps than batches) used to spin forever; it must end."""
    p = _subprocess(["simulate", "--n", "10", "--d", "2", "--steps", "10", "--burn-in-steps", "0", "--json"])
    try:
        p.communicate(timeout=12)  # the same run with --steps 400 takes about 3 s
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise AssertionError("simulate --steps 10 did not end within 12 s") from None
    assert p.returncode == 0


@pytest.mark.slow
def test_fluctuations_ctrl_c_does_not_wait_for_the_run():
    """Ctrl-C used to wait for the chain's worker threads to finish the whole run; the kernels
    now stop between chunks (parallel.check_stop)."""
    rc, _out, err = _interrupt(["fluctuations", "--regime", "a", "--n", "1000", "--time", "1e6"], after=8, wait=20)
    assert rc == 130 and "Traceback" not in err


def test_regime_huge_n_is_a_value_error():
    """n beyond 2^53 (the engines' limit) is a ValueError naming n, not an OverflowError."""
    from supermarket import fluctuations as fl

    with pytest.raises((ValueError, TypeError)):
        fl.regime_a(2**63 - 1, 0.5, warn=False)
