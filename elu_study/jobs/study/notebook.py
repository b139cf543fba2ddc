"""What every notebook does with a committed record: kernels, SASS, times, graded predictions."""

import difflib
import os
import re
import shutil
from pathlib import Path

import pandas as pd
from IPython.display import display

from elu_study.core import record, text
from elu_study.core.build import build_spec, compile_variant, configure_toolchain
from elu_study.core.entries import ENTRIES, KINDS
from elu_study.core.ncu import counter_frame
from elu_study.core.sass import KernelReport, inspect_variant
from elu_study.jobs.study import figures, launches, predictions, report

def toolkit_available() -> bool:
    """nvcc under CUDA_HOME (or CUDA_PATH), else on PATH."""
    configure_toolchain()
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    return Path(home, "bin", "nvcc").is_file() if home else shutil.which("nvcc") is not None


# The columns a step notebook's tables show; the counters likewise (the formats of every column they may show).
TABLE_COLUMNS = ("ms", "x copy_", "correct", "max abs err vs fp64")
COUNTER_COLUMNS = ("DRAM % of peak", "occupancy %", "inst/elem", "top stalls (warps per issue)")
COUNTER_FORMATS = {"DRAM read GB": "{:.1f}", "DRAM write GB": "{:.1f}", "DRAM % of peak": "{:.0f}",
                   "L2 hit %": "{:.0f}", "occupancy %": "{:.0f}", "inst/elem": "{:.0f}"}


def definition(lines: list[str], name: str) -> tuple[int, int]:
    """The lines of a function's definition at file or namespace level, with its leading comment and template."""
    depth, start = 0, None
    for i, line in enumerate(lines):
        code = line.split("//")[0]
        if start is None and depth == 0 and re.search(rf"\b{re.escape(name)}\s*\(", code) and code.rstrip()[-1:] != ";":
            start = i
        if not code.lstrip().startswith("namespace"):
            depth += code.count("{") - code.count("}")
        if start is not None and depth == 0 and "}" in code:
            while start > 0 and lines[start - 1].strip() and not lines[start - 1].rstrip().endswith(("}", ";")):
                start -= 1
            return start, i + 1
    raise KeyError(f"no definition of {name}() in this file")


def excerpt(source: str, *functions: str, opening: bool = True) -> str:
    """A kernel file's opening comment (unless ``opening`` is False) and the named functions, "// ..." between."""
    lines = source.splitlines()
    first = next(i for i, line in enumerate(lines) if not line.startswith("//"))
    parts = ["\n".join(lines[:first])] if opening else []
    parts += ["\n".join(lines[slice(*definition(lines, name))]) for name in functions]
    return "\n// ...\n".join(parts) + "\n"


def code_lines(source: str) -> list[str]:
    """A kernel file's lines but its comment-only ones (``// elu-study:`` build directives kept)."""
    return [line for line in source.splitlines()
            if not line.lstrip().startswith("//") or line.lstrip().startswith("// elu-study:")]


