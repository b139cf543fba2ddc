"""Step 7's measurement (GPU): every bit pattern, SASS, times and counters; and what kernels/7_sixteen_bits.cu
says about a build (read from its source: its knobs, what ``Auto`` picks per dtype)."""

import re
import subprocess
from collections import Counter

import torch
from tqdm import tqdm

from elu_study.core import exhaustive as ex
from elu_study.core import harness
from elu_study.core.build import build_all, built_library, resolve_variant
from elu_study.core.check import INPUT_SCALE
from elu_study.core.entries import ALPHA, ENTRIES, STEP7, builds, is_backward, resolve, sustained_entries
from elu_study.core.hardware import SHAPE, provenance
from elu_study.core.ncu import profile
from elu_study.core.sass import sass_by_function
from elu_study.jobs.sixteen.analysis import DTYPES, SUSTAINED_PREDICTION

VARIANT = "7_sixteen_bits"
PEERS16 = ("triton", "cub_transform")  # checked like step 7, but their exactness is not this study's claim
DTYPE_TOKEN = {"bfloat16": "13__nv_bfloat16", "float16": "6__half"}  # in the 16-bit kernels' mangled names
# The rows ncu reads: these per dtype, and float16's one-change lookup (its instructions per element are its point).
PROFILED = (*(f"{n} {d}" for d in DTYPES
              for n in ("7_sixteen_bits", "7_poly", "7_unchecked", "7_exact", "7_backward")), "7_predicated_lookup float16")
C_TYPES = {"__nv_bfloat16": "bfloat16", "__half": "float16", "float": "float32"}  # in FormulaOf<type, chooser>


def knob(flags, name: str, text: str | None = None) -> str:
    """A build's ``ELU7_<name>``: its -D flag, else the file's #define default."""
    given = next((f.split("=", 1)[1] for f in flags if f.startswith(f"-DELU7_{name}=")), None)
    return given or re.search(rf"#define ELU7_{name} (\w+)", text or resolve_variant(VARIANT).read_text()).group(1)


def formula_of(flags, dtype: str, text: str | None = None) -> str:
    """The fast formula a build uses on a dtype ("expm1f" for none): its FORMULA, resolved by ``FormulaOf``."""
    text = text or resolve_variant(VARIANT).read_text()
    if knob(flags, "CHECK", text) == "0":
        return "expm1f"
    chosen = knob(flags, "FORMULA", text)
    pattern = r"FormulaOf<\s*(\w+)\s*,\s*(\w+)\s*>\s*\{\s*using\s+type\s*=\s*(\w+)\s*;"
    return {(C_TYPES.get(t, t), c): f for t, c, f in re.findall(pattern, text)}.get((dtype, chosen), chosen)


def sass16(entry) -> dict:
    """The static SASS of the 16-bit kernel an entry launches: the backward's, the table's or the vector one's."""
    try:
        functions = sass_by_function(built_library(entry.build()))
    except (OSError, subprocess.SubprocessError) as err:  # no cuobjdump: the record says so
        return {"error": f"{type(err).__name__}: {err}"}
    check = knob(entry.flags, "CHECK")
    key = "backward" if is_backward(entry.name) else formula_of(entry.flags, entry.mode)
    backward = ("backward16_kernel", "Lb0E") if knob(entry.flags, "BWD_TABLE") == "1" else ("backward16_exp_kernel", "")
    which, token = {"backward": backward, "Table": ("table16_kernel", "")}.get(
        key, (f"vector16_kernel (CHECK {check})", f"Li{check}E"))
    names = [n for n in functions if which.split()[0] in n and DTYPE_TOKEN[entry.mode] in n and token in n]
    if len(names) != 1:
        return {"error": f"not one {which}: {names}"}
    ops = functions[names[0]]
    return {"function": names[0], "kernel": which, "instructions": len(ops), "elements_per_thread": 8,
            "opcodes": dict(Counter(op.split(".")[0] for op in ops).most_common())}


