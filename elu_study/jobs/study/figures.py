"""Figures: times against the floor and the roof, spreads, the wave sweep, ablations, counters, accuracy."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch

COLORS = {"step": "tab:blue", "baseline": "tab:gray", "peer": "tab:purple", "ablation": "tab:olive"}
KIND_LABELS = {"step": "step", "baseline": "baseline (PyTorch, copies, streams)", "peer": "peer (Triton, CUB)",
               "ablation": "ablation (one change)"}
MAIN_KINDS = ("step", "baseline", "peer")
# The three lines every figure with times shows: what the datasheet allows, what two streams run apart
# take (read_only + write_only, measured), and the GPU's own copy (the practical roof).
FLOOR_STYLE = {"color": "tab:red", "ls": ":"}
STREAM_STYLE = {"color": "tab:orange", "ls": "-."}
ROOF_STYLE = {"color": "tab:green", "ls": "--"}


def _rows(record: dict, names=None, kinds=None) -> list[dict]:
    if names is not None:
        by_name = {r["name"]: r for r in record["rows"]}
        return [by_name[n] for n in names]
    return [r for r in record["rows"] if kinds is None or r["kind"] in kinds]


def _kind_legend(ax, rows, extra=(), loc="lower right", **where):
    kinds = [k for k in COLORS if any(r["kind"] == k for r in rows)]
    handles = [Patch(color=COLORS[k], label=KIND_LABELS[k]) for k in kinds] + list(extra)
    ax.legend(handles=handles, loc=loc, fontsize=8, framealpha=0.9, **where)


def times_figure(record: dict, kinds=MAIN_KINDS, names=None):
    """Median time per entry (bars, p10-p90 whiskers) with the datasheet floor and the copy_ roof."""
    rows = _rows(record, names, kinds)[::-1]
    fig, ax = plt.subplots(figsize=(9, 0.4 * len(rows) + 1.6))
    med = np.array([r["timing"]["median_ms"] for r in rows])
    lo = med - np.array([r["timing"]["p10_ms"] for r in rows])
    hi = np.array([r["timing"]["p90_ms"] for r in rows]) - med
    ax.barh([r["name"] for r in rows], med, xerr=[lo.clip(0), hi.clip(0)], color=[COLORS[r["kind"]] for r in rows],
            capsize=2, error_kw={"elinewidth": 1})
    for i, r in enumerate(rows):
        ax.text(r["timing"]["p90_ms"], i, f"  {r['timing']['median_ms']:.2f}", va="center", fontsize=8)
    extra = []
    if record.get("roof_ms"):
        extra.append(ax.axvline(record["roof_ms"], color="tab:green", ls="--", label=f"roof: copy_ {record['roof_ms']:.2f} ms"))
    if record.get("floor_ms"):
        extra.append(ax.axvline(record["floor_ms"], color="tab:red", ls=":", label=f"floor: datasheet {record['floor_ms']:.2f} ms"))
    if record.get("stream_floor_ms"):
        extra.append(ax.axvline(record["stream_floor_ms"], **STREAM_STYLE,
                                label=f"measured floor: read_only + write_only {record['stream_floor_ms']:.2f} ms"))
    ax.set_xlabel("time per call, ms (median; whiskers p10-p90; lower is better)")
    ax.set_title(f"ELU on {tuple(record['problem']['shape'])} float32, {record['provenance']['gpu']}")
    ax.set_xlim(0, max(r["timing"]["p90_ms"] for r in rows) * 1.18)
    _kind_legend(ax, rows, extra)
    fig.tight_layout()
    return fig


def xcopy_figure(record: dict, names=None, kinds=MAIN_KINDS, title: str | None = None, max_x: float = 1.25):
    """The zoomed view: time over copy_'s, median with p10-p90 whiskers, labels clear of the whiskers. The x axis
    holds every line the legend names (copy_, and a floor near the entries); an entry slower than ``max_x`` is
    drawn at the right edge with an arrow and its value, so that it does not squeeze the rest."""
    rows = _rows(record, names, kinds)[::-1]
    roof = record["roof_ms"]
    fig, ax = plt.subplots(figsize=(9, 0.38 * len(rows) + 2.4))
    med, p10, p90 = (np.array([r["timing"][q] for r in rows]) / roof for q in ("median_ms", "p10_ms", "p90_ms"))
    lines = [ax.axvline(1.0, color="tab:green", ls="--", label="copy_ (the roof) = 1")]
    floors = (("floor_ms", FLOOR_STYLE, "datasheet floor"),
              ("stream_floor_ms", STREAM_STYLE, "measured floor (read_only + write_only)"))
    for key, style, label in floors:
        if record.get(key) and record[key] / roof > min(p10) - 0.05:
            x = record[key] / roof
            lines.append(ax.axvline(x, **style, label=f"{label}: {x:.3f}"))
    drawn = [line.get_xdata()[0] for line in lines]
    left = min(min(p10), *drawn) - 0.01
    right = max(p90[med <= max_x], default=1.0)
    right += (right - left) * 0.15
    for i, r in enumerate(rows):
        color = COLORS[r["kind"]]
        if med[i] > max_x:  # off scale: an arrow at the edge, with the value
            ax.plot(right, i, ">", color=color, clip_on=False)
            ax.text(right, i, f"{med[i]:.3f}, off scale  ", va="center", ha="right", fontsize=8)
            continue
        ax.plot([p10[i], p90[i]], [i, i], color=color, lw=2, alpha=0.5)
        ax.plot(med[i], i, "o", color=color)
        ax.text(p90[i], i, f"  {med[i]:.3f}", va="center", fontsize=8)
    ax.set_yticks(np.arange(len(rows)), [r["name"] for r in rows])
    lines.append(plt.Line2D([], [], color="k", marker="o", lw=2, alpha=0.5, label="median, p10-p90"))
    ax.set_xlim(left, right)
    ax.set_xlabel("time over copy_'s (median; lower is better)")
    ax.set_title(title or f"Against the roof: {record['provenance']['gpu']}")
    # Below the axes, so that it covers no entry, whatever their order.
    _kind_legend(ax, rows, lines, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def distribution_figure(record: dict, names=None, kinds=MAIN_KINDS):
    """Every timed sample, per entry: box (p25-p75, whiskers p5-p95) over the samples' strip plot."""
    rows = _rows(record, names, kinds)[::-1]
    fig, ax = plt.subplots(figsize=(9, 0.38 * len(rows) + 1.6))
    data = [np.concatenate([np.asarray(s) for s in r["timing"]["samples_ms"]]) for r in rows]
    ax.boxplot(data, vert=False, whis=(5, 95), showfliers=False, widths=0.6, medianprops={"color": "k"})
    rng = np.random.default_rng(0)
    for i, (r, d) in enumerate(zip(rows, data), start=1):
        ax.scatter(d, i + rng.uniform(-0.25, 0.25, d.size), s=2, alpha=0.35, color=COLORS[r["kind"]])
    ax.set_yticks(range(1, len(rows) + 1), [r["name"] for r in rows])
    extra = [Patch(facecolor="white", edgecolor="k", label="box p25-p75, whiskers p5-p95"),
             plt.Line2D([], [], color="k", marker=".", lw=0, label="one timed call")]
    ax.set_xlabel("time per call, ms (every sample of every round)")
    ax.set_title("Timing distributions: tails, not only medians")
    _kind_legend(ax, rows, extra)
    fig.tight_layout()
    return fig


