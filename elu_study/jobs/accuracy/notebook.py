"""Notebook 07's cells: ``cell(name, record)`` fills templates/accuracy/<name>.md.j2 with the record's numbers."""

from __future__ import annotations

import math

from elu_study.core.record import record_path, this_gpu
from elu_study.core.text import Text, show
from elu_study.jobs.accuracy import analysis as a


def _max(r: dict, alpha: str, name: str, label: str | None = None) -> float:
    """A formula's largest ulp error over the inputs with the sign bit set (or over one class of inputs)."""
    s = r["runs"][alpha]["formulas"][name]
    return s["classes"][label]["max_ulp"] if label else s["max_ulp"]["negative"]["ulp"]


def _zeros(r: dict, name: str, *labels: str) -> float:
    """The share of the inputs of these classes for which a formula returns +0.0 (alpha = 1)."""
    c = r["runs"]["1.0"]["formulas"][name]["classes"]
    return sum(c[k]["plus_zero_out"] for k in labels) / sum(c[k]["n"] for k in labels)


def _binades(r: dict, name: str, lowest: int, highest: int) -> float:
    """The largest ulp error over the negative binades |x| in [2^lowest, 2^(highest + 1)), alpha = 1."""
    return max(r["runs"]["1.0"]["formulas"][name]["binades_negative"]["max_ulp"][lowest + 127:highest + 128])


def _share(v: float) -> str:
    return a.pct(round(v * 1e9), 10**9)


# What grades each claim, and how it is shown.
MEASURES = {
    "expm1": (lambda r: _max(r, "1.0", "5_streaming"), a.ulps),
    "compile": (lambda r: _max(r, "1.0", "torch.compile(F.elu)", "-normal"), a.ulps),
    "alpha_gap": (lambda r: _max(r, "1.5", "5_streaming") - _max(r, "1.0", "5_streaming"), a.ulps),
    "identical": (lambda r: min((s["bit_identical_to_felu"] + s["differ_from_felu_only_in_nan_bits"]) / s["n"]
                                for s in (run["formulas"]["5_streaming"] for run in r["runs"].values())), _share),
    "compile_zeros": (lambda r: _zeros(r, "torch.compile(F.elu)", "-denormal"), _share),
    "naive_half": (lambda r: _binades(r, "1_naive", -1, 127), a.ulps),
    "naive_max": (lambda r: _max(r, "1.0", "1_naive"), lambda v: f"2^{math.log2(v):.1f}"),
    "naive_zeros": (lambda r: _zeros(r, "1_naive", "-denormal", "-0.0"), _share),
    "fast_binade": (lambda r: _binades(r, "4_fast_math", -1, 0), a.ulps),
    "fast_zeros": (lambda r: _zeros(r, "4_fast_math", "+denormal"), _share),
    "tolerance": (lambda r: sum(s["tolerance"]["n_fail"] for run in r["runs"].values()
                                for s in run["formulas"].values()), "{:,}".format),
    "ties": (lambda r: r["runs"]["1.5"]["reference"]["ties_corrected"], "{:,}".format),
    "ties_1": (lambda r: r["runs"]["1.0"]["reference"]["exact_ties_tiny_x"], "{:,}".format),
    "poly_1": (lambda r: _max_or_none(r, "1.0", "6_beyond_copy"), a.ulps),
    "poly_15": (lambda r: _max_or_none(r, "1.5", "6_beyond_copy"), a.ulps),
}

