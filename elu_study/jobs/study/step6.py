"""Notebook 08's prose and tables from step 6's record (results/<gpu>-beyond.json); words in templates/study/step6/."""

from __future__ import annotations

import pandas as pd

from elu_study.core import text
from elu_study.core.entries import STEP6_DEFAULT
from elu_study.core.ncu import issue_pct
from elu_study.core.record import noise, row

def one_change(record: dict, name: str, base: str | None = None) -> str:
    """The flags by which an attempt differs from ``base`` (default: its recorded base, e.g. ``6_base``)."""
    r = row(record, name)
    base = base or r.get("base")
    base = set(row(record, base)["flags"]) if base else set()
    return " ".join(f for f in r["flags"] if f not in base)


def against_step6(record: dict, name: str) -> str:
    """A build against step 6's defaults: faster or slower by more than its round-to-round noise, else within it."""
    margin, z = row(record, "6_beyond_copy")["x_copy"] - row(record, name)["x_copy"], noise(record, name, "6_beyond_copy")
    return "faster" if margin > z else "slower" if -margin > z else "within noise"


def faster_than_step6(record: dict) -> list[dict]:
    """The one-change attempts faster than step 6's defaults by more than the noise, fastest first."""
    return sorted((r for r in record["rows"] if r["kind"] == "attempt" and r.get("base") in ("6_base", STEP6_DEFAULT)
                   and not r["mode"] and against_step6(record, r["name"]) == "faster"), key=lambda r: r["x_copy"])


STEP6_AS_FLAGS = "6_evict_last_expm1poly"  # the beyond row that holds step 6's defaults as flags (formula included)


def beat_defaults(record: dict) -> str:
    """Which attempts beat step 6's defaults, each with the flags by which it differs from step 6 itself, which of
    them compute ``expf - 1`` (the formula that cancels near 0), and why they stay attempts."""
    own = any(r["name"] == STEP6_AS_FLAGS for r in record["rows"])  # older records: each against its own base
    faster = [{**r, "change": one_change(record, r["name"], STEP6_AS_FLAGS if own else None),
               "cancels": "-DELU6_OP=Expf" in r["flags"]} for r in faster_than_step6(record)]
    return text.render("study/step6/beat_defaults.md.j2", faster=faster, step6=row(record, "6_beyond_copy")["x_copy"],
                       confirmed=record.get("confirmation", {}).get("names", []), own=own)


def sixteen_bit_frame(record: dict, names) -> pd.DataFrame:
    """16-bit rows: time, x float32 copy_, x the 16-bit copy_ (copy_ of the bfloat16 tensor), issue %."""
    roof16 = row(record, "copy_ bfloat16")["timing"]["median_ms"]
    return pd.DataFrame([{"entry": n, "ms": row(record, n)["timing"]["median_ms"], "x copy_": row(record, n)["x_copy"],
                          "x 16-bit copy_": row(record, n)["timing"]["median_ms"] / roof16,
                          "issue % of run (ncu)": issue_pct(record, n)} for n in names]).set_index("entry")
