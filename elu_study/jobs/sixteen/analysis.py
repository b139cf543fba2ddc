"""What step 7's record says (no GPU): times over the dtype's own roof, the exhaustive checks, delta against eps,
the instruction budget, the predictions graded; the numbers that ``templates/sixteen/*.md.j2`` put in words."""

from __future__ import annotations

import functools
import math

import pandas as pd

from elu_study.core import text
from elu_study.core.entries import is_backward, roof_of
from elu_study.core.hardware import ISSUE_BOUND_RULE, issue_bound
from elu_study.core.ncu import SCHEDULERS, counter_rows, issue_pct
from elu_study.core.record import load, row
from elu_study.jobs.sixteen.predictions import GOALS, PREDICTION, PREDICTIONS, Prediction

DTYPES = ("bfloat16", "float16")
ROUNDING = 3 * 2.0 ** -24  # the roundings of r, r (1 - eps) and r (1 + eps): what eps must cover beyond delta
LANES = 32  # threads per warp instruction
DEFAULT = "7_sixteen_bits"
FORMATS = {"x own copy_": "{:.3f}", "x torch.add": "{:.3f}", "inst/elem": "{:.1f}", "SM MHz": "{:.0f}",
           "eps log2": "{:.2f}", "delta log2": "{:.2f}", "delta + 3*2^-24 log2": "{:.2f}", "used %": "{:.0f}",
           "expm1f in warp slots %": "{:.1f}", "issue %": "{:.0f}", "DRAM %": "{:.1f}", "budget inst/elem": "{:.1f}"}


def argument_holds(delta: float, eps: float) -> bool:
    """The kernel's argument: if delta + 3 * 2^-24 <= eps, the checked result equals PyTorch's for every alpha."""
    return delta + ROUNDING <= eps


def rows_of(record: dict, dtype: str) -> list[dict]:
    return [r for r in record["rows"] if r.get("mode") == dtype]


def ms(record: dict, name: str) -> float:
    return row(record, name)["timing"]["median_ms"]


def counter(record: dict, name: str, key: str = "thread_instructions_per_element") -> float | None:
    return counter_rows(record).get(name, {}).get(key)


def x_own_copy(record: dict, name: str) -> tuple[float, float, float]:
    """(median, p10, p90) of a row's time over its own roof's median: its dtype's copy_ (torch.add for backward)."""
    t, roof = row(record, name)["timing"], ms(record, roof_of(name, row(record, name)["mode"]))
    return t["median_ms"] / roof, t["p10_ms"] / roof, t["p90_ms"] / roof


def checks_of(record: dict) -> dict:
    """Every exhaustive check of the record, forward and backward, by entry name."""
    rows = {r["name"]: r["exhaustive"] for r in record["rows"] if r.get("exhaustive")}  # the main record's
    return {**rows, **record.get("exhaustive", {}), **record.get("exhaustive_backward", {})}


def frame(record: dict, dtype: str, backward: bool = False) -> pd.DataFrame:
    """One dtype's forward (or backward) rows, fastest first: time over own roof, mismatches, counters."""
    col, checks, out = "x torch.add" if backward else "x own copy_", checks_of(record), []
    for r in (r for r in rows_of(record, dtype) if is_backward(r["name"]) == backward):
        n, (x, p10, p90) = r["name"], x_own_copy(record, r["name"])
        out.append({"entry": n.removesuffix(f" {dtype}"), "ms": r["timing"]["median_ms"], col: x,
                    "p10-p90": f"{p10:.3f}-{p90:.3f}",
                    "mismatches": str(checks[n]["mismatches"]) if n in checks else "",
                    "inst/elem": counter(record, n), "issue %": issue_pct(record, n),
                    "DRAM %": counter(record, n, "dram_pct_of_peak")})
    return pd.DataFrame(out).sort_values(col).set_index("entry")