# Notebook 07's one prediction (written before the run; step 6's rows are issue 24's), claim by claim, grouped as
# the notebook words it: (group, claim, measure, the range its words are read as: shown, low, high, inclusive).
EXPM1, POLY, MINUS1 = "`expm1f`: step 5, F.elu, torch.compile", "step 6's formula", "`exp(x) - 1`: steps 1-4"
CLAIMS = (
    (EXPM1, "5_streaming max ulp, alpha = 1", "expm1", "<= 1", 0.0, 1.0),
    (EXPM1, "torch.compile max ulp, normal x, alpha = 1", "compile", "<= 1", 0.0, 1.0),
    (EXPM1, "5_streaming max ulp, alpha 1.5 minus 1", "alpha_gap", "0.25 to 0.75", 0.25, 0.75),
    (EXPM1, "5_streaming bit-identical to F.elu", "identical", "all", 1.0, 1.0),
    (EXPM1, "torch.compile: negative denormals to +0.0", "compile_zeros", "some or all", 1e-9, 1.0),
    (POLY, "max ulp, alpha = 1", "poly_1", "<= 2", 0.0, 2.0),
    (POLY, "max ulp, alpha = 1.5", "poly_15", "<= 2.5", 0.0, 2.5),
    (MINUS1, "1_naive max ulp, x <= -1/2", "naive_half", "1 to 3", 1.0, 3.0),
    (MINUS1, "1_naive max ulp", "naive_max", "2^22.5 to 2^23.5", 2**22.5, 2**23.5),
    (MINUS1, "1_naive: negative denormals and -0.0 to +0.0", "naive_zeros", "all", 1.0, 1.0),
    (MINUS1, "4_fast_math max ulp, x in (-2, -1/2]", "fast_binade", "10 to 99", 10.0, 99.0),
    (MINUS1, "4_fast_math: positive denormals to +0.0", "fast_zeros", "all", 1.0, 1.0),
    ("the task's bar", "finite inputs failing atol = rtol = 1e-4", "tolerance", "none", 0, 0),
    ("the reference", "float64-then-round wrong, alpha = 1.5", "ties", "10^7.5 to 10^8.5", 10**7.5, 10**8.5),
    ("the reference", "exact ties at tiny x, alpha = 1", "ties_1", "none", 0, 0),
)


def graded(r: dict) -> dict[str, list[dict]]:
    """Each group's claims, graded against the record: {group: [{what, shown, range, held}]}."""
    groups: dict[str, list[dict]] = {}
    for group, what, key, words, lo, hi in CLAIMS:
        fn, shown = MEASURES[key]
        v = fn(r)
        groups.setdefault(group, []).append({"what": what, "range": words, "held": v is not None and lo <= v <= hi,
                                             "shown": "not measured" if v is None else shown(v)})
    return groups


def _max_or_none(r: dict, alpha: str, name: str) -> float | None:
    return _max(r, alpha, name) if name in r["runs"][alpha]["formulas"] else None

# Each cell's numbers: {name: record -> the template's arguments}.
CELLS = {
    "intro": lambda r, measured_here: {
        "r": r, "measured_here": measured_here, "here": this_gpu(),
        "file": record_path(r["provenance"]["gpu"], "accuracy").name,
        "same": {to: [*g["same"], *a.code(g["differ"])] for to, g in a.same_as(r).items()}},
    "predictions": lambda r: {"groups": graded(r)},
    "overview": lambda r: {"df": a.both(r, a.summary_table).iloc[:, :4]},  # the first four columns
    "histogram": lambda r, alpha="1.0": dict(zip(("df", "left_out"), a.histogram_ends(r, alpha)), alpha=alpha),
    "classes": lambda r, alpha="1.0": dict(zip(("df", "alike"), a.classes_where_they_differ(r, alpha)), alpha=alpha),
    "specials": lambda r, alpha="1.5": {"df": a.specials_where_wrong(r, alpha), "alpha": alpha},
    "bounds": lambda r: {"df": a.both(r, a.bounds_table, collapse=False)},
    "same_as": lambda r: {"groups": a.same_as(r), "n": r["method"]["n_inputs"], "alphas": list(r["runs"])},
    "reference": lambda r: {"refs": {alpha: run["reference"] for alpha, run in r["runs"].items()}},
    # The findings, and the formulas that flush denormals: their carried bound has the model's flush-to-zero term.
    "conclusions": lambda r: {**a.findings(r), "flushing": a.code(f["name"] for f in r["formulas"]
                                                                    if f.get("flushes_denormals"))},
}


def cell(name: str, record: dict, **options) -> Text:
    """Notebook 07's cell ``name`` (a key of CELLS) from the record, as text that displays as markdown."""
    return show(f"accuracy/{name}.md.j2", **CELLS[name](record, **options))
