"""The model job's measurement (GPU), in parts that can be run apart and merged into one record.

- ``checks``: the drop-in's checks (checks.py), with the float32 default's accuracy over every negative float32;
- ``host``: ``host_cost`` and ``host_profile`` (host.py);
- ``eager`` and ``compiled``: ``end_to_end``'s rows without and with torch.compile (end_to_end.py).

Each part is stamped with the commit it ran at (``parts``); a record whose parts ran at different commits
says so, and the notebook names each part's commit.
"""

from __future__ import annotations

import torch
from tqdm import tqdm  # text bars: tqdm.auto warns on stderr in a notebook without ipywidgets

from elu_study.core import hardware
from elu_study.jobs.model import checks, end_to_end, host
from elu_study.pytorch import ops

PARTS = ("checks", "host", "eager", "compiled")


def defaults_rows() -> list[dict]:
    return ops.table().to_dict("records")


def run_part(part: str, record: dict) -> None:
    if part == "checks":
        record["checks"] = checks.run_checks()
    elif part == "host":
        record["host_cost"] = host.measure_host()
        record["host_profile"] = host.measure_profile()
    else:
        compiled = part == "compiled"
        rows = [r for r in record.get("end_to_end", []) if r["compiled"] != compiled]
        record["end_to_end"] = rows + end_to_end.measure_end_to_end(
            compiled=(compiled,), progress=lambda c: tqdm(c, desc=f"end to end, {part}", unit="config"))


def run(parts=PARTS, previous: dict | None = None) -> dict:
    """Run ``parts`` (built first), over ``previous``'s other parts where given."""
    ops.module_for(None)  # both default builds, before anything is timed
    record = dict(previous or {})
    prov = hardware.provenance()
    record["provenance"] = prov
    record["defaults"] = defaults_rows()
    record["parts"] = dict(record.get("parts", {}))
    for part in parts:
        run_part(part, record)
        record["parts"][part] = {"commit": prov.get("commit"), "date_utc": prov.get("date_utc")}
        torch.cuda.synchronize()
    return record
