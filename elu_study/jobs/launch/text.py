"""The record in words and tables: the cells' table, a summary, the study's own launches beside their cells,
the predictions' ranges (graded in ``notebook``), the in-flight correlation, the grid-stride knee and the slowest
cell. No GPU needed."""

from __future__ import annotations

import pandas as pd

from elu_study.core.record import record_path
from elu_study.core.tables import markdown
from elu_study.jobs.launch.analysis import cell, gridstride_knee, row_of

# The study's own builds of launches that are cells of this sweep: (record, entry, cell, how the build differs).
# "study" is results/<gpu>.json, "beyond" results/<gpu>-beyond.json; each entry's x copy_ is over its own run's copy_.
STEP_BUILDS = (
    ("study", "2_float4", "256x1", "step 2 itself"),
    ("study", "2+128_threads", "128x1", "step 5's one-change ablation"),
    ("study", "2+2_vectors", "256x2", "step 5's one-change ablation"),
    ("study", "2+4_vectors", "256x4", "step 5's one-change ablation"),
    ("study", "2+hints", "256x1+hints", "step 5's one-change ablation"),
    ("study", "5_streaming", "128x2+hints", "step 5 itself: expm1f, not expf (a different formula)"),
    ("study", "5_streaming_expf", "128x2+hints", "step 5 with expf: the same formula"),
    ("study", "3_grid_stride_1_waves", "gs 4x512", "step 3's file, 1 wave of 512-thread blocks"),
    ("study", "6_beyond_copy", "128x1", "step 6 itself (its own file)"),
    ("beyond", "6_base", "128x1", "step 6's file"),
    ("beyond", "6_64_threads", "64x1", "step 6's file"),
    ("beyond", "6_256_threads", "256x1", "step 6's file"),
    ("beyond", "6_2_vectors", "128x2", "step 6's file"),
)
# Predictions 2-4 as written in the notebook (typed before the sweep ran: predictions, not measurements).
# Prediction 3's "about 2 %" is read as +0.01 to +0.03 x copy_.
PREDICTIONS = {2: (1.02, 1.05), 3: (0.01, 0.03), 4: (1.05, 1.10)}
NEEDED_KIB = 26  # the prediction's Little's-law estimate (assumed 0.8 us latency): a prediction, not a measurement
ASSUMED_LATENCY_S = 0.8e-6  # the prediction's assumed loaded DRAM latency (not measured)


def cells_frame(record: dict, cells: list[dict] | None = None, achieved: dict | None = None) -> pd.DataFrame:
    """The cells, fastest first. Threads per SM, occupancy and KiB in flight are *theoretical* (from the registers
    and the occupancy rules); ``achieved`` ({cell: (pct, entry)}, see analysis.achieved_occupancy) adds ncu's
    achieved occupancy where a profiled build ran the same launch shape."""
    achieved = achieved or {}
    rows = sorted(cells if cells is not None else record["cells"], key=lambda c: c["timing"]["median_ms"])
    return pd.DataFrame({
        "cell": [c["name"] for c in rows],
        "ms": [c["timing"]["median_ms"] for c in rows],
        "x copy_": [c["x_copy"] for c in rows],
        "p10": [c["timing"]["p10_ms"] / record["roof_ms"] for c in rows],
        "p90": [c["timing"]["p90_ms"] / record["roof_ms"] for c in rows],
        "noise (% of copy_)": [100 * c["noise_ms"] / record["roof_ms"] for c in rows],
        "regs": [str(c["occupancy"]["registers"]) for c in rows],
        "threads/SM (theor.)": [str(c["occupancy"]["resident_threads_per_sm"]) for c in rows],
        "occupancy % (theor.)": [c["occupancy"]["occupancy_pct"] for c in rows],
        "achieved occ. % (ncu)": [f"{achieved[c['name']][0]:.1f} ({achieved[c['name']][1]})" if c["name"] in achieved
                                  else "" for c in rows],
        "KiB in flight/SM (theor.)": [c["occupancy"]["load_bytes_in_flight_per_sm"] / 1024 for c in rows],
        "correct": ["yes" if c["correct"] else "NO" for c in rows],
    }).set_index("cell")


TABLE_FORMATS = {"p10": "{:.3f}", "p90": "{:.3f}", "noise (% of copy_)": "{:.2f}", "occupancy % (theor.)": "{:.1f}",
                 "KiB in flight/SM (theor.)": "{:.0f}"}


def table(record: dict, cells: list[dict] | None = None, achieved: dict | None = None) -> str:
    """The cells as a pipe table, fastest first (see cells_frame)."""
    return markdown(cells_frame(record, cells, achieved), TABLE_FORMATS)


