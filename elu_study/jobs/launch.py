"""The launch-shape sweep: ``python -m elu_study launch``.

Step 2's kernel (``elu::Expf``, float4, every load before any store) in every launch shape, from one build
of ``kernels/sweeps/launch_shapes.cu`` whose shape is chosen at run time (``module.set_launch_shape``):

* one-shot grids: threads per block {64, 128, 256, 512, 1024} x float4s per thread {1, 2, 4, 8}, with and
  without streaming hints (``__ldcs``/``__stcs``): 40 cells;
* grid-stride loops of blocks_per_SM x SMs blocks, threads {128, 256, 512, 1024}, blocks_per_SM {1, 2, 4, 8,
  16, 32} as far as blocks_per_SM x threads <= 2048 (what one SM holds): 14 cells.

On a GPU every cell is checked first (``check.check_elu`` into a NaN-poisoned output, and bit for bit against
step 2's build on the timing input), then every cell, ``copy_`` and ``2_float4`` are timed at the full shape in
interleaved rounds (``timing.time_interleaved``). Each timed call sets the cell's shape, then calls
``module.elu(x, 1.0, out=y)``; setting the shape is a host-side table lookup, done while the GPU is still busy
with earlier work, so it is not in the CUDA-event time. Writes ``results/<gpu>-launch.json`` (provenance,
every cell's timing with its samples, x copy_, noise, registers and occupancy) and its heatmaps. Without a GPU
it prints the recorded run (``--redraw`` redraws its figures). ``notebooks/10_launch_shapes.ipynb`` shows it.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from elu_study.core.hardware import SHAPE, slug

SCHEMA = "elu-study-launch/1"
VARIANT = "sweeps/launch_shapes"
SUFFIX = "-launch.json"
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
CALL_MS = 3.1  # one full-size call on the H200 (about copy_'s time): for the time estimate only
REFERENCES = ("copy_", "2_float4")
# The study's launches as cells of this sweep (same formula; 5_streaming itself uses expm1f).
# Kept for older notebooks; STEP_BUILDS (below) also names each launch's own build.
STEP_SHAPES = {"2_float4": "256x1", "2+128_threads": "128x1", "2+2_vectors": "256x2", "2+4_vectors": "256x4",
               "2+hints": "256x1+hints", "5_streaming (with expf)": "128x2+hints",
               "3_grid_stride_1_waves (512 threads, 4 blocks/SM)": "gs 4x512"}


@dataclass(frozen=True)
class Cell:
    """One launch shape: blocks_per_sm = 0 is a one-shot grid, > 0 a grid-stride loop."""

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

    def args(self) -> tuple[int, int, bool, int]:
        """set_launch_shape's arguments."""
        return self.threads, self.vectors, self.hints, self.blocks_per_sm

    def instance(self) -> tuple[int, int, bool, bool]:
        """The template instance it runs, as module.launch_shapes() lists it."""
        return self.threads, self.vectors, self.hints, self.grid_stride

    def kernel_pattern(self) -> str:
        """A substring of the instance's mangled kernel name."""
        if self.grid_stride:
            return f"elu_grid_stride_kernelILi{self.threads}E"
        return f"elu_one_shot_kernelILi{self.threads}ELi{self.vectors}ELb{int(self.hints)}E"


def plan() -> list[Cell]:
    """Every cell of the sweep: the 40 one-shot shapes, then the grid-stride ones that one SM can hold."""
    one_shot = [Cell(t, v, h) for h in HINTS for t in THREADS for v in VECTORS]
    grid = [Cell(t, 1, False, b) for t in GRID_THREADS for b in BLOCKS_PER_SM if b * t <= MAX_THREADS_PER_SM]
    return one_shot + grid


def plan_order(name: str) -> int:
    """A cell's place in plan(): for sorting names as the plan lists them."""
    return [c.name for c in plan()].index(name)


def estimate_s(n_calls: int, rounds: int, warmup_ms: float, rep_ms: float, check_trials: int) -> float:
    """Rough wall time of the measurement (not the build): do_bench's estimate, warm-up and repeats per call
    and round, and the checks (a few full-size passes each)."""
    per_timing = (5 * CALL_MS + warmup_ms + rep_ms) * 1.15 / 1e3  # + L2 flushes and Python
    per_check = 0.3 * check_trials + 0.05
    return n_calls * rounds * per_timing + n_calls * per_check


