"""What step 7's record says (no GPU): each row's time over the same dtype's copy_, the exhaustive checks, the
fast formulas' delta against the check's eps, the instruction budget at the roof, and the predictions graded."""

from __future__ import annotations

import math

import pandas as pd

from elu_study.core.entries import is_backward, roof_of
from elu_study.core.ncu import SCHEDULERS, counter_rows, issue_pct
from elu_study.core.hardware import ISSUE_BOUND_RULE, issue_bound
from elu_study.jobs.sixteen.predictions import GOALS, PREDICTIONS, Prediction

DTYPES = ("bfloat16", "float16")
ROUNDING = 3 * 2.0 ** -24  # the roundings of r, r (1 - eps) and r (1 + eps): what eps must cover beyond delta
LANES = 32  # threads per warp instruction
DEFAULT = "7_sixteen_bits"
MUST, AIM = 1.05, 1.02  # the issue's goals: at most 1.05x the same dtype's copy_, aiming at 1.02x

def argument_holds(delta: float, eps: float) -> bool:
    """The kernel's argument: if delta + 3 * 2^-24 <= eps, the checked result equals PyTorch's for every alpha."""
    return delta + ROUNDING <= eps


def rows_of(record: dict, dtype: str) -> list[dict]:
    return [r for r in record["rows"] if r.get("mode") == dtype]


def own_copy_ms(record: dict, dtype: str) -> float:
    return next(r for r in record["rows"] if r["name"] == f"copy_ {dtype}")["timing"]["median_ms"]


def roof_ms(record: dict, name: str, dtype: str) -> float:
    """A 16-bit row's own roof: the dtype's copy_, or for a backward row the dtype's torch.add (three streams)."""
    roof = roof_of(name, dtype)
    return next(r for r in record["rows"] if r["name"] == roof)["timing"]["median_ms"]


def x_own_copy(record: dict, name: str) -> tuple[float, float, float]:
    """(median, p10, p90) of a 16-bit row's time over its own roof's median (same batch): the dtype's copy_, or
    torch.add's for a backward row."""
    r = next(r for r in record["rows"] if r["name"] == name)
    roof = roof_ms(record, name, r["mode"])
    t = r["timing"]
    return t["median_ms"] / roof, t["p10_ms"] / roof, t["p90_ms"] / roof


def checks_of(record: dict) -> dict:
    """Every exhaustive check of the record, forward and backward, by entry name."""
    return {**record.get("exhaustive", {}), **record.get("exhaustive_backward", {})}


def mismatches(record: dict, name: str) -> int | None:
    c = checks_of(record).get(name)
    return None if c is None else c["mismatches"]


def frame(record: dict, dtype: str, backward: bool = False) -> pd.DataFrame:
    """One dtype's forward rows (or its backward rows, over torch.add), fastest first: time, x own roof with
    p10-p90, exhaustive mismatches, ncu's counters."""
    c = counter_rows(record)
    out = []
    for r in rows_of(record, dtype):
        if is_backward(r["name"]) != backward:
            continue
        x, p10, p90 = x_own_copy(record, r["name"])
        k = c.get(r["name"], {})
        bad = mismatches(record, r["name"])
        out.append({"entry": r["name"].removesuffix(f" {dtype}"), "ms": r["timing"]["median_ms"],
                    "x torch.add" if backward else "x own copy_": x,
                    "p10-p90": f"{p10:.3f}-{p90:.3f}", "mismatches": "" if bad is None else str(bad),
                    "inst/elem": k.get("thread_instructions_per_element"), "issue %": issue_pct(record, r["name"]),
                    "DRAM %": k.get("dram_pct_of_peak")})
    return pd.DataFrame(out).sort_values("x torch.add" if backward else "x own copy_").set_index("entry")


FORMATS = {"x own copy_": "{:.3f}", "x torch.add": "{:.3f}", "inst/elem": "{:.1f}", "eps log2": "{:.2f}", "delta log2": "{:.2f}",
           "delta + 3*2^-24 log2": "{:.2f}", "expm1f in warp slots %": "{:.1f}", "issue %": "{:.0f}", "DRAM %": "{:.1f}",
           "budget inst/elem": "{:.1f}", "SM MHz": "{:.0f}", "used %": "{:.0f}"}


