"""Any compiled variant as a first-class PyTorch op: autograd, fake tensors, torch.compile, CUDA graphs.

``compile_variant(...)`` gives a pybind11 module: ``module.elu(x)`` is opaque to autograd (a
``requires_grad`` input gets an output without a gradient) and to Dynamo (``torch.compile(fullgraph=True)``
stops at it). This module registers the kernels with ``torch.library.custom_op`` instead:

- ``torch.ops.elu_study.elu(x, alpha, variant, save_result)``: the forward kernel of ``variant``;
- ``torch.ops.elu_study.elu_backward(grad, x_or_result, alpha, is_result, variant)``: the shared
  backward kernel (``kernels/common/backward.cu``), the op's autograd formula;
- ``torch.ops.elu_study.elu_(x, alpha, variant)``: in place, for ``ELU(inplace=True)`` where no
  gradient is needed.

Each has a fake (meta) implementation, so Dynamo and AOTAutograd trace it without running it, and
none compiles anything at import: a variant is built (``compile_variant``, disk-cached) the first
time an op runs on real tensors.

Why one op with the variant as a string argument, not one op per variant: a variant may be any
``.cu`` path (a user's own file), which would need a generated, sanitized op name per file and a
registration at run time; a string argument is a constant in a traced graph, so Dynamo, AOTAutograd
and CUDA graphs see exactly the same thing as with a dedicated op, the schema stays fixed (one fake,
one autograd formula for all), and the op's name in a profile or a graph is the same for every variant.

``save_result``: what autograd keeps for backward. False (the default, as autograd of ``F.elu``):
the input, and the gradient from it. True (``alpha >= 0`` only, as in-place ``F.elu_``): the output,
and the gradient from it (``is_result``), so that the input may be overwritten afterwards.
"""

from __future__ import annotations

import functools

import torch

from elu_study.core.build import compile_variant

DEFAULT_VARIANT = "2_float4"
NAMESPACE = "elu_study"
# PyTorch's own wording (aten elu_backward) for a result-based backward with a negative alpha.
NEGATIVE_SLOPE_IN_PLACE = (
    "In-place elu backward calculation is triggered with a negative slope which is not supported. "
    "This is caused by calling in-place forward function with a negative slope, please call out-of-place "
    "version instead."
)


@functools.cache
def module_for(variant: str):
    """The compiled module of a variant (built on first use, then cached on disk and here)."""
    return compile_variant(variant)


@torch.library.custom_op(f"{NAMESPACE}::elu", mutates_args=())
def elu_op(x: torch.Tensor, alpha: float, variant: str, save_result: bool) -> torch.Tensor:
    """ELU(x) by ``variant``'s forward kernel; a new contiguous tensor."""
    return module_for(variant).elu(x, alpha)


@elu_op.register_fake
def _elu_fake(x, alpha, variant, save_result):
    # The binding returns a fresh contiguous tensor of x's shape (x.contiguous()'s layout).
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op(f"{NAMESPACE}::elu_backward", mutates_args=())
def elu_backward_op(grad_output: torch.Tensor, x_or_result: torch.Tensor, alpha: float, is_result: bool,
                    variant: str) -> torch.Tensor:
    """grad_output * dELU/dx, by the shared backward kernel of ``variant``'s build (as aten elu_backward)."""
    return module_for(variant).elu_backward(grad_output, x_or_result, alpha, is_result)


@elu_backward_op.register_fake
def _elu_backward_fake(grad_output, x_or_result, alpha, is_result, variant):
    torch._check(grad_output.shape == x_or_result.shape,
                 lambda: f"elu_backward: shapes {tuple(x_or_result.shape)} and {tuple(grad_output.shape)} differ")
    return torch.empty_like(grad_output, memory_format=torch.contiguous_format)


def _setup_context(ctx, inputs, output):
    x, alpha, variant, save_result = inputs
    ctx.alpha, ctx.variant, ctx.is_result = alpha, variant, save_result
    ctx.save_for_backward(output if save_result else x)


def _backward(ctx, grad):
    (saved,) = ctx.saved_tensors
    grad_in = None
    if ctx.needs_input_grad[0]:
        grad_in = elu_backward_op(grad, saved, ctx.alpha, ctx.is_result, ctx.variant)
    return grad_in, None, None, None


elu_op.register_autograd(_backward, setup_context=_setup_context)


@torch.library.custom_op(f"{NAMESPACE}::elu_", mutates_args={"x"})
def elu_inplace_op(x: torch.Tensor, alpha: float, variant: str) -> None:
    """x = ELU(x) in place (no autograd: ``ELU(inplace=True)`` takes it only where no gradient is needed)."""
    module = module_for(variant)
    if x.is_contiguous():
        module.elu(x, alpha, out=x)
    else:  # out= must be contiguous: compute beside, then write back
        x.copy_(module.elu(x, alpha))


@elu_inplace_op.register_fake
def _elu_inplace_fake(x, alpha, variant):
    return None


def elu(x: torch.Tensor, alpha: float = 1.0, variant: str = DEFAULT_VARIANT, inplace: bool = False) -> torch.Tensor:
    """``F.elu(x, alpha, inplace)`` through ``variant``'s kernels, with autograd.

    In place with a gradient needed: the output is computed beside and copied into ``x``, and
    autograd keeps the output (as PyTorch's ``elu_`` does), which needs ``alpha >= 0``."""
    alpha = float(alpha)
    variant = str(variant)
    if not inplace:
        return elu_op(x, alpha, variant, False)
    if torch.is_grad_enabled() and x.requires_grad:
        if alpha < 0:
            raise RuntimeError(NEGATIVE_SLOPE_IN_PLACE)
        return x.copy_(elu_op(x, alpha, variant, True))
    elu_inplace_op(x, alpha, variant)
    return x


def elu_backward(grad_output: torch.Tensor, x_or_result: torch.Tensor, alpha: float = 1.0, is_result: bool = False,
                 variant: str = DEFAULT_VARIANT) -> torch.Tensor:
    """``torch.ops.aten.elu_backward(grad_output, alpha, 1, 1, is_result, x_or_result)`` by the shared kernel."""
    return elu_backward_op(grad_output, x_or_result, float(alpha), bool(is_result), str(variant))


OPS = (elu_op, elu_backward_op, elu_inplace_op)