# -- occupancy and bytes in flight, from the registers of each instance ----------------------------
def resident_blocks(threads: int, registers: int) -> int:
    """Blocks of one instance that one SM holds: the thread, block and register limits (no shared memory)."""
    warps = -(-threads // 32)
    regs_per_warp = -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT
    by_regs = (REGISTERS_PER_SM // regs_per_warp) // warps if registers else MAX_BLOCKS_PER_SM
    return min(MAX_BLOCKS_PER_SM, MAX_THREADS_PER_SM // threads, by_regs)


def occupancy(cell: Cell, registers: int) -> dict:
    """Resident threads per SM, and the load bytes that they can have in flight at once (each thread issues
    all its loads before any store; a grid-stride thread, one float4 per iteration of the source loop)."""
    blocks = resident_blocks(cell.threads, registers)
    if cell.grid_stride:
        blocks = min(blocks, cell.blocks_per_sm)
    threads = blocks * cell.threads
    return {"registers": registers, "resident_blocks_per_sm": blocks, "resident_threads_per_sm": threads,
            "occupancy_pct": 100.0 * threads / MAX_THREADS_PER_SM,
            "load_bytes_in_flight_per_sm": threads * cell.vectors * 16}


def registers_by_cell(module, cells) -> dict[str, dict]:
    """Registers and local bytes of each cell's kernel, from the built library's resource report."""
    from elu_study.core.build import built_library
    from elu_study.core.sass import resource_usage

    usage = resource_usage(built_library(module))
    out = {}
    for cell in cells:
        found = [v for k, v in usage.items() if cell.kernel_pattern() in k]
        if len(found) != 1:
            raise RuntimeError(f"{cell.name}: expected one kernel matching {cell.kernel_pattern()}, found {len(found)}")
        out[cell.name] = found[0]
    return out


# -- the record -------------------------------------------------------------------------------------
def record_path(gpu_name_or_slug: str, results_dir: Path | None = None) -> Path:
    from elu_study.core.record import record_path

    return record_path(gpu_name_or_slug, "launch", results_dir)


def save(record: dict, results_dir: Path | None = None) -> Path:
    from elu_study.core.record import save

    return save(record, "launch", results_dir)


def load(gpu_name_or_slug: str | None = None, results_dir: Path | None = None) -> dict:
    from elu_study.core.record import REFERENCE_GPU

    path = record_path(gpu_name_or_slug or REFERENCE_GPU, results_dir)
    if not path.exists():
        raise FileNotFoundError(f"no launch-shape record at {path}: run `python -m elu_study launch` on a GPU")
    return json.loads(path.read_text())


def open_record(results_dir: Path | None = None) -> dict:
    """For the notebook: this GPU's record if there is one, else the reference GPU's; says which on a
    "Data source:" line (masked by notebooks/sanitize.cfg, so a run anywhere compares equal)."""
    import torch

    from elu_study.core.record import REFERENCE_GPU

    gpu = REFERENCE_GPU
    if torch.cuda.is_available() and record_path(torch.cuda.get_device_name(), results_dir).exists():
        gpu = slug(torch.cuda.get_device_name())
    record = load(gpu, results_dir)
    p = record["provenance"]
    where = torch.cuda.get_device_name() if torch.cuda.is_available() else "NO GPU HERE"
    print(f"Data source: results/{slug(p['gpu'])}{SUFFIX}, measured by `python -m elu_study launch` on {p['gpu']} "
          f"({p['date_utc'][:10]}, commit {p.get('commit')}); running on {where}.")
    return record


def annotate(record: dict) -> dict:
    """x copy_ and noise of every cell and reference, the best cell, and the cells tied with it."""
    from elu_study.core.timing import noise_ms

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
    for c in (*record["cells"], *({**v, "name": k} for k, v in record["references"].items())):
        if c["name"] == name:
            return c
    raise KeyError(f"{name!r} is not a cell of this record")


def grid(record: dict, hints: bool | None = None, grid_stride: bool = False, key: str = "x_copy"):
    """A 2-D array of ``key`` over the cells: threads x vectors (one-shot, one hints setting) or blocks_per_SM x
    threads (grid-stride); NaN where no cell was measured. Returns (rows, cols, values, names)."""
    import numpy as np

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


# -- figures -----------------------------------------------------------------------------------------
def _heatmap(ax, rows, cols, values, names, marked: set[str], vmin: float, vmax: float, cmap):
    from matplotlib.patches import Rectangle

    im = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(cols)), [str(c) for c in cols])
    ax.set_yticks(range(len(rows)), [str(r) for r in rows])
    for i in range(len(rows)):
        for j in range(len(cols)):
            v = values[i, j]
            if v != v:
                continue
            star = names[i][j] in marked
            dark = (v - vmin) / (vmax - vmin) > 0.6 if vmax > vmin else False  # viridis_r is dark at the top
            ax.text(j, i, f"{v:.3f}" + ("\n(best)" if star else ""), ha="center", va="center", fontsize=8,
                    fontweight="bold" if star else "normal", color="w" if dark else "k")
            if star:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="tab:red", lw=2.5))
    return im


