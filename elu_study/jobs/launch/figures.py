"""The sweep's heatmaps: x copy_ per cell, one-shot grids (one panel per hints setting) and grid-stride loops."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from elu_study.core.record import figure_path, save_figure
from elu_study.jobs.launch.analysis import grid, row_of
from elu_study.jobs.launch.shapes import HINTS, MAX_THREADS_PER_SM, THREADS

COLORBAR_LABEL = "time over copy_'s (median; lower is better)"


def _heatmap(ax, rows, cols, values, names, marked: set[str], vmin: float, vmax: float, cmap):
    im = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(cols)), [str(c) for c in cols])
    ax.set_yticks(range(len(rows)), [str(r) for r in rows])
    for i in range(len(rows)):
        for j in range(len(cols)):
            v = values[i, j]
            if v != v:
                continue
            star = names[i][j] in marked
            dark = (v - vmin) / (vmax - vmin) > 0.6 if vmax > vmin else False  # viridis_r is dark at the top
            ax.text(j, i, f"{v:.3f}" + ("\n(best)" if star else ""), ha="center", va="center", fontsize=8,
                    fontweight="bold" if star else "normal", color="w" if dark else "k")
            if star:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="tab:red", lw=2.5))
    return im


def colour_scale(record: dict, grid_stride: bool) -> tuple[float, float]:
    """Each figure its own colour scale, from copy_ (1.0) up."""
    x = np.array([c["x_copy"] for c in record["cells"] if c["grid_stride"] == grid_stride])
    return min(1.0, float(x.min())), float(x.max())


def one_shot_figure(record: dict, cmap):
    b = record["best"]
    tie = " (a tie: margin inside the noise)" if b["tie"] else ""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for ax, hints in zip(axes, HINTS):
        im = _heatmap(ax, *grid(record, hints), {b["name"]}, *colour_scale(record, False), cmap)
        ax.set_xlabel("float4s per thread")
        ax.set_title("__ldcs/__stcs (evict-first)" if hints else "plain loads and stores", fontsize=10)
    axes[0].set_ylabel("threads per block")
    fig.colorbar(im, ax=axes, label=COLORBAR_LABEL)
    fig.suptitle(f"One-shot grids, x copy_ on {record['provenance']['gpu']}; best {b['name']} {b['x_copy']:.3f}{tie}",
                 fontsize=10)
    return fig


def grid_stride_figure(record: dict, cmap):
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    im = _heatmap(ax, *grid(record, grid_stride=True), {record["best"]["name"]}, *colour_scale(record, True), cmap)
    ax.set_xlabel("threads per block")
    ax.set_ylabel("blocks per SM (grid = this x SMs)")
    fig.colorbar(im, ax=ax, label=COLORBAR_LABEL)
    ax.set_title(f"Grid-stride loops (1 float4 per iteration, no hints),\nx copy_ on {record['provenance']['gpu']}",
                 fontsize=10)
    fig.tight_layout()
    return fig


def _series(record: dict, pick) -> tuple[list[int], list[float], list[list[float]]]:
    """Threads per block, x copy_ and its p10/p90 distances (for error bars) of the cells ``pick`` chooses."""
    cells = sorted((c for c in record["cells"] if pick(c)), key=lambda c: c["threads"])
    roof = record["roof_ms"]
    x = [c["x_copy"] for c in cells]
    low = [v - c["timing"]["p10_ms"] / roof for v, c in zip(x, cells)]
    high = [c["timing"]["p90_ms"] / roof - v for v, c in zip(x, cells)]
    return [c["threads"] for c in cells], x, [low, high]


def block_size_figure(record: dict, study: dict | None = None, one_shot_build: str = "3_grid_stride_one_shot",
                      one_shot_threads: int = 512):
    """x copy_ against threads per block: step 2's kernel in one-shot grids (1 and 2 float4s per thread, no hints)
    and the grid-stride loop with the SM full, p10-p90 as error bars; step 3's own one-shot build (the main study's
    ``study`` record, another run) as a hollow marker."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    series = {
        "one-shot, 1 float4/thread (step 2's kernel)": lambda c: not c["grid_stride"] and not c["hints"] and c["vectors"] == 1,
        "one-shot, 2 float4s/thread": lambda c: not c["grid_stride"] and not c["hints"] and c["vectors"] == 2,
        "grid-stride loop, SM full": lambda c: c["grid_stride"] and c["blocks_per_sm"] * c["threads"] == MAX_THREADS_PER_SM,
    }
    for (label, pick), marker in zip(series.items(), ("o", "s", "^")):
        t, x, err = _series(record, pick)
        ax.errorbar(t, x, yerr=err, marker=marker, capsize=3, label=label)
    step2 = next((c for c in record["cells"] if c["name"] == "256x1"), None)
    if step2:
        ax.annotate("step 2", (step2["threads"], step2["x_copy"]), textcoords="offset points", xytext=(0, -14),
                    ha="center", fontsize=8)
    own = row_of(study, one_shot_build)
    if own:
        ax.plot([one_shot_threads], [own["x_copy"]], ls="none", marker="D", mfc="none", mec="tab:red", ms=8,
                label=f"{one_shot_build} (main study's run)")
    ax.axhline(1.0, color="gray", ls=":", lw=1, label="copy_")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(THREADS), [str(t) for t in THREADS])
    ax.set_xlabel("threads per block")
    ax.set_ylabel("time / copy_'s (median; bars: p10-p90)")
    ax.set_title(f"Block size alone, {record['provenance']['gpu']}: one-shot grids against the grid-stride loop",
                 fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def heatmap_figures(record: dict) -> dict:
    """{"launch": one-shot heatmaps (one panel per hints setting), "launch-grid-stride": grid-stride heatmap}:
    median time over copy_'s per cell, printed in each cell, the best cell framed."""
    cmap = plt.get_cmap("viridis_r")
    return {"launch": one_shot_figure(record, cmap), "launch-grid-stride": grid_stride_figure(record, cmap)}


def write_figures(record: dict, results_dir: Path | None = None) -> list[Path]:
    """The heatmaps saved as results/<gpu>-launch.png and results/<gpu>-launch-grid-stride.png."""
    gpu = record["provenance"]["gpu"]
    return [save_figure(fig, figure_path(gpu, name, results_dir)) for name, fig in heatmap_figures(record).items()]
