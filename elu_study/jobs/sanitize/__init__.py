"""compute-sanitizer over every build: ``python -m elu_study sanitize [STEP or FILE.cu ...]``.

memcheck, racecheck, initcheck and synccheck each watch a child process (``child``) that calls every op of every
build on small, misaligned, in-place and strided inputs, without PyTorch's caching allocator; a run with errors is
repeated build by build, to name the build. 0 errors everywhere is the verdict, written to
``results/<gpu>-sanitize.json``.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pandas as pd
import torch
from tqdm.auto import tqdm

from elu_study.core import record
from elu_study.core.build import build_all
from elu_study.core.hardware import provenance
from elu_study.jobs.sanitize.builds import Build, library_entry, select_builds
from elu_study.jobs.sanitize.runner import (CHILD_OK, TOOLS, Runner, find_compute_sanitizer, parse_errors,
                                            sanitizer_version, subprocess_runner)


class NoGpu(RuntimeError):
    """The sanitizer has nothing to run on."""


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


def run_all(runner: Runner, tasks: list[tuple[str, list[Build]]], desc: str) -> list[Run]:
    """run_one over every (tool, builds) task, one tool's worth at a time."""
    with ThreadPoolExecutor(max_workers=len(TOOLS)) as pool:
        done = pool.map(lambda task: run_one(runner, *task), tasks)
        return list(tqdm(done, total=len(tasks), desc=desc, unit="run"))


def sanitize(builds: list[Build], tools, runner: Runner) -> list[Run]:
    """Every tool over every build, side by side; a failed run is repeated build by build, to name the build."""
    runs = run_all(runner, [(tool, builds) for tool in tools], "sanitizing")
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
