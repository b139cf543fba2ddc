"""Step 6's experiments: can a kernel beat copy_, and the sure way past it (fewer bytes).

``python -m elu_study beyond`` (GPU, ncu): builds every attempt of ``study.ATTEMPTS`` (each one
knob of ``kernels/6_beyond_copy.cu`` changed from ``6_base``), checks them, and times them in the
same interleaved rounds as copy_, the two halves of a stream (read_only, write_only), step 2,
step 2 with 128-thread blocks and step 6 itself; then reads each attempt's DRAM counters with
Nsight Compute; then checks the 16-bit storage path on every one of the 65,536 bit patterns of
float16 and bfloat16 against F.elu in that dtype; then times step 6 against copy_ again in
``--processes`` fresh processes, since a margin of a percent must survive a new process to count.
Everything goes to results/<gpu>-beyond.json and its figures; notebook 08 reads them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from elu_study.core import record as results

# The rows every attempt is compared with, timed in the same rounds.
COMPARED = ("copy_", "read_only", "write_only", "2_float4", "2+128_threads", "5_streaming", "F.elu", "6_beyond_copy")
# What each fresh process times (the claim, its control and the roof).
REPEATED = ("copy_", "2_float4", "2+128_threads", "6_beyond_copy")
DTYPES16 = ("bfloat16", "float16")
ALPHAS16 = (1.0, 1.5, 0.0, -0.7)


def record_path(gpu: str) -> Path:
    return results.record_path(gpu, "beyond")


def load(gpu: str | None = None) -> dict | None:
    from elu_study.core.record import REFERENCE_GPU

    path = record_path(gpu or REFERENCE_GPU)
    return json.loads(path.read_text()) if path.exists() else None


def entries():
    from elu_study.core.entries import ATTEMPTS, ENTRIES

    return [ENTRIES[n] for n in COMPARED] + list(ATTEMPTS)


def kernel_names() -> list[str]:
    """The entries ncu can see (copy_ of either dtype is a driver copy, not a kernel)."""
    return [e.name for e in entries() if not e.name.startswith("copy_")]


def formula(entry, knob: str = "OP") -> str:
    """The ELU formula a build of kernels/6_beyond_copy.cu uses for float32 (knob "OP") or 16-bit storage
    ("OP16"): its -DELU6_<knob> flag, else the file's default."""
    import re

    from elu_study.core.build import resolve_variant

    for flag in entry.flags:
        if flag.startswith(f"-DELU6_{knob}="):
            return flag.split("=", 1)[1]
    return re.search(rf"#define ELU6_{knob} (\w+)", resolve_variant(entry.variant).read_text()).group(1)


# -- 16-bit storage: every bit pattern -------------------------------------------------------------


def _ordered(t):
    """A 16-bit float's bits as an integer that orders like the values (for ulp distances)."""
    import torch

    i = t.view(torch.int16).to(torch.int32)
    return torch.where(i < 0, -32768 - i, i)


def check_16bit(module, dtype_name: str, alphas=ALPHAS16, expect_identical: bool = True) -> dict:
    """Every one of the 65,536 inputs of a 16-bit dtype through ``module.elu``, against F.elu in that dtype.

    The output is poisoned first (a NaN pattern F.elu never returns for a number). Also a random
    tensor of an odd length at a misaligned offset, so the scalar path and the tail are compared too.
    """
    import torch
    import torch.nn.functional as F

    dtype = getattr(torch, dtype_name)
    bits = torch.arange(-32768, 32768, dtype=torch.int32, device="cuda").to(torch.int16)
    x = bits.view(dtype)
    out = {"dtype": dtype_name, "inputs": int(x.numel()), "alphas": {}}
    for alpha in alphas:
        y = torch.full_like(bits, 0x7FC1).view(dtype)  # a NaN with a payload: poison
        module.elu(x, alpha, out=y)
        ref = F.elu(x, alpha)
        both_nan = y.isnan() & ref.isnan()
        same = (y.view(torch.int16) == ref.view(torch.int16)) | both_nan
        poisoned = int((y.view(torch.int16) == 0x7FC1).sum()) - int((ref.view(torch.int16) == 0x7FC1).sum())
        diff = (_ordered(y) - _ordered(ref)).abs()
        diff = diff[~same & ~(y.isnan() | ref.isnan())]
        out["alphas"][str(alpha)] = {
            "mismatches": int((~same).sum()),
            "max_ulp": int(diff.max()) if diff.numel() else 0,
            "untouched": max(poisoned, 0),
        }
    gen = torch.Generator(device="cuda").manual_seed(16)
    n = (1 << 22) + 5
    base = (torch.randn(n + 1, device="cuda", generator=gen) * 4).to(dtype)
    for name, view in (("aligned", base[:n]), ("misaligned", base[1:])):
        y = torch.full((n,), 0x7FC1, dtype=torch.int16, device="cuda").view(dtype)
        module.elu(view, 1.0, out=y)
        same = (y.view(torch.int16) == F.elu(view, 1.0).view(torch.int16))
        out[f"random_{name}_mismatches"] = int((~same).sum())
    out["random_length"] = n
    out["bit_identical"] = all(a["mismatches"] == 0 for a in out["alphas"].values()) and (
        out["random_aligned_mismatches"] == out["random_misaligned_mismatches"] == 0)
    # Every output written; and bit-identical where the formula is PyTorch's (expm1f): expf - 1 differs by design.
    out["passed"] = all(a["untouched"] == 0 for a in out["alphas"].values()) and (
        out["bit_identical"] or not expect_identical)
    return out


