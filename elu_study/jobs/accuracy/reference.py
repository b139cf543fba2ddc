"""Bit patterns, ulps, documented bounds carried through ELU and the correctly rounded reference: F.elu in float64
(CUDA's double expm1: 1 float64 ulp) rounded to float32, where that rounding could differ from the exact value's
(near a float32 midpoint) resolved exactly. An output's error is in float32 ulps of the float64 value v (not of its
float32 rounding): a correctly rounded output is within 1/2."""

import math
from dataclasses import dataclass
from decimal import Context, Decimal

import numpy as np
import torch
import torch.nn.functional as F

from elu_study.jobs.accuracy.definitions import MAX_DECIMAL, MIDPOINT_MARGIN_ULP64, Formula

_EXACT = Context(prec=200)  # enough digits for exp(x) - 1 at x = -2^-149 and 150 digits more


# -- bits and ulps ------------------------------------------------------------------------------
def patterns(lo: int, hi: int, device="cpu") -> torch.Tensor:
    """The float32 values whose bit patterns, read as int32, are lo .. hi - 1 (-2^31: -0.0, 0: +0.0)."""
    if not -(2**31) <= lo < hi <= 2**31:
        raise ValueError(f"pattern range [{lo}, {hi}) is not inside [-2^31, 2^31)")
    return torch.arange(lo, hi, dtype=torch.int64, device=device).to(torch.int32).view(torch.float32)


def bits32(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32)


def _binade_pow2(v: torch.Tensor, below: int, lowest: int) -> torch.Tensor:
    """2^max(floor(log2|v|) - below, lowest) as float64, exactly (read from and built from the bits; lowest >= -1022)."""
    k = ((v.double().contiguous().view(torch.int64) >> 52) & 0x7FF) - 1023 - below
    return ((torch.clamp(k, min=lowest) + 1023) << 52).view(torch.float64)


def ulp32(v: torch.Tensor) -> torch.Tensor:
    """float32 ulp in |v|'s binade, float64 in and out: 2^(max(floor(log2|v|), -126) - 23); inf/NaN: a large 2^k."""
    return _binade_pow2(v, 23, -149)


def ulp64(v: torch.Tensor) -> torch.Tensor:
    """float64 ulp in the binade of |v| (at least 2^-1022: ELU's values never come near that)."""
    return _binade_pow2(v, 52, -1022)


def classify(x: torch.Tensor) -> torch.Tensor:
    """Index into CLASSES for each input (int32): normal, denormal, zero, inf (each + then -), NaN."""
    b = bits32(x)
    e, m = (b >> 23) & 0xFF, b & 0x7FFFFF
    kind = torch.where(e == 0, torch.where(m == 0, 4, 2), torch.where(e == 255, torch.where(m == 0, 6, 8), 0))
    return (kind + ((b < 0) & (kind != 8))).to(torch.int32)


def ulp_error(y: torch.Tensor, ref64: torch.Tensor) -> torch.Tensor:
    """|y - ref64| in float32 ulps of ref64's binade (float64). Both NaN, or equal: 0 (a zero of the other sign is
    counted apart); NaN against a number, or a wrong infinity: inf."""
    yd = y.double()
    err = (yd - ref64).abs_().div_(ulp32(ref64))
    same = (yd == ref64) | (torch.isnan(yd) & torch.isnan(ref64))
    err.masked_fill_(same, 0.0)
    return err.masked_fill_(torch.isnan(err), math.inf)


