"""What every notebook does: say where its numbers come from, show a kernel (or the lines that changed from
the previous step), inspect it, show the measurement against copy_, grade the predictions written before it
in one table, and give the evidence. The diagrams of what the threads touch are in ``diagrams.py``.

The notebooks never time anything themselves: ``python -m elu_study`` measures every entry once
per run and writes results/<gpu>.json (and ``python -m elu_study profile`` the counters), and
every notebook shows that one measurement. On a GPU whose record exists, that record is shown;
otherwise the reference record (the H200's). Kernels are compiled and their SASS read live where
a CUDA toolkit is installed; without one, the SASS facts recorded with the run are shown.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import torch
from IPython.display import Markdown, display

from elu_study.core import record
from elu_study.core.build import build_spec, compile_variant, configure_toolchain
from elu_study.core.check import ATOL, INPUT_SCALE
from elu_study.core.entries import ENTRIES, KINDS
from elu_study.core.ncu import counter_frame
from elu_study.core.sass import KernelReport, inspect_variant
from elu_study.core.tables import markdown
from elu_study.core.timing import noise_ms
from elu_study.jobs.study import figures as plots
from elu_study.jobs.study import findings, launches, report
from elu_study.jobs.study.predictions import Prediction


def gpu_available() -> bool:
    return torch.cuda.is_available()


def toolkit_available() -> bool:
    """Can kernels be compiled here? (nvcc on PATH or under CUDA_HOME)."""
    configure_toolchain()
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        return Path(home, "bin", "nvcc").is_file()
    return shutil.which("nvcc") is not None


# The columns a step notebook's tables show (``full=True``: every column); the counters likewise.
TABLE_COLUMNS = ("what", "ms", "x copy_", "p90/median", "correct")
COUNTER_COLUMNS = ("DRAM read GB", "DRAM % of peak", "occupancy %", "inst/elem", "top stalls (warps per issue)")
COUNTER_FORMATS = {"regs": "{:.0f}", "DRAM % of peak": "{:.1f}", "L2 hit %": "{:.1f}", "occupancy %": "{:.1f}",
                   "inst/elem": "{:.1f}"}


def excerpt(text: str, *functions: str, opening: bool = True) -> str:
    """A kernel file's opening comment (unless ``opening`` is False) and the named functions (each with the
    comment and template lines above it), "// ..." between them: the parts of a long file a notebook discusses."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if not line.startswith("//"))
    parts = ["\n".join(lines[:first])] if opening else []
    for name in functions:
        parts.append("\n".join(lines[slice(*definition(lines, name))]))
    return "\n// ...\n".join(parts) + "\n"


def code_lines(text: str) -> list[str]:
    """A kernel file's lines without its comment-only lines (``// elu-study:`` build directives kept)."""
    return [line for line in text.splitlines()
            if not line.lstrip().startswith("//") or line.lstrip().startswith("// elu-study:")]


def definition(lines: list[str], name: str) -> tuple[int, int]:
    """The line range of a function's definition at file or namespace level, with its leading comment and
    template lines."""
    depth, start = 0, None
    for i, line in enumerate(lines):
        code = line.split("//")[0]
        if start is None and depth == 0 and re.search(rf"\b{re.escape(name)}\s*\(", code) and not code.rstrip().endswith(";"):
            start = i
        if not code.lstrip().startswith("namespace"):
            depth += code.count("{") - code.count("}")
        if start is not None and depth == 0 and "}" in code:
            first = start
            while first > 0 and lines[first - 1].strip() and not lines[first - 1].rstrip().endswith(("}", ";")):
                first -= 1
            return first, i + 1
    raise KeyError(f"no definition of {name}() in this file")





