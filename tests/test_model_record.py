"""The model record read back (elu_study.jobs.model.analysis): the paired comparisons, and
the bars and graded predictions as rendered, each number computed here again from the record's runs and followed
through a perturbed copy. Notebook 11's printed numbers are nbval's (notebooks/sanitize.cfg masks only the Data
source line). All on the CPU, from the committed record."""

from __future__ import annotations

import copy
import math
import re
import statistics

import numpy as np
import pandas as pd
import pytest

from elu_study.core import text
from elu_study.core.paths import KERNELS_DIR
from elu_study.core.record import load
from elu_study.jobs.model import analysis, end_to_end, host
from elu_study.pytorch import ops


@pytest.fixture(scope="module")
def record():
    return load(job="model")


def bars_text(record) -> str:
    return text.render("model/bars.md.j2", bars=analysis.bars(record))


def grade(record, n: int, what: str) -> dict:
    return next(g for g in analysis.grades(record, analysis.PREDICTIONS) if (g["n"], g["what"]) == (n, what))


def test_the_record_holds_what_the_code_measures_and_builds(record):
    groups = {(r["numel"], r["requires_grad"], r["autocast"]) for r in record["host_cost"]}
    assert groups == {(n, g, a) for n in host.SIZES for g in (False, True) for a in (False, True)}
    assert {r["route"] for r in record["host_cost"]} == set(host.ROUTES)
    configs = set(map(tuple, analysis.end_to_end(record)[analysis.CONFIG].to_numpy()))
    assert configs == {(m.name, d, mode, c) for m in end_to_end.MODELS for d in ("float32", "bfloat16 autocast")
                       for mode in ("train", "infer") for c in (False, True)}
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
    """(median, tie, ELU share) per configuration: the drop-in's paired ratios, the larger of half their p10-p90
    and 2 %, and ELU's share of the eager nn.ELU step."""
    pairs, out = _pairs(record), {}
    for (m, d, mode, compiled), p in pairs.items():
        q = [a / b for a, b in zip(p["drop-in"]["ms_runs"], p["nn.ELU"]["ms_runs"])]
        deciles = statistics.quantiles(q, n=10, method="inclusive")
        eager = pairs[(m, d, mode, False)]["nn.ELU"]
        out[(m, d, mode, compiled)] = (statistics.median(q), max((deciles[-1] - deciles[0]) / 2, 0.02),
                                       eager["elu_ms"] / eager["ms"])
    return out


def test_host_ratio_is_the_median_of_paired_repeats_and_follows_the_runs(record):
    h = analysis.host(record).set_index(analysis.GROUP)
    for key, rows in _by_group(record).items():
        want = statistics.median(e / n for e, n in zip(rows["elu_study.ELU"], rows["nn.ELU"]))
        assert h.loc[key, "ELU / nn.ELU"] == pytest.approx(want)
    slower = copy.deepcopy(record)
    for r in slower["host_cost"]:
        if r["route"] == "elu_study.ELU":
            r["us_runs"] = [1.5 * v for v in r["us_runs"]]
    assert analysis.host(slower)["ELU / nn.ELU"].to_numpy() == pytest.approx(1.5 * h["ELU / nn.ELU"].to_numpy())
    assert "| 0 | 12 |" in bars_text(slower).splitlines()[2]


@pytest.mark.parametrize("factor, slower, faster", [(1.05, True, False), (0.97, False, True), (1.01, False, False)])
def test_a_step_is_slower_only_beyond_the_tie_and_faster_below_one(record, factor, slower, faster):
    rec = copy.deepcopy(record)
    rows = {(r["model"], r["dtype"], r["mode"], r["compiled"]): {} for r in rec["end_to_end"]}
    for r in rec["end_to_end"]:
        rows[(r["model"], r["dtype"], r["mode"], r["compiled"])][r["elu"]] = r
    for pair in rows.values():
        pair["drop-in"]["ms_runs"] = [factor * v for v in pair["nn.ELU"]["ms_runs"]]  # no noise between them
    e = analysis.end_to_end(rec)
    assert e["ratio"].to_numpy() == pytest.approx(factor) and e["noise"].to_numpy() == pytest.approx(0, abs=1e-12)
    assert e["slower"].all() == slower and e["faster"].all() == faster