def heatmap_figures(record: dict) -> dict:
    """{"launch": one-shot heatmaps (one panel per hints setting), "launch-grid-stride": grid-stride heatmap}:
    median time over copy_'s per cell, printed in each cell, the best cell framed."""
    import matplotlib.pyplot as plt
    import numpy as np

    b = record["best"]
    marked = {b["name"]}

    def scale(grid_stride: bool) -> tuple[float, float]:  # each figure its own colour scale, from copy_ (1.0) up
        x = np.array([c["x_copy"] for c in record["cells"] if c["grid_stride"] == grid_stride])
        return min(1.0, float(x.min())), float(x.max())

    vmin, vmax = scale(False)
    cmap = plt.get_cmap("viridis_r")
    gpu = record["provenance"]["gpu"]
    tie = " (a tie: margin inside the noise)" if b["tie"] else ""
    figs = {}
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for ax, hints in zip(axes, HINTS):
        im = _heatmap(ax, *grid(record, hints), marked, vmin, vmax, cmap)
        ax.set_xlabel("float4s per thread")
        ax.set_title("__ldcs/__stcs (evict-first)" if hints else "plain loads and stores", fontsize=10)
    axes[0].set_ylabel("threads per block")
    fig.colorbar(im, ax=axes, label="time over copy_'s (median; lower is better)")
    fig.suptitle(f"One-shot grids, x copy_ on {gpu}; best {b['name']} {b['x_copy']:.3f}{tie}", fontsize=10)
    figs["launch"] = fig
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    im = _heatmap(ax, *grid(record, grid_stride=True), marked, *scale(True), cmap)
    ax.set_xlabel("threads per block")
    ax.set_ylabel("blocks per SM (grid = this x SMs)")
    fig.colorbar(im, ax=ax, label="time over copy_'s (median; lower is better)")
    ax.set_title(f"Grid-stride loops (1 float4 per iteration, no hints),\nx copy_ on {gpu}", fontsize=10)
    fig.tight_layout()
    figs["launch-grid-stride"] = fig
    return figs


def write_figures(record: dict, results_dir: Path | None = None) -> list[Path]:
    from elu_study.jobs.study.figures import save as save_fig
    from elu_study.core.record import RESULTS_DIR

    base = Path(results_dir or RESULTS_DIR)
    return [save_fig(fig, base / f"{slug(record['provenance']['gpu'])}-{name}.png")
            for name, fig in heatmap_figures(record).items()]


# -- text --------------------------------------------------------------------------------------------
def table(record: dict, cells: list[dict] | None = None, achieved: dict | None = None) -> str:
    """The cells as a pipe table, fastest first. Threads per SM, occupancy and KiB in flight are *theoretical*
    (from the registers and the occupancy rules); ``achieved`` ({cell: (pct, entry)}, see achieved_occupancy)
    adds ncu's achieved occupancy where a profiled build ran the same launch shape."""
    import pandas as pd

    from elu_study.core.record import markdown

    achieved = achieved or {}
    rows = sorted(cells if cells is not None else record["cells"], key=lambda c: c["timing"]["median_ms"])
    df = pd.DataFrame({
        "cell": [c["name"] for c in rows],
        "ms": [c["timing"]["median_ms"] for c in rows],
        "x copy_": [c["x_copy"] for c in rows],
        "p10": [c["timing"]["p10_ms"] / record["roof_ms"] for c in rows],
        "p90": [c["timing"]["p90_ms"] / record["roof_ms"] for c in rows],
        "noise (% of copy_)": [100 * c["noise_ms"] / record["roof_ms"] for c in rows],
        "regs": [str(c["occupancy"]["registers"]) for c in rows],
        "threads/SM (theor.)": [str(c["occupancy"]["resident_threads_per_sm"]) for c in rows],
        "occupancy % (theor.)": [c["occupancy"]["occupancy_pct"] for c in rows],
        "achieved occ. % (ncu)": [f"{achieved[c['name']][0]:.1f} ({achieved[c['name']][1]})" if c["name"] in achieved
                                  else "" for c in rows],
        "KiB in flight/SM (theor.)": [c["occupancy"]["load_bytes_in_flight_per_sm"] / 1024 for c in rows],
        "correct": ["yes" if c["correct"] else "NO" for c in rows],
    }).set_index("cell")
    return markdown(df, {"p10": "{:.3f}", "p90": "{:.3f}", "noise (% of copy_)": "{:.2f}",
                         "occupancy % (theor.)": "{:.1f}", "KiB in flight/SM (theor.)": "{:.0f}"})


