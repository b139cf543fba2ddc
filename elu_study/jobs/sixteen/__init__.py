"""Step 7: 16-bit ELU at its own roof, bit for bit PyTorch's (kernels/7_sixteen_bits.cu, notebook 12).

``python -m elu_study sixteen`` (GPU; ncu optional): builds every step 7 build, the step 6 build and one float32
build per fast formula (``-DELU7_OP=Approx``: elu(x, 1) returns fast(x)); measures each formula's largest
relative distance to expm1f over every negative finite 16-bit input (delta) and whether delta + 3 * 2^-24 <= eps,
the check's own margin, read from the kernel file; runs every build on all 65,536 bit patterns of its dtype at
77 alphas into a NaN-poisoned output, bit for bit against F.elu; reads the 16-bit kernels' static SASS; times
every row against the same dtype's copy_ in interleaved rounds (one batch per dtype); and reads the kernels'
counters with Nsight Compute (skipped, with the reason recorded, where ncu is missing or fails). Everything goes
to results/<gpu>-sixteen.json and its figure results/<gpu>-sixteen.png; notebook 12 reads them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from elu_study.core.record import REFERENCE_GPU, figure_path, load, save, save_figure
from elu_study.core.tables import markdown
from elu_study.jobs.sixteen import analysis, figures, measure


def write_report(gpu: str = REFERENCE_GPU, readme: bool = True) -> list[Path]:
    """Step 7's figure again from ``gpu``'s record (no GPU needed); nothing where that GPU has none. It has no
    README block: ``readme`` is taken for the report loop's sake."""
    record = load(gpu, "sixteen", required=False)
    if record is None:
        return []
    return [save_figure(fig, figure_path(gpu, name)) for name, fig in figures.figures(record).items()]


def parse_args(argv: list[str] | None):
    parser = argparse.ArgumentParser(prog="python -m elu_study sixteen", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds per dtype")
    parser.add_argument("--no-counters", action="store_true", help="skip Nsight Compute")
    return parser.parse_args(argv)


def summary(record: dict) -> str:
    """The run in a few tables, as the job prints it."""
    parts = [f"## {dtype}\n\n" + markdown(analysis.frame(record, dtype), analysis.FORMATS) for dtype in analysis.DTYPES]
    parts.append(markdown(analysis.delta_frame(record), analysis.FORMATS))
    parts.append(analysis.exhaustive_verdict(record))
    budget = analysis.budget_frame(record)
    if not budget.empty:
        parts.append(markdown(budget, analysis.FORMATS))
    elif record["counters"].get("skipped"):
        parts.append(f"counters skipped: {record['counters']['skipped'][-300:]}")
    parts.append(markdown(analysis.goals_frame(record)))
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("python -m elu_study sixteen needs a CUDA GPU: it runs every step 7 build on every 16-bit input and "
              "times it. Notebook 12 shows the recorded run (results/<gpu>-sixteen.json); "
              "`python -m elu_study report` redraws its figure without a GPU.", file=sys.stderr)
        return 2
    record = measure.run(rounds=args.rounds, with_counters=not args.no_counters)
    path = save(record, "sixteen")
    written = write_report(record["provenance"]["gpu"])
    print(summary(record))
    print(f"\nwrote {path} and {', '.join(map(str, written))}")
    bad = analysis.failures(record)
    if bad:
        print("FAILED: " + "; ".join(bad), file=sys.stderr)
        return 1
    return 0
