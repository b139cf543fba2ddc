"""What every notebook does: say where its numbers come from, show a kernel, inspect it, show the
measurement, compare it with the prediction written before it, and give the evidence.

The notebooks never time anything themselves: ``python -m elu_study`` measures every entry once
per run and writes results/<gpu>.json (and ``python -m elu_study profile`` the counters), and
every notebook shows that one measurement. On a GPU whose record exists, that record is shown;
otherwise the reference record (the H200's). Kernels are compiled and their SASS read live where
a CUDA toolkit is installed; without one, the SASS facts recorded with the run are shown.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from IPython.display import Markdown, display

from elu_study.core import record
from elu_study.core.build import build_spec, compile_variant, configure_toolchain
from elu_study.core.check import describe
from elu_study.core.entries import ENTRIES, KINDS
from elu_study.core.ncu import counter_frame
from elu_study.core.sass import KernelReport, inspect_variant
from elu_study.core.tables import markdown
from elu_study.core.timing import noise_ms
from elu_study.jobs.study import findings, report


def gpu_available() -> bool:
    return torch.cuda.is_available()


def toolkit_available() -> bool:
    """Can kernels be compiled here? (nvcc on PATH or under CUDA_HOME)."""
    configure_toolchain()
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        return Path(home, "bin", "nvcc").is_file()
    return shutil.which("nvcc") is not None


METRICS = {"x_copy": "x copy_'s time", "pct_of_peak": "% of datasheet bandwidth"}


@dataclass(frozen=True)
class Prediction:
    """A prediction written before the measurement: a range for one entry's time over copy_'s
    (``metric="x_copy"``) or its share of the datasheet bandwidth (``"pct_of_peak"``)."""

    entry: str
    bounds: tuple[float, float]
    written: str  # when, as the git history shows it
    metric: str = "x_copy"

    def __post_init__(self):
        if self.metric not in METRICS:
            raise ValueError(f"unknown metric {self.metric!r}; one of {', '.join(METRICS)}")


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

    def counter(self, name: str, key: str):
        if not self.counters:
            raise LookupError("no counter record (results/<gpu>-ncu.json) for this GPU")
        return next(r for r in self.counters["rows"] if r["name"] == name)[key]

    def sm_count(self) -> int:
        return self.record["provenance"]["sm_count"]

    # -- kernels -----------------------------------------------------------------------------
    @staticmethod
    def show_kernel(name: str):
        """The kernel file as it is in kernels/, never a pasted copy."""
        path = build_spec(name).source_path
        return Markdown(f"`kernels/{path.name}`\n```cuda\n{path.read_text()}```")

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

    def table(self, *names: str) -> None:
        display(Markdown(markdown(report.frame(self._subset(names), (*KINDS, "attempt")))))

    def verdicts(self, *names: str) -> None:
        """Correctness of each checked entry, in words."""
        for n in names:
            r = self.row(n)
            if r["check"] is not None:
                print(f"{n}: {describe(r['check'])}")

    def compare(self, before: str, after: str) -> None:
        """How much one change moved the time, against the run-to-run noise of the two."""
        tb, ta = self.ms(before), self.ms(after)
        change = (ta - tb) / tb
        noise = max(noise_ms(self.row(n)["timing"]) for n in (before, after))
        verdict = "within the noise" if abs(ta - tb) <= noise else ("slower" if ta > tb else "faster")
        print(f"{before} -> {after}: {tb:.3f} ms -> {ta:.3f} ms, {100 * change:+.1f} % time ({verdict}; "
              f"round-to-round noise {noise:.3f} ms)")
        print(f"  {after}: {self.x(after):.3f}x copy_'s time ({self.record['roof_ms']:.3f} ms)"
              + (f", {self.row(after)['pct_of_peak']:.1f} % of datasheet bandwidth" if self.record["floor_ms"] else ""))

    def check_prediction(self, p: Prediction) -> None:
        """The prediction beside the measurement, and whether it held."""
        lo, hi = p.bounds
        r, unit = self.row(p.entry), METRICS[p.metric]
        value = r[p.metric]
        # the timing's p90 and p10, in the same unit (a slower call has a higher x copy_, a lower % of peak)
        spread = sorted(value * r["timing"][q] / r["timing"]["median_ms"] if p.metric == "x_copy"
                        else value * r["timing"]["median_ms"] / r["timing"][q] for q in ("p10_ms", "p90_ms"))
        faster = value < lo if p.metric == "x_copy" else value > hi
        held = "HELD" if lo <= value <= hi else ("MISSED: faster than predicted" if faster else "MISSED: slower than predicted")
        print(f"Prediction for {p.entry} (written {p.written}): {lo:.3g} to {hi:.3g} {unit}")
        print(f"Measured: {value:.3f} (p10-p90 {spread[0]:.3f} to {spread[1]:.3f}) {unit}  ->  {held}")

    def counters_table(self, *names: str) -> None:
        if not self.counters:
            print("no counter record for this GPU: run `python -m elu_study profile` on it")
            return
        display(Markdown(markdown(counter_frame(self.counters, list(names)),
                                  {"regs": "{:.0f}", "DRAM % of peak": "{:.1f}", "L2 hit %": "{:.1f}",
                                   "occupancy %": "{:.1f}", "inst/elem": "{:.1f}"})))

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