def summary(record: dict) -> str:
    b, p = record["best"], record["provenance"]
    ref = record["references"]
    verdict = (f"a tie: the margin is inside the noise; tied within the noise: {', '.join(b['tied'])}" if b["tie"]
               else f"{b['margin_over_noise']:.1f}x the noise")
    return "\n".join([
        f"{p['gpu']} ({p['sm_count']} SMs), {p['date_utc'][:10]}, commit {p.get('commit')}; shape "
        f"{tuple(record['problem']['shape'])} float32; {record['method']['rounds']} interleaved rounds.",
        f"copy_ {record['roof_ms']:.3f} ms; 2_float4 {ref['2_float4']['x_copy']:.3f}x copy_.",
        f"best cell: {b['name']}, {b['x_copy']:.3f}x copy_ ({b['median_ms']:.3f} ms); runner-up {b['runner_up']} by "
        f"{b['margin_ms'] * 1e3:.1f} us, noise {b['noise_ms'] * 1e3:.1f} us: {verdict}.",
        f"correct: {sum(c['correct'] for c in record['cells'])} of {len(record['cells'])} cells.",
    ])


# -- the record against the predictions and the study's other records -----------------------------------
# The study's own builds of launches that are cells of this sweep: (record, entry, cell, how the build differs).
# "study" is results/<gpu>.json, "beyond" results/<gpu>-beyond.json; each entry's x copy_ is over its own run's copy_.
STEP_BUILDS = (
    ("study", "2_float4", "256x1", "step 2 itself"),
    ("study", "2+128_threads", "128x1", "step 5's one-change ablation"),
    ("study", "2+2_vectors", "256x2", "step 5's one-change ablation"),
    ("study", "2+4_vectors", "256x4", "step 5's one-change ablation"),
    ("study", "2+hints", "256x1+hints", "step 5's one-change ablation"),
    ("study", "5_streaming", "128x2+hints", "step 5 itself: expm1f, not expf (a different formula)"),
    ("study", "5_streaming_expf", "128x2+hints", "step 5 with expf: the same formula"),
    ("study", "3_grid_stride_1_waves", "gs 4x512", "step 3's file, 1 wave of 512-thread blocks"),
    ("study", "6_beyond_copy", "128x1", "step 6 itself (its own file)"),
    ("beyond", "6_base", "128x1", "step 6's file"),
    ("beyond", "6_64_threads", "64x1", "step 6's file"),
    ("beyond", "6_256_threads", "256x1", "step 6's file"),
    ("beyond", "6_2_vectors", "128x2", "step 6's file"),
)
# ncu profiled these step-6 builds (notebook 08); each has the launch shape of one cell here (expf, no hints).
ACHIEVED_FROM = {"128x1": "6_base", "64x1": "6_64_threads", "256x1": "6_256_threads", "128x2": "6_2_vectors"}


def companions(record: dict) -> dict:
    """The same GPU's main-study and step-6 records, or None where there is none."""
    from elu_study.jobs import beyond
    from elu_study.core import record as results

    gpu = slug(record["provenance"]["gpu"])
    try:
        study = results.load(gpu)
    except FileNotFoundError:
        study = None
    return {"study": study, "beyond": beyond.load(gpu)}


def _row(rec: dict | None, name: str) -> dict | None:
    return next((r for r in rec["rows"] if r["name"] == name), None) if rec else None


def achieved_occupancy(beyond_record: dict | None) -> dict:
    """{cell: (achieved occupancy %, profiled entry)} from the step-6 record's ncu counters."""
    rows = {r["name"]: r for r in (beyond_record or {}).get("counters", {}).get("rows", [])}
    return {c: (rows[e]["achieved_occupancy_pct"], e) for c, e in ACHIEVED_FROM.items()
            if e in rows and rows[e].get("achieved_occupancy_pct") is not None}