class Study:
    """One notebook's view of a job's record with rows ("study", "beyond", "sixteen") and the kernels behind it."""
    def __init__(self, job: str = "study"):
        gpu, measured_here = record.source(job)
        self.can_compile, self.job, self.record = toolkit_available(), job, record.load(gpu, job)
        self.counters = record.load(gpu, "ncu", required=False) if job == "study" else self.record.get("counters")
        print(text.render("study/notebook/source.md.j2", path=record.record_path(gpu, job).name, here=record.this_gpu(),
                          p=self.record["provenance"], same=measured_here, can_compile=self.can_compile))

    def row(self, name: str) -> dict:
        return record.row(self.record, name)

    def held(self, *entries) -> list[str]:
        """The names of these entries (or names) the record holds: one newer than the record is left out."""
        rows = {r["name"] for r in self.record["rows"]}
        return [n for n in (getattr(e, "name", e) for e in entries) if n in rows]

    def counter_row(self, name: str) -> dict:  # a kernel's Nsight Compute counters
        if not self.counters:
            raise LookupError("no counter record (results/<gpu>-ncu.json) for this GPU")
        return next(r for r in self.counters["rows"] if r["name"] == name)

    def counter(self, name: str, key: str):
        return self.counter_row(name)[key]

    def sm_count(self) -> int:
        return self.record["provenance"]["sm_count"]

    def launch(self, name: str) -> launches.Launch:  # at the record's size, on its GPU
        return launches.launch(name, self.sm_count(), self.record["problem"]["numel"])

    def other(self, job: str) -> dict | None:  # another job's record for the same GPU
        return record.load(self.record["provenance"]["gpu"], job, required=False)

    @staticmethod
    def show_kernel(name: str, *functions: str, opening: bool = True) -> text.Text:
        """The kernel file; with ``functions``, only those (and, with ``opening``, its opening comment)."""
        path = build_spec(name).source_path
        code = excerpt(path.read_text(), *functions, opening=opening) if functions else path.read_text()
        return text.show("study/notebook/kernel.md.j2", path=path.name, functions=functions, code=code, previous=None)

    @staticmethod
    def show_diff(previous: str, step: str) -> text.Text:
        """The code lines of a kernel file that differ from the previous step's (comment-only lines left out)."""
        a, b = build_spec(previous).source_path, build_spec(step).source_path
        diff = difflib.unified_diff(code_lines(a.read_text()), code_lines(b.read_text()), f"kernels/{a.name}",
                                    f"kernels/{b.name}", n=1, lineterm="")
        return text.show("study/notebook/kernel.md.j2", path=b.name, previous=a.name, code="\n".join(diff))

    def inspect(self, name: str) -> KernelReport:
        """An entry's SASS report, printed: compiled here if a toolkit is installed, else the recorded one."""
        entry = ENTRIES[name]
        if not self.can_compile and self.row(name)["sass"] is None:  # a batch measured with sass=False
            raise ValueError(f"{name}: no toolkit here to compile it, and this record holds no SASS of it")
        found = (inspect_variant(compile_variant(entry.variant, extra_cuda_cflags=list(entry.flags)))
                 if self.can_compile else KernelReport.from_dict(self.row(name)["sass"]))
        print(found.summary())
        return found

    def table(self, *names: str, sort: bool = False, columns=TABLE_COLUMNS) -> None:
        """These entries' times and checks, as given or (``sort``) fastest first."""
        df = report.frame(self.record, (*KINDS, "attempt"), names)[list(columns)]
        self.show(df.sort_values("x copy_") if sort else df)

    def grade(self, *claims: predictions.Prediction) -> None:
        """One prediction graded in a line; several (notebook 06's appendix) in one table."""
        records = {job: self.record if job == self.job else self.other(job) for job in {p.job for p in claims}}
        df = predictions.frame(records, *claims)
        if len(df) > 1:
            return self.show(df.drop(columns="verdict"))
        r = df.iloc[0]
        print(f"Prediction for {r['entry']}: {r['predicted']}; measured {r['measured']}: {r['verdict']}")

    def counters_table(self, *names: str, columns=COUNTER_COLUMNS) -> None:
        if not self.counters:
            print(text.render("study/notebook/no_counters.md.j2"))
            return
        self.show(counter_frame(self.counters, list(names))[list(columns)], COUNTER_FORMATS)

    @staticmethod
    def show(df: pd.DataFrame, formats: dict | None = None) -> None:
        display(text.Text(text.table(df, formats, padded=True)))

    md = staticmethod(text.Text)  # prose or code built from the sources: shown as markdown, compared as text

    def figure(self, name: str):  # one of notebook 06's figures (``report.figure``)
        return report.figure(self.record, self.counters, name)

    def xcopy(self, *names: str, title: str | None = None):
        return figures.xcopy_figure(self.record, names=list(names), title=title)
