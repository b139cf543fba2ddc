"""The test suite's settings (fuzz budget, seed, builds) and its GPU-run record, without a GPU."""

import copy
import multiprocessing
from types import SimpleNamespace

import pytest
import torch

from elu_study import known_variants
from elu_study.core import build, record
from elu_study.core.build import resolve_variant
from elu_study.core.entries import build_id, computes_elu, fuzz_builds
from elu_study.testing import suite


def test_fuzz_settings_take_the_options_else_the_defaults():
    s = suite.fuzz_settings()
    assert s.examples == suite.DEFAULT_FUZZ_EXAMPLES and s.builds == "files"
    assert isinstance(s.seed, int) and 0 <= s.seed < 2**32 and suite.fuzz_settings().seed != s.seed  # (1 in 2^32)
    assert suite.fuzz_settings(examples=500).builds == "all"  # a larger budget: every build
    assert suite.fuzz_settings(examples=500, builds="files").builds == "files"
    s = suite.fuzz_settings(examples=10, seed="77", builds="all")
    assert (s.examples, s.seed, s.builds) == (10, 77, "all")
    assert suite.fuzz_settings(seed="not-a-number").seed == "not-a-number"  # hypothesis takes any hashable
    assert "--hypothesis-seed=77 --fuzz-examples=10 --fuzz-builds=all" == s.to_dict()["rerun_with"]
    with pytest.raises(ValueError, match="at least 1 example"):
        suite.fuzz_settings(examples=0)


def test_settings_are_made_once_per_run_from_the_options():
    options = {"fuzz_examples": 7, "hypothesis_seed": "5", "fuzz_builds": None}
    config = SimpleNamespace(stash={}, getoption=lambda name, default=None: options.get(name, default))
    first = suite.settings_from_config(config)
    assert (first.examples, first.seed, first.builds) == (7, 5, "files")
    options["fuzz_examples"] = 99  # read once: the header, the fuzz tests and the record see the same settings
    assert suite.settings_from_config(config) is first


def test_every_fuzzed_build_compiles_a_kernel_file_and_has_its_own_id():
    """Build ids name the tests and seed the fuzzing: two builds with one id would share a seed."""
    every = fuzz_builds("all")
    assert sorted(fuzz_builds("files")) == sorted((v, ()) for v in known_variants())  # each file's default build
    assert all(resolve_variant(variant).is_file() for variant, _ in every)
    ids = [build_id(*b) for b in every]
    assert len(set(ids)) == len(ids)
    assert build_id("3_grid_stride", ("-DA=1", "-DB=2")) == "3_grid_stride[-DA=1 -DB=2]"


def test_only_copy_kernels_are_spared_the_comparison_with_elu():
    assert computes_elu("2_float4")
    assert not computes_elu("2_float4", ("-DELU_FLOAT4_OP=Copy",))  # the copy_kernel baseline
    assert computes_elu("5_streaming", ("-DELU_STREAMING_OP=Expf",))
    assert computes_elu("9_new_kernel")  # a file the study does not list yet is ELU until it says otherwise


def _report(nodeid, outcome="passed", keywords=()):
    return SimpleNamespace(nodeid=nodeid, outcome=outcome, keywords=dict.fromkeys(keywords, 1))


STATS = {
    "passed": [
        _report("tests/test_gpu.py::test_odd_lengths[1_naive-1]"),
        _report("tests/test_gpu.py::test_odd_lengths[2_float4-1]"),
        _report("tests/test_fuzz.py::test_bad_calls[1_naive]", keywords=("gpu",)),
        _report("tests/test_sanitize.py::test_compute_sanitizer_reports_a_planted_out_of_bounds_write",
                keywords=("gpu", "sanitize")),
        _report("tests/test_hardware.py::test_slug_names_result_files"),
    ],
    "failed": [_report("tests/test_fuzz.py::test_every_case[2_float4-elu]", "failed", keywords=("gpu",))],
    "skipped": [
        _report("tests/test_gpu.py::test_other_device_index_is_respected[1_naive]", "skipped"),
        _report("tests/test_gpu.py::test_other_device_index_is_respected[2_float4]", "skipped"),
    ],
}
CPU_ONLY = {"passed": [_report("tests/test_hardware.py::test_slug"), _report("tests/test_sanitize.py::test_parse")],
            "skipped": [_report("tests/test_gpu.py::test_odd_lengths", "skipped"),
                        _report("tests/test_fuzz.py::test_bad_calls", "skipped", ("gpu",))]}
