"""compute-sanitizer over every kernel (on a GPU), and the machinery around it (anywhere).

On a GPU with compute-sanitizer: memcheck, racecheck, initcheck and synccheck over every build the
fuzz tests cover, 0 errors required; and a planted out-of-bounds write that memcheck must report.
Everywhere: reading the tool's summaries, finding the tool, choosing builds, attributing a failed
group run to its build, and the child's workload, run on the CPU against fakes.
"""

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from elu_study.core import record
from elu_study.core.build import compile_variant, known_variants
from elu_study.core.ops import OPS
from elu_study.core.paths import REPO_ROOT
from elu_study.jobs import sanitize
from elu_study.jobs.sanitize import Build, child, library_entry, select_builds

PLANTED = Path(__file__).parent / "data" / "planted_oob.cu"

MEMCHECK_CLEAN = """\
========= COMPUTE-SANITIZER
elu-study sanitize child: 1_naive ok
elu-study sanitize child: done: 120 calls over 1 build(s)
========= ERROR SUMMARY: 0 errors
"""
MEMCHECK_DIRTY = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at planted_oob_kernel(const float *, float *, long, float)+0x1b0 in planted_oob.cu:10
=========     by thread (1,0,0) in block (0,0,0)
=========     Address 0x7f0000000004 is out of bounds
========= Invalid __global__ write of size 4 bytes
=========     at planted_oob_kernel(const float *, float *, long, float)+0x1b0 in planted_oob.cu:10
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cudaStreamSynchronize.
RuntimeError: CUDA error: unspecified launch failure
========= Target application returned an error
========= ERROR SUMMARY: 4 errors
"""
RACECHECK = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at k()+0x140
=========     and Read access at k()+0xe0 [4 hazards]
elu-study sanitize child: done: 10 calls over 1 build(s)
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
"""


# ---------------------------------------------------------------- reading the tool


def test_error_summaries_are_read():
    assert sanitize.parse_errors(MEMCHECK_CLEAN) == 0
    assert sanitize.parse_errors(MEMCHECK_DIRTY) == 4
    assert sanitize.parse_errors("========= ERROR SUMMARY: 1 error\n") == 1
    assert sanitize.parse_errors(RACECHECK) == 1
    assert sanitize.parse_errors(RACECHECK.replace("(1 error, 1 warning)", "(0 errors, 0 warnings)")) == 0


def test_a_run_without_a_summary_has_no_error_count_and_is_not_clean():
    assert sanitize.parse_errors("Traceback (most recent call last):\nImportError: no torch\n") is None
    run = sanitize.run_one(lambda tool, builds: (1, "ImportError: no torch\n"), "memcheck", [Build("a", "a")])
    assert run.errors is None and not run.ok


def test_a_clean_run_needs_zero_errors_a_finished_child_and_exit_0():
    build = [Build("b", "b")]
    assert sanitize.run_one(lambda t, b: (0, MEMCHECK_CLEAN), "memcheck", build).ok
    unfinished = MEMCHECK_CLEAN.replace("elu-study sanitize child: done", "elu-study sanitize child: 1_naive")
    assert not sanitize.run_one(lambda t, b: (0, unfinished), "memcheck", build).ok
    assert not sanitize.run_one(lambda t, b: (1, MEMCHECK_CLEAN), "memcheck", build).ok
    dirty = sanitize.run_one(lambda t, b: (sanitize.ERROR_EXITCODE, MEMCHECK_DIRTY), "memcheck", build)
    assert not dirty.ok and dirty.errors == 4


def test_the_command_names_the_tool_and_the_exit_code():
    cmd = sanitize.sanitizer_command("/opt/cs", "initcheck", ["python", "-c", "pass"])
    assert cmd[0] == "/opt/cs" and cmd[-3:] == ["python", "-c", "pass"]
    assert cmd[cmd.index("--tool") + 1] == "initcheck"
    assert cmd[cmd.index("--error-exitcode") + 1] == str(sanitize.ERROR_EXITCODE)
    assert cmd[cmd.index("--target-processes") + 1] == "application-only"


