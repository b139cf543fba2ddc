"""The sweep's figures (results/<gpu>-sizes-*.png): bandwidth and time per call against length, cold, warm, host."""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from elu_study.core.record import figure_path, save_figure
from elu_study.jobs.sizes.analysis import ok, series, stream_bound_from
from elu_study.jobs.sizes.plan import BYTES_PER_ELEMENT, MODES, STREAMS, fmt_bytes


def _style(record: dict) -> dict:
    """A colour and line per entry: steps blue, peers purple, baselines grey/green, modules dash-dotted (drop-in red)."""
    steps, peers = ([e["name"] for e in record["entries"] if e["kind"] == k] for k in ("step", "peer"))
    styles = {n: {"color": c, "ls": "-"} for n, c in zip(steps, plt.cm.Blues(np.linspace(0.35, 1.0, len(steps))))}
    styles |= {n: {"color": ("tab:purple", "tab:pink", "tab:brown")[i % 3], "ls": "--"} for i, n in enumerate(peers)}
    fixed = {"F.elu": ("black", "-"), "torch.compile(F.elu)": ("tab:gray", "--"), "F.elu_": ("dimgray", ":"),
             "copy_": ("tab:green", "--"), "nn.ELU": ("black", "-."), "elu_study.ELU": ("tab:red", "-.")}
    return styles | {n: {"color": c, "ls": ls} for n, (c, ls) in fixed.items()}


def _floor(record: dict, key: str, sizes) -> np.ndarray:
    """One of the record's floors (ms) at these lengths, NaN where it has none."""
    return np.array([record["floors"][str(int(n))][key] or np.nan for n in sizes], dtype=np.float64)


def _stream(record: dict, mode: str) -> tuple[np.ndarray, np.ndarray, str] | None:
    """The stream halves' sum in ``mode`` where it bounds every row (``stream_bound_from``): lengths, ms, label."""
    if (start := stream_bound_from(record, mode)) is None:
        return None
    ns = np.array([n for n in record["sizes"] if n >= start], dtype=np.float64)
    return ns, _floor(record, f"stream_{mode}_ms", ns), "read_only + write_only, where no row beats it"


def _panel(ax, record: dict, mode: str, xscale: float, y, title: str, xlabel: str) -> None:
    """One log-log panel (x: bytes / ``xscale``): each entry's median and p10-p90 band, the L2 and launch-bound."""
    styles, x, reg = _style(record), lambda n: BYTES_PER_ELEMENT * n / xscale, record["regimes"]
    for name in [e["name"] for e in record["entries"] if e["name"] not in STREAMS]:
        n, med = series(record, name, mode)
        if n.size:
            lo, hi = (series(record, name, mode, q)[1] for q in ("p10_ms", "p90_ms"))
            ax.plot(x(n), y(n, med), lw=1.4, label=name, **styles.get(name, {}))
            ax.fill_between(x(n), y(n, lo), y(n, hi), color=styles.get(name, {}).get("color"), alpha=0.12, lw=0)
    if l2 := record.get("l2_bytes"):
        ax.axvline(l2 / xscale, color="tab:cyan", lw=1.2, label=f"L2 size, {fmt_bytes(l2)}")
    if lb := reg.get("launch_bound_max_n"):
        ax.axvspan(x(min(record["sizes"])), x(lb), color="khaki", alpha=0.35, lw=0,
                   label=f"launch-bound: {reg['reference']} host >= warm")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set(title=title, xlabel=xlabel)
    ax.grid(alpha=0.3, which="both")


def bandwidth_figure(record: dict):
    """Effective TB/s (8 bytes per element over the median) against bytes moved, cold and warm, p10-p90 bands."""
    fig, axes = plt.subplots(1, 2, figsize=(15, 5.6), sharey=True)
    tbps = lambda n, ms: BYTES_PER_ELEMENT * n / (ms * 1e-3) / 1e12
    titles = {"cold": "cold: L2 flushed before each call", "warm": "warm: back to back, no flush"}
    for ax, mode in zip(axes, titles):
        _panel(ax, record, mode, 1.0, tbps, titles[mode], "bytes moved per call (log)")
        if record.get("peak_bytes_per_s"):
            ax.axhline(record["peak_bytes_per_s"] / 1e12, color="tab:red", ls=":",
                       label=f"datasheet {record['peak_bytes_per_s'] / 1e12:.1f} TB/s (ceiling)")
        if stream := _stream(record, mode):
            ax.plot(BYTES_PER_ELEMENT * stream[0], tbps(*stream[:2]), color="tab:orange", ls="-.", lw=2, label=stream[2])
        ticks = [2.0**k for k in range(13, 40, 3) if 2**k <= 2 * BYTES_PER_ELEMENT * max(record["sizes"])]
        ax.set_xticks(ticks, [fmt_bytes(t) for t in ticks])
    axes[0].set_ylabel("TB/s (median, p10-p90 band)")
    _legend(fig, axes[1], f"ELU across sizes, float32, {record['provenance']['gpu']}", right=0.8)
    return fig


def _legend(fig, ax, title: str, right: float = 0.79):
    """The figure's title, and one legend for all panels in a margin on the right (inside the saved image)."""
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, right, 1))
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(right, 0.5), fontsize=8, framealpha=0.9)


def time_figure(record: dict):
    """Time per call against length (log-log): GPU time cold and warm, and the host's time per call."""
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.6), sharey=True)
    titles = {"cold": "GPU time, cold (L2 flushed)", "warm": "GPU time, warm (no flush)", "host": "host time per call"}
    ns = np.array(record["sizes"], dtype=np.float64)
    lowest = min((p[m]["median_ms"] for p in record["points"] if ok(p) for m in MODES), default=1e-3)
    for ax, mode in zip(axes, MODES):
        _panel(ax, record, mode, BYTES_PER_ELEMENT, lambda n, ms: 1e3 * ms, titles[mode], "elements (log 2)")
        if mode != "host" and record.get("peak_bytes_per_s"):
            ax.plot(ns, 1e3 * _floor(record, "datasheet_ms", ns), color="tab:red", ls=":", label="datasheet floor")
        if mode != "host" and (stream := _stream(record, mode)):
            ax.plot(stream[0], 1e3 * stream[1], color="tab:orange", ls="-.", lw=2, label=stream[2])
        ax.set_ylim(bottom=0.5e3 * lowest)  # the datasheet floor of a few KiB is nanoseconds: off the chart
    axes[0].set_ylabel("µs per call (median, p10-p90)")
    _legend(fig, axes[0], f"Time per call, float32, {record['provenance']['gpu']}", right=0.83)
    return fig


FIGURES = {"bandwidth": bandwidth_figure, "time": time_figure}


def write_figures(record: dict, results_dir: Path | None = None) -> list[Path]:
    """Save both figures as results/<gpu>-sizes-<name>.png (or under ``results_dir``)."""
    gpu = record["provenance"]["gpu"]
    return [save_figure(make(record), figure_path(gpu, f"sizes-{name}", results_dir)) for name, make in FIGURES.items()]
