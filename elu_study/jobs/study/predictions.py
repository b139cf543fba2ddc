"""The one prediction each notebook (00-05, and step 6's 08) wrote before its run, graded against the record."""

from dataclasses import dataclass

import pandas as pd

from elu_study.core import fingerprint
from elu_study.core.entries import ENTRIES
from elu_study.core.record import noise, row
from elu_study.core.tables import as_built


@dataclass(frozen=True)
class Prediction:
    """A range written before the measurement for an entry's ``x_copy`` or ``pct_of_peak`` in ``job``'s record."""
    notebook: str
    tried: str  # the change the notebook makes, in a few words
    entry: str
    bounds: tuple[float, float]
    metric: str = "x_copy"
    job: str = "study"
    against: tuple[str, ...] = ()  # the entries whose numbers set the bounds (their builds matter to the grade too)


def steps(record: dict) -> list[Prediction]:
    step2 = ("2_float4",)
    f, z = row(record, step2[0])["x_copy"], noise(record, step2[0])
    return [Prediction("00", "the roof: `y.copy_(x)`", "copy_", (84, 88), "pct_of_peak"),
            Prediction("01", "one float per thread", "1_naive", (1.5, 2.0)),
            Prediction("02", "one float4 per thread", "2_float4", (1.0, 1.05)),
            # "whole waves remove most of the seed's loss": two whole waves within 5 % of step 2
            Prediction("03", "grid-stride loop, whole waves", "3_grid_stride_2_waves", (f, f * 1.05), against=step2),
            Prediction("04", "`__expf` (fast math)", "4_fast_math", (f - z, f + z), against=step2),  # step 2's noise
            Prediction("05", "step 5's four changes", "5_streaming", (f - 0.01, f + 0.01), against=step2)]  # within 1 %


# Step 6's attempts that change a cache policy or the tile order: predicted to gain nothing (1.00-1.05x copy_).
POLICY_OR_ORDER = ("6_load_", "6_store_", "6_reversed", "6_two_streams")


def step6(beyond: dict) -> Prediction:
    """Notebook 08's: no cache policy or tile order beats copy_, graded by the fastest of those attempts."""
    tried = [r for r in beyond["rows"] if r["name"].startswith(POLICY_OR_ORDER) and " " not in r["name"]]
    fastest = min(tried, key=lambda r: r["x_copy"])["name"]
    return Prediction("08", "a cache policy or tile order", fastest, (1.0, 1.05), job="beyond")


def of(record: dict, notebook: str) -> Prediction:
    return step6(record) if notebook == "08" else next(p for p in steps(record) if p.notebook == notebook)


def appendix(record: dict, beyond: dict | None) -> list[Prediction]:
    """Every notebook's prediction, in notebook order (step 6's where its record is there)."""
    return steps(record) + ([step6(beyond)] if beyond else [])


def verdict(value: float, bounds: tuple[float, float], tie: float = 0.0) -> str:
    """HELD inside the range, TIE outside it by at most ``tie`` (the noise), else MISSED (faster or slower)."""
    lo, hi = bounds
    if lo <= value <= hi:
        return "HELD"
    return "TIE (within noise)" if max(lo - value, value - hi) <= tie else \
        f"MISSED ({'faster' if value < lo else 'slower'})"


def graded(record: dict, p: Prediction, earlier: set[str] | None = None) -> dict:
    """One row of the appendix: the prediction (five significant digits, so that close ends stay apart), the
    record's median and the verdict (``earlier``: the record's ``fingerprint.earlier_variants``)."""
    shown = {"notebook": p.notebook, "tried": p.tried, "entry": f"`{p.entry}`",
             "predicted": f"{p.bounds[0]:.5g}-{p.bounds[1]:.5g}{' % of peak' if p.metric != 'x_copy' else 'x copy_'}"}
    if p.entry not in {r["name"] for r in record["rows"]}:
        return shown | {"measured": "not measured yet", "verdict": "not graded"}
    r = row(record, p.entry)
    value, tie = r[p.metric], noise(record, p.entry, "copy_") * r[p.metric] / r["x_copy"]
    if p.metric == "x_copy":
        measured, judged = f"{value:.3f}x", verdict(value, p.bounds, tie)
    else:  # % of peak: a slower call has a lower share
        measured, judged = f"{value:.1f} %", verdict(-value, (-p.bounds[1], -p.bounds[0]), tie)
    earlier = fingerprint.earlier_variants(record) if earlier is None else earlier
    return shown | {"measured": measured,
                    "verdict": as_built(judged, earlier, *(ENTRIES[n].variant for n in (p.entry, *p.against)))}


def frame(records: dict[str, dict], *predictions: Prediction) -> pd.DataFrame:
    """The predictions graded, each against its job's record in ``records``."""
    earlier = {job: fingerprint.earlier_variants(records[job]) for job in {p.job for p in predictions}}  # once a record
    return pd.DataFrame([graded(records[p.job], p, earlier[p.job]) for p in predictions]).set_index("notebook")
