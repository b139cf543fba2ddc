"""The launch-shape sweep (elu_study.jobs.launch, kernels/sweeps/launch_shapes.cu). On the CPU: every number the text
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
from elu_study.core.paths import KERNELS_DIR
from elu_study.core.record import REFERENCE_GPU, VERSIONS, load
from elu_study.core.text import render
from elu_study.core.timing import summarize
from elu_study.jobs.launch import analysis, figures, measure, text
from elu_study.jobs.study.launches import kernel_knobs

# ---------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def record():
    return load(REFERENCE_GPU, "launch")


@pytest.fixture(scope="module")
def others(record):
    return analysis.companions(record)


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
                      "bit_identical_to_2_float4": True, "correct": True, "local_bytes": 0,
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


# ---------------------------------------------------------------- the committed record, printed (CPU)


def test_the_plan_is_what_the_record_measured_and_its_occupancy(record):
    cells = {c.name: c for c in analysis.plan()}
    assert list(cells) == [c["name"] for c in record["cells"]]
    for c in record["cells"]:
        assert analysis.occupancy(cells[c["name"]], c["occupancy"]["registers"]) == c["occupancy"]
    # the register limit: 54 registers -> 56 per thread per warp unit: 65536 / (56 * 32) = 36 warps, 4 blocks of 256
    occ = analysis.occupancy(analysis.Cell(256, 8), 54)
    assert occ["resident_blocks_per_sm"] == 4 and occ["load_bytes_in_flight_per_sm"] == 4 * 256 * 8 * 16
    assert analysis.occupancy(analysis.Cell(128, blocks_per_sm=2), 28)["resident_threads_per_sm"] == 256


def test_annotate_and_best_recompute_the_record(record):
    again = analysis.annotate(fresh(record))
    assert again["best"] == record["best"] and again["noise_ms"] == record["noise_ms"]
    medians = {c["name"]: c["timing"]["median_ms"] for c in record["cells"]}
    first, second = sorted(medians, key=medians.get)[:2]
    b = record["best"]
    assert (b["name"], b["runner_up"]) == (first, second)
    assert b["margin_ms"] == pytest.approx(medians[second] - medians[first])
    assert all(c["x_copy"] == pytest.approx(x_of(record, c["name"])) for c in record["cells"])


def test_the_summary_prints_the_records_numbers_and_follows_a_change(record):
    copy_ms = record["references"]["copy_"]["timing"]["median_ms"]
    b = record["best"]
    said = text.summary(record)
    for number in (f"copy_ takes {copy_ms:.3f} ms",
                   f"`2_float4` {record['references']['2_float4']['timing']['median_ms'] / copy_ms:.3f}x",
                   f"**{b['name']}** at {x_of(record, b['name']):.3f}x",
                   f"{b['margin_ms'] * 1e3:.1f} µs ahead of {b['runner_up']}",
                   f"{b['margin_over_noise']:.0f}x the noise",
                   f"{sum(c['correct'] for c in record['cells'])} of {len(record['cells'])} cells",
                   f"{record['provenance']['sm_count']} SMs"):
        assert number in said
    slower = set_x(fresh(record), b["name"], 1.5 * x_of(record, b["name"]))  # the best cell is best no more
    assert f"**{b['name']}**" not in text.summary(slower)
    assert f"**{b['runner_up']}** at {x_of(record, b['runner_up']):.3f}x" in text.summary(slower)
    tied = fresh(record)
    tied["best"]["tie"], tied["best"]["tied"] = True, [b["name"], b["runner_up"]]
    assert f"a tie within the noise ({b['noise_ms'] * 1e3:.1f} µs) with {b['runner_up']}" in text.summary(tied)


def test_the_cells_tables_print_each_cells_numbers(record):
    roof = record["references"]["copy_"]["timing"]["median_ms"]
    full = table_rows(text.table(record))
    assert list(full) == sorted(full, key=lambda n: x_of(record, n)) and len(full) == len(record["cells"])
    for c in record["cells"]:
        row = full[c["name"]]
        assert row["x copy_"] == f"{x_of(record, c['name']):.3f}"
        assert row["p90"] == f"{c['timing']['p90_ms'] / roof:.3f}"
        assert row["noise (% of copy_)"] == f"{100 * np.ptp(c['timing']['round_medians_ms']) / roof:.2f}"
        assert row["KiB in flight/SM (theor.)"] == f"{c['occupancy']['load_bytes_in_flight_per_sm'] / 1024:.0f}"
    changed = fresh(record)
    changed["cells"][3]["x_copy"] *= 1.5
    assert table_rows(text.table(changed))[changed["cells"][3]["name"]]["x copy_"] == \
        f"{1.5 * x_of(record, changed['cells'][3]['name']):.3f}"


def test_the_trimmed_table_keeps_the_ends_the_named_cells_and_ncus_occupancy(record, others):
    achieved = analysis.achieved_occupancy(others["beyond"])
    ncu = {r["name"]: r["achieved_occupancy_pct"] for r in others["beyond"]["counters"]["rows"]}
    said = text.trimmed_table(record, achieved, head=2, tail=2)
    shown = table_rows(said)
    ranked = sorted((c["name"] for c in record["cells"]), key=lambda n: x_of(record, n))
    assert {*ranked[:2], *ranked[-2:], "64x1", "512x1", "1024x1", "gs 4x512"} <= set(shown)
    assert shown["64x1"]["achieved occ. % (ncu)"] == f"{ncu['6_64_threads']:.1f} (6_64_threads)"
    assert f"({len(record['cells']) - len(shown)} cells between" in said


def test_own_builds_are_their_cells_by_ncus_launch(record, others):
    ncu = {r["name"]: r for r in load(REFERENCE_GPU, "ncu")["rows"] + others["beyond"]["counters"]["rows"]}
    sms, numel = record["provenance"]["sm_count"], record["problem"]["numel"]
    for builds in analysis.OWN_BUILDS.values():
        for name, cell_name in builds.items():
            cell, entry = analysis.cell(record, cell_name), ENTRIES[name]
            block, grid = ncu[name]["block_size"], ncu[name]["grid_size"]  # the launch ncu recorded
            assert cell["threads"] == block and cell["grid_stride"] == (entry.variant == "3_grid_stride")
            assert cell["blocks_per_sm"] * sms == grid if cell["grid_stride"] else \
                cell["vectors"] == math.ceil(numel / 4 / grid / block)
            assert cell["hints"] == (kernel_knobs(entry.variant, entry.flags).get("ELU_STREAMING_HINTS", "0") != "0")


def test_the_graded_predictions_count_the_cells_inside(record):
    rows = table_rows(text.graded(record, (1, 2, 3, 4)))
    vec48 = [f"{t}x{v}" for t in (64, 128, 256, 512, 1024) for v in (4, 8)]
    inside = [n for n in vec48 if 1.02 <= x_of(record, n) <= 1.05]
    assert rows["2"]["inside"] == f"{len(inside)} of {len(vec48)}"
    xs = [x_of(record, n) for n in vec48]
    assert rows["2"]["measured"] == f"{min(xs):.3f} to {max(xs):.3f}"
    assert rows["2"]["verdict"] == ("HELD" if len(inside) == len(vec48) else "MISSED")
    hints = {n: x_of(record, n + "+hints") - x_of(record, n) for n in
             (f"{t}x{v}" for t in (64, 128, 256, 512, 1024) for v in (1, 2, 4, 8))}
    assert rows["3"]["measured"] == f"{min(hints.values()):+.3f} to {max(hints.values()):+.3f}"
    moved = set_x(fresh(record), vec48[0], 1.5 * x_of(record, vec48[0]))
    assert table_rows(text.graded(moved, (1, 2, 3, 4)))["2"]["measured"].endswith(f"{1.5 * x_of(record, vec48[0]):.3f}")


def test_a_prediction_holds_only_if_every_cell_is_inside():
    record = synthetic_record()  # 4/8 vectors 1.01-1.02x, hints +0.02, grid-stride +0.07: no knee, no Little row
    rows = table_rows(text.graded(record, (1, 2, 3, 4)))
    assert list(rows) == ["1", "2", "3", "4"] and rows["3"]["verdict"] == rows["4"]["verdict"] == "HELD"
    vec48 = [c.name for c in analysis.plan() if not c.grid_stride and c.vectors >= 4 and not c.hints]
    for n in vec48:
        set_x(record, n, 1.03)
    assert table_rows(text.graded(record, (1, 2, 3, 4)))["2"]["verdict"] == "HELD"
    row = table_rows(text.graded(set_x(record, "128x8", 1.07), (2,)))["2"]
    assert (row["inside"], row["outside"], row["verdict"]) == (f"{len(vec48) - 1} of {len(vec48)}", "128x8 1.070",
                                                               "MISSED")
    row = table_rows(text.graded(set_x(synthetic_record(), "512x4", 1.0)))["1"]  # a cell outside 1's group at 1.0
    assert "also within 1 %: 512x4 1.000" in row["outside"] and row["verdict"] == "MISSED"


def test_block_size_shares_follow_the_record(record, others):
    rows = table_rows(text.block_size(record, others))
    base = x_of(record, "256x1")
    for t, gs in ((512, "gs 4x512"), (1024, "gs 2x1024")):  # the grid-stride cell that fills the SM
        share = (x_of(record, f"{t}x1") - base) / (x_of(record, gs) - base)
        assert rows[str(t)]["grid-stride, SM full"] == gs and rows[str(t)]["share of the loop's loss"] == \
            f"{100 * share:.0f} %"
    assert rows["256"]["share of the loop's loss"] == "" and rows["64"]["grid-stride, SM full"] == "-"
    moved = set_x(fresh(record), "512x1", base + 0.5 * (x_of(record, "gs 4x512") - base))
    assert "reproduce 50 % of the grid-stride loop's loss" in text.block_size(moved, others)
    assert f"took {analysis.row_of(others['study'], '3_grid_stride_one_shot')['x_copy']:.3f}x" in \
        text.block_size(record, others)


def test_the_knee_table_and_bullets_follow_the_record(record, others):
    said = text.knee(record, others["study"])
    rows, gs = table_rows(said), [c for c in record["cells"] if c["grid_stride"]]
    read = 4 * record["problem"]["numel"]
    for kib, row in rows.items():
        group = [c for c in gs if c["occupancy"]["load_bytes_in_flight_per_sm"] == int(kib) * 1024]
        ms = sorted(c["timing"]["median_ms"] for c in group)[len(group) // 2]
        latency = int(kib) * 1024 * record["provenance"]["sm_count"] / (read / (ms * 1e-3)) * 1e9
        lo, hi = (f"{f(x_of(record, c['name']) for c in group):.3f}" for f in (min, max))
        assert row["x copy_"] == (lo if lo == hi else f"{lo} to {hi}")  # one cell, or equal ends: one number
        assert row["implied latency (ns, Little)"].split()[0] == f"{latency:.0f}"
    assert "between 8 and 16 KiB" in said and "(3 128-bit loads in its SASS)" in said
    assert "not checked here" in text.knee(record)
    moved = set_x(fresh(record), "gs 1x128", 1.5 * x_of(record, "gs 1x128"))
    assert table_rows(text.knee(moved))["2"]["x copy_"].startswith(f"{1.5 * x_of(record, 'gs 1x128'):.3f}")


def test_a_latency_bound_knee_grades_the_little_row():
    record = synthetic_record()
    for c in record["cells"]:  # time ~ 1/in-flight below 16 KiB per SM, flat above: the knee between 8 and 16
        if c["grid_stride"]:
            set_x(record, c["name"], max(1.08, 1.08 * 16 / (c["occupancy"]["load_bytes_in_flight_per_sm"] / 1024)))
    knee = analysis.gridstride_knee(record)
    assert (knee["knee_above_kib"], knee["knee_at_most_kib"]) == (8, 16)
    below = [lv for lv in knee["levels"] if not lv["flat"]]
    assert all(lv["x_times_kib"] == pytest.approx(1.08 * 16, rel=0.01) for lv in below)
    graded = text.graded(record)
    assert table_rows(graded)["Little"]["measured"] == "knee between 8 and 16"  # 26 KiB is outside it
    assert table_rows(graded)["Little"]["verdict"] == "MISSED" and list(table_rows(graded)) == ["1", "Little"]
    read = 4 * record["problem"]["numel"] / (record["roof_ms"] * 1e-3)
    assert f"alone ({read / 1e12:.2f} TB/s)" in graded
    assert f"it is {read * 0.8e-6 / 132 / 1024:.0f} KiB per SM" in graded


def test_the_slow_cell_text_follows_the_record(record, others):
    achieved = analysis.achieved_occupancy(others["beyond"])
    one = [c for c in record["cells"] if not c["grid_stride"] and not c["hints"]]
    slow = max(one, key=lambda c: x_of(record, c["name"]))
    blocks = lambda c: math.ceil(record["problem"]["numel"] / 4 / c["threads"] / c["vectors"]) / 132
    said = text.slow_cell(record, achieved)
    assert f"**{slow['name']}** ({x_of(record, slow['name']):.3f}x copy_)" in said
    assert f"launches {blocks(slow):,.0f} blocks per SM" in said
    assert f"at most {max(blocks(c) for c in one if c is not slow):,.0f}" in said
    assert f"occupancy of {achieved['64x1'][0]:.0f} % for 6_64_threads," in said
    assert f"about {achieved['64x1'][0] / 100 * 2048:.0f} resident threads" in said
    assert f"**{slow['name']}**" not in text.slow_cell(set_x(fresh(record), slow["name"], 1.0), achieved)


def test_the_kernel_listing_is_the_files_lines():
    path = KERNELS_DIR / "sweeps" / "launch_shapes.cu"
    said, lines = text.kernels(path), path.read_text().splitlines()
    spans = [tuple(map(int, s.split("-"))) for s in re.search(r"lines ([\d, -]+) \(", said).group(1).split(", ")]
    assert said.split("```cuda\n")[1].split("\n```")[0] == "\n\n".join("\n".join(lines[a - 1:b]) for a, b in spans)
    assert len(spans) == 2 and all(lines[b - 1] == "}" and lines[a - 1].startswith("template") for a, b in spans)


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
    assert f"{1.5 * x_of(record, moved['cells'][0]['name']):.3f}" in \
        [t.get_text() for ax in figures.heatmap_figures(moved)["launch"].axes for t in ax.texts]
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
