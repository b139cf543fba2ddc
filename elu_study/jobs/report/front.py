"""The README's first screen, generated from the committed records: the verdict, the x copy_ figure, one line
per finding with the notebook that tells it, the noise, and the words the study uses.

Every number is read from a record (``core.record.load``) or computed by the job that owns it; a line whose
record is missing is left out. A line that states a direction passes through ``findings.claim``, so a new
record that contradicts it is flagged instead of repeated. Each line is one idea, with the notebook that gives
its evidence; the notebooks keep the detail.
"""

from __future__ import annotations

import math

from elu_study.core import record
from elu_study.jobs.model import analysis as model_analysis
from elu_study.jobs.sixteen import analysis as sixteen_analysis
from elu_study.jobs.beyond.analysis import AIM, MUST, confirmed, float32_rows, goals, sixteen_bit
from elu_study.jobs.sizes.analysis import custom, host_median_us, small_sizes
from elu_study.jobs.sizes.plan import BYTES_PER_ELEMENT, fmt_bytes, fmt_n
from elu_study.jobs.study.findings import claim, grid_stride_holds, noise_ranges, one_shot_threads, step5_holds
from elu_study.jobs.study.report import FRONT_FIGURE, wave_blocks

BLOCK = "front"


def nb(stem: str) -> str:
    """A link to a notebook, named by its file."""
    return f"[{stem}](notebooks/{stem}.ipynb)"


def x(rec: dict, name: str) -> float:
    return record.row(rec, name)["x_copy"]


def ncu(counters: dict | None, name: str, key: str) -> float | None:
    return next((r.get(key) for r in (counters or {}).get("rows", []) if r["name"] == name), None)


def fastest(beyond: dict) -> dict:
    """The fastest float32 build of step 6's record (a step or an attempt)."""
    return min((r for r in float32_rows(beyond) if r["kind"] in ("attempt", "step")), key=lambda r: r["x_copy"])


def formula_of(beyond: dict, name: str) -> str:
    """A step 6 build's float32 formula from its flags: kernels/6_beyond_copy.cu computes expf(x) - 1 unless
    built with -DELU6_OP=Expm1f."""
    return "expm1f(x)" if any(f == "OP=Expm1f" for f in record.row(beyond, name).get("flags", [])) else "expf(x) - 1"


def verdict(study: dict) -> str:
    """F.elu against the roof, and the fastest float32 step against it and the two floors: one record, the main."""
    best = min((r for r in study["rows"] if r["kind"] == "step"), key=lambda r: r["x_copy"])
    felu = x(study, "F.elu")
    return claim(felu < 1.01 and best["x_copy"] < 1.0, (
        f"**Verdict:** on an {study['provenance']['gpu']}, `F.elu` runs at the roof ({felu:.3f}x `copy_`'s "
        f"time); the fastest float32 kernel, `{best['name']}`, takes {best['x_copy']:.3f}x, above the measured "
        f"floor ({study['stream_floor_ms'] / study['roof_ms']:.3f}x) and the datasheet's "
        f"({study['floor_ms'] / study['roof_ms']:.3f}x)."))


def roof_line(study: dict) -> str:
    c = record.row(study, "copy_")
    gb = 2 * 4 * study["problem"]["numel"] / 1e9
    return (f"- **Roof** ({nb('00_problem_and_floor')}): `copy_` moves {gb:.1f} GB in {c['timing']['median_ms']:.3f} ms, "
            f"{c['pct_of_peak']:.1f} % of the datasheet's {study['peak_bytes_per_s'] / 1e12:.1f} TB/s. "
            f"`torch.compile(F.elu)` takes {x(study, 'torch.compile(F.elu)'):.3f}x.")