PROVENANCE = {"gpu": "NVIDIA H200", "sm_count": 132, "l2_cache_mib": 60.0, "memory_gib": 139.8, "compute_capability": "9.0",
              "driver": "580.159.04", "cuda_runtime": "13.0", "torch": "2.11.0", "triton": "3.6.0", "nvcc": "13.0",
              "python": "3.12.3", "date_utc": "2026-11-30T00:00:00+00:00", "commit": "367a1e3"}


def _expected(stats):
    """What a record must say of a run, counted from the stats here, report by report."""
    outcomes = [(outcome, r.nodeid) for outcome, reports in stats.items() for r in reports]
    return {
        "counts": {o: sum(1 for outcome, _ in outcomes if outcome == o) for o in suite.OUTCOMES},
        "failures": sorted(nodeid for outcome, nodeid in outcomes if outcome in ("failed", "error")),
    }


def test_summary_counts_outcomes_and_names_failures():
    assert suite.summarize(STATS) == _expected(STATS)
    assert suite.summarize(STATS)["counts"] == {"passed": 5, "failed": 1, "error": 0, "skipped": 2, "xfailed": 0,
                                                "xpassed": 0}
    errored = {**STATS, "error": [_report("tests/test_gpu.py::test_x", "error")]}
    assert suite.summarize(errored)["failures"] == ["tests/test_fuzz.py::test_every_case[2_float4-elu]",
                                                    "tests/test_gpu.py::test_x"]


def test_only_a_run_with_gpu_tests_run_is_recorded():
    assert suite.ran_on_gpu(STATS)
    assert not suite.ran_on_gpu(CPU_ONLY)
    assert suite.ran_on_gpu({"failed": [_report("tests/test_gpu.py::test_odd_lengths")]})  # by file, without the marker
    assert suite.ran_on_gpu({"passed": [_report("tests/test_fuzz.py::test_bad_calls", keywords=("gpu",))]})


def _write(stats, results_dir, gpu=True, args=("-q", "-x")):
    fuzz = suite.fuzz_settings(examples=60, seed=99)
    return suite.write_record(stats, fuzz, list(args), results_dir, lambda: gpu, lambda: PROVENANCE, 123.456)


@pytest.mark.parametrize("args", [("-k", "flushing or 4_fast_math"), ("-kfast",), ("-m", "gpu"), ("--lf",),
                                  ("tests/test_build.py",), ("tests/test_gpu.py::test_odd_lengths",),
                                  ("--deselect", "tests/test_fuzz.py::test_bad_calls")])
def test_a_run_of_part_of_the_suite_leaves_the_record_as_it_was(tmp_path, args):
    """A few tests' run on a GPU (a -k expression, a file) must not stand in for the suite's record."""
    assert _write(STATS, tmp_path, args=args) is None
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("args", [(), ("tests",), ("-q", "-n", "8", "--dist", "loadfile", "--hypothesis-seed=7"),
                                  ("tests", "notebooks", "--nbval")])
def test_a_run_of_the_whole_suite_is_recorded(tmp_path, args):
    assert _write(STATS, tmp_path, args=args) == tmp_path / "nvidia-h200-tests.json"


def test_the_record_reads_back_with_the_run_it_was_written_from(tmp_path):
    path = _write(STATS, tmp_path)
    assert path == tmp_path / "nvidia-h200-tests.json"
    data = record.read(path, "tests")  # checked against the declared schema
    assert {k: data[k] for k in ("counts", "failures")} == _expected(STATS)
    assert data["command"] == "python -m pytest -q -x" and data["duration_s"] == 123.5
    assert data["fuzz"] == suite.fuzz_settings(examples=60, seed=99).to_dict()
    assert data["provenance"] == PROVENANCE