def log2(v: float | None) -> float | None:
    return math.log2(v) if v else None


def delta_frame(record: dict) -> pd.DataFrame:
    """Each formula on each dtype: eps, delta, delta + 3 * 2^-24 (log2), the argument's verdict, and how often
    its check asks for expm1f on the timed input (warp pair slots)."""
    out = []
    for formula, d in record["delta"].items():
        for dtype in DTYPES:
            v = d[dtype]
            fb = record.get("fallback", {}).get(formula, {}).get(dtype, {})
            out.append({"formula": formula, "dtype": dtype, "eps log2": log2(d["eps"]), "delta log2": v["delta_log2"],
                        "delta + 3*2^-24 log2": log2(v["bound"]), "argument holds": "yes" if v["holds"] else "NO",
                        "worst x": f"{v['argmax_x']:.4g}", "tiny x differ": v["tiny_differ"],
                        "expm1f in warp slots %": 100 * fb["warp_pair_slots"] if fb else None})
    return pd.DataFrame(out).set_index("formula")


def exhaustive_frame(record: dict) -> pd.DataFrame:
    claim = lambda c: "yes" if c["expect_exact"] else "not claimed (peer)" if c.get("peer") else "no (ablation)"  # noqa: E731
    out = [{"entry": name, "exact by design": claim(c), "inputs": c["inputs"],
            "alphas": c["alphas"], "grads": c.get("grads", ""), "mismatches": c["mismatches"],
            "at the 6 required alphas": c["required_mismatches"], "alphas with any": c["alphas_with_mismatches"],
            "unwritten": c["untouched"]}
           for name, c in checks_of(record).items()]
    return pd.DataFrame(out).set_index("entry")


def exhaustive_verdict(record: dict) -> str:
    """One line: inputs and alphas, and which builds differ from F.elu anywhere."""
    checks = checks_of(record)
    exact = [n for n, c in checks.items() if c["expect_exact"]]
    failed = [n for n in exact if checks[n]["mismatches"] or checks[n]["untouched"]]
    first = next(iter(checks.values()))
    ablations = ", ".join(f"`{n}` {c['mismatches']:,}" for n, c in checks.items()
                          if not c["expect_exact"] and not c.get("peer"))
    peers = ", ".join(f"`{n}` {c['mismatches']:,}" for n, c in checks.items() if c.get("peer"))
    head = (f"Every one of the {first['inputs']:,} bit patterns of each dtype at {first['alphas']} alphas, into a "
            f"NaN-poisoned output, bit for bit against `F.elu`: ")
    verdict = (f"**{len(exact) - len(failed)} of {len(exact)}** builds meant to be exact are" +
               (" all bit-identical" if not failed else f" bit-identical; NOT {', '.join(failed)}"))
    grads = next((c["grads"] for c in checks.values() if c.get("grads")), 0)
    backward = (f" The backward builds are checked the same way against `aten.elu_backward`, each x with {grads} "
                "grads, from the input and (alpha >= 0) from the result." if grads else "")
    return (head + verdict + (f". The unchecked ablation differs: {ablations} outputs." if ablations else ".")
            + (f" The peers, checked the same way, differ in: {peers} outputs." if peers else "") + backward)


def clock_mhz(record: dict, dtype: str) -> float | None:
    """The SM clock while the dtype's rows were timed: the median of NVML's per-round medians (ncu's if none)."""
    clocks = [s["sm_clock_mhz"]["median"] for r in rows_of(record, dtype)
              for s in r["timing"].get("nvml", []) if s.get("samples")]
    if not clocks:
        clocks = [k["sm_cycles_per_s"] / 1e6 for n, k in counter_rows(record).items()
                  if n.endswith(dtype) and k.get("sm_cycles_per_s")]
    return float(pd.Series(clocks).median()) if clocks else None


