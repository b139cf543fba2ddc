"""The sweep's two figures: effective bandwidth and time per call against the length, cold, warm and on the host.

Saved as results/<gpu>-sizes-bandwidth.png and results/<gpu>-sizes-time.png (``write_figures``).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from elu_study.core.record import figure_path, save_figure
from elu_study.jobs.sizes.analysis import ok, point, series
from elu_study.jobs.sizes.plan import BYTES_PER_ELEMENT, MODES, STREAMS, fmt_bytes

# The bandwidth figure draws the streams' sum only from here: below, it is two launches, not a bandwidth.
STREAM_SHOWN_FROM = 32 * 2**20
X_COPY_FROM = 64 * 2**20  # the bandwidth figure's linear x copy_ panel starts here (bytes moved)



def band(record: dict, name: str, mode: str):
    """An entry's lengths and its median, p10 and p90 times (ms) in one mode, for a line and its spread."""
    n, med = series(record, name, mode)
    return n, med, series(record, name, mode, "p10_ms")[1], series(record, name, mode, "p90_ms")[1]

def _style(record: dict):
    """A colour and line style per entry: steps in blues, peers in purples, baselines in greys/greens."""
    styles = {}
    steps = [e["name"] for e in record["entries"] if e["kind"] == "step"]
    peers = [e["name"] for e in record["entries"] if e["kind"] == "peer"]
    for i, n in enumerate(steps):
        styles[n] = {"color": plt.cm.Blues(0.35 + 0.65 * i / max(1, len(steps) - 1)), "ls": "-"}
    for i, n in enumerate(peers):
        styles[n] = {"color": ("tab:purple", "tab:pink", "tab:brown")[i % 3], "ls": "--"}
    fixed = {"F.elu": ("black", "-"), "torch.compile(F.elu)": ("tab:gray", "--"), "F.elu_": ("dimgray", ":"),
             "copy_": ("tab:green", "--")}
    for e in record["entries"]:
        if e["name"] in fixed:
            styles[e["name"]] = {"color": fixed[e["name"]][0], "ls": fixed[e["name"]][1]}
    return styles


def _lines(record):
    return [e["name"] for e in record["entries"] if e["name"] not in STREAMS]


def _regions(ax, record, xscale: float):
    """The L2 size and the launch-bound region, on an axis whose x is bytes moved (xscale = bytes per unit)."""
    reg = record["regimes"]
    handles = []
    if record.get("l2_bytes"):
        handles.append(ax.axvline(record["l2_bytes"] / xscale, color="tab:cyan", lw=1.2,
                                  label=f"L2 {fmt_bytes(record['l2_bytes'])}: x and y fit left of it"))
    if reg.get("launch_bound_max_n"):
        lo = BYTES_PER_ELEMENT * min(record["sizes"]) / xscale
        hi = BYTES_PER_ELEMENT * reg["launch_bound_max_n"] / xscale
        handles.append(ax.axvspan(lo, hi, color="khaki", alpha=0.35, lw=0,
                                  label=f"launch-bound: {reg['reference']}'s host time\n>= its warm GPU time"))
    return handles


def bandwidth_figure(record: dict):
    """Effective TB/s (8 bytes per element over the median) against bytes moved, cold and warm, p10-p90 bands."""
    styles = _style(record)
    fig = plt.figure(figsize=(21, 5.6))
    axes = [fig.add_subplot(1, 3, 1)]
    axes += [fig.add_subplot(1, 3, 2, sharey=axes[0]), fig.add_subplot(1, 3, 3)]
    for ax, mode in zip(axes, ("cold", "warm")):
        for name in _lines(record):
            n, med, p10, p90 = band(record, name, mode)
            if not n.size:
                continue
            b = BYTES_PER_ELEMENT * n
            tb = lambda ms: b / (ms * 1e-3) / 1e12  # noqa: E731
            ax.plot(b, tb(med), lw=1.4, label=name, **styles.get(name, {}))
            ax.fill_between(b, tb(p90), tb(p10), color=styles.get(name, {}).get("color"), alpha=0.12, lw=0)
        extra = _regions(ax, record, 1.0)
        if record.get("peak_bytes_per_s"):
            extra.append(ax.axhline(record["peak_bytes_per_s"] / 1e12, color="tab:red", ls=":",
                                    label=f"datasheet {record['peak_bytes_per_s'] / 1e12:.1f} TB/s (ceiling)"))
        sizes = np.array([n for n in record["sizes"] if BYTES_PER_ELEMENT * n >= STREAM_SHOWN_FROM], dtype=np.float64)
        stream = np.array([record["floors"][str(int(n))][f"stream_{mode}_ms"] or np.nan for n in sizes], dtype=np.float64)
        if np.isfinite(stream).any():
            ax.plot(BYTES_PER_ELEMENT * sizes, BYTES_PER_ELEMENT * sizes / (stream * 1e-3) / 1e12, color="tab:orange",
                    ls="-.", lw=2, label=f"measured ceiling: read_only + write_only (from {fmt_bytes(STREAM_SHOWN_FROM)})")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ticks = [2.0**k for k in range(13, 40, 3) if 2**k <= 2 * BYTES_PER_ELEMENT * max(record["sizes"])]
        ax.set_xticks(ticks, [fmt_bytes(t) for t in ticks])
        ax.set_xlabel("bytes moved per call (8 per element; log scale)")
        ax.set_title(f"{mode}: " + ("L2 flushed before each call" if mode == "cold" else "back to back, no flush"))
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("effective TB/s (median; bands p10-p90; higher is better)")
    _x_copy_panel(axes[2], record, styles)
    _legend(fig, axes[1], f"ELU across sizes (float32), {record['provenance']['gpu']}; copy_ is the roof")
    return fig


