"""CPU-only tests of the harness: ncu CSV parsing, the study's entries, the committed
H200 records, and the no-toolkit path of the notebooks. Nothing here needs a GPU or compiles a kernel
(except the notebook run at the end, which executes two notebooks with nvcc hidden)."""

from __future__ import annotations

import copy
import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from elu_study.jobs.study import notebook
from elu_study.core import entries as study
from elu_study.core import derived, ncu, record, timing
from elu_study.testing.records import assert_rows_are_the_catalogues
from elu_study.core.sass import KernelReport
from elu_study.core.entries import ENTRIES

REPO = Path(__file__).parents[1]


# -- helpers -------------------------------------------------------------------------------------


def _env_without_toolkit(tmp_path: Path) -> dict[str, str]:
    """Environment variables that hide the CUDA toolkit: CUDA_HOME that does not exist, no nvcc on PATH."""
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not (Path(d, "nvcc").is_file() and os.access(Path(d, "nvcc"), os.X_OK))]
    return {"CUDA_HOME": str(tmp_path / "no-cuda"), "PATH": os.pathsep.join(dirs)}


@pytest.fixture(scope="module")
def main_record() -> dict:
    return record.load(record.REFERENCE_GPU)


@pytest.fixture(scope="module")
def counter_record() -> dict:
    return record.load(record.REFERENCE_GPU, "ncu")  # raises, naming the file, if it is missing


# -- 1. ncu raw CSV -> counters --------------------------------------------------------------------

_STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
_COLUMNS = ("ID", "Process ID", "Kernel Name", "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
            "dram__throughput.avg.pct_of_peak_sustained_elapsed", "launch__registers_per_thread",
            "smsp__inst_executed.sum", "smsp__cycles_elapsed.avg.per_second",
            _STALL.format("lg_throttle"), _STALL.format("long_scoreboard"), _STALL.format("wait"))
_UNITS = ("", "", "", "nsecond", "byte", "byte", "%", "register/thread", "inst", "cycle/second", "", "", "")
_MARKER_NAME = "void at::native::(anonymous namespace)::spin_kernel(long)"
# Kernel name, duration, read, write, DRAM %, registers, warp instructions, SM cycles/s, stalls (lg, lsb, wait)
_KERNELS = (
    (_MARKER_NAME, "1,024", "0", "0", "0.1", "16", "64", "1,980,000,000", "0", "0", "9"),
    ("elu_a(const float *, float *)", "2,000,000", "3,000,000", "3,000,000", "90.5", "16", "200,000",
     "1,980,000,000", "0.5", "5.5", "1.25"),
    (_MARKER_NAME, "1,024", "0", "0", "0.1", "16", "64", "1,980,000,000", "0", "0", "9"),
    ("elu_b_piece(const float *, float *)", "1,000,000", "2,000,000", "1,000,000", "60", "20", "100,000",
     "1,980,000,000", "0", "2", "4"),
    ("elu_b_piece(const float *, float *)", "3,000,000", "4,000,000", "5,000,000", "80", "32", "275,000",
     "1,500,000,000", "1", "6", "0"),
)


def _quoted(fields) -> str:
    return ",".join(f'"{f}"' for f in fields)


def _ncu_csv() -> str:
    """What ``ncu --import ... --csv --page raw --print-units base`` prints: noise, a header, units, rows."""
    lines = ["==PROF== Connected to process 4242", "==WARNING== some note ncu prints first",
             _quoted(_COLUMNS), _quoted(_UNITS)]
    lines += [_quoted((str(i), "4242", *k)) for i, k in enumerate(_KERNELS)]
    return "\n".join(lines) + "\n"


@pytest.fixture
def parsed_kernels() -> list[dict]:
    return [ncu.kernel_counters(r) for r in ncu.parse_raw_csv(_ncu_csv())]


def test_parse_raw_csv_reads_the_rows_under_the_header_and_units():
    rows = ncu.parse_raw_csv(_ncu_csv())
    assert len(rows) == len(_KERNELS)
    assert rows[1]["Kernel Name"] == "elu_a(const float *, float *)"
    assert rows[1]["dram__bytes_read.sum"] == "3,000,000"
    assert rows[1]["gpu__time_duration.sum"] == "2,000,000"
    with pytest.raises(ValueError, match="ID"):
        ncu.parse_raw_csv("==PROF== nothing was profiled\n")


