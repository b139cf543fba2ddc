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
from elu_study.jobs.study.findings import claim, grid_stride_holds, one_shot_threads, step5_holds
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


def verdict(study: dict, beyond: dict) -> str:
    best = fastest(beyond)
    felu = x(study, "F.elu")
    return claim(felu < 1.01 and best["x_copy"] < 1.0, (
        f"**Verdict:** on an {study['provenance']['gpu']}, `F.elu` already runs at the roof ({felu:.3f}x `copy_`'s "
        f"time); the fastest float32 kernel here, step 6's `{best['name']}`, takes {best['x_copy']:.3f}x, above the measured "
        f"floor ({study['stream_floor_ms'] / study['roof_ms']:.3f}x) and the datasheet floor "
        f"({study['floor_ms'] / study['roof_ms']:.3f}x)."))


def roof_line(study: dict) -> str:
    c = record.row(study, "copy_")
    gb = 2 * 4 * study["problem"]["numel"] / 1e9
    return (f"- **Roof** ({nb('00_problem_and_floor')}): `copy_` moves {gb:.1f} GB in {c['timing']['median_ms']:.3f} ms, "
            f"{c['pct_of_peak']:.1f} % of the datasheet's {study['peak_bytes_per_s'] / 1e12:.1f} TB/s. "
            f"`torch.compile(F.elu)` takes {x(study, 'torch.compile(F.elu)'):.3f}x.")


def bytes_line(study: dict, counters: dict | None) -> str:
    naive, float4 = x(study, "1_naive"), x(study, "2_float4")
    text = (f"- **Bytes in flight** ({nb('01_naive')}, {nb('02_float4')}): one 4-byte load per thread takes "
            f"{naive:.3f}x, one 16-byte float4 {float4:.3f}x")
    if counters:
        text += (f": the same DRAM bytes at {ncu(counters, '1_naive', 'dram_pct_of_peak'):.1f} % against "
                 f"{ncu(counters, '2_float4', 'dram_pct_of_peak'):.1f} % of peak throughput")
    text += "."
    return claim(naive > 1.3 and float4 < 1.02, text)


def grid_line(study: dict, counters: dict | None) -> str:
    text = f"- **Grid-stride** ({nb('03_grid_stride')}): the seed's launch takes {x(study, '3_grid_stride'):.3f}x"
    if counters:
        text += (f", DRAM busy {ncu(counters, '3_grid_stride', 'dram_active_pct'):.1f} % of the time against "
                 f"step 2's {ncu(counters, '2_float4', 'dram_active_pct'):.1f} %")
    text += ". Not waves, loop or unroll."
    sweep = one_shot_threads(study["provenance"]["gpu"])
    if sweep:
        text += (" Maybe block size: step 2's kernel in one-shot grids at " + "/".join(map(str, sweep)) + " threads takes "
                 + "/".join(f"{v:.3f}x" for v in sweep.values()) + f" ({nb('10_launch_shapes')}).")
    return claim(grid_stride_holds(study), text)


def hints_line(study: dict, counters: dict | None) -> str:
    float4, fast = x(study, "2_float4"), x(study, "4_fast_math")
    inst = ""
    if counters:
        inst = (f" cuts instructions per element from {ncu(counters, '2_float4', 'thread_instructions_per_element'):.1f} "
                f"to {ncu(counters, '4_fast_math', 'thread_instructions_per_element'):.1f} but")
    return claim(abs(float4 - fast) < 0.01 and step5_holds(study), (
        f"- **Fast math, streaming** ({nb('04_fast_math')}, {nb('05_streaming')}): `__expf`{inst} moves the time "
        f"{100 * abs(float4 - fast):.1f} % ({fast:.3f}x). Of step 5's four changes only 128-thread blocks help."))