def wave_sweep_figure(record: dict, names, blocks: dict[str, float], reference: str = "2_float4"):
    """Time over copy_'s against the grid size (log x), whiskers p10-p90, step 2 and the seed marked."""
    roof = record["roof_ms"]
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    by_name = {r["name"]: r for r in record["rows"]}
    xs = [blocks[n] for n in names]
    med = np.array([by_name[n]["timing"]["median_ms"] for n in names]) / roof
    p10 = np.array([by_name[n]["timing"]["p10_ms"] for n in names]) / roof
    p90 = np.array([by_name[n]["timing"]["p90_ms"] for n in names]) / roof
    ax.errorbar(xs, med, yerr=[med - p10, p90 - med], fmt="o-", color=COLORS["ablation"], capsize=3,
                label="grid-stride, 512 threads/block (median, p10-p90)")
    ref = by_name[reference]["timing"]["median_ms"] / roof
    ax.axhline(ref, color=COLORS["step"], ls="-.", label=f"{reference} (one vector per thread)")
    ax.axhline(1.0, color="tab:green", ls="--", label="copy_ = 1")
    if "3_grid_stride" in by_name and "3_grid_stride" in blocks:
        seed = by_name["3_grid_stride"]["timing"]["median_ms"] / roof
        ax.plot(blocks["3_grid_stride"], seed, "s", color=COLORS["step"], label="the seed's 1152 blocks")
    ax.set_xscale("log")
    ax.set_xlabel("blocks in the grid (log scale)")
    ax.set_ylabel("time over copy_'s")
    ax.set_title("Grid-stride: where the loop's cost appears")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


