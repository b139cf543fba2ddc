"""Drop-ins for ``torch.nn.ELU``: a module that runs a study kernel, and a helper that swaps them in.

>>> model = swap_elu(model, variant="2_float4")   # every nn.ELU, at any depth, now runs the kernel

The module goes through ``elu_study.library``'s custom ops, so gradients, ``torch.compile(fullgraph=True)``
and CUDA graphs work as with ``nn.ELU``; it has no parameters, so state dicts are unchanged.
"""

from __future__ import annotations

import torch
from torch import nn

from elu_study.pytorch.library import DEFAULT_VARIANT, elu


class ELU(nn.Module):
    """``nn.ELU(alpha, inplace)`` by the study's kernel ``variant`` (a step name or a .cu path).

    Its ``extra_repr`` is nn.ELU's, so a printed model reads the same; the kernel is named by
    ``variant`` (an attribute, not part of the repr)."""

    __constants__ = ["alpha", "inplace", "variant"]

    def __init__(self, alpha: float = 1.0, inplace: bool = False, variant: str = DEFAULT_VARIANT) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace
        self.variant = str(variant)

    def forward(self, input: torch.Tensor) -> torch.Tensor:  # noqa: A002 - nn.ELU's name
        return elu(input, self.alpha, self.variant, self.inplace)

    def extra_repr(self) -> str:
        inplace_str = ", inplace=True" if self.inplace else ""
        return f"alpha={self.alpha}{inplace_str}"


def swap_elu(model: nn.Module, variant: str = DEFAULT_VARIANT) -> nn.Module:
    """Replace every ``nn.ELU`` in ``model`` (nested, in containers, or the model itself) by ``ELU``
    with the same alpha and inplace; in place, and returns the model (or the new module if the model
    itself was an nn.ELU)."""
    if type(model) is nn.ELU:
        return ELU(model.alpha, model.inplace, variant)
    for name, child in list(model.named_children()):
        swapped = swap_elu(child, variant)
        if swapped is not child:
            setattr(model, name, swapped)
    return model
