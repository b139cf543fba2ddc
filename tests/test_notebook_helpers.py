"""The step notebooks' helpers, without a GPU: each launch as the kernels run it (checked against the grids
Nsight Compute recorded), what the threads touch, the diagrams drawn from it, the kernel excerpts and diffs,
the graded predictions, and step 6's verdict tables."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from elu_study.core import fingerprint, record
from elu_study.jobs.accuracy import notebook as accuracy_nb
from elu_study.jobs.launch import notebook as launch_nb
from elu_study.jobs.model import analysis as model
from elu_study.jobs.beyond import analysis as beyond
from elu_study.jobs.sixteen import analysis as sixteen
from elu_study.jobs.study import diagrams, notebook, predictions
from elu_study.core.ncu import issue_ms
from elu_study.jobs.study.launches import (Launch, block_pass_map, kernel_knobs, launch,
                                           lines_per_instruction, persistent_runs, schedule, thread_accesses,
                                           tile_of, wave_sizes)
from elu_study.jobs.study.notebook import Study, code_lines, excerpt

pytestmark = pytest.mark.usefixtures("as_of_this_tree")  # grades without the "(earlier build)" label (tested apart)

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parent.parent
STEP_NOTEBOOKS = ("01_naive", "02_float4", "03_grid_stride", "04_fast_math", "05_streaming", "06_summary",
                  "08_beyond_copy")
MAX_TEXT_OUTPUT = 13_000  # "about 12k characters" of printed output per notebook (figures do not count)


@pytest.fixture(scope="module")
def main_record():
    return record.load()


@pytest.fixture(scope="module")
def beyond_record():
    return record.load(job="beyond")


@pytest.fixture(scope="module")
def study():
    """The notebooks' view of the reference GPU's records, as on a machine without a GPU: on a GPU with records of
    its own, ``Study()`` would read those, and the grades these tests spell out are the reference record's."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(record, "this_gpu", lambda: None)
        return Study()


def at_size(name: str, rec: dict) -> Launch:
    return launch(name, rec["provenance"]["sm_count"], rec["problem"]["numel"])


# -- launches ---------------------------------------------------------------------------------------


def test_knobs_come_from_the_kernel_file_and_the_flags():
    assert kernel_knobs("2_float4")["threads"] == "256"
    assert kernel_knobs("3_grid_stride")["ELU_GRID_THREADS"] == "512"
    assert kernel_knobs("3_grid_stride")["kSeedBlocks"] == "1152"
    assert kernel_knobs("3_grid_stride", ["-DELU_GRID_THREADS=256"])["ELU_GRID_THREADS"] == "256"
    knobs = kernel_knobs("5_streaming")
    assert (knobs["ELU_STREAMING_THREADS"], knobs["ELU_STREAMING_VECS"]) == ("128", "2")


def test_every_modelled_launch_is_the_grid_ncu_recorded(main_record, beyond_record):
    counters = record.load(job="ncu")["rows"] + beyond_record["counters"]["rows"]
    checked = 0
    for c in counters:
        try:
            lau = at_size(c["name"], main_record)
        except ValueError:  # PyTorch's ops and the peers: no kernel file of ours to model
            continue
        assert (lau.blocks, lau.threads) == (c["grid_size"], c["block_size"]), c["name"]
        assert lau.waves == pytest.approx(c["waves_per_sm"], abs=0.01), c["name"]
        checked += 1
    assert checked >= 40


def test_the_seeds_launch_in_waves(main_record):
    seed, sms = at_size("3_grid_stride", main_record), main_record["provenance"]["sm_count"]
    per_sm = 2048 // 512  # an SM holds 2048 threads; the seed's blocks have 512
    assert (seed.per_sm, seed.wave_blocks, seed.blocks) == (per_sm, per_sm * sms, 1152)
    assert wave_sizes(seed) == [per_sm * sms] * 2 + [1152 - 2 * per_sm * sms]
    assert wave_sizes(at_size("3_grid_stride_2_waves", main_record)) == [528, 528]
    assert seed.waves == pytest.approx(1152 / 528)
    assert seed.passes == pytest.approx(main_record["problem"]["numel"] / 4 / (1152 * 512))
    assert seed.bytes_per_thread == 32 and at_size("3_grid_stride_2_waves_unroll_1", main_record).bytes_per_thread == 16


