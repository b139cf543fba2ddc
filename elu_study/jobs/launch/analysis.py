"""The record's numbers: x copy_ and noise, the best cell and its ties, the heatmap grids, the same GPU's other
records (study, step 6), the in-flight correlation and the grid-stride knee. No GPU needed."""

from __future__ import annotations

import numpy as np

from elu_study.core.record import load
from elu_study.core.timing import noise_ms
from elu_study.jobs.launch.shapes import BLOCKS_PER_SM, GRID_THREADS, MAX_THREADS_PER_SM, THREADS, VECTORS

# ncu profiled these step-6 builds (notebook 08); each has the launch shape of one cell here (expf, no hints).
ACHIEVED_FROM = {"128x1": "6_base", "64x1": "6_64_threads", "256x1": "6_256_threads", "128x2": "6_2_vectors"}


def annotate(record: dict) -> dict:
    """x copy_ and noise of every cell and reference, the best cell, and the cells tied with it."""
    roof = record["references"]["copy_"]["timing"]["median_ms"]
    record["roof_ms"] = roof
    for entry in (*record["references"].values(), *record["cells"]):
        t = entry["timing"]
        entry["x_copy"] = t["median_ms"] / roof
        entry["noise_ms"] = noise_ms(t)
    record["noise_ms"] = {"copy_": record["references"]["copy_"]["noise_ms"],
                          "max_over_cells": max(c["noise_ms"] for c in record["cells"]),
                          "median_over_cells": float(sorted(c["noise_ms"] for c in record["cells"])[len(record["cells"]) // 2])}
    record["best"] = best(record)
    return record


def best(record: dict, cells: list[dict] | None = None) -> dict:
    """The fastest correct cell (median), its margin over the runner-up, and that margin against the noise of the
    two (the larger spread of their round medians): a margin inside the noise is a tie. ``tied``: every cell
    whose median is within the noise (its own or the best's) of the best's."""
    cells = [c for c in (cells if cells is not None else record["cells"]) if c["correct"]]
    ranked = sorted(cells, key=lambda c: c["timing"]["median_ms"])
    first, second = ranked[0], ranked[1]
    margin = second["timing"]["median_ms"] - first["timing"]["median_ms"]
    noise = max(first["noise_ms"], second["noise_ms"])
    tied = [c["name"] for c in ranked
            if c["timing"]["median_ms"] - first["timing"]["median_ms"] <= max(first["noise_ms"], c["noise_ms"])]
    return {"name": first["name"], "x_copy": first["x_copy"], "median_ms": first["timing"]["median_ms"],
            "runner_up": second["name"], "margin_ms": margin, "noise_ms": noise, "margin_over_noise": margin / noise
            if noise > 0 else float("inf"), "tie": margin <= noise, "tied": tied}


def cell(record: dict, name: str) -> dict:
    """A cell of the record, or a reference (copy_, 2_float4), by name."""
    for c in (*record["cells"], *({**v, "name": k} for k, v in record["references"].items())):
        if c["name"] == name:
            return c
    raise KeyError(f"{name!r} is not a cell of this record")


def grid(record: dict, hints: bool | None = None, grid_stride: bool = False, key: str = "x_copy"):
    """A 2-D array of ``key`` over the cells: threads x vectors (one-shot, one hints setting) or blocks_per_SM x
    threads (grid-stride); NaN where no cell was measured. Returns (rows, cols, values, names)."""
    if grid_stride:  # the blocks_per_SM that some threads count allows
        rows = [b for b in BLOCKS_PER_SM if any(b * t <= MAX_THREADS_PER_SM for t in GRID_THREADS)]
        cols = list(GRID_THREADS)
        pick = lambda c: (c["blocks_per_sm"], c["threads"]) if c["blocks_per_sm"] > 0 else None  # noqa: E731
    else:
        rows, cols = list(THREADS), list(VECTORS)
        pick = lambda c: (c["threads"], c["vectors"]) if c["blocks_per_sm"] == 0 and c["hints"] == hints else None  # noqa: E731
    values = np.full((len(rows), len(cols)), np.nan)
    names = [["" for _ in cols] for _ in rows]
    for c in record["cells"]:
        at = pick(c)
        if at is None:
            continue
        i, j = rows.index(at[0]), cols.index(at[1])
        values[i, j] = c[key]
        names[i][j] = c["name"]
    return rows, cols, values, names


# -- this record and the same GPU's other records ---------------------------------------------------
def companions(record: dict) -> dict:
    """The same GPU's main-study and step-6 records, or None where there is none."""
    gpu = record["provenance"]["gpu"]
    return {"study": load(gpu, required=False), "beyond": load(gpu, "beyond", required=False)}


def row_of(rec: dict | None, name: str) -> dict | None:
    """A row of another job's record (the study's, step 6's) by entry name; None if there is no record or row."""
    return next((r for r in rec["rows"] if r["name"] == name), None) if rec else None


def achieved_occupancy(beyond_record: dict | None) -> dict:
    """{cell: (achieved occupancy %, profiled entry)} from the step-6 record's ncu counters."""
    rows = {r["name"]: r for r in (beyond_record or {}).get("counters", {}).get("rows", [])}
    return {c: (rows[e]["achieved_occupancy_pct"], e) for c, e in ACHIEVED_FROM.items()
            if e in rows and rows[e].get("achieved_occupancy_pct") is not None}


# -- what the cells say about bytes in flight ---------------------------------------------------------
def pearson(a, b) -> float:
    return float(np.corrcoef(a, b)[0, 1])


def permutation_p(a, b, r: float, n: int = 20000, seed: int = 0) -> float:
    """Two-sided permutation p-value of a Pearson correlation (fixed seed: deterministic)."""
    rng = np.random.default_rng(seed)
    b = np.asarray(b)
    hits = sum(abs(pearson(a, rng.permutation(b))) >= abs(r) - 1e-12 for _ in range(n))
    return (hits + 1) / (n + 1)


def inflight_correlation(record: dict) -> dict:
    """Correlation of x copy_ with the theoretical KiB in flight over the no-hints one-shot cells: with every cell,
    without Tukey outliers of x copy_ (beyond 1.5 IQR from the quartiles), and Spearman's rank correlation; a
    direction is supported only if all three have the same sign and each permutation p-value is below 0.05."""
    cells = [c for c in record["cells"] if not c["grid_stride"] and not c["hints"]]
    kib = np.array([c["occupancy"]["load_bytes_in_flight_per_sm"] / 1024 for c in cells])
    x = np.array([c["x_copy"] for c in cells])
    q1, q3 = np.percentile(x, [25, 75])
    keep = (x >= q1 - 1.5 * (q3 - q1)) & (x <= q3 + 1.5 * (q3 - q1))
    rank = lambda v: np.argsort(np.argsort(v, kind="stable"), kind="stable").astype(float)  # noqa: E731
    out = {"n": len(cells), "kib_min": float(kib.min()), "kib_max": float(kib.max()),
           "outliers": [(c["name"], c["x_copy"]) for c, k in zip(cells, keep) if not k]}
    for key, (a, b) in {"all": (kib, x), "without_outliers": (kib[keep], x[keep]),
                        "spearman": (rank(kib), rank(x))}.items():
        r = pearson(a, b)
        out[key] = {"r": r, "p": permutation_p(a, b, r), "n": len(a)}
    signs = {np.sign(out[k]["r"]) for k in ("all", "without_outliers", "spearman")}
    out["supported"] = len(signs) == 1 and all(out[k]["p"] < 0.05 for k in ("all", "without_outliers", "spearman"))
    out["direction"] = ("more in flight, slower" if out["all"]["r"] > 0 else "more in flight, faster") \
        if out["supported"] else None
    return out


def gridstride_knee(record: dict, flat_within: float = 0.02) -> dict:
    """The grid-stride cells grouped by theoretical KiB in flight per SM (one float4 per resident thread): each
    level's x copy_ range, time x KiB (constant where time ~ 1/in-flight), and the latency Little's law implies
    (in-flight bytes of all SMs / achieved read bandwidth). A level is flat if its slowest cell is within
    ``flat_within`` (relative) of the fastest grid-stride cell; the knee lies between the largest level that is not
    flat and the smallest flat one."""
    sms = record["provenance"]["sm_count"]
    read_bytes = 4 * record["problem"]["numel"]
    cells = [c for c in record["cells"] if c["grid_stride"]]
    fastest = min(c["x_copy"] for c in cells)
    levels = []
    for kib in sorted({c["occupancy"]["load_bytes_in_flight_per_sm"] / 1024 for c in cells}):
        group = [c for c in cells if c["occupancy"]["load_bytes_in_flight_per_sm"] / 1024 == kib]
        ms = sorted(c["timing"]["median_ms"] for c in group)[len(group) // 2]
        lo, hi = min(c["x_copy"] for c in group), max(c["x_copy"] for c in group)
        levels.append({"kib": kib, "threads_per_sm": group[0]["occupancy"]["resident_threads_per_sm"],
                       "cells": [c["name"] for c in sorted(group, key=lambda c: c["x_copy"])], "x_lo": lo, "x_hi": hi,
                       "x_times_kib": hi * kib, "flat": hi <= fastest * (1 + flat_within),
                       "implied_latency_ns": kib * 1024 * sms / (read_bytes / (ms * 1e-3)) * 1e9})
    flat = [lv["kib"] for lv in levels if lv["flat"]]
    steep = [lv["kib"] for lv in levels if not lv["flat"] and (not flat or lv["kib"] < min(flat))]
    roof_read = read_bytes / (record["roof_ms"] * 1e-3)
    below = [lv for lv in levels if not lv["flat"]]
    need = [lv["implied_latency_ns"] * 1e-9 * roof_read / sms / 1024 for lv in below]
    return {"levels": levels, "flat_within": flat_within, "knee_above_kib": max(steep) if steep else None,
            "knee_at_most_kib": min(flat) if flat else None, "roof_read_bytes_per_s": roof_read,
            "needed_kib_range": (min(need), max(need)) if need else None}
