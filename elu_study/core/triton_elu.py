"""Peer: ELU as the Triton tutorials write an elementwise kernel (vector add), autotuned over BLOCK_SIZE and num_warps,
with 64-bit offsets (past 2^31 elements) and an autotuning key of the length's power-of-two size class (a sweep tunes
once per class). 16-bit inputs use float32 math with libdevice's expm1 and one rounding, as PyTorch does; float32 keeps
the tutorial's exp - 1. ``elu_study`` imports this module (and triton) only when needed."""

import contextlib
import functools

import torch
import triton
import triton.language as tl
import triton.testing
from triton.language.extra import libdevice

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
CONFIGS = [triton.Config({"BLOCK_SIZE": b}, num_warps=w) for b in (1024, 2048, 4096, 8192) for w in (4, 8)]
# Shorter than autotune's default (25 ms warm-up, 100 ms): a sweep tunes once per size class.
_BENCH = functools.partial(triton.testing.do_bench, warmup=5, rep=20)


@triton.autotune(configs=CONFIGS, key=["size_class"], do_bench=_BENCH)
@triton.jit
def elu_kernel(x_ptr, y_ptr, n_elements, alpha, size_class, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0).to(tl.int64)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    # "x > 0" as in kernels/common/elu.cuh: NaN takes the exp branch and stays NaN.
    if x.dtype == tl.float32:
        y = tl.where(x > 0, x, alpha * (tl.exp(x) - 1.0))
    else:  # 16-bit storage: PyTorch's formula in float32, rounded once by the store
        xf = x.to(tl.float32)
        y = tl.where(xf > 0, xf, libdevice.expm1(xf) * alpha)
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


def size_class(n: int) -> int:
    """The autotuning key: lengths in [2^(k-1), 2^k) share one tuned config."""
    return int(n).bit_length()


def elu(x: torch.Tensor, alpha: float = 1.0, out: torch.Tensor | None = None) -> torch.Tensor:
    """ELU(x) with the Triton kernel on float32, float16 or bfloat16 CUDA tensors of any length and layout
    (non-contiguous ones copied first); ``out`` must be contiguous and of x's shape; ``out=x`` works."""
    if not isinstance(x, torch.Tensor) or not x.is_cuda:
        raise ValueError(f"elu: input must be a CUDA tensor, got {type(x).__name__} on "
                         f"{getattr(x, 'device', 'no device')}")
    if x.dtype not in DTYPES:
        raise TypeError(f"elu: input must be float32, float16 or bfloat16, got {x.dtype}")
    alpha = float(alpha)
    if alpha != alpha or alpha in (float("inf"), float("-inf")):
        raise ValueError(f"elu: alpha must be finite, got {alpha}")
    xc = x.contiguous()
    if out is None:
        out = torch.empty_like(xc, memory_format=torch.contiguous_format)
    elif not out.is_cuda or out.device != x.device:
        raise ValueError(f"elu: out is on {out.device} but input is on {x.device}")
    elif out.dtype != x.dtype:
        raise TypeError(f"elu: out must be {str(x.dtype).removeprefix('torch.')} like the input, got {out.dtype}")
    elif out.shape != x.shape:
        raise ValueError(f"elu: out has shape {tuple(out.shape)} but input has shape {tuple(x.shape)}")
    elif not out.is_contiguous():
        raise ValueError("elu: out must be contiguous")
    n = xc.numel()
    if n == 0:
        return out
    if out.untyped_storage().data_ptr() == xc.untyped_storage().data_ptr():
        # In place: autotuning runs the kernel once per config, which would apply ELU to x repeatedly.
        return out.copy_(elu(xc, alpha))
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
    with contextlib.nullcontext() if x.device.index == torch.cuda.current_device() else torch.cuda.device(x.device):
        elu_kernel[grid](xc, out, n, alpha, size_class(n))  # Triton launches on the current device and stream
    return out
