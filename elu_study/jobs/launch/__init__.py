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

The package: ``shapes`` (the plan and occupancy), ``measure`` (the GPU run), ``analysis`` (the record's numbers
and the same GPU's other records), ``figures`` (the heatmaps), ``text`` (tables and verdicts). The job has no
README block: ``write_report`` redraws the heatmaps only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from elu_study.core.hardware import SHAPE
from elu_study.core.record import REFERENCE_GPU, RecordError, load, save
from elu_study.jobs.launch import measure  # the module: a function of the same name would shadow it here
from elu_study.jobs.launch.figures import write_figures
from elu_study.jobs.launch.shapes import REFERENCES, estimate_s, plan
from elu_study.jobs.launch.text import summary, table


def write_report(gpu: str = REFERENCE_GPU, readme: bool = True) -> list[Path]:
    """The heatmaps again from the GPU's committed record (no GPU needed). The job has no README block, so
    ``readme`` (which the report job passes to every job) changes nothing here."""
    return write_figures(load(gpu, "launch"))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m elu_study launch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--warmup-ms", type=float, default=25.0, help="do_bench warm-up per call and round")
    parser.add_argument("--rep-ms", type=float, default=100.0, help="do_bench timing time per call and round")
    parser.add_argument("--check-trials", type=int, default=1, help="check_elu trials per cell (full size)")
    parser.add_argument("--redraw", action="store_true", help="without a GPU: redraw the recorded run's figures")
    return parser.parse_args(argv)


def show_recorded(redraw: bool) -> int:
    """Without a GPU: the recorded sweep's table and summary (and its figures again with ``redraw``)."""
    try:
        record = load(job="launch")
    except RecordError as err:
        print(f"NO GPU HERE, and {err}", file=sys.stderr)
        return 1
    print("NO GPU HERE: the recorded launch-shape sweep follows.\n")
    print(table(record))
    print()
    print(summary(record))
    if redraw:
        for path in write_figures(record):
            print(f"wrote {path}")
    return 0


def run_sweep(args: argparse.Namespace) -> int:
    """On a GPU: measure every cell, save the record and its figures, print the table and the summary."""
    cells = plan()
    n_calls = len(cells) + len(REFERENCES)
    est = estimate_s(n_calls, args.rounds, args.warmup_ms, args.rep_ms, args.check_trials)
    print(f"launch-shape sweep: {len(cells)} cells ({sum(not c.grid_stride for c in cells)} one-shot, "
          f"{sum(c.grid_stride for c in cells)} grid-stride) + {', '.join(REFERENCES)}, shape {SHAPE} float32; "
          f"{args.check_trials} full-size check(s) per cell, then {args.rounds} interleaved rounds of do_bench "
          f"(warm-up {args.warmup_ms:g} ms, {args.rep_ms:g} ms per call): about {est:.0f} s after one build.")
    record = measure.measure(cells, rounds=args.rounds, warmup_ms=args.warmup_ms, rep_ms=args.rep_ms,
                             check_trials=args.check_trials)
    path = save(record, "launch")
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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        return show_recorded(args.redraw)
    return run_sweep(args)

