"""Golden hashes of the results' JSON and tables: one small instance of each result class,
built through its public function, and the sha256 of ``json.dumps(r.to_dict(), sort_keys=True)``
and of ``r.to_frame().to_csv()``.  Refactoring the result classes must leave them as they are;
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
    from supermarket import latency, stationary, stats, sweep
    from supermarket.meanfield import MeanFieldReport
    from supermarket.model import Params

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


def _blank(x):
    if isinstance(x, dict):
        return {k: (None if k in VOLATILE else _blank(v)) for k, v in x.items()}
    if isinstance(x, list):
        return [_blank(v) for v in x]
    return x


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _hashes(r):
    d = _sha(json.dumps(_blank(r.to_dict()), sort_keys=True))
    f = _sha(r.to_frame().to_csv()) if hasattr(r, "to_frame") else None
    return d, f


GOLDEN = {
    "theory.KReport": (
        "5b24d7f64a78daa6f879da99367804b54477212a8246f5d3ead8681570f0011c",
        "df7312d1d215d63b5f8565cfdccdffb61531aa78825fd1dc274fdad723475424",
    ),
    "theory.GoodSetReport": (
        "89795c1051913ece2342c24f03040559eb1de3bee56b046a5292346757b54c2c",
        "9b54489212f06ab0096803d0b3c0ef10224e0923d2440c7383b4e5e99b17bedf",
    ),
    "theory.TheoremReport": (
        "de16754d5c8ae7792a9b302c859b09c51b7cceaa5ef95feb6fcb2ccfd5071e25",
        "c60f5ced3d776a56518ffbde4bec56b7703ed42d4a26ed70d144835205e6c8bc",
    ),
    "theory.MixingBounds": (
        "30572540e60f72e7bb35bdb78838daf5e2940afc81f1a0a403db5bf4eecff3ad",
        "32dfe8483fe4045bda49c6eddd9a9c1b51a521df866a90d5184cee9c23dc5c6c",
    ),
    "theory.SlowMode": (
        "b17e2c5668014feba8ece20fb8c1b8e6fc3cd3830ddfa9a46e98c38aeaeabd86",
        "e1f9eec358573e42900a64dc759cd9601d944cbb1d271942c5ddbb5ba47b7d33",
    ),
    "theory.Regime002": (
        "5df4bc5db8a731fdcbca6e47dc399cfb45f47cfe2436d59b539a466e986ddd43",
        "bd0590c3af5d3f90586ee753a94c6752e7dc63eb739879270a2eeca8bb3da821",
    ),
    "theory.TheoryReport": (
        "3b0df6767d64642ca75b2860ade9b3e3c7835abacd9644b50d4175cbed03ea21",
        "84b392fb0cb4b4f9bbbc8e59a6906b161dd0fed5577c2fc645dfa44d767d07ef",
    ),
    "theory.DesignReport": (
        "963774fa586a46fd6e0afc254501edcde777ede6f3bb96f759ec51bcf49c1116",
        "6bc5ba6c0026af510abc503ee36daec01f6f61a71a107dd46429708fff2b9bd6",
    ),
    "theory.DesignReport_n": (
        "841a3d66c00d63c10f05399e94f563bbebdfe1e2d85a16a5f9494f8b2e34d4d2",
        "0a09d22b46b039949a839262aff405304ea90955e5d8097ec685d07c7913e555",
    ),
    "meanfield.MeanFieldSolution": (
        "f9c38107fc2136256f4b13ca97c945f6bfc22dd990c1a2e435ddc575375618d6",
        "450e698446c6a562f70607273f2852358a43202eab4dc01f1cf0579e6561b530",
    ),
    "meanfield.DInfSolution": (
        "3d4468f9fe7535e3d9daedc80cac4bd19a13b5e7d5ab93a04841ecadeae88b60",
        "cd8d77d8a1e5b8511c5267c521a7bdf57873e4fd3db37f60e39de745aefd41b4",
    ),
    "meanfield.RefinedMeanField": (
        "b7a44a6bb585c1c2283d90745e86a711e856054b92501c815748b0ed0855cf1e",
        "9cd9b30aa4b6bbe3ee81f5c2de4075c9f38246c5e1537b1ef8bc4b3978111975",
    ),
    "meanfield.LNAResult": (
        "caa967c329fd9f043c07dbde845bf67928d39324593f91881d34544780f50a6c",
        "7dae1e9387c15640bf71c36930bd4c9be6840c8dcdf320b61d4e24a87e593419",
    ),
    "meanfield.MeanFieldReport": (
        "8b124e0b32233628c98219357c8331317a44520d0175a30561d928f8496fb72a",
        "7913cd546507c41786ae2d1c495c8d581f02454e91dca3dff574c946bca19fd6",
    ),
    "mixing.CoupledRun": (
        "f02f861252f642a3ea4cbc0f8347c53dc6b16f5077c5f90600f0af720088b3d5",
        "8e16cfaa9873ef4f36d686a6ee7cbd023b49cca86878d06f4d60c29bb4ea6531",
    ),
    "mixing.MixingResult": (
        "4300da9360b3ab4b2c14f64d5792271153a477e4a062c77ca85e4b890075d616",
        "782d6bde1d0fd132ce0f4e33b46a249f43c694bdc667654d2487e1dd07ee4a1f",
    ),
    "mixing.TVCurve": (
        "607dfc45d5450ed290058e4673016b054fec3d4d380230a29d3f6112b13a728b",
        "6cb3c490b2a91cc119bd68e1e548bef13d0f42acab9dbf3893d941d3f39f95b0",
    ),
    "fluctuations.RegimeParams": (
        "39586d9be654ffbcd0bbe77804513c37eda3f4adfd17260edbe69bb392711b08",
        "3867965c018008a5f95ad74e657c79cbfb9d50edb138fde9a913285664f4a72b",
    ),
    "fluctuations.Moments": (
        "c458be30b18fe92e9f9a264a20a4d5ee05ba7660211968325739162ca21cd179",
        "5df5631b100eb77fdf76f4909256f53c8d56353cb95ba034e0b84fe61d8c600e",
    ),
    "fluctuations.FluctuationSim": (
        "d3943928ec9116aa4410fc1b7a4e9d8985a15f985c7258349f922c92111dc185",
        "fe83e5c14945a07b0cd20290766165dac9c0ac4ff8dc93e85c463d656d950498",
    ),
    "fluctuations.LimitSDE": (
        "1b82200ab5b8fe3bcbd74efddafe424fc2349d82b93bae8e12ed9774dbf6ea21",
        "773676e076808dc248a37b2f5d9a036b36302833033c354973e9d8218aca7e4d",
    ),
    "fluctuations.Comparison": (
        "e4f0238140d42b9c12ce5a051bfbc98795851286a7c976e3fd23fd1b6ce718cf",
        "9d7403f6a019f839a698ee4a337700d19db44153faecf4aec445ef503e832e77",
    ),
    "fluctuations.ScalingResult": (
        "badef2f932c1e764991ebd5895743d29519fa34a14f80cda853eed0e903b8f19",
        "5940d3e1c3ee7a56c332546274ec3fe52229f67050f3edb74e53d96ff52998c7",
    ),
    "perfect.PerfectResult": (
        "1773b125ab5550a6ab1d14873dad72b2c4722b72906b73061fe6d5780e22b7dc",
        "effe3a8c863e3cd5b980e9580b1f1447318e077eb4e63da15b618cba06add291",
    ),
    "response.ResponseTimes": (
        "8d4fef64f36feb25cf096fdcbbe856a55e62e660cc06f8d20438e92a9cfb16b3",
        "8e89725ca398a168b3e37ab26dc342abd47c48569ce2f404470ac8d8d2e4f366",
    ),
    "response.TimeLaw": (  # the table: new with the result base (it had no to_frame)
        "fcb4ec4e8eca9fb91806a2e38f0d64f00f18acee0d74fa94280823f5c7039707",
        "bb9ce7bbe536f1912337d6504f2a922ecec076d462ebcd803fe51814d46f6d04",
    ),
    "response.FifoSample": (
        "2602e9a47ede803d3467e92d96007b79b78b156d460382c7d1a68c3ae21a9702",
        "4e9cb10153e07483b669680cccb10fad6a9acf8275cd0491010aa2e9fb1436fb",
    ),
    "stationary.ExactResult": (  # the JSON gains "policy" (the rest checked equal)
        "509ca6e9c767e8c6fee655cd618909bde3467beb0f3a35e7d1d560fcc0356be2",
        "2c76a29a4de75906fc713259a87ebfe6dc28972287cf25bcc173514416314337",
    ),
    # the tables: new with the result base; the field "skewness": new with the skew-aware intervals
    "stats.ErrorEstimate": (
        "b57281b8e734dde1718196844f3ae70b48e51f022bc4a3653bf31af19aba7074",
        "b7ea536939c7bba0170c582e6e77eb91825ad4f9b270b4b091de649fadadd0d3",
    ),
    "stats.ErrorEstimate_blocking": (
        "b51695b8894bcb26d6735f97272a909726f8b7939ff098d85b352f834edd4a2c",
        "71735934ac951e273410b2c4ddfa7f5da339fe16eb29a90ec8a67f762263728d",
    ),
    "stats.MSERResult": (  # the table: new with the result base
        "84b4bf14128e0a39571b128b7ab7d70866ad6eca2abf13641b3712d9a533379e",
        "03f4b3498cf222671a91d5dbe4aa52627f6fff176ac0e7d34173ea40085865fc",
    ),
    "latency.LatencyDesign": (
        "075a3b1f542638e94655aec01e6698e2ad14b7178928cbc911f3cfb7f55e76e4",
        "8e66e39f1e79befdc588609b552f9f221bbb528261a59bc1511152acda785347",
    ),
    "latency.LatencyDesign_load": (
        "eadb19a991e503772c01c34bdad55c446535a380cc98e33a29a4ffa9f695dbf6",
        "6009c1ff45b52d89ee183559052e3f9a751dce7450d793c799b39be0937c1af6",
    ),
    "sweep.Sweep": (
        "109a065e60977e519ac8b7ec2ceffec21f55d328190b4b9dfca575b10ce705aa",
        "9c0750e09b505842b38cc737aa996ee188459fc640d93496667cf8b5910a9ca2",
    ),
    "sweep.SweepOutcome": (
        "c53e0941c1ed128ccad3031840e7a614bafb2289fb82b3f95d30d2864ba544e5",
        "ad92ccf02e8c087eab6bfbd176b94edafb707aaae735fadf863280f66ead6db8",
    ),
    "model.Params": (
        "d3fef9388d5b86d2e784623f14981e97a3ff07ffc43d9d84dd5bbd0c4e4b5659",
        None,
    ),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_result_json_golden(name):
    r = _builders()[name]()
    assert _hashes(r) == GOLDEN[name]


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

    from supermarket._results import Result

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
