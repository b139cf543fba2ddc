"""Notebook 09's view of the sweep (no GPU): the prediction graded, the figures, a row per entry; the README's block."""

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from elu_study.core import text
from elu_study.core.record import RecordError, figure_path, load, readme_link, record_path
from elu_study.jobs.sizes.analysis import ok
from elu_study.jobs.sizes.figures import FIGURES
from elu_study.jobs.sizes.plan import STREAMS, fmt_n

# Notebook 09's prediction, (number, quantity, (low, high)), written before the sweep's first H200 run.
PREDICTION = ((1, "launch_bound_max_n", (2**20, 2**23)), (2, "l2_warm_end_n", (2**23, 2**25)))


def grade(record: dict, predictions=PREDICTION, written: str = "before the sweep's first H200 run") -> text.Text:
    """Predictions graded in one table; l2_warm_end_n: the least length past the L2's with cold within 10 % of warm."""
    reg = record["regimes"]
    measured = {"launch_bound_max_n": reg["launch_bound_max_n"], "l2_warm_end_n": min(
        (int(n) for n, g in reg["warm_gain"].items() if int(n) > (reg["l2_fit_max_n"] or 0) and g < 1.1), default=None)}
    rows = [{"number": number, "quantity": quantity, "lo": lo, "hi": hi, "value": measured[quantity]}
            for number, quantity, (lo, hi) in predictions]
    return text.show("sizes/graded.md.j2", rows=rows, written=written, ref=reg["reference"])


def figure(record: dict, name: str):
    """One of the two figures, closed so that it is shown once, as the cell's value."""
    fig = FIGURES[name](record)
    plt.close(fig)
    return fig


def entry_table(record: dict, main_ms: dict | None = None) -> text.Text:
    """One row per entry, by x copy_ at the largest length: host µs over the launch-bound lengths, warm µs at the
    smallest, whether a loop of a custom kernel's calls (paced by host or warm time) beats the reference's there (a
    tie: within the wider half p10-p90 spread), and x copy_ here and in the main study (``main_ms``: {entry: ms})."""
    sizes, ref = record["sizes"], record["regimes"]["reference"]
    n0, top = sizes[0], sizes[-1]
    small = [n for n in sizes if n <= (record["regimes"]["launch_bound_max_n"] or n0)]
    if main_ms is None:
        try:
            rows = (load(record["provenance"]["gpu"], "study", required=False) or {}).get("rows", [])
        except RecordError:  # a study record this code does not read
            rows = []
        main_ms = {r["name"]: r["timing"]["median_ms"] for r in rows if r.get("timing")}

    point = {(p["entry"], p["n"]): p for p in record["points"]}
    us = lambda c, n, mode: 1e3 * point[c, n][mode]["median_ms"] if ok(point[c, n]) else float("nan")  # NaN: failed
    paced = lambda c, n: max(us(c, n, "host"), us(c, n, "warm"))

    def half(c: str, n: int) -> float:  # the pacing time's half p10-p90 spread (NaN: a failed point)
        if not ok(point[c, n]):
            return float("nan")
        t = point[c, n]["host" if us(c, n, "host") >= us(c, n, "warm") else "warm"]
        return 1e3 * (t["p90_ms"] - t["p10_ms"]) / 2

    def loop(c: str) -> str:  # faster / tie / slower than the reference's loop, over the launch-bound lengths
        gaps = [(paced(ref, n) - paced(c, n), max(half(c, n), half(ref, n))) for n in small]
        faster, tie, slower = (sum(d > w for d, w in gaps), sum(abs(d) <= w for d, w in gaps),
                               sum(-d > w for d, w in gaps))
        failed = len(gaps) - faster - tie - slower  # NaN: a point of either row failed, so none of the three
        return f"{faster} / {tie} / {slower}" + (f" ({failed} failed)" if failed else "")

    custom = [e["name"] for e in record["entries"] if e["kind"] in ("step", "peer")]
    x_top, wins = f"x copy_, {fmt_n(top)}", f"loop faster / tie / slower, of {len(small)}"
    rows = [{"entry": c, "host µs": pd.Series([us(c, n, "host") for n in small]).median(),
             f"warm µs, {fmt_n(n0)}": f"{us(c, n0, 'warm'):.2f}" if ok(point[c, n0]) else "failed",
             wins: loop(c) if c in custom else "",
             x_top: us(c, top, "cold") / us("copy_", top, "cold"),
             "x copy_, main study": main_ms[c] / main_ms["copy_"] if c in main_ms and "copy_" in main_ms else None}
            for c in (e["name"] for e in record["entries"]) if c not in STREAMS]
    df = pd.DataFrame(rows).set_index("entry").sort_values(x_top)
    return text.Text(text.table(df, {"host µs": "{:.1f}", x_top: "{:.3f}", "x copy_, main study": "{:.3f}"}))


def block(record: dict, figure_paths=None) -> str:
    """The README's sizes block, linking ``figure_paths`` (default: the record's figures in results/)."""
    p = record["provenance"]
    checked = [q["check"]["passed"] for q in record["points"] if q.get("check")]
    paths = figure_paths or [figure_path(p["gpu"], f"sizes-{name}") for name in FIGURES]
    return text.render("sizes/readme.md.j2", p=p, file=record_path(p["gpu"], "sizes").name, sizes=record["sizes"],
                       entries=record["entries"], checked=len(checked), passed=sum(checked), errors=record["errors"],
                       figures=[(Path(q).stem, readme_link(q)) for q in paths])
