"""The model record's figure: forward and backward, the fusion lesson, CUDA graphs and the MLP, four panels."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch

from elu_study.jobs.model.analysis import BACKWARD_STREAMS, entries, median
from elu_study.jobs.model.measure import THREE_STREAMS

COLORS = {"ours, forward": "tab:blue", "ours, backward": "tab:purple", "ours, forward + backward": "tab:cyan",
          "PyTorch / reference": "tab:gray"}


def is_ours(name: str) -> bool:
    return name.startswith("op ") or "op*" in name or "elu_study" in name


def color(record: dict, name: str) -> str:
    if not is_ours(name):
        return COLORS["PyTorch / reference"]
    group = record["entries"][name]["group"]
    if group == "backward":
        return COLORS["ours, backward"]
    return COLORS["ours, forward + backward" if group in ("graph", "model") else "ours, forward"]


def panels(record: dict) -> list[tuple]:
    """(title, entry names, reference lines (value, label, colour, style)) of each panel."""
    copy_ms = median(record, "copy_")
    return [
        ("forward and backward, full shape", entries(record, "forward") + entries(record, "backward"),
         [(copy_ms, "copy_ (2 streams, measured)", "tab:green", "--"),
          (median(record, THREE_STREAMS), "torch.add (3 streams, measured)", "tab:orange", "-."),
          (BACKWARD_STREAMS * copy_ms, "1.5x copy_ (3 streams, estimate)", "tab:red", ":")]),
        ("ELU(x) * 2 + 1, full shape", entries(record, "fusion"),
         [(copy_ms, "copy_ (2 streams)", "tab:green", "--"), (2 * copy_ms, "2x copy_ (4 streams, estimate)", "tab:orange", "-.")]),
        ("op forward + backward: eager vs CUDA graph replay, full shape", entries(record, "graph"), []),
        (f"MLP forward + backward (batch {record['mlp']['batch']})", entries(record, "model"), []),
    ]


def figure(record: dict):
    """Four panels: forward and backward against copy_ and the measured three-stream add, the fusion
    lesson, CUDA graphs, the MLP; p10-p90 whiskers; colours: ours by direction, gray PyTorch."""
    fig, axes = plt.subplots(2, 2, figsize=(15, 8))
    for ax, (title, names, lines) in zip(axes.flat, panels(record)):
        t = [record["timings"][n] for n in names]
        med = np.array([s["median_ms"] for s in t])
        err = np.array([[m - s["p10_ms"] for m, s in zip(med, t)], [s["p90_ms"] - m for m, s in zip(med, t)]])
        y = np.arange(len(names))[::-1]
        ax.barh(y, med, xerr=err, color=[color(record, n) for n in names], capsize=3)
        ax.set_yticks(y, names, fontsize=8)
        for value, label, line_color, ls in lines:
            ax.axvline(value, color=line_color, ls=ls, label=label)
        ax.set_xlabel("time per call, ms (bar: median; whiskers: p10-p90)")
        ax.set_title(title, fontsize=10)
        if lines:
            ax.legend(fontsize=8, loc="lower right")
    fig.legend(handles=[Patch(color=c, label=k) for k, c in COLORS.items()], loc="lower center", ncol=len(COLORS),
               fontsize=9, title="bar colours", title_fontsize=9)
    fig.suptitle(f"{record['provenance']['gpu']}: the custom op in use", fontsize=11)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    plt.close(fig)  # shown once, as the value a cell displays, not again by the inline backend
    return fig
