"""Golden hashes of the results' JSON and tables: one small instance of each result class,
built through its public function, and the sha256 of ``json.dumps(r.to_dict(), sort_keys=True)``
and of ``r.to_frame().to_csv()``, with every float rounded to 9 significant digits (and below 1e-12
in magnitude to 0) first: the linear algebra behind some results (LAPACK, NumPy's SIMD
reductions) rounds its last bits differently on different CPUs, and a hash must not fail for
that.  Refactoring the result classes must leave them as they are;
a change of output is a separate commit that says why it is better.  Timings (``seconds``,
``events_per_second``, ``wall_seconds``) vary between runs and are blanked before hashing."""

import hashlib
import json

import numpy as np
import pytest

from supermarket.jsonable import to_jsonable


def _builders():
    import supermarket.fluctuations as fl
    import supermarket.meanfield as mf
    import supermarket.mixing as mx
    import supermarket.perfect as pf
    import supermarket.response as rs
    import supermarket.theory as th
    from supermarket import stats, sweep
    from supermarket.design import latency
    from supermarket.meanfield import MeanFieldReport
    from supermarket.model import Params
    from supermarket.stationary import profile as stationary

    B = {}
    B["theory.KReport"] = lambda: th.k_report(10, 0.9)
    B["theory.GoodSetReport"] = lambda: th.good_set([0, 1, 2, 1, 0, 3, 1, 1, 0, 2], d=2, lam=0.7)
    B["theory.TheoremReport"] = lambda: th.theorem_1_2(10**6, 100, 0.999)
    B["theory.MixingBounds"] = lambda: th.mixing_bounds(1000, 2, 0.9)
    B["theory.SlowMode"] = lambda: th.slow_mode(20, 0.99)
    B["theory.Regime002"] = lambda: th.regime_002(10**4, 20, 0.99)
    B["theory.TheoryReport"] = lambda: th.theory_report(10_000, 20, 0.99)
    B["theory.DesignReport"] = lambda: th.design(0.999, 2)
    B["theory.DesignReport_n"] = lambda: th.design(0.99, 3, n=1000)
    B["meanfield.MeanFieldSolution"] = lambda: mf.solve_meanfield(2, 0.9, T=1.0, t_eval=[0.0, 0.5, 1.0])
    B["meanfield.DInfSolution"] = lambda: mf.solve_dinf(0.9, T=9.0, start="customers:3", t_eval=[0.0, 9.0])
    B["meanfield.RefinedMeanField"] = lambda: mf.refined_mean_field(2, 0.9)
    B["meanfield.LNAResult"] = lambda: mf.lna(2, 0.9)
    B["meanfield.MeanFieldReport"] = lambda: MeanFieldReport(
        {
            "params": {"d": 1, "load": 0.5, "n": None, "replace": True, "time": None, "start": "empty"},
            "fixed_point": [0.5, 0.25],
            "mean_queue_length": 1.0,
            "levels": 2,
        }
    )
    B["mixing.CoupledRun"] = lambda: mx.coupled_run(
        20, 2, 0.5, ["fixed-point", "empty"], steps=2000, seed=1, record_every=100
    )
    B["mixing.MixingResult"] = lambda: mx.coalescence(20, 2, 0.5, replications=10, seed=1, workers=1)
    B["mixing.TVCurve"] = lambda: mx.tv_curve(20, 2, 0.5, replications=10, steps=200, points=4, burn_in=100, workers=1)
    B["fluctuations.RegimeParams"] = lambda: fl.regime_c(100, 1.0, warn=False)
    B["fluctuations.Moments"] = lambda: fl.limit_closed_form(1.0)
    B["fluctuations.FluctuationSim"] = lambda: fl.simulate_fluctuations(
        fl.regime_a(400, 1.0, d=2, warn=False), time=20.0, burn_in=2.0, grid_dt=0.5, max_lag=2.0, workers=1
    )
    B["fluctuations.LimitSDE"] = lambda: fl.limit_sde("c", zeta=1.0, paths=8, time=2.0, burn_in=0.5, dt=1e-2)
    B["fluctuations.Comparison"] = lambda: fl.compare(
        fl.regime_a(400, 1.0, d=2, warn=False),
        time=10.0,
        burn_in=1.0,
        grid_dt=0.5,
        sde_paths=4,
        sde_time=1.0,
        sde_burn_in=0.2,
        dt=0.01,
        workers=1,
        prelimit=False,
    )
    B["fluctuations.ScalingResult"] = lambda: fl.ScalingResult(
        (fl.ScalingRow(100, 3, 0.9, 0.06, 0.01, 0.6, 0.1, 0.62),)
    )
    B["perfect.PerfectResult"] = lambda: pf.sample(2, 2, 0.5, samples=3, seed=1)
    B["response.ResponseTimes"] = lambda: rs.from_tails(0.5 ** np.arange(1, 200))
    B["response.TimeLaw"] = lambda: rs.from_tails(0.5 ** np.arange(1, 200)).sojourn
    B["response.FifoSample"] = lambda: rs.simulate_fifo(4, 2, 0.5, customers=2000, seed=1)
    B["stationary.ExactResult"] = lambda: stationary.solve(3, 2, 0.6)
    B["stats.ErrorEstimate"] = lambda: stats.replication_error([1.0, 2.0, 3.0, 4.5])
    B["stats.ErrorEstimate_blocking"] = lambda: stats.blocking(np.random.default_rng(1).normal(size=4096))
    B["stats.MSERResult"] = lambda: stats.mser(np.r_[np.full(50, 5.0), np.random.default_rng(2).normal(size=500)])
    B["latency.LatencyDesign"] = lambda: latency.least_d_for_latency(0.9, 0.99, 8.0)
    B["latency.LatencyDesign_load"] = lambda: latency.max_load_for_latency(2, 0.99, 8.0)
    B["sweep.Sweep"] = lambda: sweep.parse_sweep('[[run]]\nmeasurement = "theory"\nn = 100\nd = [2, 3]\nload = 0.9\n')
    B["sweep.SweepOutcome"] = lambda: sweep.SweepOutcome(
        "out", 3, 0, 3, 2, 1, [("theory-ab-r0", "ValueError: x")], 0.5, "in-process", "out/results.parquet"
    )
    B["model.Params"] = lambda: Params(100, 2, 0.9)
    return B


