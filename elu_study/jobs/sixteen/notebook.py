"""Notebook 12's tables as the notebook shows them: its formats, and the goals graded on every run of a build."""

import pandas as pd

from elu_study.core import fingerprint, tables
from elu_study.core.entries import ENTRIES
from elu_study.jobs.sixteen import analysis
from elu_study.jobs.sixteen.analysis import GOALS, x_own_copy

# The job's formats, but shares and the instruction budget as whole numbers (issue 45's decimals budget: a tenth of a
# percent of DRAM's peak changes no argument the notebook makes), and a difference and its tie to the digit that
# tells them apart.
FORMATS = {**analysis.FORMATS, "DRAM %": "{:.0f}", "budget inst/elem": "{:.0f}", "difference": "{:+.4f}",
           "tie within": "{:.4f}"}


def tie(record: dict, runs: list[dict], name: str) -> float:
    """How far a row's time over its roof may move and still be the same, as the single-change table judges it
    (``analysis.tried_frame``): the widest of ``record``'s same-kernel gap and each run's spread and half p10-p90."""
    gap = analysis.resolution_frame(record)["gap"].max()
    return max(gap, *(f(r, name) for f in (analysis.spread, analysis.half_band) for r in runs))


def goals_verdict(xs: list[float], aim: float, must: float, tie: float) -> str:
    """The goals' grade of one build's runs (time over its own roof): a bar that lies between two runs, or within
    ``tie`` (the runs' own resolution) of them, is a tie at that bar, not a pass or a miss."""
    lo, hi = min(xs) - tie, max(xs) + tie
    if hi <= aim:
        return "aim met"
    if lo <= aim:
        return "tie at the aim" + (" and the must" if hi > must else "")
    if hi <= must:
        return "must met"
    return "tie at the must" if lo <= must else "NOT met"


def goals(record: dict, main: dict) -> pd.DataFrame:
    """Issue 24's goals (``analysis.GOALS``) against each default's short runs: this record's, and the main record's
    where both ran this tree's build of it (``tables.this_build``; two builds are two kernels). The tie: as the
    single-change table's, the widest of the record's same-kernel gap and each run's spread and half p10-p90."""
    earlier, known, out = fingerprint.earlier_variants(record), {}, []
    for name, (aim, must) in GOALS.items():
        pooled = any(r["name"] == name for r in main["rows"]) and all(tables.this_build(r, name, known)
                                                                         for r in (record, main))
        runs = [record, main] if pooled else [record]
        xs = [x_own_copy(r, name)[0] for r in runs]
        within = tie(record, runs, name)
        out.append({"entry": name, "x own roof": xs[0], "main record's": xs[1] if len(xs) > 1 else None,
                    "tie within": within, "aim": f"{aim:g}", "must": f"{must:g}",
                    "verdict": tables.as_built(goals_verdict(xs, aim, must, within), earlier, ENTRIES[name].variant)})
    return pd.DataFrame(out).set_index("entry")


def graded(record: dict) -> pd.DataFrame:
    """``analysis.graded_frame`` as the notebook shows it: a time outside its predicted range by no more than the
    goals' tie (``goals``) is a tie, not a miss."""
    frame = analysis.graded_frame(record).reset_index()
    for i, line in frame[frame["what"] == "x own copy_"].iterrows():
        lo, hi = analysis.PREDICTION[(line["entry"], line["what"])]
        x, within = x_own_copy(record, line["entry"])[0], tie(record, [record], line["entry"])
        if line["verdict"].startswith("MISSED") and lo - within <= x <= hi + within:
            earlier = tables.EARLIER_BUILD if line["verdict"].endswith(tables.EARLIER_BUILD) else ""
            frame.loc[i, "verdict"] = "TIE (within the run's resolution)" + earlier
    return frame.set_index("entry")


def tried(record: dict) -> pd.DataFrame:
    """``analysis.tried_frame`` with one row per attempt, its dtypes side by side: each dtype's time over its own
    roof and, against its base, the difference, the verdict and the tie it was judged by."""
    d = analysis.tried_frame(record).reset_index()
    d[["attempt", "dtype"]] = d["entry"].str.rsplit(" ", n=1, expand=True)
    d["base"] = d["base"].str.rsplit(" ", n=1).str[0]
    d["vs base"] = [f"{x:+.4f} {v} (tie {t:.4f})" for x, v, t in zip(d["difference"], d["verdict"], d["tie within"])]
    out = []
    for attempt, rows in d.groupby("attempt", sort=False):
        line = {"attempt": attempt, "change": rows["change"].iloc[0], "base": " / ".join(dict.fromkeys(rows["base"]))}
        for dtype in analysis.DTYPES:
            row = rows[rows["dtype"] == dtype]
            line[f"{dtype}: x own roof"] = row["x own roof"].iloc[0] if len(row) else None
            line[f"{dtype}: vs base"] = row["vs base"].iloc[0] if len(row) else ""
        exact = dict(zip(rows["dtype"], rows["bit-exact"]))
        line["bit-exact"] = "yes" if set(exact.values()) == {"yes"} else "; ".join(f"{k}: {v}" for k, v in exact.items())
        out.append(line)
    return pd.DataFrame(out).set_index("attempt")