def timed_names(dtype: str) -> list[str]:
    """One dtype's batch: float32 copy_ (annotate's roof), the dtype's copy_, F.elu, step 6 and step 7's rows."""
    own = [e.name for e in STEP7 if e.mode == dtype]
    return list(dict.fromkeys(["copy_", f"copy_ {dtype}", f"F.elu {dtype}", f"6_beyond_copy {dtype}", *own]))


def sustained_rows(batch) -> list:
    """The rows of a batch timed under sustained load too: those SUSTAINED_PREDICTION grades or the catalogue marks
    ``sustained``, and the roofs they are taken over."""
    return sustained_entries([e for e in batch if e.sustained or e.name in SUSTAINED_PREDICTION
                              or e.name.split()[0] in ("copy_", "torch.add")])  # the roofs: kept where needed


def time_batches(rounds: int) -> dict:
    """Each dtype's batch in interleaved rounds, one after the other (both at once would hold every entry's tensors,
    6.4 GB each), merged into one record; of float32 copy_, in every batch, the first one's is kept. Then
    ``sustained_rows`` under sustained load too (the main record times the other defaults so)."""
    batches = {}
    for dtype in DTYPES:
        batch = resolve(timed_names(dtype))
        batches[dtype] = harness.measure(batch, rounds=rounds, progress=True, sustained=sustained_rows(batch),
                                         check=False, sass=False)  # run() checked every bit pattern, read sass16
        torch.cuda.empty_cache()
    merged = {k: v for k, v in batches[DTYPES[0]].items() if k != "rows"}
    rows = [{**r, "batch": d} for d, rec in batches.items() for r in rec["rows"]]
    names = [r["name"] for r in rows]
    merged["rows"] = [r for i, r in enumerate(rows) if names.index(r["name"]) == i]
    merged["problem"] = {**merged["problem"], "dtype": ", ".join(DTYPES),
                         "input": f"randn x {INPUT_SCALE:g}, one rounding", "shape": list(SHAPE)}
    return merged


def run(rounds: int = 5, with_counters: bool = True) -> dict:
    """The record of ``python -m elu_study sixteen``."""
    entries = [e for e in STEP7 if e.variant == VARIANT and not is_backward(e.name)]  # each on one dtype
    backward = [e for e in STEP7 if e.variant == VARIANT and is_backward(e.name)]
    others = [ENTRIES[f"6_beyond_copy {d}"] for d in DTYPES] + [e for e in STEP7 if e.name.split()[0] in PEERS16]
    build_all(builds(entries + others + backward))
    everything = ex.alphas()
    checks = {e.name: {"build": [e.variant, list(e.flags)],  # exact unless the unchecked ablation (CHECK 2) or a peer
                       "expect_exact": knob(e.flags, "CHECK") != "2" if e.variant == VARIANT
                       else e.name.split()[0] not in PEERS16,
                       **ex.check_patterns(harness.module_of(e), e.mode, everything)}
              for e in tqdm(entries + others, desc="every bit pattern", unit="build")}  # each on every bit pattern
    backward_checks = {e.name: {"build": [e.variant, list(e.flags)], "expect_exact": True,
                                **ex.check_backward(e.build(), e.mode, everything)} for e in backward}
    sass = {e.name: sass16(e) for e in entries + backward}
    torch.cuda.empty_cache()
    record, counters = time_batches(rounds), {"skipped": "--no-counters", "rows": []}
    if with_counters:
        try:  # Nsight Compute's counters, or why there are none
            c = profile(list(PROFILED))
            counters = {"ncu": c["ncu"], "rows": c["rows"]}
        except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as err:
            counters = {"skipped": f"{type(err).__name__}: {err}"[-2000:], "rows": []}
    record.update({
        "provenance": provenance(), "exhaustive": checks, "exhaustive_backward": backward_checks, "sass16": sass,
        "timed_alpha": ALPHA, "counters": counters})
    return record
