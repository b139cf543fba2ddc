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


def ulp_words(v: float) -> str:
    return f"{ulps(v)} ulp" + (f" (2^{math.log2(v):.1f})" if v >= 1024 else "")


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
    """Per formula: worst ulp error (x < 0) and where, shares correctly rounded and bit-identical, the task's bar."""
    rows = {}
    for name, s in record["runs"][alpha]["formulas"].items():
        neg, pos, tol = s["max_ulp"]["negative"] or {}, s["max_ulp"]["positive"] or {}, s["tolerance"]
        rows[name] = {"max ulp, x < 0": ulps(neg.get("ulp")), "correctly rounded": pct(s["correctly_rounded"], s["n"]),
                      "bit-identical to F.elu": pct(s["bit_identical_to_felu"], s["n"]),
                      "task's bar: worst / allowed": "FAIL" if tol["n_fail"] else fmt(tol["max_ratio"], ".1e", "-"),
                      "at x": neg.get("at", {}).get("x", "-"), "(inputs at max)": neg.get("n_at_max", "-"),
                      "max ulp, x > 0": ulps(pos.get("ulp"))}
    return frame(rows, "formula")


def histogram_table(record: dict, alpha: str, sign: str = "negative") -> pd.DataFrame:
    """Inputs per ulp-error bin (rows with no input in any formula left out)."""
    data = {name: s["histogram"][sign] for name, s in record["runs"][alpha]["formulas"].items()}
    df = pd.DataFrame(data, index=pd.Index(record["method"]["histogram_labels"], name="ulp error"))
    return df[(df != 0).any(axis=1)]


def histogram_ends(record: dict, alpha: str, head: int = 4, tail: int = 2) -> tuple[pd.DataFrame, int]:
    """The histogram's first and last bins, and how many bins lie between."""
    df = histogram_table(record, alpha)
    ends = df if len(df) <= head + tail else df.iloc[[*range(head), *range(len(df) - tail, len(df))]]
    return ends, len(df) - len(ends)


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


def show_bits(hex_bits: str) -> str:
    """A float32 for reading: shortest digits; denormals as a multiple of 2^-149; NaN with its bits."""
    v = np.array([int(hex_bits, 16)], dtype=np.uint32).view(np.float32)[0]
    if np.isnan(v):
        return f"nan {hex_bits}"
    if v != 0 and abs(v) < np.float32(2.0**-126):
        return f"{'-' if v < 0 else ''}{int(abs(float(v)) / 2.0**-149)} x 2^-149"
    return str(v)


def specials_table(record: dict, alpha: str) -> pd.DataFrame:
    """Each special input's output, per formula ('nan 0x7fc00000': a NaN and its bits; *: not correctly rounded)."""
    out, rows = record["specials"]["outputs"][alpha], {}
    for i, inp in enumerate(record["specials"]["inputs"]):
        right = out["reference (correctly rounded)"][i]
        rows[inp["label"]] = {"x": show_bits(inp["x_bits"]), "correctly rounded": show_bits(right) if right else "NaN"}
        for f in record["formulas"]:
            y = out[f["name"]][i]
            rows[inp["label"]][f["name"]] = show_bits(y) + ("" if right is None or y == right else " *")
    return frame(rows, "input")


def specials_where_wrong(record: dict, alpha: str) -> pd.DataFrame:
    """The special inputs where some formula is wrong, formulas that agree on every such input in one column."""
    df = specials_table(record, alpha).drop(columns="x")
    return merge_identical(df[df.apply(lambda row: any(str(v).endswith(" *") for v in row), axis=1)])


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


# -- numbers for the text ----------------------------------------------------------------------
def same_as(record: dict) -> dict[str, dict]:
    """{copied build: {"same": builds bit-identical at every alpha, "differ": {build: {alpha: n differ}}}}."""
    groups: dict = {}
    for alpha, run in record["runs"].items():
        for name, d in run["same_as"].items():
            groups.setdefault(d["as"], {}).setdefault(name, {})[alpha] = d["n_differ"]
    return {to: {"same": code(b for b, k in builds.items() if not any(k.values())),
                 "differ": {b: k for b, k in builds.items() if any(k.values())}} for to, builds in groups.items()}


def findings(record: dict) -> dict:
    """The conclusions' numbers: the formulas grouped by exponential, the task's bar, the bounds, the reference."""
    runs, first = record["runs"], next(iter(record["runs"].values()))["formulas"]
    kind = {"expm1f": True, "expm1-poly": "poly"}  # else exp(x) - 1: False
    group = {e: [f["name"] for f in record["formulas"] if kind.get(f["exponential"], False) == e and f["name"] in first]
             for e in (True, False, "poly")}
    normal = all("-normal" in first[n]["classes"] for n in group[True])  # flushing denormals is wrong there by design
    worst = lambda e, of: {a: ulp_words(max(of(r["formulas"][n]) for n in group[e])) for a, r in runs.items()}
    every = [(a, n, s) for a, run in runs.items() for n, s in run["formulas"].items()]
    closest = max(every, key=lambda t: t[2]["tolerance"]["max_ratio"] or 0)
    return {
        "expm1": code(group[True]), "minus1": code(group[False]), "normal": normal,
        "expm1_worst": group[True] and worst(True, lambda s: s["classes"]["-normal"]["max_ulp"] if normal
                                             else s["max_ulp"]["negative"]["ulp"]),
        "minus1_worst": group[False] and worst(False, lambda s: s["max_ulp"]["negative"]["ulp"]),
        "poly": code(group["poly"]),
        "poly_worst": group["poly"] and worst("poly", lambda s: s["max_ulp"]["negative"]["ulp"]),
        "minus1_zeros": max((sum(first[n]["classes"].get(k, {}).get("plus_zero_out", 0)
                                 for k in ("-normal", "-denormal")) for n in group[False]), default=0),
        "flushed": {side: {"names": code(ns), "n": first[ns[0]]["classes"][label]["n"]}
                    for label, side in (("+denormal", "positive"), ("-denormal", "negative"))
                    if (ns := [n for n, s in first.items() if s["classes"].get(label, {}).get("plus_zero_out")])},
        "failing": code(sorted({n for _, n, s in every if s["tolerance"]["n_fail"]})),
        "closest": {"alpha": closest[0], "name": closest[1], "ratio": closest[2]["tolerance"]["max_ratio"]},
        "exceed": code(sorted({n for _, n, s in every if s["bound"]["n_exceed"]})),
        "fixed": {a: run["reference"]["ties_corrected"] + run["reference"]["corrected"] for a, run in runs.items()},
        "unresolved": sum(run["reference"]["unresolved"] for run in runs.values()),
    }
