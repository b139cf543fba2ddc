"""The study's findings, each written once, as text generated from the records.

The summary notebook (06) prints all of them (``readme_lines``); each step notebook prints its own. The
README's first screen states each in one line (``elu_study.jobs.report.front``) and links the notebook.
A finding states a direction only where the record bears it out: ``claim`` passes a statement
through when its condition holds in the record and flags it when the record contradicts it, so a
new run can never silently keep an old conclusion.
"""

from __future__ import annotations

from elu_study.core.record import load, noise, row


def claim(holds: bool, text: str) -> str:
    return text if holds else f"**NOT SUPPORTED by this record:** {text}"


def _r(record, name):
    return row(record, name)


def _x(record, name) -> float:
    return _r(record, name)["x_copy"]


_noise = noise


def _c(counters, name, key):
    return next(r for r in counters["rows"] if r["name"] == name)[key] if counters else None


def _pct(x: float) -> str:
    return f"{100 * (x - 1):+.1f} %"


def roof(record: dict, counters: dict | None = None) -> str:
    c, e, t = _r(record, "copy_"), _r(record, "F.elu"), _r(record, "torch.compile(F.elu)")
    return (f"**The roof.** `copy_` moves the 12.9 GB in {c['timing']['median_ms']:.3f} ms ({c['tbps']:.2f} TB/s, "
            f"{c['pct_of_peak']:.1f} % of the datasheet's {record['peak_bytes_per_s'] / 1e12:.1f} TB/s); "
            f"`F.elu` takes {e['x_copy']:.3f}x and `torch.compile` {t['x_copy']:.3f}x that time: PyTorch is already at the roof.")


def bytes_in_flight(record: dict, counters: dict | None = None) -> str:
    n, f = _x(record, "1_naive"), _x(record, "2_float4")
    text = (f"**Wider loads.** One 4-byte load per thread (step 1) takes {n:.2f}x copy_'s time; one 16-byte vector "
            f"per thread (step 2) {f:.3f}x.")
    if counters:
        text += (f" Nsight Compute: the same DRAM bytes, at {_c(counters, '1_naive', 'dram_pct_of_peak'):.1f} % against "
                 f"{_c(counters, '2_float4', 'dram_pct_of_peak'):.1f} % of peak DRAM throughput. More changed than the "
                 f"bytes per thread: instructions per element fall "
                 f"{_c(counters, '1_naive', 'thread_instructions_per_element'):.1f} -> "
                 f"{_c(counters, '2_float4', 'thread_instructions_per_element'):.1f}, achieved occupancy rises "
                 f"{_c(counters, '1_naive', 'achieved_occupancy_pct'):.1f} -> "
                 f"{_c(counters, '2_float4', 'achieved_occupancy_pct'):.1f} %. That the bytes in flight are the cause "
                 f"is a **hypothesis**: no build isolates them.")
    return claim(n > 1.3 and f < 1.02, text)


def one_shot_threads(gpu: str, threads=(256, 512, 1024)) -> dict[int, float]:
    """x copy_ of step 2's kernel in one-shot grids (one float4 per thread, no hints) at these block sizes, from
    the launch-shape sweep's record (``python -m elu_study launch``); {} where that GPU has none."""
    launch = load(gpu, "launch", required=False)
    cells = {c["threads"]: c["x_copy"] for c in (launch or {}).get("cells", [])
             if not c["grid_stride"] and not c["hints"] and c["vectors"] == 1}
    return {t: cells[t] for t in threads if t in cells}


def grid_stride_holds(record: dict) -> bool:
    """Whether the record bears out the grid-stride finding: two whole waves lose against step 2, and removing
    the unroll, halving the block or dropping the loop each leave that loss in place (within the noise)."""
    two, f = _x(record, "3_grid_stride_2_waves"), _x(record, "2_float4")
    noise = _noise(record, "3_grid_stride_2_waves", "3_grid_stride_one_shot", "3_grid_stride_2_waves_unroll_1",
                   "3_grid_stride_2_waves_256t", "2_float4")
    same = [abs(_x(record, n) - two) <= max(3 * noise, 0.005) for n in
            ("3_grid_stride_2_waves_unroll_1", "3_grid_stride_2_waves_256t", "3_grid_stride_one_shot")]
    return two > f + 3 * noise and all(same)


