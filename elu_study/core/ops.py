"""The ops a kernel module registers, each with the reference it must match.

``kernels/common/binding.cpp`` gives every build the same Python face. The fuzz tests
(``tests/test_fuzz.py``) and the sanitizer runs (``elu_study.jobs.sanitize``) exercise every op
listed here that a build has, so a new op (a backward pass, say) is covered by adding one
``OpSpec``; ``tests/test_fuzz_harness.py`` fails while a build registers an op this table
does not know.

An op is called as ``module.<name>(*inputs, alpha, out=out)``: its tensor inputs (float32,
CUDA, all of one shape), a runtime ``alpha``, and an optional contiguous ``out``. The backward
pass (``kernels/common/backward.cu``, in every build) is ``module.elu_backward(grad_output, x,
alpha, is_result=False, out=None)``; its fuzzed and sanitized form is the default ``is_result=False``
(``is_result=True`` is tested against PyTorch in tests/test_library.py).

``messages`` names each input as the binding's error messages do (``elu`` says "input").
"""

from __future__ import annotations

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


def _elu_reference(x, alpha: float):
    return F.elu(x, alpha)


def _elu_backward_reference(grad_output, x, alpha: float):
    """aten elu_backward. Its CUDA kernel (and its scalar CPU path) computes ``x <= 0 ? ... : grad``, so a
    NaN x gives grad; its vectorized CPU path gives NaN there. The where() makes the CPU agree with CUDA."""
    result = torch.ops.aten.elu_backward(grad_output, alpha, 1, 1, False, x)
    return torch.where(torch.isnan(x), grad_output, result)


OPS: dict[str, OpSpec] = {
    "elu": OpSpec("elu", ("x",), _elu_reference, in_place=0, messages=("input",)),
    "elu_backward": OpSpec("elu_backward", ("grad_output", "x"), _elu_backward_reference, in_place=0),
}
# Public names a module may have that are not kernel ops: the build's BuildSpec (set by compile_variant), the
# operator's entry points and namespace (binding.cpp: the dispatcher's, tested in tests/test_ops.py), and the
# launch-shape controls of kernels/sweeps/launch_shapes.cu (binding = launch-shape).
NOT_OPS = frozenset({"spec", "op_namespace", "call_elu", "call_elu_", "kernel_refusal", "set_launch_shape",
                     "launch_shapes"})


def registered_ops(module) -> list[str]:
    """The public callables of a compiled module: the ops its binding registers."""
    return sorted(
        name for name in dir(module)
        if not name.startswith("_") and name not in NOT_OPS and callable(getattr(module, name))
    )


def ops_of(module) -> list[OpSpec]:
    """The OpSpecs of the ops a module has (an op it lacks, e.g. a backward not yet written, is left out)."""
    return [spec for name, spec in OPS.items() if hasattr(module, name)]


# The binding feature that lets an op take float16 and bfloat16 (see core.build.BINDING_FEATURES).
SIXTEEN_BIT_FEATURE = {"elu": "storage16", "elu_backward": "backward16"}


def accepted_dtypes(module, op: OpSpec) -> tuple[torch.dtype, ...]:
    """The dtypes an op of a build takes: float32, and float16 and bfloat16 too for ``elu`` of a file with
    ``// elu-study: binding = storage16`` (steps 6 and 7) and for ``elu_backward`` of one with ``backward16``
    (step 7); every other tensor of the call must then have the first input's dtype. Read from the build's
    spec (set by compile_variant); a module without one is taken as float32 only."""
    spec = getattr(module, "spec", None)
    if spec is not None and SIXTEEN_BIT_FEATURE.get(op.name) in binding_features(spec.cuda_source()):
        return (torch.float32, torch.float16, torch.bfloat16)
    return (torch.float32,)