def test_the_rendered_bars_are_the_counts_of_the_records_runs(record):
    groups, steps = _by_group(record), _steps(record)
    host_met = sum(statistics.median(e / n for e, n in zip(g["elu_study.ELU"], g["nn.ELU"])) <= 1
                   for g in groups.values())
    matters = [key for key, (q, tie, share) in steps.items() if not key[-1] and share >= 0.05]
    pairs = _pairs(record)
    doubtless = [_median_ci([a / b for a, b in zip(pairs[k]["drop-in"]["ms_runs"], pairs[k]["nn.ELU"]["ms_runs"])])[1]
                 < 1 for k in matters]
    want = [(host_met, len(groups)), (sum(q - 1 <= tie for q, tie, _ in steps.values()), len(steps)),
            (sum(steps[k][0] < 1 for k in matters), len(matters)), (sum(doubtless), len(matters)),
            (sum(c["passed"] for c in record["checks"].values()), len(record["checks"]))]
    lines = bars_text(record).splitlines()[2:]
    assert len(lines) == len(want) and all(line.endswith(f"| {met} | {of} |") for line, (met, of) in zip(lines, want))
    worse = copy.deepcopy(record)  # one step 50 % slower with the drop-in, one check failed
    p = next(iter(_pairs(worse).values()))
    p["drop-in"]["ms_runs"] = [1.5 * v for v in p["drop-in"]["ms_runs"]]
    worse["checks"]["cuda_graph"]["passed"] = False
    lines = bars_text(worse).splitlines()[2:]
    assert lines[1].endswith(f"| {want[1][0] - 1} | {want[1][1]} |")
    assert lines[4].endswith(f"| {want[4][0] - 1} | {want[4][1]} |")


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


def test_a_step_is_faster_beyond_doubt_only_where_its_interval_lies_under_one(record):
    rec = copy.deepcopy(record)
    gen = np.random.default_rng(1)
    for pair in _pairs(rec).values():
        base = pair["nn.ELU"]["ms_runs"]
        pair["drop-in"]["ms_runs"] = [0.99 * v * (1 + gen.normal(0, 0.002)) for v in base]
    assert analysis.end_to_end(rec)["faster beyond doubt"].all()
    for pair in _pairs(rec).values():  # the same median, 0.99, under noise five times the gap
        base = pair["nn.ELU"]["ms_runs"]
        pair["drop-in"]["ms_runs"] = [v * (0.99 + 0.05 * (-1) ** i) for i, v in enumerate(base)]
    e = analysis.end_to_end(rec)
    assert not e["faster beyond doubt"].any()


def _timed_by_events(record):
    rec = copy.deepcopy(record)
    for r in rec["end_to_end"]:
        r["timer"], r["steps_per_run"] = end_to_end.TIMER, 1
    return rec


def test_the_notebook_grades_its_one_prediction_and_follows_the_record(record):
    rows = [line for line in str(analysis.graded(record)).splitlines() if re.match(r"\| \d+\. ", line)]
    assert [int(line[2:4]) for line in rows] == [p[0] for p in analysis.PREDICTION] == list(range(17, 24))
    slow = copy.deepcopy(record)  # the drop-in's ResNet-18 bfloat16 training step 5 % slower in every run
    for r in slow["end_to_end"]:
        if r["elu"] == "drop-in" and "ResNet" in r["model"] and r["dtype"] != "float32" and r["mode"] == "train":
            r["ms_runs"] = [1.05 * t for t in r["ms_runs"]]
    before, after = grade(record, 19, "eager ResNet-18 bfloat16 training drop-in / nn.ELU"), grade(
        slow, 19, "eager ResNet-18 bfloat16 training drop-in / nn.ELU")
    assert before["verdict"] == "HELD" and after["value"] > before["value"] + 0.04
    assert after["verdict"] == "MISSED (higher)" and f"| {after['value']:.3f} | 0.975 to 0.995 | MISSED (higher) |" in (
        str(analysis.graded(slow)))


