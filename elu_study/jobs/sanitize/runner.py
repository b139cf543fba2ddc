"""compute-sanitizer itself: finding it, the command that runs the child under it, reading its output."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from elu_study.core.build import configure_toolchain
from elu_study.core.paths import REPO_ROOT
from elu_study.jobs.sanitize.builds import Build

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
ERROR_EXITCODE = 86  # what compute-sanitizer returns when it found errors (the child's own failures exit 1)
CHILD_OK = "elu-study sanitize child: done"  # the child's last line, printed once every call was right
CHILD_MODULE = "elu_study.jobs.sanitize.child"  # run as python -m CHILD_MODULE SPEC
# Every tensor its own cudaMalloc of exactly its size, so that the tools see each tensor's bounds.
CHILD_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "PYTHONUNBUFFERED": "1"}
_ERROR_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+errors?")
_RACECHECK_SUMMARY = re.compile(r"RACECHECK SUMMARY:\s*\d+\s+hazards?\s+displayed\s*\((\d+)\s+errors?")
# Newer releases' checks (Hopper's TMA copies; shared memory too), passed where the tool's --help lists them (not
# every CUDA 13 release's compute-sanitizer has both).
OPTIONAL_CHECKS = {"memcheck": (("--check-tensor-ops", "yes"),), "initcheck": (("--initcheck-address-space", "all"),)}
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
    """What ``exe flag`` prints."""
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


def subprocess_runner(exe: str, libraries: dict[str, dict], timeout_s: float = 3600) -> Runner:
    """Run the child under compute-sanitizer over ``libraries`` (build id -> ``builds.library_entry``)."""
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, **CHILD_ENV, "PYTHONPATH": path}
    supported = supported_options(exe)

    def run(tool: str, builds: list[Build]) -> tuple[int, str]:
        with tempfile.TemporaryDirectory(prefix="elu-sanitize-") as tmp:
            spec = Path(tmp, "builds.json")
            spec.write_text(json.dumps({"builds": [libraries[b.id] for b in builds]}))
            cmd = sanitizer_command(exe, tool, [sys.executable, "-m", CHILD_MODULE, str(spec)], supported)
            try:
                done = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
                return done.returncode, done.stdout + done.stderr
            except subprocess.TimeoutExpired as err:
                out = (err.stdout or b"").decode(errors="replace") if isinstance(err.stdout, bytes) else (err.stdout or "")
                return -1, out + f"\n(timed out after {timeout_s:.0f} s)"

    return run
