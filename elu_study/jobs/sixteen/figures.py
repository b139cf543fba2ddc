"""Step 7's figures: each 16-bit row's time over its own roof (the job's figure), each fast formula's distance to
expm1f per binade, and diagrams of the rounding check and of the table (notebook 12)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import Patch

from elu_study.core.entries import is_backward
from elu_study.jobs.sixteen.analysis import (AIM, DEFAULT, DTYPES, MUST, ROUNDING, own_copy_ms, roof_ms,
                                             rows_of, x_own_copy)

COLORS = {"default": "tab:blue", "backward": "tab:cyan", "step7": "tab:purple", "other": "tab:gray"}
ROOFS = ("copy_", "torch.add")


def color(name: str) -> str:
    if name.startswith(f"{DEFAULT} "):
        return COLORS["default"]
    if name.startswith("7_backward"):
        return COLORS["backward"]
    return COLORS["step7"] if name.startswith("7_") else COLORS["other"]


def label(name: str, dtype: str) -> str:
    short = name.removesuffix(f" {dtype}")
    return f"{short} (over torch.add)" if is_backward(name) else short


def xcopy_panel(ax, record: dict, dtype: str) -> None:
    rows = sorted((r for r in rows_of(record, dtype) if r["name"].split()[0] not in ROOFS),
                  key=lambda r: x_own_copy(record, r["name"])[0])
    x = np.array([x_own_copy(record, r["name"]) for r in rows])
    y = np.arange(len(rows))[::-1]
    ax.barh(y, x[:, 0] - 1, left=1, xerr=[(x[:, 0] - x[:, 1]).clip(0), (x[:, 2] - x[:, 0]).clip(0)],
            color=[color(r["name"]) for r in rows], capsize=2)
    ax.set_yticks(y, [label(r["name"], dtype) for r in rows], fontsize=8)
    ax.axvline(1.0, color="tab:green", lw=1.5)
    ax.axvline(AIM, color="tab:olive", ls=":")
    ax.axvline(MUST, color="tab:red", ls="--")
    ax.set_xlim(0.98, max(1.1, float(x[:, 2].max()) + 0.03))
    backward = any(is_backward(r["name"]) for r in rows)
    add = f", torch.add {roof_ms(record, 'torch.add', dtype):.3f} ms" if backward else ""
    ax.set_title(f"{dtype}: roofs copy_ {own_copy_ms(record, dtype):.3f} ms{add}", fontsize=10)
    ax.set_xlabel("time over the row's own roof (median; whiskers p10-p90)")


def xcopy_figure(record: dict):
    """Each 16-bit row's time over the same dtype's copy_, one panel per dtype, with the must and the aim."""
    fig, axes = plt.subplots(1, len(DTYPES), figsize=(13, 7))
    for ax, dtype in zip(axes, DTYPES):
        xcopy_panel(ax, record, dtype)
    handles = [Patch(color=COLORS["default"], label=f"{DEFAULT} (the step, as built by default)"),
               Patch(color=COLORS["backward"], label="7_backward (over torch.add, three streams)"),
               Patch(color=COLORS["step7"], label="step 7, one change each"),
               Patch(color=COLORS["other"], label="PyTorch, torch.compile, Triton, CUB, step 6"),
               plt.Line2D([], [], color="tab:green", lw=1.5, label="roof: the dtype's copy_ (torch.add for backward)"),
               plt.Line2D([], [], color="tab:olive", ls=":", label=f"aim {AIM:.2f}x"),
               plt.Line2D([], [], color="tab:red", ls="--", label=f"must {MUST:.2f}x")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(f"Step 7: 16-bit ELU against its own roof, full size, {record['provenance']['gpu']} "
                 "(lower is better)")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    plt.close(fig)  # returned to be shown once, as a cell's value
    return fig


def delta_figure(record: dict):
    """Each formula's largest distance to expm1f in each binade of x (log2), and the largest delta its eps allows."""
    fig, axes = plt.subplots(1, len(DTYPES), figsize=(12, 4.2), sharey=True)
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, dtype in zip(axes, DTYPES):
        for i, (formula, d) in enumerate(record["delta"].items()):
            v, c = d[dtype], cycle[i % len(cycle)]
            rel = np.array(v["binade_max_rel"], dtype=float)
            ax.plot(v["binades"], np.log2(np.where(rel > 0, rel, np.nan)), ".-", color=c, ms=3,
                    label=f"{formula}: delta 2^{v['delta_log2']:.1f}")
            allowed = d["eps"] - ROUNDING
            ax.axhline(math.log2(allowed), color=c, ls="--", lw=0.8)
        ax.set_title(f"every negative {dtype} input", fontsize=10)
        ax.set_xlabel("binade of x: floor(log2 |x|)")
        ax.legend(fontsize=7, loc="lower left")
    axes[0].set_ylabel("log2 max |fast - expm1f| / |expm1f|")
    fig.suptitle("Each fast expm1's distance to expm1f; dashed: eps - 3*2^-24, the most the argument allows")
    fig.tight_layout()
    plt.close(fig)
    return fig