def test_prediction_11_is_the_step_ratio_less_what_the_kernels_save(record):
    rec = _timed_by_events(record)
    e = analysis.end_to_end(rec)
    matters = e[~e["compiled"] & (e["ELU share"] >= analysis.MATTERS)]
    want = matters["ratio"] - (1 - matters["ELU saving"])
    assert grade(rec, 11, "ratio - (1 - ELU saving) where ELU >= 5 %, highest")["value"] == pytest.approx(want.max())
    bad = copy.deepcopy(rec)  # the drop-in's kernels save nothing: the whole saving is gone from the prediction
    for r in bad["end_to_end"]:
        if r["elu"] == "drop-in":
            r["elu_ms"] = next(n["elu_ms"] for n in bad["end_to_end"] if n["elu"] == "nn.ELU" and all(
                n[k] == r[k] for k in ("model", "dtype", "mode", "compiled")))
    e = analysis.end_to_end(bad)
    m = e[~e["compiled"] & (e["ELU share"] >= analysis.MATTERS)]
    assert grade(bad, 11, "ratio - (1 - ELU saving) where ELU >= 5 %, highest")["value"] == pytest.approx(
        (m["ratio"] - 1).max())


@pytest.mark.parametrize("factor, verdict", [(1.0, "HELD"), (1.5, "MISSED (higher)"), (0.5, "MISSED (lower)")])
def test_a_prediction_is_graded_on_the_recorded_value(record, factor, verdict):
    rec = copy.deepcopy(record)
    ulp = rec["checks"]["accuracy"]["worst_ulp_by_alpha"]["1"]
    ulp["elu_study.ELU"] *= factor
    g = grade(rec, 1, "float32 default, worst ulp at alpha = 1")
    assert (g["value"], g["lo"], g["hi"], g["verdict"]) == (pytest.approx(ulp["elu_study.ELU"]), 1, 2, verdict)


def test_the_elu_saving_is_the_kernels_device_time_saved_over_the_nn_elu_step(record):
    e = analysis.end_to_end(record).set_index(analysis.CONFIG)
    rows = {(r["model"], r["dtype"], r["mode"], r["compiled"], r["elu"]): r for r in record["end_to_end"]}
    for key, row in e.iterrows():
        nn_row, drop = rows[(*key, "nn.ELU")], rows[(*key, "drop-in")]
        assert row["ELU saving"] == pytest.approx((nn_row["elu_ms"] - drop["elu_ms"]) / nn_row["ms"])
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


def test_round_4_waits_for_resnet_at_the_batch_it_trains_at(record):
    """Predictions 17-23 grade ResNet-18 at end_to_end.CNN_BATCH only; with it, 18 reads the float32 training ratio."""
    small = copy.deepcopy(record)
    for r in small["end_to_end"]:
        r["model"] = re.sub(r"ResNet-18 with ELU, batch \d+", "ResNet-18 with ELU, batch 64", r["model"])
    assert analysis.cnn_batch(small) == 64 and "| 17. " not in str(analysis.graded(small))
    big = copy.deepcopy(small)
    for r in big["end_to_end"]:
        r["model"] = r["model"].replace("batch 64 at", f"batch {end_to_end.CNN_BATCH} at")
    e = analysis.end_to_end(big)
    want = e[e["model"].str.contains("ResNet") & ~e["compiled"] & (e["mode"] == "train") & (e["dtype"] == "float32")]
    assert "| 17. " in str(analysis.graded(big))
    assert grade(big, 18, "eager ResNet-18 float32 training drop-in / nn.ELU")["value"] == want["ratio"].item()
