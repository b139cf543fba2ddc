"""The README's first screen (``front``): its words are templates/report/front.md.j2, its numbers read here
from the committed records. Only other jobs' constants are imported; what a line needs is computed from the
records, so that a job's refactoring cannot change the first screen."""

from __future__ import annotations

import math
import statistics

from elu_study.core import record, text
from elu_study.core.entries import grid_stride_blocks
from elu_study.core.hardware import bytes_moved, floor_ms, gpu_spec
from elu_study.core.record import noise, row
from elu_study.jobs.beyond.analysis import AIM, MUST
from elu_study.jobs.model import analysis as model_analysis
from elu_study.jobs.sixteen import analysis as sixteen
from elu_study.jobs.sixteen.predictions import GOALS
from elu_study.jobs.study.findings import CLOSE_CALLS
from elu_study.jobs.study.launches import launch as launch_of
from elu_study.jobs.study.report import FRONT_FIGURE

BLOCK, FINDINGS = "front", "findings"  # the first screen, and the findings below its first heading
BRIEF_GPU = "H100"  # the brief's floor: the same bytes over the H100 SXM's datasheet bandwidth
ABLATIONS = ("3_grid_stride_2_waves_unroll_1", "3_grid_stride_2_waves_256t", "3_grid_stride_one_shot")


def study_numbers(study: dict, counters: dict | None, launch: dict | None) -> dict:
    """The verdict, the roof and steps 1-5; ``holds``: whether the record bears out each line's direction."""
    x = {r["name"]: r["x_copy"] for r in study["rows"]}
    best = min((r for r in study["rows"] if r["kind"] == "step"), key=lambda r: r["x_copy"])
    two, n = x["3_grid_stride_2_waves"], noise(study, "3_grid_stride_2_waves", *ABLATIONS, "2_float4")
    one_shot = {c["threads"]: c["x_copy"] for c in (launch or {}).get("cells", [])
                if not c["grid_stride"] and not c["hints"] and c["vectors"] == 1}
    holds = {"verdict": x["F.elu"] < 1.01 and best["x_copy"] < 1.0,
             "bytes": x["1_naive"] > 1.3 and x["2_float4"] < 1.02,
             "grid": two > x["2_float4"] + 3 * n and all(x[a] > x["2_float4"] + 3 * n for a in ABLATIONS)
             and x["3_grid_stride_512_waves"] < x["3_grid_stride_1_waves"],
             "hints": abs(x["2_float4"] - x["4_fast_math"]) < 0.01
             and x["2+128_threads"] < x["5_as_step_2"] < min(x["2+2_vectors"], x["2+hints"])}
    sms, numel = study["provenance"]["sm_count"], study["problem"]["numel"]
    seed, wave = (grid_stride_blocks(n, sms, numel) for n in ("3_grid_stride", "3_grid_stride_1_waves"))
    brief = gpu_spec(BRIEF_GPU)
    return {"gpu": study["provenance"]["gpu"], "x": x, "best": best, "holds": holds, "copy": row(study, "copy_"),
            "ms": {r["name"]: r["timing"]["median_ms"] for r in study["rows"]},
            "stream_floor_ms": study["stream_floor_ms"], "floor_ms": study["floor_ms"],
            "brief": {"gpu": brief.label, "tbps": brief.peak_bytes_per_s / 1e12,
                      "floor_ms": floor_ms(numel, brief.peak_bytes_per_s)},
            "stream_floor": study["stream_floor_ms"] / study["roof_ms"], "floor": study["floor_ms"] / study["roof_ms"],
            "gb": bytes_moved(numel) / 1e9, "peak_tbps": study["peak_bytes_per_s"] / 1e12,
            "c": {r["name"]: r for r in counters["rows"]} if counters else None,
            "counters_commit": counters["provenance"]["commit"] if counters else None,
            "sweep": {t: one_shot[t] for t in (256, 512, 1024) if t in one_shot},
            "figure": record.readme_link(record.figure_path(study["provenance"]["gpu"], FRONT_FIGURE)),
            "seed_blocks": seed, "wave_blocks": wave, "seed_waves": seed / wave,
            "wave_threads": launch_of("3_grid_stride_1_waves", sms, numel).threads,
            "launch_commit": launch["provenance"]["commit"] if launch else None}


def fastest(beyond: dict) -> dict:
    """The fastest float32 build of step 6's record (a step or an attempt)."""
    return min((r for r in beyond["rows"] if r["mode"] in ("", "in_place") and r["kind"] in ("attempt", "step")),
               key=lambda r: r["x_copy"])


