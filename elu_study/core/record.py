"""The one record format: every job's ``results/<gpu>[-<job>].json``, written and read here only.

Strict JSON whose first key is ``"schema": {"job": <job>, "version": <n>}``; ``read`` refuses another job or version
and a body not of its job's type (``core.schema``; ``python -m elu_study.core.record JOB`` prints its JSON Schema)."""

import argparse
import json
import math
import re
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import msgspec
import torch

from elu_study.core import derived, fingerprint, schema, text
from elu_study.core.paths import README, RESULTS_DIR
from elu_study.core.timing import noise_ms

REFERENCE_GPU = "nvidia-h200"  # the GPU whose committed records are shown where there is no GPU

# job -> the schema version this code reads and writes; bump it when old readers would misread the body.
VERSIONS = dict.fromkeys(("study", "ncu", "accuracy", "sanitize", "beyond", "sizes", "launch", "model", "sixteen",
                          "tests"), 1) | {"model": 4}


class RecordError(ValueError):
    """A record this code cannot read: missing, of another job or version, or not of its type."""


def slug(device_name: str) -> str:
    """A file name for a GPU: "NVIDIA H200" -> "nvidia-h200" (a slug stays a slug)."""
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-")


def _check_job(job: str) -> str:
    if job not in VERSIONS:
        raise RecordError(f"unknown record job {job!r}; jobs: {', '.join(VERSIONS)}")
    return job


def record_path(gpu: str = REFERENCE_GPU, job: str = "study", results_dir: Path | None = None) -> Path:
    """results/<gpu>.json for the main study, results/<gpu>-<job>.json for every other job."""
    suffix = "" if _check_job(job) == "study" else f"-{job}"
    return Path(results_dir or RESULTS_DIR) / f"{slug(gpu)}{suffix}.json"


def held_fingerprint(gpu: str, job: str = "study", results_dir: Path | None = None) -> dict | None:
    """A record's fingerprint ({} if it holds none; None without a record), from its JSON alone: no check, no derive."""
    path = record_path(gpu, job, results_dir)
    return json.loads(path.read_text()).get("fingerprint") or {} if path.is_file() else None


def gpus(results_dir: Path | None = None) -> list[str]:
    """Every GPU (its slug, the file's name) with a main record in the results folder, by the records' schema stamps
    (a GPU's name may end like a job's); the reference GPU first."""
    found = [p.stem for p in Path(results_dir or RESULTS_DIR).glob("*.json")
             if (json.loads(p.read_text()).get("schema") or {}).get("job") == "study"]
    return sorted(found, key=lambda g: (g != REFERENCE_GPU, g))


def figure_path(gpu: str, name: str = "", results_dir: Path | None = None) -> Path:
    """results/<gpu>[-<name>].png: where a record's figure is saved."""
    return Path(results_dir or RESULTS_DIR) / f"{slug(gpu)}{'-' + name if name else ''}.png"


def _finite(obj):
    """Every non-finite float replaced by None (strict JSON)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def dumps(record: dict) -> str:
    """Strict JSON, one key per line, lists of numbers on one line (a compact, diffable file)."""
    text = json.dumps(_finite(record), indent=1, allow_nan=False, default=str)
    return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + re.sub(r"\s*\n\s*", " ", m.group(1)) + "]", text)


def stamped(record: dict, job: str) -> dict:
    """The record with its schema stamp first."""
    body = {k: v for k, v in record.items() if k != "schema"}
    return {"schema": {"job": _check_job(job), "version": VERSIONS[job]}, **body}


def save(record: dict, job: str = "study", results_dir: Path | None = None) -> Path:
    """Write a record (stamped, without derived columns) where record_path puts it."""
    path = record_path(record["provenance"]["gpu"], job, results_dir)
    record = derived.strip(record) if job in derived.JOBS else record
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(stamped(record, job)) + "\n")
    return path


def check_schema(record: dict, job: str, path: Path | str) -> dict:
    """The record, if ``job``'s, of this code's version and strictly of its type; else a RecordError naming the field."""
    found = record.get("schema")
    if not isinstance(found, dict) or found.get("job") != job:
        raise RecordError(f"{path}: not a {job!r} record (its schema stamp is {found!r})")
    if found.get("version") != VERSIONS[job]:
        raise RecordError(f"{path}: {job} record of schema version {found.get('version')!r}; "
                          f"this code reads version {VERSIONS[job]} only (re-run `python -m elu_study {job}` "
                          "or use the code that wrote it)")
    try:
        msgspec.convert(record, schema.TYPES[job], strict=True)
    except msgspec.ValidationError as err:  # "Expected `int`, got `str` - at `$.rows[3].timing.runs`"
        raise RecordError(f"{path}: {err}") from None
    return record


def json_schema(job: str) -> dict:
    """The JSON Schema of a job's record, generated from its type (a number's unit is its "unit")."""
    return {"title": f"elu-study {job} record, schema version {VERSIONS[_check_job(job)]}",
            **msgspec.json.schema(schema.TYPES[job])}


def main(argv: list[str] | None = None) -> int:
    """``python -m elu_study.core.record JOB``: print a job's JSON Schema."""
    parser = argparse.ArgumentParser(prog="python -m elu_study.core.record", description=json_schema.__doc__)
    parser.add_argument("job", choices=VERSIONS)
    print(json.dumps(json_schema(parser.parse_args(argv).job), indent=1, ensure_ascii=False))
    return 0


