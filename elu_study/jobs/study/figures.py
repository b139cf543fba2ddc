"""The study's figures; labels of six words or more are in ``templates/study/labels.md.j2`` (``label``)."""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch

from elu_study.core import text
from elu_study.core.record import closed

COLORS = {"step": "tab:blue", "baseline": "tab:gray", "peer": "tab:purple", "ablation": "tab:olive"}
KIND_LABELS = {"step": "step", "baseline": "baseline (PyTorch, copies, streams)", "peer": "peer (Triton, CUB)",
               "ablation": "ablation (one change)"}
ROOF_STYLE = {"color": "tab:green", "ls": "--"}
SPREAD = {"color": "k", "marker": "o", "lw": 2, "alpha": 0.5, "label": "median, p10-p90"}
# The zoomed figures' window, in copy_'s times: a row whose median is outside it is marked at the axis's edge.
NEAR = (0.8, 1.25)


def label(key: str, **numbers) -> str:
    return text.render("study/labels.md.j2", key=key, **numbers)


def _rows(record: dict, names) -> list[dict]:  # those the record holds, bottom to top as drawn
    by_name = {r["name"]: r for r in record["rows"]}
    return [by_name[n] for n in names if n in by_name][::-1]


def _whisker(ax, i, lo, median, hi, color):
    ax.plot([lo, hi], [i, i], color=color, lw=2, alpha=0.5)
    ax.plot(median, i, "o", color=color)
    ax.text(hi, i, f"  {median:.3f}", va="center", fontsize=8)


def _inside(rows) -> np.ndarray:
    """Whether each row's median is within NEAR times copy_'s (every row, where none is or no copy_)."""
    inside = np.array([r.get("x_copy") is None or NEAR[0] <= r["x_copy"] <= NEAR[1] for r in rows])
    return inside if inside.any() else ~inside


def _off_scale(ax, y, value, x, unit=""):  # an arrow at the axis's edge x with the row's median (or its numbers)
    right = x >= np.mean(ax.get_xlim())
    ax.plot(x, y, ">" if right else "<", color="k", clip_on=False, zorder=5)
    shown = value if isinstance(value, str) else f"{value:.3f}"
    ax.text(x, y, f"  {shown}{unit}, off scale  ", va="center", ha="right" if right else "left", fontsize=8,
            bbox={"fc": "white", "ec": "none", "alpha": 0.8, "pad": 1})


def _legend(ax, rows, extra=(), loc="lower right", **where):  # the kind legend (and extra handles), laid out
    handles = [Patch(color=COLORS[k], label=KIND_LABELS[k]) for k in COLORS if any(r["kind"] == k for r in rows)]
    ax.legend(handles=handles + list(extra), loc=loc, framealpha=0.9, fontsize=8, **where)
    return closed(ax.figure)


def xcopy_figure(record: dict, names, title: str | None = None):
    """x copy_, median and p10-p90, with the floors; an entry outside NEAR is an arrow at the edge."""
    rows, roof = _rows(record, names), record["roof_ms"]
    fig, ax = plt.subplots(figsize=(9, 0.38 * len(rows) + 2.4))
    lines = [ax.axvline(1.0, **ROOF_STYLE, label="copy_ (the roof) = 1")]
    peak_tbps = (record.get("peak_bytes_per_s") or 0) / 1e12
    for key, color, ls, name in (("floor_ms", "tab:red", ":", f"datasheet floor ({peak_tbps:.1f} TB/s)"),
                                 ("stream_floor_ms", "tab:orange", "-.", "measured floor (read_only + write_only)")):
        if record.get(key):  # annotate() derives both on load; None without a peak or the stream halves
            lines.append(ax.axvline(record[key] / roof, color=color, ls=ls, label=f"{name}: {record[key] / roof:.3f}"))
    med, p10, p90 = (np.array([r["timing"][q] for r in rows]) / roof for q in ("median_ms", "p10_ms", "p90_ms"))
    inside, refs = _inside(rows), [line.get_xdata()[0] for line in lines]
    left, right = min(p10[inside].min(), *refs), max(p90[inside].max(), *refs)
    left, right = left - (right - left) * 0.03, right + (right - left) * 0.15
    ax.set_xlim(left, right)
    for i, r in enumerate(rows):
        if inside[i]:
            _whisker(ax, i, p10[i], med[i], p90[i], COLORS[r["kind"]])
        else:
            _off_scale(ax, i, med[i], right if med[i] > right else left)
    ax.set_yticks(np.arange(len(rows)), [r["name"] for r in rows])
    ax.grid(axis="x", alpha=0.3)
    ax.set(xlabel=label("xcopy_x"), title=title or f"Against the roof: {record['provenance']['gpu']}")
    return _legend(ax, rows, [*lines, plt.Line2D([], [], **SPREAD)], loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)