# -- the job -------------------------------------------------------------------------------------


def _repeat(path: Path, rounds: int, names=REPEATED) -> int:
    """One fresh process: check and time ``names`` in interleaved rounds and write the medians."""
    from elu_study.core.entries import ENTRIES
    from elu_study.core.harness import measure

    record = measure([ENTRIES[n] for n in names], trials=1, rounds=rounds)
    path.write_text(json.dumps({r["name"]: {"median_ms": r["timing"]["median_ms"], "x_copy": r["x_copy"],
                                            "round_medians_ms": r["timing"]["round_medians_ms"]}
                                for r in record["rows"]}))
    return 0


def run(processes: int = 3, rounds: int = 5, profile_counters: bool = True) -> dict:
    import torch

    from elu_study.jobs import profile
    from elu_study.core.build import build_all
    from elu_study.core.entries import ENTRIES, builds
    from elu_study.core.harness import measure

    todo = entries()
    build_all(builds(todo))
    record = measure(todo, trials=2, rounds=rounds, progress=True)
    record["accuracy16"] = {}
    for name in ("6_beyond_copy", "6_16bit_expf"):
        module = ENTRIES[name].build()
        identical = formula(ENTRIES[name], "OP16") == "Expm1f"
        record["accuracy16"][name] = {d: check_16bit(module, d, expect_identical=identical) for d in DTYPES16}
    torch.cuda.empty_cache()
    if profile_counters:
        counters = profile.profile(kernel_names())
        record["counters"] = {"ncu": counters["ncu"], "rows": counters["rows"]}
    record["processes"] = fresh_processes(REPEATED, processes)
    record["method"]["processes"] = processes
    return record


