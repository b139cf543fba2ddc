"""Notebook 10's view of the sweep: the kernels' lines, the predictions graded in one table, a short headline,
the cells' table trimmed to the rows the text refers to, and block size alone (notebook 03's open question).
The full cells' table is ``text.table``, one call away. No GPU needed."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from elu_study.core.tables import compact
from elu_study.core.tables import markdown
from elu_study.jobs.launch.analysis import ACHIEVED_FROM, cell, gridstride_knee, row_of
from elu_study.jobs.launch.shapes import MAX_THREADS_PER_SM, THREADS, plan
from elu_study.jobs.launch.text import NEEDED_KIB, PREDICTIONS, TABLE_FORMATS, cells_frame, little_note

STEP2_CELL = "256x1"  # step 2's launch: 256 threads, one float4 per thread, no hints
STEP3_THREADS = 512  # step 3's block size
STEP3_ONE_SHOT = "3_grid_stride_one_shot"  # step 3's kernel with one vector per thread (the main study's record)


# -- the source ---------------------------------------------------------------------------------
def kernel_lines(path: Path, names: tuple[str, ...]) -> tuple[str, list[tuple[int, int]]]:
    """The lines of each ``__global__`` function in ``names``, from the template line above it to its closing
    brace, and their (first, last) line numbers (1-based)."""
    lines = path.read_text().splitlines()
    spans = []
    for name in names:
        at = next(i for i, line in enumerate(lines) if re.search(rf"\b{re.escape(name)}\(", line))
        first = at
        while first > 0 and lines[first - 1].startswith(("template", "__global__")):
            first -= 1
        last = next(i for i in range(at, len(lines)) if lines[i].startswith("}"))
        spans.append((first + 1, last + 1))
    text = "\n\n".join("\n".join(lines[a - 1:b]) for a, b in spans)
    return text, spans


def kernels_markdown(path: Path, shown_as: str, names=("elu_one_shot_kernel", "elu_grid_stride_kernel")) -> str:
    """The kernels of the sweep's file as a code block, with where they are in it."""
    text, spans = kernel_lines(path, names)
    where = ", ".join(f"{a}-{b}" for a, b in spans)
    return f"`{shown_as}`, lines {where} (the two kernels; the rest is the launch table):\n```cuda\n{text}\n```"


# -- the predictions, graded --------------------------------------------------------------------
def groups(record: dict) -> dict[int, dict[str, float]]:
    """Each numbered prediction's cells and the measured value it is about (x copy_, or hints minus no hints)."""
    one_shot = [c for c in plan() if not c.grid_stride]
    x = lambda n: cell(record, n)["x_copy"]  # noqa: E731
    return {
        1: {c.name: x(c.name) for c in one_shot if c.vectors <= 2 and not c.hints},
        2: {c.name: x(c.name) for c in one_shot if c.vectors >= 4 and not c.hints},
        3: {c.name: x(c.name + "+hints") - x(c.name) for c in one_shot if not c.hints},
        4: {c.name: x(c.name) for c in plan() if c.grid_stride},
    }


WHAT = {1: "no hints, 1-2 float4s: x copy_", 2: "no hints, 4-8 float4s: x copy_",
        3: "hints minus no hints: x copy_", 4: "grid-stride: x copy_"}
WITHIN_1PCT = (0.0, 1.01)  # prediction 1: "within 1 % of copy_"


def outside_text(outside: dict[str, float], lo: float, hi: float, signed: bool, most: int = 3) -> str:
    """The cells outside a prediction's range [lo, hi], the farthest first, at most ``most`` named."""
    ranked = sorted(outside.items(), key=lambda kv: -max(lo - kv[1], kv[1] - hi))
    named = ", ".join(f"{n} {v:+.3f}" if signed else f"{n} {v:.3f}" for n, v in ranked[:most])
    return named + (f" and {len(ranked) - most} more" if len(ranked) > most else "") if ranked else "none"


