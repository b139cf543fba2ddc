"""The launch-shape sweep (elu_study.jobs.launch, kernels/sweeps/launch_shapes.cu). On the CPU: every number the tables
and figures print, checked against values computed here from the committed record (and seen to change when the
record is perturbed in memory), the verdicts' logic on synthetic records, and the build and its binding. On a GPU:
every instance bit-identical to step 2."""

import copy
import math
import re
from dataclasses import astuple

import numpy as np
import pytest
import torch

from elu_study.core.build import compile_variant
from elu_study.core.entries import ENTRIES
from elu_study.core.ops import registered_ops
from elu_study.core.record import REFERENCE_GPU, VERSIONS, load, row
from elu_study.core.text import render
from elu_study.core.timing import summarize
from elu_study.jobs.launch import analysis, figures, measure, notebook
from elu_study.jobs.study.launches import kernel_knobs

# ---------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def record():
    return load(REFERENCE_GPU, "launch")


@pytest.fixture(scope="module")
def achieved(record):
    return notebook.achieved_occupancy(load(record["provenance"]["gpu"], "beyond"))


def fresh(record: dict) -> dict:
    return copy.deepcopy(record)


def table_rows(md: str) -> dict[str, dict[str, str]]:
    """The first pipe table of a text: {first column's value: {header: value}}."""
    lines = re.search(r"(?m)(^\|.*\|$\n?)+", md).group(0).splitlines()
    split = lambda line: [c.strip() for c in line.strip().strip("|").split("|")]
    header = split(lines[0])
    return {cells[0]: dict(zip(header, cells)) for cells in map(split, lines[2:])}


def x_of(record: dict, name: str) -> float:
    """x copy_ from the timings themselves: the cell's median over copy_'s."""
    c = next(c for c in record["cells"] if c["name"] == name)
    return c["timing"]["median_ms"] / record["references"]["copy_"]["timing"]["median_ms"]


def set_x(record: dict, name: str, x: float) -> dict:
    """The record with one cell's timing scaled to ``x`` x copy_, annotated again (in place)."""
    for c in record["cells"]:
        if c["name"] == name:
            scale = x * record["references"]["copy_"]["timing"]["median_ms"] / c["timing"]["median_ms"]
            c["timing"] = {k: (v * scale if k.endswith("_ms") and isinstance(v, float) else
                               [v_ * scale for v_ in v] if k == "round_medians_ms" else v)
                           for k, v in c["timing"].items()}
    return analysis.annotate(record)


def synthetic_record(seed: int = 0) -> dict:
    """A record shaped like a GPU run's, with made-up times: 4 or 8 vectors +1-2 %, hints +2 %, grid-stride +7 %."""
    rng = np.random.default_rng(seed)

    def timing(ms):
        return summarize([list(ms * (1 + 0.001 * rng.standard_normal(40))) for _ in range(5)])

    cells = []
    for c in analysis.plan():
        ms = 3.0 * (1.0 + 0.01 * c.vectors / 4 + 0.02 * c.hints + (0.07 if c.grid_stride else 0.0))
        cells.append({"name": c.name, "threads": c.threads, "vectors": c.vectors, "hints": c.hints,
                      "blocks_per_sm": c.blocks_per_sm, "grid_stride": c.grid_stride, "check": {"passed": True},
                      "bit_identical_to_2_float4": True, "correct": True,
                      "occupancy": analysis.occupancy(c, 14 + 5 * c.vectors), "timing": timing(ms)})
    return analysis.annotate({
        "schema": {"job": "launch", "version": VERSIONS["launch"]},
        "provenance": {"gpu": "NVIDIA H200", "sm_count": 132, "date_utc": "2026-01-01T00:00:00+00:00", "commit": "abc"},
        "problem": {"shape": [4096, 393216], "dtype": "float32", "alpha": 1.0, "numel": 4096 * 393216},
        "method": {"rounds": 5},
        "references": {"copy_": {"timing": timing(2.99)},
                       "2_float4": {"timing": timing(3.0), "check": {"passed": True}}},
        "cells": cells,
    })


# ---------------------------------------------------------------- the committed record, shown (CPU)


def test_the_plan_is_what_the_record_measured_and_its_occupancy(record):
    cells = {c.name: c for c in analysis.plan()}
    assert list(cells) == [c["name"] for c in record["cells"]]
    for c in record["cells"]:
        occ = analysis.occupancy(cells[c["name"]], c["occupancy"]["registers"])
        assert occ == {k: c["occupancy"][k] for k in occ}
    # the register limit: 54 registers -> 56 per thread per warp unit: 65536 / (56 * 32) = 36 warps, 4 blocks of 256
    occ = analysis.occupancy(analysis.Cell(256, 8), 54)
    assert occ["resident_blocks_per_sm"] == 4 and occ["load_bytes_in_flight_per_sm"] == 4 * 256 * 8 * 16
    assert analysis.occupancy(analysis.Cell(128, blocks_per_sm=2), 28)["resident_threads_per_sm"] == 256