def fresh_processes(names, processes: int, rounds: int = 3) -> list[dict]:
    """``names`` checked and timed in ``processes`` new Python processes, one after another."""
    from tqdm.auto import tqdm

    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in tqdm(range(processes), desc="fresh processes", unit="process"):
            path = Path(tmp, f"repeat{k}.json")
            subprocess.run([sys.executable, "-m", "elu_study", "beyond", "--repeat", str(path), "--rounds", str(rounds),
                            "--names", *names], check=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
            runs.append(json.loads(path.read_text()))
    return runs


def confirm(names, processes: int = 3) -> dict:
    """Time attempts that beat step 6 in the recorded run again, in fresh processes, beside copy_ and step 6,
    and add them to the record as its "confirmation" (the attempts are built from their own flags)."""
    from elu_study.core.build import build_all
    from elu_study.core.hardware import provenance
    from elu_study.core.entries import ENTRIES, builds

    record = load()
    timed = ["copy_", "6_beyond_copy", *names]
    build_all(builds([ENTRIES[n] for n in timed]))
    record["confirmation"] = {"names": list(names), "provenance": provenance(),
                              "processes": fresh_processes(timed, processes)}
    return record


def save(record: dict) -> Path:
    return results.save(record, "beyond")


def summary_frame(record: dict):
    """One row per attempt: time, x copy_, spread, and the DRAM counters beside it."""
    import pandas as pd

    counters = {r["name"]: r for r in record.get("counters", {}).get("rows", [])}
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


def _float32_rows(record: dict) -> list[dict]:
    return [r for r in record["rows"] if r["mode"] in ("", "in_place") and r["name"] not in ("read_only", "write_only")]


def figures(record: dict, write: bool = True) -> list:
    """Every float32 attempt's time over copy_'s, with the roof, the stream floor and p10-p90 whiskers.

    write: save as results/<gpu>-beyond.png and return the paths; else return the figures."""
    import matplotlib

    if write:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Patch

    from elu_study.core.hardware import slug
    from elu_study.core.record import RESULTS_DIR

    rows = sorted(_float32_rows(record), key=lambda r: r["x_copy"])
    roof = record["roof_ms"]
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(rows) + 1.8))
    y = np.arange(len(rows))[::-1]
    med = np.array([r["x_copy"] for r in rows])
    lo = med - np.array([r["timing"]["p10_ms"] for r in rows]) / roof
    hi = np.array([r["timing"]["p90_ms"] for r in rows]) / roof - med
    kind_color = {"attempt": "tab:purple", "step": "tab:blue"}
    left = min(0.9, record["stream_floor_ms"] / roof - 0.02) if record.get("stream_floor_ms") else 0.9
    ax.barh(y, med - left, left=left, xerr=[lo.clip(0), hi.clip(0)],
            color=[kind_color.get(r["kind"], "tab:gray") for r in rows], capsize=2)
    ax.set_yticks(y, [r["name"] for r in rows], fontsize=8)
    lines = [ax.axvline(1.0, color="tab:green", ls="--", label=f"roof: copy_ {roof:.3f} ms")]
    if record.get("stream_floor_ms"):
        lines.append(ax.axvline(record["stream_floor_ms"] / roof, color="tab:red", ls=":",
                                label=f"read-only + write-only streams {record['stream_floor_ms']:.3f} ms"))
    ax.set_xlim(left, min(max(med + hi) + 0.01, 1.3))
    ax.set_xlabel("time over copy_'s (median; whiskers p10-p90; lower is better; bars past the edge are clipped)")
    ax.set_title(f"Step 6's attempts, full size float32, {record['provenance']['gpu']}")
    handles = [Patch(color="tab:purple", label="attempt (one change from 6_base)"), Patch(color="tab:blue", label="step"),
               Patch(color="tab:gray", label="baseline"), *lines]
    ax.legend(handles=handles, fontsize=8, loc="upper right", framealpha=0.9)
    fig.tight_layout()
    figs = [fig, dram_figure(record)]
    if not write:
        for f in figs:
            plt.close(f)
        return figs
    paths = []
    for f, suffix in zip(figs, ("beyond", "beyond-dram")):
        path = RESULTS_DIR / f"{slug(record['provenance']['gpu'])}-{suffix}.png"
        f.savefig(path, dpi=110)
        plt.close(f)
        paths.append(path)
    return paths


def _counters(record: dict) -> dict:
    return {r["name"]: r for r in record.get("counters", {}).get("rows", [])}


def dram_figure(record: dict):
    """Time over copy_'s (CUDA events) against DRAM throughput (ncu) for each float32 kernel: the line is
    'time set by the DRAM alone' through 6_base (x copy_ proportional to 1 / throughput)."""
    import matplotlib.pyplot as plt
    import numpy as np

    c = _counters(record)
    rows = [r for r in _float32_rows(record) if r["name"] in c and c[r["name"]].get("dram_pct_of_peak")]
    fig, ax = plt.subplots(figsize=(8, 5))
    d = np.array([c[r["name"]]["dram_pct_of_peak"] for r in rows])
    x = np.array([r["x_copy"] for r in rows])
    ax.scatter(d, x, color=["tab:purple" if r["kind"] == "attempt" else "tab:blue" for r in rows], zorder=3)
    base_x = next((r["x_copy"] for r in rows if r["name"] == "6_base"), None)
    for r, di, xi in zip(rows, d, x):  # name the points that stand apart; the 6_base cluster stays unlabelled
        if base_x is None or r["name"] == "6_base" or abs(xi - base_x) > 0.008:
            ax.annotate(r["name"], (di, xi), fontsize=7, xytext=(3, 2), textcoords="offset points")
    if "6_base" in c:
        b = next(r for r in rows if r["name"] == "6_base")
        k = b["x_copy"] * c["6_base"]["dram_pct_of_peak"]
        grid = np.linspace(d.min() * 0.98, d.max() * 1.02, 50)
        ax.plot(grid, k / grid, color="tab:gray", ls="--", label="time set by DRAM throughput alone (through 6_base)")
    ax.axhline(1.0, color="tab:green", ls=":", label="copy_")
    ax.set_xlabel("DRAM throughput, % of peak (ncu, one full-size launch)")
    ax.set_ylabel("time over copy_'s (CUDA events, median)")
    ax.set_title("Same bytes, different DRAM efficiency: each attempt's time against its DRAM throughput")
    ax.legend(fontsize=8)
    fig.tight_layout()
    plt.close(fig)  # returned to be shown once, as a cell's value
    return fig


