"""Accuracy, exhaustively: every float32 input through every formula the study uses, in ulp.

``python -m elu_study accuracy`` (needs a CUDA GPU) runs all 2^32 float32 bit patterns through
each formula's real built kernel (and through ``F.elu`` and ``torch.compile(F.elu)``), at
alpha = 1 (the task's) and alpha = 1.5, and compares every output with ELU computed in float64
and rounded to float32. It writes ``results/<gpu>-accuracy.json`` with the run's provenance;
``notebooks/07_accuracy.ipynb`` shows it (``elu_study.accuracy_report`` reads it).

Definitions (also written into the record, so the record explains itself):

* ulp: the float32 spacing in the binade of the float64 reference value ``v``:
  ``2^(max(floor(log2|v|), -126) - 23)``, so ``2^-149`` for denormals and zero.
* ulp error of an output ``y``: ``|y - v| / ulp(v)``, with ``v`` the float64 value (not its
  float32 rounding), so a correctly rounded output has error <= 1/2. Both NaN counts as 0 (the
  payload is compared separately); an output equal to the reference counts as 0 even where the
  sign of a zero differs (counted separately); NaN against a number, or a wrong infinity, is inf.
* reference: ``F.elu(x.double(), alpha)`` (CUDA's double ``expm1``), rounded to float32. That is
  the correctly rounded ELU unless the float64 value lies within a few float64 ulps of a float32
  rounding midpoint; those inputs are found and resolved exactly (see ``reference``).

Everything here except ``main`` and the kernels works on CPU tensors too; the tests use that.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
import warnings
from dataclasses import dataclass
from decimal import Context, Decimal
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from elu_study.core import record as results
from elu_study.core.record import dumps  # noqa: F401 - the record's format, also used as accuracy.dumps

SCHEMA = "elu-study-accuracy/1"
ALPHAS = (1.0, 1.5)  # the task's alpha, and one that is not a power of two (its product rounds)
TOL = 1e-4  # the original task's atol = rtol, against F.elu, with torch.allclose's semantics
BINADE = 1 << 23  # bit patterns per binade: one sign and one exponent field
N_GROUPS = 512  # binades over both signs: (sign << 8) | exponent field
CHUNK_LOG2 = 26  # 2^26 inputs per chunk: under 10 GB of GPU memory at the peak (twice that at 27)
MIDPOINT_MARGIN_ULP64 = 8  # a float64 value this close to a float32 midpoint is resolved exactly
MAX_DECIMAL = 100_000  # exact (decimal) resolutions per alpha, at most
_EXACT = Context(prec=200)  # enough digits for exp(x) - 1 at x = -2^-149 and 150 digits more
REFERENCE_GPU = "nvidia-h200"  # the record shown where there is no GPU


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


# -- bits and ulps ------------------------------------------------------------------------------
def patterns(lo: int, hi: int, device="cpu") -> torch.Tensor:
    """The float32 values whose bit patterns, read as int32, are lo .. hi - 1.

    -2^31 <= lo < hi <= 2^31: -2^31 is -0.0, -1 the last negative NaN, 0 is +0.0.
    """
    if not -(2**31) <= lo < hi <= 2**31:
        raise ValueError(f"pattern range [{lo}, {hi}) is not inside [-2^31, 2^31)")
    return torch.arange(lo, hi, dtype=torch.int64, device=device).to(torch.int32).view(torch.float32)


def from_bits(bits, device="cpu") -> torch.Tensor:
    """float32 tensor from unsigned 32-bit patterns (Python ints)."""
    signed = [b - (1 << 32) if b >= 1 << 31 else b for b in bits]
    return torch.tensor(signed, dtype=torch.int32, device=device).view(torch.float32)


def bits32(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32)


def hex_bits(b: int) -> str:
    return f"0x{b & 0xFFFFFFFF:08x}"


def f32_str(v: float) -> str:
    """The shortest text that reads back as this float32 ('-1e-45', '-0.0', 'nan')."""
    return str(np.float32(v))


def _pow2(k: torch.Tensor) -> torch.Tensor:
    """2^k as float64, exactly, for integer k >= -1022 (built from the bits)."""
    return ((k + 1023) << 52).view(torch.float64)


def ulp32(v: torch.Tensor) -> torch.Tensor:
    """float32 ulp in the binade of |v| (float64 in and out): 2^(max(floor(log2|v|), -126) - 23).

    Zero and denormals get 2^-149; the sign is ignored; inf and NaN get a large finite power of 2.
    """
    e = (v.double().contiguous().view(torch.int64) >> 52) & 0x7FF
    return _pow2(torch.clamp(e - 1023, min=-126) - 23)


def ulp64(v: torch.Tensor) -> torch.Tensor:
    """float64 ulp in the binade of |v| (at least 2^-1022: ELU's values never come near that)."""
    e = (v.double().contiguous().view(torch.int64) >> 52) & 0x7FF
    return _pow2(torch.clamp(e - 1075, min=-1022))


def exponent_field(x: torch.Tensor) -> torch.Tensor:
    """The float32 exponent field (0: zero and denormals, 255: inf and NaN): x's binade."""
    return (bits32(x) >> 23) & 0xFF


def binade_low(e: int) -> float:
    """Smallest |x| in binade e (the exponent field); 0 for the binade of zero and denormals."""
    return 0.0 if e == 0 else math.ldexp(1.0, e - 127)


def classify(x: torch.Tensor) -> torch.Tensor:
    """Index into CLASSES for each input (int32)."""
    b = bits32(x)
    e, m = (b >> 23) & 0xFF, b & 0x7FFFFF
    cls = (b < 0).to(torch.int32)
    cls += 2 * ((e == 0) & (m != 0)).to(torch.int32) + 4 * ((e == 0) & (m == 0)).to(torch.int32)
    cls += 6 * ((e == 255) & (m == 0)).to(torch.int32)
    return cls.masked_fill_((e == 255) & (m != 0), 8)


def is_denormal(x: torch.Tensor) -> torch.Tensor:
    b = bits32(x)
    return (((b >> 23) & 0xFF) == 0) & ((b & 0x7FFFFF) != 0)


def ulp_error(y: torch.Tensor, ref64: torch.Tensor) -> torch.Tensor:
    """|y - ref64| in float32 ulps of ref64's binade (float64); see the module's definitions."""
    yd = y.double()
    err = (yd - ref64).abs_().div_(ulp32(ref64))
    same = (yd == ref64) | (torch.isnan(yd) & torch.isnan(ref64))
    err.masked_fill_(same, 0.0)
    return err.masked_fill_(torch.isnan(err), math.inf)


def histogram_bins(err: torch.Tensor, nan_mismatch: torch.Tensor | None = None) -> torch.Tensor:
    """Index into HIST_LABELS for each ulp error (int64)."""
    edges = torch.tensor(HIST_EDGES, dtype=torch.float64, device=err.device)
    idx = torch.bucketize(err.double(), edges)  # edges[i-1] < err <= edges[i]; inf -> len(edges)
    if nan_mismatch is not None:
        idx.masked_fill_(nan_mismatch, N_BINS - 1)
    return idx


def predicted_ulp(x, ref64, alpha: float, formula: Formula, parts: dict | None = None) -> torch.Tensor:
    """The ulp error the documented bound of the formula's exponential allows for ELU (METHOD['bound_model']).

    parts: the formula-independent tensors ("ulp_v", "ulp_e", "ulp_d", "sub", "neg_branch", "finite",
    "denormal_in_or_out"), computed here when not given.
    """
    p = parts if parts is not None else bound_parts(x, ref64)
    if formula.exponential == "expm1f":
        core = 1.5 * p["ulp_d"]
    else:
        if formula.exponential == "expf":
            core = 2.5 * p["ulp_e"]
        elif formula.exponential == "__expf":
            core = (2.5 + torch.floor((1.173 * x.double()).abs_())) * p["ulp_e"]
        else:
            raise ValueError(f"no documented bound for {formula.exponential!r}")
        core = core + 0.5 * p["ulp_d"] * p["sub"]
    pred = abs(alpha) * core / p["ulp_v"] + (0.0 if alpha == 1.0 else 0.5)
    pred = torch.where(p["neg_branch"], pred, 0.0)
    if formula.flushes_denormals:
        lost = ref64.abs() / p["ulp_v"]
        pred = torch.where(p["denormal_in_or_out"], torch.maximum(pred, lost), pred)
    return torch.where(p["finite"], pred, 0.0)


def bound_parts(x: torch.Tensor, ref64: torch.Tensor) -> dict:
    xd = x.double()
    e = torch.exp(xd)
    edge = 1 + 2.0**-15  # a result a few hundred ulps from a binade edge may lie past it: take the larger ulp
    return {
        "ulp_v": ulp32(ref64),
        "ulp_e": ulp32(e * edge),
        "ulp_d": ulp32(torch.expm1(xd) * edge),
        "sub": e < 0.5 * edge,  # exp(x) - 1 is exact (Sterbenz) for exp(x) >= 1/2, else it rounds
        "neg_branch": (x <= 0) & torch.isfinite(x),
        "finite": torch.isfinite(x),
        "denormal_in_or_out": is_denormal(x) | ((ref64.abs() < 2.0**-126) & (ref64 != 0)),
    }


# -- the reference ------------------------------------------------------------------------------
def exact_elu(x: float, alpha: float) -> Decimal:
    """ELU(x) with 200 significant decimal digits (x and alpha exactly as given)."""
    if math.isnan(x):
        raise ValueError("ELU(NaN) has no exact value")
    if x > 0:
        return Decimal(x)
    if math.isinf(x):  # x = -inf
        return -Decimal(alpha)
    return _EXACT.multiply(Decimal(alpha), _EXACT.subtract(_EXACT.exp(Decimal(x)), 1))


def nearest_float32(d: Decimal) -> np.float32:
    """The float32 nearest to d (ties to even): the correctly rounded result."""
    f = np.float32(float(d))  # within one float32 step of the answer
    candidates = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    # copy_abs: exact (abs() would round to the thread's 28 digits and see a tie where there is none)
    return min(candidates, key=lambda c: (_EXACT.subtract(Decimal(float(c)), d).copy_abs(), int(c.view(np.uint32)) & 1))


def correctly_rounded_elu(x: float, alpha: float) -> np.float32:
    """ELU(x) correctly rounded to float32 (x > 0, +inf included, is its own result; -0.0 gives -0.0,
    as expm1(-0.0) = -0.0 in IEEE arithmetic and in float64 F.elu)."""
    if x > 0:
        return np.float32(x)
    if x == 0:
        return np.float32(alpha * x)
    return nearest_float32(exact_elu(x, alpha))


@dataclass
class Reference:
    """ELU in float64 and its float32 rounding, with the double-rounding cases marked."""

    ref64: torch.Tensor  # float64
    ref32: torch.Tensor  # float32: ties at tiny |x| already resolved; `todo` still to resolve
    near: torch.Tensor  # bool: the float64 value is within the margin of a float32 midpoint
    tie: torch.Tensor  # bool: an exact tie alpha * x, resolved toward zero
    todo: torch.Tensor  # bool: near a midpoint, not such a tie: to be resolved exactly


def _alpha_times_float32_exact(alpha: float) -> bool:
    """alpha * x is exact in float64 for every float32 x: alpha has at most 29 significant bits."""
    if not math.isfinite(alpha) or alpha == 0:
        return False
    m, _ = math.frexp(alpha)
    return float(m * 2**29).is_integer()


def reference(x: torch.Tensor, alpha: float, margin: float = MIDPOINT_MARGIN_ULP64) -> Reference:
    """F.elu in float64, rounded to float32, with the double-rounding cases found.

    Rounding the float64 value to float32 gives the correctly rounded ELU unless the exact value
    and the float64 one lie on different sides of a float32 midpoint; with the float64 value
    within a few of its ulps of the exact one, that needs it within `margin` float64 ulps of a
    midpoint. Those inputs are marked `near`. For tiny |x|, the float64 value is alpha * x
    itself, and with alpha = 1.5 that is a midpoint for every other x: the exact value
    alpha * (x + x^2/2 + ...) lies just on the zero side of it (exp(x) - 1 > x), so the tie is
    resolved toward zero here (`tie`). The rest (`todo`) is resolved with decimal arithmetic by
    `resolve`.
    """
    ref64 = F.elu(x.double(), alpha)
    r32 = ref64.float()
    r32d = r32.double()
    toward = torch.full_like(r32, math.inf).masked_fill_(ref64 < r32d, -math.inf)
    other = torch.nextafter(r32, toward)  # the float32 on ref64's other side
    mid = (r32d + other.double()) * 0.5  # exact in float64
    near = (ref64 != r32d) & torch.isfinite(ref64) & ((ref64 - mid).abs() <= margin * ulp64(ref64))
    if _alpha_times_float32_exact(alpha):
        tie = near & (x.double() * alpha == mid) & (x < 0)
    else:
        tie = torch.zeros_like(near)
    toward_zero = torch.where(r32.abs() <= other.abs(), r32, other)
    ref32 = torch.where(tie, toward_zero, r32)
    return Reference(ref64, ref32, near, tie, near & ~tie)


def resolve(x: torch.Tensor, ref: Reference, alpha: float, limit: int = MAX_DECIMAL) -> dict:
    """Round the `todo` inputs' exact ELU to float32 with decimal arithmetic, in place in ref.ref32."""
    idx = ref.todo.nonzero().flatten()
    n_todo = idx.numel()
    idx = idx[:limit]
    out = {"resolved": int(idx.numel()), "corrected": 0, "unresolved": n_todo - int(idx.numel()), "max_err_ulp64": 0.0}
    if idx.numel() == 0:
        return out
    xs = x[idx].cpu().tolist()
    r64 = ref.ref64[idx].cpu().tolist()
    old = ref.ref32[idx].cpu().numpy()
    new = np.empty_like(old)
    for i, (xi, ri) in enumerate(zip(xs, r64)):
        exact = exact_elu(xi, alpha)
        new[i] = nearest_float32(exact)
        err = abs(_EXACT.subtract(Decimal(ri), exact)) / Decimal(math.ulp(ri))
        out["max_err_ulp64"] = max(out["max_err_ulp64"], float(err))
    out["corrected"] = int((old.view(np.int32) != new.view(np.int32)).sum())
    ref.ref32[idx] = torch.from_numpy(new).to(ref.ref32.device)
    return out


def check_reference(x: torch.Tensor, alpha: float) -> dict:
    """How far the float64 values are from the exact ELU, in float64 ulps, on these inputs."""
    ref = reference(x, alpha)
    worst, at = 0.0, None
    for xi, ri in zip(x.cpu().tolist(), ref.ref64.cpu().tolist()):
        if not math.isfinite(xi) or ri == 0:
            continue
        err = float(abs(_EXACT.subtract(Decimal(ri), exact_elu(xi, alpha))) / Decimal(math.ulp(ri)))
        if err > worst:
            worst, at = err, xi
    return {"n": x.numel(), "max_err_ulp64": worst, "max_err_at": None if at is None else f32_str(at)}


def reference_sample(n: int = 4096, seed: int = 0, device="cpu") -> torch.Tensor:
    """Negative finite float32 inputs spread over every binade (random bit patterns)."""
    g = torch.Generator().manual_seed(seed)
    b = torch.randint(0, 0x7F800000, (n,), generator=g, dtype=torch.int64) | (1 << 31)
    return from_bits(b.tolist(), device)


# -- measurement --------------------------------------------------------------------------------
class _Chunk:
    """One range of inputs with everything that does not depend on the formula."""

    def __init__(self, lo: int, hi: int, alpha: float, device, ref_stats: dict):
        self.lo, self.n, self.alpha = lo, hi - lo, alpha
        self.rows, self.group0 = self.n // BINADE, (lo % 2**32) >> 23
        self.x = patterns(lo, hi, device)
        self.xb = bits32(self.x)
        ref = reference(self.x, alpha)
        ref_stats["near_midpoint"] += int(ref.near.sum())
        n_tie = int(ref.tie.sum())
        ref_stats["exact_ties_tiny_x"] += n_tie
        ref_stats["ties_corrected"] += int((ref.tie & (bits32(ref.ref32) != bits32(ref.ref64.float()))).sum())
        if n_tie:  # sample the ties (the first of each binade) for an exact check
            first = ref.tie.view(self.rows, BINADE).to(torch.uint8).argmax(1)
            rows = ref.tie.view(self.rows, BINADE).any(1).nonzero().flatten()
            ref_stats["tie_sample"] += (self.x[rows * BINADE + first[rows]]).cpu().tolist()
        if ref.todo.any():
            r = resolve(self.x, ref, alpha, MAX_DECIMAL - ref_stats["resolved"])
            for key in ("resolved", "corrected", "unresolved"):
                ref_stats[key] += r[key]
            ref_stats["max_err_ulp64_resolved"] = max(ref_stats["max_err_ulp64_resolved"], r["max_err_ulp64"])
        self.ref64, self.ref32 = ref.ref64, ref.ref32
        del ref
        self.r32b = bits32(self.ref32)
        self.ref_nan = torch.isnan(self.ref64)
        self.ref_pzero, self.ref_nzero = self.r32b == 0, self.r32b == -(2**31)
        self.felu = F.elu(self.x, alpha)
        self.felub = bits32(self.felu)
        self.felu_nan = torch.isnan(self.felu)
        self.parts = bound_parts(self.x, self.ref64)
        self.finite = self.parts["finite"]
        self.cls = classify(self.x)
        self.present = [c for c, k in enumerate(torch.bincount(self.cls, minlength=len(CLASSES)).tolist()) if k]
        r_exp = (self.r32b >> 23) & 0xFF
        self.den_out = self.parts["neg_branch"] & (r_exp == 0) & ((self.r32b & 0x7FFFFF) != 0)
        self.n_den_out = int(self.den_out.sum())

    def location(self, i: int, y: torch.Tensor) -> dict:
        xv, yv = self.x[i].item(), y[i].item()
        return {"x": f32_str(xv), "x_bits": hex_bits(self.xb[i].item()), "y": f32_str(yv),
                "y_bits": hex_bits(bits32(y)[i].item()), "reference": repr(self.ref64[i].item()),
                "reference_f32": f32_str(self.ref32[i].item())}


class _Max:
    """Running maximum over chunks, where it first occurs, and how many inputs reach it."""

    def __init__(self):
        self.value, self.count, self.at = None, 0, None

    def update(self, value: float, count: int, at: Callable[[], dict]):
        if self.value is None or value > self.value:
            self.value, self.count, self.at = value, count, at()
        elif value == self.value:
            self.count += count

    def to_dict(self) -> dict | None:
        return None if self.value is None else {"ulp": self.value, "n_at_max": self.count, "at": self.at}


class _Accumulator:
    """Everything recorded for one formula at one alpha, accumulated chunk by chunk (on the device)."""

    COUNTS = ("n", "correctly_rounded", "bit_identical_to_felu", "differ_from_felu_only_in_nan_bits",
              "nan_mismatch", "zero_sign_mismatch", "inf_error_on_finite_input", "n_exceed_bound",
              "n_exceed_bound_denormal", "tolerance_checked", "tolerance_failed")
    BINADE_MAX = ("max_ulp", "predicted_max_ulp", "max_tol_ratio")
    BINADE_COUNT = ("n_exceed_bound", "n_not_correctly_rounded", "n_differ_from_felu", "n_fail_tol")

    def __init__(self, formula: Formula, device):
        self.formula = formula
        z = lambda *s, dt=torch.int64: torch.zeros(*s, dtype=dt, device=device)  # noqa: E731
        self.counts = z(len(self.COUNTS))
        self.hist = z(2 * N_BINS)
        self.classes = z(len(CLASSES) * 64)
        self.den_out = z(65)
        self.binade = {k: z(N_GROUPS, dt=torch.float64) for k in self.BINADE_MAX}
        self.binade.update({k: z(N_GROUPS) for k in self.BINADE_COUNT})
        self.class_max = [0.0] * len(CLASSES)
        self.den_out_max = 0.0
        self.max = {"negative": _Max(), "positive": _Max()}
        self.tol = _Max()
        self.excess = _Max()

    def update(self, y: torch.Tensor, c: _Chunk):
        y = y.contiguous()
        yb = bits32(y)
        err = ulp_error(y, c.ref64)
        y_nan = torch.isnan(y)
        nan_mismatch = y_nan ^ c.ref_nan
        bins = histogram_bins(err, nan_mismatch)
        self.hist += torch.bincount(bins + N_BINS * (c.xb < 0), minlength=2 * N_BINS)
        del bins
        inf_err = torch.isinf(err) & c.finite
        err.masked_fill_(torch.isinf(err), 0.0)  # maxima are over finite errors; infinite ones are counted
        rows, g = c.rows, slice(c.group0, c.group0 + c.rows)
        pred = predicted_ulp(c.x, c.ref64, c.alpha, self.formula, c.parts)
        self.binade["predicted_max_ulp"][g] = torch.maximum(self.binade["predicted_max_ulp"][g],
                                                            pred.view(rows, -1).amax(1))
        exceed = ((err > pred * (1 + 1e-12) + 1e-9) & c.finite) | inf_err
        excess = torch.where(c.finite, err - pred, -math.inf)
        del pred
        ratio = (y.double() - c.felu.double()).abs_().div_(c.felu.double().abs_().mul_(TOL).add_(TOL))
        ratio = torch.where(c.finite, ratio.masked_fill_(torch.isnan(ratio), math.inf), 0.0)
        fail = ~torch.isclose(y, c.felu, rtol=TOL, atol=TOL) & c.finite
        cr = (yb == c.r32b) | (y_nan & c.ref_nan)
        identical = yb == c.felub
        pzero, nzero = yb == 0, yb == -(2**31)
        zero_sign = (pzero & c.ref_nzero) | (nzero & c.ref_pzero)
        self.counts += torch.stack([
            torch.tensor(c.n, device=y.device), cr.sum(), identical.sum(), (~identical & y_nan & c.felu_nan).sum(),
            nan_mismatch.sum(), zero_sign.sum(), inf_err.sum(), exceed.sum(),
            (exceed & c.parts["denormal_in_or_out"]).sum(), c.finite.sum(), fail.sum(),
        ])
        flags = (cr.to(torch.int32) | identical.to(torch.int32) << 1 | y_nan.to(torch.int32) << 2
                 | pzero.to(torch.int32) << 3 | nzero.to(torch.int32) << 4 | (yb == c.xb).to(torch.int32) << 5)
        self.classes += torch.bincount(c.cls * 64 + flags, minlength=len(CLASSES) * 64)
        if c.n_den_out:
            self.den_out += torch.bincount(flags.masked_fill(~c.den_out, 64), minlength=65)
        del flags

        self.binade["max_ulp"][g] = torch.maximum(self.binade["max_ulp"][g], err.view(rows, -1).amax(1))
        finite_ratio = ratio.masked_fill(torch.isinf(ratio), 0.0)
        self.binade["max_tol_ratio"][g] = torch.maximum(self.binade["max_tol_ratio"][g],
                                                        finite_ratio.view(rows, -1).amax(1))
        self.binade["n_exceed_bound"][g] += exceed.view(rows, -1).sum(1)
        self.binade["n_not_correctly_rounded"][g] += (~cr).view(rows, -1).sum(1)
        self.binade["n_differ_from_felu"][g] += (~identical).view(rows, -1).sum(1)
        self.binade["n_fail_tol"][g] += fail.view(rows, -1).sum(1)

        # Maxima: one transfer for the values and where they first occur.
        m_err = err.max()
        m_exc = excess.max()
        m_tol = ratio.max()
        vals = torch.stack([
            m_err, err.argmax().double(), (err == m_err).sum().double(),
            m_exc, excess.argmax().double(), (excess == m_exc).sum().double(),
            m_tol, ratio.argmax().double(), (ratio == m_tol).sum().double(),
            exceed.sum().double(),
        ]).tolist()
        sign = "negative" if c.lo < 0 else "positive"
        self.max[sign].update(vals[0], int(vals[2]), lambda: c.location(int(vals[1]), y))
        if vals[9] > 0:
            self.excess.update(vals[3], int(vals[5]), lambda: c.location(int(vals[4]), y))
        if c.finite.any():
            self.tol.update(vals[6], int(vals[8]), lambda: c.location(int(vals[7]), y))
        if len(c.present) == 1:
            self.class_max[c.present[0]] = max(self.class_max[c.present[0]], vals[0])
        else:
            per_class = torch.stack([torch.where(c.cls == k, err, -1.0).max() for k in c.present]).tolist()
            for k, v in zip(c.present, per_class):
                self.class_max[k] = max(self.class_max[k], v)
        if c.n_den_out:
            self.den_out_max = max(self.den_out_max, torch.where(c.den_out, err, -1.0).max().item())

    def to_dict(self, negative_groups: slice = slice(256, 512)) -> dict:
        counts = dict(zip(self.COUNTS, self.counts.tolist()))
        hist = self.hist.view(2, N_BINS).tolist()
        classes = self.classes.view(len(CLASSES), 64).tolist()

        def flag_counts(row64: list[int]) -> dict:
            d = {"n": sum(row64)}
            for bit, name in enumerate(FLAGS):
                d[name] = sum(v for combo, v in enumerate(row64) if combo >> bit & 1)
            return d

        class_stats = {}
        for k, label in enumerate(CLASSES):
            d = flag_counts(classes[k])
            if d["n"]:
                d["max_ulp"] = self.class_max[k]
                class_stats[label] = d
        den = flag_counts(self.den_out.tolist()[:64])
        if den["n"]:
            den["max_ulp"] = self.den_out_max
        class_stats[DENORMAL_OUTPUT] = den
        binades = {k: [_short(v) for v in t[negative_groups].tolist()] for k, t in self.binade.items()}
        return {
            "n": counts["n"],
            "max_ulp": {sign: m.to_dict() for sign, m in self.max.items()},
            "histogram": {"negative": hist[1], "positive": hist[0]},
            **{k: counts[k] for k in self.COUNTS
               if k not in ("n", "n_exceed_bound", "n_exceed_bound_denormal", "tolerance_checked", "tolerance_failed")},
            "tolerance": {"n_checked": counts["tolerance_checked"], "n_fail": counts["tolerance_failed"],
                          "max_ratio": self.tol.value, "max_ratio_at": self.tol.at},
            "bound": {"exponential": self.formula.exponential, "documented": self.formula.documented_bound,
                      "n_exceed": counts["n_exceed_bound"],
                      "n_exceed_denormal_in_or_out": counts["n_exceed_bound_denormal"],
                      "max_excess_ulp": self.excess.value,
                      "max_excess_at": self.excess.at},
            "classes": class_stats,
            "binades_negative": binades,
        }


def _short(v: float) -> float | int:
    if isinstance(v, int) or v == 0:
        return v
    return float(f"{v:.5g}")


def _evaluators(formulas, same_as) -> dict[str, Callable]:
    from elu_study.core.build import compile_variant

    fns = {}
    for f in formulas:
        if f.variant:
            module = compile_variant(f.variant)
            fns[f.name] = lambda x, a, m=module: m.elu(x, a)
        elif f.name == "F.elu":
            fns[f.name] = lambda x, a: F.elu(x, a)
        elif f.name == "torch.compile(F.elu)":
            compiled = torch.compile(F.elu)
            fns[f.name] = lambda x, a, c=compiled: c(x, a)
        else:
            raise ValueError(f"no way to run formula {f.name!r}")
    for name in same_as:
        module = compile_variant(name)
        fns[name] = lambda x, a, m=module: m.elu(x, a)
    return fns


@contextlib.contextmanager
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def measure(
    alphas=ALPHAS,
    formulas=FORMULAS,
    same_as=SAME_AS,
    *,
    ranges=((-(2**31), 2**31),),
    chunk_log2: int = CHUNK_LOG2,
    device="cuda",
    evaluators: dict[str, Callable] | None = None,
    progress: bool = True,
) -> dict:
    """Run every input of the ranges through every formula; return the record's body (no provenance).

    ranges: [lo, hi) bit-pattern ranges, read as int32 (default: all 2^32), each in whole binades (2^23).
    evaluators: {name: (x, alpha) -> y} instead of building the kernels (the tests use CPU stand-ins).
    """
    chunk = 1 << chunk_log2
    starts = []
    for lo, hi in ranges:
        step = min(chunk, hi - lo)
        if step < BINADE or lo % BINADE or (hi - lo) % step or (lo < 0 < hi and lo % step):
            raise ValueError(f"[{lo}, {hi}) in chunks of {step}: chunks must be whole binades (2^23) and not straddle 0")
        patterns(lo, lo + 1)  # checks the range's bounds
        starts += [(s, s + step) for s in range(lo, hi, step)]
    chunk = max(hi - lo for lo, hi in starts)
    same_as = {k: v for k, v in same_as.items() if v in {f.name for f in formulas}}
    with quiet():
        fns = evaluators if evaluators is not None else _evaluators(formulas, same_as)
        warm = torch.zeros(chunk, dtype=torch.float32, device=device)
        for alpha in alphas:  # torch.compile compiles on its first call: not inside the timed loop
            for name in (*(f.name for f in formulas), *same_as):
                fns[name](warm, alpha)
        del warm
        if str(device).startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(alphas) * len(starts), desc="every float32 input", unit="chunk")
        runs = {}
        for alpha in alphas:
            ref_stats = {"near_midpoint": 0, "exact_ties_tiny_x": 0, "ties_corrected": 0, "resolved": 0,
                         "corrected": 0, "unresolved": 0, "max_err_ulp64_resolved": 0.0, "tie_sample": []}
            acc = {f.name: _Accumulator(f, device) for f in formulas}
            differ = {name: torch.zeros((), dtype=torch.int64, device=device) for name in same_as}
            for start, stop in starts:
                c = _Chunk(start, stop, alpha, device, ref_stats)
                for f in formulas:
                    y = c.felu if f.name == "F.elu" else fns[f.name](c.x, alpha)
                    for name, target in same_as.items():
                        if target == f.name:
                            differ[name] += (bits32(fns[name](c.x, alpha)) != bits32(y)).sum()
                    acc[f.name].update(y, c)
                    del y
                del c
                if bar is not None:
                    bar.set_postfix(alpha=alpha)
                    bar.update()
            runs[_key(alpha)] = {
                "reference": _reference_summary(ref_stats, alpha, device),
                "same_as": {name: {"as": target, "n_differ": int(differ[name])} for name, target in same_as.items()},
                "formulas": {name: a.to_dict() for name, a in acc.items()},
            }
        if bar is not None:
            bar.close()
        seconds = time.perf_counter() - t0
        specials = _specials(fns, formulas, alphas, device)
    peak = torch.cuda.max_memory_allocated() / 2**30 if str(device).startswith("cuda") else None
    n_inputs = sum(hi - lo for lo, hi in starts)
    return {
        "method": {**METHOD, "pattern_ranges": [list(r) for r in ranges], "n_inputs": n_inputs,
                   "every_input": n_inputs == 2**32, "chunk": chunk, "alphas": list(alphas),
                   "margin_ulp64": MIDPOINT_MARGIN_ULP64, "histogram_labels": list(HIST_LABELS),
                   "classes": list(CLASSES), "seconds": round(seconds, 1),
                   "peak_gpu_memory_gib": None if peak is None else round(peak, 1)},
        "formulas": [{"name": f.name, "what": f.what, "exponential": f.exponential,
                      "documented_bound": f.documented_bound, "variant": f.variant,
                      "flushes_denormals": f.flushes_denormals, "fast_math": f.fast_math} for f in formulas],
        "runs": runs,
        "specials": specials,
    }