VOLATILE = {"seconds", "events_per_second", "wall_seconds"}


def _round(x: float) -> float:
    if x != x or x in (float("inf"), float("-inf")):
        return x
    return 0.0 if abs(x) < 1e-12 else float(f"{x:.9g}")


def _blank(x):
    if isinstance(x, dict):
        return {k: (None if k in VOLATILE else _blank(v)) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_blank(v) for v in x]
    if isinstance(x, float):  # numpy.float64 too
        return _round(x)
    return x


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _hashes(r):
    d = _sha(json.dumps(_blank(r.to_dict()), sort_keys=True))
    f = None
    if hasattr(r, "to_frame"):
        frame = r.to_frame()
        for c in frame.columns:
            if frame[c].dtype.kind == "f":
                frame[c] = frame[c].map(_round)
        f = _sha(frame.to_csv(float_format="%.9g"))
    return d, f


GOLDEN = {
    "fluctuations.Comparison": (
        # numpy 2.4.6 / scipy 1.17.1 / numba 0.68.1: the start commit e8ea3d1 gives these too (not a code change)
        "33e41b5f9e8ef13836cea26cd942d619708f8fedf8fc83312cda2a80d851d551",
        "a8fffbe803ae505b01b60e703c4b7e8f02e8b57763e240a7b180bc112e1a4c7d",
    ),
    "fluctuations.FluctuationSim": (
        "480d9bedf6e0da29bc8f1235fefb06c4ef2f17633976ef7740d9edb980ed56bb",
        "ee09ea4f0f5ce6c63394255b41df1634c719ca7e926871016d1d9e7e6d0f79b5",
    ),
    "fluctuations.LimitSDE": (
        "39c3905533c39fd74b9ecf28821a74542818f9c6aea886e9114dfa6a0b094197",
        "b863f0041d7328472eebf89bfd717eb7a9e7787685aca45bb4ad8749048186f9",
    ),
    "fluctuations.Moments": (
        "9ffc4394958037469e18cefd82ce4c2a290f749389cee7397f06b015cc4b46f8",
        "e2af6dd3ada8967433f2cdddbd05f8f51e1362fbcf78c45f665fda24f9d50737",
    ),
    "fluctuations.RegimeParams": (
        "2fbbf19d5fe1973e5a2a58c31a8a6de408aea74daed7f202d28d50efa9c791ef",
        "58a44f182657459f52d3ac57c224eb414a1b249dc6b7a7a86300abac962e9880",
    ),
    "fluctuations.ScalingResult": (
        "badef2f932c1e764991ebd5895743d29519fa34a14f80cda853eed0e903b8f19",
        "5940d3e1c3ee7a56c332546274ec3fe52229f67050f3edb74e53d96ff52998c7",
    ),
    "latency.LatencyDesign": (
        "de3d38a86797941a6ec1603f37e20b7b2b138ac564e0d946d56eac31bac512fc",  # the one design shape (issue #28)
        "25bfbc64bd5884db09c9eb2d260a718f161ed3969c234b30967c527f5de34774",
    ),
    "latency.LatencyDesign_load": (
        "14d51477d3a41772d3a53af00489721a93395d6ebab8b4d9e85ba6831e0e18ef",  # the one design shape (issue #28)
        "bbbf1eacf68be90d80e04d4f82d7c11a2ad03f2231e297d6ce3a2a1f2a86ed6c",
    ),
    "meanfield.DInfSolution": (
        "990f0998e9cbee62231d7b5e07647882af31a333f43f58ec13b4e9af31d986e3",
        "c2b44606762f57a5b136d54dd3f0d4021a90911b73f2dcf56a2600404489289c",
    ),
    "meanfield.LNAResult": (
        "0ac0e06e047ca51cc5766d248a94e0f4547d20b1b650bb5570621e48ed4aaf1f",
        "d78765d3fa93db3b0962d1469d7637049682a63c14117ce4bfef953d7ff13eda",
    ),
    "meanfield.MeanFieldReport": (
        "8b124e0b32233628c98219357c8331317a44520d0175a30561d928f8496fb72a",
        "7913cd546507c41786ae2d1c495c8d581f02454e91dca3dff574c946bca19fd6",
    ),
    "meanfield.MeanFieldSolution": (
        "504f30ea93951c2b375aff3030fd6515089b317e572835f711614055d532bfe5",
        "ed56d3db656da1526341b46c24de63ec3d6cb2049c94c8a7444cd03763596704",
    ),
    "meanfield.RefinedMeanField": (
        "67ca203d8a4c34b44665e894f7980f14d388632bb12d444fdeb7a5c86240e683",
        "d33ffb9b414713a2e07f1db6324f14166de89ac0cd7759b8a9db175ce86d8b52",
    ),
    "mixing.CoupledRun": (
        "f45fdca20b3bf2dfa4daee8af13ba9ac23691018a19ac1802c2f62b2d156a303",
        "3bf00de10750a2c4d47ccfbf0736db1d4e73fdad5436e3dd9beea85548b6e328",
    ),
    "mixing.MixingResult": (
        "5c484c15be88c810bb60eea9780e52d6591ded37b54830100a38b931ea2e8619",
        "07c77f3a7ec0a340965b7b868b9011e2d006784cdcff03cd109d2323389ae23f",
    ),
    "mixing.TVCurve": (
        "672f702c15bb5294ba696a8960bd5a03d059bb0b1a3a8e57050d535dfe422501",
        "913deb803dcc862c4676c8e75caaf8f4a159a19c93ea91618509265d622126ef",
    ),
    "model.Params": (
        "d3fef9388d5b86d2e784623f14981e97a3ff07ffc43d9d84dd5bbd0c4e4b5659",
        None,
    ),
    "perfect.PerfectResult": (
        "d905a2df6fc4ab03887c47fb24dc4a0f5a2dcceb705002e88eb193ff1221ca74",
        "9a57076366a4caa64b703918be2eda547bbde57a1ac3ce60414436f82932bc03",
    ),
    "response.FifoSample": (
        "51bc1bd39533114e9a6a2b0b677362297691c6621dc19d1addca9276b6ec5133",
        "16f81c68fb3853f1a1a227cdfc047d45da816343bbe43bbdfdf3581ba9411329",
    ),
    "response.ResponseTimes": (
        "73643111d035ed55dc4bcb9d781bd2a48b292914efe319837284f744b82c028b",
        "a6304b4fcbaf3f58a7f9d6ffc938e824d2def6f508a71b414fe11de7b4278315",
    ),
    "response.TimeLaw": (
        "3546e1fccf21bc3c4caa19dba2d077fdf99fb3d87fd404d2be26eae156416764",
        "8771d4ef65afc9ce0e790a71c504f60c6da8029e8dac5c2d724f5d1fbc287f44",
    ),
    "stationary.ExactResult": (
        "b50bf6fd9143cf4c043da645cc538aae23188b99097ca8bdaa2c95238cb50d6d",
        "a24617ddde456886dbacad232f8a912760e220ab8de73072a1c1b5926a548af9",
    ),
    "stats.ErrorEstimate": (
        "13879ecba2fe8a3ef755d4c1adc33f24445fd4b3ead12281268e286fda9135ac",
        "b7ea536939c7bba0170c582e6e77eb91825ad4f9b270b4b091de649fadadd0d3",
    ),
    "stats.ErrorEstimate_blocking": (
        "d1b494dee52ff7d3c52f69b56bfbffb938622c91db6bc2913a3688d02671d692",
        "71735934ac951e273410b2c4ddfa7f5da339fe16eb29a90ec8a67f762263728d",
    ),
    "stats.MSERResult": (
        "84b4bf14128e0a39571b128b7ab7d70866ad6eca2abf13641b3712d9a533379e",
        "03f4b3498cf222671a91d5dbe4aa52627f6fff176ac0e7d34173ea40085865fc",
    ),
    "sweep.Sweep": (
        "109a065e60977e519ac8b7ec2ceffec21f55d328190b4b9dfca575b10ce705aa",
        "9c0750e09b505842b38cc737aa996ee188459fc640d93496667cf8b5910a9ca2",
    ),
    "sweep.SweepOutcome": (
        "c53e0941c1ed128ccad3031840e7a614bafb2289fb82b3f95d30d2864ba544e5",
        "ad92ccf02e8c087eab6bfbd176b94edafb707aaae735fadf863280f66ead6db8",
    ),
    "theory.DesignReport": (
        "d69e61828377d96ef1d510d17acf41691c785818a9fba19a7f6a6b10bac14d82",
        "bcf965beb4781db744c3a3e226cdb60b978135174c1ba1dfb8c28eb84f1d75fe",
    ),
    "theory.DesignReport_n": (
        "a6b2c256318486473b9eb6651ca87953929b6575e2b7fbadf8abd43afec70231",
        "567737662e87a1ae3ed32ef05e88b4dcfb76c905ab8dcc45f8f54de5326e36bb",
    ),
    "theory.GoodSetReport": (
        "89795c1051913ece2342c24f03040559eb1de3bee56b046a5292346757b54c2c",
        "9b54489212f06ab0096803d0b3c0ef10224e0923d2440c7383b4e5e99b17bedf",
    ),
    "theory.KReport": (
        "5b24d7f64a78daa6f879da99367804b54477212a8246f5d3ead8681570f0011c",
        "df7312d1d215d63b5f8565cfdccdffb61531aa78825fd1dc274fdad723475424",
    ),
    "theory.MixingBounds": (
        "b891c73d9da4821c3e3f6ea782118a1e76bdab4d4901eab28b013b0d34261f48",
        "eb61a75d0987685c410d5985956bcff42631c09f5f6a403c0e8300ae6a6f7fb3",
    ),
    "theory.Regime002": (
        "af46c1685214333ca69d66060c825a90cd15a0001544d2db21e6b079e3c29f02",
        "bd0590c3af5d3f90586ee753a94c6752e7dc63eb739879270a2eeca8bb3da821",
    ),
    "theory.SlowMode": (
        "fe448561bcace83974a1712aea8e314413b9b1c676021b669e8ee8799383e7a8",
        "e8a2906c1e504ed3f205b40fa8968d573ef5162b21349abea15dcae98833f766",
    ),
    "theory.TheoremReport": (
        "3d8fefc8ffb5b9ffe24944ad73bd2ab3e62f5dde4a768b766b7058dfd13cc288",
        "a9da6c2187d3062f5411e022d460f06c3148af27c1a36cea1344ba5b5ae2665b",
    ),
    "theory.TheoryReport": (
        "f28f10a7753d16db07e41d39120712e58b5961ea404fd3ad9b8dec9e07666098",
        "1489f7771b776c7e77ea86f02af5744d9cbf8ead1e44f247acd92e0ce2201bcd",
    ),
}