def bytes_line(study: dict, counters: dict | None) -> str:
    naive, float4 = x(study, "1_naive"), x(study, "2_float4")
    text = (f"- **float4** ({nb('01_naive')}, {nb('02_float4')}): one 4-byte load per thread takes "
            f"{naive:.3f}x, one float4 {float4:.3f}x")
    if counters:
        c = {n: [ncu(counters, n, k) for k in ("dram_pct_of_peak", "thread_instructions_per_element",
                                              "achieved_occupancy_pct")] for n in ("1_naive", "2_float4")}
        text += (f": {c['1_naive'][0]:.1f} % against {c['2_float4'][0]:.1f} % of peak DRAM throughput. Instructions "
                 f"per element fall {c['1_naive'][1]:.1f} to {c['2_float4'][1]:.1f}, occupancy rises "
                 f"{c['1_naive'][2]:.1f} to {c['2_float4'][2]:.1f} %: more bytes in flight is a **hypothesis**")
    text += "."
    return claim(naive > 1.3 and float4 < 1.02, text)


def grid_line(study: dict, counters: dict | None) -> str:
    text = f"- **Grid-stride** ({nb('03_grid_stride')}): the seed's launch takes {x(study, '3_grid_stride'):.3f}x"
    if counters:
        text += (f", DRAM busy {ncu(counters, '3_grid_stride', 'dram_active_pct'):.1f} % against "
                 f"step 2's {ncu(counters, '2_float4', 'dram_active_pct'):.1f} %")
    one, many = x(study, "3_grid_stride_1_waves"), x(study, "3_grid_stride_512_waves")
    text += f". Longer grids recover part: {one:.3f}x at 1 wave, {many:.3f}x at 512. No one change removes it all"
    sweep = one_shot_threads(study["provenance"]["gpu"])
    if sweep:
        text += ("; block size may (one-shot step 2 at " + "/".join(map(str, sweep)) + " threads: "
                 + "/".join(f"{v:.3f}x" for v in sweep.values()) + f", {nb('10_launch_shapes')})")
    text += "."
    return claim(grid_stride_holds(study) and many < one, text)


def hints_line(study: dict, counters: dict | None) -> str:
    float4, fast = x(study, "2_float4"), x(study, "4_fast_math")
    inst = ""
    if counters:
        inst = (f" cuts instructions per element {ncu(counters, '2_float4', 'thread_instructions_per_element'):.1f} "
                f"to {ncu(counters, '4_fast_math', 'thread_instructions_per_element'):.1f} but")
    return claim(abs(float4 - fast) < 0.01 and step5_holds(study), (
        f"- **Fast math, streaming** ({nb('04_fast_math')}, {nb('05_streaming')}): `__expf`{inst} moves the time "
        f"{100 * abs(float4 - fast):.1f} % ({fast:.3f}x). Of step 5's four changes only 128-thread blocks help."))


def step6_line(beyond: dict) -> str:
    must, aim = goals(beyond)
    runs = [p["6_beyond_copy"]["x_copy"] for p in beyond.get("processes", [])]
    best = fastest(beyond)
    text = (f"- **Step 6** ({nb('08_beyond_copy')}): step 2 with 128-thread blocks and `evict_last` loads takes "
            f"{x(beyond, '6_beyond_copy'):.3f}x in its own run, at most {max(runs, default=math.nan):.3f}x in {len(runs)} fresh "
            f"processes: must {'met' if must else 'not met'}, aim {'met' if aim else 'not'}.")
    again = confirmed(beyond).get(best["name"])
    if again:
        text += (f" `{best['name']}` takes {best['x_copy']:.3f}x, {min(again[1]):.3f}-{max(again[1]):.3f}x in "
                 f"{len(again[1])} more.")
    return text


def sixteen_line(beyond: dict) -> str:
    b = sixteen_bit(beyond)
    return claim(b["x_copy"] < fastest(beyond)["x_copy"], (
        f"- **16-bit storage** ({nb('08_beyond_copy')}): on bfloat16 step 6 takes {b['x_copy']:.3f}x float32 `copy_`'s "
        f"time, but {b['x_own_copy']:.2f}x its own 16-bit `copy_`."))


