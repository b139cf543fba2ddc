"""Notebook 07's view of the accuracy record: which formulas it holds, the predictions graded, and the record's
tables trimmed to the rows the text refers to. The full tables are ``analysis``'s, one call away. No GPU needed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from elu_study.core.entries import ENTRIES
from elu_study.jobs.accuracy.analysis import (alphas, binade_text, classes_table, exceeds_own_bound, histogram_table,
                                              pct, specials_table, ulps)

NEGATIVE_ZEROS = ("-denormal", "-0.0")  # the tiny negative inputs that steps 1-3 were predicted to turn into +0.0


def in_table(text: str) -> str:
    """Text for a pipe table's cell: a "|" (as in |x|) escaped, so that it does not split the cell."""
    return text.replace("|", "\\|")


# -- which formulas -----------------------------------------------------------------------------
def formulas_table(record: dict) -> pd.DataFrame:
    """The formulas the record holds, from its own list: what each computes and its exponential's bound."""
    return pd.DataFrame([{"formula": f["name"], "computes": f["what"],
                          "documented bound": in_table(f["documented_bound"])}
                         for f in record["formulas"]]).set_index("formula")


def not_in_record(record: dict) -> list[str]:
    """The study's steps and peers (float32 builds) that the record neither holds nor checks bit for bit."""
    covered = {f["name"] for f in record["formulas"]}
    covered |= {name for run in record["runs"].values() for name in run["same_as"]}
    return [e.name for e in ENTRIES.values() if e.kind in ("step", "peer") and not e.mode and e.name not in covered]


def formulas_sentence(record: dict, list_held: bool = True) -> str:
    """How many formulas the record holds and which (``list_held``; a table may list them instead), the builds
    checked bit for bit against one of them, and the study's kernels it leaves out."""
    same: dict[str, list[str]] = {}
    for name, d in next(iter(record["runs"].values()))["same_as"].items():
        same.setdefault(d["as"], []).append(f"`{name}`")
    held = ", ".join(f"`{f['name']}`" for f in record["formulas"])
    missing = not_in_record(record)
    return " ".join([
        f"The record holds {len(record['formulas'])} formulas" + (f": {held}." if list_held else "."),
        *(f"{' and '.join(names)} run `{to}`'s formula, checked bit for bit." for to, names in same.items()),
        *([f"The study's other kernels are not run through it: {', '.join(f'`{m}`' for m in missing)}."]
          if missing else []),
    ])


# -- the predictions, graded --------------------------------------------------------------------
@dataclass(frozen=True)
class Prediction:
    """One prediction of the notebook (written before the run), the quantity that grades it, and how its words
    are read as a range ``bounds`` (inclusive)."""

    formula: str
    quantity: str
    predicted: str
    bounds: tuple[float, float]
    measure: Callable[[dict], float]
    show: Callable[[float], str] = ulps


def max_ulp(record: dict, alpha: str, name: str, label: str | None = None) -> float:
    """A formula's largest ulp error over the inputs with the sign bit set (or over one class of inputs)."""
    s = record["runs"][alpha]["formulas"][name]
    return s["classes"][label]["max_ulp"] if label else s["max_ulp"]["negative"]["ulp"]


def zero_share(record: dict, name: str, labels, alpha: str = "1.0") -> float:
    """The share of the inputs of these classes for which a formula returns +0.0."""
    c = record["runs"][alpha]["formulas"][name]["classes"]
    return sum(c[k]["plus_zero_out"] for k in labels) / sum(c[k]["n"] for k in labels)


def binade_max(record: dict, alpha: str, name: str, lowest: int, highest: int) -> float:
    """The largest ulp error over the negative binades |x| in [2^lowest, 2^(highest + 1))."""
    m = record["runs"][alpha]["formulas"][name]["binades_negative"]["max_ulp"]
    return max(m[e + 127] for e in range(lowest, highest + 1))


def share(v: float) -> str:
    return pct(round(v * 1e9), 10**9)


def power_of_two(v: float) -> str:
    return f"2^{math.log2(v):.1f} ({ulps(v)})"


