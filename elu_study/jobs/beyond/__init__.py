"""Step 6's experiments: can a kernel beat copy_, and the sure way past it (fewer bytes).

``python -m elu_study beyond`` (GPU, ncu): builds every attempt of ``entries.ATTEMPTS`` (each one
knob of ``kernels/6_beyond_copy.cu`` changed from ``6_base``), checks them, and times them in the
same interleaved rounds as copy_, the two halves of a stream (read_only, write_only), step 2,
step 2 with 128-thread blocks and step 6 itself; then reads each attempt's DRAM counters with
Nsight Compute; then checks the 16-bit storage path on every one of the 65,536 bit patterns of
float16 and bfloat16 against F.elu in that dtype; then times step 6 against copy_ again in
``--processes`` fresh processes, since a margin of a percent must survive a new process to count.
Everything goes to results/<gpu>-beyond.json and its figures; notebook 08 reads them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from elu_study.core.record import REFERENCE_GPU, figure_path, load, save, save_figure, write_block
from elu_study.core.tables import markdown
from elu_study.jobs.beyond import analysis, figures, measure


def write_report(gpu: str = REFERENCE_GPU, readme: bool = True) -> list[Path]:
    """Step 6's figures and (unless ``readme`` is False) the README's beyond block again from ``gpu``'s record
    (no GPU needed); nothing where that GPU has no beyond record."""
    record = load(gpu, "beyond", required=False)
    if record is None:
        return []
    paths = [save_figure(fig, figure_path(gpu, name)) for name, fig in figures.figures(record).items()]
    if readme:
        paths.append(write_block("beyond", analysis.readme_block(record)))
    return paths


def parse_args(argv: list[str] | None):
    parser = argparse.ArgumentParser(prog="python -m elu_study beyond", description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=3, help="fresh processes that time step 6 against copy_ again")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-counters", action="store_true", help="skip Nsight Compute")
    parser.add_argument("--confirm", nargs="+", metavar="ATTEMPT",
                        help="only time these attempts again in fresh processes, beside copy_ and step 6, and add "
                             "that to the existing record")
    return parser.parse_args(argv)


def print_processes(runs: list[dict]) -> None:
    for run in runs:
        print({k: round(v["x_copy"], 4) for k, v in run.items()})


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        record = load(REFERENCE_GPU, "beyond")
        print("NO GPU HERE: the recorded run of step 6's attempts:\n")
        print(markdown(analysis.summary_frame(record)))
        return 0
    if args.confirm:
        record = measure.confirm(args.confirm, args.processes)
        path = save(record, "beyond")
        write_block("beyond", analysis.readme_block(record))
        print_processes(record["confirmation"]["processes"])
        print(f"wrote {path}")
        return 0
    record = measure.run(processes=args.processes, rounds=args.rounds, profile_counters=not args.no_counters)
    path = save(record, "beyond")
    written = write_report(record["provenance"]["gpu"])
    print(markdown(analysis.summary_frame(record)))
    print(json.dumps(record["accuracy16"], indent=1))
    print_processes(record["processes"])
    print(f"\nwrote {path} and {', '.join(map(str, written))}")
    failed = [r["name"] for r in record["rows"] if r["check"] and not r["check"]["passed"]]
    bad16 = [f"{n} {d}" for n, a in record["accuracy16"].items() for d, c in a.items() if not c["passed"]]
    if failed or bad16:
        print(f"FAILED: {failed + bad16}", file=sys.stderr)
        return 1
    return 0
