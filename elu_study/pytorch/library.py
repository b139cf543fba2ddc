"""Any compiled variant as a first-class PyTorch op: autograd (twice), every dtype and device, torch.compile
with fusion, CUDA graphs, and a host cost per call at ``F.elu``'s.

``compile_variant(...)`` gives a pybind11 module: ``module.elu(x)`` is opaque to autograd (a
``requires_grad`` input gets an output without a gradient) and to Dynamo (``torch.compile(fullgraph=True)``
stops at it). This module registers the kernels with ``torch.library.custom_op`` instead:

- ``torch.ops.elu_study.elu(x, alpha, variant, save_result)``: the forward kernel of ``variant``;
- ``torch.ops.elu_study.elu_backward(grad, x_or_result, alpha, is_result, variant)``: the shared
  backward kernel (``kernels/common/backward.cu``), the op's autograd formula; it has its own autograd
  formula (``F.elu``'s second derivatives: aten's ``elu_double_backward``), so double backward works;
- ``torch.ops.elu_study.elu_``: in place, for ``ELU(inplace=True)`` where no gradient is needed.

Each has a fake (meta) implementation, so Dynamo and AOTAutograd trace it without running it, and
none compiles anything at import: a variant is built (``compile_variant``, disk-cached) the first
time a kernel runs on real tensors. Where no study kernel computes a tensor (``routing``'s rule: CPU,
float64, ...), the ops compute it with PyTorch, so the autograd formulas hold for every dtype
(gradgradcheck runs them in float64).

``elu(x, alpha, variant, inplace, *, strict=False, variant16=None)``, what ``elu_study.ELU`` calls, takes
one of four routes:

- PyTorch (``F.elu``) for a tensor no study kernel computes (``routing.kernel_build`` is None), or an
  error with ``strict=True`` (``routing.no_kernel``);
- under ``torch.compile`` (``torch.compiler.is_compiling()``): ``F.elu``, which Inductor fuses with its
  neighbours; with ``strict=True`` the op instead, opaque to Inductor (the kernel runs, no fusion); and
  ``F.elu`` under a ``torch.func`` transform (vmap, grad, jacrev: F.elu has their rules, the op has not);
- eager, on a plain tensor with no tracing, fake tensor, mode or functorch transform active: the
  binding directly (no gradient needed) or an ``autograd.Function`` around it (``KernelELU``): no
  dispatcher, no custom_op wrapper (the host cost that notebook 11 measures);
- anything else (a tensor subclass, a dispatch or function mode, functorch): the op.

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
import torch.nn.functional as F

from elu_study.core.build import compile_variant
from elu_study.pytorch import routing
from elu_study.pytorch.routing import DEFAULT_VARIANT, DEFAULT_VARIANT16, as_alpha, backward_build, kernel_build

__all__ = ["DEFAULT_VARIANT", "DEFAULT_VARIANT16", "NAMESPACE", "OPS", "KernelELU", "elu", "elu_backward",
           "module_for"]

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


# ---------------------------------------------------------------- what the ops compute


def forward_impl(x: torch.Tensor, alpha: float, variant: str) -> torch.Tensor:
    """ELU(x): ``variant``'s kernel (its 16-bit build for 16-bit x) where one computes x, else F.elu;
    a new contiguous tensor either way."""
    build = kernel_build(x, alpha, variant)
    if build is None:
        return F.elu(x, alpha).contiguous()
    return module_for(build).elu(x, alpha)


def backward_impl(grad: torch.Tensor, saved: torch.Tensor, alpha: float, is_result: bool, variant: str):
    """grad * dELU/dx: the shared backward kernel of ``variant``'s build for float32, else aten.elu_backward
    (the shapes must be equal on either route: aten's would broadcast)."""
    if grad.shape != saved.shape:
        raise ValueError(f"elu_backward: {'result' if is_result else 'x'} has shape {tuple(saved.shape)} but "
                         f"grad_output has shape {tuple(grad.shape)}")
    build = backward_build(grad, saved, alpha, variant)
    if build is None:
        return torch.ops.aten.elu_backward(grad, alpha, 1, 1, is_result, saved).contiguous()
    return module_for(build).elu_backward(grad, saved, alpha, is_result)


# ---------------------------------------------------------------- the ops


@torch.library.custom_op(f"{NAMESPACE}::elu", mutates_args=())
def elu_op(x: torch.Tensor, alpha: float, variant: str, save_result: bool) -> torch.Tensor:
    """ELU(x) by ``variant``'s forward kernel (PyTorch where no kernel computes x); a new contiguous tensor."""
    return forward_impl(x, alpha, variant)


@elu_op.register_fake
def _elu_fake(x, alpha, variant, save_result):
    # The binding returns a fresh contiguous tensor of x's shape (x.contiguous()'s layout); so does PyTorch's route.
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op(f"{NAMESPACE}::elu_backward", mutates_args=())
def elu_backward_op(grad_output: torch.Tensor, x_or_result: torch.Tensor, alpha: float, is_result: bool,
                    variant: str) -> torch.Tensor:
    """grad_output * dELU/dx, by the shared backward kernel of ``variant``'s build (as aten elu_backward)."""
    return backward_impl(grad_output, x_or_result, alpha, is_result, variant)


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


def double_backward(gg, grad_output, saved, alpha: float, is_result: bool, variant: str, needs: tuple):
    """The gradients of elu_backward's output (``gg`` flowing back) with respect to grad_output and
    x_or_result, as PyTorch writes them (aten elu_double_backward, scale = input_scale = 1):

    - d/d grad_output: elu_backward itself, ``elu_backward(gg, saved)``;
    - d/d x (x <= 0: d/dx [g * alpha * exp(x)] = g * alpha * exp(x)): ``elu_backward(gg * g, x) * (x < 0)``;
    - d/d y (from the result y = alpha * (exp(x) - 1): d/dy [g * (y + alpha)] = g): ``gg * g * (y < 0)``.

    The masks are ``< 0``, PyTorch's, multiplied (not selected), so x = 0 gives 0 and NaN stays NaN as there."""
    d_grad = elu_backward_op(gg, saved, alpha, is_result, variant) if needs[0] else None
    d_saved = None
    if needs[1]:
        mask = (saved < 0).to(gg.dtype)
        d_saved = gg * grad_output * mask if is_result else elu_backward_op(gg * grad_output, saved, alpha, False,
                                                                               variant) * mask
    return d_grad, d_saved


def _backward_setup_context(ctx, inputs, output):
    grad_output, saved, alpha, is_result, variant = inputs
    ctx.alpha, ctx.is_result, ctx.variant = alpha, is_result, variant
    ctx.save_for_backward(grad_output, saved)


def _backward_backward(ctx, gg):
    grad_output, saved = ctx.saved_tensors
    d_grad, d_saved = double_backward(gg, grad_output, saved, ctx.alpha, ctx.is_result, ctx.variant,
                                      ctx.needs_input_grad[:2])
    return d_grad, d_saved, None, None, None


elu_backward_op.register_autograd(_backward_backward, setup_context=_backward_setup_context)


@torch.library.custom_op(f"{NAMESPACE}::elu_", mutates_args={"x"})
def elu_inplace_op(x: torch.Tensor, alpha: float, variant: str) -> None:
    """x = ELU(x) in place (no autograd: ``ELU(inplace=True)`` takes it only where no gradient is needed)."""
    build = kernel_build(x, alpha, variant)
    if build is None:
        F.elu(x, alpha, inplace=True)
    elif x.is_contiguous():
        module_for(build).elu(x, alpha, out=x)
    else:  # out= must be contiguous: compute beside, then write back
        x.copy_(module_for(build).elu(x, alpha))


@elu_inplace_op.register_fake
def _elu_inplace_fake(x, alpha, variant):
    return None


OPS = (elu_op, elu_backward_op, elu_inplace_op)


# ---------------------------------------------------------------- eager without the dispatcher


class KernelELU(torch.autograd.Function):
    """ELU through the binding with autograd, for eager mode: an ``autograd.Function`` called directly
    costs a fraction of a custom op's dispatch. Its backward is the kernel; under ``create_graph`` it is
    the ``elu_backward`` op, whose own autograd formula gives the second derivatives."""

    @staticmethod
    def forward(ctx, x, alpha, build, save_result):  # noqa: D102 - autograd.Function's protocol
        y = module_for(build).elu(x, alpha)
        ctx.alpha, ctx.build, ctx.is_result = alpha, build, save_result
        ctx.save_for_backward(y if save_result else x)
        return y

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        (saved,) = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True: differentiable, through the op
            return elu_backward_op(grad, saved, ctx.alpha, ctx.is_result, ctx.build), None, None, None
        return backward_impl(grad, saved, ctx.alpha, ctx.is_result, ctx.build), None, None, None


def plain(x: torch.Tensor) -> bool:
    """A plain tensor (no fake or subclass), with no torch function or dispatch mode, no functorch
    transform and no torch.jit.trace active."""
    return (type(x) is torch.Tensor and not torch._C._are_functorch_transforms_active()
            and torch._C._len_torch_function_stack() == 0 and torch._C._len_torch_dispatch_stack() == 0
            and torch._C._get_tracing_state() is None)


def eager_only(x: torch.Tensor) -> bool:
    """Whether plain eager PyTorch is all that sees this call: not compiling, and ``plain(x)``."""
    return not torch.compiler.is_compiling() and plain(x)


def needs_grad(x: torch.Tensor) -> bool:
    return x.requires_grad and torch.is_grad_enabled()


def direct(x: torch.Tensor, alpha: float, build: str, inplace: bool) -> torch.Tensor:
    """The eager route: the binding, with KernelELU where a gradient is needed."""
    if not inplace:
        return KernelELU.apply(x, alpha, build, False) if needs_grad(x) else module_for(build).elu(x, alpha)
    if needs_grad(x):
        if alpha < 0:
            raise RuntimeError(NEGATIVE_SLOPE_IN_PLACE)
        return x.copy_(KernelELU.apply(x, alpha, build, True))
    if x.is_contiguous():
        module_for(build).elu(x, alpha, out=x)
        torch.autograd.graph.increment_version(x)  # written behind autograd's back: say so, as x.copy_ would
    else:
        x.copy_(module_for(build).elu(x, alpha))
    return x


def through_op(x: torch.Tensor, alpha: float, build: str, inplace: bool) -> torch.Tensor:
    """The op route (traced, fake, modes, functorch, or strict under torch.compile)."""
    if not inplace:
        return elu_op(x, alpha, build, False)
    if needs_grad(x):
        if alpha < 0:
            raise RuntimeError(NEGATIVE_SLOPE_IN_PLACE)
        return x.copy_(elu_op(x, alpha, build, True))
    elu_inplace_op(x, alpha, build)
    return x


def elu(x: torch.Tensor, alpha: float = 1.0, variant: str = DEFAULT_VARIANT, inplace: bool = False, *,
        strict: bool = False, variant16: str | None = None) -> torch.Tensor:
    """``F.elu(x, alpha, inplace)``, by ``variant``'s kernel where one computes x (the module's docstring
    has the routes, ``routing`` the rule), with autograd to any order.

    ``variant16``: the build for float16/bfloat16 (default: ``variant`` if it has a 16-bit path, else
    step 6). ``strict``: a study kernel computes it, also under torch.compile (then opaque: no fusion),
    or an error names why none can. In place with a gradient needed: the output is computed beside and
    copied into ``x``, and autograd keeps the output (as PyTorch's ``elu_`` does), which needs ``alpha >= 0``."""
    compiling = torch.compiler.is_compiling()
    if not strict and (compiling or torch._C._are_functorch_transforms_active()):
        return F.elu(x, alpha, inplace)  # the fusing route (Inductor sees aten.elu); torch.func's own rules
    if type(alpha) is not float:  # (the checks of every eager call: the common case costs one test each)
        alpha = as_alpha(alpha)
    if type(variant) is not str:
        variant = str(variant)
    build = kernel_build(x, alpha, variant, variant16)
    if build is None:
        if strict:
            raise routing.no_kernel(x, alpha, variant, variant16)
        return F.elu(x, alpha, inplace)
    if not compiling and plain(x):
        return direct(x, alpha, build, inplace)
    return through_op(x, alpha, build, inplace)


def elu_backward(grad_output: torch.Tensor, x_or_result: torch.Tensor, alpha: float = 1.0, is_result: bool = False,
                 variant: str = DEFAULT_VARIANT) -> torch.Tensor:
    """``torch.ops.aten.elu_backward(grad_output, alpha, 1, 1, is_result, x_or_result)`` by the shared kernel
    (aten's where no kernel computes it); differentiable (through the op) where a gradient is needed."""
    alpha, is_result, variant = as_alpha(alpha), bool(is_result), str(variant)
    eager = eager_only(grad_output) and eager_only(x_or_result)
    if eager and not (needs_grad(grad_output) or needs_grad(x_or_result)):
        return backward_impl(grad_output, x_or_result, alpha, is_result, variant)
    return elu_backward_op(grad_output, x_or_result, alpha, is_result, variant)