def _key(alpha: float) -> str:
    return repr(float(alpha))


def _reference_summary(s: dict, alpha: float, device) -> dict:
    ties = s.pop("tie_sample")
    disagree = 0
    if ties:
        x = torch.tensor(ties, dtype=torch.float32, device=device)
        got = reference(x, alpha).ref32.cpu().numpy()
        want = np.array([correctly_rounded_elu(v, alpha) for v in ties], dtype=np.float32)
        disagree = int((got.view(np.int32) != want.view(np.int32)).sum())
    sample = check_reference(reference_sample(device=device), alpha)
    return {"margin_ulp64": MIDPOINT_MARGIN_ULP64, **s,
            "tie_check": {"n": len(ties), "disagree": disagree},
            "sample_check": sample}


def _specials(fns, formulas, alphas, device) -> dict:
    bits = [b for _, b in SPECIAL_INPUTS]
    x = from_bits(bits, device)
    out = {"inputs": [{"label": label, "x_bits": hex_bits(b), "x": f32_str(from_bits([b]).item())}
                      for label, b in SPECIAL_INPUTS], "outputs": {}}
    for alpha in alphas:
        ref = reference(x, alpha)
        correct = [None if math.isnan(v) else hex_bits(int(correctly_rounded_elu(v, alpha).view(np.uint32)))
                   for v in x.cpu().tolist()]
        outputs = {"reference (correctly rounded)": correct, "float64 reference": [repr(v) for v in ref.ref64.cpu().tolist()]}
        for f in formulas:
            y = fns[f.name](x, alpha)
            outputs[f.name] = [hex_bits(b) for b in bits32(y).cpu().tolist()]
        out["outputs"][_key(alpha)] = outputs
    return out


