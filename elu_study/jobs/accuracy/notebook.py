"""Notebook 07's cells: ``cell(name, record)`` fills templates/accuracy/<name>.md.j2 with the record's numbers."""

from __future__ import annotations

import math

from elu_study.core.record import record_path, this_gpu
from elu_study.core.text import Text, show
from elu_study.jobs.accuracy import analysis as a


def _max(r: dict, alpha: str, name: str, label: str | None = None) -> float | None:
    """A formula's largest ulp error over the inputs with the sign bit set (or over one class of inputs); None for a
    formula the record lacks."""
    s = r["runs"][alpha]["formulas"].get(name)
    return None if s is None else s["classes"][label]["max_ulp"] if label else s["max_ulp"]["negative"]["ulp"]


def _zeros(r: dict, name: str, *labels: str) -> float:
    """The share of the inputs of these classes for which a formula returns +0.0 (alpha = 1)."""
    c = r["runs"]["1.0"]["formulas"][name]["classes"]
    return sum(c[k]["plus_zero_out"] for k in labels) / sum(c[k]["n"] for k in labels)


def _binades(r: dict, name: str, lowest: int, highest: int) -> float:
    """The largest ulp error over the negative binades |x| in [2^lowest, 2^(highest + 1)), alpha = 1."""
    return max(r["runs"]["1.0"]["formulas"][name]["binades_negative"]["max_ulp"][lowest + 127:highest + 128])


def _share(v: float) -> str:
    return a.pct(round(v * 1e9), 10**9)


def _identical(r: dict) -> float:
    """5_streaming's least share of outputs bit-identical to F.elu (or differing only in a NaN's bits), over alphas."""
    return min((s["bit_identical_to_felu"] + s["differ_from_felu_only_in_nan_bits"]) / s["n"]
               for s in (run["formulas"]["5_streaming"] for run in r["runs"].values()))


def _failing(r: dict) -> int:
    return sum(s["tolerance"]["n_fail"] for run in r["runs"].values() for s in run["formulas"].values())


# Notebook 07's one prediction (written before the run; step 6's rows are issue 24's), claim by claim, grouped as
# the notebook words it: (group, claim, what grades it, how that is shown, the range its words are read as: shown,
# low, high, inclusive).
EXPM1, POLY, MINUS1 = "`expm1f`: step 5, F.elu, torch.compile", "step 6's formula", "`exp(x) - 1`: steps 1-4"
N = "{:,}".format
CLAIMS = (
    (EXPM1, "5_streaming max ulp, alpha = 1", lambda r: _max(r, "1.0", "5_streaming"), a.ulps, "<= 1", 0.0, 1.0),
    (EXPM1, "torch.compile max ulp, normal x, alpha = 1",
     lambda r: _max(r, "1.0", "torch.compile(F.elu)", "-normal"), a.ulps, "<= 1", 0.0, 1.0),
    (EXPM1, "5_streaming max ulp, alpha 1.5 minus 1",
     lambda r: _max(r, "1.5", "5_streaming") - _max(r, "1.0", "5_streaming"), a.ulps, "0.25 to 0.75", 0.25, 0.75),
    (EXPM1, "5_streaming bit-identical to F.elu", _identical, _share, "all", 1.0, 1.0),
    (EXPM1, "torch.compile: negative denormals to +0.0", lambda r: _zeros(r, "torch.compile(F.elu)", "-denormal"),
     _share, "some or all", 1e-9, 1.0),
    (POLY, "max ulp, alpha = 1", lambda r: _max(r, "1.0", "6_beyond_copy"), a.ulps, "<= 2", 0.0, 2.0),
    (POLY, "max ulp, alpha = 1.5", lambda r: _max(r, "1.5", "6_beyond_copy"), a.ulps, "<= 2.5", 0.0, 2.5),
    (MINUS1, "1_naive max ulp, x <= -1/2", lambda r: _binades(r, "1_naive", -1, 127), a.ulps, "1 to 3", 1.0, 3.0),
    (MINUS1, "1_naive max ulp", lambda r: _max(r, "1.0", "1_naive"), lambda v: f"2^{math.log2(v):.1f}",
     "2^22.5 to 2^23.5", 2**22.5, 2**23.5),
    (MINUS1, "1_naive: negative denormals and -0.0 to +0.0", lambda r: _zeros(r, "1_naive", "-denormal", "-0.0"),
     _share, "all", 1.0, 1.0),
    (MINUS1, "4_fast_math max ulp, x in (-2, -1/2]", lambda r: _binades(r, "4_fast_math", -1, 0), a.ulps,
     "10 to 99", 10.0, 99.0),
    (MINUS1, "4_fast_math: positive denormals to +0.0", lambda r: _zeros(r, "4_fast_math", "+denormal"), _share,
     "all", 1.0, 1.0),
    ("the task's bar", "finite inputs failing atol = rtol = 1e-4", _failing, N, "none", 0, 0),
    ("the reference", "float64-then-round wrong, alpha = 1.5", lambda r: r["runs"]["1.5"]["reference"]["ties_corrected"],
     N, "10^7.5 to 10^8.5", 10**7.5, 10**8.5),
    ("the reference", "exact ties at tiny x, alpha = 1", lambda r: r["runs"]["1.0"]["reference"]["exact_ties_tiny_x"],
     N, "none", 0, 0),
)


def graded(r: dict) -> dict[str, list[dict]]:
    """Each group's claims, graded against the record: {group: [{what, shown, range, held}]}."""
    groups: dict[str, list[dict]] = {}
    for group, what, fn, shown, words, lo, hi in CLAIMS:
        v = fn(r)
        groups.setdefault(group, []).append({"what": what, "range": words, "held": v is not None and lo <= v <= hi,
                                             "shown": "not measured" if v is None else shown(v)})
    return groups



# Each cell's numbers: {name: record -> the template's arguments}.
CELLS = {
    "intro": lambda r, measured_here: {
        "r": r, "measured_here": measured_here, "here": this_gpu(),
        "file": record_path(r["provenance"]["gpu"], "accuracy").name,
        "same": a.same_as(r)},
    "predictions": lambda r: {"groups": graded(r)},
    "overview": lambda r: {"df": a.both(r, a.summary_table)},
    "classes": lambda r, alpha="1.0": dict(zip(("df", "alike"), a.classes_where_they_differ(r, alpha)), alpha=alpha),
    "bounds": lambda r: {"df": a.both(r, a.bounds_table, collapse=False)},
    "reference": lambda r: {"refs": {alpha: run["reference"] for alpha, run in r["runs"].items()}},
}


def cell(name: str, record: dict, **options) -> Text:
    """Notebook 07's cell ``name`` (a key of CELLS) from the record, as text that displays as markdown."""
    return show(f"accuracy/{name}.md.j2", **CELLS[name](record, **options))
