"""Step 7: 16-bit ELU at its own roof, bit for bit PyTorch's (kernels/7_sixteen_bits.cu, notebook 12).

``python -m elu_study sixteen`` (GPU; ncu optional): every build on every bit pattern at every alpha
(core.exhaustive), the SASS, every row timed against its dtype's copy_, the counters (or why none)."""

import argparse
import sys
from pathlib import Path

import torch

from elu_study.core.record import REFERENCE_GPU, figure_path, load, save, save_figure
from elu_study.core.tables import markdown
from elu_study.jobs.sixteen import analysis, figures, measure


def write_report(gpu: str = REFERENCE_GPU, readme: bool = True) -> list[Path]:
    """Step 7's figure again from ``gpu``'s record, if any (no GPU needed; ``readme``: no README block here)."""
    record = load(gpu, "sixteen", required=False)
    return [save_figure(figures.xcopy_figure(record), figure_path(gpu, "sixteen"))] if record else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study sixteen", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds per dtype")
    parser.add_argument("--no-counters", action="store_true", help="skip Nsight Compute")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.exit(2, "elu-study sixteen: needs a CUDA GPU: it runs every step 7 build on every 16-bit input and times "
                       "it (notebook 12 shows the record; `python -m elu_study report` redraws its figure)\n")
    record = measure.run(rounds=args.rounds, with_counters=not args.no_counters)
    path, written = save(record, "sixteen"), write_report(record["provenance"]["gpu"])
    budget, a = analysis.budget_frame(record), analysis
    print(*(markdown(f(record), a.FORMATS) for f in (a.tried_frame, a.exhaustive_frame, a.resolution_frame,
                                                      a.graded_frame, a.goals_frame)),
          record["counters"].get("skipped") if budget.empty else markdown(budget, a.FORMATS), sep="\n\n")
    print(f"\nwrote {path} and {', '.join(map(str, written))}")
    if bad := analysis.failures(record):
        print("FAILED: " + "; ".join(bad), file=sys.stderr)
    return 1 if bad else 0