# -- the record ---------------------------------------------------------------------------------
def record_path(gpu_name_or_slug: str) -> Path:
    return results.record_path(gpu_name_or_slug, "accuracy")


def save(record: dict, path: Path | None = None) -> Path:
    path = path or record_path(record["provenance"]["gpu"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(record) + "\n")
    return path


def summary_lines(record: dict) -> list[str]:
    lines = []
    for key, run in record["runs"].items():
        for name, s in run["formulas"].items():
            neg = s["max_ulp"]["negative"] or {"ulp": float("nan"), "at": {"x": "-"}}
            lines.append(
                f"alpha {key:>4} {name:<22} max {neg['ulp']:.4g} ulp (x < 0, at x = {neg['at']['x']}); "
                f"bit-identical to F.elu: {s['bit_identical_to_felu'] / s['n']:.4%}; correctly rounded: "
                f"{s['correctly_rounded'] / s['n']:.4%}; atol = rtol = 1e-4 fails: {s['tolerance']['n_fail']}; "
                f"above the documented bound: {s['bound']['n_exceed']}"
            )
        for name, d in run["same_as"].items():
            lines.append(f"alpha {key:>4} {name} differs from {d['as']} on {d['n_differ']} inputs")
        r = run["reference"]
        lines.append(f"alpha {key:>4} reference: {r['near_midpoint']} inputs near a float32 midpoint; "
                     f"{r['ties_corrected'] + r['corrected']} roundings corrected; {r['unresolved']} unresolved")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m elu_study accuracy",
        description="Every float32 input through every formula the study uses: ulp error against float64 "
                    "(needs a CUDA GPU; writes results/<gpu>-accuracy.json).",
    )
    parser.add_argument("--chunk-log2", type=int, default=CHUNK_LOG2,
                        help=f"inputs per chunk, as a power of 2 (default {CHUNK_LOG2}: under 10 GB of GPU memory)")
    parser.add_argument("--jobs", type=int, default=None, help="parallel kernel builds (default: half the cores)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("python -m elu_study accuracy needs a CUDA GPU: it runs every float32 input through the built kernels. "
              f"The recorded run is results/{REFERENCE_GPU}-accuracy.json; notebooks/07_accuracy.ipynb shows it.",
              file=sys.stderr)
        return 2
    from elu_study.core.build import build_all
    from elu_study.core.hardware import provenance

    build_all(sorted({(f.variant, ()) for f in FORMULAS if f.variant} | {(v, ()) for v in SAME_AS}), workers=args.jobs)
    body = measure(chunk_log2=args.chunk_log2)
    record = {"schema": SCHEMA, "provenance": provenance(), **body}
    path = save(record)
    print("\n".join(summary_lines(record)))
    m = record["method"]
    print(f"\n{m['n_inputs']} inputs x {len(m['alphas'])} alphas in {m['seconds']} s "
          f"(peak GPU memory {m['peak_gpu_memory_gib']} GiB); wrote {path}")
    for run in record["runs"].values():
        for name, d in run["same_as"].items():
            if d["n_differ"]:
                print(f"NOTE: {name} is not bit-identical to {d['as']} ({d['n_differ']} inputs)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
