"""The records and the main study's report: the record files (round trip, stamps, strict JSON), the study's
tables, caption and checks as the README and notebook 06 print them (each number computed here again from the raw
timings, and each seen to move when the record moves), the README read as a whole (its first screen's table of the
steps against the records), rows over their own roofs, and step 6's verdict row."""

import copy
import itertools
import json
import re

import pandas as pd
import pytest

from elu_study.core import derived, entries, fingerprint, record
from elu_study.core.derived import annotate
from elu_study.core.entries import (BYTES_PER_ELEMENT, DTYPES16, ENTRIES, KERNELS, NOT_MEASURED, STEPS, Entry, roof_for,
                                   study_entries)
from elu_study.core.hardware import bytes_moved
from elu_study.core.paths import NOTEBOOKS_DIR, README, RESULTS_DIR
from elu_study.core.tables import markdown
from elu_study.jobs import report
from elu_study.jobs.beyond import analysis as beyond_analysis
from elu_study.jobs.report import front
from elu_study.jobs.study import report as study_report
from elu_study.jobs.study.report import README_BLOCK, caption, frame
from elu_study.testing.records import assert_rows_are_the_catalogues, without_sustained


def row(name, kind, ms, check=True, dtype="float32", direction="forward"):
    timing = {"median_ms": ms, "p10_ms": ms * 0.99, "p90_ms": ms * 1.01, "min_ms": ms * 0.98, "runs": 100,
              "round_medians_ms": [ms, ms * 1.001]}
    chk = {"passed": True, "trials": 3, "unwritten": 0, "max_abs_err_vs_torch": 1e-7,
           "max_abs_err_vs_fp64": 2e-7, "max_rel_err_vs_fp64": 3e-7} if check else None
    return {"name": name, "kind": kind, "what": name, "timing": timing, "check": chk,
            "sass": None, "extra": {}, "mode": "" if dtype == "float32" else dtype, "dtype": dtype,
            "direction": direction}


def fake_record(gpu="NVIDIA H200"):
    rec = {
        "provenance": {"gpu": gpu, "sm_count": 132, "driver": "1", "cuda_runtime": "13.0", "torch": "2",
                       "nvcc": "13.0", "date_utc": "2026-11-29T00:00:00+00:00"},
        "problem": {"shape": [4096, 393216], "dtype": "float32", "alpha": 1.0, "numel": 1_610_612_736},
        "peak_bytes_per_s": 4.8e12,
        "peak_source": "H200 datasheet",
        "method": {"rounds": 2},
        "rows": [row("copy_", "baseline", 3.0, check=False), row("1_naive", "step", 6.0)],
    }
    return annotate(rec)


@pytest.fixture(scope="module")
def study_record():
    return record.load(record.REFERENCE_GPU)


@pytest.fixture(scope="module")
def counters():
    return record.load(record.REFERENCE_GPU, "ncu")


def slower(rec: dict, factor: float = 1.5, names=None) -> dict:
    """A copy of the record whose rows (all but copy_, or ``names``) took ``factor`` times as long."""
    def scaled(v):
        return [scaled(x) for x in v] if isinstance(v, list) else v * factor

    rec = copy.deepcopy(rec)
    for r in rec["rows"]:
        if (r["name"] != "copy_") if names is None else (r["name"] in names):
            r["timing"].update({k: scaled(v) for k, v in r["timing"].items() if k.endswith("_ms")})
    return annotate(rec)


def x_copy(rec: dict, name: str) -> float:
    """An entry's time over copy_'s, from the two medians (not the record's derived column)."""
    return record.row(rec, name)["timing"]["median_ms"] / record.row(rec, "copy_")["timing"]["median_ms"]


def first_table(text: str) -> list[list[str]]:
    """The cells of the first pipe table in a text, header and separator rows included."""
    lines = itertools.dropwhile(lambda line: not line.startswith("|"), text.splitlines())
    return [[c.strip() for c in line.strip("|").split("|")] for line in itertools.takewhile(
        lambda line: line.startswith("|"), lines)]


def table_rows(table: str) -> dict[str, list[str]]:
    """The first pipe table's cells by entry (its first column)."""
    return {c[0]: c[1:] for c in first_table(table)[2:]}


def table_cells(table: str) -> dict[str, dict[str, str]]:
    """The first pipe table's cells by entry (its first column) and header: whatever columns the table has gained."""
    cells = first_table(table)
    return {c[0]: dict(zip(cells[0][1:], c[1:])) for c in cells[2:]}


# -- the record files ---------------------------------------------------------------------------------------


def test_annotate_derives_bandwidth_floor_and_roof():
    rec = fake_record()
    assert rec["floor_ms"] == pytest.approx(bytes_moved(rec["problem"]["numel"]) / 4.8e12 * 1e3)
    assert rec["roof_ms"] == 3.0
    naive = record.row(rec, "1_naive")
    assert naive["x_copy"] == pytest.approx(2.0)
    assert naive["tbps"] == pytest.approx(12.884901888 / 6.0, rel=1e-9)
    assert naive["pct_of_peak"] == pytest.approx(100 * rec["floor_ms"] / 6.0, rel=1e-9)


