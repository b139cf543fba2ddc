"""The predictions notebooks 00-05 wrote before the measurements, kept as written (they are history), so that
each step notebook grades its own and the summary (06) grades them all in one table.

A range that was written relative to another entry ("5-15 % over step 2") is computed from the record it
is graded against, as the words say; the words themselves are in the notebook's markdown beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

from elu_study.core.record import noise, row

METRICS = {"x_copy": "x copy_'s time", "pct_of_peak": "% of datasheet bandwidth"}
FIRST_RUN = "before the first H200 run (commit 71b657e, notebooks committed unexecuted)"
AFTER_FIRST_RUN = "now, from the arithmetic above, after the first run"


@dataclass(frozen=True)
class Prediction:
    """A prediction written before the measurement: a range for one entry's time over copy_'s
    (``metric="x_copy"``) or its share of the datasheet bandwidth (``"pct_of_peak"``)."""

    entry: str
    bounds: tuple[float, float]
    written: str  # when, as the git history shows it
    metric: str = "x_copy"

    def __post_init__(self):
        if self.metric not in METRICS:
            raise ValueError(f"unknown metric {self.metric!r}; one of {', '.join(METRICS)}")


def verdict(x: float, bounds: tuple[float, float]) -> str:
    """A time over its roof against a predicted range: HELD inside it, else MISSED, faster or slower."""
    lo, hi = bounds
    return "HELD" if lo <= x <= hi else f"MISSED ({'faster' if x < lo else 'slower'})"


def steps(record: dict) -> dict[str, list[Prediction]]:
    """Notebook number -> the predictions it grades, against the main study's ``record``."""
    f = row(record, "2_float4")["x_copy"]
    step2_noise = noise(record, "2_float4")
    return {
        "00": [Prediction("copy_", (84, 88), FIRST_RUN, "pct_of_peak"),
               Prediction("F.elu", (1.0, 1.05), FIRST_RUN),
               Prediction("torch.compile(F.elu)", (1.0, 1.05), FIRST_RUN)],
        "01": [Prediction("1_naive", (1.5, 2.0), FIRST_RUN),
               Prediction("1_naive", (2.5, 3.0), AFTER_FIRST_RUN)],
        "02": [Prediction("2_float4", (1.0, 1.05), FIRST_RUN)],
        # "the seed's launch costs 5-15 % over step 2; whole waves remove most of that"
        "03": [Prediction("3_grid_stride", (f * 1.05, f * 1.15), FIRST_RUN),
               Prediction("3_grid_stride_2_waves", (f, f * 1.05), FIRST_RUN)],
        # "no measurable gain, within the run-to-run noise of step 2"
        "04": [Prediction("4_fast_math", (f - step2_noise, f + step2_noise), FIRST_RUN)],
        # "at the copy roof like step 2, within about 1 %"
        "05": [Prediction("5_streaming", (f - 0.01, f + 0.01), FIRST_RUN)],
    }


def every_step(record: dict) -> list[Prediction]:
    """All of notebooks 00-05's predictions, in notebook order."""
    return [p for ps in steps(record).values() for p in ps]
