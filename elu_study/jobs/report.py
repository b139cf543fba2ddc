"""``python -m elu_study report [gpu]``: every job's figures and README block again, from the committed
records, with no GPU. A loop over each job's one ``write_report(gpu)``; a job without a record for
that GPU is skipped."""

from __future__ import annotations

import argparse
from pathlib import Path

from elu_study.core import record
from elu_study.jobs import beyond, launch, model, sizes, study

# The jobs whose records make figures or README blocks, in the README's order.
REPORTS = {"study": study, "sizes": sizes, "beyond": beyond, "launch": launch, "model": model}


def write(gpu: str, readme: bool = True) -> list[Path]:
    """Regenerate what every job with a record for ``gpu`` draws and writes."""
    paths = []
    for job, module in REPORTS.items():
        if record.record_path(gpu, job).is_file():
            paths += module.write_report(gpu, readme=readme)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study report", description=__doc__.split("\n\n")[0])
    parser.add_argument("gpu", nargs="?", default=record.REFERENCE_GPU)
    parser.add_argument("--no-readme", action="store_true", help="figures only; leave the README as it is")
    args = parser.parse_args(argv)
    for path in write(args.gpu, readme=not args.no_readme):
        print(f"wrote {path}")
    return 0