def test_save_and_load_round_trip(tmp_path, study_record):
    rec = copy.deepcopy(study_record)
    rec["provenance"]["gpu"] = "NVIDIA H100 80GB HBM3"
    path = record.save(rec, results_dir=tmp_path)
    assert path == tmp_path / "nvidia-h100-80gb-hbm3.json"
    saved = json.loads(path.read_text())
    assert next(iter(saved)) == "schema"  # the stamp is the file's first key
    assert not any("x_copy" in r for r in saved["rows"])  # derived columns are computed on load, never stored
    loaded = record.load("NVIDIA H100 80GB HBM3", results_dir=tmp_path)
    assert loaded == {"schema": {"job": "study", "version": record.VERSIONS["study"]}, **json.loads(json.dumps(rec))}
    with pytest.raises(record.RecordError, match="nvidia-b200"):
        record.load("NVIDIA B200", results_dir=tmp_path)
    assert record.load("NVIDIA B200", results_dir=tmp_path, required=False) is None


def test_every_job_has_its_own_file_name():
    paths = {record.record_path("NVIDIA H200", job) for job in record.VERSIONS}
    assert len(paths) == len(record.VERSIONS)
    assert record.record_path("NVIDIA H200").name == "nvidia-h200.json"
    assert record.record_path("nvidia-h200", "sizes").name == "nvidia-h200-sizes.json"
    with pytest.raises(record.RecordError, match="unknown record job 'size'"):
        record.record_path("nvidia-h200", "size")


def test_a_record_of_an_unknown_version_is_refused_naming_the_file_and_both_versions(tmp_path):
    path = record.save(fake_record(), "sizes", results_dir=tmp_path)
    stamped = json.loads(path.read_text())
    stamped["schema"]["version"] = record.VERSIONS["sizes"] + 1
    path.write_text(json.dumps(stamped))
    with pytest.raises(record.RecordError) as err:
        record.load("NVIDIA H200", "sizes", results_dir=tmp_path)
    text = str(err.value)
    assert str(path) in text and f"version {record.VERSIONS['sizes'] + 1}" in text
    assert f"reads version {record.VERSIONS['sizes']}" in text


@pytest.mark.parametrize("stamp", [None, "elu-study-sizes/1", 1, {"job": "launch", "version": 1}])
def test_a_record_without_this_jobs_stamp_is_refused(tmp_path, stamp):
    path = tmp_path / "nvidia-h200-sizes.json"
    body = {"provenance": {"gpu": "NVIDIA H200"}}
    path.write_text(json.dumps(body if stamp is None else {"schema": stamp, **body}))
    with pytest.raises(record.RecordError, match="not a 'sizes' record"):
        record.load("NVIDIA H200", "sizes", results_dir=tmp_path)


def test_every_committed_record_carries_the_stamp_this_code_reads():
    committed = sorted(RESULTS_DIR.glob("*.json"))
    assert committed
    for path in committed:  # every GPU's: results/<gpu>.json is the study's, results/<gpu>-<job>.json another job's
        job = next((j for j in record.VERSIONS if j != "study" and path.stem.endswith(f"-{j}")), "study")
        assert record.read(path, job)["schema"] == {"job": job, "version": record.VERSIONS[job]}


def test_records_are_strict_json_with_numbers_on_one_line():
    text = record.dumps({"a": [1.0, float("nan"), 3.0], "b": {"c": float("inf")}})
    assert json.loads(text) == {"a": [1.0, None, 3.0], "b": {"c": None}}
    assert '"a": [1.0, null, 3.0]' in text


def test_unknown_row_names_the_rows_there():
    with pytest.raises(KeyError, match="1_naive"):
        record.row(fake_record(), "9_missing")


def test_readme_block_is_replaced_not_appended(tmp_path):
    readme = tmp_path / "README.md"
    begin, end = record.block_markers("results-table")
    readme.write_text(f"intro\n{begin}\nold\n{end}\noutro\n")
    block = markdown(frame(fake_record()))
    record.write_block("results-table", block, readme=readme)
    record.write_block("results-table", block, readme=readme)
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n")
    assert "\nold\n" not in text and text.count("\n| 1_naive ") == 1
    with pytest.raises(ValueError, match="no <!-- sizes:begin -->"):
        record.write_block("sizes", block, readme=readme)


def test_recorded_reference_run_is_complete(study_record):
    """The committed H200 record holds every entry the study defines, each checked, with provenance."""
    rec = study_record
    for key in ("gpu", "sm_count", "driver", "cuda_runtime", "torch", "nvcc", "date_utc"):
        assert rec["provenance"][key], key
    assert_rows_are_the_catalogues(rec, study_entries())
    for r in rec["rows"]:
        assert r["timing"]["runs"] >= 20 and r["timing"]["p10_ms"] <= r["timing"]["median_ms"] <= r["timing"]["p90_ms"]
        if ENTRIES[r["name"]].checked:
            assert r["check"]["passed"] and r["check"]["unwritten"] == 0, r["name"]


# -- the study's table, caption and checks, computed again and perturbed -----------------------------------------


def test_the_table_prints_every_measurement_from_the_timings():
    naive = table_rows(markdown(frame(fake_record())))["1_naive"]  # what, ms, TB/s, % of peak, x copy_, p90/median, ...
    floor = bytes_moved(1_610_612_736) / 4.8e12 * 1e3
    assert naive[1:6] == ["6.000", f"{12.884901888 / 6:.2f}", f"{100 * floor / 6:.1f}", "2.000", "1.010"]
    assert naive[6] == "yes"