def grid_stride(record: dict, counters: dict | None = None) -> str:
    seed, two, one_shot = _x(record, "3_grid_stride"), _x(record, "3_grid_stride_2_waves"), _x(record, "3_grid_stride_one_shot")
    unroll, t256, f = _x(record, "3_grid_stride_2_waves_unroll_1"), _x(record, "3_grid_stride_2_waves_256t"), _x(record, "2_float4")
    text = (f"**The grid-stride loss.** The seed's launch takes {seed:.3f}x copy_'s time and two whole waves {two:.3f}x, "
            f"against step 2's {f:.3f}x. One-change ablations leave the loss in place: no unrolling "
            f"({unroll:.3f}x), 256-thread blocks ({t256:.3f}x), no loop at all ({one_shot:.3f}x). Longer grids recover "
            f"part of it: {_x(record, '3_grid_stride_1_waves'):.3f}x at 1 wave, "
            f"{_x(record, '3_grid_stride_512_waves'):.3f}x at 512 waves. So the partial wave, the loop and the unroll "
            f"are each ruled out as the whole cause, not as part of it (notebook 03).")
    sweep = one_shot_threads(record["provenance"]["gpu"])
    if sweep:
        text += (" The block size is not ruled out: step 2's kernel in one-shot grids takes "
                 + ", ".join(f"{v:.3f}x" for v in sweep.values()) + " copy_'s time at "
                 + ", ".join(str(t) for t in sweep) + " threads per block (notebook 10's sweep).")
    if counters:
        text += (f" The bytes are the same (DRAM read {_c(counters, '3_grid_stride', 'dram_read_bytes') / 1e9:.2f} GB "
                 f"vs {_c(counters, '2_float4', 'dram_read_bytes') / 1e9:.2f} GB). DRAM is busy "
                 f"{_c(counters, '3_grid_stride', 'dram_active_pct'):.1f} % of the time in the seed's launch "
                 f"({_c(counters, '3_grid_stride_2_waves', 'dram_active_pct'):.1f} % at two waves) against "
                 f"{_c(counters, '2_float4', 'dram_active_pct'):.1f} %. What makes the DRAM idle more stays unexplained.")
    return claim(grid_stride_holds(record), text)


def fast_math(record: dict, counters: dict | None = None) -> str:
    f, fm = _x(record, "2_float4"), _x(record, "4_fast_math")
    noise = _noise(record, "2_float4", "4_fast_math")
    text = (f"**Fast math** buys {100 * (f - fm):.1f} % of copy_'s time ({f:.3f}x -> {fm:.3f}x; noise {100 * noise:.2f} %)")
    if counters:
        text += (f", though it halves the instructions ({_c(counters, '2_float4', 'thread_instructions_per_element'):.1f} -> "
                 f"{_c(counters, '4_fast_math', 'thread_instructions_per_element'):.1f} per element): the time is the bytes'.")
    return claim(abs(f - fm) < 0.01, text)


def step5(record: dict, counters: dict | None = None) -> str:
    base = _x(record, "5_as_step_2")
    parts = {n: _x(record, n) for n in ("2+128_threads", "2+2_vectors", "2+4_vectors", "2+hints", "2+expm1f")}
    s5 = _x(record, "5_streaming")
    each = ", ".join(f"`{n}` {_pct(v / base)}" for n, v in parts.items())
    text = (f"**Step 5, one change at a time** (from step 2's choices in step 5's file, {base:.3f}x): {each}. "
            f"Step 5 with all four: {s5:.3f}x. Only 128-thread blocks help; more vectors per thread and evict-first hints cost.")
    return claim(step5_holds(record), text)


def step5_holds(record: dict) -> bool:
    """Whether of step 5's changes, taken one at a time from step 2, 128-thread blocks help and more vectors per
    thread and evict-first hints cost."""
    base = _x(record, "5_as_step_2")
    return (_x(record, "2+128_threads") < base and _x(record, "2+2_vectors") > base
            and _x(record, "2+hints") > base)


def accuracy_cost(record: dict, counters: dict | None = None) -> str:
    f, fe = _x(record, "2_float4"), _x(record, "2+expm1f")
    s5, s5e, el = _x(record, "5_streaming"), _x(record, "5_streaming_expf"), _x(record, "F.elu")
    noise = _noise(record, "2_float4", "2+expm1f", "5_streaming", "5_streaming_expf")
    text = (f"**Is accuracy free?** Not in every launch: `expm1f` costs {_pct(fe / f)} in step 2's launch "
            f"({f:.3f}x -> {fe:.3f}x), but {_pct(s5 / s5e)} in step 5's ({s5e:.3f}x -> {s5:.3f}x), and `F.elu`, which uses "
            f"it too, runs at {el:.3f}x. Noise: {100 * noise:.2f} % of copy_'s time.")
    if counters:
        text += (f" Nsight Compute: `2+expm1f` issues {_c(counters, '2+expm1f', 'thread_instructions_per_element'):.1f} "
                 f"instructions per element against {_c(counters, '2_float4', 'thread_instructions_per_element'):.1f}, and its "
                 f"DRAM throughput drops to {_c(counters, '2+expm1f', 'dram_pct_of_peak'):.1f} % of peak.")
    return claim(fe > f + 3 * noise and abs(s5 - s5e) <= 3 * noise + 0.003, text)


