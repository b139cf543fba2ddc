"""What step 6's record says (no GPU): the summary table, the verdicts against copy_ and the noise, the
counters' findings, the 16-bit accuracy, and the README's beyond block."""

from __future__ import annotations


import pandas as pd
from IPython.display import Markdown

from elu_study.core.entries import STEP6_DEFAULT
from elu_study.core.ncu import counter_rows, issue_ms, issue_pct
from elu_study.core.hardware import ISSUE_BOUND_RULE, issue_bound
from elu_study.core.tables import compact
from elu_study.core.record import figure_path, noise, readme_link, record_path
from elu_study.core.tables import markdown

AIM = 0.98  # step 6's aim: at most 0.98x copy_'s time, in the recorded run and in every fresh process
MUST = 1.0  # step 6's must: at most copy_'s time in every process, by more than the round-to-round noise
# The one rule for "issue-bound", stated in the same words by notebooks 08 and 12 (jobs/sixteen/analysis.py).




def float32_rows(record: dict) -> list[dict]:
    return [r for r in record["rows"] if r["mode"] in ("", "in_place") and r["name"] not in ("read_only", "write_only")]


def summary_frame(record: dict):
    """One row per attempt: time, x copy_, spread, and the DRAM counters beside it."""
    counters = counter_rows(record)
    rows = []
    for r in record["rows"]:
        t = r["timing"]
        c = counters.get(r["name"], {})
        rows.append({
            "entry": r["name"], "ms": t["median_ms"], "x copy_": r["x_copy"],
            "p10-p90 %": 100 * (t["p90_ms"] - t["p10_ms"]) / t["median_ms"],
            "TB/s": r["tbps"],
            "DRAM % peak": c.get("dram_pct_of_peak"),
            "DRAM GB read": c["dram_read_bytes"] / 1e9 if c else None,
            "DRAM GB written": c["dram_write_bytes"] / 1e9 if c else None,
            "what": r["what"],
        })
    return pd.DataFrame(rows)


def verdict(record: dict) -> str:
    """The fastest float32 kernel and step 6 against copy_, each margin against the round-to-round noise."""
    rows = [r for r in float32_rows(record) if r["kind"] in ("attempt", "step")]
    best = min(rows, key=lambda r: r["x_copy"])
    step6 = next(r for r in record["rows"] if r["name"] == "6_beyond_copy")
    lines = []
    for r in ([best] if best["name"] == "6_beyond_copy" else [best, step6]):
        margin = 1 - r["x_copy"]
        spread = noise(record, r["name"], "copy_")
        if margin > spread:
            word = (f"faster than `copy_` by {100 * margin:.2f} %, more than the round-to-round noise "
                    f"({100 * spread:.2f} %)")
        elif margin > 0:
            word = (f"faster than `copy_` by {100 * margin:.2f} %, but inside the round-to-round noise "
                    f"({100 * spread:.2f} %): a tie")
        else:
            word = f"slower than `copy_` by {100 * -margin:.2f} % (noise {100 * spread:.2f} %)"
        label = "the fastest float32 build" if r is best else "step 6, the file's defaults"
        lines.append(f"- **{r['name']}** ({label}): {r['timing']['median_ms']:.3f} ms, **{r['x_copy']:.3f}x** `copy_`, "
                     f"{word}.")
    if record.get("processes"):
        xs = [p["6_beyond_copy"]["x_copy"] for p in record["processes"]]
        lines.append(f"- In {len(xs)} fresh processes, step 6 took {', '.join(f'{v:.3f}x' for v in xs)} `copy_`.")
    return "\n".join(lines)


def reached(xs: list[float]) -> str:
    """How many of these runs reached the aim: "in every one", "in none", or "in k of n"."""
    k = sum(v <= AIM for v in xs)
    return "**reached** in every one" if k == len(xs) else "reached in none" if k == 0 else f"reached in {k} of {len(xs)}"


def confirmed(record: dict) -> dict:
    """{attempt: (recorded x copy_, [x copy_ in each fresh process])} of ``python -m elu_study beyond --confirm``."""
    c = record.get("confirmation", {})
    return {n: (next(r for r in record["rows"] if r["name"] == n)["x_copy"], [p[n]["x_copy"] for p in c["processes"]])
            for n in c.get("names", [])}