def distribution_figure(record: dict, names):
    """Every timed sample per entry, a box over a strip plot; an entry outside NEAR is an arrow at the edge."""
    rows, rng = _rows(record, names), np.random.default_rng(0)
    fig, ax = plt.subplots(figsize=(9, 0.38 * len(rows) + 1.6))
    data = [np.concatenate([np.asarray(s) for s in r["timing"]["samples_ms"]]) for r in rows]
    ax.boxplot(data, positions=range(len(rows)), vert=False, whis=(5, 95), showfliers=False, widths=0.6,
               medianprops={"color": "k"})
    for i, (r, d) in enumerate(zip(rows, data)):
        ax.scatter(d, i + rng.uniform(-0.25, 0.25, d.size), s=2, alpha=0.35, color=COLORS[r["kind"]])
    inside = _inside(rows)
    near = np.concatenate([d for d, keep in zip(data, inside) if keep])
    pad = (near.max() - near.min()) * 0.03
    ax.set_xlim(near.min() - pad, near.max() + pad * 5)
    for i in np.flatnonzero(~inside):
        med = rows[i]["timing"]["median_ms"]
        _off_scale(ax, i, med, ax.get_xlim()[int(med > near.max())], unit=" ms (median)")
    ax.set_yticks(range(len(rows)), [r["name"] for r in rows])
    ax.set(xlabel=label("samples_x"), title=label("samples_title"))
    return _legend(ax, rows, [Patch(facecolor="white", edgecolor="k", label="box p25-p75, whiskers p5-p95"),
                            plt.Line2D([], [], color="k", marker=".", lw=0, label="one timed call")])


COUNTER_BARS = (("dram_pct_of_peak", "DRAM throughput, % of peak"),
                ("achieved_occupancy_pct", "achieved occupancy, % of warps"), ("l2_hit_pct", "L2 hit rate, %"))


def bars(ax, names, series: dict, fontsize: float = 8) -> None:
    """Horizontal bars, a group per name from the top, a bar per ``series`` item (label -> (values, texts, colour))."""
    h = 0.8 / len(series)
    for k, (name, (values, texts, color)) in enumerate(series.items()):
        y = np.arange(len(names)) + (k - (len(series) - 1) / 2) * h
        ax.barh(y, values, height=h, color=color, label=name)
        for yi, v, t in zip(y, values, texts):
            ax.text(v, yi, f" {t}", va="center", fontsize=fontsize)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()


def counters_figure(counters: dict):  # per kernel: DRAM throughput, occupancy and L2 hit rate (ncu)
    rows = counters["rows"]
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(rows) + 1.8))
    values = {name: [r.get(key) or 0.0 for r in rows] for key, name in COUNTER_BARS}
    bars(ax, [r["name"] for r in rows], {k: (v, [f"{x:.1f}" for x in v], None) for k, v in values.items()}, 7)
    day = counters.get("provenance", {}).get("date_utc", "")[:10]
    title = "Hardware counters per kernel" + (f" (profiled on {day})" if day else "")
    ax.set(xlim=(0, 115), xlabel=label("counters_x"), title=title)
    ax.legend(fontsize=8, loc="lower right")
    return closed(fig)


