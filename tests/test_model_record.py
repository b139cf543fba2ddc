"""The model record read back (elu_study.jobs.model.analysis): its declared tables, the paired comparisons, the
bars, and notebook 11 showing exactly what the committed record holds. All on the CPU, from the committed record."""

from __future__ import annotations

import copy
import statistics

import nbformat
import pytest
from nbclient import NotebookClient

from elu_study.core.paths import NOTEBOOKS_DIR
from elu_study.core.record import RecordError
from elu_study.jobs.model import analysis, host
from elu_study.pytorch import ops

NOTEBOOK = NOTEBOOKS_DIR / "11_in_a_model.ipynb"


@pytest.fixture(scope="module")
def record():
    return analysis.read_record()


def test_a_wrong_type_is_refused_naming_the_file_and_field(record):
    bad = copy.deepcopy(record)
    bad["host_cost"][3]["us_per_call"] = "12.5"
    with pytest.raises(RecordError, match=r"model\.json: host_cost\[3\]\.us_per_call should be float, got '12.5'"):
        analysis.check_tables(bad, "results/nvidia-h200-model.json")
    bad = copy.deepcopy(record)
    del bad["end_to_end"][0]["noise_ms"]
    with pytest.raises(RecordError, match=r"end_to_end\[0\]\.noise_ms"):
        analysis.check_tables(bad, "results/nvidia-h200-model.json")


def test_the_record_holds_every_route_group_and_configuration(record):
    groups = {(r["numel"], r["requires_grad"], r["autocast"]) for r in record["host_cost"]}
    assert groups == {(n, g, a) for n in host.SIZES for g in (False, True) for a in (False, True)}
    assert {r["route"] for r in record["host_cost"]} == set(host.ROUTES)
    configs = analysis.end_to_end(record)
    assert len(configs) == 4 * 2 * 2 * 2 and set(configs["compiled"]) == {False, True}
    assert record["defaults"] == ops.table().to_dict("records")  # the run's table is the code's


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
    assert analysis.summary(slower).iloc[0]["met"] == 0


def _by_group(record):
    out = {}
    for r in record["host_cost"]:
        out.setdefault((r["numel"], r["requires_grad"], r["autocast"]), {})[r["route"]] = r["us_runs"]
    return out


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


def test_the_bars_count_what_the_frames_hold(record):
    bars = analysis.summary(record).set_index("bar")["met"]
    e, h, c = analysis.end_to_end(record), analysis.host(record), analysis.checks(record)
    assert list(bars) == [int((h["ELU / nn.ELU"] <= 1).sum()), int((~e["slower"]).sum()),
                          int(e[~e["compiled"] & (e["ELU share"] >= analysis.MATTERS)]["faster"].sum()),
                          int(c["passed"].sum())]


@pytest.mark.parametrize("value, grade", [(1.0, "HELD"), (0.5, "MISSED (lower)"), (2.5, "MISSED (higher)")])
def test_a_prediction_is_held_inside_its_range(value, grade):
    assert analysis.graded(value, 0.9, 2.0) == grade


def text_outputs(nb) -> list[list[str]]:
    """Each code cell's printed and returned text (figures' pixels left out: their data is the record's)."""
    out = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            out.append(["".join(o.get("text", "")) or "".join(o.get("data", {}).get("text/plain", ""))
                        for o in cell.get("outputs", []) if o.get("output_type") != "display_data"])
    return out


def test_notebook_11_shows_exactly_the_committed_record():
    """Re-executed here (it times nothing: every number is the record's), notebook 11 prints what it committed,
    digit for digit: a record changed without re-making the notebook, or a computation changed, fails here."""
    committed = nbformat.read(NOTEBOOK, as_version=4)
    fresh = copy.deepcopy(committed)
    NotebookClient(fresh, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS_DIR)}}).execute()
    assert text_outputs(fresh) == text_outputs(committed)