def test_the_record_follows_the_run_when_a_test_changes_outcome(tmp_path):
    stats = copy.deepcopy(STATS)
    stats["failed"].append(stats["passed"].pop(0))  # test_odd_lengths fails this time
    data = record.read(_write(stats, tmp_path), "tests")
    assert data["counts"]["passed"] == 4 and data["counts"]["failed"] == 2
    assert "tests/test_gpu.py::test_odd_lengths[1_naive-1]" in data["failures"]
    stats = {"passed": STATS["passed"] + STATS["failed"], "skipped": STATS["skipped"]}
    data = record.read(_write(stats, tmp_path), "tests")
    assert data["failures"] == [] and data["counts"]["passed"] == 6


@pytest.mark.parametrize("run", [
    pytest.param({"passed": STATS["passed"][:-1], "failed": STATS["passed"][-1:], "skipped": STATS["skipped"]},
                 id="a file whose every test ran failed"),
    pytest.param({"passed": STATS["passed"][:2], "skipped": STATS["skipped"]}, id="without the sanitizer test"),
    pytest.param({"passed": STATS["passed"]}, id="on two GPUs, nothing skipped"),
])
def test_the_record_of_any_run_reads_back(tmp_path, run):
    assert record.read(_write(run, tmp_path), "tests")["counts"] == _expected(run)["counts"]


def test_no_record_without_a_gpu_or_without_gpu_tests_run(tmp_path):
    assert _write(STATS, tmp_path, gpu=False) is None
    assert _write(CPU_ONLY, tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_build_all_builds_in_spawned_workers_where_cuda_is_initialized(monkeypatch):
    """A forked worker of a process that used CUDA cannot use it again: then the workers are spawned."""
    pools = []

    class Pool(build.ProcessPoolExecutor):
        def __init__(self, *args, mp_context=None, **kwargs):
            if mp_context is None or mp_context.get_start_method() != "spawn":
                raise AssertionError("build_all forks its workers")
            pools.append(mp_context)
            super().__init__(*args, mp_context=mp_context, **kwargs)

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(build, "ProcessPoolExecutor", Pool)
    build.build_all([("1_naive", ())], workers=1)  # in the disk cache from the compile tests: the worker loads it
    assert pools == [multiprocessing.get_context("spawn")]


def test_the_readmes_checks_count_every_sanitizer_error_and_name_every_failed_test(monkeypatch):
    from elu_study.jobs.report import front  # noqa: PLC0415

    made = {"provenance": {"commit": "abc1234", "date_utc": "2026-12-04T10:00:00+00:00"}}
    sanitize = {**made, "tools": ["memcheck", "racecheck"], "builds": {
        "1_naive": {"memcheck": {"errors": 0, "ok": True}, "racecheck": {"errors": 2, "ok": False}},
        "2_float4": {"memcheck": {"errors": None, "ok": False}, "racecheck": {"errors": 1, "ok": False}}}}
    tests = {**made, **suite.summarize(STATS), "fuzz": {"examples_per_test": 60}}
    monkeypatch.setattr(record, "load", lambda gpu, job, required=True: {"sanitize": sanitize, "tests": tests}.get(job))
    found = front.checks("nvidia-h200")
    assert (found["builds"], found["errors"], found["unread"]) == (2, 3, 1)
    line = front.text.render("report/checks.md.j2", **found)
    assert "2 builds on 2026-12-04: 3 errors (and 1 runs that gave no count)" in line
    assert "5 passed, 1 failed: `tests/test_fuzz.py::test_every_case" in line
    monkeypatch.setattr(record, "load", lambda gpu, job, required=True: tests if job == "tests" else None)
    assert front.checks("nvidia-h200") is None  # no sanitize record: no line