def budget(record: dict, dtype: str) -> dict:
    """Thread instructions per element that can issue in the dtype's copy_ time: SMs x 4 schedulers x 32 lanes
    x SM clock x copy_'s time / elements."""
    mhz = clock_mhz(record, dtype)
    copy_ms = own_copy_ms(record, dtype)
    sms, numel = record["provenance"]["sm_count"], record["problem"]["numel"]
    per_elem = sms * SCHEDULERS * LANES * mhz * 1e6 * copy_ms * 1e-3 / numel if mhz else None
    return {"sm_count": sms, "sm_clock_mhz": mhz, "copy_ms": copy_ms, "numel": numel, "inst_per_elem": per_elem}


def budget_lines(record: dict) -> str:
    """The budget's arithmetic, one line per dtype (one line for both where their numbers are the same)."""
    lines, shown = [], {}
    for dtype in DTYPES:
        b = budget(record, dtype)
        key = (b["sm_clock_mhz"], b["copy_ms"], b["numel"])
        if key in shown and b["inst_per_elem"] is not None:
            first, at = shown[key]
            lines[at] = lines[at].replace(f"- {first}", f"- {first} and {dtype}", 1)
            continue
        shown[key] = (dtype, len(lines))
        if b["inst_per_elem"] is None:
            lines.append(f"- {dtype}: no SM clock in the record, so no budget.")
            continue
        lines.append(f"- {dtype}: {b['sm_count']} SMs x {SCHEDULERS} schedulers x {LANES} lanes x "
                     f"{b['sm_clock_mhz']:.0f} MHz (NVML, while timed) x {b['copy_ms']:.3f} ms (`copy_`) / "
                     f"{b['numel']:,} elements = **{b['inst_per_elem']:.1f}** thread instructions per element.")
    return "\n".join(lines)


def budget_frame(record: dict, names=None) -> pd.DataFrame:
    """Each step 7 kernel's (or each named one's) measured thread instructions per element (ncu) against its
    dtype's budget at the roof, and the static SASS instruction count of its 16-bit kernel."""
    c = counter_rows(record)
    out = []
    for dtype in DTYPES:
        b = budget(record, dtype)
        for r in rows_of(record, dtype):
            if names is not None and r["name"] not in names:
                continue
            k = c.get(r["name"], {}).get("thread_instructions_per_element")
            if k is None:
                continue
            used = 100 * k / b["inst_per_elem"] if b["inst_per_elem"] else None
            sass = record.get("sass16", {}).get(r["name"], {})
            out.append({"entry": r["name"], "x own copy_": x_own_copy(record, r["name"])[0], "inst/elem": k,
                        "budget inst/elem": b["inst_per_elem"], "used %": used, "SM MHz": b["sm_clock_mhz"],
                        "SASS (static, 8 elem/thread)": sass.get("instructions")})
    return pd.DataFrame(out).set_index("entry") if out else pd.DataFrame()


def gap_line(record: dict, dtype: str, names: set) -> str:
    """One dtype's default: its gap to copy_, split into the fast formula and the check; its instructions against
    the budget; and the issue-bound verdict by the one rule."""
    default, unchecked = f"{DEFAULT} {dtype}", f"7_unchecked {dtype}"
    x = x_own_copy(record, default)[0]
    line = f"- {dtype} (`{record.get('formula_of', {}).get(default, '?')}`): **{x:.3f}x** its own `copy_`."
    if unchecked in names and record.get("formula_of", {}).get(default) != "Table":
        xu = x_own_copy(record, unchecked)[0]
        line += (f" The fast formula alone (`7_unchecked`) costs {100 * (xu - 1):+.1f} %, the check and its fallback "
                 f"{100 * (x - xu):+.1f} %.")
    b, k = budget(record, dtype), counter_rows(record).get(default, {})
    if k.get("thread_instructions_per_element") and b["inst_per_elem"]:
        share = k["thread_instructions_per_element"] / b["inst_per_elem"]
        line += (f" It issues {k['thread_instructions_per_element']:.1f} instructions per element, {100 * share:.0f} % "
                 f"of the {b['inst_per_elem']:.1f} that fit in `copy_`'s time.")
    pct = issue_pct(record, default)
    if pct is not None:
        line += (f" Issue slots are busy {pct:.0f} % of its run, DRAM at {k.get('dram_pct_of_peak') or 0:.0f} %: "
                 f"{'issue-bound' if issue_bound(pct) else 'not issue-bound'}.")
    return line


