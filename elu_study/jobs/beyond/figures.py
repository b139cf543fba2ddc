"""Step 6's figures: each float32 attempt's time over copy_'s, and time against DRAM throughput."""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch

from elu_study.core.ncu import counter_rows
from elu_study.core.record import closed
from elu_study.jobs.beyond.analysis import float32_rows

def times_figure(record: dict, right: float = 1.3):
    """Each float32 attempt's time over copy_'s, a bar from the roof (median, p10-p90), the streams' floor; past
    ``right``: an arrow at the edge with its value."""
    rows = sorted(float32_rows(record), key=lambda r: r["x_copy"])
    roof, floor = record["roof_ms"], record.get("stream_floor_ms")
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(rows) + 1.8))
    y, med = np.arange(len(rows))[::-1], np.array([r["x_copy"] for r in rows])
    lo = med - np.array([r["timing"]["p10_ms"] for r in rows]) / roof
    hi = np.array([r["timing"]["p90_ms"] for r in rows]) / roof - med
    ax.barh(y, med - 1, left=1, xerr=[lo.clip(0), hi.clip(0)],
            color=[{"attempt": "tab:purple", "step": "tab:blue"}.get(r["kind"], "tab:gray") for r in rows], capsize=2)
    for yi, v in zip(y[med > right], med[med > right]):
        ax.annotate(f"{v:.3f}x, off scale \u2192", (right, yi), ha="right", va="center", fontsize=8, color="white")
    ax.set_yticks(y, [r["name"] for r in rows], fontsize=8)
    lines = [ax.axvline(1.0, color="tab:green", ls="--", label=f"roof: copy_ {roof:.3f} ms")]
    if floor:
        lines.append(ax.axvline(floor / roof, color="tab:red", ls=":", label=f"two streams apart: {floor:.3f} ms"))
    ax.set(xlim=(min(med.min(), floor / roof if floor else 1) - 0.01, min(max(med + hi) + 0.01, right)),
           xlabel="time / copy_'s (median, p10-p90; bars from the roof)",
           title=f"Step 6's float32 attempts, {record['provenance']['gpu']}")
    handles = [Patch(color=c, label=k) for k, c in (("attempt (one change)", "tab:purple"), ("step", "tab:blue"),
                                                    ("baseline", "tab:gray"))]
    ax.legend(handles=handles + lines, fontsize=8, loc="upper right", framealpha=0.9)
    return closed(fig)


def dram_figure(record: dict):
    """Each float32 kernel's time over copy_'s against its DRAM throughput (ncu), with the line 'time set by DRAM
    throughput alone' through 6_base (x copy_ proportional to 1 / throughput)."""
    c = counter_rows(record)
    rows = [r for r in float32_rows(record) if c.get(r["name"], {}).get("dram_pct_of_peak")]
    fig, ax = plt.subplots(figsize=(8, 5))
    d, x = np.array([c[r["name"]]["dram_pct_of_peak"] for r in rows]), np.array([r["x_copy"] for r in rows])
    ax.scatter(d, x, color=["tab:purple" if r["kind"] == "attempt" else "tab:blue" for r in rows], zorder=3)
    base_x = next((r["x_copy"] for r in rows if r["name"] == "6_base"), None)
    for r, di, xi in zip(rows, d, x):  # name the points that stand apart; the 6_base cluster stays unlabelled
        if base_x is None or r["name"] == "6_base" or abs(xi - base_x) > 0.008:
            ax.annotate(r["name"], (di, xi), fontsize=7, xytext=(3, 2), textcoords="offset points")
    if base_x is not None:
        grid = np.linspace(d.min() * 0.98, d.max() * 1.02, 50)
        ax.plot(grid, base_x * c["6_base"]["dram_pct_of_peak"] / grid, color="tab:gray", ls="--",
                label="DRAM throughput alone")
    ax.axhline(1.0, color="tab:green", ls=":", label="copy_")
    ax.set(xlabel="DRAM throughput, % of peak", ylabel="time / copy_'s (median)",
           title="Same bytes, different DRAM efficiency")
    ax.legend(fontsize=8)
    return closed(fig)