def accuracy_line(acc: dict, best: str | None = None, formula: str = "") -> str:
    """``best``: the verdict's kernel, named where the every-input record leaves it out."""
    alpha = "1.0" if "1.0" in acc["runs"] else next(iter(acc["runs"]))
    run, kinds = acc["runs"][alpha]["formulas"], {f["name"]: f for f in acc["formulas"]}
    minus_one = [n for n in run if kinds[n]["exponential"] in ("expf", "__expf")]
    expm1 = [n for n in run if kinds[n]["exponential"] == "expm1f" and not kinds[n]["flushes_denormals"]]
    worst = max(run[n]["max_ulp"]["negative"]["ulp"] for n in minus_one)
    zeros = max(sum(run[n]["classes"].get(c, {}).get("plus_zero_out", 0) for c in ("-normal", "-denormal"))
                for n in minus_one)
    passes = all(s["tolerance"]["n_fail"] == 0 for s in run.values())
    unchecked = f" Not in this record: `{best}` (`{formula}`)." if best and best not in run else ""
    return (f"- **Accuracy** ({nb('07_accuracy')}, alpha {alpha}): `exp(x) - 1` "
            f"({', '.join(f'`{n}`' for n in minus_one)}) cancels near 0: up to 2^{round(math.log2(worst))} ulp off, "
            f"+0.0 for {zeros:,} negative inputs. `expm1f` ({', '.join(f'`{n}`' for n in expm1)}) stays within "
            f"{max(run[n]['max_ulp']['negative']['ulp'] for n in expm1):.3f} ulp; "
            + ("all pass atol = rtol = 1e-4." if passes else "some FAIL atol = rtol = 1e-4.") + unchecked)


def sizes_line(sizes: dict) -> str:
    ref, small, lb = sizes["regimes"]["reference"], small_sizes(sizes), sizes["regimes"]["launch_bound_max_n"]
    host = {c: host_median_us(sizes, c, small) for c in custom(sizes)}
    h_ref = host_median_us(sizes, ref, small)
    cheap = [v for v in host.values() if v < h_ref]
    dear = ", ".join(f"`{c}` {v:.1f} µs" for c, v in host.items() if v >= h_ref)
    text = (f"- **Sizes** ({nb('09_sizes')}): up to {fmt_n(lb)} elements ({fmt_bytes(BYTES_PER_ELEMENT * lb)}) the "
            f"CPU paces a call: `{ref}`, which allocates, costs {h_ref:.1f} µs of host time")
    if cheap:
        text += (f"; the custom kernels, given `out=`, {min(cheap):.1f}-{max(cheap):.1f} µs"
                 + (f" ({dear})" if dear else ""))
    return text + "."


def launch_line(launch: dict) -> str:
    best, roof = launch["best"], launch["roof_ms"]
    one = {(c["threads"], c["vectors"], c["hints"]): c for c in launch["cells"] if not c["grid_stride"]}
    pairs = [(c, one[(t, v, True)]) for (t, v, h), c in one.items() if not h and (t, v, True) in one]
    slower = sum(d["x_copy"] - c["x_copy"] > max(c["noise_ms"], d["noise_ms"]) / roof for c, d in pairs)
    return (f"- **Launch shapes** ({nb('10_launch_shapes')}, [heatmap](results/{record.slug(launch['provenance']['gpu'])}"
            f"-launch.png)): of {len(launch['cells'])} shapes of step 2's kernel, `{best['name']}` (threads x float4s) "
            f"is fastest at {best['x_copy']:.3f}x, {best['margin_over_noise']:.0f}x the noise ahead of "
            f"`{best['runner_up']}`. Evict-first hints slow {slower} of {len(pairs)} one-shot shapes.")


def model_line(model: dict) -> str | None:
    """The drop-in in use: its host cost per call against nn.ELU's, and whole steps against nn.ELU's."""
    bars = model_analysis.summary(model)
    if bars.empty:
        return None
    counts = " ".join(f"{r.bar[0].upper()}{r.bar[1:]}: {r.met} of {r.of}." for r in bars.itertuples())
    return f"- **In a model** ({nb('11_in_a_model')}): {counts}"


