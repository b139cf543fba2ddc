"""Step 7's measurement (GPU): each fast formula's distance to expm1f over every negative 16-bit input (delta),
every build on every 16-bit bit pattern at many alphas, the builds timed against the same dtype's copy_, their
static SASS and their Nsight Compute counters."""

from __future__ import annotations

import math
import subprocess
from collections import Counter

import torch
import torch.nn.functional as F
from tqdm import tqdm

from elu_study.core import harness
from elu_study.core.build import build_all, built_library, compile_variant
from elu_study.core.check import INPUT_SCALE
from elu_study.core.entries import ALPHA, ENTRIES, STEP7, STEP7_DELTA_BUILDS, builds, is_backward
from elu_study.core.exhaustive import (ALPHA_SEED, EXTREME_ALPHAS, RANDOM_ALPHAS, REQUIRED_ALPHAS, alphas,
                                      check_backward, check_patterns, patterns)
from elu_study.core.hardware import SHAPE, provenance
from elu_study.core.ncu import profile
from elu_study.core.sass import sass_by_function
from elu_study.jobs.sixteen import kernel
from elu_study.jobs.sixteen.analysis import DTYPES, ROUNDING, argument_holds

PEERS16 = ("triton", "cub_transform")
STEP6_16 = {"bfloat16": "6_beyond_copy bfloat16", "float16": "6_beyond_copy float16"}
SAMPLE = 1 << 24  # values drawn like the timed input (randn x INPUT_SCALE) to count how often the check falls back
WARP_LANES, PAIRS_PER_THREAD = 32, 4  # a thread takes one 16-byte vector: 4 pairs of 16-bit values
DTYPE_TOKEN = {"bfloat16": "13__nv_bfloat16", "float16": "6__half"}  # in the 16-bit kernels' mangled names


def kernel_entries() -> list:
    """Step 7's forward builds, each called on one dtype (the catalogue's STEP7 entries that build its file)."""
    return [e for e in STEP7 if e.variant == kernel.VARIANT and not is_backward(e.name)]


def backward_entries() -> list:
    return [e for e in STEP7 if e.variant == kernel.VARIANT and is_backward(e.name)]


def peer_entries() -> list:
    """The 16-bit peers that claim PyTorch's formula: Triton and CUB (checked on every input like step 7)."""
    return [e for e in STEP7 if e.name.split()[0] in PEERS16]


def negative_inputs(dtype: str) -> torch.Tensor:
    """Every negative finite value of a dtype (sign bit set: -0 included), as float32."""
    x = patterns(dtype).float()
    return x[torch.signbit(x) & torch.isfinite(x)]


# -- delta: the fast formula against expm1f ------------------------------------------------------------


def per_binade(x: torch.Tensor, rel: torch.Tensor) -> tuple[list[int], list[float]]:
    """For each binade of nonzero x (floor(log2 |x|)), the largest relative error in it."""
    keep = x != 0
    exp = torch.frexp(x[keep].double()).exponent.long() - 1
    low = int(exp.min())
    idx = exp - low
    size = int(idx.max()) + 1
    worst = torch.zeros(size, dtype=torch.float64, device=x.device).scatter_reduce(0, idx, rel[keep], "amax")
    seen = torch.zeros(size, dtype=torch.int64, device=x.device).scatter_add(0, idx, torch.ones_like(idx)) > 0
    return [low + i for i in range(size) if seen[i]], [float(w) for w, s in zip(worst.tolist(), seen.tolist()) if s]


def delta_of(module, dtype: str) -> tuple[dict, torch.Tensor, torch.Tensor]:
    """A formula (its ``-DELU7_OP=Approx`` build: elu(x, 1) = fast(x)) against F.elu (expm1f) over every negative
    finite value of a dtype: the largest relative distance, where, and the cases the argument relies on."""
    x = negative_inputs(dtype)
    y = module.elu(x, 1.0)
    e = F.elu(x, 1.0)
    nonzero = e != 0
    rel = torch.zeros_like(x, dtype=torch.float64)
    rel[nonzero] = ((y.double() - e.double()).abs() / e.double().abs())[nonzero]
    worst = int(rel.argmax())
    differ = y.view(torch.int32) != e.view(torch.int32)
    tiny = x.abs() < 2.0 ** -24
    exps, maxes = per_binade(x, rel)
    delta = float(rel.max())
    return {
        "inputs": int(x.numel()), "delta": delta, "delta_log2": math.log2(delta) if delta > 0 else None,
        "argmax_x": float(x[worst]), "fast_at_argmax": float(y[worst]), "expm1f_at_argmax": float(e[worst]),
        "differ": int(differ.sum()), "tiny_inputs": int(tiny.sum()), "tiny_differ": int((differ & tiny).sum()),
        "zero_results": int((~nonzero).sum()), "zero_results_equal": bool(not (differ & ~nonzero).any()),
        "binades": exps, "binade_max_rel": maxes,
    }, x, y


