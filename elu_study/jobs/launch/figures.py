"""The sweep's figures: x copy_ per cell as heatmaps (one-shot grids by hints; grid-stride loops) and by block size."""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import Rectangle

from elu_study.core.record import figure_path, save_figure
from elu_study.jobs.launch.analysis import HINTS

COLORBAR_LABEL = "x copy_ (median; lower: faster)"
BEYOND = "hatched: slower than the colour scale"
SCALE = 0.06  # each figure's colour scale spans this much of copy_'s time from its fastest cell


def _heatmap(ax, cells: pd.DataFrame, at: dict, marked: set[str], vmin: float, vmax: float, cmap):
    """x copy_ of ``cells`` pivoted ``at`` (index and columns), printed in each cell; ``marked`` cells framed."""
    values, names = (cells.pivot(**at, values=v) for v in ("x_copy", "name"))
    im = ax.imshow(values.to_numpy(dtype=float), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(values.shape[1]), [str(c) for c in values.columns])
    ax.set_yticks(range(values.shape[0]), [str(r) for r in values.index])
    for (i, j), v in np.ndenumerate(values.to_numpy(dtype=float)):
        if not np.isnan(v):
            star = names.iat[i, j] in marked
            dark = (v - vmin) / (vmax - vmin) > 0.6 if vmax > vmin else False  # viridis_r is dark at the top
            ax.text(j, i, f"{v:.3f}" + ("\n(best)" if star else ""), ha="center", va="center", fontsize=8,
                    fontweight="bold" if star else "normal", color="w" if dark else "k")
            if star:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="tab:red", lw=2.5))
            elif v > vmax:  # past the colour scale: its darkest colour, hatched
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="w", lw=0, hatch="//", alpha=0.5))
    return im


def heatmap_figures(record: dict) -> dict:
    """The one-shot heatmaps (a panel per hints setting) and the grid-stride one, the best cells framed; each colour
    scale SCALE wide from the figure's fastest cell, so that close calls differ in colour."""
    cmap, gpu, best = plt.get_cmap("viridis_r"), record["provenance"]["gpu"], set(record["best"]["tied"])
    cells = pd.DataFrame(record["cells"])
    lo = cells.groupby("grid_stride").x_copy.min()
    one, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for ax, hints in zip(axes, HINTS):
        im = _heatmap(ax, cells[~cells.grid_stride & (cells.hints == hints)], {"index": "threads", "columns": "vectors"},
                      best, lo[False], lo[False] + SCALE, cmap)
        ax.set_xlabel("float4s per thread")
        ax.set_title("__ldcs/__stcs (evict-first)" if hints else "plain loads and stores", fontsize=10)
    axes[0].set_ylabel("threads per block")
    one.colorbar(im, ax=axes, label=COLORBAR_LABEL, extend="max")
    one.suptitle(f"One-shot grids, {gpu} ({BEYOND})", fontsize=10)
    gs, ax = plt.subplots(figsize=(6.5, 4.2))
    im = _heatmap(ax, cells[cells.grid_stride], {"index": "blocks_per_sm", "columns": "threads"}, best, lo[True],
                  lo[True] + SCALE, cmap)
    gs.colorbar(im, ax=ax, label=COLORBAR_LABEL, extend="max")
    ax.set(xlabel="threads per block", ylabel="blocks per SM")
    ax.set_title(f"Grid-stride loops, {gpu}\n({BEYOND})", fontsize=10)
    gs.tight_layout()
    return {"launch": one, "launch-grid-stride": gs}


def block_size_figure(frame: pd.DataFrame, gpu: str, study: dict | None = None):
    """x copy_ against threads per block (``notebook.block_size``), with step 3's one-shot build from ``study``."""
    ax = frame.iloc[:, :2].plot(style=["o-", "^-"], figsize=(7.5, 4.2), grid=True)
    if own := next((r for r in (study or {}).get("rows", []) if r["name"] == "3_grid_stride_one_shot"), None):
        ax.plot([512], [own["x_copy"]], ls="none", marker="D", mfc="none", mec="tab:red", ms=8,
                label="3_grid_stride_one_shot (main study)")
    ax.axhline(1.0, color="gray", ls=":", lw=1, label="copy_")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(frame.index), [str(t) for t in frame.index])
    ax.set(xlabel="threads per block", ylabel="x copy_", title=f"Block size alone, {gpu}")
    ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return ax.figure


def write_figures(record: dict, results_dir: Path | None = None) -> list[Path]:
    """The heatmaps saved as results/<gpu>-launch.png and results/<gpu>-launch-grid-stride.png."""
    gpu = record["provenance"]["gpu"]
    return [save_figure(fig, figure_path(gpu, name, results_dir)) for name, fig in heatmap_figures(record).items()]
