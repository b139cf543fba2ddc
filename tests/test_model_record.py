"""The model record read back (elu_study.jobs.model.analysis): the paired comparisons and the graded prediction as
rendered, each number computed here again from the record's runs and followed through a perturbed copy. Notebook
11's printed numbers are nbval's (notebooks/sanitize.cfg masks only the Data source line). All on the CPU, from the
committed record."""

from __future__ import annotations

import copy
import math
import re
import statistics

import numpy as np
import pandas as pd
import pytest

from elu_study.core.paths import KERNELS_DIR
from elu_study.core.record import gpus, load
from elu_study.jobs import records
from elu_study.jobs.model import analysis, end_to_end, host
from elu_study.pytorch import ops

pytestmark = pytest.mark.usefixtures("as_of_this_tree")  # grades without the "(earlier build)" label (tested apart)


@pytest.fixture(scope="module")
def record():
    return load(job="model")


def test_a_current_model_record_holds_every_configuration_the_code_measures():
    """Every model x dtype x mode eager; compiled, the MLPs' (mode, autocast) pairs in COMPILED: in each GPU's model
    record that is current by its fingerprint (one measured before the code changed holds the earlier protocol's)."""
    stage = records.BY_NAME["model"]
    current = [g for g in gpus() if load(g, "model", required=False) and not stage.due(g, None)]
    if not current:
        pytest.skip("no GPU's model record is current")
    want = {(m.name, d, mode, c) for m in end_to_end.MODELS for d in ("float32", "bfloat16 autocast")
            for mode in ("train", "infer") for c in (False, True)
            if not c or (mode, d != "float32") in end_to_end.COMPILED and m.width}
    for gpu in current:
        found = set(map(tuple, analysis.end_to_end(load(gpu, "model"))[analysis.CONFIG].to_numpy()))
        assert found == want, gpu


def grade(record, what: str) -> dict:
    return next(g for g in analysis.grades(record) if g["what"] == what)


def test_the_record_holds_what_the_code_measures_and_builds(record):
    groups = {(r["numel"], r["requires_grad"], r["autocast"]) for r in record["host_cost"]}
    assert groups == {(n, g, a) for n in host.SIZES for g in (False, True) for a in (False, True)}
    assert set(analysis.ROUTE_STYLE) <= {r["route"] for r in record["host_cost"]}
    code = ops.table().to_dict("records")
    assert [(r["dtype"], r["direction"], r["build"]) for r in record["defaults"]] == [
        (r["dtype"], r["direction"], r["build"]) for r in code]
    sources = "".join(p.read_text() for p in (*KERNELS_DIR.glob("*.cu"), *(KERNELS_DIR / "common").glob("*")))
    for ran, now in zip(record["defaults"], code):  # a flag the run passed is the code's flag or its kernel's default
        if ran["flags"] != now["flags"]:
            flags = [] if ran["flags"] == "(its defaults)" else ran["flags"].split()
            for name, value in (f.removeprefix("-D").split("=") for f in flags):
                assert re.search(rf"#define {name} {value}\b", sources), (ran, now)


def _by_group(record):
    out = {}
    for r in record["host_cost"]:
        out.setdefault((r["numel"], r["requires_grad"], r["autocast"]), {})[r["route"]] = r["us_runs"]
    return out


def _pairs(record):
    """{configuration: {"nn.ELU": row, "drop-in": row}} from the record's rows."""
    out = {}
    for r in record["end_to_end"]:
        out.setdefault((r["model"], r["dtype"], r["mode"], r["compiled"]), {})[r["elu"]] = r
    return out


def _steps(record):
    """(median, ELU share) per configuration: the drop-in's paired ratios and ELU's share of the eager nn.ELU step."""
    pairs, out = _pairs(record), {}
    for (m, d, mode, compiled), p in pairs.items():
        q = [a / b for a, b in zip(p["drop-in"]["ms_runs"], p["nn.ELU"]["ms_runs"])]
        eager = pairs[(m, d, mode, False)]["nn.ELU"]
        out[(m, d, mode, compiled)] = (statistics.median(q), eager["elu_ms"] / eager["ms"])
    return out


