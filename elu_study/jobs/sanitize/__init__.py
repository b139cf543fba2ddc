"""compute-sanitizer over every build: ``python -m elu_study sanitize [STEP or FILE.cu ...]``.

memcheck, racecheck, initcheck and synccheck each watch child processes (``child``, one per group of builds,
all side by side) that call every op of every build on small, misaligned, in-place and strided inputs, without
PyTorch's caching allocator; a run with errors is repeated build by build, to name the build. 0 errors everywhere is
the verdict, written to ``results/<gpu>-sanitize.json``."""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd
import torch
from tqdm.auto import tqdm

from elu_study.core import record
from elu_study.core.build import build_all, compile_variant, configure_toolchain, resolve_variant
from elu_study.core.entries import build_id, computes_elu, fuzz_builds
from elu_study.core.hardware import provenance
from elu_study.core.ops import accepted_dtypes, ops_of
from elu_study.core.paths import REPO_ROOT

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
ERROR_EXITCODE = 86  # what compute-sanitizer returns when it found errors (the child's own failures exit 1)
CHILD_OK = "elu-study sanitize child: done"  # the child's last line, printed once every call was right
CHILD_MODULE = "elu_study.jobs.sanitize.child"  # run as python -m CHILD_MODULE SPEC
# Every tensor its own cudaMalloc of exactly its size, so that the tools see each tensor's bounds.
CHILD_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "PYTHONUNBUFFERED": "1"}
TIMEOUT_S = 3600  # per run of the tool
_ERROR_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+errors?")
_RACECHECK_SUMMARY = re.compile(r"RACECHECK SUMMARY:\s*\d+\s+hazards?\s+displayed\s*\((\d+)\s+errors?")
# Newer releases' checks (Hopper's TMA copies; shared memory too), passed where the tool's --help lists them (not
# every CUDA 13 release's compute-sanitizer has both).
OPTIONAL_CHECKS = {"memcheck": (("--check-tensor-ops", "yes"),), "initcheck": (("--initcheck-address-space", "all"),)}


class NoGpu(RuntimeError):
    """The sanitizer has nothing to run on."""


@dataclass(frozen=True)
class Build:
    id: str
    variant: str
    flags: tuple[str, ...] = ()
    computes_elu: bool = True  # False: a copy kernel, whose results are read but not compared with ELU


def build_of(variant: str, flags=()) -> Build:
    """The Build of a step's file (with these extra flags), or of a .cu file of one's own."""
    if str(variant).endswith(".cu"):
        return Build(build_id(Path(variant).name, tuple(flags)), str(variant), tuple(flags))
    return Build(build_id(variant, tuple(flags)), str(variant), tuple(flags), computes_elu(variant, flags))


def select_builds(names: list[str] | None = None) -> list[Build]:
    """The builds named (a step: all its builds; or a .cu file), else every build the study compiles."""
    every, chosen = [build_of(v, f) for v, f in fuzz_builds("all")], []
    for name in names or ():
        if str(name).endswith(".cu"):
            chosen.append(build_of(str(resolve_variant(name))))
            continue
        stem = resolve_variant(name).stem  # raises ValueError listing the known steps
        matching = [b for b in every if b.variant == stem] or [build_of(stem)]
        chosen += [b for b in matching if b not in chosen]
    return chosen or every


def library_entry(b: Build) -> dict:
    """What the child needs to load a build (compiled here if need be), with the dtypes each op takes."""
    module = compile_variant(b.variant, extra_cuda_cflags=list(b.flags))
    dtypes = {op.name: [str(d).removeprefix("torch.") for d in accepted_dtypes(module, op)] for op in ops_of(module)}
    return {"id": b.id, "module": module.__name__, "library": module.__file__, "computes_elu": b.computes_elu,
            "dtypes": dtypes}


Runner = Callable[[str, list[Build]], tuple[int, str]]  # (tool, builds) -> (returncode, output)


def find_compute_sanitizer() -> str:
    """compute-sanitizer from PATH, else from the CUDA toolkit's bin ($CUDA_HOME, $CUDA_PATH or /usr/local/cuda)."""
    configure_toolchain()
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    found = shutil.which("compute-sanitizer") or shutil.which("compute-sanitizer", path=str(Path(home, "bin")))
    if found is None:
        raise FileNotFoundError("compute-sanitizer not found on PATH or in $CUDA_HOME/bin: it ships with the CUDA "
                                "toolkit; put it on PATH or set CUDA_HOME")
    return found


def _ask(exe: str, flag: str) -> str:
    return subprocess.run([exe, flag], capture_output=True, text=True, timeout=60).stdout


def sanitizer_version(exe: str) -> str | None:
    match = re.search(r"Version\s+(\S+)", _ask(exe, "--version"))
    return match.group(1) if match else None


def parse_errors(text: str) -> int | None:
    """The largest error count of the output's ``ERROR SUMMARY`` (and ``RACECHECK SUMMARY``) lines; None if none."""
    return max((int(n) for n in _ERROR_SUMMARY.findall(text) + _RACECHECK_SUMMARY.findall(text)), default=None)


