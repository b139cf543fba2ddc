"""Step 6's experiments: can a kernel beat copy_, and the sure way past it (fewer bytes).

``python -m elu_study beyond`` (GPU, ncu) writes results/<gpu>-beyond.json (``measure.run``)."""

import argparse
import sys
from pathlib import Path

import torch

from elu_study.core.record import REFERENCE_GPU, figure_path, load, save, save_figure, write_block
from elu_study.core.tables import markdown
from elu_study.jobs.beyond import analysis, figures, measure


def write_report(gpu: str = REFERENCE_GPU, readme: bool = True) -> list[Path]:
    """Step 6's figure and (with ``readme``) the README's beyond block from ``gpu``'s record, if it has one."""
    if (record := load(gpu, "beyond", required=False)) is None:
        return []
    paths = [save_figure(figures.times_figure(record), figure_path(gpu, "beyond"))]
    return paths + ([write_block("beyond", analysis.readme_block(record))] if readme else [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study beyond", description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=3, help="fresh processes timing step 6")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-counters", action="store_true", help="skip Nsight Compute")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("No GPU: the recorded run:\n\n" + markdown(analysis.summary_frame(load(REFERENCE_GPU, "beyond"))))
        return 0
    record = measure.run(processes=args.processes, rounds=args.rounds, profile_counters=not args.no_counters)
    written = [save(record, "beyond"), *write_report(record["provenance"]["gpu"])]
    print(markdown(analysis.summary_frame(record)), markdown(analysis.verdict_frame(record)), sep="\n\n")
    print(f"\nwrote {', '.join(map(str, written))}")
    if bad := measure.failed(record):
        print(f"FAILED: {bad}", file=sys.stderr)
    return 1 if bad else 0