def steps_table(record: dict, others: dict) -> str:
    """Each step's launch as a cell of this sweep beside that step's own build (its own record and run)."""
    lines = ["| launch (own build) | record | own build x copy_ (its run) | cell here | cell x copy_ (this sweep) "
             "| own build / cell | how the build differs |", "|---|---|---|---|---|---|---|"]
    ref = record["references"]["2_float4"]
    lines.append(f"| 2_float4 (timed in this sweep's rounds) | {slug(record['provenance']['gpu'])}{SUFFIX} | "
                 f"{ref['x_copy']:.3f} | 256x1 | {cell(record, '256x1')['x_copy']:.3f} | "
                 f"{ref['x_copy'] / cell(record, '256x1')['x_copy']:.3f} | step 2 itself, same rounds |")
    for which, entry, name, note in STEP_BUILDS:
        row, here = _row(others.get(which), entry), cell(record, name)["x_copy"]
        source = f"{slug(record['provenance']['gpu'])}{'.json' if which == 'study' else '-beyond.json'}"
        own = f"{row['x_copy']:.3f}" if row else "not recorded"
        ratio = f"{row['x_copy'] / here:.3f}" if row else ""
        lines.append(f"| {entry} | {source} | {own} | {name} | {here:.3f} | {ratio} | {note} |")
    return "\n".join(lines)


def range_verdict(label: str, values: dict[str, float], lo: float, hi: float) -> str:
    """Rule: a prediction stated for every cell of a group HOLDS only if every cell is inside [lo, hi];
    otherwise it is MISSED, with the count inside and the cells outside."""
    inside = {n: v for n, v in values.items() if lo <= v <= hi}
    outside = {n: v for n, v in values.items() if n not in inside}
    word = "HELD" if not outside else "MISSED"
    out = ", ".join(f"{n} {v:+.3f}" if lo < 0.5 else f"{n} {v:.3f}" for n, v in outside.items())
    return (f"{label}: {len(inside)} of {len(values)} cells inside [{lo:.2f}, {hi:.2f}] (measured "
            f"{min(values.values()):.3f} to {max(values.values()):.3f}) -> {word}"
            + (f"; outside: {out}" if outside else ""))


# Predictions 2-4 as written in the notebook (typed before the sweep ran: predictions, not measurements).
# Prediction 3's "about 2 %" is read as +0.01 to +0.03 x copy_.
PREDICTIONS = {2: (1.02, 1.05), 3: (0.01, 0.03), 4: (1.05, 1.10)}


def prediction_verdicts(record: dict) -> str:
    one_shot = [c for c in plan() if not c.grid_stride]
    x = lambda n: cell(record, n)["x_copy"]  # noqa: E731
    two = {c.name: x(c.name) for c in one_shot if c.vectors >= 4 and not c.hints}
    three = {c.name: x(c.name + "+hints") - x(c.name) for c in one_shot if not c.hints}
    four = {c.name: x(c.name) for c in plan() if c.grid_stride}
    return "\n".join([
        "Rule: each prediction is stated for every cell of its group, so it HOLDS only if every cell is inside its "
        "range; otherwise MISSED.",
        range_verdict("2. 4 and 8 vectors, no hints, x copy_", two, *PREDICTIONS[2]),
        range_verdict("3. hints minus no hints, same cell, x copy_", three, *PREDICTIONS[3]),
        range_verdict("4. grid-stride, x copy_", four, *PREDICTIONS[4]),
    ])


def _pearson(a, b) -> float:
    import numpy as np

    return float(np.corrcoef(a, b)[0, 1])