def fallback_shares(x: torch.Tensor, fast: torch.Tensor, dtype: str, eps: float) -> dict:
    """How often the check asks for expm1f at alpha 1 on values drawn like the timed input: per value, per pair
    (one elu2 call) and per warp and pair slot (expm1f runs for the whole warp if one lane needs it)."""
    t = getattr(torch, dtype)
    lo = (fast * torch.tensor(1.0 - eps, device="cuda")).to(t).view(torch.int16)
    hi = (fast * torch.tensor(1.0 + eps, device="cuda")).to(t).view(torch.int16)
    table = torch.zeros(1 << 16, dtype=torch.bool, device="cuda")  # by bit pattern + 32768
    table[x.to(t).view(torch.int16).long() + 32768] = lo != hi
    gen = torch.Generator(device="cuda").manual_seed(1234)
    sample = (torch.randn(SAMPLE, device="cuda", generator=gen) * INPUT_SCALE).to(t)
    falls = table[sample.view(torch.int16).long() + 32768]
    slots = falls.view(-1, WARP_LANES, PAIRS_PER_THREAD, 2).any(dim=3).any(dim=1)
    return {"values": float(falls.float().mean()), "pairs": float(falls.view(-1, 2).any(dim=1).float().mean()),
            "warp_pair_slots": float(slots.float().mean()), "sample": SAMPLE}


def deltas(eps: dict) -> tuple[dict, dict]:
    """Every formula's delta on both dtypes, the argument's verdict, and how often its check falls back."""
    delta, fallback = {}, {}
    for formula, (variant, flags) in tqdm(STEP7_DELTA_BUILDS.items(), desc="delta", unit="formula"):
        module = compile_variant(variant, extra_cuda_cflags=list(flags))
        e = eps[formula]["eps"]
        delta[formula], fallback[formula] = {"build": [variant, list(flags)], **eps[formula]}, {}
        for dtype in DTYPES:
            d, x, y = delta_of(module, dtype)
            d["bound"] = d["delta"] + ROUNDING
            d["bound_holds"] = argument_holds(d["delta"], e)  # delta + 3 * 2^-24 <= eps
            d["holds"] = d["bound_holds"] and d["tiny_differ"] == 0 and d["zero_results_equal"]
            delta[formula][dtype] = d
            fallback[formula][dtype] = fallback_shares(x, y, dtype, e)
    return delta, fallback


# -- every bit pattern, every alpha ----------------------------------------------------------------------


def exhaustive(entries, alpha_list) -> dict:
    """Each entry (one build on one dtype) on every bit pattern of its dtype at every alpha."""
    out = {}
    for e in tqdm(entries, desc="every bit pattern", unit="build"):
        peer = e.name.split()[0] in PEERS16  # checked the same way, but their exactness is not this study's claim
        exact = kernel.checked(e.flags) if e.variant == kernel.VARIANT else not peer
        out[e.name] = {"build": [e.variant, list(e.flags)], "expect_exact": exact, "peer": peer,
                       **check_patterns(harness.module_of(e), e.mode, alpha_list)}
    return out


def exhaustive_backward(entries, alpha_list) -> dict:
    return {e.name: {"build": [e.variant, list(e.flags)], "expect_exact": True,
                     **check_backward(e.build(), e.mode, alpha_list)} for e in entries}


def kernel_name(entry) -> str:
    """The 16-bit kernel a step 7 entry launches on its full-shape input: the backward's, the table's, or the
    one-shot vector kernel at the entry's CHECK."""
    if is_backward(entry.name):
        return "backward16_kernel"
    if kernel.formula_of(entry.flags, entry.mode) == "Table":
        return "table16_kernel"
    return f"vector16_kernel (CHECK {kernel.knob(entry.flags, 'CHECK')})"


