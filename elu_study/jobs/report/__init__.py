"""``python -m elu_study report [gpu]``: every job's figures again, for every GPU with records (or the one named),
and the README's blocks from the reference GPU's, all from the committed records (no GPU needed)."""

import argparse
from pathlib import Path

from elu_study.core import record
from elu_study.jobs import beyond, launch, model, sixteen, sizes, study
from elu_study.jobs.beyond import analysis as beyond_analysis
from elu_study.jobs.report import front
from elu_study.jobs.sizes.notebook import block as sizes_block
from elu_study.jobs.study import report as study_report

# The jobs whose records make figures or README blocks, in the README's order.
REPORTS = {"study": study, "sizes": sizes, "beyond": beyond, "launch": launch, "model": model, "sixteen": sixteen}


def write(gpu: str, readme: bool = True) -> list[Path]:
    """Regenerate what every job with a record for ``gpu`` draws and, for the reference GPU (the README's), writes
    into the README, then its first screen."""
    readme = readme and record.slug(gpu) == record.REFERENCE_GPU  # another GPU's show in the first screen's table
    paths = [p for job, module in REPORTS.items() if record.record_path(gpu, job).is_file()
             for p in module.write_report(gpu, readme=readme)]
    paths += front.write_figure(gpu) if record.record_path(gpu).is_file() else []
    if readme:
        paths += [record.write_block(name, text) for name, text in front.blocks(gpu).items()]
    return paths


def blocks(gpu: str = record.REFERENCE_GPU) -> dict[str, str]:
    """{block name: text} as ``write`` writes them, without drawing a figure."""
    out = front.blocks(gpu)
    for job, name, make in (("study", study_report.README_BLOCK, study_report.readme_block),
                            ("sizes", "sizes", sizes_block), ("beyond", "beyond", beyond_analysis.readme_block)):
        if rec := record.load(gpu, job, required=False):
            out[name] = make(rec)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study report", description=__doc__.split("\n\n")[0])
    parser.add_argument("gpu", nargs="?", help="only this GPU's (default: every GPU with a main record)")
    parser.add_argument("--no-readme", action="store_true", help="figures only, README untouched")
    args = parser.parse_args(argv)
    for gpu in [args.gpu] if args.gpu else record.gpus():
        for path in write(gpu, readme=not args.no_readme):
            print(f"wrote {path}")
    return 0