def tails(record: dict, counters: dict | None = None) -> str:
    rows = record["rows"]
    ratio_of = {r["name"]: r["timing"]["p90_ms"] / r["timing"]["median_ms"] for r in rows}
    worst = max(ratio_of, key=ratio_of.get)
    nvml = {r["name"]: [s for s in r["timing"].get("nvml", []) if s.get("samples")] for r in rows}
    clocks = [s["sm_clock_mhz"]["min"] for ss in nvml.values() for s in ss]
    capped = sorted(n for n, ss in nvml.items() if any("SwPowerCap" in s.get("clock_event_reasons", {}) for s in ss))
    power = max((s["power_w"]["max"] for ss in nvml.values() for s in ss), default=float("nan"))
    tailed = sorted((n for n, v in ratio_of.items() if v >= 1.01), key=lambda n: -ratio_of[n])

    def clock(n):
        low = min((s["sm_clock_mhz"]["min"] for s in nvml[n]), default=float("nan"))
        return f"SM clock down to {low:.0f} MHz" + (", SwPowerCap seen" if n in capped else "")

    text = (f"**Tails.** With every entry timed in {record['method']['rounds']} interleaved rounds, the worst p90/median "
            f"is {ratio_of[worst]:.3f} (`{worst}`); {len(rows) - len(tailed)} of {len(rows)} entries stay below 1.01.")
    if tailed:
        text += " Above it: " + "; ".join(f"`{n}` {ratio_of[n]:.3f} ({clock(n)})" for n in tailed) + "."
    text += (f" NVML during the timings: SM clock never below {min(clocks):.0f} MHz, power up to {power:.0f} W; the "
             f"power cap (SwPowerCap) held the clock down briefly during {len(capped)} entries.")
    return text


def across_records(gpu: str) -> dict[str, list[float]]:
    """copy_'s median (ms) and F.elu's x copy_ in every committed record that times the full shape: the study,
    step 6's (its run and its fresh processes), the launch sweep and the model."""
    out = {"copy_": [], "F.elu": []}
    study, beyond = load(gpu, required=False), load(gpu, "beyond", required=False)
    for rec in (study, beyond):
        if rec:
            out["copy_"].append(_r(rec, "copy_")["timing"]["median_ms"])
            out["F.elu"].append(_x(rec, "F.elu"))
    if beyond:
        runs = beyond.get("processes", []) + beyond.get("confirmation", {}).get("processes", [])
        out["copy_"] += [p["copy_"]["median_ms"] for p in runs]
    launch = load(gpu, "launch", required=False)
    if launch:
        out["copy_"].append(launch["references"]["copy_"]["timing"]["median_ms"])
    t = (load(gpu, "model", required=False) or {}).get("timings", {})
    if "copy_" in t:
        out["copy_"].append(t["copy_"]["median_ms"])
        if "F.elu" in t:
            out["F.elu"].append(t["F.elu"]["median_ms"] / t["copy_"]["median_ms"])
    return out


# The sub-1 % comparisons the README's first screen makes: (job, entry), each against copy_ in its own run.
CLOSE_CALLS = (("study", "F.elu"), ("study", "torch.compile(F.elu)"), ("study", "2_float4"), ("study", "4_fast_math"),
               ("beyond", "6_beyond_copy"), ("beyond", "6_load_evict_last"))


def noise_ranges(gpu: str) -> tuple[list[float], dict[str, list[float]]]:
    """The round-to-round spread (% of copy_'s time) of each close call in its own run, and ``across_records``."""
    records = {job: load(gpu, job, required=False) for job in {job for job, _ in CLOSE_CALLS}}
    within = [100 * noise(records[job], name, "copy_") for job, name in CLOSE_CALLS
              if records.get(job) and name in {r["name"] for r in records[job]["rows"]}]
    return within, across_records(gpu)


def spread(record: dict, counters: dict | None = None) -> str:
    within, across = noise_ranges(record["provenance"]["gpu"])
    names = ", ".join(f"`{name}`" for _, name in CLOSE_CALLS)
    return (f"**Noise.** In a run, the round medians of {names} spread {min(within):.2f}-{max(within):.2f} % of "
            f"copy_'s time. Across the committed records (study, step 6 and its fresh processes, launch sweep, model) "
            f"`copy_` took {min(across['copy_']):.3f}-{max(across['copy_']):.3f} ms and `F.elu` "
            f"{min(across['F.elu']):.3f}-{max(across['F.elu']):.3f}x.")


ALL = (roof, bytes_in_flight, grid_stride, fast_math, step5, accuracy_cost, tails, spread)


def readme_lines(record: dict, counters: dict | None) -> list[str]:
    return [f"- {f(record, counters)}" for f in ALL]