def step6_numbers(beyond: dict) -> dict:
    """Step 6 against its must and aim in its run and every fresh process, its fastest build, 16-bit storage."""
    x6 = row(beyond, "6_beyond_copy")["x_copy"]
    best, confirmation = fastest(beyond), beyond.get("confirmation", {})
    runs = [p["6_beyond_copy"]["x_copy"] for p in (*beyond.get("processes", []), *confirmation.get("processes", []))
            if "6_beyond_copy" in p]  # every fresh process that timed it, the confirmation's included
    bf16 = row(beyond, "6_beyond_copy bfloat16")
    return {"x": x6, "worst": max(runs, default=None), "fastest": min(runs, default=None), "processes": len(runs),
            "under_aim": sum(v <= AIM for v in [x6, *runs]), "commit": beyond["provenance"]["commit"], "best": best,
            "must": all(v <= MUST for v in [*runs, x6]) and 1 - x6 > noise(beyond, "6_beyond_copy", "copy_"),
            "aim": all(v <= AIM for v in [*runs, x6]),
            "again": [p[best["name"]]["x_copy"] for p in confirmation.get("processes", [])]
            if best["name"] in confirmation.get("names", []) else [],
            "bf16_x": bf16["x_copy"], "bf16_holds": bf16["x_copy"] < best["x_copy"],
            "bf16_own": bf16["timing"]["median_ms"] / row(beyond, "copy_ bfloat16")["timing"]["median_ms"]}


def step7_numbers(study: dict) -> dict | None:
    """Step 7's default on each 16-bit dtype over its own copy_, whether it and its backward matched PyTorch on
    every input, the backward's worst over torch.add; None where the main record holds no 16-bit rows."""
    rows = {r["name"]: r for r in study["rows"]}
    if not all(f"{sixteen.DEFAULT} {d}" in rows for d in sixteen.DTYPES):
        return None
    xs = {d: rows[f"{sixteen.DEFAULT} {d}"]["x_roof"] for d in sixteen.DTYPES}
    mine = [r for n, r in rows.items() if n.split()[0] in (sixteen.DEFAULT, "7_backward") and r.get("exhaustive")]
    backward = [rows[f"7_backward {d}"]["x_roof"] for d in sixteen.DTYPES if f"7_backward {d}" in rows]
    return {"x": xs, "exact": bool(mine) and all(r["exhaustive"]["mismatches"] == 0 for r in mine),
            "backward": max(backward, default=None),
            "over": [{"name": g.subject, "value": rows[g.subject]["x_roof"], "must": g.bounds[1]} for g in GOALS
                     if g.goal == "must" and g.metric == "x_own_copy" and g.subject in rows
                     and rows[g.subject]["x_roof"] > g.bounds[1]]}


def accuracy_numbers(acc: dict, best: dict) -> dict:
    """expf(x) - 1 against expm1f over every float32 input; the verdict's kernel (``best``, the main record's fastest
    step): its worst error, or its name where this record lacks it."""
    alpha = "1.0" if "1.0" in acc["runs"] else next(iter(acc["runs"]))
    run, kinds = acc["runs"][alpha]["formulas"], {f["name"]: f for f in acc["formulas"]}
    minus_one = [n for n in run if kinds[n]["exponential"] in ("expf", "__expf")]
    expm1 = [n for n in run if kinds[n]["exponential"] == "expm1f" and not kinds[n]["flushes_denormals"]]
    return {"alpha": alpha, "minus_one": minus_one, "expm1": expm1,
            "best_ulp": run[best["name"]]["max_ulp"]["negative"]["ulp"] if best["name"] in run else None,
            "best_zero_sign": run[best["name"]]["zero_sign_mismatch"] if best["name"] in run else 0,
            "worst_log2": round(math.log2(max(run[n]["max_ulp"]["negative"]["ulp"] for n in minus_one))),
            "zeros": max(sum(run[n]["classes"].get(c, {}).get("plus_zero_out", 0) for c in ("-normal", "-denormal"))
                         for n in minus_one),
            "expm1_ulp": max(run[n]["max_ulp"]["negative"]["ulp"] for n in expm1),
            "passes": all(s["tolerance"]["n_fail"] == 0 for s in run.values()),
            "unchecked": best["name"] if best["name"] not in run else None}