def step7_line(study: dict) -> str | None:
    """Step 7's default (the table) on each 16-bit dtype over its own copy_ in the main record, whether it and its
    backward matched PyTorch on every input, and the backward's worst time over torch.add (three streams); None
    where the record holds no 16-bit rows."""
    dtypes, default = sixteen_analysis.DTYPES, sixteen_analysis.DEFAULT
    rows = {r["name"]: r for r in study["rows"]}
    if not all(f"{default} {d}" in rows for d in dtypes):
        return None
    xs = {d: rows[f"{default} {d}"]["x_roof"] for d in dtypes}
    mine = [r for n, r in rows.items() if n.split()[0] in (default, "7_backward") and r.get("exhaustive")]
    exact = bool(mine) and all(r["exhaustive"]["mismatches"] == 0 for r in mine)
    backward = [rows[f"7_backward {d}"]["x_roof"] for d in dtypes if f"7_backward {d}" in rows]
    text = (f"- **Step 7** ({nb('12_sixteen_bits')}): `expm1f` looked up in shared memory: "
            + " and ".join(f"{v:.3f}x ({d})" for d, v in xs.items()) + " their own `copy_`'s time in the main run, "
            + ("bit for bit" if exact else "NOT bit for bit") + " PyTorch on every input")
    text += f"; the backward within {max(backward):.3f}x `torch.add`'s." if backward else "."
    aim = [d for d, v in xs.items() if v <= sixteen_analysis.AIM]
    return text + f" Aim ({sixteen_analysis.AIM:.2f}x) met on {' and '.join(aim) if aim else 'neither'}."


def noise_line(gpu: str, records: dict) -> str:
    within, spread = noise_ranges(gpu)
    return (f"- **Noise** ({nb('06_summary')}): in a run, round medians of these builds spread "
            f"{min(within):.2f}-{max(within):.2f} % of `copy_`'s time. Across records `copy_` took "
            f"{min(spread['copy_']):.3f}-{max(spread['copy_']):.3f} ms, `F.elu` "
            f"{min(spread['F.elu']):.3f}-{max(spread['F.elu']):.3f}x.")


def glossary(study: dict) -> list[str]:
    blocks = wave_blocks(study)
    seed, wave = blocks["3_grid_stride"], blocks["3_grid_stride_1_waves"]
    return [
        "**Words.**",
        f"- *seed*: the reasoning trace the task starts from; its last kernel loops over {seed} blocks with `__expf` "
        "(step 3: its launch, with `expf`).",
        f"- *waves*: the blocks all SMs hold at once ({wave} here); the seed's grid is {seed / wave:.2f} waves.",
        "- *one-shot*: one thread per float4, no loop (step 2).",
        f"- *must / aim*: step 6's goals, {MUST:.2f}x / {AIM:.2f}x `copy_` (the must in every process, beyond the "
        f"noise); step 7's, {sixteen_analysis.MUST:.2f}x / {sixteen_analysis.AIM:.2f}x its own 16-bit `copy_`.",
        "- *roof / floor*: `copy_`'s time / the datasheet's bytes over bandwidth, and `read_only` + `write_only` "
        "measured apart.",
    ]


def block(gpu: str = record.REFERENCE_GPU) -> str:
    """The README's first screen for a GPU's records: the verdict, the figure, the findings and the words."""
    jobs = ("study", "ncu", "beyond", "accuracy", "sizes", "launch", "model")
    recs = {job: record.load(gpu, job, required=False) for job in jobs}
    study, beyond, counters = recs["study"], recs["beyond"], recs["ncu"]
    figure = record.figure_path(study["provenance"]["gpu"], FRONT_FIGURE)
    lines = [verdict(study), "",
             f"![Every entry against copy_, fastest first]({record.readme_link(figure)})", "",
             roof_line(study), bytes_line(study, counters), grid_line(study, counters), hints_line(study, counters)]
    if beyond:
        lines += [step6_line(beyond), sixteen_line(beyond)]
    lines.append(step7_line(study))
    if recs["accuracy"]:
        best = fastest(beyond)["name"] if beyond else None
        lines.append(accuracy_line(recs["accuracy"], best, formula_of(beyond, best) if best else ""))
    makers = (("sizes", sizes_line), ("launch", launch_line), ("model", model_line))
    lines += [make(recs[job]) for job, make in makers if recs[job]]
    lines += [noise_line(gpu, recs), "", *glossary(study)]
    return "\n".join(line for line in lines if line is not None)