def delta_frame(record: dict) -> pd.DataFrame:
    """Each formula on each dtype: eps, delta, delta + 3 * 2^-24 (log2), the argument, expm1f's warp pair slots."""
    out = []
    for formula, d in record["delta"].items():
        for dtype in DTYPES:
            v, fb = d[dtype], record.get("fallback", {}).get(formula, {}).get(dtype)
            out.append({"formula": formula, "dtype": dtype, "eps log2": math.log2(d["eps"]),
                        "delta log2": v["delta_log2"], "delta + 3*2^-24 log2": math.log2(v["bound"]),
                        "argument holds": "yes" if v["holds"] else "NO", "worst x": f"{v['argmax_x']:.4g}",
                        "tiny x differ": v["tiny_differ"],
                        "expm1f in warp slots %": 100 * fb["warp_pair_slots"] if fb else None})
    return pd.DataFrame(out).set_index("formula")


def budget(record: dict, dtype: str) -> dict:
    """Thread instructions per element that can issue in the dtype's copy_ time: SMs x 4 schedulers x 32 lanes x
    SM clock (NVML's per-round medians while timed, else ncu's) x copy_'s time / elements."""
    clocks = [s["sm_clock_mhz"]["median"] for r in rows_of(record, dtype) for s in r["timing"].get("nvml", [])
              if s.get("samples")] or [k["sm_cycles_per_s"] / 1e6 for n, k in counter_rows(record).items()
                                       if n.endswith(dtype) and k.get("sm_cycles_per_s")]
    mhz = float(pd.Series(clocks).median()) if clocks else None
    copy_ms, sms, numel = ms(record, f"copy_ {dtype}"), record["provenance"]["sm_count"], record["problem"]["numel"]
    return {"sm_count": sms, "sm_clock_mhz": mhz, "copy_ms": copy_ms, "numel": numel,
            "inst_per_elem": sms * SCHEDULERS * LANES * mhz * 1e6 * copy_ms * 1e-3 / numel if mhz else None}


def budget_frame(record: dict, names=None) -> pd.DataFrame:
    """Each (named) kernel's thread instructions per element against its dtype's budget, and its static SASS."""
    out = []
    for dtype in DTYPES:
        b = budget(record, dtype)
        for n in (r["name"] for r in rows_of(record, dtype) if names is None or r["name"] in names):
            if (k := counter(record, n)) is not None:
                out.append({"entry": n, "x own copy_": x_own_copy(record, n)[0], "inst/elem": k,
                            "budget inst/elem": b["inst_per_elem"], "used %": 100 * k / b["inst_per_elem"]
                            if b["inst_per_elem"] else None, "SM MHz": b["sm_clock_mhz"],
                            "SASS (static, 8 elem/thread)": record.get("sass16", {}).get(n, {}).get("instructions")})
    return pd.DataFrame(out).set_index("entry") if out else pd.DataFrame()


@functools.cache
def main_record(gpu: str) -> dict | None:
    """The GPU's main record, read once per process: every notebook cell's numbers() grades round 3 on it."""
    return load(gpu, required=False)


def numbers(record: dict) -> dict:
    """Everything the sixteen templates print, from the record."""
    checks, has = checks_of(record), {r["name"] for r in record["rows"]}
    # The prediction is graded on this record; the goals, about the defaults, on the
    # main record where it is newer (its step 7 rows are the current defaults), else on this one.
    study = main_record(record["provenance"]["gpu"])
    main = study if study and study["provenance"]["date_utc"] > record["provenance"]["date_utc"] else record
    exact = [n for n, c in checks.items() if c["expect_exact"]]
    exact7 = [d for d in DTYPES if counter(record, f"7_exact {d}")]
    return {"checks": checks, "exact": exact, "failed": [n for n in exact if checks[n]["mismatches"]
                                                         or checks[n]["untouched"]], "exact7": exact7,
            "exact7_bound": [d for d in exact7 if issue_bound(issue_pct(record, f"7_exact {d}"))],
            "grads": next((c["grads"] for c in checks.values() if c.get("grads")), 0), "rule": ISSUE_BOUND_RULE,
            "budgets": {d: budget(record, d) for d in DTYPES}, "schedulers": SCHEDULERS, "lanes": LANES,
            "x": {n: x_own_copy(record, n)[0] for n in has}, "issue": {n: issue_pct(record, n) for n in has},
            "inst": {n: counter(record, n) for n in has},
            "dram": {n: counter(record, n, "dram_pct_of_peak") for n in has},
            "bound": {n: issue_bound(issue_pct(record, n)) for n in has}, "formula_of": record.get("formula_of", {}),
            "dtypes": DTYPES, "default": DEFAULT,
            "prediction": grades(record, PREDICTION), "main_commit": main["provenance"]["commit"],
            "goals": [{"p": p, "value": measured(main, p)} for p in GOALS]}


