"""What the accuracy job measures: formulas, alphas, bins, special inputs and the method the record writes down."""

from __future__ import annotations

import math
from dataclasses import dataclass

from elu_study.core.entries import KERNELS
from elu_study.core.text import render

ALPHAS = (1.0, 1.5)  # the task's alpha, and one that is not a power of two (its product rounds)
TOL = 1e-4  # the original task's atol = rtol, against F.elu, with torch.allclose's semantics
BINADE = 1 << 23  # bit patterns per binade: one sign and one exponent field
N_GROUPS = 512  # binades over both signs: (sign << 8) | exponent field
CHUNK_LOG2 = 26  # 2^26 inputs per chunk: under 10 GB of GPU memory at the peak (twice that at 27)
MIDPOINT_MARGIN_ULP64 = 8  # a float64 value this close to a float32 midpoint is resolved exactly
MAX_DECIMAL = 100_000  # exact (decimal) resolutions per alpha, at most


@dataclass(frozen=True)
class Formula:
    """One way of computing ELU that the study uses."""

    name: str
    what: str
    exponential: str  # "expf", "__expf" or "expm1f": which documented bound applies
    documented_bound: str
    variant: str | None = None  # a kernels/ step, built with compile_variant
    flushes_denormals: bool = False  # the exp branch flushes denormal inputs and outputs to zero
    fast_math: bool = False  # --use_fast_math: the comparison x > 0 flushes too, so positive denormals give 0


FORMULAS = (
    Formula("1_naive", "alpha * (expf(x) - 1): steps 1-3", "expf", "expf: 2 ulp", "1_naive"),
    Formula("4_fast_math", "alpha * (__expf(x) - 1), --use_fast_math: step 4", "__expf",
            "__expf: 2 + floor(|1.173 x|) ulp", "4_fast_math", flushes_denormals=True, fast_math=True),
    Formula("5_streaming", "alpha * expm1f(x): step 5", "expm1f", "expm1f: 1 ulp", "5_streaming"),
    # Steps 6 and 7 (float32) and the drop-in's float32 forward: expm1 by a degree-5 polynomial above -1, __expf - 1
    # below. No documented bound: the target, 2 ulp of expm1, is the model its errors are held to.
    Formula("6_beyond_copy", "alpha * expm1 (a degree-5 polynomial above -1, __expf(x) - 1 below): steps 6 and 7",
            "expm1-poly", "target: 2 ulp", "6_beyond_copy"),
    Formula("F.elu", "PyTorch's CUDA ELU: alpha * expm1f(x)", "expm1f", "expm1f: 1 ulp"),
    # Triton links libdevice in its flush-to-zero variant (its enable_reflect_ftz option, on by default).
    Formula("torch.compile(F.elu)", "Inductor's Triton kernel: alpha * libdevice.expm1(x), flush-to-zero variant",
            "expm1f", "expm1f: 1 ulp", flushes_denormals=True),
)
# The kernel files that compute another file's formula (catalog.toml's [kernels.<file>].formula: steps 2 and 3 step
# 1's with other launches, step 7's float32 path step 6's): checked bit for bit against it.
SAME_AS = {name: kernel.formula for name, kernel in KERNELS.items() if kernel.formula != name}
if unknown := {f for f in SAME_AS.values() if f not in {g.variant for g in FORMULAS if g.variant}}:
    raise ValueError(f"elu_study/core/catalog.toml: formulas {sorted(unknown)} are no kernel file's own formula "
                     f"(jobs/accuracy/definitions.py's FORMULAS)")

CLASSES = ("+normal", "-normal", "+denormal", "-denormal", "+0.0", "-0.0", "+inf", "-inf", "NaN")
DENORMAL_OUTPUT = "denormal output (x <= 0)"
FLAGS = ("correctly_rounded", "identical_to_felu", "nan_out", "plus_zero_out", "minus_zero_out", "equal_input")

# Histogram of ulp errors: bin 0 is exact (0 ulp), bin i is (EDGES[i-1], EDGES[i]], then > 2^31 (or an infinity),
# then NaN against a number.
HIST_EDGES = (0.0, *(2.0**k for k in range(-1, 32)))
_EDGE = [f"{v:g}" if v <= 1024 else f"2^{int(math.log2(v))}" for v in HIST_EDGES]
HIST_LABELS = ("0", *(f"({a}, {b}]" for a, b in zip(_EDGE, _EDGE[1:])), "> 2^31 or inf", "NaN vs number")
N_BINS = len(HIST_LABELS)

# Inputs whose outputs the record lists one by one: (label, bit pattern).
SPECIAL_INPUTS = (
    ("NaN", 0x7FC00000), ("-NaN", 0xFFC00000), ("NaN, payload 1 (signalling)", 0x7F800001),
    ("-NaN, payload 1 (signalling)", 0xFF800001), ("+inf", 0x7F800000), ("-inf", 0xFF800000), ("+0.0", 0x00000000),
    ("-0.0", 0x80000000), ("+2^-149 (least denormal)", 0x00000001), ("-2^-149", 0x80000001),
    ("-3 x 2^-149", 0x80000003), ("+largest denormal", 0x007FFFFF), ("-largest denormal", 0x807FFFFF),
    ("+2^-126 (least normal)", 0x00800000), ("-2^-126", 0x80800000), ("-2^-25", 0xB3000000), ("-2^-24", 0xB3800000),
    ("-2^-12", 0xB9800000), ("-0.5", 0xBF000000), ("-1", 0xBF800000), ("-20", 0xC1A00000),
    ("-88 (expf denormal)", 0xC2B00000), ("-104 (expf underflows)", 0xC2D00000), ("-FLT_MAX", 0xFF7FFFFF),
    ("+1", 0x3F800000), ("+FLT_MAX", 0x7F7FFFFF),
)

# The method's words, as the record writes them down (templates/accuracy/method.md.j2, one "key: text" a line).
METHOD = dict(line.split(": ", 1) for line in render("accuracy/method.md.j2").splitlines())