def verdict(record: dict) -> str:
    """The fastest float32 kernel and step 6 against copy_, each margin against the round-to-round noise."""
    rows = [r for r in _float32_rows(record) if r["kind"] in ("attempt", "step")]
    best = min(rows, key=lambda r: r["x_copy"])
    step6 = next(r for r in record["rows"] if r["name"] == "6_beyond_copy")
    lines = []
    for r in ([best] if best["name"] == "6_beyond_copy" else [best, step6]):
        margin = 1 - r["x_copy"]
        noise = results.noise(record, r["name"], "copy_")
        if margin > noise:
            word = f"faster than `copy_` by {100 * margin:.2f} %, more than the round-to-round noise ({100 * noise:.2f} %)"
        elif margin > 0:
            word = (f"faster than `copy_` by {100 * margin:.2f} %, but inside the round-to-round noise "
                    f"({100 * noise:.2f} %): a tie")
        else:
            word = f"slower than `copy_` by {100 * -margin:.2f} % (noise {100 * noise:.2f} %)"
        label = "the fastest float32 build" if r is best else "step 6, the file's defaults"
        lines.append(f"- **{r['name']}** ({label}): {r['timing']['median_ms']:.3f} ms, **{r['x_copy']:.3f}x** `copy_`, {word}.")
    if record.get("processes"):
        xs = [p["6_beyond_copy"]["x_copy"] for p in record["processes"]]
        lines.append(f"- In {len(xs)} fresh processes, step 6 took {', '.join(f'{v:.3f}x' for v in xs)} `copy_`.")
    return "\n".join(lines)


def conclusion(record: dict) -> str:
    """The goal's verdict: the must and the aim for step 6 and for the confirmed attempts; the 16-bit way."""
    step6 = next(r for r in record["rows"] if r["name"] == "6_beyond_copy")
    lines = []
    x6 = step6["x_copy"]
    xs = [p["6_beyond_copy"]["x_copy"] for p in record.get("processes", [])] + [x6]
    must = all(v <= 1.0 for v in xs) and (1 - x6) > results.noise(record, "6_beyond_copy", "copy_")
    aim = all(v <= 0.98 for v in xs)
    floor = record.get("stream_floor_ms")
    won = (record["roof_ms"] - step6["timing"]["median_ms"]) / (record["roof_ms"] - floor) if floor else None
    lines.append(f"- Step 6 as built by default: the must (at most 1.00x in every process, by more than the noise) "
                 f"**{'met' if must else 'not met'}**; the aim (0.98x) **{'met' if aim else 'not met'}**.")
    if won is not None:
        lines.append(f"- Of the {record['roof_ms'] - floor:.3f} ms between `copy_` and the two streams run apart, "
                     f"step 6 wins back {100 * max(won, 0):.0f} %.")
    confirmed = record.get("confirmation", {})
    for name in confirmed.get("names", []):
        xs_c = [p[name]["x_copy"] for p in confirmed["processes"]]
        recorded = next(r for r in record["rows"] if r["name"] == name)["x_copy"]
        reached = recorded <= 0.98 and all(v <= 0.98 for v in xs_c)
        step6_c = ", ".join("%.3fx" % p["6_beyond_copy"]["x_copy"] for p in confirmed["processes"])
        lines.append(f"- `{name}`: {recorded:.3f}x `copy_` in the recorded run, then "
                     f"{', '.join(f'{v:.3f}x' for v in xs_c)} in {len(xs_c)} fresh processes (step 6 in the same "
                     f"processes: {step6_c}; `python -m elu_study beyond --confirm`): the aim (0.98x) "
                     f"{'**reached** in every one' if reached else 'not reached in every one'}.")
    b16 = next(r for r in record["rows"] if r["name"] == "6_beyond_copy bfloat16")
    lines.append(f"- Fewer bytes go much further than any schedule: step 6 on bfloat16 storage takes "
                 f"{b16['x_copy']:.3f}x float32 `copy_`'s time.")
    return "\n".join(lines)


