"""KernelBench-style pair: the reference ``Model`` (F.elu) and ``ModelNew``, the same model through the
study's operator (elu_study.pytorch.ops: autograd, torch.compile and CUDA graphs included).

Same constructor and forward signature; ``get_inputs`` and ``get_init_inputs`` as KernelBench has them.

    python examples/kernelbench_elu.py      # on a GPU: checks ModelNew against Model, forward and backward
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from elu_study.pytorch.ops import elu as study_elu

batch_size = 4096
dim = 393216


class Model(nn.Module):
    """Applies ELU: F.elu(x, alpha)."""

    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.elu(x, alpha=self.alpha)


class ModelNew(nn.Module):
    """The same, by the study's best builds (``ops.DEFAULTS``; ``variant`` picks a step or a .cu file instead)."""

    def __init__(self, alpha: float = 1.0, variant: str | None = None):
        super().__init__()
        self.alpha = alpha
        self.variant = variant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return study_elu(x, self.alpha, variant=self.variant)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [1.0]  # alpha


if __name__ == "__main__":
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    x = (torch.randn(64, 1027, device="cuda") * 4).requires_grad_()
    ref, new = Model(*get_init_inputs()), ModelNew(*get_init_inputs())
    y_ref, y_new = ref(x), new(x)
    torch.testing.assert_close(y_new, y_ref)
    g = torch.randn_like(y_ref)
    (gx_ref,) = torch.autograd.grad(y_ref, x, g)
    (gx_new,) = torch.autograd.grad(y_new, x, g)
    torch.testing.assert_close(gx_new, gx_ref)
    print("ModelNew matches Model, forward and backward")
