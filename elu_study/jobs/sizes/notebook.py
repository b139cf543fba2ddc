"""Notebook 09's view of the sweep, each a cell's value: the predictions graded, the figures, one row per entry, the
findings; the full sweep is ``table(record)``. No GPU needed."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from elu_study.core import text
from elu_study.jobs.sizes import analysis as an
from elu_study.jobs.sizes.analysis import (FORMATS, custom, first_call, frame, host_median_us, names, ok, point,
                                           small_sizes, us)
from elu_study.jobs.sizes.figures import FIGURES
from elu_study.jobs.sizes.plan import STREAMS, fmt_n
from elu_study.jobs.sizes.readme import numbers


def measured(record: dict, quantity: str, entry: str | None = None) -> float | None:
    """One number of the sweep that a prediction is about (the quantities graded.md.j2 names)."""
    if quantity.startswith("first_call_"):  # entry: the first call's length, or "main"
        return (first_call(record, entry) or {}).get(quantity.removeprefix("first_call_"))
    reg, top, small, ref = record["regimes"], record["sizes"][-1], small_sizes(record), record["regimes"]["reference"]
    later = [int(n) for n, g in reg["warm_gain"].items() if int(n) > (reg["l2_fit_max_n"] or 0) and g < 1.1]
    return {"launch_bound_max_n": lambda: reg["launch_bound_max_n"], "l2_warm_end_n": lambda: min(later, default=None),
            "host_ratio": lambda: host_median_us(record, entry, small) / host_median_us(record, ref, small),
            "x_copy_top": lambda: us(record, entry, top, "cold") / us(record, "copy_", top, "cold")}[quantity]()


# Notebook 09's predictions, (number, quantity, entry or None, (low, high)): 1 and 2, written before the sweep's first
# H200 run, are the notebook's prediction, graded there; 3 and 4 were written with them, 5 at commit dd6e3b1, before
# the first run with first-call processes.
PREDICTIONS = (
    (1, "launch_bound_max_n", None, (2**20, 2**23)),
    (2, "l2_warm_end_n", None, (2**23, 2**25)),
    *((3, "host_ratio", entry, bounds) for entry, bounds in [
        ("2_float4", (0.7, 2.0)), ("cub_transform", (0.7, 2.0)), ("triton", (1.5, 8.0)),
        ("torch.compile(F.elu)", (1.5, 10.0))]),
    *((4, "x_copy_top", entry, bounds) for entry, bounds in [
        ("F.elu", (0.98, 1.03)), ("2_float4", (0.98, 1.03)), ("triton", (0.98, 1.05)), ("cub_transform", (1.0, 1.2))]),
    *((5, "first_call_tile", first, bounds) for first, bounds in [(256, (256, 256)), (1024, (1024, 1024)),
                                                                  ("main", (1536, 3072))]),
    *((5, "first_call_x_copy", first, bounds) for first, bounds in [(256, (1.5, 3.0)), (1024, (1.03, 1.2)),
                                                                    ("main", (0.98, 1.02))]),
)
PREDICTION = PREDICTIONS[:2]


def grade(record: dict, predictions=PREDICTION, written: str = "before the sweep's first H200 run") -> text.Text:
    """Predictions ``(number, quantity, entry or None, (low, high))`` graded against the sweep in one table (HELD
    where the measured value lies in the range), and when they were written. For CUB's first call (``first_call_*``)
    the entry is that call's length, or "main"."""
    ref = record["regimes"]["reference"]
    rows = [{"number": number, "quantity": quantity, "entry": entry or ref, "lo": lo, "hi": hi,
             "value": measured(record, quantity, entry), "length": quantity.endswith("_n"),
             "count": quantity.endswith("_tile"), "history": quantity.startswith("first_call")}
            for number, quantity, entry, (lo, hi) in predictions]
    return text.show("sizes/graded.md.j2", rows=rows, written=written, ref=ref)


def table(record: dict, sizes=None, entries=None) -> text.Text:
    """The sweep as a table: every entry at every length unless ``sizes``/``entries`` say which."""
    return text.Text(text.table(frame(record, sizes, entries), FORMATS))


def figure(record: dict, name: str):
    """One of the two figures, closed so that it is shown once, as the cell's value."""
    fig = FIGURES[name](record)
    plt.close(fig)
    return fig


def warm_us(record: dict, entry: str, n: int) -> str:
    """The median warm time, µs, or "failed"."""
    p = point(record, entry, n)
    return f"{1e3 * p['warm']['median_ms']:.2f}" if ok(p) and p.get("warm") else "failed"


def entry_table(record: dict) -> text.Text:
    """One row per entry (the stream halves aside), sorted by x copy_ at the largest length: host cost, warm GPU
    time (median) at the smallest length and the L2's edge, loop wins, x copy_ (main study's too), growth."""
    v = numbers(record)
    n0, fit, top, kernels = record["sizes"][0], v["fit"], fmt_n(v["top"]), custom(record)
    rows = [{"entry": c, "host µs": v["host"][c], f"warm µs, {fmt_n(n0)}": warm_us(record, c, n0),
             **({f"warm µs, {fmt_n(fit)} (L2)": warm_us(record, c, fit)} if fit in record["sizes"] else {}),
             f"loop wins of {len(v['small'])}": str(v["wins"][c]) if c in kernels else "",
             f"x copy_, {top}": v["x_top"][c], "x copy_, main study": v["main_x"].get(c, float("nan")),
             f"host growth, {top}": v["grow"][c] if v["grow"] else float("nan")}
            for c in names(record) if c not in STREAMS]
    df = pd.DataFrame(rows).set_index("entry").sort_values(f"x copy_, {top}")
    return text.Text(text.table(df, {"host µs": "{:.1f}", f"x copy_, {top}": "{:.3f}", "x copy_, main study": "{:.3f}",
                                     f"host growth, {top}": "{:.2f}x"}))


def findings(record: dict) -> text.Text:
    """The sweep's findings, one idea per bullet, every number from the record (a cell's value)."""
    return text.show("sizes/findings.md.j2", graphs=record.get("torch_compile_graphs"), **numbers(record))


def first_calls(record: dict) -> text.Text:
    """CUB's first-call processes, one row each: the first call's length, the tile CUB then launched at the main
    length (elements per block, and per thread), CUB's and copy_'s times there and their ratio."""
    return text.show("sizes/first_calls.md.j2", rows=an.first_calls(record))