def graded(record: dict) -> pd.DataFrame:
    """Predictions 1-4 and the Little's-law estimate against the record. A prediction is stated for every cell
    of its group, so it HOLDS only if every cell is inside its range (prediction 1 also: no other cell within
    1 % of copy_)."""
    rows, ranges = [], {1: WITHIN_1PCT, **PREDICTIONS}
    for number, values in groups(record).items():
        lo, hi = ranges[number]
        outside = {n: v for n, v in values.items() if not lo <= v <= hi}
        extra = ({c["name"]: c["x_copy"] for c in record["cells"] if c["x_copy"] <= hi and c["name"] not in values}
                 if number == 1 else {})
        signed = number == 3
        rows.append({"#": str(number), "cells": WHAT[number],
                     "predicted": f"{lo:+.2f} to {hi:+.2f}" if signed else f"<= {hi:.2f}" if number == 1 else
                     f"{lo:.2f} to {hi:.2f}",
                     "measured": f"{min(values.values()):{'+' if signed else ''}.3f} to "
                                 f"{max(values.values()):{'+' if signed else ''}.3f}",
                     "inside": f"{len(values) - len(outside)} of {len(values)}",
                     "outside": outside_text(outside, lo, hi, signed)
                     + (f"; also within 1 %: {outside_text(extra, lo, hi, False)}" if extra else ""),
                     "verdict": "HELD" if not outside and not extra else "MISSED"})
    knee = gridstride_knee(record)
    lo, hi = knee["knee_above_kib"], knee["knee_at_most_kib"]
    if lo is not None and hi is not None:
        rows.append({"#": "Little", "cells": "grid-stride: KiB in flight per SM needed", "predicted": f"~{NEEDED_KIB}",
                     "measured": f"knee between {lo:.0f} and {hi:.0f}", "inside": "", "outside": "",
                     "verdict": "HELD" if lo < NEEDED_KIB <= hi else "MISSED"})
    return pd.DataFrame(rows).set_index("#")




def graded_markdown(record: dict) -> str:
    """The graded table, then the note on the Little's-law row (text.little_note)."""
    note = little_note(record)
    return compact(markdown(graded(record))) + (f"\n\n{note}" if note else "")


def headline(record: dict) -> str:
    """copy_, step 2, the best cell against the noise, and the checks, in two sentences."""
    b, ref = record["best"], record["references"]
    margin = (f"a tie within the noise ({b['noise_ms'] * 1e3:.1f} µs) with {', '.join(b['tied'][1:])}" if b["tie"]
              else f"{b['margin_ms'] * 1e3:.1f} µs ahead of {b['runner_up']}, {b['margin_over_noise']:.0f}x the noise")
    return (f"copy_ takes {record['roof_ms']:.3f} ms and `2_float4` {ref['2_float4']['x_copy']:.3f}x that, in "
            f"{record['method']['rounds']} interleaved rounds. The best cell is **{b['name']}** at {b['x_copy']:.3f}x "
            f"copy_: {margin}. {sum(c['correct'] for c in record['cells'])} of {len(record['cells'])} cells pass "
            "the checks.")


# -- the cells' table, trimmed ------------------------------------------------------------------
def referred(record: dict, achieved: dict) -> list[str]:
    """The cells the notebook's text refers to: step 2's, the block-size rows, the profiled shapes, the slowest
    no-hints one-shot cell and the full-SM grid-stride cells."""
    one = [c for c in record["cells"] if not c["grid_stride"] and not c["hints"]]
    slow = max(one, key=lambda c: c["x_copy"])["name"]
    return [STEP2_CELL, *(f"{t}x1" for t in THREADS), *achieved, *ACHIEVED_FROM, slow,
            *(full_sm_cell(record, t) for t in THREADS if full_sm_cell(record, t))]


