"""The float32 backward against its roof (``torch.add``): main run and fresh processes (``--confirm-backward``)."""

from __future__ import annotations

import statistics
import subprocess

import pandas as pd

from elu_study.core import record, text
from elu_study.core.build import build_all
from elu_study.core.entries import BACKWARD, builds
from elu_study.core.hardware import provenance
from elu_study.core.ncu import counter_rows, profile
from elu_study.core.processes import fresh_processes
from elu_study.jobs.study.predictions import verdict

NAMES = tuple(e.name for e in BACKWARD)  # the roof (torch.add), PyTorch's backward, the study's and its attempts
AIM = 0.98  # the aim for the float32 backward: at most 0.98x torch.add
WRITTEN = "before the third main run (issue 24, 2026-12-01: evict_last loads the default), after untimed probes"
PREDICTIONS = {"elu_backward": (0.980, 0.992), "elu_backward_plain_loads": (0.990, 1.000),  # x torch.add, graded
               "elu_backward_128_threads": (0.980, 0.995), "aten.elu_backward": (0.995, 1.010)}  # on the median


def confirm(processes: int = 3) -> dict:
    """The main record with its ``"backward"``: the backward rows in fresh processes and their counters."""
    rec = record.load()
    build_all(builds(list(BACKWARD)))
    try:
        c = profile(list(NAMES))
        counters = {"ncu": c["ncu"], "rows": c["rows"]}
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as err:
        counters = {"skipped": f"{type(err).__name__}: {err}"[-2000:], "rows": []}
    rec["backward"] = {"provenance": provenance(), "names": list(NAMES), "processes": fresh_processes(NAMES, processes),
                       "counters": counters}
    return rec


def frame(rec: dict) -> pd.DataFrame:
    """Each backward row over torch.add: main run, fresh processes, graded prediction, DRAM counters."""
    runs, counters = rec.get("backward", {}).get("processes", []), counter_rows(rec.get("backward", {}))
    rows = []
    for name in NAMES[1:]:
        xs, c, bounds = [p[name]["x_roof"] for p in runs], counters.get(name, {}), PREDICTIONS.get(name)
        rows.append({"entry": name, "main run": record.row(rec, name)["x_roof"],
                     "fresh processes": " ".join(f"{v:.3f}" for v in xs),
                     "predicted": "{:.3f} to {:.3f}".format(*bounds) if bounds else "",
                     "verdict": verdict(statistics.median(xs), bounds) if xs and bounds else "",
                     "DRAM % peak": c.get("dram_pct_of_peak"), "read-active %": c.get("dram_active_read_pct"),
                     "write-active %": c.get("dram_active_write_pct")})
    return pd.DataFrame(rows).sort_values("main run").set_index("entry")


def table(rec: dict) -> str:
    """The frame as the notebook shows it, with where the fresh processes ran and the roof's counters."""
    confirmation = rec.get("backward")
    return text.render("study/backward/table.md.j2", table=confirmation and text.table(frame(rec), {"main run": "{:.3f}"}),
                       p=(confirmation or {}).get("provenance"), written=WRITTEN,
                       roof_dram=counter_rows(confirmation or {}).get("torch.add", {}).get("dram_pct_of_peak"))


def aim_line(rec: dict) -> str:
    """Whether the study's fastest backward reached the aim in the main run and in every fresh process."""
    best = min((n for n in NAMES if n.startswith("elu_backward")), key=lambda n: record.row(rec, n)["x_roof"])
    xs = [record.row(rec, best)["x_roof"], *(p[best]["x_roof"] for p in rec.get("backward", {}).get("processes", []))]
    return text.render("study/backward/aim.md.j2", best=best, xs=xs, aim=AIM, reached=sum(x <= AIM for x in xs))
