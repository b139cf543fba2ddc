"""Reading the accuracy record (results/<gpu>-accuracy.json): the tables and the sentences of
notebooks/07_accuracy.ipynb. Nothing here measures: ``python -m elu_study accuracy`` does, once per run.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from elu_study.core.record import record_path, this_gpu
from elu_study.jobs.accuracy.definitions import DENORMAL_OUTPUT

BOUND_CONSTANT = {"expf": 2.0, "expm1f": 1.0}  # __expf's bound grows with |x|


# -- the record ---------------------------------------------------------------------------------
def data_source(record: dict, measured_here: bool) -> str:
    """The notebook's first line: which record it shows, and why (see core.record.source)."""
    p = record["provenance"]
    name, date = record_path(p["gpu"], "accuracy").name, p["date_utc"][:10]
    if measured_here:
        return (f"Data source: results/{name}, written on this GPU ({p['gpu']}) by `python -m elu_study accuracy` "
                f"on {date}")
    here = this_gpu()
    where = "NO GPU HERE" if here is None else f"NO ACCURACY RECORD FOR THIS GPU ({here})"
    return f"Data source: {where}. Every number below is the recorded run results/{name} ({p['gpu']}, {date})"


def alphas(record: dict) -> list[str]:
    """The runs' keys: alpha as the record writes it ("1.0", "1.5")."""
    return list(record["runs"])


def formula_names(record: dict) -> list[str]:
    return [f["name"] for f in record["formulas"]]


def caption(record: dict) -> str:
    """The run's software and size (the GPU and the date are data_source's)."""
    p, m = record["provenance"], record["method"]
    inputs = "all 2^32 float32 inputs" if m["every_input"] else f"{m['n_inputs']} of the 2^32 float32 inputs"
    return (f"Driver {p['driver']}, CUDA {p['cuda_runtime']}, torch {p['torch']}, nvcc {p['nvcc']}, commit "
            f"{p.get('commit')}: {inputs}, alpha = {' and '.join(alphas(record))}, through "
            f"{len(record['formulas'])} formulas in {m['seconds']} s (peak GPU memory {m['peak_gpu_memory_gib']} GiB)")


def pct(part: int, whole: int) -> str:
    """A share that never rounds to 100 % or 0 % unless it is exactly that."""
    if whole == 0:
        return "-"
    if part == whole:
        return "100 %"
    if part == 0:
        return "0 %"
    share = 100 * part / whole
    for digits in range(1, 12):
        text = f"{share:.{digits}f}"
        if 0 < float(text) < 100:
            return f"{text} %"
    return f"{share:.12f} %"


def ulps(v: float | None) -> str:
    if v is None:
        return "-"
    if v == 0:
        return "0"
    return f"{v:.4g}" if v < 1e5 else f"{v:.3e}"


# -- tables -------------------------------------------------------------------------------------
def summary_table(record: dict, alpha: str) -> pd.DataFrame:
    """Per formula: worst ulp error and where, shares correctly rounded and bit-identical to F.elu, the task's bar."""
    rows = []
    for name, s in record["runs"][alpha]["formulas"].items():
        neg, pos = s["max_ulp"]["negative"], s["max_ulp"]["positive"]
        tol = s["tolerance"]
        rows.append({
            "formula": name,
            "max ulp, sign bit set": ulps(neg and neg["ulp"]),
            "at x": neg["at"]["x"] if neg else "-",
            "(inputs at max)": neg["n_at_max"] if neg else "-",
            "max ulp, x > 0": ulps(pos and pos["ulp"]),
            "correctly rounded": pct(s["correctly_rounded"], s["n"]),
            "bit-identical to F.elu": pct(s["bit_identical_to_felu"], s["n"]),
            "atol = rtol = 1e-4": "pass" if tol["n_fail"] == 0 else f"FAIL on {tol['n_fail']}",
            "max |y - F.elu| / (atol + rtol |F.elu|)": f"{tol['max_ratio']:.2e}" if tol["max_ratio"] is not None else "-",
        })
    return pd.DataFrame(rows).set_index("formula")


