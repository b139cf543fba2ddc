"""Every record that is due measured again (GPU): ``python -m elu_study records``.

A record is due when its fingerprint (``elu_study.core.fingerprint``) differs from what this tree and machine give.
Each due stage runs in a fresh process, in ``STAGES`` order (a peer's time depends on its process's history,
notebook 09), and is fingerprinted once it succeeds: a run that ran out of time resumes where it stopped. Stages
that record neither a time nor a counter run side by side with the next ones of their ``beside`` group (the accuracy
and sanitizer checks; then the README and the notebooks, made from what those wrote); every other runs alone on the
GPU.
``--plan`` prints each record, current or due and why; ``--pack`` archives the records, notebooks and README after
every stage, so that nothing measured is lost."""

import argparse
import itertools
import json
import os
import secrets
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from elu_study.core import build, fingerprint, hardware, record
from elu_study.core.paths import README, RESULTS_DIR

ROOT = RESULTS_DIR.parent


@dataclass(frozen=True)
class Stage:
    """One measurement: its command (after ``python -m``) and the record it writes."""

    name: str
    command: tuple[str, ...]
    job: str | None  # the record it writes (None: it writes none, e.g. the builds)
    seed_option: str | None = None  # an option given a fresh random seed per run (one for all of pytest's workers)
    serves: tuple[str, ...] | None = None  # a stage without a record: the stages it prepares (None: every one)
    files: tuple[str, ...] = ()  # inputs beyond the job's modules: globs under the repository (the tests' files)
    beside: str = ""  # a group: it measures no time or counter, so it may share the GPU with the next of its group

    def argv(self) -> tuple[str, ...]:
        return self.command + ((f"{self.seed_option}={secrets.randbelow(2**32)}",) if self.seed_option else ())

    @property
    def roots(self) -> tuple[str, ...]:
        """The modules whose imports make up the stage's measuring code: its job's, or all for the test suite."""
        if self.command[0] == "elu_study":  # the job's package and each module of it run as a program (a child
            job = f"elu_study.jobs.{self.command[1]}"  # process runs it by its name, which no import shows)
            modules = sorted((ROOT / "elu_study" / "jobs" / self.command[1]).glob("*.py"))
            return (job, *(f"{job}.{f.stem}" for f in modules if '__name__ == "__main__"' in f.read_text()))
        files = sorted((ROOT / "elu_study").rglob("*.py"))
        return tuple(".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for f in files)

    def held(self, gpu: str, results_dir: Path | None = None) -> dict | None:
        """Its record's fingerprint ({} if it holds none; None without a record or without a job)."""
        return record.held_fingerprint(gpu, self.job, results_dir) if self.job else None

    def due(self, gpu: str, tools: dict | None, results_dir: Path | None = None) -> list[str]:
        """Why its record must be measured again (empty: current)."""
        held = self.held(gpu, results_dir)
        return ["no record"] if held is None else fingerprint.changes(held, self.roots, self.files, tools, job=self.job)


ELU = ("elu_study",)
STAGES = (
    Stage("build", (*ELU, "records", "--build-only"), None),
    Stage("study", ELU + ("study",), "study"),
    Stage("sixteen", ELU + ("sixteen",), "sixteen"),
    Stage("beyond", ELU + ("beyond",), "beyond"),
    Stage("model", ELU + ("model",), "model"),
    Stage("profile", ELU + ("profile",), "ncu"),
    Stage("sizes", ELU + ("sizes",), "sizes"),
    Stage("launch", ELU + ("launch",), "launch"),
    Stage("accuracy", ELU + ("accuracy",), "accuracy", beside="checks"),
    Stage("sanitize", ELU + ("sanitize",), "sanitize", beside="checks"),
    # The suite compares the README and the notebooks' outputs with what the records give (nbval, the report's
    # byte-for-byte test): regenerated from the records just measured before it runs, not left at the last ones.
    # The notebooks read records and SASS, no README or figure file; the README lists the notebooks' titles, which
    # their execution leaves as they were (each notebook is written whole to a new file, then renamed over it).
    Stage("report", ELU + ("report",), None, serves=("tests",), beside="presenting"),
    Stage("notebooks", ELU + ("notebooks", "--jobs", "8"), None, serves=("tests",), beside="presenting"),
    # One test file per worker (pytest-xdist, eight of the H200 machine's 16 cores, as the gputests stage ran it in
    # 61 s): one process could not run the suite within a session's device time (the record's duration_s is the
    # parallel run's); all workers share one hypothesis seed, kept in fuzz.rerun_with.
    Stage("tests", ("pytest", "-q", "-p", "no:cacheprovider", "--durations=15", "-n", "8", "--dist", "loadfile"),
          "tests", seed_option="--hypothesis-seed", files=("tests/*.py", "tests/data/*")),
)
BY_NAME = {s.name: s for s in STAGES}


def plan(gpu: str, tools: dict | None, names=None, force: bool = False,
         results_dir: Path | None = None) -> list[tuple[Stage, list[str], bool]]:
    """(stage, why it is due, whether it runs) for the stages asked for, in STAGES order. ``tools``: this machine's
    toolchain, None without a GPU. A stage that writes no record runs where a stage it serves does."""
    wanted = set(names or BY_NAME)
    why = {s.name: s.due(gpu, tools, results_dir) for s in STAGES if s.job}
    due = {n for n in wanted if BY_NAME[n].job and (force or why[n])}
    rows = []
    for stage in STAGES:
        serves = {stage.name} if stage.job else set(stage.serves or why)
        if stage.name in wanted or serves & wanted:
            rows.append((stage, why.get(stage.name, []), force or bool(serves & due)))
    return rows


def lines(rows, gpu: str, results_dir: Path | None = None) -> list[str]:
    """``--plan``'s lines: each stage, current or due and why, and its last run's time; then the total to run."""
    out, took_s, unknown = [], {}, []
    for stage, why, runs in rows:
        seconds, where = last_run(stage, gpu, results_dir) or (None, gpu)
        state = ("due" if why else "runs") if runs else "current"
        on = "" if where == record.slug(gpu) else f" on {where}"
        took = f" (last run {seconds:.0f} s{on})" if seconds is not None else ""
        out.append(f"  {stage.name:<9} {state:<8}{took}" + (f" {fingerprint.summary(why)}" if why else ""))
        if runs:
            took_s[stage] = seconds or 0.0
            unknown += [stage.name] if seconds is None else []
    known = sum(max(took_s[s] for s in group) for group in batches(list(took_s)))  # side by side: the longest
    out.append(f"  to run: about {known:.0f} s of stages" + (f", plus {', '.join(unknown)} (no timing recorded)"
                                                           if unknown else ""))
    return out


def last_run(stage: Stage, gpu: str, results_dir: Path | None = None) -> tuple[float, str] | None:
    """How long ``stage`` last took, and on which GPU: on ``gpu``, else on the reference GPU (a first run on another
    GPU is not free: ``--until`` must not start it blind); None where neither record holds a time."""
    for name in dict.fromkeys(map(record.slug, (gpu, record.REFERENCE_GPU))):
        if (seconds := (stage.held(name, results_dir) or {}).get("seconds")) is not None:
            return seconds, name
    return None


def stamp(stage: Stage, gpu: str, log: Path, tools: dict, results_dir: Path | None = None,
          seconds: float | None = None) -> None:
    """Write the fingerprint of a stage that just ran into its record (the rest of the file as it was)."""
    taken = fingerprint.fingerprint(stage.roots, stage.files, fingerprint.logged_builds(log), tools, job=stage.job)
    if seconds is not None:
        taken["seconds"] = round(seconds, 1)
    path = record.record_path(gpu, stage.job, results_dir)
    path.write_text(record.dumps({**json.loads(path.read_text()), "fingerprint": taken}) + "\n")


def pack(archive: Path) -> None:
    """The records, figures, notebooks and README, as they stand now, into ``archive`` (tar.gz)."""
    with tarfile.open(archive, "w:gz") as tar:
        for path in (RESULTS_DIR, ROOT / "notebooks", README):
            tar.add(path, arcname=path.relative_to(ROOT).as_posix())


def batches(stages: list[Stage]) -> list[list[Stage]]:
    """Groups run side by side: consecutive stages of one ``beside`` group, or one stage."""
    return [list(group) for _, group in itertools.groupby(stages, key=lambda s: s.beside or s.name)]


def run_side_by_side(group: list[Stage], gpu: str, tools: dict) -> list[str]:
    """Each stage in a fresh process, all at once, each that succeeds fingerprinted (its own ``seconds``): the failed.
    Beside another, a stage's output goes to a file, printed under its name once it ends; an interrupted run stops
    every process it started."""
    start, failed, alone = time.monotonic(), [], len(group) == 1
    with tempfile.TemporaryDirectory() as tmp:
        running = {}
        try:
            for stage in group:
                command = stage.argv()
                print(f"\n=== {stage.name}: python -m {' '.join(command)}", flush=True)
                log, out = Path(tmp, f"{stage.name}.jsonl"), None if alone else Path(tmp, f"{stage.name}.out")
                running[stage] = (log, out, subprocess.Popen(
                    [sys.executable, "-m", *command], cwd=ROOT, env={**os.environ, build.BUILD_LOG_ENV: str(log)},
                    stdout=out and out.open("w"), stderr=out and subprocess.STDOUT))
            while running:
                for stage, (log, out, process) in list(running.items()):
                    if (status := process.poll()) is None:
                        continue
                    del running[stage]
                    if out:
                        print(f"\n=== {stage.name}'s output:\n{out.read_text(errors='replace')}", end="")
                    if status == 0 and stage.job:
                        stamp(stage, gpu, log, tools, seconds=time.monotonic() - start)
                    print(f"=== {stage.name}: exit {status} after {time.monotonic() - start:.0f} s", flush=True)
                    if status:
                        failed.append(stage.name)
                time.sleep(0.2)
        finally:
            for _, _, process in running.values():  # interrupted: no child outlives the run (nor its logs' folder)
                process.terminate()
                process.wait()
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study records", description=__doc__.splitlines()[0])
    parser.add_argument("stages", nargs="*", help=f"of {', '.join(BY_NAME)} (default: all, in this order)")
    parser.add_argument("--plan", action="store_true", help="print each record, current or due (and why)")
    parser.add_argument("--force", action="store_true", help="run the stages even where their record is current")
    parser.add_argument("--pack", type=Path, help="after every stage, write the records etc. into this .tar.gz")
    parser.add_argument("--until", type=float, metavar="SECONDS",
                        help="start no stage whose last run (here, else on the reference GPU) would end past this many "
                             "seconds from now (a device call's limit): it is left due for the next run")
    parser.add_argument("--gpu", default=record.REFERENCE_GPU,
                        help="without a GPU: whose records --plan reads (default: %(default)s)")
    parser.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)  # the build stage's process
    args = parser.parse_args(argv)
    if args.build_only:  # every build of every job at once (ninja, in parallel)
        from elu_study.core.entries import ENTRIES, builds  # noqa: PLC0415 - only this stage builds
        from elu_study.pytorch import ops  # noqa: PLC0415

        build.build_all(builds(list(ENTRIES.values())) + [("sweeps/launch_shapes", ()), ("1_naive", ()),
                                                          *ops.default_builds().values()])
        return 0
    if unknown := set(args.stages) - set(BY_NAME):
        parser.error(f"unknown stages {sorted(unknown)}; stages: {', '.join(BY_NAME)}")
    here = torch.cuda.is_available()
    if not here and args.gpu not in (recorded := record.gpus()):  # read here, not by every stage's start-up
        parser.error(f"no main record of {args.gpu!r} in results/; recorded: {', '.join(recorded)}")
    gpu = torch.cuda.get_device_name() if here else args.gpu
    provenance = hardware.provenance() if here else {}
    tools = {k: provenance.get(k) for k in fingerprint.TOOLCHAIN} if here else None
    rows = plan(gpu, tools, args.stages, args.force)
    print(f"records of {gpu}" + ("" if here else " (no GPU here: the toolchain is not compared)") + ":")
    print("\n".join(lines(rows, gpu)))
    if args.plan:
        return 0
    if not here:
        parser.exit(2, "elu-study records: needs a CUDA GPU (--plan shows what would run)\n")
    failed, left, began = [], [], time.monotonic()
    for group in batches([stage for stage, _, runs in rows if runs]):
        start = time.monotonic()
        expected = max((last_run(stage, gpu) or (0.0,))[0] for stage in group)
        if args.until is not None and start - began + expected > args.until:
            left += [stage.name for stage in group]
            print(f"\n=== {', '.join(s.name for s in group)}: left for the next run ({start - began:.0f} s gone, its "
                  f"last run took {expected:.0f} s, --until {args.until:.0f} s)", flush=True)
            continue
        failed += run_side_by_side(group, gpu, tools)
        if args.pack:
            pack(args.pack)
    print(f"\n=== all stages run: {time.monotonic() - began:.0f} s", flush=True)
    for what, names in (("failed", failed), ("left due", left)):
        if names:
            print(f"{what}: {', '.join(names)}")
    return 1 if failed or left else 0