#: Second hashes seen on other CPUs of the same toolchain (numpy 2.4.6, scipy 1.17.1, numba
#: 0.68.1), with the same code: the comparison's SDE and covariance steps round differently
#: there beyond the 9 digits kept.  The start commit 271584b gives each of these on its machine.
OTHER_CPUS = {
    "fluctuations.Comparison": (
        "018b2e2e11350261e899144a645d5f3ffe0f6611325f780d344c0949837c3469",
        "b723613b14c575e41a925f6eba4a02a8f4b3c672461304c9199dc4fbbc9b3777",
    ),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_result_json_golden(name):
    r = _builders()[name]()
    assert _hashes(r) in (GOLDEN[name], OTHER_CPUS.get(name))


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_to_json_is_strict_json_of_to_dict(name):
    """``to_json()`` is the strict JSON (no NaN, no Infinity) of ``to_dict()``."""
    r = _builders()[name]()
    if not hasattr(r, "to_json"):
        pytest.skip("not a Result")
    text = r.to_json(sort_keys=True)
    assert json.loads(text) == json.loads(json.dumps(to_jsonable(r.to_dict()), sort_keys=True))


def test_result_declarations():
    """Each declaration of the base changes only what it names: omit, rename, extra (by
    name and as key: attribute), order, columns, plain."""
    from dataclasses import dataclass

    from supermarket.result import Result

    @dataclass
    class R(Result):
        a: float
        b: tuple
        hidden: int = 0
        _omit = ("hidden",)
        _rename = {"a": "alpha"}  # noqa: RUF012
        _extra = {"twice": "twice", "n_b": "count"}  # noqa: RUF012
        _order = ("n_b", "b")

        @property
        def twice(self) -> float:
            return 2 * self.a

        def count(self) -> int:
            return len(self.b)

    r = R(float("nan"), (1, 2))
    assert list(r.to_dict()) == ["n_b", "b", "alpha", "twice"]
    assert r.to_dict() == {"n_b": 2, "b": [1, 2], "alpha": None, "twice": None}
    assert json.loads(r.to_json()) == r.to_dict()
    assert r.to_frame()["quantity"].tolist() == ["n_b", "alpha", "twice"]

    @dataclass
    class P(Result):
        x: float
        y: np.ndarray
        _plain = True
        _columns = {"col": "y"}  # noqa: RUF012

    p = P(float("inf"), np.array([1.0, 2.0]))
    assert p.to_dict()["x"] == float("inf") and isinstance(p.to_dict()["y"], np.ndarray)
    assert p.to_frame()["col"].tolist() == [1.0, 2.0]
    assert json.loads(p.to_json()) == {"x": "inf", "y": [1.0, 2.0]}
