"""Notebook 08's prose and tables that read step 6's record (results/<gpu>-beyond.json) and nothing else:
which attempts beat the defaults, the 16-bit prediction's premise against the counters, the attempts' launches.
The beyond job's own text (its README block, verdicts and findings) stays in ``jobs/beyond``; this module only
reads the record, as a job reads another job's data.
"""

from __future__ import annotations


import pandas as pd

from elu_study.core.tables import compact
from elu_study.core.record import noise, row
from elu_study.core.tables import markdown
from elu_study.core.entries import STEP6_DEFAULT
from elu_study.core.ncu import counter_rows, issue_pct
from elu_study.jobs.study.predictions import verdict


def one_change(record: dict, name: str) -> str:
    """The flag by which an attempt differs from its base (``6_base``), as recorded with the run."""
    r = row(record, name)
    base = set(row(record, r["base"])["flags"]) if r.get("base") else set()
    return " ".join(f for f in r["flags"] if f not in base)


def faster_than_step6(record: dict) -> list[dict]:
    """The one-change attempts (from 6_base, or round 2's from the new default) faster than step 6's defaults by
    more than the round-to-round noise, fastest first."""
    bases = ("6_base", STEP6_DEFAULT)
    return sorted((r for r in record["rows"] if r["kind"] == "attempt" and r.get("base") in bases and not r["mode"]
                   and against_step6(record, r["name"]) == "faster"),
                  key=lambda r: r["x_copy"])


def against_step6(record: dict, name: str) -> str:
    """A build against step 6's defaults: faster or slower by more than its round-to-round noise, else within it."""
    margin = row(record, "6_beyond_copy")["x_copy"] - row(record, name)["x_copy"]
    z = noise(record, name, "6_beyond_copy")
    return "faster" if margin > z else "slower" if -margin > z else "within noise"


def beat_defaults(record: dict) -> str:
    """Which attempts beat step 6's defaults, each with the one flag that makes it, and why they stay attempts."""
    step6, faster = row(record, "6_beyond_copy"), faster_than_step6(record)
    if not faster:
        return "No attempt beat step 6's defaults by more than the round-to-round noise."
    listed = ", ".join(f"`{r['name']}` ({r['x_copy']:.3f}x, `{one_change(record, r['name'])}`)" for r in faster)
    confirmed = record.get("confirmation", {}).get("names", [])
    evidence = (f", with the fresh-process runs of {', '.join(f'`{n}`' for n in confirmed)} below as evidence"
                if confirmed else "")
    return (f"Step 6's defaults ({step6['x_copy']:.3f}x) were fixed before this run. {len(faster)} "
            f"attempt{'s' * (len(faster) > 1)} beat them by more than the noise: {listed}.\n\n"
            f"Each is one flag away: `compile_variant(\"6_beyond_copy\", extra_cuda_cflags=[flag])`. Making one the "
            f"default needs a new run of the main study, so that its table and the code agree. That is left for the "
            f"next record{evidence}.")




def issue_premise(record: dict) -> str:
    """The 16-bit prediction's premise ("expm1f already costs a third of the issue slots at float32"), against
    the counters."""
    with_expm1f, with_expf = issue_pct(record, "6_expm1f"), issue_pct(record, "6_beyond_copy")
    if with_expm1f is None or with_expf is None:
        return "No counters were recorded to check the premise."
    return (f"**The premise, against the counters** (ncu, below): at float32, issuing `6_expm1f`'s instructions takes "
            f"{with_expm1f:.0f} % of its run time (the prediction assumed a third), against {with_expf:.0f} % for "
            f"`6_beyond_copy` (`expf - 1`): `expm1f` adds {with_expm1f - with_expf:.0f} points.")


def grid_lines(launches) -> str:
    """One line per grid (launches with the same grid share it): blocks, tiles per block, resident share."""
    grids: dict = {}
    for lau in launches:
        grids.setdefault((lau.blocks, lau.threads, lau.order == 3), []).append(lau)
    lines = []
    for same in grids.values():
        lau = same[0]
        shape = (f"{lau.passes:.1f} tiles each, all resident at once ({lau.blocks / lau.wave_blocks:.0%} of the "
                 f"{lau.wave_blocks:,} block slots)" if lau.order == 3 else
                 f"one tile each, {lau.waves:.1f} waves of {lau.wave_blocks:,}")
        lines.append(f"- {', '.join(f'`{x.name}`' for x in same)}: {lau.blocks:,} blocks of {lau.threads} threads, {shape}")
    return "\n".join(lines)