def predicted_ulp(x, ref64, alpha: float, formula: Formula, parts: dict | None = None) -> torch.Tensor:
    """The ulp error the exponential's documented bound B allows for ELU (parts: bound_parts). CUDA counts B from the
    correctly rounded result: B + 1/2 ulp from the exact value, then half an ulp where e^x - 1 or alpha's product
    rounds; a flushed denormal input or output loses all of it."""
    p = parts if parts is not None else bound_parts(x, ref64)
    if formula.exponential in ("expm1f", "expm1-poly"):  # 1 ulp of expm1f, or the 2-ulp target; then rounding
        core = (1.5 if formula.exponential == "expm1f" else 2.5) * p["ulp_d"]
    elif formula.exponential in ("expf", "__expf"):
        b = 2.5 if formula.exponential == "expf" else 2.5 + torch.floor((1.173 * x.double()).abs_())
        core = b * p["ulp_e"] + 0.5 * p["ulp_d"] * p["sub"]
    else:
        raise ValueError(f"no documented bound for {formula.exponential!r}")
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
        "denormal_in_or_out": ((xd.abs() < 2.0**-126) & (xd != 0)) | ((ref64.abs() < 2.0**-126) & (ref64 != 0)),
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
    """ELU(x) correctly rounded to float32 (x > 0 is its own result; -0.0 gives -0.0, as expm1(-0.0) = -0.0)."""
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


def reference(x: torch.Tensor, alpha: float, margin: float = MIDPOINT_MARGIN_ULP64) -> Reference:
    """F.elu in float64 rounded to float32; `near`: within `margin` float64 ulps of a float32 midpoint. Ties alpha * x
    at tiny |x| go toward zero, as exp(x) - 1 > x (`tie`); the rest (`todo`) is for `resolve`."""
    ref64 = F.elu(x.double(), alpha)
    r32 = ref64.float()
    r32d = r32.double()
    toward = torch.full_like(r32, math.inf).masked_fill_(ref64 < r32d, -math.inf)
    other = torch.nextafter(r32, toward)  # the float32 on ref64's other side
    mid = (r32d + other.double()) * 0.5  # exact in float64
    near = (ref64 != r32d) & torch.isfinite(ref64) & ((ref64 - mid).abs() <= margin * ulp64(ref64))
    # A tie is alpha * x itself, where that product is exact in float64: alpha has at most 29 significant bits.
    tie = near & (x.double() * alpha == mid) & (x < 0) & float(math.frexp(alpha)[0] * 2**29).is_integer()
    toward_zero = torch.where(r32.abs() <= other.abs(), r32, other)
    ref32 = torch.where(tie, toward_zero, r32)
    return Reference(ref64, ref32, near, tie, near & ~tie)


def resolve(x: torch.Tensor, ref: Reference, alpha: float, limit: int = MAX_DECIMAL) -> dict:
    """Round the `todo` inputs' exact ELU to float32 with decimal arithmetic, in place in ref.ref32."""
    todo = ref.todo.nonzero().flatten()
    idx = todo[:limit]
    old = ref.ref32[idx].cpu().numpy()
    new = np.array([nearest_float32(exact_elu(xi, alpha)) for xi in x[idx].cpu().tolist()], dtype=np.float32)
    ref.ref32[idx] = torch.from_numpy(new).to(ref.ref32.device)
    return {"resolved": idx.numel(), "corrected": int((old.view(np.int32) != new.view(np.int32)).sum()),
            "unresolved": todo.numel() - idx.numel()}


def check_reference(x: torch.Tensor, alpha: float) -> dict:
    """How far the float64 values are from the exact ELU, in float64 ulps of each, on these inputs."""
    errs = [float(abs(_EXACT.subtract(Decimal(r), exact_elu(xi, alpha))) / Decimal(math.ulp(r)))
            for xi, r in zip(x.cpu().tolist(), reference(x, alpha).ref64.cpu().tolist()) if math.isfinite(xi) and r != 0]
    return {"n": x.numel(), "max_err_ulp64": max(errs, default=0.0)}


def reference_sample(n: int = 4096, seed: int = 0, device="cpu") -> torch.Tensor:
    """Negative finite float32 inputs spread over every binade (random bit patterns)."""
    b = torch.randint(0, 0x7F800000, (n,), generator=torch.Generator().manual_seed(seed)) - 2**31  # the sign bit set
    return b.to(torch.int32).view(torch.float32).to(device)
