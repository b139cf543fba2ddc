"""The drop-in in use (GPU): ``python -m elu_study model`` writes results/<gpu>-model.json and its figures.

What a user who swaps ``elu_study.ELU`` into a model meets: the checks of the operator on the GPU (opcheck,
gradients, CUDA graphs, export, compile, autocast, layouts, bits and accuracy), the host's cost per call route by
route (``host_cost``), and whole training and inference steps of four models with nn.ELU and with the drop-in
(``end_to_end``). ``--parts`` runs some of them over the committed record's others (measure.PARTS).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from elu_study.core.record import REFERENCE_GPU, VERSIONS, RecordError, figure_path, load, save, save_figure
from elu_study.jobs.model import analysis, figures, measure

RECORD_SCHEMA = 4  # defaults, checks, host_cost, host_profile, end_to_end, parts


def write_report(gpu: str = REFERENCE_GPU, readme: bool = True) -> list[Path]:
    """The model figures again from ``gpu``'s record (no GPU needed); nothing where that GPU has none.
    (``readme`` is the report loop's switch: this job writes no README block.)"""
    record = analysis.read_record(gpu, required=False)
    if record is None:
        return []
    return [save_figure(figures.host_figure(record), figure_path(gpu, "model-host")),
            save_figure(figures.end_to_end_figure(record), figure_path(gpu, "model"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study model", description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(measure.PARTS), help=f"comma-separated, of {measure.PARTS}")
    parser.add_argument("--no-record", action="store_true", help="print only; write nothing under results/")
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if unknown := set(parts) - set(measure.PARTS):
        parser.error(f"unknown parts {sorted(unknown)}; parts: {', '.join(measure.PARTS)}")
    if not torch.cuda.is_available():
        print("elu-study model: needs a CUDA GPU (the recorded run is results/nvidia-h200-model.json; "
              "notebooks/11_in_a_model.ipynb shows it)", file=sys.stderr)
        return 2
    if VERSIONS["model"] != RECORD_SCHEMA:
        print(f"elu-study model: this code writes schema {RECORD_SCHEMA}; core/record.py reads "
              f"{VERSIONS['model']}", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    try:
        previous = None if set(parts) == set(measure.PARTS) else load(gpu, "model", required=False)
    except RecordError:  # a record of an older schema: these parts start a new one
        previous = None
    record = measure.run(parts, previous)
    print(analysis.summary(record).to_string(index=False))
    if not args.no_record:
        path = save(record, "model")
        written = write_report(record["provenance"]["gpu"])
        print(f"\nwrote {path} and {', '.join(map(str, written))}")
    return 0
