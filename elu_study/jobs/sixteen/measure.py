"""Step 7's measurement (GPU), and what kernels/7_sixteen_bits.cu says about itself (read from its source: each
formula's ``kEps``, what ``Auto`` picks per dtype): delta, every bit pattern, times, SASS and counters."""

from __future__ import annotations

import math
import re
import subprocess
from collections import Counter

import torch
import torch.nn.functional as F
from tqdm import tqdm

from elu_study.core import exhaustive as ex
from elu_study.core import harness
from elu_study.core.build import build_all, built_library, compile_variant, resolve_variant
from elu_study.core.check import INPUT_SCALE
from elu_study.core.entries import ALPHA, ENTRIES, STEP7, STEP7_DELTA_BUILDS, builds, is_backward
from elu_study.core.hardware import SHAPE, provenance
from elu_study.core.ncu import profile
from elu_study.core.sass import sass_by_function
from elu_study.jobs.sixteen.analysis import DTYPES, ROUNDING, argument_holds

VARIANT = "7_sixteen_bits"
PEERS16 = ("triton", "cub_transform")  # checked like step 7, but their exactness is not this study's claim
SAMPLE = 1 << 24  # values drawn like the timed input (randn x INPUT_SCALE) to count how often the check falls back
WARP_LANES, PAIRS_PER_THREAD = 32, 4  # a thread takes one 16-byte vector: 4 pairs of 16-bit values
DTYPE_TOKEN = {"bfloat16": "13__nv_bfloat16", "float16": "6__half"}  # in the 16-bit kernels' mangled names
PROFILED = ("7_sixteen_bits", "7_poly", "7_unchecked", "7_exact", "7_backward")  # the rows ncu reads, per dtype
C_TYPES = {"__nv_bfloat16": "bfloat16", "__half": "float16", "float": "float32"}  # in FormulaOf<type, chooser>


def eps_by_formula(text: str | None = None) -> dict[str, dict]:
    """{formula: {"literal": "0x1p-17f", "eps": 2**-17}} for every struct of the file that declares a kEps."""
    parts = re.split(r"^struct (\w+)", text or resolve_variant(VARIANT).read_text(), flags=re.MULTILINE)
    out = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        if m := re.search(r"static\s+constexpr\s+float\s+kEps\s*=\s*([^;]+);", body):
            lit = m.group(1).strip()
            out[name] = {"literal": lit, "eps": (float.fromhex if "0x" in lit.lower() else float)(lit.rstrip("fF"))}
    return out


def knob(flags, name: str, text: str | None = None) -> str:
    """A build's ``ELU7_<name>``: its -D flag, else the file's #define default."""
    for flag in flags:
        if flag.startswith(f"-DELU7_{name}="):
            return flag.split("=", 1)[1]
    return re.search(rf"#define ELU7_{name} (\w+)", text or resolve_variant(VARIANT).read_text()).group(1)


def formula_of(flags, dtype: str, text: str | None = None) -> str:
    """The fast formula a build uses on a dtype ("expm1f" for none): its FORMULA, resolved by ``FormulaOf``."""
    text = text or resolve_variant(VARIANT).read_text()
    if knob(flags, "CHECK", text) == "0":
        return "expm1f"
    chosen = knob(flags, "FORMULA", text)
    pattern = r"FormulaOf<\s*(\w+)\s*,\s*(\w+)\s*>\s*\{\s*using\s+type\s*=\s*(\w+)\s*;"
    return {(C_TYPES.get(t, t), c): f for t, c, f in re.findall(pattern, text)}.get((dtype, chosen), chosen)


def delta_of(module, dtype: str) -> tuple[dict, torch.Tensor, torch.Tensor]:
    """A formula (its ``-DELU7_OP=Approx`` build: elu(x, 1) = fast(x)) against expm1f over every negative finite
    value of a dtype (-0 included): the largest relative distance, where, and the cases the argument relies on."""
    x = ex.patterns(dtype).float()
    x = x[torch.signbit(x) & torch.isfinite(x)]
    y, e = module.elu(x, 1.0), F.elu(x, 1.0)
    nonzero = e != 0
    rel = torch.zeros_like(x, dtype=torch.float64)
    rel[nonzero] = ((y.double() - e.double()).abs() / e.double().abs())[nonzero]
    worst, delta = int(rel.argmax()), float(rel.max())
    differ, tiny = y.view(torch.int32) != e.view(torch.int32), x.abs() < 2.0 ** -24
    keep = x != 0  # the binades of nonzero x, floor(log2 |x|), and the largest relative distance in each
    exp = torch.frexp(x[keep].double()).exponent - 1
    binades = torch.unique(exp).tolist()
    return {
        "inputs": int(x.numel()), "delta": delta, "delta_log2": math.log2(delta) if delta > 0 else None,
        "argmax_x": float(x[worst]), "fast_at_argmax": float(y[worst]), "expm1f_at_argmax": float(e[worst]),
        "differ": int(differ.sum()), "tiny_inputs": int(tiny.sum()), "tiny_differ": int((differ & tiny).sum()),
        "zero_results": int((~nonzero).sum()), "zero_results_equal": bool(not (differ & ~nonzero).any()),
        "binades": binades, "binade_max_rel": [float(rel[keep][exp == b].max()) for b in binades],
    }, x, y


def fallback_shares(x: torch.Tensor, fast: torch.Tensor, dtype: str, eps: float) -> dict:
    """How often the check asks for expm1f (alpha 1, inputs like the timed one): per value, pair and warp pair slot."""
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
            delta[formula][dtype], fallback[formula][dtype] = d, fallback_shares(x, y, dtype, e)
    return delta, fallback


def exhaustive(entries, alpha_list) -> dict:
    """Each entry (one build on one dtype) on every bit pattern of its dtype at every alpha."""
    out = {}
    for e in tqdm(entries, desc="every bit pattern", unit="build"):
        peer = e.name.split()[0] in PEERS16  # exact unless the unchecked ablation (CHECK 2) or a peer
        exact = knob(e.flags, "CHECK") != "2" if e.variant == VARIANT else not peer
        out[e.name] = {"build": [e.variant, list(e.flags)], "expect_exact": exact, "peer": peer,
                       **ex.check_patterns(harness.module_of(e), e.mode, alpha_list)}
    return out


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


def time_batches(rounds: int) -> dict:
    """Each dtype's batch in interleaved rounds, one after the other (both at once would hold every entry's tensors,
    6.4 GB each), merged into one record; of float32 copy_, in every batch, the first one's is kept."""
    batches = {}
    for dtype in DTYPES:
        batches[dtype] = harness.measure(timed_names(dtype), trials=1, rounds=rounds, progress=True)
        torch.cuda.empty_cache()
    merged = {k: v for k, v in batches[DTYPES[0]].items() if k != "rows"}
    rows = [{**r, "batch": d} for d, rec in batches.items() for r in rec["rows"]]
    names = [r["name"] for r in rows]
    merged["rows"] = [r for i, r in enumerate(rows) if names.index(r["name"]) == i]
    merged["batches"] = {d: {"names": [r["name"] for r in rec["rows"]], "roof_ms": rec["roof_ms"]}
                         for d, rec in batches.items()}
    merged["problem"] = {**merged["problem"], "dtype": ", ".join(DTYPES),
                         "input": f"randn x {INPUT_SCALE:g}, one rounding"}
    return merged


def run(rounds: int = 5, with_counters: bool = True) -> dict:
    """The record of ``python -m elu_study sixteen``."""
    entries = [e for e in STEP7 if e.variant == VARIANT and not is_backward(e.name)]  # each on one dtype
    backward = [e for e in STEP7 if e.variant == VARIANT and is_backward(e.name)]
    others = [ENTRIES[f"6_beyond_copy {d}"] for d in DTYPES] + [e for e in STEP7 if e.name.split()[0] in PEERS16]
    build_all(sorted({*builds(entries + others + backward), *STEP7_DELTA_BUILDS.values()}))
    text, everything = resolve_variant(VARIANT).read_text(), ex.alphas()
    eps = eps_by_formula(text)
    delta, fallback = deltas(eps)
    checks = exhaustive(entries + others, everything)
    backward_checks = {e.name: {"build": [e.variant, list(e.flags)], "expect_exact": True,
                                **ex.check_backward(e.build(), e.mode, everything)} for e in backward}
    sass = {e.name: sass16(e) for e in entries + backward}
    torch.cuda.empty_cache()
    record, counters = time_batches(rounds), {"skipped": "--no-counters", "rows": []}
    if with_counters:
        try:  # Nsight Compute's counters, or why there are none
            c = profile([f"{n} {d}" for d in DTYPES for n in PROFILED])
            counters = {"ncu": c["ncu"], "rows": c["rows"]}
        except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as err:
            counters = {"skipped": f"{type(err).__name__}: {err}"[-2000:], "rows": []}
    record.update({
        "provenance": provenance(), "eps": eps, "delta": delta, "fallback": fallback, "exhaustive": checks,
        "exhaustive_backward": backward_checks, "sass16": sass,
        "formula_of": {e.name: formula_of(e.flags, e.mode, text) for e in entries},
        "alphas": {"required": list(ex.REQUIRED_ALPHAS), "random": ex.RANDOM_ALPHAS, "seed": ex.ALPHA_SEED,
                   "extremes": list(ex.EXTREME_ALPHAS), "all": everything},
        "timed_alpha": ALPHA, "rounding": ROUNDING, "counters": counters})
    record["problem"]["shape"] = list(SHAPE)
    return record