def step6_line(beyond: dict) -> str:
    must, aim = goals(beyond)
    runs = [p["6_beyond_copy"]["x_copy"] for p in beyond.get("processes", [])]
    best = fastest(beyond)
    text = (f"- **Step 6 and evict_last** ({nb('08_beyond_copy')}): step 6 (step 2 with 128-thread blocks) takes "
            f"{x(beyond, '6_beyond_copy'):.3f}x, at most {max(runs, default=math.nan):.3f}x in {len(runs)} fresh "
            f"processes: must {'met' if must else 'not met'}, aim {'met' if aim else 'not'}.")
    again = confirmed(beyond).get(best["name"])
    if again:
        commit = beyond["confirmation"]["provenance"].get("commit")
        text += (f" `{best['name']}` takes {best['x_copy']:.3f}x, then {min(again[1]):.3f}-{max(again[1]):.3f}x in "
                 f"{len(again[1])} fresh processes (commit {commit}).")
    return text


def sixteen_line(beyond: dict) -> str:
    b = sixteen_bit(beyond)
    issue = f" (issue takes {b['issue_pct']:.0f} % of its time)" if b["issue_pct"] is not None else ""
    return claim(b["x_copy"] < fastest(beyond)["x_copy"], (
        f"- **16-bit storage** ({nb('08_beyond_copy')}): on bfloat16, step 6 takes {b['x_copy']:.3f}x float32 `copy_`'s "
        f"time, beating every schedule, but {b['x_own_copy']:.2f}x its own 16-bit `copy_`: it is issue-bound{issue}."))


def accuracy_line(acc: dict) -> str:
    alpha = "1.0" if "1.0" in acc["runs"] else next(iter(acc["runs"]))
    run, kinds = acc["runs"][alpha]["formulas"], {f["name"]: f for f in acc["formulas"]}
    minus_one = [n for n in run if kinds[n]["exponential"] in ("expf", "__expf")]
    expm1 = [n for n in run if kinds[n]["exponential"] == "expm1f" and not kinds[n]["flushes_denormals"]]
    worst = max(run[n]["max_ulp"]["negative"]["ulp"] for n in minus_one)
    zeros = max(sum(run[n]["classes"].get(c, {}).get("plus_zero_out", 0) for c in ("-normal", "-denormal"))
                for n in minus_one)
    passes = all(s["tolerance"]["n_fail"] == 0 for s in run.values())
    return (f"- **Accuracy** ({nb('07_accuracy')}, alpha {alpha}): `exp(x) - 1` "
            f"({', '.join(f'`{n}`' for n in minus_one)}) cancels near 0: up to 2^{round(math.log2(worst))} ulp off, "
            f"+0.0 for {zeros:,} negative inputs. `expm1f` ({', '.join(f'`{n}`' for n in expm1)}) stays within "
            f"{max(run[n]['max_ulp']['negative']['ulp'] for n in expm1):.3f} ulp; "
            + ("all pass atol = rtol = 1e-4." if passes else "some FAIL atol = rtol = 1e-4."))


def sizes_line(sizes: dict) -> str:
    ref, small, lb = sizes["regimes"]["reference"], small_sizes(sizes), sizes["regimes"]["launch_bound_max_n"]
    host = {c: host_median_us(sizes, c, small) for c in custom(sizes)}
    h_ref = host_median_us(sizes, ref, small)
    cheap = [v for v in host.values() if v < h_ref]
    dear = ", ".join(f"`{c}` {v:.1f} µs" for c, v in host.items() if v >= h_ref)
    text = (f"- **Sizes and host cost** ({nb('09_sizes')}): up to {fmt_n(lb)} elements "
            f"({fmt_bytes(BYTES_PER_ELEMENT * lb)}) the CPU paces a call: `{ref}` costs {h_ref:.1f} µs of host time")
    if cheap:
        text += f", the custom kernels {min(cheap):.1f}-{max(cheap):.1f} µs" + (f" ({dear})" if dear else "")
    return text + "."