def test_annotate_finds_the_best_cell_and_those_tied_with_it(record):
    again = analysis.annotate(fresh(record))
    assert again["best"] == {k: record["best"][k] for k in ("name", "tied")}
    assert all(c["x_copy"] == pytest.approx(x_of(record, c["name"])) for c in again["cells"])
    medians = {c["name"]: c["timing"]["median_ms"] for c in record["cells"]}
    first, second = sorted(medians, key=medians.get)[:2]
    assert again["best"]["name"] == first and second not in again["best"]["tied"]  # 20x the noise apart
    tied = fresh(record)
    for c in tied["cells"]:  # the runner-up's rounds spread over the gap: a tie
        if c["name"] == second:
            c["timing"]["round_medians_ms"][0] -= 2 * (medians[second] - medians[first])
    assert analysis.annotate(tied)["best"]["tied"] == [first, second]
    wrong = fresh(record)
    next(c for c in wrong["cells"] if c["name"] == first)["correct"] = False
    assert analysis.annotate(wrong)["best"]["name"] == second


def test_the_cells_table_prints_each_cells_numbers(record, achieved):
    roof = record["references"]["copy_"]["timing"]["median_ms"]
    full = table_rows(notebook.cells(record))
    own = full.pop("2_float4 (its own build)")
    assert own["x copy_"] == f"{record['references']['2_float4']['timing']['median_ms'] / roof:.3f}"
    assert list(full) == sorted(full, key=lambda n: x_of(record, n)) and len(full) == len(record["cells"])
    for c in record["cells"]:
        row = full[c["name"]]
        assert row["x copy_"] == f"{x_of(record, c['name']):.3f}"
        assert row["noise (% of copy_)"] == f"{100 * np.ptp(c['timing']['round_medians_ms']) / roof:.2f}"
        assert row["KiB in flight/SM (theor.)"] == f"{c['occupancy']['load_bytes_in_flight_per_sm'] / 1024:.0f}"
    changed = fresh(record)
    changed["cells"][3]["x_copy"] *= 1.5
    assert table_rows(notebook.cells(changed))[changed["cells"][3]["name"]]["x copy_"] == \
        f"{1.5 * x_of(record, changed['cells'][3]['name']):.3f}"
    shown = table_rows(notebook.counter(record, achieved))
    gs = {c["name"] for c in record["cells"] if c["grid_stride"]}
    own = {"2_float4 (its own build)"}
    assert set(shown) == gs | {f"{t}x1" for t in analysis.THREADS} | set(achieved) | own and "128x2" in shown
    wrong = fresh(record)
    failed = wrong["cells"][2]  # 64x4: a cell that failed its check is shown, whatever its shape
    failed["correct"] = False
    assert failed["name"] not in shown and table_rows(notebook.counter(wrong, achieved))[failed["name"]]["correct"] == "NO"
    ncu = {r["name"]: r["achieved_occupancy_pct"] for r in load(REFERENCE_GPU, "beyond")["counters"]["rows"]}
    assert shown["64x1"]["achieved occ. % (ncu)"] == f"{ncu['6_64_threads']:.1f} (6_64_threads)"


def test_own_builds_are_their_cells_by_ncus_launch(record):
    ncu = {r["name"]: r for r in load(REFERENCE_GPU, "beyond")["counters"]["rows"]}
    numel = record["problem"]["numel"]
    for name, cell_name in notebook.OWN_BUILDS.items():
        cell, entry = next(c for c in record["cells"] if c["name"] == cell_name), ENTRIES[name]
        block, grid = ncu[name]["block_size"], ncu[name]["grid_size"]  # the launch ncu recorded
        assert cell["threads"] == block and not cell["grid_stride"]
        assert cell["vectors"] == math.ceil(numel / 4 / grid / block)
        assert cell["hints"] == (kernel_knobs(entry.variant, entry.flags).get("ELU_STREAMING_HINTS", "0") != "0")


