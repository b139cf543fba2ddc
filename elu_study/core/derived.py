"""The derived columns of a record that holds rows, computed from its measured medians and never stored
(``record.save`` strips them, ``record.read`` annotates), so that no file can disagree with its own measurements."""

from elu_study.core.entries import BYTES_PER_ELEMENT, STREAM_HALVES, roof_for, stream_floor_ms
from elu_study.core.hardware import floor_ms, tbps

ROW_COLUMNS = ("tbps", "pct_of_peak", "x_copy", "roof", "x_roof", "x_roof_sustained")  # per row
RECORD_KEYS = ("floor_ms", "roof_ms", "stream_floor_ms")  # per record
JOBS = ("study", "beyond", "sixteen")  # the records whose rows these are


def annotate(record: dict) -> dict:
    """Every row's TB/s, % of the datasheet floor, x_copy (float32 copy_), x_roof and x_roof_sustained where held."""
    numel = record["problem"]["numel"]
    peak = record.get("peak_bytes_per_s")
    roof = next((r["timing"]["median_ms"] for r in record["rows"] if r["name"] == "copy_"), None)
    record["floor_ms"] = floor_ms(numel, peak) if peak else None
    record["roof_ms"] = roof
    by_name = {r["name"]: r for r in record["rows"]}
    stream = stream_floor_ms(record["rows"])
    if stream is not None:  # a record made before the stream halves were entries has none
        record["stream_floor_ms"] = stream
    for row in record["rows"]:
        ms = row["timing"]["median_ms"]
        # The bytes this row moves, as a share of a float32 read+write stream: 16-bit storage moves half, each
        # half of a stream (read_only, write_only) moves one direction only, and a backward row three streams.
        share = BYTES_PER_ELEMENT[row.get("mode", "")] / 4 * (0.5 if row["name"] in STREAM_HALVES else 1.0)
        share *= 1.5 if row.get("direction") == "backward" else 1.0
        row["tbps"] = tbps(numel, ms) * share
        row["pct_of_peak"] = 100 * record["floor_ms"] * share / ms if peak else None
        row["x_copy"] = ms / roof if roof else None
        own = by_name.get(roof_for(row.get("direction", "forward"), row.get("dtype", "float32")))
        row["roof"] = own["name"] if own else None
        row["x_roof"] = ms / own["timing"]["median_ms"] if own else None
        held = row["timing"].get("sustained"), (own or {}).get("timing", {}).get("sustained")
        row["x_roof_sustained"] = held[0]["median_ms"] / held[1]["median_ms"] if all(held) else None
    return record


def strip(record: dict) -> dict:
    """The record without its derived columns: what is saved."""
    kept = {k: v for k, v in record.items() if k not in RECORD_KEYS}
    return kept | {"rows": [{k: v for k, v in r.items() if k not in ROW_COLUMNS} for r in record["rows"]]}