def process_table(record: dict, which: str = "processes"):
    """Each fresh process's medians, over copy_'s in that process: the recorded run's ("processes") or those of
    ``python -m elu_study beyond --confirm`` ("confirmation")."""
    import pandas as pd
    from IPython.display import Markdown

    from elu_study.core.record import markdown

    runs = record.get("processes", []) if which == "processes" else record.get("confirmation", {}).get("processes", [])
    if not runs:
        return Markdown(f"(no {which} in this record)")
    df = pd.DataFrame([{"process": i + 1, **{f"{n} x copy_": v["x_copy"] for n, v in p.items() if n != "copy_"},
                        "copy_ ms": p["copy_"]["median_ms"]} for i, p in enumerate(runs)])
    return Markdown(markdown(df.set_index("process")))


def counter_finding(record: dict) -> str:
    """What the counters say across the float32 kernels: same bytes? how well was the DRAM driven?"""
    c = _counters(record)
    rows = [r for r in _float32_rows(record) if r["name"] in c and c[r["name"]].get("dram_pct_of_peak")]
    if "6_base" not in c or not rows:
        return "No counters were recorded for the attempts."
    base = c["6_base"]
    k = next(r for r in rows if r["name"] == "6_base")["x_copy"] * base["dram_pct_of_peak"]
    dev = {r["name"]: r["x_copy"] / (k / c[r["name"]]["dram_pct_of_peak"]) - 1 for r in rows}
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
    if better:
        text.append("Drove the DRAM harder than `6_base` (" + f"{base['dram_pct_of_peak']:.1f} % of peak): "
                    + ", ".join(f"`{n}` {c[n]['dram_pct_of_peak']:.1f} % (read-active {c[n].get('dram_active_read_pct', 0):.1f} %, "
                                f"write-active {c[n].get('dram_active_write_pct', 0):.1f} %)" for n in better)
                    + f"; `6_base`: read-active {base.get('dram_active_read_pct', 0):.1f} %, write-active "
                      f"{base.get('dram_active_write_pct', 0):.1f} %. Both directions gain together: the DRAM idles less, "
                      f"with the same read/write mix.")
    text.append("Why a cache policy or a tile order changes that efficiency is not visible in these counters (this ncu "
                "exposes no DRAM row, bank or turnaround counters). **Hypothesis:** with the input's lines marked "
                "evict_last, the L2 picks the output's dirty lines first when it needs room, so write-backs leave in "
                "the order they were written, in longer runs, and the DRAM turns the bus around less often.")
    return " ".join(text[:2]) + ("\n\n" + text[2] if better else "") + "\n\n" + text[-1]


