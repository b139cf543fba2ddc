"""Reading the accuracy record (results/<gpu>-accuracy.json): tables, figures and sentences for
notebooks/07_accuracy.ipynb. Nothing here measures: ``python -m elu_study accuracy`` does, once per run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from elu_study.jobs.accuracy.measure import DENORMAL_OUTPUT, REFERENCE_GPU, record_path

# Drawn in this order, with these styles; formulas that agree bit for bit draw on top of each other.
STYLES = {
    "1_naive": dict(color="tab:red", marker="o", ms=5, mfc="none"),
    "4_fast_math": dict(color="tab:orange", marker="s", ms=3),
    "5_streaming": dict(color="tab:blue", marker="^", ms=4),
    "F.elu": dict(color="black", marker="x", ms=4),
    "torch.compile(F.elu)": dict(color="tab:green", marker="+", ms=6),
}
BOUND_CONSTANT = {"expf": 2.0, "expm1f": 1.0}  # __expf's bound grows with |x|
ZERO_FLOOR = 2.0**-4  # where a binade with no error at all is drawn on a log axis


# -- the record ---------------------------------------------------------------------------------
def load(gpu: str = REFERENCE_GPU, path: str | Path | None = None) -> dict:
    path = Path(path) if path is not None else record_path(gpu)
    if not path.exists():
        raise FileNotFoundError(
            f"no accuracy record at {path}: `python -m elu_study accuracy` writes it (on a GPU); "
            "the notebook shows that record and measures nothing itself"
        )
    return json.loads(path.read_text())


def open_record(path: str | Path | None = None) -> dict:
    """The record this notebook shows, after one line saying where it comes from.

    On a GPU: the record `python -m elu_study accuracy` wrote for this GPU (run it first: measured
    once per run, shown here). Without one: the committed record of the reference GPU.
    """
    import torch

    if path is not None:
        record = load(path=path)
        print(f"Data source: {path} ({record['provenance']['gpu']}, {record['provenance']['date_utc'][:10]})")
    elif torch.cuda.is_available():
        gpu = torch.cuda.get_device_name()
        path = record_path(gpu)
        record = load(path=path)
        print(f"Data source: results/{path.name}, written on this GPU ({gpu}) by `python -m elu_study accuracy` "
              f"on {record['provenance']['date_utc'][:10]}")
    else:
        path = record_path(REFERENCE_GPU)
        record = load(path=path)
        p = record["provenance"]
        print(f"Data source: NO GPU HERE. Every number below is the recorded run results/{path.name} "
              f"({p['gpu']}, {p['date_utc'][:10]})")
    return record


def alphas(record: dict) -> list[str]:
    return list(record["runs"])


def formula_names(record: dict) -> list[str]:
    return [f["name"] for f in record["formulas"]]


def caption(record: dict) -> str:
    p, m = record["provenance"], record["method"]
    inputs = "all 2^32 float32 inputs" if m["every_input"] else f"{m['n_inputs']} of the 2^32 float32 inputs"
    return (f"{p['gpu']}, driver {p['driver']}, CUDA {p['cuda_runtime']}, torch {p['torch']}, nvcc {p['nvcc']}, "
            f"{p['date_utc'][:10]}: {inputs}, alpha = {' and '.join(alphas(record))}, through "
            f"{len(record['formulas'])} formulas in {m['seconds']} s (peak GPU memory {m['peak_gpu_memory_gib']} GiB)")


def markdown(df: pd.DataFrame, index: bool = True) -> str:
    return df.to_markdown(index=index, disable_numparse=True)


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
    import numpy as np

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
            "of which exact ties alpha * x at tiny |x| (resolved toward zero)": r["exact_ties_tiny_x"],
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


# -- figures ------------------------------------------------------------------------------------
def _binade_x(e: int) -> float:
    return math.ldexp(1.0, -149) if e == 0 else math.ldexp(1.0, e - 127)


def binade_figure(record: dict):
    """Max ulp error per binade of |x| (x < 0), one panel per alpha; dashed: the documented bound carried through."""
    keys = alphas(record)
    fig, axes = plt.subplots(1, len(keys), figsize=(6.2 * len(keys), 5.0), sharey=True, squeeze=False)
    measured_max = 1.0
    # Right end: two binades past the last one where any formula has any error.
    last = max((e for run in record["runs"].values() for s in run["formulas"].values()
                for e, v in enumerate(s["binades_negative"]["max_ulp"][:255]) if v > 0), default=127)
    for ax, alpha in zip(axes[0], keys):
        formulas = record["runs"][alpha]["formulas"]
        drawn_bounds = set()
        for name, s in formulas.items():
            bn = s["binades_negative"]
            es = list(range(255))  # 255: inf and NaN
            xs = [_binade_x(e) for e in es]
            ys = [max(bn["max_ulp"][e], ZERO_FLOOR) for e in es]
            measured_max = max(measured_max, *ys)
            style = STYLES.get(name, {})
            ax.plot(xs[1:], ys[1:], lw=1, label=name, **style)
            ax.plot(xs[:1], ys[:1], ls="none", **style)  # the denormals: not joined to the normal binades
            key = (s["bound"]["exponential"], any(f["flushes_denormals"] for f in record["formulas"] if f["name"] == name))
            if key not in drawn_bounds:
                drawn_bounds.add(key)
                pred = [max(bn["predicted_max_ulp"][e], ZERO_FLOOR) for e in es]
                ax.plot(xs, pred, ls="--", lw=0.8, color=style.get("color", "gray"), alpha=0.7,
                        label=f"carried bound of {s['bound']['documented']}")  # a label may not start with "_"
        ax.axhline(0.5, color="gray", ls=":", lw=0.8, label="1/2 ulp: correctly rounded")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ticks = [k for k in (-149, -126, -100, -75, -50, -25, 0, 25, 50, 75, 100, 127) if k <= last - 125]
        ax.set_xticks([2.0**k for k in ticks], [f"$2^{{{k}}}$" for k in ticks])
        ax.set_xlim(2.0**-151, 2.0 ** (last - 125))
        ax.set_xlabel("|x| (x < 0), lower edge of its binade; leftmost point: the denormals")
        ax.set_title(f"alpha = {alpha}")
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel(f"max ulp error in the binade (0 drawn at 2^{int(math.log2(ZERO_FLOOR))})")
    axes[0][0].set_ylim(ZERO_FLOOR / 2, measured_max * 16)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig


def histogram_figure(record: dict, sign: str = "negative"):
    """Inputs per ulp-error bin, one panel per alpha, one bar per formula (log scale)."""
    keys = alphas(record)
    fig, axes = plt.subplots(1, len(keys), figsize=(6.2 * len(keys), 4.4), sharey=True, squeeze=False)
    for ax, alpha in zip(axes[0], keys):
        df = histogram_table(record, alpha, sign)
        width = 0.8 / max(1, len(df.columns))
        for i, name in enumerate(df.columns):
            pos = [j + (i - (len(df.columns) - 1) / 2) * width for j in range(len(df))]
            ax.bar(pos, [max(v, 0.5) if v else 0 for v in df[name]], width, label=name,
                   color=STYLES.get(name, {}).get("color"))
        ax.set_xticks(range(len(df)))
        ax.set_xticklabels(df.index, rotation=60, ha="right", fontsize=7)
        ax.set_yscale("log")
        ax.set_xlabel("ulp error")
        ax.set_title(f"alpha = {alpha}, inputs with the sign bit set")
    axes[0][0].set_ylabel("inputs")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


# -- sentences ----------------------------------------------------------------------------------
def _count_out(s: dict, key: str, labels) -> int:
    return sum(s["classes"].get(label, {}).get(key, 0) for label in labels)


def conclusions(record: dict) -> str:
    """The findings, in sentences built from the record (so no number here is typed by hand)."""
    out = []
    n = record["method"]["n_inputs"]
    for alpha, run in record["runs"].items():
        f = run["formulas"]
        out.append(f"**alpha = {alpha}**\n")
        for name, s in f.items():
            neg = s["max_ulp"]["negative"]
            cr = pct(s["correctly_rounded"], s["n"])
            same = s["bit_identical_to_felu"]
            same_text = "every input bit-identical to F.elu" if same == s["n"] else (
                f"bit-identical to F.elu on {pct(same, s['n'])} of inputs"
                + (f" ({s['differ_from_felu_only_in_nan_bits']} more differ only in NaN bits)"
                   if s["differ_from_felu_only_in_nan_bits"] else ""))
            zeros = _count_out(s, "plus_zero_out", ("-normal", "-denormal"))
            zero_text = f"; it returns +0.0 for {zeros} negative inputs" if zeros else ""
            pos_flush = s["classes"].get("+denormal", {}).get("plus_zero_out", 0)
            flush_text = f"; it flushes {pos_flush} positive denormal inputs to +0.0 (the x > 0 branch is not exact there)" \
                if pos_flush else ""
            out.append(f"- `{name}`: at most {ulps(neg['ulp'])} ulp for x < 0 (first at x = {neg['at']['x']}), "
                       f"correctly rounded on {cr} of inputs, {same_text}{zero_text}{flush_text}.")
        failing = [name for name, s in f.items() if s["tolerance"]["n_fail"]]
        worst = max(f.items(), key=lambda kv: kv[1]["tolerance"]["max_ratio"] or 0)
        if failing:
            out.append(f"- The task's bar (atol = rtol = 1e-4 against F.elu) fails for {', '.join(failing)}.")
        else:
            out.append(f"- Every formula passes the task's bar (atol = rtol = 1e-4 against F.elu) on every finite input; "
                       f"the closest is `{worst[0]}`, at {worst[1]['tolerance']['max_ratio']:.2e} of the allowed error.")
        exceed = [f"`{name}` ({s['bound']['n_exceed']} inputs, {s['bound'].get('n_exceed_denormal_in_or_out', '-')} "
                  f"of them with a denormal input or output)" for name, s in f.items() if s["bound"]["n_exceed"]]
        out.append("- No input exceeds its exponential's documented bound carried through ELU." if not exceed else
                   f"- Above the documented bound carried through ELU: {', '.join(exceed)}.")
        r = run["reference"]
        fixed = r["ties_corrected"] + r["corrected"]
        unresolved = f"; {r['unresolved']} near a midpoint were left unresolved" if r["unresolved"] else ""
        if fixed:
            out.append(f"- Reference: float64-then-round was not the correctly rounded result for {fixed} of {n} inputs; "
                       f"each was found and corrected{unresolved}.")
        else:
            out.append(f"- Reference: float64-then-round was the correctly rounded result for every input "
                       f"(inputs near a float32 midpoint: {r['near_midpoint']}, each checked){unresolved}.")
        out.append("")
    return "\n".join(out)
