"""The predictions notebooks 00-05 wrote before the measurements, kept as written (relative ranges from the record)."""

from __future__ import annotations

from dataclasses import dataclass

from elu_study.core.record import noise, row

FIRST_RUN = "before the first H200 run (commit 71b657e, notebooks committed unexecuted)"
AFTER_FIRST_RUN = "in notebook 01, from its arithmetic, after the first run"


@dataclass(frozen=True)
class Prediction:
    """A range written before the measurement for an entry's ``x_copy`` or ``pct_of_peak``."""
    entry: str
    bounds: tuple[float, float]
    written: str  # when, as the git history shows it
    metric: str = "x_copy"


def verdict(x: float, bounds: tuple[float, float]) -> str:
    """A time over its roof against a predicted range: HELD inside it, else MISSED, faster or slower."""
    lo, hi = bounds
    return "HELD" if lo <= x <= hi else f"MISSED ({'faster' if x < lo else 'slower'})"


def steps(record: dict) -> dict[str, list[Prediction]]:
    """Notebook number -> the predictions it grades, against the main study's ``record``."""
    f, z = row(record, "2_float4")["x_copy"], noise(record, "2_float4")
    return {
        "00": [Prediction("copy_", (84, 88), FIRST_RUN, "pct_of_peak"), Prediction("F.elu", (1.0, 1.05), FIRST_RUN),
               Prediction("torch.compile(F.elu)", (1.0, 1.05), FIRST_RUN)],
        "01": [Prediction("1_naive", (1.5, 2.0), FIRST_RUN), Prediction("1_naive", (2.5, 3.0), AFTER_FIRST_RUN)],
        "02": [Prediction("2_float4", (1.0, 1.05), FIRST_RUN)],
        # "the seed's launch costs 5-15 % over step 2; whole waves remove most of that"
        "03": [Prediction("3_grid_stride", (f * 1.05, f * 1.15), FIRST_RUN),
               Prediction("3_grid_stride_2_waves", (f, f * 1.05), FIRST_RUN)],
        "04": [Prediction("4_fast_math", (f - z, f + z), FIRST_RUN)],  # "within the run-to-run noise of step 2"
        "05": [Prediction("5_streaming", (f - 0.01, f + 0.01), FIRST_RUN)],  # "at the roof like step 2, within 1 %"
    }


def every_step(record: dict) -> list[Prediction]:
    """All of notebooks 00-05's predictions, in notebook order."""
    return [p for ps in steps(record).values() for p in ps]
