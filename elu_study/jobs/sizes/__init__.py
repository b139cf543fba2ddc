"""The size sweep, ``python -m elu_study sizes``: on a GPU, every step, peer, module and baseline (not the ablations)
checked and timed cold, warm and on the host at every length of ``plan.plan()``, 2^10 to 2^31 elements; writes
results/<gpu>-sizes.json, its two figures and the README's sizes block (notebook 09 shows the record)."""

import argparse
import sys
from pathlib import Path

import torch

from elu_study.core.build import build_all
from elu_study.core.entries import builds
from elu_study.core.paths import RESULTS_DIR
from elu_study.core.record import REFERENCE_GPU, load, save, slug, write_block
from elu_study.jobs.sizes import measure, plan
from elu_study.jobs.sizes.figures import write_figures
from elu_study.jobs.sizes.notebook import block, entry_table


def write_report(gpu: str = REFERENCE_GPU, readme: bool = True, results_dir: Path | None = None) -> list[Path]:
    """A GPU's saved sweep's figures (none without one) and, for the reference GPU's in results/, the README block."""
    record = load(gpu, "sizes", results_dir, required=False)
    paths = [] if record is None else write_figures(record, results_dir)
    in_results = results_dir is None or Path(results_dir).resolve() == RESULTS_DIR.resolve()
    if record and readme and in_results and slug(gpu) == REFERENCE_GPU:
        paths.append(write_block("sizes", block(record, paths)))
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study sizes", description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-exp", type=int, default=plan.MAX_EXP, help="largest length 2^k (default 31)")
    parser.add_argument("--entries", default=None, help="entry names, comma-separated (default: all)")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR, help="record and figures go here")
    parser.add_argument("--no-readme", action="store_true", help="leave README.md alone")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.exit(2, "elu-study sizes: needs a CUDA GPU (notebook 09 shows the record)\n")
    entries = plan.sweep_entries(args.entries.split(",") if args.entries else None)
    if jobs := builds(entries):
        build_all(jobs)  # also from a process that has used CUDA already (a test session)
    record = measure.measure(entries, plan.plan(args.max_exp))
    for path in [save(record, "sizes", args.results_dir),
                 *write_report(record["provenance"]["gpu"], not args.no_readme, args.results_dir)]:
        print(f"wrote {path}")
    print(f"\n{entry_table(record)}")
    failed = [f"{q['entry']} @ {q['n']}" for q in record["points"] if q.get("check") and not q["check"]["passed"]]
    if failed or record["errors"]:
        print("FAILED:", ", ".join(failed) or "none", "errors:", *record["errors"], sep="\n  ", file=sys.stderr)
        return 1
    return 0