def test_the_readme_block_is_the_caption_and_checks_of_the_record(study_record):
    """The entries' table and the other figures are notebook 06's (the first screen tabulates the steps): the block
    holds no table and one figure, the record's times."""
    block = study_report.readme_block(study_record)
    assert not table_rows(block)
    assert re.findall(r"!\[[^]]*\]\(([^)]+)\)", block) == [record.readme_link(record.figure_path(record.REFERENCE_GPU, ""))]
    begin, end = record.block_markers(README_BLOCK)
    assert block == README.read_text().split(begin)[1].split(end)[0].strip()
    runs = sorted(r["timing"]["runs"] for r in study_record["rows"])
    assert f"Median of {runs[0]}-{runs[-1]} CUDA-event-timed runs" in caption(study_record)
    checked = sum(1 for r in study_record["rows"] if r["kind"] in ("step", "baseline", "peer") and r["check"])
    assert f"All {checked} ELU-computing steps, baselines and peers (float32) pass" in block


def test_a_slower_record_moves_every_number_of_the_readme_block(study_record):
    """The block's caption quotes the run: its measured stream floor (read_only + write_only) follows the record."""
    floor = study_record["stream_floor_ms"]
    assert f"measured stream floor {floor:.2f} ms" in study_report.readme_block(study_record)
    moved = study_report.readme_block(slower(study_record))
    assert f"measured stream floor {1.5 * floor:.2f} ms" in moved and f"{floor:.2f} ms (read_only" not in moved
    failed = copy.deepcopy(study_record)
    record.row(failed, "2_float4")["check"]["passed"] = False
    assert "Correctness checks FAILED for `2_float4`." in study_report.readme_block(failed)


# -- the README as a read: first screen, length, sentences, and every block regenerated from the records ---------
FIRST_SCREEN = 60
DASH = " \u2014 "  # a notebook's title follows the study's name and a dash


def prose_sentences(text: str) -> list[str]:
    """The README's prose, sentence by sentence: code, tables, images, headings and markers left out; a bullet
    or a paragraph is one unit, split after a full stop, question or exclamation mark."""
    units, current, fence = [], [], False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = not fence
        if fence or stripped.startswith(("```", "|", "![", "<!--", "#")) or not stripped or stripped.startswith("- "):
            units.append(" ".join(current))
            current = [stripped[2:]] if stripped.startswith("- ") and not fence else []
            continue
        current.append(stripped)
    units.append(" ".join(current))
    return [s for u in units for s in re.split(r"(?<=[.!?])\s+", u) if s.strip()]


def test_readme_opens_with_the_verdict_then_the_table_the_figure_and_every_notebook():
    head = "\n".join(README.read_text().splitlines()[:FIRST_SCREEN])
    assert "<!-- front:end -->" in head and head.split("<!-- front:begin -->\n")[1].startswith("**Verdict.**")
    figure = f"]({record.readme_link(record.figure_path(record.REFERENCE_GPU, front.FIGURE))})"
    assert head.index("**Verdict.**") < head.index("| entry |") < head.index(figure) < head.index("**The notebooks**")
    for notebook in sorted(NOTEBOOKS_DIR.glob("*.ipynb")):  # each by its first heading, read here again
        cells = json.loads(notebook.read_text())["cells"]
        title = next(c for c in cells if c["cell_type"] == "markdown")["source"][0].strip().lstrip("# ")
        assert f"- [{title.split(DASH)[-1]}](notebooks/{notebook.name})" in head, notebook.name


def test_a_new_notebook_joins_the_list_by_its_first_heading(tmp_path):
    for name, cells in (("01_b.ipynb", [{"cell_type": "code", "source": ["# a comment, not a heading"]},
                                         {"cell_type": "markdown", "source": ["Some words\n", "## 1. Second"]}]),
                        ("00_a.ipynb", [{"cell_type": "markdown", "source": ["# Study \u2014 0. First\n", "text"]}])):
        (tmp_path / name).write_text(json.dumps({"cells": cells}))
    assert front.notebooks(tmp_path) == [("0. First", "00_a.ipynb"), ("1. Second", "01_b.ipynb")]


FIRST_SCREEN_NUMBERS = 20  # issue 25: at most this many numbers in the prose above the README's first "## " heading
PROSE_WORDS = 1200  # the README, its steps' table and notebook list aside (each grows a line per step): a few minutes' read


# The steps table's last column: the worst ulp at each alpha of the accuracy record, in its order.
ULP = "worst ulp, alpha " + " / ".join(record.load(record.REFERENCE_GPU, "accuracy")["runs"])


def numbers_in(markdown: str) -> list[str]:
    """The numbers a reader meets in markdown: digits standing alone ("3.012", "0.985x", "(4096,"), not inside a name
    (H200, float32, 6_beyond_copy) nor in a link's or an image's target."""
    prose = re.sub(r"\]\([^)]*\)", "]", markdown)
    return re.findall(r"(?<![\w.^])\d+(?:[.,]\d+)*(?=x\b|(?!\w|[.,]\d))", prose)


def test_numbers_in_counts_what_a_reader_counts():
    assert numbers_in("takes 2.979 ms (0.985x `copy_`) on an H200, float32, [x](notebooks/00_a.ipynb) 2^24, 1.39.") == [
        "2.979", "0.985", "2", "1.39"]