def test_blocks_by_passes_marks_waves_and_the_last_partial_pass(main_record):
    seed = at_size("3_grid_stride", main_record)
    grid = block_pass_map(seed)
    assert grid.shape == (math.ceil(seed.passes), seed.blocks)
    assert set(np.unique(grid[~np.isnan(grid)])) == {1.0, 2.0, 3.0}
    left = seed.accesses - (grid.shape[0] - 1) * seed.blocks * seed.threads  # vectors in the last pass
    assert (~np.isnan(grid[-1])).sum() == math.ceil(left / seed.threads)
    assert not np.isnan(grid[:-1]).any()


def test_which_bytes_the_lanes_read(main_record):
    naive, float4, streaming = (at_size(n, main_record) for n in ("1_naive", "2_float4", "5_streaming"))
    a = thread_accesses(naive)
    assert a.shape == (32, 1) and (np.diff(a[:, 0]) == 4).all()
    b = thread_accesses(float4)
    assert b.shape == (32, 1) and (np.diff(b[:, 0]) == 16).all()
    c = thread_accesses(streaming)
    assert c.shape == (32, 2) and (c[:, 1] - c[:, 0] == streaming.threads * 16).all()
    assert (lines_per_instruction(naive), lines_per_instruction(float4), lines_per_instruction(streaming)) == (1, 4, 4)
    block = thread_accesses(float4, count=float4.threads)
    assert block.max() + 16 == float4.tile * 16  # one block's tile: 256 vectors
    first_pass = thread_accesses(at_size("3_grid_stride", main_record))  # a grid-stride thread's first vector
    assert first_pass.shape == (32, 1) and (np.diff(first_pass[:, 0]) == 16).all()


@pytest.mark.parametrize("tiles", [7, 8, 1000])
def test_tile_orders_are_permutations_and_persistent_runs_cover_once(tiles):
    blocks = np.arange(tiles)
    for order in (0, 1, 2):
        assert sorted(tile_of(order, blocks, tiles).tolist()) == list(range(tiles))
    assert tile_of(1, 0, tiles) == tiles - 1 and tile_of(2, 1, tiles) == (tiles + 1) // 2
    lau = Launch("p", 128, 1, 16, 3, 1, tiles * 128, order=3)
    begin, end = persistent_runs(lau)
    assert np.concatenate([np.arange(b, e) for b, e in zip(begin, end)]).tolist() == list(range(tiles))


def test_schedule_samples_blocks_in_launch_order(beyond_record):
    lau = at_size("6_reversed", beyond_record)
    tile, rounds = schedule(lau, samples=500)
    assert tile.shape == rounds.shape and (np.diff(rounds) > 0).all()
    assert tile[0] == lau.tiles - 1 and rounds[-1] == pytest.approx((lau.blocks - 1) / lau.wave_blocks)


def test_issue_time_is_warp_instructions_over_four_per_sm_per_cycle():
    row = {"warp_instructions": 4 * 132 * 1e9, "sm_cycles_per_s": 1e9}
    assert issue_ms(row, 132) == pytest.approx(1000.0)


# -- diagrams ---------------------------------------------------------------------------------------


def test_each_diagram_draws_from_the_launch(main_record, beyond_record):
    naive, float4 = at_size("1_naive", main_record), at_size("2_float4", main_record)
    fig = diagrams.access_figure([naive, float4])
    assert len(fig.axes) == 2 and "4 lines of 128 B" in fig.axes[1].get_title()
    seed = at_size("3_grid_stride", main_record)
    fig = diagrams.grid_stride_figure(seed)
    ncu = next(r for r in record.load(job="ncu")["rows"] if r["name"] == "3_grid_stride")  # the grid ncu saw
    passes = main_record["problem"]["numel"] / 4 / (ncu["grid_size"] * ncu["block_size"])
    assert f"{ncu['waves_per_sm']:.2f} waves; every block walks all {passes:.1f} passes" in fig.axes[0].get_title()
    names = ("6_base", "6_reversed", "6_two_streams", "6_persistent_16", "6_persistent_4")
    fig = diagrams.tile_order_figure([at_size(n, beyond_record) for n in names])
    assert [ax.get_title().split(":")[0] for ax in fig.axes] == list(names)
    fig = diagrams.issue_figure([("a", 1.0, 3.0), ("b", 2.0, 3.0)])
    assert "(33 %)" in [t.get_text().split(" ms ")[-1] for t in fig.axes[0].texts][0]
    fig = diagrams.in_flight_figure([naive, float4])  # 4 B and 16 B per thread, the SM full of threads
    assert [t.get_text().split(" x ")[1].split(";")[0] for t in fig.axes[0].texts] == ["4 B", "16 B"]


