"""What the accuracy job measures: the formulas, the alphas, the bins, the special inputs and the method.

Everything here is data: the record writes it down (``METHOD``, the histogram labels, the classes),
so that a record explains itself, and the tests and the analysis read the same names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
    Formula("F.elu", "PyTorch's CUDA ELU: alpha * expm1f(x)", "expm1f", "expm1f: 1 ulp"),
    # Triton links libdevice in its flush-to-zero variant (its enable_reflect_ftz option, on by default).
    Formula("torch.compile(F.elu)", "Inductor's Triton kernel: alpha * libdevice.expm1(x), flush-to-zero variant",
            "expm1f", "expm1f: 1 ulp", flushes_denormals=True),
)
# Steps 2 and 3 compute step 1's formula with other launches: checked bit for bit against it.
SAME_AS = {"2_float4": "1_naive", "3_grid_stride": "1_naive"}

CLASSES = ("+normal", "-normal", "+denormal", "-denormal", "+0.0", "-0.0", "+inf", "-inf", "NaN")
DENORMAL_OUTPUT = "denormal output (x <= 0)"
FLAGS = ("correctly_rounded", "identical_to_felu", "nan_out", "plus_zero_out", "minus_zero_out", "equal_input")

# Histogram of ulp errors: bin 0 is exact (0 ulp), bin i is (EDGES[i-1], EDGES[i]], then > 2^31
# (or an infinity), then NaN against a number.
HIST_EDGES = (0.0, *(2.0**k for k in range(-1, 32)))


def _edge_label(v: float) -> str:
    return f"{v:g}" if v <= 1024 else f"2^{int(math.log2(v))}"


HIST_LABELS = (
    "0",
    *(f"({_edge_label(a)}, {_edge_label(b)}]" for a, b in zip(HIST_EDGES, HIST_EDGES[1:])),
    "> 2^31 or inf",
    "NaN vs number",
)
N_BINS = len(HIST_LABELS)

# Inputs whose outputs the record lists one by one: (label, bit pattern).
SPECIAL_INPUTS = (
    ("NaN", 0x7FC00000),
    ("-NaN", 0xFFC00000),
    ("NaN, payload 1 (signalling)", 0x7F800001),
    ("-NaN, payload 1 (signalling)", 0xFF800001),
    ("+inf", 0x7F800000),
    ("-inf", 0xFF800000),
    ("+0.0", 0x00000000),
    ("-0.0", 0x80000000),
    ("+2^-149 (least denormal)", 0x00000001),
    ("-2^-149", 0x80000001),
    ("-3 x 2^-149", 0x80000003),
    ("+largest denormal", 0x007FFFFF),
    ("-largest denormal", 0x807FFFFF),
    ("+2^-126 (least normal)", 0x00800000),
    ("-2^-126", 0x80800000),
    ("-2^-25", 0xB3000000),
    ("-2^-24", 0xB3800000),
    ("-2^-12", 0xB9800000),
    ("-0.5", 0xBF000000),
    ("-1", 0xBF800000),
    ("-20", 0xC1A00000),
    ("-88 (expf denormal)", 0xC2B00000),
    ("-104 (expf underflows)", 0xC2D00000),
    ("-FLT_MAX", 0xFF7FFFFF),
    ("+1", 0x3F800000),
    ("+FLT_MAX", 0x7F7FFFFF),
)

METHOD = {
    "inputs": "every float32 bit pattern, 2^32 of them, each run through the formula's real kernel",
    "ulp": "float32 spacing in the binade of the float64 reference v: 2^(max(floor(log2|v|), -126) - 23); "
           "2^-149 for denormals and zero",
    "ulp_error": "|y - v| / ulp(v) with v the float64 reference (not its float32 rounding): a correctly rounded "
                 "output has error <= 1/2. Both NaN: 0. Equal values: 0 (a zero of the other sign is counted "
                 "apart). NaN against a number, or a wrong infinity: inf",
    "reference": "F.elu(x.double(), alpha) on the GPU (CUDA's double expm1, documented 1 ulp of float64), rounded "
                 "to float32. Where the float64 value lies within margin_ulp64 float64 ulps of a float32 rounding "
                 "midpoint, its rounding could differ from the exact value's (double rounding): those inputs are "
                 "resolved exactly, by the sign of x^2/2 for exact ties at tiny |x| (exp(x) - 1 > x), else with "
                 "200-digit decimal arithmetic. A sample checks the float64 values against the decimal ones.",
    "tolerance": "the original task's bar: |y - F.elu(x)| <= atol + rtol * |F.elu(x)| with atol = rtol = 1e-4 "
                 "(torch.isclose, float32), over every finite input",
    "bound_model": "CUDA states an exponential's bound B in ulps from the correctly rounded result, so it is "
                   "within B + 1/2 ulp of the exact value (ulps of the binade above near a binade edge). Carried "
                   "through ELU: alpha * ((B + 1/2) ulp(e^x) + 1/2 ulp(e^x - 1) [where e^x < 1/2: the subtraction "
                   "rounds]) / ulp(v) + 1/2 [alpha != 1: the product rounds]; for expm1f "
                   "alpha * (B + 1/2) ulp(e^x - 1) / ulp(v) + 1/2 [alpha != 1]; x > 0: 0; where denormals are "
                   "flushed, at least |v| / ulp(v) for a denormal input or output",
    "binade": "float32 exponent field of x (0: zero and denormals, 255: inf and NaN); |x| in "
              "[2^(e - 127), 2^(e - 126)) for e in 1..254",
}
