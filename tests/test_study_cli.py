"""``python -m elu_study`` on the command line: its opening line, its progress bar, its tables' width, its --jobs
default and the SASS of every kernel file."""

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from elu_study.core import build, record
from elu_study.core.entries import KINDS, builds
from elu_study.core.sass import KernelReport
from elu_study.jobs import study
from elu_study.jobs.study.report import WIDTH, frame, roofs_frame, summary


def test_the_opening_line_says_whether_a_gpu_was_found_and_what_runs(monkeypatch):
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # configure_toolchain's sm_90
    line = re.sub(r"\s+", " ", study.plan(None, 8, 3, 3, 5, 0, True))
    assert line.startswith("No CUDA GPU found") and "nothing will be checked or timed" in line
    assert "the 8 builds of the steps for sm_90 in 3 processes" in line
    assert str(record.record_path()) in line
    line = re.sub(r"\s+", " ", study.plan("NVIDIA H200", 95, 16, 3, 5, 26, True))
    entries = len(study.study_entries())
    assert line.startswith("GPU: NVIDIA H200 (") and "Compiling 95 builds in 16 processes" in line
    assert (f"checking and timing {entries} entries (3 full-size check trials and 5 interleaved timing rounds each, "
            "then 26 of them under sustained load)") in line
    assert "README's results block" in line
    assert "sustained" not in study.plan("NVIDIA H200", 95, 16, 3, 5, 0, True)
    assert "README" not in study.plan("NVIDIA H200", 95, 16, 3, 5, 0, False)


def test_the_opening_line_says_roughly_how_long(monkeypatch):
    """Builds from their costs on the slowest machine the study runs on; the measurement from the last run's
    seconds where the record has them, and no guess where it has none."""
    builds = study.BINDING_S + study.BUILD_S * 8 / 2 + study.SASS_S * len(study.SASS_SHOWN)
    assert study.estimate(None, 8, 2) == f"about {builds / 60:.0f} min cold, less where builds are cached"
    monkeypatch.setattr(record, "held_fingerprint", lambda gpu: {"seconds": 600.0})
    cold = study.BINDING_S + study.BUILD_S * 96 / 16 + study.SASS_S * len(study.SASS_SHOWN)
    assert study.estimate("NVIDIA H200", 96, 16) == f"about {(cold + 600) / 60:.0f} min cold, less where builds are cached"
    monkeypatch.setattr(record, "held_fingerprint", lambda gpu: None)
    assert "no earlier run here says how long" in study.estimate("NVIDIA H200", 96, 16)


def test_jobs_default_in_help_is_what_build_all_takes(monkeypatch, capsys):
    monkeypatch.setattr(build.os, "cpu_count", lambda: 6)
    with pytest.raises(SystemExit):
        study.main(["--help"])
    assert "(default: one per core, 6 here)" in re.sub(r"\s+", " ", capsys.readouterr().out)
    assert build.default_workers(10) == 6 and build.default_workers(3) == 3  # one per build at most


def test_the_progress_bar_names_each_build(monkeypatch, capsys):
    jobs = [("1_naive", ()), ("3_grid_stride", ("-DELU_GRID_WAVES=2",)), ("6_beyond_copy", ("-DELU6_THREADS=128",) * 12)]
    workers, events = [], []

    def pool(max_workers, mp_context):
        workers.append(max_workers)
        return ThreadPoolExecutor(max_workers)

    monkeypatch.setattr(build, "binding", lambda: events.append("loaded"))
    monkeypatch.setattr(build, "build_binding_in_subprocess", lambda: events.append("binding compiled"))
    monkeypatch.setattr(build, "ProcessPoolExecutor", pool)
    monkeypatch.setattr(build, "build_in_subprocess", lambda job: events.append(job[0]))
    build.build_all(jobs)
    bar = capsys.readouterr().err
    # the shared binding compiles in the pool beside the three builds; this process loads it once all are done
    assert "4/4" in bar and "the shared binding" in bar and workers == [build.default_workers(4)]
    assert events[-1] == "loaded" and sorted(events[:-1]) == sorted(["binding compiled", *(j[0] for j in jobs)])
    assert "1_naive" in bar and "3_grid_stride -DELU_GRID_WAVES=2" in bar and "6_beyond_copy -DELU6_THREADS=128" in bar
    assert max(len(part) for part in bar.split("\r")) <= WIDTH  # a long build's name is shortened


def test_the_printed_summary_fits_and_holds_the_record_s_numbers():
    rec = record.load()
    out = summary(rec, live=False)
    assert max(len(line) for line in out.splitlines()) <= WIDTH
    main, roofs = (table.splitlines()[2:] for table in out.split("\n\n")[1:3])
    shown = {line.split()[0]: line.split()[1:] for line in main}
    assert list(shown) == list(frame(rec, kinds=KINDS).index)
    for r in rec["rows"]:
        if r["kind"] in KINDS:
            assert shown[r["name"]][:4] == [f"{r['timing']['median_ms']:.3f}", f"{r['tbps']:.2f}",
                                            f"{r['pct_of_peak']:.1f}", f"{r['x_copy']:.3f}"]
    own = roofs_frame(rec)
    assert len(roofs) == len(study.own_roof_rows(rec)) == len(own)
    for line, (name, x) in zip(roofs, own["x own roof"].items()):
        assert line.startswith(name + " ") and f" {x:.3f} " in line
    assert "Regime: short" in out


def test_without_a_gpu_it_opens_with_its_plan_and_shows_every_kernel_file_s_sass(monkeypatch, capsys):
    """The whole run without a GPU, compiling and disassembling left out: the SASS shown is the record's."""
    rec = record.load()
    sass = {r["name"]: r["sass"] for r in rec["rows"] if r.get("sass")}
    built = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(study, "build_all", lambda jobs, workers: built.append((jobs, workers)))
    monkeypatch.setattr(study, "compile_variant", lambda variant, extra_cuda_cflags: (variant, tuple(extra_cuda_cflags)))
    by_build = {(e.variant, e.flags): e.name for e in study.SASS_SHOWN}
    # a kernel file added since the record was measured: any recorded report stands in for its disassembly
    monkeypatch.setattr(study, "inspect_variant",
                        lambda b: KernelReport.from_dict(sass.get(by_build[b]) or next(iter(sass.values()))))
    assert study.main(["--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("No CUDA GPU found") and built == [(builds(study.SASS_SHOWN), 2)]
    assert {v for v, _ in built[0][0]} == set(build.known_variants())  # every kernel file, step 7's included
    for entry in study.SASS_SHOWN:
        assert f"[{entry.variant if entry.mode else entry.name}] " in out
    assert sass["7_sixteen_bits bfloat16"]["function"] in out
    assert max(map(len, out.splitlines())) <= WIDTH  # tables, prose and SASS alike