# -- kernels: excerpts and diffs ----------------------------------------------------------------------

CPP = """// opening comment
// second line
#include "x.h"

namespace ns {

// Which tile.
template <int N>
__device__ int tile_of(int b) {
  if (b) { return 1; }
  return 0;
}

int caller(int b) { return tile_of(b); }

}  // namespace ns
"""


def test_an_excerpt_is_the_opening_comment_and_whole_definitions():
    text = excerpt(CPP, "tile_of")
    assert text.startswith("// opening comment\n// second line\n// ...\n// Which tile.\ntemplate <int N>\n")
    assert text.endswith("  return 0;\n}\n") and "caller" not in text
    assert excerpt(CPP, "caller", opening=False) == "int caller(int b) { return tile_of(b); }\n"
    with pytest.raises(KeyError):
        excerpt(CPP, "missing")
    real = excerpt((ROOT / "kernels" / "6_beyond_copy.cu").read_text(), "tile_of", "step6_kernel", opening=False)
    assert "return tiles - 1 - b;" in real and "__launch_bounds__" in real and "launch_elu" not in real


def test_a_diff_leaves_comments_out_and_keeps_build_directives(study):
    assert code_lines("// a comment\n// elu-study: nvcc-flags = x\nint a;  // kept\n") == [
        "// elu-study: nvcc-flags = x", "int a;  // kept"]
    shown = study.show_diff("2_float4", "4_fast_math")
    assert repr(shown) == shown._repr_markdown_() == str(shown)  # nbval compares the text itself
    assert "```diff" in shown and "+// elu-study: nvcc-flags = --use_fast_math" in shown
    assert "+    reinterpret_cast<float4*>(y)[i] = elu::apply4(v, alpha, elu::FastExpf{});" in shown
    assert "Step 4 —" not in shown  # the file's comments are the notebook's prose, not the diff's


# -- predictions ------------------------------------------------------------------------------------


def test_grading_one_prediction_and_the_appendix(study, main_record, beyond_record):
    x = record.row(main_record, "2_float4")["x_copy"]
    records = {"study": main_record, "beyond": beyond_record}
    p = predictions.Prediction("02", "t", "2_float4", (x - 0.1, x + 0.1))
    df = predictions.frame(records, p, predictions.Prediction("02", "t", "2_float4", (x + 0.1, x + 0.2)),
                           predictions.Prediction("00", "t", "copy_", (0, 1), "pct_of_peak"),
                           predictions.Prediction("02", "t", "2_float4", (0.0, x - 0.1)))
    assert df["verdict"].tolist() == ["HELD", "MISSED (faster)", "MISSED (faster)", "MISSED (slower)"]
    assert df["measured"].tolist()[0] == f"{x:.3f}x"
    table = predictions.appendix(main_record, beyond_record)  # every notebook's one prediction, in order
    assert [q.notebook for q in table] == ["00", "01", "02", "03", "04", "05", "08"]
    assert predictions.appendix(main_record, None)[-1].notebook == "05"


def test_a_tie_under_the_records_noise_holds(main_record):
    x, z = record.row(main_record, "2_float4")["x_copy"], record.noise(main_record, "2_float4", "copy_")
    grade = [predictions.graded(main_record, predictions.Prediction("02", "t", "2_float4", b))["verdict"]
             for b in ((x + z / 2, x + 1), (x + 2 * z + 1e-6, x + 1), (x - 1, x - 2 * z - 1e-6))]
    assert grade == ["TIE (within noise)", "MISSED (faster)", "MISSED (slower)"]


