"""The study's findings, each written once, as text generated from the records.

The README block and the summary notebook print these; the step notebooks print the ones
that belong to them. A finding states a direction only where the record bears it out:
``claim`` prints a statement when its condition holds and flags it when the record contradicts it.
"""

from __future__ import annotations

from . import results


def claim(holds: bool, text: str) -> str:
    return text if holds else f"NOT SUPPORTED by this record: {text}"


def readme_lines(record: dict, counters: dict | None) -> list[str]:
    return [f"- {line}" for line in all_findings(record, counters)]


def all_findings(record: dict, counters: dict | None) -> list[str]:
    return [roof(record)]


def roof(record: dict) -> str:
    c = results.row(record, "copy_")
    e = results.row(record, "F.elu")
    return (f"copy_ moves the bytes in {c['timing']['median_ms']:.3f} ms ({c['tbps']:.2f} TB/s, "
            f"{c['pct_of_peak']:.1f} % of the datasheet); F.elu takes {e['x_copy']:.3f}x that.")