def summary(record: dict) -> str:
    b, p = record["best"], record["provenance"]
    ref = record["references"]
    verdict = (f"a tie: the margin is inside the noise; tied within the noise: {', '.join(b['tied'])}" if b["tie"]
               else f"{b['margin_over_noise']:.1f}x the noise")
    return "\n".join([
        f"{p['gpu']} ({p['sm_count']} SMs), {p['date_utc'][:10]}, commit {p.get('commit')}; shape "
        f"{tuple(record['problem']['shape'])} float32; {record['method']['rounds']} interleaved rounds.",
        f"copy_ {record['roof_ms']:.3f} ms; 2_float4 {ref['2_float4']['x_copy']:.3f}x copy_.",
        f"best cell: {b['name']}, {b['x_copy']:.3f}x copy_ ({b['median_ms']:.3f} ms); runner-up {b['runner_up']} by "
        f"{b['margin_ms'] * 1e3:.1f} us, noise {b['noise_ms'] * 1e3:.1f} us: {verdict}.",
        f"correct: {sum(c['correct'] for c in record['cells'])} of {len(record['cells'])} cells.",
    ])


def steps_table(record: dict, others: dict) -> str:
    """Each step's launch as a cell of this sweep beside that step's own build (its own record and run)."""
    gpu = record["provenance"]["gpu"]
    lines = ["| launch (own build) | record | own build x copy_ (its run) | cell here | cell x copy_ (this sweep) "
             "| own build / cell | how the build differs |", "|---|---|---|---|---|---|---|"]
    ref, step2_cell = record["references"]["2_float4"], cell(record, "256x1")["x_copy"]
    lines.append(f"| 2_float4 (timed in this sweep's rounds) | {record_path(gpu, 'launch').name} | "
                 f"{ref['x_copy']:.3f} | 256x1 | {step2_cell:.3f} | "
                 f"{ref['x_copy'] / step2_cell:.3f} | step 2 itself, same rounds |")
    for which, entry, name, note in STEP_BUILDS:
        row, here = row_of(others.get(which), entry), cell(record, name)["x_copy"]
        own = f"{row['x_copy']:.3f}" if row else "not recorded"
        ratio = f"{row['x_copy'] / here:.3f}" if row else ""
        lines.append(f"| {entry} | {record_path(gpu, which).name} | {own} | {name} | {here:.3f} | {ratio} | {note} |")
    return "\n".join(lines)


def correlation_text(cor: dict) -> str:
    """The three correlations of x copy_ with theoretical KiB in flight as a small table, and the verdict: a
    direction is claimed only if all three agree in sign and each permutation p < 0.05."""
    outl = ", ".join(f"{n} ({x:.3f}x)" for n, x in cor["outliers"]) or "none"
    rows = [("every cell", "all"), (f"without Tukey outliers of x copy_: {outl}", "without_outliers"),
            ("Spearman (ranks, every cell)", "spearman")]
    table = "\n".join(["| correlation | r | n | permutation p |", "|---|---|---|---|",
                       *(f"| {label} | {cor[k]['r']:+.2f} | {cor[k]['n']} | {cor[k]['p']:.3f} |" for label, k in rows)])
    if cor["supported"]:
        verdict = f"All three agree in sign and each p < 0.05: **{cor['direction']}**."
    else:
        verdict = ("They do not all agree in sign and significance, so **the record supports no direction**: "
                   "theoretical bytes in flight do not order these cells.")
        w = cor["without_outliers"]
        if w["p"] < 0.05:
            verdict += (f" Without the outliers alone it is significant "
                        f"({'more in flight, slower' if w['r'] > 0 else 'more in flight, faster'}): a hypothesis for "
                        "the cells near copy_, not a finding.")
    return (f"No-hints one-shot cells, {cor['kib_min']:.0f} to {cor['kib_max']:.0f} KiB in flight per SM "
            f"(theoretical):\n\n{table}\n\n{verdict}")


def knee_table(knee: dict) -> str:
    lines = ["| KiB in flight/SM (theor.) | threads/SM (theor.) | cells | x copy_ | x copy_ x KiB | flat? "
             "| implied latency (ns, Little) |", "|---|---|---|---|---|---|---|"]
    for lv in knee["levels"]:
        lines.append(f"| {lv['kib']:.0f} | {lv['threads_per_sm']} | {', '.join(lv['cells'])} | {lv['x_lo']:.3f} to "
                     f"{lv['x_hi']:.3f} | {lv['x_times_kib']:.2f} | {'yes' if lv['flat'] else 'no'} | "
                     f"{lv['implied_latency_ns']:.0f}" + ("" if not lv["flat"] else " (not latency-bound)") + " |")
    return "\n".join(lines)


def unroll_caveat(study: dict | None) -> str:
    """These KiB count one float4 per thread; step 3's unrolled loop (its SASS in the main study's record, read in
    notebook 03) shows that a grid-stride loop can keep more in flight."""
    sass = (row_of(study, "3_grid_stride") or {}).get("sass", {})
    loads = sum(n for op, n in sass.get("loads", {}).items() if op.startswith("LDG.E.128"))
    head = "- Caveat: these KiB count one float4 in flight per resident thread."
    if loads <= 1:
        return head + " Whether nvcc unrolls this sweep's grid-stride loop is not checked here."
    return (f"{head} Step 3's own grid-stride loop is unrolled: its SASS has {loads} 128-bit loads, the loop unrolled "
            f"by two plus its remainder ([notebook 03](03_grid_stride.ipynb)). This sweep's kernel is another file, "
            "not inspected here. If it is unrolled the same way, the knee in KiB moves up; in threads per SM it does not.")