def launch_line(launch: dict) -> str:
    best, roof = launch["best"], launch["roof_ms"]
    one = {(c["threads"], c["vectors"], c["hints"]): c for c in launch["cells"] if not c["grid_stride"]}
    pairs = [(c, one[(t, v, True)]) for (t, v, h), c in one.items() if not h and (t, v, True) in one]
    slower = sum(d["x_copy"] - c["x_copy"] > max(c["noise_ms"], d["noise_ms"]) / roof for c, d in pairs)
    loops = [c["x_copy"] for c in launch["cells"] if c["grid_stride"]]
    return (f"- **Launch shapes** ({nb('10_launch_shapes')}, [heatmap](results/{record.slug(launch['provenance']['gpu'])}"
            f"-launch.png)): of {len(launch['cells'])} shapes of step 2's kernel, `{best['name']}` (threads x float4s) "
            f"is fastest at {best['x_copy']:.3f}x, ahead of `{best['runner_up']}` by {best['margin_over_noise']:.0f} "
            f"times the noise. Evict-first hints slow {slower} of {len(pairs)} one-shot shapes; grid-stride loops "
            f"take {min(loops):.3f}x or more.")


def model_line(model: dict) -> str | None:
    """The op in a model, read defensively (older model records lack the drop-in's fields): forward, backward,
    the fusion the opaque op loses and the drop-in keeps, and the host's cost per call."""
    t = model.get("timings", {})
    ms = lambda name: t.get(name, {}).get("median_ms")  # noqa: E731
    v = (model.get("variants") or [None])[0]
    parts = [f"{ms(a) / ms(b):.3f}x `{b}` {what}" for a, b, what in
             ((f"op {v}", "F.elu", "forward"), (f"op backward {v}", "aten.elu_backward", "backward")) if ms(a) and ms(b)]
    op, felu, dropin = ms("compiled op*2+1"), ms("compiled F.elu*2+1"), ms("compiled drop-in*2+1")
    if not parts and not (op and felu):
        return None
    text = f"- **In a model** ({nb('11_in_a_model')}): `{v}` takes " + ", ".join(parts) + "."
    if op and felu and dropin:
        text += (f" Compiled, `x*2+1` with the opaque op takes {op / felu:.2f}x `F.elu`'s; the drop-in, `F.elu` "
                 f"while compiling, {dropin / felu:.3f}x.")
    elif op and felu:
        text += claim(op / felu > 1.5, f" Compiled, `op*2+1` takes {op / felu:.2f}x `F.elu*2+1`: Inductor cannot "
                                        "fuse a custom op.")
    if model.get("host"):
        host = model_analysis.host_summary(model)
        text += (f" Host cost per call: {host['after_x_felu']:.2f}x `F.elu`'s (through the op's dispatch "
                 f"{host['before_x_felu']:.2f}x).")
    return text


def step7_line(sixteen: dict) -> str:
    """Step 7: 16-bit storage against its own copy_, and whether it stays bit for bit F.elu."""
    checks = sixteen["exhaustive"]
    parts = [f"{sixteen_analysis.x_own_copy(sixteen, f'7_sixteen_bits {d}')[0]:.3f}x on {d}" for d in ("bfloat16", "float16")]
    exact = all(c["mismatches"] == 0 for name, c in checks.items() if name.startswith("7_sixteen_bits"))
    n_alphas = max(c["alphas"] for c in checks.values())
    return (f"- **16 bits at their own roof** ({nb('12_sixteen_bits')}): step 7 takes " + " and ".join(parts)
            + " its own `copy_`'s time, " + ("bit for bit `F.elu` on all 65,536 inputs at " if exact else
                                               "NOT bit for bit `F.elu` at some of ")
            + f"{n_alphas} alphas. Issue-bound still: the must (1.05x) is not met.")