def confirmation_lines(record: dict) -> list[str]:
    """One line per attempt of ``python -m elu_study beyond --confirm``: in how many runs did it reach the aim?"""
    confirmation = record.get("confirmation", {})
    commit = confirmation.get("provenance", {}).get("commit")
    lines = []
    for name, (recorded, xs_c) in confirmed(record).items():
        step6_c = ", ".join("%.3fx" % p["6_beyond_copy"]["x_copy"] for p in confirmation["processes"])
        lines.append(f"- `{name}`: {recorded:.3f}x `copy_` in the recorded run, then "
                     f"{', '.join(f'{v:.3f}x' for v in xs_c)} in {len(xs_c)} fresh processes (commit {commit}; step 6 "
                     f"in the same processes: {step6_c}; `python -m elu_study beyond --confirm`): the aim ({AIM:.2f}x) "
                     f"{reached([recorded, *xs_c])}.")
    return lines






def issue_rule(record: dict, names) -> str:
    """The one issue-bound rule, and which of these kernels it calls issue-bound (with their issue shares)."""
    pcts = {n: issue_pct(record, n) for n in names if issue_pct(record, n) is not None}
    bound = [f"`{n}`" for n, v in pcts.items() if issue_bound(v)]
    return ISSUE_BOUND_RULE + (f" Issue-bound here: {', '.join(bound)}; the others are not." if bound else
                               " None here is issue-bound.")


def sixteen_bit(record: dict, dtype: str = "bfloat16") -> dict:
    """Step 6 on 16-bit storage: x float32 copy_, x its own 16-bit copy_ (copy_ of the bfloat16 tensor), issue %."""
    by = {r["name"]: r for r in record["rows"]}
    row = by[f"6_beyond_copy {dtype}"]
    return {"x_copy": row["x_copy"], "issue_pct": issue_pct(record, row["name"]),
            "x_own_copy": row["timing"]["median_ms"] / by["copy_ bfloat16"]["timing"]["median_ms"]}


def goals(record: dict) -> tuple[bool, bool]:
    """Step 6 as built by default: (the must met?, the aim met?) over the recorded run and every fresh process."""
    x6 = next(r for r in record["rows"] if r["name"] == "6_beyond_copy")["x_copy"]
    xs = [p["6_beyond_copy"]["x_copy"] for p in record.get("processes", [])] + [x6]
    must = all(v <= MUST for v in xs) and (1 - x6) > noise(record, "6_beyond_copy", "copy_")
    return must, all(v <= AIM for v in xs)


def conclusion(record: dict) -> str:
    """The goal's verdict: the must and the aim for step 6 and for the confirmed attempts; the 16-bit way."""
    step6 = next(r for r in record["rows"] if r["name"] == "6_beyond_copy")
    lines = []
    must, aim = goals(record)
    floor = record.get("stream_floor_ms")
    won = (record["roof_ms"] - step6["timing"]["median_ms"]) / (record["roof_ms"] - floor) if floor else None
    lines.append(f"- Step 6 as built by default: the must (at most 1.00x in every process, by more than the noise) "
                 f"**{'met' if must else 'not met'}**; the aim ({AIM:.2f}x) **{'met' if aim else 'not met'}**.")
    if won is not None:
        lines.append(f"- Of the {record['roof_ms'] - floor:.3f} ms between `copy_` and the two streams run apart, "
                     f"step 6 wins back {100 * max(won, 0):.0f} %.")
    lines += confirmation_lines(record)
    lines.append(sixteen_bit_line(record))
    return "\n".join(lines)


def sixteen_bit_line(record: dict) -> str:
    """Step 6 on bfloat16: against float32 copy_ and the fastest float32 build, against its own 16-bit copy_, and
    what bounds it."""
    b = sixteen_bit(record)
    fastest = min(r["x_copy"] for r in float32_rows(record) if r["kind"] in ("attempt", "step"))
    lead = "Fewer bytes beat any schedule" if b["x_copy"] < fastest else "Fewer bytes do not beat every schedule"
    issue = (f" Issuing its instructions takes {b['issue_pct']:.0f} % of its run time: "
             f"{'issue-bound' if issue_bound(b['issue_pct']) else 'not issue-bound'}, by the rule above."
             if b["issue_pct"] is not None else "")
    return (f"- {lead}: step 6 on bfloat16 storage takes {b['x_copy']:.3f}x float32 `copy_`'s time. It is not at "
            f"its own roof, though: it takes {b['x_own_copy']:.2f}x the 16-bit `copy_`'s time.{issue}")