def test_kernel_counters_reads_thousands_separators_and_sorts_stalls(parsed_kernels):
    a = parsed_kernels[1]
    assert a["kernel"] == "elu_a(const float *, float *)"
    assert a["duration_ns"] == 2_000_000.0
    assert a["dram_read_bytes"] == 3_000_000.0
    assert a["dram_write_bytes"] == 3_000_000.0
    assert a["sm_cycles_per_s"] == 1.98e9
    assert a["registers"] == 16.0
    assert a["l2_hit_pct"] is None  # not in the CSV
    # in the CSV's column order lg_throttle comes first; sorted descending by value
    assert list(a["stalls"].items()) == [("long_scoreboard", 5.5), ("wait", 1.25), ("lg_throttle", 0.5)]


def test_split_by_marker_opens_one_group_per_marker(parsed_kernels):
    groups = ncu.split_by_marker(parsed_kernels)
    assert [[k["kernel"] for k in g] for g in groups] == [
        ["elu_a(const float *, float *)"],
        ["elu_b_piece(const float *, float *)", "elu_b_piece(const float *, float *)"],
    ]
    with pytest.raises(ValueError, match="before any marker"):
        ncu.split_by_marker(parsed_kernels[1:])  # elu_a with no marker before it


def test_combine_sums_counts_weights_rates_and_takes_the_largest_launch(parsed_kernels):
    one, two = ncu.split_by_marker(parsed_kernels)
    a = ncu.combine(one)
    assert a["kernels"] == 1 and a["duration_ns"] == 2_000_000.0

    b = ncu.combine(two)
    assert b["kernels"] == 2
    assert b["kernel"] == "elu_b_piece(const float *, float *)"
    assert b["duration_ns"] == 4_000_000.0
    assert b["dram_read_bytes"] == 6_000_000.0
    assert b["dram_write_bytes"] == 6_000_000.0
    assert b["warp_instructions"] == 375_000.0
    assert b["registers"] == 32.0  # the larger of 20 and 32, not a mean
    # rates are weighted by duration (1 ms and 3 ms): (60*1 + 80*3)/4, not (60 + 80)/2
    assert b["dram_pct_of_peak"] == pytest.approx(75.0)
    assert b["sm_cycles_per_s"] == pytest.approx(1.62e9)
    assert b["l2_hit_pct"] is None
    # stalls: lsb (2*1 + 6*3)/4 = 5, wait (4*1 + 0*3)/4 = 1, lg_throttle (0*1 + 1*3)/4 = 0.75
    assert list(b["stalls"]) == ["long_scoreboard", "wait", "lg_throttle"]
    assert b["stalls"] == pytest.approx({"long_scoreboard": 5.0, "wait": 1.0, "lg_throttle": 0.75})


def test_derived_numbers_of_a_combined_entry(parsed_kernels):
    b = ncu.combine(ncu.split_by_marker(parsed_kernels)[1])
    numel = 1_500_000  # 12e6 bytes = 8 * numel: exactly the least possible traffic
    d = ncu.derived(b, numel)
    assert d == pytest.approx({"dram_bytes_over_min": 1.0, "thread_instructions_per_element": 375_000 * 32 / numel})


def test_an_entry_with_no_kernel_is_an_error(parsed_kernels):
    marker, a = parsed_kernels[0], parsed_kernels[1]
    groups = ncu.split_by_marker([marker, marker, a])
    assert [len(g) for g in groups] == [0, 1]
    with pytest.raises(ValueError, match="no kernel"):
        ncu.combine(groups[0])


# -- 2. the committed counter record -----------------------------------------------------------------


def test_counter_record_has_one_row_per_kernel_entry(counter_record):
    assert_rows_are_the_catalogues(counter_record, study.profiled_entries())
    for key in ("gpu", "driver", "date_utc"):
        assert counter_record["provenance"].get(key)