def rounding_figure(eps: float = 0.012):
    """Where 16-bit rounding boundaries fall against r and r (1 -+ eps): a diagram (a toy format, eps enlarged)."""
    fig, axes = plt.subplots(2, 1, figsize=(10, 3.6), sharex=True)
    grid = np.arange(0.875, 1.07, 0.0625)  # representable values of a toy format with 4 bits of mantissa
    cases = ((axes[0], 0.948, "tab:green", "both ends round to the same value, and so does expm1f(x) alpha, which lies between "
                              "them (rounding is monotone): keep r's rounding"),
             (axes[1], 0.962, "tab:red", "a rounding boundary lies between the ends: they round apart, so compute expm1f"))
    for ax, r, shade, word in cases:
        ax.scatter(grid, np.zeros_like(grid), marker="|", s=400, color="black", label="16-bit values")
        for m in (grid[:-1] + grid[1:]) / 2:
            ax.axvline(m, color="tab:gray", ls=":", lw=1)
        lo, hi = r * (1 - eps), r * (1 + eps)
        ax.axvspan(lo, hi, color=shade, alpha=0.25)
        ax.plot([r], [0], "o", color="tab:blue")
        ax.plot([r * (1 + 0.5 * eps)], [0], "x", color="tab:orange")
        ax.annotate("r = fast(x) alpha", (r, 0), xytext=(-4, 14), textcoords="offset points", ha="right", fontsize=8)
        ax.annotate("expm1f(x) alpha", (r * (1 + 0.5 * eps), 0), xytext=(4, 14), textcoords="offset points",
                    fontsize=8, color="tab:orange")
        ax.annotate("r (1 - eps)", (lo, 0), xytext=(-3, -20), textcoords="offset points", ha="right", fontsize=8)
        ax.annotate("r (1 + eps)", (hi, 0), xytext=(3, -20), textcoords="offset points", ha="left", fontsize=8)
        ax.set_title(word, fontsize=9, loc="left")
        ax.set_yticks([])
        ax.set_ylim(-1, 1)
    axes[1].set_xlim(0.86, 1.08)
    axes[1].set_xlabel("value; ticks: 16-bit values; dotted: rounding boundaries halfway between them (a toy format, "
                       "eps far larger than it is)")
    fig.tight_layout()
    plt.close(fig)
    return fig


def magnitudes(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Every finite negative value of a 16-bit dtype by its magnitude bits (0 .. infinity), as float32."""
    bits = torch.arange(0x8000, 0x10000, dtype=torch.int32).to(torch.int16).view(getattr(torch, dtype)).float()
    keep = torch.isfinite(bits)
    return np.arange(0x8000)[keep.numpy()], bits[keep].numpy()


def table_figure():
    """What the table holds, per dtype: expm1(x) of every negative 16-bit x against its magnitude bits (the index),
    shaded where it is neither x nor -1 (computed here on the CPU in float32: a diagram; the kernel's table is
    expm1f computed on the GPU)."""
    fig, axes = plt.subplots(1, len(DTYPES), figsize=(12, 3.4))
    for ax, dtype in zip(axes, DTYPES):
        m, x = magnitudes(dtype)
        e = torch.expm1(torch.from_numpy(x)).numpy()
        inside = (e != x) & (e != -1.0)
        ax.plot(m, e, color="tab:blue", lw=1.5, label="expm1(x), x = -value(m)")
        lo, hi = int(m[inside].min()), int(m[inside].max())
        ax.axvspan(lo, hi, color="tab:orange", alpha=0.2, label=f"the table: {hi - lo + 1:,} entries, {4 * (hi - lo + 1) / 1024:.0f} KB")
        ax.set_xlabel(f"magnitude bits m of a negative {dtype} (hex)")
        ticks = sorted({*([0] if lo > 0x1000 else []), lo, hi, int(m.max())})
        ax.set_xticks(ticks, [f"{t:#06x}" for t in ticks], fontsize=8)
        ax.set_ylabel("expm1(x)")
        ax.set_title(f"{dtype}: left of the band expm1(x) = x, right of it -1", fontsize=10)
        ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    plt.close(fig)
    return fig


def figures(record: dict) -> dict:
    """name -> figure, each saved as results/<gpu>-<name>.png."""
    return {"sixteen": xcopy_figure(record)}