ROLE_COLORS = {"this study": "tab:blue", "PyTorch": "tab:gray", "peer": "tab:purple"}
SIDE_BY_SIDE_MHZ = 8  # rows at one clock in one regime: each drawn this far from the next, so its bar is its own


def role(name: str) -> str:
    """Who wrote a row's kernel: this study (a step, an attempt, elu_backward), PyTorch, or a peer."""
    first = name.split()[0]
    pytorch = first in ("F.elu", "torch.compile(F.elu)", "aten.elu_backward", "copy_", "torch.add")
    return "PyTorch" if pytorch else "peer" if first in ("triton", "cub_transform") else "this study"


def regimes(row: dict) -> list[tuple[float, float, float, bool]]:
    """A row's (p10, median, p90) over its roof's median (``derived``'s x_roof), short then sustained where it was
    timed so, and whether each is the sustained one."""
    pairs = [(row["timing"], row["x_roof"], False)]
    if row.get("x_roof_sustained") is not None:
        pairs.append((row["timing"]["sustained"], row["x_roof_sustained"], True))
    return [(t["p10_ms"] * x / t["median_ms"], x, t["p90_ms"] * x / t["median_ms"], held) for t, x, held in pairs]


def roofs_figure(record: dict, panels: dict[str, list[str]], title: str | None = None, one_scale: bool = False):
    """Each row's time over its own roof (at 1), short (open) and sustained (filled) with their p10-p90, a panel per
    ``panels`` item (title -> row names), one x scale or not. The scale spans the rows within ``NEAR`` of their roof
    (the differences the tables argue about); a row beyond it is an arrow at the edge with its numbers."""
    by_name = {r["name"]: r for r in record["rows"]}
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, sum(0.42 * len(n) + 1.0 for n in panels.values()) + 1.4),
                             gridspec_kw={"height_ratios": [len(n) + 1.5 for n in panels.values()]}, squeeze=False,
                             sharex=one_scale)
    shown = [by_name[n] for names in panels.values() for n in names]
    marks = {r["name"]: regimes(r) for r in shown}

    def window(rows) -> tuple[float, float]:
        near = [v for r in rows for lo, x, hi, _ in marks[r["name"]] if NEAR[0] <= x <= NEAR[1] for v in (lo, x, hi)]
        return min(0.95, min(near) - 0.01), max(near) + 0.03 * (max(near) - min(0.95, min(near)))

    for ax, (panel, names) in zip(axes[:, 0], panels.items()):
        rows = sorted((by_name[n] for n in names), key=lambda r: r["x_roof"], reverse=True)
        left, right = window(shown if one_scale else rows)
        ax.set_xlim(left, right)
        for i, r in enumerate(rows):
            color, values = ROLE_COLORS[role(r["name"])], marks[r["name"]]
            numbers = " / ".join(f"{x:.3f}" for _, x, _, _ in values)
            if any(x > right for _, x, _, _ in values):
                _off_scale(ax, i, numbers, right)
                continue
            for lo, x, hi, held in values:
                y = i + (-0.17 if held else 0.17) * (len(values) > 1)
                ax.plot([lo, min(hi, right)], [y, y], color=color, lw=2, alpha=0.5)
                ax.plot(x, y, "o", color=color, mfc=color if held else "white")
            ax.text(min(max(hi for _, _, hi, _ in values), right), i, f"  {numbers}", va="center", fontsize=8)
        ax.set(yticks=np.arange(len(rows)), yticklabels=[r["name"] for r in rows], ylim=(-0.7, len(rows) - 0.3))
        ax.axvline(1.0, **ROOF_STYLE)
        ax.set_title(panel, fontsize=10, loc="left")
        ax.grid(axis="x", alpha=0.3)
    roles = {role(r["name"]) for r in shown}
    handles = [Patch(color=c, label=k) for k, c in ROLE_COLORS.items() if k in roles]
    handles += [plt.Line2D([], [], **ROOF_STYLE, label=label("own_roof")),
                plt.Line2D([], [], color="k", marker="o", mfc="white", lw=2, alpha=0.6, label=label("roofs_short"))]
    if any(len(v) > 1 for v in marks.values()):
        handles.append(plt.Line2D([], [], color="k", marker="o", lw=2, alpha=0.6, label=label("roofs_sustained")))
    axes[-1, 0].set_xlabel(label("own_roof_x"))
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8)
    fig.suptitle(title or label("roofs_title", gpu=record["provenance"]["gpu"]), fontsize=11)
    return closed(fig, rect=(0, 0.07, 1, 1))