def test_the_first_screens_prose_holds_at_most_twenty_numbers_and_a_three_sentence_verdict_in_ms():
    """Numbers go in the table (issue 45); the prose around it, the notebooks' titles aside, holds few."""
    text = README.read_text()
    head = text[:text.index("\n## ")]
    prose = "\n".join(line for line in head.splitlines() if not line.startswith(("|", "- [")))
    found = numbers_in(prose)
    assert 0 < len(found) <= FIRST_SCREEN_NUMBERS, found
    verdict = head[head.index("**Verdict.**"):].split("\n\n")[0]
    # in at most three sentences: F.elu, copy_, the two floors and the fastest kernel in ms
    assert len(prose_sentences(verdict)) <= 3 and len(re.findall(r"\d\.\d{2,3} ms", verdict)) >= 5, verdict
    study = record.load(record.REFERENCE_GPU)
    best = min((r for r in study["rows"] if r["kind"] == "step"), key=lambda r: r["x_copy"])
    assert f"`{best['name']}`, takes {best['timing']['median_ms']:.3f} ms" in verdict
    first = table_cells(head)[best["name"]][ULP].split(" / ")[0]  # the table's worst ulp of it, at the first alpha
    assert f"within {first} ulp" in verdict


def prose_words(text: str) -> int:
    """Words (as `wc -w` counts) outside the tables' rows and the notebooks' list: what a new step does not add to."""
    return len("\n".join(line for line in text.splitlines() if not line.startswith(("|", "- ["))).split())


def test_readme_is_short_and_its_sentences_are_readable():
    text = README.read_text()
    assert prose_words(text) < PROSE_WORDS
    sentences = prose_sentences(text)
    assert len(sentences) > 40  # the parser found the prose
    long = [s for s in sentences if len(s.split()) > 40]
    assert not long, long


def test_prose_sentences_skip_code_and_tables():
    text = "A short one. Another\none.\n\n```bash\nnot prose at all here\n```\n| a | b |\n- a bullet. Two."
    assert prose_sentences(text) == ["A short one.", "Another one.", "a bullet.", "Two."]


def test_report_regenerates_the_readme_byte_for_byte(tmp_path):
    """Every block of the README is what ``python -m elu_study report`` writes from the committed records."""
    text = README.read_text()
    blocks = report.blocks(record.REFERENCE_GPU)
    assert set(re.findall(r"<!-- ([\w-]+):begin -->", text)) == set(blocks)
    copy = tmp_path / "README.md"
    copy.write_text(text)
    for name, block in blocks.items():
        record.write_block(name, block, copy)
    assert copy.read_text() == text


def test_test_command_is_the_first_pytest_line():
    lines = README.read_text().splitlines()
    assert next(line for line in lines if "-m pytest" in line) == "python -m pip install -e '.[test]' && python -m pytest"


# -- step 6's verdict row, as the record says it ----------------------------------------------------------------
def test_the_beyond_block_is_step_6s_verdict_over_the_recorded_run_and_every_fresh_process(as_of_this_tree):
    rec = record.load(record.REFERENCE_GPU, "beyond")
    text = beyond_analysis.readme_block(rec)
    assert f"on {rec['provenance']['date_utc'][:10]};" in text
    xs = [record.row(rec, "6_beyond_copy")["x_copy"]] + [p["6_beyond_copy"]["x_copy"] for p in rec["processes"]]
    cells = table_rows(text)["6_beyond_copy (step 6)"]
    # four decimals: the aim's edge (0.98) falls between runs that three would print alike
    assert cells[0] == f"{xs[0]:.4f}" and cells[2] == " ".join(f"{v:.4f}" for v in xs[1:])
    k = sum(v <= beyond_analysis.AIM for v in xs)
    assert cells[4] == ("reached in every one" if k == len(xs) else f"reached in {k} of {len(xs)}")
    moved = copy.deepcopy(rec)
    moved["processes"][0]["6_beyond_copy"]["x_copy"] = 1.01  # one process over the must, and over the aim
    cells = table_rows(beyond_analysis.readme_block(moved))["6_beyond_copy (step 6)"]
    assert cells[3] == "not met" and cells[4] == f"reached in {k - (xs[1] <= beyond_analysis.AIM)} of {len(xs)}"


def test_an_aim_reached_in_no_run_says_none():
    assert beyond_analysis.reached([0.99, 0.991]) == "reached in none"
    assert beyond_analysis.reached([0.979, 0.99]) == "reached in 1 of 2"
    assert beyond_analysis.reached([0.979, 0.978]) == "reached in every one"


def test_the_steps_table_is_the_records(study_record):
    """copy_, every catalogue step and F.elu, then per 16-bit dtype its copy_, step 7 and F.elu: each number from the
    raw medians, each float32 row's worst ulp its kernel file's formula's over every input, each 16-bit row's
    exhaustive check, a roof's none (it computes no ELU)."""
    table = table_rows(report.blocks(record.REFERENCE_GPU)["front"])
    sixteen = [f"{name} {dtype}" for dtype in DTYPES16 for name in ("copy_", "7_sixteen_bits", "F.elu")]
    assert list(table) == ["copy_"] + [e.name for e in STEPS] + ["F.elu"] + sixteen
    runs = record.load(record.REFERENCE_GPU, "accuracy")["runs"]
    held = {r["name"] for r in study_record["rows"]}
    for name, cells in table_cells(report.blocks(record.REFERENCE_GPU)["front"]).items():
        ms, x, tbps, ulp = (cells[k] for k in ("ms", "x own copy_", "TB/s", ULP))
        entry = ENTRIES[name]
        if name not in held:  # a step added to the catalogue since the record was measured
            assert [ms, x, tbps, ulp] == ["", "", "", NOT_MEASURED], name
            continue
        r = record.row(study_record, name)
        median = r["timing"]["median_ms"]
        roof = record.row(study_record, roof_for("forward", entry.dtype))["timing"]["median_ms"]
        moved = bytes_moved(study_record["problem"]["numel"]) * BYTES_PER_ELEMENT[entry.mode] / 4
        assert [ms, x, tbps] == [f"{median:.3f}", f"{median / roof:.3f}", f"{moved / median / 1e9:.2f}"], name
        if name.split()[0] == "copy_":
            assert ulp == "a copy", name
        elif entry.dtype != "float32":  # PyTorch's own row is the reference; the committed step 7 matched it
            reference = name.startswith("F.elu ")
            assert ulp == ("the reference" if reference else "bit-exact"), name
            assert reference or r["exhaustive"]["mismatches"] == 0
        else:
            formula = KERNELS[entry.variant].formula if entry.variant else name
            worst = [max(side["ulp"] for side in run["formulas"][formula]["max_ulp"].values()) for run in runs.values()]
            assert [float(u.replace(",", "")) for u in ulp.split(" / ")] == pytest.approx(worst, rel=5e-3), name


