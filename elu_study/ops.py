"""The ops a kernel module registers, each with the reference it must match.

``kernels/common/binding.cpp`` gives every build the same Python face. The fuzz tests
(``tests/test_fuzz.py``) and the sanitizer runs (``elu_study.sanitize``) exercise every op
listed here that a build has, so a new op (a backward pass, say) is covered by adding one
``OpSpec``; ``tests/test_fuzz_harness.py`` fails while a build registers an op this table
does not know.

An op is called as ``module.<name>(*inputs, alpha, out=out)``: its tensor inputs (float32,
CUDA, all of one shape), a runtime ``alpha``, and an optional contiguous ``out``. A backward
pass would be registered as, for example::

    "elu_backward": OpSpec("elu_backward", ("grad_output", "x"),
                           lambda g, x, alpha: torch.ops.aten.elu_backward(g, alpha, 1, 1, False, x),
                           in_place=0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class OpSpec:
    name: str  # the module attribute
    inputs: tuple[str, ...]  # its tensor arguments, in call order
    reference: Callable  # (*inputs, alpha) -> what the op must return, computed by PyTorch
    in_place: int | None = 0  # the input that out= may be (exactly), or None if none may

    def expected(self, inputs, alpha: float):
        return self.reference(*inputs, alpha)


def _elu_reference(x, alpha: float):
    import torch.nn.functional as F

    return F.elu(x, alpha)


OPS: dict[str, OpSpec] = {
    "elu": OpSpec("elu", ("x",), _elu_reference, in_place=0),
}
# Public names a module may have that are not kernel ops (the build's BuildSpec, set by compile_variant).
NOT_OPS = frozenset({"spec"})


def registered_ops(module) -> list[str]:
    """The public callables of a compiled module: the ops its binding registers."""
    return sorted(
        name for name in dir(module)
        if not name.startswith("_") and name not in NOT_OPS and callable(getattr(module, name))
    )


def ops_of(module) -> list[OpSpec]:
    """The OpSpecs of the ops a module has (an op it lacks, e.g. a backward not yet written, is left out)."""
    return [spec for name, spec in OPS.items() if hasattr(module, name)]