def issue_finding(record: dict) -> str:
    """Is the 16-bit kernel bound by instruction issue? Its warp instructions at one per scheduler per cycle."""
    c = _counters(record)
    sms = record["provenance"]["sm_count"]
    parts = []
    for name in ("6_beyond_copy", "6_expm1f", "6_beyond_copy bfloat16", "6_16bit_expf bfloat16"):
        if name not in c or not c[name].get("warp_instructions") or not c[name].get("sm_cycles_per_s"):
            continue
        k = c[name]
        issue_ms = k["warp_instructions"] / (sms * 4 * k["sm_cycles_per_s"]) * 1e3
        kernel_ms = k["duration_ns"] / 1e6
        parts.append(f"`{name}`: {k['warp_instructions'] / 1e9:.2f} G warp instructions need {issue_ms:.2f} ms of issue "
                     f"at 4 per SM per cycle ({k['sm_cycles_per_s'] / 1e9:.2f} GHz), **{100 * issue_ms / kernel_ms:.0f} %** "
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
    import pandas as pd
    from IPython.display import Markdown

    from elu_study.core.record import markdown

    rows = []
    for name, by_dtype in record["accuracy16"].items():
        for dtype, a in by_dtype.items():
            row = {"build": name, "dtype": dtype}
            for alpha, v in a["alphas"].items():
                row[f"alpha {alpha}: differ / max ulp"] = f"{v['mismatches']} / {v['max_ulp']}"
            row["random (aligned, misaligned) differ"] = f"{a['random_aligned_mismatches']}, {a['random_misaligned_mismatches']}"
            row["every output written"] = "yes" if all(v["untouched"] == 0 for v in a["alphas"].values()) else "NO"
            rows.append(row)
    return Markdown(markdown(pd.DataFrame(rows).set_index("build")))


def accuracy16_finding(record: dict) -> str:
    a = record["accuracy16"]
    step6 = all(v["bit_identical"] for v in a["6_beyond_copy"].values())
    worst = max((v["max_ulp"], d) for d, x in a["6_16bit_expf"].items() for v in x["alphas"].values())
    most = max(v["mismatches"] for x in a["6_16bit_expf"].values() for v in x["alphas"].values())
    zeros = max(v["mismatches"] for x in a["6_16bit_expf"].values() for k, v in x["alphas"].items() if v["max_ulp"] == 0)
    return (f"Step 6's 16-bit path (`expm1f`) is {'bit-identical to `F.elu` on every input' if step6 else 'NOT bit-identical to `F.elu`'} "
            f"of both dtypes. With `expf - 1` up to {most} of the 65,536 inputs differ, by up to {worst[0]} ulp "
            f"({worst[1]}; ulp counted along the ordered bit patterns, so through the subnormals): the cancellation "
            f"of `expf(x) - 1` near 0 survives the rounding to 16 bits, so 16-bit storage keeps `expm1f` and pays for "
            f"it in time. Differences of 0 ulp (up to {zeros}, at alpha 0) are zeros of the other sign: `expf(x) - 1` "
            f"rounds to +0 where `expm1f` gives a tiny negative number, and 0 times it is -0.")


BEGIN, END = "<!-- beyond:begin -->", "<!-- beyond:end -->"


def readme_block(record: dict) -> str:
    p = record["provenance"]
    return "\n".join([
        f"**Past the roof (step 6).** Generated from `results/{record_path(p['gpu']).name}` by "
        f"`python -m elu_study beyond` (and `report`), measured on an {p['gpu']} ({p['date_utc'][:10]}, commit "
        f"{p.get('commit')}): {sum(r['kind'] == 'attempt' for r in record['rows'])} attempts, each one change from "
        f"`6_base`, timed in the same interleaved rounds as `copy_`, with DRAM counters. Notebook "
        f"[08_beyond_copy](notebooks/08_beyond_copy.ipynb) tells each one.",
        "", verdict(record), conclusion(record), "",
        f"![{record_path(p['gpu']).stem}](results/{record_path(p['gpu']).stem}.png)",
    ])


def update_readme(record: dict) -> Path:
    """Replace the README's step-6 block (between BEGIN and END) with text generated from the record."""
    from elu_study.core.record import README

    text = README.read_text()
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"{README} has no {BEGIN} ... {END} block")
    README.write_text(head + BEGIN + "\n" + readme_block(record) + "\n" + END + tail)
    return README


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study beyond", description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=3, help="fresh processes that time step 6 against copy_ again")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-counters", action="store_true", help="skip Nsight Compute")
    parser.add_argument("--confirm", nargs="+", metavar="ATTEMPT",
                        help="only time these attempts again in fresh processes, beside copy_ and step 6, and add "
                             "that to the existing record")
    parser.add_argument("--repeat", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--names", nargs="+", default=list(REPEATED), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeat:
        return _repeat(args.repeat, args.rounds, args.names)

    import torch

    from elu_study.core import record as results

    if not torch.cuda.is_available():
        record = load()
        print("NO GPU HERE: the recorded run of step 6's attempts:\n")
        print(results.markdown(summary_frame(record)))
        return 0
    if args.confirm:
        record = confirm(args.confirm, args.processes)
        path = save(record)
        update_readme(record)
        for run_ in record["confirmation"]["processes"]:
            print({k: round(v["x_copy"], 4) for k, v in run_.items()})
        print(f"wrote {path}")
        return 0
    record = run(processes=args.processes, rounds=args.rounds, profile_counters=not args.no_counters)
    path = save(record)
    written = figures(record)
    written.append(update_readme(record))
    print(results.markdown(summary_frame(record)))
    print(json.dumps(record["accuracy16"], indent=1))
    for run_ in record["processes"]:
        print({k: round(v["x_copy"], 4) for k, v in run_.items()})
    print(f"\nwrote {path} and {', '.join(map(str, written))}")
    failed = [r["name"] for r in record["rows"] if r["check"] and not r["check"]["passed"]]
    bad16 = [f"{n} {d}" for n, a in record["accuracy16"].items() for d, c in a.items() if not c["passed"]]
    if failed or bad16:
        print(f"FAILED: {failed + bad16}", file=sys.stderr)
        return 1
    return 0
