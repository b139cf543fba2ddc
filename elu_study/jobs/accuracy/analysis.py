"""Reading the accuracy record (results/<gpu>-accuracy.json): its tables and notebook 07's numbers; no measuring."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from elu_study.core.text import fmt
from elu_study.jobs.accuracy.definitions import DENORMAL_OUTPUT

BOUND_CONSTANT = {"expf": 2.0, "expm1f": 1.0, "expm1-poly": 2.0}  # __expf's bound grows with |x|
CLASS_ORDER = ("+normal", "-normal", "+0.0", "-0.0", "+denormal", "-denormal", DENORMAL_OUTPUT, "+inf", "-inf", "NaN")


def pct(part: int, whole: int) -> str:
    """A share that never rounds to 100 % or 0 % unless it is exactly that."""
    if whole == 0 or part in (0, whole):
        return "-" if whole == 0 else f"{100 * part // whole} %"
    share = 100 * part / whole
    return next((f"{share:.{d}f} %" for d in range(1, 12) if 0 < float(f"{share:.{d}f}") < 100), f"{share:.12f} %")


def ulps(v: float | None) -> str:
    return "-" if v is None else "0" if v == 0 else f"{v:.4g}" if v < 1e5 else f"{v:.3e}"


def code(names) -> list[str]:
    return [f"`{n}`" for n in names]


def frame(rows: dict, index: str | None = None) -> pd.DataFrame:
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis(index)


def both(record: dict, table, collapse: bool = True) -> pd.DataFrame:
    """A per-alpha table with every alpha in each cell ("alpha 1 / alpha 1.5"; once where they agree if collapse)."""
    dfs = [table(record, a).astype(str) for a in record["runs"]]
    cells = [" / ".join(dict.fromkeys(c) if collapse else c) for c in zip(*(df.to_numpy().ravel() for df in dfs))]
    return pd.DataFrame(np.reshape(cells, dfs[0].shape), index=dfs[0].index, columns=dfs[0].columns)


def merge_identical(df: pd.DataFrame) -> pd.DataFrame:
    """Columns with the same values in every row shown once, their names joined by " = "."""
    groups: dict[tuple, list[str]] = {}
    for column in df.columns:
        groups.setdefault(tuple(df[column]), []).append(column)
    return pd.DataFrame({" = ".join(names): df[names[0]] for names in groups.values()}, index=df.index)


# -- tables -------------------------------------------------------------------------------------
def summary_table(record: dict, alpha: str) -> pd.DataFrame:
    """Per formula: worst ulp error (x < 0), shares correctly rounded and bit-identical, the task's bar."""
    rows = {}
    for name, s in record["runs"][alpha]["formulas"].items():
        neg, tol = s["max_ulp"]["negative"] or {}, s["tolerance"]
        rows[name] = {"max ulp, x < 0": ulps(neg.get("ulp")), "correctly rounded": pct(s["correctly_rounded"], s["n"]),
                      "bit-identical to F.elu": pct(s["bit_identical_to_felu"], s["n"]),
                      "task's bar: worst / allowed": "FAIL" if tol["n_fail"] else fmt(tol["max_ratio"], ".1e", "-")}
    return frame(rows, "formula")


def short_class(c: dict, label: str) -> str:
    """A class of inputs in a few words: the share correctly rounded, and the share that comes out +0.0."""
    if label == "NaN":
        return f"NaN {pct(c['nan_out'], c['n'])}; F.elu's bits {pct(c['identical_to_felu'], c['n'])}"
    zero = c["plus_zero_out"] and c["correctly_rounded"] < c["n"]
    return pct(c["correctly_rounded"], c["n"]) + (f"; +0.0 for {pct(c['plus_zero_out'], c['n'])}" if zero else "")


def classes_where_they_differ(record: dict, alpha: str) -> tuple[pd.DataFrame, list[str]]:
    """The input classes where some formula is not all correctly rounded (agreeing formulas merged), and the rest."""
    formulas = record["runs"][alpha]["formulas"]
    first, rows, same = next(iter(formulas.values()))["classes"], {}, []
    for label in (k for k in CLASS_ORDER if first.get(k, {}).get("n")):
        cells = {name: short_class(s["classes"][label], label) for name, s in formulas.items()}
        exact = all(s["classes"][label]["correctly_rounded"] == s["classes"][label]["n"] for s in formulas.values())
        if exact or (label == "NaN" and len(set(cells.values())) == 1):
            same.append(label)
        else:
            rows[f"{label} ({first[label]['n']} input{'s' if first[label]['n'] != 1 else ''})"] = cells
    return merge_identical(frame(rows)), same


def bounds_table(record: dict, alpha: str) -> pd.DataFrame:
    """The exponential's documented bound B against ELU: inputs above it carried, worst binade, binades above B ulp."""
    rows, where = {}, lambda e: "denormals" if e == 0 else f"2^{e - 127}"
    for name, s in record["runs"][alpha]["formulas"].items():
        bn, own = s["binades_negative"], BOUND_CONSTANT.get(s["bound"]["exponential"])
        ratio = max((m / p for m, p in zip(bn["max_ulp"][:255], bn["predicted_max_ulp"][:255]) if p > 0), default=None)
        over = [e for e, v in enumerate(bn["max_ulp"][:255])
                if v > (own or 2.0 + math.floor(1.173 * math.ldexp(1.0, e - 126 if e else -126)))]
        rows[name] = {"inputs above carried B": s["bound"]["n_exceed"],
                      "worst binade / carried B": fmt(ratio, ".3g", "-"),
                      "binades above B ulp": f"{len(over)} ({where(min(over))} to {where(max(over) + 1)})" if over
                      else "none"}
    return frame(rows, "formula")


def same_as(record: dict) -> dict[str, list[str]]:
    """{formula: the builds that copy it, as code, those bit-identical to it at every alpha first}."""
    groups: dict = {}
    for run in record["runs"].values():
        for name, d in run["same_as"].items():
            groups.setdefault(d["as"], {}).setdefault(name, []).append(d["n_differ"])
    return {to: code(sorted(builds, key=lambda b: any(builds[b]))) for to, builds in groups.items()}
