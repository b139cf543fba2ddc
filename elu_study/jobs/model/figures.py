"""The model record's figure: forward and backward, the fusion lesson, CUDA graphs and the MLP, four panels;
and for a schema-3 record two more: the host's time per call against the size, without and with a gradient."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch

from elu_study.jobs.model.analysis import BACKWARD_STREAMS, entries, median
from elu_study.jobs.model.host import AFTER, AFTER_GRAD, BEFORE, BEFORE_GRAD
from elu_study.jobs.model.measure import THREE_STREAMS

COLORS = {"ours, forward": "tab:blue", "ours, backward": "tab:purple", "ours, forward + backward": "tab:cyan",
          "PyTorch / reference": "tab:gray"}


HOST_PANELS = (("host time per call, no gradient", ("F.elu", "binding", BEFORE, AFTER, "nn.ELU module",
                                                     "elu_study.ELU module")),
               ("host time per call, input requires_grad (forward)", ("F.elu, requires_grad", BEFORE_GRAD, AFTER_GRAD)))
HOST_STYLES = {"F.elu": ("tab:gray", "-"), "binding": ("tab:green", ":"), BEFORE: ("tab:red", "--"),
               AFTER: ("tab:blue", "-"), "nn.ELU module": ("tab:gray", "-."), "elu_study.ELU module": ("tab:cyan", "-."),
               "F.elu, requires_grad": ("tab:gray", "-"), BEFORE_GRAD: ("tab:red", "--"), AFTER_GRAD: ("tab:blue", "-")}


def is_ours(name: str) -> bool:
    return name.startswith("op ") or "op*" in name or "drop-in" in name or "elu_study" in name


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


def bar_panel(ax, record: dict, title: str, names: list[str], lines: list[tuple]) -> None:
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


def host_panel(ax, record: dict, title: str, names: tuple) -> None:
    """Host µs per call against the number of elements (log x), p10-p90 bands."""
    host = record["host"]
    sizes = np.array(host["sizes"])
    for name in names:
        us = [host["routes"][name]["us"][str(n)] for n in sizes]
        line_color, ls = HOST_STYLES[name]
        ax.plot(sizes, [u["median"] for u in us], color=line_color, ls=ls, marker="o", ms=3, label=name)
        ax.fill_between(sizes, [u["p10"] for u in us], [u["p90"] for u in us], color=line_color, alpha=0.15)
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("elements (float32)")
    ax.set_ylabel("host µs per call (GPU held busy)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)


def figure(record: dict):
    """Four panels: forward and backward against copy_ and the measured three-stream add, the fusion
    lesson, CUDA graphs, the MLP; p10-p90 whiskers; colours: ours by direction, gray PyTorch. A schema-3
    record (with ``host``) adds a third column: the host's time per call."""
    extra = "host" in record
    fig, axes = plt.subplots(2, 3 if extra else 2, figsize=(22 if extra else 15, 8))
    for (i, j), panel in zip(((0, 0), (0, 1), (1, 0), (1, 1)), panels(record)):
        bar_panel(axes[i, j], record, *panel)
    if extra:
        for i, (title, names) in enumerate(HOST_PANELS):
            host_panel(axes[i, 2], record, title, names)
    fig.legend(handles=[Patch(color=c, label=k) for k, c in COLORS.items()], loc="lower center", ncol=len(COLORS),
               fontsize=9, title="bar colours", title_fontsize=9)
    fig.suptitle(f"{record['provenance']['gpu']}: the custom op in use", fontsize=11)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    plt.close(fig)  # shown once, as the value a cell displays, not again by the inline backend
    return fig