def test_counter_record_moves_the_least_bytes(counter_record):
    numel = counter_record["problem"]["numel"]
    assert numel == counter_record["problem"]["shape"][0] * counter_record["problem"]["shape"][1]
    least = 4 * numel
    for r in counter_record["rows"]:
        # the halves of a stream move one direction only: read_only reads x, write_only writes y
        reads, writes = r["name"] != "write_only", r["name"] != "read_only"
        assert r["dram_read_bytes"] == pytest.approx(least if reads else 0, rel=0.01, abs=0.01 * least), r["name"]
        assert r["dram_write_bytes"] == pytest.approx(least if writes else 0, rel=0.02, abs=0.02 * least), r["name"]
        if reads and writes:
            assert 0.98 <= r["dram_bytes_over_min"] <= 1.02, r["name"]


def test_counter_record_kernel_counts(counter_record):
    rows = {r["name"]: r for r in counter_record["rows"]}
    # PyTorch splits tensors over 2^31 bytes into 32-bit-indexable pieces: 6.4 GB -> 4 launches
    assert rows["F.elu"]["kernels"] == 4
    ours = [n for n in rows if ENTRIES[n].variant]
    assert ours, "no elu_study kernel rows"
    assert {n: rows[n]["kernels"] for n in ours} == {n: 1 for n in ours}


# -- 3. the study's entries ----------------------------------------------------------------------------


def _knobs(entry: study.Entry) -> dict[str, str]:
    return dict(f[2:].split("=", 1) for f in entry.flags)


@pytest.mark.parametrize("name", [e.name for e in ENTRIES.values() if e.kind == "ablation"])
def test_every_ablation_names_an_existing_base(name):
    base = ENTRIES[name].base
    assert base is not None, f"ablation {name} has no base"
    assert base in ENTRIES and base != name


def test_step5_ablations_change_one_streaming_flag_each():
    entries = study.group("step5_one_change")
    control = ENTRIES["5_as_step_2"]
    assert control in entries and control.base == "2_float4"
    reference = _knobs(control)
    assert reference and all(k.startswith("ELU_STREAMING_") for k in reference)
    for e in entries:
        if e is control:
            continue
        assert e.variant == control.variant and e.base == control.name, e.name
        knobs = _knobs(e)
        assert all(k.startswith("ELU_STREAMING_") for k in knobs), e.name
        changed = {k for k in reference.keys() | knobs.keys() if reference.get(k) != knobs.get(k)}
        assert len(changed) == 1, f"{e.name} changes {sorted(changed)}"


def test_grid_stride_blocks():
    numel = record.load(record.REFERENCE_GPU)["problem"]["numel"]
    assert study.grid_stride_blocks("3_grid_stride", 132, numel) == 1152  # the seed's launch
    assert study.grid_stride_blocks("3_grid_stride_2_waves", 132, numel) == 2 * 132 * 4  # 2048/512 blocks per SM
    assert study.grid_stride_blocks("3_grid_stride_2_waves_256t", 132, numel) == 2 * 132 * 8
    assert study.grid_stride_blocks("3_grid_stride_one_shot", 132, numel) == math.ceil(numel / 4 / 512)
    small = 4 * 512 * 10 + 4  # one vector past ten blocks
    assert study.grid_stride_blocks("3_grid_stride_one_shot", 132, small) == 11
    assert study.grid_stride_blocks("3_grid_stride", 132, small) == 11  # never more blocks than vectors need
    with pytest.raises(ValueError, match="not a grid-stride"):
        study.grid_stride_blocks("2_float4", 132, numel)


def test_builds_cover_every_compiled_entry_once():
    b = study.builds()
    assert len(b) == len(set(b))
    assert set(b) == {(e.variant, e.flags) for e in study.study_entries() if e.variant}
    attempts = study.builds(study.ATTEMPTS)  # step 6's record (python -m elu_study beyond) builds its own
    assert set(attempts) <= set(study.builds(list(ENTRIES.values())))
    assert all(variant for variant, _ in b)


# -- 4. the committed main record ----------------------------------------------------------------------