def histogram_table(record: dict, alpha: str, sign: str = "negative") -> pd.DataFrame:
    """Inputs per ulp-error bin (rows with no input in any formula left out)."""
    labels = record["method"]["histogram_labels"]
    data = {name: s["histogram"][sign] for name, s in record["runs"][alpha]["formulas"].items()}
    df = pd.DataFrame(data, index=pd.Index(labels, name="ulp error"))
    return df[(df != 0).any(axis=1)]


def _describe_class(c: dict, label: str) -> str:
    n = c["n"]
    parts = []
    if label == "NaN":
        parts.append(f"NaN {pct(c['nan_out'], n)}")
        parts.append(f"same bits as x {pct(c['equal_input'], n)}")
        parts.append(f"as F.elu's bits {pct(c['identical_to_felu'], n)}")
        return "; ".join(parts)
    parts.append("all correctly rounded" if c["correctly_rounded"] == n else f"correctly rounded {pct(c['correctly_rounded'], n)}")
    for key, what in (("plus_zero_out", "+0.0"), ("minus_zero_out", "-0.0"), ("nan_out", "NaN")):
        if c[key] and not (label in ("+0.0", "-0.0") and c["correctly_rounded"] == n):
            parts.append(f"gives {what} for {pct(c[key], n)}")
    if c.get("max_ulp"):
        parts.append(f"max {ulps(c['max_ulp'])} ulp")
    return "; ".join(parts)


def classes_table(record: dict, alpha: str) -> pd.DataFrame:
    """What each formula does with zeros, denormals (in and out), infinities and NaN."""
    formulas = record["runs"][alpha]["formulas"]
    order = ("+normal", "-normal", "+0.0", "-0.0", "+denormal", "-denormal", DENORMAL_OUTPUT, "+inf", "-inf", "NaN")
    rows = {}
    for label in order:
        first = next(iter(formulas.values()))["classes"].get(label)
        if not first or not first["n"]:
            continue
        rows[f"{label} ({first['n']} input{'s' if first['n'] != 1 else ''})"] = {
            name: _describe_class(s["classes"][label], label) for name, s in formulas.items()
        }
    return pd.DataFrame(rows).T


def specials_table(record: dict, alpha: str) -> pd.DataFrame:
    """Each special input's output, per formula ('nan 0x7fc00000': a NaN and its bits)."""
    sp = record["specials"]
    out = sp["outputs"][alpha]
    rows = []
    for i, inp in enumerate(sp["inputs"]):
        row = {"input": inp["label"], "x": _show_bits(inp["x_bits"])}
        correct = out["reference (correctly rounded)"][i]
        row["correctly rounded"] = _show_bits(correct) if correct else "NaN"
        for name in formula_names(record):
            b = out[name][i]
            row[name] = _show_bits(b) + ("" if correct is None or b == correct else " *")
        rows.append(row)
    return pd.DataFrame(rows).set_index("input")


def _show_bits(hex_bits: str) -> str:
    """A float32 for reading: shortest digits; denormals as a multiple of 2^-149; NaN with its bits."""
    v = np.array([int(hex_bits, 16)], dtype=np.uint32).view(np.float32)[0]
    if v != v:
        return f"nan {hex_bits}"
    if v != 0 and abs(v) < np.float32(2.0**-126):
        k = int(abs(float(v)) / 2.0**-149)
        return f"{'-' if v < 0 else ''}{k} x 2^-149"
    return str(v)


def _binade_bound(exponential: str, e: int) -> float | None:
    """The exponential's own documented bound over negative binade e (its largest |x| for __expf)."""
    if exponential in BOUND_CONSTANT:
        return BOUND_CONSTANT[exponential]
    if exponential == "__expf":
        high = math.ldexp(1.0, e - 126) if e else math.ldexp(1.0, -126)
        return 2.0 + math.floor(1.173 * high)
    return None


def exceeds_own_bound(record: dict, alpha: str, name: str) -> list[int]:
    """Negative binades (exponent fields) where ELU's max ulp error is above the exponential's own bound."""
    s = record["runs"][alpha]["formulas"][name]
    exp = s["bound"]["exponential"]
    return [e for e, v in enumerate(s["binades_negative"]["max_ulp"][:255]) if v > _binade_bound(exp, e)]


