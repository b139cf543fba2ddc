"""The launch-shape sweep: ``python -m elu_study launch``.

Step 2's kernel in every launch shape (one-shot grids: threads x float4s x hints; grid-stride loops: blocks per SM x
threads), one build of ``kernels/sweeps/launch_shapes.cu``. A GPU checks and times every cell with ``copy_`` and
``2_float4`` in interleaved rounds (``results/<gpu>-launch.json``, heatmaps); without one, the recorded run is printed
(``--redraw``: its figures). Modules: analysis (the plan, the numbers), measure, figures, text (templates/launch/).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from elu_study.core.hardware import SHAPE
from elu_study.core.record import REFERENCE_GPU, RecordError, load, save
from elu_study.core.text import render
from elu_study.jobs.launch import measure  # the module: a function of the same name would shadow it here
from elu_study.jobs.launch.analysis import REFERENCES, plan
from elu_study.jobs.launch.figures import write_figures
from elu_study.jobs.launch.text import summary, table


def write_report(gpu: str = REFERENCE_GPU, readme: bool = True) -> list[Path]:
    """The heatmaps again from the GPU's committed record. The job has no README block: ``readme`` changes nothing."""
    return write_figures(load(gpu, "launch"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study launch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--warmup-ms", type=float, default=25.0, help="do_bench warm-up per call, round")
    parser.add_argument("--rep-ms", type=float, default=100.0, help="do_bench time per call, round")
    parser.add_argument("--check-trials", type=int, default=1, help="full-size check_elu trials per cell")
    parser.add_argument("--redraw", action="store_true", help="without a GPU: redraw figures")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():  # the recorded sweep (and its figures again with --redraw)
        try:
            record = load(job="launch")
        except RecordError as err:
            print(f"NO GPU HERE, and {err}", file=sys.stderr)
            return 1
        print(f"NO GPU HERE; the recorded sweep:\n\n{table(record)}\n\n{summary(record)}")
        for path in write_figures(record) if args.redraw else []:
            print(f"wrote {path}")
        return 0
    cells = plan()  # about 3.1 ms a call (copy_'s on the H200) x 5 for do_bench's estimate, + 15 %; checks: 0.3 s each
    calls, call_s = len(cells) + len(REFERENCES), (5 * 3.1 + args.warmup_ms + args.rep_ms) * 1.15 / 1e3
    est = calls * (args.rounds * call_s + 0.3 * args.check_trials + 0.05)
    print(render("launch/plan.md.j2", one_shot=sum(not c.grid_stride for c in cells), references=REFERENCES,
                 grid_stride=sum(c.grid_stride for c in cells), shape=SHAPE, trials=args.check_trials,
                 rounds=args.rounds, warmup_ms=args.warmup_ms, rep_ms=args.rep_ms, est=est))
    record = measure.measure(cells, rounds=args.rounds, warmup_ms=args.warmup_ms, rep_ms=args.rep_ms,
                             check_trials=args.check_trials)
    print(f"\n{table(record)}\n\n{summary(record)}")
    for path in [save(record, "launch"), *write_figures(record)]:
        print(f"wrote {path}")
    bad = [c["name"] for c in record["cells"] if not c["correct"]]
    if bad or not record["references"]["2_float4"]["check"]["passed"]:
        print(f"\nFAILED correctness: {', '.join(bad) or '2_float4'}", file=sys.stderr)
        return 1
    return 0
