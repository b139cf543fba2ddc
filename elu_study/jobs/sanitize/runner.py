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
# Every tensor its own cudaMalloc of exactly its size, so that the tools see each tensor's bounds.
CHILD_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "PYTHONUNBUFFERED": "1"}
_ERROR_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+errors?")
_HEADLINE = re.compile(r"^=+ +((?:Invalid|Uninitialized|Race reported|Barrier error|Program hit|Target application"
                       r"|Error|Warning|Potential).*)$", re.MULTILINE)
_RACECHECK_SUMMARY = re.compile(
    r"RACECHECK SUMMARY:\s*(\d+)\s+hazards?\s+displayed\s*\((\d+)\s+errors?,\s*(\d+)\s+warnings?\)")
# Newer releases' checks (Hopper's TMA copies; shared memory too), passed where the tool's --help lists them.
OPTIONAL_CHECKS = {"memcheck": (("--check-tensor-ops", "yes"),), "initcheck": (("--initcheck-address-space", "all"),)}
Runner = Callable[[str, list[Build]], tuple[int, str, float]]  # (tool, builds) -> (returncode, output, seconds)


def find_compute_sanitizer() -> str:
    """compute-sanitizer from PATH, $CUDA_HOME, /usr/local/cuda, or an nvidia-cuda-sanitizer-api wheel."""
    configure_toolchain()
    homes = [h for h in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), *DEFAULT_CUDA_HOMES) if h]
    candidates = [Path(h, sub, "compute-sanitizer") for h in homes for sub in ("bin", "compute-sanitizer")]
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
    tails = ("compute-sanitizer/compute-sanitizer", "bin/compute-sanitizer")
    patterns = [f"{d}{tail}" for d in ("*/", "*/*/") for tail in tails]
    return [p for base in nvidia.__path__ for pattern in patterns for p in sorted(Path(base).glob(pattern))]


def _ask(exe: str, flag: str) -> str | None:
    """What ``exe flag`` prints, or None if it cannot run."""
    try:
        return subprocess.run([exe, flag], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def sanitizer_version(exe: str) -> str | None:
    text = _ask(exe, "--version") or ""
    match = re.search(r"Version\s+(\S+)", text)
    return match.group(1) if match else (text.strip().splitlines() or [None])[-1]


@dataclass(frozen=True)
class Summary:
    errors: int | None  # None: the tool printed no summary (it, or the run, did not finish)
    warnings: int = 0  # racecheck's hazards of warning severity


def parse_summary(text: str) -> Summary:
    """The largest error count of the output's ``ERROR SUMMARY`` (and ``RACECHECK SUMMARY``) lines; None if none."""
    racecheck = _RACECHECK_SUMMARY.findall(text)  # (hazards, errors, warnings)
    counts = [int(n) for n in _ERROR_SUMMARY.findall(text)] + [int(errors) for _, errors, _ in racecheck]
    return Summary(max(counts) if counts else None, max((int(warns) for *_, warns in racecheck), default=0))


def headlines(text: str, limit: int = 10) -> list[str]:
    """The distinct first lines of the tool's reports (``Invalid __global__ write of size 4 bytes``, ...)."""
    return list(dict.fromkeys(m.strip() for m in _HEADLINE.findall(text)))[:limit]


def supported_options(exe: str) -> frozenset[str]:
    """The ``--options`` this compute-sanitizer's ``--help`` lists."""
    return frozenset(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", _ask(exe, "--help") or ""))


def sanitizer_command(exe: str, tool: str, child: list[str], supported: frozenset[str] = frozenset()) -> list[str]:
    if tool not in TOOLS:
        raise ValueError(f"unknown compute-sanitizer tool {tool!r}; known: {', '.join(TOOLS)}")
    extra = [part for option, value in OPTIONAL_CHECKS.get(tool, ()) if option in supported for part in (option, value)]
    return [exe, "--tool", tool, "--error-exitcode", str(ERROR_EXITCODE), "--target-processes", "application-only",
            "--launch-timeout", "600",  # importing torch in a loaded machine takes a while
            "--print-limit", "50", *extra, *child]


def subprocess_runner(exe: str, libraries: dict[str, dict], timeout_s: float = 3600) -> Runner:
    """Run the child under compute-sanitizer over ``libraries`` (build id -> ``builds.library_entry``)."""
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, **CHILD_ENV, "PYTHONPATH": path}
    supported = supported_options(exe)

    def run(tool: str, builds: list[Build]) -> tuple[int, str, float]:
        with tempfile.TemporaryDirectory(prefix="elu-sanitize-") as tmp:
            spec = Path(tmp, "builds.json")
            spec.write_text(json.dumps({"builds": [libraries[b.id] for b in builds]}))
            cmd = sanitizer_command(exe, tool, [sys.executable, "-m", CHILD_MODULE, str(spec)], supported)
            start = time.perf_counter()
            try:
                done = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
                return done.returncode, done.stdout + done.stderr, time.perf_counter() - start
            except subprocess.TimeoutExpired as err:
                out = (err.stdout or b"").decode(errors="replace") if isinstance(err.stdout, bytes) else (err.stdout or "")
                return -1, out + f"\n(timed out after {timeout_s:.0f} s)", time.perf_counter() - start

    return run
