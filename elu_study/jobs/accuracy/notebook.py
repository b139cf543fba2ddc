"""Notebook 07's tables, from the accuracy record (results/<gpu>-accuracy.json); ``md`` shows one as markdown."""

import math

import numpy as np
import pandas as pd

from elu_study.core import fingerprint
from elu_study.core.tables import as_built
from elu_study.core.text import Text, fmt, fmt_n, table
from elu_study.jobs.accuracy.definitions import CLASSES

# Notebook 07's one prediction, written before the run: the cancellation, not the exponential, sets the error. Over
# x < 0 at alpha = 1, expf(x) - 1 reaches about 2^23 ulp where expf(x) rounds to 1; expm1f stays within CUDA's 1 ulp.
PREDICTED = {"1_naive": (2**22.5, 2**23.5), "5_streaming": (0.0, 1.0)}  # formula: (low, high) max ulp
REFERENCE_ROWS = ("margin_ulp64", "near_midpoint", "exact_ties_tiny_x", "ties_corrected", "resolved", "corrected",
                  "unresolved", "tie_check.n", "tie_check.disagree", "sample_check.n", "sample_check.max_err_ulp64")


def md(df: pd.DataFrame) -> Text:
    return Text(table(df))


def pct(part: int, whole: int) -> str:
    """A share that never rounds to 100 % or 0 % unless it is exactly that."""
    if whole == 0 or part in (0, whole):
        return "-" if whole == 0 else f"{100 * part // whole} %"
    share = 100 * part / whole
    return next((f"{share:.{d}f} %" for d in range(1, 12) if 0 < float(f"{share:.{d}f}") < 100), f"{share:.12f} %")


def ulps(v: float | None) -> str:
    return "-" if v is None else "0" if v == 0 else f"{v:.4g}" if v < 1024 else f"2^{math.log2(v):.1f}"


def frame(rows: dict, index: str | None = None) -> pd.DataFrame:
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis(index)


def both(record: dict, table) -> pd.DataFrame:
    """A per-alpha table with every alpha in each cell ("alpha 1 / alpha 1.5"; once where they agree)."""
    dfs = [table(record, a).astype(str) for a in record["runs"]]
    cells = [" / ".join(dict.fromkeys(c)) for c in zip(*(df.to_numpy().ravel() for df in dfs))]
    return pd.DataFrame(np.reshape(cells, dfs[0].shape), index=dfs[0].index, columns=dfs[0].columns)


# -- the tables -----------------------------------------------------------------------------------------------------
def formulas(record: dict) -> pd.DataFrame:
    """Per formula: what it computes, its documented bound, the builds that run it (inputs differing, per alpha)."""
    same = [run["same_as"] for run in record["runs"].values()]
    return frame({f["name"]: {"computes": f["what"], "documented bound": f["documented_bound"].replace("|", "\\|"),
                              "also run by: inputs differing": ", ".join(
                                  f"`{b}`: {' / '.join(str(s[b]['n_differ']) for s in same)}"
                                  for b, d in same[0].items() if d["as"] == f["name"])}
                  for f in record["formulas"]}, "formula")


def prediction(record: dict) -> pd.DataFrame:
    """PREDICTED against the record: each formula's worst ulp error over x < 0 at alpha = 1, held or missed."""
    rows, variant, earlier = {}, {f["name"]: f["variant"] for f in record["formulas"]}, fingerprint.earlier_variants(record)
    for name, (low, high) in PREDICTED.items():
        v = record["runs"]["1.0"]["formulas"][name]["max_ulp"]["negative"]["ulp"]
        rows[name] = {"predicted max ulp": f"{ulps(low)} to {ulps(high)}", "measured": ulps(v),
                      "grade": as_built("held" if low <= v <= high else "missed", earlier, variant[name])}
    return frame(rows, "formula")


def summary(record: dict, alpha: str) -> pd.DataFrame:
    """Per formula: inputs run, worst ulp error (x < 0), shares correctly rounded and bit-identical, the task's bar,
    and the documented bound carried through ELU: inputs above it, and the worst binade's error over it."""
    rows = {}
    for name, s in record["runs"][alpha]["formulas"].items():
        neg, tol, bn = s["max_ulp"]["negative"] or {}, s["tolerance"], s["binades_negative"]
        ratio = max((m / p for m, p in zip(bn["max_ulp"][:255], bn["predicted_max_ulp"][:255]) if p > 0), default=None)
        rows[name] = {"inputs": fmt_n(s["n"]), "max ulp, x < 0": ulps(neg.get("ulp")),
                      "correctly rounded": pct(s["correctly_rounded"], s["n"]),
                      "bit-identical to F.elu": pct(s["bit_identical_to_felu"], s["n"]),
                      "task's bar: worst / allowed": "FAIL" if tol["n_fail"] else fmt(tol["max_ratio"], ".1e", "-"),
                      "inputs above carried bound": s["bound"]["n_exceed"],
                      "worst binade / carried bound": fmt(ratio, ".3g", "-")}
    return frame(rows, "formula")


def classes(record: dict, alpha: str) -> pd.DataFrame:
    """Per class of inputs (count): each formula's share correctly rounded (NaN for NaN), else also its share of +0.0."""
    def short(c: dict) -> str:
        zero = c["plus_zero_out"] and c["correctly_rounded"] < c["n"]
        return pct(c["correctly_rounded"], c["n"]) + (f"; +0.0 for {pct(c['plus_zero_out'], c['n'])}" if zero else "")

    runs = record["runs"][alpha]["formulas"]
    first = next(iter(runs.values()))["classes"]
    return frame({f"{label} ({first[label]['n']:,})": {name: short(s["classes"][label]) for name, s in runs.items()}
                  for label in CLASSES if label in first}, "class (inputs)")


def reference(record: dict) -> pd.DataFrame:
    """Per alpha, the reference's REFERENCE_ROWS (measure.reference_summary's keys)."""
    flat = {f"alpha = {a}": pd.json_normalize(run["reference"]).to_dict("records")[0] for a, run in record["runs"].items()}
    return pd.DataFrame({a: {k: f"{v[k]:.3g}" if isinstance(v[k], float) else str(v[k]) for k in REFERENCE_ROWS}
                         for a, v in flat.items()})