def _elu_over_nn(record):
    return analysis.host_ratios(record).query("route == 'elu_study.ELU'").set_index(analysis.GROUP)


def test_host_ratio_is_the_median_of_paired_repeats_and_follows_the_runs(record):
    h = _elu_over_nn(record)
    for key, rows in _by_group(record).items():
        q = [e / n for e, n in zip(rows["elu_study.ELU"], rows["nn.ELU"])]
        deciles = statistics.quantiles(q, n=10, method="inclusive")
        assert h.loc[key, ["ratio", "p10", "p90"]].tolist() == pytest.approx([statistics.median(q), deciles[0],
                                                                               deciles[-1]])
    slower = copy.deepcopy(record)
    for r in slower["host_cost"]:
        if r["route"] == "elu_study.ELU":
            r["us_runs"] = [1.5 * v for v in r["us_runs"]]
    assert _elu_over_nn(slower)["ratio"].to_numpy() == pytest.approx(1.5 * h["ratio"].to_numpy())


@pytest.mark.parametrize("factor, faster", [(1.05, False), (0.97, True), (1.0, False)])
def test_a_steps_ratio_is_its_paired_runs_and_faster_only_below_one(record, factor, faster):
    rec = copy.deepcopy(record)
    rows = {(r["model"], r["dtype"], r["mode"], r["compiled"]): {} for r in rec["end_to_end"]}
    for r in rec["end_to_end"]:
        rows[(r["model"], r["dtype"], r["mode"], r["compiled"])][r["elu"]] = r
    for pair in rows.values():
        pair["drop-in"]["ms_runs"] = [factor * v for v in pair["nn.ELU"]["ms_runs"]]  # no noise between them
    e = analysis.end_to_end(rec)
    assert e["ratio"].to_numpy() == pytest.approx(factor) and e["noise"].to_numpy() == pytest.approx(0, abs=1e-12)
    assert e["faster"].all() == faster and e["faster beyond doubt"].all() == faster  # no noise: a point interval


def test_the_graded_counts_are_the_eager_steps_where_elu_matters(record):
    steps, pairs = _steps(record), _pairs(record)
    matters = [key for key, (q, share) in steps.items() if not key[-1] and share >= 0.05]
    ratios = {k: [a / b for a, b in zip(pairs[k]["drop-in"]["ms_runs"], pairs[k]["nn.ELU"]["ms_runs"])]
              for k in matters}  # beyond doubt: the interval under 1, the median under the tie band
    doubtless = [_median_ci(q)[1] < 1 and statistics.median(q) < 1 - max(
        (np.quantile(q, 0.9) - np.quantile(q, 0.1)) / 2, analysis.TIE) for q in ratios.values()]
    want = {"eager steps with ELU >= 5 %": len(matters), "of them, faster beyond doubt": sum(doubtless),
            "of them, faster (median paired ratio under 1)": sum(steps[k][0] < 1 for k in matters)}
    assert {what: grade(record, what)["value"] for what in want} == want
    worse = copy.deepcopy(record)  # one step where ELU matters 50 % slower with the drop-in
    p = _pairs(worse)[matters[0]]["drop-in"]
    p["ms_runs"] = [1.5 * v for v in p["ms_runs"]]
    faster = "of them, faster (median paired ratio under 1)"
    assert grade(worse, faster)["value"] == want[faster] - 1 and grade(worse, faster)["verdict"] == "MISSED (lower)"


def _median_ci(q: list[float]) -> tuple[float, float]:
    """The median's 95 % interval by the order statistics (Conover): ranks n/2 -+ 1.96 sqrt(n)/2, 1-based."""
    v, half = sorted(q), 1.96 * len(q) ** 0.5 / 2
    return v[max(math.floor(len(v) / 2 - half), 0)], v[min(math.ceil(len(v) / 2 + half), len(v)) - 1]