def test_newer_checks_are_asked_for_where_the_tool_has_them(tmp_path):
    exe = tmp_path / "compute-sanitizer"
    exe.write_text("#!/bin/sh\necho '  --tool arg (=memcheck)'\necho '  --check-tensor-ops arg (=no)   Enables checks'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    supported = sanitize.supported_options(str(exe))
    assert {"--tool", "--check-tensor-ops"} <= supported and "--initcheck-address-space" not in supported
    memcheck = sanitize.sanitizer_command(str(exe), "memcheck", ["py"], supported)
    assert memcheck[memcheck.index("--check-tensor-ops") + 1] == "yes" and memcheck[-1] == "py"
    assert "--initcheck-address-space" not in sanitize.sanitizer_command(str(exe), "initcheck", ["py"], supported)
    assert "--check-tensor-ops" not in sanitize.sanitizer_command(str(exe), "memcheck", ["py"])  # an older tool


def _no_sanitizer_anywhere(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))


def test_the_tool_is_found_under_cuda_home(monkeypatch, tmp_path):
    _no_sanitizer_anywhere(monkeypatch, tmp_path)
    exe = tmp_path / "cuda" / "bin" / "compute-sanitizer"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\necho 'Version 2025.3.1.0'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    assert sanitize.find_compute_sanitizer() == str(exe)
    assert sanitize.sanitizer_version(str(exe)) == "2025.3.1.0"


def test_a_missing_tool_is_a_clear_error(monkeypatch, tmp_path, capsys):
    _no_sanitizer_anywhere(monkeypatch, tmp_path)
    with pytest.raises(FileNotFoundError, match="compute-sanitizer not found .* CUDA toolkit"):
        sanitize.find_compute_sanitizer()
    assert sanitize.main([]) == 2  # and the command says so, without a traceback
    assert "compute-sanitizer not found" in capsys.readouterr().err


# ---------------------------------------------------------------- which builds, and whose errors


def test_builds_are_chosen_by_step_or_file():
    every = select_builds()
    assert {b.variant for b in every} >= set(known_variants()) and len({b.id for b in every}) == len(every)
    grid = select_builds(["3"])
    assert grid and {b.variant for b in grid} == {"3_grid_stride"} and any(b.flags for b in grid)
    assert select_builds(["float4", "2_float4"]) == select_builds(["2"])
    planted = select_builds([str(PLANTED)])
    assert planted == [Build("planted_oob.cu", str(PLANTED.resolve()))]
    with pytest.raises(ValueError, match="unknown variant '9_magic'"):
        select_builds(["9_magic"])


def _fake_runner(bad: dict[str, set[str]]):
    """A runner whose tool reports 2 errors for every build in bad[tool], as compute-sanitizer would."""
    calls = []

    def run(tool, builds):
        calls.append((tool, [b.id for b in builds]))
        errors = 2 * sum(b.id in bad.get(tool, ()) for b in builds)
        said = "elu-study sanitize child: done\n" if not errors else "RuntimeError: unspecified launch failure\n"
        return (sanitize.ERROR_EXITCODE if errors else 0), f"{said}========= ERROR SUMMARY: {errors} errors\n"

    return run, calls


BUILDS = [Build(name, name) for name in ("1_naive", "2_float4", "3_grid_stride")]


