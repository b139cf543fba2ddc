"""What the accuracy job measures: formulas, alphas, classes of inputs and the sweep's constants."""

from dataclasses import dataclass

from elu_study.core.entries import KERNELS

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
    Formula("6_beyond_copy",
            "alpha * expm1 (a degree-5 polynomial above -1, __expf(x) - 1 below, by a flushing ex2): steps 6 and 7",
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
FLAGS = ("correctly_rounded", "identical_to_felu", "plus_zero_out")  # counted per class of inputs
