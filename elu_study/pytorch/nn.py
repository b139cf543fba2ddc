"""Drop-ins for ``torch.nn.ELU``: a module that runs a study kernel, and a helper that swaps them in.

>>> model = swap_elu(model, variant="2_float4")   # every nn.ELU, at any depth, now runs the kernel

The module goes through ``elu_study.pytorch.library.elu``, so it goes wherever nn.ELU goes:

- float32 CUDA tensors run ``variant``'s kernel, float16/bfloat16 CUDA tensors a 16-bit build (``variant16``,
  default: ``variant`` if its file has a 16-bit path, else step 6, bit for bit ``F.elu``), and anything
  no study kernel computes (CPU, float64, other devices and dtypes) runs ``F.elu`` with its results;
  ``torch.autocast`` regions need no change (ELU runs in its input's dtype, as ``F.elu`` does);
- gradients to any order (double backward: ``F.elu``'s second derivatives), CUDA graphs;
- under ``torch.compile`` it is ``F.elu``, which Inductor fuses with its neighbours (eager runs the kernel),
  and under a ``torch.func`` transform (vmap, grad, jacrev) too;
- ``strict=True``: a study kernel or an error naming why none computes the input, also under torch.compile
  (then the op, opaque to Inductor: no fusion).

It has no parameters, so state dicts are unchanged.
"""

from __future__ import annotations

import torch
from torch import nn

from elu_study.core.build import resolve_variant
from elu_study.pytorch.library import DEFAULT_VARIANT, elu


class ELU(nn.Module):
    """``nn.ELU(alpha, inplace)`` by the study's kernel ``variant`` (a step name or a .cu path).

    Its ``extra_repr`` is nn.ELU's, so a printed model reads the same; the kernel is named by
    ``variant`` (and ``variant16``, ``strict``: attributes, not part of the repr). The variants are
    checked here, once (a ValueError names an unknown one; nothing is built until a kernel runs)."""

    __constants__ = ["alpha", "inplace", "variant", "variant16", "strict"]

    def __init__(self, alpha: float = 1.0, inplace: bool = False, variant: str = DEFAULT_VARIANT, *,
                 strict: bool = False, variant16: str | None = None) -> None:
        super().__init__()
        for name in (variant, variant16):
            if name is not None:
                resolve_variant(name)
        self.alpha = alpha
        self.inplace = inplace
        self.variant = str(variant)
        self.variant16 = None if variant16 is None else str(variant16)
        self.strict = bool(strict)

    def forward(self, input: torch.Tensor) -> torch.Tensor:  # noqa: A002 - nn.ELU's name
        return elu(input, self.alpha, self.variant, self.inplace, strict=self.strict, variant16=self.variant16)

    def extra_repr(self) -> str:
        inplace_str = ", inplace=True" if self.inplace else ""
        return f"alpha={self.alpha}{inplace_str}"


def swap_elu(model: nn.Module, variant: str = DEFAULT_VARIANT, *, strict: bool = False,
             variant16: str | None = None) -> nn.Module:
    """Replace every ``nn.ELU`` in ``model`` (nested, in containers, or the model itself) by ``ELU``
    with the same alpha and inplace; in place, and returns the model (or the new module if the model
    itself was an nn.ELU)."""
    if type(model) is nn.ELU:
        return ELU(model.alpha, model.inplace, variant, strict=strict, variant16=variant16)
    for name, child in list(model.named_children()):
        swapped = swap_elu(child, variant, strict=strict, variant16=variant16)
        if swapped is not child:
            setattr(model, name, swapped)
    return model