def process_table(record: dict, which: str = "processes"):
    """Each fresh process's medians, over copy_'s in that process: the recorded run's ("processes") or those of
    ``python -m elu_study beyond --confirm`` ("confirmation")."""
    runs = record.get("processes", []) if which == "processes" else record.get("confirmation", {}).get("processes", [])
    if not runs:
        return Markdown(f"(no {which} in this record)")
    df = pd.DataFrame([{"process": i + 1, **{f"{n} x copy_": v["x_copy"] for n, v in p.items() if n != "copy_"},
                        "copy_ ms": p["copy_"]["median_ms"]} for i, p in enumerate(runs)])
    return Markdown(markdown(df.set_index("process")))


def dram_line_deviation(record: dict, rows: list[dict]) -> dict:
    """Each float32 kernel's time over that of 'time set by DRAM throughput alone' through 6_base, minus 1."""
    c = counter_rows(record)
    k = next(r for r in rows if r["name"] == "6_base")["x_copy"] * c["6_base"]["dram_pct_of_peak"]
    return {r["name"]: r["x_copy"] / (k / c[r["name"]]["dram_pct_of_peak"]) - 1 for r in rows}


def harder_driven(base: dict, c: dict, better: list[str]) -> str:
    """The kernels that drove the DRAM harder than 6_base, with their read- and write-active shares."""
    return ("Drove the DRAM harder than `6_base` (" + f"{base['dram_pct_of_peak']:.1f} % of peak): "
            + ", ".join(f"`{n}` {c[n]['dram_pct_of_peak']:.1f} % (read-active {c[n].get('dram_active_read_pct', 0):.1f} %, "
                        f"write-active {c[n].get('dram_active_write_pct', 0):.1f} %)" for n in better)
            + f"; `6_base`: read-active {base.get('dram_active_read_pct', 0):.1f} %, write-active "
              f"{base.get('dram_active_write_pct', 0):.1f} %. Both directions gain together: the DRAM idles less, "
              f"with the same read/write mix.")


HYPOTHESIS = ("Why a cache policy or a tile order changes that efficiency is not visible in these counters (this ncu "
              "exposes no DRAM row, bank or turnaround counters). **Hypothesis:** with the input's lines marked "
              "evict_last, the L2 picks the output's dirty lines first when it needs room, so write-backs leave in "
              "the order they were written, in longer runs, and the DRAM turns the bus around less often.")


def counter_finding(record: dict) -> str:
    """What the counters say across the float32 kernels: same bytes? how well was the DRAM driven?"""
    c = counter_rows(record)
    rows = [r for r in float32_rows(record) if r["name"] in c and c[r["name"]].get("dram_pct_of_peak")]
    if "6_base" not in c or not rows:
        return "No counters were recorded for the attempts."
    base = c["6_base"]
    dev = dram_line_deviation(record, rows)
    worst = max(dev, key=lambda n: abs(dev[n]))
    other_bytes = [r["name"] for r in rows
                   if abs(c[r["name"]]["dram_read_bytes"] / base["dram_read_bytes"] - 1) >= 0.01
                   or abs(c[r["name"]]["dram_write_bytes"] / base["dram_write_bytes"] - 1) >= 0.01]
    better = sorted((r["name"] for r in rows if c[r["name"]]["dram_pct_of_peak"] > base["dram_pct_of_peak"] + 0.2),
                    key=lambda n: -c[n]["dram_pct_of_peak"])
    inside = sum(abs(v) <= 0.01 for v in dev.values())
    names_other = ", ".join(f"`{n}`" for n in other_bytes)
    written_other = ", ".join("%.3f" % (c[n]["dram_write_bytes"] / 1e9) for n in other_bytes)
    text = [
        f"Bytes: {len(rows) - len(other_bytes)} of {len(rows)} float32 kernels moved the same DRAM bytes as `6_base` "
        f"(within 1 %)" + (f"; not {names_other} ({written_other} GB written against "
                           f"{base['dram_write_bytes'] / 1e9:.3f})" if other_bytes else "") + ".",
        f"Time against DRAM throughput: {inside} of {len(dev)} sit within 1 % of the line 'time set by DRAM "
        f"throughput alone'; the farthest is `{worst}`, {100 * dev[worst]:+.1f} %. The attempts changed how "
        f"efficiently the DRAM moved the bytes, not what it moved.",
    ]
    return " ".join(text) + ("\n\n" + harder_driven(base, c, better) if better else "") + "\n\n" + HYPOTHESIS


