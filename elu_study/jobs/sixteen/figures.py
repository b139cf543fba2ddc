"""Step 7's figures: each 16-bit row's time over its own roof; diagrams of the rounding check and the table (nb 12)."""

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import Patch

from elu_study.core.entries import is_backward
from elu_study.core.record import closed
from elu_study.jobs.sixteen.analysis import DEFAULT, DTYPES, GOALS, ms, rows_of, x_own_copy

COLORS = {"default": "tab:blue", "backward": "tab:cyan", "step7": "tab:purple", "other": "tab:gray"}
NEAR_ROOF = 1.08  # the x axis ends here, so that the default's distance to its roof and goals can be read
LINES = ({"color": "tab:green", "lw": 1.5}, {"color": "tab:olive", "ls": ":"}, {"color": "tab:red", "ls": "--"})


def kind(name: str) -> str:
    return ("default" if name.startswith(f"{DEFAULT} ") else "backward" if name.startswith("7_backward")
            else "step7" if name.startswith("7_") else "other")


def xcopy_figure(record: dict):
    """Each 16-bit row's time over its own roof (the dtype's copy_, torch.add for a backward row; median, p10-p90
    whiskers), one panel per dtype, with the default forward's aim and must (issue 24's)."""
    fig, axes = plt.subplots(1, len(DTYPES), figsize=(13, 7))
    for ax, dtype in zip(axes, DTYPES):
        rows = sorted((r["name"] for r in rows_of(record, dtype) if r["name"].split()[0] not in ("copy_", "torch.add")),
                      key=lambda n: x_own_copy(record, n)[0])
        x, y = np.array([x_own_copy(record, n) for n in rows]), np.arange(len(rows))[::-1]
        ax.barh(y, x[:, 0] - 1, left=1, xerr=[(x[:, 0] - x[:, 1]).clip(0), (x[:, 2] - x[:, 0]).clip(0)],
                color=[COLORS[kind(n)] for n in rows], capsize=2)
        ax.set_yticks(y, [n.removesuffix(f" {dtype}") + " (/ torch.add)" * is_backward(n) for n in rows], fontsize=8)
        aim, must = GOALS[f"{DEFAULT} {dtype}"]
        for at, style, label in zip((1.0, aim, must), LINES, ("roof", f"forward aim {aim:.2f}x",
                                                             f"forward must {must:.2f}x")):
            ax.axvline(at, **style, label=label)
        ax.legend(loc="upper right", fontsize=8)
        add = f", torch.add {ms(record, f'torch.add {dtype}'):.3f}" if any(map(is_backward, rows)) else ""
        ax.set_title(f"{dtype}: copy_ {ms(record, f'copy_ {dtype}'):.3f}{add} ms", fontsize=10)
        for yi, v in zip(y[x[:, 0] > NEAR_ROOF], x[x[:, 0] > NEAR_ROOF, 0]):  # off scale: its value at the edge
            ax.annotate(f"{v:.3f}x \u2192", (NEAR_ROOF, yi), ha="right", va="center", fontsize=7, color="white")
        ax.set(xlim=(min(0.97, float(x[:, 1].min()) - 0.005), NEAR_ROOF),
               xlabel="time / own roof (axis ends at +8 %; slower rows labelled)")
    handles = [Patch(color=COLORS[k], label=label) for k, label in (
        ("default", f"{DEFAULT} (the default)"), ("backward", "7_backward (/ torch.add)"),
        ("step7", "step 7, other builds (notebook 12 names each one's base)"), ("other", "PyTorch, Triton, CUB, step 6"))]
    handles.append(plt.Line2D([], [], **LINES[0], label="roof: copy_ (torch.add for a backward row)"))
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(f"Step 7 against its own roof, {record['provenance']['gpu']}")
    return closed(fig, rect=(0, 0.1, 1, 1))


def rounding_figure(eps: float = 0.012):
    """Where 16-bit rounding boundaries (dotted, halfway between the ticks) fall against r and r (1 -+ eps): a
    diagram in a toy format with 4 bits of mantissa, eps far larger than it is. Top: both ends round to the same
    value, and so does expm1f(x) alpha between them (rounding is monotone); bottom: they round apart."""
    fig, axes = plt.subplots(2, 1, figsize=(10, 3.6), sharex=True)
    grid = np.arange(0.875, 1.07, 0.0625)
    for ax, r, shade, word in ((axes[0], 0.948, "tab:green", "same rounding: keep r's"),
                               (axes[1], 0.962, "tab:red", "they round apart: expm1f")):
        ax.scatter(grid, np.zeros_like(grid), marker="|", s=400, color="black", label="16-bit values")
        for m in (grid[:-1] + grid[1:]) / 2:
            ax.axvline(m, color="tab:gray", ls=":", lw=1)
        lo, hi, exact = r * (1 - eps), r * (1 + eps), r * (1 + 0.5 * eps)
        ax.axvspan(lo, hi, color=shade, alpha=0.25)
        ax.plot([r], [0], "o", color="tab:blue")
        ax.plot([exact], [0], "x", color="tab:orange")
        for label, at, dx, dy, ha in (("r = fast(x) alpha", r, -4, 14, "right"),
                                      ("expm1f(x) alpha", exact, 4, 14, "left"),
                                      ("r (1 - eps)", lo, -3, -20, "right"), ("r (1 + eps)", hi, 3, -20, "left")):
            ax.annotate(label, (at, 0), xytext=(dx, dy), textcoords="offset points", ha=ha, fontsize=8)
        ax.set_title(word, fontsize=9, loc="left")
        ax.set(yticks=[], ylim=(-1, 1))
    axes[1].set(xlim=(0.86, 1.08), xlabel="value (a toy format)")
    return closed(fig)


def table_figure():
    """What the table holds, per dtype: expm1(x) of every negative 16-bit x against its magnitude bits (the index,
    hex), shaded where it is neither x (left of the band) nor -1 (right of it). Computed here on the CPU in
    float32: a diagram; the kernel's table is expm1f computed on the GPU."""
    fig, axes = plt.subplots(1, len(DTYPES), figsize=(12, 3.4))
    for ax, dtype in zip(axes, DTYPES):
        x = torch.arange(0x8000, 0x10000, dtype=torch.int32).to(torch.int16).view(getattr(torch, dtype)).float()
        keep = torch.isfinite(x)
        m, x = np.arange(0x8000)[keep.numpy()], x[keep].numpy()
        e = torch.expm1(torch.from_numpy(x)).numpy()
        inside = (e != x) & (e != -1.0)
        ax.plot(m, e, color="tab:blue", lw=1.5, label="expm1(x)")
        lo, hi = int(m[inside].min()), int(m[inside].max())
        entries = hi - lo + 1
        ax.axvspan(lo, hi, color="tab:orange", alpha=0.2, label=f"table: {entries:,} entries, {entries / 256:.0f} KB")
        ticks = sorted({*([0] if lo > 0x1000 else []), lo, hi, int(m.max())})
        ax.set_xticks(ticks, [f"{t:#06x}" for t in ticks], fontsize=8)
        ax.set(xlabel=f"magnitude bits of {dtype}", ylabel="expm1(x)")
        ax.set_title(f"{dtype}: x, the band, -1", fontsize=10)
        ax.legend(fontsize=8, loc="lower left")
    return closed(fig)
