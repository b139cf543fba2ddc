"""Notebook 12's goals table, graded on every run of each default's build."""

import pandas as pd

from elu_study.core import fingerprint, tables
from elu_study.core.entries import ENTRIES
from elu_study.jobs.sixteen.analysis import FORMATS as JOB_FORMATS
from elu_study.jobs.sixteen.analysis import GOALS, x_own_copy

# The notebook's tables: the job's formats, but shares and the instruction budget as whole numbers (issue 45's
# decimals budget: a tenth of a percent of DRAM's peak changes no argument the notebook makes).
FORMATS = {**JOB_FORMATS, "DRAM %": "{:.0f}", "budget inst/elem": "{:.0f}"}


def goals_verdict(xs: list[float], aim: float, must: float) -> str:
    """The goals' grade of one build's short runs (time over its own roof): a bar that lies between two runs is within
    the protocol's run-to-run resolution, a tie at that bar, not a pass or a miss."""
    lo, hi = min(xs), max(xs)
    if hi <= aim:
        return "aim met"
    if lo <= aim:
        return "tie at the aim"
    if hi <= must:
        return "must met"
    return "tie at the must" if lo <= must else "NOT met"


def goals(record: dict, main: dict) -> pd.DataFrame:
    """Issue 24's goals (``analysis.GOALS``) against each default's short runs: this record's, and the main record's
    where it ran this tree's build of it (``tables.this_build``): two runs of one build differ by more than either's
    noise, so a bar between them is a tie. A grade of this record's earlier build says "(earlier build)"."""
    earlier, known, out = fingerprint.earlier_variants(record), {}, []
    for name, (aim, must) in GOALS.items():
        other = [x_own_copy(main, name)[0]] if any(r["name"] == name for r in main["rows"]) \
            and tables.this_build(main, name, known) else []
        x = x_own_copy(record, name)[0]
        out.append({"entry": name, "x own roof": x, "main record's": other[0] if other else None,
                    "aim": f"{aim:g}", "must": f"{must:g}",
                    "verdict": tables.as_built(goals_verdict([x, *other], aim, must), earlier, ENTRIES[name].variant)})
    return pd.DataFrame(out).set_index("entry")