def test_a_new_steps_prediction_waits_for_its_first_gpu_run(main_record, monkeypatch):
    """A new step's notebook grades its own prediction before any GPU has measured it: not graded, not an error;
    once its row is there, graded as any other."""
    p = predictions.Prediction("14", "float4 again", "8_float4_again", (1.0, 1.05))
    assert predictions.graded(main_record, p) == {
        "notebook": "14", "tried": "float4 again", "entry": "`8_float4_again`", "predicted": "1-1.05x copy_",
        "measured": "not measured yet", "verdict": "not graded"}
    monkeypatch.setitem(predictions.ENTRIES, "8_float4_again", predictions.ENTRIES["2_float4"])  # its catalogue entry
    measured = copy.deepcopy(main_record)
    measured["rows"].append({**record.row(main_record, "2_float4"), "name": "8_float4_again"})
    assert predictions.graded(measured, p)["measured"] == f"{record.row(main_record, '2_float4')['x_copy']:.3f}x"


def test_step_6s_prediction_is_graded_by_the_fastest_policy_or_order(beyond_record):
    p = predictions.of(beyond_record, "08")
    tried = [r for r in beyond_record["rows"] if r["name"].startswith(predictions.POLICY_OR_ORDER)
             and " " not in r["name"]]
    assert p.entry == min(tried, key=lambda r: r["x_copy"])["name"] and p.job == "beyond"
    moved = copy.deepcopy(beyond_record)
    record.row(moved, "6_reversed")["x_copy"] = 0.5
    assert predictions.of(moved, "08").entry == "6_reversed"


def slower_study(study: Study, name: str, factor: float = 1.5) -> Study:
    """A copy of the notebook's view whose record has ``name`` ``factor`` times as slow (median and its spread)."""
    moved = copy.copy(study)
    moved.record = copy.deepcopy(study.record)
    for r in moved.record["rows"]:
        if r["name"] == name:
            for q in ("median_ms", "p10_ms", "p90_ms"):
                r["timing"][q] *= factor
            r["timing"]["round_medians_ms"] = [v * factor for v in r["timing"]["round_medians_ms"]]
            r["x_copy"] *= factor
    return moved


def test_the_step_notebooks_grades_follow_the_record(study, capsys):
    study.grade(predictions.of(study.record, "02"))  # 2_float4 within 1.00-1.05x copy_
    x = record.row(study.record, "2_float4")["x_copy"]
    assert capsys.readouterr().out.strip() == f"Prediction for `2_float4`: 1-1.05x copy_; measured {x:.3f}x: HELD"
    slower_study(study, "2_float4").grade(predictions.of(study.record, "02"))
    assert capsys.readouterr().out.strip().endswith(f"measured {1.5 * x:.3f}x: MISSED (slower)")


def test_a_step_notebooks_table_is_the_record(study, monkeypatch):
    shown = []
    monkeypatch.setattr(notebook, "display", shown.append)
    study.table("copy_kernel", "1_naive")
    slower_study(study, "1_naive").table("copy_kernel", "1_naive")
    t = record.row(study.record, "1_naive")["timing"]
    roof = record.row(study.record, "copy_")["timing"]["median_ms"]
    for factor, out in zip((1, 1.5), shown):
        cells = next(line for line in out.splitlines() if line.startswith("| 1_naive"))
        assert [c.strip() for c in cells.split("|")[2:5]] == [f"{factor * t['median_ms']:.3f}",
                                                             f"{factor * t['median_ms'] / roof:.3f}", "yes"]


def test_relative_predictions_follow_the_record_they_are_graded_against(main_record):
    """Notebook 03 predicted whole waves within 5 % of step 2: the range moves with step 2's time."""
    f = record.row(main_record, "2_float4")["timing"]["median_ms"] / main_record["roof_ms"]
    assert predictions.of(main_record, "03").bounds == pytest.approx((f, f * 1.05))
    slow = copy.deepcopy(main_record)
    record.row(slow, "2_float4")["x_copy"] *= 1.5
    assert predictions.of(slow, "03").bounds == pytest.approx((1.5 * f, 1.5 * f * 1.05))


# -- step 6's verdict --------------------------------------------------------------------------------