def sass16(entry) -> dict:
    """The static SASS of the 16-bit kernel a step 7 entry launches (see kernel_name)."""
    try:
        functions = sass_by_function(built_library(entry.build()))
    except (OSError, subprocess.SubprocessError) as err:  # no cuobjdump: the record says so
        return {"error": f"{type(err).__name__}: {err}"}
    which = kernel_name(entry)
    token = {"backward16_kernel": "Lb0E", "table16_kernel": ""}.get(which, f"Li{kernel.knob(entry.flags, 'CHECK')}E")
    names = [n for n in functions if which.split()[0] in n and DTYPE_TOKEN[entry.mode] in n and token in n]
    if len(names) != 1:
        return {"error": f"expected one {which} for {entry.mode}, found {names}"}
    ops = functions[names[0]]
    return {"function": names[0], "kernel": which, "instructions": len(ops), "elements_per_thread": 8,
            "opcodes": dict(Counter(op.split(".")[0] for op in ops).most_common())}


# -- time and counters ----------------------------------------------------------------------------------


def timed_names(dtype: str) -> list[str]:
    """One dtype's batch: float32 copy_ (annotate's roof), the dtype's copy_ and F.elu, step 6, and step 7's rows
    (its builds, its backward and the backward's roof, torch.compile and the peers)."""
    own = [e.name for e in STEP7 if e.mode == dtype]
    return list(dict.fromkeys(["copy_", f"copy_ {dtype}", f"F.elu {dtype}", STEP6_16[dtype], *own]))


def time_batches(rounds: int) -> dict:
    """Each dtype's batch timed in interleaved rounds by the harness, one batch after the other (both at once
    would hold every entry's 16-bit input and output, 6.4 GB each, at the same time), merged into one record."""
    batches = {}
    for dtype in DTYPES:
        batches[dtype] = harness.measure(timed_names(dtype), trials=1, rounds=rounds, progress=True)
        torch.cuda.empty_cache()
    merged = {k: v for k, v in batches[DTYPES[0]].items() if k != "rows"}
    merged["rows"], seen = [], set()
    for dtype, rec in batches.items():
        for r in rec["rows"]:
            if r["name"] not in seen:  # float32 copy_ is in every batch: the first one's is kept
                merged["rows"].append({**r, "batch": dtype})
                seen.add(r["name"])
    merged["batches"] = {d: {"names": [r["name"] for r in rec["rows"]], "roof_ms": rec["roof_ms"]}
                         for d, rec in batches.items()}
    merged["problem"] = {**merged["problem"], "dtype": ", ".join(DTYPES), "input": f"randn x {INPUT_SCALE:g}, "
                         "rounded once to the dtype"}
    return merged


def counters(names: list[str]) -> dict:
    """Nsight Compute's counters of these entries, or why there are none."""
    try:
        c = profile(names)
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as err:
        return {"skipped": f"{type(err).__name__}: {err}"[-2000:], "rows": []}
    return {"ncu": c["ncu"], "rows": c["rows"]}


PROFILED = ("7_sixteen_bits", "7_poly", "7_unchecked", "7_exact", "7_backward")  # the rows ncu reads, per dtype


def run(rounds: int = 5, with_counters: bool = True) -> dict:
    """The record of ``python -m elu_study sixteen``."""
    entries, backward, peers = kernel_entries(), backward_entries(), peer_entries()
    step6 = [ENTRIES[n] for n in STEP6_16.values()]
    build_all(sorted({*builds(entries + step6 + backward + peers), *STEP7_DELTA_BUILDS.values()}))
    text = kernel.source()
    eps = kernel.eps_by_formula(text)
    delta, fallback = deltas(eps)
    checks = exhaustive(entries + step6 + peers, alphas())
    backward_checks = exhaustive_backward(backward, alphas())
    sass = {e.name: sass16(e) for e in entries + backward}
    torch.cuda.empty_cache()
    record = time_batches(rounds)
    record.update({
        "provenance": provenance(), "eps": eps, "delta": delta, "fallback": fallback, "exhaustive": checks,
        "exhaustive_backward": backward_checks,
        "formula_of": {e.name: kernel.formula_of(e.flags, e.mode, text) for e in entries}, "sass16": sass,
        "alphas": {"required": list(REQUIRED_ALPHAS), "random": RANDOM_ALPHAS, "seed": ALPHA_SEED,
                   "extremes": list(EXTREME_ALPHAS), "all": alphas()},
        "timed_alpha": ALPHA, "rounding": ROUNDING,
        "counters": counters([f"{n} {d}" for d in DTYPES for n in PROFILED]) if with_counters
        else {"skipped": "--no-counters", "rows": []},
    })
    record["problem"]["shape"] = list(SHAPE)
    return record