def test_clean_builds_take_one_run_per_tool_and_group():
    fake, calls = _fake_runner({})
    split = sanitize.sanitize(BUILDS, sanitize.TOOLS, fake, groups=2)  # 3 builds: runs of 2 and 1, per tool
    assert sorted(calls) == sorted((t, ids) for t in sanitize.TOOLS for ids in ([b.id for b in BUILDS[:2]],
                                                                               [BUILDS[2].id]))
    assert sanitize.report(split, "v", {})["builds"] == sanitize.report(split[::-1], "v", {})["builds"]
    assert list(sanitize.report(split, "v", {})["builds"]) == [b.id for b in BUILDS]
    calls.clear()
    done = sanitize.sanitize(BUILDS, sanitize.TOOLS, fake, groups=1)
    assert sorted(calls) == sorted((t, [b.id for b in BUILDS]) for t in sanitize.TOOLS)
    rep = sanitize.report(done, "2025.3", {"gpu": "NVIDIA H200"})
    assert rep["passed"] and rep["tools"] == list(sanitize.TOOLS) and list(rep["builds"]) == [b.id for b in BUILDS]
    assert rep["builds"]["3_grid_stride"] == dict.fromkeys(sanitize.TOOLS, {"errors": 0, "ok": True})
    assert sanitize.describe(rep, done).splitlines()[-1] == "PASS: 0 errors"


def test_a_failed_group_run_is_repeated_build_by_build_to_name_the_build():
    fake, calls = _fake_runner({"memcheck": {"2_float4"}})
    done = sanitize.sanitize(BUILDS, ("memcheck", "initcheck"), fake, groups=1)
    assert len(calls) == 2 + len(BUILDS)  # two group runs, then memcheck alone on each build
    rep = sanitize.report(done, None, {"gpu": "NVIDIA H200"})
    assert not rep["passed"]
    assert rep["builds"]["2_float4"]["memcheck"] == {"errors": 2, "ok": False}
    assert rep["builds"]["1_naive"]["memcheck"] == {"errors": 0, "ok": True}
    assert rep["builds"]["2_float4"]["initcheck"] == {"errors": 0, "ok": True}
    text = sanitize.describe(rep, done)
    assert "FAIL" in text and "memcheck over 2_float4:\nRuntimeError: unspecified launch failure" in text
    assert re.search(r"^2_float4 +2 ! +0$", text, re.MULTILINE)  # the table's row: memcheck failed, initcheck clean


def test_the_report_is_saved_under_the_gpus_name(tmp_path):
    fake, _ = _fake_runner({})
    provenance = record.load("nvidia-h200", "sanitize")["provenance"]  # a real run's: the schema requires every field
    rep = sanitize.report(sanitize.sanitize(BUILDS, ("memcheck",), fake), "v", provenance)
    path = record.save(rep, "sanitize", tmp_path)
    assert path == tmp_path / "nvidia-h200-sanitize.json"
    assert '"passed": true' in path.read_text()
    assert record.read(path, "sanitize")["builds"] == rep["builds"]


# ---------------------------------------------------------------- the child's workload, on the CPU


class _Elu:
    def __init__(self, overrun=False):
        self.overrun = overrun
        self.lengths = []

    def elu(self, x, alpha=1.0, out=None):
        self.lengths.append(x.numel())
        y = out if out is not None else torch.empty(x.shape)
        y.copy_(F.elu(x, alpha))
        if self.overrun and x.numel() % 4:
            y.view(-1)[-1] = 7.0  # stands in for a wrong tail
        return y


def test_the_child_calls_every_length_and_checks_every_result():
    fake = _Elu()
    calls = child.exercise(fake.elu, OPS["elu"], "cpu")
    assert calls == len(fake.lengths) and calls >= 8 * len(child.SMALL_LENGTHS)
    assert set(child.SMALL_LENGTHS) | {child.LARGE_LENGTH} == set(fake.lengths)
    with pytest.raises(AssertionError, match=r"wrong result \(torch.float32\)"):
        child.exercise(_Elu(overrun=True).elu, OPS["elu"], "cpu")
    with pytest.raises(AssertionError, match=r"wrong result \(torch.bfloat16\)"):
        child.exercise(_Elu(overrun=True).elu, OPS["elu"], "cpu", dtype=torch.bfloat16)


