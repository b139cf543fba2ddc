"""Drop-ins for ``torch.nn.ELU``: ``ELU`` runs the study's operator (``pytorch.ops.elu``, in PyTorch's dispatcher), with
no parameters, so state dicts are unchanged; ``swap_elu(model)`` puts it in place of every nn.ELU of a model."""

import os

import torch
from torch import nn
from torch.overrides import has_torch_function_unary

from elu_study.core.build import resolve_variant
from elu_study.pytorch.ops import LOADED, elu


class ELU(nn.Module):
    """``nn.ELU(alpha, inplace)`` by the study's operator: the defaults (``variant=None``), or the build of a
    step name or .cu path. ``strict=True``: a study kernel computes every call, or an error (eager and compiled
    alike) names why none can.

    What differs from nn.ELU: a CUDA float32 tensor's ELU is the build's kernel's, within the build's worst ulp
    error of F.elu (the default's, over every negative float32, is the model record's accuracy check), not F.elu's
    bits. Every other tensor gets F.elu's bits: the defaults' float16 and bfloat16 kernels are bit for bit, and ATen
    computes float64 and every tensor off CUDA (once the build is loaded, a non-dense one from a contiguous copy).
    Where float32 must be F.elu's bits, keep nn.ELU there: no option of this module gives them on CUDA. The first
    CUDA tensor builds the variant (nvcc, or the disk cache); a model that never sees one builds nothing. Where a
    GPU is, a build whose kernel does not compute ELU on a probe is refused (ValueError) before it runs.

    Its ``extra_repr`` is nn.ELU's, so a printed model reads the same. An unknown variant is a ValueError here;
    nothing is built until a kernel runs. ``torch.jit.script`` refuses it (NotImplementedError: TorchScript cannot run
    its Python); torch.compile and torch.export take it."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False, variant: str | os.PathLike | None = None, *,
                 strict: bool = False) -> None:
        super().__init__()
        if variant is not None:
            resolve_variant(variant)
        self.alpha = alpha
        self.inplace = inplace
        self.variant = None if variant is None else str(variant)
        self.strict = bool(strict)

    def forward(self, input: torch.Tensor) -> torch.Tensor:  # noqa: A002 - nn.ELU's name
        # Eager, plain and not strict, the build loaded: straight to the operator's entry point (ops.elu's own eager
        # route, one Python call fewer: nn.ELU spends the same on F.elu's). Everything else: ops.elu.
        module = None if self.strict or torch.compiler.is_dynamo_compiling() else LOADED.get(self.variant)
        if module is None or has_torch_function_unary(input):
            return elu(input, self.alpha, self.inplace, variant=self.variant, strict=self.strict)
        return module.call_elu_(input, self.alpha) if self.inplace else module.call_elu(input, self.alpha)

    def __prepare_scriptable__(self):  # torch.jit.script(model) calls it first
        raise NotImplementedError("torch.jit.script(ELU()): TorchScript does not run the drop-in's Python; use "
                                  "torch.compile or torch.export, which take it")

    def extra_repr(self) -> str:
        inplace_str = ", inplace=True" if self.inplace else ""
        return f"alpha={self.alpha}{inplace_str}"


def swap_elu(model: nn.Module, variant: str | os.PathLike | None = None, *, strict: bool = False) -> nn.Module:
    """Replace every ``nn.ELU`` in ``model`` (nested, in containers, or the model itself) by ``ELU`` with the same
    alpha and inplace; in place, and returns the model (or the new module if the model itself was an nn.ELU).
    Nothing is built here. ``ELU`` says what differs (CUDA float32 within the kernel's worst ulp, not nn.ELU's bits):
    leave a model unswapped where it must reproduce nn.ELU's bits."""
    if type(model) is nn.ELU:
        return ELU(model.alpha, model.inplace, variant, strict=strict)
    for name, child in list(model.named_children()):
        swapped = swap_elu(child, variant, strict=strict)
        if swapped is not child:
            setattr(model, name, swapped)
    return model