def test_every_gpu_with_a_main_record_gets_its_line_from_that_record(tmp_path):
    """The README's GPU table: one line per GPU with a main record, the reference first, each cell from that GPU's
    own record (copy_'s median, its floors, each kernel over its own dtype's copy_, short / sustained, the rows capped
    under sustained load, the builds changed since); a record timed without the sustained protocol shows the short
    ratio alone, and one without a datasheet figure or stream rows says so instead of failing."""
    slugs = record.gpus()
    assert slugs[0] == record.REFERENCE_GPU and len(slugs) >= 2  # the H200's and the H100's are committed
    best = front.numbers()["best"]["name"]
    df = front.gpus_frame(best)
    assert list(df.index) == [record.load(s)["provenance"]["gpu"] for s in slugs]
    shown = [best, "F.elu", *(f"7_sixteen_bits {d}" for d in DTYPES16)]
    assert list(df.columns)[2:6] == shown
    for slug in slugs:
        rec = record.load(slug)
        line = df.loc[rec["provenance"]["gpu"]]
        assert line["copy_ ms"] == record.row(rec, "copy_")["timing"]["median_ms"]
        assert line["floors ms, streams / datasheet"] == f"{rec['stream_floor_ms']:.2f} / {rec['floor_ms']:.2f}"
        for name in shown:  # over its own dtype's copy_: a 16-bit row's ratio is not its x_copy
            r = record.row(rec, name)
            roof = record.row(rec, roof_for("forward", r["dtype"]))
            short = r["timing"]["median_ms"] / roof["timing"]["median_ms"]
            held = r["timing"]["sustained"]["median_ms"] / roof["timing"]["sustained"]["median_ms"]
            assert line[name] == f"{short:.3f} / {held:.3f}", (slug, name)
        held = [r for r in rec["rows"] if r["timing"].get("sustained")]
        capped = sum((r["timing"]["sustained"]["capped_fraction"] or 0) >= 0.5 for r in held)
        assert line["at the power limit"] == f"{capped} of {len(held)} sustained rows"
        assert line["kernel builds changed since"] == (front.changed_kernels(rec) or "none")
    short = without_sustained(record.load(slugs[1]))
    short["rows"] = [r for r in short["rows"] if r["name"] not in ("read_only", "write_only")]  # no stream floor
    short["peak_bytes_per_s"] = None  # a GPU without a datasheet figure
    record.save(short, "study", tmp_path)
    (tmp_path / f"{slugs[1]}-model.json").write_text(json.dumps({"schema": {"job": "model", "version": 4}}))
    assert record.gpus(tmp_path) == [slugs[1]]  # by the stamp: the model record is not a GPU
    line = front.gpus_frame(best, tmp_path).iloc[0]
    assert line[best] == f"{record.row(short, best)['x_roof']:.3f}"
    assert line["floors ms, streams / datasheet"] == "n/a / n/a"
    assert line["at the power limit"] == "0 of 0 sustained rows"


def test_the_steps_table_and_the_verdict_follow_the_records(study_record, monkeypatch):
    acc = record.load(record.REFERENCE_GPU, "accuracy")
    moved = front.steps_frame(slower(study_record, 1.5, ["2_float4"]), acc)
    assert moved.loc["2_float4", "ms"] == pytest.approx(1.5 * record.row(study_record, "2_float4")["timing"]["median_ms"])
    differs, wrong = copy.deepcopy(acc), copy.deepcopy(study_record)
    differs["runs"]["1.0"]["same_as"]["2_float4"]["n_differ"] = 5  # no longer step 1's results bit for bit
    record.row(wrong, "7_sixteen_bits float16")["exhaustive"]["mismatches"] = 3
    df = front.steps_frame(wrong, differs)
    assert df.loc["2_float4", "worst ulp"] == "5 inputs differ from 1_naive"
    assert df.loc["7_sixteen_bits float16", "worst ulp"] == "3 mismatches"
    load = record.load
    monkeypatch.setattr(record, "load", lambda gpu, job="study", **kw: wrong if job == "study" else load(gpu, job, **kw))
    assert "NOT bit for bit PyTorch's results" in front.blocks()["front"]