class Study:
    """One notebook's view of the study: the record of a run, and the kernels behind it."""

    def __init__(self, reference_gpu: str = record.REFERENCE_GPU, job: str = "study"):
        """job: whose record to show: the main study's, or "beyond" (step 6's attempts, with their counters)."""
        self.live = gpu_available()
        self.can_compile = toolkit_available()
        gpu, _ = record.source(job, reference=reference_gpu)
        self.record = record.load(gpu, job)
        self.counters = record.load(gpu, "ncu", required=False) if job == "study" else self.record.get("counters")
        print(f"Data source: {self._source(job)}.")

    def _source(self, job: str) -> str:
        """Which record, measured where, shown where: the "Data source:" line (masked by nbval's sanitizer)."""
        here = torch.cuda.get_device_name() if self.live else None
        p = self.record["provenance"]
        command = "" if job == "study" else f" {job}"
        path = record.record_path(p["gpu"], job)
        source = (f"results/{path.name}, measured by `python -m elu_study{command}` on {p['gpu']} "
                  f"({p['date_utc'][:10]}, commit {p.get('commit')})")
        where = f"this GPU ({here})" if here and record.slug(here) == record.slug(p["gpu"]) else (
            "NO GPU HERE" if not here else f"{here}, which has no record yet")
        kernels = "kernels compiled and inspected live" if self.can_compile else (
            "NO CUDA TOOLKIT HERE: the SASS facts shown are those recorded with the run")
        return f"{source}; running on {where}; {kernels}"

    # -- records -----------------------------------------------------------------------------
    def row(self, name: str) -> dict:
        return record.row(self.record, name)

    def ms(self, name: str) -> float:
        return self.row(name)["timing"]["median_ms"]

    def x(self, name: str) -> float:
        """Time over copy_'s."""
        return self.row(name)["x_copy"]

    def noise(self, *names: str) -> float:
        """The largest round-to-round spread of these entries' medians, over copy_'s time."""
        return record.noise(self.record, *names)

    def counter_row(self, name: str) -> dict:
        """A kernel's Nsight Compute counters."""
        if not self.counters:
            raise LookupError("no counter record (results/<gpu>-ncu.json) for this GPU")
        return next(r for r in self.counters["rows"] if r["name"] == name)

    def counter(self, name: str, key: str):
        return self.counter_row(name)[key]

    def sm_count(self) -> int:
        return self.record["provenance"]["sm_count"]

    def launch(self, name: str) -> launches.Launch:
        """An entry's launch at the record's size on the record's GPU (threads, vectors, blocks, waves)."""
        return launches.launch(name, self.sm_count(), self.record["problem"]["numel"])

    def other(self, job: str) -> dict | None:
        """Another job's record for the same GPU (e.g. "launch", notebook 10's sweep), or None."""
        return record.load(self.record["provenance"]["gpu"], job, required=False)

    # -- kernels -----------------------------------------------------------------------------
    @staticmethod
    def show_kernel(name: str, *functions: str, opening: bool = True):
        """The kernel file as it is in kernels/, never a pasted copy; with ``functions``, only those functions
        and (with ``opening``) the file's opening comment."""
        path = build_spec(name).source_path
        text = excerpt(path.read_text(), *functions, opening=opening) if functions else path.read_text()
        shown = (f" ({'its opening comment and ' * opening}{', '.join(f'`{f}`' for f in functions)}; "
                 f"`study.show_kernel(\"{name}\")` shows the whole file)") if functions else ""
        return Markdown(f"`kernels/{path.name}`{shown}\n```cuda\n{text}```")

    @staticmethod
    def show_diff(previous: str, step: str, context: int = 1):
        """The code lines of a kernel file that differ from the previous step's (difflib; comment-only lines left
        out, build directives kept), not the whole file."""
        a, b = build_spec(previous).source_path, build_spec(step).source_path
        diff = difflib.unified_diff(code_lines(a.read_text()), code_lines(b.read_text()), f"kernels/{a.name}",
                                    f"kernels/{b.name}", n=context, lineterm="")
        return Markdown(f"`kernels/{b.name}` against `kernels/{a.name}`: the code lines that changed, comments left "
                        f"out (`study.show_kernel(\"{step}\")` shows the whole file)\n```diff\n" + "\n".join(diff) + "\n```")

    def inspect(self, name: str) -> KernelReport:
        """An entry's SASS report: compiled here if a toolkit is installed, else the recorded one."""
        entry = ENTRIES[name]
        if self.can_compile:
            report_ = inspect_variant(compile_variant(entry.variant, extra_cuda_cflags=list(entry.flags)))
        else:
            report_ = KernelReport.from_dict(self.row(name)["sass"])
        print(report_.summary())
        return report_

    # -- showing the measurement ---------------------------------------------------------------
    def _subset(self, names) -> dict:
        sub = dict(self.record)
        sub["rows"] = [self.row(n) for n in names]
        return sub

    def frame(self, *names: str) -> pd.DataFrame:
        """The full table of these entries (every column)."""
        return report.frame(self._subset(names), (*KINDS, "attempt"))

    def table(self, *names: str, full: bool = False, sort: bool = False, columns=TABLE_COLUMNS) -> None:
        """These entries' times: the step notebook's columns (``full``: all, as ``frame``), in the order given
        or (``sort``) fastest first."""
        df = self.frame(*names)
        if sort:
            df = df.sort_values("x copy_")
        display(Markdown(markdown(df if full else df[list(columns)])))

    def verdicts(self, *names: str) -> None:
        """Correctness of the checked entries, in one line: how they were checked, which failed, the worst error."""
        checks = {n: self.row(n)["check"] for n in names if self.row(n)["check"] is not None}
        if not checks:
            return
        trials = sorted({c["trials"] for c in checks.values()})
        failed = [n for n, c in checks.items() if not c["passed"]]
        worst = max(c["max_abs_err_vs_fp64"] for c in checks.values())
        verdict = (f"FAILED: {', '.join(failed)}" if failed else "the one checked entry passes" if len(checks) == 1
                   else f"all {len(checks)} checked entries pass")
        print(f"Correctness ({'/'.join(map(str, trials))} trials of randn x {INPUT_SCALE:g}, NaN-poisoned output, "
              f"atol = rtol = {ATOL:g}): {verdict}; max |err| vs float64 {worst:.1e}; unwritten outputs: "
              f"{sum(c['unwritten'] for c in checks.values())}.")

    def compare(self, before: str, after: str) -> None:
        """How much one change moved the time, against the run-to-run noise of the two."""
        tb, ta = self.ms(before), self.ms(after)
        change = (ta - tb) / tb
        noise = max(noise_ms(self.row(n)["timing"]) for n in (before, after))
        verdict = "within the noise" if abs(ta - tb) <= noise else ("slower" if ta > tb else "faster")
        print(f"{before} -> {after}: {tb:.3f} ms -> {ta:.3f} ms, {100 * change:+.1f} % time ({verdict}; "
              f"round-to-round noise {noise:.3f} ms); {after} at {self.x(after):.3f}x copy_")

    def grade_frame(self, *predictions: Prediction) -> pd.DataFrame:
        """Each prediction beside its measurement: entry, predicted, measured (p10-p90), HELD or MISSED."""
        rows, notes = [], list(dict.fromkeys(p.written for p in predictions))
        for p in predictions:
            lo, hi = p.bounds
            r, unit = self.row(p.entry), ("x copy_" if p.metric == "x_copy" else "% of peak")
            value = r[p.metric]
            # the timing's p10 and p90 in the same unit (a slower call has a higher x copy_, a lower % of peak)
            spread = sorted(value * r["timing"][q] / r["timing"]["median_ms"] if p.metric == "x_copy"
                            else value * r["timing"]["median_ms"] / r["timing"][q] for q in ("p10_ms", "p90_ms"))
            faster = value < lo if p.metric == "x_copy" else value > hi
            bound = "{:.3f}" if p.metric == "x_copy" else "{:.3g}"
            rows.append({"entry": p.entry, "predicted": f"{bound.format(lo)} to {bound.format(hi)} {unit}",
                         "measured (p10-p90)": f"{value:.3f} ({spread[0]:.3f}-{spread[1]:.3f})",
                         "verdict": "HELD" if lo <= value <= hi else f"MISSED ({'faster' if faster else 'slower'})",
                         **({"written": f"[{notes.index(p.written) + 1}]"} if len(notes) > 1 else {})})
        return pd.DataFrame(rows).set_index("entry")

    def grade(self, *predictions: Prediction) -> None:
        """The predictions graded in one table; when they were written, and what measured them, stated once."""
        notes = list(dict.fromkeys(p.written for p in predictions))
        written = (f"written {notes[0]}" if len(notes) == 1 else
                   "written " + "; ".join(f"[{i + 1}] {n}" for i, n in enumerate(notes)))
        display(Markdown(markdown(self.grade_frame(*predictions)) + f"\n\nPredictions {written}. Measured: the run "
                         "named in the Data source line; HELD where the median lies in the predicted range."))

    def counters_table(self, *names: str, columns=COUNTER_COLUMNS) -> None:
        """Nsight Compute's counters for these kernels (``columns=None``: every column)."""
        if not self.counters:
            print("no counter record for this GPU: run `python -m elu_study profile` on it")
            return
        df = counter_frame(self.counters, list(names))
        display(Markdown(markdown(df if columns is None else df[list(columns)], COUNTER_FORMATS)))

    @staticmethod
    def show_frame(df: pd.DataFrame, rows: int = 10, full: str = "", formats: dict | None = None) -> None:
        """A long table's first ``rows`` rows; ``full`` names the call that shows all of it."""
        more = f"\n\n{rows} of {len(df)} rows; all of them: `{full}`." if len(df) > rows and full else ""
        display(Markdown(markdown(df.head(rows), formats) + more))

    @staticmethod
    def md(text: str):
        """Prose that quotes the record: built from it, never typed."""
        return Markdown(text)

    def finding(self, name: str):
        """One of the study's findings (elu_study.findings), as the README and summary print it."""
        return Markdown(getattr(findings, name)(self.record, self.counters))

    def figure(self, name: str):
        """A figure of the record (the same the README shows): times, xcopy, distributions, waves, ablations, counters."""
        fig = report.figures(self.record, self.counters, only=name)[name]
        plt.close(fig)  # shown once, as the cell's value, not again by the inline backend
        return fig

    def xcopy(self, *names: str, title: str | None = None):
        """These entries' time over copy_'s, median and p10-p90: a step notebook's one figure."""
        fig = plots.xcopy_figure(self.record, names=list(names), kinds=None, title=title)
        plt.close(fig)  # shown once, as the cell's value
        return fig
