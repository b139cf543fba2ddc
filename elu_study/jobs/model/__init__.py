"""The drop-in in use (GPU): ``python -m elu_study model`` writes results/<gpu>-model.json and its figures.

Its parts, run apart with ``--parts`` over the committed record's others, each stamped with its commit:
``checks`` (checks.py), ``host`` (host_cost and host_profile, host.py), ``eager`` and ``compiled`` (end_to_end's
rows without and with torch.compile, end_to_end.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from elu_study.core import hardware, text
from elu_study.core.record import REFERENCE_GPU, RecordError, figure_path, load, save, save_figure
from elu_study.jobs.model import analysis, checks, end_to_end, host
from elu_study.pytorch import ops

PARTS = ("checks", "host", "eager", "compiled")


def write_report(gpu: str = REFERENCE_GPU, readme: bool = True) -> list[Path]:
    """The model figures again from ``gpu``'s record (no GPU needed); nothing where that GPU has none.
    (``readme`` is the report loop's switch: this job writes no README block.)"""
    record = load(gpu, "model", required=False)
    if record is None:
        return []
    return [save_figure(analysis.host_figure(record), figure_path(gpu, "model-host")),
            save_figure(analysis.end_to_end_figure(record), figure_path(gpu, "model"))]


def run(parts=PARTS, previous: dict | None = None) -> dict:
    """Run ``parts`` (both default builds built first), over ``previous``'s other parts where given."""
    ops.module_for(None)
    prov = hardware.provenance()
    record = {**(previous or {}), "provenance": prov, "defaults": ops.table().to_dict("records")}
    record["parts"] = dict(record.get("parts", {}))
    for part in parts:
        if part == "checks":
            record["checks"] = checks.run_checks()
        elif part == "host":
            record["host_cost"], record["host_profile"] = host.measure_host(), host.measure_profile()
        else:
            compiled = part == "compiled"
            kept = [r for r in record.get("end_to_end", []) if r["compiled"] != compiled]
            record["end_to_end"] = kept + end_to_end.measure_end_to_end(compiled)
        record["parts"][part] = {"commit": prov.get("commit"), "date_utc": prov.get("date_utc")}
        torch.cuda.synchronize()
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study model", description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {PARTS}")
    parser.add_argument("--no-record", action="store_true", help="print only, write no record")
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if unknown := set(parts) - set(PARTS):
        parser.error(f"unknown parts {sorted(unknown)}; parts: {', '.join(PARTS)}")
    if not torch.cuda.is_available():
        parser.exit(2, "elu-study model: needs a CUDA GPU (notebook 11 shows the record)\n")
    try:
        previous = None if set(parts) == set(PARTS) else load(torch.cuda.get_device_name(), "model", required=False)
    except RecordError:  # a record of an older schema: these parts start a new one
        previous = None
    record = run(parts, previous)
    print(text.render("model/bars.md.j2", bars=analysis.bars(record)))
    if not args.no_record:
        written = [save(record, "model"), *write_report(record["provenance"]["gpu"])]
        print(f"\nwrote {', '.join(map(str, written))}")
    return 0