def _x_copy_panel(ax, record: dict, styles: dict) -> None:
    """Cold time over copy_'s median, linear, from X_COPY_FROM bytes moved: the differences the log axes hide."""
    big = [n for n in record["sizes"] if BYTES_PER_ELEMENT * n >= X_COPY_FROM and n & (n - 1) == 0
           and ok(point(record, "copy_", n))]
    if not big:
        return
    roof = np.array([point(record, "copy_", n)["cold"]["median_ms"] for n in big])
    curves = {}
    for name in _lines(record):
        pts = [point(record, name, n) for n in big]
        if not all(map(ok, pts)):
            continue
        curves[name] = [np.array([q["cold"][k] for q in pts]) / roof for k in ("median_ms", "p10_ms", "p90_ms")]
    stream = np.array([record["floors"][str(n)]["stream_cold_ms"] or np.nan for n in big]) / roof
    # an entry far above the rest (1_naive) would flatten them: it is named in the title instead
    top = sorted(float(np.nanmax(c[0])) for c in curves.values())
    off = {n: float(np.nanmax(c[0])) for n, c in curves.items()
           if len(top) > 2 and float(np.nanmax(c[0])) > 1 + 2 * (top[-2] - 1)}
    x = BYTES_PER_ELEMENT * np.array(big, dtype=np.float64)
    for name, (med, p10, p90) in curves.items():
        if name in off:
            continue
        ax.plot(x, med, lw=1.4, marker=".", **styles.get(name, {}))
        ax.fill_between(x, p10, p90, color=styles.get(name, {}).get("color"), alpha=0.12, lw=0)
    if np.isfinite(stream).any():
        ax.plot(x, stream, color="tab:orange", ls="-.", lw=2)
    shown = [float(np.nanmin(c[0])) for c in curves.values()]
    if np.isfinite(stream).any():
        shown += [float(np.nanmin(stream))]
    lo, hi = min(shown), max(float(np.nanmax(curves[n][0])) for n in curves if n not in off)  # the streams' line may leave it
    pad = max(0.1 * (hi - lo), 0.01)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_xscale("log", base=2)
    ticks = [float(v) for v in x if int(v) & (int(v) - 1) == 0]
    ax.set_xticks(ticks[::2], [fmt_bytes(t) for t in ticks[::2]])
    ax.set_xlabel("bytes moved per call (log scale)")
    ax.set_ylabel("cold time / copy_'s cold median (linear; lower is better)")
    ax.set_title(f"cold, x copy_ (powers of two from {fmt_bytes(X_COPY_FROM)} moved)"
                 + (("\noff the chart: " + ", ".join(f"{n} up to {v:.2f}x" for n, v in off.items())) if off else ""))
    ax.grid(alpha=0.3)


def _legend(fig, ax, title: str, right: float = 0.79):
    """The figure's title, and one legend for all panels in a margin on the right (inside the saved image)."""
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, right, 1))
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(right, 0.5), fontsize=8, framealpha=0.9)


def time_figure(record: dict):
    """Time per call against length (log-log): GPU time cold and warm, and the host's time per call."""
    styles = _style(record)
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.6), sharey=True)
    titles = {"cold": "GPU time, cold (L2 flushed)", "warm": "GPU time, warm (back to back)",
              "host": "host time per call (GPU held busy)"}
    sizes = np.array(record["sizes"], dtype=np.float64)
    lowest = min((p[m]["median_ms"] for p in record["points"] if ok(p) for m in MODES), default=1e-3)
    for ax, mode in zip(axes, MODES):
        for name in _lines(record):
            n, med, p10, p90 = band(record, name, mode)
            if not n.size:
                continue
            ax.plot(n, 1e3 * med, lw=1.4, label=name, **styles.get(name, {}))
            ax.fill_between(n, 1e3 * p10, 1e3 * p90, color=styles.get(name, {}).get("color"), alpha=0.12, lw=0)
        _regions(ax, record, BYTES_PER_ELEMENT)
        if mode != "host":
            if record.get("peak_bytes_per_s"):
                ax.plot(sizes, 1e3 * np.array([record["floors"][str(int(n))]["datasheet_ms"] for n in sizes]),
                        color="tab:red", ls=":", label="datasheet floor (bytes / datasheet TB/s)")
            stream = np.array([record["floors"][str(int(n))][f"stream_{mode}_ms"] or np.nan for n in sizes],
                              dtype=np.float64)
            if np.isfinite(stream).any():
                ax.plot(sizes, 1e3 * stream, color="tab:orange", ls="-.", lw=2,
                        label="measured floor: read_only + write_only")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("elements (log 2)")
        ax.set_ylim(bottom=0.5e3 * lowest)  # the datasheet floor of a few KiB is nanoseconds: off the chart
        ax.set_title(titles[mode])
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("µs per call (median; bands p10-p90; lower is better)")
    _legend(fig, axes[0], f"Time per call across sizes (float32), {record['provenance']['gpu']}; copy_ is the roof",
            right=0.83)
    return fig


FIGURES = {"bandwidth": bandwidth_figure, "time": time_figure}


def figures(record: dict, only: str | None = None) -> dict:
    """name -> matplotlib figure, for both figures (or just ``only``)."""
    makers = FIGURES if only is None else {only: FIGURES[only]}
    return {name: make(record) for name, make in makers.items()}


def write_figures(record: dict, results_dir: Path | None = None) -> list[Path]:
    """Save both figures as results/<gpu>-sizes-<name>.png (or under ``results_dir``)."""
    gpu = record["provenance"]["gpu"]
    return [save_figure(fig, figure_path(gpu, f"sizes-{name}", results_dir)) for name, fig in figures(record).items()]