def regimes_figure(gpu: str, points: dict[str, tuple[tuple, tuple]], top: float = 1.2):
    """x own roof against SM clock, short to sustained (``front.regime_points``); rows above ``top``: listed only."""
    fig, ax = plt.subplots(figsize=(9, 5.5))
    shown = {n: p for n, p in points.items() if max(p[0][1], p[1][1]) <= top}
    same: dict[tuple, list[str]] = {}  # rows at one clock in one regime: drawn side by side, so each bar is its own
    for name, pair in shown.items():
        for k in (0, 1):
            same.setdefault((k, pair[k][0]), []).append(name)
    shown = {n: tuple((p[k][0] + SIDE_BY_SIDE_MHZ * (same[(k, p[k][0])].index(n) - (len(same[(k, p[k][0])]) - 1) / 2),
                       *p[k][1:]) for k in (0, 1)) for n, p in shown.items()}
    for name, ((x0, y0, lo0, hi0), (x1, y1, lo1, hi1)) in shown.items():
        color = ROLE_COLORS[role(name)]
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops={"arrowstyle": "->", "color": color, "alpha": 0.5})
        ax.errorbar([x0], [y0], yerr=[[y0 - lo0], [hi0 - y0]], fmt="o", color=color, mfc="white", capsize=2)
        ax.errorbar([x1], [y1], yerr=[[y1 - lo1], [hi1 - y1]], fmt="o", color=color, capsize=2)
    labels: list[tuple[float, float, list[str]]] = []  # rows that end where another does share one label
    for name, (_, (x1, y1, *_)) in sorted(shown.items(), key=lambda kv: kv[1][1][:2]):
        near = next((g for g in labels if abs(g[0] - x1) <= 20 and abs(g[1] - y1) <= 0.004), None)
        near[2].append(name) if near else labels.append((x1, y1, [name]))
    for x1, y1, names in labels:
        ax.annotate(", ".join(names), (x1, y1), xytext=(6, 0), textcoords="offset points", fontsize=7, va="center")
    if hidden := [n for n in points if n not in shown]:
        ax.text(0.01, 0.01, label("regimes_hidden", rows=", ".join(
            f"{n} ({points[n][0][1]:.2f} to {points[n][1][1]:.2f})" for n in hidden)), transform=ax.transAxes,
            fontsize=7, va="bottom")
    ax.axhline(1.0, **ROOF_STYLE)
    handles = [plt.Line2D([], [], color="k", marker="o", mfc="white", ls="", label=label("regime_short")),
               plt.Line2D([], [], color="k", marker="o", ls="", label=label("regime_sustained")),
               plt.Line2D([], [], **ROOF_STYLE, label=label("own_roof"))]
    handles += [Patch(color=c, label=k) for k, c in ROLE_COLORS.items() if k in {role(n) for n in shown}]
    ax.legend(handles=handles, fontsize=8, loc="upper right")
    ax.set(xlabel=label("regime_clock", step=SIDE_BY_SIDE_MHZ), ylabel=label("own_roof_x"),
           title=label("regimes_title", gpu=gpu))
    ax.grid(alpha=0.3)
    return closed(fig)
