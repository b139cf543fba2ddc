"""The sweep's plan (its cells, their occupancy) and the record's numbers (no GPU): the best cell, heatmap grids, the
same GPU's other records, bytes in flight against time."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from elu_study.core.record import load
from elu_study.core.timing import noise_ms

VARIANT = "sweeps/launch_shapes"
THREADS = (64, 128, 256, 512, 1024)
VECTORS = (1, 2, 4, 8)
HINTS = (False, True)
GRID_THREADS = (128, 256, 512, 1024)
BLOCKS_PER_SM = (1, 2, 4, 8, 16, 32)
MAX_THREADS_PER_SM = 2048  # Hopper: 64 warps per SM
MAX_BLOCKS_PER_SM = 32
REGISTERS_PER_SM = 65536
REGISTER_UNIT = 256  # registers are allocated per warp in units of 256
ALPHA = 1.0
REFERENCES = ("copy_", "2_float4")


@dataclass(frozen=True)
class Cell:
    """One launch shape (its fields in order: set_launch_shape's arguments): blocks_per_sm = 0 is a one-shot grid,
    > 0 a grid-stride loop."""

    threads: int
    vectors: int = 1
    hints: bool = False
    blocks_per_sm: int = 0

    @property
    def grid_stride(self) -> bool:
        return self.blocks_per_sm > 0

    @property
    def name(self) -> str:
        if self.grid_stride:
            return f"gs {self.blocks_per_sm}x{self.threads}"
        return f"{self.threads}x{self.vectors}" + ("+hints" if self.hints else "")

    def instance(self) -> tuple[int, int, bool, bool]:  # the template instance, as module.launch_shapes() lists it
        return self.threads, self.vectors, self.hints, self.grid_stride

    def kernel_pattern(self) -> str:  # a substring of the instance's mangled kernel name
        if self.grid_stride:
            return f"elu_grid_stride_kernelILi{self.threads}E"
        return f"elu_one_shot_kernelILi{self.threads}ELi{self.vectors}ELb{int(self.hints)}E"


def plan() -> list[Cell]:
    """Every cell of the sweep: the 40 one-shot shapes, then the grid-stride ones that one SM can hold."""
    one_shot = [Cell(t, v, h) for h in HINTS for t in THREADS for v in VECTORS]
    grid = [Cell(t, 1, False, b) for t in GRID_THREADS for b in BLOCKS_PER_SM if b * t <= MAX_THREADS_PER_SM]
    return one_shot + grid


def occupancy(cell: Cell, registers: int) -> dict:
    """Resident blocks and threads per SM (thread, block and register limits; no shared memory), and the load bytes
    they can have in flight at once (all of a thread's loads before any store; grid-stride: one float4 each)."""
    regs_per_warp = -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT
    by_regs = (REGISTERS_PER_SM // regs_per_warp) // -(-cell.threads // 32) if registers else MAX_BLOCKS_PER_SM
    blocks = min(MAX_BLOCKS_PER_SM, MAX_THREADS_PER_SM // cell.threads, by_regs,
                 cell.blocks_per_sm or MAX_BLOCKS_PER_SM)
    threads = blocks * cell.threads
    return {"registers": registers, "resident_blocks_per_sm": blocks, "resident_threads_per_sm": threads,
            "occupancy_pct": 100.0 * threads / MAX_THREADS_PER_SM,
            "load_bytes_in_flight_per_sm": threads * cell.vectors * 16}


# The study's own builds whose launch is a cell here ({entry: cell}, by record; tests/test_launch.py checks each
# against the launch ncu recorded and its file's knobs); ncu profiled the step-6 ones (notebook 08).
OWN_BUILDS = {"study": {"2_float4": "256x1", "2+128_threads": "128x1", "2+2_vectors": "256x2", "2+4_vectors": "256x4",
                        "2+hints": "256x1+hints", "5_streaming": "128x2+hints", "5_streaming_expf": "128x2+hints",
                        "3_grid_stride_1_waves": "gs 4x512", "6_beyond_copy": "128x1"},
              "beyond": {"6_base": "128x1", "6_64_threads": "64x1", "6_256_threads": "256x1", "6_2_vectors": "128x2"}}


def annotate(record: dict) -> dict:
    """x copy_ and noise of every cell and reference, the best cell, and the cells tied with it."""
    roof = record["roof_ms"] = record["references"]["copy_"]["timing"]["median_ms"]
    for entry in (*record["references"].values(), *record["cells"]):
        entry["x_copy"], entry["noise_ms"] = entry["timing"]["median_ms"] / roof, noise_ms(entry["timing"])
    noise = sorted(c["noise_ms"] for c in record["cells"])
    record["noise_ms"] = {"copy_": record["references"]["copy_"]["noise_ms"], "max_over_cells": noise[-1],
                          "median_over_cells": float(noise[len(noise) // 2])}
    record["best"] = best(record)
    return record


def best(record: dict) -> dict:
    """The fastest correct cell (median) and its margin over the runner-up: a tie if inside the noise of the two
    (the larger spread of their round medians). ``tied``: the cells within their own or the best's noise of it."""
    first, second, *_ = ranked = sorted((c for c in record["cells"] if c["correct"]),
                                        key=lambda c: c["timing"]["median_ms"])
    ms = lambda c: c["timing"]["median_ms"] - first["timing"]["median_ms"]
    margin, noise = ms(second), max(first["noise_ms"], second["noise_ms"])
    return {"name": first["name"], "x_copy": first["x_copy"], "median_ms": first["timing"]["median_ms"],
            "runner_up": second["name"], "margin_ms": margin, "noise_ms": noise,
            "margin_over_noise": margin / noise if noise > 0 else float("inf"), "tie": margin <= noise,
            "tied": [c["name"] for c in ranked if ms(c) <= max(first["noise_ms"], c["noise_ms"])]}


def cell(record: dict, name: str) -> dict:
    """A cell of the record, or a reference (copy_, 2_float4), by name."""
    for c in (*record["cells"], *({**v, "name": k} for k, v in record["references"].items())):
        if c["name"] == name:
            return c
    raise KeyError(f"{name!r} is not a cell of this record")


def grid(record: dict, hints: bool | None = None, grid_stride: bool = False):
    """(rows, cols, x copy_, names): threads x vectors (one-shot, one hints setting) or blocks per SM x threads."""
    if grid_stride:  # the blocks_per_SM that some threads count allows
        rows, cols = [b for b in BLOCKS_PER_SM if b * GRID_THREADS[0] <= MAX_THREADS_PER_SM], list(GRID_THREADS)
        at = {(c["blocks_per_sm"], c["threads"]): c for c in record["cells"] if c["grid_stride"]}
    else:
        rows, cols = list(THREADS), list(VECTORS)
        at = {(c["threads"], c["vectors"]): c for c in record["cells"] if not c["grid_stride"] and c["hints"] == hints}
    values = np.array([[at[r, k]["x_copy"] if (r, k) in at else np.nan for k in cols] for r in rows], dtype=float)
    return rows, cols, values, [[at[r, k]["name"] if (r, k) in at else "" for k in cols] for r in rows]


def full_sm_cell(record: dict, threads: int) -> dict | None:
    """The grid-stride cell at this block size with the SM full (the most blocks per SM that one SM holds)."""
    cells = [c for c in record["cells"] if c["grid_stride"] and c["threads"] == threads
             and c["blocks_per_sm"] * threads <= MAX_THREADS_PER_SM]
    return max(cells, key=lambda c: c["blocks_per_sm"]) if cells else None


def companions(record: dict) -> dict:
    """The same GPU's main-study and step-6 records, or None where there is none."""
    gpu = record["provenance"]["gpu"]
    return {"study": load(gpu, required=False), "beyond": load(gpu, "beyond", required=False)}


def row_of(rec: dict | None, name: str) -> dict | None:
    """A row of another job's record (the study's, step 6's) by entry name; None if there is no record or row."""
    return next((r for r in rec["rows"] if r["name"] == name), None) if rec else None


def achieved_occupancy(beyond: dict | None) -> dict:
    """{cell: (achieved occupancy %, profiled entry)} from the step-6 record's ncu counters."""
    rows = {r["name"]: r for r in (beyond or {}).get("counters", {}).get("rows", [])}
    return {c: (rows[e]["achieved_occupancy_pct"], e) for e, c in OWN_BUILDS["beyond"].items()
            if rows.get(e, {}).get("achieved_occupancy_pct") is not None}


def gridstride_knee(record: dict, flat_within: float = 0.02) -> dict:
    """Grid-stride cells by theoretical KiB in flight per SM: x copy_, x copy_ x KiB, Little's implied latency (bytes
    in flight / read bandwidth); flat: within ``flat_within`` of the fastest; the knee: last steep to first flat."""
    sms, read_bytes = record["provenance"]["sm_count"], 4 * record["problem"]["numel"]
    cells = [c for c in record["cells"] if c["grid_stride"]]
    kib_of = lambda c: c["occupancy"]["load_bytes_in_flight_per_sm"] / 1024
    fastest, levels = min(c["x_copy"] for c in cells), []
    for kib in sorted({kib_of(c) for c in cells}):
        group = sorted((c for c in cells if kib_of(c) == kib), key=lambda c: c["x_copy"])
        ms = sorted(c["timing"]["median_ms"] for c in group)[len(group) // 2]
        hi = group[-1]["x_copy"]
        levels.append({"kib": kib, "threads_per_sm": group[0]["occupancy"]["resident_threads_per_sm"],
                       "cells": [c["name"] for c in group], "x_lo": group[0]["x_copy"], "x_hi": hi,
                       "x_times_kib": hi * kib, "flat": hi <= fastest * (1 + flat_within),
                       "implied_latency_ns": kib * 1024 * sms / (read_bytes / (ms * 1e-3)) * 1e9})
    flat = [lv["kib"] for lv in levels if lv["flat"]]
    steep = [lv["kib"] for lv in levels if not lv["flat"] and (not flat or lv["kib"] < min(flat))]
    roof_read = read_bytes / (record["roof_ms"] * 1e-3)
    need = [lv["implied_latency_ns"] * 1e-9 * roof_read / sms / 1024 for lv in levels if not lv["flat"]]
    return {"levels": levels, "flat_within": flat_within, "knee_above_kib": max(steep) if steep else None,
            "knee_at_most_kib": min(flat) if flat else None, "roof_read_bytes_per_s": roof_read,
            "needed_kib_range": (min(need), max(need)) if need else None}
