"""compute-sanitizer over every build: ``python -m elu_study sanitize``.

Each tool (memcheck, racecheck, initcheck, synccheck) runs once over a child Python process
(``child``) that loads every build and calls each of its ops (``elu_study.core.ops``) on small
inputs: lengths around vector and block boundaries, misaligned input and output views, in place,
non-contiguous input, and one input past a grid-stride launch's first pass. The child allocates
without PyTorch's caching allocator, every tensor its own ``cudaMalloc`` of exactly its size, and
puts every output's last element at the end of its allocation, so that memcheck sees a write past
the end and initcheck a read of an element never written. Inputs are made on the host and results
checked there, against PyTorch: the only kernels the tools watch are the builds' own (and the copy
of a strided input), so nothing of PyTorch's can put an error in the report.

racecheck runs on every build, not only those whose resource report shows shared memory: dynamic
shared memory does not show there, and a kernel without any costs racecheck nothing.

The tools run side by side, over all builds at once; a run with errors is repeated build by build to
say which build has them (``runs``). 0 errors everywhere is the verdict; it is written, with the
provenance, to ``results/<gpu>-sanitize.json``.

Modules: ``builds`` (which builds), ``runner`` (the tool: finding it, its command, reading its
output), ``runs`` (the runs and the report), ``child`` (the process the tool watches).
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
    parser = argparse.ArgumentParser(
        prog="python -m elu_study sanitize",
        description="compute-sanitizer (memcheck, racecheck, initcheck, synccheck) over a small-input run of every "
                    "build; 0 errors required. Writes results/<gpu>-sanitize.json.")
    parser.add_argument("builds", nargs="*", help="steps (name, number or label: all their builds) or .cu files; "
                                                   "default: every build of the study")
    parser.add_argument("--files", action="store_true", help="one default build per kernel file, not every build")
    parser.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated, from {','.join(TOOLS)}")
    parser.add_argument("--jobs", type=int, default=None, help="parallel builds (default: half the cores)")
    parser.add_argument("--per-build", action="store_true", help="one run per build and tool (slower; exact attribution)")
    parser.add_argument("--no-record", action="store_true", help="do not write results/<gpu>-sanitize.json")
    args = parser.parse_args(argv)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = sorted(set(tools) - set(TOOLS))
    if unknown:
        parser.error(f"unknown tool(s) {', '.join(unknown)}; known: {', '.join(TOOLS)}")
    try:
        rep = run(args.builds, which="files" if args.files else "all", tools=tools, jobs=args.jobs,
                  per_build=args.per_build)
    except (FileNotFoundError, NoGpu) as err:
        print(f"elu-study sanitize: {err}", file=sys.stderr)
        return 2
    print(describe(rep))
    if not args.no_record:
        print(f"\nwrote {record.save(rep, 'sanitize')}")
    return 0 if rep["passed"] else 1


def write_report(gpu: str = record.REFERENCE_GPU) -> list[Path]:
    """Nothing to regenerate: the sanitizer's record has no figure and no README block. Reads the GPU's
    record, if it has one, so that a record this code cannot read is reported here."""
    record.load(gpu, "sanitize", required=False)
    return []