def beyond_constant_bound(record: dict, alpha: str, name: str) -> int | str:
    """Inputs whose ELU is more than the exponential's B ulp from the exact value (B = 1 or 2: a histogram edge)."""
    s = record["runs"][alpha]["formulas"][name]
    bound = BOUND_CONSTANT.get(s["bound"]["exponential"])
    if bound is None:
        return "-"
    labels = record["method"]["histogram_labels"]
    first = labels.index(f"({bound:g}, {2 * bound:g}]")
    return sum(sum(s["histogram"][side][first:-1]) for side in ("negative", "positive"))


def binade_text(e: int) -> str:
    return "denormals" if e == 0 else f"2^{e - 127}"


def bounds_table(record: dict, alpha: str) -> pd.DataFrame:
    """The exponential's documented bound against the whole ELU: carried through, and as a number of ulp."""
    rows = []
    for name, s in record["runs"][alpha]["formulas"].items():
        b = s["bound"]
        bn = s["binades_negative"]
        ratios = [m / p for m, p in zip(bn["max_ulp"][:255], bn["predicted_max_ulp"][:255]) if p > 0]
        over = exceeds_own_bound(record, alpha, name)
        rows.append({
            "formula": name,
            "exponential's bound": b["documented"],
            "inputs more than that from the exact value": beyond_constant_bound(record, alpha, name),
            "ELU above that many ulp (x < 0)": "nowhere" if not over else
            f"in {len(over)} binades, |x| from {binade_text(min(over))} to below {binade_text(max(over) + 1)}",
            "inputs above the bound carried through ELU": b["n_exceed"],
            "of which a denormal input or output": b.get("n_exceed_denormal_in_or_out", "-"),
            "worst measured / carried bound, per binade": f"{max(ratios):.3g}" if ratios else "-",
        })
    return pd.DataFrame(rows).set_index("formula")


def reference_table(record: dict) -> pd.DataFrame:
    """How far float64-then-round is from correctly rounded, per alpha, and how that is known."""
    rows = {}
    for alpha, run in record["runs"].items():
        r = run["reference"]
        rows[f"alpha = {alpha}"] = {
            f"within {r['margin_ulp64']} float64 ulps of a float32 midpoint": r["near_midpoint"],
            "of which exact ties alpha * x at tiny \\|x\\| (resolved toward zero)": r["exact_ties_tiny_x"],
            "ties where float64-then-round was wrong": r["ties_corrected"],
            "resolved with 200-digit decimals": r["resolved"],
            "of which float64-then-round was wrong": r["corrected"],
            "left unresolved": r["unresolved"],
            "tie rule checked with decimals: inputs / disagreements": f"{r['tie_check']['n']} / {r['tie_check']['disagree']}",
            "float64 vs decimals on a random sample: inputs / max float64 ulps":
                f"{r['sample_check']['n']} / {r['sample_check']['max_err_ulp64']:.3g}",
        }
    return pd.DataFrame(rows)


def same_as_lines(record: dict) -> list[str]:
    lines = []
    for alpha, run in record["runs"].items():
        for name, d in run["same_as"].items():
            verdict = "bit-identical to" if d["n_differ"] == 0 else f"differs on {d['n_differ']} inputs from"
            lines.append(f"alpha = {alpha}: {name} is {verdict} {d['as']} over all {record['method']['n_inputs']} inputs")
    return lines



# -- sentences ----------------------------------------------------------------------------------
def _count_out(s: dict, key: str, labels) -> int:
    return sum(s["classes"].get(label, {}).get(key, 0) for label in labels)


def _names(names) -> str:
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def ulp_words(v: float) -> str:
    """An ulp error for a sentence: large ones also as a power of two."""
    return f"{ulps(v)} ulp" + (f" (2^{math.log2(v):.1f})" if v >= 1024 else "")


