"""Correctness: every element written, within the task's tolerance of F.elu, and how far from float64."""

import math
from dataclasses import asdict, dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from elu_study.core.hardware import SHAPE

ATOL = RTOL = 1e-4  # the original task's bar for float32
INPUT_SCALE = 4.0  # randn * 4: about half the inputs take the exp branch, down to exp(-20)

EluFn = Callable[[torch.Tensor, float, torch.Tensor], torch.Tensor]  # (x, alpha, out) -> out


@dataclass
class CheckResult:
    passed: bool
    trials: int
    unwritten: int  # NaN-poisoned outputs left untouched (randn inputs hold no NaN)
    max_abs_err_vs_torch: float
    max_abs_err_vs_fp64: float

    def to_dict(self) -> dict:
        return asdict(self)


def fp64_error(y: torch.Tensor, x: torch.Tensor, alpha: float, chunk: int = 1 << 26) -> float:
    """Max absolute error of y against ELU computed in float64, in chunks to bound memory."""
    xf, yf = x.reshape(-1), y.reshape(-1)
    return max(((yf[s : s + chunk].double() - F.elu(xf[s : s + chunk].double(), alpha)).abs().max().item()
                for s in range(0, xf.numel(), chunk)), default=0.0)


def ulp_error(got: torch.Tensor, x: torch.Tensor, alpha: float) -> torch.Tensor:
    """|got - ELU(x)| in float32 ulps of the exact ELU(x) (float64 expm1), for finite x; 0 where both agree."""
    exact = torch.where(x > 0, x.double(), alpha * torch.expm1(x.double()))
    _, e = torch.frexp(exact.float())  # an exact 0 has e = 0: its ulp is the least denormal's, as below 2^-126
    e = torch.where(exact == 0, torch.full_like(e, -149 + 24), e)
    err = (got.double() - exact).abs() / torch.ldexp(torch.ones_like(exact), (e - 24).clamp(min=-149))
    return torch.where(got.double() == exact, torch.zeros_like(err), err)


def max_ulp(y: torch.Tensor, x: torch.Tensor, alpha: float, chunk: int = 1 << 26) -> float:
    """The largest ``ulp_error`` of y over finite x, in chunks to bound memory; inf where y is NaN."""
    xf, yf = x.reshape(-1), y.reshape(-1)
    return max((float(ulp_error(yf[s : s + chunk], xf[s : s + chunk], alpha).nan_to_num(math.inf).max())
                for s in range(0, xf.numel(), chunk)), default=0.0)


def check_elu(fn: EluFn, shape=SHAPE, alpha: float = 1.0, trials: int = 3, device: str = "cuda") -> CheckResult:
    """Run fn on fresh scaled-randn inputs (seeds 0 .. trials - 1) into a NaN-poisoned output and compare with F.elu."""
    passed, unwritten, abs_torch, abs_64 = True, 0, 0.0, 0.0
    for trial in range(trials):
        gen = torch.Generator(device=device).manual_seed(trial)
        x = torch.randn(shape, device=device, generator=gen).mul_(INPUT_SCALE)
        out = torch.full_like(x, float("nan"))
        y = fn(x, alpha, out)
        if x.is_cuda:
            torch.cuda.synchronize()
        ref = F.elu(x, alpha)
        unwritten += int(torch.isnan(y).sum().item())
        passed &= bool(torch.allclose(y, ref, atol=ATOL, rtol=RTOL))
        abs_torch = max(abs_torch, (y - ref).abs().max().item())
        del ref
        abs_64 = max(abs_64, fp64_error(y, x, alpha))
        del x, out, y
    return CheckResult(passed and unwritten == 0, trials, unwritten, abs_torch, abs_64)

