"""The record in tables and words from ``templates/launch/``: the CLI's, and notebook 10's as ``Text`` (nbval)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from elu_study.core.paths import REPO_ROOT
from elu_study.core.tables import markdown
from elu_study.core.text import Text, show
from elu_study.jobs.launch import analysis as an
from elu_study.jobs.launch.analysis import THREADS, plan

# Predictions 1-4 as typed in the notebook before the sweep ran (predictions, not measurements): 1's "within 1 % of
# copy_" read as at most 1.01, 3's "about 2 %" as +0.01 to +0.03 x copy_.
PREDICTIONS = {1: (0.0, 1.01), 2: (1.02, 1.05), 3: (0.01, 0.03), 4: (1.05, 1.10)}
NEEDED_KIB = 26  # the prediction's Little's-law estimate per SM
ASSUMED_LATENCY_S = 0.8e-6  # the prediction's assumed loaded DRAM latency (not measured)
FORMATS = {"p10": "{:.3f}", "p90": "{:.3f}", "noise (% of copy_)": "{:.2f}", "occupancy % (theor.)": "{:.1f}",
           "KiB in flight/SM (theor.)": "{:.0f}"}
STEP2_CELL, STEP3_THREADS = "256x1", 512  # step 2's launch; step 3's block size


def cells_frame(record: dict, achieved: dict | None = None) -> pd.DataFrame:
    """The cells, fastest first. Threads per SM, occupancy and KiB in flight are *theoretical* (registers and the
    occupancy rules); ``achieved`` (analysis.achieved_occupancy) adds ncu's where a profiled build has the shape."""
    achieved, roof = achieved or {}, record["roof_ms"]
    return pd.DataFrame([
        {"cell": c["name"], "ms": t["median_ms"], "x copy_": c["x_copy"], "p10": t["p10_ms"] / roof,
         "p90": t["p90_ms"] / roof, "noise (% of copy_)": 100 * c["noise_ms"] / roof, "regs": str(o["registers"]),
         "threads/SM (theor.)": str(o["resident_threads_per_sm"]), "occupancy % (theor.)": o["occupancy_pct"],
         "achieved occ. % (ncu)": "{:.1f} ({})".format(*achieved[c["name"]]) if c["name"] in achieved else "",
         "KiB in flight/SM (theor.)": o["load_bytes_in_flight_per_sm"] / 1024,
         "correct": "yes" if c["correct"] else "NO"}
        for c in sorted(record["cells"], key=lambda c: c["timing"]["median_ms"])
        for t, o in [(c["timing"], c["occupancy"])]]).set_index("cell")


def table(record: dict, achieved: dict | None = None) -> Text:
    """Every cell as a pipe table, fastest first (see cells_frame)."""
    return Text(markdown(cells_frame(record, achieved), FORMATS))


def summary(record: dict) -> Text:
    """The run (GPU, date, commit, shape), copy_, step 2, the best cell against the noise, and the checks."""
    return show("launch/summary.md.j2", p=record["provenance"], shape=tuple(record["problem"]["shape"]),
                roof_ms=record["roof_ms"], step2=record["references"]["2_float4"]["x_copy"], best=record["best"],
                rounds=record["method"]["rounds"], correct=sum(c["correct"] for c in record["cells"]),
                n=len(record["cells"]))


def kernels(path: Path, names=("elu_one_shot_kernel", "elu_grid_stride_kernel")) -> Text:
    """Each ``__global__`` function of ``names`` in a file, from the template line above it to its closing brace."""
    text, spans = path.read_text(), []
    for name in names:  # the lines starting "template"/"__global__" above the name's, down to a line starting "}"
        m = re.search(rf"^(?:(?:template|__global__).*\n)*.*\b{re.escape(name)}\((?:.*\n)*?}}", text, re.MULTILINE)
        spans.append((text.count("\n", 0, m.start()) + 1, text.count("\n", 0, m.end()) + 1))
    lines = text.splitlines()
    return show("launch/kernels.md.j2", path=path.relative_to(REPO_ROOT).as_posix(), spans=spans,
                code="\n\n".join("\n".join(lines[a - 1:b]) for a, b in spans))