def issue_finding(record: dict) -> str:
    """Is the 16-bit kernel bound by instruction issue? Its warp instructions at one per scheduler per cycle."""
    c = counter_rows(record)
    sms = record["provenance"]["sm_count"]
    parts = []
    for name in ("6_beyond_copy", "6_expm1f", "6_beyond_copy bfloat16", "6_16bit_expf bfloat16"):
        if name not in c or not c[name].get("warp_instructions") or not c[name].get("sm_cycles_per_s"):
            continue
        k = c[name]
        issued_ms = issue_ms(k, sms)
        kernel_ms = k["duration_ns"] / 1e6
        parts.append(f"`{name}`: {k['warp_instructions'] / 1e9:.2f} G warp instructions need {issued_ms:.2f} ms of issue "
                     f"at 4 per SM per cycle ({k['sm_cycles_per_s'] / 1e9:.2f} GHz), **{100 * issued_ms / kernel_ms:.0f} %** "
                     f"of its {kernel_ms:.2f} ms; DRAM at {k['dram_pct_of_peak']:.1f} % of peak")
    if not parts:
        return "No counters were recorded for the 16-bit kernels."
    by = {r["name"]: r for r in record["rows"]}
    roof16 = by["copy_ bfloat16"]["timing"]["median_ms"]
    sixteen = ", ".join(f"`{n}` {by[n]['timing']['median_ms'] / roof16:.2f}x" for n in
                        ("6_beyond_copy bfloat16", "6_beyond_copy float16", "6_16bit_expf bfloat16", "F.elu bfloat16",
                         "F.elu float16"))
    return ("Instruction issue against time (ncu):\n\n- " + "\n- ".join(parts) + "\n\nA kernel whose issue time is "
            "most of its run time is bound by issuing instructions, not by the DRAM: halving the bytes without halving "
            "the arithmetic per byte moves the limit from the memory to the schedulers. Against the 16-bit roof "
            f"(`copy_` of the bfloat16 tensor, {roof16:.3f} ms): {sixteen}.")




def accuracy16_table(record: dict):
    rows = []
    for name, by_dtype in record["accuracy16"].items():
        for dtype, a in by_dtype.items():
            row = {"build": name, "dtype": dtype}
            for alpha, v in a["alphas"].items():
                row[f"alpha {alpha}"] = f"{v['mismatches']} / {v['max_ulp']}"
            row["random"] = f"{a['random_aligned_mismatches']}, {a['random_misaligned_mismatches']}"
            row["all written"] = "yes" if all(v["untouched"] == 0 for v in a["alphas"].values()) else "NO"
            rows.append(row)
    return Markdown(compact(markdown(pd.DataFrame(rows).set_index("build"))) + "\n\nEach alpha: inputs that differ / the "
                    "largest difference in ulp. Random: inputs that differ, aligned and one element off.")


def accuracy16_finding(record: dict) -> str:
    a = record["accuracy16"]
    step6 = all(v["bit_identical"] for v in a["6_beyond_copy"].values())
    worst = max((v["max_ulp"], d) for d, x in a["6_16bit_expf"].items() for v in x["alphas"].values())
    most = max(v["mismatches"] for x in a["6_16bit_expf"].values() for v in x["alphas"].values())
    zeros = max(v["mismatches"] for x in a["6_16bit_expf"].values() for k, v in x["alphas"].items() if v["max_ulp"] == 0)
    return (f"Step 6's 16-bit path (`expm1f`) is {'bit-identical to `F.elu` on every input' if step6 else 'NOT bit-identical to `F.elu`'} "
            f"of both dtypes. With `expf - 1` up to {most} of the 65,536 inputs differ, by up to {worst[0]} ulp "
            f"({worst[1]}). Ulps are counted along the ordered bit patterns, so through the subnormals. The "
            f"cancellation of `expf(x) - 1` near 0 survives the rounding to 16 bits. So 16-bit storage keeps `expm1f` "
            f"and pays for it in time. Differences of 0 ulp (up to {zeros}, at alpha 0) are zeros of the other sign: "
            f"`expf(x) - 1` rounds to +0 where `expm1f` gives a tiny negative number, and 0 times it is -0.")


