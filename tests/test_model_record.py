"""The model record read back (elu_study.jobs.model.analysis): its declared schema, the paired comparisons, and
the bars and graded predictions as rendered, each number computed here again from the record's runs and followed
through a perturbed copy. Notebook 11's printed numbers are nbval's (notebooks/sanitize.cfg masks only the Data
source line). All on the CPU, from the committed record."""

from __future__ import annotations

import copy
import re
import statistics

import pytest

from elu_study.core import text
from elu_study.core.paths import KERNELS_DIR
from elu_study.core.record import RecordError, check_schema, load
from elu_study.jobs.model import analysis, end_to_end, host
from elu_study.pytorch import ops


@pytest.fixture(scope="module")
def record():
    return load(job="model")


def bars_text(record) -> str:
    return text.render("model/bars.md.j2", bars=analysis.bars(record))


def graded_row(record, what: str) -> str:
    return next(line for line in str(analysis.graded(record)).splitlines() if line.startswith(f"| {what} |"))


def test_a_wrong_type_or_a_missing_field_is_refused_naming_the_file_and_field(record):
    bad = copy.deepcopy(record)
    bad["host_cost"][3]["us_per_call"] = "12.5"
    with pytest.raises(RecordError, match=r"model\.json: host_cost\[3\]\.us_per_call: must be number"):
        check_schema(bad, "model", "results/nvidia-h200-model.json")
    bad = copy.deepcopy(record)
    del bad["end_to_end"][0]["noise_ms"]
    with pytest.raises(RecordError, match=r"end_to_end\[0\]: must contain \['noise_ms'\]"):
        check_schema(bad, "model", "results/nvidia-h200-model.json")


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
    matters = [(q, tie) for (*_, compiled), (q, tie, share) in steps.items() if not compiled and share >= 0.05]
    want = [(host_met, len(groups)), (sum(q - 1 <= tie for q, tie, _ in steps.values()), len(steps)),
            (sum(q < 1 for q, _ in matters), len(matters)),
            (sum(c["passed"] for c in record["checks"].values()), len(record["checks"]))]
    lines = bars_text(record).splitlines()[2:]
    assert len(lines) == len(want) and all(line.endswith(f"| {met} | {of} |") for line, (met, of) in zip(lines, want))
    worse = copy.deepcopy(record)  # one step 50 % slower with the drop-in, one check failed
    p = next(iter(_pairs(worse).values()))
    p["drop-in"]["ms_runs"] = [1.5 * v for v in p["drop-in"]["ms_runs"]]
    worse["checks"]["cuda_graph"]["passed"] = False
    lines = bars_text(worse).splitlines()[2:]
    assert lines[1].endswith(f"| {want[1][0] - 1} | {want[1][1]} |")
    assert lines[3].endswith(f"| {want[3][0] - 1} | {want[3][1]} |")


@pytest.mark.parametrize("factor, grade", [(1.0, "HELD"), (1.5, "MISSED (higher)"), (0.5, "MISSED (lower)")])
def test_a_prediction_is_graded_on_the_recorded_value(record, factor, grade):
    rec = copy.deepcopy(record)
    ulp = rec["checks"]["accuracy"]["worst_ulp_by_alpha"]["1"]
    ulp["elu_study.ELU"] *= factor
    row = graded_row(rec, "1. float32 default, worst ulp at alpha = 1")
    assert row.endswith(f"| {ulp['elu_study.ELU']:.3f} | 1 to 2 | {grade} |")


def test_the_readmes_model_line_counts_the_bars_and_follows_the_record(record, monkeypatch):
    from elu_study.jobs.report import front  # the report job: it imports every job

    def model_line() -> str:
        return next(line for line in front.findings().splitlines() if line.startswith("- **In a model**"))

    bars = analysis.bars(record)
    assert re.findall(r": (\d+) of (\d+)\.", model_line()) == [(str(met), str(of)) for met, of in bars.values()]
    worse = copy.deepcopy(record)  # every elu_study.ELU host time 50 % higher: no group at or under nn.ELU's
    for r in worse["host_cost"]:
        if r["route"] == "elu_study.ELU":
            r["us_runs"] = [1.5 * v for v in r["us_runs"]]
    load = front.record.load
    monkeypatch.setattr(front.record, "load", lambda gpu, job="study", **kw: worse if job == "model" else
                        load(gpu, job, **kw))
    assert re.findall(r": (\d+) of (\d+)\.", model_line())[0] == ("0", str(bars["host"][1]))


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
