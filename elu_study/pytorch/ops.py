"""The kernels as a PyTorch operator. Every build registers in C++ (``kernels/common/binding.cpp``)
``torch.ops.<namespace>.elu``, ``elu_`` and ``elu_backward`` (its kernels, ATen for every other input, autograd); here
is what registers from Python (fake implementations, vmap rules), the drop-in's ``DEFAULTS``, the probe that refuses
a build whose kernel is not ELU (``verdict``), and ``elu``, behind ``elu_study.ELU``."""

import functools
import math
import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.overrides import handle_torch_function, has_torch_function_unary

from elu_study.core.build import binding_features, build_spec, compile_variant, resolve_variant
from elu_study.core.check import ATOL, RTOL
from elu_study.core.entries import ENTRIES

NAMESPACE = "elu_study"  # torch.ops.elu_study: the defaults
SIXTEEN_BITS = (torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class Default:
    """One row of the drop-in's table: the study's entry (core/catalog.toml) it runs for a dtype in one direction."""
    dtype: torch.dtype
    direction: str  # "forward" or "backward"
    measured: str  # the entry


DEFAULTS = (
    Default(torch.float32, "forward", "6_beyond_copy"),
    Default(torch.float32, "backward", "elu_backward"),
    *(Default(d, direction, f"{entry} {str(d).removeprefix('torch.')}")
      for d in SIXTEEN_BITS for direction, entry in (("forward", "7_sixteen_bits"), ("backward", "7_backward"))),
)


def default_builds() -> dict[str, tuple]:
    """The two builds of DEFAULTS as ``build_all`` jobs, {"16-bit": ..., "float32": ...}: the float32 one registers
    NAMESPACE and hands 16-bit tensors to the other's namespace."""
    first = {r.dtype in SIXTEEN_BITS: ENTRIES[r.measured] for r in reversed(DEFAULTS)}  # each group's first row's
    b16, b32 = first[True], first[False]
    delegate = build_spec(b16.variant, b16.flags).op_namespace()
    return {"16-bit": (b16.variant, b16.flags, ()),
            "float32": (b32.variant, b32.flags, (f"-DELU_OP_NAMESPACE={NAMESPACE}", f"-DELU_DELEGATE16={delegate}"))}


def table():
    """DEFAULTS as a DataFrame, for the README and notebook 11."""
    import pandas as pd  # noqa: PLC0415 - only the report needs it

    return pd.DataFrame([{"dtype": str(r.dtype).removeprefix("torch."), "direction": r.direction,
                          "build": ENTRIES[r.measured].variant, "flags": " ".join(ENTRIES[r.measured].flags)
                          or "(its defaults)", "measured as": r.measured} for r in DEFAULTS])


def register_python_side(ns: str) -> None:
    """The fake implementations and vmap rules of namespace ``ns``'s three ops (once per loaded build)."""
    for name, fake, vmap in (("elu", fake_elu, vmap_elu), ("elu_", fake_elu_, vmap_elu_),
                             ("elu_backward", fake_elu_backward, vmap_elu_backward)):
        torch.library.register_fake(f"{ns}::{name}")(fake)
        torch.library.register_vmap(f"{ns}::{name}")(functools.partial(vmap, getattr(getattr(torch.ops, ns), name).default))


_REGISTERED: set[str] = set()  # the namespaces whose Python side is registered
_CHECKED: set = set()  # the builds whose verdict this process has
LOADED: dict = {}  # variant -> its module, once module_for loaded it: one dict lookup per eager call


def loaded(module):
    """A compiled module with its operator's Python side registered (once per namespace), and where a GPU is, its
    float32 kernel found to compute ELU (``verdict``): a ValueError, before any call of it, where it does not."""
    if module.op_namespace not in _REGISTERED:
        register_python_side(module.op_namespace)
        _REGISTERED.add(module.op_namespace)
    if torch.cuda.is_available():
        if module not in _CHECKED and torch.cuda.is_current_stream_capturing():  # the probe reads back its output
            raise RuntimeError(f"{module.spec.source_path}: its build is first used inside a CUDA graph capture, "
                               "where its ELU probe cannot run; call the model once before capturing (the usual "
                               "warm-up), or elu_study.pytorch.ops.module_for() first")
        if why := verdict(module):
            raise ValueError(why)
        _CHECKED.add(module)
    return module


@functools.cache
def module_for(variant: str | os.PathLike | None = None):
    """The compiled module ``elu`` calls for ``variant`` (None: the defaults), built on first use, then kept: from then
    on ``elu`` sends every tensor of it there (call it to have torch.export record a CPU tensor's ELU as the op)."""
    if variant is None:
        builds = default_builds()
        loaded(compile_variant(builds["16-bit"][0], extra_cuda_cflags=builds["16-bit"][1]))  # the delegate first
        v32, f32, cpp = builds["float32"]
        module = loaded(compile_variant(v32, extra_cuda_cflags=f32, extra_cflags=cpp))
    else:
        module = loaded(compile_variant(variant))
    LOADED[variant] = module
    return module


def sixteen_bit_module():
    """The defaults' 16-bit build (what ``torch.ops.elu_study`` hands float16 and bfloat16 tensors to)."""
    module_for(None)
    v16, f16, _ = default_builds()["16-bit"]
    return loaded(compile_variant(v16, extra_cuda_cflags=f16))


@torch.compiler.assume_constant_result  # Dynamo: a constant (it builds or loads a module)
def namespace(variant: str | None) -> str:
    return module_for(variant).op_namespace


@torch.compiler.assume_constant_result  # Dynamo: a constant (it reads the kernel file)
def takes16(variant: str | os.PathLike | None) -> bool:
    """Whether ``variant``'s build computes float16 and bfloat16 (the defaults do: by their 16-bit build)."""
    return variant is None or "storage16" in binding_features(resolve_variant(variant).read_text())


PROBE_ALPHAS = (1.0, -0.7)


def probe() -> torch.Tensor:
    """float32 inputs a kernel must get right to pass for ELU: negative and positive, both zeros, tiny (subnormal
    too) and large (up to float32's largest), and an odd count (a vector kernel's tail)."""
    special = [0.0, -0.0, 1e-45, -1e-45, 1e-30, -1e-30, 1e-7, -1e-7, 1e4, -1e4, -88.0, -104.0, 3e38, -3e38]
    return torch.cat([torch.linspace(-12, 12, 1001, dtype=torch.float32), torch.tensor(special, dtype=torch.float32)])


def mismatch(x: torch.Tensor, y: torch.Tensor, alpha: float) -> str:
    """"" where ``y`` is ELU(x) within the study's tolerance (core.check's ATOL + RTOL x |ELU(x)|, against F.elu in
    float64), every element written; else the worst input, y's value there and F.elu's."""
    want = F.elu(x.double(), alpha)
    excess = ((y.double() - want).abs() - (ATOL + RTOL * want.abs())).nan_to_num(nan=math.inf)
    i = int(excess.argmax())
    if excess[i] <= 0:
        return ""
    return f"at x = {x[i]:.9g} (alpha = {alpha:g}) it gives {y[i]:.9g} where F.elu gives {want[i]:.9g}"


@functools.cache
def verdict(module, device: str = "cuda") -> str:
    """"" where the build's float32 kernel computes ELU on ``probe()`` at each of PROBE_ALPHAS (into a NaN-filled
    output), else why it is refused; once per build, outside any tensor mode (a fake tensor's, a user's)."""
    with torch.utils._python_dispatch._disable_current_modes():
        x = probe()
        for alpha in PROBE_ALPHAS:
            y = module.elu(x.to(device), alpha, out=torch.full_like(x, math.nan, device=device)).cpu()
            if why := mismatch(x, y, alpha):
                return (f"{module.spec.source_path} does not compute ELU: {why}, beyond the study's tolerance "
                        f"(atol {ATOL:g}, rtol {RTOL:g}); elu_study.ELU runs only kernels that compute ELU")
    return ""


def dense(x) -> bool:
    """Dense and non-overlapping: empty_like copies such a tensor's strides (and infers others)."""
    return torch.empty_like(x).stride() == x.stride()


def like(x):
    """The kernels' output layout (binding.cpp): x's strides where x is dense and non-overlapping, else contiguous."""
    return torch.empty_like(x) if dense(x) else torch.empty_like(x, memory_format=torch.contiguous_format)


def fake_elu(x, alpha=1.0):
    return like(x)


def fake_elu_(x, alpha=1.0):
    return None


def fake_elu_backward(grad_output, self_or_result, alpha, is_result):
    torch._check(grad_output.shape == self_or_result.shape,
                 lambda: f"elu_backward: shapes {tuple(self_or_result.shape)} and {tuple(grad_output.shape)} differ")
    kept = dense(grad_output) and self_or_result.stride() == grad_output.stride()
    return torch.empty_like(grad_output, memory_format=torch.preserve_format if kept else torch.contiguous_format)


def vmap_elu(op, info, in_dims, x, alpha=1.0):
    return op(x, alpha), in_dims[0]  # elementwise: the batch dimension stays where it is


def vmap_elu_(op, info, in_dims, x, alpha=1.0):
    op(x, alpha)
    return None, None


def vmap_elu_backward(op, info, in_dims, grad, saved, alpha, is_result):
    """Both tensors batched along dimension 0 (an unbatched one expanded; functorch calls no rule where none is)."""

    def front(t, dim):
        return t.movedim(dim, 0) if dim is not None else t.expand(info.batch_size, *t.shape)

    return op(front(grad, in_dims[0]), front(saved, in_dims[1]), alpha, is_result), 0


def refusal(x: torch.Tensor, alpha: float, variant: str | os.PathLike | None) -> tuple[type, str] | None:
    """Why no study kernel computes ELU(x) at ``alpha``, as (exception type, message), or None: the kernels take
    (binding.cpp's forward_route) strided CUDA float32, 16-bit where the build has a path, finite alpha; no build."""
    if x.device.type != "cuda":
        return ValueError, f"no study kernel computes a tensor on {x.device}: the kernels take CUDA tensors"
    if x.layout != torch.strided or x.is_nested:
        return ValueError, (f"no study kernel computes a {'nested' if x.is_nested else x.layout} tensor: the kernels "
                            "take dense (strided) tensors")
    if not math.isfinite(alpha):
        return ValueError, f"alpha must be finite for the kernels, got {alpha}"
    if x.dtype == torch.float32 or (x.dtype in SIXTEEN_BITS and takes16(variant)):
        return None
    if x.dtype in SIXTEEN_BITS:
        return TypeError, f"the build of {variant} has no 16-bit path for {x.dtype}"
    return TypeError, (f"no study kernel computes {x.dtype}: the kernels take float32, and float16/bfloat16 where "
                       "the build has a 16-bit path")


def elu(input: torch.Tensor, alpha: float = 1.0, inplace: bool = False, *,  # noqa: A002 - F.elu's names
        variant: str | os.PathLike | None = None, strict: bool = False) -> torch.Tensor:
    """``F.elu(input, alpha, inplace)`` by the operator of ``variant``'s build (None: the defaults, ``DEFAULTS``).

    Eager: the operator, through the dispatcher, for a CUDA tensor (the first one builds or loads the build) and
    for any tensor once the build is loaded; before that a tensor on another device is ``F.elu``'s, which is what
    the operator runs there too (ATen), and nothing is built. Under torch.compile: ``F.elu`` (Inductor fuses it),
    or with ``strict=True`` the operator (the kernel, opaque). ``strict=True``, eager or compiled: the ValueError
    or TypeError of ``refusal``, where no study kernel computes ``input``."""
    if has_torch_function_unary(input):
        return handle_torch_function(elu, (input,), input, alpha, inplace, variant=variant, strict=strict)
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"elu: expected a Tensor, got {type(input).__name__}")
    if strict and (why := refusal(input, alpha, variant)):
        raise why[0](f"elu (strict): {why[1]}; pass strict=False to let ATen compute it")
    if torch.compiler.is_dynamo_compiling():  # (export without Dynamo takes the eager route below, with fakes)
        if not strict:
            return F.elu(input, alpha, inplace)
        op = getattr(torch.ops, namespace(variant))
        if inplace:
            op.elu_(input, alpha)
            return input
        return op.elu(input, alpha)
    module = LOADED.get(variant)
    if module is None:
        if not input.is_cuda:
            return F.elu(input, alpha, inplace)
        module = module_for(variant)
    return module.call_elu_(input, alpha) if inplace else module.call_elu(input, alpha)