def test_the_graded_prediction_lists_the_cells_against_it(record, as_of_this_tree):
    row = table_rows(notebook.graded(record))["1: no hints, 1-2 float4s (x copy_)"]
    group = [f"{t}x{v}" for t in analysis.THREADS for v in (1, 2)]
    xs = [x_of(record, n) for n in group]
    assert row["measured"] == f"{min(xs):.3f} to {max(xs):.3f}"
    assert set(row["cells against it"].split(", ")) == {n for n in group if x_of(record, n) > 1.01}
    assert row["verdict"] == "MISSED"
    record = synthetic_record()  # 1 float4 +0.25 %, 2 float4s +0.5 %, the rest slower: holds
    assert table_rows(notebook.graded(record))["1: no hints, 1-2 float4s (x copy_)"]["verdict"] == "HELD"
    row = table_rows(notebook.graded(set_x(record, "512x4", 1.0)))["1: no hints, 1-2 float4s (x copy_)"]
    assert (row["cells against it"], row["verdict"]) == ("512x4", "MISSED")  # another cell within 1 %
    row = table_rows(notebook.graded(set_x(synthetic_record(), "128x2", 1.05)))["1: no hints, 1-2 float4s (x copy_)"]
    assert (row["cells against it"], row["verdict"]) == ("128x2", "MISSED")


def test_the_knee_grades_little_as_written_and_with_loads_only(record):
    assert notebook.knee(record) == (8, 16)
    flat = synthetic_record()  # every grid-stride cell alike: flat from the fewest KiB up, no knee
    assert notebook.knee(flat) == (None, 2)
    assert table_rows(notebook.graded(flat))["Little: KiB in flight per SM"]["measured"] == "no knee"
    for c in flat["cells"]:  # time ~ 1/in-flight below 16 KiB per SM, flat above: the knee between 8 and 16
        if c["grid_stride"]:
            set_x(flat, c["name"], max(1.08, 1.08 * 16 / (c["occupancy"]["load_bytes_in_flight_per_sm"] / 1024)))
    assert notebook.knee(flat) == (8, 16)
    rows = table_rows(notebook.graded(flat))
    assert rows["Little: KiB in flight per SM"]["measured"] == "knee between 8 and 16"
    assert rows["Little: KiB in flight per SM"]["verdict"] == "MISSED"  # 26 KiB is outside it
    read = 4 * flat["problem"]["numel"] / (flat["roof_ms"] * 1e-3)
    loads_only = rows["Little, loads only (after the run)"]
    assert loads_only["predicted"] == f"~{read * 0.8e-6 / 132 / 1024:.0f}" and loads_only["verdict"] == "inside"
    assert notebook.knee(set_x(fresh(record), "gs 1x512", 1.08)) == (8, 16)  # one cell of a level flat: not all
    assert notebook.knee(set_x(fresh(record), "gs 2x512", 1.2)) == (16, 32)


def test_block_size_shares_follow_the_record(record):
    rows = table_rows(notebook.shown(notebook.block_size(record)))
    base = x_of(record, "256x1")
    for t, gs in ((512, "gs 4x512"), (1024, "gs 2x1024")):  # the grid-stride cell that fills the SM
        share = (x_of(record, f"{t}x1") - base) / (x_of(record, gs) - base)
        assert rows[str(t)]["grid-stride, SM full (x copy_)"] == f"{x_of(record, gs):.3f}"
        assert rows[str(t)]["share of the loop's loss"] == f"{100 * share:.0f} %"
    assert rows["256"]["share of the loop's loss"] == "" and rows["64"]["grid-stride, SM full (x copy_)"] == ""
    moved = set_x(fresh(record), "512x1", base + 0.5 * (x_of(record, "gs 4x512") - base))
    assert table_rows(notebook.shown(notebook.block_size(moved)))["512"]["share of the loop's loss"] == "50 %"
    study = load(REFERENCE_GPU)
    lines = {line.get_label(): list(line.get_ydata()) for line in
             figures.block_size_figure(notebook.block_size(record), "NVIDIA H200", study).axes[0].lines}
    assert lines["one-shot, 1 float4 (x copy_)"] == pytest.approx([x_of(record, f"{t}x1") for t in analysis.THREADS])
    assert lines["3_grid_stride_one_shot (main study)"] == [row(study, "3_grid_stride_one_shot")["x_copy"]]


def test_the_heatmaps_print_every_cells_x_copy(record, tmp_path):
    figs = figures.heatmap_figures(record)
    printed = sorted(t.get_text() for ax in figs["launch"].axes for t in ax.texts)
    expected = sorted(f"{x_of(record, c['name']):.3f}" + ("\n(best)" if c["name"] == record["best"]["name"] else "")
                      for c in record["cells"] if not c["grid_stride"])
    assert printed == expected
    gs = sorted(t.get_text() for t in figs["launch-grid-stride"].axes[0].texts)
    assert gs == sorted(f"{x_of(record, c['name']):.3f}" for c in record["cells"] if c["grid_stride"])
    moved = fresh(record)
    moved["cells"][0]["x_copy"] *= 1.5
    moved["best"]["tied"] = [record["best"]["name"], "256x1"]  # a tie: both framed
    texts = [t.get_text() for ax in figures.heatmap_figures(moved)["launch"].axes for t in ax.texts]
    assert f"{1.5 * x_of(record, moved['cells'][0]['name']):.3f}" in texts
    assert sum(t.endswith("(best)") for t in texts) == 2
    written = figures.write_figures(record, tmp_path)
    assert [p.name for p in written] == ["nvidia-h200-launch.png", "nvidia-h200-launch-grid-stride.png"]