def gap_lines(record: dict) -> str:
    """The one issue-bound rule, then what the default's remaining gap to its own copy_ is made of, per dtype."""
    names = {r["name"] for r in record["rows"]}
    lines = [gap_line(record, dtype, names) for dtype in DTYPES if f"{DEFAULT} {dtype}" in names]
    return "\n".join([ISSUE_BOUND_RULE, "", *lines]) if lines else ISSUE_BOUND_RULE


def expm1f_line(record: dict) -> str:
    """What expm1f on every value costs in instructions (7_exact: step 6's 16-bit formula), whole-kernel counts."""
    c = counter_rows(record)
    names = [f"7_exact {d}" for d in DTYPES if c.get(f"7_exact {d}", {}).get("thread_instructions_per_element")]
    if not names:
        return "No instruction counts in this record."
    counts = " and ".join(f"{c[n]['thread_instructions_per_element']:.1f} ({n.split()[-1]})" for n in names)
    pcts = [issue_pct(record, n) for n in names]
    bound = [issue_bound(v) for v in pcts]
    verdict = ("issue-bound" if all(bound) else "not issue-bound" if not any(bound) else "issue-bound on "
               + ", ".join(n.split()[-1] for n, b in zip(names, bound) if b) + " only")
    return (f"`7_exact` computes every value with `expm1f`, as step 6's 16-bit path does. It issues {counts} thread "
            f"instructions per element, counted over the whole kernel (loads, stores, indexing; ncu). Its issue slots "
            f"are busy {' and '.join(f'{v:.0f} %' for v in pcts)} of its run: {verdict} (the rule is under *The "
            f"counter that explains it*).")


# -- predictions ------------------------------------------------------------------------------------------


METRICS = {"x_own_copy": "x own roof", "inst": "inst/elem", "mismatches": "mismatches", "delta_log2": "delta",
           "argument": "(delta + 3*2^-24) / eps", "check_inst": "check inst/elem", "fallback_slots": "expm1f slots"}


def measured_counts(record: dict, p: Prediction) -> float | None:
    """The check's instructions per element (the entry's minus its dtype's 7_unchecked), or the share of warp pair
    slots that run expm1f with the formula the entry uses on its dtype."""
    dtype = p.subject.split()[-1]
    if p.metric == "check_inst":
        c = counter_rows(record)
        k, u = (c.get(n, {}).get("thread_instructions_per_element") for n in (p.subject, f"7_unchecked {dtype}"))
        return None if k is None or u is None else k - u
    formula = record.get("formula_of", {}).get(p.subject)
    fb = record.get("fallback", {}).get(formula, {}).get(dtype)
    return None if not fb else fb["warp_pair_slots"]


def measured(record: dict, p: Prediction) -> float | None:
    """The value a prediction is graded on, or None where the record lacks it."""
    names = {r["name"] for r in record["rows"]}
    if p.metric in ("check_inst", "fallback_slots"):
        return measured_counts(record, p)
    if p.metric == "x_own_copy":
        return x_own_copy(record, p.subject)[0] if p.subject in names else None
    if p.metric == "inst":
        return counter_rows(record).get(p.subject, {}).get("thread_instructions_per_element")
    if p.metric == "mismatches":
        checks = record.get("exhaustive", {})
        if p.subject == "every checked build":
            used = record.get("formula_of", {})
            return sum(c["mismatches"] + c["untouched"] for n, c in checks_of(record).items()
                       if c["expect_exact"] and not (p.exclude and used.get(n) == p.exclude)) if checks else None
        return mismatches(record, p.subject)
    d = record.get("delta", {}).get(p.subject)
    if d is None:
        return None
    dtypes = [p.dtype] if p.dtype else list(DTYPES)
    if p.metric == "delta_log2":
        return max(d[t]["delta_log2"] for t in dtypes)
    if p.metric == "argument":  # (delta + 3 * 2^-24) / eps, and 2 where a side condition fails
        ok = all(d[t]["tiny_differ"] == 0 and d[t]["zero_results_equal"] for t in dtypes)
        return max(d[t]["bound"] for t in dtypes) / d["eps"] if ok else 2.0
    raise ValueError(f"unknown metric {p.metric!r}")