def test_the_table_says_which_kernel_files_changed_since_its_record(study_record, monkeypatch):
    """The first screen names the table's kernel files whose build (sources, headers, flags) no longer matches the
    digest the record holds, "every kernel's build" where all do, and says nothing where every build is current."""
    rec = copy.deepcopy(study_record)
    builds = rec["fingerprint"]["builds"]
    for key in builds:  # as if measured from this tree
        builds[key] = fingerprint.build_digest(*fingerprint.parse_build_key(key))
    assert front.changed_kernels(rec) == ""
    load = record.load
    monkeypatch.setattr(record, "load", lambda gpu="nvidia-h200", job="study", **kw: rec if job == "study"
                        else load(gpu, job, **kw))
    assert "Since this record" not in front.blocks()["front"]
    builds["6_beyond_copy"] = "an earlier digest"
    assert front.changed_kernels(rec) == "the builds of `6_beyond_copy`"
    assert "Since this record, the builds of `6_beyond_copy` changed: these rows are the earlier builds'." in \
        front.blocks()["front"]
    for key in builds:
        builds[key] = "an earlier digest"
    assert front.changed_kernels(rec) == "every kernel's build"
    assert "Since this record, every kernel's build changed: these rows" in front.blocks()["front"]
    grid = {e.name for e in entries.ENTRIES.values() if e.variant == "3_grid_stride"}  # as if no GPU had measured it
    rec["rows"] = [r for r in rec["rows"] if r["name"] not in grid]
    for key in [k for k in builds if fingerprint.parse_build_key(k)[0] == "3_grid_stride"]:
        del builds[key]
    assert front.changed_kernels(rec) == "every kernel's build"
    table = {e.name for e in front.step_entries()}
    rec["rows"] = [r for r in rec["rows"] if r["name"] not in table]  # none of the table's kernels measured
    assert front.changed_kernels(rec) == ""


def test_with_sustained_timings_the_table_the_verdict_and_a_figure_give_both_regimes(study_record, monkeypatch, tmp_path):
    """Issue 46's headline: where rows hold the sustained protocol, each step's ratio under sustained load is its
    sustained time over its own roof's, beside the short one, with its energy per pass; the verdict says both."""
    import matplotlib.pyplot as plt

    short = without_sustained(study_record)  # whichever protocols the committed record holds
    rec, acc = copy.deepcopy(short), record.load(record.REFERENCE_GPU, "accuracy")
    held = {"copy_": (3.10, 1500.0, 2.2), "6_beyond_copy": (3.07, 1530.0, 2.0), "F.elu": (3.30, 1480.0, 2.4)}
    for name, (ms, mhz, joules) in held.items():
        record.row(rec, name)["timing"] |= {"sm_clock_mhz": 1980.0, "sustained": {
            "median_ms": ms, "p10_ms": ms, "p90_ms": ms, "runs": 400, "settle_s": 3.0, "settled": True,
            "sm_clock_mhz": mhz, "power_w": 699.0, "energy_j": joules, "capped_fraction": 1.0}}
    rec = derived.annotate(rec)  # as record.read does: the sustained ratio is derived, never stored
    df = front.steps_frame(rec, acc)
    assert df.loc["6_beyond_copy", "x own copy_, sustained"] == pytest.approx(3.07 / 3.10)
    assert df.loc["F.elu", "J per pass, sustained"] == 2.4
    assert pd.isna(df.loc["2_float4", "x own copy_, sustained"])  # not timed so: an empty cell, not a guess
    assert "x own copy_, sustained" not in front.steps_frame(short, acc)  # no sustained rows: no column
    load = record.load
    others = {"beyond": copy.deepcopy(record.load(job="beyond"))}  # step 6's own job ran it sustained too
    record.row(others["beyond"], "6_beyond_copy")["timing"]["sustained"]["median_ms"] = 3.04  # x 3.01 / 3.04
    record.row(others["beyond"], "copy_")["timing"]["sustained"] |= {"median_ms": 3.01, "capped_fraction": 1.0}
    for name in ("6_beyond_copy", "copy_"):  # that run at the power limit, its copy_ too
        record.row(others["beyond"], name)["timing"]["sustained"]["capped_fraction"] = 1.0
    others["beyond"] = derived.annotate(others["beyond"])
    monkeypatch.setattr(record, "load", lambda gpu="nvidia-h200", job="study", **kw: rec if job == "study"
                        else others.get(job) if job in ("beyond", "sixteen") else load(gpu, job, **kw))
    verdict = front.blocks()["front"].split("\n\n")[0]  # the worse of the two runs, copy_ capped as well:
    # 1.010x, no further from copy_ than the runs are apart (0.990x and 1.010x), a tie
    assert f"({3.04 / 3.01:.3f}x in the slowest of its sustained runs, at the power limit: a tie)" in verdict
    record.row(others["beyond"], "6_beyond_copy")["timing"]["sustained"]["median_ms"] = 2.98  # 0.9900x, 0.9903x
    others["beyond"] = derived.annotate(others["beyond"])
    assert f"({3.07 / 3.10:.3f}x in the slowest of its sustained runs, at the power limit)" in front.blocks()["front"]
    others["beyond"] = None  # one run, even one exactly at copy_'s time: no spread to call a tie by
    record.row(rec, "6_beyond_copy")["timing"]["sustained"]["median_ms"] = 3.10
    rec = derived.annotate(rec)  # the record.load above returns this rec
    one = front.blocks()["front"].split("\n\n")[0]
    assert "(1.000x sustained, at the power limit)" in one and "a tie" not in one
    record.row(rec, "6_beyond_copy")["timing"]["sustained"]["median_ms"] = 3.07
    rec = derived.annotate(rec)
    record.row(rec, "copy_")["timing"]["sustained"]["capped_fraction"] = 0.2  # copy_ mostly under the limit
    assert "at the power limit unlike `copy_`)" in front.blocks()["front"].split("\n\n")[0]
    assert "did not settle" not in front.blocks()["front"]  # every sustained run settled: nothing to say
    record.row(rec, "F.elu")["timing"]["sustained"]["settled"] = False  # timed at the wait's end, unsettled
    assert "for seconds until power and clock settle; `F.elu` did not settle)" in front.blocks()["front"]
    monkeypatch.setattr(record, "figure_path", lambda gpu, name: tmp_path / f"{name}.png")
    paths = front.write_figure("nvidia-h200")
    assert [p.name for p in paths] == ["steps.png"] and all(p.stat().st_size for p in paths)
    plt.close("all")