def test_the_method_text_is_the_records(record):
    how = dict(line.split(": ", 1) for line in render("launch/method.md.j2").splitlines())
    assert {k: how[k] for k in ("check", "timed_call", "noise", "occupancy")} == \
        {k: record["method"][k] for k in ("check", "timed_call", "noise", "occupancy")}
    assert (how["copy_"], how["2_float4"]) == (record["references"]["copy_"]["what"],
                                               record["references"]["2_float4"]["what"])


# ---------------------------------------------------------------- the build (compiles here, once)


@pytest.fixture(scope="module")
def module():
    return compile_variant(analysis.VARIANT)


def test_the_build_has_an_instance_for_every_cell_and_only_the_elu_ops(module):
    instances = [tuple(s) for s in module.launch_shapes()]
    assert len(instances) == len(set(instances)) == 44
    assert {c.instance() for c in analysis.plan()} <= set(instances)
    assert "elu" in registered_ops(module)
    assert not {"set_launch_shape", "launch_shapes"} & set(registered_ops(module))
    regs = measure.registers_by_cell(module, analysis.plan())
    assert all(r["local"] == 0 for r in regs.values()), "an instance spills"
    assert all(r["registers"] <= 64 for r in regs.values())  # __launch_bounds__(1024) keeps 2048 threads possible


@pytest.mark.parametrize("args, says", [
    ((96, 1, False), r"no launch-shape instance for threads=96, vectors=1, hints=False in a one-shot grid"),
    ((256, 3, True), r"no launch-shape instance .* instances \(threads x vectors\): 64x1 64x1\+hints"),
    ((128, 2, True, 4), r"with a grid-stride loop \(blocks_per_sm > 0\); instances \(threads x vectors\): 128x1 256x1"),
    ((256, 1, False, -1), r"blocks_per_sm must be >= 0"),
])
def test_a_shape_with_no_instance_is_a_value_error(module, args, says):
    with pytest.raises(ValueError, match=says):
        module.set_launch_shape(*args)


def test_valid_shapes_are_accepted(module):
    for c in analysis.plan():
        module.set_launch_shape(*astuple(c))
    module.set_launch_shape(256, 1, False)  # blocks_per_sm defaults to 0
    module.set_launch_shape(threads=256, vectors=1, hints=False, blocks_per_sm=0)


# ---------------------------------------------------------------- on a GPU


gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                         reason="needs a CUDA GPU: these run the kernels (the compile tests run without one)")


@pytest.fixture(scope="module")
def step2():
    return compile_variant("2_float4")


def _inputs():
    g = torch.Generator(device="cuda").manual_seed(3)
    base = torch.randn(2**20 + 4099, device="cuda", generator=g) * 4
    base[:8] = torch.tensor([float("nan"), float("-inf"), float("inf"), -0.0, 0.0, -1e-30, -88.0, -104.0])
    cases = []
    for n in (1, 3, 4, 5, 63, 4097, 64 * 8 * 4 + 4, 1024 * 8 * 4 * 3 + 7, 2**20 + 3):
        cases.append((f"n={n}", base[:n]))
    for offset in (1, 2, 3):
        cases.append((f"offset {offset}", base[offset:offset + 100_003]))
    return cases


@gpu
@pytest.mark.parametrize("c", analysis.plan() + [analysis.Cell(256, 1, False, 64)], ids=lambda c: c.name)
def test_every_shape_is_bit_identical_to_step_2(module, step2, c):
    try:
        for label, x in _inputs():
            expected = step2.elu(x, 1.3)
            module.set_launch_shape(*astuple(c))
            out = torch.full_like(x, float("nan"))
            y = module.elu(x, 1.3, out=out)
            assert y.data_ptr() == out.data_ptr()
            assert torch.equal(y.view(torch.int32), expected.view(torch.int32)), f"{c.name}, {label}"
    finally:
        module.set_launch_shape(256, 1, False)


@gpu
def test_switching_back_restores_step_2s_output(module, step2):
    module.set_launch_shape(1024, 8, True)
    module.set_launch_shape(256, 1, False)
    x = torch.randn(100_001, device="cuda") * 4
    assert torch.equal(module.elu(x, 1.0).view(torch.int32), step2.elu(x, 1.0).view(torch.int32))
