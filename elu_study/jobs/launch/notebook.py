"""The record as tables (pipe tables, as ``Text`` for nbval): notebook 10's and the CLI's."""

import pandas as pd

from elu_study.core import fingerprint
from elu_study.core.tables import as_built
from elu_study.core.text import Text, table
from elu_study.jobs.launch.analysis import MAX_THREADS_PER_SM, THREADS, VARIANT, plan

# Step 6's builds that ncu profiled (notebook 08) whose launch is a cell here ({entry: cell}; tests/test_launch.py
# checks each against the launch ncu recorded and its file's knobs).
OWN_BUILDS = {"6_base": "128x1", "6_64_threads": "64x1", "6_256_threads": "256x1", "6_2_vectors": "128x2"}
# The prediction as typed in the notebook before the sweep ran: "within 1 % of copy_" read as at most 1.01 x copy_;
# Little's law with copy_'s bandwidth and an assumed (not measured) loaded DRAM latency: about 26 KiB per SM.
PREDICTED_X, NEEDED_KIB, ASSUMED_LATENCY_S = 1.01, 25, 0.8e-6  # 25 KiB: the prediction's 26 KB
STEP2_THREADS = 256  # step 2's launch: 256 x 1, no hints
FORMATS = {"noise (% of copy_)": "{:.2f}", "KiB in flight/SM (theor.)": "{:.0f}", "share of the loop's loss": "{:.0f} %"}


def shown(df: pd.DataFrame) -> Text:
    """A table as the study prints it (core.text.table), for a notebook cell."""
    return Text(table(df, FORMATS))


def achieved_occupancy(beyond: dict | None) -> dict[str, str]:
    """{cell: "achieved occupancy % (profiled entry)"} from the step-6 record's ncu counters."""
    rows = {r["name"]: r for r in (beyond or {}).get("counters", {}).get("rows", [])}
    return {c: f"{rows[e]['achieved_occupancy_pct']:.1f} ({e})" for e, c in OWN_BUILDS.items()
            if rows.get(e, {}).get("achieved_occupancy_pct") is not None}


def cells(record: dict, achieved: dict | None = None, only=None) -> Text:
    """The cells (or those named in ``only``) and step 2's own build, fastest first; ``achieved`` adds ncu's
    occupancy to the theoretical (``achieved_occupancy``)."""
    ref, pct = record["references"]["2_float4"], lambda ms: 100 * ms / record["roof_ms"]
    rows = [{"cell": c["name"], "x copy_": c["x_copy"], "noise (% of copy_)": pct(c["noise_ms"]),
             "regs": str(c["occupancy"]["registers"]), "threads/SM (theor.)": str(c["occupancy"]["resident_threads_per_sm"]),
             "achieved occ. % (ncu)": (achieved or {}).get(c["name"], ""),
             "KiB in flight/SM (theor.)": c["occupancy"]["load_bytes_in_flight_per_sm"] / 1024,
             "correct": "yes" if c["correct"] else "NO"} for c in record["cells"] if only is None or c["name"] in only]
    own = {"cell": "2_float4 (its own build)", "x copy_": ref["x_copy"], "noise (% of copy_)": pct(ref["noise_ms"]),
           **dict.fromkeys(("regs", "threads/SM (theor.)", "achieved occ. % (ncu)"), ""),
           "KiB in flight/SM (theor.)": None, "correct": "yes" if ref["check"]["passed"] else "NO"}
    return shown(pd.DataFrame([*rows, own]).sort_values("x copy_").set_index("cell"))


def counter(record: dict, achieved: dict) -> Text:
    """The cells the argument needs: block size alone, those ncu profiled, the grid-stride ones, any that failed."""
    return cells(record, achieved, {c["name"] for c in record["cells"] if c["grid_stride"] or not c["correct"]
                                    or c["vectors"] == 1 and not c["hints"]} | set(achieved))


def knee(record: dict, flat_within: float = 0.02) -> tuple[float | None, float | None]:
    """The grid-stride cells' knee in KiB in flight per SM: (the most KiB at which a cell is more than ``flat_within``
    slower than the fastest, below the least KiB from which none is)."""
    gs = [c for c in record["cells"] if c["grid_stride"]]
    kib, fastest = lambda c: c["occupancy"]["load_bytes_in_flight_per_sm"] / 1024, min(c["x_copy"] for c in gs)
    flat = {k: all(c["x_copy"] <= fastest * (1 + flat_within) for c in gs if kib(c) == k) for k in map(kib, gs)}
    at_most = min((k for k, f in flat.items() if f), default=None)
    return max((k for k, f in flat.items() if not f and (at_most is None or k < at_most)), default=None), at_most


def graded(record: dict) -> Text:
    """The prediction graded: 1 holds only if exactly the no-hints one-shot cells of 1-2 float4s are within
    PREDICTED_X; Little's law, if its KiB lie in the knee (as written, and with copy_'s read bandwidth)."""
    x = {c["name"]: c["x_copy"] for c in record["cells"]}
    group = [c.name for c in plan() if not c.grid_stride and not c.hints and c.vectors <= 2]
    against = sorted((n for n in x if (n in group) != (x[n] <= PREDICTED_X)), key=x.get, reverse=True)
    lo, hi = knee(record)
    known = lo is not None and hi is not None
    inside = lambda kib: known and lo < kib <= hi
    read, earlier = 4 * record["problem"]["numel"] / (record["roof_ms"] * 1e-3), fingerprint.earlier_variants(record)
    kib = read * ASSUMED_LATENCY_S / record["provenance"]["sm_count"] / 1024
    at = f"knee between {lo:.0f} and {hi:.0f}" if known else "no knee"
    return shown(pd.DataFrame([
        ("1: no hints, 1-2 float4s (x copy_)", f"<= {PREDICTED_X}", f"{min(x[n] for n in group):.3f} to "
         f"{max(x[n] for n in group):.3f}", ", ".join(against), as_built("MISSED" if against else "HELD", earlier, VARIANT)),
        ("Little: KiB in flight per SM", f"~{NEEDED_KIB}", at, "",
         as_built("HELD" if inside(NEEDED_KIB) else "MISSED", earlier, VARIANT)),
        ("Little, loads only (after the run)", f"~{kib:.0f}", at, "",
         as_built("inside" if inside(kib) else "outside", earlier, VARIANT)),
    ], columns=["prediction", "predicted", "measured", "cells against it", "verdict"]).set_index("prediction"))


def block_size(record: dict) -> pd.DataFrame:
    """Per block size: one-shot (one float4) beside grid-stride with the SM full, and the loop's loss it explains."""
    x = {(c["threads"], c["grid_stride"]): c["x_copy"] for c in record["cells"] if not c["hints"] and c["vectors"] == 1
         and c["blocks_per_sm"] * c["threads"] in (0, MAX_THREADS_PER_SM)}
    base = x[STEP2_THREADS, False]
    return pd.DataFrame([
        {"threads per block": t, "one-shot, 1 float4 (x copy_)": x[t, False],
         "grid-stride, SM full (x copy_)": x.get((t, True)),
         "share of the loop's loss": 100 * (x[t, False] - base) / (x[t, True] - base)
         if t > STEP2_THREADS and x.get((t, True), 0) > base else None} for t in THREADS]).set_index("threads per block")