PREDICTIONS = (
    Prediction("5_streaming, F.elu", "max ulp, x < 0, alpha = 1", "within 1 ulp", (0.0, 1.0),
               lambda r: max_ulp(r, "1.0", "5_streaming")),
    Prediction("torch.compile(F.elu)", "max ulp, x < 0 normal, alpha = 1", "within 1 ulp", (0.0, 1.0),
               lambda r: max_ulp(r, "1.0", "torch.compile(F.elu)", "-normal")),
    Prediction("5_streaming", "max ulp at alpha = 1.5 minus at 1", "about 1/2 ulp more (read: 0.25 to 0.75)",
               (0.25, 0.75), lambda r: max_ulp(r, "1.5", "5_streaming") - max_ulp(r, "1.0", "5_streaming")),
    Prediction("5_streaming", "inputs bit-identical to F.elu, both alphas", "all (NaN payloads aside)", (1.0, 1.0),
               lambda r: min((s["bit_identical_to_felu"] + s["differ_from_felu_only_in_nan_bits"]) / s["n"]
                             for s in (run["formulas"]["5_streaming"] for run in r["runs"].values())), share),
    Prediction("torch.compile(F.elu)", "negative denormals that give +0.0", "may (read: some or all)", (1e-9, 1.0),
               lambda r: zero_share(r, "torch.compile(F.elu)", ("-denormal",)), share),
    Prediction("1_naive", "max ulp, x <= -1/2, alpha = 1", "a couple of ulp (read: 1 to 3)", (1.0, 3.0),
               lambda r: binade_max(r, "1.0", "1_naive", -1, 127)),
    Prediction("1_naive", "max ulp, x < 0, alpha = 1", "about 2^23 (read: 2^22.5 to 2^23.5)",
               (2**22.5, 2**23.5), lambda r: max_ulp(r, "1.0", "1_naive"), power_of_two),
    Prediction("1_naive", "negative denormals and -0.0 that give +0.0", "all", (1.0, 1.0),
               lambda r: zero_share(r, "1_naive", NEGATIVE_ZEROS), share),
    Prediction("4_fast_math", "max ulp, x in (-2, -1/2], alpha = 1", "tens of ulp (read: 10 to 99)", (10.0, 99.0),
               lambda r: binade_max(r, "1.0", "4_fast_math", -1, 0)),
    Prediction("4_fast_math", "positive denormals that give +0.0", "all", (1.0, 1.0),
               lambda r: zero_share(r, "4_fast_math", ("+denormal",)), share),
    Prediction("every formula", "finite inputs failing atol = rtol = 1e-4", "none", (0, 0),
               lambda r: sum(s["tolerance"]["n_fail"] for run in r["runs"].values() for s in run["formulas"].values()),
               lambda v: f"{v:,}"),
    Prediction("reference", "float64-then-round wrong, alpha = 1.5", "of the order of 10^8 (read: 10^7.5 to 10^8.5)",
               (10**7.5, 10**8.5), lambda r: r["runs"]["1.5"]["reference"]["ties_corrected"], lambda v: f"{v:,}"),
    Prediction("reference", "exact ties alpha * x at tiny x, alpha = 1", "none", (0, 0),
               lambda r: r["runs"]["1.0"]["reference"]["exact_ties_tiny_x"], lambda v: f"{v:,}"),
)


def graded(record: dict, predictions=PREDICTIONS) -> pd.DataFrame:
    """Each prediction beside what the record measured: HELD where the value lies in the range its words are
    read as (the ``predicted`` column says how), else MISSED, with the side."""
    rows = []
    for p in predictions:
        v, (lo, hi) = p.measure(record), p.bounds
        verdict = "HELD" if lo <= v <= hi else f"MISSED ({'below' if v < lo else 'above'})"
        rows.append({"formula": p.formula, "quantity": p.quantity, "predicted": p.predicted, "measured": p.show(v),
                     "verdict": verdict})
    return pd.DataFrame(rows).set_index("formula")


# -- the record's tables, trimmed ---------------------------------------------------------------
def overview(record: dict) -> pd.DataFrame:
    """One row per formula, both alphas side by side ("alpha 1 / alpha 1.5", once where they agree): the worst
    ulp error over x < 0, the share correctly rounded and bit-identical to F.elu, and the task's bar (the worst
    error as a share of what it allows). Where each worst error lies: analysis.summary_table."""
    columns = {
        "max ulp, x < 0": lambda s: ulps(s["max_ulp"]["negative"]["ulp"]),
        "correctly rounded": lambda s: pct(s["correctly_rounded"], s["n"]),
        "bit-identical to F.elu": lambda s: pct(s["bit_identical_to_felu"], s["n"]),
        "task's bar: worst / allowed": lambda s: "FAIL" if s["tolerance"]["n_fail"] else
        f"{s['tolerance']['max_ratio']:.1e}",
    }
    runs = [record["runs"][a]["formulas"] for a in alphas(record)]
    rows = [{"formula": name, **{c: " / ".join(dict.fromkeys(f(run[name]) for run in runs)) for c, f in columns.items()}}
            for name in runs[0]]
    return pd.DataFrame(rows).set_index("formula")


def trimmed(df: pd.DataFrame, head: int, tail: int) -> tuple[pd.DataFrame, int]:
    """The first ``head`` and last ``tail`` rows, and how many were left out between them."""
    if len(df) <= head + tail:
        return df, 0
    return pd.concat([df.iloc[:head], df.iloc[len(df) - tail:]]), len(df) - head - tail