def test_a_step_no_gpu_has_measured_is_a_row_that_says_so(study_record, monkeypatch):
    import matplotlib.pyplot as plt

    new = Entry("8_next", "step", "a step added to the catalogue since the record", variant="8_next")
    monkeypatch.setattr(entries, "STEPS", (*entries.STEPS, new))
    cells = table_cells(front.blocks()["front"])["8_next"]
    assert cells.pop(ULP) == entries.NOT_MEASURED and set(cells.values()) == {""}
    table = table_rows(front.blocks()["front"])
    assert table["6_beyond_copy"][0] == f"{record.row(study_record, '6_beyond_copy')['timing']['median_ms']:.3f}"
    fig = front.figure(study_record)  # drawn from the rows measured
    assert "8_next" not in [t.get_text() for ax in fig.axes for t in ax.get_yticklabels()]
    plt.close(fig)


def test_xcopy_figure_shows_every_floor_its_legend_names():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rec = record.load(record.REFERENCE_GPU)
    fig = study_report.figure(rec, None, "xcopy")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    left, right = ax.get_xlim()
    assert any(lbl.startswith("measured floor") for lbl in labels)
    for line in ax.get_lines():
        xs = line.get_xdata()
        if line.get_label().startswith(("measured floor", "datasheet floor", "copy_")):
            assert left < xs[0] < right, line.get_label()
    names = [t.get_text() for t in ax.get_yticklabels()][::-1]  # top to bottom
    assert names == sorted(names, key=lambda n: x_copy(rec, n))
    plt.close(fig)


# -- rows against roofs of their own -------------------------------------------------------------------


def own_roof_record() -> dict:
    """copy_ 3 ms; bfloat16's copy_ 1.5 ms and torch.add 2.25 ms; float32's torch.add 4.5 ms."""
    rec = fake_record()
    bf16, back = {"check": False, "dtype": "bfloat16"}, {"check": False, "direction": "backward"}
    rec["rows"] += [row("copy_ bfloat16", "attempt", 1.5, **bf16),
                    dict(row("7_sixteen_bits bfloat16", "attempt", 1.53, **bf16),
                         exhaustive={"inputs": 65536, "alphas": 77, "mismatches": 0}),
                    row("torch.add bfloat16", "attempt", 2.25, **bf16, direction="backward"),
                    dict(row("7_backward bfloat16", "attempt", 2.3, **bf16, direction="backward"),
                         exhaustive={"inputs": 65536, "alphas": 77, "grads": 5, "mismatches": 3}),
                    row("torch.add", "backward", 4.5, **back), row("elu_backward", "backward", 4.41, **back)]
    return annotate(rec)


def test_each_row_is_timed_over_its_own_dtypes_roof_and_direction():
    rec = own_roof_record()
    assert record.row(rec, "7_sixteen_bits bfloat16")["roof"] == "copy_ bfloat16"
    assert record.row(rec, "7_sixteen_bits bfloat16")["x_roof"] == pytest.approx(1.02)
    assert record.row(rec, "7_backward bfloat16")["x_roof"] == pytest.approx(2.3 / 2.25)
    assert record.row(rec, "elu_backward")["roof"] == "torch.add"
    assert record.row(rec, "elu_backward")["x_roof"] == pytest.approx(0.98)
    assert record.row(rec, "1_naive")["x_roof"] == record.row(rec, "1_naive")["x_copy"] == pytest.approx(2.0)
    # x_copy stays over float32 copy_; bandwidth counts half the bytes at 16 bits and three streams backward
    assert record.row(rec, "7_sixteen_bits bfloat16")["x_copy"] == pytest.approx(0.51)
    assert record.row(rec, "elu_backward")["tbps"] == pytest.approx(1.5 * 12.884901888 / 4.41, rel=1e-9)
    assert record.row(rec, "torch.add bfloat16")["tbps"] == pytest.approx(0.75 * 12.884901888 / 2.25, rel=1e-9)


def test_the_roofs_table_groups_by_dtype_and_direction_and_says_each_check():
    rec = own_roof_record()
    df = study_report.roofs_frame(rec)
    assert list(df.index) == ["elu_backward", "7_sixteen_bits bfloat16", "7_backward bfloat16"]  # roofs left out
    assert df.loc["7_backward bfloat16", "mismatches"] == "3 of 65,536 inputs x 77 alphas x 5 grads"
    assert list(study_report.roof_panels(rec)) == ["float32 backward, over torch.add", "bfloat16 forward, over copy_",
                                             "bfloat16 backward, over torch.add"]
    assert "ran on all 65,536 inputs at 77 alphas, bit for bit against PyTorch: mismatches only in " \
           "`7_backward bfloat16` (3)." in study_report.readme_block(rec)