def little_note(record: dict) -> str:
    """A graded note on the Little's-law prediction: it used copy_'s read plus write bandwidth, but only loads are
    counted in flight; with the read bandwidth alone and the same assumed latency, the estimate halves."""
    knee = gridstride_knee(record)
    if knee["knee_above_kib"] is None or knee["knee_at_most_kib"] is None:
        return ""
    sms, read = record["provenance"]["sm_count"], knee["roof_read_bytes_per_s"]
    kib = read * ASSUMED_LATENCY_S / sms / 1024
    inside = knee["knee_above_kib"] < kib <= knee["knee_at_most_kib"]
    return (f"*Graded note, after the run:* the Little row's estimate used `copy_`'s read plus write bandwidth, but "
            f"only loads are counted in flight. With `copy_`'s read bandwidth alone ({read / 1e12:.2f} TB/s) and the "
            f"same assumed latency, it is {kib:.0f} KiB per SM: {'inside' if inside else 'outside'} the measured knee. "
            "The row stays MISSED: it grades the prediction as written.")


def knee_text(knee: dict, study: dict | None = None) -> str:
    """Where the grid-stride cells stop being flat, and what Little's law says below that, in short bullets."""
    lo, hi = knee["knee_above_kib"], knee["knee_at_most_kib"]
    if lo is None or hi is None:
        return "The grid-stride cells show no knee (all flat or none flat) within this sweep."
    b = [lv for lv in knee["levels"] if not lv["flat"]]
    n_lo, n_hi = knee["needed_kib_range"]
    return "\n".join([
        f"- **The knee lies between {lo:.0f} and {hi:.0f} KiB** of theoretical loads in flight per SM: from {hi:.0f} "
        f"KiB up, every cell is within {100 * knee['flat_within']:.0f} % of the fastest grid-stride cell.",
        f"- Below it, {b[-1]['kib'] / b[0]['kib']:.0f}x the bytes in flight ({b[0]['kib']:.0f} to {b[-1]['kib']:.0f} "
        f"KiB) cut x copy_ by {b[0]['x_hi'] / b[-1]['x_hi']:.2f}x, not {b[-1]['kib'] / b[0]['kib']:.0f}x: as if the "
        "latency grew with the load (the table's last column).",
        f"- With those latencies and copy_'s read bandwidth, Little's law asks for {n_lo:.0f} to {n_hi:.0f} KiB per "
        "SM.",
        unroll_caveat(study),
    ])


def slow_cell_text(record: dict, achieved: dict, others: dict) -> str:
    """The slowest no-hints one-shot cell: theoretical and achieved occupancy, and a labelled hypothesis."""
    one = [c for c in record["cells"] if not c["grid_stride"] and not c["hints"]]
    slow = max(one, key=lambda c: c["x_copy"])
    sms = record["provenance"]["sm_count"]
    blocks = lambda c: -(-record["problem"]["numel"] // (4 * c["threads"] * c["vectors"]))  # noqa: E731
    most = max(blocks(c) for c in one if c is not slow)
    lines = [f"- The slowest no-hints one-shot cell is **{slow['name']}** ({slow['x_copy']:.3f}x copy_), with a "
             f"*theoretical* occupancy of {slow['occupancy']['occupancy_pct']:.0f} %."]
    if slow["name"] in achieved:
        pct, entry = achieved[slow["name"]]
        row = row_of(others.get("beyond"), entry)
        its = f" ({row['x_copy']:.3f}x copy_ in its run)" if row else ""
        knee_threads = next((lv["threads_per_sm"] for lv in gridstride_knee(record)["levels"] if lv["flat"]), 0)
        lines.append(f"- ncu measured an *achieved* occupancy of {pct:.0f} % for {entry}{its}, step 6's build with "
                     "the same launch shape; the table above gives the other profiled shapes.")
        lines.append(f"- That is about {pct / 100 * slow['occupancy']['resident_threads_per_sm']:.0f} resident threads "
                     f"per SM, below the grid-stride knee's {knee_threads}: a hypothesis for the time, not a "
                     "measurement of this cell.")
    lines.append(f"- **Why the SM stays that empty is not explained by this record.** *Hypothesis* (not tested): the "
                 f"block launch rate. {slow['name']} launches {blocks(slow) / sms:,.0f} blocks per SM, every other "
                 f"no-hints one-shot cell at most {most / sms:,.0f}.")
    fewer = sorted((c for c in one if c["threads"] == slow["threads"] and c is not slow), key=lambda c: c["x_copy"])
    if fewer:
        rank = sorted(one, key=lambda c: -c["x_copy"])
        lines.append(f"- The same block size with more vectors, so fewer blocks (rank among the {len(one)} no-hints "
                     "one-shot cells, slowest first): " + ", ".join(f"{c['name']} {c['x_copy']:.3f}x (#{rank.index(c) + 1})"
                                                              for c in fewer) + ". Fewer blocks alone do not make a cell fast.")
    return "\n".join(lines)