def test_the_medians_interval_holds_the_order_statistics_either_side_and_narrows_with_more_pairs():
    assert analysis.median_ci(pd.Series(range(1, 201))) == (87, 114)  # ranks 86 and 113, 0-based
    gen = np.random.default_rng(0)
    small, large = (pd.Series(gen.normal(1.0, 0.05, n)) for n in (50, 5000))
    (lo_s, hi_s), (lo_l, hi_l) = analysis.median_ci(small), analysis.median_ci(large)
    assert lo_s < small.median() < hi_s and lo_l < large.median() < hi_l
    assert hi_l - lo_l < (hi_s - lo_s) / 5  # sqrt(100) = 10 times more pairs: about a tenth as wide
    covered = sum(lo < 1.0 < hi for lo, hi in (analysis.median_ci(pd.Series(gen.normal(1.0, 0.05, 200)))
                                             for _ in range(400)))
    assert 0.92 * 400 <= covered <= 0.98 * 400  # a 95 % interval holds the true median about 95 % of the time


def test_a_step_is_faster_beyond_doubt_only_where_its_interval_lies_under_one_and_its_ratio_under_the_tie(record):
    rec = copy.deepcopy(record)
    gen = np.random.default_rng(1)
    for factor, doubtless in ((0.97, True), (0.99, False)):  # 0.99: its interval under 1, but inside the 2 % band
        for pair in _pairs(rec).values():
            base = pair["nn.ELU"]["ms_runs"]
            pair["drop-in"]["ms_runs"] = [factor * v * (1 + gen.normal(0, 0.002)) for v in base]
        e = analysis.end_to_end(rec)
        assert (e["CI high"] < 1).all() and (e["faster beyond doubt"] == doubtless).all()
    for pair in _pairs(rec).values():  # the same median, 0.99, under noise five times the gap
        base = pair["nn.ELU"]["ms_runs"]
        pair["drop-in"]["ms_runs"] = [v * (0.99 + 0.05 * (-1) ** i) for i, v in enumerate(base)]
    e = analysis.end_to_end(rec)
    assert not e["faster beyond doubt"].any()


BF16_TRAIN = "eager ResNet-18 bfloat16 training drop-in / nn.ELU"


@pytest.mark.parametrize("factor, verdict", [(1.0, "HELD"), (1.05, "MISSED (higher)"), (0.95, "MISSED (lower)")])
def test_the_notebook_grades_its_one_prediction_on_the_record(record, factor, verdict):
    rows = str(analysis.graded(record)).splitlines()[2:]
    assert [line.split(" | ")[0].removeprefix("| ") for line in rows] == [p[0] for p in analysis.PREDICTION]
    rec = copy.deepcopy(record)  # the drop-in's ResNet-18 bfloat16 training step ``factor`` times as long in every run
    for r in rec["end_to_end"]:
        if r["elu"] == "drop-in" and "ResNet" in r["model"] and r["dtype"] != "float32" and r["mode"] == "train":
            r["ms_runs"] = [factor * t for t in r["ms_runs"]]
    before, after = grade(record, BF16_TRAIN), grade(rec, BF16_TRAIN)
    assert before["verdict"] == "HELD" and after["value"] == pytest.approx(factor * before["value"], rel=0.01)
    assert after["verdict"] == verdict
    assert f"| {BF16_TRAIN} | {after['value']:.3f} | 0.975 to 0.995 | {verdict} |" in str(analysis.graded(rec))


