"""Every committed record measured again at one commit (GPU): ``python -m elu_study records``.

Each stage is a job of ``python -m elu_study`` (or the test suite), run in a fresh process, in ``STAGES`` order: a
process that ran other builds and tensor sizes does not time the next job (a peer's time depends on its process's
history, notebook 09). A stage whose record already carries this commit (``hardware.code_commit``) is skipped, so a
run that ran out of time resumes where it stopped: run it again. ``--plan`` prints what would run; ``--pack`` writes
the records, notebooks and README into an archive after every stage, so that nothing measured is lost. Before the
test suite runs, the README and the notebooks are made again from the records (they are what the suite checks).
"""

from __future__ import annotations

import argparse
import secrets
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from elu_study.core import hardware, record
from elu_study.core.paths import README, RESULTS_DIR

ROOT = RESULTS_DIR.parent


@dataclass(frozen=True)
class Stage:
    """One measurement: its command (after ``python -m``) and where its commit stamp is read."""

    name: str
    command: tuple[str, ...]
    job: str | None  # the record it writes (None: it writes none, e.g. the builds)
    stamp: tuple[str, ...] = ("provenance", "commit")  # the path to the commit inside that record
    seed_option: str | None = None  # an option given a fresh random seed per run (one for all of pytest's workers)
    serves: tuple[str, ...] | None = None  # a stage without a record: the stages it prepares (None: every one)

    def argv(self) -> tuple[str, ...]:
        """The command to run now: ``command``, plus a fresh seed where the stage takes one."""
        return self.command + ((f"{self.seed_option}={secrets.randbelow(2**32)}",) if self.seed_option else ())

    def commit(self, gpu: str, results_dir: Path | None = None) -> str | None:
        """The commit this stage's record was measured at on ``gpu`` (None: no record, or no stamp)."""
        rec = record.load(gpu, self.job, results_dir, required=False) if self.job else None
        if rec is not None and self.job == "model":  # every part of the model record must be at one commit
            commits = {p.get("commit") for p in rec.get("parts", {}).values()}
            return commits.pop() if len(commits) == 1 else None
        for key in self.stamp:
            rec = rec.get(key) if isinstance(rec, dict) else None
        return rec


ELU = ("elu_study",)
STAGES = (
    Stage("build", (*ELU, "records", "--build-only"), None),
    Stage("study", ELU + ("study",), "study"),
    Stage("backward", ELU + ("study", "--confirm-backward", "3"), "study", ("backward", "provenance", "commit")),
    Stage("accuracy", ELU + ("accuracy",), "accuracy"),
    Stage("sixteen", ELU + ("sixteen",), "sixteen"),
    Stage("beyond", ELU + ("beyond",), "beyond"),
    Stage("model", ELU + ("model",), "model"),
    Stage("profile", ELU + ("profile",), "ncu"),
    Stage("sizes", ELU + ("sizes",), "sizes"),
    Stage("launch", ELU + ("launch",), "launch"),
    Stage("sanitize", ELU + ("sanitize",), "sanitize"),
    # The suite compares the README and the notebooks' outputs with what the records give (nbval, the report's
    # byte-for-byte test): regenerated from the records just measured before it runs, not left at the last ones.
    Stage("report", ELU + ("report",), None, serves=("tests",)),
    Stage("notebooks", ELU + ("notebooks",), None, serves=("tests",)),
    # One test file per worker (pytest-xdist): one process could not run the suite within a session's device time
    # (the record's duration_s is the parallel run's); all workers share one hypothesis seed, kept in fuzz.rerun_with.
    Stage("tests", ("pytest", "-q", "-p", "no:cacheprovider", "--durations=15", "-n", "3", "--dist", "loadfile"),
          "tests", seed_option="--hypothesis-seed"),
)
BY_NAME = {s.name: s for s in STAGES}


def plan(gpu: str, commit: str | None, names=None, force: bool = False,
         results_dir: Path | None = None) -> list[tuple[Stage, str | None, bool]]:
    """(stage, the commit its record holds, whether it runs) for the stages asked for, in STAGES order. A stage
    that writes no record (the builds, the README, the notebooks) comes with the stages it serves and runs where
    one of them does."""
    wanted = set(names or BY_NAME)
    held = {s.name: s.commit(gpu, results_dir) for s in STAGES if s.job}
    due = {n for n in wanted if BY_NAME[n].job and (force or held[n] is None or held[n] != commit)}
    rows = []
    for stage in STAGES:
        if stage.job:
            if stage.name in wanted:
                rows.append((stage, held[stage.name], stage.name in due))
            continue
        serves = set(stage.serves) if stage.serves else set(held)
        if stage.name in wanted or serves & wanted:
            rows.append((stage, None, force or bool(serves & due)))
    return rows


def build_all_defaults() -> None:
    """Every build of every job at once (ninja, in parallel), the launch sweep and the drop-in's defaults too."""
    from elu_study.core.build import build_all  # noqa: PLC0415 - only this stage builds
    from elu_study.core.entries import ENTRIES, builds  # noqa: PLC0415
    from elu_study.pytorch import ops  # noqa: PLC0415

    build_all(builds(list(ENTRIES.values())) + [("sweeps/launch_shapes", ()), ("1_naive", ()),
                                                *ops.default_builds().values()])


def pack(archive: Path) -> None:
    """The records, figures, notebooks and README, as they stand now, into ``archive`` (tar.gz)."""
    with tarfile.open(archive, "w:gz") as tar:
        for path in (RESULTS_DIR, ROOT / "notebooks", README):
            tar.add(path, arcname=path.relative_to(ROOT).as_posix())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study records", description=__doc__.splitlines()[0])
    parser.add_argument("stages", nargs="*", help=f"of {', '.join(BY_NAME)} (default: all, in this order)")
    parser.add_argument("--plan", action="store_true", help="print each stage's recorded commit and what would run")
    parser.add_argument("--force", action="store_true", help="run the stages even where their record is current")
    parser.add_argument("--pack", type=Path, help="after every stage, write the records etc. into this .tar.gz")
    parser.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)  # the build stage's process
    args = parser.parse_args(argv)
    if args.build_only:
        build_all_defaults()
        return 0
    if unknown := set(args.stages) - set(BY_NAME):
        parser.error(f"unknown stages {sorted(unknown)}; stages: {', '.join(BY_NAME)}")
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else record.REFERENCE_GPU
    commit = hardware.code_commit()
    rows = plan(gpu, commit, args.stages, args.force)
    print(f"records of {gpu} at commit {commit}:")
    for stage, held, runs in rows:
        print(f"  {stage.name:<9} {'runs' if runs else 'current':<8} (its record: {held or 'none'})")
    if args.plan:
        return 0
    if not torch.cuda.is_available():
        parser.exit(2, "elu-study records: needs a CUDA GPU (--plan shows what would run)\n")
    failed = []
    for stage, _, runs in rows:
        if not runs:
            continue
        start = time.monotonic()
        command = stage.argv()
        print(f"\n=== {stage.name}: python -m {' '.join(command)}", flush=True)
        status = subprocess.run([sys.executable, "-m", *command], cwd=ROOT, check=False).returncode
        print(f"=== {stage.name}: exit {status} after {time.monotonic() - start:.0f} s", flush=True)
        if status:
            failed.append(stage.name)
        if args.pack:
            pack(args.pack)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0
