"""Diagrams of what the threads touch, from each launch's numbers (``launches.py``); each figure returned closed."""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.colors import ListedColormap, to_rgba
from matplotlib.patches import Patch

from elu_study.core.record import closed
from elu_study.jobs.study.figures import bars, label
from elu_study.jobs.study.launches import (LINE_BYTES, ORDERS, WARP, Launch, block_pass_map, lines_per_instruction,
                                           persistent_runs, schedule, thread_accesses, wave_sizes)

ACCESS_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red")


def access_figure(launches: list[Launch], count: int = WARP, title: str | None = None):
    """Which bytes threads 0 to ``count`` of block 0 read, one box per access, the 128-byte lines marked."""
    fig, axes = plt.subplots(len(launches), 1, figsize=(9, 1.0 + 2.1 * len(launches)), sharex=True, squeeze=False)
    spans = [thread_accesses(lau, count=min(count, lau.threads)) for lau in launches]
    right = max(int(a.max()) + lau.access_bytes for a, lau in zip(spans, launches))
    step = LINE_BYTES if right <= 8 * 1024 else 1024
    for ax, lau, a in zip(axes[:, 0], launches, spans):
        rows = np.arange(a.shape[0])
        shade = np.where((rows // WARP) % 2 == 0, 1.0, 0.45)  # alternate warps: full and pale
        for k in range(a.shape[1]):
            color = [to_rgba(ACCESS_COLORS[k % len(ACCESS_COLORS)], s) for s in shade]
            ax.barh(rows, lau.access_bytes, left=a[:, k], height=1.0, color=color,
                    edgecolor="white" if count <= WARP else color, linewidth=0.3 if count <= WARP else 1.5,
                    label=f"access {k + 1} of each thread")
            if count > WARP:
                for w in range(0, a.shape[0], WARP):
                    ax.text(a[w, k], w + WARP / 2, f" warp {w // WARP}", fontsize=6, va="center", alpha=shade[w])
        ax.vlines(np.arange(0, right + 1, step), -0.5, a.shape[0] - 0.5, color="gray", lw=0.5, alpha=0.6)
        per = f"{lau.vectors} x {lau.access_bytes} B" if lau.vectors > 1 else f"{lau.access_bytes} B"
        ax.set_title(label("warp_lines", what=label("describe", lau=lau, per=per), lines=lines_per_instruction(lau),
                           line_bytes=LINE_BYTES), fontsize=9)
        ax.set(ylabel="thread" if count > WARP else "lane", ylim=(a.shape[0] - 0.5, -0.5))
        if a.shape[1] > 1:
            ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set(xlabel=label("byte_offset", step=step), xlim=(0, right))
    fig.suptitle(title or "What the threads read", fontsize=10)
    return closed(fig)


def grid_stride_figure(seed: Launch):
    """The seed's blocks x passes, coloured by wave: a block of the last wave starts when one of the first is done."""
    fig, ax = plt.subplots(figsize=(8, 4.2))
    grid, sizes = block_pass_map(seed), wave_sizes(seed)
    # Whole waves alternate blue and cyan; a partial wave is red.
    colors = [("tab:blue", "tab:cyan")[w % 2] if n == seed.wave_blocks else "tab:red" for w, n in enumerate(sizes)]
    ax.imshow(grid, aspect="auto", interpolation="nearest", cmap=ListedColormap(colors), vmin=0.5, vmax=len(sizes) + 0.5)
    ax.set(xlabel=label("block_axis", last=seed.blocks - 1, threads=seed.threads),
           ylabel=label("pass_axis", last=grid.shape[0] - 1))
    ax.set_title(label("walks", entry=seed.name, passes=seed.passes, waves=seed.waves), fontsize=9)
    ax.text(0.5, 0.5, label("column"), transform=ax.transAxes, ha="center", va="center", fontsize=7,
            bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "gray"})
    waves = [Patch(color=c, label=f"wave {w + 1}: {n} blocks") for w, (n, c) in enumerate(zip(sizes, colors))]
    ax.legend(handles=[*waves, Patch(facecolor="white", edgecolor="gray", label=label("empty_pass"))],
              fontsize=7, loc="lower left", framealpha=0.9)
    return closed(fig)


def tile_order_figure(launches: list[Launch]):
    """Step 6's tile orders: where in the input (GB) blocks work as the launch goes on (persistent: about 24 runs)."""
    fig, axes = plt.subplots(1, len(launches), figsize=(2.6 * len(launches) + 0.6, 4.0), squeeze=False)
    for ax, lau in zip(axes[0], launches):
        gb = lau.tile * lau.access_bytes / 1e9
        if lau.order == 3:
            every = max(1, lau.blocks // 24)
            begin, end = (a[::every] for a in persistent_runs(lau))
            segments = np.stack([np.stack([begin * gb, np.zeros(len(begin))], 1),
                                 np.stack([end * gb, (end - begin).astype(float)], 1)], 1)
            ax.add_collection(LineCollection(segments, lw=1.2, color="tab:purple"))
            ax.set_ylim(0, (end - begin).max() * 1.02)
            ax.set_ylabel(label("tiles_done"), fontsize=8)
            sub = label("persistent", blocks=lau.blocks, passes=lau.passes, every=every)
        else:
            tile, rounds = schedule(lau)
            ax.scatter(tile * gb, rounds, s=1, color="tab:blue")
            ax.set_ylim(0, rounds.max() * 1.02)
            ax.set_ylabel(label("launch_order", blocks=lau.wave_blocks), fontsize=8)
            sub = f"{lau.blocks} blocks,\n{lau.waves:.1f} waves"
        ax.set_xlim(0, lau.tiles * gb)
        ax.set_xlabel("input offset, GB", fontsize=8)
        ax.set_title(f"{lau.name}: {ORDERS[lau.order]}\n{sub}", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(label("where_read", tile_bytes=launches[0].tile * launches[0].access_bytes), fontsize=10)
    return closed(fig)


def issue_figure(rows: list[tuple[str, float, float]]):
    """Per kernel: the time its SMs need just to issue its instructions, against its measured time (ncu)."""
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(rows) + 1.6))
    issue, total = np.array([r[1] for r in rows]), np.array([r[2] for r in rows])
    bars(ax, [r[0] for r in rows], {
        label("issue_bar"): (issue, [f"{i:.2f} ms ({100 * i / t:.0f} %)" for i, t in zip(issue, total)], "tab:orange"),
        "kernel time (ncu)": (total, [f"{t:.2f} ms" for t in total], "tab:gray")})
    ax.set(xlim=(0, total.max() * 1.3), xlabel="ms, one full-size launch")
    ax.set_title(label("issue_title"), fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0, -0.22), ncol=2, frameon=False)
    return closed(fig)


def in_flight_figure(launches: list[Launch]):
    """Per launch: the loads in flight per SM when every resident thread has issued its loads."""
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(launches) + 1.4))
    kib = np.array([lau.bytes_in_flight_per_sm / 1024 for lau in launches])
    bars(ax, [lau.name for lau in launches], {"": (kib, [label(
        "in_flight_bar", threads=lau.resident_threads_per_sm, bytes=lau.bytes_per_thread, waves=lau.waves)
        for lau in launches], "tab:blue")}, 7)
    ax.set(xlim=(0, kib.max() * 1.9), xlabel=label("in_flight_x"))
    ax.set_title(label("in_flight_title"), fontsize=10)
    return closed(fig)
