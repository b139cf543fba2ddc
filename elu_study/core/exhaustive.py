"""Every input of a 16-bit dtype, bit for bit, through a kernel's forward (vs ``F.elu``) or backward (vs
``aten.elu_backward``) at many alphas into a NaN-poisoned output; and the float32 backward vs aten at full size."""

import torch
import torch.nn.functional as F

from elu_study.core.check import ATOL, RTOL

REQUIRED_ALPHAS = (1.0, 0.5, 0.0, -0.7, 1.3, 2.5)  # the issue's: bit-identical at each of these
# Around the check's alpha range ([2^-100, 2^100] or 0) and beyond it, where the kernel takes expm1f.
EXTREME_ALPHAS = (1e-30, 1e30, -1e-3, 2.0 ** -100, 2.0 ** 100, 2.0 ** -101, 2.0 ** 101)
RANDOM_ALPHAS, ALPHA_SEED = 64, 7
POISON = 0x7FC1  # a NaN (in either dtype) with a payload F.elu never returns: an unwritten output shows
POISON32 = 0x7FA5A5A5  # the float32 backward's: a NaN pattern aten never returns


def alphas() -> list[float]:
    """The required alphas, 64 seeded random ones (randn x 3, float32 values) and the extremes."""
    gen = torch.Generator().manual_seed(ALPHA_SEED)
    drawn = (torch.randn(RANDOM_ALPHAS, generator=gen) * 3).tolist()
    return [*REQUIRED_ALPHAS, *drawn, *EXTREME_ALPHAS]


def patterns(dtype: str) -> torch.Tensor:
    """Every 16-bit bit pattern of a dtype, in order of the signed integer (-32768 .. 32767)."""
    bits = torch.arange(-32768, 32768, dtype=torch.int32, device="cuda").to(torch.int16)
    return bits.view(getattr(torch, dtype))


def check_patterns(module, dtype: str, alpha_list) -> dict:
    """Every bit pattern of a dtype through ``module.elu(x, alpha, out=)``, bit for bit against F.elu, at each alpha."""
    x = patterns(dtype)
    bad, untouched = {}, 0
    for a in alpha_list:
        out = poisoned(x.dtype)
        module.elu(x, a, out=out)
        n, unwritten = differences(out, F.elu(x, a))
        if n:
            bad[a] = n
        untouched += unwritten
    return tally(dtype, alpha_list, bad, untouched)


def poisoned(dtype: torch.dtype) -> torch.Tensor:
    """An output for every bit pattern, filled with POISON: an element the kernel never writes shows."""
    return torch.full((1 << 16,), POISON, dtype=torch.int16, device="cuda").view(dtype)


def differences(out: torch.Tensor, ref: torch.Tensor) -> tuple[int, int]:
    """(outputs whose bits differ from the reference's, outputs left unwritten)."""
    got, want = out.view(torch.int16), ref.view(torch.int16)
    return int((got != want).sum()), int(((got == POISON) & (want != POISON)).sum())


def tally(dtype: str, alpha_list, bad: dict, untouched: int, grads: int = 0) -> dict:
    required = [a for a in alpha_list if a in REQUIRED_ALPHAS]
    out = {"dtype": dtype, "inputs": 1 << 16, "alphas": len(alpha_list), "mismatches": sum(bad.values()),
           "required_alphas": required, "required_mismatches": sum(bad.get(a, 0) for a in required),
           "alphas_with_mismatches": len(bad), "untouched": untouched}
    return {**out, "grads": grads} if grads else out


def grads_for(dtype: str) -> list[torch.Tensor]:
    """One grad per pass over every x: randn at three scales, every bit pattern reversed (NaN, inf, 0...) and ones."""
    t = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(99)
    drawn = [(torch.randn(1 << 16, device="cuda", generator=gen) * s).to(t) for s in (1e-3, 1.0, 1e3)]
    return [*drawn, patterns(dtype).flip(0), torch.ones(1 << 16, device="cuda", dtype=t)]


def check_backward(module, dtype: str, alpha_list) -> dict:
    """Every bit pattern as x, with each of ``grads_for``, bit for bit against aten.elu_backward; for alpha >= 0
    also from the result y = F.elu(x) (is_result, as in-place elu_ saves it)."""
    x = patterns(dtype)
    bad, untouched = {}, 0
    for a in alpha_list:
        for g in grads_for(dtype):
            cases = [(False, x)] + ([(True, F.elu(x, a))] if a >= 0 else [])
            for is_result, v in cases:
                out = poisoned(x.dtype)
                module.elu_backward(g, v, a, is_result, out=out)
                n, unwritten = differences(out, torch.ops.aten.elu_backward(g, a, 1, 1, is_result, v))
                if n:
                    bad[a] = bad.get(a, 0) + n
                untouched += unwritten
    return tally(dtype, alpha_list, bad, untouched, grads=len(grads_for(dtype)))


def check_backward32(module, x: torch.Tensor, grad: torch.Tensor, alpha: float) -> dict:
    """A float32 backward into a poisoned output vs ``aten.elu_backward``: bit mismatches, the largest difference,
    and whether every output is written and within core.check's ATOL and RTOL."""
    out = torch.full(x.shape, POISON32, dtype=torch.int32, device=x.device).view(torch.float32)
    module.elu_backward(grad, x, alpha, False, out=out)
    want = torch.ops.aten.elu_backward(grad, alpha, 1, 1, False, x)
    differ = out.view(torch.int32) != want.view(torch.int32)
    untouched = int((out.view(torch.int32) == POISON32).sum())
    worst = float((out - want).abs().nan_to_num(float("inf")).max())
    close = bool(torch.isclose(out, want, rtol=RTOL, atol=ATOL, equal_nan=True).all())
    return {"against": "aten.elu_backward", "elements": x.numel(), "alpha": alpha, "grad": "randn, seed 4321",
            "bit_mismatches": int(differ.sum()), "max_abs_err": worst, "untouched": untouched,
            "passed": close and untouched == 0}