def test_step_6s_fresh_processes_table_is_the_records(beyond_record):
    df = beyond.processes_frame(beyond_record)
    assert list(df.index) == list(range(1, len(beyond_record["processes"]) + 1))
    for k, p in enumerate(beyond_record["processes"], 1):
        assert df.loc[k, "copy_ ms"] == p["copy_"]["median_ms"]
        assert df.loc[k, "6_beyond_copy x copy_"] == p["6_beyond_copy"]["x_copy"]
    verdict = beyond.verdict_frame(beyond_record).iloc[0]
    z = record.noise(beyond_record, "6_beyond_copy", "copy_")
    assert verdict["noise %"] == pytest.approx(100 * z)
    slower = copy.deepcopy(beyond_record)  # step 6 within its noise of copy_: the must is not met
    record.row(slower, "6_beyond_copy")["x_copy"] = 1 - z / 2
    assert beyond.verdict_frame(slower).iloc[0][f"must {beyond.MUST:.2f}x"] == "not met"


def test_one_issue_bound_rule_in_12():
    from elu_study.core import hardware

    assert hardware.issue_bound(89.6) and not hardware.issue_bound(89.4) and hardware.issue_bound(None) is None
    assert sixteen.issue_bound is hardware.issue_bound  # notebook 12 judges with core's one rule, not a copy


# -- the notebooks ----------------------------------------------------------------------------------


def sources(stem: str) -> str:
    cells = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


@pytest.mark.parametrize("stem", STEP_NOTEBOOKS)
def test_each_step_notebook_has_a_diagram_and_one_graded_table(stem):
    code = sources(stem)
    assert "diagrams." in code, f"{stem} draws no diagram of what the threads touch"
    # one prediction, graded once; 06 grades them all in the appendix table
    graders = code.count("study.grade(")
    assert graders == 1, f"{stem} grades {graders} times"
    assert "predictions.appendix(" in code if stem == "06_summary" else "predictions.of(" in code
    assert "check_prediction" not in code


def output_texts(cells: list[dict], kinds=("text/markdown", "text/html", "text/plain"), figures: bool = True):
    """Each output's text: a stream's, else its first of ``kinds``; ``figures`` False: none of a figure's."""
    for cell in cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if figures or "image/png" not in data:
                yield "".join(out.get("text") or next((data[k] for k in kinds if k in data), ""))


@pytest.mark.parametrize("stem", (*STEP_NOTEBOOKS, "00_problem_and_floor"))
def test_outputs_stay_short(stem):
    cells = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
    total = sum(map(len, output_texts(cells, figures=False)))
    assert total <= MAX_TEXT_OUTPUT, f"{stem} prints {total} characters"


# Issue 45's read: words as runs of letters, hyphens and underscores (a figure's "<Figure ...>" line aside), decimal
# numbers, and output lines that grade a prediction.
READ = {"words": 15_000, "main path words": 8_000, "decimals": 1_000, "graded lines": 40, "markdown words": 1_500}
MAIN_PATH = ("00_problem_and_floor", "01_naive", "02_float4", "03_grid_stride", "04_fast_math", "05_streaming",
             "08_beyond_copy")  # from the problem to the fastest kernel


def reading(path: Path) -> dict[str, int]:
    """One notebook's markdown words, output words, decimals and graded lines."""
    cells = json.loads(path.read_text())["cells"]
    md = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    texts = (re.sub(r"<Figure[^>]*>", "", t) for t in output_texts(cells, ("text/markdown", "text/plain")))
    out, words = "\n".join(texts), re.compile(r"[A-Za-z_\-]+")
    graded = [line for line in out.splitlines() if re.search(r"\b(held|missed|HELD|MISSED|hit|miss)\b", line)
              and re.search(r"predict|grade|held|missed", line, re.I)]
    return {"markdown": len(words.findall(md)), "output": len(words.findall(out)),
            "decimals": len(re.findall(r"\d+\.\d+", md + "\n" + out)), "graded": len(graded)}


def test_the_study_reads_in_about_forty_minutes():
    """Issue 45's budgets: the notebooks' markdown and output in words, the main path's share, decimals, graded lines,
    and no notebook's markdown past a sitting's read."""
    counts = {p.stem: reading(p) for p in sorted((ROOT / "notebooks").glob("*.ipynb"))}
    assert set(MAIN_PATH) <= set(counts)
    total = {k: sum(c[k] for c in counts.values()) for k in ("markdown", "output", "decimals", "graded")}
    assert total["markdown"] + total["output"] <= READ["words"], total
    assert sum(counts[n]["markdown"] + counts[n]["output"] for n in MAIN_PATH) <= READ["main path words"]
    assert total["decimals"] <= READ["decimals"] and total["graded"] <= READ["graded lines"], total
    assert max(c["markdown"] for c in counts.values()) <= READ["markdown words"], counts


