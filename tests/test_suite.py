"""The test suite's settings (fuzz budget, seed, builds) and its GPU-run record, without a GPU."""

import multiprocessing
from types import SimpleNamespace

import pytest
import torch

from elu_study import known_variants
from elu_study.core import build, record
from elu_study.core.entries import build_id, builds, computes_elu, fuzz_builds
from elu_study.testing import suite


def test_fuzz_settings_take_options_then_environment_then_defaults():
    s = suite.fuzz_settings(environ={})
    assert s.examples == suite.DEFAULT_FUZZ_EXAMPLES and s.builds == "files" and s.seed_source == "random"
    assert isinstance(s.seed, int) and 0 <= s.seed < 2**32
    env = {suite.EXAMPLES_ENV: "500", suite.SEED_ENV: "1234"}
    s = suite.fuzz_settings(environ=env)
    assert (s.examples, s.seed, s.seed_source, s.builds) == (500, 1234, "$ELU_FUZZ_SEED", "all")  # more: every build
    s = suite.fuzz_settings(examples=10, seed="77", builds="all", environ=env)
    assert (s.examples, s.seed, s.seed_source, s.builds) == (10, 77, "--hypothesis-seed", "all")
    assert suite.fuzz_settings(seed="not-a-number", environ={}).seed == "not-a-number"  # hypothesis takes any hashable
    assert "--hypothesis-seed=77 --fuzz-examples=10 --fuzz-builds=all" == s.to_dict()["rerun_with"]


def test_fuzz_settings_refuse_nonsense():
    with pytest.raises(ValueError, match="at least 1 example"):
        suite.fuzz_settings(examples=0, environ={})
    with pytest.raises(ValueError, match="fuzz builds must be one of"):
        suite.fuzz_settings(builds="some", environ={})


def test_fuzz_builds_are_one_per_file_or_every_build():
    assert fuzz_builds("files") == [(name, ()) for name in known_variants()]
    assert fuzz_builds("all") == builds()
    # every build is a step's file, or a peer's file beside them (kernels/peers/cub_transform.cu)
    assert {v for v, _ in fuzz_builds("all")} <= set(known_variants()) | {"peers/cub_transform"}


def test_only_copy_kernels_are_spared_the_comparison_with_elu():
    assert computes_elu("2_float4")
    assert not computes_elu("2_float4", ("-DELU_FLOAT4_OP=Copy",))  # the copy_kernel baseline
    assert computes_elu("5_streaming", ("-DELU_STREAMING_OP=Expf",))
    assert computes_elu("9_new_kernel")  # a file the study does not list yet is ELU until it says otherwise


def test_build_ids():
    assert build_id("3_grid_stride") == "3_grid_stride"
    assert build_id("3_grid_stride", ("-DA=1", "-DB=2")) == "3_grid_stride[-DA=1 -DB=2]"


def _report(nodeid, outcome="passed", reason=None, keywords=(), props=()):
    longrepr = ("tests/x.py", 3, f"Skipped: {reason}") if reason else None
    return SimpleNamespace(nodeid=nodeid, outcome=outcome, longrepr=longrepr,
                           keywords=dict.fromkeys(keywords, 1), user_properties=list(props))


SANITIZED = {"passed": True, "compute_sanitizer": "2025.3.1.0", "errors": {"1_naive": {"memcheck": 0}}}
STATS = {
    "passed": [
        _report("tests/test_gpu.py::test_odd_lengths[1_naive-1]"),
        _report("tests/test_fuzz.py::test_bad_calls[1_naive]", keywords=("gpu",)),
        _report("tests/test_sanitize.py::test_compute_sanitizer_finds_no_errors_in_any_kernel", keywords=("gpu", "sanitize"),
                props=[(suite.SANITIZE_PROPERTY, SANITIZED)]),
        _report("tests/test_hardware.py::test_slug_names_result_files"),
    ],
    "failed": [_report("tests/test_fuzz.py::test_every_case[2_float4-elu]", "failed", keywords=("gpu",))],
    "skipped": [
        _report("tests/test_gpu.py::test_other_device_index_is_respected[1_naive]", "skipped", "needs two GPUs"),
        _report("tests/test_gpu.py::test_other_device_index_is_respected[2_float4]", "skipped", "needs two GPUs"),
    ],
}


def test_summary_counts_failures_and_skip_reasons():
    s = suite.summarize(STATS, 1)
    assert s["counts"] == {"passed": 4, "failed": 1, "error": 0, "skipped": 2, "xfailed": 0, "xpassed": 0}
    assert not s["passed"] and s["exit_status"] == 1
    assert s["failures"] == ["tests/test_fuzz.py::test_every_case[2_float4-elu]"]
    assert s["per_file"]["tests/test_gpu.py"] == {"passed": 1, "skipped": 2}
    assert s["per_file"]["tests/test_fuzz.py"] == {"passed": 1, "failed": 1}
    assert s["skip_reasons"] == {"needs two GPUs": 2}
    clean = {"passed": STATS["passed"], "skipped": STATS["skipped"]}
    assert suite.summarize(clean, 0)["passed"]


def test_only_a_run_with_gpu_tests_run_is_recorded():
    assert suite.ran_on_gpu(STATS)
    cpu_only = {"passed": [_report("tests/test_hardware.py::test_slug"), _report("tests/test_sanitize.py::test_parse")],
                "skipped": [_report("tests/test_gpu.py::test_odd_lengths", "skipped", "needs a CUDA GPU"),
                            _report("tests/test_fuzz.py::test_bad_calls", "skipped", "needs a CUDA GPU", ("gpu",))]}
    assert not suite.ran_on_gpu(cpu_only)


def test_the_sanitizer_verdicts_come_from_its_test():
    assert suite.sanitize_verdicts(STATS) == SANITIZED
    assert suite.sanitize_verdicts({"passed": STATS["passed"][:2]}) is None


def test_the_record_is_written_beside_the_results_only_with_a_gpu(tmp_path):
    fuzz = suite.fuzz_settings(examples=60, seed=99, environ={})
    provenance = {"gpu": "NVIDIA H200", "driver": "580.159.04", "date_utc": "2026-11-30T00:00:00+00:00"}
    args = dict(stats=STATS, exitstatus=1, fuzz=fuzz, args=["-q", "-x"], results_dir=tmp_path,
                provenance=lambda: provenance, duration_s=123.456)
    assert suite.write_record(gpu_available=lambda: False, **args) is None
    assert list(tmp_path.iterdir()) == []
    path = suite.write_record(gpu_available=lambda: True, **args)
    assert path == tmp_path / "nvidia-h200-tests.json"
    data = record.read(path, "tests")
    assert data["command"] == "python -m pytest -q -x" and data["duration_s"] == 123.5
    assert data["counts"]["failed"] == 1 and not data["passed"]
    assert data["fuzz"]["hypothesis_seed"] == 99 and data["fuzz"]["examples_per_test"] == 60
    assert data["sanitizer"] == SANITIZED
    assert data["provenance"] == provenance
    cpu_only = {"passed": [_report("tests/test_hardware.py::test_slug")]}
    assert suite.write_record(**{**args, "stats": cpu_only}, gpu_available=lambda: True) is None


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