def graded(record: dict, numbers=(1,)) -> Text:
    """Predictions ``numbers`` (notebook 10's is 1; 2-4 were written with it) and the Little's-law estimate against
    the record. A prediction is stated for every cell of its group: it HOLDS only if every cell is inside its range
    (1 also: no other cell within 1 % of copy_)."""
    x = lambda n: an.cell(record, n)["x_copy"]
    farthest = lambda d, lo, hi: sorted(d.items(), key=lambda kv: -max(lo - kv[1], kv[1] - hi))
    plain = [c for c in plan() if not c.grid_stride and not c.hints]
    groups = {1: {c.name: x(c.name) for c in plain if c.vectors <= 2},
              2: {c.name: x(c.name) for c in plain if c.vectors >= 4},
              3: {c.name: x(c.name + "+hints") - x(c.name) for c in plain},
              4: {c.name: x(c.name) for c in plan() if c.grid_stride}}
    rows = []
    for number, values in ((n, groups[n]) for n in numbers):
        lo, hi = PREDICTIONS[number]
        extra = {c["name"]: c["x_copy"] for c in record["cells"]
                 if number == 1 and c["x_copy"] <= hi and c["name"] not in values}
        rows.append({"number": number, "lo": lo, "hi": hi, "min": min(values.values()), "max": max(values.values()),
                     "n": len(values), "extra": farthest(extra, lo, hi),
                     "outside": farthest({n: v for n, v in values.items() if not lo <= v <= hi}, lo, hi)})
    knee = an.gridstride_knee(record)
    read = knee["roof_read_bytes_per_s"]
    return show("launch/graded.md.j2", rows=rows, knee=knee, needed=NEEDED_KIB, read_tbs=read / 1e12,
                kib=read * ASSUMED_LATENCY_S / record["provenance"]["sm_count"] / 1024)


def block_size(record: dict, others: dict) -> Text:
    """Step 2's kernel in one-shot grids at every block size beside the grid-stride loop with the SM full, and the
    share of the loop's loss over step 2's cell that block size alone reproduces (block sizes above step 2's)."""
    base, gs = an.cell(record, STEP2_CELL), {t: an.full_sm_cell(record, t) for t in THREADS}
    share = {t: (an.cell(record, f"{t}x1")["x_copy"] - base["x_copy"]) / (gs[t]["x_copy"] - base["x_copy"])
             if gs[t] and t > base["threads"] and gs[t]["x_copy"] > base["x_copy"] else None for t in THREADS}
    return show("launch/block_size.md.j2", roof=record["roof_ms"], step2=STEP2_CELL, share=share,
                rows=[(t, an.cell(record, f"{t}x1"), gs[t]) for t in THREADS],
                step3_threads=STEP3_THREADS, top_threads=THREADS[-1],
                own=(an.row_of(others.get("study"), "3_grid_stride_one_shot") or {}).get("x_copy"))


def trimmed_table(record: dict, achieved: dict, head: int = 5, tail: int = 4) -> Text:
    """The cells' table less the heatmaps' columns: the ``head`` fastest, the ``tail`` slowest, and the cells the
    notebook names (block sizes, profiled shapes, the slowest no-hints one-shot cell, full-SM grid-stride cells)."""
    df = cells_frame(record, achieved).drop(columns=["ms", "occupancy % (theor.)", "correct"])
    one = [c for c in record["cells"] if not c["grid_stride"] and not c["hints"]]
    named = {*(f"{t}x1" for t in THREADS), *achieved, max(one, key=lambda c: c["x_copy"])["name"],
             *(c["name"] for t in THREADS if (c := an.full_sm_cell(record, t)))}
    shown = df[df.index.isin(set(df.index[:head]) | set(df.index[len(df) - tail:]) | named)]
    return show("launch/cells.md.j2", cells=shown, formats=FORMATS, left_out=len(df) - len(shown))


def knee(record: dict, study: dict | None = None) -> Text:
    """The grid-stride knee (analysis.gridstride_knee); ``study``'s SASS of step 3 shows its loop's loads."""
    sass = (an.row_of(study, "3_grid_stride") or {}).get("sass", {})
    loads = sum(n for op, n in sass.get("loads", {}).items() if op.startswith("LDG.E.128"))
    return show("launch/knee.md.j2", knee=an.gridstride_knee(record), loads=loads)


def slow_cell(record: dict, achieved: dict) -> Text:
    """The slowest no-hints one-shot cell: theoretical and achieved occupancy, a labelled hypothesis (the block
    launch rate), and its block size with more vectors, ranked among the no-hints one-shot cells."""
    one = sorted((c for c in record["cells"] if not c["grid_stride"] and not c["hints"]), key=lambda c: -c["x_copy"])
    slow, sms = one[0], record["provenance"]["sm_count"]
    blocks = {c["name"]: -(-record["problem"]["numel"] // (4 * c["threads"] * c["vectors"])) / sms for c in one}
    pct, entry = achieved.get(slow["name"], (None, None))
    flat = [lv["threads_per_sm"] for lv in an.gridstride_knee(record)["levels"] if lv["flat"]]
    return show("launch/slow_cell.md.j2", slow=slow, n=len(one), pct=pct, entry=entry,
                knee_threads=(flat or [0])[0],
                blocks=blocks[slow["name"]], most=max(v for k, v in blocks.items() if k != slow["name"]),
                fewer=[(c["name"], c["x_copy"], one.index(c) + 1) for c in reversed(one)
                       if c["threads"] == slow["threads"] and c is not slow])