def knobs(flags) -> dict[str, str]:
    """A build's -D flags as {name: value}."""
    return dict(f[2:].split("=", 1) for f in flags or () if f.startswith("-D") and "=" in f)


def attempt_counts(record: dict, base: str = "6_base") -> dict[str, list[str]]:
    """The record's attempt rows by how they differ from ``base``: by one knob of the kernel file, by more, or
    the same build called another way (in place, 16-bit storage) and the 16-bit references."""
    rows = [r for r in record["rows"] if r["kind"] == "attempt"]
    ref = knobs(next(r for r in rows if r["name"] == base)["flags"])
    out = {"base": [base], "one": [], "more": [], "round2": [], "other": []}
    for r in rows:
        if r["name"] == base:
            continue
        if not r["mode"] and r.get("base") == STEP6_DEFAULT:  # one change from step 6's new default
            out["round2"].append(r["name"])
            continue
        if r["mode"] or r.get("base") != base:
            out["other"].append(r["name"])
            continue
        own = knobs(r["flags"])
        changed = sum(own.get(k) != ref.get(k) for k in {*own, *ref})
        out["one" if changed == 1 else "more"].append(r["name"])
    return out


def readme_table(record: dict) -> str:
    """Step 6 and the attempts confirmed in fresh processes: recorded x copy_, its noise, the fresh processes and
    the commit they ran at."""
    commit = record["provenance"].get("commit")
    again = record.get("confirmation", {}).get("provenance", {}).get("commit")
    step6 = [p["6_beyond_copy"]["x_copy"] for p in record.get("processes", [])]
    rows = [("6_beyond_copy (step 6)", next(r for r in record["rows"] if r["name"] == "6_beyond_copy")["x_copy"],
             noise(record, "6_beyond_copy", "copy_"), step6, commit)]
    rows += [(n, x, noise(record, n, "copy_"), xs, again) for n, (x, xs) in confirmed(record).items()]
    df = pd.DataFrame([{"build": n, "x copy_": x, "noise %": 100 * z,
                        "fresh processes": " ".join(f"{v:.3f}" for v in xs), "at commit": c,
                        f"aim {AIM:.2f}x": reached([x, *xs]).replace("*", "")} for n, x, z, xs, c in rows])
    return markdown(df.set_index("build"), {"noise %": "{:.2f}"})


def readme_block(record: dict) -> str:
    """The README's beyond block: where the numbers come from, step 6 and the confirmed attempts, the figure."""
    p = record["provenance"]
    figure = figure_path(p["gpu"], "beyond")
    counts = attempt_counts(record)
    confirm = record.get("confirmation", {}).get("provenance", {})
    again = f"; attempts confirmed at commit {confirm.get('commit')} ({confirm.get('date_utc', '')[:10]})" if confirm else ""
    return "\n".join([
        f"**Past the roof (step 6).** From `results/{record_path(p['gpu'], 'beyond').name}`, measured on an {p['gpu']} "
        f"at commit {p.get('commit')} ({p['date_utc'][:10]}){again}. It holds `6_base`, {len(counts['one'])} builds "
        f"one knob away, {len(counts['more'])} two knobs away or more, "
        + (f"{len(counts['round2'])} one knob away from the new default (`{STEP6_DEFAULT}`), " if counts["round2"] else "")
        + f"and {len(counts['other'])} rows in place or 16-bit. [08_beyond_copy](notebooks/08_beyond_copy.ipynb) tells each one.",
        "", readme_table(record), "", f"![{figure.stem}]({readme_link(figure)})",
    ])