def test_main_record_timings_are_consistent(main_record):
    rounds = main_record["method"]["rounds"]
    for r in main_record["rows"]:
        t, name = r["timing"], r["name"]
        assert len(t["samples_ms"]) == rounds, name
        assert sum(len(s) for s in t["samples_ms"]) == t["runs"], name
        assert t["round_medians_ms"] == pytest.approx([float(np.median(s)) for s in t["samples_ms"]],
                                                      abs=10 ** -timing.SAMPLE_DECIMALS), name
        assert len(t["nvml"]) == rounds, name
        assert all(n["samples"] > 0 for n in t["nvml"]), name


def test_main_record_annotation_is_up_to_date(main_record):
    assert derived.annotate(copy.deepcopy(main_record)) == main_record


# -- 5. no CUDA toolkit: the notebooks show the recorded SASS ----------------------------------------


def test_without_toolkit_inspect_shows_the_recorded_sass(tmp_path, monkeypatch, capsys):
    for key, value in _env_without_toolkit(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", os.environ.get("TORCH_CUDA_ARCH_LIST", "9.0"))  # restored after

    assert notebook.toolkit_available() is False
    s = notebook.Study()
    assert s.can_compile is False
    assert "no CUDA toolkit, SASS as recorded" in capsys.readouterr().out

    got = s.inspect("2_float4")
    shown = capsys.readouterr().out
    assert "128-bit" in shown and "LDG.E.128" in shown
    assert got == KernelReport.from_dict(record.row(s.record, "2_float4")["sass"])
    assert shown.strip() == got.summary()


# -- 6. two notebooks, run with nbval, with nvcc hidden ----------------------------------------------

NOTEBOOKS = ("notebooks/00_problem_and_floor.ipynb", "notebooks/02_float4.ipynb")


@pytest.mark.skipif(importlib.util.find_spec("nbval") is None, reason="nbval is not installed (pip install nbval)")
def test_notebooks_run_without_toolkit(tmp_path):
    env = {**os.environ, **_env_without_toolkit(tmp_path)}
    env.pop("CUDA_PATH", None)
    command = [sys.executable, "-m", "pytest", "--nbval", "--nbval-sanitize-with", "notebooks/sanitize.cfg",
               "-p", "no:cacheprovider", "-o", "addopts=", *NOTEBOOKS]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert "passed" in output


def test_the_notebooks_job_runs_several_at_once_and_keeps_a_failed_one_as_it_was(tmp_path, capsys):
    """python -m elu_study notebooks: every notebook executed in place, in parallel; one whose cell raises is named
    and left as it was, and the others still get their outputs."""
    nbformat = pytest.importorskip("nbformat")
    from elu_study.jobs import notebooks  # noqa: PLC0415 - needs nbclient, the test extra's

    paths = []
    for name, source in (("a", "print(6 * 7)"), ("b", "raise ValueError('planted')"), ("c", "print('c' * 3)")):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
        paths.append(tmp_path / f"{name}.ipynb")
    before = paths[1].read_text()
    assert notebooks.main([*map(str, paths), "--jobs", "2"]) == 1
    outputs = {p.stem: nbformat.read(p, as_version=4).cells[0].outputs for p in paths}
    assert outputs["a"][0]["text"] == "42\n" and outputs["c"][0]["text"] == "ccc\n"
    assert paths[1].read_text() == before and not outputs["b"]
    assert "FAILED b.ipynb: " in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.ipynb", "b.ipynb", "c.ipynb"]  # no file left half-done


def test_a_notebook_is_never_seen_half_written(tmp_path, monkeypatch):
    """The README stage reads the notebooks' titles while the notebooks stage runs: each executed notebook is written
    whole to another file and renamed over the old one, so a reader sees the old file or the new one."""
    nbformat = pytest.importorskip("nbformat")
    from elu_study.jobs import notebooks  # noqa: PLC0415 - needs nbclient, the test extra's

    path = tmp_path / "a.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    written, write = [], nbformat.write
    monkeypatch.setattr(notebooks.nbformat, "write", lambda n, f, **kw: (written.append(Path(f)), write(n, f, **kw)))
    assert notebooks.execute(path) is None
    assert written and path not in written  # never truncated in place
    assert nbformat.read(path, as_version=4).cells[0].outputs[0]["text"] == "42\n"
