"""The sweep's heatmaps: x copy_ per cell, one-shot grids (one panel per hints setting) and grid-stride loops."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from elu_study.core.record import figure_path, save_figure
from elu_study.jobs.launch.analysis import HINTS, MAX_THREADS_PER_SM, THREADS, cell, grid, row_of

COLORBAR_LABEL = "x copy_ (median; lower: faster)"
BEYOND = "hatched: slower than the colour scale"
SCALE = 0.06  # each figure's colour scale spans this much of copy_'s time from its fastest cell


def _heatmap(ax, rows, cols, values, names, marked: set[str], vmin: float, vmax: float, cmap):
    im = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(cols)), [str(c) for c in cols])
    ax.set_yticks(range(len(rows)), [str(r) for r in rows])
    for (i, j), v in np.ndenumerate(values):
        if not np.isnan(v):
            star = names[i][j] in marked
            dark = (v - vmin) / (vmax - vmin) > 0.6 if vmax > vmin else False  # viridis_r is dark at the top
            ax.text(j, i, f"{v:.3f}" + ("\n(best)" if star else ""), ha="center", va="center", fontsize=8,
                    fontweight="bold" if star else "normal", color="w" if dark else "k")
            if star:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="tab:red", lw=2.5))
            elif v > vmax:  # past the colour scale: its darkest colour, hatched
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="w", lw=0, hatch="//", alpha=0.5))
    return im


def heatmap_figures(record: dict) -> dict:
    """{"launch": one-shot heatmaps (a panel per hints setting), "launch-grid-stride": grid-stride heatmap}: x copy_
    per cell, the best cell framed; each figure its own colour scale, SCALE wide from its fastest cell, so
    that the close calls differ in colour; slower cells are hatched."""
    cmap, gpu, best = plt.get_cmap("viridis_r"), record["provenance"]["gpu"], {record["best"]["name"]}
    scale = {gs: (lo := min(c["x_copy"] for c in record["cells"] if c["grid_stride"] == gs), lo + SCALE)
             for gs in (False, True)}
    one, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for ax, hints in zip(axes, HINTS):
        im = _heatmap(ax, *grid(record, hints), best, *scale[False], cmap)
        ax.set_xlabel("float4s per thread")
        ax.set_title("__ldcs/__stcs (evict-first)" if hints else "plain loads and stores", fontsize=10)
    axes[0].set_ylabel("threads per block")
    one.colorbar(im, ax=axes, label=COLORBAR_LABEL, extend="max")
    one.suptitle(f"One-shot grids, {gpu} ({BEYOND})", fontsize=10)
    gs, ax = plt.subplots(figsize=(6.5, 4.2))
    gs.colorbar(_heatmap(ax, *grid(record, grid_stride=True), best, *scale[True], cmap), ax=ax, label=COLORBAR_LABEL,
                extend="max")
    ax.set(xlabel="threads per block", ylabel="blocks per SM")
    ax.set_title(f"Grid-stride loops, {gpu}\n({BEYOND})", fontsize=10)
    gs.tight_layout()
    return {"launch": one, "launch-grid-stride": gs}


def block_size_figure(record: dict, study: dict | None = None, one_shot_build: str = "3_grid_stride_one_shot",
                      one_shot_threads: int = 512):
    """x copy_ against threads per block, p10-p90 as error bars: step 2's kernel in one-shot grids (1 and 2 float4s
    per thread, no hints), the grid-stride loop with the SM full, and step 3's own one-shot build (``study``)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    one = lambda v: lambda c: not c["grid_stride"] and not c["hints"] and c["vectors"] == v
    full = lambda c: c["grid_stride"] and c["blocks_per_sm"] * c["threads"] == MAX_THREADS_PER_SM
    roof = record["roof_ms"]
    for label, pick, marker in (("one-shot, 1 float4/thread", one(1), "o"), ("one-shot, 2 float4s/thread", one(2), "s"),
                                ("grid-stride loop, SM full", full, "^")):
        cells = sorted(filter(pick, record["cells"]), key=lambda c: c["threads"])
        err = [[c["x_copy"] - c["timing"]["p10_ms"] / roof for c in cells],
               [c["timing"]["p90_ms"] / roof - c["x_copy"] for c in cells]]
        ax.errorbar([c["threads"] for c in cells], [c["x_copy"] for c in cells], yerr=err, marker=marker, capsize=3,
                    label=label)
    step2 = cell(record, "256x1")
    ax.annotate("step 2", (step2["threads"], step2["x_copy"]), textcoords="offset points", xytext=(0, -14),
                ha="center", fontsize=8)
    if own := row_of(study, one_shot_build):
        ax.plot([one_shot_threads], [own["x_copy"]], ls="none", marker="D", mfc="none", mec="tab:red", ms=8,
                label=f"{one_shot_build} (main study)")
    ax.axhline(1.0, color="gray", ls=":", lw=1, label="copy_")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(THREADS), [str(t) for t in THREADS])
    ax.set(xlabel="threads per block", ylabel="x copy_ (bars: p10-p90)")
    ax.set_title(f"Block size alone, {record['provenance']['gpu']}", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def write_figures(record: dict, results_dir: Path | None = None) -> list[Path]:
    """The heatmaps saved as results/<gpu>-launch.png and results/<gpu>-launch-grid-stride.png."""
    gpu = record["provenance"]["gpu"]
    return [save_figure(fig, figure_path(gpu, name, results_dir)) for name, fig in heatmap_figures(record).items()]
