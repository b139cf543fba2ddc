"""The ops a kernel module registers, each with the PyTorch reference it must match, for the fuzz tests and the
sanitizer: ``module.<name>(*inputs, alpha, out=out)``, CUDA tensors of one shape (``elu_backward`` with its default
``is_result=False``). tests/test_fuzz_harness.py fails while a build registers an op this table lacks."""

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from elu_study.core.build import binding_features


@dataclass(frozen=True)
class OpSpec:
    name: str  # the module attribute
    inputs: tuple[str, ...]  # its tensor arguments, in call order
    reference: Callable  # (*inputs, alpha) -> what the op must return, computed by PyTorch
    in_place: int | None = 0  # the input that out= may be (exactly), or None if none may
    messages: tuple[str, ...] | None = None  # each input's name in the binding's messages (default: ``inputs``)

    @property
    def message_names(self) -> tuple[str, ...]:
        return self.messages or self.inputs

    def expected(self, inputs, alpha: float):
        return self.reference(*inputs, alpha)


def _elu_backward_reference(grad_output, x, alpha: float):
    """aten elu_backward, a NaN x giving grad on the CPU as on CUDA (the vectorized CPU path gives NaN)."""
    result = torch.ops.aten.elu_backward(grad_output, alpha, 1, 1, False, x)
    return torch.where(torch.isnan(x), grad_output, result)


OPS: dict[str, OpSpec] = {
    "elu": OpSpec("elu", ("x",), F.elu, in_place=0, messages=("input",)),
    "elu_backward": OpSpec("elu_backward", ("grad_output", "x"), _elu_backward_reference, in_place=0),
}
# A module's public names that are no kernel ops: its BuildSpec, the operator's entry points and namespace, launch shapes
NOT_OPS = frozenset({"spec", "op_namespace", "call_elu", "call_elu_", "set_launch_shape", "launch_shapes"})
SIXTEEN_BIT_FEATURE = {"elu": "storage16", "elu_backward": "backward16"}  # core.build.BINDING_FEATURES for 16 bits


def registered_ops(module) -> list[str]:
    """The public callables of a compiled module: the ops its binding registers."""
    return sorted(n for n in dir(module) if not n.startswith("_") and n not in NOT_OPS and callable(getattr(module, n)))


def ops_of(module) -> list[OpSpec]:
    """The OpSpecs of the ops a module has (an op it lacks, e.g. a backward not yet written, is left out)."""
    return [spec for name, spec in OPS.items() if hasattr(module, name)]


def accepted_dtypes(module, op: OpSpec) -> tuple[torch.dtype, ...]:
    """float32, and float16 and bfloat16 where the build asks for the op's SIXTEEN_BIT_FEATURE (all inputs alike)."""
    spec = getattr(module, "spec", None)
    if spec is not None and SIXTEEN_BIT_FEATURE.get(op.name) in binding_features(spec.source_path.read_text()):
        return (torch.float32, torch.float16, torch.bfloat16)
    return (torch.float32,)