def test_the_first_screen_keeps_its_budgets_once_the_record_holds_both_protocols(study_record, monkeypatch):
    """The next GPU run times every row sustained_entries names under sustained load too: the README it writes (the
    table's two more columns, the verdict's clause) must still pass the first-screen and length tests above."""
    rec = without_sustained(study_record)
    timed = {e.name for e in entries.sustained_entries()}
    for r in rec["rows"]:
        if r["name"] in timed:
            ms = r["timing"]["median_ms"] * 1.01234
            r["timing"]["sustained"] = {"median_ms": ms, "p10_ms": ms, "p90_ms": ms, "runs": 400, "settle_s": 3.21,
                                        "settled": True, "sm_clock_mhz": 1515.0, "power_w": 699.9, "energy_j": 2.345,
                                        "capped_fraction": 1.0}
    rec = derived.annotate(rec)
    load = record.load
    monkeypatch.setattr(record, "load", lambda gpu="nvidia-h200", job="study", **kw: rec if job == "study"
                        else load(gpu, job, **kw))
    text = README.read_text()
    begin, end = record.block_markers("front")
    text = text[:text.index(begin) + len(begin)] + "\n" + front.blocks()["front"] + "\n" + text[text.index(end):]
    head = text[:text.index("\n## ")]
    assert "in the slowest of its sustained runs, at the power limit" in head and "x own copy_, sustained" in head
    prose = "\n".join(line for line in head.splitlines() if not line.startswith(("|", "- [")))
    assert len(numbers_in(prose)) <= FIRST_SCREEN_NUMBERS, numbers_in(prose)
    assert prose_words(text) < PROSE_WORDS


def test_the_checks_say_when_a_checks_record_is_due(monkeypatch):
    """The sanitizer's and the GPU suite's runs are the study's evidence that the kernels touch only their memory and
    that the tests pass on a GPU: the README says of each whose inputs changed since its run (``records --plan``'s
    due: its builds, its code, the tests' files) that it did, and nothing of a current one."""
    due: set[str] = set()
    monkeypatch.setattr(fingerprint, "changes", lambda held, *args, job=None, **kw: ["code x"] if job in due else [])
    assert "changed since" not in front.blocks()["checks"]
    due.add("tests")
    checks = front.blocks()["checks"]
    assert checks.count("changed since") == 1 and checks.endswith("(`results/nvidia-h200-tests.json`); what "
                                                                  "determines it has changed since.")
    due.add("sanitize")
    assert "(`results/nvidia-h200-sanitize.json`); what determines it has changed since." in front.blocks()["checks"]


def test_another_gpus_report_draws_its_figures_and_leaves_the_readme_to_the_reference():
    """``report`` redraws every GPU's figures; the README's blocks (the verdict, the steps, sizes, step 6) stay the
    reference GPU's: another GPU shows there as its line of the GPU table."""
    other = next(g for g in record.gpus() if g != record.REFERENCE_GPU)
    before = README.read_text()
    try:
        written = report.write(other)
        assert README.read_text() == before
    finally:
        README.write_text(before)
    assert README not in written and record.figure_path(other, "steps") in written
    assert all(p.name.startswith(other) for p in written)


def test_the_verdicts_slowest_sustained_run_pools_only_runs_of_this_trees_build(monkeypatch):
    """A job's record whose build of step 7 changed since it ran holds an earlier kernel's runs: the verdict's
    slowest run is then the main record's alone; once that job runs this build, its runs count too."""
    sixteen = record.load(record.REFERENCE_GPU, "sixteen")
    names = [f"7_sixteen_bits {d}" for d in DTYPES16]
    if any(record.row(sixteen, n).get("x_roof_sustained") is None for n in names):
        pytest.skip("the committed step 7 record holds no sustained run of its defaults")
    earlier = fingerprint.earlier_variants
    study = record.load(record.REFERENCE_GPU)
    main_runs = {n: record.row(study, n)["x_roof_sustained"] for n in names}
    for stale in (True, False):
        monkeypatch.setattr(fingerprint, "earlier_variants", lambda rec, _s=stale: (
            {"7_sixteen_bits"} if _s and rec["schema"]["job"] == "sixteen" else set(earlier(rec)) - {"7_sixteen_bits"}))
        runs = front.numbers()["runs"]
        for n in names:
            expected = [main_runs[n]] if stale else sorted([main_runs[n], record.row(sixteen, n)["x_roof_sustained"]])
            assert runs[n] == pytest.approx(expected), (n, stale)


def test_the_steps_figure_draws_both_protocols_and_marks_rows_beyond_its_window(study_record):
    """The README's figure: each row's short time (open marker) and sustained time (filled) over its own roof, on a
    scale that spans the rows near their roof; a row far over it (step 1, F.elu at 16 bits) is an arrow at the edge
    that gives both numbers, so the near-roof differences the verdict argues about stay visible."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba

    fig = front.figure(study_record)
    ax = fig.axes[0]  # float32
    rows = {r["name"]: r for r in study_record["rows"]}
    step6, naive = rows["6_beyond_copy"], rows["1_naive"]
    markers = [(line.get_xdata()[0], to_rgba(line.get_markerfacecolor()) == to_rgba("white"))
               for line in ax.get_lines() if line.get_marker() == "o"]
    assert any(x == pytest.approx(step6["x_roof"]) and hollow for x, hollow in markers)
    assert any(x == pytest.approx(step6["x_roof_sustained"]) and not hollow for x, hollow in markers)
    assert ax.get_xlim()[1] < naive["x_roof"]  # off the scale, and said so with both numbers
    labels = [t.get_text() for t in ax.texts]
    assert any(f"{naive['x_roof']:.3f} / {naive['x_roof_sustained']:.3f}, off scale" in t for t in labels), labels
    plt.close(fig)