def bounds_of(record: dict, p: Prediction) -> tuple[float, float] | None:
    if p.base is None:
        return p.bounds
    base = measured(record, Prediction(p.base, p.metric, (0, 0)))
    return None if base is None else (base + p.bounds[0], base + p.bounds[1])


def describe(lo: float, hi: float, metric: str) -> str:
    if metric == "mismatches":
        return "0" if hi == 0 else f"at least {lo:.0f}" if hi == math.inf else f"{lo:.0f} to {hi:.0f}"
    if metric == "argument":
        return "holds (at most 1)" if hi <= 1 else f"fails ({lo:.2f} to {hi:.2f})"
    if metric == "delta_log2":
        return f"2^{lo:.1f} to 2^{hi:.1f}"
    if metric in ("check_inst", "inst"):
        return f"{lo:.1f}-{hi:.1f} inst/elem"
    if metric == "fallback_slots":
        return f"{100 * lo:.1f}-{100 * hi:.1f} % slots"
    return f"{lo:.3f} to {hi:.3f}x"


def shown_value(value: float, metric: str) -> str:
    return {"delta_log2": f"2^{value:.2f}", "mismatches": f"{value:,.0f}", "check_inst": f"{value:.1f}",
            "inst": f"{value:.1f}",
            "fallback_slots": f"{100 * value:.1f} %"}.get(metric, f"{value:.3f}")




def grade_frame(record: dict, predictions=PREDICTIONS) -> pd.DataFrame:
    """Each prediction beside its measurement: HELD where the value lies in the range, else MISSED ("MISSED
    (faster)" where a time came in under its range)."""
    out = []
    for p in predictions:
        value, b = measured(record, p), bounds_of(record, p)
        if value is None or b is None:
            shown, verdict = "not in the record", "NOT MEASURED"
        else:
            shown = shown_value(value, p.metric)
            verdict = "HELD" if b[0] <= value <= b[1] else (
                "MISSED (faster)" if p.metric == "x_own_copy" and value < b[0] else "MISSED")
        subject = p.subject + (f" ({p.dtype})" if p.dtype else "") + (f" but {p.exclude}'s" if p.exclude else "")
        predicted = describe(*p.bounds, p.metric) if b is None else describe(*b, p.metric)
        out.append({"prediction": subject, "metric": METRICS[p.metric], "predicted": predicted,
                    "measured": shown, "verdict": verdict})
    return pd.DataFrame(out).set_index("prediction")


def goals_frame(record: dict) -> pd.DataFrame:
    """The issue's goals for the default build on each dtype: the must, the aim and bit-exactness."""
    out = []
    for p in GOALS:
        value = measured(record, p)
        met = value is not None and p.bounds[0] <= value <= p.bounds[1]
        out.append({"goal": p.why, "entry": p.subject,
                    "measured": "not in the record" if value is None else f"{value:.3f}" if p.metric == "x_own_copy"
                    else f"{value:,.0f} mismatches", "verdict": "met" if met else "NOT met"})
    return pd.DataFrame(out).set_index("goal")


def failures(record: dict) -> list[str]:
    """What must hold in every run: exactness of the checked builds and the argument for every formula used."""
    bad = [f"{n}: {c['mismatches']} mismatches, {c['untouched']} unwritten" for n, c in checks_of(record).items()
           if c["expect_exact"] and (c["mismatches"] or c["untouched"])]
    used = {(f, record["exhaustive"][n]["dtype"]) for n, f in record.get("formula_of", {}).items()
            if n in record["exhaustive"] and record["exhaustive"][n]["expect_exact"] and f in record["delta"]}
    bad += [f"the argument fails for {f} on {t}" for f, t in sorted(used) if not record["delta"][f][t]["holds"]]
    return bad
