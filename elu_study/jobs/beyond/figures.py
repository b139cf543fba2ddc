"""Step 6's figures: each float32 attempt's time over copy_'s, and time against DRAM throughput."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch

from elu_study.core.ncu import counter_rows
from elu_study.jobs.beyond.analysis import float32_rows

KIND_COLORS = {"attempt": "tab:purple", "step": "tab:blue"}


def times_figure(record: dict):
    """Every float32 attempt's time over copy_'s, with the roof, the stream floor and p10-p90 whiskers."""
    rows = sorted(float32_rows(record), key=lambda r: r["x_copy"])
    roof = record["roof_ms"]
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(rows) + 1.8))
    y = np.arange(len(rows))[::-1]
    med = np.array([r["x_copy"] for r in rows])
    lo = med - np.array([r["timing"]["p10_ms"] for r in rows]) / roof
    hi = np.array([r["timing"]["p90_ms"] for r in rows]) / roof - med
    left = min(0.9, record["stream_floor_ms"] / roof - 0.02) if record.get("stream_floor_ms") else 0.9
    ax.barh(y, med - left, left=left, xerr=[lo.clip(0), hi.clip(0)],
            color=[KIND_COLORS.get(r["kind"], "tab:gray") for r in rows], capsize=2)
    ax.set_yticks(y, [r["name"] for r in rows], fontsize=8)
    lines = [ax.axvline(1.0, color="tab:green", ls="--", label=f"roof: copy_ {roof:.3f} ms")]
    if record.get("stream_floor_ms"):
        lines.append(ax.axvline(record["stream_floor_ms"] / roof, color="tab:red", ls=":",
                                label=f"read-only + write-only streams {record['stream_floor_ms']:.3f} ms"))
    ax.set_xlim(left, min(max(med + hi) + 0.01, 1.3))
    ax.set_xlabel("time over copy_'s (median; whiskers p10-p90; lower is better; bars past the edge are clipped)")
    ax.set_title(f"Step 6's attempts, full size float32, {record['provenance']['gpu']}")
    handles = [Patch(color="tab:purple", label="attempt (one change from 6_base)"), Patch(color="tab:blue", label="step"),
               Patch(color="tab:gray", label="baseline"), *lines]
    ax.legend(handles=handles, fontsize=8, loc="upper right", framealpha=0.9)
    fig.tight_layout()
    plt.close(fig)  # returned to be shown once, as a cell's value
    return fig


def dram_figure(record: dict):
    """Time over copy_'s (CUDA events) against DRAM throughput (ncu) for each float32 kernel: the line is
    'time set by the DRAM alone' through 6_base (x copy_ proportional to 1 / throughput)."""
    c = counter_rows(record)
    rows = [r for r in float32_rows(record) if r["name"] in c and c[r["name"]].get("dram_pct_of_peak")]
    fig, ax = plt.subplots(figsize=(8, 5))
    d = np.array([c[r["name"]]["dram_pct_of_peak"] for r in rows])
    x = np.array([r["x_copy"] for r in rows])
    ax.scatter(d, x, color=["tab:purple" if r["kind"] == "attempt" else "tab:blue" for r in rows], zorder=3)
    base_x = next((r["x_copy"] for r in rows if r["name"] == "6_base"), None)
    for r, di, xi in zip(rows, d, x):  # name the points that stand apart; the 6_base cluster stays unlabelled
        if base_x is None or r["name"] == "6_base" or abs(xi - base_x) > 0.008:
            ax.annotate(r["name"], (di, xi), fontsize=7, xytext=(3, 2), textcoords="offset points")
    if "6_base" in c:
        b = next(r for r in rows if r["name"] == "6_base")
        k = b["x_copy"] * c["6_base"]["dram_pct_of_peak"]
        grid = np.linspace(d.min() * 0.98, d.max() * 1.02, 50)
        ax.plot(grid, k / grid, color="tab:gray", ls="--", label="time set by DRAM throughput alone (through 6_base)")
    ax.axhline(1.0, color="tab:green", ls=":", label="copy_")
    ax.set_xlabel("DRAM throughput, % of peak (ncu, one full-size launch)")
    ax.set_ylabel("time over copy_'s (CUDA events, median)")
    ax.set_title("Same bytes, different DRAM efficiency: each attempt's time against its DRAM throughput")
    ax.legend(fontsize=8)
    fig.tight_layout()
    plt.close(fig)  # returned to be shown once, as a cell's value
    return fig


def figures(record: dict) -> dict:
    """name -> figure, each saved as results/<gpu>-<name>.png."""
    return {"beyond": times_figure(record), "beyond-dram": dram_figure(record)}
