"""The drop-in in use (GPU): ``python -m elu_study model`` writes results/<gpu>-model.json and its figures."""

import argparse
from pathlib import Path

import torch

from elu_study.core import hardware
from elu_study.core.record import REFERENCE_GPU, figure_path, load, save, save_figure
from elu_study.jobs.model import analysis, checks, end_to_end, host
from elu_study.pytorch import ops


def write_report(gpu: str = REFERENCE_GPU, readme: bool = True) -> list[Path]:
    """The model figures again from ``gpu``'s record, if any (no GPU needed; ``readme``: no README block here)."""
    record = load(gpu, "model", required=False)
    return [save_figure(analysis.host_figure(record), figure_path(gpu, "model-host")),
            save_figure(analysis.end_to_end_figure(record), figure_path(gpu, "model"))] if record else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study model", description=__doc__.splitlines()[0])
    parser.add_argument("--no-record", action="store_true", help="print only, write no record")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.exit(2, "elu-study model: needs a CUDA GPU (notebook 11 shows the record)\n")
    ops.module_for(None)  # both default builds built first
    record = {"provenance": hardware.provenance(), "defaults": ops.table().to_dict("records"), "checks": {
        "accuracy": checks.accuracy(), "opcheck": checks.opchecks(), "gradients": checks.gradients(),
        "cuda_graph": checks.cuda_graph(), "layouts_and_tracing": checks.layouts_and_tracing()}}
    torch.cuda.synchronize()
    record["host_cost"] = host.measure_host()
    record["end_to_end"] = end_to_end.measure_end_to_end(False) + end_to_end.measure_end_to_end(True)
    print(analysis.graded(record))
    if not args.no_record:
        written = [save(record, "model"), *write_report(record["provenance"]["gpu"])]
        print(f"\nwrote {', '.join(map(str, written))}")
    return 0
