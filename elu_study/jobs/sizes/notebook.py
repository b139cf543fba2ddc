"""Notebook 09's view of the sweep, each a cell's value: the prediction graded, the figures, one row per entry. No
GPU needed."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from elu_study.core import text
from elu_study.core.record import RecordError, load
from elu_study.jobs.sizes.analysis import custom, host_median_us, names, ok, point, small_sizes, us
from elu_study.jobs.sizes.figures import FIGURES
from elu_study.jobs.sizes.plan import STREAMS, fmt_n

# Notebook 09's prediction, (number, quantity, (low, high)), written before the sweep's first H200 run.
PREDICTION = ((1, "launch_bound_max_n", (2**20, 2**23)), (2, "l2_warm_end_n", (2**23, 2**25)))


def measured(record: dict, quantity: str) -> int | None:
    """The length a prediction is about (the quantities graded.md.j2 names), on the regimes' reference entry."""
    reg = record["regimes"]
    if quantity == "launch_bound_max_n":
        return reg["launch_bound_max_n"]
    later = [int(n) for n, g in reg["warm_gain"].items() if int(n) > (reg["l2_fit_max_n"] or 0) and g < 1.1]
    return min(later, default=None)


def grade(record: dict, predictions=PREDICTION, written: str = "before the sweep's first H200 run") -> text.Text:
    """Predictions graded against the sweep in one table (HELD where the measured length lies in the range)."""
    rows = [{"number": number, "quantity": quantity, "lo": lo, "hi": hi, "value": measured(record, quantity)}
            for number, quantity, (lo, hi) in predictions]
    return text.show("sizes/graded.md.j2", rows=rows, written=written, ref=record["regimes"]["reference"])


def figure(record: dict, name: str):
    """One of the two figures, closed so that it is shown once, as the cell's value."""
    fig = FIGURES[name](record)
    plt.close(fig)
    return fig


def main_study_ms(record: dict) -> dict[str, float]:
    """The main study's median time per entry on the same GPU, ms ({} where there is no record this code reads)."""
    try:
        main = load(record["provenance"]["gpu"], "study", required=False) or {}
    except RecordError:
        return {}
    return {r["name"]: r["timing"]["median_ms"] for r in main.get("rows", []) if r.get("timing")}


def entry_table(record: dict, main_ms: dict | None = None) -> text.Text:
    """One row per entry (the stream halves aside), sorted by time over copy_'s at the largest length: host time per
    call (median over the launch-bound lengths), warm GPU time at the smallest length, at how many launch-bound
    lengths a loop of a custom kernel's calls (paced by the larger of host and warm time) beats the reference's, and
    cold time over copy_'s at the largest length and in the main study (``main_ms``: read where not given)."""
    small, n0, top, ref = small_sizes(record), record["sizes"][0], record["sizes"][-1], record["regimes"]["reference"]
    main_ms = main_study_ms(record) if main_ms is None else main_ms
    paced = lambda c, n: max(us(record, c, n, "host"), us(record, c, n, "warm"))
    x_top, wins = f"x copy_, {fmt_n(top)}", f"loop wins of {len(small)}"
    rows = [{"entry": c, "host µs": host_median_us(record, c, small),
             f"warm µs, {fmt_n(n0)}": f"{us(record, c, n0, 'warm'):.2f}" if ok(point(record, c, n0)) else "failed",
             wins: str(sum(paced(c, n) < paced(ref, n) for n in small)) if c in custom(record) else "",
             x_top: us(record, c, top, "cold") / us(record, "copy_", top, "cold"),
             "x copy_, main study": main_ms[c] / main_ms["copy_"] if c in main_ms and "copy_" in main_ms else None}
            for c in names(record) if c not in STREAMS]
    df = pd.DataFrame(rows).set_index("entry").sort_values(x_top)
    return text.Text(text.table(df, {"host µs": "{:.1f}", x_top: "{:.3f}", "x copy_, main study": "{:.3f}"}))