def supported_options(exe: str) -> frozenset[str]:
    """The ``--options`` this compute-sanitizer's ``--help`` lists."""
    return frozenset(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", _ask(exe, "--help")))


def sanitizer_command(exe: str, tool: str, child: list[str], supported: frozenset[str] = frozenset()) -> list[str]:
    extra = [part for option, value in OPTIONAL_CHECKS.get(tool, ()) if option in supported for part in (option, value)]
    return [exe, "--tool", tool, "--error-exitcode", str(ERROR_EXITCODE), "--target-processes", "application-only",
            "--launch-timeout", "600",  # importing torch in a loaded machine takes a while
            "--print-limit", "50", *extra, *child]


def subprocess_runner(exe: str, libraries: dict[str, dict]) -> Runner:
    """Run the child under compute-sanitizer over ``libraries`` (build id -> ``library_entry``)."""
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, **CHILD_ENV, "PYTHONPATH": path}
    supported = supported_options(exe)

    def run(tool: str, builds: list[Build]) -> tuple[int, str]:
        with tempfile.TemporaryDirectory(prefix="elu-sanitize-") as tmp:
            spec = Path(tmp, "builds.json")
            spec.write_text(json.dumps({"builds": [libraries[b.id] for b in builds]}))
            cmd = sanitizer_command(exe, tool, [sys.executable, "-m", CHILD_MODULE, str(spec)], supported)
            try:
                done = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
                return done.returncode, done.stdout + done.stderr
            except subprocess.TimeoutExpired as err:
                out = (err.stdout or b"").decode(errors="replace")  # bytes even with text=True (documented)
                return -1, out + f"\n(timed out after {TIMEOUT_S} s)"

    return run


@dataclass
class Run:
    tool: str
    builds: list[Build]
    errors: int | None  # None: the tool printed no summary (it, or the run, did not finish)
    ok: bool  # 0 errors, exit status 0, and the child ran every call and every result was right
    output: str  # the tool's and the child's, shown where the run failed


def run_one(runner: Runner, tool: str, builds: list[Build]) -> Run:
    returncode, output = runner(tool, builds)
    errors = parse_errors(output)
    return Run(tool, builds, errors, errors == 0 and returncode == 0 and CHILD_OK in output, output)


GROUPS = 4  # each tool's builds split into this many runs: the tools' runs side by side, on a core each


def run_all(runner: Runner, tasks: list[tuple[str, list[Build]]], desc: str) -> list[Run]:
    """run_one over every (tool, builds) task, side by side (a process each, one per core at most)."""
    with ThreadPoolExecutor(max_workers=max(1, min(len(tasks), os.cpu_count() or 1))) as pool:
        done = pool.map(lambda task: run_one(runner, *task), tasks)
        return list(tqdm(done, total=len(tasks), desc=desc, unit="run"))


def sanitize(builds: list[Build], tools, runner: Runner, groups: int = GROUPS) -> list[Run]:
    """Every tool over every build, in ``groups`` runs per tool, all side by side; a failed run is repeated build by
    build, to name the build."""
    size = max(1, -(-len(builds) // max(1, groups)))  # at most ``groups`` runs of consecutive builds, as even as can be
    runs = run_all(runner, [(tool, builds[i:i + size]) for tool in tools for i in range(0, len(builds), size)],
                   "sanitizing")
    retry = [(r.tool, [b]) for r in runs if not r.ok and len(r.builds) > 1 for b in r.builds]
    return runs + (run_all(runner, retry, "finding the build") if retry else [])


def report(runs: list[Run], version: str | None, provenance: dict | None) -> dict:
    """The record's body: the verdict, the tool's version and each build's errors per tool, from the build's own
    run where its group's failed (the build-by-build runs come last)."""
    builds: dict[str, dict[str, dict]] = {}
    for r in runs:
        for b in r.builds:
            builds.setdefault(b.id, {})[r.tool] = {"errors": r.errors, "ok": r.ok}
    return {"passed": bool(runs) and all(r.ok for r in runs), "compute_sanitizer": version,
            "tools": list(dict.fromkeys(r.tool for r in runs)), "builds": builds, "provenance": provenance}


def describe(rep: dict, runs: list[Run]) -> str:
    """Errors per build and tool ('!': the run failed), the verdict, and the end of every failed run's output."""
    table = pd.DataFrame({build: {tool: f"{v['errors']}{'' if v['ok'] else ' !'}" for tool, v in row.items()}
                          for build, row in rep["builds"].items()}).T
    failed = [f"\n--- {r.tool} over {', '.join(b.id for b in r.builds)}:\n" + "\n".join(r.output.splitlines()[-60:])
              for r in runs if not r.ok]
    return "\n".join([table.to_string(), "PASS: 0 errors" if rep["passed"] else "FAIL", *failed])


def run(names: list[str] | None = None, *, tools=TOOLS) -> tuple[dict, list[Run]]:
    """Compile the builds, run every tool over them: the record's body (``report``) and the runs."""
    exe = find_compute_sanitizer()
    if not torch.cuda.is_available():
        raise NoGpu("compute-sanitizer needs a CUDA GPU, and torch sees none")
    builds = select_builds(names)
    build_all([(b.variant, b.flags) for b in builds])
    libraries = {b.id: library_entry(b) for b in builds}  # from the disk cache, before any thread starts
    runs = sanitize(builds, tools, subprocess_runner(exe, libraries))
    return report(runs, sanitizer_version(exe), provenance()), runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study sanitize", description=__doc__.split("\n\n")[1])
    parser.add_argument("builds", nargs="*", help="steps or .cu files (default: every build, and the record)")
    names = parser.parse_args(argv).builds
    try:
        rep, runs = run(names)
    except (FileNotFoundError, NoGpu) as err:
        print(f"elu-study sanitize: {err}", file=sys.stderr)
        return 2
    print(describe(rep, runs))
    if not names:  # the record is every build's verdict: a run over some builds leaves it as it is
        print(f"\nwrote {record.save(rep, 'sanitize')}")
    return 0 if rep["passed"] else 1
