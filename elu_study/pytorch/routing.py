"""Which computes ELU of a tensor: a study kernel (and which build), or PyTorch. Metadata only, no GPU.

The rule (``elu_study.pytorch.library`` and ``elu_study.ELU`` follow it; README "Use a kernel in a model"):

- a float32 CUDA tensor: the kernel of ``variant`` (default ``2_float4``);
- a float16 or bfloat16 CUDA tensor: a build with a 16-bit path (``// elu-study: binding = storage16`` in its
  file): ``variant16`` if given, else ``variant`` if its file has that path, else ``6_beyond_copy`` (step 6,
  bit for bit ``F.elu`` at 16 bits: results/nvidia-h200-beyond.json);
- anything else, which no study kernel computes (a CPU or other device, float64, an integer or complex
  dtype, a sparse or nested tensor, a non-finite alpha): PyTorch (``F.elu``, ``aten.elu_backward``), with
  PyTorch's results and errors;
- with ``strict=True``, a kernel or an error (``no_kernel``) that names what no kernel takes.

The backward kernel (kernels/common/backward.cu) is float32: the backward of a 16-bit tensor is
``aten.elu_backward``'s in every mode (PyTorch's gradients, bit for bit).
"""

from __future__ import annotations

import functools
import math
import numbers

import torch

from elu_study.core.build import binding_features, resolve_variant

DEFAULT_VARIANT = "2_float4"
DEFAULT_VARIANT16 = "6_beyond_copy"
STORAGE16 = "storage16"
SIXTEEN_BITS = (torch.float16, torch.bfloat16)
# The device type the kernels run on; tests/test_library.py sets "cpu" with a stand-in module.
KERNEL_DEVICE = "cuda"
RULE = (
    "float32 CUDA: the kernel of `variant` (default 2_float4)",
    "float16/bfloat16 CUDA: a 16-bit build: `variant16`, else `variant` if its file has a 16-bit path, else "
    "6_beyond_copy (bit for bit F.elu)",
    "anything else (CPU, float64, other devices and dtypes, sparse or nested, a non-finite alpha): PyTorch "
    "(F.elu, aten.elu_backward), with its results and errors",
    "strict=True: a study kernel, or an error that names why none computes the input",
    "backward: the float32 backward kernel; a 16-bit tensor's backward is aten.elu_backward's",
    "under torch.compile: F.elu (Inductor fuses it); with strict=True the op (the kernel, opaque to Inductor); "
    "under a torch.func transform (vmap, grad, jacrev): F.elu",
)


@functools.cache
def has_storage16(variant: str) -> bool:
    """Whether ``variant``'s kernel file asks for the 16-bit binding (reads the file, no build)."""
    return STORAGE16 in binding_features(resolve_variant(variant).read_text())


@torch.compiler.assume_constant_result  # a constant of the strings for Dynamo: it reads a file
def build16(variant: str, variant16: str | None) -> str:
    """The build that computes 16-bit tensors: ``variant16`` if given, else ``variant`` if its file has a
    16-bit path, else DEFAULT_VARIANT16. (Whether that build has the path: ``has_storage16``.)"""
    if variant16 is not None:
        return variant16
    return variant if has_storage16(variant) else DEFAULT_VARIANT16


@torch.compiler.assume_constant_result
def takes16(build: str) -> bool:
    return has_storage16(build)


def as_alpha(alpha) -> float:
    """alpha as a float; a TypeError naming the type for anything that is not a real number."""
    if type(alpha) is float:  # the common case first: this runs on every call
        return alpha
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
        raise TypeError(f"elu: alpha must be a real number (float or int), got {type(alpha).__name__}")
    return float(alpha)


def on_kernel_device(x: torch.Tensor) -> bool:
    # x.is_cuda costs a tenth of x.device.type (which makes a torch.device): this runs on every call
    return x.is_cuda if KERNEL_DEVICE == "cuda" else x.device.type == KERNEL_DEVICE


def kernel_build(x: torch.Tensor, alpha: float, variant: str, variant16: str | None = None) -> str | None:
    """The build whose kernel computes ELU(x) with this alpha, or None where PyTorch computes it.
    (On every eager call: identity tests, the cheapest first.)"""
    dtype = x.dtype
    if dtype is torch.float32:
        build = variant
    elif dtype is torch.bfloat16 or dtype is torch.float16:
        build = build16(variant, variant16)
        if not takes16(build):
            return None
    else:
        return None
    if (x.is_cuda if KERNEL_DEVICE == "cuda" else x.device.type == KERNEL_DEVICE) and x.layout is torch.strided \
            and not x.is_nested and math.isfinite(alpha):
        return build
    return None


def backward_build(grad: torch.Tensor, saved: torch.Tensor, alpha: float, variant: str) -> str | None:
    """The build whose backward kernel computes grad * dELU/dx, or None (aten.elu_backward): float32 only."""
    for t in (grad, saved):
        if not on_kernel_device(t) or t.dtype != torch.float32 or t.layout != torch.strided or t.is_nested:
            return None
    return variant if math.isfinite(alpha) else None


def no_kernel(x: torch.Tensor, alpha: float, variant: str, variant16: str | None = None) -> Exception:
    """The error of a strict call that no study kernel computes, naming why (call only where kernel_build
    gave None): a ValueError for the device, layout or alpha, a TypeError for the dtype."""
    fallback = "; pass strict=False to let PyTorch (F.elu) compute it"
    if not on_kernel_device(x):
        return ValueError(f"elu (strict): no study kernel computes a tensor on {x.device}: the kernels take "
                          f"{KERNEL_DEVICE.upper()} tensors{fallback}")
    if x.layout != torch.strided or x.is_nested:
        kind = "nested" if x.is_nested else str(x.layout)
        return ValueError(f"elu (strict): no study kernel computes a {kind} tensor: the kernels take dense "
                          f"(strided) tensors{fallback}")
    if not math.isfinite(alpha):
        return ValueError(f"elu (strict): alpha must be finite for the kernels, got {alpha}{fallback}")
    if x.dtype in SIXTEEN_BITS:
        build = build16(variant, variant16)
        return TypeError(f"elu (strict): the build {build!r} chosen for {x.dtype} has no 16-bit path (its file "
                         f"lacks '// elu-study: binding = {STORAGE16}'); pass variant16={DEFAULT_VARIANT16!r}, "
                         f"or strict=False to let PyTorch (F.elu) compute it")
    return TypeError(f"elu (strict): no study kernel computes {x.dtype}: the kernels take float32 (variant "
                     f"{variant!r}) and float16/bfloat16 (a {STORAGE16} build, default {DEFAULT_VARIANT16!r})"
                     f"{fallback}")


def route_name(x: torch.Tensor, alpha: float = 1.0, variant: str = DEFAULT_VARIANT,
               variant16: str | None = None) -> str:
    """Who computes ELU(x) in eager mode, in words: the build's name, or "PyTorch (F.elu)"."""
    build = kernel_build(x, float(alpha), str(variant), variant16)
    return "PyTorch (F.elu)" if build is None else build