def test_the_elu_saving_and_the_device_share_are_device_times_over_the_step(record):
    e = analysis.end_to_end(record).set_index(analysis.CONFIG)
    rows = {(r["model"], r["dtype"], r["mode"], r["compiled"], r["elu"]): r for r in record["end_to_end"]}
    for key, row in e.iterrows():
        nn_row, drop = rows[(*key, "nn.ELU")], rows[(*key, "drop-in")]
        assert row["ELU saving"] == pytest.approx((nn_row["elu_ms"] - drop["elu_ms"]) / nn_row["ms"])
    resnet = [r["device_ms"] / r["ms"] for r in rows.values() if "ResNet" in r["model"] and not r["compiled"]]
    assert grade(record, "eager ResNet-18 steps, device time / step time, lowest")["value"] == min(resnet)
    rec = copy.deepcopy(record)
    for r in rec["end_to_end"]:
        if r["elu"] == "drop-in":
            r["elu_ms"] = 0.0
    assert (analysis.end_to_end(rec)["ELU saving"].to_numpy() > 0).all()


def _fake_device(monkeypatch):
    """CUDA events on a fake device clock that each step advances by its net's cost; the steps' order in a log."""
    clock, log = [0.0], []

    class Event:
        def __init__(self, enable_timing):
            assert enable_timing

        def record(self):
            self.t = clock[0]

        def elapsed_time(self, end):
            return end.t - self.t

    monkeypatch.setattr(end_to_end.torch.cuda, "Event", Event)
    monkeypatch.setattr(end_to_end.torch.cuda, "synchronize", lambda: None)

    def net(name, cost):
        def step(x, target):
            log.append(name)
            clock[0] += cost
        return step

    return net, log


def test_paired_runs_alternate_who_goes_first_and_time_each_run_by_its_own_events(monkeypatch):
    net, log = _fake_device(monkeypatch)
    times = end_to_end.paired_steps_ms({"nn.ELU": net("a", 2.0), "drop-in": net("b", 1.5)}, None, None, 4, 1)
    assert log == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert times == {"nn.ELU": [2.0] * 4, "drop-in": [1.5] * 4}
    log.clear()  # runs of 3 steps: each net's 3 steps together, the time per step
    times = end_to_end.paired_steps_ms({"nn.ELU": net("a", 2.0), "drop-in": net("b", 1.5)}, None, None, 2, 3)
    assert log == ["a"] * 3 + ["b"] * 3 + ["b"] * 3 + ["a"] * 3
    assert times == {"nn.ELU": [2.0] * 2, "drop-in": [1.5] * 2}


def test_a_run_lasts_at_least_run_ms_in_whole_steps_of_the_slower_net(monkeypatch):
    net, _ = _fake_device(monkeypatch)
    run = end_to_end.RUN_MS
    assert end_to_end.steps_per_run({"nn.ELU": net("a", run / 10), "drop-in": net("b", run / 8)}, None, None) == 8
    assert end_to_end.steps_per_run({"nn.ELU": net("a", run / 7.5), "drop-in": net("b", run / 9)}, None, None) == 8
    assert end_to_end.steps_per_run({"nn.ELU": net("a", 3 * run), "drop-in": net("b", 2 * run)}, None, None) == 1


def test_the_prediction_waits_for_resnet_at_the_batch_it_trains_at(record):
    """The prediction grades ResNet-18 at end_to_end.CNN_BATCH only; with it, it reads the float32 training ratio."""
    small = copy.deepcopy(record)
    for r in small["end_to_end"]:
        r["model"] = re.sub(r"ResNet-18 with ELU, batch \d+", "ResNet-18 with ELU, batch 64", r["model"])
    assert analysis.cnn_batch(small) == 64 and "| prediction |" not in str(analysis.graded(small))
    big = copy.deepcopy(small)
    for r in big["end_to_end"]:
        r["model"] = r["model"].replace("batch 64 at", f"batch {end_to_end.CNN_BATCH} at")
    e = analysis.end_to_end(big)
    want = e[e["model"].str.contains("ResNet") & ~e["compiled"] & (e["mode"] == "train") & (e["dtype"] == "float32")]
    assert "| prediction |" in str(analysis.graded(big))
    assert grade(big, "eager ResNet-18 float32 training drop-in / nn.ELU")["value"] == want["ratio"].item()
