"""Tables as the study prints them: pipe tables whose measured floats all carry a decimal point."""

import re

import pandas as pd

from elu_study.core import fingerprint
from elu_study.core.entries import ENTRIES, roof_of

EARLIER_BUILD = " (earlier build)"  # after a grade of numbers whose kernel's build changed since (``as_built``)
# Column -> format, for the columns the study's tables share; any other float column gets 3 decimals.
FORMATS = {"ms": "{:.3f}", "TB/s": "{:.2f}", "% of peak": "{:.1f}", "x copy_": "{:.3f}", "p90/median": "{:.3f}",
           "max abs err vs fp64": "{:.1e}"}


def markdown(df: pd.DataFrame, formats: dict | None = None) -> str:
    """A pipe table; every float column formatted (``FORMATS``, else 3 decimals), None and NaN left empty."""
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


def compact(table: str) -> str:
    """A pipe table without the padding that aligns its columns in plain text (it renders the same)."""
    return "\n".join(re.sub(r"\|:?-+", "|---", re.sub(r" {2,}\|", " |", line)) for line in table.splitlines())


def as_built(grade: str, earlier: set[str], *variants: str | None) -> str:
    """A grade of what ``variants`` (kernel files; None: a library's call) gave in a record, with EARLIER_BUILD after
    it where one of them is ``earlier``, the record's kernel files whose build changed since it was measured
    (``fingerprint.earlier_variants``, read once per table): the grade is then the earlier build's, not this tree's."""
    return grade + (EARLIER_BUILD if earlier & set(variants) else "")


def sustained_value(rec: dict, name: str, energy: bool = False) -> float | None:
    """A row's sustained time over its roof's, or (``energy``) its energy per pass over its roof's; None where the
    record did not time it so or NVML gave no energy reading."""
    rows = {r["name"]: r for r in rec["rows"]}
    if (r := rows.get(name)) is None or r.get("x_roof_sustained") is None:
        return None
    if not energy:
        return r["x_roof_sustained"]
    j = (r["timing"]["sustained"].get("energy_j"), rows[r["roof"]]["timing"]["sustained"].get("energy_j"))
    return None if None in j else j[0] / j[1]


def this_build(rec: dict, name: str, known: dict[int, set[str]]) -> bool:
    """Whether a record's row ran this tree's build of its entry (a library's call: always). ``known``: each record's
    ``fingerprint.earlier_variants`` by ``id``, filled here (reading it hashes every build's sources)."""
    if id(rec) not in known:
        known[id(rec)] = fingerprint.earlier_variants(rec)
    return ENTRIES[name].variant not in known[id(rec)]


def range_verdict(value: float | None, lo: float, hi: float, tie: float) -> str:
    """One value against a predicted range, a value outside it by no more than ``tie`` a tie."""
    return ("no reading" if value is None else "HELD" if lo <= value <= hi else
            "TIE (within the runs' spread)" if lo - tie <= value <= hi + tie else
            f"MISSED ({'lower' if value < lo else 'higher'})")


def sustained_graded(record: dict, prediction: dict[str, tuple[float, float]],
                     ties: tuple[float, float] = (0.0, 0.0),
                     also: dict[str, list[tuple[dict, str]]] | None = None) -> pd.DataFrame | None:
    """A prediction for the sustained protocol graded on a record: "entry", its sustained time over its roof's;
    "entry J", its energy per pass over its roof's; beside each, the short protocol's ratio and the sustained
    readings. Outside its range by no more than ``ties`` (time, energy: the protocol's resolution) is a tie.
    ``also``: other runs of an entry's build, (record, row name) pairs by entry, graded too where they and the record
    ran this tree's build (``this_build``): grades that differ are a tie where every run lies within the tie of the
    range, else the farthest run's miss. An entry the record lacks reads "not measured yet"; a row of an earlier
    build says so (``as_built``). None where the record has no sustained timings."""
    rows, out, earlier = {r["name"]: r for r in record["rows"]}, [], fingerprint.earlier_variants(record)
    known = {id(record): earlier}
    for key, (lo, hi) in prediction.items():
        name, energy = key.removesuffix(" J"), key.endswith(" J")
        if name in rows and rows[name].get("x_roof_sustained") is None:
            continue
        what = {"prediction": f"{name}, {'J per pass' if energy else 'time'} over {roof_of(name, ENTRIES[name].mode)}'s",
                "range": f"{lo:.3f}-{hi:.3f}"}
        if name not in rows:  # in the catalogue since the record was measured: predicted, not run yet
            out.append({**what, **({"other runs": ""} if also else {}), "grade": "not measured yet"})
            continue
        r, s = rows[name], rows[name]["timing"]["sustained"]
        value, tie = sustained_value(record, name, energy), ties[1] if energy else ties[0]
        others = [v for rec, n in (also or {}).get(name, ()) if this_build(record, name, known)
                  and this_build(rec, n, known) and (v := sustained_value(rec, n, energy)) is not None]
        runs = [value, *others] if value is not None else [None]
        grades = {range_verdict(v, lo, hi, tie) for v in runs}
        farthest = max(runs, key=lambda v: max(lo - v, v - hi)) if len(grades) > 1 else None
        verdict = (grades.pop() if len(grades) == 1 else "TIE (its runs graded apart)" if all(
            lo - tie <= v <= hi + tie for v in runs) else range_verdict(farthest, lo, hi, tie))
        out.append({**what, "measured": value, "short": None if energy else r["x_roof"],
                    **({"other runs": ", ".join(f"{v:.3f}" for v in others)} if also else {}),
                    "MHz": s["sm_clock_mhz"], "J per pass": s["energy_j"], "at the limit": s["capped_fraction"],
                    "grade": as_built(verdict, earlier, ENTRIES[name].variant)})
    graded = any(o["grade"] != "not measured yet" for o in out)
    return pd.DataFrame(out).set_index("prediction") if graded else None


def runs_spread(runs: list[tuple[dict, str]]) -> tuple[float, float]:
    """How far apart sustained runs of one build fall, (time, energy) over their roof's, from (record, row name)
    pairs: the protocol's resolution, ``sustained_graded``'s ties (0 under two runs). A run of an earlier build
    (``this_build``) is another kernel's: not counted."""
    known = {}
    kept = [(rec, n) for rec, n in runs if sustained_value(rec, n) is not None and this_build(rec, n, known)]
    values = [[v for rec, n in kept if (v := sustained_value(rec, n, energy)) is not None] for energy in (False, True)]
    return tuple(max(v) - min(v) if len(v) > 1 else 0.0 for v in values)