def histogram_ends(record: dict, alpha: str, head: int = 4, tail: int = 2) -> tuple[pd.DataFrame, int]:
    """The histogram's first and last bins (inputs with the sign bit set), and how many bins lie between."""
    return trimmed(histogram_table(record, alpha), head, tail)


def merge_identical(df: pd.DataFrame) -> pd.DataFrame:
    """Columns with the same values in every row shown once, their names joined by " = "."""
    groups: dict[tuple, list[str]] = {}
    for column in df.columns:
        groups.setdefault(tuple(df[column]), []).append(column)
    return pd.DataFrame({" = ".join(names): df[names[0]] for names in groups.values()}, index=df.index)


def short_class(c: dict, label: str) -> str:
    """A class of inputs in a few words: the share correctly rounded, and the share that comes out +0.0."""
    if label == "NaN":
        return f"NaN {pct(c['nan_out'], c['n'])}; F.elu's bits {pct(c['identical_to_felu'], c['n'])}"
    text = pct(c["correctly_rounded"], c["n"])
    if c["plus_zero_out"] and c["correctly_rounded"] < c["n"]:
        text += f"; +0.0 for {pct(c['plus_zero_out'], c['n'])}"
    return text


def classes_where_they_differ(record: dict, alpha: str) -> tuple[pd.DataFrame, list[str]]:
    """Share correctly rounded per class of inputs, only the classes where some formula is not all correctly
    rounded; formulas that agree everywhere in one column. Also the classes left out (every formula exact)."""
    full = classes_table(record, alpha)  # for its row labels and order
    formulas = record["runs"][alpha]["formulas"]
    rows, same = {}, []
    for row_label in full.index:
        label = row_label.rsplit(" (", 1)[0]
        cells = {name: short_class(s["classes"][label], label) for name, s in formulas.items()}
        exact = all(s["classes"][label]["correctly_rounded"] == s["classes"][label]["n"] for s in formulas.values())
        if exact or (label == "NaN" and len(set(cells.values())) == 1):
            same.append(label)
        else:
            rows[row_label] = cells
    return merge_identical(pd.DataFrame(rows).T), same


def specials_where_wrong(record: dict, alpha: str) -> pd.DataFrame:
    """The special inputs where some formula's output is not the correctly rounded ELU (marked *), formulas that
    agree on every such input in one column."""
    df = specials_table(record, alpha).drop(columns="x")
    wrong = df.apply(lambda row: any(str(v).endswith(" *") for v in row), axis=1)
    return merge_identical(df[wrong])


def bounds_both(record: dict) -> pd.DataFrame:
    """The documented bounds B (formulas_table lists them) against the whole ELU, both alphas in one cell
    ("alpha 1 / alpha 1.5")."""
    keys, rows = alphas(record), []
    for name, s in record["runs"][keys[0]]["formulas"].items():
        per = [record["runs"][a]["formulas"][name] for a in keys]
        ratios = []
        for f in per:
            bn = f["binades_negative"]
            ratios.append(max((m / p for m, p in zip(bn["max_ulp"][:255], bn["predicted_max_ulp"][:255]) if p > 0),
                              default=float("nan")))
        over = [exceeds_own_bound(record, a, name) for a in keys]
        rows.append({
            "formula": name,
            "inputs above B carried through ELU": " / ".join(str(f["bound"]["n_exceed"]) for f in per),
            "worst binade / carried B": " / ".join(f"{r:.3g}" for r in ratios),
            "binades where ELU is above B ulp": " / ".join(
                f"{len(o)} ({binade_text(min(o))} to {binade_text(max(o) + 1)})" if o else "none" for o in over),
        })
    return pd.DataFrame(rows).set_index("formula")


def same_as_line(record: dict) -> str:
    """Steps 2 and 3 against step 1, every alpha, in one sentence per build they are compared with."""
    groups: dict[str, dict[str, list]] = {}
    for alpha, run in record["runs"].items():
        for name, d in run["same_as"].items():
            groups.setdefault(d["as"], {}).setdefault(name, []).append((alpha, d["n_differ"]))
    n, out = record["method"]["n_inputs"], []
    for to, builds in groups.items():
        same = [b for b, runs in builds.items() if all(k == 0 for _, k in runs)]
        differ = [f"`{b}` differs on " + ", ".join(f"{k:,} (alpha = {a})" for a, k in runs)
                  for b, runs in builds.items() if b not in same]
        if same:
            out.append(f"{' and '.join(f'`{b}`' for b in same)} {'is' if len(same) == 1 else 'are'} bit-identical to "
                       f"`{to}` on all {n:,} inputs at alpha = {' and '.join(record['runs'])}.")
        out += [f"{d} of {n:,} inputs from `{to}`." for d in differ]
    return " ".join(out)
