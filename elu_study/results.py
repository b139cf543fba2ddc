"""Results records: saved as results/<gpu>.json by the harness, read back as tables."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd

from .hardware import slug

RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"
REFERENCE_GPU = "nvidia-h200"  # the record shown where there is no GPU
README = RESULTS_DIR.parent / "README.md"
TABLE_BEGIN, TABLE_END = "<!-- results-table:begin -->", "<!-- results-table:end -->"


def record_path(gpu_name_or_slug: str, job: str = "", results_dir: Path | None = None) -> Path:
    """results/<gpu>.json (the main study's record), or results/<gpu>-<job>.json (a job's own: ncu, sizes, ...)."""
    return Path(results_dir or RESULTS_DIR) / f"{slug(gpu_name_or_slug)}{'-' + job if job else ''}.json"


def save(record: dict, job: str = "", results_dir: Path | None = None) -> Path:
    """Write a record where record_path puts it, as indented JSON."""
    path = record_path(record["provenance"]["gpu"], job, results_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def _finite(obj):
    """The record with every non-finite float replaced by None (strict JSON)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def dumps(record: dict) -> str:
    """Strict JSON, one key per line, lists of numbers on one line (a compact, diffable file)."""
    text = json.dumps(_finite(record), indent=1, allow_nan=False)
    return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + re.sub(r"\s*\n\s*", " ", m.group(1)) + "]", text)


def load(gpu_name_or_slug: str = REFERENCE_GPU) -> dict:
    path = record_path(gpu_name_or_slug)
    if not path.exists():
        known = ", ".join(p.stem for p in sorted(RESULTS_DIR.glob("*.json"))) or "none"
        raise FileNotFoundError(f"no results recorded for {gpu_name_or_slug!r} (recorded: {known})")
    return json.loads(path.read_text())


def row(record: dict, name: str) -> dict:
    for r in record["rows"]:
        if r["name"] == name:
            return r
    raise KeyError(f"{name!r} is not in this record; it holds {[r['name'] for r in record['rows']]}")


def noise(record: dict, *names: str) -> float:
    """Run-to-run noise of these entries: the largest spread of their round medians, over copy_'s time."""
    from .timing import noise_ms

    return max(noise_ms(row(record, n)["timing"]) for n in names) / record["roof_ms"]


def frame(record: dict, kinds=("step", "baseline", "peer")) -> pd.DataFrame:
    """One line per entry: time, bandwidth, share of the datasheet peak, ratio to copy_, verdict."""
    rows = [r for r in record["rows"] if r["kind"] in kinds]
    df = pd.DataFrame(
        {
            "entry": [r["name"] for r in rows],
            "what": [r["what"] for r in rows],
            "ms": [r["timing"]["median_ms"] for r in rows],
            "TB/s": [r["tbps"] for r in rows],
            "% of peak": [r["pct_of_peak"] for r in rows],
            "x copy_": [r["x_copy"] for r in rows],
            "p90/median": [r["timing"]["p90_ms"] / r["timing"]["median_ms"] for r in rows],
            "correct": [("yes" if r["check"]["passed"] else "NO") if r["check"] else "n/a" for r in rows],
            "max abs err vs fp64": [r["check"]["max_abs_err_vs_fp64"] if r["check"] else None for r in rows],
        }
    )
    return df.set_index("entry")


FORMATS = {"ms": "{:.3f}", "TB/s": "{:.2f}", "% of peak": "{:.1f}", "x copy_": "{:.3f}", "p90/median": "{:.3f}",
           "max abs err vs fp64": "{:.1e}"}


def markdown(df: pd.DataFrame, formats: dict | None = None) -> str:
    """A pipe table; every measured float printed with a decimal point or exponent (3 decimals by default)."""
    shown = df.copy()
    formats = {**FORMATS, **(formats or {})}
    for column in shown:
        fmt = formats.get(column)
        values = list(shown[column])
        if fmt is None and not all(isinstance(v, float) or v is None for v in values):
            continue
        fmt = fmt or "{:.3f}"
        shown[column] = [fmt.format(v) if v is not None and v == v else "" for v in values]
    return shown.to_markdown(disable_numparse=True)


def caption(record: dict) -> str:
    p = record["provenance"]
    floor = f"datasheet floor {record['floor_ms']:.2f} ms ({record['peak_source']})" if record["floor_ms"] else "no datasheet figure for this GPU"
    if record.get("stream_floor_ms"):
        floor += f"; measured stream floor {record['stream_floor_ms']:.2f} ms (read_only + write_only)"
    method = record.get("method", {})
    rounds = f" in {method['rounds']} interleaved rounds" if method.get("rounds") else ""
    return (
        f"{p['gpu']} ({p['sm_count']} SMs), driver {p['driver']}, CUDA {p['cuda_runtime']}, torch {p['torch']}, "
        f"nvcc {p['nvcc']}, {p['date_utc'][:10]}; shape {tuple(record['problem']['shape'])} float32; {floor}; "
        f"median of {_runs(record)} CUDA-event-timed runs per entry{rounds}."
    )


def _runs(record: dict) -> str:
    runs = sorted({r["timing"]["runs"] for r in record["rows"]})
    return f"{runs[0]}" if len(runs) == 1 else f"{runs[0]}-{runs[-1]}"


def update_readme(record: dict, extra: list[str] | tuple[str, ...] = (), readme: Path = README) -> None:
    """Replace the README's results block with a table generated from the record, then ``extra`` lines."""
    text = readme.read_text()
    head, _, rest = text.partition(TABLE_BEGIN)
    _, _, tail = rest.partition(TABLE_END)
    if not rest:
        raise ValueError(f"{readme} has no {TABLE_BEGIN} ... {TABLE_END} block")
    body = [markdown(frame(record)), "", caption(record), *extra]
    readme.write_text(head + TABLE_BEGIN + "\n" + "\n".join(body) + "\n" + TABLE_END + tail)