def across_records(gpu: str) -> dict[str, list[float]]:
    """copy_'s median (ms) and F.elu's x copy_ in every committed record that times the full shape: the study,
    step 6's (its run and its fresh processes), the launch sweep and the model."""
    out = {"copy_": [], "F.elu": []}
    study, beyond = record.load(gpu, required=False), record.load(gpu, "beyond", required=False)
    for rec in (study, beyond):
        if rec:
            out["copy_"].append(record.row(rec, "copy_")["timing"]["median_ms"])
            out["F.elu"].append(x(rec, "F.elu"))
    if beyond:
        runs = beyond.get("processes", []) + beyond.get("confirmation", {}).get("processes", [])
        out["copy_"] += [p["copy_"]["median_ms"] for p in runs]
    launch = record.load(gpu, "launch", required=False)
    if launch:
        out["copy_"].append(launch["references"]["copy_"]["timing"]["median_ms"])
    t = (record.load(gpu, "model", required=False) or {}).get("timings", {})
    if "copy_" in t:
        out["copy_"].append(t["copy_"]["median_ms"])
        if "F.elu" in t:
            out["F.elu"].append(t["F.elu"]["median_ms"] / t["copy_"]["median_ms"])
    return out


# The sub-1 % comparisons this screen makes: (job, entry), each against copy_ in its own run.
CLOSE_CALLS = (("study", "F.elu"), ("study", "torch.compile(F.elu)"), ("study", "2_float4"), ("study", "4_fast_math"),
               ("beyond", "6_beyond_copy"), ("beyond", "6_load_evict_last"))


def noise_line(gpu: str, records: dict) -> str:
    within = [100 * record.noise(records[job], name, "copy_") for job, name in CLOSE_CALLS
              if records.get(job) and name in {r["name"] for r in records[job]["rows"]}]
    spread = across_records(gpu)
    return (f"- **Noise** ({nb('06_summary')}): in a run, round medians of the builds compared here spread "
            f"{min(within):.2f}-{max(within):.2f} % of `copy_`'s time. Across the committed records `copy_` took "
            f"{min(spread['copy_']):.3f}-{max(spread['copy_']):.3f} ms, `F.elu` "
            f"{min(spread['F.elu']):.3f}-{max(spread['F.elu']):.3f}x.")


def glossary(study: dict) -> list[str]:
    blocks = wave_blocks(study)
    seed, wave = blocks["3_grid_stride"], blocks["3_grid_stride_1_waves"]
    return [
        "**Words.**",
        f"- *seed*: the task's starting kernel, step 3's grid-stride loop over {seed} blocks.",
        f"- *waves*: a wave is as many blocks as all SMs hold at once ({wave} here); the seed's grid is {seed / wave:.2f} waves.",
        "- *one-shot*: one thread per float4 and no loop, as in step 2.",
        f"- *must / aim*: step 6's goals: at most {MUST:.2f}x `copy_` in every process, beyond the noise / at most "
        f"{AIM:.2f}x.",
        "- *roof / floor*: `copy_`'s time / the datasheet's bytes over bandwidth, and `read_only` + `write_only` "
        "measured apart.",
    ]


def block(gpu: str = record.REFERENCE_GPU) -> str:
    """The README's first screen for a GPU's records: the verdict, the figure, the findings and the words."""
    jobs = ("study", "ncu", "beyond", "accuracy", "sizes", "launch", "model", "sixteen")
    recs = {job: record.load(gpu, job, required=False) for job in jobs}
    study, beyond, counters = recs["study"], recs["beyond"], recs["ncu"]
    figure = record.figure_path(study["provenance"]["gpu"], FRONT_FIGURE)
    lines = [verdict(study, beyond) if beyond else "", "",
             f"![Every step, peer and baseline against copy_, fastest first]({record.readme_link(figure)})", "",
             roof_line(study), bytes_line(study, counters), grid_line(study, counters), hints_line(study, counters)]
    if beyond:
        lines += [step6_line(beyond), sixteen_line(beyond)]
    if recs["sixteen"]:
        lines.append(step7_line(recs["sixteen"]))
    makers = (("accuracy", accuracy_line), ("sizes", sizes_line), ("launch", launch_line), ("model", model_line))
    lines += [make(recs[job]) for job, make in makers if recs[job]]
    lines += [noise_line(gpu, recs), "", *glossary(study)]
    return "\n".join(line for line in lines if line is not None)