COUNTER_BARS = (("dram_pct_of_peak", "DRAM throughput, % of peak"),
                ("achieved_occupancy_pct", "achieved occupancy, % of warps"),
                ("l2_hit_pct", "L2 hit rate, %"))


def counters_figure(counters: dict, names):
    """Per kernel: DRAM throughput, occupancy and L2 hit rate from Nsight Compute (grouped bars)."""
    by_name = {r["name"]: r for r in counters["rows"]}
    rows = [by_name[n] for n in names if n in by_name]
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(rows) + 1.8))
    h = 0.8 / len(COUNTER_BARS)
    y = np.arange(len(rows))[::-1]
    for k, (key, label) in enumerate(COUNTER_BARS):
        vals = [r.get(key) or 0.0 for r in rows]
        ax.barh(y + (1 - k) * h, vals, height=h, label=label)
        for yi, v in zip(y, vals):
            ax.text(v, yi + (1 - k) * h, f" {v:.1f}", va="center", fontsize=7)
    ax.set_yticks(y, [r["name"] for r in rows])
    ax.set_xlim(0, 115)
    ax.set_xlabel("percent (Nsight Compute, --clock-control none, one full-size launch each)")
    ax.set_title("Hardware counters per kernel")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def near_zero_figure(record: dict, names):
    """Max relative error against float64 per decade of |x|: where exp(x) - 1 cancels."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for name in names:
        r = next(r for r in record["rows"] if r["name"] == name)
        decades = r["near_zero_rel_err"]
        ax.loglog([10 ** (float(k[2:]) + 0.5) for k in decades], list(decades.values()), marker="o", label=name)
    ax.set_xlabel("|x| (x < 0, one point per decade)")
    ax.set_ylabel("max relative error vs float64")
    ax.axhline(1e-4, color="gray", ls=":", label="rtol 1e-4")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


ROLE_COLORS = {"this study": "tab:blue", "PyTorch": "tab:gray", "peer": "tab:purple"}


def role(name: str) -> str:
    """Who wrote a row's kernel: this study (a step, an attempt, elu_backward), PyTorch, or a peer."""
    first = name.split()[0]
    if first in ("F.elu", "torch.compile(F.elu)", "aten.elu_backward", "copy_", "torch.add"):
        return "PyTorch"
    return "peer" if first in ("triton", "cub_transform") else "this study"


def roofs_figure(record: dict, panels: dict[str, list[str]]):
    """Each row's time over its own roof (its dtype's copy_, or torch.add for a backward row), one panel per
    group of ``panels`` (title -> row names), median with p10-p90 whiskers, the roof at 1."""
    by_name = {r["name"]: r for r in record["rows"]}
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, sum(0.36 * len(n) + 1.0 for n in panels.values()) + 1.2),
                             gridspec_kw={"height_ratios": [len(n) + 1.5 for n in panels.values()]}, squeeze=False)
    for ax, (title, names) in zip(axes[:, 0], panels.items()):
        rows = sorted((by_name[n] for n in names), key=lambda r: r["x_roof"], reverse=True)
        for i, r in enumerate(rows):
            own = by_name[r["roof"]]["timing"]["median_ms"]
            lo, hi = r["timing"]["p10_ms"] / own, r["timing"]["p90_ms"] / own
            color = ROLE_COLORS[role(r["name"])]
            ax.plot([lo, hi], [i, i], color=color, lw=2, alpha=0.5)
            ax.plot(r["x_roof"], i, "o", color=color)
            ax.text(hi, i, f"  {r['x_roof']:.3f}", va="center", fontsize=8)
        ax.set_yticks(np.arange(len(rows)), [r["name"] for r in rows])
        ax.axvline(1.0, **ROOF_STYLE)
        ax.set_xlim(min(0.95, min(r["x_roof"] for r in rows) - 0.02), max(r["x_roof"] for r in rows) * 1.08)
        ax.set_title(title, fontsize=10, loc="left")
        ax.grid(axis="x", alpha=0.3)
    handles = [Patch(color=c, label=k) for k, c in ROLE_COLORS.items()]
    handles += [plt.Line2D([], [], **ROOF_STYLE, label="own roof = 1 (the dtype's copy_, or torch.add)"),
                plt.Line2D([], [], color="k", marker="o", lw=2, alpha=0.5, label="median, p10-p90")]
    axes[-1, 0].set_xlabel("time over the row's own roof (median; lower is better)")
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8)
    fig.suptitle(f"Every dtype against its own roof: {record['provenance']['gpu']}", fontsize=11)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig
