"""Step 6's measurement (GPU): the attempts timed beside copy_, their DRAM counters (Nsight Compute), the
16-bit storage path on every bit pattern, and step 6 against copy_ again in fresh processes."""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F

from elu_study.core.build import build_all, resolve_variant
from elu_study.core.entries import ATTEMPTS, ENTRIES, builds
from elu_study.core.hardware import provenance
from elu_study.core.harness import measure
from elu_study.core.ncu import profile
from elu_study.core.processes import fresh_processes
from elu_study.core.record import REFERENCE_GPU, load

# The rows every attempt is compared with, timed in the same rounds.
COMPARED = ("copy_", "read_only", "write_only", "2_float4", "2+128_threads", "5_streaming", "F.elu", "6_beyond_copy")
# What each fresh process times (the claim, its control and the roof).
REPEATED = ("copy_", "2_float4", "2+128_threads", "6_beyond_copy")
DTYPES16 = ("bfloat16", "float16")
ALPHAS16 = (1.0, 1.5, 0.0, -0.7)
POISON = 0x7FC1  # a NaN with a payload, which F.elu never returns for a number


def formula(entry, knob: str = "OP") -> str:
    """A build's float32 ("OP") or 16-bit ("OP16") formula: its -DELU6_<knob> flag, else the file's default."""
    for flag in entry.flags:
        if flag.startswith(f"-DELU6_{knob}="):
            return flag.split("=", 1)[1]
    return re.search(rf"#define ELU6_{knob} (\w+)", resolve_variant(entry.variant).read_text()).group(1)


def check_16bit(module, dtype_name: str, alphas=ALPHAS16, expect_identical: bool = True) -> dict:
    """All 65,536 inputs of a 16-bit dtype at each alpha into a poisoned output (ulps counted along the bit patterns
    ordered like the values), and a random tensor of odd length, aligned and one element off (the scalar path and
    the tail), through ``module.elu`` against F.elu in that dtype."""
    def ordered(t):
        i = t.view(torch.int16).to(torch.int32)
        return torch.where(i < 0, -32768 - i, i)

    dtype = getattr(torch, dtype_name)
    x = torch.arange(-32768, 32768, dtype=torch.int32, device="cuda").to(torch.int16).view(dtype)
    out = {"dtype": dtype_name, "inputs": 1 << 16, "alphas": {}}
    for alpha in alphas:
        y = torch.full_like(x.view(torch.int16), POISON).view(dtype)
        module.elu(x, alpha, out=y)
        ref = F.elu(x, alpha)
        same = (y.view(torch.int16) == ref.view(torch.int16)) | (y.isnan() & ref.isnan())
        poisoned = int((y.view(torch.int16) == POISON).sum()) - int((ref.view(torch.int16) == POISON).sum())
        diff = (ordered(y) - ordered(ref)).abs()[~same & ~(y.isnan() | ref.isnan())]
        out["alphas"][str(alpha)] = {"mismatches": int((~same).sum()), "max_ulp": int(diff.max()) if diff.numel()
                                     else 0, "untouched": max(poisoned, 0)}
    gen = torch.Generator(device="cuda").manual_seed(16)
    n = (1 << 22) + 5
    base = (torch.randn(n + 1, device="cuda", generator=gen) * 4).to(dtype)
    for name, view in (("aligned", base[:n]), ("misaligned", base[1:])):
        y = torch.full((n,), POISON, dtype=torch.int16, device="cuda").view(dtype)
        module.elu(view, 1.0, out=y)
        out[f"random_{name}_mismatches"] = int((y.view(torch.int16) != F.elu(view, 1.0).view(torch.int16)).sum())
    out["random_length"] = n
    out["bit_identical"] = all(a["mismatches"] == 0 for a in out["alphas"].values()) and (
        out["random_aligned_mismatches"] == out["random_misaligned_mismatches"] == 0)
    # Every output written; and bit-identical where the formula is PyTorch's (expm1f): expf - 1 differs by design.
    out["passed"] = all(a["untouched"] == 0 for a in out["alphas"].values()) and (
        out["bit_identical"] or not expect_identical)
    return out


def run(processes: int = 3, rounds: int = 5, profile_counters: bool = True) -> dict:
    """The record of ``python -m elu_study beyond``: the attempts beside COMPARED, the 16-bit checks, the counters
    and ``processes`` fresh processes."""
    todo = [ENTRIES[n] for n in COMPARED] + list(ATTEMPTS)
    build_all(builds(todo))
    record = measure(todo, trials=2, rounds=rounds, progress=True)
    record["accuracy16"] = {}
    for name in ("6_beyond_copy", "6_16bit_expf"):
        module, identical = ENTRIES[name].build(), formula(ENTRIES[name], "OP16") == "Expm1f"
        record["accuracy16"][name] = {d: check_16bit(module, d, expect_identical=identical) for d in DTYPES16}
    torch.cuda.empty_cache()
    if profile_counters:  # copy_ of either dtype is a driver copy, not a kernel ncu can see
        counters = profile([e.name for e in todo if not e.name.startswith("copy_")])
        record["counters"] = {"ncu": counters["ncu"], "rows": counters["rows"]}
    record["processes"] = fresh_processes(REPEATED, processes)
    record["method"]["processes"] = processes
    return record


def confirm(names, processes: int = 3) -> dict:
    """The recorded run with these attempts timed again in fresh processes beside copy_ and step 6 ("confirmation")."""
    record = load(REFERENCE_GPU, "beyond")
    timed = ["copy_", "6_beyond_copy", *names]
    build_all(builds([ENTRIES[n] for n in timed]))
    record["confirmation"] = {"names": list(names), "provenance": provenance(),
                              "processes": fresh_processes(timed, processes)}
    return record