def test_the_child_takes_the_dtypes_the_spec_names_for_each_op():
    entry = {"dtypes": {"elu": ["float32", "float16", "bfloat16"], "elu_backward": ["float32"]}}
    assert child.dtypes_of(entry, OPS["elu"]) == [torch.float32, torch.float16, torch.bfloat16]
    assert child.dtypes_of(entry, OPS["elu_backward"]) == [torch.float32]
    assert child.dtypes_of({}, OPS["elu"]) == [torch.float32]


def test_the_child_loads_a_build_without_compiling():
    """The child imports each build's shared library by path; here in a fresh process, with no GPU needed."""
    entry = library_entry(Build("1_naive", "1_naive"))
    assert entry["library"] == compile_variant("1_naive").__file__
    assert entry["dtypes"] == {"elu": ["float32"], "elu_backward": ["float32"]}  # step 1 has no 16-bit path
    code = ("import sys, torch; from pathlib import Path; from elu_study.core.build import register; "
            "from elu_study.core.ops import registered_ops; "
            "print(registered_ops(register(Path(sys.argv[2]), sys.argv[1], sys.argv[1])))")
    path = os.pathsep.join(filter(None, (str(REPO_ROOT), os.environ.get("PYTHONPATH"))))  # keep the caller's too
    done = subprocess.run([sys.executable, "-c", code, entry["module"], entry["library"]], capture_output=True,
                          text=True, cwd=REPO_ROOT, timeout=300, env={**os.environ, "PYTHONPATH": path})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['elu', 'elu_backward']"


# ---------------------------------------------------------------- on the GPU


def _sanitizer_or_skip() -> str:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: compute-sanitizer runs the kernels")
    try:
        return sanitize.find_compute_sanitizer()
    except FileNotFoundError as err:
        pytest.skip(str(err))


@pytest.mark.gpu
@pytest.mark.sanitize
def test_compute_sanitizer_reports_a_planted_out_of_bounds_write():
    """The sanitize job's zero errors (its record; the records runner runs it) mean something only if the same
    machinery sees a fault: a write one past the end."""
    _sanitizer_or_skip()
    rep, done = sanitize.run([str(PLANTED)], tools=("memcheck",))
    verdict = rep["builds"]["planted_oob.cu"]["memcheck"]
    assert not rep["passed"] and not verdict["ok"] and verdict["errors"] >= 1, sanitize.describe(rep, done)
    assert "Invalid __global__ write" in done[0].output, sanitize.describe(rep, done)


FAKE_SANITIZER = '''#!{python}
"""Stands in for compute-sanitizer: checks how it is called, starts the child's module, prints a summary."""
import json, os, subprocess, sys
args = sys.argv[1:]
assert args[0] == "--tool", args
child = args[args.index("--print-limit") + 2:]
assert child[1:3] == ["-m", "elu_study.jobs.sanitize.child"], child
spec = json.load(open(child[3]))
assert [b["id"] for b in spec["builds"]] == ["1_naive"], spec
assert os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1"
done = subprocess.run([child[0], "-m", "elu_study", "sanitize", "--help"], capture_output=True, text=True)
assert done.returncode == 0 and ".cu files" in done.stdout, done.stderr
print("elu-study sanitize child: done: 0 calls over 1 build(s)")
print("========= ERROR SUMMARY: 0 errors")
'''


def test_the_runner_starts_the_child_under_the_tool(tmp_path):
    exe = tmp_path / "compute-sanitizer"
    exe.write_text(FAKE_SANITIZER.format(python=sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    build = Build("1_naive", "1_naive")
    start = sanitize.subprocess_runner(str(exe), {"1_naive": {"id": "1_naive", "module": "m", "library": "/x.so"}})
    run = sanitize.run_one(start, "memcheck", [build])
    assert run.ok, run.output
    assert run.errors == 0 and sanitize.CHILD_OK in run.output