def read(path: Path | str, job: str) -> dict:
    """The record at ``path``, checked (``check_schema``), with its derived columns."""
    path = Path(path)
    record = check_schema(json.loads(path.read_text()), _check_job(job), path)
    SHOWN[path.name] = dates_of(record)
    BUILDS[path.name] = (record.get("fingerprint") or {}).get("builds")  # None: no fingerprint
    return derived.annotate(record) if job in derived.JOBS else record


SHOWN: dict[str, list[str]] = {}  # every record this process read: file name -> the days it was measured (``shown``)
BUILDS: dict[str, dict[str, str] | None] = {}  # and the builds it was measured with (its fingerprint's; None: none)


def dates_of(record: dict) -> list[str]:
    """The days (UTC) a record's parts were measured: its provenance's and those of parts with their own."""
    found = [record["provenance"].get("date_utc"), record.get("date_utc")]
    for part in record.values():
        if isinstance(part, dict):
            found += [p.get("date_utc") for p in (part.get("provenance"), *part.values()) if isinstance(p, dict)]
    return sorted({d[:10] for d in found if d})


def shown() -> text.Text:
    """For a notebook's last cell: every record it read and the days it was measured (its commit, information only,
    stays in its provenance: whether a record is current is its fingerprint's to say), and the kernel files that
    changed since (``fingerprint.stale_variants``), or that a record holds no fingerprint to tell."""
    rows = [{"file": file, "dates": ", ".join(dates)} for file, dates in sorted(SHOWN.items())]
    stale = sorted({v for file in SHOWN for v in fingerprint.stale_variants(BUILDS.get(file) or {})})
    unknown = [f"results/{file}" for file in sorted(SHOWN) if BUILDS.get(file) is None]
    return text.show("record/shown.md.j2", rows=rows, stale=", ".join(f"`{v}`" for v in stale),
                     unknown=", ".join(unknown))


def load(gpu: str = REFERENCE_GPU, job: str = "study", results_dir: Path | None = None,
         required: bool = True) -> dict | None:
    """A GPU's record of a job, checked; None if there is none and ``required`` is False."""
    path = record_path(gpu, job, results_dir)
    if not path.is_file():
        if not required:
            return None
        known = ", ".join(p.stem for p in sorted(path.parent.glob("*.json"))) or "none"
        raise RecordError(f"no {job} record for {gpu!r} at {path} (recorded: {known}); "
                          f"`python -m elu_study {job}` writes it on a GPU")
    return read(path, job)


def this_gpu() -> str | None:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


def source(job: str, results_dir: Path | None = None, reference: str = REFERENCE_GPU) -> tuple[str, bool]:
    """(gpu, measured_here): this GPU's record of ``job`` if it has one, else the reference GPU's."""
    here = this_gpu()
    return (here, True) if here is not None and record_path(here, job, results_dir).is_file() else (reference, False)


def open_record(job: str) -> dict:
    """For a notebook: ``source``'s record, after a "Data source:" line (notebooks/sanitize.cfg masks it)."""
    gpu, measured_here = source(job)
    rec = load(gpu, job)
    print(text.render("record/source.md.j2", file=record_path(rec["provenance"]["gpu"], job).name, job=job,
                      p=rec["provenance"], here=this_gpu(), measured_here=measured_here))
    return rec


def row(record: dict, name: str) -> dict:
    for r in record["rows"]:
        if r["name"] == name:
            return r
    raise KeyError(f"{name!r} is not in this record; it holds {[r['name'] for r in record['rows']]}")


def noise(record: dict, *names: str) -> float:
    """Run-to-run noise of these entries: the largest spread of their round medians, over copy_'s time."""
    return max(noise_ms(row(record, n)["timing"]) for n in names) / record["roof_ms"]


def block_markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def write_block(name: str, text: str, readme: Path = README) -> Path:
    """Replace the README's ``name`` block (between its begin and end markers) with ``text``."""
    begin, end = block_markers(name)
    readme = Path(readme)
    head, sep, rest = readme.read_text().partition(begin)
    _, sep2, tail = rest.partition(end)
    if not sep or not sep2:
        raise ValueError(f"{readme} has no {begin} ... {end} block")
    readme.write_text(head + begin + "\n" + text + "\n" + end + tail)
    return readme


def readme_link(path: Path, readme: Path = README) -> str:
    """A figure's path as the README links it."""
    return Path(path).resolve().relative_to(Path(readme).resolve().parent).as_posix()


def closed(fig, **layout):
    """The figure laid out (``tight_layout``) and closed: returned to be shown once, as a cell's value, or saved."""
    fig.tight_layout(**layout)
    plt.close(fig)
    return fig


def save_figure(fig, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


if __name__ == "__main__":
    sys.exit(main())
