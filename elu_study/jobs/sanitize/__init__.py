"""compute-sanitizer over every build: ``python -m elu_study sanitize``.

memcheck, racecheck, initcheck and synccheck each watch a child process (``child``) that calls every op of every
build on small, misaligned, in-place and strided inputs, without PyTorch's caching allocator; a run with errors is
repeated build by build (``runs``). 0 errors everywhere is the verdict, written to ``results/<gpu>-sanitize.json``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from elu_study.core import record
from elu_study.core.build import build_all
from elu_study.core.hardware import provenance
from elu_study.jobs.sanitize.builds import Build, library_entry, select_builds
from elu_study.jobs.sanitize.runner import TOOLS, find_compute_sanitizer, sanitizer_version, subprocess_runner
from elu_study.jobs.sanitize.runs import describe, report, sanitize


class NoGpu(RuntimeError):
    """The sanitizer has nothing to run on."""


def run(names: list[str] | None = None, *, which: str = "all", tools=TOOLS, jobs: int | None = None,
        per_build: bool = False, progress: bool = True, extra_builds: list[Build] = ()) -> dict:
    """Compile the builds, run every tool over them, and return the report (see ``runs.report``)."""
    exe = find_compute_sanitizer()
    if not torch.cuda.is_available():
        raise NoGpu("compute-sanitizer needs a CUDA GPU, and torch sees none")
    builds = [*select_builds(names, which), *extra_builds]
    build_all([(b.variant, b.flags) for b in builds], workers=jobs)
    libraries = {b.id: library_entry(b) for b in builds}  # from the disk cache, before any thread starts
    runs = sanitize(builds, tools, subprocess_runner(exe, libraries), workers=max(4, len(tools)),
                    per_build=per_build, progress=progress)
    return report(builds, runs, sanitizer_version(exe), provenance())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study sanitize", description=__doc__.split("\n\n")[1])
    parser.add_argument("builds", nargs="*", help="steps or .cu files [all]")
    parser.add_argument("--files", action="store_true", help="one build per kernel file")
    parser.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated, from {','.join(TOOLS)}")
    parser.add_argument("--jobs", type=int, default=None, help="parallel builds")
    parser.add_argument("--per-build", action="store_true", help="one run per (build, tool)")
    parser.add_argument("--no-record", action="store_true", help="write no record")
    args = parser.parse_args(argv)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    if unknown := sorted(set(tools) - set(TOOLS)):
        parser.error(f"unknown tool(s) {', '.join(unknown)}; known: {', '.join(TOOLS)}")
    try:
        rep = run(args.builds, which="files" if args.files else "all", tools=tools, jobs=args.jobs, per_build=args.per_build)
    except (FileNotFoundError, NoGpu) as err:
        print(f"elu-study sanitize: {err}", file=sys.stderr)
        return 2
    print(describe(rep))
    if not args.no_record:
        print(f"\nwrote {record.save(rep, 'sanitize')}")
    return 0 if rep["passed"] else 1


def write_report(gpu: str = record.REFERENCE_GPU) -> list[Path]:
    """No figure, no README block: only reads the GPU's record (if any), so that an unreadable one is reported."""
    record.load(gpu, "sanitize", required=False)
    return []