def sizes_numbers(sizes: dict) -> dict:
    """Up to the launch-bound length, the host's time per call: F.elu's, and the custom kernels' given out=."""
    top = sizes["regimes"]["launch_bound_max_n"]
    small = [n for n in sizes["sizes"] if n <= (top or min(sizes["sizes"]))]
    ref = sizes["regimes"]["reference"]

    def host_us(name: str) -> float:  # the median over the small lengths that ran
        us = [1e3 * p["host"]["median_ms"] for p in sizes["points"]
              if p["entry"] == name and p["n"] in small and "error" not in p and "cold" in p]
        return statistics.median(us) if us else math.nan

    h_ref = host_us(ref)
    host = {e["name"]: host_us(e["name"]) for e in sizes["entries"] if e["kind"] in ("step", "peer")}
    return {"max_n": top, "bytes": bytes_moved(top), "ref": ref, "ref_us": h_ref,
            "cheap": [v for v in host.values() if v < h_ref], "dear": {c: v for c, v in host.items() if v >= h_ref}}


def launch_numbers(launch: dict) -> dict:
    """The fastest of the launch shapes, and how many one-shot shapes evict-first hints slow beyond the noise."""
    one = {(c["threads"], c["vectors"], c["hints"]): c for c in launch["cells"] if not c["grid_stride"]}
    pairs = [(c, one[(t, v, True)]) for (t, v, h), c in one.items() if not h and (t, v, True) in one]
    slower = sum(d["x_copy"] - c["x_copy"] > max(c["noise_ms"], d["noise_ms"]) / launch["roof_ms"] for c, d in pairs)
    return {"best": launch["best"], "shapes": sum(not c["hints"] for c in launch["cells"]), "slower": slower,
            "pairs": len(pairs),
            "figure": record.readme_link(record.figure_path(launch["provenance"]["gpu"], "launch"))}


def noise_numbers(recs: dict) -> dict:
    """The round-to-round spread of the close calls in their own run (% of copy_), by record, and copy_ (ms)
    across every record that times the full shape."""
    held = [(job, name) for job, name in CLOSE_CALLS if recs.get(job) and name in {r["name"] for r in recs[job]["rows"]}]
    within = [100 * noise(recs[job], name, "copy_") for job, name in held]
    timed = [r for r in (recs["study"], recs["beyond"]) if r]
    copies = [row(r, "copy_")["timing"]["median_ms"] for r in timed]
    if b := recs["beyond"]:
        runs = [*b.get("processes", []), *b.get("confirmation", {}).get("processes", [])]
        copies += [p["copy_"]["median_ms"] for p in runs]
    if recs["launch"]:
        copies.append(recs["launch"]["references"]["copy_"]["timing"]["median_ms"])
    return {"within": within, "copies": copies,
            "close_calls": {job: [name for j, name in held if j == job] for job in ("study", "beyond")}}


def numbers(gpu: str = record.REFERENCE_GPU) -> dict:
    """Everything front.md.j2 fills in, for ``gpu``'s records; None for a line whose record is missing."""
    recs = {job: record.load(gpu, job, required=False) for job in record.VERSIONS}
    out = study_numbers(recs["study"], recs["ncu"], recs["launch"]) | noise_numbers(recs) | records_line(gpu, recs)
    return out | {"step6": recs["beyond"] and step6_numbers(recs["beyond"]), "step7": step7_numbers(recs["study"]),
                  "acc": recs["accuracy"] and accuracy_numbers(recs["accuracy"], out["best"]),
                  "sizes": recs["sizes"] and sizes_numbers(recs["sizes"]),
                  "launch": recs["launch"] and launch_numbers(recs["launch"]),
                  "model_bars": recs["model"] and model_analysis.bars(recs["model"]),
                  "must": MUST, "aim": AIM}


def records_line(gpu: str, recs: dict) -> dict:
    """Each record's file and commit(s), and the main record's commit: the findings say which differ."""
    return {"main_commit": recs["study"]["provenance"]["commit"], "main_record": record.record_path(gpu, "study").name,
            "records": {record.record_path(gpu, job).name: record.commits_of(r) for job, r in recs.items() if r}}


def blocks(gpu: str = record.REFERENCE_GPU) -> dict[str, str]:
    """The README's first screen (the verdict, the figure, the notebooks) and its findings (one line per
    notebook, below the first heading), from one reading of the GPU's records."""
    found = numbers(gpu)
    return {BLOCK: text.render("report/front.md.j2", **found), FINDINGS: text.render("report/findings.md.j2", **found)}


def findings(gpu: str = record.REFERENCE_GPU) -> str:
    """The README's findings block alone."""
    return blocks(gpu)[FINDINGS]
