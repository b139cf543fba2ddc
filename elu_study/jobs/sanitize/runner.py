"""compute-sanitizer itself: finding it, the command that runs the child under it, reading its output."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from elu_study.core.build import configure_toolchain
from elu_study.core.paths import REPO_ROOT
from elu_study.jobs.sanitize.builds import Build

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
ERROR_EXITCODE = 86  # what compute-sanitizer returns when it found errors (the child's own failures exit 1)
CHILD_OK = "elu-study sanitize child: done"  # the child's last line, printed once every call was right
CHILD_MODULE = "elu_study.jobs.sanitize.child"  # run as python -m CHILD_MODULE SPEC
DEFAULT_CUDA_HOMES = ("/usr/local/cuda",)
CHILD_ENV = {
    # Every tensor its own cudaMalloc of exactly its size, so that the tools see each tensor's bounds
    # (inside a cached block, a write past a tensor's end lands in memory that is allocated).
    "PYTORCH_NO_CUDA_MEMORY_CACHING": "1",
    "PYTHONUNBUFFERED": "1",
}
_ERROR_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+errors?")
_HEADLINE = re.compile(r"^=+ +((?:Invalid|Uninitialized|Race reported|Barrier error|Program hit|Target application"
                       r"|Error|Warning|Potential).*)$", re.MULTILINE)
_RACECHECK_SUMMARY = re.compile(
    r"RACECHECK SUMMARY:\s*(\d+)\s+hazards?\s+displayed\s*\((\d+)\s+errors?,\s*(\d+)\s+warnings?\)")
# Checks that newer releases have and that later steps need, each passed where the tool lists it in --help:
# the bulk tensor copies (TMA) of Hopper for memcheck, and shared memory as well as global for initcheck.
OPTIONAL_CHECKS = {
    "memcheck": (("--check-tensor-ops", "yes"),),
    "initcheck": (("--initcheck-address-space", "all"),),
}

Runner = Callable[[str, list[Build]], tuple[int, str, float]]  # (tool, builds) -> (returncode, output, seconds)


# ---------------------------------------------------------------- finding the tool


def find_compute_sanitizer() -> str:
    """compute-sanitizer from PATH, $CUDA_HOME, /usr/local/cuda, or an nvidia-cuda-sanitizer-api wheel."""
    configure_toolchain()
    candidates = []
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), *DEFAULT_CUDA_HOMES):
        if home:
            candidates += [Path(home, "bin", "compute-sanitizer"), Path(home, "compute-sanitizer", "compute-sanitizer")]
    candidates += wheel_candidates()
    found = shutil.which("compute-sanitizer") or next(
        (str(p) for p in candidates if p.is_file() and os.access(p, os.X_OK)), None)
    if found is None:
        raise FileNotFoundError(
            "compute-sanitizer not found on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin: it ships with the "
            "CUDA toolkit (or pip's nvidia-cuda-sanitizer-api); put it on PATH or set CUDA_HOME")
    return found


def wheel_candidates() -> list[Path]:
    """Where pip's nvidia-cuda-sanitizer-api puts compute-sanitizer, if it is installed."""
    try:
        import nvidia  # noqa: PLC0415 - optional, so lazy: pip's nvidia-cuda-sanitizer-api installs into this namespace
    except ImportError:
        return []
    found = []
    for base in nvidia.__path__:
        for pattern in ("*/compute-sanitizer/compute-sanitizer", "*/bin/compute-sanitizer",
                        "*/*/compute-sanitizer/compute-sanitizer", "*/*/bin/compute-sanitizer"):
            found += sorted(Path(base).glob(pattern))
    return found


def sanitizer_version(exe: str) -> str | None:
    try:
        text = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"Version\s+(\S+)", text)
    return match.group(1) if match else (text.strip().splitlines() or [None])[-1]


# ---------------------------------------------------------------- reading its output


@dataclass(frozen=True)
class Summary:
    errors: int | None  # None: the tool printed no summary (it, or the run, did not finish)
    warnings: int = 0  # racecheck's hazards of warning severity


def parse_summary(text: str) -> Summary:
    """The error count from a compute-sanitizer run's output: its ``ERROR SUMMARY: N errors`` lines
    (racecheck: ``RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)``); the largest if
    several, None if there is none."""
    counts = [int(n) for n in _ERROR_SUMMARY.findall(text)]
    warnings = 0
    for _, errors, warns in _RACECHECK_SUMMARY.findall(text):
        counts.append(int(errors))
        warnings = max(warnings, int(warns))
    return Summary(max(counts) if counts else None, warnings)


def headlines(text: str, limit: int = 10) -> list[str]:
    """The distinct first lines of the tool's reports (``Invalid __global__ write of size 4 bytes``, ...)."""
    return list(dict.fromkeys(m.strip() for m in _HEADLINE.findall(text)))[:limit]


# ---------------------------------------------------------------- running the child under it


def supported_options(exe: str) -> frozenset[str]:
    """The ``--options`` this compute-sanitizer's ``--help`` lists."""
    try:
        text = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))


def sanitizer_command(exe: str, tool: str, child: list[str], supported: frozenset[str] = frozenset()) -> list[str]:
    if tool not in TOOLS:
        raise ValueError(f"unknown compute-sanitizer tool {tool!r}; known: {', '.join(TOOLS)}")
    extra = [part for option, value in OPTIONAL_CHECKS.get(tool, ()) if option in supported for part in (option, value)]
    return [
        exe, "--tool", tool,
        "--error-exitcode", str(ERROR_EXITCODE),
        "--target-processes", "application-only",
        "--launch-timeout", "600",  # importing torch in a loaded machine takes a while
        "--print-limit", "50",
        *extra,
        *child,
    ]


def child_command(spec: Path) -> list[str]:
    """The child process: this Python, running ``CHILD_MODULE`` over the builds that ``spec`` lists."""
    return [sys.executable, "-m", CHILD_MODULE, str(spec)]


def subprocess_runner(exe: str, libraries: dict[str, dict], timeout_s: float = 3600) -> Runner:
    """Run the child under compute-sanitizer: it compiles nothing, it loads each build's library
    (``libraries``: build id -> ``builds.library_entry``)."""
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, **CHILD_ENV, "PYTHONPATH": path}
    supported = supported_options(exe)

    def run(tool: str, builds: list[Build]) -> tuple[int, str, float]:
        with tempfile.TemporaryDirectory(prefix="elu-sanitize-") as tmp:
            spec = Path(tmp, "builds.json")
            spec.write_text(json.dumps({"builds": [libraries[b.id] for b in builds]}))
            cmd = sanitizer_command(exe, tool, child_command(spec), supported)
            start = time.perf_counter()
            try:
                done = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
                return done.returncode, done.stdout + done.stderr, time.perf_counter() - start
            except subprocess.TimeoutExpired as err:
                out = (err.stdout or b"").decode(errors="replace") if isinstance(err.stdout, bytes) else (err.stdout or "")
                return -1, out + f"\n(timed out after {timeout_s:.0f} s)", time.perf_counter() - start

    return run