def _perm_p(a, b, r: float, n: int = 20000, seed: int = 0) -> float:
    """Two-sided permutation p-value of a Pearson correlation (fixed seed: deterministic)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    b = np.asarray(b)
    hits = sum(abs(_pearson(a, rng.permutation(b))) >= abs(r) - 1e-12 for _ in range(n))
    return (hits + 1) / (n + 1)


def inflight_correlation(record: dict) -> dict:
    """Correlation of x copy_ with the theoretical KiB in flight over the no-hints one-shot cells: with every cell,
    without Tukey outliers of x copy_ (beyond 1.5 IQR from the quartiles), and Spearman's rank correlation; a
    direction is supported only if all three have the same sign and each permutation p-value is below 0.05."""
    import numpy as np

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
        r = _pearson(a, b)
        out[key] = {"r": r, "p": _perm_p(a, b, r), "n": len(a)}
    signs = {np.sign(out[k]["r"]) for k in ("all", "without_outliers", "spearman")}
    out["supported"] = len(signs) == 1 and all(out[k]["p"] < 0.05 for k in ("all", "without_outliers", "spearman"))
    out["direction"] = ("more in flight, slower" if out["all"]["r"] > 0 else "more in flight, faster") \
        if out["supported"] else None
    return out


def correlation_text(cor: dict) -> str:
    f = lambda k: f"r = {cor[k]['r']:+.2f} (n = {cor[k]['n']}, permutation p = {cor[k]['p']:.3f})"  # noqa: E731
    outl = ", ".join(f"{n} ({x:.3f}x)" for n, x in cor["outliers"]) or "none"
    verdict = (f"all three agree and are significant: **{cor['direction']}**." if cor["supported"] else
               "they do not all agree in sign and significance, so **the record supports no direction**: theoretical "
               "bytes in flight do not order these cells.")
    w = cor["without_outliers"]
    if not cor["supported"] and w["p"] < 0.05:
        verdict += (f" Only without the outliers is the correlation significant ("
                    f"{'more in flight, slower' if w['r'] > 0 else 'more in flight, faster'}), so that holds for the "
                    f"cells near copy_ only, and is a hypothesis, not a finding.")
    return (f"No-hints one-shot cells: theoretical load bytes in flight per SM {cor['kib_min']:.0f} to "
            f"{cor['kib_max']:.0f} KiB. Correlation of x copy_ with them: all cells {f('all')}; without the outliers "
            f"of x copy_ (Tukey: beyond 1.5 IQR from the quartiles: {outl}) {f('without_outliers')}; Spearman "
            f"(ranks, all cells) {f('spearman')}. Rule: a direction is claimed only if the three agree in sign and "
            f"each p < 0.05; {verdict}")


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


def knee_table(knee: dict) -> str:
    lines = ["| KiB in flight/SM (theor.) | threads/SM (theor.) | cells | x copy_ | x copy_ x KiB | flat? "
             "| implied latency (ns, Little) |", "|---|---|---|---|---|---|---|"]
    for lv in knee["levels"]:
        lines.append(f"| {lv['kib']:.0f} | {lv['threads_per_sm']} | {', '.join(lv['cells'])} | {lv['x_lo']:.3f} to "
                     f"{lv['x_hi']:.3f} | {lv['x_times_kib']:.2f} | {'yes' if lv['flat'] else 'no'} | "
                     f"{lv['implied_latency_ns']:.0f}" + ("" if not lv["flat"] else " (not latency-bound)") + " |")
    return "\n".join(lines)


NEEDED_KIB = 26  # the prediction's Little's-law estimate (assumed 0.8 us latency): a prediction, not a measurement


def knee_text(knee: dict) -> str:
    lo, hi = knee["knee_above_kib"], knee["knee_at_most_kib"]
    if lo is None or hi is None:
        return "The grid-stride cells show no knee (all flat or none flat) within this sweep."
    held = lo < NEEDED_KIB <= hi
    b = [lv for lv in knee["levels"] if not lv["flat"]]
    n_lo, n_hi = knee["needed_kib_range"]
    return (f"**What the grid-stride cells show.** Time is flat (every cell within "
            f"{100 * knee['flat_within']:.0f} % of the fastest grid-stride cell) from {hi:.0f} KiB of theoretical "
            f"loads in flight per SM up, and grows as the in-flight bytes shrink below that: the knee lies between "
            f"{lo:.0f} and {hi:.0f} KiB per SM. Below it, from {b[0]['kib']:.0f} to {b[-1]['kib']:.0f} KiB (x"
            f"{b[-1]['kib'] / b[0]['kib']:.0f} in flight), x copy_ falls from {b[0]['x_hi']:.3f} to {b[-1]['x_hi']:.3f} "
            f"(/{b[0]['x_hi'] / b[-1]['x_hi']:.2f}; exactly 1/in-flight would be /{b[-1]['kib'] / b[0]['kib']:.0f}), "
            f"and x copy_ x KiB grows from {b[0]['x_times_kib']:.2f} to {b[-1]['x_times_kib']:.2f}: time falls "
            f"nearly as 1/in-flight at the fewest bytes and less steeply toward the knee, as if the latency grew with "
            f"the load (the table's last column: the latency Little's law implies, "
            f"{b[0]['implied_latency_ns']:.0f} to {b[-1]['implied_latency_ns']:.0f} ns). With those implied latencies and copy_'s read bandwidth, "
            f"Little's law asks for {n_lo:.0f} to {n_hi:.0f} KiB per SM.\n\n"
            f"**Little's-law prediction** (written before the sweep: ~{NEEDED_KIB} KiB per SM needed, from an assumed "
            f"0.8 us latency): the measured knee is between {lo:.0f} and {hi:.0f} KiB -> "
            f"{'HELD' if held else 'MISSED'}" + ("" if held else
            f" ({NEEDED_KIB} KiB is not in that interval: cells with {hi:.0f} KiB are already as fast as those "
            f"with more)") + ". Caveat: these KiB count one float4 in flight per resident thread; if nvcc unrolled "
            "the grid-stride loop (not checked here), each thread has a multiple of that in flight, and the knee in "
            "KiB moves up by that factor (the knee in resident threads per SM, the table's second column, does not).")


def slow_cell_text(record: dict, achieved: dict, others: dict) -> str:
    """The slowest no-hints one-shot cell: theoretical and achieved occupancy, and a labelled hypothesis."""
    one = [c for c in record["cells"] if not c["grid_stride"] and not c["hints"]]
    slow = max(one, key=lambda c: c["x_copy"])
    sms = record["provenance"]["sm_count"]
    blocks = lambda c: -(-record["problem"]["numel"] // (4 * c["threads"] * c["vectors"]))  # noqa: E731
    most = max(blocks(c) for c in one if c is not slow)
    text = (f"The slowest no-hints one-shot cell is **{slow['name']}** ({slow['x_copy']:.3f}x copy_), with a "
            f"*theoretical* occupancy of {slow['occupancy']['occupancy_pct']:.0f} %. ")
    if slow["name"] in achieved:
        pct, entry = achieved[slow["name"]]
        fast = [f"{n} {p:.0f} % ({e})" for n, (p, e) in achieved.items() if n != slow["name"]]
        row = _row(others.get("beyond"), entry)
        its = f", itself {row['x_copy']:.3f}x copy_ in its run" if row else ""
        text += (f"ncu measured an *achieved* occupancy of {pct:.0f} % for {entry}, step 6's build with the same "
                 f"launch shape (expf, no hints){its}; the other profiled shapes: {', '.join(fast)}. ")
        text += (f"At {pct:.0f} % achieved, about {pct / 100 * slow['occupancy']['resident_threads_per_sm']:.0f} "
                 f"threads per SM are resident on average, below the grid-stride knee's "
                 f"{next((lv['threads_per_sm'] for lv in gridstride_knee(record)['levels'] if lv['flat']), 0)} "
                 f"threads per SM (a hypothesis for the time, not a measurement of this cell). ")
    text += (f"**Why the SM stays that empty is not explained by this record.** *Hypothesis* (not tested here): the "
             f"block launch rate. {slow['name']} launches {blocks(slow):,} blocks ({blocks(slow) / sms:,.0f} per SM), "
             f"every other no-hints one-shot cell at most {most:,} ({most / sms:,.0f} per SM); if an SM can start only "
             f"so many blocks per microsecond, short 64-thread blocks finish faster than they are replaced. "
             f"Cells with the same block size but more vectors (fewer blocks) are fast: "
             + ", ".join(f"{c['name']} {c['x_copy']:.3f}x ({blocks(c):,} blocks)" for c in one
                         if c["threads"] == slow["threads"] and c is not slow) + ".")
    return text


# -- the measurement ------------------------------------------------------------------------------------
def measure(cells: list[Cell], *, rounds: int, warmup_ms: float, rep_ms: float, check_trials: int,
            shape=SHAPE) -> dict:
    import torch

    from elu_study.core.build import build_all, compile_variant
    from elu_study.core.check import check_elu
    from elu_study.core.hardware import gpu_spec, provenance
    from elu_study.core.harness import input_tensor
    from elu_study.core.timing import time_interleaved
    from tqdm.auto import tqdm

    build_all([(VARIANT, ()), ("2_float4", ())])
    module, step2 = compile_variant(VARIANT), compile_variant("2_float4")
    instances = set(map(tuple, module.launch_shapes()))
    missing = [c.name for c in cells if c.instance() not in instances]
    if missing:
        raise RuntimeError(f"cells with no instance in {VARIANT}.cu: {missing}")
    regs = registers_by_cell(module, cells)

    def run(c: Cell):
        def fn(x, alpha, out):
            module.set_launch_shape(*c.args())
            return module.elu(x, alpha, out=out)
        return fn

    x = input_tensor(shape)
    y = torch.empty_like(x)
    expected = step2.elu(x, ALPHA)
    rows = []
    step2_check = check_elu(lambda x_, a, out: step2.elu(x_, a, out=out), shape=shape, alpha=ALPHA,
                            trials=check_trials).to_dict()
    for c in tqdm(cells, desc="checking", unit="cell"):
        check = check_elu(run(c), shape=shape, alpha=ALPHA, trials=check_trials).to_dict()
        y.fill_(float("nan"))
        run(c)(x, ALPHA, y)
        torch.cuda.synchronize()
        identical = bool(torch.equal(y, expected))
        usage = regs[c.name]
        rows.append({"name": c.name, **asdict(c), "grid_stride": c.grid_stride, "check": check,
                     "bit_identical_to_2_float4": identical, "correct": check["passed"] and identical,
                     "occupancy": occupancy(c, usage["registers"]), "local_bytes": usage["local"]})
    del expected
    torch.cuda.empty_cache()

    def timed(c: Cell):
        args = c.args()
        return lambda: (module.set_launch_shape(*args), module.elu(x, ALPHA, out=y))

    calls = {"copy_": lambda: y.copy_(x), "2_float4": lambda: step2.elu(x, ALPHA, out=y)}
    calls.update({c.name: timed(c) for c in cells})
    timings = time_interleaved(calls, rounds=rounds, warmup_ms=warmup_ms, rep_ms=rep_ms, progress=True)
    module.set_launch_shape(256, 1, False, 0)  # back to the default (step 2's)
    for r in rows:
        r["timing"] = timings[r["name"]]
    x = y = calls = None  # the closures hold them: release the tensors before the record is written
    torch.cuda.empty_cache()
    prov = provenance()
    spec = gpu_spec(prov["gpu"])
    record = {
        "schema": SCHEMA,
        "provenance": prov,
        "problem": {"shape": list(shape), "dtype": "float32", "alpha": ALPHA, "numel": shape[0] * shape[1]},
        "peak_bytes_per_s": spec.peak_bytes_per_s if spec else None,
        "peak_source": f"{spec.label} {spec.source}" if spec else None,
        "kernel": f"kernels/{VARIANT}.cu",
        "method": {
            "rounds": rounds, "warmup_ms": warmup_ms, "rep_ms": rep_ms, "interleaved": True,
            "check_trials": check_trials,
            "check": "check.check_elu (randn x 4, NaN-poisoned output, atol = rtol = 1e-4) on fresh inputs, and the "
                     "output on the timing input compared bit for bit with 2_float4's",
            "timed_call": "module.set_launch_shape(threads, vectors, hints, blocks_per_sm); module.elu(x, 1.0, out=y) "
                          "(setting the shape is host-only: a table lookup, not in the CUDA-event time)",
            "noise": "per entry, the spread (max - min) of its round medians (timing.noise_ms)",
            "occupancy": "from each instance's registers (cuobjdump resource usage): 2048 threads, 32 blocks and "
                         "65536 registers per SM, registers allocated per warp in units of 256",
        },
        "references": {
            "copy_": {"what": "y.copy_(x): the same bytes, no math (the measured roof)", "timing": timings["copy_"]},
            "2_float4": {"what": "step 2's own build (256 x 1, no hints)", "check": step2_check,
                         "timing": timings["2_float4"]},
        },
        "cells": rows,
    }
    return annotate(record)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study launch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--warmup-ms", type=float, default=25.0, help="do_bench warm-up per call and round")
    parser.add_argument("--rep-ms", type=float, default=100.0, help="do_bench timing time per call and round")
    parser.add_argument("--check-trials", type=int, default=1, help="check_elu trials per cell (full size)")
    parser.add_argument("--redraw", action="store_true", help="without a GPU: redraw the recorded run's figures")
    args = parser.parse_args(argv)

    import torch

    cells = plan()
    if not torch.cuda.is_available():
        try:
            record = load()
        except FileNotFoundError as err:
            print(f"NO GPU HERE, and {err}", file=sys.stderr)
            return 1
        print("NO GPU HERE: the recorded launch-shape sweep follows.\n")
        print(table(record))
        print()
        print(summary(record))
        if args.redraw:
            for path in write_figures(record):
                print(f"wrote {path}")
        return 0

    n_calls = len(cells) + len(REFERENCES)
    est = estimate_s(n_calls, args.rounds, args.warmup_ms, args.rep_ms, args.check_trials)
    print(f"launch-shape sweep: {len(cells)} cells ({sum(not c.grid_stride for c in cells)} one-shot, "
          f"{sum(c.grid_stride for c in cells)} grid-stride) + {', '.join(REFERENCES)}, shape {SHAPE} float32; "
          f"{args.check_trials} full-size check(s) per cell, then {args.rounds} interleaved rounds of do_bench "
          f"(warm-up {args.warmup_ms:g} ms, {args.rep_ms:g} ms per call): about {est:.0f} s after one build.")
    record = measure(cells, rounds=args.rounds, warmup_ms=args.warmup_ms, rep_ms=args.rep_ms,
                     check_trials=args.check_trials)
    path = save(record)
    written = write_figures(record)
    print()
    print(table(record))
    print()
    print(summary(record))
    print(f"\nwrote {path} and " + ", ".join(str(p) for p in written))
    bad = [c["name"] for c in record["cells"] if not c["correct"]]
    if bad or not record["references"]["2_float4"]["check"]["passed"]:
        print(f"\nFAILED correctness: {', '.join(bad) or '2_float4'}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