def test_reading_counts_what_the_issue_counts(tmp_path):
    cell = {"cell_type": "code", "source": [], "outputs": [
        {"text": ["Prediction for `x`: 1-1.05x copy_; measured 0.998x: HELD\n<Figure size 900x550 with 1 Axes>"]}]}
    md = {"cell_type": "markdown", "source": ["The roof, `copy_`: 3.042 ms and 0.5x."]}
    (tmp_path / "a.ipynb").write_text(json.dumps({"cells": [md, cell]}))
    assert reading(tmp_path / "a.ipynb") == {"markdown": 6, "output": 9, "decimals": 4, "graded": 1}  # "1-1.05x": "-", "x"


def test_a_range_narrower_than_the_shown_digits_keeps_its_two_ends_apart(main_record):
    """Notebook 04's 'within step 2's noise' spans less than 0.001x copy_: its ends stay apart."""
    ranges = (("2_float4", (1.00262, 1.00308), "x_copy"), ("2_float4", (1.0, 1.05), "x_copy"),
              ("copy_", (84, 88), "pct_of_peak"))
    assert [predictions.graded(main_record, predictions.Prediction("04", "t", n, b, m))["predicted"]
            for n, b, m in ranges] == ["1.0026-1.0031x copy_", "1-1.05x copy_", "84-88 % of peak"]


def launch_verdicts(rec: dict) -> list[str]:
    """The verdict column of notebook 10's graded table, a cell per row."""
    return [line.split(" | ")[-1].removesuffix(" |") for line in str(launch_nb.graded(rec)).splitlines()[2:]]


@pytest.mark.parametrize("job, variant, other, verdicts", [
    ("study", "1_naive", "2_float4", lambda rec: [predictions.graded(rec, predictions.of(rec, "01"))["verdict"]]),
    ("study", "2_float4", "1_naive", lambda rec: [predictions.graded(rec, predictions.of(rec, "04"))["verdict"]]),
    ("beyond", "6_beyond_copy", "2_float4", lambda rec: list(beyond.verdict_frame(rec).iloc[0, -2:])),
    ("accuracy", "1_naive", "2_float4", lambda rec: [accuracy_nb.prediction(rec).loc["1_naive", "grade"]]),
    ("launch", "sweeps/launch_shapes", "2_float4", launch_verdicts),
    ("model", "6_beyond_copy", "7_sixteen_bits",
     lambda rec: [g["verdict"] for g in model.grades(rec) if "float32" in g["what"]]),
    ("model", "7_sixteen_bits", "6_beyond_copy",
     lambda rec: [g["verdict"] for g in model.grades(rec) if "bfloat16" in g["what"]]),
])
def test_every_grade_says_when_its_kernels_build_changed_since_the_record(job, variant, other, verdicts, monkeypatch):
    """A prediction graded on a record whose kernel file's build changed since it was measured is the earlier
    build's: each job's grade says "(earlier build)" where a kernel it grades (or whose numbers set its bounds:
    notebook 04's are step 2's) changed, and not where another kernel of the record did (``tables.as_built``)."""
    rec = record.load(job=job)
    monkeypatch.setattr(fingerprint, "earlier_variants", lambda r: {variant})
    assert verdicts(rec) and all(v.endswith("(earlier build)") for v in verdicts(rec))
    monkeypatch.setattr(fingerprint, "earlier_variants", lambda r: {other})
    assert not any("(earlier build)" in v for v in verdicts(rec))


def test_without_a_toolkit_a_row_measured_without_its_sass_says_so(capsys):
    """Study.inspect falls back on the record's SASS where nothing compiles; step 7's batches record none
    (harness.measure(sass=False)): a clear error naming the row, not a crash inside KernelReport."""
    from elu_study.jobs.study.notebook import Study

    study = Study(job="sixteen")
    study.can_compile = False
    name = "7_sixteen_bits bfloat16"
    record.row(study.record, name)["sass"] = None  # as a batch measured with sass=False holds it
    with pytest.raises(ValueError, match=f"{name}: no toolkit here"):
        study.inspect(name)
    main = Study()  # the main record keeps each build's SASS: read back as it was recorded
    main.can_compile = False
    assert main.inspect("2_float4").function == record.row(main.record, "2_float4")["sass"]["function"]
