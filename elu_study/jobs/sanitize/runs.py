"""The runs: every tool over every build side by side, a failed group run repeated build by build,
and the report (the record's body) made of them."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from tqdm.auto import tqdm

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


def tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


def run_one(runner: Runner, tool: str, builds: list[Build]) -> Run:
    returncode, output, seconds = runner(tool, builds)
    summary = parse_summary(output)
    run = Run(tool, [b.id for b in builds], returncode, summary.errors, summary.warnings, CHILD_OK in output, seconds,
              headlines(output))
    if not run.ok:
        run.log_tail = tail(output)
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
        if progress:
            for future in tqdm(futures, desc=desc, unit="run"):
                future.result()
        return [f.result() for f in futures]


# ---------------------------------------------------------------- the report


def verdicts(builds: list[Build], runs: list[Run]) -> dict[str, dict[str, dict]]:
    """build id -> tool -> {"errors", "ok"}: from the build's own run where there is one, else its group's."""
    table: dict[str, dict[str, dict]] = {}
    for b in builds:
        for tool in dict.fromkeys(r.tool for r in runs):
            mine = [r for r in runs if r.tool == tool and r.builds == [b.id]]
            group = [r for r in runs if r.tool == tool and b.id in r.builds and len(r.builds) > 1]
            run = (mine or group or [None])[0]
            if run is not None:
                table.setdefault(b.id, {})[tool] = {"errors": run.errors, "ok": run.ok}
    return table


def report(builds: list[Build], runs: list[Run], version: str | None, provenance: dict | None) -> dict:
    """The record's body: the verdict, the tool's version, each build's errors per tool, every run."""
    return {
        "passed": bool(runs) and all(r.ok for r in runs),
        "compute_sanitizer": version,
        "tools": list(dict.fromkeys(r.tool for r in runs)),
        "builds": verdicts(builds, runs),
        "runs": [asdict(r) | {"ok": r.ok} for r in runs],
        "provenance": provenance,
    }


def brief(rep: dict) -> dict:
    """What the test record keeps of a report: the verdict, and the error count of each build and tool."""
    return {
        "passed": rep["passed"],
        "compute_sanitizer": rep["compute_sanitizer"],
        "errors": {b: {t: v["errors"] for t, v in tools.items()} for b, tools in rep["builds"].items()},
    }


def describe(rep: dict) -> str:
    """A report as text: errors per build and tool, the verdict, and the tail of every failed run."""
    tools = rep["tools"]
    width = max([len(b) for b in rep["builds"]] + [5])
    lines = [f"{'build':<{width}}  " + "  ".join(f"{t:>9}" for t in tools)]
    for b, row in rep["builds"].items():
        cells = []
        for t in tools:
            v = row.get(t)
            cells.append(f"{'-' if v is None else ('?' if v['errors'] is None else v['errors']):>9}"
                         + ("" if v is None or v["ok"] else "!"))
        lines.append(f"{b:<{width}}  " + "  ".join(cells))
    lines.append("errors per build and tool ('!': the run failed; '?': no summary). "
                 + ("PASS: 0 errors" if rep["passed"] else "FAIL"))
    for r in rep["runs"]:
        if not r["ok"]:
            lines.append(f"\n--- {r['tool']} over {', '.join(r['builds'])}: exit {r['returncode']}, "
                         f"errors {r['errors']}, child {'ok' if r['child_ok'] else 'did not finish'}\n"
                         + "".join(f"  {h}\n" for h in r["findings"]) + r["log_tail"])
    return "\n".join(lines)