def show(name: str, record: dict) -> text.Text:
    """``templates/sixteen/<name>.md.j2`` filled from the record, for a notebook cell."""
    return text.show(f"sixteen/{name}.md.j2", **numbers(record))


def measured(record: dict, p: Prediction) -> float | None:
    """The value a prediction is graded on, or None where the record lacks it: an entry's time over its own roof
    ("x_own_copy"), its thread instructions per element ("inst"), its exhaustive mismatches ("mismatches"), a
    formula's log2 delta ("delta_log2") or its argument ("argument"), the check's instructions ("check_inst") or
    the share of warp pair slots running expm1f ("fallback_slots")."""
    dtype, names = p.subject.split()[-1], {r["name"] for r in record["rows"]}
    if p.metric == "check_inst":  # the entry's instructions minus its dtype's 7_unchecked's
        k, u = counter(record, p.subject), counter(record, f"7_unchecked {dtype}")
        return None if k is None or u is None else k - u
    if p.metric == "fallback_slots":  # with the formula the entry uses
        fb = record.get("fallback", {}).get(record.get("formula_of", {}).get(p.subject), {}).get(dtype)
        return fb["warp_pair_slots"] if fb else None
    if p.metric == "x_own_copy":
        return x_own_copy(record, p.subject)[0] if p.subject in names else None
    if p.metric == "inst":
        return counter(record, p.subject)
    if p.metric == "mismatches":
        checks, used = checks_of(record), record.get("formula_of", {})
        if p.subject != "every checked build":
            return checks[p.subject]["mismatches"] if p.subject in checks else None
        return sum(c["mismatches"] + c["untouched"] for n, c in checks.items() if c["expect_exact"] and not (
            p.exclude and used.get(n) == p.exclude)) if record.get("exhaustive") else None
    d, dtypes = record.get("delta", {}).get(p.subject), [p.dtype] if p.dtype else list(DTYPES)
    if d is None:
        return None
    if p.metric == "delta_log2":
        return max(d[t]["delta_log2"] for t in dtypes)
    if p.metric == "argument":  # 2 where a side condition fails
        ok = all(d[t]["tiny_differ"] == 0 and d[t]["zero_results_equal"] for t in dtypes)
        return max(d[t]["bound"] for t in dtypes) / d["eps"] if ok else 2.0
    raise ValueError(f"unknown metric {p.metric!r}")


def grades(record: dict, predictions=PREDICTIONS) -> list[dict]:
    """Each prediction beside its measurement (None where the record lacks it) and its range (from its base
    entry's value where it has one): HELD inside it, else MISSED ("MISSED (faster)" for a time under it)."""
    out = []
    for p in predictions:
        value, (lo, hi) = measured(record, p), p.bounds
        base = 0.0 if p.base is None else measured(record, Prediction(p.base, p.metric, (0, 0)))
        lo, hi = (lo, hi) if base is None else (lo + base, hi + base)
        verdict = ("NOT MEASURED" if value is None or base is None else "HELD" if lo <= value <= hi else
                   "MISSED (faster)" if p.metric == "x_own_copy" and value < lo else "MISSED")
        name = p.subject + (f" ({p.dtype})" if p.dtype else "") + (f" but {p.exclude}'s" if p.exclude else "") + (
            f", from {p.base}" if p.base else "")
        out.append({"name": name, "metric": p.metric, "lo": lo, "hi": hi, "open": hi == math.inf, "value": value,
                    "verdict": verdict})
    return out


def failures(record: dict) -> list[str]:
    """What must hold in every run: exactness of the checked builds and the argument for every formula used."""
    n, delta = numbers(record), record["delta"]
    used = sorted({(f, n["checks"][e]["dtype"]) for e, f in n["formula_of"].items() if e in n["exact"] and f in delta})
    return n["failed"] + [f"argument fails: {f} on {t}" for f, t in used if not delta[f][t]["holds"]]
