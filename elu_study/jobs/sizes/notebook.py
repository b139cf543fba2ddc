"""Notebook 09's view of the sweep: which record it shows, the predictions beside what was measured, the
figures, the table and the words (each a cell's value or printout). No GPU needed."""

from __future__ import annotations

import matplotlib.pyplot as plt
from IPython.display import Markdown

from elu_study.core.tables import markdown
from elu_study.jobs.sizes.analysis import FORMATS, frame, host_median_us, ok, point, small_sizes, us
from elu_study.jobs.sizes.figures import figures
from elu_study.jobs.sizes.plan import STREAMS, fmt_bytes, fmt_n
from elu_study.jobs.sizes.readme import summary_lines


def check_inputs(record: dict, empty_kernel_us: tuple[float, float], host_us: float, l2_mib: float) -> None:
    """The predictions' inputs (written before the sweep) beside what the sweep measured for each."""
    ref = record["regimes"]["reference"]
    n0 = record["sizes"][0]
    warm = [us(record, e["name"], n0, "warm") for e in record["entries"]
            if e["name"] not in STREAMS and ok(point(record, e["name"], n0))]
    small = small_sizes(record)
    print("Inputs of the predictions (assumed) against the sweep (measured):")
    print(f"- an almost empty kernel's GPU time: assumed {empty_kernel_us[0]:g}-{empty_kernel_us[1]:g} µs; measured "
          f"{min(warm):.2f}-{max(warm):.2f} µs (warm medians of the {len(warm)} entries at {fmt_n(n0)} elements)")
    print(f"- {ref}'s host cost per call: assumed ~{host_us:g} µs; measured {host_median_us(record, ref, small):.1f} µs "
          f"(median over the launch-bound lengths {fmt_n(small[0])} to {fmt_n(small[-1])})")
    print(f"- the L2: assumed {l2_mib:g} MiB; the device reports {fmt_bytes(record['l2_bytes'])}")


QUANTITIES = {
    "launch_bound_max_n": "the largest length at which F.elu's host time per call >= its warm GPU time (elements)",
    "l2_warm_end_n": "the smallest length from which F.elu's cold time is within 10 % of its warm time (elements)",
    "host_ratio": "host time per call over F.elu's, median over the launch-bound lengths",
    "x_copy_top": "cold GPU time at the largest length over copy_'s",
}


def measured(record: dict, quantity: str, entry: str | None = None) -> float | None:
    """One number of the sweep that a prediction is about (see QUANTITIES)."""
    reg = record["regimes"]
    if quantity == "launch_bound_max_n":
        return reg["launch_bound_max_n"]
    if quantity == "l2_warm_end_n":
        fit = reg["l2_fit_max_n"] or 0
        later = [int(n) for n, g in reg["warm_gain"].items() if int(n) > fit and g < 1.1]
        return min(later) if later else None
    if quantity == "host_ratio":
        small = small_sizes(record)
        return host_median_us(record, entry, small) / host_median_us(record, reg["reference"], small)
    if quantity == "x_copy_top":
        top = record["sizes"][-1]
        return point(record, entry, top)["cold"]["median_ms"] / point(record, "copy_", top)["cold"]["median_ms"]
    raise KeyError(f"unknown quantity {quantity!r}; one of {', '.join(QUANTITIES)}")


def check_prediction(record: dict, quantity: str, bounds: tuple[float, float], written: str, entry: str | None = None):
    """A prediction written before the sweep ran, beside what it measured, and whether it held."""
    lo, hi = bounds
    value = measured(record, quantity, entry)
    sizes_ = quantity.endswith("_n")
    show = (lambda v: fmt_n(int(v))) if sizes_ else (lambda v: f"{v:.3g}")  # noqa: E731
    subject = f"{entry}: " if entry else ""
    print(f"Prediction (written {written}): {subject}{QUANTITIES[quantity]} from {show(lo)} to {show(hi)}")
    if value is None:
        print("Measured: no such length in the sweep  ->  MISSED")
        return
    held = "HELD" if lo <= value <= hi else ("MISSED: below" if value < lo else "MISSED: above")
    print(f"Measured: {fmt_n(int(value)) if sizes_ else f'{value:.3f}'}  ->  {held}")


def table(record: dict, sizes=None, entries=None, columns=None):
    """The sweep as a Markdown table (a notebook cell's value)."""

    df = frame(record, sizes, entries)
    if columns is not None:
        df = df[[c for c in ("n", "moved", *columns) if c in df.columns]]
    return Markdown(markdown(df, FORMATS))


def figure(record: dict, name: str):
    """One of the two figures, closed so that it is shown once, as the cell's value."""
    fig = figures(record, only=name)[name]
    plt.close(fig)  # shown once, as the cell's value
    return fig


def prose(record: dict):
    """The sweep in words (the README's sizes block), as Markdown."""

    return Markdown("\n".join(summary_lines(record)))