def sixteen_bit_frame(record: dict, names) -> pd.DataFrame:
    """16-bit rows: time, x float32 copy_, x the 16-bit copy_ (copy_ of the bfloat16 tensor), issue %."""
    roof16 = row(record, "copy_ bfloat16")["timing"]["median_ms"]
    return pd.DataFrame([{"entry": n, "ms": row(record, n)["timing"]["median_ms"], "x copy_": row(record, n)["x_copy"],
                          "x 16-bit copy_": row(record, n)["timing"]["median_ms"] / roof16,
                          "issue % of run (ncu)": issue_pct(record, n)} for n in names]).set_index("entry")




def graded(record: dict, name: str, bounds: tuple[float, float]) -> str:
    """HELD inside the range; HELD (within noise) outside it by no more than the entry's round-to-round noise
    against copy_'s (core.record.noise); else MISSED, faster or slower."""
    x, (lo, hi) = row(record, name)["x_copy"], bounds
    if lo <= x <= hi:
        return "HELD"
    if max(lo - x, x - hi) <= noise(record, name, "copy_"):
        return "HELD (within noise)"
    return verdict(x, bounds)


def grade_table(record: dict, predictions) -> str:
    """Predictions ``(entry, (lo, hi), written)`` beside the recorded median x copy_, its noise and the verdict."""
    notes = list(dict.fromkeys(w for _, _, w in predictions))
    rows = [{"entry": name, "predicted x copy_": f"{lo:.3f} to {hi:.3f}", "measured": f"{row(record, name)['x_copy']:.4f}",
             "noise": f"{100 * noise(record, name, 'copy_'):.2f} %", "verdict": graded(record, name, (lo, hi)),
             **({"written": f"[{notes.index(w) + 1}]"} if len(notes) > 1 else {})}
            for name, (lo, hi), w in predictions]
    written = "; ".join(f"[{i + 1}] {n}" for i, n in enumerate(notes)) if len(notes) > 1 else notes[0]
    return (compact(markdown(pd.DataFrame(rows).set_index("entry"))) + f"\n\nWritten {written}. Measured: the median of the "
            "run in the Data source line. Noise: the entry's round-to-round noise against `copy_`'s time. A median "
            "outside the range by no more than that noise is HELD (within noise).")


# Round 2 (notebook 08): one change each from the new default, predicted before the run that recorded them.
ROUND2_WRITTEN = "round 2, before the run that recorded it (commit c8d11f5)"
ROUND2_PREDICTIONS = (
    ("6_evict_last_2_vectors", (0.975, 0.990)),
    ("6_evict_last_64_threads", (0.975, 0.995)),
    ("6_evict_last_store_cs", (0.975, 0.990)),
    ("6_evict_last_reversed", (0.975, 0.990)),
)
AIM_0_97 = 0.97  # round 2's further aim for float32 (step 6's own is 0.98x), toward the two-stream floor


def round2_names(record: dict) -> list[str]:
    """Step 6, the attempt that holds its knobs as flags, and round 2's builds (one knob away from it)."""
    return ["6_beyond_copy", STEP6_DEFAULT, *(r["name"] for r in record["rows"] if r.get("base") == STEP6_DEFAULT)]


def round2_table(record: dict) -> str:
    """Round 2's builds beside the default they change, fastest first: x copy_, its noise, whether it beats the
    default by more than the noise, and the DRAM counters that say how hard each drove the memory."""
    counters = counter_rows(record)
    rows = []
    for name in round2_names(record):  # compared with step 6 itself (STEP6_DEFAULT's knobs), as beat_defaults does
        r, c = row(record, name), counters.get(name, {})
        change = {"6_beyond_copy": "(step 6)", STEP6_DEFAULT: "(step 6's knobs, as flags)"}.get(name)
        rows.append({"entry": name, "change": change or one_change(record, name),
                     "x copy_": r["x_copy"], "noise %": 100 * noise(record, name, "copy_"),
                     "vs step 6": "" if name == "6_beyond_copy" else against_step6(record, name),
                     "DRAM % peak": c.get("dram_pct_of_peak"), "read-active %": c.get("dram_active_read_pct"),
                     "write-active %": c.get("dram_active_write_pct")})
    df = pd.DataFrame(rows).sort_values("x copy_").set_index("entry")
    return compact(markdown(df, {"x copy_": "{:.4f}", "noise %": "{:.2f}"}))


def round2_verdict(record: dict) -> str:
    """Whether any build reached the aim (0.97x copy_) in this run, and how far the fastest stayed from it."""
    best = min((row(record, n) for n in round2_names(record)), key=lambda r: r["x_copy"])
    floor = record["stream_floor_ms"] / record["roof_ms"]
    reached = best["x_copy"] <= AIM_0_97
    return (f"Fastest of round 2 and step 6: `{best['name']}` at {best['x_copy']:.3f}x `copy_`. The further aim "
            f"({AIM_0_97:.2f}x) is {'reached' if reached else 'not reached'} in this run; the measured two-stream "
            f"floor is {floor:.3f}x.")
