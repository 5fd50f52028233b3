"""Tests of the paper-000 experiments (supermarket.experiments.paper000).

Equilibrium statistics are checked against exact facts (docs/model.md §3, §7): for d = 1 the
queues are independent M/M/1 queues, E[u_i] = λ^i; for every d, E[u_1] = λ; for n = 4 the
exact stationary law.  Tolerance: 4.5 standard errors from the blocking analysis the
experiment itself reports (simulate's, and its own on the snapshots).  The end-to-end run
uses tiny grids (monkeypatched); the real quick mode is a slow test.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from click.testing import CliRunner

import exact_small  # tests/exact_small.py: the exact stationary law of tiny systems
from supermarket import theory
from supermarket.experiments import paper000 as p000
from supermarket.experiments.paper000 import claims as p000_claims
from supermarket.experiments.paper000 import driver as p000_driver
from supermarket.experiments.paper000 import e1_e4_equilibrium as p000_e14
from supermarket.experiments.paper000 import e2_e3_mixing as p000_e23
from supermarket.experiments.paper000 import equilibrium_run as p000_eq
from supermarket.experiments.paper000 import output as p000_out

Z = 4.5


def test_equilibrium_d1_is_mm1():
    lam = 0.6
    eq = p000.equilibrium(40, 1, lam, steps=3_000_000, burn_in=100_000, levels=5, seed=4)
    exact = lam ** np.arange(1, 6)
    assert eq["u_reliable"][:5].all() and eq["reliable"]
    assert np.all(np.abs(eq["u_mean"][:5] - exact) <= Z * eq["u_stderr"][:5]), (
        eq["u_mean"][:5],
        exact,
        eq["u_stderr"][:5],
    )
    # fraction at length j: λ^j − λ^(j+1), with the snapshot blocking errors
    assert eq["frac_reliable"][:4].all()
    assert np.all(np.abs(eq["frac_mean"][:4] - (exact[:4] - exact[1:5])) <= Z * eq["frac_stderr"][:4])
    assert eq["good_set_fraction"] is None  # no good set for d = 1


def test_equilibrium_mean_u1_is_load_and_good_fraction_is_a_share():
    lam = 0.9
    k = theory.k_lambda_d(8, lam)
    eq = p000.equilibrium(200, 8, lam, steps=3_000_000, burn_in=200_000, levels=k + 2, seed=5, k=k)
    assert eq["u_reliable"][0]
    assert abs(eq["u_mean"][0] - lam) <= Z * eq["u_stderr"][0]
    assert 0.0 <= eq["good_set_fraction"] <= 1.0
    assert abs(eq["max_share"].sum() - 1.0) < 1e-9
    assert eq["snapshots"] > 100
    with pytest.raises(ValueError, match="k must be"):
        p000.equilibrium(200, 8, lam, steps=10_000, burn_in=0, levels=3, k=k + 1)


def test_good_set_mask_agrees_with_theory_good_set():
    n, d, lam = 400, 10, 0.99
    k = theory.k_lambda_d(d, lam)
    rng = np.random.default_rng(0)
    snaps = []
    # around the linearised profile (some inside, some outside N^ε), plus one with a long queue
    target = n - theory.linearised_q(d, lam, k) * n
    for _ in range(200):
        c = np.concatenate([np.rint(target * (1 + rng.normal(0, 0.002, k))), [rng.integers(0, 2)], [0]])
        c = np.minimum.accumulate(np.clip(c, 0, n)).astype(int)
        snaps.append(c)
    snaps = np.array(snaps)
    mask = p000.good_set_mask(snaps, n, d, lam, 0.1, k)
    ref = np.array([theory.good_set(counts=c, n=n, d=d, lam=lam, eps=0.1, k=k).member for c in snaps])
    assert np.array_equal(mask, ref)
    assert 0 < mask.sum() < len(mask)  # both outcomes are exercised


def _shrink(mp):
    mp.setattr(p000_e14, "_e1_configs", lambda quick: [(1000, 0.2, 0.5), (1024, 0.5, 0.5)])
    mp.setattr(
        p000_e23,
        "_e2_configs",
        lambda quick: ([("n", 100, 3, 0.9), ("n", 200, 3, 0.9), ("d", 200, 4, 0.9), ("d", 200, 8, 0.9)], 4),
    )
    mp.setattr(p000_e23, "_e3_configs", lambda quick: (100, 3, 0.9, [5, 10], [20, 40], 4))
    mp.setattr(p000_e23, "_e3_tv_config", lambda quick: (30, 2, 0.8, "customers:5", 20))
    mp.setattr(p000_e14, "_e4_configs", lambda quick: (0.8, [100, 1000], [1, 2], 30.0, 5.0))


@pytest.fixture
def tiny(monkeypatch):
    _shrink(monkeypatch)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One run on the tiny grids, shared by the tests that only read (deep copies of) its results."""
    with pytest.MonkeyPatch.context() as mp:
        _shrink(mp)
        out = tmp_path_factory.mktemp("tiny_run") / "out"
        return out, p000.run(out, quick=True, seed=1, workers=1)


