"""The launch-shape sweep, ``python -m elu_study launch``: step 2's kernel in every launch shape (one-shot grids:
threads x float4s x hints; grid-stride loops: blocks per SM x threads) from one build of
kernels/sweeps/launch_shapes.cu; on a GPU each cell checked, then timed with copy_ and 2_float4 in interleaved rounds:
results/<gpu>-launch.json and its heatmaps (notebook 10 shows them)."""

import argparse
import sys
from pathlib import Path

import torch

from elu_study.core.record import REFERENCE_GPU, load, save
from elu_study.core.timing import REP_MS, WARMUP_MS
from elu_study.jobs.launch import measure  # the module: a function of the same name would shadow it here
from elu_study.jobs.launch.analysis import plan
from elu_study.jobs.launch.figures import write_figures
from elu_study.jobs.launch.notebook import cells


def write_report(gpu: str = REFERENCE_GPU, readme: bool = True) -> list[Path]:
    """The heatmaps again from the GPU's committed record. The job has no README block: ``readme`` changes nothing."""
    return write_figures(load(gpu, "launch"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study launch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--warmup-ms", type=float, default=WARMUP_MS, help="do_bench warm-up per call, round")
    parser.add_argument("--rep-ms", type=float, default=REP_MS, help="do_bench time per call, round")
    parser.add_argument("--check-trials", type=int, default=1, help="full-size check_elu trials per cell")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.exit(2, "elu-study launch: needs a CUDA GPU (notebook 10 shows the record)\n")
    record = measure.measure(plan(), rounds=args.rounds, warmup_ms=args.warmup_ms, rep_ms=args.rep_ms,
                             check_trials=args.check_trials)
    print(f"\n{cells(record)}")
    for path in [save(record, "launch"), *write_figures(record)]:
        print(f"wrote {path}")
    bad = [c["name"] for c in record["cells"] if not c["correct"]]
    if bad or not record["references"]["2_float4"]["check"]["passed"]:
        print(f"\nFAILED correctness: {', '.join(bad) or '2_float4'}", file=sys.stderr)
        return 1
    return 0
