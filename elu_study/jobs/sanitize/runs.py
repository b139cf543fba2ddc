"""The runs (every tool over every build side by side, a failed group run repeated build by build) and the report."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from tqdm.auto import tqdm

from elu_study.core.text import render
from elu_study.jobs.sanitize.builds import Build
from elu_study.jobs.sanitize.runner import CHILD_OK, Runner, headlines, parse_summary


@dataclass
class Run:
    tool: str
    builds: list[str]  # build ids
    returncode: int
    errors: int | None
    warnings: int
    child_ok: bool  # the child ran every call and every result was right
    seconds: float
    findings: list[str] = field(default_factory=list)  # the distinct headlines of the tool's reports
    log_tail: str = ""  # the end of the output, kept where the run failed

    @property
    def ok(self) -> bool:
        return self.errors == 0 and self.child_ok and self.returncode == 0


def run_one(runner: Runner, tool: str, builds: list[Build]) -> Run:
    returncode, output, seconds = runner(tool, builds)
    summary = parse_summary(output)
    run = Run(tool, [b.id for b in builds], returncode, summary.errors, summary.warnings, CHILD_OK in output, seconds,
              headlines(output))
    if not run.ok:
        run.log_tail = "\n".join(output.splitlines()[-60:])
    return run


def sanitize(builds: list[Build], tools, runner: Runner, workers: int = 4,
             per_build: bool = False, progress: bool = True) -> list[Run]:
    """Every tool over every build, side by side; a failed group run is repeated build by build."""
    tasks = [(tool, [b]) for tool in tools for b in builds] if per_build else [(tool, builds) for tool in tools]
    runs = run_all(runner, tasks, workers, progress, "sanitizing")
    retry = [(r.tool, [b]) for r in runs if not r.ok and len(r.builds) > 1 for b in builds if b.id in r.builds]
    if retry:
        runs += run_all(runner, retry, workers, progress, "finding the build")
    return runs


def run_all(runner: Runner, tasks, workers: int, progress: bool, desc: str) -> list[Run]:
    """run_one over every (tool, builds) task, ``workers`` at a time."""
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(tasks)))) as pool:
        futures = [pool.submit(run_one, runner, tool, builds) for tool, builds in tasks]
        return [f.result() for f in (tqdm(futures, desc=desc, unit="run") if progress else futures)]


def verdicts(builds: list[Build], runs: list[Run]) -> dict[str, dict[str, dict]]:
    """build id -> tool -> {"errors", "ok"}: from the build's own run where there is one, else its group's."""
    table: dict[str, dict[str, dict]] = {}
    for b in builds:
        for tool in dict.fromkeys(r.tool for r in runs):
            # the build's own run first (sorted is stable), else the first group run that holds it
            if ours := sorted((r for r in runs if r.tool == tool and b.id in r.builds), key=lambda r: len(r.builds) > 1):
                table.setdefault(b.id, {})[tool] = {"errors": ours[0].errors, "ok": ours[0].ok}
    return table


def report(builds: list[Build], runs: list[Run], version: str | None, provenance: dict | None) -> dict:
    """The record's body: the verdict, the tool's version, each build's errors per tool, every run."""
    return {"passed": bool(runs) and all(r.ok for r in runs), "compute_sanitizer": version,
            "tools": list(dict.fromkeys(r.tool for r in runs)), "builds": verdicts(builds, runs),
            "runs": [asdict(r) | {"ok": r.ok} for r in runs], "provenance": provenance}


def describe(rep: dict) -> str:
    """A report as text: errors per build and tool, the verdict, and the tail of every failed run."""
    tools, width = rep["tools"], max([len(b) for b in rep["builds"]] + [5])

    def cell(v: dict | None) -> str:
        shown = "-" if v is None else "?" if v["errors"] is None else v["errors"]
        return f"{shown:>9}" + ("" if v is None or v["ok"] else "!")

    rows = [f"{b:<{width}}  " + "  ".join(cell(row.get(t)) for t in tools) for b, row in rep["builds"].items()]
    return render("sanitize/describe.md.j2", header=f"{'build':<{width}}  " + "  ".join(f"{t:>9}" for t in tools),
                  rows=rows, rep=rep)