def test_run_writes_tables_figures_and_summaries(tiny, tmp_path):
    res = p000.run(tmp_path / "out", quick=True, seed=1, workers=1)
    out = tmp_path / "out"
    for name in ("E1_equilibrium", "E2_mixing_scaling", "E3_bad_starts", "E3_tv_curve", "E4_power_of_choices"):
        for ext in ("csv", "json", "png") + (("md",) if name != "E3_tv_curve" else ()):
            f = out / f"{name}.{ext}"
            assert f.exists() and f.stat().st_size > 0, f
        rows = list(csv.DictReader((out / f"{name}.csv").read_text().splitlines()))
        js = json.loads((out / f"{name}.json").read_text())
        assert len(rows) == len(js["rows"]) > 0
    e1 = json.loads((out / "E1_equilibrium.json").read_text())["rows"]
    assert [r["k"] for r in e1] == [1, 1]
    assert e1[1]["integer_ratio"] is True and e1[0]["integer_ratio"] is False
    for r in e1:
        assert r["k"] == theory.k_lambda_d(r["d"], r["load"])
        assert r["shorter_than_1_pred"] == pytest.approx(r["n"] * (1 - r["load"]))
    e2 = json.loads((out / "E2_mixing_scaling.json").read_text())
    assert all(r["coupling_increases"] == 0 for r in e2["rows"])
    assert "slope_vs_upper" in e2["meta"]["fits"]
    e3 = json.loads((out / "E3_bad_starts.json").read_text())["rows"]
    assert {r["start"] for r in e3} == {"customers:5", "customers:10", "long:20", "long:40"}
    for r in e3:
        lower = r["value"] * 100 / 0.1 if r["kind"] == "customers" else r["value"] * 100
        assert r["lower_order"] == pytest.approx(lower)
    summary = (out / "summary.md").read_text()
    for head in ("# E1", "# E2", "# E3", "# E4", "What the runs show"):
        assert head in summary
    assert res["expected_s"] > 0 and json.loads((out / "run.json").read_text())["quick"] is True