def trimmed_table(record: dict, achieved: dict, head: int = 5, tail: int = 4) -> tuple[str, int]:
    """The cells' table (text.cells_frame), fastest first: the first ``head`` and last ``tail`` cells and those
    the text refers to, without the columns the heatmaps already give; and how many cells were left out."""
    df = cells_frame(record, achieved=achieved).drop(columns=["ms", "occupancy % (theor.)", "correct"])
    keep = set(df.index[:head]) | set(df.index[len(df) - tail:]) | (set(referred(record, achieved)) & set(df.index))
    shown = df[[name in keep for name in df.index]]
    return compact(markdown(shown, TABLE_FORMATS)), len(df) - len(shown)


# -- block size alone: notebook 03's open question ------------------------------------------------
def full_sm_cell(record: dict, threads: int) -> str | None:
    """The grid-stride cell at this block size with the SM full (the most blocks per SM that one SM holds)."""
    cells = [c for c in record["cells"] if c["grid_stride"] and c["threads"] == threads
             and c["blocks_per_sm"] * threads <= MAX_THREADS_PER_SM]
    return max(cells, key=lambda c: c["blocks_per_sm"])["name"] if cells else None


def spread_text(record: dict, name: str) -> str:
    """A cell's x copy_ with its p10-p90 range: "1.036 (1.036-1.037)"."""
    c, roof = cell(record, name), record["roof_ms"]
    return f"{c['x_copy']:.3f} ({c['timing']['p10_ms'] / roof:.3f}-{c['timing']['p90_ms'] / roof:.3f})"


def block_size_share(record: dict, threads: int) -> float | None:
    """How much of the grid-stride loop's loss over step 2's cell a one-shot grid of this block size reproduces:
    (one-shot - step 2) / (grid-stride with the SM full - step 2), all in this sweep's rounds."""
    gs, base = full_sm_cell(record, threads), cell(record, STEP2_CELL)["x_copy"]
    if gs is None or cell(record, gs)["x_copy"] <= base:
        return None
    return (cell(record, f"{threads}x1")["x_copy"] - base) / (cell(record, gs)["x_copy"] - base)


def block_size_frame(record: dict) -> pd.DataFrame:
    """Step 2's kernel (1 float4 per thread, no hints) in one-shot grids at every block size, beside the
    grid-stride loop at the same block size with the SM full, and the share of the loop's loss block size alone
    reproduces (block sizes above step 2's)."""
    step2 = cell(record, STEP2_CELL)["threads"]
    rows = []
    for t in THREADS:
        gs, share = full_sm_cell(record, t), block_size_share(record, t)
        rows.append({"threads per block": str(t), "one-shot x copy_ (p10-p90)": spread_text(record, f"{t}x1"),
                     "grid-stride, SM full": gs or "-", "its x copy_ (p10-p90)": spread_text(record, gs) if gs else "-",
                     "share of the loop's loss": f"{100 * share:.0f} %" if share is not None and t > step2 else ""})
    return pd.DataFrame(rows).set_index("threads per block")


def block_size_text(record: dict, others: dict) -> str:
    """The answer in two sentences, every number from the records: the shares at step 3's block size and at the
    largest, and step 3's own one-shot build in the main study's run."""
    top = THREADS[-1]
    shares = {t: block_size_share(record, t) for t in (STEP3_THREADS, top)}
    if any(v is None for v in shares.values()):
        return "This record has no grid-stride cell to compare the one-shot block sizes with."
    text = (f"In these rounds, one-shot blocks of {STEP3_THREADS} threads (step 3's size) reproduce "
            f"{100 * shares[STEP3_THREADS]:.0f} % of the grid-stride loop's loss over `{STEP2_CELL}`; blocks of "
            f"{top} threads, {100 * shares[top]:.0f} %.")
    own = row_of(others.get("study"), STEP3_ONE_SHOT)
    if own:
        text += (f" Step 3's own one-shot build ({STEP3_THREADS}-thread blocks, its loop's code run once) took "
                 f"{own['x_copy']:.3f}x copy_ in the main study's run.")
    return text