def _per_alpha(record: dict, value) -> str:
    """A value at every alpha: "1.133 ulp (alpha = 1.0), 2.125 ulp (alpha = 1.5)", or once where they agree."""
    values = {alpha: value(run) for alpha, run in record["runs"].items()}
    if len(values) > 1 and len(set(values.values())) == 1:
        return f"{next(iter(values.values()))} (every alpha)"
    return ", ".join(f"{v} (alpha = {alpha})" for alpha, v in values.items())


def formula_lines(record: dict) -> list[str]:
    """The formulas grouped by exponential: expm1f's worst error on normal inputs; expf(x) - 1's cancellation."""
    out, first = [], next(iter(record["runs"].values()))["formulas"]
    expm1 = [f["name"] for f in record["formulas"] if f["exponential"] == "expm1f" and f["name"] in first]
    minus1 = [f["name"] for f in record["formulas"] if f["exponential"] != "expm1f" and f["name"] in first]
    if expm1:  # over the normal inputs: a formula that flushes denormals is wrong there by design
        normal = all("-normal" in first[n]["classes"] for n in expm1)
        of = (lambda s: s["classes"]["-normal"]["max_ulp"]) if normal else (lambda s: s["max_ulp"]["negative"]["ulp"])  # noqa: E731
        worst = lambda run: ulp_words(max(of(run["formulas"][n]) for n in expm1))  # noqa: E731
        out.append(f"- {_names(expm1)} compute `expm1f(x)`: at most {_per_alpha(record, worst)} on negative "
                   f"{'normal ' if normal else ''}inputs.")
    if minus1:
        worst = lambda run: ulp_words(max(run["formulas"][n]["max_ulp"]["negative"]["ulp"] for n in minus1))  # noqa: E731
        zeros = max(_count_out(first[n], "plus_zero_out", ("-normal", "-denormal")) for n in minus1)
        out.append(f"- {_names(minus1)} compute `exp(x) - 1`, which cancels near 0: up to {_per_alpha(record, worst)}, "
                   f"and +0.0 for up to {zeros:,} negative inputs.")
    for label, side in (("+denormal", "positive"), ("-denormal", "negative")):
        flushed = [n for n, s in first.items() if s["classes"].get(label, {}).get("plus_zero_out")]
        if flushed:
            out.append(f"- {_names(flushed)} return{'s' if len(flushed) == 1 else ''} +0.0 for every {side} denormal input "
                       f"({first[flushed[0]]['classes'][label]['n']:,} of them).")
    return out


def check_lines(record: dict) -> list[str]:
    """The task's bar, the documented bounds and the reference, each in one bullet."""
    runs = record["runs"].values()
    failing = sorted({n for run in runs for n, s in run["formulas"].items() if s["tolerance"]["n_fail"]})
    if failing:
        bar = f"- The task's bar (atol = rtol = 1e-4 against F.elu) fails for {_names(failing)}."
    else:
        a, name, s = max(((a, n, s) for a, run in record["runs"].items() for n, s in run["formulas"].items()),
                         key=lambda t: t[2]["tolerance"]["max_ratio"] or 0)
        bar = (f"- Every formula passes the task's bar (atol = rtol = 1e-4 against F.elu) on every finite input; the "
               f"closest is `{name}`, at {s['tolerance']['max_ratio']:.1e} of the allowed error (alpha = {a}).")
    exceed = sorted({n for run in runs for n, s in run["formulas"].items() if s["bound"]["n_exceed"]})
    bound = ("- No input exceeds its exponential's documented bound carried through ELU, at either alpha."
             if not exceed else f"- Above the documented bound carried through ELU: {_names(exceed)}.")
    fixed = _per_alpha(record, lambda run: f"{run['reference']['ties_corrected'] + run['reference']['corrected']:,}")
    open_ = sum(run["reference"]["unresolved"] for run in runs)
    ref = (f"- Reference: float64-then-round was wrong for {fixed} inputs; each was found and corrected"
           + (f", except {open_:,} left unresolved." if open_ else "."))
    return [bar, bound, ref]


def conclusions(record: dict) -> str:
    """The findings, one bullet each, built from the record (so no number here is typed by hand); the
    per-formula numbers are in the tables, not repeated here."""
    return "\n".join([*formula_lines(record), *check_lines(record)])