def test_reproduce_cli_calls_run(tiny, tmp_path):
    from supermarket.cli import main

    r = CliRunner().invoke(main, ["reproduce", "paper000", "--quick", "--out", str(tmp_path / "o"), "--workers", "1"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "o" / "summary.md").exists()
    # issue 19: a closing line says what was written (files, size, where, the summary)
    files = [f for f in (tmp_path / "o").rglob("*") if f.is_file()]
    assert r.stdout.startswith(f"wrote {len(files)} files (")
    assert f"start with {tmp_path / 'o' / 'summary.md'}" in r.stdout


def test_reproduce_without_out_is_one_clear_line():
    """Issue 19: without --out it failed with "expected str, bytes or os.PathLike object, not
    NoneType" (click >= 8.3 treats an explicit default=None as given)."""
    from supermarket.cli import main

    for paper in ("paper000", "paper002"):
        r = CliRunner().invoke(main, ["reproduce", paper, "--quick"])
        assert r.exit_code == 2
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("supermarket: error: --out DIR is required"), r.stderr
        assert f"--out {paper}-quick" in r.stderr and "NoneType" not in r.stderr


def test_run_bad_input(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ValueError):
        p000.run(f, quick=True)
    with pytest.raises(TypeError):
        p000.run(tmp_path / "a", quick="yes")
    with pytest.raises(ValueError):
        p000.run(tmp_path / "b", quick=True, workers=0)


def test_full_mode_states_its_duration():
    assert p000.expected_steps(False) > 10 * p000.expected_steps(True)


@pytest.mark.slow
def test_quick_mode_under_three_minutes(tmp_path):
    res = p000.run(tmp_path, quick=True, seed=0, workers=2)
    e1 = json.loads((tmp_path / "E1_equilibrium.json").read_text())["rows"]
    # the claims the quick mode must show: max = k where nπ(k+1) < 1, and the fraction bound
    # where the hypothesis is k, the data do not contradict "the maximum is k most of the time"
    # (at n = 1000 a share near 1/2 may fall on either side; a reliable share well below 1/2 fails)
    hyp = [r for r in e1 if not r["integer_ratio"] and r["k_hypothesis"] == r["k"]]
    assert hyp and all(r["modal_max"] in (r["k"], r["k"] + 1) for r in hyp)
    assert all(r["share_max_eq_k"] + Z * r["share_max_eq_k_stderr"] >= 0.5 for r in hyp if r["share_max_eq_k_reliable"])
    assert all(r["frac_at_k_verdict"] in ("meets", "within error") for r in e1 if not r["integer_ratio"])
    assert "E4" in res["summary"]


def test_equilibrium_max_and_good_set_shares_match_the_exact_law():
    """Time share of each maximum queue length and of N^ε against the exact stationary law of
    the profile chain (tests/exact_small.py, n = 4; an independent sparse solve of docs/model.md §2)."""
    n, d, lam = 4, 2, 0.8
    law = exact_small.profile_law(n, d, lam, M=14)
    assert law.tail < 1e-4
    k = theory.k_lambda_d(d, lam)
    eq = p000.equilibrium(n, d, lam, steps=4_000_000, burn_in=10_000, levels=k + 2, seed=12, k=k)
    # Standard errors from blocking (simulate's for the good set, the snapshots' for the
    # maximum): each z is Student t with at least (32 − 1)/3 > 10 degrees of freedom (the
    # plateau leaves >= 32 blocks); the levels checked plus the good set are len(checked) + 1
    # comparisons: Bonferroni at a family-wise level of 1e-3 with 10 degrees of freedom.
    from scipy.stats import t as student_t

    checked = [m for m, p in law.max_dist.items() if p >= 1e-3]
    tol = student_t.ppf(1 - 1e-3 / (2 * (len(checked) + 1)), 10)
    assert eq["reliable"]
    for m in checked:
        p = law.max_dist[m]
        got = eq["max_share"][m] if m < eq["max_share"].size else 0.0
        assert eq["max_share_reliable"][m], m
        assert abs(got - p) <= tol * eq["max_share_stderr"][m], (m, got, p)
    mean_max = sum(m * p for m, p in law.max_dist.items())
    assert eq["mean_max_reliable"] and abs(eq["mean_max"] - mean_max) <= Z * eq["mean_max_stderr"]
    lo, hi = theory.good_set_bounds(n, d, lam, 0.1, k)
    p_good = law.good(lo, hi, k)
    assert 0.01 < p_good < 0.99
    assert eq["good_set_fraction_reliable"]
    assert abs(eq["good_set_fraction"] - p_good) <= tol * eq["good_set_fraction_stderr"], (
        eq["good_set_fraction"],
        p_good,
    )
    # the recount on the snapshots (good_set_mask, independent of the kernel's accounting)
    assert abs(eq["good_set_fraction_snapshots"] - p_good) <= tol * eq["good_set_fraction_snapshots_stderr"]


def test_bound_verdict_uses_the_error_bar_only_when_reliable():
    v = p000_out._bound_verdict
    assert v(0.9, 0.01, True, 0.9) == "meets" and v(0.95, float("nan"), False, 0.9) == "meets"
    assert v(0.9 - 0.99 * p000.Z_FINDING * 0.01, 0.01, True, 0.9) == "within error"
    assert v(0.9 - 1.01 * p000.Z_FINDING * 0.01, 0.01, True, 0.9) == "below"
    assert v(0.5, 0.01, False, 0.9) == "too short to know" and v(0.5, float("nan"), True, 0.9) == "too short to know"


def _findings(md: str) -> list[str]:
    """The lines after "What the runs show." of a Markdown summary."""
    return md.split("**What the runs show.**", 1)[1].strip().splitlines()


def test_summary_sentences_follow_the_data(tiny_run):
    """Every finding is computed from the tables: changing the data changes the sentences."""
    import copy

    res = tiny_run[1]
    e1 = res["E1"]["rows"]
    base = _findings(p000_e14._e1_markdown(e1))
    moved = copy.deepcopy(e1)
    for r in moved:
        r["modal_max"] = r["k"] + 2
        r["frac_at_k_verdict"] = "too short to know" if r["frac_at_k_verdict"] != "too short to know" else "below"
        r["reliable"] = not r["reliable"]
        r["good_set_fraction"] = 0.123
        r["share_max_eq_k"] = 0.0
        r["shorter_than_1"] *= 3
    changed = _findings(p000_e14._e1_markdown(moved))
    assert len(changed) >= len(base)
    assert all(a != b for a, b in zip(base[:5], changed[:5])), (base, changed)
    assert "further from k" in changed[0] and "0.123" in changed[4]
    ni = sum(not r["integer_ratio"] for r in e1)
    if all(r["frac_at_k_verdict"] != "too short to know" for r in e1):
        assert f"with an error bar too short to know in {ni}." in changed[1]
    assert base[5] != changed[5] and "too short to know" in (base[5] + changed[5])

    e2 = res["E2"]
    base = _findings(p000_e23._e2_markdown(e2["rows"], e2["fits"], 4))
    rows = copy.deepcopy(e2["rows"])
    fits = copy.deepcopy(e2["fits"])
    for r in rows:
        r["coupling_increases"] = 1
        r["mean_over_lower"] = 0.5
    fits["slope_vs_n_by_d"] = {d: s + 1 for d, s in fits["slope_vs_n_by_d"].items()}
    changed = _findings(p000_e23._e2_markdown(rows, fits, 4))
    assert base[0] != changed[0] and base[3] != changed[3] and base[-1] != changed[-1]
    assert f"increased {len(rows)} times" in changed[-1] and "below 1 in" in changed[3]

    e3 = res["E3"]
    kw = dict(n=100, d=3, lam=0.9, R=4)
    base = _findings("\n".join(p000_e23._e3_markdown(e3["rows"], e3["fits"], e3["linear"], **kw)))
    rows = copy.deepcopy(e3["rows"])
    for r in rows:
        r["mean_over_lower"] = 0.5
    lin = {k: {"slope": v["slope"] + 1, "intercept": v["intercept"]} for k, v in e3["linear"].items()}
    changed = _findings("\n".join(p000_e23._e3_markdown(rows, e3["fits"], lin, **kw)))
    assert all(a != b for a, b in zip(base[:2], changed[:2]))
    assert changed[0].startswith(f"- {len(rows)} of {len(rows)} mean coalescence times are below")

    e4 = res["E4"]
    base = p000_e14._e4_findings(e4["rows"], e4["fits"], [1, 2])
    rows = copy.deepcopy(e4["rows"])
    for r in rows:
        r["modal_max"] = 7
        r["mean_max"] += 1
    changed = p000_e14._e4_findings(rows, e4["fits"], [1, 2])
    assert [a != b for a, b in zip(base, changed)] == [False] * 3 + [True] * 3 + [False]
    assert "values 7." in changed[3]
    for r in rows:
        r["mean_max_reliable"] = not r["mean_max_reliable"]
        r["max_always"] = False
    flipped = p000_e14._e4_findings(rows, e4["fits"], [1, 2])
    assert flipped[-1] != changed[-1] and ("too short to know" in flipped[-1] + changed[-1])


def test_costliest_runs_first_keeps_task_order():
    seen = []

    def fn(x):
        seen.append(x)
        return 2 * x

    assert p000_eq._map_configs(fn, [1, 2, 3, 4], 1, cost=[1.0, 3.0, 2.0, 0.5]) == [2, 4, 6, 8]
    assert seen == [2, 3, 1, 4]  # one worker: strictly by decreasing cost


def test_duration_estimate_is_bounded_by_the_longest_run():
    secs = [p000_eq._task_seconds(d, s) for d, s in p000_driver._equilibrium_tasks(False)]
    assert p000.expected_seconds(False, 10**4) >= max(secs)
    assert p000.expected_seconds(False, 1) >= sum(secs)
    assert p000_eq._task_seconds(1, 1e9) > p000_eq._task_seconds(2, 1e9)  # d = 1 scans its levels


def test_modal_calls_count_close_and_unknown_rows():
    base = {
        "share_max_eq_k": 0.46,
        "share_max_eq_k1": 0.54,
        "share_max_eq_k_stderr": 0.06,
        "share_max_eq_k1_stderr": 0.06,
        "share_max_eq_k_reliable": True,
        "share_max_eq_k1_reliable": True,
    }
    far = dict(base, share_max_eq_k_stderr=0.001, share_max_eq_k1_stderr=0.001)
    unknown = dict(base, share_max_eq_k1_reliable=False)
    always = dict(unknown, share_max_eq_k=1.0, share_max_eq_k1=0.0)
    assert p000_e14._modal_calls([base, far, unknown, always]) == (1, 1)


def test_claims_and_e1_count_undecided_modal_calls_alike(tiny_run):
    """Issue 19: the Claims table said "(1 too close or too short to call)" while the E1 section
    said "too close to call in 1 and too short to know in 2": the Claims row skipped undecided
    configurations whose point estimate happened to be k.  One rule (_modal_call) feeds both."""
    import copy

    _, res = tiny_run
    base = {k: copy.deepcopy(res[k]) for k in ("E1", "E2", "E3", "E4")}
    (row,) = [r for r in base["E1"]["rows"] if not r["integer_ratio"]]
    rel = dict(
        share_max_eq_k_stderr=0.01,
        share_max_eq_k1_stderr=0.01,
        share_max_eq_k_reliable=True,
        share_max_eq_k1_reliable=True,
    )
    decided = dict(copy.deepcopy(row), modal_max=row["k"], share_max_eq_k=0.8, share_max_eq_k1=0.2, **rel)
    close_k = dict(decided, share_max_eq_k=0.505, share_max_eq_k1=0.495)  # modal k, 0.7 s.e. apart
    short_k = dict(decided, share_max_eq_k=0.6, share_max_eq_k1=0.4, share_max_eq_k_reliable=False)
    short_k1 = dict(short_k, modal_max=row["k"] + 1, share_max_eq_k=0.4, share_max_eq_k1=0.6)
    base["E1"]["rows"] = [r for r in base["E1"]["rows"] if r["integer_ratio"]] + [decided, close_k, short_k, short_k1]
    claim = _verdict(base, "maximum queue length")
    assert claim["verdict"] == "partly: 1 of 4 configurations (3 too close or too short to call)"
    words = "within 4.5 standard errors (too close to call) in 1 and too short to know in 2 of the 4"
    assert words in claim["evidence"]
    assert f"Which of k and k+1 is modal is {words}." in p000_e14._e1_markdown(base["E1"]["rows"])
    # issue 19 item 7: the evidence's "modal maximum = k in 3 of 4" beside the verdict's "1 of 4"
    # says which count the verdict uses
    assert (
        "modal maximum = k in 3 of 4 (1 of them called with confidence: the verdict counts those)" in claim["evidence"]
    )


def test_count_verdict():
    v = p000_claims.count_verdict
    assert v(3, 3) == "reproduced" and v(0, 3) == "not reproduced at these sizes"
    assert v(1, 3) == "partly: 1 of 3 configurations" and v(0, 0) == "not tested"
    assert v(0, 3, unknown=1, unit="rows") == "partly: 0 of 3 rows (1 too short to know)"
    assert v(0, 2, unknown=2) == "too short to know"
    assert v(2, 3, unknown=1) == "partly: 2 of 3 configurations (1 too short to know)"


def _verdict(results, prefix):
    """The verdict cell of the claim whose text starts with ``prefix``."""
    (row,) = [c for c in p000_claims.claims_rows(results) if c["claim"].startswith(prefix)]
    return row


def test_claims_table_follows_the_data(tiny_run):
    """The Claims table sits after the header of summary.md, and its verdicts are computed
    from the rows: changing the data changes the verdict cells."""
    import copy

    out, res = tiny_run
    summary = (out / "summary.md").read_text()
    assert summary.index("## Claims") < summary.index("# E1")
    table = [x for x in summary.split("## Claims", 1)[1].split("# E1", 1)[0].splitlines() if x.startswith("| ")][1:]
    assert len(table) == len(res["claims"]) == 10
    for line, c in zip(table, res["claims"]):
        assert f"| {c['verdict']} |" in line
    base = {k: copy.deepcopy(res[k]) for k in ("E1", "E2", "E3", "E4")}
    ni = [r for r in base["E1"]["rows"] if not r["integer_ratio"]]
    assert len(ni) == 1
    base["E1"]["rows"] += copy.deepcopy(ni)  # two non-integer configurations: "partly" becomes possible
    ni = [r for r in base["E1"]["rows"] if not r["integer_ratio"]]

    # the maximum is k: from the modal maximum of each configuration
    for r in ni:
        r["modal_max"], r["share_max_eq_k"], r["share_max_eq_k1"] = r["k"], 1.0, 0.0
    assert _verdict(base, "maximum queue length")["verdict"] == "reproduced"
    ni[0]["modal_max"], ni[0]["share_max_eq_k"], ni[0]["share_max_eq_k1"] = ni[0]["k"] + 1, 0.0, 1.0
    row = _verdict(base, "maximum queue length")
    assert row["verdict"] == "partly: 1 of 2 configurations"
    assert "Theorem 1.2's conditions hold in 0 of 2 configurations" in row["evidence"]
    ni[1].update(
        modal_max=ni[1]["k"] + 1,
        share_max_eq_k=0.4,
        share_max_eq_k1=0.6,
        share_max_eq_k_stderr=0.01,
        share_max_eq_k1_stderr=0.01,
        share_max_eq_k_reliable=False,
        share_max_eq_k1_reliable=True,
    )
    assert _verdict(base, "maximum queue length")["verdict"] == (
        "partly: 0 of 2 configurations (1 too close or too short to call)"
    )
    ni[1]["share_max_eq_k_reliable"] = True  # 0.2 apart with 0.014 error: a call
    assert _verdict(base, "maximum queue length")["verdict"] == "not reproduced at these sizes"

    # the fraction at length k: from the per-row verdicts against the bound
    for a, b, want in (
        ("meets", "within error", "reproduced"),
        ("meets", "below", "partly: 1 of 2 configurations"),
        ("below", "below", "not reproduced at these sizes"),
        ("too short to know", "too short to know", "too short to know"),
    ):
        ni[0]["frac_at_k_verdict"], ni[1]["frac_at_k_verdict"] = a, b
        assert _verdict(base, "almost all queues")["verdict"] == want, (a, b)

    # the good set: share of time in N^0.1 against GOOD_SHARE, with the error bar when reliable
    for r in ni:
        r.update(good_set_fraction=0.95, good_set_fraction_stderr=0.01, good_set_fraction_reliable=True)
    assert _verdict(base, "the equilibrium chain stays")["verdict"] == "reproduced"
    ni[0]["good_set_fraction"] = 0.0
    ni[1]["good_set_fraction"] = p000_claims.GOOD_SHARE - 10 * 0.01
    assert _verdict(base, "the equilibrium chain stays")["verdict"] == "not reproduced at these sizes"
    ni[1]["good_set_fraction_reliable"] = False
    assert (
        _verdict(base, "the equilibrium chain stays")["verdict"]
        == "partly: 0 of 2 configurations (1 too short to know)"
    )

    # mixing against d at fixed n and k: from the fitted slope
    base["E2"]["fits"]["slope_vs_d_at_fixed_n_k"] = 1.1
    assert _verdict(base, "the two orders together")["verdict"] == "reproduced"
    base["E2"]["fits"]["slope_vs_d_at_fixed_n_k"] = 0.0
    assert _verdict(base, "the two orders together")["verdict"] == "not reproduced at these sizes"

    # bad starts: each mean coalescence time (and its interval) against its lower order
    rows = base["E3"]["rows"]
    for r in rows:
        r.update(mean_steps=2 * r["lower_order"], mean_ci=[1.5 * r["lower_order"], 2.5 * r["lower_order"]], censored=0)
    assert _verdict(base, "from bad starts")["verdict"] == "reproduced"
    rows[0].update(
        mean_steps=0.5 * rows[0]["lower_order"], mean_ci=[0.4 * rows[0]["lower_order"], 0.6 * rows[0]["lower_order"]]
    )
    assert _verdict(base, "from bad starts")["verdict"] == f"partly: {len(rows) - 1} of {len(rows)} starts"

    # the power of d choices: slopes against the classical orders and the drop at the largest n
    e4 = base["E4"]
    for d in e4["fits"]:
        e4["fits"][d]["slope"] = 1.0
    big = max(r["n"] for r in e4["rows"])
    for r in e4["rows"]:
        if r["n"] == big:
            r["mean_max"] = 20.0 if r["d"] == 1 else 4.0
    assert _verdict(base, "power of d choices")["verdict"] == "reproduced"
    for r in e4["rows"]:
        if r["n"] == big:
            r["mean_max"] = 5.0
    nf = len(e4["fits"])
    assert _verdict(base, "power of d choices")["verdict"] == f"partly: {nf} of {nf + 1} checks"
